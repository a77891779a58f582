//! `loopscope misses --symbolic X,Z`: every count as a piecewise quasi-polynomial in several
//! parameters, one formula per chamber of the parameter space (the nested fitting of exact
//! counts), with the region where every point was checked, and `--at X=…,Z=…` to evaluate them.

use std::collections::BTreeMap;
use std::time::Instant;

use loopscope_cache::LevelConfig;
use loopscope_kernel::{Listener, RefLabel};
use serde::Serialize;

use super::MissesRequest;
use super::formulas::{AtCounts, Geometry, at_points, given, load, warn_unmodelled};
use super::level_job::SymbolicParameter;
use super::process::{LevelOutcome, LevelsRequest, model_levels};
use crate::{AnalyticError, MultiQuasiPolynomial, NestedFormulas, ReferenceChambers};

/// The result of `misses --symbolic X,Z`, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct ChambersReport {
    /// The kernel file.
    pub kernel: String,
    /// The fixed parameters.
    pub params: BTreeMap<String, i64>,
    /// The parameters the formulas are in, outermost first.
    pub parameters: Vec<String>,
    /// Whether every parameter was given a range of interest (`X=0..100`): then the checked
    /// region is all there is to say.
    pub bounded: bool,
    /// What was modelled, in words.
    pub model: &'static str,
    /// Per level, innermost first.
    pub levels: Vec<ChambersLevel>,
    /// Seconds the command took.
    pub duration_s: f64,
}

/// One level's chambers.
#[derive(Debug, Serialize)]
pub struct ChambersLevel {
    /// The level.
    #[serde(flatten)]
    pub geometry: Geometry,
    /// The level's misses; `null` when the level could not be modelled (see `error`).
    pub misses: Option<Written>,
    /// Per reference.
    pub references: Vec<ChambersReference>,
    /// With `--at`: the level's misses at each point.
    pub at: Vec<AtPoint>,
    /// Seconds the level took.
    pub duration_s: f64,
    /// Why the level could not be modelled.
    pub error: Option<String>,
}

/// One reference's counts as chambers.
#[derive(Debug, Serialize)]
pub struct ChambersReference {
    /// The reference.
    #[serde(flatten)]
    pub label: RefLabel,
    /// Its position in the model's program (`P0`, …).
    pub position: String,
    /// Accesses.
    pub accesses: Written,
    /// Compulsory misses.
    pub compulsory: Written,
    /// Conflict misses.
    pub conflict: Written,
    /// Misses.
    pub misses: Written,
}

/// A count's chambers, written out, and the exact form.
#[derive(Debug, Serialize)]
pub struct Written {
    /// Per chamber: where (`5 ≤ X ≤ 100, Z ≥ 4·⌈X/4⌉ - 3`; empty when everywhere) and the
    /// formula there, in the order the chambers are tried.
    pub chambers: Vec<(String, String)>,
    /// The exact form.
    pub formulas: NestedFormulas,
}

/// A level's misses at one `--at` point.
#[derive(Debug, Serialize)]
pub struct AtPoint {
    /// The parameters' values, in the order of `parameters`.
    pub point: Vec<i64>,
    /// The misses there.
    #[serde(flatten)]
    pub counts: AtCounts,
}

/// Runs `misses --symbolic X,Z,...`.
pub(super) fn run(
    request: &MissesRequest<'_>,
    parameters: &[SymbolicParameter<'_>],
    levels: &[LevelConfig],
    listener: &dyn Listener,
) -> Result<ChambersReport, AnalyticError> {
    let start = Instant::now();
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let names = names.as_slice();
    let (loaded, define) = load(request, names, listener)?;
    let at = at_points(request, parameters)?;
    let levels_request = LevelsRequest {
        // The whole list, ranges included: the level processes fit within them.
        symbolic: request.symbolic,
        ..request.levels_request(&define)
    };
    let outcomes = model_levels(&levels_request, levels);
    let labels = loaded.kernel.reference_labels();
    let report_levels: Vec<ChambersLevel> = levels
        .iter()
        .zip(outcomes)
        .map(|(l, o)| chambers_level(l, o, &labels, names, &at))
        .collect();
    let errors = report_levels
        .iter()
        .map(|l| (&l.geometry, l.error.as_deref()));
    warn_unmodelled(listener, &loaded.origin, errors)?;
    let mut params = loaded.param_map();
    for name in names {
        params.remove(*name);
    }
    Ok(ChambersReport {
        kernel: loaded.origin.clone(),
        params,
        parameters: names.iter().map(|n| (*n).to_owned()).collect(),
        bounded: parameters.iter().all(|(_, range)| range.is_some()),
        model: "spec 000 (LRU, write-allocate), counts fitted to piecewise quasi-polynomials",
        levels: report_levels,
        duration_s: start.elapsed().as_secs_f64(),
    })
}

fn chambers_level(
    l: &LevelConfig,
    outcome: LevelOutcome,
    labels: &[RefLabel],
    names: &[&str],
    at: &[Vec<i64>],
) -> ChambersLevel {
    let mut level = ChambersLevel {
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
        .map(|(r, label)| ChambersReference {
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
