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
    FileIdentity, HANDOVER_VARIABLE, HANDOVER_VERSION, Handover, ObjectPlan, PlannedSite,
    ProcessResult,
};
use super::landing::landing_pads;
use super::plan::{FileCode, SitePatch, decode_one, plan_sites, uses_vector_extensions};
use crate::command::resolve_program;
use crate::exact::markers::{counted_blocks, direct_call_target, marker_sites};
use crate::exact::{BlockCounts, ExactRun};
use crate::{ObjectRef, ProfileError, TargetExit};

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
    /// Patch the shared libraries the program loads at start too (not the C runtime's).
    pub libraries: bool,
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
    /// Processes that ended without a result (killed by `SIGKILL`, by a raw `exit_group`, or
    /// replaced by a program that does not load the runtime).
    pub processes_without_result: u64,
    /// Processes that executed another program before writing their trees (the `exec`
    /// replaced them, so their counts up to it are lost).
    #[serde(default)]
    pub processes_executed: u64,
    /// Libraries planned (`--libraries`) that the program had not loaded when it started.
    #[serde(default)]
    pub unloaded: Vec<String>,
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
    let program_path = resolve_program(command, options.search_path.as_deref())?;
    super::target::refuse_unpatchable(&program_path, &command[0].to_string_lossy())?;
    let runtime = checked_runtime(&options.runtime)?;
    let analysing = Instant::now();
    let mut planned = vec![plan_object(&program_path, options.count_blocks, true)?];
    if options.libraries {
        for library in loaded_libraries(&program_path, command)? {
            planned.push(plan_object(&library, options.count_blocks, false)?);
        }
    }
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
    let handover = Handover {
        version: HANDOVER_VERSION,
        objects: planned.iter().map(|p| p.plan.clone()).collect(),
        vector_extensions: planned.iter().any(|p| p.vector_extensions),
        results: results.clone(),
    };
    let handover_path = scratch.path().join("handover.json");
    handover.write(&handover_path)?;
    let mut preload = runtime.into_os_string();
    if let Some(more) = options.preload.as_ref().filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(more);
    }
    let mut child = std::process::Command::new(&program_path);
    child
        .arg0(&command[0])
        .args(&command[1..])
        .env("LD_PRELOAD", preload)
        .env(HANDOVER_VARIABLE, &handover_path);
    // The TSC rate over the whole run: no time of its own, precise on any run but the shortest.
    let (clock, tsc) = (Instant::now(), crate::tsc::read());
    let exit = run_to_the_end(child, &results, stop)?;
    let tsc_hz = match clock.elapsed().as_secs_f64() {
        seconds if seconds >= 0.2 => (crate::tsc::read() - tsc) as f64 / seconds,
        _ => crate::tsc::tsc_hz(),
    };
    let wall_ns = started.elapsed().as_nanos() as u64;
    let gathered = gather(&results, exit)?;
    let objects = planned
        .iter()
        .map(|p| ObjectRef {
            // As the other back-ends name it (the kernel's path of the mapped file), so that
            // `report` finds it from any directory.
            path: std::fs::canonicalize(&p.path)
                .unwrap_or_else(|_| p.path.clone())
                .display()
                .to_string(),
            build_id: p.build_id.clone(),
            content_id: None,
        })
        .collect();
    let blocks = if options.count_blocks {
        let mut executions = gathered.executions(handover.counted_blocks()).into_iter();
        planned
            .iter()
            .enumerate()
            .map(|(i, p)| BlockCounts {
                object: i as u32,
                executions: executions.by_ref().take(p.counted.len()).collect(),
                starts: p.counted.clone(),
            })
            .collect()
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

/// One object analysed and planned.
struct PlannedObject {
    path: PathBuf,
    build_id: Option<String>,
    plan: ObjectPlan,
    counted: Vec<u64>,
    vector_extensions: bool,
}

/// Analyses the object at `path` and plans its sites, as the ptrace back-end places them.
fn plan_object(
    path: &Path,
    count_blocks: bool,
    executable: bool,
) -> Result<PlannedObject, ProfileError> {
    let image = Image::open(path)?;
    let program = Program::analyze(&image, &Options::default());
    let data = crate::file::read_binary(path)?;
    let code = FileCode::new(&program, &data);
    let sites = marker_sites(
        &program,
        |a| decode_one(&code, a).and_then(|i| direct_call_target(&i)),
        count_blocks,
    );
    let (sites, plans) = plan_sites(&program, &code, sites, &landing_pads(&data));
    let counted = if count_blocks {
        counted_blocks(&program)
    } else {
        Vec::new()
    };
    let plan = ObjectPlan {
        file: FileIdentity::of(path).map_err(|source| ProfileError::Io {
            path: path.to_owned(),
            action: "read",
            source,
        })?,
        main_entry: executable
            .then(|| program.function("main").map(|f| f.address))
            .flatten(),
        functions: program.functions.iter().map(|f| f.address).collect(),
        sites: sites
            .into_iter()
            .zip(plans)
            .map(|(site, patch)| PlannedSite { site, patch })
            .collect(),
        counted_blocks: counted.len() as u32,
    };
    Ok(PlannedObject {
        path: path.to_owned(),
        build_id: program.build_id.clone(),
        vector_extensions: uses_vector_extensions(&program, &code),
        plan,
        counted,
    })
}

/// Libraries of the C runtime, which the runtime's own handler calls: never patched.
const C_RUNTIME: [&str; 7] = [
    "ld-linux",
    "libc.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libgcc_s.so",
    "libloopscope_patch_runtime",
];

/// The shared libraries the program loads at start, as its dynamic loader resolves them (the
/// loader lists them and stops when `LD_TRACE_LOADED_OBJECTS` is set, as `ldd` does), less
/// the C runtime. A program without a dynamic loader has none (and is not run: it would ignore
/// the variable).
fn loaded_libraries(program: &Path, command: &[OsString]) -> Result<Vec<PathBuf>, ProfileError> {
    let data = crate::file::read_binary(program)?;
    let dynamic = object::File::parse(&*data)
        .is_ok_and(|f| object::Object::section_by_name(&f, ".interp").is_some());
    if !dynamic {
        return Ok(Vec::new());
    }
    let listed = std::process::Command::new(program)
        .args(&command[1..])
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .env_remove("LD_PRELOAD")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(system("listing the program's libraries"))?;
    Ok(String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(library_path)
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            !C_RUNTIME.iter().any(|c| name.starts_with(c))
        })
        .collect())
}

