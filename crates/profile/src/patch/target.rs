//! Whether the patch back-end can run a program at all, decided before it is started: the
//! runtime is loaded with `LD_PRELOAD` into the executable named, so a static executable, a
//! set-user-ID one, a script or a launcher that runs the real program (`env ./app`,
//! `numactl ... ./app`) would run to the end unmeasured.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::ProfileError;

/// Programs whose job is to start another one; their own code is not what the user measures.
const LAUNCHERS: &[&str] = &[
    "env",
    "numactl",
    "taskset",
    "time",
    "nice",
    "ionice",
    "nohup",
    "stdbuf",
    "chrt",
    "timeout",
    "setarch",
    "setsid",
    "unbuffer",
    "xargs",
    "sudo",
    "doas",
    "valgrind",
    "perf",
    "mpirun",
    "mpiexec",
    "srun",
    "aprun",
    "jsrun",
    "likwid-pin",
    "likwid-perfctr",
    "hwloc-bind",
    "strace",
    "ltrace",
    "gdb",
    "loopscope",
];

/// Bytes read from the start of the program: the ELF header and, usually, its program headers
/// (when they lie beyond, the program is not refused here and the analysis reads it whole).
const HEAD_BYTES: usize = 4096;

/// Refuses, with one line naming `program` (the file `command` resolved to) and why, a
/// program the patch back-end would run without measuring it.
pub fn refuse_unpatchable(program: &Path, command: &str) -> Result<(), ProfileError> {
    let refuse = |what: String| {
        Err(ProfileError::Command {
            command: program.display().to_string(),
            what,
        })
    };
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if LAUNCHERS.contains(&name.as_str()) {
        return refuse(format!(
            "a launcher: the patch back-end needs the executable itself, and `{command}` would \
             start the program uninstrumented; put loopscope after the launcher \
             ({command} ... loopscope record --backend patch -- PROGRAM ARGS), or use \
             --backend sample, which follows it"
        ));
    }
    let head = read_head(program).map_err(|source| ProfileError::Io {
        path: program.to_owned(),
        action: "read",
        source,
    })?;
    if let Some(interpreter) = script_interpreter(&head) {
        return refuse(format!(
            "a script ({interpreter}), not an executable: the patch back-end needs the \
             executable itself; run loopscope on the program the script starts, or use \
             --backend sample, which follows scripts"
        ));
    }
    if loopscope_binary::has_interpreter(&head) == Some(false) {
        return refuse(
            "statically linked: the patch back-end loads its runtime with LD_PRELOAD, which a \
             static executable ignores; use --backend ptrace (exact, slower) or sample"
                .into(),
        );
    }
    if runs_in_secure_mode(program) {
        return refuse(
            "set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it, so \
             the patch back-end cannot load its runtime; use --backend sample"
                .into(),
        );
    }
    Ok(())
}

fn read_head(program: &Path) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::fs::File::open(program)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// The `#!` line of a script (at most 200 bytes of it), `None` for any other file.
fn script_interpreter(head: &[u8]) -> Option<String> {
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    Some(format!(
        "#!{}",
        String::from_utf8_lossy(&line[..end.min(200)]).trim()
    ))
}

/// Whether running `program` would switch the dynamic loader to secure execution (a set-ID
/// bit whose owner is not who runs it), where it ignores `LD_PRELOAD`.
fn runs_in_secure_mode(program: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(program) else {
        return false;
    };
    // SAFETY: getuid and getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mode = meta.mode();
    (mode & libc::S_ISUID != 0 && meta.uid() != uid)
        || (mode & libc::S_ISGID != 0 && meta.gid() != gid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_dynamic_executable_passes_and_its_loader_is_seen() {
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            loopscope_binary::has_interpreter(&read_head(&exe).unwrap()),
            Some(true)
        );
        assert!(refuse_unpatchable(&exe, "test").is_ok());
    }

    #[test]
    fn launchers_and_scripts_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("env");
        std::fs::copy(std::env::current_exe().unwrap(), &env).unwrap();
        let err = refuse_unpatchable(&env, "env").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: a launcher", env.display())),
            "{err}"
        );
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh\nexec ./app\n").unwrap();
        let err = refuse_unpatchable(&script, "./run.sh")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a script (#!/bin/sh)"), "{err}");
    }

    #[test]
    fn a_static_executable_is_refused_and_a_dynamic_build_of_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("main.c");
        std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
        for (flags, refused) in [(&["-static"][..], true), (&[][..], false)] {
            let program = dir.path().join(format!("main{}", flags.concat()));
            let built = std::process::Command::new("cc")
                .args(["-O1", "-g"])
                .args(flags)
                .arg("-o")
                .arg(&program)
                .arg(&source)
                .status();
            if !built.is_ok_and(|s| s.success()) {
                eprintln!(
                    "skipped: no working `cc {}` to build a test program",
                    flags.join(" ")
                );
                return;
            }
            let verdict = refuse_unpatchable(&program, "./main");
            assert_eq!(verdict.is_err(), refused, "{flags:?}: {verdict:?}");
            if let Err(e) = verdict {
                let text = e.to_string();
                assert!(text.contains("main-static: statically linked"), "{text}");
            }
        }
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_without_panicking(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..600),
            script in any::<bool>(),
        ) {
            if script && bytes.len() >= 2 {
                bytes[..2].copy_from_slice(b"#!");
            }
            let _ = script_interpreter(&bytes);
        }
    }
}
