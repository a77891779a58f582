//! `loopscope loops` and `loopscope blocks` run as the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../binary/tests/fixtures/loops.c"
);

fn fixture(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("loops");
    let ok = Command::new("cc")
        .args(["-O1", "-g", "-o"])
        .arg(&out)
        .arg(SOURCE)
        .status();
    if ok.is_ok_and(|s| s.success()) {
        Some(out)
    } else {
        eprintln!("skipped: no working `cc` to build the fixture");
        None
    }
}

fn loopscope(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn loops_json_has_the_contract_fields() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = fixture(dir.path()) else {
        return;
    };
    let out = loopscope(dir.path(), &["loops", bin.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["binary"].as_str().unwrap().ends_with("loops"));
    let functions = json["functions"].as_array().unwrap();
    let perfect = functions
        .iter()
        .find(|f| f["name"] == "perfect_nest")
        .unwrap();
    assert!(perfect["address"].as_u64().unwrap() > 0);
    let loops = perfect["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 3);
    for l in loops {
        for field in [
            "id",
            "parent",
            "depth",
            "header",
            "file",
            "line",
            "blocks",
            "instructions",
        ] {
            assert!(l.get(field).is_some(), "missing {field}");
        }
        assert!(l["file"].as_str().unwrap().ends_with("loops.c"));
    }
    let max_depth = loops.iter().map(|l| l["depth"].as_u64().unwrap()).max();
    assert_eq!(max_depth, Some(3));
}

#[test]
fn loops_text_and_blocks_and_cache() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = fixture(dir.path()) else {
        return;
    };
    let b = bin.to_str().unwrap();
    let out = loopscope(dir.path(), &["loops", b, "--function", "switch_loop", "-v"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("switch_loop @ 0x"), "{stdout}");
    assert!(stdout.contains("loops.c:"), "{stdout}");
    assert!(
        text(&out.stderr).contains("analysis cached in"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("{b}: PIE executable, 1 function with loops, ")),
        "{stdout}"
    );
    // The header counts the functions the listing shows: those with loops.
    let all = text(&loopscope(dir.path(), &["loops", b]).stdout);
    let listed = all.lines().filter(|l| l.contains(" @ 0x")).count();
    assert!(
        all.lines()
            .next()
            .unwrap()
            .contains(&format!(", {listed} functions with loops, ")),
        "{all}"
    );
    let again = loopscope(dir.path(), &["loops", b, "-f", "switch_loop", "-v"]);
    assert!(text(&again.stderr).contains("analysis read from"));
    assert_eq!(text(&again.stdout), stdout);

    let out = loopscope(dir.path(), &["blocks", b, "-f", "switch_loop"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(
        stdout.lines().nth(1).unwrap().starts_with("block  start"),
        "{stdout}"
    );
    assert!(
        stdout.contains("table"),
        "the switch's jump table: {stdout}"
    );

    let out = loopscope(
        dir.path(),
        &[
            "blocks",
            b,
            "-f",
            "main",
            "--json",
            "--split",
            "after-branch",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &json["blocks"][0];
    for field in [
        "index",
        "start",
        "end",
        "instructions",
        "classes",
        "tags",
        "exit",
        "succs",
    ] {
        assert!(first.get(field).is_some(), "missing {field}");
    }
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("script.sh");
    std::fs::write(&not_elf, "#!/bin/sh\necho hi\n").unwrap();
    let out = loopscope(dir.path(), &["loops", not_elf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("script.sh: offset 0: not an ELF file"),
        "{err}"
    );

    let missing = loopscope(dir.path(), &["loops", "/nonexistent/file"]);
    assert_eq!(missing.status.code(), Some(2));

    let Some(bin) = fixture(dir.path()) else {
        return;
    };
    let b = bin.to_str().unwrap();
    let out = loopscope(dir.path(), &["blocks", b, "-f", "no_such_function"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no function named `no_such_function`"));
    // Both ways to name a function are offered, whichever was tried.
    for (asked, said) in [("no_such_function", "named"), ("0x1", "starts at")] {
        for command in ["blocks", "loops"] {
            let out = loopscope(dir.path(), &[command, b, "-f", asked]);
            assert_eq!(out.status.code(), Some(2));
            let err = text(&out.stderr);
            assert!(
                err.contains(&format!(
                    "no function {said} `{asked}` (expected a symbol name, \
                     mangled or demangled, or the hex address a function starts at"
                )),
                "{err}"
            );
        }
    }

    let table = dir.path().join("classes.toml");
    std::fs::write(&table, "[classes]\nlea = \"memory\"\n").unwrap();
    let out = loopscope(
        dir.path(),
        &["loops", b, "--classes", table.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("classes.toml:2:7: class `memory`"),
        "{}",
        text(&out.stderr)
    );
}
