//! `record` on programs that start other programs (system(), fork then exec, posix_spawn, a
//! bare exec, an exec from a second thread): the run finishes, the profile is written, the
//! starting program's counts are exact and the started program is a tree of its own.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{build_c, loopscope, repo_root, stderr, stdout};
use serde_json::Value;

/// The two fixtures compiled with `cc -O1 -g` into `dir`: the starter and its target.
fn build(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let fixture = |name: &str| repo_root().join("crates/cli/tests/fixtures").join(name);
    let starter = build_c(
        &fixture("starts_programs.c"),
        &["-O1", "-g", "-pthread"],
        dir.join("starts_programs"),
    )?;
    let target = build_c(
        &fixture("exec_target.c"),
        &["-O1", "-g"],
        dir.join("exec_target"),
    )?;
    Some((starter, target))
}

/// Records `starter MODE target` with `backend_args`, checks that it succeeded with both
/// programs' output, and returns the report as JSON.
fn record(dir: &Path, backend_args: &[&str], mode: &str) -> Option<Value> {
    let (starter, target) = build(dir)?;
    let profile = dir.join(format!("{mode}.profile"));
    let mut args: Vec<String> = vec!["record".into(), "-o".into(), path(&profile)];
    args.extend(backend_args.iter().map(|a| a.to_string()));
    args.extend(["--".into(), path(&starter), mode.into(), path(&target)]);
    let out = loopscope(&args);
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{mode}: {err}");
    assert!(text.contains("parent 666"), "{mode}: {text}\n{err}");
    assert!(text.contains("target 3795"), "{mode}: {text}\n{err}");
    let report = loopscope(["report", &path(&profile), "--json"]);
    assert!(report.status.success(), "{}", stderr(&report));
    Some(serde_json::from_str(&stdout(&report)).unwrap())
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn nodes<'a>(node: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(node);
    for c in node["children"].as_array().into_iter().flatten() {
        nodes(c, out);
    }
}

fn of_program<'a>(report: &'a Value, program: &str, kind: &str) -> Vec<&'a Value> {
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    all.into_iter()
        .filter(|n| n["kind"] == kind)
        .filter(|n| {
            n["object"]
                .as_str()
                .is_some_and(|o| o.ends_with(&format!("/{program}")))
        })
        .collect()
}

/// The starter's loop ran once with 37 trips; when the started program was measured, its
/// `main` is a tree of its own under the root, with its loop's 23 trips.
fn assert_counts(report: &Value, mode: &str, target_measured: bool) {
    let parent = of_program(report, "starts_programs", "loop");
    assert_eq!(parent.len(), 1, "{mode}: {report:#}");
    assert_eq!(
        (
            parent[0]["entries"].as_u64(),
            parent[0]["iterations"].as_u64()
        ),
        (Some(1), Some(37)),
        "{mode}"
    );
    if !target_measured {
        return;
    }
    let roots = report["tree"]["children"].as_array().unwrap();
    let target_main = roots.iter().find(|n| {
        n["name"] == "main"
            && n["object"]
                .as_str()
                .is_some_and(|o| o.ends_with("/exec_target"))
    });
    assert!(target_main.is_some(), "{mode}: {report:#}");
    assert_eq!(target_main.unwrap()["entries"].as_u64(), Some(1), "{mode}");
    let target = of_program(report, "exec_target", "loop");
    assert_eq!(target.len(), 1, "{mode}: {report:#}");
    assert_eq!(
        (
            target[0]["entries"].as_u64(),
            target[0]["iterations"].as_u64()
        ),
        (Some(1), Some(23)),
        "{mode}"
    );
}

const MODES: [&str; 5] = ["system", "fork", "spawn", "exec", "thread"];

#[test]
fn ptrace_follows_every_program_a_process_starts() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let Some(report) = record(dir.path(), &["--backend", "ptrace"], mode) else {
            return;
        };
        assert_eq!(report["backend"], "ptrace");
        assert_counts(&report, mode, true);
    }
}

#[test]
fn exact_follows_every_program_a_process_starts() {
    for mode in ["system", "fork", "exec"] {
        let dir = tempfile::tempdir().unwrap();
        let Some(report) = record(dir.path(), &["--exact"], mode) else {
            return;
        };
        assert_counts(&report, mode, true);
    }
}

/// A process started by the shell of `system()` may report its first stops before the shell's
/// fork event does (the kernel reports the newest tracee first), more often on a busy machine:
/// the run must adopt it then, not lose track of it. Two spinning threads make the machine busy.
#[test]
fn ptrace_adopts_processes_that_stop_before_their_fork_is_reported() {
    let _busy = Busy::start(2);
    for _ in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let Some(report) = record(dir.path(), &["--backend", "ptrace"], "system") else {
            return;
        };
        assert_counts(&report, "system", true);
    }
}

/// Threads that spin until dropped, also when a test fails.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn start(threads: usize) -> Busy {
        let spinning = Arc::new(AtomicBool::new(true));
        for _ in 0..threads {
            let spinning = spinning.clone();
            std::thread::spawn(move || {
                while spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        Busy(spinning)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

#[test]
fn patch_names_a_process_an_exec_replaced() {
    for mode in ["fork", "exec", "system"] {
        let dir = tempfile::tempdir().unwrap();
        let Some(report) = record(dir.path(), &["--backend", "patch"], mode) else {
            return;
        };
        let notes: Vec<&str> = report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        assert!(
            !notes.iter().any(|n| n.contains("SIGKILL")),
            "{mode}: {notes:?}"
        );
        let replaced = notes
            .iter()
            .any(|n| n.starts_with("1 processes executed another program"));
        // The process that executes is the starter itself only in `exec`; after a fork or
        // system() it is a child that ran none of the starter's loops.
        assert_eq!(replaced, mode != "system", "{mode}: {notes:?}");
        if mode != "exec" {
            assert_counts(&report, mode, false);
        }
    }
}
