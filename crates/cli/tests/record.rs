//! `record` and `report` end to end on fixture programs compiled at test time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    assert_bad_input, compile_profile_fixture, loopscope, perf_events_allowed, repo_root, stdout,
};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    repo_root().join("crates/profile/tests/fixtures").join(name)
}

fn compile(name: &str, dir: &Path) -> Option<PathBuf> {
    compile_profile_fixture(name, dir, &[])
}

fn record(args: &[&str], binary: &Path, target_args: &[&str], profile: &Path) {
    let mut all: Vec<String> = vec!["record".into(), "-o".into(), profile.display().to_string()];
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

fn report_json(profile: &Path) -> Value {
    let out = loopscope(["report", &profile.display().to_string(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn nodes<'a>(node: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(node);
    for c in node["children"].as_array().into_iter().flatten() {
        nodes(c, out);
    }
}

/// A table row's cells (columns are two spaces or more apart).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect()
}

fn line_of(source: &str, tag: &str) -> u64 {
    let text = std::fs::read_to_string(fixture(source)).unwrap();
    text.lines()
        .position(|l| l.contains(&format!("/* LOOP {tag} ")))
        .unwrap() as u64
        + 1
}

#[test]
fn ptrace_report_has_exact_entries_and_trips() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    record(&["--backend", "ptrace"], &binary, &["30"], &profile);
    let report = report_json(&profile);
    assert_eq!(report["backend"], "ptrace");
    // The triangular nest: 30 entries of the inner loop, 30 * 31 / 2 header executions, inside
    // a loop of 30 trips, both on the nest's lines.
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    let outer: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|n| {
            n["kind"] == "loop"
                && n["children"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["iterations"] == 465))
        })
        .collect();
    assert_eq!(outer.len(), 1, "{report:#}");
    assert_eq!(
        (
            outer[0]["entries"].as_u64(),
            outer[0]["iterations"].as_u64()
        ),
        (Some(1), Some(30))
    );
    let inner = &outer[0]["children"][0];
    assert_eq!(
        (inner["entries"].as_u64(), inner["iterations"].as_u64()),
        (Some(30), Some(465))
    );
    assert_eq!(inner["trips"], serde_json::json!([1.0, 15.5, 30.0]));
    let lines = line_of("nest.c", "tri-outer")..=line_of("nest.c", "tri-inner") + 1;
    for n in [outer[0], inner] {
        assert_eq!(
            n["file"].as_str().map(|f| f.ends_with("nest.c")),
            Some(true)
        );
        assert!(lines.contains(&n["line"].as_u64().unwrap()), "{n:#}");
    }
    let text = stdout(&loopscope([
        "report",
        &profile.display().to_string(),
        "--all",
    ]));
    assert!(text.contains("nest.c:"), "{text}");
    assert!(text.contains("[F] work"), "{text}");
    let by_loop = stdout(&loopscope([
        "report",
        &profile.display().to_string(),
        "--by",
        "loop",
        "--all",
    ]));
    let work = by_loop.lines().find(|l| l.contains("[F] work")).unwrap();
    assert!(
        work.split_whitespace().any(|w| w == "3"),
        "three contexts: {work}"
    );
    // A function has calls but no iterations: its `iters` cell says the count does not apply.
    let header = cells(
        by_loop
            .lines()
            .find(|l| l.starts_with("function or loop"))
            .unwrap(),
    );
    let iters = header.iter().position(|&c| c == "iters").unwrap();
    assert_eq!(cells(work)[iters], "-", "{by_loop}");
    // Under --all the events line does not claim that only hot nodes are shown.
    let all = stdout(&loopscope([
        "report",
        &profile.display().to_string(),
        "--all",
        "--threshold",
        "50",
    ]));
    let events = all.lines().find(|l| l.starts_with("events")).unwrap();
    assert!(
        events.ends_with("every node shown, hot or not (hot: 50.00 % inclusive or more)"),
        "{events}"
    );
}

#[test]
fn sampled_shares_match_the_work() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("shares.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("shares.profile");
    record(&["--freq", "4000"], &binary, &[], &profile);
    let report = report_json(&profile);
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    let mut spins: Vec<f64> = all
        .iter()
        .filter(|n| n["kind"] == "function" && n["name"] == "spin")
        .map(|n| n["inclusive_share"].as_f64().unwrap())
        .collect();
    spins.sort_by(f64::total_cmp);
    assert_eq!(spins.len(), 2, "spin from two contexts: {report:#}");
    assert!((spins[1] - 0.75).abs() <= 0.05, "{spins:?}");
    assert!((spins[0] - 0.25).abs() <= 0.05, "{spins:?}");
}

