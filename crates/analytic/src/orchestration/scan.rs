//! `loopscope misses --scan NAME=LO..HI[:STEP]`: the exact model at every value of one
//! parameter, and the values where conflict misses spike (a power-of-two leading dimension in a
//! cache of few ways). `--symbolic` cannot find these: a parameter that sizes an array changes
//! the mapping of lines to sets with its value, so its counts are no quasi-polynomial, and each
//! value has to be modelled on its own.

use std::collections::BTreeMap;
use std::time::Instant;

use loopscope_cache::LevelConfig;
use loopscope_kernel::{Listener, LoadedKernel, Silent, read_kernel_file_with_values};
use serde::Serialize;

use super::MissesRequest;
use super::counts::to_u64;
use super::process::{LevelOutcome, LevelsRequest, children, cores, model_levels};
use crate::{AnalyticError, ReferenceMisses, program_from_kernel};

/// At most this many values per scan: each costs one model run per level.
const MAX_VALUES: u64 = 4096;
/// Positions on each side of a value whose conflict fractions make that side's median.
const WINDOW_POSITIONS: usize = 8;
/// A spike's conflict fraction is at least this times each side's median …
const SPIKE_RATIO: f64 = 2.0;
/// … and at least this much (a fraction of the accesses) above it, so that noise on a level
/// with almost no conflict misses (0.1 % against 0.04 %) is no spike.
const SPIKE_MARGIN: f64 = 0.01;

/// The spike rule in words, for the output.
pub const SPIKE_RULE: &str = "conflict misses per access at least 2× the median of the 8 values \
                          before it and of the 8 after it, and at least 1 percentage point above \
                          each (the first and last values are not judged)";

/// A checked `--scan` request: the parameter and its values `lo, lo + step, …` up to `hi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRange {
    /// The parameter scanned.
    pub name: String,
    /// First value.
    pub lo: i64,
    /// Last value (included when `hi − lo` is a multiple of `step`).
    pub hi: i64,
    /// Distance between values, at least 1.
    pub step: u64,
}

impl ScanRange {
    /// How many values the range holds (at least 1, since `lo ≤ hi`).
    pub fn count(&self) -> u64 {
        let span = u64::try_from(i128::from(self.hi) - i128::from(self.lo)).unwrap_or(u64::MAX);
        span / self.step.max(1) + 1
    }

    /// Every value, in order.
    pub fn values(&self) -> Vec<i64> {
        let step = i128::from(self.step);
        (0..i128::from(self.count()))
            .filter_map(|k| i64::try_from(i128::from(self.lo) + k * step).ok())
            .collect()
    }
}

/// Checks that `--scan` goes with no flag it cannot honour and parses its range: every
/// problem is bad input (exit 2) in one line.
pub(super) fn parse_request(
    request: &MissesRequest<'_>,
    text: &str,
) -> Result<ScanRange, AnalyticError> {
    let others = [
        ("--symbolic", request.symbolic.is_some()),
        ("--check", request.check),
        ("--sources", request.sources),
        ("--explain", request.explain),
        ("--at", !request.at.is_empty()),
    ];
    if let Some((flag, _)) = others.iter().find(|(_, given)| *given) {
        return Err(AnalyticError::Request(format!(
            "--scan models each value's counts only: it cannot be combined with {flag}"
        )));
    }
    parse_range(text).map_err(|e| AnalyticError::Request(format!("--scan {text}: {e}")))
}

/// Parses `NAME=LO..HI[:STEP]`, at most 4096 values.
pub fn parse_range(text: &str) -> Result<ScanRange, String> {
    const SHAPE: &str = "expected NAME=LO..HI or NAME=LO..HI:STEP";
    let (name, range) = text.split_once('=').ok_or(SHAPE)?;
    let (lo, rest) = range.split_once("..").ok_or(SHAPE)?;
    let (hi, step) = match rest.split_once(':') {
        Some((hi, step)) => (hi, Some(step)),
        None => (rest, None),
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(SHAPE.into());
    }
    let integer = |what: &str, v: &str| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| format!("{what} is not a 64-bit integer: `{v}`"))
    };
    let (lo, hi) = (integer("LO", lo)?, integer("HI", hi)?);
    let step = match step {
        None => 1,
        Some(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("STEP is not a positive integer: `{s}`"))?,
    };
    if step == 0 {
        return Err("STEP must be at least 1".into());
    }
    if lo > hi {
        return Err(format!("LO ({lo}) is above HI ({hi})"));
    }
    let range = ScanRange {
        name: name.to_owned(),
        lo,
        hi,
        step,
    };
    if range.count() > MAX_VALUES {
        return Err(format!(
            "{} values, at most {MAX_VALUES} (narrow the range or raise STEP)",
            range.count()
        ));
    }
    Ok(range)
}

