//! Cache levels of the analytic model in child processes, so that a level that overruns its
//! time limit can be stopped. isl's operation count does not bound everything (a parametric
//! lexmin whose coefficients grow into big numbers counts few operations), the model's own
//! deadline is checked only between set operations, and a thread cannot be stopped from
//! outside: a process can. `misses` and `roofline --traffic model` run every level this way,
//! each child a [`LevelJob`](crate::LevelJob) run by the program the caller names
//! ([`LevelCommand`]: `loopscope -q model-level`). The levels that share a line size share one
//! child, which builds each reference's hit sources once for all of them (they depend on the line
//! alone) and prints each level as a line of JSON as soon as it is done: a child stopped at the
//! time limit keeps the levels it finished. Formulas take one child per level.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use loopscope_cache::LevelConfig;
use serde::{Deserialize, Serialize};

use crate::{NestedFormulas, ReferenceChambers, ReferenceFormulas, ReferenceMisses};

/// How to start a level process: a program and the arguments before the level's own, e.g.
/// `loopscope` and `-q model-level`. The level's arguments follow: the kernel file, then
/// `--ways`, `--line-bytes`, `--sets`, `--max-operations`, `--time-limit`, `--threads`, `-D`,
/// `--base`, `--explain`, `--sources` and `--symbolic` as [`LevelJob`](crate::LevelJob) has
/// them, and `--parent-pid` with this process's id (so that the child can end when this process
/// ends, however it ends). The program prints one [`LevelLine`] of JSON per level on stdout.
#[derive(Debug, Clone)]
pub struct LevelCommand {
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments before the level's.
    pub args: Vec<String>,
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
    /// Whether the error in `refs` already tells the user to count the level with `loopscope
    /// simulate` ([`AnalyticError::points_to_simulate`](crate::AnalyticError)).
    #[serde(default)]
    pub error_points_to_simulate: bool,
}

/// Each reference's counts as chambers, and the level's misses.
pub type LevelChambers = (Vec<ReferenceChambers>, NestedFormulas);

/// One line of a level process's output: a level (an index into its `--ways`) and its outcome.
#[derive(Debug, Serialize, Deserialize)]
pub struct LevelLine {
    /// The level's index among the process's levels.
    pub level: usize,
    /// What its model gave.
    pub outcome: LevelOutcome,
}

/// The kernel and the model's options, as the parent command has them.
pub struct LevelsRequest<'a> {
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
    /// Formulas in these parameters (`--symbolic` as given).
    pub symbolic: Option<&'a str>,
    /// How to start a level process.
    pub command: &'a LevelCommand,
    /// When set, the children still running are stopped: the caller has their counts another
    /// way (the simulator finished first).
    pub stop: Option<&'a AtomicBool>,
}

