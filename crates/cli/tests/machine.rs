//! `loopscope machine`, `completions`, `--version`, and the shared conventions (exit codes,
//! one-line errors) as a user meets them.

mod common;

use common::{assert_bad_input, example, loopscope, stderr, stdout};

fn json(output: &std::process::Output) -> serde_json::Value {
    assert!(output.status.success(), "stderr: {}", stderr(output));
    serde_json::from_str(&stdout(output)).expect("stdout is one JSON document")
}

#[test]
fn json_has_the_documented_fields() {
    let value = json(&loopscope(["machine", "--json"]));
    for key in [
        "format_version",
        "model",
        "cores",
        "threads_per_core",
        "tsc_hz",
        "caches",
        "isa",
        "peak_flops_per_cycle",
        "measured",
    ] {
        assert!(value.get(key).is_some(), "missing {key} in {value}");
    }
    for cache in value["caches"].as_array().unwrap() {
        for key in [
            "level",
            "kind",
            "size_bytes",
            "line_bytes",
            "ways",
            "sets",
            "shared_by",
        ] {
            assert!(cache.get(key).is_some(), "missing caches[].{key}");
        }
    }
    assert!(value["measured"].is_null());
}

#[test]
fn out_then_read_back_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    let first = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "--out".as_ref(),
        file.as_os_str(),
    ]));
    let again = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "-m".as_ref(),
        file.as_os_str(),
    ]));
    assert_eq!(first, again);
}

#[test]
fn table_lists_caches_and_peak() {
    let output = loopscope(["machine"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.contains("cache  kind"), "{text}");
    assert!(text.contains("FLOPs per cycle per core"), "{text}");
}

#[test]
fn kerncraft_import_lists_unmapped_keys_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skx.toml");
    let yml = example("machines/skylake-sp.yml");
    let output = loopscope([
        "machine".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
        "--out".as_ref(),
        file.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("keys not mapped") && err.contains("in-core model"),
        "{err}"
    );
    assert!(stdout(&output).contains("Gold 6148"));
    let back = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "-m".as_ref(),
        file.as_os_str(),
    ]));
    assert_eq!(back["caches"][2]["size_bytes"], 28_835_840);
    assert_eq!(back["measured"]["bandwidth"].as_array().unwrap().len(), 12);
    // -q silences the warning.
    let quiet = loopscope([
        "machine".as_ref(),
        "-q".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
    ]);
    assert!(stderr(&quiet).is_empty());
}

#[test]
fn bad_machine_files_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.toml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), missing.as_os_str()]),
        "absent.toml: cannot read",
    );
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), dir.path().as_os_str()]),
        "is a directory",
    );
    let future = dir.path().join("future.toml");
    std::fs::write(&future, "format_version = 7\n").unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), future.as_os_str()]),
        "format_version 7 is not supported",
    );
    let garbled = dir.path().join("garbled.toml");
    std::fs::write(&garbled, "format_version = 1\n[caches\n").unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), garbled.as_os_str()]),
        "garbled.toml:2:",
    );
    // kerncraft writes counts as floats (`cores per group: 1.0`): whole ones import, others
    // are refused at their line and column.
    let level = |cores: &str| {
        format!(
            "clock: 2 GHz\nFLOPs per cycle: {{DP: {{total: 8}}, SP: {{total: 16}}}}\n\
             memory hierarchy:\n  - level: L1\n    cache per group: {{sets: 64, \
             ways: 8, cl_size: 64}}\n    cores per group: {cores}\n"
        )
    };
    let whole = dir.path().join("whole.yml");
    std::fs::write(&whole, level("1.0")).unwrap();
    let output = loopscope(["machine".as_ref(), "--import".as_ref(), whole.as_os_str()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let half = dir.path().join("half.yml");
    std::fs::write(&half, level("1.5")).unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), half.as_os_str()]),
        "half.yml:6:22: key `memory hierarchy[L1].cores per group`: expected a whole number, \
         found `1.5`",
    );
    let broken = example("machines/broken.yml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), broken.as_os_str()]),
        "broken.yml:",
    );
    assert_bad_input(
        &loopscope(["machine".as_ref(), "-m".as_ref(), broken.as_os_str()]),
        "is not a loopscope machine file",
    );
    let unwritable = dir.path().join("no/such/dir/m.toml");
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--out".as_ref(), unwritable.as_os_str()]),
        "cannot write",
    );
}

