//! The model's orchestration, as `loopscope misses` and `roofline --traffic model` run it: every
//! cache level in a child process that can be stopped at the time limit ([`model_levels`], the
//! child's side [`run_level_job`]), and on top the four forms of `misses`: counts per reference
//! with `--sources` and `--check` against the simulator, `--scan` over one parameter's values,
//! and formulas in one parameter or chambers in several (`--symbolic`). [`misses`] is the one
//! entry point; its result serialises as the command's JSON document.

mod chambers;
mod counts;
mod fallback;
mod formulas;
mod level_job;
mod process;
mod scan;

use std::path::Path;
use std::time::Instant;

use loopscope_cache::{LevelConfig, Replacement};
use loopscope_kernel::Listener;
use serde::Serialize;

use crate::AnalyticError;

pub use chambers::{AtPoint, ChambersLevel, ChambersReference, ChambersReport, Written};
pub use counts::{
    Check, CheckLevel, CheckReference, ConflictSources, Evictor, MissesArray, MissesLevel,
    MissesReference, MissesReport,
};
pub use fallback::{
    MissesWait, SIMULATED_ACCESSES_PER_S, SimulationEstimate, accesses_bound, misses_wait,
};
pub use formulas::{AtCounts, AtValue, FormulasLevel, FormulasReference, FormulasReport, Geometry};
pub use level_job::{LevelJob, LineSink, SymbolicParameter, run_level_job, symbolic_parameters};
pub use process::{
    LevelChambers, LevelCommand, LevelLine, LevelOutcome, LevelsRequest, children, cores,
    model_levels, stop_level_processes,
};
pub use scan::{
    Failure, LevelInfo, RangeReport, SPIKE_RULE, ScanRange, ScanReport, SpikeReport, ValueLevel,
    ValueReport, parse_range,
};

/// What `loopscope misses` was asked.
#[derive(Debug, Clone, Copy)]
pub struct MissesRequest<'a> {
    /// The kernel file.
    pub kernel: &'a Path,
    /// Values of its parameters (`-D`).
    pub define: &'a [(String, i64)],
    /// Array base addresses (`--base A=0,B=800`).
    pub base: Option<&'a str>,
    /// Also simulate each level alone and compare.
    pub check: bool,
    /// Also return the intermediate sets of spec 000.
    pub explain: bool,
    /// Also say which references compete for the sets of the conflict misses.
    pub sources: bool,
    /// Bound on isl's elementary operations for each reference of a level.
    pub max_operations: u64,
    /// Seconds each level may take: the model, then for a level it did not finish the simulator
    /// (unless `model_only`).
    pub time_limit_s: f64,
    /// A level the model does not finish within the time limit is reported missing, not
    /// simulated.
    pub model_only: bool,
    /// Formulas in these parameters, `NAME[=LO..HI][,NAME...]`.
    pub symbolic: Option<&'a str>,
    /// With `symbolic`: points to evaluate the formulas at, `NAME=VALUE[,NAME=VALUE...]` each.
    pub at: &'a [String],
    /// Model every value of one parameter, `NAME=LO..HI[:STEP]`.
    pub scan: Option<&'a str>,
    /// How to start a level process.
    pub command: &'a LevelCommand,
}

impl<'a> MissesRequest<'a> {
    /// The level processes' request for the kernel with the values `define`: counts only (no
    /// explanation, sources or formulas, which a caller adds).
    fn levels_request(&self, define: &'a [(String, i64)]) -> LevelsRequest<'a> {
        LevelsRequest::counts(
            self.kernel,
            define,
            self.base,
            self.max_operations,
            self.time_limit_s,
            self.command,
        )
    }
}

/// The result of `misses`, one of its four forms; it serialises as the form's document.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Misses {
    /// Counts per level and reference.
    Counts(MissesReport),
    /// `--scan`: counts at every value of one parameter, and the spikes.
    Scan(ScanReport),
    /// `--symbolic NAME`: formulas in one parameter.
    Formulas(FormulasReport),
    /// `--symbolic X,Z`: chambers in several.
    Chambers(ChambersReport),
}

impl Misses {
    /// Warnings for output that does not show what the text lists below its tables (the levels
    /// a scan could not model at some values; JSON has them in each value's `error`).
    pub fn unlisted_warnings(&self) -> Vec<String> {
        match self {
            Misses::Scan(report) => report.failure_warnings(),
            _ => Vec::new(),
        }
    }
}

/// Runs `misses`: checks the request, then models every level of `levels` (innermost first) in
/// level processes, in the form the request asks for. Warnings (levels not modelled, unused
/// `-D` values) and progress go to `listener`. Fails when no level could be modelled.
pub fn misses(
    request: &MissesRequest<'_>,
    levels: &[LevelConfig],
    listener: &dyn Listener,
) -> Result<Misses, AnalyticError> {
    let start = Instant::now();
    if let Some(range) = checked_request(request, levels)? {
        return scan::run(request, &range, levels, listener).map(Misses::Scan);
    }
    if let Some(list) = request.symbolic {
        let parameters = symbolic_parameters(list)
            .map_err(|e| AnalyticError::Request(format!("--symbolic {e}")))?;
        return match parameters.as_slice() {
            [] => Err(AnalyticError::Request(
                "--symbolic: name a parameter, e.g. --symbolic N".into(),
            )),
            [one] => formulas::run(request, *one, levels, listener).map(Misses::Formulas),
            _ => chambers::run(request, &parameters, levels, listener).map(Misses::Chambers),
        };
    }
    counts::run(request, levels, listener, start).map(Misses::Counts)
}

/// Checks what [`misses`] is asked before anything runs; returns the `--scan` range, if any.
fn checked_request(
    request: &MissesRequest<'_>,
    levels: &[LevelConfig],
) -> Result<Option<ScanRange>, AnalyticError> {
    let scan = request
        .scan
        .map(|text| scan::parse_request(request, text))
        .transpose()?;
    if !request.at.is_empty() && request.symbolic.is_none() {
        return Err(AnalyticError::Request(
            "--at evaluates formulas: it needs --symbolic NAME".into(),
        ));
    }
    // Counts fall back on the simulator for a level the model does not cover; formulas and
    // scans have no such fallback.
    if request.symbolic.is_some() || scan.is_some() {
        check_model_caches(levels)?;
    }
    if request.check {
        for level in levels {
            level.check_simulable().map_err(|e| {
                AnalyticError::Request(format!(
                    "--check simulates every level: {e}; without --check the model counts it"
                ))
            })?;
        }
    }
    Ok(scan)
}

/// The model is spec 000's cache: LRU, write-allocate. Anything else would be silently wrong.
fn check_model_caches(levels: &[LevelConfig]) -> Result<(), AnalyticError> {
    for l in levels {
        if let Some(why) = not_covered(l) {
            return Err(AnalyticError::Request(format!(
                "{why} (use `loopscope simulate`, or `misses` without --symbolic and --scan, \
                 which simulates such a level)"
            )));
        }
    }
    Ok(())
}

/// Why the model does not cover `level` (spec 000's cache is LRU and write-allocate), if it
/// does not.
fn not_covered(level: &LevelConfig) -> Option<String> {
    let mut policies = Vec::new();
    if level.replacement != Replacement::Lru {
        policies.push(level.replacement.name());
    }
    if !level.write_allocate {
        policies.push("no-write-allocate");
    }
    (!policies.is_empty()).then(|| {
        format!(
            "level {} is {}, which the analytic model (LRU, write-allocate caches) does not cover",
            level.name,
            policies.join(", ")
        )
    })
}
