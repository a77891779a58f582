//! `loopscope loops` on C++: names shortened in text (whole in JSON and with `--full-names`),
//! rows fitted to the terminal's width.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/sort_vector.cpp"
);

/// The fixture built with `g++ -O2 -g`, or `None` (said) when there is no g++.
fn fixture(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("sort_vector");
    let built = Command::new("g++")
        .args(["-O2", "-g", "-o"])
        .arg(&out)
        .arg(SOURCE)
        .status();
    if built.is_ok_and(|s| s.success()) {
        Some(out)
    } else {
        eprintln!("skipped: no working `g++` to build the C++ fixture");
        None
    }
}

fn loopscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .arg("--no-cache")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn longest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn text_shortens_names_and_json_keeps_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = fixture(dir.path()) else {
        return;
    };
    let binary = binary.to_str().unwrap();
    let out = loopscope(&["loops", binary]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let short = text(&out.stdout);
    // Template arguments and parameter lists are elided, return types dropped.
    assert!(!short.contains("std::allocator"), "{short}");
    assert!(short.contains("std::__introsort_loop<…>(…)"), "{short}");
    assert!(!short.contains("void std::"), "{short}");
    // The innermost inlined function has a column of its own.
    assert!(short.contains("inlined"), "{short}");
    assert!(short.contains("Accumulator<…>::scale(…)"), "{short}");
    assert!(longest_line(&short) < 200, "{short}");

    let out = loopscope(&["loops", binary, "--full-names"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let full = text(&out.stdout);
    assert!(full.contains("std::allocator<double>"), "{full}");
    assert!(longest_line(&full) > longest_line(&short), "{full}");

    let out = loopscope(&["loops", binary, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("__introsort_loop<") && n.contains("std::allocator<double>")),
        "{names:?}"
    );
}

#[test]
fn blocks_shortens_the_function_name() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = fixture(dir.path()) else {
        return;
    };
    let binary = binary.to_str().unwrap();
    let out = loopscope(&["loops", binary, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sort = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["name"]
                .as_str()
                .is_some_and(|n| n.contains("__introsort_loop<"))
        })
        .expect("an introsort loop function");
    let address = format!("{:#x}", sort["address"].as_u64().unwrap());
    let out = loopscope(&["blocks", binary, "--function", &address]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first = text(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(first.starts_with("std::__introsort_loop<…>(…)"), "{first}");
}

#[test]
fn a_call_to_a_std_throw_function_through_its_stub_does_not_return() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = fixture(dir.path()) else {
        return;
    };
    // `std::vector<double> v(n)` checks its size with `std::__throw_bad_array_new_length`,
    // called through a PLT stub that carries the mangled name; main calls nothing else that
    // ends the program.
    let out = loopscope(&["blocks", binary.to_str().unwrap(), "--function", "main"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let blocks = text(&out.stdout);
    assert!(blocks.contains(" no-return-call "), "{blocks}");
}

/// Runs loopscope under a pseudo-terminal (`script`) with `COLUMNS` set, or `None` (said) when
/// `script` is missing.
fn on_a_terminal(columns: usize, args: &[&str]) -> Option<String> {
    let have = Command::new("script").arg("--version").output();
    if !have.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no `script` to run loopscope on a terminal");
        return None;
    }
    let mut command = String::from(env!("CARGO_BIN_EXE_loopscope"));
    for arg in args {
        command.push_str(&format!(" '{arg}'"));
    }
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("COLUMNS", columns.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    Some(text(&out.stdout).replace("\r\n", "\n"))
}

#[test]
fn rows_fit_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = fixture(dir.path()) else {
        return;
    };
    let binary = binary.to_str().unwrap();
    for columns in [110, 140] {
        let Some(shown) = on_a_terminal(columns, &["loops", binary, "--no-cache"]) else {
            return;
        };
        assert!(shown.contains("loop  parent"), "{shown}");
        assert!(longest_line(&shown) <= columns, "{columns}:\n{shown}");
        // Cut text says so, and numbers are whole: every row still ends in its class counts.
        assert!(shown.contains('…'), "{shown}");
    }
    // Piped, the same rows are not cut to any width.
    let piped = text(&loopscope(&["loops", binary]).stdout);
    assert!(longest_line(&piped) > 140, "{piped}");
}

#[test]
fn report_shortens_names_and_full_names_keeps_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = fixture(dir.path()) else {
        return;
    };
    let profile = dir.path().join("sort.prof");
    let recorded = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args([
            "record",
            "-q",
            "--backend",
            "ptrace",
            "--no-calibrate",
            "-o",
        ])
        .arg(&profile)
        .arg("--")
        .arg(&binary)
        .arg("20000")
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", text(&recorded.stderr));
    let profile = profile.to_str().unwrap();
    for by in ["context", "loop"] {
        let out = report(&["report", profile, "--all", "--by", by]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let short = text(&out.stdout);
        assert!(short.contains("std::__introsort_loop<…>(…)"), "{short}");
        assert!(!short.contains("std::allocator"), "{short}");
        let out = report(&["report", profile, "--all", "--by", by, "--full-names"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let full = text(&out.stdout);
        assert!(full.contains("std::allocator<double>"), "{full}");
    }
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .output()
        .unwrap()
}
