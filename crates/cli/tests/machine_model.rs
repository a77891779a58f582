//! One machine model for every command: the cache sizes a machine file's probe measured are
//! the ones `roofline`, `misses` and `simulate` use (`--caches advertised` for the others), and
//! `probe --out FILE` followed by `machine`, `roofline` and `misses` with `-m FILE` agree on
//! sizes, clock and bandwidths.

use std::process::{Command, Output};

fn loopscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .output()
        .expect("run loopscope")
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = loopscope(&all);
    assert!(
        output.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

fn triad() -> String {
    format!(
        "{}/../../examples/kernels/triad.c",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A guest's machine file: 32 MiB of L3 advertised, 4 MiB of it measured.
const MACHINE: &str = r#"
format_version = 1
model = "Test CPU"
sockets = 1
cores = 2
threads_per_core = 1
nominal_hz = 2000000000
isa = ["sse2", "avx", "avx2", "fma"]

[[caches]]
level = 1
kind = "data"
size_bytes = 32768
line_bytes = 64
ways = 8
sets = 64
shared_by = 1

[[caches]]
level = 2
kind = "unified"
size_bytes = 524288
line_bytes = 64
ways = 8
sets = 1024
shared_by = 1

[[caches]]
level = 3
kind = "unified"
size_bytes = 33554432
line_bytes = 64
ways = 16
sets = 32768
shared_by = 2

[peak_flops_per_cycle]
dp = 16
sp = 32

[measured]
duration_s = 20.0
core_hz = 3000000000.0

[[measured.caches]]
level = 1
kind = "data"
size_bytes = 32768
latency_cycles = 4.0
latency_ns = 1.3
confidence = 0.9

[[measured.caches]]
level = 2
kind = "unified"
size_bytes = 524288
latency_cycles = 12.0
latency_ns = 4.0
confidence = 0.6

[[measured.caches]]
level = 3
kind = "unified"
size_bytes = 4194304
latency_cycles = 50.0
latency_ns = 16.0
confidence = 0.8

[[measured.bandwidth]]
level = "L2"
kernel = "load"
threads = 2
working_set_bytes = 262144
gb_per_s = 120.0

[[measured.bandwidth]]
level = "L3"
kernel = "load"
threads = 2
working_set_bytes = 2097152
gb_per_s = 80.0

[[measured.bandwidth]]
level = "MEM"
kernel = "load"
threads = 2
working_set_bytes = 134217728
gb_per_s = 20.0
"#;

fn machine_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// Bytes the roofline's traffic moves through `level`.
fn bytes_through(v: &serde_json::Value, level: &str) -> u64 {
    v["traffic"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["level"] == level)
        .map_or(0, |l| l["bytes"].as_u64().unwrap())
}

#[test]
fn measured_sizes_change_the_rooflines_traffic_and_advertised_brings_it_back() {
    let file = machine_file(MACHINE);
    let m = file.path().to_str().unwrap();
    let triad = triad();
    // 4 arrays of 2^18 doubles, 8 MiB: beyond the measured L3, inside the advertised one.
    let base = ["roofline", triad.as_str(), "-D", "N=262144", "-m", m];
    let effective = json(&base);
    assert_eq!(bytes_through(&effective, "MEM"), 40 * 262_144);
    assert_eq!(effective["prediction"]["limit"], "MEM");
    let caches = effective["kernel"]["caches"].as_array().unwrap();
    assert_eq!(caches[2], "L3 4 MiB (measured; 32 MiB advertised)");
    assert!(
        effective["kernel"]["cache_sizes"]
            .as_str()
            .unwrap()
            .starts_with("effective"),
        "{}",
        effective["kernel"]
    );
    let mut args = base.to_vec();
    args.extend(["--caches", "advertised"]);
    let advertised = json(&args);
    assert_eq!(bytes_through(&advertised, "MEM"), 0);
    assert_eq!(advertised["prediction"]["limit"], "L3");
    assert_eq!(advertised["kernel"]["caches"][2], "L3 32 MiB");
    assert!(
        advertised["kernel"]["cache_sizes"]
            .as_str()
            .unwrap()
            .starts_with("advertised"),
        "{}",
        advertised["kernel"]
    );
    // The text names the sizes too.
    let text = loopscope(&base);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("L3 4 MiB (measured; 32 MiB advertised)"),
        "{stdout}"
    );
    assert!(stdout.contains("caches       effective"), "{stdout}");
    // The theoretical peak is at the probe's core clock: 2 cores x 16 x 3 GHz.
    assert_eq!(effective["ceilings"]["peak_gflops"], 96.0);
}

#[test]
fn the_l3s_streaming_size_is_simulated_where_the_probe_measured_one() {
    let with_streaming = MACHINE.replace(
        "size_bytes = 4194304\n",
        "size_bytes = 4194304\nstreaming_size_bytes = 12582912\n",
    );
    assert_ne!(with_streaming, MACHINE);
    let file = machine_file(&with_streaming);
    let m = file.path().to_str().unwrap();
    let triad = triad();
    // 8 MiB of arrays: past where random loads miss, inside what a stream finds.
    let base = ["roofline", triad.as_str(), "-D", "N=262144", "-m", m];
    let effective = json(&base);
    assert_eq!(bytes_through(&effective, "MEM"), 0);
    assert_eq!(effective["prediction"]["limit"], "L3");
    assert_eq!(
        effective["kernel"]["caches"][2],
        "L3 12 MiB (measured streaming; random loads 4 MiB; 32 MiB advertised)"
    );
    let misses = json(&["misses", triad.as_str(), "-D", "N=1000", "-m", m]);
    let l3 = misses["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "L3");
    assert_eq!(l3.unwrap()["size_bytes"], 12 << 20);
    let machine = loopscope(&["machine", "-m", m]);
    let stdout = String::from_utf8_lossy(&machine.stdout);
    let measured = stdout.split("\nmeasured").nth(1).unwrap_or_default();
    let row = measured
        .lines()
        .find(|l| l.starts_with("L3 "))
        .unwrap_or_default();
    assert!(row.contains("4 MiB") && row.contains("12 MiB"), "{stdout}");
}

#[test]
fn misses_and_simulate_take_the_measured_sizes_unless_told_otherwise() {
    let file = machine_file(MACHINE);
    let m = file.path().to_str().unwrap();
    let triad = triad();
    let l3_size = |v: &serde_json::Value| {
        v["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == "L3")
            .map(|l| l["size_bytes"].as_u64().unwrap())
    };
    for command in ["misses", "simulate"] {
        let base = [command, triad.as_str(), "-D", "N=1000", "-m", m];
        assert_eq!(l3_size(&json(&base)), Some(4 << 20), "{command}");
        let mut args = base.to_vec();
        args.extend(["--caches", "advertised"]);
        assert_eq!(l3_size(&json(&args)), Some(32 << 20), "{command}");
    }
}

#[test]
fn probe_out_then_machine_roofline_and_misses_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.toml");
    let m = path.to_str().unwrap();
    let probe = loopscope(&["-q", "probe", "--quick", "--out", m]);
    assert!(
        probe.status.success(),
        "{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let machine = json(&["machine", "-m", m]);
    let measured = &machine["measured"];
    let triad = triad();
    let roofline = json(&["roofline", triad.as_str(), "-D", "N=1000", "-m", m]);
    let misses = json(&["misses", triad.as_str(), "-D", "N=1000", "-m", m]);

    // Sizes: each data level's simulated and modelled size is the probe's, in whole sets.
    let levels = misses["levels"].as_array().unwrap();
    let caches = roofline["kernel"]["caches"].as_array().unwrap();
    assert_eq!(levels.len(), caches.len());
    for (level, described) in levels.iter().zip(caches) {
        let name = level["name"].as_str().unwrap();
        let number: u64 = name[1..2].parse().unwrap();
        let size = level["size_bytes"].as_u64().unwrap();
        let set_bytes = level["ways"].as_u64().unwrap() * level["line_bytes"].as_u64().unwrap();
        let probed = measured["caches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["level"] == number && c["kind"] != "instruction");
        if let Some(c) = probed {
            // The last level's streaming size where the probe measured one.
            let probed = c["streaming_size_bytes"]
                .as_u64()
                .or(c["size_bytes"].as_u64())
                .unwrap();
            assert!(
                size <= probed.max(set_bytes) && probed < size + set_bytes,
                "{name}: misses {size} B, probe {probed} B"
            );
        }
        let shown = described.as_str().unwrap();
        assert!(
            shown.starts_with(&format!("{name} {}", loopscope_machine::format_bytes(size))),
            "{name}: roofline says {shown}, misses {size} B"
        );
    }

    // Clock: the roofline's theoretical peak is at the probe's core clock.
    let core_hz = measured["core_hz"].as_f64().unwrap();
    let cores = machine["cores"].as_f64().unwrap();
    let per_cycle = machine["peak_flops_per_cycle"]["dp"].as_f64().unwrap();
    let theoretical = per_cycle * cores * core_hz / 1e9;
    let peak = roofline["ceilings"]["peak_gflops"].as_f64().unwrap();
    let achieved = measured["peak_gflops"]["dp"].as_f64().unwrap();
    assert!(
        (peak - theoretical.max(achieved)).abs() < 1e-6 * peak,
        "peak {peak}, theoretical {theoretical} at {core_hz} Hz, achieved {achieved}"
    );

    // Bandwidths: every ceiling is one of the file's runs of that level.
    let runs = measured["bandwidth"].as_array().unwrap();
    for ceiling in roofline["ceilings"]["levels"].as_array().unwrap() {
        let gb = ceiling["bandwidth"]["gb_per_s"].as_f64().unwrap();
        let level = ceiling["level"].as_str().unwrap();
        let found = runs.iter().any(|r| {
            r["level"] == level
                && [&r["gb_per_s"], &r["gb_per_s_with_write_allocate"]]
                    .iter()
                    .any(|v| v.as_f64().is_some_and(|x| (x - gb).abs() < 1e-9))
        });
        assert!(found, "{level}: {gb} GB/s is not among the file's runs");
    }
}

/// The rate the prediction gives `level`'s traffic, in GB/s.
fn rate_of(v: &serde_json::Value, level: &str) -> f64 {
    v["prediction"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == level)
        .and_then(|l| l["bandwidth_gb_per_s"].as_f64())
        .unwrap_or_else(|| panic!("no {level} rate in {}", v["prediction"]))
}

#[test]
fn each_kernel_gets_the_l3_bandwidth_of_its_own_share_of_written_bytes() {
    // probe's L3 store kernel at 60 GB/s of stores, 120 counting write-allocate: 50 % written.
    let with_store = MACHINE.replace(
        "gb_per_s = 80.0\n",
        "gb_per_s = 80.0\n\n[[measured.bandwidth]]\nlevel = \"L3\"\nkernel = \"store\"\n\
         threads = 2\nworking_set_bytes = 2097152\ngb_per_s = 60.0\n\
         gb_per_s_with_write_allocate = 120.0\n",
    );
    assert_ne!(with_store, MACHINE);
    let file = machine_file(&with_store);
    let m = file.path().to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sum = dir.path().join("sum.c");
    std::fs::write(
        &sum,
        "double a[N];\ndouble s;\nfor (int i = 0; i < N; ++i)\n    s += a[i];\n",
    )
    .unwrap();
    // 1 MiB of loads alone, in the L3: the load kernel's bandwidth.
    let loads = json(&["roofline", sum.to_str().unwrap(), "-D", "N=131072", "-m", m]);
    assert_eq!(rate_of(&loads, "L3"), 80.0);
    // The triad at 2 MiB fills four lines and writes one back per eight iterations: 20 %
    // written, between the two kernels in time per byte.
    let triad = triad();
    let mixed = json(&["roofline", triad.as_str(), "-D", "N=65536", "-m", m]);
    let expected = 1.0 / (0.6 / 80.0 + 0.4 / 120.0);
    let rate = rate_of(&mixed, "L3");
    assert!((rate - expected).abs() < 1e-6, "{rate} against {expected}");
    let text = String::from_utf8_lossy(
        &loopscope(&["roofline", triad.as_str(), "-D", "N=65536", "-m", m]).stdout,
    )
    .into_owned();
    assert!(
        text.contains("L3 80 GB/s at 0 % written … 120 GB/s at 50 %"),
        "{text}"
    );
    // Memory keeps its fastest run, whatever the mix: a store run there changes nothing.
    let with_memory_store = with_store.replace(
        "gb_per_s = 20.0\n",
        "gb_per_s = 20.0\n\n[[measured.bandwidth]]\nlevel = \"MEM\"\nkernel = \"store\"\n\
         threads = 2\nworking_set_bytes = 134217728\ngb_per_s = 15.0\n\
         gb_per_s_with_write_allocate = 30.0\n",
    );
    assert_ne!(with_memory_store, with_store);
    let file = machine_file(&with_memory_store);
    let m = file.path().to_str().unwrap();
    let streamed = json(&["roofline", triad.as_str(), "-D", "N=1000000", "-m", m]);
    assert_eq!(rate_of(&streamed, "MEM"), 30.0);
    // --bandwidth overrides the level whatever its mix.
    let fixed = json(&[
        "roofline",
        triad.as_str(),
        "-D",
        "N=65536",
        "-m",
        m,
        "--bandwidth",
        "L3=70",
    ]);
    assert_eq!(rate_of(&fixed, "L3"), 70.0);
}
