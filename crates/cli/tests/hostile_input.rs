//! Hostile but fair input to the modelling commands: float flags that are not numbers, runs
//! that would never end, names and levels given twice, accesses outside the address space,
//! machine files with impossible figures, clap's own usage errors and characters that do not
//! print. Each must be one `loopscope: error:` line with exit 2, at once.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_bad_input, example, loopscope, stderr, stdout};

const CACHE: &str = "L1=32K:8:64";

fn triad() -> String {
    example("kernels/triad.c").display().to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A machine description whose figures are all sound; tests break one at a time.
const MACHINE: &str = r#"format_version = 1
model = "Test CPU"
vendor = ""
sockets = 1
cores = 2
threads_per_core = 1
nominal_hz = 2000000000
isa = ["sse2", "avx", "fma"]
source = "test"

[peak_flops_per_cycle]
dp = 16
sp = 32

[[caches]]
level = 1
kind = "data"
size_bytes = 32768
line_bytes = 64
ways = 8
sets = 64
shared_by = 1

[measured]
duration_s = 1.0

[[measured.bandwidth]]
level = "MEM"
kernel = "load"
threads = 1
working_set_bytes = 1000000
gb_per_s = 20.0
method = "test"
"#;

fn run(args: &[&str]) -> std::process::Output {
    loopscope(args)
}

/// Runs a kernel command; roofline gets a peak so that it never depends on this machine's.
fn kernel_command(command: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec![command];
    all.extend_from_slice(args);
    if command == "roofline" {
        all.extend_from_slice(&["--peak-gflops", "10"]);
    }
    loopscope(all)
}

#[test]
fn float_flags_must_be_finite_and_in_range() {
    let triad = triad();
    for value in ["nan", "-inf", "inf", "-0", "0", "-1", "1e10", "x"] {
        let out = run(&[
            "misses",
            &triad,
            "-D",
            "N=100",
            "--cache",
            CACHE,
            "--time-limit",
            value,
        ]);
        assert_bad_input(&out, &format!("--time-limit {value}: expected"));
    }
    let scan = run(&[
        "misses",
        &triad,
        "--scan",
        "N=64..96",
        "--cache",
        CACHE,
        "--time-limit",
        "nan",
    ]);
    assert_bad_input(&scan, "--time-limit nan: expected a finite number");
    let model = run(&[
        "roofline",
        &triad,
        "-D",
        "N=100",
        "--traffic",
        "model",
        "--time-limit",
        "-inf",
    ]);
    assert_bad_input(&model, "--time-limit -inf: expected a finite number");
    for flag in [
        "--peak-gflops",
        "--effective-gflops",
        "--add-latency-ns",
        "--measured-gflops",
    ] {
        let out = run(&["roofline", "--counts", "mem=3,flops=8", flag, "nan"]);
        assert_bad_input(&out, &format!("{flag} nan: expected a finite number"));
        let out = run(&["roofline", "--counts", "mem=3,flops=8", flag, "-2"]);
        assert_bad_input(&out, &format!("{flag} -2: expected a number above 0"));
    }
    assert_bad_input(
        &run(&["report", "--threshold", "nan"]),
        "--threshold nan: expected a finite number",
    );
}

#[test]
fn simulations_that_would_never_end_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let sum = write(
        dir.path(),
        "sum.c",
        "double s[1];\nfor (long i = 0; i < N; ++i)\n  s[0] = s[0] + 1.0;\n",
    );
    let triad = triad();
    let cases: [(&str, &str, &str, &str); 3] = [
        (
            "simulate",
            triad.as_str(),
            "N=1000000000000",
            "4000000000000 (4.0e12) accesses",
        ),
        (
            "simulate",
            sum.as_str(),
            "N=9223372036854775807",
            "(1.8e19) accesses",
        ),
        (
            "roofline",
            triad.as_str(),
            "N=1000000000000",
            "8000000000000 (8.0e12) accesses",
        ),
    ];
    for (command, kernel, define, count) in cases {
        let out = kernel_command(
            command,
            &[kernel, "-D", define, "--cache", CACHE, "--progress"],
        );
        assert_bad_input(&out, count);
        assert_bad_input(&out, "past the limit of 10000000000");
        assert_bad_input(&out, "`loopscope misses`");
    }
}

