//! The patch back-end against the ptrace back-end on the loop-profiling fixtures: the same
//! trees, entries and trips (times differ), the same block counts.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use loopscope_profile::{
    ExactOptions, ExactRun, Lcct, NodeKey, PatchOptions, TargetExit, record_exact, record_patch,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn profile_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profile/tests/fixtures")
        .join(name)
}

fn compile(source: &Path, flags: &[&str], dir: &Path) -> Option<PathBuf> {
    let stem = source.file_stem().unwrap().to_str().unwrap().to_owned();
    let out = dir.join(format!("{stem}{}", flags.join("").replace(['-', '='], "")));
    let compiler = if source.extension().is_some_and(|e| e == "cc") {
        "c++"
    } else {
        "cc"
    };
    let status = Command::new(compiler)
        .args(flags)
        .arg("-g")
        .arg(source)
        .arg("-o")
        .arg(&out)
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        _ => {
            eprintln!("skipped: cc could not build {}", source.display());
            None
        }
    }
}

/// The runtime library cargo built beside this test (in `deps/`) or one level up.
fn runtime() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        let candidate = dir.join("libloopscope_patch_runtime.so");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "libloopscope_patch_runtime.so not built next to {}",
        exe.display()
    );
}

/// One test at a time: the ptrace back-end waits for any child of the process, so two runs in
/// parallel test threads would take each other's events.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn ptrace_allowed() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope.trim() == "3" {
        eprintln!("skipped: ptrace disabled (kernel.yama.ptrace_scope = 3)");
        return false;
    }
    true
}

fn command(binary: &Path, args: &[&str]) -> Vec<OsString> {
    let mut command = vec![OsString::from(binary)];
    command.extend(args.iter().map(OsString::from));
    command
}

fn patched(binary: &Path, args: &[&str], count_blocks: bool) -> ExactRun {
    let options = PatchOptions {
        runtime: runtime(),
        count_blocks,
        scratch: std::env::var_os("PATCH_SCRATCH").map(PathBuf::from),
        ..PatchOptions::default()
    };
    record_patch(&command(binary, args), &options, &AtomicBool::new(false)).unwrap()
}

fn traced(binary: &Path, args: &[&str], count_blocks: bool) -> ExactRun {
    let options = ExactOptions {
        count_blocks,
        ..ExactOptions::default()
    };
    record_exact(&command(binary, args), &options, &AtomicBool::new(false)).unwrap()
}

/// Every node of the merged tree by its key path, with its counts (no times).
fn counts(run: &ExactRun) -> BTreeMap<String, [u64; 6]> {
    let mut tree = Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    let mut out = BTreeMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        let mut path = Vec::new();
        let mut at = Some(i as u32);
        while let Some(id) = at {
            let node = &tree.nodes[id as usize];
            path.push(match node.key {
                NodeKey::Root => "root".to_owned(),
                NodeKey::Function { address, .. } => format!("f{address:x}"),
                NodeKey::Plt { address, .. } => format!("p{address:x}"),
                NodeKey::Loop { id, .. } => format!("l{id}"),
                NodeKey::Unknown { .. } => "?".to_owned(),
            });
            at = node.parent;
        }
        path.reverse();
        out.insert(
            path.join("/"),
            [
                n.entries,
                n.header_executions,
                n.back_edges,
                n.exits,
                n.trips_min.unwrap_or(0),
                n.trips_max.unwrap_or(0),
            ],
        );
    }
    out
}

fn assert_same_trees(binary: &Path, args: &[&str]) -> ExactRun {
    let reference = traced(binary, args, false);
    let run = patched(binary, args, false);
    assert_eq!(run.exit, reference.exit);
    assert_eq!(
        counts(&run),
        counts(&reference),
        "patch (left) and ptrace (right) differ on {}",
        binary.display()
    );
    let events = |r: &ExactRun| r.threads.iter().map(|t| t.events).sum::<u64>();
    assert_eq!(events(&run), events(&reference), "marker events");
    assert_eq!(run.threads.len(), reference.threads.len(), "threads");
    let summary = run.patch.as_ref().unwrap();
    assert!(summary.jump_sites > 0);
    assert_eq!(summary.dropped_events, 0);
    run
}

