//! `loopscope misses`: each reference's compulsory and conflict misses per cache level, every
//! level modelled in a level process, with `--sources` (which references compete for the sets
//! of the conflict misses) and `--check` (each level simulated alone, compared). A level the
//! model does not finish within the time limit is simulated instead when that fits the same
//! limit (unless the request is for the model only), and says so in its `method`.

use std::collections::BTreeMap;
use std::time::Instant;

use loopscope_cache::{
    AloneLevel, CacheError, LevelConfig, check_simulation_work, simulate_each_level_alone,
};
use loopscope_kernel::{Kernel, Listener, LoadedKernel, Program as Stream, RefLabel};
use serde::Serialize;

use super::MissesRequest;
use super::fallback::{SimulationEstimate, estimate};
use super::process::{LevelOutcome, LevelsRequest, cores, model_levels};
use crate::error::plain_isl_error;
use crate::{AnalyticError, PieceCounts, program_from_kernel};

/// The result of `misses`, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct MissesReport {
    /// The kernel file.
    pub kernel: String,
    /// Its parameters' values.
    pub params: BTreeMap<String, i64>,
    /// What was modelled, in words.
    pub model: &'static str,
    /// Per level, innermost first.
    pub levels: Vec<MissesLevel>,
    /// Per reference and modelled level.
    pub references: Vec<MissesReference>,
    /// Per array and modelled level.
    pub arrays: Vec<MissesArray>,
    /// Where the conflict misses come from; `null` without `--sources`.
    pub sources: Option<Vec<ConflictSources>>,
    /// The simulator's counts beside the model's, with `--check`.
    pub check: Option<Check>,
    /// Seconds the command took.
    pub duration_s: f64,
}

/// Where one reference's conflict misses at one level come from.
#[derive(Debug, Serialize)]
pub struct ConflictSources {
    /// The level's name.
    pub level: String,
    /// The reference's position.
    pub id: usize,
    /// The reference.
    #[serde(flatten)]
    pub label: RefLabel,
    /// Its conflict misses.
    pub conflict: u64,
    /// Competing references, most misses first. A miss counts under each of them, so their
    /// `misses` overlap.
    pub evictors: Vec<Evictor>,
}

/// A reference competing for the sets of another's conflict misses.
#[derive(Debug, Serialize)]
pub struct Evictor {
    /// The competing reference's position.
    pub id: usize,
    /// The competing reference.
    #[serde(flatten)]
    pub label: RefLabel,
    /// Loop variables around the reference, outermost first.
    pub loops: Vec<String>,
    /// Conflict misses of the reference above whose set this one touched (with another line)
    /// between the line's previous access and the miss.
    pub misses: u64,
}

/// One level's geometry and totals.
#[derive(Debug, Serialize)]
pub struct MissesLevel {
    /// `L1`, `L2`, …
    pub name: String,
    /// Capacity.
    pub size_bytes: u64,
    /// Line size.
    pub line_bytes: u64,
    /// Associativity.
    pub ways: u64,
    /// Number of sets.
    pub sets: u64,
    /// Accesses; `null` when the level could not be modelled (see `error`).
    pub accesses: Option<u64>,
    /// Hits.
    pub hits: Option<u64>,
    /// Misses.
    pub misses: Option<u64>,
    /// Compulsory misses.
    pub compulsory: Option<u64>,
    /// Always `null`: under LRU spec 000 counts capacity misses among the conflict ones.
    pub capacity: Option<u64>,
    /// Conflict misses (capacity misses included).
    pub conflict: Option<u64>,
    /// Lines brought in (misses × line size).
    pub fill_bytes: Option<u64>,
    /// How the counts were found: `model` (the analytic model), `simulated` (the exact
    /// simulator, the level alone, because the model did not finish within the time limit);
    /// `null` when the level has no counts (see `error`).
    pub method: Option<&'static str>,
    /// Seconds the level took from the start: when the model finished it, or for a simulated
    /// level when the simulation did.
    pub duration_s: f64,
    /// Why the level has no counts: neither the model nor the simulator could count it within
    /// the time limit (or, with `--model-only`, the model could not).
    pub error: Option<String>,
    /// For a simulated level, why the model did not count it.
    pub model_error: Option<String>,
    /// The intermediate sets, with `--explain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<String>,
}

