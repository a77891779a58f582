//! The roofline plot (SVG): a ceiling per level, the peak and effective compute roofs, and the
//! kernel's point on each level's roof, the binding one filled.

use loopscope_roofline::{Analysis, Level, Limit};
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;

use crate::PlotError;
use crate::roofline_text::number;

/// Which quantity the horizontal axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RooflineAxis {
    /// Arithmetic intensity in FLOP per byte (the classic look).
    FlopPerByte,
    /// Required bytes per FLOP, b/f (the paper's figures).
    BytesPerFlop,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One ceiling: a level's bandwidth in GB/s and the kernel's intensity there (FLOP/byte).
struct Roof {
    level: Level,
    gb_per_s: f64,
    intensity: Option<f64>,
    /// The legend's entry: level, rate, and the share of written bytes it is taken at.
    label: String,
}

/// Renders the analysis as an SVG document.
pub fn render_roofline_svg(analysis: &Analysis, axis: RooflineAxis) -> Result<String, PlotError> {
    let roofs = roofs(analysis);
    let peak = analysis.ceilings.peak_gflops;
    let (lo, hi) = intensity_range(&roofs, peak);
    // The plotted x of an intensity, and the attainable rate on a roof at a plotted x.
    let to_x = |intensity: f64| match axis {
        RooflineAxis::FlopPerByte => intensity,
        RooflineAxis::BytesPerFlop => 1.0 / intensity,
    };
    let (x_lo, x_hi) = match axis {
        RooflineAxis::FlopPerByte => (lo, hi),
        RooflineAxis::BytesPerFlop => (1.0 / hi, 1.0 / lo),
    };
    let slowest = roofs
        .iter()
        .map(|r| r.gb_per_s)
        .fold(f64::INFINITY, f64::min);
    let y_lo = (slowest.min(peak) * lo / 2.0)
        .min(peak / 100.0)
        .min(chain_gflops(analysis).unwrap_or(peak) / 2.0)
        .max(1e-9);
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (860, 600)).into_drawing_area();
        area.fill(&WHITE).map_err(fail)?;
        let caption = format!(
            "{:.3} GFLOP/s predicted, {:.1} % of peak, limit {}",
            analysis.prediction.gflops,
            100.0 * analysis.prediction.fraction_of_peak,
            analysis.prediction.limit
        );
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..peak * 2.0).log_scale())
            .map_err(fail)?;
        chart
            .configure_mesh()
            .x_desc(match axis {
                RooflineAxis::FlopPerByte => "arithmetic intensity (FLOP/byte)",
                RooflineAxis::BytesPerFlop => "required bytes per FLOP (b/f)",
            })
            .y_desc("GFLOP/s")
            .draw()
            .map_err(fail)?;
        let samples: Vec<f64> = (0..=200)
            .map(|i| lo * (hi / lo).powf(f64::from(i) / 200.0))
            .collect();
        for (index, roof) in roofs.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let line = samples
                .iter()
                .map(|&i| (to_x(i), (roof.gb_per_s * i).min(peak)));
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(fail)?
                .label(roof.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        draw_compute_roofs(&mut chart, analysis, (x_lo, x_hi))?;
        draw_points(&mut chart, analysis, &roofs, to_x)?;
        chart
            .configure_series_labels()
            // The roofs rise to the right in FLOP/byte and to the left in b/f.
            .position(match axis {
                RooflineAxis::FlopPerByte => SeriesLabelPosition::LowerRight,
                RooflineAxis::BytesPerFlop => SeriesLabelPosition::LowerLeft,
            })
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(fail)?;
        area.present().map_err(fail)?;
    }
    Ok(svg)
}

/// The roofs of the levels the model timed, as the level table lists them: a ceiling the
/// kernel's traffic has no level for is not drawn, and a level it moves no bytes through is
/// drawn at the rate the table gives it (for a level timed by write share, at the kernel's
/// share), so that the roofs rank as the levels do.
fn roofs(analysis: &Analysis) -> Vec<Roof> {
    let flops = analysis.traffic.flops as f64;
    analysis
        .prediction
        .levels
        .iter()
        .filter_map(|used| {
            // A level timed by separate load and store ports: the rate it sustains for the
            // kernel's mix, which is what its roof means for this kernel.
            let mixed = Some(used)
                .filter(|l| l.store_bandwidth_gb_per_s.is_some() && l.time_s > 0.0)
                .map(|l| l.bytes as f64 / l.time_s / 1e9);
            let gb_per_s = mixed.or(used.bandwidth_gb_per_s)?;
            let intensity = Some(used)
                .filter(|l| l.bytes > 0 && flops > 0.0)
                .map(|l| flops / l.bytes as f64);
            let mut label = format!("{} {} GB/s", used.name, number(gb_per_s));
            if let Some(share) = used.write_share {
                label.push_str(&format!(" at {:.0} % written", share * 100.0));
            }
            if used.bytes == 0 {
                label.push_str(", no traffic");
            }
            Some(Roof {
                level: used.name,
                gb_per_s,
                intensity,
                label,
            })
        })
        .collect()
}