#[test]
fn usage_errors_exit_2() {
    let output = loopscope(["machine", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(2));
    let output = loopscope(["no-such-command"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn version_help_and_completions() {
    let output = loopscope(["--version"]);
    assert!(output.status.success());
    assert!(stdout(&output).starts_with("loopscope "));
    let output = loopscope(["machine", "--help"]);
    assert!(stdout(&output).contains("Examples:"));
    let output = loopscope(["completions", "bash"]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("loopscope"));
}

/// A machine file written by `machine --out`, with `edit` applied to its text.
fn edited_machine_file(
    dir: &std::path::Path,
    name: &str,
    edit: impl Fn(String) -> String,
) -> std::path::PathBuf {
    let yml = example("machines/skylake-sp.yml");
    let path = dir.join(name);
    let output = loopscope([
        "machine".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
        "--out".as_ref(),
        path.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn text_from_machine_files_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "AMD\\u001b[31mRED\\u202eEPYC\\u0007\\n2nd";
    let path = edited_machine_file(dir.path(), "esc.toml", |text| {
        let model = text
            .lines()
            .find(|l| l.starts_with("model = "))
            .unwrap()
            .to_owned();
        text.replace(&model, &format!("model = \"{hostile}\""))
            .replace("notes = [", "notes = [\"bell\\u0007\",")
    });
    let output = loopscope(["machine".as_ref(), "-m".as_ref(), path.as_os_str()]);
    let shown = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        shown.starts_with("machine   AMD\\x1b[31mRED\\u{202e}EPYC\\x07\\n2nd"),
        "{shown}"
    );
    assert!(shown.contains("note      bell\\x07"), "{shown}");
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{shown:?}"
    );
    let yml = dir.path().join("rlo.yml");
    let kerncraft = std::fs::read_to_string(example("machines/haswell-ep.yml")).unwrap();
    let model = kerncraft
        .lines()
        .find(|l| l.starts_with("model name:"))
        .unwrap();
    std::fs::write(
        &yml,
        kerncraft.replace(model, "model name: Intel \u{202e} Xeon"),
    )
    .unwrap();
    let output = loopscope(["machine".as_ref(), "--import".as_ref(), yml.as_os_str()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("machine   Intel \\u{202e} Xeon"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_loopscope_machine_file_given_to_import_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited_machine_file(dir.path(), "skx.toml", |t| t);
    let output = loopscope(["machine".as_ref(), "--import".as_ref(), path.as_os_str()]);
    let shown = path.display();
    assert_bad_input(
        &output,
        &format!(
            "skx.toml: a loopscope machine file (TOML), not a kerncraft YAML file: give it with \
             `-m {shown}` (`loopscope machine -m {shown}` shows it)"
        ),
    );
}

/// A machine imported from kerncraft is often one the user is not on: the bandwidth it lacks
/// comes from the kerncraft file, not from a probe here.
#[test]
fn an_imported_machine_without_a_bandwidth_points_at_its_kerncraft_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited_machine_file(dir.path(), "skx.toml", |t| t);
    let kernel = example("kernels/triad.c");
    let output = loopscope([
        "roofline".as_ref(),
        kernel.as_os_str(),
        "-D".as_ref(),
        "N=100000".as_ref(),
        "-m".as_ref(),
        path.as_os_str(),
    ]);
    let yml = example("machines/skylake-sp.yml");
    assert_bad_input(
        &output,
        &format!(
            "skx.toml has no L3 bandwidth, and the kernel uses L3: the kerncraft file it was \
             imported from ({}) has no L3 benchmark: add it there and import the file again, or \
             give `--bandwidth L3=GB/s`",
            yml.display()
        ),
    );
    assert!(!stderr(&output).contains("probe"), "{}", stderr(&output));
}

/// probe flags a bandwidth a loaded machine slowed below what the others allow; roofline
/// warns once, naming the figures, when its ceilings take flagged ones, and not otherwise.
#[test]
fn roofline_warns_once_of_implausible_bandwidths_it_uses() {
    let dir = tempfile::tempdir().unwrap();
    let flag = |level: &str, threads: u32, reason: &str| {
        format!(
            "\n[[measured.implausible]]\nlevel = \"{level}\"\nkernel = \"copy\"\nthreads = \
             {threads}\nreason = \"{reason}\"\n"
        )
    };
    let used = [
        flag("L1", 2, "L1 copy on 2 threads is below 1 thread's"),
        flag("L2", 2, "L2 copy on 2 threads is below 1 thread's"),
    ]
    .concat();
    let flagged = edited_machine_file(dir.path(), "flagged.toml", |t| t + &used);
    let unused = flag("L1", 1, "L1 copy on 1 thread is below the L2's");
    let other = edited_machine_file(dir.path(), "other.toml", |t| t + &unused);
    let kernel = example("kernels/triad.c");
    let roofline = |machine: &std::path::Path| {
        loopscope([
            "roofline".as_ref(),
            kernel.as_os_str(),
            "-D".as_ref(),
            "N=1000".as_ref(),
            "-m".as_ref(),
            machine.as_os_str(),
        ])
    };
    let output = roofline(&flagged);
    assert!(output.status.success(), "{}", stderr(&output));
    let warnings: Vec<String> = stderr(&output)
        .lines()
        .filter(|l| l.contains("implausible"))
        .map(str::to_owned)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "loopscope: warning: {}: probe found bandwidths it uses implausible (L1 copy on 2 \
             threads is below 1 thread's; L2 copy on 2 threads is below 1 thread's)",
            flagged.display()
        )),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("on a quiet machine"),
        "{}",
        warnings[0]
    );
    // The ceilings take the 2-thread runs: a flagged 1-thread run is not among them.
    let output = roofline(&other);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("implausible"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn unknown_keys_and_impossible_values_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = fn(String) -> String;
    let cases: [(&str, Edit, &str); 7] = [
        (
            "typo.toml",
            |t| t.replacen("working_set_bytes", "working_set_byte", 1),
            ": unknown key `measured.bandwidth[0].working_set_byte` (did you mean \
             `working_set_bytes`?)",
        ),
        (
            "peak.toml",
            |t| t.replacen("dp = 32", "dp = 0", 1),
            "peak.toml: `peak_flops_per_cycle.dp` is 0",
        ),
        (
            "threads.toml",
            |t| t.replacen("threads = 1", "threads = 0", 1),
            "threads.toml: `measured.bandwidth[0].threads` is 0",
        ),
        (
            "level.toml",
            |t| t.replacen("level = \"L1\"", "level = \"L9\"", 1),
            "level.toml: `measured.bandwidth[0].level` is `L9`: expected one of L1, L2, L3, MEM",
        ),
        (
            "kernel.toml",
            |t| t.replacen("kernel = \"copy\"", "kernel = \"fma\"", 1),
            "kernel.toml: `measured.bandwidth[0].kernel` is `fma`",
        ),
        (
            "cores.toml",
            |t| t.replacen("cores = 1\n", "cores = 7\n", 1),
            "cores.toml: `measured.bandwidth[0].cores` is 7: more than the run's 1 threads",
        ),
        (
            "size.toml",
            |t| t.replacen("size_bytes = 32768", "size_bytes = 32000", 1),
            "size.toml: `caches[0].size_bytes` (L1d) is 32000: expected a whole number of sets \
             of 8 ways × 64 B lines, a multiple of 512 B (the file's 64 sets make 32768)",
        ),
    ];
    for (name, edit, want) in cases {
        let path = edited_machine_file(dir.path(), name, edit);
        let output = loopscope(["machine".as_ref(), "-m".as_ref(), path.as_os_str()]);
        assert_bad_input(&output, want);
    }
}

#[test]
fn kerncraft_runs_keep_their_cores_and_contradictions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Two threads per core, four cores: the 2-thread run of the one-per-core group is kept.
    let bench = "benchmarks:\n  measurements:\n    L1:\n      1:\n        cores: [1, 2]\n\
                 \x20       results: {load: [10 GB/s, 20 GB/s]}\n\
                 \x20       size per core: [16 kB, 16 kB]\n      2:\n        cores: [1, 2]\n\
                 \x20       results: {load: [11 GB/s, 22 GB/s]}\n\
                 \x20       size per core: [16 kB, 16 kB]\n";
    let head = "clock: 2 GHz\nsockets: 1\ncores per socket: 4\nthreads per core: 2\n\
                FLOPs per cycle: {DP: {total: 16}, SP: {total: 32}}\nmemory hierarchy:\n  \
                - level: L1\n    cache per group: {sets: 64, ways: 8, cl_size: 64}\n";
    let yml = dir.path().join("smt.yml");
    std::fs::write(&yml, format!("{head}{bench}")).unwrap();
    let runs: Vec<(u64, u64, f64)> = json(&loopscope([
        "machine".as_ref(),
        "--json".as_ref(),
        "--import".as_ref(),
        yml.as_os_str(),
    ]))["measured"]["bandwidth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["threads"].as_u64().unwrap(),
                b["cores"].as_u64().unwrap(),
                b["gb_per_s"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(runs, [(1, 1, 10.0), (2, 2, 20.0), (4, 2, 22.0)]);
    let size = dir.path().join("size.yml");
    std::fs::write(&size, format!("{head}    size per group: 48.00 kB\n")).unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), size.as_os_str()]),
        "size.yml: key `memory hierarchy[L1].size per group`: 48 KiB contradicts `cache per \
         group`: 64 sets × 8 ways × 64 B lines = 32 KiB",
    );
    let short = dir.path().join("short.yml");
    std::fs::write(
        &short,
        format!("{head}{}", bench.replace("[10 GB/s, 20 GB/s]", "[10 GB/s]")),
    )
    .unwrap();
    assert_bad_input(
        &loopscope(["machine".as_ref(), "--import".as_ref(), short.as_os_str()]),
        "short.yml: key `benchmarks.measurements.L1.1.results.load`: 1 entry for the 2 core \
         counts of `cores`",
    );
}
