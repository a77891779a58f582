use thiserror::Error;

/// Why a set operation or a count failed.
#[derive(Clone, Debug, Error)]
pub enum PolyError {
    /// isl refused a set description or an operation (for sets loopscope builds itself this
    /// means a bug or an unsupported construct, not bad user input).
    #[error("integer-set operation `{op}` failed: {message}")]
    Isl {
        /// The operation that failed.
        op: &'static str,
        /// isl's own message.
        message: String,
    },
    /// A set description could not be parsed.
    #[error("cannot read integer set `{text}`: {message}")]
    Parse {
        /// The text given.
        text: String,
        /// isl's message.
        message: String,
    },
    /// Counting asked for a parameter that has no value.
    #[error("parameter `{name}` has no value; give it with -D {name}=...")]
    MissingParameter {
        /// Parameter name.
        name: String,
    },
    /// The set has infinitely many points.
    #[error("the set `{set}` is unbounded, so its points cannot be counted")]
    Unbounded {
        /// The set, in isl notation.
        set: String,
    },
    /// The work needed exceeds the bound loopscope sets for itself.
    #[error("counting needs {what} ({needed}), above the limit {limit}; use `loopscope simulate`")]
    TooComplex {
        /// What grew too large.
        what: &'static str,
        /// How much was needed.
        needed: u128,
        /// The limit.
        limit: u128,
    },
    /// isl stopped an operation at the context's operation limit ([`crate::Ctx::with_max_operations`]).
    #[error("integer-set operation `{op}` exceeded the operation limit")]
    OperationLimit {
        /// The operation that was stopped.
        op: &'static str,
    },
    /// A count or coefficient left the 128-bit range.
    #[error("arithmetic overflow while counting ({context})")]
    Overflow {
        /// Where it happened.
        context: &'static str,
    },
}

impl PolyError {
    /// The error for isl's message `message` about `op`; isl's quota error (`[Quota] …`, its
    /// operation limit) becomes [`PolyError::OperationLimit`].
    pub(crate) fn from_isl(op: &'static str, message: String) -> PolyError {
        if message.starts_with("[Quota]") {
            PolyError::OperationLimit { op }
        } else {
            PolyError::Isl { op, message }
        }
    }

    /// True when the error comes from what the user gave (parameter values, set text), false for
    /// internal limits and failures.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            PolyError::Parse { .. }
                | PolyError::MissingParameter { .. }
                | PolyError::Unbounded { .. }
        )
    }
}
