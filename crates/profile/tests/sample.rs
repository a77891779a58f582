//! The sampling back-end on real programs: C fixtures compiled at test time, run under
//! `record_sampled`, their samples attributed with the fixtures' own symbol tables.
//!
//! Fixtures spin for a stated CPU time of their thread (not a stated amount of work, nor a
//! wall time): the number of samples is then the same on a faster or slower machine, and when
//! other tests compete for the cores.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loopscope_profile::{
    ProfileError, Sample, SampleOptions, SampledRun, TargetExit, record_sampled,
};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A busy loop of `spin(ms)` (milliseconds of the calling thread's CPU time) that any
/// fixture can call: a floating-point dependency chain, so every iteration costs the same
/// whatever the compiler does with it.
const SPIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
__attribute__((noinline)) double chain(long n, double c) {
    double s = 0;
    for (long i = 0; i < n; i++) s = s * c + (double)i;
    return s;
}
__attribute__((noinline)) double spin(double ms) {
    double s = 0, end = now_ms() + ms;
    while (now_ms() < end) s += chain(20000, 0.999999);
    return s;
}
"#;

fn compile(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, format!("{SPIN}\n{source}")).unwrap();
    let out = std::process::Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .arg("-lpthread")
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

const O1: &[&str] = &["-O1", "-g"];

/// Records `command`, or says why the test is skipped when this machine refuses perf events.
fn record(command: &[&OsString], options: &SampleOptions) -> Option<SampledRun> {
    let command: Vec<OsString> = command.iter().map(|&arg| arg.clone()).collect();
    match record_sampled(&command, options, &AtomicBool::new(false)) {
        Ok(run) => Some(run),
        Err(ProfileError::PerfUnavailable { what }) => {
            eprintln!("skipped: perf events unavailable here: {what}");
            None
        }
        Err(error) => panic!("record_sampled failed: {error}"),
    }
}

fn fast() -> SampleOptions {
    SampleOptions {
        frequency_hz: 4000,
        ..SampleOptions::default()
    }
}

/// The functions of one executable, by link-time address.
struct Symbols {
    path: String,
    functions: BTreeMap<u64, (u64, String)>,
    /// (file offset, size, link address) of each segment.
    segments: Vec<(u64, u64, u64)>,
}

impl Symbols {
    fn read(path: &Path) -> Symbols {
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let functions = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), (s.size(), s.name().unwrap().to_string())))
            .collect();
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        Symbols {
            path: path.to_string_lossy().into_owned(),
            functions,
            segments,
        }
    }

    /// The fixture function holding run-time `address` of `sample`'s process, if any.
    fn function(&self, run: &SampledRun, sample: &Sample, address: u64) -> Option<&str> {
        let mapping = run.mapping_at(sample.pid, sample.time_ns, address)?;
        if mapping.path != self.path {
            return None;
        }
        let offset = address - mapping.start + mapping.file_offset;
        let &(seg_offset, _, seg_address) = self
            .segments
            .iter()
            .find(|&&(o, size, _)| o <= offset && offset < o + size)?;
        let svma = offset - seg_offset + seg_address;
        let (&start, (size, name)) = self.functions.range(..=svma).next_back()?;
        (svma < start + size).then_some(name.as_str())
    }

    /// The function of the sampled IP, then of each return address (looked up one byte
    /// back, inside the call).
    fn stack(&self, run: &SampledRun, sample: &Sample) -> Vec<Option<String>> {
        sample
            .stack
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let a = if i == 0 { a } else { a - 1 };
                self.function(run, sample, a).map(str::to_string)
            })
            .collect()
    }
}

fn share(count: usize, total: usize) -> f64 {
    count as f64 / total.max(1) as f64
}

const SHARES: &str = r#"
__attribute__((noinline)) double heavy(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s = s * 0.999999 + (double)i;
    return s;
}
__attribute__((noinline)) double light(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s = s * 0.999998 + (double)i;
    return s;
}
int main(int argc, char **argv) {
    double end = now_ms() + atof(argv[1]), total = 0;
    while (now_ms() < end) {
        total += heavy(3 * 20000);
        total += light(20000);
    }
    printf("%g\n", total);
    return 0;
}
"#;

/// Counts the samples whose IP is in `heavy` and in `light`, and those of them whose stack
/// has `main` as a caller.
fn heavy_light(run: &SampledRun, symbols: &Symbols) -> (usize, usize, usize) {
    let (mut heavy, mut light, mut under_main) = (0, 0, 0);
    for sample in &run.samples {
        let stack = symbols.stack(run, sample);
        match stack[0].as_deref() {
            Some("heavy") => heavy += 1,
            Some("light") => light += 1,
            _ => continue,
        }
        if stack[1..].iter().any(|f| f.as_deref() == Some("main")) {
            under_main += 1;
        }
    }
    (heavy, light, under_main)
}

