//! `loopscope machine`, `completions`, `--version`, and the shared conventions (exit codes,
//! one-line errors) as a user meets them.

mod common;

use common::{assert_bad_input, example, loopscope, stderr, stdout};

fn json(output: &std::process::Output) -> serde_json::Value {
    assert!(output.status.success(), "stderr: {}", stderr(output));
    serde_json::from_str(&stdout(output)).expect("stdout is one JSON document")
}

#[test]
fn json_has_the_documented_fields() {
    let value = json(&loopscope(["machine", "--json"]));
    for key in [
        "format_version",
        "model",
        "cores",
        "threads_per_core",
        "tsc_hz",
        "caches",
        "isa",
        "peak_flops_per_cycle",
        "measured",
    ] {
        assert!(value.get(key).is_some(), "missing {key} in {value}");
    }
    for cache in value["caches"].as_array().unwrap() {
        for key in [
            "level",
            "kind",
            "size_bytes",
            "line_bytes",
            "ways",
            "sets",
            "shared_by",
        ] {
            assert!(cache.get(key).is_some(), "missing caches[].{key}");
        }
    }
    assert!(value["measured"].is_null());
}

#[test]
fn out_then_read_back_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    let first = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "--out".as_ref(),
        file.as_os_str(),
    ]));
    let again = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "-m".as_ref(),
        file.as_os_str(),
    ]));
    assert_eq!(first, again);
}

#[test]
fn table_lists_caches_and_peak() {
    let output = loopscope(["machine"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.contains("cache  kind"), "{text}");
    assert!(text.contains("FLOPs per cycle per core"), "{text}");
}

#[test]
fn kerncraft_import_lists_unmapped_keys_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skx.toml");
    let yml = example("machines/skylake-sp.yml");
    let output = loopscope([
        "machine".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
        "--out".as_ref(),
        file.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("keys not mapped") && err.contains("in-core model"),
        "{err}"
    );
    assert!(stdout(&output).contains("Gold 6148"));
    let back = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "-m".as_ref(),
        file.as_os_str(),
    ]));
    assert_eq!(back["caches"][2]["size_bytes"], 28_835_840);
    assert_eq!(back["measured"]["bandwidth"].as_array().unwrap().len(), 12);
    // -q silences the warning.
    let quiet = loopscope([
        "machine".as_ref(),
        "-q".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
    ]);
    assert!(stderr(&quiet).is_empty());
}

#[test]
fn bad_machine_files_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.toml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), missing.as_os_str()]),
        "absent.toml: cannot read",
    );
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), dir.path().as_os_str()]),
        "is a directory",
    );
    let future = dir.path().join("future.toml");
    std::fs::write(&future, "format_version = 7\n").unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), future.as_os_str()]),
        "format_version 7 is not supported",
    );
    let garbled = dir.path().join("garbled.toml");
    std::fs::write(&garbled, "format_version = 1\n[caches\n").unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), garbled.as_os_str()]),
        "garbled.toml:2:",
    );
    // kerncraft writes counts as floats (`cores per group: 1.0`): whole ones import, others
    // are refused at their line and column.
    let level = |cores: &str| {
        format!(
            "clock: 2 GHz\nmemory hierarchy:\n  - level: L1\n    cache per group: {{sets: 64, \
             ways: 8, cl_size: 64}}\n    cores per group: {cores}\n"
        )
    };
    let whole = dir.path().join("whole.yml");
    std::fs::write(&whole, level("1.0")).unwrap();
    let output = loopscope(["machine".as_ref(), "--import".as_ref(), whole.as_os_str()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let half = dir.path().join("half.yml");
    std::fs::write(&half, level("1.5")).unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), half.as_os_str()]),
        "half.yml:5:22: key `memory hierarchy[L1].cores per group`: expected a whole number, \
         found `1.5`",
    );
    let broken = example("machines/broken.yml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), broken.as_os_str()]),
        "broken.yml:",
    );
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), broken.as_os_str()]),
        "is not a loopscope machine file",
    );
    let unwritable = dir.path().join("no/such/dir/m.toml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--out".as_ref(), unwritable.as_os_str()]),
        "cannot write",
    );
}

#[test]
fn usage_errors_exit_2() {
    let output = loopscope(["machine", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(2));
    let output = loopscope(["no-such-command"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn version_help_and_completions() {
    let output = loopscope(["--version"]);
    assert!(output.status.success());
    assert!(stdout(&output).starts_with("loopscope "));
    let output = loopscope(["machine", "--help"]);
    assert!(stdout(&output).contains("Examples:"));
    let output = loopscope(["completions", "bash"]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("loopscope"));
}
