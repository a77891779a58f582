//! Measures what the sampling back-end costs a target: a C program doing a fixed amount of
//! work (about two seconds here) is run natively and under `record_sampled`, alternately, and
//! the medians of the wall times and of the target's CPU time (user + system, from
//! `getrusage`) are compared; the CPU times do not depend on what else the machine runs. Also
//! prints the recorder's own CPU time, the start-up cost and what the samples look like.
//!
//! `cargo run --release -p loopscope-profile --example sample_overhead [RUNS] [HZ]`

use std::ffi::OsString;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use loopscope_profile::{SampleOptions, record_sampled};

const FIXTURE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) double chain(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s = s * 0.999999 + (double)i;
    return s;
}
__attribute__((noinline)) double outer(long n) { return chain(n) + 1; }
int main(int argc, char **argv) {
    long rounds = atol(argv[1]);
    double total = 0;
    for (long r = 0; r < rounds; r++) total += outer(1000000 + (r & 1));
    printf("%g\n", total);
    return 0;
}
"#;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// User + system seconds of `who` (RUSAGE_SELF or RUSAGE_CHILDREN) so far.
fn cpu_s(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    unsafe { libc::getrusage(who, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Wall and CPU seconds of `run`, CPU of the children it waited for and of this process.
fn measured(run: impl FnOnce()) -> (f64, f64, f64) {
    let (children, own, start) = (
        cpu_s(libc::RUSAGE_CHILDREN),
        cpu_s(libc::RUSAGE_SELF),
        Instant::now(),
    );
    run();
    let wall = start.elapsed().as_secs_f64();
    (
        wall,
        cpu_s(libc::RUSAGE_CHILDREN) - children,
        cpu_s(libc::RUSAGE_SELF) - own,
    )
}

fn native(exe: &std::path::Path, rounds: u64) -> (f64, f64, f64) {
    measured(|| {
        let status = Command::new(exe)
            .arg(rounds.to_string())
            .stdout(std::process::Stdio::null())
            .status()
            .expect("fixture runs");
        assert!(status.success());
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let options = SampleOptions {
        frequency_hz: args
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or(loopscope_profile::DEFAULT_FREQUENCY_HZ),
        ..SampleOptions::default()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("work.c");
    let exe = dir.path().join("work");
    std::fs::write(&source, FIXTURE).expect("write fixture");
    let cc = Command::new("cc")
        .args(["-O1", "-g", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(cc.success());
    // About two seconds of work, whatever this machine's speed.
    let probe_rounds = 200;
    let rounds = ((2.0 / native(&exe, probe_rounds).1) * probe_rounds as f64) as u64;
    let command: Vec<OsString> = vec![exe.clone().into(), rounds.to_string().into()];
    let (mut natives, mut recorded, mut startups) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        natives.push(native(&exe, rounds));
        let mut run = None;
        recorded.push(measured(|| {
            run = Some(
                record_sampled(&command, &options, &AtomicBool::new(false)).expect("recording"),
            );
        }));
        let run = run.expect("recorded");
        startups.push(run.startup_ns as f64 / 1e6);
        last = Some(run);
    }
    let run = last.expect("at least one run");
    let truncated = run.samples.iter().filter(|s| s.truncated).count();
    let depth: usize = run.samples.iter().map(|s| s.stack.len()).sum();
    println!(
        "event {} at {} Hz, period {} {}",
        run.event.name(),
        options.frequency_hz,
        run.period,
        run.event.unit()
    );
    println!(
        "last run: {} samples, {} lost, {truncated} truncated, mean depth {:.1}, {} mappings, buffer {} KiB/CPU",
        run.samples.len(),
        run.lost_samples,
        depth as f64 / run.samples.len().max(1) as f64,
        run.mappings.len(),
        run.buffer_bytes / 1024
    );
    let column = |runs: &[(f64, f64, f64)], i: usize| {
        median(runs.iter().map(|r| [r.0, r.1, r.2][i]).collect())
    };
    let (n_wall, n_cpu) = (column(&natives, 0), column(&natives, 1));
    let (r_wall, r_cpu, r_own) = (
        column(&recorded, 0),
        column(&recorded, 1),
        column(&recorded, 2),
    );
    println!(
        "wall: native {n_wall:.3} s, recorded {r_wall:.3} s (call to return), ratio {:.4}",
        r_wall / n_wall
    );
    println!(
        "target CPU: native {n_cpu:.3} s, recorded {r_cpu:.3} s, ratio {:.4}",
        r_cpu / n_cpu
    );
    println!("recorder's own CPU {r_own:.3} s per run");
    println!("start-up (call to exec) median {:.2} ms", median(startups));
}
