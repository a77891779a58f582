//! Cache levels of the analytic model (spec 000) in a child process, so that a level that
//! overruns its time limit can be stopped. isl's operation count does not bound
//! everything (a parametric lexmin whose coefficients grow into big numbers counts few
//! operations), the model's own deadline is checked only between set operations, and a thread
//! cannot be stopped from outside: a process can. `misses` and `roofline --traffic model` run
//! every level this way, each a `loopscope model-level` (hidden) child. The levels that share a
//! line size share one child, which builds each reference's hit sources once for all of them
//! (they depend on the line alone) and prints each level as a line of JSON as soon as it is
//! done: a child stopped at the time limit keeps the levels it finished. Formulas take one child
//! per level.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use loopscope_analytic::{
    AnalyticError, Budget, Cache, Detail, FitOptions, Helper, Model, NestedFormulas, Program,
    ReferenceChambers, ReferenceFormulas, ReferenceMisses, each_reference_at_levels,
    points_to_check, program_with_symbols,
};
use loopscope_cache::LevelConfig;
use loopscope_polyhedral::Ctx;
use serde::{Deserialize, Serialize};

use crate::failure::bad_input;
use crate::ui::Ui;
use loopscope_kernel::LoadedKernel;

/// Arguments of the hidden `model-level` command: levels of one line size, the kernel as
/// `misses` loads it.
#[derive(Debug, Args)]
pub struct ModelLevelArgs {
    /// Kernel file.
    #[arg(value_name = "KERNEL.c")]
    pub kernel: PathBuf,
    /// Value of a kernel symbol.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Array base addresses.
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Associativity of each level, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub ways: Vec<u32>,
    /// Line size in bytes (every level's).
    #[arg(long)]
    pub line_bytes: i64,
    /// Number of sets of each level, in the order of `--ways`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub sets: Vec<i64>,
    /// Bound on isl's elementary operations.
    #[arg(long)]
    pub max_operations: u64,
    /// Seconds the sets of all levels may take to build (checked between set operations).
    #[arg(long)]
    pub time_limit: f64,
    /// Threads building the references' sets.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Also return the intermediate sets as text.
    #[arg(long)]
    pub explain: bool,
    /// Also attribute conflict misses to competing references.
    #[arg(long)]
    pub sources: bool,
    /// Give the counts as formulas in these parameters, NAME[,NAME...] (their `-D` values are
    /// placeholders). One level only.
    #[arg(long, value_name = "NAME")]
    pub symbolic: Option<String>,
}

/// What one level's model gave, as the child prints it (JSON on stdout).
#[derive(Debug, Serialize, Deserialize)]
pub struct LevelOutcome {
    /// Per reference, or why the level could not be modelled.
    pub refs: Result<Vec<ReferenceMisses>, String>,
    /// The intermediate sets, with `explain`.
    pub explain: Option<String>,
    /// Seconds the level took.
    pub duration_s: f64,
    /// With `symbolic`: the counts as formulas (then `refs` holds the counts at the fitting
    /// window's start).
    #[serde(default)]
    pub formulas: Option<Vec<ReferenceFormulas>>,
    /// With several `symbolic` parameters: the counts as chambers, and the level's misses.
    #[serde(default)]
    pub chambers: Option<LevelChambers>,
}

/// Each reference's counts as chambers, and the level's misses.
pub type LevelChambers = (Vec<ReferenceChambers>, NestedFormulas);

/// One line of the child's output: a level (an index into its `--ways`) and its outcome.
#[derive(Debug, Serialize, Deserialize)]
struct LevelLine {
    level: usize,
    outcome: LevelOutcome,
}

/// Prints one level as a line of JSON at once, so that a parent that stops this process still
/// has it.
fn print_level(level: usize, outcome: LevelOutcome) -> anyhow::Result<()> {
    let mut text = serde_json::to_string(&LevelLine { level, outcome })?;
    text.push('\n');
    crate::cmd::print_text(&text)
}

