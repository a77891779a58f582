//! `report --firefox` (the Firefox Profiler's processed format) end to end on fixture programs
//! compiled at test time.

mod common;

use std::path::Path;

use common::{compile_profile_fixture, loopscope, perf_events_allowed, stderr, stdout};
use serde_json::Value;

fn run_ok(args: &[&str]) -> String {
    let out = loopscope(args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let again: Value = serde_json::from_str(&serde_json::to_string(&value).unwrap()).unwrap();
    assert_eq!(value, again, "the JSON round-trips");
    value
}

/// The frame names of a sample's stack, outermost first.
fn stack_names(thread: &Value, stack: usize) -> Vec<String> {
    let strings = thread["stringArray"].as_array().unwrap();
    let mut names = Vec::new();
    let mut at = Some(stack);
    while let Some(s) = at {
        let frame = thread["stackTable"]["frame"][s].as_u64().unwrap() as usize;
        let func = thread["frameTable"]["func"][frame].as_u64().unwrap() as usize;
        let name = thread["funcTable"]["name"][func].as_u64().unwrap() as usize;
        names.push(strings[name].as_str().unwrap().to_owned());
        at = thread["stackTable"]["prefix"][s]
            .as_u64()
            .map(|p| p as usize);
    }
    names.reverse();
    names
}

fn all_stacks(thread: &Value) -> Vec<Vec<String>> {
    thread["samples"]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .map(|s| stack_names(thread, s as usize))
        .collect()
}

fn assert_required_fields(profile: &Value) {
    assert!(profile["meta"]["version"].is_number(), "meta.version");
    assert!(profile["meta"]["interval"].is_number(), "meta.interval");
    for thread in profile["threads"].as_array().unwrap() {
        for table in [
            "stringArray",
            "funcTable",
            "frameTable",
            "stackTable",
            "samples",
        ] {
            assert!(thread.get(table).is_some(), "thread without {table}");
        }
        assert!(thread["samples"]["length"].is_u64());
    }
}

#[test]
fn exact_profile_exports_one_thread_per_thread_with_loops_under_their_functions() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("threads.c", dir.path(), &["-pthread"]) else {
        return;
    };
    let profile = dir.path().join("threads.profile");
    let out = dir.path().join("threads.json");
    run_ok(&[
        "record",
        "-q",
        "--backend",
        "ptrace",
        "-o",
        &profile.display().to_string(),
        "--",
        &binary.display().to_string(),
    ]);
    run_ok(&[
        "report",
        &profile.display().to_string(),
        "--firefox",
        &out.display().to_string(),
    ]);
    let value = read_json(&out);
    assert_required_fields(&value);
    // Three workers, the main thread and the forked child.
    let threads = value["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 5, "{:#}", value["threads"]);
    let worker_loop = threads
        .iter()
        .flat_map(all_stacks)
        .find(|s| s.last().is_some_and(|f| f.starts_with("loop ")) && s[0] == "worker")
        .expect("a sample in the worker's loop");
    assert_eq!(worker_loop.len(), 2, "{worker_loop:?}");
    assert!(
        worker_loop[1].contains("(threads.c:"),
        "the loop frame names its line: {worker_loop:?}"
    );
}

#[test]
fn sampled_profile_exports_every_sample_at_its_time() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("shares.c", dir.path(), &[]) else {
        return;
    };
    let profile = dir.path().join("shares.profile");
    let out = dir.path().join("shares.json");
    run_ok(&[
        "record",
        "-q",
        "-o",
        &profile.display().to_string(),
        "--",
        &binary.display().to_string(),
        "20000000",
    ]);
    run_ok(&[
        "report",
        &profile.display().to_string(),
        "--firefox",
        &out.display().to_string(),
    ]);
    let report: Value = serde_json::from_str(&run_ok(&[
        "report",
        &profile.display().to_string(),
        "--json",
    ]))
    .unwrap();
    let value = read_json(&out);
    assert_required_fields(&value);
    let threads = value["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let samples = &threads[0]["samples"];
    assert_eq!(samples["length"], report["events"], "every sample exported");
    assert!(
        samples["timeDeltas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d.as_f64().is_some_and(|d| d >= 0.0)),
        "times in order"
    );
    let spin_loop = all_stacks(&threads[0])
        .into_iter()
        .find(|s| s.iter().any(|f| f == "spin"))
        .expect("a sample in spin");
    let at = spin_loop.iter().position(|f| f == "spin").unwrap();
    assert!(
        spin_loop
            .get(at + 1)
            .is_some_and(|f| f.starts_with("loop ") && f.contains("shares.c:")),
        "the loop frame under spin: {spin_loop:?}"
    );
}

#[test]
fn html_report_is_one_self_contained_page_with_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let profile = dir.path().join("nest.profile");
    let out = dir.path().join("nest.html");
    run_ok(&[
        "record",
        "-q",
        "--backend",
        "ptrace",
        "-o",
        &profile.display().to_string(),
        "--",
        &binary.display().to_string(),
        "20",
    ]);
    run_ok(&[
        "report",
        &profile.display().to_string(),
        "--html",
        &out.display().to_string(),
    ]);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<section id=\"profile\">"));
    assert!(
        html.contains("<details class=\"node function"),
        "a collapsible tree"
    );
    assert!(html.contains("nest.c:"), "loops with their lines");
    assert!(
        html.contains("1 / 10.5 / 20"),
        "the triangular nest's trips"
    );
    for external in [
        "<script src",
        "<link",
        "href=\"http",
        "src=",
        "@import",
        "url(",
    ] {
        assert!(!html.contains(external), "fetches {external}");
    }
}

