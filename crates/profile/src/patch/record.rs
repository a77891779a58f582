//! The parent side: analyse the executable, plan every site, start the target with the runtime
//! preloaded, wait for it and its processes, and gather their results into one run.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loopscope_binary::{Image, Options, Program};
use serde::{Deserialize, Serialize};

use super::handover::{
    FileIdentity, HANDOVER_VARIABLE, HANDOVER_VERSION, Handover, PlannedSite, ProcessResult,
};
use super::landing::landing_pads;
use super::plan::{FileCode, SitePatch, decode_one, plan_sites, uses_vector_extensions};
use crate::exact::markers::{counted_blocks, direct_call_target, marker_sites};
use crate::exact::{BlockCounts, ExactRun};
use crate::{ObjectRef, ProfileError, TargetExit, resolve_command};

/// How to run the patch back-end.
#[derive(Debug, Clone, Default)]
pub struct PatchOptions {
    /// The `PATH` used to find the command.
    pub search_path: Option<OsString>,
    /// The runtime library to preload into the target (`libloopscope_patch_runtime.so`).
    pub runtime: PathBuf,
    /// Libraries the target would preload anyway (the caller's `LD_PRELOAD`), kept after the
    /// runtime.
    pub preload: Option<OsString>,
    /// Count every block's executions as well.
    pub count_blocks: bool,
    /// Where the handover and the results go (default: a new temporary directory).
    pub scratch: Option<PathBuf>,
}

/// What the patch back-end did besides measuring: how the sites were patched and which were
/// not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchSummary {
    /// Sites patched with a jump to a trampoline.
    pub jump_sites: u64,
    /// Of those, sites in blocks too short for a 5-byte jump, patched with a 2-byte jump to a
    /// springboard nearby.
    #[serde(default)]
    pub springboard_sites: u64,
    /// Sites in blocks too short for a jump, reached only by falling out of the block before:
    /// their events run on that block's trampoline's fall-through path.
    #[serde(default)]
    pub fall_through_sites: u64,
    /// Jumps with no event of their own: moving a block's first instructions away to make room
    /// for a springboard, or carrying the next block's events (their block pays two jumps per
    /// execution).
    #[serde(default)]
    pub room_jumps: u64,
    /// Sites patched with an `int3` (the fallback).
    pub trap_sites: u64,
    /// Why sites got the fallback, with how many sites each.
    pub trap_reasons: BTreeMap<String, u64>,
    /// The fallback sites, each with why no jump fitted.
    #[serde(default)]
    pub traps: Vec<SkippedSite>,
    /// Sites not instrumented, with the reason.
    pub skipped: Vec<SkippedSite>,
    /// Events met while a thread was already in the handler (a signal handler of the
    /// program interrupting it), not counted.
    pub dropped_events: u64,
    /// Threads whose tree could not be taken when their process ended.
    pub lost_threads: u64,
    /// Programs a process of the target executed that were not instrumented.
    pub uninstrumented: Vec<String>,
    /// Processes that ended without a result (killed by `SIGKILL`, or by a raw `exit_group`).
    pub processes_without_result: u64,
}

/// A marker site left out, or patched with the fallback, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedSite {
    /// Index of the object in the run.
    pub object: u32,
    /// Static address.
    pub address: u64,
    /// Why.
    pub reason: String,
}