/// The result of `misses --scan`, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct ScanReport {
    /// The kernel file.
    pub kernel: String,
    /// The fixed parameters (`-D`).
    pub params: BTreeMap<String, i64>,
    /// The parameter scanned.
    pub parameter: String,
    /// Its values.
    pub range: RangeReport,
    /// What was modelled, in words.
    pub model: &'static str,
    /// What makes a spike, in words.
    pub spike_rule: &'static str,
    /// Values modelled at the same time (each with all its levels at once).
    pub values_at_once: usize,
    /// The cache levels.
    pub levels: Vec<LevelInfo>,
    /// Per value, in order.
    pub values: Vec<ValueReport>,
    /// Every spike, level by level, in value order.
    pub spikes: Vec<SpikeReport>,
    /// Seconds the scan took.
    pub duration_s: f64,
}

/// The values scanned: `lo, lo + step, …` up to `hi`.
#[derive(Debug, Serialize)]
pub struct RangeReport {
    /// First value.
    pub lo: i64,
    /// Last value, when `hi − lo` is a multiple of `step`.
    pub hi: i64,
    /// Distance between values.
    pub step: u64,
}

/// A cache level's geometry.
#[derive(Debug, Serialize)]
pub struct LevelInfo {
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
}

/// The model at one value of the parameter.
#[derive(Debug, Serialize)]
pub struct ValueReport {
    /// The parameter's value.
    pub value: i64,
    /// Why the kernel refuses this value (an empty or negative array extent, a subscript out of
    /// its array); its levels then have no counts and no error of their own.
    pub refused: Option<String>,
    /// Levels in the order of `levels`; empty when the value's worker failed.
    pub levels: Vec<ValueLevel>,
    /// Wall-clock seconds of the value (its levels ran at once).
    pub duration_s: f64,
}

/// One level at one value; the counts are `null` when it could not be modelled (`error`).
#[derive(Debug, Serialize)]
pub struct ValueLevel {
    /// The level's name.
    pub name: String,
    /// Accesses.
    pub accesses: Option<u64>,
    /// Misses.
    pub misses: Option<u64>,
    /// Compulsory misses.
    pub compulsory: Option<u64>,
    /// Conflict misses, capacity misses included, as in `misses`.
    pub conflict: Option<u64>,
    /// Conflict misses per access; `null` also when the value makes no accesses.
    pub conflict_fraction: Option<f64>,
    /// Whether the value is a spike at this level.
    pub spike: bool,
    /// Seconds the level took.
    pub duration_s: f64,
    /// Why the level could not be modelled at this value.
    pub error: Option<String>,
}

/// A value whose conflict misses spike at a level.
#[derive(Debug, Serialize)]
pub struct SpikeReport {
    /// The level's name.
    pub level: String,
    /// The parameter's value.
    pub value: i64,
    /// Its conflict misses per access.
    pub conflict_fraction: f64,
    /// The bar the spike cleared: the higher of the median conflict fractions of the 8 values
    /// before it and of the 8 after it.
    pub neighbourhood_median: f64,
}