#[test]
fn a_function_doing_three_times_the_work_gets_three_quarters_of_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "shares", SHARES, O1);
    let Some(run) = record(&[&exe.clone().into_os_string(), &"500".into()], &fast()) else {
        return;
    };
    assert_eq!(run.exit, TargetExit::Exited(0));
    let symbols = Symbols::read(&exe);
    let (heavy, light, under_main) = heavy_light(&run, &symbols);
    let total = heavy + light;
    assert!(
        total >= 500,
        "only {total} samples in heavy and light ({} in all)",
        run.samples.len()
    );
    let heavy_share = share(heavy, total);
    eprintln!("heavy {heavy}, light {light}: heavy's share {heavy_share:.3}");
    assert!(
        (heavy_share - 0.75).abs() <= 0.05,
        "heavy {heavy} light {light}: {heavy_share:.3}"
    );
    assert!(
        share(under_main, total) >= 0.95,
        "{under_main} of {total} stacks reach main"
    );
    assert_eq!(run.processes, 1);
    assert!(
        run.startup_ns > 0 && run.wall_ns >= 400_000_000,
        "{} {}",
        run.startup_ns,
        run.wall_ns
    );
}

#[test]
fn stacks_unwind_through_optimised_code_without_frame_pointers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(
        dir.path(),
        "o2",
        SHARES,
        &["-O2", "-fomit-frame-pointer", "-g"],
    );
    let Some(run) = record(&[&exe.clone().into_os_string(), &"300".into()], &fast()) else {
        return;
    };
    let symbols = Symbols::read(&exe);
    let (heavy, light, under_main) = heavy_light(&run, &symbols);
    let total = heavy + light;
    assert!(total >= 300, "only {total} samples in heavy and light");
    assert!(
        share(under_main, total) >= 0.95,
        "{under_main} of {total} stacks reach main"
    );
    // Past main the walk goes on into libc's start-up code and ends there.
    let complete = run.samples.iter().filter(|s| !s.truncated).count();
    assert!(
        share(complete, run.samples.len()) >= 0.95,
        "{complete} of {} complete",
        run.samples.len()
    );
}

#[test]
fn a_forked_child_is_sampled_and_unwound_too() {
    let source = r#"
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t child = fork();
    double s = spin(atof(argv[1]));
    if (child == 0) _exit(s == 0.5);
    waitpid(child, 0, 0);
    return s == 0.5;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "fork", source, O1);
    let Some(run) = record(&[&exe.clone().into_os_string(), &"300".into()], &fast()) else {
        return;
    };
    assert_eq!(run.exit, TargetExit::Exited(0));
    assert_eq!(run.processes, 2);
    let symbols = Symbols::read(&exe);
    let mut per_pid: HashMap<u32, (usize, usize)> = HashMap::new();
    for sample in &run.samples {
        let stack = symbols.stack(&run, sample);
        let entry = per_pid.entry(sample.pid).or_default();
        entry.0 += 1;
        if stack.iter().any(|f| f.as_deref() == Some("spin"))
            && stack.iter().any(|f| f.as_deref() == Some("main"))
        {
            entry.1 += 1;
        }
    }
    assert_eq!(per_pid.len(), 2, "{per_pid:?}");
    let total = run.samples.len();
    for (pid, (samples, in_spin)) in &per_pid {
        assert!(
            share(*samples, total) >= 0.2,
            "pid {pid}: {samples} of {total} samples"
        );
        assert!(
            share(*in_spin, *samples) >= 0.9,
            "pid {pid}: {in_spin} of {samples} in spin under main"
        );
    }
}

#[test]
fn threads_are_sampled_each_with_their_own_stacks() {
    let source = r#"
#include <pthread.h>
static double ms;
__attribute__((noinline)) void *worker(void *arg) {
    static double sink;
    sink += spin(ms);
    return arg;
}
int main(int argc, char **argv) {
    ms = atof(argv[1]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "threads", source, O1);
    let Some(run) = record(&[&exe.clone().into_os_string(), &"300".into()], &fast()) else {
        return;
    };
    assert_eq!(run.exit, TargetExit::Exited(0));
    assert_eq!(run.processes, 1);
    assert!(run.threads >= 3, "{} threads", run.threads);
    let symbols = Symbols::read(&exe);
    let mut per_tid: HashMap<u32, usize> = HashMap::new();
    for sample in &run.samples {
        let stack = symbols.stack(&run, sample);
        if stack.iter().any(|f| f.as_deref() == Some("worker")) {
            *per_tid.entry(sample.tid).or_default() += 1;
        }
    }
    let total = run.samples.len();
    assert_eq!(per_tid.len(), 2, "{per_tid:?}");
    for (tid, samples) in &per_tid {
        assert_ne!(*tid, run.samples[0].pid, "the main thread only waits");
        assert!(
            share(*samples, total) >= 0.3,
            "tid {tid}: {samples} of {total}"
        );
    }
}

#[test]
fn a_command_that_does_not_exist_is_a_command_error() {
    let options = SampleOptions {
        search_path: Some("/usr/bin:/bin".into()),
        ..SampleOptions::default()
    };
    let command = vec![OsString::from("loopscope-no-such-command-xyz")];
    let error = record_sampled(&command, &options, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(error, ProfileError::Command { .. }), "{error}");
    assert!(error.is_bad_input());
    let error = record_sampled(&[], &options, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(error, ProfileError::Command { .. }), "{error}");
}

#[test]
fn a_target_that_fails_or_is_killed_keeps_its_samples_and_its_exit() {
    let source = r#"
#include <signal.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    double s = spin(100);
    if (strcmp(argv[1], "kill") == 0) kill(getpid(), SIGKILL);
    return 3 + (s == 0.5);
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "ends", source, O1);
    let exe = exe.into_os_string();
    let Some(failed) = record(&[&exe, &"exit".into()], &fast()) else {
        return;
    };
    assert_eq!(failed.exit, TargetExit::Exited(3));
    assert!(
        failed.samples.len() >= 50,
        "{} samples",
        failed.samples.len()
    );
    let killed = record(&[&exe, &"kill".into()], &fast()).unwrap();
    assert_eq!(killed.exit, TargetExit::Signaled(libc::SIGKILL));
    assert!(
        killed.samples.len() >= 50,
        "{} samples",
        killed.samples.len()
    );
}