/// Runs `command` under the patch back-end until it and every process it forked have ended.
/// When `stop` is set the target is sent `SIGINT` (its runtime writes what it measured, then the
/// signal ends it as it would have).
pub fn record_patch(
    command: &[OsString],
    options: &PatchOptions,
    stop: &AtomicBool,
) -> Result<ExactRun, ProfileError> {
    let started = Instant::now();
    let first = command.first().ok_or_else(|| ProfileError::Command {
        command: String::new(),
        what: "no command given".into(),
    })?;
    let program_path = resolve_command(first, options.search_path.as_deref())?;
    let runtime = checked_runtime(&options.runtime)?;
    let analysing = Instant::now();
    let image = Image::open(&program_path)?;
    let program = Program::analyze(&image, &Options::default());
    let data = std::fs::read(&program_path).map_err(|source| ProfileError::Io {
        path: program_path.clone(),
        action: "read",
        source,
    })?;
    let code = FileCode::new(&program, &data);
    let sites = marker_sites(
        &program,
        |a| decode_one(&code, a).and_then(|i| direct_call_target(&i)),
        options.count_blocks,
    );
    let (sites, plans) = plan_sites(&program, &code, sites, &landing_pads(&data));
    let static_analysis = analysing.elapsed();
    let scratch = match &options.scratch {
        Some(dir) => Scratch::Given(dir.clone()),
        None => {
            Scratch::Temporary(tempfile::tempdir().map_err(system("making a scratch directory"))?)
        }
    };
    let results = scratch.path().join("results");
    std::fs::create_dir_all(&results).map_err(|source| ProfileError::Io {
        path: results.clone(),
        action: "write",
        source,
    })?;
    let counted = if options.count_blocks {
        counted_blocks(&program)
    } else {
        Vec::new()
    };
    let handover = Handover {
        version: HANDOVER_VERSION,
        executable: FileIdentity::of(&program_path).map_err(|source| ProfileError::Io {
            path: program_path.clone(),
            action: "read",
            source,
        })?,
        main_entry: program.function("main").map(|f| f.address),
        functions: program.functions.iter().map(|f| f.address).collect(),
        sites: sites
            .into_iter()
            .zip(plans)
            .map(|(site, patch)| PlannedSite { site, patch })
            .collect(),
        counted_blocks: counted.len() as u32,
        vector_extensions: uses_vector_extensions(&program, &code),
        results: results.clone(),
    };
    let handover_path = scratch.path().join("handover.json");
    handover.write(&handover_path)?;
    let tsc_hz = crate::tsc::tsc_hz();
    let mut preload = runtime.into_os_string();
    if let Some(more) = options.preload.as_ref().filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(more);
    }
    let mut child = std::process::Command::new(&program_path);
    child
        .arg0(first)
        .args(&command[1..])
        .env("LD_PRELOAD", preload)
        .env(HANDOVER_VARIABLE, &handover_path);
    let exit = run_to_the_end(child, &results, stop)?;
    let wall_ns = started.elapsed().as_nanos() as u64;
    let gathered = gather(&results, exit)?;
    let objects = vec![ObjectRef {
        path: program_path.display().to_string(),
        build_id: program.build_id.clone(),
    }];
    let blocks = if options.count_blocks {
        vec![BlockCounts {
            object: 0,
            executions: gathered.executions(counted.len()),
            starts: counted,
        }]
    } else {
        Vec::new()
    };
    let summary = gathered.summary(&handover);
    Ok(ExactRun {
        objects,
        threads: gathered.threads(),
        tsc_hz,
        analysis_cycles: gathered.results.iter().map(|r| r.analysis_cycles).sum(),
        sites: summary.jump_sites + summary.trap_sites,
        stepped_sites: 0,
        trap_cost: None,
        exit,
        wall_ns,
        static_analysis_ns: static_analysis.as_nanos() as u64,
        blocks,
        patch: Some(summary),
    })
}

/// The runtime's path as `LD_PRELOAD` needs it: absolute, existing, without the separators
/// (space and colon) the loader splits the list on.
fn checked_runtime(runtime: &Path) -> Result<PathBuf, ProfileError> {
    let bad = |what: String| ProfileError::Command {
        command: runtime.display().to_string(),
        what,
    };
    let path = runtime
        .canonicalize()
        .map_err(|e| bad(format!("the patch runtime library cannot be found: {e}")))?;
    let text = path.display().to_string();
    if text.contains([' ', ':']) {
        return Err(bad(
            "the patch runtime library's path holds a space or a colon, which LD_PRELOAD cannot name"
                .into(),
        ));
    }
    Ok(path)
}

fn system(what: &'static str) -> impl Fn(std::io::Error) -> ProfileError {
    move |source| ProfileError::System {
        what: what.to_owned(),
        source,
    }
}

enum Scratch {
    Given(PathBuf),
    Temporary(tempfile::TempDir),
}

impl Scratch {
    fn path(&self) -> &Path {
        match self {
            Scratch::Given(p) => p,
            Scratch::Temporary(t) => t.path(),
        }
    }
}

/// Starts the target and waits for it, then for every process it started (each announced by
/// its runtime with a `PID.started` file) until each has written its result or is gone.
fn run_to_the_end(
    mut command: std::process::Command,
    results: &Path,
    stop: &AtomicBool,
) -> Result<TargetExit, ProfileError> {
    let mut child = command.spawn().map_err(system("starting the target"))?;
    let pid = child.id() as i32;
    let (sender, receiver) = std::sync::mpsc::channel();
    let status = std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = sender.send(child.wait());
        });
        let mut interrupted = false;
        loop {
            match receiver.recv_timeout(Duration::from_millis(20)) {
                Ok(status) => return status,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if stop.load(Ordering::SeqCst) && !std::mem::replace(&mut interrupted, true) {
                        signal(pid, libc::SIGINT);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(std::io::Error::other("the waiting thread ended"));
                }
            }
        }
    })
    .map_err(system("waiting for the target"))?;
    use std::os::unix::process::ExitStatusExt;
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => TargetExit::Exited(code),
        (None, Some(signal)) => TargetExit::Signaled(signal),
        (None, None) => TargetExit::Detached,
    };
    wait_for_descendants(results, pid, stop);
    Ok(exit)
}

fn signal(pid: i32, signal: i32) {
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(pid, signal);
    }
}

