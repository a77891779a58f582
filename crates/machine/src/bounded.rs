//! Reading a whole file within a size cap.
//!
//! Every file loopscope reads whole goes through a cap, so that a huge file, a device that never
//! ends (`/dev/zero`) or a pipe is refused with a message naming the cap instead of filling
//! memory. A regular file's size is checked before reading; anything else is read until the cap
//! is passed. The buffer never grows past `cap + 1` bytes.

use std::io::{ErrorKind, Read};
use std::path::Path;

use crate::units::format_bytes;

/// The cap on a loopscope machine file or a kerncraft YAML file (real ones are a few KiB).
pub const MACHINE_FILE_CAP_BYTES: u64 = 1 << 20;

/// Reads the file at `path` whole, refusing one larger than `cap_bytes`; `what` names the kind
/// of file in the message (`machine files`, `kernel sources`).
pub fn read_bounded(path: &Path, cap_bytes: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::new(
            ErrorKind::IsADirectory,
            "is a directory, expected a file",
        ));
    }
    if meta.is_file() && meta.len() > cap_bytes {
        return Err(too_large(Some(meta.len()), cap_bytes, what));
    }
    let expected = if meta.is_file() { meta.len() } else { 0 };
    read_bounded_from(file, expected, cap_bytes, what)
}

/// Reads `reader` to its end, refusing more than `cap_bytes`; `expected_bytes` sizes the first
/// allocation (the file's length when known).
pub fn read_bounded_from(
    reader: impl Read,
    expected_bytes: u64,
    cap_bytes: u64,
    what: &str,
) -> std::io::Result<Vec<u8>> {
    let limit = usize::try_from(cap_bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(usize::try_from(expected_bytes).map_or(0, |e| e.min(limit)));
    let mut chunk = vec![0u8; 64 * 1024];
    let mut reader = reader.take(cap_bytes.saturating_add(1));
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if bytes.len() + n > bytes.capacity() {
            // Doubling, as `Vec` does, but never past the cap.
            let want = (bytes.capacity().saturating_mul(2)).max(bytes.len() + n);
            bytes.reserve_exact(want.min(limit) - bytes.len());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    if bytes.len() as u64 > cap_bytes {
        return Err(too_large(None, cap_bytes, what));
    }
    Ok(bytes)
}

/// Refuses a FIFO or a socket at `path`, found by `stat`, which never blocks. Inputs whose first
/// bytes are checked before they are read whole (binaries, profiles) or that are read by
/// offsets (perf.data) cannot come from a pipe, and opening a FIFO that has no writer would
/// wait forever.
pub fn refuse_pipe(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path)?.file_type();
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        return Ok(());
    };
    Err(std::io::Error::new(
        ErrorKind::InvalidInput,
        format!("is {what}: expected a file"),
    ))
}

fn too_large(size_bytes: Option<u64>, cap_bytes: u64, what: &str) -> std::io::Error {
    let size = match size_bytes {
        Some(s) => format!("{}, ", format_bytes(s)),
        None => String::new(),
    };
    std::io::Error::new(
        ErrorKind::FileTooLarge,
        format!(
            "{size}larger than {}, the cap on {what} (see docs/limits.md)",
            format_bytes(cap_bytes)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_large_files_are_refused_naming_the_cap() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 16, "test files").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FileTooLarge);
        assert!(
            e.to_string()
                .contains("larger than 64 KiB, the cap on test files"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'x'; 5000]).unwrap();
        let e = read_bounded(&path, 4096, "test files").unwrap_err();
        assert!(
            e.to_string().starts_with("4.88 KiB, larger than 4 KiB"),
            "{e}"
        );
        assert_eq!(read_bounded(&path, 5000, "test files").unwrap().len(), 5000);
        let e = read_bounded(dir.path(), 5000, "test files").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn the_buffer_never_grows_past_the_cap(len in 0usize..300_000, cap in 0u64..200_000,
                                               expected in 0u64..400_000) {
            let data = vec![7u8; len];
            match read_bounded_from(&data[..], expected, cap, "test files") {
                Ok(bytes) => {
                    proptest::prop_assert!(len as u64 <= cap);
                    proptest::prop_assert_eq!(bytes.len(), len);
                    proptest::prop_assert!(bytes.capacity() as u64 <= cap + 1);
                }
                Err(e) => {
                    proptest::prop_assert!(len as u64 > cap);
                    proptest::prop_assert_eq!(e.kind(), ErrorKind::FileTooLarge);
                }
            }
        }
    }
}
