//! Differential test against valgrind's cachegrind: each example kernel, compiled as C with
//! `cc -O1 -g`, runs under cachegrind (D1 32 KiB 8-way, LL 1 MiB 16-way, 64-byte lines); the
//! program prints where its arrays are, and `loopscope simulate` places them there. Misses of the
//! loop nest's lines must agree within 1 % at both levels. The nest's lines, not only the
//! statement's, because at -O1 gcc keeps `c[i][j]` of matmul in a register across the `k` loop
//! and attributes its load and store to the `for` line around it.

use std::path::{Path, PathBuf};
use std::process::Command;

const CACHES: &str = "L1=32K:8:64,L2=1M:16:64";

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// D1 and LL misses (read + write) summed over the source lines of the loop nest.
fn cachegrind_misses(out_file: &Path, source: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(source).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.trim_start().starts_with("for ("))
        .unwrap()
        + 1;
    let last = lines
        .iter()
        .position(|l| l.contains("/* kernel */"))
        .unwrap()
        + 1;
    let name = source.file_name().unwrap().to_str().unwrap();
    let cg = std::fs::read_to_string(out_file).unwrap();
    let mut in_file = false;
    let (mut d1, mut ll) = (0, 0);
    for line in cg.lines() {
        if let Some(f) = line.strip_prefix("fl=") {
            in_file = f.ends_with(name);
            continue;
        }
        let fields: Vec<u64> = line
            .split_whitespace()
            .map_while(|f| f.parse().ok())
            .collect();
        if in_file && fields.len() == 10 && (first as u64..=last as u64).contains(&fields[0]) {
            // line Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
            d1 += fields[5] + fields[8];
            ll += fields[6] + fields[9];
        }
    }
    (d1, ll)
}

fn check(kernel: &str, defines: &[(&str, u64)]) {
    let dir = tempfile::tempdir().unwrap();
    let fixture = manifest().join("tests/fixtures").join(kernel);
    let exe = dir.path().join("kernel");
    let mut cc = Command::new("cc");
    cc.args(["-O1", "-g", "-o"]).arg(&exe).arg(&fixture);
    for (n, v) in defines {
        cc.arg(format!("-D{n}={v}"));
    }
    assert!(cc.status().unwrap().success(), "cc failed on {kernel}");
    let cg_out = dir.path().join("cg.out");
    let run = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--I1=32768,8,64",
            "--D1=32768,8,64",
            "--LL=1048576,16,64",
        ])
        .arg(format!("--cachegrind-out-file={}", cg_out.display()))
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "valgrind failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();
    let bases = stdout
        .lines()
        .find_map(|l| l.strip_prefix("base "))
        .unwrap()
        .trim()
        .to_owned();
    let (cg_l1, cg_l2) = cachegrind_misses(&cg_out, &fixture);

    let mut sim = Command::new(env!("CARGO_BIN_EXE_loopscope"));
    sim.arg("simulate")
        .arg(manifest().join("../../examples/kernels").join(kernel));
    for (n, v) in defines {
        sim.arg("-D").arg(format!("{n}={v}"));
    }
    let out = sim
        .args(["--cache", CACHES, "--base", &bases, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = |k: usize| json["levels"][k]["misses"].as_u64().unwrap();
    for (level, theirs, mine) in [("L1", cg_l1, ours(0)), ("L2", cg_l2, ours(1))] {
        let error = (mine as f64 - theirs as f64).abs() / (theirs.max(1) as f64);
        println!(
            "{kernel} {level}: cachegrind {theirs}, loopscope {mine}, error {:.3} %",
            100.0 * error
        );
        assert!(
            error <= 0.01,
            "{kernel} {level}: cachegrind {theirs} misses, loopscope {mine}"
        );
    }
}

#[test]
fn example_kernels_agree_with_cachegrind() {
    if !have("valgrind") || !have("cc") {
        println!(
            "SKIPPED: valgrind or cc is not installed; the cachegrind differential test did not run"
        );
        return;
    }
    check("triad.c", &[("N", 200_000)]);
    check("2d-5pt.c", &[("M", 400), ("N", 400)]);
    check("matmul.c", &[("N", 120)]);
}