#[test]
fn a_loop_of_two_to_the_64_iterations_and_deep_empty_nests_end() {
    let dir = tempfile::tempdir().unwrap();
    let all = write(
        dir.path(),
        "all.c",
        "double a[8];\nfor (long i = M; i <= N; ++i)\n  a[0] = a[0] + 1.0;\n",
    );
    // i64::MIN..=i64::MAX is 2^64 iterations, which once wrapped to 0 and ran forever.
    let out = kernel_command(
        "simulate",
        &[
            &all,
            "-D",
            "M=-9223372036854775808",
            "-D",
            "N=9223372036854775807",
            "--cache",
            CACHE,
        ],
    );
    assert_bad_input(&out, "trip count overflows 64 bits");
    // 2^40 corners of loops holding no statement: the address check spends its budget and
    // the work limit refuses the 2^41 iterations (the check once walked every corner).
    let mut text = String::from("double a[8];\nfor (int s = 0; s < 1; ++s)\n  a[s] = 1.0;\n");
    for depth in 0..40 {
        text += &format!("for (int i{depth} = 0; i{depth} < 2; ++i{depth})\n");
    }
    text += "{}\n";
    let deep = write(dir.path(), "deep.c", &text);
    let out = kernel_command("simulate", &[&deep, "--cache", CACHE]);
    assert_bad_input(
        &out,
        "1 accesses and 2199023255551 (2.2e12) loop iterations",
    );
}

#[test]
fn a_refusal_names_the_iterations_it_counts_and_a_full_trace_line_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(
        dir.path(),
        "empty.c",
        "double a[4];\nfor (long i = 0; i < 1; ++i) {\n  a[i] = a[i] + 1.0;\n  \
         for (long j = 0; j < N; ++j)\n  {}\n}\n",
    );
    let out = kernel_command(
        "simulate",
        &[&empty, "-D", "N=10000000000", "--cache", CACHE],
    );
    assert_bad_input(
        &out,
        "takes 2 accesses and 10000000001 (1.0e10) loop iterations, 10000000003 (1.0e10) \
         steps in all, past the limit of 10000000000 steps",
    );
    // A line of exactly the cap, its line end not counted.
    let line = format!("R 40 8{}\r\n", " ".repeat(4090));
    let trace = write(dir.path(), "t.trace", &line);
    let out = run(&["simulate", "--trace", &trace, "--cache", CACHE]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn checks_and_modelled_rooflines_that_would_never_end_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let triangle = write(
        dir.path(),
        "tri.c",
        "double a[N][N];\nfor (int i = 0; i < N; ++i)\n  for (int j = 0; j <= i; ++j)\n    \
         a[i][j] = a[i][j] * 2.0;\n",
    );
    let triad = triad();
    let out = run(&[
        "misses",
        &triad,
        "-D",
        "N=1000000000000",
        "--cache",
        CACHE,
        "--check",
        "--time-limit",
        "30",
    ]);
    assert_bad_input(
        &out,
        "--check simulates it, which takes 4000000000000 accesses and 1000000000000 loop iterations",
    );
    assert_bad_input(&out, "past the simulator's limit of 10000000000");
    let out = kernel_command(
        "roofline",
        &[
            &triangle,
            "-D",
            "N=100000000",
            "--cache",
            CACHE,
            "--traffic",
            "model",
        ],
    );
    assert_bad_input(&out, "loops that bound inner loops");
    assert_bad_input(&out, "`loopscope misses`");
}

