//! `loopscope misses`: each reference's compulsory and conflict misses per cache level, every
//! level modelled in a level process, with `--sources` (which references compete for the sets
//! of the conflict misses) and `--check` (each level simulated alone, compared). A level the
//! model does not finish within the time limit is simulated instead when that fits the same
//! limit (unless the request is for the model only), and says so in its `method`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Instant;

use loopscope_cache::{
    AloneLevel, CacheError, LevelConfig, RefStats, check_simulation_work, simulate_each_level_alone,
};
use loopscope_kernel::{Kernel, Listener, LoadedKernel, Program as Stream, RefLabel};
use serde::Serialize;

use super::fallback::{Race, SimulationEstimate, estimate};
use super::process::{LevelOutcome, LevelsRequest, cores, model_levels};
use super::{MissesRequest, not_covered};
use crate::error::plain_isl_error;
use crate::{AnalyticError, Array, PieceCounts, Program, ReferenceMisses, program_from_kernel};

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
    /// Whether `error` already speaks of the simulator (its cost, its refusal, or `loopscope
    /// simulate` to count the level), so that the warning adds no hint of its own.
    #[serde(skip)]
    error_names_simulator: bool,
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
    /// Whether every count of the `compared` levels equals the simulator's; `None` when no level
    /// was compared (the model counted none), so that nothing claims an agreement never tested.
    pub equal: Option<bool>,
    /// The levels the model counted, whose counts were compared, innermost first. The others
    /// (not modelled: simulated instead, or missing) are simulated here but compared with
    /// nothing.
    pub compared: Vec<String>,
    /// Per level.
    pub levels: Vec<CheckLevel>,
    /// Per reference and level.
    pub references: Vec<CheckReference>,
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

impl MissesReport {
    /// With `--check`, one line per modelled level and reference whose compulsory or conflict
    /// misses differ from the simulator's, e.g. `L1 b[i][j] (6:9): model 2360 misses (512
    /// compulsory, 1848 conflict), simulator 1016 (512, 504)`; empty when they all agree or
    /// nothing was checked.
    pub fn check_differences(&self) -> Vec<String> {
        let Some(check) = &self.check else {
            return Vec::new();
        };
        check
            .references
            .iter()
            .filter_map(|checked| match self.agreement(checked) {
                Agreement::Differs(modelled) => Some(difference_line(modelled, checked)),
                _ => None,
            })
            .collect()
    }

    /// The model's counts of reference `id` at `level`, if the report has them.
    fn reference(&self, id: usize, level: &str) -> Option<&MissesReference> {
        self.references
            .iter()
            .find(|r| r.id == id && r.level == level)
    }

    /// How the model's counts of a reference the simulator checked compare with the
    /// simulator's.
    fn agreement(&self, checked: &CheckReference) -> Agreement<'_> {
        let modelled = (self.levels.iter()).any(|l| l.name == checked.level && l.error.is_none());
        if !modelled {
            return Agreement::NotModelled;
        }
        match self.reference(checked.id, &checked.level) {
            None => Agreement::Missing,
            Some(m)
                if (m.compulsory, m.conflict)
                    == (checked.simulated_compulsory, checked.simulated_conflict) =>
            {
                Agreement::Equal
            }
            Some(m) => Agreement::Differs(m),
        }
    }
}

/// How a reference's modelled counts compare with the simulator's, at one level.
enum Agreement<'r> {
    /// The level has no model counts (the model did not finish it): nothing to compare.
    NotModelled,
    /// The level was modelled but not this reference.
    Missing,
    /// The same compulsory and conflict misses.
    Equal,
    /// Other compulsory or conflict misses (the same total split otherwise included).
    Differs(&'r MissesReference),
}

/// `L1 a[i-1] (5:12): model 384 misses (64 compulsory, 320 conflict), simulator 64 (64, 0)`.
fn difference_line(modelled: &MissesReference, checked: &CheckReference) -> String {
    let place = match modelled.label.place() {
        p if p.is_empty() => p,
        p => format!(" ({p})"),
    };
    format!(
        "{} {}{place}: model {} misses ({} compulsory, {} conflict), simulator {} ({}, {})",
        checked.level,
        modelled.label.text,
        modelled.misses,
        modelled.compulsory,
        modelled.conflict,
        checked.simulated_misses,
        checked.simulated_compulsory,
        checked.simulated_conflict
    )
}

