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
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .output()
        .expect("the loopscope binary runs")
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
