//! Text views of `loopscope misses`: counts per level and reference with the simulator's beside
//! them (`--check`) and where the conflict misses come from (`--sources`); the values of a
//! `--scan` and their spikes; formulas in one parameter and chambers in several (`--symbolic`).

use loopscope_analytic::{
    ChambersReport, Check, ConflictSources, Formula, FormulasReport, Geometry, Misses,
    MissesReport, QuasiPolynomial, ScanReport, Written,
};
use loopscope_kernel::RefLabel;

use crate::table::{Align, optional, percent, right_aligned};
use crate::units::format_bytes;

/// `misses` as text, in whichever of its forms it came.
pub fn render_misses(misses: &Misses) -> String {
    match misses {
        Misses::Counts(r) => render_counts(r),
        Misses::Scan(r) => render_scan(r),
        Misses::Formulas(r) => render_formulas(r),
        Misses::Chambers(r) => render_chambers(r),
    }
}

fn opt(v: Option<u64>) -> String {
    optional(v, "-")
}

/// The counts as text: a summary, the levels, the references, and the conflict sources,
/// the check and the sets as asked for.
fn render_counts(r: &MissesReport) -> String {
    let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = format!(
        "kernel    {}  ({})\nmodel     {}\ntime      {:.3} s\n\n",
        r.kernel,
        params.join(", "),
        r.model,
        r.duration_s
    );
    let mut header = vec![
        "level",
        "size",
        "ways",
        "line",
        "accesses",
        "hits",
        "misses",
        "miss %",
        "compulsory",
        "conflict",
        "method",
        "time",
    ];
    if r.check.is_some() {
        header.extend(["sim misses", "sim time", "diff"]);
    }
    let mut table = right_aligned(&header, 1);
    for (k, l) in r.levels.iter().enumerate() {
        let mut row = vec![
            l.name.clone(),
            format_bytes(l.size_bytes),
            l.ways.to_string(),
            format_bytes(l.line_bytes),
            opt(l.accesses),
            opt(l.hits),
            opt(l.misses),
            l.misses
                .zip(l.accesses)
                .map_or_else(|| "-".to_owned(), |(m, a)| percent(m, a)),
            opt(l.compulsory),
            opt(l.conflict),
            l.method.unwrap_or("-").to_owned(),
            format!("{:.3} s", l.duration_s),
        ];
        if let Some(c) = r.check.as_ref().and_then(|c| c.levels.get(k)) {
            row.extend([
                c.misses.to_string(),
                format!("{:.3} s", c.duration_s),
                l.misses
                    .filter(|_| l.method == Some("model"))
                    .map_or_else(|| "-".to_owned(), |m| signed(m as i64 - c.misses as i64)),
            ]);
        }
        table.row(row);
    }
    out.push_str(&table.render());
    out.push('\n');
    out.push_str(&render_refs(r));
    if let Some(sources) = &r.sources {
        out.push_str(&render_sources(r, sources));
    }
    if let Some(c) = &r.check {
        out.push_str(&format!("\ncheck     {}\n", check_line(r, c)));
    }
    for l in r.levels.iter().filter(|l| l.explain.is_some()) {
        out.push_str(&format!(
            "\n{} sets (spec 000):\n{}",
            l.name,
            l.explain.as_deref().unwrap_or_default()
        ));
    }
    out
}

/// What `--check` compared and found: the levels not modelled are named as not compared, and
/// with no level compared the line says so rather than claim an agreement.
fn check_line(r: &MissesReport, c: &Check) -> String {
    let uncompared: Vec<&str> = (r.levels.iter())
        .map(|l| l.name.as_str())
        .filter(|name| !c.compared.iter().any(|m| m == name))
        .collect();
    let scope = match uncompared.as_slice() {
        [] => String::new(),
        [one] => format!(" ({one} not modelled, so not compared)"),
        more => format!(" ({} not modelled, so not compared)", more.join(", ")),
    };
    match c.equal {
        Some(true) => format!(
            "the model equals the exact simulator (each level alone) on every reference{scope}"
        ),
        Some(false) => format!("the model differs from the simulator (see diff){scope}"),
        None => format!(
            "nothing compared: the model counted no level ({} not modelled)",
            uncompared.join(", ")
        ),
    }
}

