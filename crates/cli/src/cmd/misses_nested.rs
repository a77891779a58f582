//! `loopscope misses --symbolic X,Z`: every count as a piecewise quasi-polynomial in several
//! parameters, one formula per chamber of the parameter space (`loopscope_analytic`'s nested
//! fitting of exact counts), with the region where every point was checked, and `--at
//! X=…,Z=…` to evaluate them.

use std::time::Instant;

use loopscope_analytic::{MultiQuasiPolynomial, NestedFormulas, ReferenceChambers};
use loopscope_cache::LevelConfig;
use serde::Serialize;

use crate::cmd::misses::{MissesArgs, model_request};
use crate::cmd::misses_symbolic::{
    AtCounts, Geometry, at_points, given, header, load, reference_heading, warn_unmodelled,
};
use crate::cmd::model_level::{LevelOutcome, ModelRequest, SymbolicParameter, model_levels};
use crate::ui::Ui;
use loopscope_kernel::RefLabel;

/// Chambers shown per count in text; all are in `--json`.
const SHOWN_CHAMBERS: usize = 8;

/// The result of `misses --symbolic X,Z`, as printed with `--json`.
#[derive(Serialize)]
struct NestedReport {
    kernel: String,
    /// The fixed parameters.
    params: std::collections::BTreeMap<String, i64>,
    /// The parameters the formulas are in, outermost first.
    parameters: Vec<String>,
    /// Whether every parameter was given a range of interest (`X=0..100`): then the checked
    /// region is all there is to say.
    bounded: bool,
    model: &'static str,
    levels: Vec<NestedLevel>,
    duration_s: f64,
}

#[derive(Serialize)]
struct NestedLevel {
    #[serde(flatten)]
    geometry: Geometry,
    /// `null` when the level could not be modelled (see `error`).
    misses: Option<Written>,
    references: Vec<NestedRef>,
    /// With `--at`: the level's misses at each point.
    at: Vec<AtPoint>,
    duration_s: f64,
    error: Option<String>,
}

#[derive(Serialize)]
struct NestedRef {
    #[serde(flatten)]
    label: RefLabel,
    position: String,
    accesses: Written,
    compulsory: Written,
    conflict: Written,
    misses: Written,
}

/// A count's chambers, written out, and the exact form.
#[derive(Serialize)]
struct Written {
    /// Per chamber: where (`5 ≤ X ≤ 100, Z ≥ 4·⌈X/4⌉ - 3`; empty when everywhere) and the
    /// formula there, in the order the chambers are tried.
    chambers: Vec<(String, String)>,
    formulas: NestedFormulas,
}

#[derive(Serialize)]
struct AtPoint {
    point: Vec<i64>,
    #[serde(flatten)]
    counts: AtCounts,
}

/// Runs `misses --symbolic X,Z,...`.
pub fn run(
    args: &MissesArgs,
    parameters: &[SymbolicParameter<'_>],
    levels: &[LevelConfig],
    ui: &Ui,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let names = names.as_slice();
    let (loaded, define) = load(args, names, ui)?;
    let at = at_points(args, parameters)?;
    let request = ModelRequest {
        // The whole list, ranges included: the level processes fit within them.
        symbolic: args.symbolic.as_deref(),
        ..model_request(args, &define)
    };
    let outcomes = model_levels(&request, levels);
    let labels = loaded.kernel.reference_labels();
    let report_levels: Vec<NestedLevel> = levels
        .iter()
        .zip(outcomes)
        .map(|(l, o)| nested_level(l, o, &labels, names, &at))
        .collect();
    let errors = report_levels
        .iter()
        .map(|l| (&l.geometry, l.error.as_deref()));
    warn_unmodelled(ui, &loaded.origin, errors)?;
    let mut params = loaded.param_map();
    for name in names {
        params.remove(*name);
    }
    let report = NestedReport {
        kernel: loaded.origin.clone(),
        params,
        parameters: names.iter().map(|n| (*n).to_owned()).collect(),
        bounded: parameters.iter().all(|(_, range)| range.is_some()),
        model: "spec 000 (LRU, write-allocate), counts fitted to piecewise quasi-polynomials",
        levels: report_levels,
        duration_s: start.elapsed().as_secs_f64(),
    };
    if args.json {
        crate::cmd::print_json(&report)
    } else {
        crate::cmd::print_text(&render(&report))
    }
}

fn nested_level(
    l: &LevelConfig,
    outcome: LevelOutcome,
    labels: &[RefLabel],
    names: &[&str],
    at: &[Vec<i64>],
) -> NestedLevel {
    let mut level = NestedLevel {
        geometry: Geometry::of(l),
        misses: None,
        references: Vec::new(),
        at: Vec::new(),
        duration_s: outcome.duration_s,
        error: None,
    };
    let (refs, total) = match given(outcome.refs, outcome.chambers) {
        Ok(chambers) => chambers,
        Err(e) => {
            level.error = Some(e);
            return level;
        }
    };
    for point in at {
        let sum = |pick: fn(&ReferenceChambers) -> &NestedFormulas| {
            refs.iter()
                .map(|r| pick(r).at(point))
                .sum::<Result<i128, _>>()
        };
        level.at.push(AtPoint {
            point: point.clone(),
            counts: AtCounts::of(sum(|r| &r.compulsory), sum(|r| &r.conflict)),
        });
    }
    level.misses = Some(written(total, names));
    level.references = refs
        .into_iter()
        .zip(labels)
        .map(|(r, label)| NestedRef {
            label: label.clone(),
            position: r.position,
            accesses: written(r.accesses, names),
            compulsory: written(r.compulsory, names),
            conflict: written(r.conflict, names),
            misses: written(r.misses, names),
        })
        .collect();
    level
}

fn written(formulas: NestedFormulas, names: &[&str]) -> Written {
    let chambers = formulas
        .chambers
        .iter()
        .map(|c| {
            (
                condition(&c.lowest, &c.highest, names),
                c.value.render(names),
            )
        })
        .collect();
    Written { chambers, formulas }
}

/// `5 ≤ X ≤ 100, Z ≥ 4·⌈X/4⌉ - 3`, or `X = 3, …`; empty when no parameter is bounded.
fn condition(
    lowest: &[Option<MultiQuasiPolynomial>],
    highest: &[Option<MultiQuasiPolynomial>],
    names: &[&str],
) -> String {
    let mut parts = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let low = lowest
            .get(i)
            .and_then(Option::as_ref)
            .map(|q| q.render(names));
        let high = highest
            .get(i)
            .and_then(Option::as_ref)
            .map(|q| q.render(names));
        parts.push(match (low, high) {
            (Some(l), Some(h)) if l == h => format!("{name} = {l}"),
            (Some(l), Some(h)) => format!("{l} ≤ {name} ≤ {h}"),
            (Some(l), None) => format!("{name} ≥ {l}"),
            (None, Some(h)) => format!("{name} ≤ {h}"),
            (None, None) => continue,
        });
    }
    parts.join(", ")
}

fn render(r: &NestedReport) -> String {
    let names = r.parameters.join(", ");
    let fitted_to = "piecewise quasi-polynomials";
    let mut out = header(&r.kernel, &r.params, &names, fitted_to, r.duration_s);
    for l in &r.levels {
        out.push('\n');
        let Some(total) = &l.misses else {
            out.push_str(&l.geometry.not_modelled(l.error.as_deref()));
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
            l.geometry.label(),
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
                at.counts.text()
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