/// Runs `misses --scan`.
pub(super) fn run(
    request: &MissesRequest<'_>,
    range: &ScanRange,
    levels: &[LevelConfig],
    listener: &dyn Listener,
) -> Result<ScanReport, AnalyticError> {
    let start = Instant::now();
    let first = load_first(request, range, listener)?;
    let values = range.values();
    let at_once = values_at_once(children(levels, false).len());
    listener.begin(&format!("scanning {}", range.name), values.len() as u64);
    let model = |value| model_value(request, &range.name, value, levels);
    let modelled = model_values(&model, &values, at_once, listener);
    listener.end();
    let mut params = first.param_map();
    params.remove(&range.name);
    let mut report = ScanReport {
        kernel: first.origin.clone(),
        params,
        parameter: range.name.clone(),
        range: RangeReport {
            lo: range.lo,
            hi: range.hi,
            step: range.step,
        },
        model: "spec 000 (LRU, write-allocate); each level modelled alone at every value",
        spike_rule: SPIKE_RULE,
        values_at_once: at_once,
        levels: levels.iter().map(level_info).collect(),
        values: modelled,
        spikes: Vec::new(),
        duration_s: 0.0,
    };
    mark_spikes(&mut report);
    report.duration_s = start.elapsed().as_secs_f64();
    nothing_modelled(&report)?;
    Ok(report)
}

/// Fails when no level could be modelled at any value the kernel takes.
fn nothing_modelled(report: &ScanReport) -> Result<(), AnalyticError> {
    let failures = report.not_modelled();
    let taken = report.values.iter().filter(|v| v.refused.is_none()).count();
    let cells = taken * report.levels.len();
    if failures.iter().map(|f| f.values.len()).sum::<usize>() == cells {
        let reasons: Vec<String> = failures
            .iter()
            .map(|f| format!("{}: {}", f.level, f.reason))
            .collect();
        return Err(AnalyticError::NotModelled(format!(
            "{}: no cache level could be modelled at any value of {} ({})",
            report.kernel,
            report.parameter,
            reasons.join("; ")
        )));
    }
    Ok(())
}

impl ScanReport {
    /// The levels and values that could not be modelled, one entry per level and reason (the
    /// values the kernel refuses are in [`ScanReport::refused`]).
    pub fn not_modelled(&self) -> Vec<Failure<'_>> {
        let mut out: Vec<Failure<'_>> = Vec::new();
        for v in self.values.iter().filter(|v| v.refused.is_none()) {
            if v.levels.is_empty() {
                for l in &self.levels {
                    add_failure(
                        &mut out,
                        &l.name,
                        "the scan's worker thread failed",
                        v.value,
                    );
                }
            }
            for l in &v.levels {
                if let Some(reason) = &l.error {
                    add_failure(&mut out, &l.name, reason, v.value);
                }
            }
        }
        out
    }

    /// The values the kernel refuses, one entry per reason (`level` empty).
    pub fn refused(&self) -> Vec<Failure<'_>> {
        let mut out: Vec<Failure<'_>> = Vec::new();
        for v in &self.values {
            if let Some(reason) = &v.refused {
                add_failure(&mut out, "", reason, v.value);
            }
        }
        out
    }

    /// One warning per reason a value was refused and per level and reason not modelled, for
    /// output that does not list them (JSON has them in each value's `refused` and `error`).
    pub fn failure_warnings(&self) -> Vec<String> {
        let refused = self.refused().into_iter().map(|f| {
            format!(
                "{} = {} refused: {}",
                self.parameter,
                f.values_text(),
                f.reason
            )
        });
        let not_modelled = self.not_modelled().into_iter().map(|f| {
            format!(
                "{} not modelled at {} = {}: {}",
                f.level,
                self.parameter,
                f.values_text(),
                f.reason
            )
        });
        refused.chain(not_modelled).collect()
    }
}

