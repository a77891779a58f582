//! What `record` refuses or warns about before and after a run, and what `report` says of such
//! runs: flags that contradict each other, a profile written over the program, a sampling event
//! the machine cannot count, a run too short to sample, a program rebuilt without a build-id,
//! a patch profile read from another directory, a trap cost that swamps the times left.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{
    assert_bad_input, compile_fixture, compile_profile_fixture, loopscope, perf_events_allowed,
    ptrace_allowed, stderr, stdout,
};
use serde_json::Value;

/// `loopscope ARGS` run in `dir`.
fn loopscope_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the loopscope binary runs")
}

fn succeeded(out: &Output) {
    assert!(out.status.success(), "{}", stderr(out));
}

/// The profile's JSON document (the line after the format line).
fn profile_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let (_, body) = text.split_once('\n').unwrap();
    serde_json::from_str(body).unwrap()
}

fn write_profile_json(path: &Path, value: &Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let (first, _) = text.split_once('\n').unwrap();
    std::fs::write(path, format!("{first}\n{value}")).unwrap();
}

#[test]
fn exact_with_another_back_end_is_a_usage_error_naming_both_flags() {
    let out = loopscope(["record", "--backend", "patch", "--exact", "--", "true"]);
    assert_bad_input(&out, "--exact and --backend patch");
    assert!(stderr(&out).contains("--backend patch --blocks"));
    let out = loopscope(["record", "--backend", "sample", "--exact", "--", "true"]);
    assert_bad_input(&out, "--exact and --backend sample");
}

#[test]
fn exact_with_the_ptrace_back_end_records_block_counts() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_fixture("short_run.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("exact.profile");
    let out = loopscope([
        "record".as_ref(),
        "-q".as_ref(),
        "--backend".as_ref(),
        "ptrace".as_ref(),
        "--exact".as_ref(),
        "--no-calibrate".as_ref(),
        "-o".as_ref(),
        profile.as_os_str(),
        "--".as_ref(),
        binary.as_os_str(),
    ]);
    succeeded(&out);
    let json = profile_json(&profile);
    assert_eq!(json["recording"]["backend"], "ptrace");
    assert!(
        !json["recording"]["blocks"].as_array().unwrap().is_empty(),
        "--exact counts blocks"
    );
}

#[test]
fn a_profile_is_never_written_over_the_program_or_another_binary() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_fixture("short_run.c", dir.path()) else {
        return;
    };
    let victim = dir.path().join("victim");
    std::fs::copy(&binary, &victim).unwrap();
    let before = std::fs::read(&victim).unwrap();
    let out = loopscope_in(dir.path(), &["record", "-o", "victim", "--", "./victim"]);
    assert_bad_input(&out, "-o victim: that is the program `./victim` runs");
    // Through a link and an absolute path: the same file.
    std::os::unix::fs::symlink("victim", dir.path().join("link")).unwrap();
    let absolute = victim.display().to_string();
    let out = loopscope_in(dir.path(), &["record", "-o", "link", "--", &absolute]);
    assert_bad_input(&out, "that is the program");
    // Another program's binary.
    let out = loopscope_in(dir.path(), &["record", "-o", "short_run", "--", "./victim"]);
    assert_bad_input(&out, "-o short_run: an ELF binary is there");
    assert_eq!(std::fs::read(&victim).unwrap(), before);
    assert!(stdout(&out).is_empty(), "nothing ran");
    let listing: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(listing.len(), 3, "no profile was written: {listing:?}");
}

#[test]
fn an_event_the_machine_cannot_count_is_named_with_the_one_used_instead() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_fixture("short_run.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("ev.profile");
    for (event, recorded_as) in [
        ("instructions", "instructions"),
        ("cache-misses", "cache-misses+instructions"),
    ] {
        let out = loopscope([
            "record".as_ref(),
            "--event".as_ref(),
            event.as_ref(),
            "-o".as_ref(),
            profile.as_os_str(),
            "--".as_ref(),
            binary.as_os_str(),
        ]);
        succeeded(&out);
        let used = profile_json(&profile)["recording"]["event"]
            .as_str()
            .unwrap()
            .to_owned();
        let warning = format!("warning: --event {event}: the kernel refused it");
        if used == recorded_as {
            assert!(!stderr(&out).contains(&warning), "{}", stderr(&out));
        } else {
            let err = stderr(&out);
            let line = err.lines().find(|l| l.contains(&warning));
            let line = line.unwrap_or_else(|| panic!("no fallback warning in: {err}"));
            let used_name = match used.as_str() {
                "cycles+instructions" => "{cycles,instructions}",
                other => other,
            };
            assert!(
                line.ends_with(&format!("sampled {used_name} instead")),
                "{line}"
            );
        }
    }
}

