//! Errors of this crate: each names the file, the position when there is one, and what was
//! expected, in one line.

use std::path::PathBuf;

/// Why a machine description could not be detected, read, written or imported.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The file could not be read or written.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`cannot read`, `cannot write`, ...).
        action: &'static str,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or not a machine description.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// The file is well-formed but its content is not usable.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The file was written by a format this version does not read.
    #[error(
        "{path}: format_version {found} is not supported (this loopscope reads version {expected})"
    )]
    FormatVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// The version this crate reads and writes.
        expected: u32,
    },
    /// A value could not be serialised (a bug, not bad input).
    #[error("cannot serialise the machine description: {0}")]
    Serialise(String),
}

impl MachineError {
    /// True when the error comes from the user's input (a file or its content), false for
    /// internal faults.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, MachineError::Serialise(_))
    }
}