#[test]
fn nest_gives_the_ptrace_tree() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for flags in [&["-O1"][..], &["-O0"], &["-O2"]] {
        let Some(binary) = compile(&profile_fixture("nest.c"), flags, dir.path()) else {
            return;
        };
        assert_same_trees(&binary, &["40"]);
        assert_same_trees(&binary, &["5", "x"]);
    }
}

#[test]
fn threads_and_a_fork_give_the_ptrace_trees() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(
        &profile_fixture("threads.c"),
        &["-O1", "-pthread"],
        dir.path(),
    ) else {
        return;
    };
    let run = assert_same_trees(&binary, &["3"]);
    assert_eq!(run.exit, TargetExit::Exited(0));
    assert_eq!(
        run.threads.len(),
        5,
        "main, three workers, the forked child"
    );
    let pids: std::collections::BTreeSet<u32> = run.threads.iter().map(|t| t.pid).collect();
    assert_eq!(pids.len(), 2, "two processes");
}

#[test]
fn shares_gives_the_ptrace_tree() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&profile_fixture("shares.c"), &["-O1"], dir.path()) else {
        return;
    };
    assert_same_trees(&binary, &["20000", "3"]);
}

#[test]
fn short_sites_take_springboards_or_traps_and_count_the_same() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&fixture("short.c"), &["-O1"], dir.path()) else {
        return;
    };
    let run = assert_same_trees(&binary, &["1000"]);
    let summary = run.patch.as_ref().unwrap();
    assert!(summary.springboard_sites >= 2, "{summary:?}");
    assert!(summary.trap_sites >= 1, "{summary:?}");
    assert!(
        summary
            .trap_reasons
            .keys()
            .any(|why| why.contains("short of a jump")),
        "{summary:?}"
    );
    // The 4-byte loop of `tiny` ran 1000 + 1001 + 1002 times, every header through a
    // springboard.
    let tree = merged(&run);
    assert!(
        tree.nodes
            .iter()
            .any(|n| n.header_executions == 3003 && n.entries == 3),
        "{:?}",
        counts(&run)
    );
}

#[test]
fn block_counts_equal_the_ptrace_ones() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (source, args) in [
        (profile_fixture("nest.c"), &["40"][..]),
        (fixture("short.c"), &["300"][..]),
        (profile_fixture("threads.c"), &["3"][..]),
    ] {
        let Some(binary) = compile(&source, &["-O1", "-pthread"], dir.path()) else {
            return;
        };
        let reference = traced(&binary, args, true);
        let run = patched(&binary, args, true);
        assert_eq!(run.blocks.len(), 1);
        assert_eq!(run.blocks[0].starts, reference.blocks[0].starts);
        assert_eq!(
            run.blocks[0].executions,
            reference.blocks[0].executions,
            "{}",
            source.display()
        );
        assert!(run.blocks[0].executions.iter().sum::<u64>() > 100);
        assert_eq!(counts(&run), counts(&reference), "{}", source.display());
    }
}

#[test]
fn a_process_ending_in_exit_or_a_signal_keeps_its_tree() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&fixture("ending.c"), &["-O1"], dir.path()) else {
        return;
    };
    let run = assert_same_trees(&binary, &["_exit"]);
    assert_eq!(run.exit, TargetExit::Exited(7));
    let run = assert_same_trees(&binary, &["raise"]);
    assert_eq!(run.exit, TargetExit::Signaled(libc_sigint()));
    assert!(merged(&run).nodes.iter().any(|n| n.header_executions > 0));
}

fn libc_sigint() -> i32 {
    2
}

fn merged(run: &ExactRun) -> Lcct {
    let mut tree = Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    tree
}

#[test]
fn cpp_exceptions_unwind_through_patched_code() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for flags in [&["-O1"][..], &["-O2"]] {
        let Some(binary) = compile(&fixture("except.cc"), flags, dir.path()) else {
            return;
        };
        let run = assert_same_trees(&binary, &["30"]);
        assert_eq!(run.exit, TargetExit::Exited(0), "every exception caught");
    }
}
