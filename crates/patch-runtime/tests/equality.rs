//! The patch back-end against the ptrace back-end on the loop-profiling fixtures: the same
//! trees, entries and trips (times differ), the same block counts.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loopscope_profile::{ExactRun, NodeKey, TargetExit};
use support::*;

fn profile_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profile/tests/fixtures")
        .join(name)
}

/// Every node of the merged tree by its key path, with its counts (no times).
fn counts(run: &ExactRun) -> BTreeMap<String, [u64; 6]> {
    let tree = merged(run);
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
    let reference = traced(binary, args);
    let run = patched(binary, args);
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
        let reference = traced_counting_blocks(&binary, args);
        let run = patched_counting_blocks(&binary, args);
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
