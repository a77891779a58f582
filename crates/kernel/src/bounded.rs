//! Reading a kernel file within a size cap, so that a huge file or a device that never ends
//! (`/dev/zero`) is refused with a message naming the cap instead of filling memory. (The same
//! rule as the machine room's reader; this room depends on no other.)

use std::io::{ErrorKind, Read};
use std::path::Path;

/// The cap on a kernel source (real kernels are a few KiB).
pub const KERNEL_FILE_CAP_BYTES: u64 = 1 << 20;

/// Reads the kernel file at `path` whole, within [`KERNEL_FILE_CAP_BYTES`].
pub(crate) fn read_kernel_text(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return Err("is a directory, expected a file".into());
    }
    if meta.is_file() && meta.len() > KERNEL_FILE_CAP_BYTES {
        return Err(too_large());
    }
    let bytes = read_within(file, KERNEL_FILE_CAP_BYTES).map_err(|e| e.to_string())?;
    let Some(bytes) = bytes else {
        return Err(too_large());
    };
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_large() -> String {
    format!(
        "larger than {} MiB, the cap on kernel sources (see docs/limits.md)",
        KERNEL_FILE_CAP_BYTES >> 20
    )
}

/// Reads `reader` to its end: `None` when it holds more than `cap_bytes`. The buffer never
/// grows past `cap_bytes + 1`.
pub(crate) fn read_within(reader: impl Read, cap_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    let limit = usize::try_from(cap_bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut reader = reader.take(cap_bytes.saturating_add(1));
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if bytes.len() + n > bytes.capacity() {
            let want = bytes.capacity().saturating_mul(2).max(bytes.len() + n);
            bytes.reserve_exact(want.min(limit) - bytes.len());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    Ok((bytes.len() as u64 <= cap_bytes).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_naming_the_cap() {
        let e = read_kernel_text(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e,
            "larger than 1 MiB, the cap on kernel sources (see docs/limits.md)"
        );
        let e = crate::read_kernel_file(Path::new("/dev/zero")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/dev/zero: cannot read: larger than"),
            "{e}"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_buffer_never_grows_past_the_cap(len in 0usize..100_000, cap in 0u64..60_000) {
            let data = vec![b'x'; len];
            match read_within(&data[..], cap).unwrap() {
                Some(bytes) => {
                    proptest::prop_assert!(len as u64 <= cap);
                    proptest::prop_assert!(bytes.capacity() as u64 <= cap + 1);
                }
                None => proptest::prop_assert!(len as u64 > cap),
            }
        }
    }
}
