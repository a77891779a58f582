//! Helpers shared by the CLI tests: run the real binary and look at what it printed.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `loopscope` with these arguments.
pub fn loopscope<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_loopscope"));
    command.args(args);
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the loopscope binary runs");
    let finished = watchdog(child.id(), format!("{command:?}"));
    let output = child.wait_with_output().expect("the loopscope binary runs");
    finished.store(true, std::sync::atomic::Ordering::SeqCst);
    output
}

/// No run in these tests takes minutes: a run that hangs is killed, so that the test fails
/// naming it instead of the whole suite waiting.
fn watchdog(pid: u32, what: String) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(300);
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = finished.clone();
    std::thread::spawn(move || {
        let began = std::time::Instant::now();
        while began.elapsed() < LIMIT {
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("{what} ran past {} s: killed", LIMIT.as_secs());
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    finished
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts a bad-input failure: exit code 2, one error line on stderr containing `needle`, and
/// no panic.
pub fn assert_bad_input(output: &Output, needle: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("loopscope: error: "), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file under `examples/`.
pub fn example(relative: &str) -> PathBuf {
    repo_root().join("examples").join(relative)
}

/// `source` compiled with `cc` and `flags` into `out`, or `None` (having said it skipped) when
/// there is no compiler or it fails. The flags follow the source so that libraries (`-lm`) link.
pub fn build_c(source: &Path, flags: &[&str], out: PathBuf) -> Option<PathBuf> {
    let ok = Command::new("cc")
        .arg(source)
        .arg("-o")
        .arg(&out)
        .args(flags)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let name = source.file_name().unwrap_or_default().to_string_lossy();
        eprintln!("skipped: cc {} could not build {name}", flags.join(" "));
    }
    ok.then_some(out)
}

/// A C fixture of the profile crate compiled with `cc -O1 -g` and `extra` flags into `dir`, or
/// `None` (having said it skipped) when there is no compiler.
pub fn compile_profile_fixture(name: &str, dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let source = repo_root().join("crates/profile/tests/fixtures").join(name);
    build_c(
        &source,
        &optimised(extra),
        dir.join(name.trim_end_matches(".c")),
    )
}

/// `-O1 -g` then `extra`.
fn optimised<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [&["-O1", "-g"][..], extra].concat()
}

/// Whether this process may trace its children (`kernel.yama.ptrace_scope` below 3); says it
/// skipped when not.
pub fn ptrace_allowed() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope.trim() == "3" {
        eprintln!("skipped: ptrace disabled (kernel.yama.ptrace_scope = 3)");
        return false;
    }
    true
}

/// Whether perf events can be opened here (`perf_event_paranoid` 2 or less); says it skipped
/// when not.
pub fn perf_events_allowed() -> bool {
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let allowed = level.trim().parse::<i32>().is_ok_and(|l| l <= 2);
    if !allowed {
        eprintln!(
            "skipped: perf_event_paranoid is {} (needs 2 or less)",
            level.trim()
        );
    }
    allowed
}

/// A C fixture of the CLI tests (`crates/cli/tests/fixtures/NAME`) compiled with `cc -O1 -g`
/// into `dir`, or `None` (having said it skipped) when there is no compiler.
pub fn compile_fixture(name: &str, dir: &Path) -> Option<PathBuf> {
    compile_fixture_with(name, dir, &[])
}

/// [`compile_fixture`] with `extra` flags after `-O1 -g`.
pub fn compile_fixture_with(name: &str, dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    build_c(
        &source,
        &optimised(extra),
        dir.join(name.trim_end_matches(".c")),
    )
}