impl<'a> LevelsRequest<'a> {
    /// Counts only (no explanation, sources or formulas, which a caller adds), each level on
    /// every core.
    pub fn counts(
        kernel: &'a Path,
        define: &'a [(String, i64)],
        base: Option<&'a str>,
        max_operations: u64,
        time_limit_s: f64,
        command: &'a LevelCommand,
    ) -> LevelsRequest<'a> {
        LevelsRequest {
            kernel,
            define,
            base,
            max_operations,
            time_limit_s,
            threads_per_child: cores(),
            explain: false,
            sources: false,
            symbolic: None,
            command,
            stop: None,
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
pub(super) const GRACE_S: f64 = 2.0;

/// When children started at `start` are stopped: `time_limit_s` plus a short grace later. A
/// limit that is not a number (NaN passes `clamp`) stops them at once instead of panicking.
fn deadline(start: Instant, time_limit_s: f64) -> Instant {
    let limit_s = time_limit_s.clamp(0.0, 1e9) + GRACE_S;
    start + Duration::try_from_secs_f64(limit_s).unwrap_or(Duration::ZERO)
}

/// Models every level in child processes, all at once: one per line size (the levels that
/// share it share their hit sources), one per level with formulas. Stops those still running
/// `time_limit_s` (plus a short grace) after the start, or once `request.stop` is set; the
/// levels a stopped child finished are kept. Levels come back in order.
pub fn model_levels(request: &LevelsRequest<'_>, levels: &[LevelConfig]) -> Vec<LevelOutcome> {
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
    let deadline = deadline(start, request.time_limit_s);
    loop {
        let waiting = running
            .iter_mut()
            .any(|(_, r)| r.as_mut().is_ok_and(|r| !r.finished()));
        let stopped = request.stop.is_some_and(|s| s.load(Ordering::Acquire));
        if !waiting || stopped || Instant::now() >= deadline {
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

/// Every level process this program has running, so that [`stop_level_processes`] can end them
/// from another thread (a signal handler's) while the thread that started them waits.
static LIVE: Mutex<Vec<Weak<Mutex<Child>>>> = Mutex::new(Vec::new());

/// Kills every level process this program has running and returns how many it signalled. For a
/// program about to exit on a signal (SIGINT, SIGTERM): a child stopped this way is not waited
/// for. A child that has exited and been reaped is never signalled (its id may be another
/// process's by then).
pub fn stop_level_processes() -> usize {
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.iter()
        .filter_map(Weak::upgrade)
        .filter(|child| {
            let mut child = child.lock().unwrap_or_else(PoisonError::into_inner);
            // Reaped children are known to std, which then sends nothing.
            matches!(child.try_wait(), Ok(None)) && child.kill().is_ok()
        })
        .count()
}

/// A child and the threads draining its pipes (so a long explanation cannot fill a pipe and
/// block it). Dropped before it has exited, it kills and reaps the child: a model level never
/// outlives the call that started it, whichever way that call ends.
struct Running {
    child: Arc<Mutex<Child>>,
    done: bool,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
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
        let child = Arc::new(Mutex::new(child));
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|c| c.strong_count() > 0);
        live.push(Arc::downgrade(&child));
        Ok(Running {
            child,
            done: false,
            stdout: Some(stdout),
            stderr: Some(stderr),
        })
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the child has exited. Only an exit seen counts: a child whose state cannot be
    /// read is stopped at the deadline like one still running, so that reading its pipes
    /// cannot wait for it.
    fn finished(&mut self) -> bool {
        self.done = self.done || matches!(self.child().try_wait(), Ok(Some(_)));
        self.done
    }

    /// Kills the child unless it has exited, and reaps it; returns whether it had to be killed.
    fn stop(&mut self) -> bool {
        let stopped = !self.finished();
        if stopped {
            let mut child = self.child();
            // Killing an exited child is harmless; either way it is reaped here.
            let _ = child.kill();
            let _ = child.wait();
        }
        self.done = true;
        stopped
    }

    /// The child's `levels` outcomes: each level it printed, and for the others why not.
    fn outcomes(mut self, levels: usize, time_limit_s: f64, start: Instant) -> Vec<LevelOutcome> {
        let stopped = self.stop();
        let join = |h: Option<std::thread::JoinHandle<String>>| {
            h.and_then(|h| h.join().ok()).unwrap_or_default()
        };
        let stdout = join(self.stdout.take());
        let stderr = join(self.stderr.take());
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

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn failed(message: String, start: Instant) -> LevelOutcome {
    LevelOutcome {
        refs: Err(message),
        explain: None,
        duration_s: start.elapsed().as_secs_f64(),
        formulas: None,
        chambers: None,
        error_points_to_simulate: false,
    }
}

/// Starts a child for `levels`, which have one line size.
fn spawn(request: &LevelsRequest<'_>, levels: &[&LevelConfig]) -> Result<Running, String> {
    let list = |field: fn(&LevelConfig) -> String| {
        levels
            .iter()
            .map(|&l| field(l))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut command = Command::new(&request.command.program);
    command
        .args(&request.command.args)
        .arg(request.kernel)
        .args(["--ways", &list(|l| l.ways.to_string())])
        .args(["--line-bytes", &levels[0].line_bytes.to_string()])
        .args(["--sets", &list(|l| l.sets().to_string())])
        .args(["--max-operations", &request.max_operations.to_string()])
        .args(["--time-limit", &request.time_limit_s.to_string()])
        .args(["--threads", &request.threads_per_child.to_string()])
        .args(["--parent-pid", &std::process::id().to_string()]);
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
                error_points_to_simulate: false,
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
    fn a_limit_that_is_not_a_number_stops_at_once() {
        let start = Instant::now();
        for bad in [f64::NAN, -f64::NAN, f64::NEG_INFINITY, -1.0] {
            assert!(deadline(start, bad) <= start + Duration::try_from_secs_f64(GRACE_S).unwrap());
        }
        assert!(deadline(start, f64::INFINITY) > start + Duration::from_secs(1000));
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

    /// Whether process `pid` still runs (a zombie has ended: its parent has not reaped it yet).
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_child_dropped_while_running_is_killed_and_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("started");
        let running = child(&[], &marker, "exec sleep 60");
        wait_for(&marker);
        let pid = running.child().id();
        assert!(alive(pid), "the child {pid} should run before the drop");
        drop(running);
        // Reaped by the drop: its /proc entry is gone at once, not after the sleep.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the child {pid} outlived its Running"
        );
    }
}
