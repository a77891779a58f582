//! What a long library call says while it runs. Libraries never print: they tell a
//! [`Listener`], and the caller decides what to show (the command line: warnings unless `-q`,
//! notes with `-v`, progress bars on a terminal).

/// Hears warnings, notes and progress from a library call. Every method but [`Listener::warn`]
/// ignores what it hears unless implemented. Calls may come from several threads at once.
pub trait Listener: Sync {
    /// Something the user should know about the result.
    fn warn(&self, message: &str);
    /// A note on what is being done.
    fn note(&self, _message: &str) {}
    /// A long stage begins, named `stage`, of `total` steps (0 when the number is unknown).
    fn begin(&self, _stage: &str, _total: u64) {}
    /// `steps` more steps of the current stage are done.
    fn advance(&self, _steps: u64) {}
    /// The current stage is over.
    fn end(&self) {}
}

/// A listener that ignores everything: for work repeated many times whose warnings were given
/// once already, and for tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Listener for Silent {
    fn warn(&self, _message: &str) {}
}
