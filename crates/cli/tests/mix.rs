//! `mix` end to end: a cpu-clock recording against exact block counts, a `perf record` file
//! read back, and bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_bad_input, loopscope, perf_events_allowed, repo_root, stdout};
use serde_json::Value;

fn compile(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("mix");
    let ok = Command::new("cc")
        .args(["-O1", "-g"])
        .arg(repo_root().join("crates/cli/tests/fixtures/mix.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cc could not build mix.c");
    }
    ok.then_some(out)
}

fn record(args: &[&str], binary: &Path, reps: &str, profile: &Path) -> std::process::Output {
    let mut all: Vec<String> = vec![
        "record".into(),
        "-q".into(),
        "-o".into(),
        profile.display().to_string(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend(["--".into(), binary.display().to_string(), reps.into()]);
    loopscope(&all)
}

fn mix_json(input: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "mix".to_string(),
        input.display().to_string(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = loopscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Exact counts of 20 repetitions.
fn exact_mix(dir: &Path, binary: &Path) -> Option<Value> {
    if !common::ptrace_allowed() {
        return None;
    }
    let profile = dir.join("exact.profile");
    let out = record(&["--exact"], binary, "20", &profile);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(mix_json(&profile, &[]))
}

/// The shares of the types in the loop with the most instructions (the fixture's repetition
/// loop: setup before it weighs differently in a short exact run and a long sampled one).
fn loop_shares(mix: &Value) -> Vec<(String, f64)> {
    let rows = mix["by"].as_array().unwrap();
    let top = rows
        .iter()
        .filter(|r| r["kind"] == "loop")
        .max_by_key(|r| r["instructions"].as_u64().unwrap())
        .expect("a loop row");
    let total = top["instructions"].as_f64().unwrap();
    ["fp", "ls", "br", "int", "simd"]
        .iter()
        .map(|t| (t.to_string(), top["types"][t].as_f64().unwrap() / total))
        .collect()
}

/// Within the repetition loop, the shares of the types above 5 % agree with the exact ones to
/// 10 % (the bench's goal for the cpu-clock estimate) or within three of the standard errors
/// the estimate gives its shares: the time-based estimate depends on how fast each loop ran,
/// which another program on the same core can change.
fn assert_close(estimate: &Value, exact: &Value) {
    let errors: Vec<(String, f64)> = estimate["type_details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["type"].as_str().unwrap().to_owned(),
                d["share_error"].as_f64().unwrap(),
            )
        })
        .collect();
    for ((t, truth), (_, got)) in loop_shares(exact).into_iter().zip(loop_shares(estimate)) {
        if truth < 0.05 {
            continue;
        }
        let sigma = errors.iter().find(|(n, _)| *n == t).map_or(0.0, |e| e.1);
        assert!(
            (got - truth).abs() <= (0.10 * truth).max(3.0 * sigma),
            "{t}: estimated share {got:.4} (σ {sigma:.4}), exact {truth:.4}\n{estimate:#}"
        );
    }
}

#[test]
fn exact_counts_are_the_static_mix_times_the_block_executions() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(dir.path()) else {
        return;
    };
    let Some(exact) = exact_mix(dir.path(), &binary) else {
        return;
    };
    assert_eq!(exact["estimate"], "exact");
    assert_eq!(exact["event"], "exact");
    let types = &exact["types"];
    let total = exact["total_instructions"].as_u64().unwrap();
    let exclusive: u64 = ["fp", "ls", "br", "int"]
        .iter()
        .map(|t| types[t].as_u64().unwrap())
        .sum();
    assert_eq!(
        exclusive, total,
        "the exclusive types add up to all instructions"
    );
    // 20 repetitions of 1000 iterations of each loop: at least one branch per iteration.
    assert!(types["br"].as_u64().unwrap() >= 40_000, "{exact:#}");
    assert!(types["fp"].as_u64().unwrap() >= 20_000, "{exact:#}");
    for key in [
        "event",
        "estimate",
        "total_instructions",
        "types",
        "unattributed_samples",
        "by",
    ] {
        assert!(!exact[key].is_null(), "{key} missing");
    }
}

#[test]
fn a_cpu_clock_recording_agrees_with_exact_counts() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(dir.path()) else {
        return;
    };
    let Some(exact) = exact_mix(dir.path(), &binary) else {
        return;
    };
    let profile = dir.path().join("sampled.profile");
    let out = record(&["--event", "cpu-clock"], &binary, "100000", &profile);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let estimate = mix_json(&profile, &[]);
    assert_eq!(estimate["event"], "cpu-clock");
    assert_eq!(estimate["estimate"], "time-model");
    assert!(estimate["samples"].as_u64().unwrap() >= 100, "{estimate:#}");
    assert_close(&estimate, &exact);
    // The text output says which event and which estimate on its first line.
    let text = stdout(&loopscope(["mix", &profile.display().to_string()]));
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("cpu-clock samples") && first.contains("estimate: time-model"),
        "{first}"
    );
}