/// A reference's (or, summed, a level's) accesses and misses at one level, as the model or the
/// simulator counts them; the other fields of the report follow from these.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    accesses: u64,
    compulsory: u64,
    /// Capacity and conflict misses together (spec 000's conflict misses under LRU).
    conflict: u64,
}

impl Counts {
    /// A model count, whose negative values (which it never gives) count as 0.
    fn modelled(r: &ReferenceMisses) -> Counts {
        Counts {
            accesses: to_u64(r.accesses),
            compulsory: to_u64(r.compulsory),
            conflict: to_u64(r.conflict),
        }
    }

    /// The simulator's count, whose misses past the compulsory ones are the model's conflict
    /// misses.
    fn simulated(r: &RefStats) -> Counts {
        Counts {
            accesses: r.accesses,
            compulsory: r.compulsory,
            conflict: r.misses - r.compulsory,
        }
    }

    fn misses(self) -> u64 {
        self.compulsory + self.conflict
    }

    fn hits(self) -> u64 {
        self.accesses.saturating_sub(self.misses())
    }

    fn add(&mut self, other: Counts) {
        self.accesses += other.accesses;
        self.compulsory += other.compulsory;
        self.conflict += other.conflict;
    }
}

impl MissesReference {
    fn new(
        id: usize,
        label: &RefLabel,
        level: &str,
        counts: Counts,
        pieces: Vec<PieceCounts>,
    ) -> MissesReference {
        MissesReference {
            id,
            label: label.clone(),
            level: level.to_owned(),
            accesses: counts.accesses,
            hits: counts.hits(),
            misses: counts.misses(),
            compulsory: counts.compulsory,
            capacity: None,
            conflict: counts.conflict,
            pieces,
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            accesses: self.accesses,
            compulsory: self.compulsory,
            conflict: self.conflict,
        }
    }
}

impl MissesLevel {
    /// A level as the model left it: its geometry, and no counts yet (or why it has none).
    fn modelled(config: &LevelConfig, outcome: &LevelOutcome) -> MissesLevel {
        MissesLevel {
            name: config.name.clone(),
            size_bytes: config.size_bytes,
            line_bytes: config.line_bytes,
            ways: config.ways,
            sets: config.sets(),
            accesses: None,
            hits: None,
            misses: None,
            compulsory: None,
            capacity: None,
            conflict: None,
            fill_bytes: None,
            method: outcome.refs.is_ok().then_some(METHOD_MODEL),
            duration_s: outcome.duration_s,
            error: outcome.refs.as_ref().err().cloned(),
            model_error: None,
            explain: outcome.explain.clone(),
            error_names_simulator: outcome.error_points_to_simulate,
        }
    }