/// Runs `model-level`: models its levels and prints each [`LevelOutcome`] as it is done.
pub fn run(args: &ModelLevelArgs, ui: &Ui) -> anyhow::Result<()> {
    let start = Instant::now();
    let loaded = LoadedKernel::load(&args.kernel, &args.define, args.base.as_deref(), ui)?;
    let ranges = symbolic_parameters(args.symbolic.as_deref().unwrap_or(""))
        .map_err(|e| bad_input(format!("--symbolic {e}")))?;
    let names: Vec<&str> = ranges.iter().map(|(name, _)| *name).collect();
    let symbolic = symbolic_indices(&loaded, &names)?;
    let program = program_with_symbols(&loaded.kernel, &loaded.params, &symbolic, &loaded.layout)
        .map_err(|e| bad_input(format!("{}: {e}", loaded.origin)))?;
    if args.ways.len() != args.sets.len() {
        return Err(bad_input(format!(
            "--ways gives {} levels, --sets {}",
            args.ways.len(),
            args.sets.len()
        )));
    }
    let caches: Vec<Cache> = args
        .ways
        .iter()
        .zip(&args.sets)
        .map(|(&ways, &sets)| Cache {
            ways,
            line_bytes: args.line_bytes,
            sets,
        })
        .collect();
    let budget = Budget {
        max_operations: args.max_operations,
        time_limit: Duration::from_secs_f64(args.time_limit.clamp(0.0, 1e9)),
        threads: args.threads.max(1),
    };
    let cache = match caches[..] {
        _ if ranges.is_empty() => return counts(&program, &caches, budget, args, start),
        [cache] => cache,
        _ => return Err(bad_input("--symbolic models one level at a time")),
    };
    if names.len() > 1 {
        let (refs, chambers) = with_chambers(&program, cache, budget, &ranges, &loaded, args);
        return print_level(
            0,
            LevelOutcome {
                refs: refs.map_err(|e| e.to_string()),
                explain: None,
                duration_s: start.elapsed().as_secs_f64(),
                formulas: None,
                chambers,
            },
        );
    }
    let (name, range) = ranges[0];
    let (refs, explain, formulas) = with_formulas(
        &program,
        cache,
        budget,
        name,
        within(fit_options(&loaded, &args.define, cache), range),
        args.explain,
    );
    print_level(
        0,
        LevelOutcome {
            refs: refs.map_err(|e| e.to_string()),
            explain,
            duration_s: start.elapsed().as_secs_f64(),
            formulas,
            chambers: None,
        },
    )
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
    args: &ModelLevelArgs,
) -> (
    Result<Vec<ReferenceMisses>, AnalyticError>,
    Option<LevelChambers>,
) {
    let ctx = Ctx::with_max_operations(budget.max_operations);
    let mut chambers = None;
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let far = FitOptions {
        lowest: 0,
        ..fit_options(loaded, &args.define, cache)
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
    args: &ModelLevelArgs,
    start: Instant,
) -> anyhow::Result<()> {
    // The pieces' third counts above four ways are shown with --explain only.
    let detail = Detail {
        sources: args.sources,
        third_counts: args.explain,
    };
    let printed = std::sync::Mutex::new(Ok(()));
    let outcome = |refs, explain| LevelOutcome {
        refs,
        explain,
        duration_s: start.elapsed().as_secs_f64(),
        formulas: None,
        chambers: None,
    };
    let built = each_reference_at_levels(
        program,
        caches,
        budget,
        |_, model| {
            let explain = args
                .explain
                .then(|| (model.explain_level(), model.explain_references()));
            Ok((model.evaluate_with(&[], detail)?, explain))
        },
        |level, parts| {
            let (refs, explain) = match parts {
                Ok(parts) => joined(parts),
                Err(e) => (Err(e.to_string()), None),
            };
            let result = print_level(level, outcome(refs, explain));
            let mut printed = printed.lock().unwrap_or_else(|e| e.into_inner());
            if printed.is_ok() {
                *printed = result;
            }
        },
    );
    if let Err(e) = built {
        for level in 0..caches.len() {
            print_level(level, outcome(Err(e.to_string()), None))?;
        }
    }
    printed.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// One reference's counts and, with `--explain`, the level's line and the reference's block.
type ReferencePart = (Vec<ReferenceMisses>, Option<(Option<String>, String)>);

/// A level's references joined: the counts in position order, and the level's line once (every
/// reference's model has the same) followed by each reference's block.
fn joined(parts: Vec<ReferencePart>) -> (Result<Vec<ReferenceMisses>, String>, Option<String>) {
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
pub fn symbolic_indices(loaded: &LoadedKernel, names: &[&str]) -> anyhow::Result<Vec<usize>> {
    names
        .iter()
        .map(
            |name| match loaded.kernel.params.iter().position(|p| p == name) {
                Some(i) => Ok(i),
                None => Err(bad_input(format!(
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

/// The kernel and the model's options, as the parent command has them.
pub struct ModelRequest<'a> {
    /// Kernel file.
    pub kernel: &'a Path,
    /// `-D` values.
    pub define: &'a [(String, i64)],
    /// `--base`, if given.
    pub base: Option<&'a str>,
    /// isl operations per reference of a level.
    pub max_operations: u64,
    /// Seconds per level, building and counting.
    pub time_limit_s: f64,
    /// Threads per child process ([`children`]).
    pub threads_per_child: usize,
    /// Return the intermediate sets.
    pub explain: bool,
    /// Attribute conflict misses.
    pub sources: bool,
    /// Formulas in this parameter.
    pub symbolic: Option<&'a str>,
}

impl<'a> ModelRequest<'a> {
    /// Counts only (no explanation, sources or formulas, which a caller adds), each level on
    /// every core.
    pub fn counts(
        kernel: &'a Path,
        define: &'a [(String, i64)],
        base: Option<&'a str>,
        max_operations: u64,
        time_limit_s: f64,
    ) -> ModelRequest<'a> {
        ModelRequest {
            kernel,
            define,
            base,
            max_operations,
            time_limit_s,
            threads_per_child: cores(),
            explain: false,
            sources: false,
            symbolic: None,
        }
    }
}

/// The cores of this machine: each child builds its references on this many threads. The
/// children (usually one, for the one line size of a machine's caches) run at once, so several
/// share the cores at first; one left running after the others finish then has every core.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Seconds a child may run past its own build deadline to finish counting and report, before it
/// is stopped.
const GRACE_S: f64 = 2.0;

/// Models every level in child processes, all at once: one per line size (the levels that
/// share it share their hit sources), one per level with formulas. Stops those still running
/// `time_limit_s` (plus a short grace) after the start; the levels a stopped child finished are
/// kept. Levels come back in order.
pub fn model_levels(request: &ModelRequest<'_>, levels: &[LevelConfig]) -> Vec<LevelOutcome> {
    let start = Instant::now();
    let mut running: Vec<(Vec<usize>, Result<Running, String>)> =
        children(levels, request.symbolic.is_some())
            .into_iter()
            .map(|group| {
                let child = spawn(
                    request,
                    &group.iter().map(|&l| &levels[l]).collect::<Vec<_>>(),
                );
                (group, child)
            })
            .collect();
    let deadline = start + Duration::from_secs_f64(request.time_limit_s.clamp(0.0, 1e9) + GRACE_S);
    loop {
        let waiting = running
            .iter_mut()
            .any(|(_, r)| r.as_mut().is_ok_and(|r| !r.finished()));
        if !waiting || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut outcomes: Vec<Option<LevelOutcome>> = levels.iter().map(|_| None).collect();
    for (group, child) in running {
        let mut got = match child {
            Ok(child) => child.outcomes(group.len(), request.time_limit_s, start),
            Err(e) => group.iter().map(|_| failed(e.clone(), start)).collect(),
        };
        for (&l, outcome) in group.iter().zip(got.drain(..)) {
            outcomes[l] = Some(outcome);
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| failed("internal: a level was not modelled".into(), start)))
        .collect()
}

/// The child processes [`model_levels`] runs, as the indices of the levels each models: one per
/// line size, or with `formulas` one per level.
pub fn children(levels: &[LevelConfig], formulas: bool) -> Vec<Vec<usize>> {
    let mut children: Vec<Vec<usize>> = Vec::new();
    for (l, level) in levels.iter().enumerate() {
        let shared = children
            .iter_mut()
            .find(|c| !formulas && levels[c[0]].line_bytes == level.line_bytes);
        match shared {
            Some(child) => child.push(l),
            None => children.push(vec![l]),
        }
    }
    children
}

/// A child and the threads draining its pipes (so a long explanation cannot fill a pipe and
/// block it).
struct Running {
    child: Child,
    done: bool,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Running {
    fn start(mut command: Command) -> Result<Running, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the model process: {e}"))?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        Ok(Running {
            child,
            done: false,
            stdout,
            stderr,
        })
    }

    /// Whether the child has exited. Only an exit seen counts: a child whose state cannot be
    /// read is stopped at the deadline like one still running, so that reading its pipes
    /// cannot wait for it.
    fn finished(&mut self) -> bool {
        self.done = self.done || matches!(self.child.try_wait(), Ok(Some(_)));
        self.done
    }

    /// The child's `levels` outcomes: each level it printed, and for the others why not.
    fn outcomes(mut self, levels: usize, time_limit_s: f64, start: Instant) -> Vec<LevelOutcome> {
        let stopped = !self.finished();
        if stopped {
            // Killing an exited child is harmless; either way it is reaped below.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr = self.stderr.join().unwrap_or_default();
        let mut outcomes: Vec<Option<LevelOutcome>> = (0..levels).map(|_| None).collect();
        // A line cut off by the stop does not parse and is left out.
        for line in stdout.lines() {
            if let Ok(LevelLine { level, outcome }) = serde_json::from_str(line)
                && let Some(slot) = outcomes.get_mut(level)
            {
                *slot = Some(outcome);
            }
        }
        let why = if stopped {
            format!("took more than the time limit of {time_limit_s} s (stopped)")
        } else {
            let last = stderr.trim().lines().last().unwrap_or("no output");
            format!(
                "the model process failed: {}",
                last.trim_start_matches("loopscope: ")
            )
        };
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| failed(why.clone(), start)))
            .collect()
    }
}

fn failed(message: String, start: Instant) -> LevelOutcome {
    LevelOutcome {
        refs: Err(message),
        explain: None,
        duration_s: start.elapsed().as_secs_f64(),
        formulas: None,
        chambers: None,
    }
}

/// Starts a child for `levels`, which have one line size.
fn spawn(request: &ModelRequest<'_>, levels: &[&LevelConfig]) -> Result<Running, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find loopscope itself: {e}"))?;
    let list = |field: fn(&LevelConfig) -> String| {
        levels
            .iter()
            .map(|&l| field(l))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut command = Command::new(exe);
    command
        .args(["-q", "model-level"])
        .arg(request.kernel)
        .args(["--ways", &list(|l| l.ways.to_string())])
        .args(["--line-bytes", &levels[0].line_bytes.to_string()])
        .args(["--sets", &list(|l| l.sets().to_string())])
        .args(["--max-operations", &request.max_operations.to_string()])
        .args(["--time-limit", &request.time_limit_s.to_string()])
        .args(["--threads", &request.threads_per_child.to_string()]);
    for (name, value) in request.define {
        command.arg("-D").arg(format!("{name}={value}"));
    }
    if let Some(base) = request.base {
        command.args(["--base", base]);
    }
    if request.explain {
        command.arg("--explain");
    }
    if request.sources {
        command.arg("--sources");
    }
    if let Some(name) = request.symbolic {
        command.args(["--symbolic", name]);
    }
    Running::start(command)
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            // A pipe that breaks mid-way leaves what was read, which then fails to parse.
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that prints `lines` and a marker file, then `then` (a shell command).
    fn child(lines: &[String], marker: &Path, then: &str) -> Running {
        let mut script: String = lines.iter().map(|l| format!("echo '{l}'; ")).collect();
        script.push_str(&format!("touch '{}'; {then}", marker.display()));
        let mut command = Command::new("sh");
        command.args(["-c", &script]);
        Running::start(command).unwrap()
    }

    fn level_line(level: usize, accesses: u64) -> String {
        serde_json::to_string(&LevelLine {
            level,
            outcome: LevelOutcome {
                refs: Ok(Vec::new()),
                explain: Some(format!("{accesses}")),
                duration_s: 0.5,
                formulas: None,
                chambers: None,
            },
        })
        .unwrap()
    }

    fn wait_for(marker: &Path) {
        // The marker follows the lines: once it exists the child has written them.
        while !marker.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_stopped_child_keeps_the_levels_it_printed() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("printed");
        let running = child(&[level_line(1, 7)], &marker, "exec sleep 60");
        wait_for(&marker);
        let got = running.outcomes(3, 9.0, Instant::now());
        assert_eq!(got[1].refs, Ok(Vec::new()));
        assert_eq!(got[1].explain.as_deref(), Some("7"));
        for l in [0, 2] {
            assert_eq!(
                got[l].refs,
                Err("took more than the time limit of 9 s (stopped)".to_string()),
                "level {l}"
            );
        }
    }

    #[test]
    fn a_failed_child_says_why_for_the_levels_it_did_not_print() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("printed");
        let mut running = child(
            &[level_line(0, 3), "{\"level\": 1, \"outc".to_string()],
            &marker,
            "echo 'loopscope: out of memory' >&2; exit 1",
        );
        while !running.finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = running.outcomes(2, 9.0, Instant::now());
        assert_eq!(got[0].explain.as_deref(), Some("3"));
        assert_eq!(
            got[1].refs,
            Err("the model process failed: out of memory".to_string())
        );
    }
}