#[test]
fn a_stop_request_interrupts_the_target_and_keeps_what_was_recorded() {
    let source = "int main(int argc, char **argv) { return spin(atof(argv[1])) == 0.5; }";
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "long", source, O1);
    let command = vec![exe.into_os_string(), "60000".into()];
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        record_sampled(&command, &fast(), &stop)
    });
    let run = match result {
        Ok(run) => run,
        Err(ProfileError::PerfUnavailable { what }) => {
            eprintln!("skipped: perf events unavailable here: {what}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the target was not stopped"
    );
    assert_eq!(run.exit, TargetExit::Signaled(libc::SIGINT));
    assert!(!run.samples.is_empty());
}

#[test]
fn a_target_that_ignores_the_interruption_is_left_running_and_reported_detached() {
    let source = r#"
#include <signal.h>
int main(int argc, char **argv) {
    signal(SIGINT, SIG_IGN);
    return spin(atof(argv[1])) == 0.5;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "stubborn", source, O1);
    let command = vec![exe.into_os_string(), "60000".into()];
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        record_sampled(&command, &fast(), &stop)
    });
    let run = match result {
        Ok(run) => run,
        Err(ProfileError::PerfUnavailable { what }) => {
            eprintln!("skipped: perf events unavailable here: {what}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    assert_eq!(run.exit, TargetExit::Detached);
    let pid = run
        .samples
        .first()
        .expect("samples before the interruption")
        .pid as libc::pid_t;
    // SAFETY: `pid` is this process's unreaped child (record_sampled left it running).
    unsafe {
        assert_eq!(
            libc::kill(pid, libc::SIGKILL),
            0,
            "the target is still running"
        );
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

#[test]
fn an_exec_in_the_same_process_starts_a_new_address_space() {
    let source = "int main(int argc, char **argv) { return spin(atof(argv[1])) == 0.5; }";
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "after_env", source, O1);
    let env = OsString::from("/usr/bin/env");
    let Some(run) = record(
        &[&env, &exe.clone().into_os_string(), &"300".into()],
        &fast(),
    ) else {
        return;
    };
    assert_eq!(run.exit, TargetExit::Exited(0));
    let root = run.samples.first().expect("samples").pid;
    let execs: Vec<&str> = run
        .execs
        .iter()
        .filter(|e| e.pid == root)
        .map(|e| e.command.as_str())
        .collect();
    assert_eq!(execs, ["env", "after_env"]);
    let symbols = Symbols::read(&exe);
    let in_spin = run
        .samples
        .iter()
        .filter(|s| {
            symbols
                .stack(&run, s)
                .iter()
                .any(|f| f.as_deref() == Some("spin"))
        })
        .count();
    assert!(
        share(in_spin, run.samples.len()) >= 0.9,
        "{in_spin} of {}",
        run.samples.len()
    );
}

#[test]
fn the_run_records_its_event_and_serialises() {
    let source = "int main(int argc, char **argv) { return spin(atof(argv[1])) == 0.5; }";
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "plain", source, O1);
    let Some(run) = record(
        &[&exe.into_os_string(), &"200".into()],
        &SampleOptions::default(),
    ) else {
        return;
    };
    if run.event == loopscope_profile::SampledEvent::CpuClock {
        assert_eq!(
            run.period,
            1_000_000_000 / loopscope_profile::DEFAULT_FREQUENCY_HZ
        );
        assert_eq!(run.sampled_total, run.period * run.samples.len() as u64);
    }
    assert!(run.mappings.iter().any(|m| m.path.ends_with("/plain")));
    assert!(run.mappings.iter().any(|m| m.path.contains("libc")));
    // The dynamic loader is mapped by the kernel during the exec, before the target runs.
    assert!(run.mappings.iter().any(|m| m.path.contains("ld-linux")));
    let json = serde_json::to_string(&run).unwrap();
    let back: SampledRun = serde_json::from_str(&json).unwrap();
    assert_eq!(back, run);
}
