//! The views of `loopscope probe`: the text summary, the recompile-baseline table and the SVG
//! plots of its curves with the knees marked.

use std::fmt::Write;

use loopscope_machine::Machine;
use loopscope_probe::{BaselineReport, ClockSource, ProbeReport};
use plotters::prelude::*;

use crate::machine::render_measured;
use crate::{Align, PlotError, Table, format_bytes};

/// The text summary of a probe run: clock, the knees of every curve, then the measured
/// section as the machine file will hold it.
pub fn render_probe(report: &ProbeReport, machine: &Machine) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "machine   {}", machine.model);
    let clock = &report.core_clock;
    let how = match clock.source {
        ClockSource::Measured => "measured".to_owned(),
        ClockSource::Nominal => {
            "nominal (the measured chains failed their check, see notes)".to_owned()
        }
        ClockSource::LowerChain => "from the slower chain, uncertain (see notes)".to_owned(),
    };
    let _ = writeln!(out, "clock     core {:.3} GHz {how}", clock.hz / 1e9);
    let _ = writeln!(
        out,
        "pinned    {}",
        report
            .pinned_cpu
            .map_or("no".into(), |c| format!("CPU {c}"))
    );
    out.push('\n');
    let mut knees = numbers_table(&[
        "curve",
        "knee at",
        "rise ends",
        "before",
        "after",
        "ratio",
        "confidence",
    ]);
    for curve in &report.curves {
        if curve.knees.is_empty() {
            knees.row([curve.name.as_str(), "(none)"]);
        }
        for k in &curve.knees {
            knees.row([
                curve.name.clone(),
                format_bytes(k.size_bytes),
                format_bytes(k.end_bytes),
                format!("{:.3}", k.before),
                format!("{:.3}", k.after),
                format!("{:.2}x", k.ratio),
                format!("{:.2}", k.confidence),
            ]);
        }
    }
    out.push_str(&knees.render());
    let units: Vec<String> = report
        .curves
        .iter()
        .map(|c| format!("{} in {}", c.name, c.unit))
        .collect();
    let _ = writeln!(out, "(levels: {})", units.join(", "));
    if let Some(ns) = report.measured.memory_latency_ns {
        let _ = writeln!(out, "memory latency {ns:.1} ns");
    }
    if let Some(ns) = report.measured.add_latency_ns {
        let _ = writeln!(
            out,
            "add latency {ns:.3} ns (dependent double-precision additions)"
        );
    }
    out.push_str(&render_measured(&report.measured));
    out
}

/// A table whose first column is a name and whose other columns are numbers.
fn numbers_table(header: &[&str]) -> Table {
    (1..header.len()).fold(Table::new(header.iter().copied()), |t, c| {
        t.align(c, Align::Right)
    })
}

