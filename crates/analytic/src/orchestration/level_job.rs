//! The child side of the level processes ([`crate::model_levels`]): one job's levels of one
//! line size, modelled and handed over one line of JSON per level as soon as each is done, so
//! that a parent that stops the process still has the levels it finished.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use loopscope_kernel::{Listener, LoadedKernel};
use loopscope_polyhedral::Ctx;

use super::process::{LevelChambers, LevelLine, LevelOutcome};
use crate::{
    AnalyticError, Budget, Cache, Detail, FitOptions, Helper, Model, Program, ReferenceFormulas,
    ReferenceMisses, each_reference_at_levels, points_to_check, program_with_symbols,
};

/// One level process's work: levels of one line size, the kernel as the parent loads it.
#[derive(Debug, Clone)]
pub struct LevelJob {
    /// Kernel file.
    pub kernel: PathBuf,
    /// Values of the kernel's parameters (placeholders for the symbolic ones).
    pub define: Vec<(String, i64)>,
    /// Array base addresses, `A=0,B=800`.
    pub base: Option<String>,
    /// Associativity of each level.
    pub ways: Vec<u32>,
    /// Line size in bytes (every level's).
    pub line_bytes: i64,
    /// Number of sets of each level, in the order of `ways`.
    pub sets: Vec<i64>,
    /// Bound on isl's elementary operations.
    pub max_operations: u64,
    /// Seconds the sets of all levels may take to build (checked between set operations).
    pub time_limit_s: f64,
    /// Threads building the references' sets.
    pub threads: usize,
    /// Also return the intermediate sets as text.
    pub explain: bool,
    /// Also attribute conflict misses to competing references.
    pub sources: bool,
    /// Give the counts as formulas in these parameters, `NAME[=LO..HI][,NAME...]`. One level
    /// only.
    pub symbolic: Option<String>,
}

/// Where a level process's lines go (its stdout); an error ends the job.
pub type LineSink<'a> = &'a (dyn Fn(&str) -> std::io::Result<()> + Sync);

/// Hands one level over as a line of JSON at once.
fn print_level(
    emit: LineSink<'_>,
    level: usize,
    outcome: LevelOutcome,
) -> Result<(), AnalyticError> {
    let mut text = serde_json::to_string(&LevelLine { level, outcome })
        .map_err(|e| AnalyticError::Output(e.to_string()))?;
    text.push('\n');
    emit(&text).map_err(|e| AnalyticError::Output(e.to_string()))
}

/// Runs a level process's `job`: models its levels and hands each over to `emit` as a
/// [`LevelLine`] as soon as it is done. Warnings (unused `-D` values) go to `listener`.
pub fn run_level_job(
    job: &LevelJob,
    listener: &dyn Listener,
    emit: LineSink<'_>,
) -> Result<(), AnalyticError> {
    let start = Instant::now();
    let loaded = LoadedKernel::load(&job.kernel, &job.define, job.base.as_deref(), listener)?;
    let ranges = symbolic_parameters(job.symbolic.as_deref().unwrap_or(""))
        .map_err(|e| AnalyticError::Request(format!("--symbolic {e}")))?;
    let names: Vec<&str> = ranges.iter().map(|(name, _)| *name).collect();
    let symbolic = symbolic_indices(&loaded, &names)?;
    let program = program_with_symbols(&loaded.kernel, &loaded.params, &symbolic, &loaded.layout)
        .map_err(|e| AnalyticError::Request(format!("{}: {e}", loaded.origin)))?;
    if job.ways.len() != job.sets.len() {
        return Err(AnalyticError::Request(format!(
            "--ways gives {} levels, --sets {}",
            job.ways.len(),
            job.sets.len()
        )));
    }
    let caches: Vec<Cache> = job
        .ways
        .iter()
        .zip(&job.sets)
        .map(|(&ways, &sets)| Cache {
            ways,
            line_bytes: job.line_bytes,
            sets,
        })
        .collect();
    let budget = Budget {
        max_operations: job.max_operations,
        // A NaN limit (no caller should send one) stops at once rather than panicking.
        time_limit: Duration::try_from_secs_f64(job.time_limit_s.clamp(0.0, 1e9))
            .unwrap_or(Duration::ZERO),
        threads: job.threads.max(1),
    };
    let cache = match caches[..] {
        _ if ranges.is_empty() => return counts(&program, &caches, budget, job, start, emit),
        [cache] => cache,
        _ => {
            return Err(AnalyticError::Request(
                "--symbolic models one level at a time".into(),
            ));
        }
    };
    if names.len() > 1 {
        let (refs, chambers) = with_chambers(&program, cache, budget, &ranges, &loaded, job);
        let (refs, error_points_to_simulate) = handed_over(refs);
        return print_level(
            emit,
            0,
            LevelOutcome {
                refs,
                explain: None,
                duration_s: start.elapsed().as_secs_f64(),
                formulas: None,
                chambers,
                error_points_to_simulate,
            },
        );
    }
    let (name, range) = ranges[0];
    let (refs, explain, formulas) = with_formulas(
        &program,
        cache,
        budget,
        name,
        within(fit_options(&loaded, &job.define, cache), range),
        job.explain,
    );
    let (refs, error_points_to_simulate) = handed_over(refs);
    print_level(
        emit,
        0,
        LevelOutcome {
            refs,
            explain,
            duration_s: start.elapsed().as_secs_f64(),
            formulas,
            chambers: None,
            error_points_to_simulate,
        },
    )
}