/// The path of one line of the loader's list (`name => /path (0x…)`, or `/path (0x…)`).
fn library_path(line: &str) -> Option<PathBuf> {
    let line = line.trim();
    let path = match line.split_once("=>") {
        Some((_, right)) => right.trim(),
        None => line,
    };
    let path = path.rsplit_once(" (").map_or(path, |(p, _)| p).trim();
    path.starts_with('/').then(|| PathBuf::from(path))
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
            .filter(|&p| {
                p != root && !results.join(format!("{p}.json")).exists() && crate::procfs::alive(p)
            })
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
    /// The processes whose runtime announced it would write a result.
    started: Vec<i32>,
}

fn gather(results: &Path, exit: TargetExit) -> Result<Gathered, ProfileError> {
    let mut pids = pids_with(results, "json");
    pids.sort_unstable();
    let mut out = Vec::new();
    for pid in pids {
        let path = results.join(format!("{pid}.json"));
        // Written by the runtime inside the target: a target that fills it is refused at the
        // cap on profiles, not read until memory runs out.
        let bytes =
            loopscope_machine::read_bounded(&path, crate::PROFILE_CAP_BYTES, "patch results")
                .map_err(|source| ProfileError::Io {
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
    let started = pids_with(results, "started");
    if out.is_empty() && started.is_empty() && !matches!(exit, TargetExit::Signaled(_)) {
        return Err(ProfileError::System {
            what: "the patch runtime did not report from the target".into(),
            source: std::io::Error::other(
                "it was not loaded (a static executable, or a set-user-ID one, ignores \
                 LD_PRELOAD), or could not read its handover",
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
        // Site ids run over the objects one after another.
        let all: Vec<(u32, &PlannedSite)> = handover
            .objects
            .iter()
            .enumerate()
            .flat_map(|(o, object)| object.sites.iter().map(move |s| (o as u32, s)))
            .collect();
        for (id, &(object, planned)) in all.iter().enumerate() {
            let kept = !refused.contains(&(id as u32));
            let site = |reason: &str| SkippedSite {
                object,
                address: planned.site.address,
                reason: reason.to_owned(),
            };
            match &planned.patch {
                SitePatch::ShortJump { .. } if kept => summary.springboard_sites += 1,
                SitePatch::FallThrough { .. } if kept => summary.fall_through_sites += 1,
                SitePatch::Jump { .. } if kept && planned.site.address_only() => {
                    summary.room_jumps += 1;
                }
                SitePatch::Skip { reason } => summary.skipped.push(site(reason)),
                SitePatch::Trap { why } if kept => {
                    *summary.trap_reasons.entry(why.clone()).or_default() += 1;
                    summary.traps.push(site(why));
                }
                _ => {}
            }
        }
        if let Some(r) = instrumented {
            summary.jump_sites = r.jump_sites;
            summary.trap_sites = r.trap_sites;
            for refusal in &r.refused {
                if let Some(&(object, planned)) = all.get(refusal.site as usize) {
                    summary.skipped.push(SkippedSite {
                        object,
                        address: planned.site.address,
                        reason: refusal.reason.clone(),
                    });
                }
            }
            for &o in &r.unloaded {
                if let Some(object) = handover.objects.get(o as usize) {
                    summary.unloaded.push(object.file.path.clone());
                }
            }
        }
        summary.skipped.sort_by_key(|s| (s.object, s.address));
        for r in &self.results {
            summary.dropped_events += r.dropped_events;
            summary.lost_threads += u64::from(r.lost_threads);
            if let Some(program) = &r.uninstrumented {
                summary
                    .uninstrumented
                    .push(format!("{program} (pid {})", r.pid));
            }
        }
        // A process that executed another program keeps its id: the new program's runtime
        // wrote the only result under it.
        for &pid in &self.started {
            match self.results.iter().find(|r| r.pid as i32 == pid) {
                Some(r) if r.uninstrumented.is_some() => summary.processes_executed += 1,
                Some(_) => {}
                None => summary.processes_without_result += 1,
            }
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaders_list_gives_paths() {
        assert_eq!(
            library_path("\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f2a1c000000)"),
            Some(PathBuf::from("/lib/x86_64-linux-gnu/libm.so.6"))
        );
        assert_eq!(
            library_path("\t/lib64/ld-linux-x86-64.so.2 (0x00007f2a1c200000)"),
            Some(PathBuf::from("/lib64/ld-linux-x86-64.so.2"))
        );
        assert_eq!(library_path("\tlinux-vdso.so.1 (0x00007ffc5a5e8000)"), None);
        assert_eq!(library_path("\tlibfoo.so => not found"), None);
    }
}
