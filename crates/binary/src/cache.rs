//! The analysis cache: a [`Program`] stored under a name made of the binary's build-id, its
//! modification time and size, and the analysis options, so that later commands on the same
//! binary skip the analysis. Where the cache lives is the caller's decision.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use crate::Image;
use crate::error::BinaryError;
use crate::program::{Options, Program};

/// Bumped whenever [`Program`]'s layout changes, so old cache files are not misread.
const FORMAT_VERSION: u32 = 1;

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

/// Reads a cached analysis.
pub fn read_cache(path: &Path) -> Result<Program, BinaryError> {
    let bytes = std::fs::read(path).map_err(|e| BinaryError::Cache {
        path: path.to_owned(),
        what: e.to_string(),
    })?;
    postcard::from_bytes(&bytes).map_err(|e| BinaryError::Cache {
        path: path.to_owned(),
        what: e.to_string(),
    })
}

/// Writes an analysis to the cache, atomically.
pub fn write_cache(program: &Program, path: &Path) -> Result<(), BinaryError> {
    let bytes = postcard::to_stdvec(program).map_err(|e| BinaryError::Cache {
        path: path.to_owned(),
        what: e.to_string(),
    })?;
    loopscope_machine::write_atomically(path, &bytes).map_err(|e| BinaryError::Cache {
        path: path.to_owned(),
        what: e.to_string(),
    })
}
