//! `report A B ...` merges only the ranks of one program, and says how each ended.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_bad_input, loopscope, perf_events_allowed, stderr, stdout};

/// `crates/cli/tests/fixtures/NAME` compiled with `cc -O1 -g` to `out`, or `None` having said
/// it skipped.
fn compile(name: &str, out: &Path) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let ok = Command::new("cc")
        .args(["-O1", "-g"])
        .arg(&source)
        .arg("-o")
        .arg(out)
        .status();
    if ok.is_ok_and(|s| s.success()) {
        Some(out.to_owned())
    } else {
        eprintln!("skipped: no working `cc` to build {name}");
        None
    }
}

/// Records `command` with the sample back-end into `profile`.
fn record(profile: &Path, command: &[&str]) {
    let out = loopscope(
        ["record", "-q", "-o", profile.to_str().unwrap(), "--"]
            .iter()
            .chain(command),
    );
    assert!(out.status.code().is_some(), "record ran: {}", stderr(&out));
    assert!(profile.is_file(), "no profile: {}", stderr(&out));
}

#[test]
fn profiles_of_two_programs_are_refused() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (Some(ends), Some(other)) = (
        compile("ends.c", &dir.path().join("ends")),
        compile("quicksort.c", &dir.path().join("quicksort")),
    ) else {
        return;
    };
    let a = dir.path().join("a.prof");
    let b = dir.path().join("b.prof");
    record(&a, &[ends.to_str().unwrap(), "exit"]);
    record(&b, &[other.to_str().unwrap(), "100000"]);
    let out = loopscope(["report", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_bad_input(&out, "b.prof is a profile of ");
    let err = stderr(&out);
    assert!(err.contains("a.prof of "), "{err}");
    assert!(err.contains("/quicksort") && err.contains("/ends"), "{err}");
}

#[test]
fn a_rank_killed_by_a_signal_is_shown() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(ends) = compile("ends.c", &dir.path().join("ends")) else {
        return;
    };
    let a = dir.path().join("prof.0");
    let b = dir.path().join("prof.1");
    record(&a, &[ends.to_str().unwrap(), "exit"]);
    record(&b, &[ends.to_str().unwrap(), "segv"]);
    let out = loopscope(["report", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("the ranks ended differently: prof.0 exited 7, prof.1 killed by signal 11"),
        "{text}"
    );
    let json = loopscope(["report", "--json", a.to_str().unwrap(), b.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["exits"][1]["kind"], "signaled", "{json}");
    assert_eq!(json["exits"][1]["code"], 11, "{json}");
}