#[test]
fn a_run_shorter_than_the_sampling_period_says_what_to_do_at_record_and_report() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_fixture("short_run.c", dir.path()) else {
        return;
    };
    let profile = dir.path().join("short.profile");
    // One sample a second: the first would come a second after a run of a millisecond.
    let out = loopscope([
        "record".as_ref(),
        "--freq".as_ref(),
        "1".as_ref(),
        "-o".as_ref(),
        profile.as_os_str(),
        "--".as_ref(),
        binary.as_os_str(),
    ]);
    succeeded(&out);
    let advice = "record with a higher --freq, or with --backend patch or ptrace";
    let err = stderr(&out);
    assert!(
        err.contains("warning: no samples at 1 Hz") && err.contains(advice),
        "{err}"
    );
    let out = loopscope(["report".as_ref(), profile.as_os_str()]);
    succeeded(&out);
    let text = stdout(&out);
    let note = text
        .lines()
        .find(|l| l.starts_with("note      no samples at 1 Hz"));
    assert!(note.is_some_and(|n| n.contains(advice)), "{text}");
}

#[test]
fn a_program_without_a_build_id_is_checked_by_its_loaded_code() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let no_id = ["-Wl,--build-id=none"];
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &no_id) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    let out = loopscope([
        "record".as_ref(),
        "-q".as_ref(),
        "--backend".as_ref(),
        "ptrace".as_ref(),
        "--no-calibrate".as_ref(),
        "-o".as_ref(),
        profile.as_os_str(),
        "--".as_ref(),
        binary.as_os_str(),
        "5".as_ref(),
    ]);
    succeeded(&out);
    let report = loopscope(["report".as_ref(), profile.as_os_str()]);
    succeeded(&report);
    assert!(!stdout(&report).contains("cannot be verified"));

    // A profile written before files without a build-id were identified: a note, no refusal.
    let old = dir.path().join("old.profile");
    std::fs::copy(&profile, &old).unwrap();
    let mut json = profile_json(&old);
    for o in json["objects"].as_array_mut().unwrap() {
        o.as_object_mut().unwrap().remove("content_id");
    }
    write_profile_json(&old, &json);
    let report = loopscope(["report".as_ref(), old.as_os_str()]);
    succeeded(&report);
    assert!(
        stdout(&report).contains("no build-id, and the profile predates"),
        "{}",
        stdout(&report)
    );

    // Another program built at the same path, also without a build-id.
    let other = compile_profile_fixture("shares.c", dir.path(), &no_id).unwrap();
    std::fs::rename(&other, &binary).unwrap();
    let report = loopscope(["report".as_ref(), profile.as_os_str()]);
    assert_bad_input(&report, "no build-id, and its loaded code");
    assert!(stderr(&report).contains("differs from the recorded"));
}

#[test]
fn a_patch_profile_is_read_from_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let out = loopscope_in(
        dir.path(),
        &[
            "record",
            "-q",
            "--backend",
            "patch",
            "-o",
            "p.profile",
            "--",
            "./nest",
            "5",
        ],
    );
    succeeded(&out);
    let profile = dir.path().join("p.profile");
    let recorded = profile_json(&profile)["objects"][0]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        Path::new(&recorded),
        dir.path().join("nest").canonicalize().unwrap()
    );
    let report = loopscope_in(Path::new("/"), &["report", &profile.display().to_string()]);
    succeeded(&report);
    let text = stdout(&report);
    assert!(!text.contains("not found"), "{text}");
    assert!(text.contains("nest.c:"), "{text}");
}

#[test]
fn a_trap_cost_that_swamps_the_measured_time_is_noted_with_its_figures() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    let out = loopscope([
        "record".as_ref(),
        "-q".as_ref(),
        "--backend".as_ref(),
        "ptrace".as_ref(),
        "--no-calibrate".as_ref(),
        "-o".as_ref(),
        profile.as_os_str(),
        "--".as_ref(),
        binary.as_os_str(),
        "30".as_ref(),
    ]);
    succeeded(&out);
    let report = loopscope(["report".as_ref(), profile.as_os_str()]);
    assert!(!stdout(&report).contains("the trap cost subtracted"));
    // The same run as if each marker's trap had been calibrated at a second of cycles: far
    // more than any section between two markers, so all of it is subtracted.
    let mut json = profile_json(&profile);
    json["recording"]["trap_cost"] = serde_json::json!({
        "cycles_per_event": 10_000_000_000u64,
        "events": 20000
    });
    write_profile_json(&profile, &json);
    let report = loopscope(["report".as_ref(), profile.as_os_str()]);
    succeeded(&report);
    let text = stdout(&report);
    let note = text
        .lines()
        .find(|l| l.starts_with("note      the trap cost subtracted (10000000000 cycles"));
    let note = note.unwrap_or_else(|| panic!("{text}"));
    assert!(note.contains("is 100.0 % of the time measured"), "{note}");
    assert!(
        note.contains("times of small loops and functions are uncertain"),
        "{note}"
    );
}
