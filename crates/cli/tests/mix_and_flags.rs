//! `mix` refuses a profile of a rebuilt program as `report` does and labels its notes; sampling
//! flags are refused with the exact back-ends.

mod common;

use std::process::Command;

use common::{assert_bad_input, compile_fixture, loopscope, perf_events_allowed, stderr};

#[test]
fn sampling_flags_are_refused_with_the_exact_back_ends() {
    for backend in ["patch", "ptrace"] {
        let out = loopscope([
            "record",
            "--backend",
            backend,
            "--freq",
            "500",
            "--",
            "true",
        ]);
        assert_bad_input(&out, "--freq sets how the sample back-end samples");
        let out = loopscope([
            "record",
            "--backend",
            backend,
            "--event",
            "cpu-clock",
            "--",
            "true",
        ]);
        assert_bad_input(&out, "--event sets how the sample back-end samples");
    }
}

#[test]
fn mix_refuses_a_profile_of_a_rebuilt_program() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("ends.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("ends.prof");
    let out = loopscope([
        "record",
        "-q",
        "-o",
        profile.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert!(profile.is_file(), "{}", stderr(&out));
    let rebuilt = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&bin)
        .arg(common::repo_root().join("crates/cli/tests/fixtures/ends.c"))
        .status()
        .unwrap();
    assert!(rebuilt.success());
    let out = loopscope(["mix", profile.to_str().unwrap()]);
    assert_bad_input(&out, "differs from the recorded");
    assert!(
        stderr(&out).contains("/ends: build-id "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn how_an_exact_mix_was_counted_is_not_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("quicksort.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("exact.prof");
    let out = loopscope([
        "record",
        "-q",
        "--exact",
        "-o",
        profile.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "1000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = loopscope(["mix", profile.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("loopscope: exact: every block execution"),
        "{err}"
    );
    assert!(!err.contains("warning: exact"), "{err}");
}