/// The kernel at the first value it takes, with the checks that make a bad request exit 2:
/// `NAME` is a parameter and the kernel loads at some value (every other parameter has a `-D`
/// value). A value it refuses (an empty array at `N = 0`) is reported as such by its own run,
/// so the scan goes on from the next; when it refuses every value, the first refusal is the
/// error.
fn load_first(
    request: &MissesRequest<'_>,
    range: &ScanRange,
    listener: &dyn Listener,
) -> Result<LoadedKernel, AnalyticError> {
    let name = &range.name;
    let mut first_refusal = None;
    for value in range.values() {
        // Read with the values the run binds, so that products with parameters (a[j*N+i]) are
        // folded, the scanned one's included.
        let define = defines_at(request.define, name, value);
        let kernel = match read_kernel_file_with_values(request.kernel, &define) {
            Ok((_, kernel)) => kernel,
            Err(e) => {
                first_refusal.get_or_insert(e);
                continue;
            }
        };
        if !kernel.params.iter().any(|p| p == name) {
            return Err(AnalyticError::Request(format!(
                "--scan {name}: {} has no parameter `{name}` (it has: {})",
                kernel.origin,
                kernel.params.join(", ")
            )));
        }
        // A parameter without a value is missing at every value: the request's fault.
        kernel.param_values(&define)?;
        // Silent until a value loads: the warnings are those of the first value scanned.
        if let Err(e) = LoadedKernel::load(request.kernel, &define, request.base, &Silent) {
            first_refusal.get_or_insert(e);
            continue;
        }
        let loaded = LoadedKernel::load(request.kernel, &define, request.base, listener)?;
        program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout).map_err(|e| {
            let at = format!("at {name} = {value}: {e}");
            super::counts::kernel_request_error(&loaded.origin, at, listener)
        })?;
        return Ok(loaded);
    }
    Err(match first_refusal {
        Some(e) => AnalyticError::from(e),
        None => AnalyticError::Request(format!("--scan {name}: no value to scan")),
    })
}

/// The `-D` values with `name` set to `value` (replacing any `-D` for it).
fn defines_at(define: &[(String, i64)], name: &str, value: i64) -> Vec<(String, i64)> {
    define
        .iter()
        .filter(|(n, _)| n != name)
        .cloned()
        .chain([(name.to_owned(), value)])
        .collect()
}

/// Values modelled at once. Each value runs its child processes ([`children`], one per line
/// size), all at once, and the time limits are wall-clock: more processes than cores would stop
/// levels that finish alone. So a second value runs beside the first only when both values'
/// children fit the cores.
fn values_at_once(children: usize) -> usize {
    (cores() / children.max(1)).max(1)
}

/// Threads for each child: the cores left to it when [`values_at_once`] values run side by side
/// (one when the children already fill the cores).
fn threads_per_child(children: usize) -> usize {
    let children = children.max(1);
    (cores() / (values_at_once(children) * children)).max(1)
}

/// Models `values` in order, `at_once` at a time, each by `model`; results in value order.
fn model_values(
    model: &(dyn Fn(i64) -> ValueReport + Sync),
    values: &[i64],
    at_once: usize,
    listener: &dyn Listener,
) -> Vec<ValueReport> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&value) = values.get(i) else {
                return done;
            };
            done.push((i, model(value)));
            listener.advance(1);
        }
    };
    let mut slots: Vec<Option<ValueReport>> = values.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..at_once.clamp(1, values.len().max(1)))
            .map(|_| scope.spawn(worker))
            .collect();
        for w in workers {
            for (i, report) in w.join().unwrap_or_default() {
                slots[i] = Some(report);
            }
        }
    });
    // A slot is empty only if its worker thread died; its value is then reported as failed.
    slots
        .into_iter()
        .zip(values)
        .map(|(slot, &value)| {
            slot.unwrap_or_else(|| ValueReport {
                value,
                refused: None,
                levels: Vec::new(),
                duration_s: 0.0,
            })
        })
        .collect()
}

/// Every level at one value: the kernel is bound in this process first (cheap), so that a
/// value the model cannot take fails once, not in each model process. Its warnings were given
/// at the first value.
fn model_value(
    request: &MissesRequest<'_>,
    name: &str,
    value: i64,
    levels: &[LevelConfig],
) -> ValueReport {
    let start = Instant::now();
    let define = defines_at(request.define, name, value);
    let loaded = match LoadedKernel::load(request.kernel, &define, request.base, &Silent) {
        Ok(loaded) => loaded,
        Err(e) => return refused_value(value, levels, e.to_string(), start),
    };
    let bound = program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout).map(|_| ());
    let outcomes: Vec<LevelOutcome> = match bound {
        Err(e) => levels
            .iter()
            .map(|_| LevelOutcome {
                refs: Err(e.to_string()),
                explain: None,
                duration_s: 0.0,
                formulas: None,
                chambers: None,
                error_points_to_simulate: e.points_to_simulate(),
            })
            .collect(),
        Ok(()) => model_levels(
            &LevelsRequest {
                threads_per_child: threads_per_child(children(levels, false).len()),
                ..request.levels_request(&define)
            },
            levels,
        ),
    };
    ValueReport {
        value,
        refused: None,
        levels: levels
            .iter()
            .zip(outcomes)
            .map(|(l, o)| value_level(l, o))
            .collect(),
        duration_s: start.elapsed().as_secs_f64(),
    }
}

