//! The instruction mix (`loopscope mix`, spec 001) as text: a first line naming the event and
//! the estimate, the totals per type with their error bars and shares, then the rows per
//! function and loop (or block).

use loopscope_profile::{MixReport, MixRow};

use crate::profile::source_text;
use crate::table::{Align, Table};

/// A count with thousands separators: `1,234,567`.
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count in three significant figures with an SI suffix: `1.23G`, `456M`, `789`.
pub fn format_compact(n: f64) -> String {
    let (value, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(scale, _)| n.abs() >= scale)
        .map_or((n, ""), |(scale, s)| (n / scale, s));
    if suffix.is_empty() {
        format!("{value:.0}")
    } else if value >= 100.0 {
        format!("{value:.0}{suffix}")
    } else if value >= 10.0 {
        format!("{value:.1}{suffix}")
    } else {
        format!("{value:.2}{suffix}")
    }
}

fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// The header lines and the per-type totals.
pub fn render_mix_summary(report: &MixReport) -> String {
    let mut out = format!("{}\n", report.method);
    if !report.command.is_empty() {
        out.push_str(&format!("command: {}\n", report.command.join(" ")));
    }
    if report.estimate != "exact" {
        let unattributed = if report.samples > 0 {
            report.unattributed_samples as f64 / report.samples as f64
        } else {
            0.0
        };
        out.push_str(&format!(
            "samples: {} ({} lost, {} throttled); {} unattributed ({})\n",
            format_count(report.samples),
            format_count(report.lost_samples),
            format_count(report.throttled),
            format_count(report.unattributed_samples),
            percent(unattributed)
        ));
    }
    let exact = report.estimate == "exact";
    let error_header = if exact { "" } else { "± (1σ)" };
    let mut table = Table::new([
        "type",
        "instructions",
        error_header,
        "share",
        if exact { "" } else { "±" },
    ])
    .align(1, Align::Right)
    .align(2, Align::Right)
    .align(3, Align::Right)
    .align(4, Align::Right);
    for t in &report.type_details {
        let (error, share_error) = if exact {
            (String::new(), String::new())
        } else {
            (format_count(t.error.round() as u64), percent(t.share_error))
        };
        table.row([
            t.name.to_owned(),
            format_count(t.count),
            error,
            percent(t.share),
            share_error,
        ]);
    }
    let total_error = if exact {
        String::new()
    } else {
        format_count(report.total_error.round() as u64)
    };
    table.row([
        "all".to_owned(),
        format_count(report.total_instructions),
        total_error,
        String::new(),
        String::new(),
    ]);
    out.push('\n');
    out.push_str(&table.render());
    out
}

fn row_name(row: &MixRow) -> String {
    match row.kind {
        "loop" => {
            let source = source_text(row.file.as_deref(), row.line, &row.inlined)
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            format!(
                "{}loop {}{source}",
                "  ".repeat(row.depth as usize),
                row.loop_id.unwrap_or(0)
            )
        }
        "block" => format!("{} {}", row.name, row.function),
        _ => crate::profile::with_library(&row.name, Some(&row.object)),
    }
}

/// The rows, at most `top` functions (with their loops) or blocks.
pub fn render_mix_rows(report: &MixReport, top: usize) -> String {
    let names: Vec<&'static str> = report.type_details.iter().map(|t| t.name).collect();
    let mut header: Vec<String> = vec![
        match report.by_kind {
            loopscope_profile::MixBy::Block => "block".to_owned(),
            _ => "function / loop".to_owned(),
        },
        "samples".to_owned(),
        "instructions".to_owned(),
    ];
    if report.estimate != "exact" {
        header.push("±".to_owned());
    }
    header.extend(names.iter().map(|n| format!("{n} %")));
    let blocks = report.by_kind == loopscope_profile::MixBy::Block;
    if blocks {
        header.push("executions".to_owned());
        if report.estimate == "time-model" {
            header.push("cycles/exec".to_owned());
        }
    }
    let columns = header.len();
    let mut table = Table::new(header);
    for c in 1..columns {
        table = table.align(c, Align::Right);
    }
    let mut shown = 0;
    let mut hidden = 0;
    for row in &report.by {
        if row.kind != "loop" {
            shown += 1;
        }
        if shown > top {
            hidden += usize::from(row.kind != "loop");
            continue;
        }
        let mut cells = vec![
            row_name(row),
            format_count(row.samples),
            format_compact(row.instructions as f64),
        ];
        if report.estimate != "exact" {
            cells.push(format_compact(row.instructions_error));
        }
        for n in &names {
            let count = row.types.get(n).copied().unwrap_or(0);
            let share = if row.instructions > 0 {
                count as f64 / row.instructions as f64
            } else {
                0.0
            };
            cells.push(format!("{:.1}", share * 100.0));
        }
        if blocks {
            cells.push(
                row.executions
                    .map_or_else(String::new, |e| format_compact(e as f64)),
            );
            if report.estimate == "time-model" {
                cells.push(
                    row.cost
                        .map_or_else(String::new, |c| format!("{:.2}", c.cycles)),
                );
            }
        }
        table.row(cells);
    }
    let mut out = table.render();
    if hidden > 0 {
        out.push_str(&format!("({hidden} more; --top to show them)\n"));
    }
    out
}

/// The whole text output: summary, then rows (the notes are the caller's to show).
pub fn render_mix(report: &MixReport, top: usize) -> String {
    let mut out = render_mix_summary(report);
    if !report.by.is_empty() {
        out.push('\n');
        out.push_str(&render_mix_rows(report, top));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_and_compact_figures_keep_three_digits() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1_000), "1,000");
        assert_eq!(format_count(50_000_000_000), "50,000,000,000");
        assert_eq!(format_compact(999.0), "999");
        assert_eq!(format_compact(1_234.0), "1.23k");
        assert_eq!(format_compact(45_600_000.0), "45.6M");
        assert_eq!(format_compact(123_000_000_000.0), "123G");
    }
}
