//! `loopscope roofline` run as a user runs it: output structure, JSON fields, exit codes.

use std::process::{Command, Output};

fn loopscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .arg("roofline")
        .args(args)
        .output()
        .expect("run loopscope")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = loopscope(&all);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

/// A machine file as `probe` leaves it: Ppeak from the clock, measured peak and bandwidths.
const MACHINE: &str = r#"
format_version = 1
model = "Test CPU"
sockets = 1
cores = 2
threads_per_core = 1
nominal_hz = 2000000000
caches = []
isa = ["sse2", "avx", "avx2", "fma"]

[peak_flops_per_cycle]
dp = 16
sp = 32

[measured]
duration_s = 1.0

[measured.peak_gflops]
dp = 48.0
sp = 96.0
threads = 2

[[measured.bandwidth]]
level = "L2"
kernel = "load"
threads = 2
working_set_bytes = 262144
gb_per_s = 120.0

[[measured.bandwidth]]
level = "MEM"
kernel = "copy"
threads = 2
working_set_bytes = 1073741824
gb_per_s = 15.0
gb_per_s_with_write_allocate = 20.0

[[measured.bandwidth]]
level = "MEM"
kernel = "load"
threads = 1
working_set_bytes = 1073741824
gb_per_s = 25.0
"#;

