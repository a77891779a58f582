//! Hostile but fair input to the profiling commands (`record`, `report`, `mix`, `loops`,
//! `blocks`): odd output targets, commands that are not programs, flags out of range, and
//! profiles or perf.data files that are empty, damaged, truncated, of another version or not
//! files at all. Each must be one `loopscope: error:` line with exit 2, at once, never a panic
//! or a wait on a FIFO.

mod common;

use std::path::Path;
use std::process::Command;

use common::{assert_bad_input, loopscope, perf_events_allowed, stderr};

fn mkfifo(path: &Path) -> bool {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: mkfifo failed");
    }
    ok
}

#[test]
fn record_refuses_an_output_it_cannot_write_before_running_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    if !mkfifo(&fifo) {
        return;
    }
    let marker = dir.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    let missing = dir.path().join("no/such/dir/p.profile");
    // A link in a writable directory to a file in a missing one: the directory checked is the
    // one the link leads to.
    let link = dir.path().join("link.profile");
    std::os::unix::fs::symlink("gone/p.profile", &link).unwrap();
    let cases = [
        (dir.path().to_path_buf(), "is a directory"),
        (fifo, "is a FIFO"),
        (
            Path::new("/dev/null").to_path_buf(),
            "is a character device",
        ),
        (missing, "no/such/dir does not exist"),
        (link, "cannot write there: directory"),
    ];
    for (output, why) in cases {
        let out = loopscope([
            "record".as_ref(),
            "-o".as_ref(),
            output.as_os_str(),
            "--".as_ref(),
            "sh".as_ref(),
            "-c".as_ref(),
            touch.as_ref() as &std::ffi::OsStr,
        ]);
        assert_bad_input(&out, why);
        assert!(!marker.exists(), "{}: the command ran", output.display());
    }
}

#[test]
fn record_refuses_commands_that_are_not_programs_and_rates_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("p.profile");
    let output = output.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--", "./does-not-exist-here"], "no such file"),
        (&["--", "/dev/zero"], "not executable"),
        (&["--", "/tmp"], "is a directory"),
        (&["--freq", "0", "--", "true"], "--freq 0"),
        (&["--freq", "10000000", "--", "true"], "--freq 10000000"),
    ];
    for (args, why) in cases {
        let mut all = vec!["record", "-o", output];
        all.extend_from_slice(args);
        assert_bad_input(&loopscope(&all), why);
    }
    assert!(!Path::new(output).exists());
}

#[test]
fn readers_refuse_what_is_not_a_file_of_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    if !mkfifo(&fifo) {
        return;
    }
    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let d = dir.path().to_str().unwrap().to_owned();
    let inputs = [
        (d.as_str(), "directory"),
        (fifo.to_str().unwrap(), "is a FIFO"),
        ("/dev/zero", ""),
        (script.to_str().unwrap(), ""),
        (empty.to_str().unwrap(), ""),
    ];
    for (input, why) in inputs {
        for command in [
            vec!["report", input],
            vec!["mix", input],
            vec!["loops", input],
            vec!["blocks", input, "-f", "main"],
        ] {
            let out = loopscope(&command);
            assert_bad_input(&out, why);
        }
    }
}

#[test]
fn report_without_a_profile_and_flags_out_of_range_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .arg("report")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_bad_input(
        &out,
        "loopscope.profile: no such profile (make one with `loopscope record",
    );
    let profile = dir.path().join("p.profile");
    std::fs::write(&profile, "loopscope-profile 1\n{}").unwrap();
    let p = profile.to_str().unwrap();
    assert_bad_input(&loopscope(["report", p, "--hot", "0"]), "--hot 0");
    assert_bad_input(
        &loopscope(["report", p, "--threshold", "101"]),
        "--threshold 101",
    );
}

#[test]
fn perf_data_whose_sizes_do_not_fit_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    // A header whose data section claims far more than the file holds.
    let mut bytes = b"PERFILE2".to_vec();
    for v in [104u64, 136, 104, 0, 104, u64::MAX / 2, 104, 0] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(&[0; 32]);
    std::fs::write(&path, &bytes).unwrap();
    assert_bad_input(
        &loopscope(["mix", path.to_str().unwrap()]),
        "lies outside the file",
    );
}

/// A header of `attr_size`-byte attributes whose event-types section holds one entry with the
/// id section `ids`, and no feature sections.
fn event_types_header(attr_size: u64, ids: (u64, u64)) -> Vec<u8> {
    let mut bytes = b"PERFILE2".to_vec();
    for v in [104u64, attr_size, 104, 0, 104, 0, 104, 80] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(&[0; 32]);
    let mut attr = [0u8; 64];
    attr[4..8].copy_from_slice(&64u32.to_le_bytes());
    bytes.extend_from_slice(&attr);
    bytes.extend_from_slice(&ids.0.to_le_bytes());
    bytes.extend_from_slice(&ids.1.to_le_bytes());
    bytes
}

