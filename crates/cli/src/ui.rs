//! What the user sees besides results: warnings, verbose notes, progress bars, errors.
//!
//! Results go to stdout; everything here goes to stderr. Warnings show unless `-q`; notes only
//! with `-v`; progress bars only when stderr is a terminal or `--progress` is given.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loopscope_kernel::Listener;

use crate::args::GlobalArgs;

/// The user-facing side channel of one run.
#[derive(Debug)]
pub struct Ui {
    verbosity: i8,
    progress: bool,
    /// The bar of the stage a library call is in ([`Listener::begin`]).
    stage: Mutex<Option<ProgressBar>>,
}

impl Ui {
    /// Settings from the global flags and whether stderr is a terminal.
    pub fn new(args: &GlobalArgs) -> Ui {
        let verbosity = if args.quiet { -1 } else { args.verbose as i8 };
        Ui {
            verbosity,
            progress: !args.quiet && (args.progress || std::io::stderr().is_terminal()),
            stage: Mutex::new(None),
        }
    }

    /// A warning: something the user should know about the result (shown unless `-q`).
    pub fn warn(&self, message: impl AsRef<str>) {
        if self.verbosity >= 0 {
            eprintln!("loopscope: warning: {}", message.as_ref());
        }
    }

    /// A line about a result written to a file rather than stdout (shown unless `-q`).
    pub fn done(&self, message: impl AsRef<str>) {
        if self.verbosity >= 0 {
            eprintln!("loopscope: {}", message.as_ref());
        }
    }

    /// A note on what is being done (shown with `-v`).
    pub fn note(&self, message: impl AsRef<str>) {
        if self.verbosity >= 1 {
            eprintln!("loopscope: {}", message.as_ref());
        }
    }

    /// Prints a failed command's error as one line: the error and its causes.
    pub fn error(&self, err: &anyhow::Error) {
        let chain: Vec<String> = err.chain().map(ToString::to_string).collect();
        let mut line = String::new();
        for cause in chain {
            // Library errors often repeat their source's text; print each piece once.
            if !line.contains(&cause) {
                if !line.is_empty() {
                    line.push_str(": ");
                }
                line.push_str(&cause);
            }
        }
        eprintln!("loopscope: error: {line}");
    }

    /// A progress bar of `total` steps, hidden unless progress is shown.
    pub fn progress_bar(&self, total: u64, message: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(message.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }
}

impl Listener for Ui {
    fn warn(&self, message: &str) {
        Ui::warn(self, message);
    }

    fn note(&self, message: &str) {
        Ui::note(self, message);
    }

    fn begin(&self, stage: &str, total: u64) {
        let bar = self.progress_bar(total, stage);
        if let Some(old) = self.stage().replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, steps: u64) {
        if let Some(bar) = self.stage().as_ref() {
            bar.inc(steps);
        }
    }

    fn end(&self) {
        if let Some(bar) = self.stage().take() {
            bar.finish_and_clear();
        }
    }
}

impl Ui {
    fn stage(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }
}
