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