/// One reference's counts at one level.
#[derive(Debug, Clone, Serialize)]
pub struct MissesReference {
    /// The reference's position.
    pub id: usize,
    /// The reference.
    #[serde(flatten)]
    pub label: RefLabel,
    /// The level's name.
    pub level: String,
    /// Accesses.
    pub accesses: u64,
    /// Hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// Compulsory misses.
    pub compulsory: u64,
    /// Always `null` (see [`MissesLevel::capacity`]).
    pub capacity: Option<u64>,
    /// Conflict misses.
    pub conflict: u64,
    /// Per hit-source piece: sources, executions, conflicts (the explanation of the counts).
    pub pieces: Vec<PieceCounts>,
}

/// One array's counts at one level, its references summed.
#[derive(Debug, Serialize)]
pub struct MissesArray {
    /// The array.
    pub array: String,
    /// The level's name.
    pub level: String,
    /// Accesses.
    pub accesses: u64,
    /// Misses.
    pub misses: u64,
    /// Compulsory misses.
    pub compulsory: u64,
    /// Conflict misses.
    pub conflict: u64,
}

/// The exact simulator's counts, each level alone, beside the model's.
#[derive(Debug, Serialize)]
pub struct Check {
    /// True when every modelled count equals the simulator's.
    pub equal: bool,
    /// Per level.
    pub levels: Vec<CheckLevel>,
    /// Per reference and level.
    pub references: Vec<CheckReference>,
}

impl MissesReport {
    /// With `--check`, one line per modelled level and reference whose compulsory or conflict
    /// misses differ from the simulator's, e.g. `L1 b[i][j] (6:9): model 2360 misses (512
    /// compulsory, 1848 conflict), simulator 1016 (512, 504)`; empty when they all agree or
    /// nothing was checked.
    pub fn check_differences(&self) -> Vec<String> {
        let Some(check) = &self.check else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for s in &check.references {
            let modelled = self
                .levels
                .iter()
                .any(|l| l.name == s.level && l.error.is_none());
            let Some(m) = self
                .references
                .iter()
                .find(|m| m.id == s.id && m.level == s.level)
            else {
                continue;
            };
            if !modelled
                || (m.compulsory, m.conflict) == (s.simulated_compulsory, s.simulated_conflict)
            {
                continue;
            }
            let place = match m.label.place() {
                p if p.is_empty() => p,
                p => format!(" ({p})"),
            };
            out.push(format!(
                "{} {}{place}: model {} misses ({} compulsory, {} conflict), simulator {} ({}, {})",
                s.level,
                m.label.text,
                m.misses,
                m.compulsory,
                m.conflict,
                s.simulated_misses,
                s.simulated_compulsory,
                s.simulated_conflict
            ));
        }
        out
    }
}

/// One level simulated alone.
#[derive(Debug, Serialize)]
pub struct CheckLevel {
    /// The level's name.
    pub name: String,
    /// Misses.
    pub misses: u64,
    /// Compulsory misses.
    pub compulsory: u64,
    /// Capacity and conflict misses together (the model's `conflict`).
    pub conflict: u64,
    /// Seconds the simulation took.
    pub duration_s: f64,
}

/// One reference at one level, simulated and modelled.
#[derive(Debug, Serialize)]
pub struct CheckReference {
    /// The reference's position.
    pub id: usize,
    /// The level's name.
    pub level: String,
    /// The model's misses, when the level was modelled.
    pub model_misses: Option<u64>,
    /// The simulator's misses.
    pub simulated_misses: u64,
    /// The simulator's compulsory misses.
    pub simulated_compulsory: u64,
    /// Capacity and conflict misses of the simulator together (the model's `conflict`).
    pub simulated_conflict: u64,
    /// Model minus simulator.
    pub difference: Option<i64>,
}