/// A value the kernel refuses, for `reason`: every level without counts.
fn refused_value(
    value: i64,
    levels: &[LevelConfig],
    reason: String,
    start: Instant,
) -> ValueReport {
    ValueReport {
        value,
        refused: Some(reason),
        levels: levels
            .iter()
            .map(|l| ValueLevel::without_counts(l, 0.0))
            .collect(),
        duration_s: start.elapsed().as_secs_f64(),
    }
}

impl ValueLevel {
    /// `level` with no counts yet, after `duration_s` of work.
    fn without_counts(level: &LevelConfig, duration_s: f64) -> ValueLevel {
        ValueLevel {
            name: level.name.clone(),
            accesses: None,
            misses: None,
            compulsory: None,
            conflict: None,
            conflict_fraction: None,
            spike: false,
            duration_s,
            error: None,
        }
    }
}

/// One level's totals over its references.
fn value_level(level: &LevelConfig, outcome: LevelOutcome) -> ValueLevel {
    let mut out = ValueLevel::without_counts(level, outcome.duration_s);
    match outcome.refs {
        Err(e) => out.error = Some(e),
        Ok(refs) => {
            let sum = |pick: fn(&ReferenceMisses) -> i128| {
                refs.iter()
                    .fold(0u64, |s, r| s.saturating_add(to_u64(pick(r))))
            };
            let (accesses, compulsory, conflict) = (
                sum(|r| r.accesses),
                sum(|r| r.compulsory),
                sum(|r| r.conflict),
            );
            out.accesses = Some(accesses);
            out.compulsory = Some(compulsory);
            out.conflict = Some(conflict);
            out.misses = Some(compulsory.saturating_add(conflict));
            out.conflict_fraction = (accesses > 0).then(|| conflict as f64 / accesses as f64);
        }
    }
    out
}

fn level_info(l: &LevelConfig) -> LevelInfo {
    LevelInfo {
        name: l.name.clone(),
        size_bytes: l.size_bytes,
        line_bytes: l.line_bytes,
        ways: l.ways,
        sets: l.sets(),
    }
}

/// Finds each level's spikes, flags them in the values and lists them.
fn mark_spikes(report: &mut ScanReport) {
    for (k, level) in report.levels.iter().enumerate() {
        let fractions: Vec<Option<f64>> = report
            .values
            .iter()
            .map(|v| v.levels.get(k).and_then(|l| l.conflict_fraction))
            .collect();
        for (i, median) in find_spikes(&fractions) {
            let v = &mut report.values[i];
            if let Some(l) = v.levels.get_mut(k) {
                l.spike = true;
            }
            report.spikes.push(SpikeReport {
                level: level.name.clone(),
                value: v.value,
                conflict_fraction: fractions[i].unwrap_or_default(),
                neighbourhood_median: median,
            });
        }
    }
}

/// The positions of the spikes among `fractions` (`None`: not modelled, or no accesses), each
/// with the higher of its two sides' medians, the bar it cleared. Fractions, not counts: misses
/// that grow with the size are no spike. A median, not a mean: a spike beside another does not
/// raise the bar for it. Each side apart: a value past a step up (a working set outgrowing the
/// level: capacity misses) stands above the values before the step but not above those after
/// it, so a step is no spike wherever it falls in the range, and a value with no fraction on one
/// side (the first and the last) is not judged.
fn find_spikes(fractions: &[Option<f64>]) -> Vec<(usize, f64)> {
    fractions
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let fraction = (*f)?;
            let before = side_median(fractions, i.saturating_sub(WINDOW_POSITIONS)..i)?;
            let after = side_median(fractions, i + 1..(i + 1 + WINDOW_POSITIONS))?;
            let bar = before.max(after);
            (is_spike(fraction, before) && is_spike(fraction, after)).then_some((i, bar))
        })
        .collect()
}

