//! `loopscope misses` and `roofline --traffic model` killed while their level processes model:
//! SIGKILL, SIGINT and SIGTERM to the parent alone leave no `model-level` process running.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A kernel whose L1 takes the model far longer than a test waits (transposed reads in a 3D
/// stencil: many references whose tag maps cross; over 20 s at N = 37 on a 2-core guest).
const SLOW_KERNEL: &str = "double a[N][N][N], b[N][N][N];\n\
for (int i = 1; i < N-1; ++i)\n\
  for (int j = 1; j < N-1; ++j)\n\
    for (int k = 1; k < N-1; ++k)\n\
      b[i][j][k] = a[i-1][j][k] + a[i+1][j][k] + a[i][j-1][k] + a[i][j+1][k] + a[i][j][k-1]\n\
                 + a[i][j][k+1] + a[k][j][i] + a[j][i][k] + a[k][i][j];\n";

/// How long the level processes may take to appear, and to end once their parent is killed.
const APPEAR_S: u64 = 60;
const END_S: u64 = 10;

/// The `/proc/PID/stat` fields after the command name: state and parent pid.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat.rsplit_once(") ")?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let parent = rest.next()?.parse().ok()?;
    Some((state, parent))
}

fn is_model_level(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"model-level"))
}

/// Whether `pid` runs (a zombie, waiting for a reaper, has ended).
fn runs(pid: u32) -> bool {
    state_and_parent(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// The running `model-level` children of `parent`.
fn level_children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            state_and_parent(pid).is_some_and(|(s, p)| p == parent && s != 'Z')
                && is_model_level(pid)
        })
        .collect()
}

/// Starts `loopscope ARGS` and waits until it has level processes; returns it and their ids.
fn start_with_children(args: &[&str]) -> (Child, Vec<u32>) {
    let mut parent = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the loopscope binary runs");
    let deadline = Instant::now() + Duration::from_secs(APPEAR_S);
    loop {
        let children = level_children(parent.id());
        if !children.is_empty() {
            return (parent, children);
        }
        if let Ok(Some(status)) = parent.try_wait() {
            panic!("loopscope {args:?} ended ({status}) before any level process was seen");
        }
        assert!(
            Instant::now() < deadline,
            "no level process of loopscope {args:?} within {APPEAR_S} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` to the parent alone, and checks that every one of `children` has ended
/// within [`END_S`] seconds; kills what is left either way.
fn kill_parent_and_check(mut parent: Child, children: &[u32], signal: Signal) -> Option<i32> {
    kill(Pid::from_raw(parent.id() as i32), signal).expect("the parent can be signalled");
    let status = parent.wait().expect("the parent is reaped");
    let deadline = Instant::now() + Duration::from_secs(END_S);
    let left = loop {
        let left: Vec<u32> = children
            .iter()
            .copied()
            .filter(|&pid| runs(pid) && is_model_level(pid))
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for &pid in &left {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "{signal} to the parent left level processes {left:?} running after {END_S} s"
    );
    status.code()
}

fn slow_kernel(dir: &Path) -> String {
    let path = dir.join("transposed.c");
    std::fs::write(&path, SLOW_KERNEL).unwrap();
    path.display().to_string()
}

fn misses_args(kernel: &str) -> Vec<&str> {
    vec![
        "misses",
        kernel,
        "-D",
        "N=37",
        "--cache",
        "L1=32K:8:64",
        "--time-limit",
        "600",
        "--model-only",
    ]
}

#[test]
fn sigkill_to_misses_leaves_no_level_process() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = slow_kernel(dir.path());
    let (parent, children) = start_with_children(&misses_args(&kernel));
    kill_parent_and_check(parent, &children, Signal::SIGKILL);
}

#[test]
fn sigint_to_misses_stops_its_level_processes_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = slow_kernel(dir.path());
    let (parent, children) = start_with_children(&misses_args(&kernel));
    let code = kill_parent_and_check(parent, &children, Signal::SIGINT);
    assert_eq!(code, Some(130), "an interrupted misses exits 130");
}

#[test]
fn sigterm_to_roofline_with_model_traffic_leaves_no_level_process() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = slow_kernel(dir.path());
    let args = [
        "roofline",
        &kernel,
        "-D",
        "N=37",
        "--cache",
        "L1=32K:8:64",
        "--traffic",
        "model",
        "--time-limit",
        "600",
        "--peak-gflops",
        "10",
    ];
    let (parent, children) = start_with_children(&args);
    kill_parent_and_check(parent, &children, Signal::SIGTERM);
}