/// The intensity range: every point and every ridge (Ppeak / B), with room on both sides.
fn intensity_range(roofs: &[Roof], peak: f64) -> (f64, f64) {
    let values: Vec<f64> = roofs
        .iter()
        .flat_map(|r| [Some(peak / r.gb_per_s), r.intensity])
        .flatten()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    if values.is_empty() {
        (0.01, 100.0)
    } else {
        (min / 8.0, max * 8.0)
    }
}

type Chart<'a, 'b, X> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, LogCoord<f64>>>;

fn draw_compute_roofs<X>(
    chart: &mut Chart<'_, '_, X>,
    analysis: &Analysis,
    (x_lo, x_hi): (f64, f64),
) -> Result<(), PlotError>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let peak = analysis.ceilings.peak_gflops;
    let effective = analysis.ceilings.effective_gflops;
    chart
        .draw_series(LineSeries::new(
            [(x_lo, peak), (x_hi, peak)],
            BLACK.stroke_width(2),
        ))
        .map_err(fail)?
        .label(format!("peak {} GFLOP/s", number(peak)))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    if effective < peak {
        let style = BLACK.stroke_width(1);
        let label = format!("Peff {} GFLOP/s", number(effective));
        dashed_ceiling(chart, (x_lo, x_hi), effective, (6, 4), style, label)?;
    }
    if let Some(chain) = chain_gflops(analysis) {
        let style = RED.stroke_width(1);
        let label = format!("in-order sum chain {} GFLOP/s", number(chain));
        dashed_ceiling(chart, (x_lo, x_hi), chain, (2, 3), style, label)?;
    }
    Ok(())
}

/// A horizontal dashed ceiling across the plot at `gflops`, with its legend entry.
fn dashed_ceiling<X>(
    chart: &mut Chart<'_, '_, X>,
    (x_lo, x_hi): (f64, f64),
    gflops: f64,
    (dash, gap): (u32, u32),
    style: ShapeStyle,
    label: String,
) -> Result<(), PlotError>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .draw_series(DashedLineSeries::new(
            [(x_lo, gflops), (x_hi, gflops)],
            dash,
            gap,
            style,
        ))
        .map_err(fail)?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
    Ok(())
}

/// The rate the kernel's in-order sums allow, when it has them and the add latency is known.
fn chain_gflops(analysis: &Analysis) -> Option<f64> {
    let seconds = analysis.prediction.chain_time_s.filter(|&t| t > 0.0)?;
    (analysis.traffic.flops > 0).then(|| analysis.traffic.flops as f64 / seconds / 1e9)
}

fn draw_points<X>(
    chart: &mut Chart<'_, '_, X>,
    analysis: &Analysis,
    roofs: &[Roof],
    to_x: impl Fn(f64) -> f64,
) -> Result<(), PlotError>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let peak = analysis.ceilings.peak_gflops;
    let binding = analysis.prediction.bandwidth_limit;
    for (index, roof) in roofs.iter().enumerate() {
        let Some(intensity) = roof.intensity else {
            continue;
        };
        let color = COLORS[index % COLORS.len()];
        let style = if roof.level == binding {
            color.filled()
        } else {
            color.stroke_width(2)
        };
        let point = (to_x(intensity), (roof.gb_per_s * intensity).min(peak));
        chart
            .draw_series(std::iter::once(Circle::new(point, 6, style)))
            .map_err(fail)?;
    }
    if let Some(bound) = roofs.iter().find(|r| r.level == binding) {
        if let (Some(intensity), true) = (bound.intensity, analysis.prediction.gflops > 0.0) {
            let at = (to_x(intensity), analysis.prediction.gflops);
            let label = match analysis.prediction.limit {
                Limit::Compute => "prediction (compute-capped)",
                Limit::Chain => "prediction (chain-bound)",
                Limit::Level(_) => "prediction",
            };
            chart
                .draw_series(std::iter::once(Cross::new(at, 8, BLACK.stroke_width(2))))
                .map_err(fail)?
                .label(label)
                .legend(|(x, y)| Cross::new((x + 9, y), 5, BLACK.stroke_width(2)));
            if let Some(measured) = analysis.measured.as_ref().filter(|m| m.gflops > 0.0) {
                let at = (to_x(intensity), measured.gflops);
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(at, 7, RED.filled())))
                    .map_err(fail)?
                    .label(format!("measured {} GFLOP/s", number(measured.gflops)))
                    .legend(|(x, y)| TriangleMarker::new((x + 9, y), 5, RED.filled()));
            }
        }
    }
    Ok(())
}