fn machine_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// Each run of `args` exits 2 with one line on stderr containing its expected text.
fn assert_each_exits_2_with_one_line(cases: &[(&[&str], &str)]) {
    for (args, expected) in cases {
        let output = loopscope(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn paper_profile_prints_inputs_terms_and_both_models() {
    let output = loopscope(&["--counts", "mem=3,l2=8,flops=8", "--profile", "k-computer"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for needle in [
        "inputs\n",
        "  peak       128 GFLOP/s, Peff 112.64 GFLOP/s (paper profile k-computer)",
        "  bandwidth  L2 146 GB/s",
        "\nprediction  13.2727 GFLOP/s, 0.1037 of peak, limited by L2 bandwidth",
        "\nclassic     15.3333 GFLOP/s, 0.1198 of peak, limited by MEM bandwidth",
        "it has 8: L2 side",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
}

#[test]
fn json_has_the_contract_fields() {
    let doc = json(&[
        "--counts",
        "mem=5,l2=21,l1s=12,l1l=6,flops=43",
        "--profile",
        "k-computer",
        "--paper-rounding",
        "--measured-gflops",
        "18.816",
    ]);
    let p = &doc["prediction"];
    assert_eq!(p["limit"], "L2");
    assert_eq!(
        format!("{:.3}", p["fraction_of_peak"].as_f64().unwrap()),
        "0.236"
    );
    for key in ["gflops", "time_s"] {
        assert!(p[key].is_f64(), "{key}");
    }
    let levels = p["levels"].as_array().unwrap();
    assert_eq!(levels[0]["name"], "L2");
    assert_eq!(levels[0]["bytes"], 208);
    assert_eq!(
        levels[1]["bandwidth_gb_per_s"].as_f64().unwrap(),
        0.36 * 128.0
    );
    assert!(levels[1]["time_s"].is_f64());
    assert_eq!(doc["classic"]["limit"], "MEM");
    assert_eq!(
        format!(
            "{:.3}",
            doc["classic"]["fraction_of_peak"].as_f64().unwrap()
        ),
        "0.387"
    );
    assert_eq!(doc["measured"]["gflops"].as_f64().unwrap(), 18.816);
    assert!(doc["measured"]["error"].as_f64().unwrap() < -0.3);
    assert_eq!(doc["l1"]["ok"], true);
    assert_eq!(doc["counts"]["flops"], 43);
    let plain = json(&["--counts", "mem=1,flops=1", "--profile", "k-computer"]);
    assert!(plain["measured"].is_null());
}

#[test]
fn machine_file_supplies_bandwidths_and_peaks() {
    let file = machine_file(MACHINE);
    let path = file.path().to_str().unwrap();
    let doc = json(&["--counts", "mem=3,l2=6,flops=12", "-m", path]);
    let ceilings = &doc["ceilings"];
    // 16 FLOP/cycle × 2 cores × 2 GHz; Peff is the measured peak.
    assert_eq!(ceilings["peak_gflops"].as_f64().unwrap(), 64.0);
    assert_eq!(ceilings["effective_gflops"].as_f64().unwrap(), 48.0);
    // MEM: the 2-thread run counting write-allocate (20), not the 1-thread 25.
    assert_eq!(
        ceilings["levels"][1]["bandwidth"]["gb_per_s"]
            .as_f64()
            .unwrap(),
        20.0
    );
    assert!(
        ceilings["levels"][1]["source"]
            .as_str()
            .unwrap()
            .contains("copy")
    );
    assert_eq!(doc["prediction"]["limit"], "MEM");
    // Flags override the file.
    let doc = json(&[
        "--counts",
        "mem=3,l2=6,flops=12",
        "-m",
        path,
        "--bandwidth",
        "MEM=60",
    ]);
    assert_eq!(doc["prediction"]["limit"], "L2");
    let text = stdout(&loopscope(&["--counts", "mem=3,l2=6,flops=12", "-m", path]));
    assert!(text.contains("measured copy kernel, 2 threads"), "{text}");
}

#[test]
fn one_thread_takes_the_machine_files_one_thread_figures() {
    let file = machine_file(MACHINE);
    let path = file.path().to_str().unwrap();
    let doc = json(&["--counts", "mem=3,flops=12", "-m", path, "--threads", "1"]);
    let ceilings = &doc["ceilings"];
    // One core of 16 FLOP/cycle at 2 GHz; the 2-thread measured peak of 48 is 24 per thread.
    assert_eq!(ceilings["peak_gflops"].as_f64().unwrap(), 32.0);
    assert_eq!(ceilings["effective_gflops"].as_f64().unwrap(), 24.0);
    // MEM: the 1-thread load run (25), not the 2-thread copy; L2 has no 1-thread run.
    let levels = ceilings["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "{levels:?}");
    assert_eq!(levels[0]["bandwidth"]["gb_per_s"].as_f64().unwrap(), 25.0);
    assert!(
        ceilings["peak_source"]
            .as_str()
            .unwrap()
            .ends_with("for 1 thread"),
        "{ceilings}"
    );
    let output = loopscope(&["--counts", "mem=3,flops=12", "-m", path, "--threads", "0"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn missing_bandwidth_names_the_level_and_probe() {
    let without_l2 = MACHINE.replace("level = \"L2\"", "level = \"L3\"");
    let file = machine_file(&without_l2);
    let output = loopscope(&[
        "--counts",
        "mem=3,l2=6,flops=12",
        "-m",
        file.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("has no L2 bandwidth") && err.contains("loopscope probe"),
        "{err}"
    );
}

#[test]
fn missing_bandwidths_say_what_is_really_missing() {
    let file = machine_file(MACHINE);
    let path = file.path().to_str().unwrap();
    let runs = MACHINE.find("[[measured.bandwidth]]").unwrap();
    let unmeasured = machine_file(&MACHINE[..runs]);
    let kernel = kernel_file("double a[N];\nfor(int i=0; i<N; ++i)\n  a[i] = 2.0 * a[i];\n");
    let resident = kernel.path().to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        // No run with 3 threads on a 2-core machine: not a missing -m.
        (
            &["--counts", "mem=3,flops=12", "-m", path, "--threads", "3"],
            "has no bandwidth measured with 3 threads (its runs use 1 or 2 threads; the \
             machine has 2 cores): give `--threads 1` or `--threads 2`, or `--bandwidth \
             MEM=GB/s`",
        ),
        (
            &[
                "--counts",
                "mem=3,l2=6,flops=12",
                "-m",
                path,
                "--threads",
                "1",
            ],
            "has no L2 bandwidth measured with 1 thread, and the kernel uses L2",
        ),
        // A kernel that stays in L1, with only a peak: L1 is what needs a bandwidth.
        (
            &[
                resident,
                "-D",
                "N=100",
                "--cache",
                "L1=32K:8:64",
                "--peak-gflops",
                "10",
            ],
            "no bandwidth for L1, which the kernel uses: give `--bandwidth L1=GB/s`",
        ),
        (
            &[
                "--counts",
                "mem=3,flops=12",
                "-m",
                unmeasured.path().to_str().unwrap(),
            ],
            "has no measured bandwidths: rerun `loopscope probe --out",
        ),
    ];
    assert_each_exits_2_with_one_line(&cases);
}

#[test]
fn bad_numbers_exit_2_with_one_line() {
    for args in [
        &["--counts", "mem=3,l2=x", "--profile", "k-computer"][..],
        &["--counts", "mem=-3,flops=2", "--profile", "k-computer"],
        &["--counts", "mem=0,flops=0", "--profile", "k-computer"],
        &[
            "--counts",
            "mem=3,flops=2",
            "--profile",
            "k-computer",
            "--bandwidth",
            "MEM=0",
        ],
        &[
            "--counts",
            "mem=3,flops=2",
            "--profile",
            "k-computer",
            "--bandwidth",
            "MEM=-5",
        ],
        &[
            "--counts",
            "mem=3,flops=2",
            "--profile",
            "k-computer",
            "--peak-gflops=-1",
        ],
        &[
            "--counts",
            "mem=3,flops=2",
            "--profile",
            "k-computer",
            "--measured-gflops=-1",
        ],
        &["--counts", "mem=3,flops=2", "--profile", "cray-1"],
        &[
            "--counts",
            "mem=3,flops=2",
            "--peak-gflops",
            "0",
            "--bandwidth",
            "MEM=1",
        ],
    ] {
        let output = loopscope(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let output = loopscope(&["--counts", "mem=3,l2=x", "--profile", "k-computer"]);
    assert!(
        stderr(&output).contains("--counts:10:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn volume_dependent_bandwidth_uses_the_given_volume() {
    // The paper's Haswell eq. 14 at loop 14's L3 volume (24 × 102.4 kB).
    let args = [
        "--counts",
        "mem=3,l3=24,flops=24",
        "--profile",
        "haswell-paper",
        "--bandwidth",
        "L3=57.45+3.332/s",
        "--volume",
        "L3=2457600",
    ];
    let doc = json(&args);
    let l3 = doc["prediction"]["levels"][0]["bandwidth_gb_per_s"]
        .as_f64()
        .unwrap();
    assert!(
        (l3 - (57.45 + 3.332 * 2_457_600.0 / 1e9)).abs() < 1e-9,
        "{l3}"
    );
    assert_eq!(doc["prediction"]["limit"], "L3");
    let output = loopscope(&[
        "--counts",
        "mem=3,flops=2",
        "--profile",
        "k-computer",
        "--volume",
        "L3=5",
    ]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_kernel_without_flops_gets_a_bytes_bound_time() {
    let doc = json(&[
        "--counts",
        "mem=2,flops=0,iterations=1000",
        "--profile",
        "k-computer",
    ]);
    assert_eq!(doc["prediction"]["gflops"].as_f64().unwrap(), 0.0);
    assert_eq!(doc["prediction"]["limit"], "MEM");
    let time = doc["prediction"]["time_s"].as_f64().unwrap();
    assert!((time - 16_000.0 / 46e9).abs() < 1e-15, "{time}");
    assert!(doc["prediction"]["levels"][0]["bytes_per_flop"].is_null());
}

#[test]
fn plot_is_written_for_both_axes() {
    let dir = tempfile::tempdir().unwrap();
    for axis in ["flop-per-byte", "bytes-per-flop"] {
        let path = dir.path().join(format!("{axis}.svg"));
        let output = loopscope(&[
            "--counts",
            "mem=3,l2=8,flops=8",
            "--profile",
            "k-computer",
            "--plot",
            path.to_str().unwrap(),
            "--axis",
            axis,
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("L2 146 GB/s"),
            "{axis}"
        );
        assert_eq!(svg.matches("<circle").count(), 2, "{axis}");
    }
}

#[test]
fn l1_conditions_warn_on_stderr_and_keep_the_prediction() {
    let args = [
        "--counts",
        "mem=3,l2=1,l1s=40,flops=12",
        "--profile",
        "k-computer",
    ];
    let output = loopscope(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("warning: outside the model's scope: nL1s < 10 × nM fails"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).contains("L1          outside scope (MEM region)"));
    let quiet = loopscope(&[&args[..], &["-q"]].concat());
    assert!(stderr(&quiet).is_empty(), "{}", stderr(&quiet));
}

/// The triad of examples/kernels, 1000 elements per array, through caches smaller than its
/// 32 KB working set, with explicit bandwidths and peak: independent of this machine.
const TRIAD_ARGS: &[&str] = &[
    "../../examples/kernels/triad.c",
    "-D",
    "N=1000",
    "--cache",
    "L1=8K:8:64,L2=16K:8:64",
    "--bandwidth",
    "L2=60,MEM=15",
    "--peak-gflops",
    "10",
];

#[test]
fn kernel_file_traffic_comes_from_the_simulator() {
    let v = json(TRIAD_ARGS);
    // Per iteration: b, c, d loaded and a allocated (4 words), a written back (1 word), from
    // memory through L2.
    assert_eq!(
        traffic_levels(&v),
        [("L2".to_owned(), 40_000), ("MEM".to_owned(), 40_000)]
    );
    assert_eq!(v["traffic"]["flops"], 2000);
    assert_eq!(v["traffic"]["iterations"], 1000);
    assert_eq!(v["prediction"]["limit"], "MEM");
    // 2 FLOPs per 40 bytes at 15 GB/s.
    assert!((v["prediction"]["gflops"].as_f64().unwrap() - 0.75).abs() < 1e-9);
    assert_eq!(v["kernel"]["params"]["N"], 1000);
    assert_eq!(v["kernel"]["traffic_source"], "exact cache simulator");
    assert!(v["kernel"]["file"].as_str().unwrap().ends_with("triad.c"));
    assert!(v.get("counts").is_none());
}

/// Per-level bytes of a kernel file's traffic, as the JSON document lists them.
fn traffic_levels(v: &serde_json::Value) -> Vec<(String, u64)> {
    v["traffic"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_owned(),
                l["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn model_traffic_equals_the_simulator_on_a_streaming_kernel() {
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--traffic", "model"]);
    let v = json(&args);
    assert_eq!(
        traffic_levels(&v),
        [("L2".to_owned(), 40_000), ("MEM".to_owned(), 40_000)]
    );
    let source = v["kernel"]["traffic_source"].as_str().unwrap();
    assert!(
        source.starts_with("analytic cache model (L1, L2:"),
        "{source}"
    );
    assert!(!source.contains("simulator"), "{source}");
}

#[test]
fn model_traffic_keeps_conflict_misses_of_a_resident_kernel() {
    // A column walk with rows 512 bytes apart in a 2-way 4 KiB L1: the working set fits in L2,
    // so no compulsory miss recurs there in the steady state, but L1's conflict misses do.
    let common = [
        "../../examples/kernels/stride-conflict.c",
        "-D",
        "N=64",
        "-D",
        "M=64",
        "--cache",
        "L1=4K:2:64,L2=256K:8:64",
        "--bandwidth",
        "L2=60,MEM=15",
        "--peak-gflops",
        "10",
    ];
    let sim = json(&common);
    let mut args = common.to_vec();
    args.extend(["--traffic", "model"]);
    let model = json(&args);
    let (model, sim) = (traffic_levels(&model), traffic_levels(&sim));
    // The L1 footprint exceeds L1, so the model takes every compulsory miss to recur; the
    // simulator finds that `s`'s 8 lines survive in sets the column walk leaves alone, so the
    // model counts them (in and out) once too often: 16 lines of 4096.
    assert_eq!(sim, [("L2".to_owned(), 262_144), ("MEM".to_owned(), 0)]);
    assert_eq!(model, [("L2".to_owned(), 263_168), ("MEM".to_owned(), 0)]);
}

#[test]
fn levels_the_model_cannot_do_come_from_the_simulator_with_a_warning() {
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--traffic", "model", "--max-operations", "1", "--json"]);
    let output = loopscope(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("L1 not modelled"), "{err}");
    assert!(err.contains("from the simulator"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        traffic_levels(&v),
        [("L2".to_owned(), 40_000), ("MEM".to_owned(), 40_000)]
    );
    let source = v["kernel"]["traffic_source"].as_str().unwrap();
    assert!(
        source.contains("exact cache simulator (L1, L2)"),
        "{source}"
    );
}

#[test]
fn kernel_file_text_names_the_kernel_and_its_caches() {
    let output = loopscope(TRIAD_ARGS);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("kernel       ../../examples/kernels/triad.c (N=1000)"));
    assert!(text.contains("L1 8 KiB, L2 16 KiB"), "{text}");
    assert!(text.contains("limited by MEM"), "{text}");
}

#[test]
fn kernel_file_bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.c");
    std::fs::write(
        &broken,
        "double a[N];\nfor(int i=0; i<N; ++i)\n  a[i] = ;\n",
    )
    .unwrap();
    let broken = broken.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[broken, "-D", "N=10", "--cache", "L1=1K:2:64"],
            "broken.c:3:",
        ),
        (&[TRIAD_ARGS[0], "--cache", "L1=1K:2:64"], "N"),
        (
            &[TRIAD_ARGS[0], "-D", "N=10", "--cache", "L1=1K:3:64"],
            "L1",
        ),
        (
            &[
                TRIAD_ARGS[0],
                "-D",
                "N=10",
                "--cache",
                "L1=1K:2:64:fifo",
                "--traffic",
                "model",
            ],
            "level L1: --traffic model",
        ),
    ];
    assert_each_exits_2_with_one_line(&cases);
}

fn have_cc() -> bool {
    let found = Command::new("cc").arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: no `cc` on this machine");
    }
    found
}

#[test]
fn measure_prints_the_measured_rate_beside_the_prediction() {
    if !have_cc() {
        return;
    }
    let mut args = TRIAD_ARGS.to_vec();
    args.push("--measure");
    let v = json(&args);
    let measured = v["measured"]["gflops"].as_f64().unwrap();
    assert!(measured > 0.0, "{v}");
    let ratio = v["measured"]["ratio"].as_f64().unwrap();
    assert!((ratio - measured / 0.75).abs() < 1e-9);
    assert_eq!(v["kernel"]["harness"]["compiler"], "cc -O2");
    assert!(v["kernel"]["harness"]["repetitions"].as_u64().unwrap() >= 1);
}

#[test]
fn measure_shows_the_compiler_message() {
    let dir = tempfile::tempdir().unwrap();
    let compiler = dir.path().join("failing-cc");
    std::fs::write(
        &compiler,
        "#!/bin/sh\necho 'harness.c:3:1: error: unknown type name' >&2\nexit 1\n",
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&compiler).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&compiler, permissions).unwrap();
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--measure", "--cc", compiler.to_str().unwrap()]);
    let output = loopscope(&args);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("error: unknown type name"), "{err}");
    let missing = loopscope(&[TRIAD_ARGS, &["--measure", "--cc", "/nonexistent/cc"]].concat());
    // A compiler that cannot be started is a bad --cc: exit 2, as for one that fails.
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
}

fn kernel_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".c").tempfile().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// A kernel file's run on one 32 KiB L1 with the given N and bandwidths, 40 GFLOP/s peak, and
/// `extra` flags.
fn kernel_run<'a>(
    path: &'a str,
    n: &'a str,
    bandwidth: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        path,
        "-D",
        n,
        "--cache",
        "L1=32K:8:64",
        "--bandwidth",
        bandwidth,
        "--peak-gflops",
        "40",
    ];
    args.extend(extra);
    args
}

const MATVEC: &str = "double a[N][N], x[N], y[N];\n\
    for(int i=0; i<N; ++i)\n  for(int j=0; j<N; ++j)\n    y[i] += a[i][j] * x[j];\n";

#[test]
fn an_in_order_sum_is_bound_by_the_add_latency() {
    let kernel = kernel_file(MATVEC);
    let path = kernel.path().to_str().unwrap();
    let args = kernel_run(path, "N=64", "L2=100,MEM=20", &["--add-latency-ns", "1"]);
    let v = json(&args);
    assert_eq!(v["prediction"]["limit"], "chain");
    assert_eq!(v["traffic"]["chained_adds"], 64 * 64);
    // One addition per iteration, 1 ns each: 2 FLOPs per ns.
    assert!((v["prediction"]["gflops"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    assert_eq!(v["ceilings"]["add_latency"]["source"], "--add-latency-ns");
    let text = stdout(&loopscope(&args));
    assert!(
        text.contains("limited by the in-order sum's add latency"),
        "{text}"
    );
    assert!(text.contains("chain-bound"), "{text}");
    // A machine file without a latency: the chain is named in a warning, not guessed.
    let machine = machine_file(MACHINE);
    let m = ["-m", machine.path().to_str().unwrap()];
    let output = loopscope(&kernel_run(path, "N=64", "L2=100,MEM=20", &m));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("no add latency is known"));
}

#[test]
fn l1_ports_time_loads_and_stores_apart() {
    let kernel =
        kernel_file("double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  b[i] = s * a[i];\n");
    let path = kernel.path().to_str().unwrap();
    let l1_time = |extra: &[&str]| {
        let v = json(&kernel_run(path, "N=512", "L1=100", extra));
        v["prediction"]["levels"][0]["time_s"].as_f64().unwrap()
    };
    // 16 bytes per iteration at 100 GB/s; with ports, 8 stored bytes at 20 GB/s take longer.
    let one = l1_time(&[]);
    let ports = l1_time(&["--store-bandwidth", "L1=20"]);
    assert!((one - 512.0 * 16.0 / 100e9).abs() < 1e-15, "{one}");
    assert!((ports - 512.0 * 8.0 / 20e9).abs() < 1e-15, "{ports}");
}

#[test]
fn bad_chain_and_port_numbers_exit_2_with_one_line() {
    let kernel = kernel_file(MATVEC);
    let path = kernel.path().to_str().unwrap();
    for extra in [
        &["--add-latency-ns", "0"][..],
        &["--add-latency-ns=-1"],
        &["--store-bandwidth", "L1=0"],
        &["--store-bandwidth", "MEM=5"],
        &["--store-bandwidth", "L1=5+1/s"],
    ] {
        let output = loopscope(&kernel_run(path, "N=8", "L1=100", extra));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{extra:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output).trim().lines().count(),
            1,
            "{extra:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn cflags_decide_the_chains() {
    let matmul = kernel_file(
        "double a[N][N], b[N][N], c[N][N];\n\
         for(int i=0; i<N; ++i)\n for(int j=0; j<N; ++j)\n  for(int k=0; k<N; ++k)\n\
         c[i][j] += a[i][k] * b[k][j];\n",
    );
    let matmul = matmul.path().to_str().unwrap();
    // 16³ additions; 16-byte vectors run two j's side by side, 32-byte ones four.
    assert_eq!(chained_adds(matmul, "-O2"), 16 * 16 * 16 / 2);
    assert_eq!(chained_adds(matmul, "-O2 -mavx2"), 16 * 16 * 16 / 4);
    assert_eq!(
        chained_adds(matmul, "-O3 -mavx512f -mavx2"),
        16 * 16 * 16 / 4
    );
    // Reassociation gives each sum one vector of partial sums: these already run a vector of
    // chains side by side, so nothing changes.
    assert_eq!(chained_adds(matmul, "-O3 -ffast-math"), 16 * 16 * 16 / 2);
    assert_eq!(chained_adds(matmul, "-Ofast"), 16 * 16 * 16 / 2);
    // A matrix-vector product's rows are one chain each, split in two by reassociation.
    let matvec = kernel_file(MATVEC);
    let matvec = matvec.path().to_str().unwrap();
    assert_eq!(chained_adds(matvec, "-O2"), 16 * 16);
    assert_eq!(chained_adds(matvec, "-O2 -ffast-math"), 16 * 16 / 2);
}

#[test]
fn a_recurrence_through_memory_is_a_chain() {
    let gauss_seidel = kernel_file(
        "double a[N][N];\ndouble s;\nfor(int j=1; j<N-1; ++j)\n for(int i=1; i<N-1; ++i)\n  \
         a[j][i] = (a[j][i-1] + a[j][i+1] + a[j-1][i] + a[j+1][i]) * s;\n",
    );
    let path = gauss_seidel.path().to_str().unwrap();
    let extra = ["--add-latency-ns", "1"];
    let out = loopscope(&kernel_run(path, "N=16", "L2=100,MEM=20", &extra));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // Three additions and the product between a[j][i-1] and the store, on 14 × 14 points.
    assert!(
        text.contains("limited by the latency of a recurrence through memory (4 ns per iteration"),
        "{text}"
    );
    assert!(
        text.contains("only an update order without that dependence"),
        "{text}"
    );
    let mut args = kernel_run(path, "N=16", "L2=100,MEM=20", &extra);
    args.push("--json");
    let v: serde_json::Value = serde_json::from_slice(&loopscope(&args).stdout).unwrap();
    assert_eq!(v["traffic"]["chained_adds"], 4 * 14 * 14);
    assert_eq!(v["traffic"]["recurrence_adds"], 4 * 14 * 14);
    assert_eq!(v["prediction"]["limit"], "chain");
}

#[test]
fn an_unoptimised_build_keeps_nothing_in_registers() {
    let matmul = kernel_file(
        "double a[N][N], b[N][N], c[N][N];\n\
         for(int i=0; i<N; ++i)\n for(int j=0; j<N; ++j)\n  for(int k=0; k<N; ++k)\n\
         c[i][j] += a[i][k] * b[k][j];\n",
    );
    let matmul = matmul.path().to_str().unwrap();
    let l1_bytes = |cflags: &str| {
        let flag = format!("--cflags={cflags}");
        let out = loopscope(&kernel_run(
            matmul,
            "N=16",
            "L1=100,MEM=20",
            &[&flag, "--json"],
        ));
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let l1 = &v["traffic"]["levels"][0];
        assert_eq!(l1["level"], "L1", "{v}");
        let bytes = (
            l1["bytes"].as_u64().unwrap(),
            l1["store_bytes"].as_u64().unwrap(),
        );
        (bytes, stderr(&out).contains("do not optimise"))
    };
    // Optimised, c[i][j] is loaded before the k loop and stored after it.
    let kept = (8 * (2 * 16 * 16 * 16 + 2 * 16 * 16), 8 * 16 * 16);
    assert_eq!(l1_bytes("-O2"), (kept, false));
    assert_eq!(l1_bytes("-O0 -O3"), (kept, false));
    // gcc's default is -O0, as is a later -O0: every reference, every iteration.
    let every = (8 * 4 * 16 * 16 * 16, 8 * 16 * 16 * 16);
    assert_eq!(l1_bytes("-O2 -O0"), (every, true));
    assert_eq!(l1_bytes("-g"), (every, true));
}

/// The chained additions the roofline counts for the kernel file at `path` (N=16) built with
/// `cflags`.
fn chained_adds(path: &str, cflags: &str) -> u64 {
    let flag = format!("--cflags={cflags}");
    let extra = ["--add-latency-ns", "1", flag.as_str()];
    let v = json(&kernel_run(path, "N=16", "L2=100,MEM=20", &extra));
    v["traffic"]["chained_adds"].as_u64().unwrap()
}

#[test]
fn a_machine_files_add_latency_survives_explicit_peaks() {
    let kernel = kernel_file(MATVEC);
    let path = kernel.path().to_str().unwrap();
    let machine = machine_file(&MACHINE.replace(
        "[measured]\nduration_s = 1.0\n",
        "[measured]\nduration_s = 1.0\nadd_latency_ns = 0.5\n",
    ));
    let m = ["-m", machine.path().to_str().unwrap()];
    let v = json(&kernel_run(path, "N=64", "L2=100,MEM=20", &m));
    assert_eq!(v["ceilings"]["add_latency"]["ns"], 0.5);
    assert_eq!(v["prediction"]["limit"], "chain");
}

#[test]
fn a_float_kernel_is_held_to_the_single_precision_peak() {
    let file = machine_file(MACHINE);
    let machine = file.path().to_str().unwrap();
    let peak = |declarations: &str| {
        let text = format!("{declarations}\nfor(int i=0; i<N; ++i)\n  a[i] = b[i] + s * c[i];\n");
        let kernel = kernel_file(&text);
        let doc = json(&[
            kernel.path().to_str().unwrap(),
            "-D",
            "N=1000",
            "-m",
            machine,
            "--cache",
            "L1=32K:8:64",
            "--bandwidth",
            "L2=100,MEM=20",
            "--threads",
            "1",
        ]);
        let ceilings = &doc["ceilings"];
        (
            ceilings["peak_gflops"].as_f64().unwrap(),
            ceilings["effective_gflops"].as_f64().unwrap(),
            ceilings["peak_source"].as_str().unwrap().to_owned(),
        )
    };
    // 32 single-precision FLOP/cycle at 2 GHz on one core; the measured SP peak, per thread.
    let (sp, sp_eff, sp_source) = peak("float a[N], b[N], c[N];\nfloat s;");
    assert_eq!((sp, sp_eff), (64.0, 48.0));
    assert!(sp_source.contains("single precision"), "{sp_source}");
    // One double anywhere makes the arithmetic double: 16 FLOP/cycle, 48 / 2 measured.
    let (dp, dp_eff, dp_source) = peak("float a[N], b[N], c[N];\ndouble s;");
    assert_eq!((dp, dp_eff), (32.0, 24.0));
    assert!(dp_source.contains("double precision"), "{dp_source}");
}

#[test]
fn measure_declares_const_and_static_scalars() {
    if !have_cc() {
        return;
    }
    let kernel = kernel_file(
        "static double a[N];\nconst double w = 0.5;\nstatic double s;\n\
         for(int i=0; i<N; ++i)\n  a[i] = w * s * a[i];\n",
    );
    let args = kernel_run(
        kernel.path().to_str().unwrap(),
        "N=1000",
        "L1=100,MEM=20",
        &["--measure"],
    );
    let v = json(&args);
    assert!(v["measured"]["gflops"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn a_yaml_machine_file_says_how_to_convert_it() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("haswell.yml");
    std::fs::write(&yaml, "model name: Intel Xeon\nclock: 2.3 GHz\n").unwrap();
    let output = loopscope(&["--counts", "mem=3,flops=2", "-m", yaml.to_str().unwrap()]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("loopscope machine --import"), "{err}");
}

#[test]
fn a_kernel_without_floating_point_work_is_measured_by_its_time() {
    if !have_cc() {
        return;
    }
    let args = [
        "../../examples/kernels/transpose.c",
        "-D",
        "N=64",
        "--cache",
        "L1=8K:8:64,L2=16K:8:64",
        "--bandwidth",
        "L2=60,MEM=15",
        "--peak-gflops",
        "10",
        "--measure",
    ];
    let v = json(&args);
    let measured = &v["measured"];
    let seconds = measured["seconds_per_run"].as_f64().unwrap();
    let predicted = measured["predicted_seconds_per_run"].as_f64().unwrap();
    assert!(seconds > 0.0 && predicted > 0.0, "{v}");
    assert_eq!(predicted, v["prediction"]["time_s"].as_f64().unwrap());
    let ratio = measured["ratio"].as_f64().unwrap();
    assert!((ratio - predicted / seconds).abs() < 1e-9, "{v}");
    let output = loopscope(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    // The comparison's line, not the harness's `measured     cc -O2: ...`.
    let line = text
        .lines()
        .find(|l| l.starts_with("measured    ") && l.contains(" per run against "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("% of the predicted rate") && line.contains("% in time)"),
        "{line}"
    );
}

#[test]
fn measure_refuses_more_than_one_thread_before_compiling() {
    // A compiler that would fail shows the refusal comes before any compilation.
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--measure", "--threads", "2", "--cc", "/nonexistent/cc"]);
    assert_each_exits_2_with_one_line(&[(
        &args,
        "--threads 2 with --measure: the harness runs the kernel on one thread",
    )]);
    let mut one = TRIAD_ARGS.to_vec();
    one.extend(["--threads", "2"]);
    assert!(loopscope(&one).status.success());
}

#[test]
fn the_plot_must_be_an_svg_file() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("plot.png");
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--plot", png.to_str().unwrap()]);
    assert_each_exits_2_with_one_line(&[(&args, "give a file name ending in .svg")]);
    assert!(!png.exists());
    let svg = dir.path().join("plot.SVG");
    let mut args = TRIAD_ARGS.to_vec();
    args.extend(["--plot", svg.to_str().unwrap()]);
    assert!(loopscope(&args).status.success());
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

#[test]
fn a_bandwidth_for_a_level_the_kernel_lacks_is_a_warning() {
    let args = [
        "../../examples/kernels/triad.c",
        "-D",
        "N=1000",
        "--cache",
        "L1=8K:8:64,L2=16K:8:64",
        "--bandwidth",
        "L2=60,MEM=15,L7=5",
        "--peak-gflops",
        "10",
    ];
    let output = loopscope(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "--bandwidth L7: the kernel's traffic has no L7 (its levels: L2, MEM); this \
             bandwidth is not used"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_measured_peak_above_the_theoretical_one_is_labelled_measured() {
    // 2 cores × 16 DP FLOPs per cycle × 2 GHz = 64 GFLOP/s theoretical; the probe found 80.
    let machine = machine_file(&MACHINE.replace("dp = 48.0", "dp = 80.0"));
    let v = json(&[
        "--counts",
        "mem=3,flops=2",
        "-m",
        machine.path().to_str().unwrap(),
    ]);
    assert_eq!(v["ceilings"]["peak_gflops"].as_f64().unwrap(), 80.0);
    let source = v["ceilings"]["peak_source"].as_str().unwrap();
    assert!(
        source.contains(
            "double precision measured, above the 64.00 GFLOP/s theoretical at the nominal clock"
        ),
        "{source}"
    );
    let machine = machine_file(MACHINE);
    let v = json(&[
        "--counts",
        "mem=3,flops=2",
        "-m",
        machine.path().to_str().unwrap(),
    ]);
    assert_eq!(v["ceilings"]["peak_gflops"].as_f64().unwrap(), 64.0);
    let source = v["ceilings"]["peak_source"].as_str().unwrap();
    assert!(
        source.contains("double precision theoretical at the nominal clock"),
        "{source}"
    );
}

/// probe's L1 runs on one thread at two vector widths, as on the AMD EPYC guest: the loads are
/// fastest at 16 bytes, the stores at 32.
const L1_AT_TWO_WIDTHS: &str = r#"
[[measured.bandwidth]]
level = "L1"
kernel = "load"
threads = 1
working_set_bytes = 16384
gb_per_s = 50.0
vector_bytes = 32

[[measured.bandwidth]]
level = "L1"
kernel = "store"
threads = 1
working_set_bytes = 16384
gb_per_s = 37.0
gb_per_s_with_write_allocate = 74.0
vector_bytes = 32

[[measured.bandwidth]]
level = "L1"
kernel = "load"
threads = 1
working_set_bytes = 16384
gb_per_s = 53.0
vector_bytes = 16

[[measured.bandwidth]]
level = "L1"
kernel = "store"
threads = 1
working_set_bytes = 16384
gb_per_s = 22.5
gb_per_s_with_write_allocate = 45.0
vector_bytes = 16
"#;

#[test]
fn l1_ports_take_one_vector_width_the_builds() {
    let machine = machine_file(&format!("{MACHINE}{L1_AT_TWO_WIDTHS}"));
    let kernel =
        kernel_file("double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  b[i] = s * a[i];\n");
    let base = [
        kernel.path().to_str().unwrap(),
        "-D",
        "N=512",
        "--cache",
        "L1=32K:8:64",
        "-m",
        machine.path().to_str().unwrap(),
        "--threads",
        "1",
    ];
    let ports = |extra: &[&str]| {
        let v = json(&[&base[..], extra].concat());
        let l1 = v["ceilings"]["levels"][0].clone();
        assert_eq!(l1["level"], "L1", "{l1}");
        (
            l1["bandwidth"]["gb_per_s"].as_f64().unwrap(),
            l1["store"]["gb_per_s"].as_f64().unwrap(),
            l1["source"].as_str().unwrap().to_owned(),
        )
    };
    // The default build (-O2, no -march) uses the x86-64 baseline's 16-byte vectors: both ports
    // at that width, not the fastest run of each whatever its width.
    let (load, store, source) = ports(&[]);
    assert_eq!((load, store), (53.0, 22.5), "{source}");
    assert!(source.ends_with("16-byte vectors, the build's"), "{source}");
    let text = stdout(&loopscope(&base));
    assert!(
        text.contains("22.5 GB/s stores (") && text.contains("16-byte vectors, the build's)"),
        "{text}"
    );
    // -mavx2 builds 32-byte vectors: both ports at 32.
    assert_eq!(ports(&["--cflags", "-O2 -mavx2"]).0, 50.0);
    assert_eq!(ports(&["--cflags", "-O2 -mavx2"]).1, 37.0);
    // A width probe did not time takes the nearest it did, for both ports, and says so.
    let (load, store, source) = ports(&["--cflags", "-O2 -mavx512f"]);
    assert_eq!((load, store), (50.0, 37.0), "{source}");
    assert!(
        source.ends_with("32-byte vectors: no 64-byte runs, the build's width"),
        "{source}"
    );
}

/// probe's L2 and L3 `load` (0 % written) and `store` (50 %) runs on two threads, and memory's
/// copy: L3's store rate is above L2's load rate, as on the AMD EPYC guest.
const MIXED_LEVELS: &str = r#"
format_version = 1
model = "Test CPU"
sockets = 1
cores = 2
threads_per_core = 1
nominal_hz = 2000000000
caches = []
isa = ["sse2"]

[peak_flops_per_cycle]
dp = 16
sp = 32

[measured]
duration_s = 1.0

[[measured.bandwidth]]
level = "L2"
kernel = "load"
threads = 2
working_set_bytes = 262144
gb_per_s = 77.2

[[measured.bandwidth]]
level = "L2"
kernel = "store"
threads = 2
working_set_bytes = 262144
gb_per_s = 84.5
gb_per_s_with_write_allocate = 169.0

[[measured.bandwidth]]
level = "L3"
kernel = "load"
threads = 2
working_set_bytes = 4194304
gb_per_s = 55.6

[[measured.bandwidth]]
level = "L3"
kernel = "store"
threads = 2
working_set_bytes = 4194304
gb_per_s = 57.5
gb_per_s_with_write_allocate = 115.0

[[measured.bandwidth]]
level = "MEM"
kernel = "copy"
threads = 2
working_set_bytes = 1073741824
gb_per_s = 15.0
gb_per_s_with_write_allocate = 20.0
"#;

/// A kernel file's run with `n` over a 512 KiB L2 and an 8 MiB L3 with `MIXED_LEVELS`, and
/// `extra` flags.
fn with_l3<'a>(kernel: &'a str, n: &'a str, machine: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        kernel,
        "-D",
        n,
        "--cache",
        "L1=32K:8:64,L2=512K:8:64,L3=8M:16:64",
        "-m",
        machine,
    ];
    args.extend(extra);
    args
}

#[test]
fn a_level_without_traffic_is_shown_at_the_kernels_write_share_everywhere() {
    let machine = machine_file(MIXED_LEVELS);
    let machine = machine.path().to_str().unwrap();
    let kernel =
        kernel_file("double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  b[i] = s * a[i];\n");
    let kernel = kernel.path().to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("roofline.svg");
    let args = with_l3(
        kernel,
        "N=8192",
        machine,
        &["--plot", plot.to_str().unwrap()],
    );
    let v = json(&args);
    let levels = v["prediction"]["levels"].as_array().unwrap();
    let (l2, l3) = (&levels[0], &levels[1]);
    assert_eq!((&l2["name"], &l3["name"]), (&"L2".into(), &"L3".into()));
    assert_eq!(l3["bytes"], 0);
    // A third of L2's bytes are write-backs (b's lines); L3 is timed at that share, not at
    // its store kernel's 115 GB/s.
    let share = l2["write_share"].as_f64().unwrap();
    assert!((share - 1.0 / 3.0).abs() < 1e-9, "{share}");
    assert_eq!(l3["write_share"].as_f64().unwrap(), share);
    let rate = |l: &serde_json::Value| l["bandwidth_gb_per_s"].as_f64().unwrap();
    let at_a_third = 1.0 / ((1.0 / 3.0) / 55.6 + (2.0 / 3.0) / 115.0);
    assert!((rate(l3) - at_a_third).abs() < 1e-9, "{}", rate(l3));
    assert!(rate(l3) < rate(l2));
    // The table, the plot's legend and the note give the same rate and say which share.
    let text = stdout(&loopscope(&args));
    let svg = std::fs::read_to_string(&plot).unwrap();
    for (what, shown) in [
        ("table", "L3                 0 B   0.000   84.8011 GB/s"),
        ("legend", "L3 84.8011 GB/s at 33 % written, no traffic"),
        ("legend", "L2 121.0278 GB/s at 33 % written"),
        (
            "note",
            "note        L3 moves no bytes: its rate is taken at 33 % written bytes, the \
             kernel's share through L2",
        ),
    ] {
        let haystack = if what == "legend" { &svg } else { &text };
        assert!(
            haystack.contains(shown),
            "{what}: no `{shown}` in\n{haystack}"
        );
    }
    assert!(!svg.contains("115 GB/s"), "{svg}");
}

#[test]
fn the_classic_line_of_a_kernel_without_flops_is_true() {
    let machine = machine_file(MIXED_LEVELS);
    let machine = machine.path().to_str().unwrap();
    let copy = kernel_file("double a[N], b[N];\nfor(int i=0; i<N; ++i)\n  b[i] = a[i];\n");
    let copy = copy.path().to_str().unwrap();
    // In L2: no FLOPs and no memory bytes, so no memory bandwidth limits it.
    let args = with_l3(copy, "N=8192", machine, &[]);
    let text = stdout(&loopscope(&args));
    assert!(
        text.contains(
            "classic     no floating-point work, and no bytes to time (MEM traffic only: none)"
        ),
        "{text}"
    );
    assert!(!text.contains("limited by MEM bandwidth"), "{text}");
    let v = json(&args);
    assert!(v["classic"]["limit"].is_null(), "{}", v["classic"]);
    assert_eq!(v["classic"]["time_s"].as_f64().unwrap(), 0.0);
    // From memory: memory's time, as the prediction's.
    let big = with_l3(copy, "N=700000", machine, &[]);
    let v = json(&big);
    assert_eq!(v["classic"]["limit"], "MEM");
    let memory_time = v["prediction"]["levels"][2]["time_s"].as_f64().unwrap();
    assert_eq!(v["classic"]["time_s"].as_f64().unwrap(), memory_time);
    let text = stdout(&loopscope(&big));
    assert!(
        text.contains("classic     no floating-point work: ")
            && text.contains("in total, limited by MEM bandwidth (MEM traffic only)"),
        "{text}"
    );
    // A kernel file timed at L1 alone: the classic roofline takes L1 for memory, and says so.
    let dot =
        kernel_file("double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  s += a[i] * b[i];\n");
    let dot = dot.path().to_str().unwrap();
    let args = kernel_run(dot, "N=512", "L1=100", &["--add-latency-ns", "1"]);
    let text = stdout(&loopscope(&args));
    assert!(
        text.contains(
            "limited by L1 bandwidth (L1 traffic only, the outermost timed level: MEM is not timed)"
        ),
        "{text}"
    );
}