fn signed(v: i64) -> String {
    if v > 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

/// One table per level with conflict misses: each reference's misses against the references
/// that competed for their sets.
fn render_sources(r: &MissesReport, sources: &[ConflictSources]) -> String {
    let mut out = String::new();
    for level in &r.levels {
        let rows: Vec<&ConflictSources> =
            sources.iter().filter(|s| s.level == level.name).collect();
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n{} conflict sources: a miss counts under every reference that brought another line \
             into its set\nsince the line's last use, so one miss can appear on several rows\n",
            level.name
        ));
        let mut table = right_aligned(
            &[
                "reference",
                "where",
                "conflict",
                "competing",
                "kind",
                "where",
                "in loop",
                "misses",
                "% of conflict",
            ],
            7,
        )
        .align(2, Align::Right);
        for s in rows {
            for (k, e) in s.evictors.iter().enumerate() {
                let first = k == 0;
                table.row([
                    if first {
                        s.label.text.clone()
                    } else {
                        String::new()
                    },
                    if first {
                        s.label.place()
                    } else {
                        String::new()
                    },
                    if first {
                        s.conflict.to_string()
                    } else {
                        String::new()
                    },
                    e.label.text.clone(),
                    e.label.kind.to_owned(),
                    e.label.place(),
                    e.loops.join(" > "),
                    e.misses.to_string(),
                    percent(e.misses, s.conflict),
                ]);
            }
        }
        out.push_str(&table.render());
    }
    out
}

fn render_refs(r: &MissesReport) -> String {
    let mut header = vec![
        "reference",
        "kind",
        "where",
        "level",
        "accesses",
        "hits",
        "misses",
        "miss %",
        "compulsory",
        "conflict",
    ];
    if r.check.is_some() {
        header.extend(["sim comp", "sim conf", "diff"]);
    }
    let mut table = right_aligned(&header, 4);
    for x in &r.references {
        let mut row = vec![
            x.label.text.clone(),
            x.label.kind.to_owned(),
            x.label.place(),
            x.level.clone(),
            x.accesses.to_string(),
            x.hits.to_string(),
            x.misses.to_string(),
            percent(x.misses, x.accesses),
            x.compulsory.to_string(),
            x.conflict.to_string(),
        ];
        if let Some(c) = r.check.as_ref().and_then(|c| {
            c.references
                .iter()
                .find(|c| c.id == x.id && c.level == x.level)
        }) {
            row.extend([
                c.simulated_compulsory.to_string(),
                c.simulated_conflict.to_string(),
                c.difference.map_or_else(|| "-".to_owned(), signed),
            ]);
        }
        table.row(row);
    }
    table.render()
}

/// A scan as text: the values' table with spikes marked, the spikes per level and the values
/// a level could not be modelled at.
fn render_scan(r: &ScanReport) -> String {
    let p = &r.parameter;
    let fixed: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let count = r.values.len().max(1) as f64;
    let each_s = r.values.iter().map(|v| v.duration_s).sum::<f64>() / count;
    let mut out = format!(
        "kernel    {}  ({}{p} = {}..{} step {}, {} values)\nmodel     {}\ntime      {:.1} s, \
         {:.2} s per value ({}, {each_s:.2} s each)\n\n",
        r.kernel,
        if fixed.is_empty() {
            String::new()
        } else {
            format!("{}; ", fixed.join(", "))
        },
        r.range.lo,
        r.range.hi,
        r.range.step,
        r.values.len(),
        r.model,
        r.duration_s,
        r.duration_s / count,
        match r.values_at_once {
            1 => "one value at a time".to_owned(),
            n => format!("{n} values at once"),
        },
    );
    out.push_str(&render_scan_table(r));
    out.push_str(&format!("\nspikes: {}\n", r.spike_rule));
    for l in &r.levels {
        out.push_str(&format!("  {:<6} {}\n", l.name, spike_line(r, &l.name)));
    }
    let refused = r.refused();
    if !refused.is_empty() {
        out.push_str("\nrefused by the kernel (-):\n");
        for f in refused {
            out.push_str(&format!("  {p} = {}: {}\n", f.values_text(), f.reason));
        }
    }
    let failures = r.not_modelled();
    if !failures.is_empty() {
        out.push_str("\nnot modelled (-):\n");
        for f in failures {
            out.push_str(&format!(
                "  {} at {p} = {}: {}\n",
                f.level,
                f.values_text(),
                f.reason
            ));
        }
    }
    out
}

