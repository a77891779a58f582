//! `loopscope misses --scan` through the real binary: the power-of-two spikes of the 2D stencil
//! in a small 2-way cache (checked against the simulator), the text and JSON shapes, and bad
//! input.

mod common;

use common::{assert_bad_input, loopscope, stderr, stdout};

fn stencil() -> String {
    common::example("kernels/2d-5pt.c").display().to_string()
}

/// A 1 KiB 2-way cache of 64-byte lines: a way holds 512 bytes, 64 doubles, so rows of a
/// multiple of 64 elements map `a[j-1][i]`, `a[j+1][i]` and `b[j][i]` to one set.
const SMALL_2_WAY: &str = "L1=1K:2:64";

/// `misses --scan` of the stencil with 4 rows over `range`, with `extra` arguments.
fn scan(range: &str, extra: &[&str]) -> std::process::Output {
    let k = stencil();
    let mut args = vec![
        "misses",
        &k,
        "-D",
        "M=4",
        "--scan",
        range,
        "--cache",
        SMALL_2_WAY,
    ];
    args.extend_from_slice(extra);
    loopscope(&args)
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `(accesses, misses, compulsory, capacity + conflict)` of the simulator at N = `n`.
fn simulated(n: i64) -> [u64; 4] {
    let k = stencil();
    let n = format!("N={n}");
    let v = json(&loopscope([
        "simulate",
        &k,
        "-D",
        "M=4",
        "-D",
        &n,
        "--cache",
        SMALL_2_WAY,
        "--3c",
        "--json",
    ]));
    let l = &v["levels"][0];
    let get = |f: &str| l[f].as_u64().unwrap();
    [
        get("accesses"),
        get("misses"),
        get("compulsory"),
        get("capacity") + get("conflict"),
    ]
}

#[test]
fn finds_the_power_of_two_rows_and_equals_the_simulator_there() {
    let v = json(&scan("N=48..144:8", &["--json", "-D", "N=7"]));
    assert_eq!(v["parameter"], "N");
    assert_eq!(
        v["range"],
        serde_json::json!({"lo": 48, "hi": 144, "step": 8})
    );
    assert_eq!(v["params"], serde_json::json!({"M": 4}), "-D N is replaced");
    assert_eq!(v["levels"][0]["name"], "L1");
    assert_eq!(v["levels"][0]["ways"], 2);
    let values = v["values"].as_array().unwrap();
    let scanned: Vec<i64> = values
        .iter()
        .map(|x| x["value"].as_i64().unwrap())
        .collect();
    assert_eq!(scanned, (48..=144).step_by(8).collect::<Vec<_>>());
    for x in values {
        let l1 = &x["levels"][0];
        assert!(l1["error"].is_null(), "{x}");
        for field in ["accesses", "misses", "compulsory", "conflict"] {
            assert!(l1[field].is_u64(), "{field}: {x}");
        }
        assert!(l1["conflict_fraction"].is_f64(), "{x}");
    }
    // Rows of 64 and 128 doubles conflict in 3 of every 4 accesses; the others in 1 of 40.
    let spikes: Vec<(&str, i64)> = v["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["level"].as_str().unwrap(), s["value"].as_i64().unwrap()))
        .collect();
    assert_eq!(spikes, [("L1", 64), ("L1", 128)]);
    for s in v["spikes"].as_array().unwrap() {
        let (fraction, median) = (
            s["conflict_fraction"].as_f64().unwrap(),
            s["neighbourhood_median"].as_f64().unwrap(),
        );
        assert!(fraction > 0.7 && median < 0.03, "{s}");
    }
    // At the spikes the model's counts are the simulator's.
    for n in [64, 128] {
        let x = values.iter().find(|x| x["value"] == n).unwrap();
        let l1 = &x["levels"][0];
        assert_eq!(l1["spike"], true);
        let get = |f: &str| l1[f].as_u64().unwrap();
        assert_eq!(
            [
                get("accesses"),
                get("misses"),
                get("compulsory"),
                get("conflict")
            ],
            simulated(n),
            "N = {n}"
        );
    }
}

#[test]
fn text_marks_the_spike() {
    let out = scan("N=56..72:8", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("64 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("502") && row.ends_with('*'), "{row}");
    assert!(
        text.contains("N  L1 misses  L1 conflict  conflict %"),
        "{text}"
    );
    assert!(text.contains("L1     N = 64 (73.23 % vs 2.59 %)"), "{text}");
    assert_eq!(text.matches('*').count(), 1, "{text}");
}

#[test]
fn no_level_modelled_at_any_value_is_an_analysis_error() {
    let out = scan("N=64..64", &["--time-limit", "0.000001"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no cache level could be modelled at any value of N")
            && err.contains("time limit"),
        "{err}"
    );
}

#[test]
fn values_the_kernel_refuses_are_reported_and_the_others_scanned() {
    // N = 0 gives the arrays an empty row: refused, while N = 8 and 16 are modelled.
    let out = scan("N=0..16:8", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |n: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(n))
            .unwrap_or_else(|| panic!("no row {n}: {text}"))
            .to_owned()
    };
    assert_eq!(
        row("0").split_whitespace().collect::<Vec<_>>()[1..],
        ["-"; 3]
    );
    assert!(
        row("16")
            .split_whitespace()
            .nth(1)
            .is_some_and(|m| m != "-"),
        "{text}"
    );
    let reason = "array `a` has an extent `N` that is not a positive 64-bit integer";
    assert!(
        text.contains("refused by the kernel (-):\n  N = 0: ") && text.matches(reason).count() == 1,
        "{text}"
    );
    let v = json(&scan("N=0..16:8", &["--json"]));
    let values = v["values"].as_array().unwrap();
    assert!(
        values[0]["refused"]
            .as_str()
            .is_some_and(|r| r.contains(reason)),
        "{v}"
    );
    assert_eq!(values[0]["levels"][0]["misses"], serde_json::Value::Null);
    assert_eq!(values[1]["refused"], serde_json::Value::Null);
    assert!(values[2]["levels"][0]["misses"].as_u64().is_some(), "{v}");
    // Every value refused: nothing to scan, bad input.
    assert_bad_input(&scan("N=-8..0:8", &[]), reason);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for (range, extra, expected) in [
        ("N=64", &[][..], "expected NAME=LO..HI"),
        ("N=a..9", &[], "LO is not a 64-bit integer"),
        ("N=72..64", &[], "LO (72) is above HI (64)"),
        ("N=64..72:0", &[], "STEP must be at least 1"),
        ("N=1..5000", &[], "5000 values, at most 4096"),
        ("Q=1..5", &[], "has no parameter `Q` (it has: M, N)"),
        ("N=64..72", &["--symbolic", "N"], "with --symbolic"),
        ("N=64..72", &["--check"], "with --check"),
        ("N=64..72", &["--sources"], "with --sources"),
        ("N=64..72", &["--explain"], "with --explain"),
        ("N=64..72", &["--at", "N=3"], "--at"),
    ] {
        assert_bad_input(&scan(range, extra), expected);
    }
    // Without M the kernel cannot be bound at any value.
    let k = stencil();
    assert_bad_input(
        &loopscope(["misses", &k, "--scan", "N=64..72", "--cache", SMALL_2_WAY]),
        "M",
    );
}

/// The stencil with its arrays linearised (`a[j*N+i]`): the same addresses as `a[j][i]`.
const LINEAR_STENCIL: &str = "double a[M*N];\ndouble b[M*N];\ndouble s;\n\n\
    for(int j=1; j<M-1; ++j)\n    for(int i=1; i<N-1; ++i)\n        \
    b[j*N+i] = ( a[j*N+i-1] + a[j*N+i+1]\n                  \
    + a[(j-1)*N+i] + a[(j+1)*N+i]) * s;\n";

#[test]
fn a_linearised_array_is_scanned_in_either_parameter_as_its_rows_form() {
    let dir = tempfile::tempdir().unwrap();
    let linear = dir.path().join("2d-5pt-linear.c");
    std::fs::write(&linear, LINEAR_STENCIL).unwrap();
    let linear = linear.display().to_string();
    let rows = stencil();
    // Scanning the parameter inside the products, then the other one (N fixed).
    for (fixed, range) in [("M=4", "N=56..72:8"), ("N=64", "M=3..6")] {
        let counts = |kernel: &str| {
            let v = json(&loopscope([
                "misses",
                kernel,
                "-D",
                fixed,
                "--scan",
                range,
                "--cache",
                SMALL_2_WAY,
                "--json",
            ]));
            let values = v["values"].as_array().unwrap().clone();
            values
                .iter()
                .map(|x| {
                    let l1 = &x["levels"][0];
                    assert!(l1["error"].is_null(), "{x}");
                    (x["value"].as_i64().unwrap(), l1["misses"].as_u64().unwrap())
                })
                .collect::<Vec<_>>()
        };
        let (got, want) = (counts(&linear), counts(&rows));
        assert!(got.len() >= 3, "{got:?}");
        assert_eq!(got, want, "-D {fixed} --scan {range}");
    }
}
