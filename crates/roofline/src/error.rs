//! Errors of this crate, each one line naming the input, the position when there is one, and
//! what was expected.

use crate::Level;

/// Why a roofline prediction could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RooflineError {
    /// A textual input (`--counts`, `--bandwidth`) does not parse.
    #[error("{input}:{column}: {message}")]
    Syntax {
        /// Which input: `--counts`, `--bandwidth`, ...
        input: String,
        /// 1-based column of the offending character.
        column: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// A number that must be positive (a bandwidth, a peak) is zero, negative or not finite.
    #[error("{what} must be a positive finite number, got {value}")]
    NotPositive {
        /// What the number is.
        what: String,
        /// The value given.
        value: f64,
    },
    /// The kernel moves data through a level whose bandwidth is unknown.
    #[error(
        "no bandwidth for {level}, which the kernel touches ({bytes} bytes): run \
         `loopscope probe --out machine.toml` and pass `-m machine.toml`, or give \
         `--bandwidth {level}=GB/s`"
    )]
    MissingBandwidth {
        /// The level without a bandwidth.
        level: Level,
        /// Bytes the kernel moves through it.
        bytes: u64,
    },
    /// No level the kernel uses has a bandwidth: its data stays in L1 (or `--counts` names no
    /// level), and L1 is timed only with a bandwidth of its own.
    #[error(
        "no bandwidth to time the kernel by: its data stays in L1, which is timed only with an \
         L1 bandwidth: run `loopscope probe --out machine.toml` and pass `-m machine.toml`, or \
         give `--bandwidth L1=GB/s`"
    )]
    NoTimedLevel,
    /// The inputs are well-formed but do not describe a kernel the model can evaluate.
    #[error("{0}")]
    Invalid(String),
    /// The kernel file cannot be bound or streamed (its own error, one line).
    #[error("{message}")]
    Kernel {
        /// Whether the kernel crate blames the input.
        bad_input: bool,
        /// The kernel crate's message.
        message: String,
    },
    /// The C compiler rejected the generated harness (its first error line is included).
    #[error("{0}")]
    Compile(String),
    /// The harness could not be written, run, or did not report a timing.
    #[error("{0}")]
    Harness(String),
    /// An error said of one input (`--bandwidth: …`, `triad.c: --measure: …`).
    #[error("{context}: {source}")]
    Context {
        /// The input.
        context: String,
        /// What is wrong with it.
        source: Box<RooflineError>,
    },
}

impl RooflineError {
    /// True when the error comes from the user's input (everything but a failed harness run:
    /// the models are closed-form and cannot fail on valid numbers, and a kernel the compiler
    /// rejects is the user's).
    pub fn is_bad_input(&self) -> bool {
        match self {
            RooflineError::Harness(_) => false,
            RooflineError::Kernel { bad_input, .. } => *bad_input,
            RooflineError::Context { source, .. } => source.is_bad_input(),
            _ => true,
        }
    }
}