#[test]
fn perf_data_with_impossible_attribute_or_id_sizes_is_refused() {
    // Each once made the perf.data reader panic: a division by zero, an addition that wraps,
    // and a reservation of 2^60 ids.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    let cases = [
        (event_types_header(0, (0, 0)), "attributes of 0 bytes"),
        (
            event_types_header(u64::MAX - 15, (0, 0)),
            "attributes of 18446744073709551600 bytes",
        ),
        (
            event_types_header(64, (0, 1 << 63)),
            "the event 0's id section",
        ),
    ];
    for (bytes, needle) in cases {
        std::fs::write(&path, &bytes).unwrap();
        assert_bad_input(&loopscope(["mix", path.to_str().unwrap()]), needle);
    }
}

#[test]
fn damaged_truncated_and_foreign_profiles_are_one_line_each() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.profile");
    let p = profile.to_str().unwrap();
    let out = loopscope([
        "record",
        "-o",
        p,
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&profile).unwrap();
    let damaged = dir.path().join("d.profile");
    let d = damaged.to_str().unwrap();
    let check = |data: &[u8], what: &str| {
        std::fs::write(&damaged, data).unwrap();
        for command in ["report", "mix"] {
            let out = loopscope([command, d]);
            let code = out.status.code();
            assert!(
                code == Some(0) || code == Some(2),
                "{command} {what}: exit {code:?}: {}",
                stderr(&out)
            );
            if code == Some(2) {
                assert_bad_input(&out, "");
            }
        }
    };
    for sixteenth in 0..16 {
        let cut = bytes.len() * sixteenth / 16;
        check(&bytes[..cut], &format!("cut at {cut}"));
    }
    for i in 0..40 {
        let mut flipped = bytes.clone();
        let at = i * 7919 % bytes.len();
        flipped[at] ^= 0x5a;
        check(&flipped, &format!("byte {at} flipped"));
    }
    let other =
        String::from_utf8_lossy(&bytes).replacen("loopscope-profile 1", "loopscope-profile 9", 1);
    std::fs::write(&damaged, other).unwrap();
    assert_bad_input(&loopscope(["report", d]), "format version 9");
}

/// A small exact profile of a program that no longer exists (its code is named by address),
/// as JSON to damage: main, a loop in it, a function called from the loop.
fn exact_profile_json() -> serde_json::Value {
    use loopscope_profile::{ExactRun, Lcct, NodeKey, ObjectRef, Profile, TargetExit, ThreadTree};
    let mut tree = Lcct::new();
    let main = tree.procedure_node(
        Lcct::ROOT,
        NodeKey::Function {
            object: 0,
            address: 0x1000,
        },
    );
    let outer = tree.child(main, NodeKey::Loop { object: 0, id: 0 });
    let f = tree.procedure_node(
        outer,
        NodeKey::Function {
            object: 0,
            address: 0x2000,
        },
    );
    for (node, cycles) in [(main, 1000), (outer, 5000), (f, 3000)] {
        let n = &mut tree.nodes[node as usize];
        (n.self_time, n.entries, n.events_charged) = (cycles, 1, 2);
    }
    let run = ExactRun {
        objects: vec![ObjectRef {
            path: "/nonexistent/loopscope-hostile/a.out".into(),
            build_id: None,
            content_id: None,
        }],
        threads: vec![ThreadTree {
            pid: 1,
            tid: 1,
            tree,
            events: 6,
            unmatched_events: 0,
        }],
        tsc_hz: 2.0e9,
        analysis_cycles: 100,
        sites: 4,
        stepped_sites: 0,
        trap_cost: None,
        exit: TargetExit::Exited(0),
        wall_ns: 1_000_000,
        static_analysis_ns: 1000,
        blocks: Vec::new(),
        patch: None,
    };
    serde_json::to_value(Profile::exact(vec!["a.out".into()], run)).unwrap()
}