fn wait_for_descendants(results: &Path, root: i32, stop: &AtomicBool) {
    let mut interrupted = HashSet::new();
    loop {
        let pending: Vec<i32> = pids_with(results, "started")
            .into_iter()
            .filter(|&p| p != root && !results.join(format!("{p}.json")).exists() && alive(p))
            .collect();
        if pending.is_empty() {
            return;
        }
        if stop.load(Ordering::SeqCst) {
            for &p in &pending {
                if interrupted.insert(p) {
                    signal(p, libc::SIGINT);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` exists and is not a zombie (which has written all it will).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn pids_with(results: &Path, extension: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(results) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let name = e.ok()?.file_name();
        let (pid, ext) = name.to_str()?.split_once('.')?;
        (ext == extension).then(|| pid.parse().ok())?
    })
    .collect()
}

/// Every process's result.
struct Gathered {
    results: Vec<ProcessResult>,
    started: usize,
}

fn gather(results: &Path, exit: TargetExit) -> Result<Gathered, ProfileError> {
    let mut pids = pids_with(results, "json");
    pids.sort_unstable();
    let mut out = Vec::new();
    for pid in pids {
        let path = results.join(format!("{pid}.json"));
        let bytes = std::fs::read(&path).map_err(|source| ProfileError::Io {
            path: path.clone(),
            action: "read",
            source,
        })?;
        out.push(ProcessResult::parse(&path, &bytes)?);
    }
    if let Some(failure) = out.iter().find_map(|r| r.failure.as_ref()) {
        return Err(ProfileError::System {
            what: "the patch runtime could not instrument the target".into(),
            source: std::io::Error::other(failure.clone()),
        });
    }
    let started = pids_with(results, "started").len();
    if out.is_empty() && started == 0 && !matches!(exit, TargetExit::Signaled(_)) {
        return Err(ProfileError::System {
            what: "the patch runtime did not run in the target".into(),
            source: std::io::Error::other(
                "it was not loaded (a static executable, or a set-user-ID one, ignores LD_PRELOAD)",
            ),
        });
    }
    Ok(Gathered {
        results: out,
        started,
    })
}

impl Gathered {
    fn threads(&self) -> Vec<crate::ThreadTree> {
        self.results
            .iter()
            .flat_map(|r| r.threads.iter().cloned())
            .collect()
    }

    fn executions(&self, blocks: usize) -> Vec<u64> {
        let mut total = vec![0u64; blocks];
        for r in &self.results {
            for (t, n) in total.iter_mut().zip(&r.executions) {
                *t += n;
            }
        }
        total
    }

    fn summary(&self, handover: &Handover) -> PatchSummary {
        let mut summary = PatchSummary::default();
        let instrumented = self.results.iter().find(|r| r.uninstrumented.is_none());
        let refused: HashSet<u32> = instrumented
            .map(|r| r.refused.iter().map(|x| x.site).collect())
            .unwrap_or_default();
        for (i, planned) in handover.sites.iter().enumerate() {
            match &planned.patch {
                SitePatch::ShortJump { .. } if !refused.contains(&(i as u32)) => {
                    summary.springboard_sites += 1;
                }
                SitePatch::FallThrough { .. } if !refused.contains(&(i as u32)) => {
                    summary.fall_through_sites += 1;
                }
                SitePatch::Jump { .. }
                    if planned.site.address_only() && !refused.contains(&(i as u32)) =>
                {
                    summary.room_jumps += 1;
                }
                SitePatch::Skip { reason } => summary.skipped.push(SkippedSite {
                    object: 0,
                    address: planned.site.address,
                    reason: reason.clone(),
                }),
                SitePatch::Trap { why } if !refused.contains(&(i as u32)) => {
                    *summary.trap_reasons.entry(why.clone()).or_default() += 1;
                    summary.traps.push(SkippedSite {
                        object: 0,
                        address: planned.site.address,
                        reason: why.clone(),
                    });
                }
                _ => {}
            }
        }
        if let Some(r) = instrumented {
            summary.jump_sites = r.jump_sites;
            summary.trap_sites = r.trap_sites;
            for refusal in &r.refused {
                if let Some(planned) = handover.sites.get(refusal.site as usize) {
                    summary.skipped.push(SkippedSite {
                        object: 0,
                        address: planned.site.address,
                        reason: refusal.reason.clone(),
                    });
                }
            }
        }
        summary.skipped.sort_by_key(|s| s.address);
        for r in &self.results {
            summary.dropped_events += r.dropped_events;
            summary.lost_threads += u64::from(r.lost_threads);
            if let Some(program) = &r.uninstrumented {
                summary
                    .uninstrumented
                    .push(format!("{program} (pid {})", r.pid));
            }
        }
        let instrumented_results = self.results.iter().filter(|r| r.uninstrumented.is_none());
        summary.processes_without_result =
            self.started.saturating_sub(instrumented_results.count()) as u64;
        summary
    }
}
