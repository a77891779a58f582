//! Profiles of an MPI job: `mpirun -np 2 loopscope record -o 'prof.%r' -- ./ranks` writes one
//! profile per rank, and `report prof.0 prof.1` merges them with the per-rank table. Needs Open
//! MPI's `mpicc` and `mpirun` (Debian: openmpi-bin, libopenmpi-dev); skipped without them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{loopscope, repo_root, stderr, stdout};
use serde_json::Value;

fn have(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: {program} not found (apt-get install openmpi-bin libopenmpi-dev)");
    }
    found
}

fn build_ranks(dir: &Path) -> Option<PathBuf> {
    if !have("mpicc") || !have("mpirun") {
        return None;
    }
    let out = dir.join("ranks");
    let status = Command::new("mpicc")
        .args(["-O1", "-g"])
        .arg(repo_root().join("crates/cli/tests/fixtures/ranks.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .ok()?;
    if !status.success() {
        eprintln!("skipped: mpicc could not build ranks.c");
        return None;
    }
    Some(out)
}

/// `mpirun -np 2 loopscope record ARGS -o DIR/prof.%r -- ranks N`.
fn record_two_ranks(dir: &Path, binary: &Path, record_args: &[&str], n: &str) {
    let output = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(env!("CARGO_BIN_EXE_loopscope"))
        .args(["record", "-q"])
        .args(record_args)
        .arg("-o")
        .arg(dir.join("prof.%r"))
        .arg("--")
        .arg(binary)
        .arg(n)
        .current_dir(dir)
        .output()
        .expect("mpirun runs");
    assert!(
        output.status.success(),
        "mpirun failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `report prof.1 prof.0 --json` (given out of order: the ranks are sorted), with `extra`.
fn merged_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "report".to_owned(),
        dir.join("prof.1").display().to_string(),
        dir.join("prof.0").display().to_string(),
        "--json".to_owned(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = loopscope(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn find<'a>(node: &'a Value, pred: &dyn Fn(&Value) -> bool) -> Option<&'a Value> {
    if pred(node) {
        return Some(node);
    }
    node["children"]
        .as_array()?
        .iter()
        .find_map(|c| find(c, pred))
}

fn perf_events_allowed() -> bool {
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let allowed = level.trim().parse::<i32>().is_ok_and(|l| l <= 2);
    if !allowed {
        eprintln!("skipped: perf_event_paranoid is {}", level.trim());
    }
    allowed
}

#[test]
fn each_rank_writes_its_profile_and_report_sums_them_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = build_ranks(dir.path()) else {
        return;
    };
    record_two_ranks(dir.path(), &binary, &["--backend", "ptrace"], "20000");
    assert!(dir.path().join("prof.0").is_file() && dir.path().join("prof.1").is_file());
    let merged = merged_json(dir.path(), &[]);
    assert_eq!(merged["ranks"], serde_json::json!(["prof.0", "prof.1"]));
    let work_loop = find(&merged["tree"], &|n| {
        n["kind"] == "loop" && n["file"].as_str().is_some_and(|f| f.ends_with("ranks.c"))
    })
    .expect("the work loop in the merged tree");
    // Rank 0 runs 20000 iterations, rank 1 80000: summed, with each rank's trips kept.
    assert_eq!(work_loop["entries"], 2);
    assert_eq!(work_loop["iterations"], 100_000);
    assert_eq!(
        work_loop["trips"],
        serde_json::json!([20000.0, 50000.0, 80000.0])
    );
    let row = &merged["imbalance"][0];
    assert_eq!(row["name"], work_loop["name"]);
    assert_eq!(row["per_rank_s"].as_array().map(Vec::len), Some(2));
    let text = stdout(&loopscope([
        "report",
        &dir.path().join("prof.0").display().to_string(),
        &dir.path().join("prof.1").display().to_string(),
    ]));
    assert!(text.contains("2 profiles merged"), "{text}");
    assert!(text.contains("max/mean"), "{text}");
}

#[test]
fn the_rank_with_four_times_the_work_is_the_slowest() {
    if !perf_events_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = build_ranks(dir.path()) else {
        return;
    };
    record_two_ranks(dir.path(), &binary, &[], "100000000");
    let html = dir.path().join("ranks.html");
    let merged = merged_json(dir.path(), &["--html", &html.display().to_string()]);
    let row = merged["imbalance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"].as_str().is_some_and(|f| f.ends_with("ranks.c")))
        .expect("the work loop in the per-rank table")
        .clone();
    let per_rank: Vec<f64> = row["per_rank_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect();
    assert_eq!(row["slowest"], 1, "{row:#}");
    assert!(per_rank[1] > 2.0 * per_rank[0], "{per_rank:?}");
    assert!(row["imbalance"].as_f64().unwrap() > 0.3, "{row:#}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"ranks\">"));
}
