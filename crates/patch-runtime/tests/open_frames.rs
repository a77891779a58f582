//! Frames still open when a run ends, and frames an unwinder skipped: the time since a
//! thread's last event goes to where it was when the run ended (a crash, a signal, another
//! thread's `exit`), and a C++ exception caught in a caller closes the frames it unwound.

mod support;

use loopscope_profile::{ExactRun, Lcct, NodeKey, TargetExit};
use support::*;

fn node(tree: &Lcct, key: NodeKey) -> &loopscope_profile::Node {
    tree.nodes
        .iter()
        .find(|n| n.key == key)
        .unwrap_or_else(|| panic!("no node {key:?} in {:?}", tree.nodes))
}

/// The node of `key` holds the largest self time of the tree, and some.
fn assert_holds_the_time(run: &ExactRun, key: NodeKey, what: &str) {
    let tree = merged(run);
    let own = node(&tree, key).self_time;
    assert!(own > 0, "{what}: no time where the run ended");
    let largest = tree.nodes.iter().map(|n| n.self_time).max().unwrap();
    assert_eq!(own, largest, "{what}: another node holds more time");
}

#[test]
fn a_crash_in_a_hot_loop_charges_the_loop() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&fixture("open_at_end.c"), &["-O1"], dir.path()) else {
        return;
    };
    let program = analyse(&binary);
    let run = patched(&binary, &["loop", "3000000"]);
    assert_eq!(run.exit, TargetExit::Signaled(11));
    let tree = merged(&run);
    let hot = node(&tree, outer_loop_key(&program, "hot"));
    assert_eq!(hot.header_executions, 3_000_000, "the counts are kept");
    assert_holds_the_time(&run, outer_loop_key(&program, "hot"), "patch, loop");
}

#[test]
fn a_crash_in_a_function_without_events_charges_it() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&fixture("open_at_end.c"), &["-O1"], dir.path()) else {
        return;
    };
    let program = analyse(&binary);
    let flat = function_key(&program, "flat");
    for (run, backend) in [
        (traced(&binary, &["flat"]), "ptrace"),
        (patched(&binary, &["flat"]), "patch"),
    ] {
        assert_eq!(run.exit, TargetExit::Signaled(11), "{backend}");
        let tree = merged(&run);
        assert!(
            node(&tree, flat).self_time > 0,
            "{backend}: flat has no time"
        );
    }
}

#[test]
fn a_thread_spinning_when_another_exits_keeps_its_loop_time() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(&fixture("open_at_end.c"), &["-O1", "-pthread"], dir.path()) else {
        return;
    };
    let program = analyse(&binary);
    let run = patched(&binary, &["thread"]);
    assert_eq!(run.exit, TargetExit::Exited(0));
    let spinner = run
        .threads
        .iter()
        .find(|t| t.tid != t.pid)
        .expect("the spinning thread's tree");
    let key = outer_loop_key(&program, "spin");
    let spin = node(&spinner.tree, key);
    assert!(spin.header_executions > 1000);
    assert!(spin.self_time > 0, "the spinning loop has no time");
}

#[test]
fn a_caught_exception_closes_the_frames_it_unwound() {
    let _serial = serial();
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for flags in [&["-O1"][..], &["-O2"]] {
        let Some(binary) = compile(&fixture("caught.cc"), flags, dir.path()) else {
            return;
        };
        let program = analyse(&binary);
        let main_loop = outer_loop_key(&program, "main");
        let inner_loop = outer_loop_key(&program, "_Z5innerii");
        for (run, backend) in [
            (traced(&binary, &["20"]), "ptrace"),
            (patched(&binary, &["20"]), "patch"),
        ] {
            let what = format!("{backend} {flags:?}");
            assert_eq!(run.exit, TargetExit::Exited(0), "{what}");
            let unmatched: u64 = run.threads.iter().map(|t| t.unmatched_events).sum();
            assert_eq!(unmatched, 0, "{what}: events dropped");
            let tree = merged(&run);
            let l = node(&tree, main_loop);
            assert_eq!(
                (l.entries, l.header_executions, l.trips_min, l.trips_max),
                (1, 50, Some(50), Some(50)),
                "{what}: main's loop"
            );
            let inner = node(&tree, inner_loop);
            assert_eq!(
                (inner.entries, inner.exits),
                (50, 50),
                "{what}: inner's loop"
            );
        }
    }
}
