//! `mix` refuses a rebuilt file it opens as `report` does, except the file `--binary` names,
//! and labels its notes; sampling flags are refused with the exact back-ends.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{assert_bad_input, compile_fixture, loopscope, perf_events_allowed, stderr, stdout};

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

/// `source` (a CLI fixture) compiled with `cc -O1 -g`, then `flags`, into `out`.
fn cc(source: &str, flags: &[&str], out: &Path) -> bool {
    let source = common::repo_root()
        .join("crates/cli/tests/fixtures")
        .join(source);
    common::build_c(
        &source,
        &[&["-O1", "-g"][..], flags].concat(),
        out.to_owned(),
    )
    .is_some()
}

/// Records `command` with the sample back-end into `profile`.
fn record_sampled(profile: &Path, command: &Path) {
    let out = loopscope([
        "record",
        "-q",
        "-o",
        profile.to_str().unwrap(),
        "--",
        command.to_str().unwrap(),
    ]);
    assert!(profile.is_file(), "{}", stderr(&out));
}

/// The samples `mix --json` attributes to `function`.
fn samples_in(mix: &Output, function: &str) -> u64 {
    assert!(mix.status.success(), "{}", stderr(mix));
    let json: serde_json::Value = serde_json::from_slice(&mix.stdout).unwrap();
    json["by"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "function" && r["name"] == function)
        .map(|r| r["samples"].as_u64().unwrap())
        .sum()
}

#[test]
fn mix_refuses_a_rebuilt_program_but_trusts_the_file_binary_names() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("ends.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("ends.prof");
    record_sampled(&profile, &bin);
    let original = dir.path().join("ends.orig");
    std::fs::copy(&bin, &original).unwrap();
    let rebuilt = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&bin)
        .arg(common::repo_root().join("crates/cli/tests/fixtures/ends.c"))
        .status()
        .unwrap();
    assert!(rebuilt.success());
    let p = profile.to_str().unwrap();
    let out = loopscope(["mix", p]);
    assert_bad_input(&out, "differs from the recorded");
    assert!(
        stderr(&out).contains("/ends: build-id "),
        "{}",
        stderr(&out)
    );

    // The original kept under another name, named on purpose: analysed, nothing to warn about.
    let kept = loopscope(["mix", p, "--json", "--binary", original.to_str().unwrap()]);
    assert!(samples_in(&kept, "spin") > 0, "{}", stdout(&kept));
    assert!(!stderr(&kept).contains("differs"), "{}", stderr(&kept));

    // The rebuilt file named on purpose: trusted, with a warning naming both build-ids.
    let trusted = loopscope(["mix", p, "--json", "--binary", bin.to_str().unwrap()]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    let err = stderr(&trusted);
    let warning = err
        .lines()
        .find(|l| l.contains("differs from the recorded"))
        .unwrap_or_else(|| panic!("no build-id warning in: {err}"));
    assert!(warning.starts_with("loopscope: warning: "), "{err}");
    assert!(warning.contains("as --binary asks"), "{err}");
}

#[test]
fn a_rebuilt_library_refuses_only_the_commands_that_open_it() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("libcallsback.so");
    let program = dir.path().join("through_library");
    let dir_text = dir.path().to_str().unwrap();
    let rpath = format!("-Wl,-rpath,{dir_text}");
    if !cc("calls_back.c", &["-shared", "-fPIC"], &library)
        || !cc(
            "through_library.c",
            &["-L", dir_text, "-lcallsback", &rpath],
            &program,
        )
    {
        return;
    }
    let profile = dir.path().join("lib.prof");
    record_sampled(&profile, &program);
    let p = profile.to_str().unwrap();
    let before = loopscope(["mix", p, "--json"]);
    let attributed = samples_in(&before, "spin");
    assert!(attributed > 0, "{}", stdout(&before));

    // Another build of the library, which no sample landed in.
    assert!(cc(
        "calls_back.c",
        &["-shared", "-fPIC", "-DSCALE=3"],
        &library
    ));
    // `report` walks every sample's stack through the library, so it opens it and refuses it.
    let report = loopscope(["report", p]);
    assert_bad_input(&report, "libcallsback.so: build-id ");
    // `mix` reads only where the samples landed: the library is not opened.
    let after = loopscope(["mix", p, "--json"]);
    assert_eq!(samples_in(&after, "spin"), attributed, "{}", stderr(&after));
    assert!(
        !stderr(&after).contains("libcallsback"),
        "{}",
        stderr(&after)
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
