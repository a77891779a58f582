//! The instruction-mix charts (SVG): each type's share of the executed instructions with its
//! one-sigma error bar, and the type composition of the functions and loops that executed the
//! most instructions.

use loopscope_profile::{MixReport, MixRow};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::PlotError;
use crate::mix::format_compact;

/// Rows of the composition chart at most.
const TOP_ROWS: usize = 8;
/// Pixels between neighbouring bars.
const BAR_GAP: u32 = 6;

fn fail(plot: &str) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError {
        plot: plot.to_owned(),
        message,
    }
}

fn type_color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

/// The mix as two SVG charts, (file name, SVG text): `mix-types.svg`, each type's share with
/// its error bar, and `mix-rows.svg`, the composition of the rows with the most instructions
/// (absent when the report has no rows).
pub fn mix_plots(report: &MixReport) -> Result<Vec<(String, String)>, PlotError> {
    let mut plots = vec![(
        "mix-types.svg".to_owned(),
        type_shares_svg(report).map_err(fail("mix-types.svg"))?,
    )];
    let mut rows: Vec<&MixRow> = report
        .by
        .iter()
        .filter(|r| r.instructions > 0 && is_leaf(report, r))
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.instructions));
    rows.truncate(TOP_ROWS);
    if !rows.is_empty() {
        plots.push((
            "mix-rows.svg".to_owned(),
            rows_svg(report, &rows).map_err(fail("mix-rows.svg"))?,
        ));
    }
    Ok(plots)
}

/// Whether a row holds no other row: an innermost loop, a function without loops, a block.
/// Outer loops and functions with loops would repeat their inner rows' instructions.
fn is_leaf(report: &MixReport, row: &MixRow) -> bool {
    match row.kind {
        "function" => !report
            .by
            .iter()
            .any(|r| r.kind == "loop" && r.function == row.function && r.object == row.object),
        "loop" => !report.by.iter().any(|r| {
            r.kind == "loop"
                && r.function == row.function
                && r.object == row.object
                && r.parent_loop.is_some()
                && r.parent_loop == row.loop_id
        }),
        _ => true,
    }
}

fn type_shares_svg(report: &MixReport) -> Result<String, String> {
    let types = &report.type_details;
    let n = types.len().max(1);
    let top = types
        .iter()
        .map(|t| (t.share + t.share_error) * 100.0)
        .fold(1.0f64, f64::max)
        * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let caption = format!(
            "Executed instructions by type ({} in all, {})",
            format_compact(report.total_instructions as f64),
            report.estimate
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((0..n).into_segmented(), 0f64..top)
            .map_err(|e| e.to_string())?;
        let names: Vec<&str> = types.iter().map(|t| t.name).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("share of instructions (%)")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).copied().unwrap_or("").to_owned(),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, t) in types.iter().enumerate() {
            let share = t.share * 100.0;
            let color = type_color(i);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), share),
                ],
                color.mix(0.8).filled(),
            );
            bar.set_margin(0, 0, BAR_GAP, BAR_GAP);
            chart.draw_series([bar]).map_err(|e| e.to_string())?;
            let error = t.share_error * 100.0;
            if error > 0.0 {
                let at = SegmentValue::CenterOf(i);
                let (lo, hi) = ((share - error).max(0.0), share + error);
                chart
                    .draw_series([PathElement::new(
                        vec![(at.clone(), lo), (at, hi)],
                        BLACK.stroke_width(2),
                    )])
                    .map_err(|e| e.to_string())?;
            }
            chart
                .draw_series([Text::new(
                    format!("{share:.1} %"),
                    (SegmentValue::CenterOf(i), share + top * 0.02),
                    TextStyle::from(("sans-serif", 13).into_font())
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )])
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A row's short label: `main`, `loop 3 nest.c:28`.
fn row_label(row: &MixRow) -> String {
    let source = crate::profile::source_text(row.file.as_deref(), row.line, &row.inlined);
    let name = match (source, row.kind) {
        (Some(source), "loop") => format!("{} {source}", row.name),
        _ => row.name.clone(),
    };
    if name.chars().count() > 22 {
        let short: String = name.chars().take(21).collect();
        format!("{short}…")
    } else {
        name
    }
}

fn rows_svg(report: &MixReport, rows: &[&MixRow]) -> Result<String, String> {
    let type_names: Vec<&str> = report.type_details.iter().map(|t| t.name).collect();
    let top = rows
        .iter()
        .map(|r| r.types.values().sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let labels: Vec<String> = rows.iter().map(|r| row_label(r)).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Instruction mix of the innermost loops and loop-free functions",
                ("sans-serif", 20),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((0..rows.len()).into_segmented(), 0f64..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("instructions")
            .y_label_formatter(&|y| format_compact(*y))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        for (t, name) in type_names.iter().enumerate() {
            let color = type_color(t);
            let bars = rows.iter().enumerate().filter_map(|(i, r)| {
                let below: u64 = type_names[..t].iter().filter_map(|n| r.types.get(n)).sum();
                let own = r.types.get(name).copied().unwrap_or(0);
                (own > 0).then(|| {
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(i), below as f64),
                            (SegmentValue::Exact(i + 1), (below + own) as f64),
                        ],
                        color.mix(0.8).filled(),
                    );
                    bar.set_margin(0, 0, BAR_GAP, BAR_GAP);
                    bar
                })
            });
            chart
                .draw_series(bars)
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
