use loopscope_polyhedral::PolyError;
use thiserror::Error;

/// Why an analysis could not be done.
#[derive(Clone, Debug, Error)]
pub enum AnalyticError {
    /// The program description is inconsistent (unknown name, wrong subscript count, ...).
    #[error("{0}")]
    Program(String),
    /// A parameter asked to stay symbolic sizes an array, so addresses are not affine in it.
    #[error(
        "`{parameter}` sets an extent of array `{array}`, so addresses are not affine in it: \
         only a parameter that bounds loops alone can stay symbolic"
    )]
    SymbolSizesArray {
        /// The parameter.
        parameter: String,
        /// The first array whose extent it sets.
        array: String,
    },
    /// No formula of the degrees and periods tried fits the exact counts.
    #[error("{0}")]
    NoFormula(String),
    /// The cache geometry is unusable.
    #[error("cache geometry: {0}")]
    Cache(String),
    /// Building the sets took longer than the time limit given to the model.
    #[error(
        "the integer sets of this kernel take more than the time limit of {seconds} s to build"
    )]
    TimeLimit {
        /// The limit, in seconds.
        seconds: f64,
    },
    /// A set operation or count failed.
    #[error(transparent)]
    Sets(#[from] PolyError),
    /// The request cannot be honoured as given: a flag combination or value.
    #[error("{0}")]
    Request(String),
    /// The kernel file cannot be read, bound or enumerated.
    #[error(transparent)]
    Kernel(#[from] loopscope_kernel::KernelError),
    /// No cache level could be modelled (each level's reason was given as a warning, or is in
    /// the message).
    #[error("{0}")]
    NotModelled(String),
    /// A level process could not hand over its result.
    #[error("cannot write a level's result: {0}")]
    Output(String),
}

impl AnalyticError {
    /// True when the message already tells the user to count with `loopscope simulate` (a count
    /// too complex for the model), so that a caller adds no such hint of its own.
    pub fn points_to_simulate(&self) -> bool {
        matches!(self, AnalyticError::Sets(PolyError::TooComplex { .. }))
    }

    /// True when the cause is in what the user gave.
    pub fn is_bad_input(&self) -> bool {
        match self {
            AnalyticError::Program(_)
            | AnalyticError::SymbolSizesArray { .. }
            | AnalyticError::NoFormula(_)
            | AnalyticError::Cache(_) => true,
            AnalyticError::TimeLimit { .. }
            | AnalyticError::NotModelled(_)
            | AnalyticError::Output(_) => false,
            AnalyticError::Sets(e) => e.is_bad_input(),
            AnalyticError::Request(_) => true,
            AnalyticError::Kernel(e) => e.is_bad_input(),
        }
    }
}

/// The plain line for an error text holding isl's own words (`integer-set operation `op`
/// failed: ...`, `cannot read integer set ...`), with isl's text apart for `-v`; `None` for
/// any other text.
pub(crate) fn plain_isl_error(text: &str) -> Option<(String, String)> {
    const OPERATION: &str = "integer-set operation `";
    const READ: &str = "cannot read integer set `";
    let (start, op) = if let Some(at) = text.find(OPERATION) {
        let rest = &text[at + OPERATION.len()..];
        let (op, tail) = rest.split_once('`')?;
        tail.starts_with(" failed: ").then_some((at, op))?
    } else {
        (text.find(READ)?, "read")
    };
    let isl = &text[start..];
    let plain = if isl.contains("[Quota]") || isl.contains("maximal number of operations exceeded")
    {
        format!(
            "{}the model's operation budget (--max-operations N, isl's elementary operations \
             per reference) was exhausted in `{op}`; a larger --max-operations may let it finish \
             (isl's message with -v)",
            &text[..start]
        )
    } else {
        format!(
            "{}the integer-set library (isl) the model uses failed in `{op}` on this kernel \
             (isl's message with -v)",
            &text[..start]
        )
    };
    Some((plain, isl.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isl_text_is_kept_apart_from_the_plain_line() {
        let text = "k.c: integer-set operation `count` failed: isl_int overflow\nat x.c:12";
        let (plain, isl) = plain_isl_error(text).unwrap();
        assert_eq!(
            plain,
            "k.c: the integer-set library (isl) the model uses failed in `count` on this kernel \
             (isl's message with -v)"
        );
        assert!(isl.contains("isl_int overflow"));
        assert!(plain_isl_error("cannot read integer set `{ [i] }`: bad").is_some());
        assert!(plain_isl_error("arithmetic overflow while counting (vertices)").is_none());
        assert!(plain_isl_error("integer-set operation `count` exceeded the limit").is_none());
        let text = "k.c: L1: cannot read integer set `{ [i] }`: [Quota] maximal number of \
                    operations exceeded";
        let (plain, isl) = plain_isl_error(text).unwrap();
        assert_eq!(
            plain,
            "k.c: L1: the model's operation budget (--max-operations N, isl's elementary \
             operations per reference) was exhausted in `read`; a larger --max-operations may \
             let it finish (isl's message with -v)"
        );
        assert!(isl.contains("[Quota]"));
    }
}
