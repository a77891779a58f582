//! `record --backend patch` end to end: the report of a patch recording next to a ptrace one,
//! `mix` on block counts, an interrupted recording, bad flag combinations.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{
    assert_bad_input, build_c, compile_profile_fixture, loopscope, ptrace_allowed, repo_root,
    stdout,
};
use serde_json::Value;

fn record(args: &[&str], binary: &Path, target_args: &[&str], profile: &Path) {
    let mut all: Vec<String> = vec!["record".into(), "-q".into(), "-o".into()];
    all.push(profile.display().to_string());
    all.extend(args.iter().map(|s| s.to_string()));
    all.push("--".into());
    all.push(binary.display().to_string());
    all.extend(target_args.iter().map(|s| s.to_string()));
    let out = loopscope(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json(args: &[&str]) -> Value {
    let out = loopscope(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Every loop and function node as (path of names, entries, iterations).
fn counts(node: &Value, path: &str, out: &mut Vec<(String, u64, u64)>) {
    let here = format!("{path}/{}", node["name"].as_str().unwrap_or("?"));
    out.push((
        here.clone(),
        node["entries"].as_u64().unwrap_or(0),
        node["iterations"].as_u64().unwrap_or(0),
    ));
    for c in node["children"].as_array().into_iter().flatten() {
        counts(c, &here, out);
    }
}

#[test]
fn a_patch_report_has_the_ptrace_reports_counts() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let patched = dir.path().join("patch.profile");
    let traced = dir.path().join("ptrace.profile");
    record(&["--backend", "patch"], &binary, &["30"], &patched);
    record(
        &["--backend", "ptrace", "--no-calibrate"],
        &binary,
        &["30"],
        &traced,
    );
    let a = json(&["report", &patched.display().to_string(), "--json", "--all"]);
    let b = json(&["report", &traced.display().to_string(), "--json", "--all"]);
    assert_eq!(a["backend"], "patch");
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    counts(&a["tree"], "", &mut ca);
    counts(&b["tree"], "", &mut cb);
    ca.sort();
    cb.sort();
    assert_eq!(ca, cb);
    assert!(
        ca.iter()
            .any(|(_, entries, iterations)| (*entries, *iterations) == (30, 465))
    );
    let text = stdout(&loopscope(["report", &patched.display().to_string()]));
    assert!(text.contains("patch back-end"), "{text}");
}

#[test]
fn mix_on_patched_block_counts_is_exact_and_equals_ptraces() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let patched = dir.path().join("blocks.profile");
    let traced = dir.path().join("exact.profile");
    record(
        &["--backend", "patch", "--blocks"],
        &binary,
        &["30"],
        &patched,
    );
    record(&["--exact", "--no-calibrate"], &binary, &["30"], &traced);
    let a = json(&["mix", &patched.display().to_string(), "--json"]);
    let b = json(&["mix", &traced.display().to_string(), "--json"]);
    assert_eq!(a["estimate"], "exact", "{a:#}");
    assert_eq!(a["total_instructions"], b["total_instructions"]);
    assert_eq!(a["types"], b["types"]);
    let text = stdout(&loopscope(["mix", &patched.display().to_string()]));
    assert!(text.contains("exact"), "{text}");
}

#[test]
fn an_interrupted_patch_recording_keeps_what_the_target_measured() {
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join("crates/patch-runtime/tests/fixtures/ending.c");
    let Some(binary) = build_c(&source, &["-O1", "-g"], dir.path().join("ending")) else {
        return;
    };
    let profile = dir.path().join("ending.profile");
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "--backend", "patch", "-o"])
        .arg(&profile)
        .arg("--")
        .arg(&binary)
        .arg("wait")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The target says "ready" once it has run some rounds of its loops.
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().map(|l| l.unwrap()), Some("ready".to_owned()));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&["report", &profile.display().to_string(), "--json", "--all"]);
    assert_eq!(report["exit"]["kind"], "signaled", "{report:#}");
    assert_eq!(report["exit"]["code"], 2, "{report:#}");
    let mut all = Vec::new();
    counts(&report["tree"], "", &mut all);
    // At least 11 rounds of the outer loop, each with its 1000 inner iterations.
    assert!(
        all.iter()
            .any(|(_, entries, iterations)| *entries >= 11 && *iterations >= 11_000),
        "{all:?}"
    );
}

/// Every node as (kind, name, object, entries), with its children's.
fn flatten(node: &Value, out: &mut Vec<(String, String, String, u64, Vec<String>)>) {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let children = node["children"].as_array().cloned().unwrap_or_default();
    out.push((
        text(&node["kind"]),
        text(&node["name"]),
        text(&node["object"]),
        node["entries"].as_u64().unwrap_or(0),
        children.iter().map(|c| text(&c["object"])).collect(),
    ));
    for c in &children {
        flatten(c, out);
    }
}

#[test]
fn with_libraries_a_library_call_has_the_librarys_functions_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join("crates/patch-runtime/tests/fixtures/libraries.c");
    let Some(binary) = build_c(&source, &["-O1", "-g", "-lm"], dir.path().join("libraries")) else {
        return;
    };
    let profile = dir.path().join("libraries.profile");
    record(
        &["--backend", "patch", "--libraries"],
        &binary,
        &["500"],
        &profile,
    );
    let report = json(&["report", &profile.display().to_string(), "--json", "--all"]);
    let mut all = Vec::new();
    flatten(&report["tree"], &mut all);
    let sin = all
        .iter()
        .find(|(kind, name, ..)| kind == "plt" && name == "sin@plt")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(sin.3, 500);
    assert!(
        sin.4.iter().any(|object| object.contains("libm.so")),
        "libm's code below sin@plt: {sin:?}"
    );
    // Without the flag the library is one node.
    record(&["--backend", "patch"], &binary, &["500"], &profile);
    let report = json(&["report", &profile.display().to_string(), "--json", "--all"]);
    let mut all = Vec::new();
    flatten(&report["tree"], &mut all);
    assert!(
        !all.iter()
            .any(|(_, _, object, ..)| object.contains("libm.so"))
    );
    let out = loopscope(["record", "--libraries", "-o", "/dev/null", "--", "true"]);
    assert_bad_input(&out, "--libraries");
}

#[test]
fn block_counting_needs_a_marker_back_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = loopscope([
        "record",
        "--blocks",
        "-o",
        &dir.path().join("p").display().to_string(),
        "--",
        "true",
    ]);
    assert_bad_input(&out, "--blocks");
}

#[test]
fn a_missing_runtime_library_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p").display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "--backend", "patch", "-o", &profile, "--", "true"])
        .env(
            "LOOPSCOPE_PATCH_RUNTIME",
            "/nonexistent/libloopscope_patch_runtime.so",
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("patch runtime library"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
