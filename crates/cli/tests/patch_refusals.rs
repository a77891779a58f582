//! `record --backend patch` refuses, before running anything, what it could not measure: a
//! launcher, a script, a static executable. The sampling back-end still follows the first two.

mod common;

use common::{assert_bad_input, compile_profile_fixture, loopscope, perf_events_allowed, stderr};

fn record_patch(dir: &std::path::Path, command: &[&str]) -> std::process::Output {
    let profile = dir.join("p.prof");
    let mut args = vec!["record", "-q", "--backend", "patch", "-o"];
    let profile = profile.display().to_string();
    args.push(&profile);
    args.push("--");
    args.extend(command);
    loopscope(&args)
}

#[test]
fn a_launcher_is_refused_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let ran_arg = ran.display().to_string();
    let out = record_patch(dir.path(), &["env", "touch", &ran_arg]);
    assert_bad_input(
        &out,
        "env: a launcher: the patch back-end needs the executable itself",
    );
    assert!(!ran.exists(), "the launcher ran");
    assert!(!dir.path().join("p.prof").exists());
}

#[test]
fn a_script_is_refused_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let script = dir.path().join("run.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = record_patch(dir.path(), &[&script.display().to_string()]);
    assert_bad_input(&out, "run.sh: a script (#!/bin/sh), not an executable");
    assert!(!ran.exists(), "the script ran");
}

#[test]
fn a_static_executable_is_refused_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &["-static"]) else {
        return;
    };
    let out = record_patch(dir.path(), &[&binary.display().to_string(), "40"]);
    assert_bad_input(&out, "nest: statically linked");
    assert!(stderr(&out).contains("--backend ptrace"));
}

#[test]
fn the_sample_back_end_still_follows_a_launcher() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("s.prof").display().to_string();
    let ran = dir.path().join("ran");
    let ran_arg = ran.display().to_string();
    let out = loopscope([
        "record", "-q", "-o", &profile, "--", "env", "touch", &ran_arg,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ran.exists());
}
