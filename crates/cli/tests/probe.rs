//! `loopscope probe` end to end: bad input refused before measuring, and one `--quick` run
//! whose output structure (not its values) is checked.

use std::process::Command;

fn loopscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn an_unwritable_out_path_is_refused_before_measuring() {
    let output = loopscope()
        .args(["probe", "--quick", "--out", "/nonexistent-dir/m.toml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    assert!(
        err.contains("/nonexistent-dir/m.toml") && err.contains("does not exist"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_machine_file_of_another_model_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.toml");
    let status = loopscope()
        .args(["machine", "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(status.status.success());
    let text = std::fs::read_to_string(&path).unwrap();
    let model_line = text.lines().find(|l| l.starts_with("model = ")).unwrap();
    std::fs::write(
        &path,
        text.replace(model_line, "model = \"Some Other CPU\""),
    )
    .unwrap();
    let output = loopscope()
        .args(["probe", "--quick", "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    assert!(
        err.contains("Some Other CPU") && err.contains("--force"),
        "{err}"
    );
}

#[test]
fn a_broken_machine_file_is_bad_input_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.toml");
    std::fs::write(&path, "format_version = 1\nmodel = \n").unwrap();
    let output = loopscope()
        .args(["probe", "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("broken.toml:2:"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn baseline_refuses_out_and_unknown_methods() {
    let output = loopscope()
        .args(["probe", "--baseline", "recompile", "--out", "x.toml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = loopscope()
        .args(["probe", "--baseline", "magic"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_quick_run_writes_the_measured_section_plots_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.toml");
    let plots = dir.path().join("plots");
    let output = loopscope()
        .args(["probe", "--quick", "--json", "--out"])
        .arg(&out)
        .arg("--plot")
        .arg(&plots)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in [
        "caches",
        "bandwidth",
        "peak_gflops",
        "duration_s",
        "curves",
        "timer",
        "notes",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for cache in json["caches"].as_array().unwrap() {
        for key in [
            "level",
            "kind",
            "size_bytes",
            "latency_cycles",
            "latency_ns",
            "advertised_size_bytes",
            "confidence",
        ] {
            assert!(cache.get(key).is_some(), "cache lacks {key}: {cache}");
        }
    }
    let bw = json["bandwidth"].as_array().unwrap();
    assert!(!bw.is_empty());
    for key in [
        "level",
        "kernel",
        "threads",
        "working_set_bytes",
        "gb_per_s",
    ] {
        assert!(bw[0].get(key).is_some(), "bandwidth lacks {key}");
    }
    assert!(json["peak_gflops"]["dp"].as_f64().unwrap() > 0.0);
    assert_eq!(json["partial"], false);
    let curves: Vec<&str> = json["curves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        ["pointer_chase", "nop_body", "page_walk"]
            .iter()
            .all(|name| curves.contains(name)),
        "{curves:?}"
    );
    let notes = json["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("data TLB: ")),
        "{notes:?}"
    );
    check_streaming(&json);
    // The machine file now holds the measured section and reads back.
    let machine = std::fs::read_to_string(&out).unwrap();
    assert!(
        machine.contains("[measured]") && machine.contains("[[measured.bandwidth]]"),
        "{machine}"
    );
    let shown = loopscope()
        .args(["machine", "-m"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(shown.status.success());
    assert!(String::from_utf8_lossy(&shown.stdout).contains("measured ("));
    for name in [
        "pointer_chase.svg",
        "nop_body.svg",
        "bandwidth.svg",
        "page_walk.svg",
    ] {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap();
        assert!(svg.starts_with("<svg"), "{name}");
    }
    let page_walk = std::fs::read_to_string(plots.join("page_walk.svg")).unwrap();
    assert!(
        page_walk.contains("pages touched"),
        "the page walk's own title"
    );
}

/// The last level's streaming sweep: a note either way; when the chase reached the last
/// level, a curve rising in size; a streaming size only inside the curve.
fn check_streaming(json: &serde_json::Value) {
    let notes = json["notes"].as_array().unwrap();
    let note = notes
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.contains("streaming size "));
    let curve = json["curves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "streaming_triad");
    let Some(curve) = curve else {
        let note = note.unwrap_or_default();
        assert!(note.contains("not measured"), "no sweep, but: {note:?}");
        eprintln!("note: no streaming sweep here: {note}");
        return;
    };
    assert!(
        note.is_some(),
        "the streaming curve without its note: {notes:?}"
    );
    let sizes: Vec<u64> = curve["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["size_bytes"].as_u64().unwrap())
        .collect();
    assert!(
        sizes.len() >= 2 && sizes.windows(2).all(|w| w[1] > w[0]),
        "{sizes:?}"
    );
    let last_level = json["caches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] != "instruction")
        .max_by_key(|c| c["level"].as_u64())
        .unwrap();
    if let Some(streaming) = last_level["streaming_size_bytes"].as_u64() {
        assert!(
            sizes[0] <= streaming && streaming <= sizes[sizes.len() - 1],
            "{streaming} outside {sizes:?}"
        );
        assert!(note.unwrap().contains("roofline and misses simulate"));
    }
}

#[test]
fn sigint_keeps_and_writes_what_was_measured_marked_partial() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.toml");
    let child = loopscope()
        .args(["probe", "--quick", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("interrupted"),
        "{}",
        stderr_of(&output)
    );
    let machine = std::fs::read_to_string(&out).unwrap();
    assert!(machine.contains("partial = true"), "{machine}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("PARTIAL"));
}