#[test]
fn store_bandwidth_errors_name_the_store_bandwidth() {
    let triad = triad();
    for bad in ["L1=fast", "L1=1+2/s", "L1=nan", "L1=1,L1=2"] {
        let out = kernel_command(
            "roofline",
            &[
                &triad,
                "-D",
                "N=1000",
                "--cache",
                CACHE,
                "--store-bandwidth",
                bad,
            ],
        );
        assert_bad_input(&out, "--store-bandwidth");
        assert!(
            !stderr(&out).contains("--bandwidth:"),
            "{bad}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_run_below_the_limit_shows_progress_when_asked() {
    let triad = triad();
    let args = [
        "simulate",
        &triad,
        "-D",
        "N=3000000",
        "--cache",
        CACHE,
        "--json",
    ];
    let mut with_progress = args.to_vec();
    with_progress.push("--progress");
    let out = run(&with_progress);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("simulating ["), "{err}");
    assert!(err.contains("/12000000"), "{err}");
    with_progress.push("-q");
    let quiet = run(&with_progress);
    assert!(quiet.status.success());
    assert_eq!(stderr(&quiet), "", "-q shows no progress");
    let plain = run(&args);
    assert!(
        !stderr(&plain).contains("simulating ["),
        "no bar without --progress off a terminal"
    );
}

#[test]
fn definitions_bases_and_levels_are_refused_by_the_rule() {
    let triad = triad();
    for (define, needle) in [
        ("=5", "-D =5: the name before `=` is missing"),
        ("1x=5", "-D 1x=5: `1x` is not a name"),
        ("a b=5", "-D 'a b=5': `a b` is not a name"),
        (
            "N=1e3",
            "-D N=1e3: the value of `N` is not a 64-bit integer",
        ),
        ("N", "-D N: expected NAME=VALUE"),
    ] {
        for command in ["simulate", "misses", "roofline"] {
            let out = kernel_command(command, &[&triad, "-D", define, "--cache", CACHE]);
            assert_bad_input(&out, needle);
        }
    }
    for command in ["simulate", "misses", "roofline"] {
        let twice = kernel_command(
            command,
            &[&triad, "-D", "N=5", "-D", "N=6", "--cache", CACHE],
        );
        assert_bad_input(&twice, "-D: `N` is given twice (N=5 and N=6)");
        let levels = kernel_command(
            command,
            &[&triad, "-D", "N=5", "--cache", "L1=32K:8:64,L1=64K:8:64"],
        );
        assert_bad_input(&levels, "cache L1: the level is named twice");
    }
    for command in ["simulate", "misses"] {
        let bases = run(&[
            command, &triad, "-D", "N=5", "--cache", CACHE, "--base", "a=0,a=8",
        ]);
        assert_bad_input(&bases, "--base: `a` is given twice");
    }
}

#[test]
fn subscripts_outside_their_arrays_are_refused_by_every_kernel_command() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = write(
        dir.path(),
        "oob.c",
        "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  b[i] = a[i-1000];\n",
    );
    let negative = "oob.c:3:10: `a[i-1000]`: subscript `i-1000` runs from -1000 to -901 with \
                    N=100, outside `a`'s extent 100 (valid subscripts 0 to 99)";
    let copy = write(
        dir.path(),
        "copyN.c",
        "double a[SZ], b[SZ];\nfor(int i=0; i<N; ++i)\n    a[i] = b[i];\n",
    );
    let past = "copyN.c:3:12: `b[i]`: subscript `i` runs from 0 to 2070 with SZ=1000, N=2071, \
                outside `b`'s extent 1000 (valid subscripts 0 to 999)";
    let shifted = write(
        dir.path(),
        "oob2.c",
        "double a[N], b[N];\nfor(int i=0; i<N; ++i)\n    a[i+N] = b[i] * 2.0;\n",
    );
    let store = "oob2.c:3:5: `a[N+i]`: subscript `N+i` runs from 1000 to 1999 with N=1000";
    for command in ["simulate", "misses", "roofline"] {
        let out = kernel_command(command, &[&kernel, "-D", "N=100", "--cache", CACHE]);
        assert_bad_input(&out, negative);
        let out = kernel_command(
            command,
            &[&copy, "-D", "SZ=1000", "-D", "N=2071", "--cache", CACHE],
        );
        assert_bad_input(&out, past);
        let out = kernel_command(command, &[&shifted, "-D", "N=1000", "--cache", CACHE]);
        assert_bad_input(&out, store);
    }
    // --measure never compiles, let alone runs, a kernel that writes past its array.
    let out = kernel_command(
        "roofline",
        &[
            &shifted,
            "-D",
            "N=1000",
            "--cache",
            CACHE,
            "--measure",
            "--cc",
            "/nonexistent/cc",
        ],
    );
    assert_bad_input(&out, store);
    let out = kernel_command(
        "simulate",
        &[&copy, "-D", "SZ=2071", "-D", "N=2071", "--cache", CACHE],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let huge = write(
        dir.path(),
        "huge.c",
        "double s[1];\nfor (long i = M; i < N; ++i)\n  s[0] = s[0] + 1.0;\n",
    );
    let out = run(&[
        "misses",
        &huge,
        "-D",
        "M=-9223372036854775808",
        "-D",
        "N=0",
        "--cache",
        CACHE,
    ]);
    assert_bad_input(&out, "more than 2^64 - 1");
    assert!(!stderr(&out).contains("isl") && !stderr(&out).contains("Invalid"));
}

#[test]
fn machine_files_are_checked_on_read_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.toml", MACHINE);
    let shown = run(&["machine", "-m", &good]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let cases = [
        ("ways = 8", "ways = 0", "`caches[0].ways` (L1d) is 0"),
        (
            "size_bytes = 32768",
            "size_bytes = 0",
            "`caches[0].size_bytes` (L1d) is 0",
        ),
        (
            "sets = 64",
            "sets = 60",
            "`caches[0].sets` (L1d) is 60: expected size_bytes / (ways × line_bytes)",
        ),
        ("cores = 2", "cores = 0", "`cores` is 0"),
        (
            "nominal_hz = 2000000000",
            "nominal_hz = 0",
            "`nominal_hz` is 0",
        ),
        (
            "gb_per_s = 20.0",
            "gb_per_s = nan",
            "`measured.bandwidth[0].gb_per_s` is NaN",
        ),
        (
            "gb_per_s = 20.0",
            "gb_per_s = 0.0",
            "`measured.bandwidth[0].gb_per_s` is 0",
        ),
        (
            "gb_per_s = 20.0",
            "gb_per_s = -5.0",
            "`measured.bandwidth[0].gb_per_s` is -5",
        ),
    ];
    for (i, (from, to, needle)) in cases.into_iter().enumerate() {
        let path = write(
            dir.path(),
            &format!("bad{i}.toml"),
            &MACHINE.replace(from, to),
        );
        assert_bad_input(&run(&["machine", "-m", &path]), needle);
        assert_bad_input(&run(&["machine", "-m", &path]), &path);
        let sim = run(&["simulate", &triad(), "-D", "N=10", "-m", &path]);
        assert_bad_input(&sim, needle);
        let roof = run(&["roofline", "--counts", "mem=3,flops=8", "-m", &path]);
        assert_bad_input(&roof, needle);
    }
}

#[test]
fn kerncraft_imports_refuse_impossible_hierarchies() {
    let dir = tempfile::tempdir().unwrap();
    let level = |name: &str, geometry: &str| {
        format!("  - level: {name}\n    cache per group: {{{geometry}}}\n")
    };
    let good = "sets: 64, ways: 8, cl_size: 64";
    let cases = [
        (
            level("L1", "sets: 64, ways: 0, cl_size: 64"),
            "cache per group.ways`: is 0",
        ),
        (
            level("L1", "sets: 64, ways: 8, cl_size: 63"),
            "is 63: expected a power of two",
        ),
        (
            level("L1", good) + &level("L1", good),
            "`memory hierarchy[L1]`: the level is listed twice",
        ),
        (
            "  - level: MEM\n    cores per group: 4\n".to_owned(),
            "no cache level",
        ),
    ];
    for (i, (levels, needle)) in cases.into_iter().enumerate() {
        let text = format!("clock: 2 GHz\nmemory hierarchy:\n{levels}");
        let path = write(dir.path(), &format!("k{i}.yml"), &text);
        assert_bad_input(&run(&["machine", "--import", &path]), needle);
    }
    let none = write(dir.path(), "none.yml", "clock: 2 GHz\nsockets: 1\n");
    assert_bad_input(
        &run(&["machine", "--import", &none]),
        "key `memory hierarchy`: no cache level",
    );
}

#[test]
fn clap_usage_errors_are_one_house_line() {
    let triad = triad();
    let cases: [(&[&str], &str); 5] = [
        (
            &["roofline", "--counts", "mem=3", "--threads", "0"],
            "--threads 0: ",
        ),
        (
            &["misses", &triad, "--jsonn"],
            "unexpected argument '--jsonn'",
        ),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (
            &["roofline", &triad, "--traffic", "exact"],
            "--traffic exact: expected one of sim, model",
        ),
        (&["simulate"], "(see `loopscope simulate --help`)"),
    ];
    for (args, needle) in cases {
        let out = run(args);
        assert_bad_input(&out, needle);
        assert!(!stderr(&out).contains("For more information"), "{args:?}");
    }
    for flag in ["--help", "--version"] {
        let out = run(&["misses", flag]);
        assert_eq!(out.status.code(), Some(0));
        assert!(!stdout(&out).is_empty() && stderr(&out).is_empty());
    }
}

#[test]
fn characters_that_do_not_print_are_escaped_in_messages() {
    let dir = tempfile::tempdir().unwrap();
    let nul = write(
        dir.path(),
        "nul.c",
        "double a[N];\0\nfor (int i = 0; i < N; ++i) a[i] = 1.0;\n",
    );
    let out = run(&["simulate", &nul, "-D", "N=4", "--cache", CACHE]);
    assert_bad_input(&out, "unexpected character `\\0`");
    let bom = run(&["simulate", &triad(), "-D", "\u{feff}N=5", "--cache", CACHE]);
    assert_bad_input(&bom, "-D \\u{feff}N=5: `\\u{feff}N` is not a name");
    let escape = run(&[
        "simulate",
        "/nonexistent/x\x1b[31m.c",
        "-D",
        "N=4",
        "--cache",
        CACHE,
    ]);
    assert_bad_input(&escape, "/nonexistent/x\\x1b[31m.c: cannot read");
    for out in [out, bom, escape] {
        let err = stderr(&out);
        assert!(!err.contains('\0') && !err.contains('\u{feff}') && !err.contains('\x1b'));
    }
}

#[test]
fn const_and_static_qualify_declarations_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    for (name, decl) in [
        ("sc.c", "static const double a[N];"),
        ("cs.c", "const static double a[N];"),
    ] {
        let kernel = write(
            dir.path(),
            name,
            &format!("{decl}\nfor(int i=0;i<N;++i) a[i]=1.0;\n"),
        );
        let out = run(&["simulate", &kernel, "-D", "N=100", "--cache", CACHE]);
        assert!(out.status.success(), "{decl}: {}", stderr(&out));
    }
}
