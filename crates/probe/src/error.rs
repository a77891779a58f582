//! Errors of this crate: each says what failed, on which file or resource, in one line.

use std::path::PathBuf;

/// Why a measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A system call the probe needs failed (mmap, mprotect, ...).
    #[error("{call} failed: {source}")]
    System {
        /// The call, with its arguments when they help.
        call: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A file of the recompile baseline could not be written or run.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The system C compiler failed on a generated source.
    #[error("{path}: `cc` failed ({status}): {stderr}")]
    Compile {
        /// The generated source.
        path: PathBuf,
        /// Exit status as text.
        status: String,
        /// The first line of the compiler's complaint.
        stderr: String,
    },
    /// A compiled baseline program printed something that is not a time.
    #[error("{path}: expected a time in nanoseconds on stdout, found {found:?}")]
    BadOutput {
        /// The program.
        path: PathBuf,
        /// What it printed.
        found: String,
    },
    /// A request the probe cannot satisfy (a size too large for the mapping, ...).
    #[error("{0}")]
    Invalid(String),
}

impl ProbeError {
    /// True when the user's input is at fault (exit 2); false for failures of the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ProbeError::Invalid(_))
    }

    pub(crate) fn last_os(call: impl Into<String>) -> ProbeError {
        ProbeError::System {
            call: call.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}
