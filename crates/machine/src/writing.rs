//! Writing result files atomically, by one set of rules for every file loopscope writes.
//!
//! - Readers see the old file or the new one, never a part: the bytes go to a temporary file
//!   beside the target, are synced, and the temporary file is renamed over the target.
//! - Only regular files are written. A directory, FIFO, device node or socket at the target is
//!   refused, never replaced.
//! - A symbolic link is written through, deliberately: the file the link points to (after every
//!   link in a chain) is replaced, and the link stays a link. A dangling link creates its target.
//! - An existing file keeps its permission bits exactly (a 600 file stays 600; set-id bits are
//!   dropped, never added) and its owner and group where the writer may set them (as root);
//!   otherwise the new file belongs to the writer, still with the old mode.
//! - A partial result never replaces a complete one: [`write_measured_machine_file`] writes it
//!   beside the target, at [`partial_path`].

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::file::{read_machine_file, write_machine_file};
use crate::{Machine, MachineError};

/// How many symbolic links a target may pass through (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Writes `contents` to `path` atomically, by the rules of this module.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), MachineError> {
    write_atomically_with(path, |out| out.write_all(contents))
}

/// Writes what `write` produces to `path` atomically, by the rules of this module; `write` gets
/// a buffered writer into the temporary file.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), MachineError> {
    let io = |source: std::io::Error| MachineError::Io {
        path: path.to_owned(),
        action: "cannot write",
        source,
    };
    let (target, existing) = target_of(path)?;
    let tmp = temporary_path(&target);
    let result = write_temporary(&tmp, existing.as_ref(), write)
        .and_then(|()| std::fs::rename(&tmp, &target));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)?;
    // The rename is durable once the directory is; a failure here loses nothing already written.
    if let Ok(dir) = std::fs::File::open(parent_dir(&target)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Checks that `path` may be written by these rules before a long run that ends by writing
/// it, so a bad target is refused before the run instead of after it: the target (through any
/// links) is a regular file this process may write, or nothing yet, and its directory takes a
/// new file (made with `O_EXCL` under a random name, then removed). Returns the target. A FIFO
/// is never opened, so never blocked on.
pub fn check_write_target(path: &Path) -> Result<PathBuf, MachineError> {
    let (target, _) = target_of(path)?;
    let dir = parent_dir(&target);
    tempfile::NamedTempFile::new_in(dir)
        .map(drop)
        .map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    format!("directory {} does not exist", dir.display())
                }
                std::io::ErrorKind::PermissionDenied => {
                    format!("{} is not writable", dir.display())
                }
                std::io::ErrorKind::NotADirectory => {
                    format!("{} is not a directory", dir.display())
                }
                _ => format!("{}: {e}", dir.display()),
            };
            MachineError::Invalid {
                path: path.to_owned(),
                message: format!("cannot write there: {why}"),
            }
        })?;
    Ok(target)
}

/// The file `path` leads to, and its metadata when it exists; an error when it is not a
/// regular file, or is one this process may not write (renaming over it would otherwise
/// replace another user's file with one the writer owns).
fn target_of(path: &Path) -> Result<(PathBuf, Option<std::fs::Metadata>), MachineError> {
    let io = |source: std::io::Error| MachineError::Io {
        path: path.to_owned(),
        action: "cannot write",
        source,
    };
    let target = resolve_links(path).map_err(io)?;
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_file() => {
            // Opened for writing without truncating: the permission check of the kernel itself.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .map_err(io)?;
            Ok((target, Some(meta)))
        }
        Ok(meta) => Err(not_regular(path, &target, &meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((target, None)),
        Err(e) => Err(io(e)),
    }
}

/// Where a partial result goes when the target holds a complete one: `FILE.partial`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Writes a machine description carrying a probe's measurements to `path`, unless its
/// measurements are partial (an interrupted probe) and `path` holds a complete measurement:
/// then it goes to [`partial_path`] and `path` is left as it was. Returns where it was written.
pub fn write_measured_machine_file(
    path: &Path,
    machine: &Machine,
) -> Result<PathBuf, MachineError> {
    let partial = machine.measured.as_ref().is_some_and(|m| m.partial);
    if partial && holds_complete_measurement(path) {
        let beside = partial_path(path);
        write_machine_file(&beside, machine)?;
        return Ok(beside);
    }
    write_machine_file(path, machine)?;
    Ok(path.to_owned())
}

/// Whether `path` holds a complete measurement; a file that exists but cannot be read as a
/// machine file counts as one, so it is kept.
fn holds_complete_measurement(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        _ => read_machine_file(path).map_or(true, |m| m.measured.is_some_and(|m| !m.partial)),
    }
}