/// The median fraction of the values at `positions` (those in the range); of an even number
/// the higher middle one. `None` when none has a fraction.
fn side_median(fractions: &[Option<f64>], positions: std::ops::Range<usize>) -> Option<f64> {
    let mut near: Vec<f64> = positions
        .filter_map(|j| fractions.get(j).copied().flatten())
        .collect();
    near.sort_by(f64::total_cmp);
    near.get(near.len() / 2).copied()
}

fn is_spike(fraction: f64, median: f64) -> bool {
    fraction >= SPIKE_RATIO * median && fraction >= median + SPIKE_MARGIN
}

/// The values at which a level could not be modelled, for one reason.
#[derive(Debug)]
pub struct Failure<'a> {
    /// The level's name.
    pub level: &'a str,
    /// Why not.
    pub reason: &'a str,
    /// The values, in order.
    pub values: Vec<i64>,
}

impl Failure<'_> {
    /// The values as a short list: the first 12, then how many more.
    pub fn values_text(&self) -> String {
        let shown: Vec<String> = self.values.iter().take(12).map(i64::to_string).collect();
        match self.values.len().saturating_sub(12) {
            0 => shown.join(", "),
            more => format!("{}, … ({more} more)", shown.join(", ")),
        }
    }
}

fn add_failure<'a>(out: &mut Vec<Failure<'a>>, level: &'a str, reason: &'a str, value: i64) {
    match out
        .iter_mut()
        .find(|f| f.level == level && f.reason == reason)
    {
        Some(f) => f.values.push(value),
        None => out.push(Failure {
            level,
            reason,
            values: vec![value],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_and_without_a_step() {
        let r = parse_range("N=1000..1030:8").unwrap();
        assert_eq!(r.values(), [1000, 1008, 1016, 1024]);
        assert_eq!(parse_range(" N = -2..1 ").unwrap().values(), [-2, -1, 0, 1]);
        assert_eq!(parse_range("N=5..5").unwrap().values(), [5]);
        let wide = parse_range(&format!("N={}..{}:{}", i64::MIN, i64::MAX, u64::MAX)).unwrap();
        assert_eq!(wide.values(), [i64::MIN, i64::MAX]);
    }

    #[test]
    fn bad_ranges_say_what_is_wrong() {
        for (text, expected) in [
            ("N", "expected NAME=LO..HI"),
            ("N=1-5", "expected NAME=LO..HI"),
            ("=1..5", "expected NAME=LO..HI"),
            ("N=a..5", "LO is not"),
            ("N=1..", "HI is not"),
            ("N=1..5:0", "at least 1"),
            ("N=1..5:-1", "STEP is not"),
            ("N=5..1", "LO (5) is above HI (1)"),
            ("N=1..4097", "4097 values, at most 4096"),
        ] {
            let e = parse_range(text).unwrap_err();
            assert!(e.contains(expected), "{text}: {e}");
        }
        assert!(parse_range("N=1..4096").is_ok());
        assert!(parse_range("N=0..8190:2").is_ok());
    }

    #[test]
    fn a_spike_stands_out_of_its_neighbourhood() {
        let mut f = vec![Some(0.04); 20];
        f[10] = Some(0.70);
        assert_eq!(find_spikes(&f), [(10, 0.04)]);
    }

    #[test]
    fn a_neighbouring_spike_is_found_too() {
        let mut f = vec![Some(0.04); 20];
        f[10] = Some(0.70);
        f[11] = Some(0.50);
        let found: Vec<usize> = find_spikes(&f).into_iter().map(|(i, _)| i).collect();
        assert_eq!(found, [10, 11]);
    }

    #[test]
    fn growth_and_noise_are_no_spikes() {
        // A fraction that rises steadily: each value is near its neighbourhood's median.
        let rising: Vec<Option<f64>> = (0..30).map(|i| Some(0.01 * f64::from(i))).collect();
        assert!(find_spikes(&rising).is_empty());
        // Three times the median, but less than a percentage point above it.
        let mut f = vec![Some(0.001); 10];
        f[5] = Some(0.003);
        assert!(find_spikes(&f).is_empty());
        // From a median of 0 a jump of a point is a spike.
        let mut f = vec![Some(0.0); 10];
        f[5] = Some(0.01);
        assert_eq!(find_spikes(&f), [(5, 0.0)]);
    }

    #[test]
    fn a_step_is_no_spike() {
        // Capacity misses from where the working set outgrows the level: 0 %, then 4.5 %.
        let step: Vec<Option<f64>> = (0..30)
            .map(|i| Some(if i < 15 { 0.0 } else { 0.045 }))
            .collect();
        assert!(find_spikes(&step).is_empty(), "{:?}", find_spikes(&step));
    }

    #[test]
    fn values_without_a_fraction_are_skipped() {
        let mut f = vec![None; 5];
        f[2] = Some(0.5);
        assert!(find_spikes(&f).is_empty(), "no neighbour to compare with");
        f[0] = Some(0.1);
        f[4] = Some(0.1);
        assert_eq!(find_spikes(&f), [(2, 0.1)]);
        // Only 8 positions on each side count: the values far away do not.
        let mut far = vec![Some(0.9); 30];
        for x in &mut far[5..=21] {
            *x = Some(0.02);
        }
        far[13] = Some(0.2);
        assert_eq!(find_spikes(&far), [(13, 0.02)]);
        assert_eq!(side_median(&far, 0..4), Some(0.9));
        assert_eq!(side_median(&far, 4..12), Some(0.02));
    }

    #[test]
    fn a_step_near_the_end_is_no_spike_either() {
        // N = 960..1120 step 32 on this machine's L1d: the step at 1040 (0 %, then 4.51 %).
        let step = [0.0, 0.0, 0.0, 0.0451, 0.0451, 0.0451].map(Some);
        assert!(find_spikes(&step).is_empty(), "{:?}", find_spikes(&step));
    }

    #[test]
    fn spikes_are_flagged_and_listed_and_failures_grouped() {
        let level = |name: &str, accesses: u64, conflict: Option<u64>| ValueLevel {
            name: name.into(),
            accesses: conflict.map(|_| accesses),
            misses: conflict.map(|c| c + 1),
            compulsory: conflict.map(|_| 1),
            conflict,
            conflict_fraction: conflict.map(|c| c as f64 / accesses as f64),
            spike: false,
            duration_s: 0.1,
            error: conflict.is_none().then(|| "slow".to_string()),
        };
        let mut report = ScanReport {
            kernel: "k.c".into(),
            params: BTreeMap::new(),
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
                        level("L1", 100, Some(if v == 3 { 70 } else { 4 })),
                        level("L2", 100, (v == 2).then_some(0)),
                    ],
                    duration_s: 0.5,
                })
                .collect(),
            spikes: Vec::new(),
            duration_s: 2.5,
        };
        mark_spikes(&mut report);
        assert_eq!(report.spikes.len(), 1);
        assert_eq!(
            (
                report.spikes[0].value,
                report.spikes[0].neighbourhood_median
            ),
            (3, 0.04)
        );
        assert!(report.values[2].levels[0].spike);
        let failures = report.not_modelled();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].values, [1, 3, 4, 5]);
        assert_eq!(
            report.failure_warnings(),
            ["L2 not modelled at N = 1, 3, 4, 5: slow"]
        );
        assert!(nothing_modelled(&report).is_ok());
        let many = Failure {
            level: "L1",
            reason: "r",
            values: (1..=14).collect(),
        };
        assert_eq!(
            many.values_text(),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, … (2 more)"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_range_text_parses_or_says_why(text in "\\PC{0,30}", lo in -100i64..100, n in 0u64..5000) {
            let _ = parse_range(&text);
            if let Ok(r) = parse_range(&format!("N={lo}..{}", lo + n as i64)) {
                proptest::prop_assert_eq!(r.values().len() as u64, n + 1);
            }
        }
    }
}