/// Runs `misses` without `--scan` or `--symbolic`.
pub(super) fn run(
    request: &MissesRequest<'_>,
    levels: &[LevelConfig],
    listener: &dyn Listener,
    start: Instant,
) -> Result<MissesReport, AnalyticError> {
    let loaded = LoadedKernel::load(request.kernel, request.define, request.base, listener)?;
    // Checked here so a kernel the model cannot take is bad input (exit 2), not a level error.
    program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout)
        .map_err(|e| kernel_request_error(&loaded.origin, e, listener))?;
    if request.check {
        check_work(&loaded)?;
    }
    let levels_request = LevelsRequest {
        explain: request.explain,
        sources: request.sources,
        ..request.levels_request(request.define)
    };
    let modelled = model_levels(&levels_request, levels);
    let labels = loaded.kernel.reference_labels();
    let mut report = build_report(&loaded, levels, &modelled, &labels);
    plain_isl_errors(&mut report, &loaded.origin, listener);
    if request.sources {
        report.sources = Some(sources(&loaded.kernel, levels, &modelled, &labels));
    }
    let missing: Vec<usize> = (0..levels.len())
        .filter(|&l| report.levels[l].error.is_some())
        .collect();
    let fallback = !request.model_only && !missing.is_empty();
    let simulation_start_s = start.elapsed().as_secs_f64();
    let simulated = if request.check {
        let (check, mut each) = check(&loaded, levels, &report)?;
        report.check = Some(check);
        let wanted = |l: &usize| fallback && missing.contains(l);
        each.drain(..)
            .enumerate()
            .filter(|(l, _)| wanted(l))
            .collect()
    } else if fallback {
        simulate_within_limit(&loaded, levels, &missing, request.time_limit_s, &mut report)?
    } else {
        Vec::new()
    };
    for (l, alone) in simulated {
        fill_simulated(&mut report, &levels[l], alone, &labels, simulation_start_s);
    }
    sort_by_level(&mut report);
    report.duration_s = start.elapsed().as_secs_f64();
    warn_of_levels(&report, &loaded.origin, listener);
    if report.levels.iter().all(|l| l.error.is_some()) && report.check.is_none() {
        return Err(AnalyticError::NotModelled(format!(
            "{}: no cache level could be modelled",
            loaded.origin
        )));
    }
    Ok(report)
}

/// The method of a level the model counted.
const METHOD_MODEL: &str = "model";
/// The method of a level the simulator counted.
const METHOD_SIMULATED: &str = "simulated";

