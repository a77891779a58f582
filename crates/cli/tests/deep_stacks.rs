//! The sample back-end on stacks deeper than the bytes it copies per sample: `report` says how
//! many samples lost their callers, and `record --stack-bytes` copies enough to keep them.

mod common;

use std::path::Path;

use common::{assert_bad_input, compile_fixture, loopscope, perf_events_allowed, stderr, stdout};

/// Records `deep_stack` at depth 100 with `extra` flags and returns the report's text and JSON.
fn record_and_report(dir: &Path, name: &str, extra: &[&str]) -> (String, serde_json::Value) {
    let bin = dir.join("deep_stack");
    let profile = dir.join(name);
    let mut args = vec!["record", "-q", "-o", profile.to_str().unwrap()];
    args.extend(extra);
    args.extend(["--", bin.to_str().unwrap(), "100", "200"]);
    let out = loopscope(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = loopscope(["report", profile.to_str().unwrap()]);
    assert!(text.status.success(), "{}", stderr(&text));
    let json = loopscope(["report", "--json", profile.to_str().unwrap()]);
    (stdout(&text), serde_json::from_slice(&json.stdout).unwrap())
}

#[test]
fn cut_stacks_are_counted_and_a_larger_copy_keeps_the_callers() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if compile_fixture("deep_stack.c", dir.path()).is_none() {
        return;
    }
    let (text, _) = record_and_report(dir.path(), "default.prof", &[]);
    let note = text
        .lines()
        .find(|l| l.starts_with("note") && l.contains("have their stacks cut short"))
        .unwrap_or_else(|| panic!("no note on cut stacks:\n{text}"));
    assert!(note.contains("deeper than the 16384 bytes"), "{note}");
    assert!(note.contains("--stack-bytes 65528"), "{note}");

    let (_, json) = record_and_report(dir.path(), "deep.prof", &["--stack-bytes", "65528"]);
    let top: Vec<&str> = json["tree"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        top.contains(&"main"),
        "main heads the tree with the whole stack copied: {top:?}"
    );
}

#[test]
fn stack_bytes_is_validated() {
    let out = loopscope(["record", "--stack-bytes", "70000", "--", "true"]);
    assert_bad_input(&out, "--stack-bytes 70000");
    let out = loopscope([
        "record",
        "--backend",
        "ptrace",
        "--stack-bytes",
        "4096",
        "--",
        "true",
    ]);
    assert_bad_input(
        &out,
        "--stack-bytes sizes the stack copied with each sample",
    );
}