/// A level's result as the parent reads it: the error as its message, and whether that message
/// already points to `loopscope simulate` (known here from the error's kind, not its words).
fn handed_over<T>(result: Result<T, AnalyticError>) -> (Result<T, String>, bool) {
    let points_to_simulate = result
        .as_ref()
        .is_err_and(AnalyticError::points_to_simulate);
    (result.map_err(|e| e.to_string()), points_to_simulate)
}

/// A parameter of `--symbolic` and its range of interest, if given.
pub type SymbolicParameter<'a> = (&'a str, Option<(i64, i64)>);

/// `--symbolic X=0..100,Z` as `[("X", Some((0, 100))), ("Z", None)]`, or the reason it cannot
/// be read.
pub fn symbolic_parameters(list: &str) -> Result<Vec<SymbolicParameter<'_>>, String> {
    if list.trim().is_empty() {
        return Ok(Vec::new());
    }
    list.split(',')
        .map(|part| {
            let Some((name, range)) = part.split_once('=') else {
                return Ok((part.trim(), None));
            };
            let bad = || format!("{part}: a range is NAME=LO..HI with 0 ≤ LO ≤ HI, integers");
            let (lo, hi) = range.split_once("..").ok_or_else(bad)?;
            let lo: i64 = lo.trim().parse().map_err(|_| bad())?;
            let hi: i64 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || lo < 0 {
                return Err(bad());
            }
            Ok((name.trim(), Some((lo, hi))))
        })
        .collect()
}

/// `options` limited to the range of interest `range`, when there is one.
fn within(options: FitOptions, range: Option<(i64, i64)>) -> FitOptions {
    match range {
        Some((lowest, highest)) => FitOptions {
            lowest,
            start: lowest,
            highest: Some(highest),
            ..options
        },
        None => options,
    }
}