/// Value, then per level misses, conflict, conflict % and a `*` on spikes.
fn render_scan_table(r: &ScanReport) -> String {
    let mut header = vec![r.parameter.clone()];
    for l in &r.levels {
        header.extend([
            format!("{} misses", l.name),
            format!("{} conflict", l.name),
            "conflict %".to_owned(),
            String::new(),
        ]);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = right_aligned(&header, 0);
    for k in 0..r.levels.len() {
        table = table.align(4 * k + 4, Align::Left);
    }
    let dash = || "-".to_owned();
    for v in &r.values {
        let mut row = vec![v.value.to_string()];
        for k in 0..r.levels.len() {
            let Some(l) = v.levels.get(k) else {
                row.extend([dash(), dash(), dash(), String::new()]);
                continue;
            };
            row.extend([
                l.misses.map_or_else(dash, |m| m.to_string()),
                l.conflict.map_or_else(dash, |c| c.to_string()),
                l.conflict
                    .zip(l.accesses)
                    .map_or_else(dash, |(c, a)| percent(c, a)),
                if l.spike { "*" } else { "" }.to_owned(),
            ]);
        }
        table.row(row);
    }
    table.render()
}

/// `level`'s spikes as `value (fraction % vs median %)`, or "no spikes".
fn spike_line(r: &ScanReport, level: &str) -> String {
    let spikes: Vec<String> = r
        .spikes
        .iter()
        .filter(|s| s.level == level)
        .map(|s| {
            format!(
                "{} ({:.2} % vs {:.2} %)",
                s.value,
                100.0 * s.conflict_fraction,
                100.0 * s.neighbourhood_median
            )
        })
        .collect();
    if spikes.is_empty() {
        "no spikes".to_owned()
    } else {
        format!("{} = {}", r.parameter, spikes.join(", "))
    }
}

/// Chambers shown per count in text; all are in `--json`.
const SHOWN_CHAMBERS: usize = 8;

/// `L1 (2 ways, 32 B lines, 4 sets)`.
fn geometry_label(g: &Geometry) -> String {
    format!(
        "{} ({} ways, {} B lines, {} sets)",
        g.name, g.ways, g.line_bytes, g.sets
    )
}

/// The line for a level that could not be modelled.
fn not_modelled(g: &Geometry, error: Option<&str>) -> String {
    format!("{}: not modelled: {}\n", g.name, error.unwrap_or("?"))
}

/// `10 misses (9 compulsory, 1 conflict)`, or the error.
fn at_text(c: &loopscope_analytic::AtCounts) -> String {
    match (c.misses, c.compulsory, c.conflict, &c.error) {
        (Some(m), Some(c), Some(k), _) => format!("{m} misses ({c} compulsory, {k} conflict)"),
        (_, _, _, e) => e.clone().unwrap_or_default(),
    }
}

/// `  A[k] (read 8:40)`: a reference's line above its formulas.
fn reference_heading(label: &RefLabel) -> String {
    let place = match (label.line, label.column) {
        (Some(line), Some(column)) => format!(" {line}:{column}"),
        _ => String::new(),
    };
    format!("  {} ({}{place})\n", label.text, label.kind)
}

/// The report's first lines: the kernel and its fixed parameters, the model, the time.
fn header(
    kernel: &str,
    params: &std::collections::BTreeMap<String, i64>,
    names: &str,
    fitted_to: &str,
    duration_s: f64,
) -> String {
    let fixed: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let fixed = match fixed.is_empty() {
        true => String::new(),
        false => format!("{}; ", fixed.join(", ")),
    };
    format!(
        "kernel    {kernel}  ({fixed}{names} symbolic)\nmodel     spec 000 (LRU, write-allocate), \
         each level alone; exact counts fitted to {fitted_to} in {names}\ntime      \
         {duration_s:.3} s\n"
    )
}

/// Formulas in one parameter as text: per level the range where they hold, the level's misses
/// and each reference's counts, and the values asked for with `--at`.
fn render_formulas(r: &FormulasReport) -> String {
    let p = &r.parameter;
    let mut out = header(&r.kernel, &r.params, p, "quasi-polynomials", r.duration_s);
    for l in &r.levels {
        out.push('\n');
        let Some(total) = &l.misses else {
            out.push_str(&not_modelled(&l.geometry, l.error.as_deref()));
            continue;
        };
        let lowest = total
            .below
            .first()
            .map(|(n, _)| *n)
            .or(total.lower.last().map(|piece| piece.from))
            .unwrap_or(total.holds_from);
        let unchecked = if lowest > 0 {
            format!(" (values below {p} = {lowest} were not checked)")
        } else {
            String::new()
        };
        let level = geometry_label(&l.geometry);
        match r.range {
            Some((lo, hi)) => out.push_str(&format!(
                "{level}: the formulas fitted to {lo} ≤ {p} ≤ {hi}, every value checked\n"
            )),
            None => out.push_str(&format!(
                "{level}: the formulas hold for {p} ≥ {}{unchecked}, every value checked up to \
                 {p} = {}; above, they are the counts' quasi-polynomials if no breakpoint lies \
                 higher\n",
                total.holds_from, total.verified_to
            )),
        }
        let highest = r.range.map(|(_, hi)| hi);
        out.push_str(&formula_lines("  ", "misses", total, p, highest));
        for reference in &l.references {
            let f = &reference.formulas;
            out.push_str(&reference_heading(&reference.label));
            for (what, formula) in [
                ("accesses", &f.accesses),
                ("compulsory", &f.compulsory),
                ("conflict", &f.conflict),
            ] {
                out.push_str(&formula_lines("    ", what, formula, p, highest));
            }
        }
        if !total.lower.is_empty() {
            let ranges: Vec<String> = total
                .lower
                .iter()
                .map(|piece| format!("{} ≤ {p} ≤ {}", piece.from, piece.to))
                .collect();
            out.push_str(&format!(
                "  below {p} = {}, other formulas hold, each checked at every value: {}\n",
                total.holds_from,
                ranges.join("; ")
            ));
        }
        if !total.below.is_empty() {
            let values: Vec<String> = total.below.iter().map(|(_, c)| c.to_string()).collect();
            let (first, last) = (total.below[0].0, total.below[total.below.len() - 1].0);
            let shown = if values.len() > 24 {
                format!("{}, … (all in --json)", values[..24].join(", "))
            } else {
                values.join(", ")
            };
            out.push_str(&format!(
                "  misses below the formulas' ranges, {p} = {first}..{last}: {shown}\n"
            ));
        }
        for at in &l.at {
            out.push_str(&format!(
                "  at {p} = {}: {}\n",
                at.value,
                at_text(&at.counts)
            ));
        }
    }
    out
}

/// `what` and its formula; when lower ranges have other formulas, each range on its own line
/// (a range merged into the one above when that range's formula gives its values too).
fn formula_lines(
    indent: &str,
    what: &str,
    formula: &Formula,
    p: &str,
    highest: Option<i64>,
) -> String {
    // (formula, from, to): the top range is open above, unless the range of interest ends.
    let mut groups: Vec<(&QuasiPolynomial, i64, Option<i64>)> =
        vec![(&formula.quasi_polynomial, formula.holds_from, highest)];
    for piece in &formula.lower {
        let last = groups.len() - 1;
        // A formula that also gives the range's values covers it (the fit is shared by every
        // series, so one series' breakpoint cuts the others' ranges where nothing changes).
        let above = groups[last].0;
        let covers =
            (piece.from..=piece.to).all(|n| above.at(n).ok() == piece.quasi_polynomial.at(n).ok());
        if above.equivalent(&piece.quasi_polynomial) || covers {
            groups[last].1 = piece.from;
        } else {
            groups.push((&piece.quasi_polynomial, piece.from, Some(piece.to)));
        }
    }
    if groups.len() == 1 {
        return format!(
            "{indent}{what:<11} {}\n",
            formula.quasi_polynomial.render(p)
        );
    }
    let mut out = String::new();
    for (i, (qp, from, to)) in groups.iter().enumerate() {
        let range = match to {
            Some(to) => format!("{from} ≤ {p} ≤ {to}"),
            None => format!("{p} ≥ {from}"),
        };
        let label = if i == 0 { what } else { "" };
        out.push_str(&format!(
            "{indent}{label:<11} {}  (for {range})\n",
            qp.render(p)
        ));
    }
    out
}
/// Chambers in several parameters as text: per level the checked region, the level's misses
/// and each reference's counts per chamber, and the points asked for with `--at`.
fn render_chambers(r: &ChambersReport) -> String {
    let names = r.parameters.join(", ");
    let fitted_to = "piecewise quasi-polynomials";
    let mut out = header(&r.kernel, &r.params, &names, fitted_to, r.duration_s);
    for l in &r.levels {
        out.push('\n');
        let Some(total) = &l.misses else {
            out.push_str(&not_modelled(&l.geometry, l.error.as_deref()));
            continue;
        };
        let region: Vec<String> = r
            .parameters
            .iter()
            .zip(&total.formulas.checked)
            .map(|(n, (low, high))| format!("{low} ≤ {n} ≤ {high}"))
            .collect();
        let beyond = match r.bounded {
            true => "",
            false => {
                "; beyond, they are the counts' quasi-polynomials if no breakpoint lies further out"
            }
        };
        out.push_str(&format!(
            "{}: each formula equals the exact count at every point with {}{beyond}\n",
            geometry_label(&l.geometry),
            region.join(", ")
        ));
        out.push_str(&written_lines("  ", "misses", total));
        for reference in &l.references {
            out.push_str(&reference_heading(&reference.label));
            for (what, w) in [
                ("accesses", &reference.accesses),
                ("compulsory", &reference.compulsory),
                ("conflict", &reference.conflict),
            ] {
                out.push_str(&written_lines("    ", what, w));
            }
        }
        for at in &l.at {
            let point: Vec<String> = r
                .parameters
                .iter()
                .zip(&at.point)
                .map(|(n, v)| format!("{n} = {v}"))
                .collect();
            out.push_str(&format!(
                "  at {}: {}\n",
                point.join(", "),
                at_text(&at.counts)
            ));
        }
    }
    out
}

/// `what` and its formula per chamber (one line when a single formula holds everywhere).
fn written_lines(indent: &str, what: &str, w: &Written) -> String {
    let first = &w.chambers[0].1;
    if w.chambers.iter().all(|(_, f)| f == first) {
        return format!("{indent}{what:<11} {first}\n");
    }
    let width = w
        .chambers
        .iter()
        .take(SHOWN_CHAMBERS)
        .map(|(_, f)| f.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (i, (condition, formula)) in w.chambers.iter().take(SHOWN_CHAMBERS).enumerate() {
        let label = if i == 0 { what } else { "" };
        let pad = width - formula.chars().count();
        out.push_str(&format!(
            "{indent}{label:<11} {formula}{}  ({condition})\n",
            " ".repeat(pad)
        ));
    }
    if w.chambers.len() > SHOWN_CHAMBERS {
        out.push_str(&format!(
            "{indent}{:<11} … {} more chambers (all in --json)\n",
            "",
            w.chambers.len() - SHOWN_CHAMBERS
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_analytic::{
        LevelInfo, RangeReport, SPIKE_RULE, SpikeReport, ValueLevel, ValueReport,
    };

    fn counted(name: &str, accesses: u64, conflict: u64) -> ValueLevel {
        ValueLevel {
            name: name.into(),
            accesses: Some(accesses),
            misses: Some(conflict + 1),
            compulsory: Some(1),
            conflict: Some(conflict),
            conflict_fraction: Some(conflict as f64 / accesses as f64),
            spike: false,
            duration_s: 0.1,
            error: None,
        }
    }

    fn failed(name: &str, reason: &str) -> ValueLevel {
        ValueLevel {
            error: Some(reason.into()),
            accesses: None,
            misses: None,
            compulsory: None,
            conflict: None,
            conflict_fraction: None,
            ..counted(name, 1, 0)
        }
    }

    #[test]
    fn scan_text_marks_spikes_and_lists_each_failure_once() {
        let slow = "took more than the time limit of 30 s (stopped)";
        let report = ScanReport {
            kernel: "k.c".into(),
            params: Default::default(),
            parameter: "N".into(),
            range: RangeReport {
                lo: 1,
                hi: 5,
                step: 1,
            },
            model: "m",
            spike_rule: SPIKE_RULE,
            values_at_once: 1,
            levels: ["L1", "L2"]
                .iter()
                .map(|n| LevelInfo {
                    name: (*n).into(),
                    size_bytes: 1024,
                    line_bytes: 64,
                    ways: 2,
                    sets: 8,
                })
                .collect(),
            values: (1..=5)
                .map(|v| ValueReport {
                    value: v,
                    refused: None,
                    levels: vec![
                        ValueLevel {
                            spike: v == 3,
                            ..counted("L1", 100, if v == 3 { 70 } else { 4 })
                        },
                        if v == 2 {
                            counted("L2", 100, 0)
                        } else {
                            failed("L2", slow)
                        },
                    ],
                    duration_s: 0.5,
                })
                .collect(),
            spikes: vec![SpikeReport {
                level: "L1".into(),
                value: 3,
                conflict_fraction: 0.7,
                neighbourhood_median: 0.04,
            }],
            duration_s: 2.5,
        };
        let text = render_misses(&Misses::Scan(report));
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("3 "))
            .unwrap();
        assert!(row.contains("70.00  *"), "{text}");
        assert!(text.contains("L1     N = 3 (70.00 % vs 4.00 %)"), "{text}");
        assert!(text.contains("L2     no spikes"), "{text}");
        assert!(
            text.contains(&format!("  L2 at N = 1, 3, 4, 5: {slow}\n")),
            "{text}"
        );
        assert_eq!(text.matches(slow).count(), 1, "{text}");
    }

    #[test]
    fn scan_text_lists_each_refusal_once_apart_from_the_levels() {
        let empty = "k.c: array `a` has an extent `N` that is not a positive 64-bit integer";
        let info = |name: &str| LevelInfo {
            name: name.into(),
            size_bytes: 1024,
            line_bytes: 64,
            ways: 2,
            sets: 8,
        };
        let value = |v: i64| ValueReport {
            value: v,
            refused: (v <= 0).then(|| empty.to_owned()),
            levels: ["L1", "L2"]
                .iter()
                .map(|n| match v {
                    ..=0 => ValueLevel {
                        error: None,
                        ..failed(n, "")
                    },
                    _ => counted(n, 100, 4),
                })
                .collect(),
            duration_s: 0.1,
        };
        let report = ScanReport {
            kernel: "k.c".into(),
            params: Default::default(),
            parameter: "N".into(),
            range: RangeReport {
                lo: -1,
                hi: 2,
                step: 1,
            },
            model: "m",
            spike_rule: SPIKE_RULE,
            values_at_once: 1,
            levels: vec![info("L1"), info("L2")],
            values: (-1..=2).map(value).collect(),
            spikes: Vec::new(),
            duration_s: 0.4,
        };
        let text = render_misses(&Misses::Scan(report));
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("0 "))
            .unwrap();
        assert_eq!(row.matches('-').count(), 6, "{text}");
        assert!(
            text.contains(&format!(
                "refused by the kernel (-):\n  N = -1, 0: {empty}\n"
            )),
            "{text}"
        );
        assert_eq!(text.matches(empty).count(), 1, "{text}");
        assert!(!text.contains("not modelled"), "{text}");
    }
}
