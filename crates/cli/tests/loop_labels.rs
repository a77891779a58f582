//! How `loops` and `report` label and order loops: tree order, kind spelling, the user's source
//! line of a loop whose header is inlined code, read alike in every output, and the line of each
//! loop's own statement once the compiler has rotated and interleaved a nest.

mod common;

use std::process::Command;

use common::{compile_fixture, compile_fixture_with, loopscope, stderr, stdout};

#[test]
fn loops_are_listed_parent_first_with_the_json_kind_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("quicksort.c", dir.path()) else {
        return;
    };
    let json = loopscope(["loops", bin.to_str().unwrap(), "-f", "qs", "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let loops = json["functions"][0]["loops"].as_array().unwrap();
    let out = loopscope(["loops", bin.to_str().unwrap(), "-f", "qs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Rows after the table header, by their first word (the loop id).
    let rows: Vec<(u64, &str)> = text
        .lines()
        .skip_while(|l| !l.starts_with("loop "))
        .skip(1)
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next()?.parse().ok()?;
            Some((id, l))
        })
        .collect();
    assert_eq!(rows.len(), loops.len(), "{text}");
    let position = |id: u64| rows.iter().position(|&(r, _)| r == id).unwrap();
    for l in loops {
        let id = l["id"].as_u64().unwrap();
        if let Some(parent) = l["parent"].as_u64() {
            assert!(
                position(parent) < position(id),
                "loop {id} is listed above its parent {parent}:\n{text}"
            );
        }
        let kind = l["kind"].as_str().unwrap();
        let row = rows[position(id)].1;
        assert!(
            row.split_whitespace().any(|w| w == kind),
            "row of loop {id} does not say {kind}:\n{text}"
        );
    }
    assert!(
        loops.iter().any(|l| l["kind"] == "self-loop"),
        "the fixture has self-loops: {loops:?}"
    );
}

/// The loop of `stdin_hist.c` whose header is `getchar`'s inlined code.
const READ_LOOP_LINE: u64 = 6;

#[test]
fn an_inlined_header_is_labelled_with_the_users_line() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("stdin_hist.c", dir.path()) else {
        return;
    };
    let b = bin.to_str().unwrap();
    let json = loopscope(["loops", b, "-f", "main", "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let loops = json["functions"][0]["loops"].as_array().unwrap();
    let Some(read) = loops
        .iter()
        .find(|l| l["inlined"].as_array().is_some_and(|i| !i.is_empty()))
    else {
        eprintln!("skipped: this compiler did not inline getchar into the loop header");
        return;
    };
    assert!(
        read["file"].as_str().unwrap().ends_with("stdin_hist.c"),
        "{read}"
    );
    assert_eq!(read["line"], READ_LOOP_LINE, "{read}");
    let from = read["inlined"][0]["file"].as_str().unwrap();
    let from_line = read["inlined"][0]["line"].as_u64().unwrap();
    let from = from.rsplit('/').next().unwrap();
    let label = format!("stdin_hist.c:{READ_LOOP_LINE} (inlined {from}:{from_line})");

    let text = stdout(&loopscope(["loops", b, "-f", "main"]));
    assert!(text.contains(&label), "{label} in:\n{text}");

    // The exact back-end, so that the loop is in the tree however short the run.
    let input = dir.path().join("input.bin");
    std::fs::write(&input, vec![7u8; 5000]).unwrap();
    let profile = dir.path().join("read.prof");
    let out = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "-q", "--backend", "ptrace", "-o"])
        .arg(&profile)
        .args(["--", b])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let p = profile.to_str().unwrap();
    let text = stdout(&loopscope(["report", "--all", p]));
    assert!(text.contains(&label), "{label} in:\n{text}");
    let json = loopscope(["report", "--all", "--json", p]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let main = &json["tree"]["children"][0];
    let node = main["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["line"] == READ_LOOP_LINE)
        .unwrap_or_else(|| panic!("no loop node at line {READ_LOOP_LINE}: {main}"));
    assert!(
        node["file"].as_str().unwrap().ends_with("stdin_hist.c"),
        "{node}"
    );
    assert_eq!(node["inlined"][0]["line"], from_line, "{node}");
}

/// `record --exact` of `stdin_hist` reading 5000 bytes, written to `profile`.
fn record_exact_reading(bin: &std::path::Path, dir: &std::path::Path, profile: &std::path::Path) {
    let input = dir.join("input.bin");
    std::fs::write(&input, vec![7u8; 5000]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "-q", "--exact", "-o"])
        .arg(profile)
        .arg("--")
        .arg(bin)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn an_inlined_header_reads_alike_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile_fixture("stdin_hist.c", dir.path()) else {
        return;
    };
    let json = loopscope(["loops", bin.to_str().unwrap(), "-f", "main", "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let Some(read) = json["functions"][0]["loops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["inlined"].as_array().is_some_and(|i| !i.is_empty()))
    else {
        eprintln!("skipped: this compiler did not inline getchar into the loop header");
        return;
    };
    let from = read["inlined"][0]["file"].as_str().unwrap();
    let from = from.rsplit('/').next().unwrap();
    let from_line = &read["inlined"][0]["line"];
    let label = format!("stdin_hist.c:{READ_LOOP_LINE} (inlined {from}:{from_line})");

    let a = dir.path().join("a.prof");
    record_exact_reading(&bin, dir.path(), &a);
    let b = dir.path().join("b.prof");
    std::fs::copy(&a, &b).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let html = dir.path().join("report.html");
    let firefox = dir.path().join("firefox.json");
    let out = loopscope([
        "report",
        a,
        "--html",
        html.to_str().unwrap(),
        "--firefox",
        firefox.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains(&label), "{label} not in the HTML page");
    let firefox = std::fs::read_to_string(&firefox).unwrap();
    let frame = format!("({label})\"");
    assert!(firefox.contains(&frame), "{frame} not in: {firefox}");

    let merged = loopscope(["report", a, b]);
    assert!(merged.status.success(), "{}", stderr(&merged));
    let text = stdout(&merged);
    let ranks = text
        .split_once("ranks     ")
        .unwrap_or_else(|| panic!("no per-rank table in:\n{text}"))
        .1;
    assert!(
        ranks.contains(&label),
        "{label} not in the per-rank table:\n{ranks}"
    );

    let mix = loopscope(["mix", a]);
    assert!(mix.status.success(), "{}", stderr(&mix));
    let text = stdout(&mix);
    assert!(text.contains(&label), "{label} not in the mix:\n{text}");
}

/// The line of the `LOOP name` marker in `loop_lines.c`.
fn loop_line(name: &str) -> u64 {
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/loop_lines.c");
    let text = std::fs::read_to_string(source).unwrap();
    let at = text
        .lines()
        .position(|l| l.contains(&format!("/* LOOP {name} ")));
    at.unwrap_or_else(|| panic!("no LOOP {name} marker")) as u64 + 1
}

#[test]
fn each_optimised_loop_is_labelled_with_its_own_statement() {
    for level in ["-O1", "-O2", "-O3"] {
        let dir = tempfile::tempdir().unwrap();
        let Some(bin) = compile_fixture_with("loop_lines.c", dir.path(), &[level]) else {
            return;
        };
        let json = loopscope(["loops", bin.to_str().unwrap(), "--json"]);
        assert!(json.status.success(), "{}", stderr(&json));
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let loops_of = |name: &str| -> Vec<serde_json::Value> {
            let f = json["functions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["name"] == name);
            let f = f.unwrap_or_else(|| panic!("{level}: no function {name}"));
            f["loops"].as_array().unwrap().clone()
        };
        // (line, first line of the range, last line of the range) of each loop.
        let place = |l: &serde_json::Value| {
            (
                l["line"].as_u64().unwrap(),
                l["line_min"].as_u64().unwrap(),
                l["line_max"].as_u64().unwrap(),
            )
        };

        let nest = loops_of("matmul");
        assert_eq!(nest.len(), 3, "{level}: {nest:?}");
        // From the k loop's body to the j loop's store after it.
        let body = loop_line("k") + 1..=loop_line("k") + 2;
        for (depth, name) in [(1, "i"), (2, "j"), (3, "k")] {
            let l = nest.iter().find(|l| l["depth"] == depth).unwrap();
            let (line, min, max) = place(l);
            assert_eq!(line, loop_line(name), "{level}: loop {name}: {l}");
            // The range starts at the loop's own statement and holds its body.
            assert_eq!(min, line, "{level}: loop {name}: {l}");
            assert!(body.contains(&max), "{level}: loop {name}: {l}");
        }
        for (function, name) in [("dot", "dot"), ("main", "init")] {
            let loops = loops_of(function);
            assert_eq!(loops.len(), 1, "{level}: {loops:?}");
            let (line, min, _) = place(&loops[0]);
            assert_eq!(
                (line, min),
                (loop_line(name), loop_line(name)),
                "{level}: {loops:?}"
            );
        }
    }
}