/// Simulates the `missing` levels, each alone, when the estimate says that fits `limit_s`;
/// otherwise adds the estimate to their errors and simulates nothing.
fn simulate_within_limit(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    missing: &[usize],
    limit_s: f64,
    report: &mut MissesReport,
) -> Result<Vec<(usize, AloneLevel)>, AnalyticError> {
    let (estimate, stream) = match estimate(loaded, missing.len(), cores(), limit_s) {
        Ok(got) => got,
        Err(AnalyticError::Kernel(e)) => {
            for &l in missing {
                append_error(
                    report,
                    l,
                    &format!("the simulator cannot run it either: {e}"),
                );
            }
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let Some(stream) = stream.filter(|_| estimate.fits(limit_s)) else {
        let why = past_the_limit(&estimate);
        for &l in missing {
            append_error(report, l, &why);
        }
        return Ok(Vec::new());
    };
    let picked: Vec<LevelConfig> = missing.iter().map(|&l| levels[l].clone()).collect();
    let refs = loaded.kernel.references().count();
    let simulated = simulate_each_level_alone(&stream, refs, &picked, &array_ranges(loaded));
    missing
        .iter()
        .zip(simulated)
        .map(|(&l, sim)| Ok((l, sim.map_err(from_simulator)?)))
        .collect()
}

/// Why a level's simulation was not tried: its estimate.
fn past_the_limit(estimate: &SimulationEstimate) -> String {
    let accesses = match estimate.accesses {
        Some(n) => format!("its {n} accesses"),
        None => format!("up to {} accesses", estimate.accesses_bound),
    };
    format!(
        "simulating it would take about {:.0} s for {accesses}, past the limit too",
        estimate.seconds
    )
}

fn append_error(report: &mut MissesReport, level: usize, text: &str) {
    if let Some(e) = &mut report.levels[level].error {
        e.push_str("; ");
        e.push_str(text);
    }
}

/// Puts a level the simulator counted (alone) into the report, as the model's counts would be,
/// with `method` `simulated` and the model's error kept as `model_error`.
fn fill_simulated(
    report: &mut MissesReport,
    config: &LevelConfig,
    alone: AloneLevel,
    labels: &[RefLabel],
    simulation_start_s: f64,
) {
    let Some(level) = report.levels.iter_mut().find(|l| l.name == config.name) else {
        return;
    };
    let (mut acc, mut comp, mut conf) = (0u64, 0u64, 0u64);
    for (id, label) in labels.iter().enumerate() {
        let r = alone.hierarchy.ref_stats(id, 0);
        let (a, c, k) = (r.accesses, r.compulsory, r.misses - r.compulsory);
        acc += a;
        comp += c;
        conf += k;
        report.references.push(MissesReference {
            id,
            label: label.clone(),
            level: config.name.clone(),
            accesses: a,
            hits: a.saturating_sub(c + k),
            misses: c + k,
            compulsory: c,
            capacity: None,
            conflict: k,
            pieces: Vec::new(),
        });
        let array = label.array.as_deref().unwrap_or_default();
        add_to_array(&mut report.arrays, array, &config.name, a, c, k);
    }
    level.accesses = Some(acc);
    level.hits = Some(acc.saturating_sub(comp + conf));
    level.misses = Some(comp + conf);
    level.compulsory = Some(comp);
    level.conflict = Some(conf);
    level.fill_bytes = Some((comp + conf).saturating_mul(config.line_bytes));
    level.method = Some(METHOD_SIMULATED);
    level.duration_s = simulation_start_s + alone.duration_s;
    level.model_error = level.error.take();
}

/// References and arrays in the levels' order (simulated levels were added last), each level's
/// in the order they were added.
fn sort_by_level(report: &mut MissesReport) {
    let names: Vec<String> = report.levels.iter().map(|l| l.name.clone()).collect();
    let position = |name: &str| names.iter().position(|n| n == name);
    report.references.sort_by_key(|r| position(&r.level));
    report.arrays.sort_by_key(|a| position(&a.level));
}

/// One warning per level the model did not count: simulated instead, or missing and why.
fn warn_of_levels(report: &MissesReport, origin: &str, listener: &dyn Listener) {
    for l in &report.levels {
        if let (Some(why), Some(METHOD_SIMULATED)) = (&l.model_error, l.method) {
            listener.warn(&format!(
                "{origin}: {} not modelled ({why}): counted by the exact simulator instead",
                l.name
            ));
        }
        if let Some(e) = &l.error {
            // "simulating it would take ..." already says what the simulator would cost.
            let hint = if e.contains("simulat") {
                ""
            } else {
                "; `loopscope simulate` counts it exactly"
            };
            listener.warn(&format!("{origin}: {} not modelled: {e}{hint}", l.name));
        }
    }
}

/// Refuses `--check` before any level runs when simulating the kernel would pass the
/// simulator's limit, as `loopscope simulate` refuses it.
fn check_work(loaded: &LoadedKernel) -> Result<(), AnalyticError> {
    match check_simulation_work(&loaded.kernel, &loaded.params, 1) {
        Ok(_) => Ok(()),
        Err(CacheError::TooMuchWork {
            accesses,
            iterations,
            exact,
            cap,
            ..
        }) => Err(AnalyticError::Request(format!(
            "{}: --check simulates it, which takes {}{accesses} accesses and {iterations} loop \
             iterations, past the simulator's limit of {cap} steps (see docs/limits.md); without \
             --check the model counts it at any size",
            loaded.origin,
            if exact { "" } else { "up to " },
        ))),
        Err(e) => Err(from_simulator(e)),
    }
}

/// Levels whose error holds isl's own words get a plain line instead; isl's text goes to the
/// verbose notes (`-v`).
fn plain_isl_errors(report: &mut MissesReport, origin: &str, listener: &dyn Listener) {
    for level in &mut report.levels {
        if let Some((plain, isl)) = level.error.as_deref().and_then(plain_isl_error) {
            listener.note(&format!("{origin}: {}: {isl}", level.name));
            level.error = Some(plain);
        }
    }
}

/// A request error naming the kernel, with isl's words (if any) only in the verbose notes.
pub(super) fn kernel_request_error(
    origin: &str,
    e: impl std::fmt::Display,
    listener: &dyn Listener,
) -> AnalyticError {
    let text = format!("{origin}: {e}");
    match plain_isl_error(&text) {
        Some((plain, isl)) => {
            listener.note(&isl);
            AnalyticError::Request(plain)
        }
        None => AnalyticError::Request(text),
    }
}

/// The simulator's error as the model's: a kernel's stays a kernel error.
fn from_simulator(e: CacheError) -> AnalyticError {
    match e {
        CacheError::Kernel(e) => AnalyticError::Kernel(e),
        other => AnalyticError::Request(other.to_string()),
    }
}

/// A model count as a `u64` (negative counts, which the model never gives, as 0).
pub(super) fn to_u64(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

fn build_report(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    modelled: &[LevelOutcome],
    labels: &[RefLabel],
) -> MissesReport {
    let mut out_levels = Vec::new();
    let mut references = Vec::new();
    let mut arrays: Vec<MissesArray> = Vec::new();
    for (l, m) in levels.iter().zip(modelled) {
        let mut level = MissesLevel {
            name: l.name.clone(),
            size_bytes: l.size_bytes,
            line_bytes: l.line_bytes,
            ways: l.ways,
            sets: l.sets(),
            accesses: None,
            hits: None,
            misses: None,
            compulsory: None,
            capacity: None,
            conflict: None,
            fill_bytes: None,
            method: m.refs.is_ok().then_some(METHOD_MODEL),
            duration_s: m.duration_s,
            error: None,
            model_error: None,
            explain: m.explain.clone(),
        };
        match &m.refs {
            Err(e) => level.error = Some(e.clone()),
            Ok(refs) => {
                let (mut acc, mut comp, mut conf) = (0u64, 0u64, 0u64);
                for (id, (r, label)) in refs.iter().zip(labels).enumerate() {
                    let (a, c, k) = (to_u64(r.accesses), to_u64(r.compulsory), to_u64(r.conflict));
                    acc += a;
                    comp += c;
                    conf += k;
                    references.push(MissesReference {
                        id,
                        label: label.clone(),
                        level: l.name.clone(),
                        accesses: a,
                        hits: a.saturating_sub(c + k),
                        misses: c + k,
                        compulsory: c,
                        capacity: None,
                        conflict: k,
                        pieces: r.pieces.clone(),
                    });
                    add_to_array(&mut arrays, &r.array, &l.name, a, c, k);
                }
                level.accesses = Some(acc);
                level.hits = Some(acc.saturating_sub(comp + conf));
                level.misses = Some(comp + conf);
                level.compulsory = Some(comp);
                level.conflict = Some(conf);
                level.fill_bytes = Some((comp + conf).saturating_mul(l.line_bytes));
            }
        }
        out_levels.push(level);
    }
    MissesReport {
        kernel: loaded.origin.clone(),
        params: loaded.param_map(),
        model: "spec 000 (LRU, write-allocate); each level modelled alone, seeing every access",
        levels: out_levels,
        references,
        arrays,
        sources: None,
        check: None,
        duration_s: 0.0,
    }
}

/// The conflict sources of every modelled level, references with conflict misses only.
fn sources(
    kernel: &Kernel,
    levels: &[LevelConfig],
    modelled: &[LevelOutcome],
    labels: &[RefLabel],
) -> Vec<ConflictSources> {
    let mut out = Vec::new();
    for (l, m) in levels.iter().zip(modelled) {
        let Ok(refs) = &m.refs else { continue };
        for (id, r) in refs.iter().enumerate() {
            let (Some(label), Some(sources)) = (labels.get(id), &r.sources) else {
                continue;
            };
            if r.conflict <= 0 {
                continue;
            }
            let mut evictors: Vec<Evictor> = sources
                .iter()
                .filter_map(|s| {
                    Some(Evictor {
                        id: s.index,
                        label: labels.get(s.index)?.clone(),
                        loops: enclosing_loops(kernel, s.index),
                        misses: to_u64(s.misses),
                    })
                })
                .collect();
            // Most misses first; position order among equals (the sort is stable).
            evictors.sort_by_key(|e| std::cmp::Reverse(e.misses));
            out.push(ConflictSources {
                level: l.name.clone(),
                id,
                label: label.clone(),
                conflict: to_u64(r.conflict),
                evictors,
            });
        }
    }
    out
}

/// The loop variables around the kernel's `index`-th reference, outermost first.
fn enclosing_loops(kernel: &Kernel, index: usize) -> Vec<String> {
    kernel
        .references()
        .nth(index)
        .and_then(|(s, _)| kernel.statements.get(s))
        .map(|s| {
            s.loops
                .iter()
                .filter_map(|&l| kernel.loops.get(l).map(|l| l.var.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn add_to_array(
    arrays: &mut Vec<MissesArray>,
    array: &str,
    level: &str,
    accesses: u64,
    compulsory: u64,
    conflict: u64,
) {
    let i = match arrays
        .iter()
        .position(|a| a.array == array && a.level == level)
    {
        Some(i) => i,
        None => {
            arrays.push(MissesArray {
                array: array.to_owned(),
                level: level.to_owned(),
                accesses: 0,
                misses: 0,
                compulsory: 0,
                conflict: 0,
            });
            arrays.len() - 1
        }
    };
    let a = &mut arrays[i];
    a.accesses += accesses;
    a.compulsory += compulsory;
    a.conflict += conflict;
    a.misses += compulsory + conflict;
}

/// Where the kernel's arrays lie, for sizing the simulator's sets of lines seen.
fn array_ranges(loaded: &LoadedKernel) -> Vec<std::ops::Range<u64>> {
    let layout = &loaded.layout;
    (layout.base.iter().zip(&layout.size_bytes))
        .map(|(&base, &bytes)| base..base.saturating_add(bytes))
        .collect()
}

/// Simulates each level alone (the model's assumption), counting compulsory misses (the
/// model's conflict misses are the rest), and compares.
/// Returns the simulated levels too, in order.
fn check(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    report: &MissesReport,
) -> Result<(Check, Vec<AloneLevel>), AnalyticError> {
    let stream = Stream::new(&loaded.kernel, &loaded.params, &loaded.layout)?;
    let refs = loaded.kernel.references().count();
    // One thread per level, as the model runs: the levels are independent simulations.
    let simulated = simulate_each_level_alone(&stream, refs, levels, &array_ranges(loaded));
    let mut out = Check {
        equal: true,
        levels: Vec::new(),
        references: Vec::new(),
    };
    let mut each = Vec::with_capacity(levels.len());
    for ((l, modelled), alone) in levels.iter().zip(&report.levels).zip(simulated) {
        let alone = alone.map_err(from_simulator)?;
        let (sim, duration_s) = (&alone.hierarchy, alone.duration_s);
        let s = &sim.stats()[0];
        out.levels.push(CheckLevel {
            name: l.name.clone(),
            misses: s.misses,
            compulsory: s.compulsory,
            conflict: s.misses - s.compulsory,
            duration_s,
        });
        for id in 0..refs {
            let r = sim.ref_stats(id, 0);
            let model = report
                .references
                .iter()
                .find(|m| m.id == id && m.level == l.name);
            if modelled.error.is_none() {
                out.equal &= model.is_some_and(|m| {
                    m.compulsory == r.compulsory && m.conflict == r.misses - r.compulsory
                });
            }
            out.references.push(CheckReference {
                id,
                level: l.name.clone(),
                model_misses: model.map(|m| m.misses),
                simulated_misses: r.misses,
                simulated_compulsory: r.compulsory,
                simulated_conflict: r.misses - r.compulsory,
                difference: model.map(|m| m.misses as i64 - r.misses as i64),
            });
        }
        each.push(alone);
    }
    Ok((out, each))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(name: &str, error: Option<&str>) -> MissesLevel {
        MissesLevel {
            name: name.into(),
            size_bytes: 1024,
            line_bytes: 64,
            ways: 1,
            sets: 16,
            accesses: Some(511),
            hits: None,
            misses: None,
            compulsory: None,
            capacity: None,
            conflict: None,
            fill_bytes: None,
            method: Some("model"),
            duration_s: 0.0,
            error: error.map(str::to_owned),
            model_error: None,
            explain: None,
        }
    }

    fn reference(level: &str, compulsory: u64, conflict: u64) -> MissesReference {
        MissesReference {
            id: 0,
            label: RefLabel {
                array: Some("a".into()),
                subscripts: vec!["i-1".into()],
                text: "a[i-1]".into(),
                kind: "read",
                statement: Some(0),
                line: Some(5),
                column: Some(12),
            },
            level: level.into(),
            accesses: 511,
            hits: 511 - compulsory - conflict,
            misses: compulsory + conflict,
            compulsory,
            capacity: None,
            conflict,
            pieces: Vec::new(),
        }
    }

    fn checked(level: &str, compulsory: u64, conflict: u64) -> CheckReference {
        CheckReference {
            id: 0,
            level: level.into(),
            model_misses: Some(384),
            simulated_misses: compulsory + conflict,
            simulated_compulsory: compulsory,
            simulated_conflict: conflict,
            difference: Some(384 - (compulsory + conflict) as i64),
        }
    }

    fn report(levels: Vec<MissesLevel>, simulated: (u64, u64)) -> MissesReport {
        MissesReport {
            kernel: "k.c".into(),
            params: BTreeMap::new(),
            model: "spec 000",
            references: levels.iter().map(|l| reference(&l.name, 64, 320)).collect(),
            check: Some(Check {
                equal: false,
                levels: Vec::new(),
                references: levels
                    .iter()
                    .map(|l| checked(&l.name, simulated.0, simulated.1))
                    .collect(),
            }),
            levels,
            arrays: Vec::new(),
            sources: None,
            duration_s: 0.0,
        }
    }

    #[test]
    fn check_differences_name_the_level_and_the_reference() {
        let differs = report(vec![level("L1", None)], (64, 0));
        assert_eq!(
            differs.check_differences(),
            [
                "L1 a[i-1] (5:12): model 384 misses (64 compulsory, 320 conflict), simulator 64 \
              (64, 0)"
            ]
        );
        // The same totals split otherwise is a difference too.
        assert_eq!(
            report(vec![level("L1", None)], (0, 384))
                .check_differences()
                .len(),
            1
        );
        assert!(
            report(vec![level("L1", None)], (64, 320))
                .check_differences()
                .is_empty()
        );
        // A level the model did not finish (simulated instead) is not the model's to differ.
        let fallback = report(vec![level("L1", Some("over the time limit"))], (64, 0));
        assert!(fallback.check_differences().is_empty());
    }
}
