//! The analysis cache: a [`Program`] stored under a name made of the binary's build-id, its
//! modification time and size, and the analysis options, so that later commands on the same
//! binary skip the analysis. Where the cache lives is the caller's decision.
//!
//! A cache file is a 24-byte header (the magic `LSAC`, the format version, the payload's length
//! and a 64-bit checksum of header and payload) and the postcard-encoded program. A file that
//! does not verify (damaged, cut short, written by another version) is an error, which callers
//! answer by analysing again and rewriting the entry; a damaged byte never reaches the output.
//! The checksum is the standard library's SipHash with its fixed key: a Rust release that
//! changes it only costs one re-analysis.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use crate::Image;
use crate::error::BinaryError;
use crate::program::{Options, Program};

/// Bumped whenever [`Program`]'s layout changes, so old cache files are not misread, and
/// whenever the analysis finds something else in the same binary, so old results are redone.
const FORMAT_VERSION: u32 = 5;

/// The cache file name for this binary and these options.
pub fn cache_file_name(image: &Image, options: &Options) -> Result<String, BinaryError> {
    let meta = std::fs::metadata(&image.path).map_err(|source| BinaryError::Io {
        path: image.path.clone(),
        action: "stat",
        source,
    })?;
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut hasher = DefaultHasher::new();
    FORMAT_VERSION.hash(&mut hasher);
    options.split.hash(&mut hasher);
    options.lines.hash(&mut hasher);
    options.classifier.fingerprint().hash(&mut hasher);
    let id = image.build_id.as_deref().unwrap_or("no-build-id");
    Ok(format!(
        "{id}-{mtime_ns:x}-{:x}-{:016x}.bin",
        meta.len(),
        hasher.finish()
    ))
}

/// Reads a cached analysis, checking its header and checksum first.
pub fn read_cache(path: &Path) -> Result<Program, BinaryError> {
    let damaged = |what: String| BinaryError::Cache {
        path: path.to_owned(),
        what,
    };
    // A FIFO put where an entry should be would block the open until something writes to it.
    loopscope_machine::refuse_pipe(path).map_err(|e| damaged(e.to_string()))?;
    let bytes = loopscope_machine::read_bounded(path, CACHE_FILE_CAP_BYTES, "analysis caches")
        .map_err(|e| damaged(e.to_string()))?;
    let payload = verified_payload(&bytes).map_err(|what| damaged(what.to_owned()))?;
    postcard::from_bytes(payload).map_err(|e| damaged(e.to_string()))
}

/// Writes an analysis to the cache, atomically, with its header and checksum.
pub fn write_cache(program: &Program, path: &Path) -> Result<(), BinaryError> {
    let payload = postcard::to_stdvec(program).map_err(|e| BinaryError::Cache {
        path: path.to_owned(),
        what: e.to_string(),
    })?;
    loopscope_machine::write_atomically(path, &with_header(&payload)).map_err(|e| {
        BinaryError::Cache {
            path: path.to_owned(),
            what: e.to_string(),
        }
    })
}

/// The largest cache file read; an analysis of even a very large binary is far smaller.
pub const CACHE_FILE_CAP_BYTES: u64 = 1 << 30;

const MAGIC: &[u8; 4] = b"LSAC";
const HEADER_BYTES: usize = 24;

/// `payload` behind its header.
fn with_header(payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&checksum(&bytes[..16], payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The payload of a cache file whose header and checksum hold, else what is wrong.
fn verified_payload(bytes: &[u8]) -> Result<&[u8], &'static str> {
    let (header, payload) = bytes
        .split_at_checked(HEADER_BYTES)
        .ok_or("shorter than its header")?;
    if &header[..4] != MAGIC {
        return Err("not a loopscope analysis cache (bad magic)");
    }
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or([0; 8]));
    if header[4..8] != FORMAT_VERSION.to_le_bytes() {
        return Err("written by another format version");
    }
    if word(8) != payload.len() as u64 {
        return Err("its length does not match its header (cut short or extended)");
    }
    if word(16) != checksum(&header[..16], payload) {
        return Err("its checksum does not match (the file is damaged)");
    }
    Ok(payload)
}

fn checksum(header: &[u8], payload: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(header);
    hasher.write(payload);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_in_place_of_an_entry_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("entry.bin");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(read_cache(&fifo).map(drop)));
        // Only a guard against a hang: opening the FIFO would block forever.
        let result = receive
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("read_cache blocked on a FIFO");
        let e = result.unwrap_err().to_string();
        assert!(e.contains("is a FIFO"), "{e}");
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let payload: Vec<u8> = (0..200u8).collect();
        let file = with_header(&payload);
        assert_eq!(verified_payload(&file), Ok(&payload[..]));
        for at in 0..file.len() {
            let mut damaged = file.clone();
            damaged[at] ^= 0x5a;
            assert!(verified_payload(&damaged).is_err(), "byte {at}");
        }
        for cut in 0..file.len() {
            assert!(verified_payload(&file[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_verify_nor_panic(bytes in proptest::collection::vec(
            proptest::prelude::any::<u8>(), 0..400)) {
            proptest::prop_assert!(verified_payload(&bytes).is_err());
        }
    }
}
