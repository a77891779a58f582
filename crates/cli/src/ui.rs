//! What the user sees besides results: warnings, verbose notes, progress bars, errors.
//!
//! Results go to stdout; everything here goes to stderr. Warnings show unless `-q`; notes only
//! with `-v`; progress bars only when stderr is a terminal or `--progress` is given. Every
//! message passes through [`printable`], so input echoed in it (a NUL, a byte-order mark, an
//! escape sequence from a file) cannot break the line or the terminal.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
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
            eprintln!("loopscope: warning: {}", printable(message.as_ref()));
        }
    }

    /// A line about a result written to a file rather than stdout (shown unless `-q`).
    pub fn done(&self, message: impl AsRef<str>) {
        if self.verbosity >= 0 {
            eprintln!("loopscope: {}", printable(message.as_ref()));
        }
    }

    /// A note on what is being done (shown with `-v`).
    pub fn note(&self, message: impl AsRef<str>) {
        if self.verbosity >= 1 {
            eprintln!("loopscope: {}", printable(message.as_ref()));
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
        eprintln!("loopscope: error: {}", printable(&line));
    }

    /// A progress bar of `total` steps, hidden unless progress is shown.
    pub fn progress_bar(&self, total: u64, message: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        // indicatif draws nothing to a stderr that is not a terminal; `--progress` asked for it
        // there, so it gets a line a second instead of a redrawn bar.
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::term_like_with_hz(Box::new(LogLines::default()), 1)
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let style = ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(message.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }
}

/// A progress bar's draws as plain lines on stderr, for a log rather than a terminal: cursor
/// movements and clears are dropped, each drawn state ends with a newline, and a state the
/// same as the last one written is not repeated.
#[derive(Debug, Default)]
struct LogLines {
    /// The text of the line being drawn, written out whole at the draw's flush.
    pending: Mutex<String>,
    /// The last line written.
    last: Mutex<String>,
}

impl LogLines {
    fn pending(&self) -> std::sync::MutexGuard<'_, String> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }

    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn write_line(&self, line: &str) -> std::io::Result<()> {
        self.write_str(line)?;
        self.flush()
    }

    fn write_str(&self, text: &str) -> std::io::Result<()> {
        self.pending().push_str(text.trim_start_matches('\r'));
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        let line = std::mem::take(&mut *self.pending());
        let line = line.trim();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if !line.is_empty() && *last != line {
            eprintln!("{line}");
            line.clone_into(&mut last);
        }
        Ok(())
    }
}

/// `text` with every character that would not show as itself escaped: control characters
/// (`\0`, `\n`, `\x1b`, ...) and invisible format characters (a byte-order mark, zero-width
/// and direction marks) as `\u{...}`. A message stays one visible line.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || is_invisible(c) => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Format characters that print as nothing (Unicode category Cf, the ones seen in text).
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hidden_characters_are_escaped() {
        assert_eq!(printable("plain `N` é 漢"), "plain `N` é 漢");
        assert_eq!(printable("a\0b\nc\td\r"), "a\\0b\\nc\\td\\r");
        assert_eq!(printable("\u{feff}N=5"), "\\u{feff}N=5");
        assert_eq!(printable("\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(printable("\u{85}\u{202e}"), "\\u{0085}\\u{202e}");
    }

    proptest! {
        #[test]
        fn escaped_text_is_one_visible_line(text in "\\PC*|[\\x00-\\x1f\\u{feff}\\u{200b}a]{0,20}") {
            let shown = printable(&text);
            prop_assert!(shown.chars().all(|c| !c.is_control() && !is_invisible(c)));
            if text.chars().all(|c| !c.is_control() && !is_invisible(c)) {
                prop_assert_eq!(shown, text);
            }
        }
    }
}