fn fail(error: impl std::fmt::Display) -> PlotError {
    PlotError {
        plot: "roofline.svg".to_owned(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_roofline::{Options, analyse, paper_profile, parse_counts};

    fn analysis(counts: &str) -> Analysis {
        let traffic = parse_counts(counts).unwrap().traffic();
        analyse(
            &traffic,
            &paper_profile("k-computer").unwrap(),
            Options::default(),
        )
        .unwrap()
    }

    #[test]
    fn plot_has_a_ceiling_and_a_point_per_level_on_both_axes() {
        let a = analysis("mem=3,l2=8,flops=8").with_measured(10.0).unwrap();
        for axis in [RooflineAxis::FlopPerByte, RooflineAxis::BytesPerFlop] {
            let svg = render_roofline_svg(&a, axis).unwrap();
            assert!(svg.starts_with("<svg"), "{axis:?}");
            for text in [
                "L2 146 GB/s",
                "MEM 46 GB/s",
                "peak 128 GFLOP/s",
                "Peff",
                "measured",
            ] {
                assert!(svg.contains(text), "{axis:?}: no `{text}`");
            }
            assert_eq!(svg.matches("<circle").count(), 2, "{axis:?}");
        }
        let flop = render_roofline_svg(&a, RooflineAxis::FlopPerByte).unwrap();
        assert!(flop.contains("FLOP/byte"));
        let bf = render_roofline_svg(&a, RooflineAxis::BytesPerFlop).unwrap();
        assert!(bf.contains("bytes per FLOP"));
    }

    #[test]
    fn untouched_levels_are_drawn_at_the_kernels_write_share() {
        use loopscope_roofline::{BandwidthFn, Ceilings, LevelTraffic, MixBandwidth, Traffic};
        let mut ceilings = Ceilings::new(100.0, 100.0, "t").unwrap();
        // probe's store kernel puts L3 (115 GB/s) above L2's loads (77.2 GB/s).
        for (level, load, store) in [(2, 77.2, 169.1), (3, 55.6, 115.0)] {
            let bandwidth = BandwidthFn::Constant { gb_per_s: store };
            ceilings
                .set_bandwidth(Level::Cache(level), bandwidth, "t")
                .unwrap();
            let mix = |write_share, gb_per_s| MixBandwidth {
                write_share,
                gb_per_s,
                kernel: String::new(),
            };
            ceilings.levels.last_mut().unwrap().mixes = vec![mix(0.0, load), mix(0.5, store)];
        }
        let memory = BandwidthFn::Constant { gb_per_s: 13.0 };
        ceilings.set_bandwidth(Level::Memory, memory, "t").unwrap();
        let level = |level, bytes, store_bytes| LevelTraffic {
            level,
            bytes,
            volume_bytes: None,
            store_bytes: Some(store_bytes),
        };
        let traffic = Traffic {
            // No memory level: its ceiling is not the kernel's and is not drawn.
            levels: vec![
                level(Level::Cache(2), 2400, 600),
                level(Level::Cache(3), 0, 0),
            ],
            flops: 400,
            iterations: 100,
            l1: None,
            word_bytes: 8,
            chained_adds: 0,
            recurrence_adds: 0,
        };
        let a = analyse(&traffic, &ceilings, Options::default()).unwrap();
        let svg = render_roofline_svg(&a, RooflineAxis::FlopPerByte).unwrap();
        let l2 = a.prediction.levels[0].bandwidth_gb_per_s.unwrap();
        let l3 = a.prediction.levels[1].bandwidth_gb_per_s.unwrap();
        assert!(l3 < l2, "{l3} {l2}");
        for label in [
            format!("L2 {} GB/s at 25 % written", number(l2)),
            format!("L3 {} GB/s at 25 % written, no traffic", number(l3)),
        ] {
            assert!(svg.contains(&label), "no `{label}`");
        }
        assert!(!svg.contains("MEM"));
        assert!(!svg.contains("115 GB/s"));
    }

    #[test]
    fn a_kernel_without_flops_plots_ceilings_only() {
        let svg =
            render_roofline_svg(&analysis("mem=2,flops=0"), RooflineAxis::FlopPerByte).unwrap();
        assert!(svg.contains("MEM 46 GB/s"));
        assert_eq!(svg.matches("<circle").count(), 0);
    }
}