    /// Sets the level's totals, its references' counts summed.
    fn set_counts(&mut self, total: Counts) {
        self.accesses = Some(total.accesses);
        self.hits = Some(total.hits());
        self.misses = Some(total.misses());
        self.compulsory = Some(total.compulsory);
        self.conflict = Some(total.conflict);
        self.fill_bytes = Some(total.misses().saturating_mul(self.line_bytes));
    }
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
    let program = program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout)
        .map_err(|e| kernel_request_error(&loaded.origin, e, listener))?;
    let arrays = array_ranges(&program);
    if request.check {
        check_work(&loaded)?;
    }
    // Only counts can come from either: explanations, sources and the check need the model.
    let race = (!request.check && !request.explain && !request.sources && !request.model_only)
        .then(|| Race::start(&loaded, levels, &arrays))
        .flatten();
    let levels_request = LevelsRequest {
        explain: request.explain,
        sources: request.sources,
        stop: race.as_ref().map(|r| r.done.as_ref()),
        ..request.levels_request(request.define)
    };
    let modelled = model_covered_levels(&levels_request, levels);
    let labels = loaded.kernel.reference_labels();
    let mut report = build_report(&loaded, levels, &modelled, &labels);
    if let Some(simulated) = race.and_then(|r| r.finished()) {
        let race_s = start.elapsed().as_secs_f64();
        take_the_simulators(&mut report, levels, simulated, &labels, race_s, listener);
    }
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
        let (check, mut each) = check(&loaded, levels, &report, &arrays)?;
        report.check = Some(check);
        let wanted = |l: &usize| fallback && missing.contains(l);
        each.drain(..)
            .enumerate()
            .filter(|(l, _)| wanted(l))
            .collect()
    } else if fallback {
        let limit_s = request.time_limit_s;
        simulate_within_limit(&loaded, levels, &arrays, &missing, limit_s, &mut report)?
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

/// Models the levels the model covers; the others get their reason as their error, so that
/// the simulator counts them as it does a level the model did not finish.
fn model_covered_levels(request: &LevelsRequest<'_>, levels: &[LevelConfig]) -> Vec<LevelOutcome> {
    let covered: Vec<LevelConfig> = levels
        .iter()
        .filter(|l| not_covered(l).is_none())
        .cloned()
        .collect();
    if covered.len() == levels.len() {
        return model_levels(request, levels);
    }
    let mut modelled = if covered.is_empty() {
        Vec::new()
    } else {
        model_levels(request, &covered)
    }
    .into_iter();
    let unmodelled = |why: String| LevelOutcome {
        refs: Err(why),
        explain: None,
        duration_s: 0.0,
        formulas: None,
        chambers: None,
        error_points_to_simulate: false,
    };
    levels
        .iter()
        .map(|l| match not_covered(l) {
            // `model_levels` gives one outcome per level it is given.
            None => modelled
                .next()
                .unwrap_or_else(|| unmodelled(format!("level {} was not modelled", l.name))),
            Some(why) => unmodelled(why),
        })
        .collect()
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
    arrays: &[Range<u64>],
    missing: &[usize],
    limit_s: f64,
    report: &mut MissesReport,
) -> Result<Vec<(usize, AloneLevel)>, AnalyticError> {
    let (estimate, stream) = match estimate(loaded, missing.len(), cores(), limit_s) {
        Ok(got) => got,
        Err(AnalyticError::Kernel(e)) => {
            for &l in missing {
                add_simulator_refusal(
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
            add_simulator_refusal(report, l, &why);
        }
        return Ok(Vec::new());
    };
    let picked: Vec<LevelConfig> = missing.iter().map(|&l| levels[l].clone()).collect();
    let refs = loaded.kernel.references().count();
    let simulated = simulate_each_level_alone(&stream, refs, &picked, arrays);
    let mut counted = Vec::new();
    for (&l, sim) in missing.iter().zip(simulated) {
        match sim {
            Ok(alone) => counted.push((l, alone)),
            // A level the simulator cannot hold (a set too large to store) stays missing.
            Err(e @ CacheError::Geometry { .. }) => add_simulator_refusal(
                report,
                l,
                &format!("the simulator cannot run it either: {e}"),
            ),
            Err(e) => return Err(from_simulator(e)),
        }
    }
    Ok(counted)
}

/// Why a level's simulation was not tried: its estimate.
fn past_the_limit(estimate: &SimulationEstimate) -> String {
    let accesses = match estimate.accesses {
        Some(n) => format!("its {n} accesses"),
        None => format!("up to {} accesses", estimate.accesses_bound),
    };
    format!(
        "simulating it would take {} for {accesses}, past the limit too",
        about_seconds(estimate.seconds)
    )
}

/// `about 9 s`, `about 0.4 s`, `under 0.1 s`: an estimate to the precision it has, never a
/// `0 s` that a short limit would make read as free.
fn about_seconds(seconds: f64) -> String {
    if seconds < 0.1 {
        "under 0.1 s".to_owned()
    } else if seconds < 10.0 {
        format!("about {seconds:.1} s")
    } else {
        format!("about {seconds:.0} s")
    }
}

/// Adds to a level's error why the simulator did not count it either.
fn add_simulator_refusal(report: &mut MissesReport, level: usize, why: &str) {
    let level = &mut report.levels[level];
    if let Some(e) = &mut level.error {
        e.push_str("; ");
        e.push_str(why);
        level.error_names_simulator = true;
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
    let Some(l) = report.levels.iter().position(|l| l.name == config.name) else {
        return;
    };
    let counted = labels.iter().enumerate().map(|(id, label)| {
        let counts = Counts::simulated(&alone.hierarchy.ref_stats(id, 0));
        let reference = MissesReference::new(id, label, &config.name, counts, Vec::new());
        (reference, label.array.as_deref().unwrap_or_default())
    });
    record_level(report, l, counted);
    let level = &mut report.levels[l];
    level.method = Some(METHOD_SIMULATED);
    level.duration_s = simulation_start_s + alone.duration_s;
    level.model_error = level.error.take();
}

/// The levels the model had not finished when the simulator running beside it ended, with the
/// simulator's counts; a level the simulator could not count keeps the model's stop as its
/// error.
fn take_the_simulators(
    report: &mut MissesReport,
    levels: &[LevelConfig],
    simulated: Vec<Result<AloneLevel, CacheError>>,
    labels: &[RefLabel],
    race_s: f64,
    listener: &dyn Listener,
) {
    for (config, alone) in levels.iter().zip(simulated) {
        let unfinished = report
            .levels
            .iter()
            .any(|l| l.name == config.name && l.error.is_some());
        if let (true, Ok(alone)) = (unfinished, alone) {
            fill_simulated(report, config, alone, labels, 0.0);
            let covered = not_covered(config).is_none();
            if let Some(level) = report.levels.iter_mut().find(|l| l.name == config.name) {
                // Not a failure of the model when it covers the level: it was still counting
                // when the simulator ended.
                if covered {
                    level.model_error = None;
                }
                level.duration_s = race_s;
            }
            listener.note(&format!(
                "{}: counted by the exact simulator, which finished before the model",
                config.name
            ));
        }
    }
}

/// Adds the `l`-th level's references (each with its array's name) to the report's references
/// and arrays, and their sum to the level.
fn record_level<'a>(
    report: &mut MissesReport,
    l: usize,
    counted: impl IntoIterator<Item = (MissesReference, &'a str)>,
) {
    let mut total = Counts::default();
    for (reference, array) in counted {
        let counts = reference.counts();
        total.add(counts);
        add_to_array(&mut report.arrays, array, &reference.level, counts);
        report.references.push(reference);
    }
    report.levels[l].set_counts(total);
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
            let hint = if l.error_names_simulator {
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
pub(super) fn check_work(loaded: &LoadedKernel) -> Result<(), AnalyticError> {
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

/// The report of the levels the model counted; the others have their errors.
fn build_report(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    modelled: &[LevelOutcome],
    labels: &[RefLabel],
) -> MissesReport {
    let mut report = MissesReport {
        kernel: loaded.origin.clone(),
        params: loaded.param_map(),
        model: "spec 000 (LRU, write-allocate); each level modelled alone, seeing every access",
        levels: (levels.iter().zip(modelled))
            .map(|(config, outcome)| MissesLevel::modelled(config, outcome))
            .collect(),
        references: Vec::new(),
        arrays: Vec::new(),
        sources: None,
        check: None,
        duration_s: 0.0,
    };
    for (l, (config, outcome)) in levels.iter().zip(modelled).enumerate() {
        let Ok(refs) = &outcome.refs else { continue };
        let counted = refs.iter().zip(labels).enumerate().map(|(id, (r, label))| {
            let counts = Counts::modelled(r);
            let reference = MissesReference::new(id, label, &config.name, counts, r.pieces.clone());
            (reference, r.array.as_str())
        });
        record_level(&mut report, l, counted);
    }
    report
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

/// Adds a reference's counts to its array's at `level`.
fn add_to_array(arrays: &mut Vec<MissesArray>, array: &str, level: &str, counts: Counts) {
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
    a.accesses += counts.accesses;
    a.compulsory += counts.compulsory;
    a.conflict += counts.conflict;
    a.misses += counts.misses();
}

/// Where the kernel's arrays lie, for sizing the simulator's sets of lines seen (an array of
/// unknown size, which a program with every parameter bound does not have, as empty).
fn array_ranges(program: &Program) -> Vec<Range<u64>> {
    let range = |array: &Array| {
        let bytes = array.byte_range()?;
        let first = u64::try_from(*bytes.start()).ok()?;
        let last = u64::try_from(*bytes.end()).ok()?;
        Some(first..last.checked_add(1)?)
    };
    program
        .arrays
        .iter()
        .map(|a| range(a).unwrap_or_default())
        .collect()
}

/// Simulates each level alone (the model's assumption), counting compulsory misses (the
/// model's conflict misses are the rest), and compares.
/// Returns the simulated levels too, in order.
fn check(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    report: &MissesReport,
    arrays: &[Range<u64>],
) -> Result<(Check, Vec<AloneLevel>), AnalyticError> {
    let stream = Stream::new(&loaded.kernel, &loaded.params, &loaded.layout)?;
    let refs = loaded.kernel.references().count();
    // One thread per level, as the model runs: the levels are independent simulations.
    let simulated = simulate_each_level_alone(&stream, refs, levels, arrays);
    let mut out = Check {
        equal: None,
        compared: (report.levels.iter())
            .filter(|l| l.error.is_none())
            .map(|l| l.name.clone())
            .collect(),
        levels: Vec::new(),
        references: Vec::new(),
    };
    let mut each = Vec::with_capacity(levels.len());
    for (l, alone) in levels.iter().zip(simulated) {
        let alone = alone.map_err(from_simulator)?;
        out.levels.push(check_level(&l.name, &alone));
        let checked = (0..refs).map(|id| {
            let simulated = Counts::simulated(&alone.hierarchy.ref_stats(id, 0));
            check_reference(report.reference(id, &l.name), id, &l.name, simulated)
        });
        out.references.extend(checked);
        each.push(alone);
    }
    out.equal = (!out.compared.is_empty()).then(|| {
        (out.references.iter()).all(|c| {
            matches!(
                report.agreement(c),
                Agreement::NotModelled | Agreement::Equal
            )
        })
    });
    Ok((out, each))
}

/// A level's totals, simulated alone.
fn check_level(name: &str, alone: &AloneLevel) -> CheckLevel {
    let s = &alone.hierarchy.stats()[0];
    CheckLevel {
        name: name.to_owned(),
        misses: s.misses,
        compulsory: s.compulsory,
        conflict: s.misses - s.compulsory,
        duration_s: alone.duration_s,
    }
}

/// A reference's simulated counts beside its modelled ones (`model`, when the level has them).
fn check_reference(
    model: Option<&MissesReference>,
    id: usize,
    level: &str,
    simulated: Counts,
) -> CheckReference {
    CheckReference {
        id,
        level: level.to_owned(),
        model_misses: model.map(|m| m.misses),
        simulated_misses: simulated.misses(),
        simulated_compulsory: simulated.compulsory,
        simulated_conflict: simulated.conflict,
        difference: model.map(|m| m.misses as i64 - simulated.misses() as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(name: &str, error: Option<&str>) -> MissesLevel {
        modelled(
            name,
            error.map_or(Ok(Vec::new()), |e| Err(e.to_owned())),
            false,
        )
    }

    fn modelled(
        name: &str,
        refs: Result<Vec<crate::ReferenceMisses>, String>,
        error_points_to_simulate: bool,
    ) -> MissesLevel {
        let config = LevelConfig::new(name, 1024, 1, 64).unwrap();
        let outcome = LevelOutcome {
            refs,
            explain: None,
            duration_s: 0.0,
            formulas: None,
            chambers: None,
            error_points_to_simulate,
        };
        MissesLevel::modelled(&config, &outcome)
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
                equal: Some(false),
                compared: Vec::new(),
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
    fn short_estimates_are_not_rounded_to_zero() {
        assert_eq!(super::about_seconds(0.0004), "under 0.1 s");
        assert_eq!(super::about_seconds(0.42), "about 0.4 s");
        assert_eq!(super::about_seconds(9.4), "about 9.4 s");
        assert_eq!(super::about_seconds(93.6), "about 94 s");
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

    /// The warnings a listener was given.
    #[derive(Default)]
    struct Warnings(std::sync::Mutex<Vec<String>>);

    impl Listener for Warnings {
        fn warn(&self, message: &str) {
            self.0.lock().unwrap().push(message.to_owned());
        }
    }

    #[test]
    fn a_missing_level_points_to_simulate_unless_its_error_speaks_of_the_simulator() {
        let too_complex = AnalyticError::Sets(loopscope_polyhedral::PolyError::TooComplex {
            what: "vertices",
            needed: 9,
            limit: 8,
        });
        // The flag stands for these words: the warning must not repeat them.
        assert!(too_complex.points_to_simulate());
        assert!(too_complex.to_string().contains("`loopscope simulate`"));
        let mut report = report(
            vec![
                level("L1", Some("stopped")),
                level("L2", Some("stopped")),
                modelled("L3", Err(too_complex.to_string()), true),
            ],
            (0, 0),
        );
        add_simulator_refusal(&mut report, 1, "simulating it would take about 9 s");
        let warnings = Warnings::default();
        warn_of_levels(&report, "k.c", &warnings);
        let hint = "; `loopscope simulate` counts it exactly";
        let got = warnings.0.into_inner().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].ends_with(&format!("stopped{hint}")), "{}", got[0]);
        assert!(
            got[1].ends_with("stopped; simulating it would take about 9 s"),
            "{}",
            got[1]
        );
        assert!(!got[2].contains(hint), "{}", got[2]);
    }
}