/// The paper's Tables 3 and 4 for this machine: phase times of both methods and the two
/// speed-ups.
pub fn render_baseline(report: &BaselineReport) -> String {
    let mut table = numbers_table(&[
        "method",
        "points",
        "init",
        "size change",
        "flush",
        "exec",
        "process",
        "total",
    ]);
    let ms = |s: f64| format!("{:.2} ms", s * 1e3);
    for (name, p) in [
        ("in-place rewrite", &report.dynamic),
        ("recompile (cc)", &report.recompile),
    ] {
        table.row([
            name.to_owned(),
            p.points.len().to_string(),
            ms(p.init_s),
            ms(p.change_s),
            ms(p.flush_s),
            ms(p.exec_s),
            ms(p.process_s),
            ms(p.total_s),
        ]);
    }
    let mut out = table.render();
    let last = report.dynamic.points.last().map_or(0, |p| p.0);
    let _ = writeln!(
        out,
        "\nsweep     {} to {} in {}-byte steps{}",
        format_bytes(report.step_bytes),
        format_bytes(last),
        report.step_bytes,
        if report.partial {
            " (PARTIAL: interrupted)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "speed-up  total {:.1}x (paper: 192.0, 138.1, 91.2)",
        report.speedup_total
    );
    let _ = writeln!(
        out,
        "speed-up  size change {:.1}x (paper: 73.7, 97.8, 107.1)",
        report.speedup_size_change
    );
    out
}

/// One series of a plot: its name and (x, y) points.
type Series = (String, Vec<(f64, f64)>);

/// The SVG plots of a probe run, as (file name, SVG text): latency against footprint, code
/// time against code size (one plot per code kind) and bandwidth against working set.
pub fn probe_plots(
    report: &ProbeReport,
    machine: &Machine,
) -> Result<Vec<(String, String)>, PlotError> {
    let mut plots = Vec::new();
    for curve in &report.curves {
        let series = vec![
            (
                "minimum".to_owned(),
                curve
                    .points
                    .iter()
                    .map(|p| (p.size_bytes as f64, p.value))
                    .collect(),
            ),
            (
                "median".to_owned(),
                curve
                    .points
                    .iter()
                    .map(|p| (p.size_bytes as f64, p.median))
                    .collect(),
            ),
        ];
        let marks: Vec<(f64, String)> = curve
            .knees
            .iter()
            .map(|k| {
                (
                    k.size_bytes as f64,
                    format!("knee {}", format_bytes(k.size_bytes)),
                )
            })
            .collect();
        let data_curve = curve.name.starts_with("pointer_chase")
            || curve.name == loopscope_probe::STREAMING_CURVE;
        // The page walk's sizes are spans of pages, not footprints: no cache size marks it.
        let advertised: Vec<(f64, String)> = machine
            .caches
            .iter()
            .filter(|_| curve.name != "page_walk")
            .filter(|c| data_curve != (c.kind == loopscope_machine::CacheKind::Instruction))
            .map(|c| {
                (
                    c.size_bytes as f64,
                    format!("{} {}", c.name(), format_bytes(c.size_bytes)),
                )
            })
            .collect();
        let (title, x) = match curve.name.as_str() {
            "pointer_chase" => ("Load latency vs footprint (pointer chase)", "footprint"),
            "pointer_chase_rounds" => (
                "Load latency vs footprint (walks of 8 rounds in new orders)",
                "footprint",
            ),
            "page_walk" => (
                "Load latency vs pages touched (one line in each 4 KiB page)",
                "pages x 4 KiB",
            ),
            loopscope_probe::STREAMING_CURVE => (
                "Streaming time vs working set (triad on one thread)",
                "working set",
            ),
            "jump_chain" => (
                "Code time vs code size (jump chain, one line per jump)",
                "code size",
            ),
            "random_jump_chain" => (
                "Code time vs code size (jump chain in random order)",
                "code size",
            ),
            "indirect_jump_chain" => (
                "Code time vs code size (indirect jumps, a new order every call)",
                "code size",
            ),
            _ => (
                "Code time vs code size (NOP body, the paper's probe)",
                "code size",
            ),
        };
        let name = format!("{}.svg", curve.name);
        let svg = log_log_svg(title, x, &curve.unit, &series, &marks, &advertised).map_err(
            |message| PlotError {
                plot: name.clone(),
                message,
            },
        )?;
        plots.push((name, svg));
    }
    let mut by_kernel: Vec<Series> = Vec::new();
    for b in &report.measured.bandwidth {
        let label = format!("{} x{}", b.kernel, b.threads);
        let point = (b.working_set_bytes as f64, b.gb_per_s);
        match by_kernel.iter_mut().find(|s| s.0 == label) {
            Some(s) => s.1.push(point),
            None => by_kernel.push((label, vec![point])),
        }
    }
    if !by_kernel.is_empty() {
        let name = "bandwidth.svg".to_owned();
        let svg = log_log_svg(
            "Bandwidth vs working set",
            "working set",
            "GB/s",
            &by_kernel,
            &[],
            &[],
        )
        .map_err(|message| PlotError {
            plot: name.clone(),
            message,
        })?;
        plots.push((name, svg));
    }
    Ok(plots)
}

/// A log-log line plot with vertical marks for knees (red) and advertised sizes (grey).
fn log_log_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    knees: &[(f64, String)],
    advertised: &[(f64, String)],
) -> Result<String, String> {
    let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let ys = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .filter(|y| *y > 0.0);
    let (x0, x1) = bounds(xs.chain(knees.iter().map(|k| k.0)));
    let (y0, y1) = bounds(ys);
    let (y0, y1) = (y0 / 1.3, y1 * 1.3);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| format_bytes(*x as u64))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (x, label) in advertised {
            if (x0..=x1).contains(x) {
                draw_mark(
                    &mut chart,
                    *x,
                    (y0, y1),
                    label,
                    RGBColor(150, 150, 150),
                    0.92,
                )?;
            }
        }
        // Staggered labels, so that knees close together stay readable.
        for (i, (x, label)) in knees.iter().enumerate() {
            draw_mark(
                &mut chart,
                *x,
                (y0, y1),
                label,
                RED,
                0.8 - 0.07 * (i % 3) as f64,
            )?;
        }
        for (i, (name, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 2, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

type LogChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

fn draw_mark(
    chart: &mut LogChart<'_, '_>,
    x: f64,
    (y0, y1): (f64, f64),
    label: &str,
    color: RGBColor,
    at: f64,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new([(x, y0), (x, y1)], color.stroke_width(1)))
        .map_err(|e| e.to_string())?;
    let y = (y0.ln() + at * (y1.ln() - y0.ln())).exp();
    chart
        .draw_series([Text::new(
            label.to_owned(),
            (x * 1.03, y),
            ("sans-serif", 13).into_font().color(&color),
        )])
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Positive minimum and maximum of the values, never an empty range.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo / 2.0, lo * 2.0)
    } else {
        (1.0, 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_machine::{Cache, CacheKind, Measured};
    use loopscope_probe::{Curve, Knee, Point, Simd, Timer, judge_clock};

    fn report() -> ProbeReport {
        let points = (10..20)
            .map(|i| {
                let v = if i <= 15 { 1.0 } else { 4.0 };
                Point {
                    size_bytes: 1 << i,
                    value: v,
                    median: v * 1.1,
                }
            })
            .collect();
        ProbeReport {
            measured: Measured {
                duration_s: 1.0,
                ..Measured::default()
            },
            timer: Timer::monotonic(None),
            core_clock: judge_clock(1.0, 1.0 / 3.0, Some(3e9)),
            pinned_cpu: Some(0),
            simd: Simd::Scalar,
            curves: vec![Curve {
                name: "pointer_chase".into(),
                unit: "ns per load".into(),
                points,
                knees: vec![Knee {
                    size_bytes: 1 << 15,
                    cliff_lo_bytes: 1 << 15,
                    cliff_hi_bytes: 1 << 16,
                    rise_start_bytes: 1 << 15,
                    rise_mid_bytes: 1 << 15,
                    end_bytes: 1 << 16,
                    before: 1.0,
                    after: 4.0,
                    ratio: 4.0,
                    confidence: 0.9,
                }],
            }],
            flops: Vec::new(),
        }
    }

    #[test]
    fn plots_mark_knees_and_advertised_sizes() {
        let mut machine = Machine::unknown();
        machine
            .caches
            .push(Cache::new(1, CacheKind::Data, 32768, 64, 8, 1));
        let plots = probe_plots(&report(), &machine).unwrap();
        assert_eq!(plots.len(), 1);
        let (name, svg) = &plots[0];
        assert_eq!(name, "pointer_chase.svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("knee 32 KiB") && svg.contains("L1d 32 KiB"));
    }

    #[test]
    fn the_summary_lists_knees() {
        let text = render_probe(&report(), &Machine::unknown());
        assert!(text.contains("pointer_chase   32 KiB"), "{text}");
        assert!(text.contains("4.00x"), "{text}");
    }
}