#[test]
fn sampling_follows_a_child_that_outlives_its_parent() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = common::compile_fixture("outlived.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("outlived.profile");
    record(&["--backend", "sample"], &binary, &[], &profile);
    let report = report_json(&profile);
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    let share = |name: &str| -> f64 {
        all.iter()
            .filter(|n| n["kind"] == "function" && n["name"] == name)
            .map(|n| n["inclusive_share"].as_f64().unwrap())
            .sum()
    };
    // The child runs 100 times the parent's iterations, after the parent has returned.
    assert!(share("child_work") > 0.9, "{report:#}");
    assert!(share("parent_work") < 0.05, "{report:#}");
}

#[test]
fn sampling_does_not_wait_for_a_daemon_the_program_started() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = common::compile_fixture("daemon.c", dir.path()) else {
        return;
    };
    let pid_file = dir.path().join("daemon.pid");
    let profile = dir.path().join("daemon.profile");
    let started = std::time::Instant::now();
    record(
        &["--backend", "sample"],
        &binary,
        &[&pid_file.display().to_string()],
        &profile,
    );
    let waited = started.elapsed();
    // The daemon sleeps 60 s; stop it whatever the outcome.
    for _ in 0..100 {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        waited.as_secs() < 30,
        "record waited {waited:?} for the daemon"
    );
}

#[test]
fn dot_renders_with_graphviz() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    record(
        &["--backend", "ptrace", "--no-calibrate"],
        &binary,
        &["10"],
        &profile,
    );
    let dot = stdout(&loopscope([
        "report",
        &profile.display().to_string(),
        "--dot",
        "--all",
    ]));
    assert!(dot.starts_with("digraph lcct {"), "{dot}");
    assert!(dot.contains("shape=circle"), "{dot}");
    assert!(dot.contains("shape=box"), "{dot}");
    let Ok(mut child) = Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("skipped: graphviz `dot` not installed");
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
}

#[test]
fn bad_profiles_and_commands_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.profile");
    std::fs::write(&junk, "not a profile\n").unwrap();
    assert_bad_input(
        &loopscope(["report", &junk.display().to_string()]),
        "not a loopscope profile",
    );
    let missing = loopscope([
        "record",
        "-o",
        &dir.path().join("x").display().to_string(),
        "--",
        "no-such-command-xyz",
    ]);
    assert_bad_input(&missing, "no-such-command-xyz: not found in PATH");
    assert_bad_input(
        &loopscope(["report", &junk.display().to_string(), "--threshold", "300"]),
        "--threshold 300",
    );
}

#[test]
fn a_rebuilt_binary_is_refused_with_both_build_ids() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    record(
        &["--backend", "ptrace", "--no-calibrate"],
        &binary,
        &["5"],
        &profile,
    );
    let status = Command::new("cc")
        .args(["-O2", "-g"])
        .arg(fixture("nest.c"))
        .arg("-o")
        .arg(&binary)
        .status()
        .unwrap();
    assert!(status.success());
    let out = loopscope(["report", &profile.display().to_string()]);
    assert_bad_input(&out, "differs from the recorded");
}

#[test]
fn an_interrupted_recording_keeps_its_profile_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    // 4.5 million loop iterations: seconds under markers, milliseconds once detached.
    let child = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "--backend", "ptrace", "--no-calibrate", "-o"])
        .arg(&profile)
        .arg("--")
        .arg(&binary)
        .arg("3000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
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
    let report = report_json(&profile);
    assert_eq!(report["exit"]["kind"], "detached", "{report:#}");
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    assert!(
        all.iter()
            .any(|n| n["kind"] == "loop" && n["iterations"].as_u64() > Some(1000)),
        "{report:#}"
    );
}

#[test]
fn a_stripped_binary_is_profiled_and_the_report_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("stripped");
    let built = Command::new("cc")
        .arg("-O1")
        .arg(fixture("nest.c"))
        .arg("-o")
        .arg(&binary)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("strip")
            .arg(&binary)
            .status()
            .is_ok_and(|s| s.success());
    if !built {
        eprintln!("skipped: cc or strip missing");
        return;
    }
    let profile = dir.path().join("stripped.profile");
    record(
        &["--backend", "ptrace", "--no-calibrate"],
        &binary,
        &["30"],
        &profile,
    );
    let text = stdout(&loopscope([
        "report",
        &profile.display().to_string(),
        "--all",
    ]));
    assert!(
        text.contains("no symbols; functions are named by address"),
        "{text}"
    );
    assert!(text.contains("func_0x"), "{text}");
    let report = report_json(&profile);
    let mut all = Vec::new();
    nodes(&report["tree"], &mut all);
    assert!(
        all.iter()
            .any(|n| n["kind"] == "loop" && n["iterations"] == 465),
        "{report:#}"
    );
}

#[test]
fn an_unwritable_profile_path_is_refused_before_the_program_runs() {
    let out = loopscope([
        "record",
        "-o",
        "/nonexistent-dir/x.profile",
        "--",
        "sh",
        "-c",
        "echo ran",
    ]);
    assert_bad_input(
        &out,
        "/nonexistent-dir/x.profile: cannot write there: directory /nonexistent-dir does not exist",
    );
    assert!(!stdout(&out).contains("ran"));
}
