//! Exit codes, decided once from the error's cause chain.
//!
//! Commands return `anyhow::Error`s built from the library crates' typed errors. An error is bad
//! input (exit 2) when any cause in its chain is a library error that says so, an I/O error on a
//! user-named file, or an explicit [`BadInput`]; everything else is an analysis failure (exit 1).
//! A new library crate adds one line to [`is_bad_input`].

use std::fmt;

/// Exit code of an analysis failure.
pub const ANALYSIS: u8 = 1;
/// Exit code of a usage error or bad input.
pub const USAGE: u8 = 2;

/// A bad-input error raised by the CLI itself (a flag combination, a value out of range).
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Returns an `anyhow::Error` that exits with code 2.
pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
}

/// The exit code for a failed command.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(is_bad_input) {
        USAGE
    } else {
        ANALYSIS
    }
}

fn is_bad_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    if cause.is::<BadInput>() || cause.is::<clap::Error>() {
        return true;
    }
    if let Some(e) = cause.downcast_ref::<loopscope_machine::MachineError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_roofline::RooflineError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_kernel::KernelError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_cache::CacheError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_probe::ProbeError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_profile::ProfileError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_binary::BinaryError>() {
        return e.is_bad_input();
    }
    if let Some(e) = cause.downcast_ref::<loopscope_analytic::AnalyticError>() {
        return e.is_bad_input();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_chain() {
        assert_eq!(exit_code(&bad_input("no")), USAGE);
        assert_eq!(exit_code(&bad_input("no").context("while reading")), USAGE);
        assert_eq!(exit_code(&anyhow::anyhow!("the model diverged")), ANALYSIS);
        let machine = loopscope_machine::MachineError::Serialise("bug".into());
        assert_eq!(exit_code(&machine.into()), ANALYSIS);
    }
}
