//! Building fixtures and running both exact back-ends on them, for the tests of this crate.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use loopscope_binary::{Image, Options, Program};
use loopscope_profile::{
    ExactOptions, ExactRun, Lcct, NodeKey, PatchOptions, record_exact, record_patch,
};

/// A fixture of this crate's `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Builds `source` with `cc -g` (`c++` for `.cc`) and `flags`; `None` (having said it skipped)
/// when the compiler is missing or fails.
pub fn compile(source: &Path, flags: &[&str], dir: &Path) -> Option<PathBuf> {
    let stem = source.file_stem().unwrap().to_str().unwrap().to_owned();
    let out = dir.join(format!("{stem}{}", flags.join("").replace(['-', '='], "")));
    let compiler = if source.extension().is_some_and(|e| e == "cc") {
        "c++"
    } else {
        "cc"
    };
    let status = Command::new(compiler)
        .args(flags)
        .arg("-g")
        .arg(source)
        .arg("-o")
        .arg(&out)
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        _ => {
            eprintln!("skipped: {compiler} could not build {}", source.display());
            None
        }
    }
}

/// The runtime library cargo built beside this test (in `deps/`) or one level up.
pub fn runtime() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        let candidate = dir.join("libloopscope_patch_runtime.so");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "libloopscope_patch_runtime.so not built next to {}",
        exe.display()
    );
}

/// One test at a time: the ptrace back-end waits for any child of the process, so two runs in
/// parallel test threads would take each other's events.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn ptrace_allowed() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope.trim() == "3" {
        eprintln!("skipped: ptrace disabled (kernel.yama.ptrace_scope = 3)");
        return false;
    }
    true
}

fn command(binary: &Path, args: &[&str]) -> Vec<OsString> {
    let mut command = vec![OsString::from(binary)];
    command.extend(args.iter().map(OsString::from));
    command
}

pub fn patched(binary: &Path, args: &[&str]) -> ExactRun {
    record_patched(binary, args, false)
}

/// [`patched`], also counting every basic block's executions.
pub fn patched_counting_blocks(binary: &Path, args: &[&str]) -> ExactRun {
    record_patched(binary, args, true)
}

fn record_patched(binary: &Path, args: &[&str], count_blocks: bool) -> ExactRun {
    let options = PatchOptions {
        runtime: runtime(),
        count_blocks,
        scratch: std::env::var_os("PATCH_SCRATCH").map(PathBuf::from),
        ..PatchOptions::default()
    };
    record_patch(&command(binary, args), &options, &AtomicBool::new(false)).unwrap()
}

pub fn traced(binary: &Path, args: &[&str]) -> ExactRun {
    record_traced(binary, args, false)
}

/// [`traced`], also counting every basic block's executions.
pub fn traced_counting_blocks(binary: &Path, args: &[&str]) -> ExactRun {
    record_traced(binary, args, true)
}

fn record_traced(binary: &Path, args: &[&str], count_blocks: bool) -> ExactRun {
    let options = ExactOptions {
        count_blocks,
        ..ExactOptions::default()
    };
    record_exact(&command(binary, args), &options, &AtomicBool::new(false)).unwrap()
}

/// Every thread's tree merged into one.
pub fn merged(run: &ExactRun) -> Lcct {
    let mut tree = Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    tree
}

/// The analysed executable, to find functions and loops by name.
pub fn analyse(binary: &Path) -> Program {
    Program::analyze(&Image::open(binary).unwrap(), &Options::default())
}

/// The node key of function `name` of the executable.
pub fn function_key(program: &Program, name: &str) -> NodeKey {
    NodeKey::Function {
        object: 0,
        address: program.function(name).unwrap().address,
    }
}

/// The node key of the outermost loop of function `name` of the executable.
pub fn outer_loop_key(program: &Program, name: &str) -> NodeKey {
    let f = program.function(name).unwrap();
    let l = f
        .loops
        .iter()
        .find(|l| l.parent.is_none())
        .unwrap_or_else(|| panic!("{name} has a loop"));
    NodeKey::Loop {
        object: 0,
        id: l.id,
    }
}
