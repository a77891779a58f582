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

/// Bytes read from the start of the program: the ELF header and, usually, its program headers.
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
    if elf_has_interpreter(&head) == Some(false) {
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

/// The `#!` line of a script, without the `#!`.
fn script_interpreter(head: &[u8]) -> Option<String> {
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    Some(format!(
        "#!{}",
        String::from_utf8_lossy(&line[..end.min(200)]).trim()
    ))
}

/// Whether a 64-bit little-endian ELF file whose first bytes are `head` names a program
/// interpreter (`PT_INTERP`, the dynamic loader): `None` when `head` is not such a file or its
/// program headers lie beyond `head` (then the analysis says what is wrong with it).
fn elf_has_interpreter(head: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(head.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(head.get(at..at + 8)?.try_into().ok()?));
    let table = usize::try_from(u64_at(0x20)?).ok()?;
    let entry_bytes = usize::from(u16_at(0x36)?);
    let entries = usize::from(u16_at(0x38)?);
    if entry_bytes < 4 {
        return None;
    }
    let mut found = false;
    for i in 0..entries {
        let at = table.checked_add(i.checked_mul(entry_bytes)?)?;
        found |= u32_at(at)? == PT_INTERP;
    }
    Some(found)
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
        assert_eq!(elf_has_interpreter(&read_head(&exe).unwrap()), Some(true));
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
    fn an_elf_without_a_loader_is_static() {
        let mut head = vec![0u8; 0x40 + 2 * 56];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        head[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        head[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        head[0x40..0x44].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        head[0x40 + 56..0x44 + 56].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(elf_has_interpreter(&head), Some(false));
        head[0x40 + 56..0x44 + 56].copy_from_slice(&3u32.to_le_bytes()); // PT_INTERP
        assert_eq!(elf_has_interpreter(&head), Some(true));
        assert_eq!(elf_has_interpreter(&head[..0x50]), None, "table cut short");
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_without_panicking(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..600),
            elf in any::<bool>(),
        ) {
            if elf && bytes.len() >= 6 {
                bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
            }
            let _ = elf_has_interpreter(&bytes);
            let _ = script_interpreter(&bytes);
        }
    }
}
