//! The one error type of this room.

use std::path::PathBuf;

use loopscope_binary::BinaryError;

/// What can go wrong while recording a target or reading a profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The command to profile does not exist or cannot be executed.
    #[error("{command}: {what}")]
    Command {
        /// The command as given.
        command: String,
        /// What is wrong with it ("no such file or directory in PATH", "not executable").
        what: String,
    },
    /// The kernel refused performance events (`perf_event_paranoid`, seccomp, a container).
    #[error("perf events unavailable: {what}")]
    PerfUnavailable {
        /// What was refused and what to change.
        what: String,
    },
    /// Recording options the kernel cannot honour (a sampling rate above its limit).
    #[error("{what}")]
    Options {
        /// Which option and what the limit is.
        what: String,
    },
    /// A system call on the target failed (ptrace, waitpid, process_vm_readv).
    #[error("{what}: {source}")]
    System {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A file could not be read or written.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("read", "write").
        action: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A profile file that is not one, is truncated or is damaged.
    #[error("{}: {what}", path.display())]
    BadProfile {
        /// The profile file.
        path: PathBuf,
        /// Where and what is wrong.
        what: String,
    },
    /// A profile that does not fit the binaries it names (a loop the binary does not have):
    /// the caller names the profile.
    #[error("damaged: {what}")]
    Damaged {
        /// Where and what is wrong.
        what: String,
    },
    /// A sampled profile whose stacks make a deeper tree than a report shows.
    #[error(
        "the samples' stacks make a tree {depth} levels deep, past the limit of {} (see docs/limits.md)",
        crate::MAX_TREE_DEPTH
    )]
    TreeTooDeep {
        /// The depth reached.
        depth: usize,
    },
    /// A binary on disk is not the one that was recorded.
    #[error(
        "{}: build-id {found} differs from the recorded {recorded} (rebuilt since `record`?)",
        path.display()
    )]
    BuildIdMismatch {
        /// The binary.
        path: PathBuf,
        /// The build-id in the profile.
        recorded: String,
        /// The build-id of the file now.
        found: String,
    },
    /// A binary without a build-id whose loaded code is not the code recorded.
    #[error(
        "{}: no build-id, and its loaded code {found} differs from the recorded {recorded} \
         (rebuilt since `record`?)",
        path.display()
    )]
    ContentMismatch {
        /// The binary.
        path: PathBuf,
        /// The content identity in the profile.
        recorded: String,
        /// The content identity of the file now (`unreadable` when it could not be read, its
        /// build-id when it has one now).
        found: String,
    },
    /// Profiles that cannot be merged (another back-end, none at all).
    #[error("{0}")]
    Merge(String),
    /// A binary could not be analysed.
    #[error(transparent)]
    Binary(#[from] BinaryError),
}

impl ProfileError {
    /// Whether the error is the user's input (exit 2) rather than a failure of the analysis.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ProfileError::Command { .. }
            | ProfileError::BadProfile { .. }
            | ProfileError::Damaged { .. }
            | ProfileError::TreeTooDeep { .. }
            | ProfileError::BuildIdMismatch { .. }
            | ProfileError::ContentMismatch { .. }
            | ProfileError::PerfUnavailable { .. }
            | ProfileError::Options { .. }
            | ProfileError::Merge(_) => true,
            ProfileError::Io { action, .. } => *action == "read",
            ProfileError::Binary(error) => error.is_bad_input(),
            ProfileError::System { .. } => false,
        }
    }
}