/// The counts as chambers in several parameters, and the counts at the fitting windows'
/// start. The fitting windows start low (past a few periods) first, which is cheap; a kernel
/// whose breakpoints lie beyond them (its extents or fixed parameters) fails to fit there,
/// and is fitted again from past those constants.
fn with_chambers(
    program: &Program,
    cache: Cache,
    budget: Budget,
    parameters: &[SymbolicParameter<'_>],
    loaded: &LoadedKernel,
    job: &LevelJob,
) -> (
    Result<Vec<ReferenceMisses>, AnalyticError>,
    Option<LevelChambers>,
) {
    let ctx = Ctx::with_max_operations(budget.max_operations);
    let mut chambers = None;
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let far = FitOptions {
        lowest: 0,
        ..fit_options(loaded, &job.define, cache)
    };
    let near = FitOptions {
        start: (4 * far.max_period).max(64),
        ..far
    };
    let options_from = |o: FitOptions| -> Vec<FitOptions> {
        parameters
            .iter()
            .map(|(_, range)| within(o, *range))
            .collect()
    };
    let refs = Model::new_within(&ctx, program, cache, budget.time_limit).and_then(|model| {
        let fit = |o: FitOptions| {
            let options = options_from(o);
            // Every point of the region is counted: say so at once when that is out of reach.
            let points = points_to_check(&options);
            if points > MOST_POINTS {
                return Err(AnalyticError::NoFormula(format!(
                    "formulas in {} would count about {points} points exactly (fitting windows \
                     from {}: past the kernel's constants and four set periods of {} elements), \
                     more than {MOST_POINTS}: give all but one of them a value (-D), give them \
                     ranges (--symbolic {}), or use --scan",
                    names.join(", "),
                    o.start,
                    o.max_period,
                    names
                        .iter()
                        .map(|n| format!("{n}=0..100"))
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
            // A second model on the other core counts the next point meanwhile.
            let helper = (budget.threads > 1).then_some(Helper {
                program,
                cache,
                max_operations: budget.max_operations,
            });
            model.nested_formulas_with(&names, &[], &options, helper)
        };
        let retry = parameters.iter().any(|(_, range)| range.is_none()) && far.start > near.start;
        let fitted = match fit(near) {
            Err(AnalyticError::NoFormula(_)) if retry => fit(far)?,
            other => other?,
        };
        chambers = Some(fitted);
        let at: Vec<(&str, i64)> = options_from(near)
            .iter()
            .zip(&names)
            .map(|(o, n)| (*n, o.highest.unwrap_or(o.start)))
            .collect();
        model.evaluate(&at)
    });
    (refs, chambers)
}

/// Exact counts a fit in several parameters may take (spec 000 in X and Z takes 13 000, 2.5 s).
const MOST_POINTS: u128 = 100_000;

/// A level's counts, its intermediate sets as text and its formulas, as far as asked for.
type Modelled = (
    Result<Vec<ReferenceMisses>, AnalyticError>,
    Option<String>,
    Option<Vec<ReferenceFormulas>>,
);

/// Every level's counts, each printed as soon as every reference has it; the references are
/// built side by side on `budget.threads` threads.
fn counts(
    program: &Program,
    caches: &[Cache],
    budget: Budget,
    job: &LevelJob,
    start: Instant,
    emit: LineSink<'_>,
) -> Result<(), AnalyticError> {
    // The pieces' third counts above four ways are shown with --explain only.
    let detail = Detail {
        sources: job.sources,
        third_counts: job.explain,
    };
    let printed = std::sync::Mutex::new(Ok(()));
    let outcome = |refs, explain| {
        let (refs, error_points_to_simulate) = handed_over(refs);
        LevelOutcome {
            refs,
            explain,
            duration_s: start.elapsed().as_secs_f64(),
            formulas: None,
            chambers: None,
            error_points_to_simulate,
        }
    };
    let built = each_reference_at_levels(
        program,
        caches,
        budget,
        |_, model| {
            let explain = job
                .explain
                .then(|| (model.explain_level(), model.explain_references()));
            Ok((model.evaluate_with(&[], detail)?, explain))
        },
        |level, parts| {
            let (refs, explain) = match parts {
                Ok(parts) => joined(parts),
                Err(e) => (Err(e), None),
            };
            let result = print_level(emit, level, outcome(refs, explain));
            let mut printed = printed.lock().unwrap_or_else(|e| e.into_inner());
            if printed.is_ok() {
                *printed = result;
            }
        },
    );
    if let Err(e) = built {
        for level in 0..caches.len() {
            print_level(emit, level, outcome(Err(e.clone()), None))?;
        }
    }
    printed.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// One reference's counts and, with `--explain`, the level's line and the reference's block.
type ReferencePart = (Vec<ReferenceMisses>, Option<(Option<String>, String)>);

/// A level's references joined: the counts in position order, and the level's line once (every
/// reference's model has the same) followed by each reference's block.
fn joined(
    parts: Vec<ReferencePart>,
) -> (Result<Vec<ReferenceMisses>, AnalyticError>, Option<String>) {
    let mut refs = Vec::with_capacity(parts.len());
    let (mut level, mut blocks): (Option<String>, Option<String>) = (None, None);
    for (r, e) in parts {
        refs.extend(r);
        if let Some((line, block)) = e {
            level = level.or(line);
            blocks.get_or_insert_default().push_str(&block);
        }
    }
    (Ok(refs), blocks.map(|b| level.unwrap_or_default() + &b))
}

/// The formulas in `name` and the counts at the fitting window's start. One model holds every
/// reference, on one thread: the formulas are fitted together (one window, one breakpoint) so
/// that the level's totals can be added from them.
fn with_formulas(
    program: &Program,
    cache: Cache,
    budget: Budget,
    name: &str,
    options: FitOptions,
    explain: bool,
) -> Modelled {
    let ctx = Ctx::with_max_operations(budget.max_operations);
    let mut text = None;
    let mut formulas = None;
    let refs = Model::new_within(&ctx, program, cache, budget.time_limit).and_then(|model| {
        text = explain.then(|| model.explain());
        formulas = Some(model.formulas(name, &[], options)?);
        model.evaluate(&[(name, options.start)])
    });
    (refs, text, formulas)
}

/// The indices of the parameters named `names` in the kernel.
pub fn symbolic_indices(
    loaded: &LoadedKernel,
    names: &[&str],
) -> Result<Vec<usize>, AnalyticError> {
    names
        .iter()
        .map(
            |name| match loaded.kernel.params.iter().position(|p| p == name) {
                Some(i) => Ok(i),
                None => Err(AnalyticError::Request(format!(
                    "--symbolic {name}: {} has no parameter `{name}` (it has: {})",
                    loaded.origin,
                    loaded.kernel.params.join(", ")
                ))),
            },
        )
        .collect()
}

/// Where and how to look for the formulas: the degree is the deepest loop nest; periods up to
/// a line of the smallest element times the sets (the period of the set mapping); the fitting
/// window starts well past the kernel's other constants (fixed parameters, extents), beyond
/// which breakpoints are rare, and every value below it is checked down to 0, at most 1024.
fn fit_options(loaded: &LoadedKernel, define: &[(String, i64)], cache: Cache) -> FitOptions {
    let kernel = &loaded.kernel;
    let depth = |mut id: usize| {
        let mut d = 1;
        while let Some(parent) = kernel.loops[id].parent {
            d += 1;
            id = parent;
        }
        d
    };
    let max_degree = (0..kernel.loops.len()).map(depth).max().unwrap_or(0);
    let smallest_element = kernel
        .arrays
        .iter()
        .map(|a| a.elem.bytes())
        .min()
        .unwrap_or(1);
    let set_period = (cache.line_bytes.max(1) as u64 * cache.sets.max(1) as u64
        / smallest_element.max(1))
    .next_power_of_two();
    let max_period = i64::try_from(set_period.min(1 << 12)).unwrap_or(1 << 12);
    let largest_constant = define
        .iter()
        .map(|(_, v)| v.abs())
        .chain(kernel.arrays.iter().flat_map(|a| {
            a.extents
                .iter()
                .filter_map(|e| e.bind_params(&loaded.params).and_then(|b| b.as_constant()))
        }))
        .max()
        .unwrap_or(0);
    let start = (2 * largest_constant).max(4 * max_period).max(64);
    FitOptions {
        lowest: (start - 1024).max(0),
        start,
        max_degree,
        max_period,
        highest: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbolic_lists_parse_with_ranges() {
        assert_eq!(
            symbolic_parameters("X=0..100, Z").unwrap(),
            [("X", Some((0, 100))), ("Z", None)]
        );
        assert!(symbolic_parameters(" ").unwrap().is_empty());
        for bad in ["X=5..1", "X=-1..3", "X=a..3", "X=3"] {
            let e = symbolic_parameters(bad).unwrap_err();
            assert!(e.contains("a range is NAME=LO..HI"), "{bad}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_symbolic_list_parses_or_says_why(text in "\\PC{0,30}") {
            let _ = symbolic_parameters(&text);
        }
    }
}