/// A change to a profile's node list and the words its refusal must contain.
type NodesDamage = (fn(&mut Vec<serde_json::Value>), &'static str);

#[test]
fn profiles_with_impossible_trees_or_values_are_refused_naming_the_field() {
    use serde_json::{Value, json};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.profile");
    let p = path.to_str().unwrap();
    let write = |profile: &Value| {
        let text = format!("loopscope-profile 1\n{profile}");
        std::fs::write(&path, text).unwrap();
    };
    write(&exact_profile_json());
    let out = loopscope(["report", p]);
    assert!(
        out.status.success(),
        "the undamaged profile: {}",
        stderr(&out)
    );
    // A chain of distinct functions deeper than any recorded tree (recursion folds).
    let deep = |nodes: &mut Vec<Value>| {
        let first = nodes.len();
        nodes[3]["children"] = json!([first]);
        for k in 0..2000 {
            let id = first + k;
            nodes.push(json!({
                "key": {"kind": "function", "object": 0, "address": 0x3000 + k},
                "parent": if k == 0 { 3 } else { id - 1 },
                "children": if k < 1999 { json!([id + 1]) } else { json!([]) },
                "self_time": 1, "self_samples": 0, "events_charged": 1, "entries": 1,
                "header_executions": 0, "back_edges": 0, "exits": 0,
                "trips_min": null, "trips_max": null
            }));
        }
    };
    let cases: [NodesDamage; 9] = [
        (|n| n.clear(), "tree.nodes: empty"),
        (
            |n| {
                n[2]["entries"] = json!(0);
                n[2]["header_executions"] = json!(4096);
            },
            "nodes[2]: 0 entries but 4096 header_executions: a loop runs only once entered",
        ),
        (|n| n[1]["parent"] = json!(1), "1 names 1 as its parent"),
        (
            |n| n[1]["children"] = json!([99999]),
            "nodes[1].children: 99999 is not a node",
        ),
        (
            |n| n[1]["children"] = json!([0]),
            "nodes[1].children: 0 is not after 1",
        ),
        (
            |n| n[1]["key"]["object"] = json!(7),
            "nodes[1].key.object is 7, but the profile lists 1 object",
        ),
        (
            |n| {
                n[2]["self_time"] = json!(u64::MAX);
                n[3]["self_time"] = json!(u64::MAX);
            },
            "nodes[2].self_time: the counts add up past 2^64",
        ),
        (
            |n| n[2]["trips_min"] = json!(9),
            "nodes[2]: trips_min 9 and trips_max null are not a range",
        ),
        (
            deep,
            "levels deep, past the limit of 1024 (see docs/limits.md)",
        ),
    ];
    for (damage, needle) in cases {
        let mut profile = exact_profile_json();
        let nodes = profile["recording"]["threads"][0]["tree"]["nodes"]
            .as_array_mut()
            .unwrap();
        damage(nodes);
        write(&profile);
        for command in ["report", "mix"] {
            let out = loopscope([command, p]);
            assert_bad_input(&out, needle);
            assert_bad_input(&out, "p.profile: damaged: recording.threads[0].tree.nodes");
        }
    }
    let mut profile = exact_profile_json();
    profile["recording"]["tsc_hz"] = json!(0.0);
    write(&profile);
    assert_bad_input(
        &loopscope(["report", "--json", p]),
        "damaged: recording.tsc_hz is 0, not a rate (expected hertz, at least 1)",
    );
}

#[test]
fn a_loop_its_binary_does_not_have_is_refused_naming_the_node() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = common::compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let path = dir.path().join("p.profile");
    let p = path.to_str().unwrap();
    let binary = binary.to_str().unwrap();
    let mut profile = exact_profile_json();
    let object =
        json!({"path": binary, "build_id": loopscope_profile::build_id(Path::new(binary))});
    profile["objects"] = json!([object]);
    profile["recording"]["objects"] = json!([object]);
    let write = |id: u32| {
        profile_with_loop(&profile, id, &path);
        loopscope(["report", p])
    };
    let out = write(0);
    assert!(out.status.success(), "loop 0 of nest: {}", stderr(&out));
    assert_bad_input(
        &write(9999),
        "p.profile: damaged: recording.threads[0].tree.nodes[2].key.id is 9999, but ",
    );
    assert_bad_input(&write(9999), "nest has no loop 9999 (its loops are 0 to ");
}

/// Writes `profile` to `path` with its loop node's id set to `id`.
fn profile_with_loop(profile: &serde_json::Value, id: u32, path: &Path) {
    let mut profile = profile.clone();
    profile["recording"]["threads"][0]["tree"]["nodes"][2]["key"]["id"] = serde_json::json!(id);
    std::fs::write(path, format!("loopscope-profile 1\n{profile}")).unwrap();
}

#[test]
fn a_compressed_perf_data_is_said_to_be_compressed_not_damaged() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    let recorded = Command::new("perf")
        .args(["record", "-q", "-z", "-e", "cpu-clock", "-o"])
        .arg(&path)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
        ])
        .output();
    if !recorded.is_ok_and(|o| o.status.success()) || !path.is_file() {
        eprintln!("skipped: no `perf record -z` here");
        return;
    }
    let out = loopscope(["mix", path.to_str().unwrap()]);
    assert_bad_input(
        &out,
        "perf.data: compressed (`perf record -z`), which loopscope does not read: record again \
         without -z",
    );
    assert!(!stderr(&out).contains("damaged"), "{}", stderr(&out));
}
