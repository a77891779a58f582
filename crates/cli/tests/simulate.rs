//! `loopscope simulate` through the real binary: output structure, JSON fields, exit codes.

use std::path::PathBuf;
use std::process::{Command, Output};

fn loopscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .output()
        .unwrap()
}

fn example(name: &str) -> String {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "..",
        "examples",
        "kernels",
        name,
    ]
    .iter()
    .collect();
    p.display().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn spec000_example_json() {
    let k = example("spec000.c");
    let out = loopscope(&[
        "simulate",
        &k,
        "-D",
        "X=10",
        "-D",
        "Y=10",
        "-D",
        "Z=10",
        "--cache",
        "L1=256:2:32",
        "--base",
        "A=0,B=800,C=1600",
        "--3c",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["params"]["X"], 10);
    let l1 = &v["levels"][0];
    for field in [
        "name",
        "accesses",
        "hits",
        "misses",
        "compulsory",
        "capacity",
        "conflict",
        "evictions",
        "writebacks",
    ] {
        assert!(!l1[field].is_null(), "levels[0].{field} missing");
    }
    assert_eq!(l1["accesses"], 40);
    let a_k = v["references"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["text"] == "A[k]")
        .unwrap();
    assert_eq!(a_k["array"], "A");
    assert_eq!(a_k["subscripts"], serde_json::json!(["k"]));
    assert_eq!(
        (
            a_k["accesses"].as_u64(),
            a_k["misses"].as_u64(),
            a_k["compulsory"].as_u64()
        ),
        (Some(10), Some(1), Some(0))
    );
    assert!(v["duration_s"].as_f64().unwrap() >= 0.0);
}

#[test]
fn human_tables_and_per_reference_rows() {
    let k = example("2d-5pt.c");
    let out = loopscope(&[
        "simulate",
        &k,
        "-D",
        "M=50",
        "-D",
        "N=60",
        "--cache",
        "L1=4K:4:64,L2=64K:8:64",
        "--per-ref",
        "--3c",
        "--curve",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(M=50, N=60)"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("level ") && l.contains("compulsory")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("a[j][i-1]") && l.contains(" L2 ")),
        "{text}"
    );
    assert!(text.contains("fully associative LRU"), "{text}");
    // 48 × 58 iterations × 4 loads + 1 store.
    assert!(text.contains("accesses  13920 "), "{text}");
    assert!(text.contains("flops     11136"), "{text}");
}

#[test]
fn trace_input() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(&trace, "# a comment\nR 0 8\nW 40 8\nR 1000 8\n\nR 0 8\n").unwrap();
    let t = trace.display().to_string();
    let out = loopscope(&[
        "simulate",
        "--trace",
        &t,
        "--cache",
        "L1=256:4:64",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["levels"][0]["accesses"], 4);
    assert_eq!(v["levels"][0]["misses"], 3);
    std::fs::write(&trace, "R 0 8\nQ 10 8\n").unwrap();
    let out = loopscope(&["simulate", "--trace", &t, "--cache", "L1=128:2:64"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("t.trace:2: expected `R` or `W`, found `Q`"),
        "{}",
        stderr(&out)
    );
    // Kernel values and placements do nothing to a trace: refused, not ignored.
    for extra in [["-D", "N=5"], ["--base", "a=0"]] {
        let mut args = vec!["simulate", "--trace", &t, "--cache", "L1=128:2:64"];
        args.extend_from_slice(&extra);
        let out = loopscope(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("give them only with a kernel file"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_blocked_kernel_takes_its_tile_size_as_a_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("blocked.c");
    std::fs::write(
        &kernel,
        "double A[N][N], B[N][N], C[N][N];\nfor (int ii = 0; ii < N; ii += BS)\n\
         for (int kk = 0; kk < N; kk += BS)\nfor (int jj = 0; jj < N; jj += BS)\n\
         for (int i = ii; i < ii+BS; ++i)\nfor (int k = kk; k < kk+BS; ++k)\n\
         for (int j = jj; j < jj+BS; ++j)\nC[i][j] += A[i][k] * B[k][j];\n",
    )
    .unwrap();
    let k = kernel.display().to_string();
    let out = loopscope(&[
        "simulate",
        &k,
        "-D",
        "N=16",
        "-D",
        "BS=8",
        "--cache",
        "L1=1K:2:64",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["levels"][0]["accesses"], 4 * 16 * 16 * 16);
    let out = loopscope(&[
        "simulate",
        &k,
        "-D",
        "N=16",
        "-D",
        "BS=0",
        "--cache",
        "L1=1K:2:64",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a loop step must not be zero"),
        "{}",
        stderr(&out)
    );
}

/// Under no-write-allocate a store to a line never loaded misses in an infinite cache with the
/// same policy too, so the triad's stores to `a` (never read) are all compulsory, in a cache
/// that holds everything; the one store per line that loads nothing is no different.
#[test]
fn no_write_allocate_stores_to_lines_never_loaded_are_compulsory() {
    let triad = example("triad.c");
    let out = loopscope(&[
        "simulate",
        &triad,
        "-D",
        "N=1000",
        "--cache",
        "L1=32K:8:64:nwa",
        "--3c",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let split = |x: &serde_json::Value| {
        ["misses", "compulsory", "capacity", "conflict"].map(|f| x[f].as_u64().unwrap())
    };
    assert_eq!(split(&v["levels"][0]), [1375, 1375, 0, 0], "{v}");
    let a = (v["references"].as_array().unwrap().iter())
        .find(|r| r["text"] == "a[i]")
        .unwrap();
    assert_eq!(split(a), [1000, 1000, 0, 0], "{a}");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.c");
    std::fs::write(
        &bad,
        "double a[N];\nfor (i = 0; i < N; i++)\n  a[i] = f(i);\n",
    )
    .unwrap();
    let bad = bad.display().to_string();
    let triad = example("triad.c");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![&bad, "-D", "N=10", "--cache", "L1=32K:8:64"],
            "bad.c:3:10: function call `f(...)` is outside the kernel subset",
        ),
        (
            vec![&triad, "--cache", "L1=32K:8:64"],
            "symbol `N` has no value (give it with -D N=VALUE)",
        ),
        (
            vec![&triad, "-D", "N=10", "--cache", "L1=0:8:64"],
            "cache L1: size, ways and line size must all be positive",
        ),
        (
            vec![&triad, "-D", "N=10", "--cache", "L1=32K:8:48"],
            "line size 48 B is not a power of two",
        ),
        (
            vec![&triad, "-D", "N=10", "--cache", "L1=1000:8:64"],
            "sets × ways × line must equal the size",
        ),
        (
            vec![
                &triad,
                "-D",
                "N=10",
                "--cache",
                "L1=32K:8:64",
                "--base",
                "q=0",
            ],
            "--base names `q`",
        ),
        (
            vec![
                &triad,
                "-D",
                "N=10",
                "--cache",
                "L1=32K:8:64",
                "--base",
                "a=18446744073709551600",
            ],
            "ends beyond the 64-bit address space",
        ),
        (
            vec![
                &triad,
                "-D",
                "N=10",
                "--cache",
                "L1=32K:8:64",
                "--base",
                "a=9223372036854775807",
            ],
            "an address leaves the 64-bit address space",
        ),
        (vec![&triad, "-D", "N"], "expected NAME=VALUE"),
        (
            vec!["/nonexistent/k.c", "-D", "N=1", "--cache", "L1=32K:8:64"],
            "/nonexistent/k.c: cannot read",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["simulate"];
        all.extend(args.iter().copied());
        let out = loopscope(&all);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(want), "{all:?}: {err}");
        // clap's own usage errors add a hint line; loopscope's errors are one line.
        if err.starts_with("loopscope: error:") {
            assert_eq!(err.trim_end().lines().count(), 1, "{all:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}