/// The file `path` names after following every symbolic link (relative links from the link's
/// own directory).
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = parent_dir(&current).join(link);
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links to follow"
    )))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn not_regular(path: &Path, target: &Path, meta: &std::fs::Metadata) -> MachineError {
    let kind = meta.file_type();
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    let through = if target == path {
        String::new()
    } else {
        format!(" (the link's target {})", target.display())
    };
    MachineError::Invalid {
        path: path.to_owned(),
        message: format!("is {what}{through}: loopscope writes results only to regular files"),
    }
}

/// The longest file name part taken into a temporary name: with the dot, `.tmp.`, a process
/// id and a counter it stays below `NAME_MAX` (255 bytes).
const TEMPORARY_STEM_BYTES: usize = 200;

/// A name beside `target` no other writer uses: the process id and a per-process counter.
fn temporary_path(target: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut cut = name.len().min(TEMPORARY_STEM_BYTES);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    parent_dir(target).join(format!(
        ".{}.tmp.{}.{}",
        &name[..cut],
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Creates `tmp` with the existing file's owner and mode, fills it and syncs it.
fn write_temporary(
    tmp: &Path,
    existing: Option<&std::fs::Metadata>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    // An existing file's copy starts private and gets its mode below, so it is never wider
    // than the old file; a new file gets 0o666 less the umask, as a plain create would.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if existing.is_some() { 0o600 } else { 0o666 })
        .open(tmp)?;
    if let Some(meta) = existing {
        keep_owner(&file, meta);
        let mode = meta.permissions().mode() & 0o777;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    let mut out = std::io::BufWriter::new(&file);
    write(&mut out)?;
    out.flush()?;
    drop(out);
    file.sync_all()
}

/// Gives `file` the owner and group of `meta` as far as this process may (all of it as root,
/// a group the writer belongs to otherwise); what it may not set stays the writer's. Tests
/// here run as root, so they exercise only the first branch.
fn keep_owner(file: &std::fs::File, meta: &std::fs::Metadata) {
    if std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid())).is_err() {
        let _ = std::os::unix::fs::fchown(file, None, Some(meta.gid()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_symbolic_link_is_written_through_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink("real.toml", &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        // A dangling link creates its target.
        let dangling = dir.path().join("dangling.toml");
        std::os::unix::fs::symlink("made.toml", &dangling).unwrap();
        write_atomically(&dangling, b"made").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("made.toml")).unwrap(),
            b"made"
        );
        // A loop of links is an error, not a hang.
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let e = write_atomically(&a, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 6);
    }

    #[test]
    fn non_regular_targets_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = write_atomically(&fifo, b"x").unwrap_err();
            assert!(e.to_string().contains("is a FIFO"), "{e}");
            assert!(
                std::fs::symlink_metadata(&fifo)
                    .unwrap()
                    .file_type()
                    .is_fifo()
            );
            // A probe refuses it before measuring, without opening it (which would block).
            let e = crate::machine_to_update(&fifo, Machine::unknown(), false).unwrap_err();
            assert!(e.to_string().contains("is a FIFO"), "{e}");
        } else {
            eprintln!("skipped the FIFO case: mkfifo is not available");
        }
        let e = write_atomically(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
        let e = write_atomically(dir.path(), b"x").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let link = dir.path().join("null-link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let e = write_atomically(&link, b"x").unwrap_err();
        assert!(
            e.to_string()
                .contains("character device (the link's target /dev/null)"),
            "{e}"
        );
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_long_name_still_fits_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        // 250 bytes: the longest name many file systems take is 255.
        let path = dir.path().join(format!("{}.toml", "é".repeat(123)));
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_directory_checked_is_the_one_the_links_lead_to() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink("missing/dir/m.toml", &link).unwrap();
        let e = check_write_target(&link).unwrap_err().to_string();
        assert!(e.contains("cannot write there: directory"), "{e}");
        assert!(e.contains("missing/dir does not exist"), "{e}");
        let e = crate::machine_to_update(&link, Machine::unknown(), false).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // The check leaves nothing behind, and returns where the file will go.
        let real = dir.path().join("real.toml");
        let to_real = dir.path().join("to-real.toml");
        std::os::unix::fs::symlink("real.toml", &to_real).unwrap();
        assert_eq!(check_write_target(&to_real).unwrap(), real);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_file_this_process_may_not_write_is_refused() {
        // As root every file may be written; the CLI test in tests/hostile.rs runs the writer
        // as another user under setpriv.
        let theirs = Path::new("/sys/kernel/notes");
        match std::fs::metadata(theirs) {
            Ok(meta) if meta.is_file() => {
                let e = check_write_target(theirs).unwrap_err().to_string();
                assert!(e.contains("cannot write"), "{e}");
            }
            _ => eprintln!("skipped: no read-only regular file at {}", theirs.display()),
        }
    }

    #[test]
    fn an_existing_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private.toml");
        for wanted in [0o600, 0o640, 0o604, 0o755] {
            std::fs::write(&path, b"old").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(wanted)).unwrap();
            write_atomically(&path, b"new").unwrap();
            assert_eq!(mode(&path), wanted);
            assert_eq!(std::fs::read(&path).unwrap(), b"new");
        }
        // A new file gets the usual mode: 0o666 less the umask, as a plain create would.
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"").unwrap();
        let fresh = dir.path().join("fresh.toml");
        write_atomically(&fresh, b"x").unwrap();
        assert_eq!(mode(&fresh), mode(&plain));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn a_partial_measurement_never_replaces_a_complete_one() {
        use crate::Measured;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        let mut bare = Machine::unknown();
        bare.peak_flops_per_cycle = crate::PeakFlops { dp: 4, sp: 8 };
        let mut complete = bare.clone();
        complete.measured = Some(Measured {
            duration_s: 60.0,
            ..Measured::default()
        });
        let mut partial = complete.clone();
        partial.measured = Some(Measured {
            duration_s: 3.0,
            partial: true,
            ..Measured::default()
        });
        // Nothing there yet, or nothing measured: the partial result goes to the file.
        assert_eq!(write_measured_machine_file(&path, &partial).unwrap(), path);
        write_machine_file(&path, &bare).unwrap();
        assert_eq!(write_measured_machine_file(&path, &partial).unwrap(), path);
        // Over a complete result: beside it, and the complete one is kept.
        assert_eq!(write_measured_machine_file(&path, &complete).unwrap(), path);
        let beside = write_measured_machine_file(&path, &partial).unwrap();
        assert_eq!(beside, dir.path().join("m.toml.partial"));
        assert_eq!(read_machine_file(&path).unwrap(), complete);
        assert_eq!(read_machine_file(&beside).unwrap(), partial);
        // A complete result replaces a partial one.
        write_machine_file(&path, &partial).unwrap();
        assert_eq!(write_measured_machine_file(&path, &complete).unwrap(), path);
        assert_eq!(read_machine_file(&path).unwrap(), complete);
    }
}