/// The command a page or header shows for `record`, unescaped from the HTML.
fn shown_record_command(html: &str) -> String {
    let html = html.replace("&#39;", "'").replace("&amp;", "&");
    let start = html.find("loopscope record ").expect("a record command");
    let end = html[start..].find([')', ';']).expect("the command's end");
    html[start..start + end].to_owned()
}

#[test]
fn the_shown_commands_are_quoted_and_record_the_same_way() {
    if !common::ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_profile_fixture("nest.c", dir.path(), &[]) else {
        return;
    };
    let profile = dir.path().join("a profile");
    let profile = profile.to_str().unwrap();
    let binary = binary.to_str().unwrap();
    let out = dir.path().join("nest.html");
    let out = out.to_str().unwrap();
    run_ok(&[
        "record",
        "-q",
        "--backend",
        "ptrace",
        "--no-calibrate",
        "--blocks",
        "-o",
        profile,
        "--",
        binary,
        "20",
        "x y",
        "",
        "$HOME",
    ]);
    let text = run_ok(&["report", profile, "--html", out]);
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with(&format!("profile   {binary} 20 'x y' '' '$HOME' (")),
        "{header}"
    );
    let html = std::fs::read_to_string(out).unwrap();
    assert_eq!(
        shown_record_command(&html),
        format!(
            "loopscope record --backend ptrace --blocks --no-calibrate -o '{profile}' -- \
             {binary} 20 'x y' '' '$HOME'"
        )
    );
    // A profile from before the flags were stored shows the back-end alone, the one flag its
    // recording tells.
    let bytes = std::fs::read_to_string(profile).unwrap();
    let (first, json) = bytes.split_once('\n').unwrap();
    let mut value: Value = serde_json::from_str(json).unwrap();
    assert!(
        value
            .as_object_mut()
            .unwrap()
            .remove("record_flags")
            .is_some()
    );
    std::fs::write(profile, format!("{first}\n{value}")).unwrap();
    run_ok(&["report", profile, "--html", out]);
    let html = std::fs::read_to_string(out).unwrap();
    assert_eq!(
        shown_record_command(&html),
        format!("loopscope record --backend ptrace -o '{profile}' -- {binary} 20 'x y' '' '$HOME'")
    );
    assert!(
        html.contains("other flags of the recording are not stored"),
        "the gap is said"
    );
}
