//! Errors of this crate: one line each, naming the kernel file, the position and what was expected.

/// Why a kernel could not be read, bound to parameters, placed in memory or enumerated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The text is not in the kernel subset: a syntax error or an unsupported construct.
    #[error("{origin}:{line}:{column}: {message}")]
    Syntax {
        /// The kernel file (or another name for the text).
        origin: String,
        /// 1-based line.
        line: u32,
        /// 1-based column (in characters).
        column: u32,
        /// What was found and what was expected.
        message: String,
    },
    /// A product or division that is not affine: of two loop variables, a division of a loop
    /// variable, or of symbols one of which has no value. The expression is kept apart so
    /// callers can tell what it names without reading the message.
    #[error("{origin}:{line}:{column}: `{expression}`: {reason}")]
    NotAffine {
        /// The kernel file (or another name for the text).
        origin: String,
        /// 1-based line.
        line: u32,
        /// 1-based column (in characters).
        column: u32,
        /// The product or division, with the kernel's names (`j*N`, `(j+1)*i`).
        expression: String,
        /// Why it is not affine, and what would make it so.
        reason: String,
    },
    /// A loop's step is an expression of parameters (`ii += BS`) some of which have no value: a
    /// step is a constant, known once they have one.
    #[error(
        "{origin}:{line}:{column}: the step of `{var}` is `{step}`, a constant only once {} has a \
         value (give it with -D {}=VALUE)",
        names.join(", "), names.first().map_or("", String::as_str)
    )]
    StepNeedsValue {
        /// The kernel file (or another name for the text).
        origin: String,
        /// 1-based line of the step.
        line: u32,
        /// 1-based column of the step.
        column: u32,
        /// The loop variable.
        var: String,
        /// The step as written, with the kernel's names (`BS`, `2*BS`).
        step: String,
        /// The parameters of the step that have no value.
        names: Vec<String>,
    },
    /// A symbol (loop bound, extent or subscript constant) has no value: it needs `-D NAME=VALUE`,
    /// or, when only arithmetic reads it, a scalar declaration.
    #[error("{origin}:{line}:{column}: symbol `{name}` has no value ({fix})")]
    UnboundSymbol {
        /// The kernel file.
        origin: String,
        /// 1-based line of the first use.
        line: u32,
        /// 1-based column of the first use.
        column: u32,
        /// The symbol.
        name: String,
        /// How to give it a value: `give it with -D N=VALUE`, or for a symbol only arithmetic
        /// reads, `declare it in the kernel file (double s;) or give it with -D s=VALUE`.
        fix: String,
    },
    /// A subscript leaves its array's declared extent at some iteration the kernel executes
    /// with the given parameter values.
    #[error("{origin}:{line}:{column}: {message}")]
    OutOfBounds {
        /// The kernel file.
        origin: String,
        /// 1-based line of the reference.
        line: u32,
        /// 1-based column of the reference.
        column: u32,
        /// The reference, the subscript's range, the array and its extent.
        message: String,
    },
    /// The kernel file could not be read.
    #[error("{origin}: cannot read: {message}")]
    Io {
        /// The kernel file.
        origin: String,
        /// The operating system's reason.
        message: String,
    },
    /// A value given for the kernel (a `-D` value or a base address) is unusable.
    #[error("{origin}: {message}")]
    Binding {
        /// The kernel file.
        origin: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

impl KernelError {
    /// True when the error comes from the user's input; every error of this crate does.
    pub fn is_bad_input(&self) -> bool {
        true
    }
}
