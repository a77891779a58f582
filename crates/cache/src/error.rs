//! Errors of this crate: one line each, naming the input, the position and what was expected.

use std::path::PathBuf;

/// Why a cache description or an address trace is unusable.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A `--cache` specification does not parse.
    #[error("cache spec `{spec}`: {message}")]
    Spec {
        /// The text of the offending level.
        spec: String,
        /// What was expected.
        message: String,
    },
    /// A cache geometry is impossible (zero, not a power of two, sets*ways*line != size, ...).
    #[error("cache {name}: {message}")]
    Geometry {
        /// The level's name.
        name: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A line of an address trace does not parse.
    #[error("{path}:{line}: {message}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What was expected.
        message: String,
    },
    /// The kernel file cannot be read, bound or enumerated (its own error).
    #[error(transparent)]
    Kernel(#[from] loopscope_kernel::KernelError),
    /// Simulating the kernel would take longer than a run is allowed to.
    #[error(
        "{origin}: simulating it takes {} accesses and {} loop iterations, {} steps in all, \
         past the limit of {cap} steps (a few minutes); `loopscope misses` counts the same \
         misses analytically at any size",
        describe_count(*accesses, *exact),
        describe_count(*iterations, *exact),
        describe_count(accesses.saturating_add(*iterations), *exact)
    )]
    TooMuchWork {
        /// The kernel file.
        origin: String,
        /// Accesses to simulate (an upper bound when not `exact`).
        accesses: u128,
        /// Loop iterations to step through, each a step of work even where a body is empty
        /// (an upper bound when not `exact`).
        iterations: u128,
        /// Whether `accesses` is exact.
        exact: bool,
        /// The most a simulation may take.
        cap: u64,
    },
    /// The trace could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

/// `4000000000000 (4.0e12)`, `4` below a million, or `up to ...` for an upper bound.
fn describe_count(count: u128, exact: bool) -> String {
    let prefix = if exact { "" } else { "up to " };
    if count < 1_000_000 {
        format!("{prefix}{count}")
    } else {
        format!("{prefix}{count} ({:.1e})", count as f64)
    }
}

impl CacheError {
    /// True when the error comes from the user's input; every error of this crate does.
    pub fn is_bad_input(&self) -> bool {
        match self {
            CacheError::Kernel(e) => e.is_bad_input(),
            _ => true,
        }
    }
}