#[test]
fn a_perf_record_file_is_read_back() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(dir.path()) else {
        return;
    };
    let data = dir.path().join("perf.data");
    let recorded = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-F", "1000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&binary)
        .arg("100000")
        .output();
    match recorded {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!(
                "skipped: perf record failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: perf is not installed ({e})");
            return;
        }
    }
    let Some(exact) = exact_mix(dir.path(), &binary) else {
        return;
    };
    let estimate = mix_json(&data, &[]);
    assert_eq!(estimate["event"], "cpu-clock");
    assert!(estimate["samples"].as_u64().unwrap() >= 100, "{estimate:#}");
    let unattributed =
        estimate["unattributed_samples"].as_f64().unwrap() / estimate["samples"].as_f64().unwrap();
    assert!(unattributed < 0.2, "{estimate:#}");
    assert_close(&estimate, &exact);
    // --binary names the file for the recorded object (same build-id).
    let named = mix_json(
        &data,
        &["--binary", &binary.display().to_string(), "--types", "fp"],
    );
    assert!(named["types"]["other"].as_u64().unwrap() > 0, "{named:#}");
    assert_eq!(named["types"].as_object().unwrap().len(), 2, "fp and other");
    // An ELF that is none of the recorded objects is named as such, not as a bad ELF.
    let other = loopscope([
        "mix",
        &data.display().to_string(),
        "--binary",
        "/proc/self/exe",
    ]);
    assert_bad_input(
        &other,
        "--binary /proc/self/exe: not one of the recorded objects",
    );
    assert!(!common::stderr(&other).contains("expected a 64-bit"));
    // A truncated perf.data is one line of bad input.
    let bytes = std::fs::read(&data).unwrap();
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert_bad_input(&loopscope(["mix", &cut.display().to_string()]), "cut.data");
}

#[test]
fn packed_floating_point_is_told_apart_from_scalar_sse() {
    if !common::ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = common::compile_fixture("packed.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("packed.profile");
    let mut args = vec!["record", "-q", "--exact", "-o"];
    let (profile_arg, binary_arg) = (profile.display().to_string(), binary.display().to_string());
    args.extend([profile_arg.as_str(), "--", binary_arg.as_str()]);
    let out = loopscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mix = mix_json(&profile, &["--types", "fp,simd,vector_fp"]);
    let function = |name: &str| -> (u64, u64) {
        let row = mix["by"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == "function" && r["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {mix:#}"));
        let count = |t: &str| row["types"][t].as_u64().unwrap();
        (count("simd"), count("vector_fp"))
    };
    let (packed_simd, packed_vector) = function("packed_add");
    assert!(packed_vector > 0 && packed_vector <= packed_simd, "{mix:#}");
    let (scalar_simd, scalar_vector) = function("scalar_dot");
    assert!(scalar_simd > 0, "{mix:#}");
    assert_eq!(scalar_vector, 0, "{mix:#}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"hello\n").unwrap();
    assert_bad_input(
        &loopscope(["mix", &junk.display().to_string()]),
        "not a loopscope profile",
    );
    let truncated = dir.path().join("truncated.profile");
    std::fs::write(
        &truncated,
        b"loopscope-profile 1\n{\"command\": [\"a\"], \"obj",
    )
    .unwrap();
    assert_bad_input(
        &loopscope(["mix", &truncated.display().to_string()]),
        "truncated",
    );
    let fake_perf = dir.path().join("perf.data");
    std::fs::write(&fake_perf, b"PERFILE2\x10\x00\x00").unwrap();
    assert_bad_input(
        &loopscope(["mix", &fake_perf.display().to_string()]),
        "perf.data",
    );
    assert_bad_input(
        &loopscope(["mix", &junk.display().to_string(), "--types", "fp,vector"]),
        "--types vector",
    );
    assert_bad_input(&loopscope(["mix", "/no/such/profile"]), "/no/such/profile");
}

#[test]
fn a_loop_profile_without_block_counts_is_refused_with_the_command_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile(dir.path()) else {
        return;
    };
    let profile = dir.path().join("loops.profile");
    let out = record(&["--backend", "ptrace"], &binary, "2", &profile);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_bad_input(
        &loopscope(["mix", &profile.display().to_string()]),
        "record --exact",
    );
}
