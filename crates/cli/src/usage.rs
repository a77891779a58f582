//! clap's usage errors in the house form: one line, `loopscope: error: ...`, exit 2. Help and
//! version text keep clap's own output.

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::failure::USAGE;
use crate::ui::printable;

/// Prints what a failed parse produced and returns the exit code: help and version as clap
/// renders them (exit 0; a bare `loopscope`'s help on stderr, exit 2), every other error as
/// one line.
pub fn report(err: &clap::Error) -> u8 {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            USAGE
        }
        _ => {
            eprintln!("loopscope: error: {}", one_line(err));
            USAGE
        }
    }
}

/// The error as one line: `FLAG VALUE: why` for a value a flag refused, else clap's own first
/// line with its tips, and where to read the flags.
pub fn one_line(err: &clap::Error) -> String {
    let line = match (err.kind(), flag_and_value(err)) {
        (ErrorKind::ValueValidation, Some((flag, value))) => {
            let why = std::error::Error::source(err)
                .map(|e| e.to_string())
                .unwrap_or_else(|| "invalid value".to_owned());
            format!("{flag} {value}: {why}")
        }
        (ErrorKind::InvalidValue, Some((flag, value))) => match valid_values(err) {
            Some(valid) => format!("{flag} {value}: expected one of {valid}"),
            None => format!("{flag}: expected a value"),
        },
        (ErrorKind::MissingRequiredArgument, _) => match missing_arguments(err) {
            Some(missing) => with_help(
                format!("the following required arguments were not provided: {missing}"),
                err,
            ),
            None => rendered_line(err),
        },
        _ => rendered_line(err),
    };
    printable(&line)
}

/// The flag (its first word: `--time-limit`, `-D`) and the value it refused, quoted when it
/// would not read as one word.
fn flag_and_value(err: &clap::Error) -> Option<(String, String)> {
    let ContextValue::String(arg) = err.get(ContextKind::InvalidArg)? else {
        return None;
    };
    let ContextValue::String(value) = err.get(ContextKind::InvalidValue)? else {
        return None;
    };
    let flag = arg.split_whitespace().next().unwrap_or(arg).to_owned();
    let value = if value.is_empty() || value.chars().any(char::is_whitespace) {
        format!("'{value}'")
    } else {
        value.clone()
    };
    Some((flag, value))
}

fn valid_values(err: &clap::Error) -> Option<String> {
    match err.get(ContextKind::ValidValue)? {
        ContextValue::Strings(values) if !values.is_empty() => Some(values.join(", ")),
        _ => None,
    }
}

/// The arguments clap found missing (`<CMD>...`, `--function <NAME>`), comma-separated: clap
/// lists them on lines of their own, which the first line alone leaves out.
fn missing_arguments(err: &clap::Error) -> Option<String> {
    match err.get(ContextKind::InvalidArg)? {
        ContextValue::Strings(args) if !args.is_empty() => Some(args.join(", ")),
        _ => None,
    }
}

/// `line` and the subcommand's `--help` to read, as [`rendered_line`] ends its lines.
fn with_help(line: String, err: &clap::Error) -> String {
    let (_, help) = line_and_help(err);
    format!("{line} (see `{help}`)")
}

/// clap's message without its usage block: the first line, its tips, and the subcommand's
/// `--help` to read.
fn rendered_line(err: &clap::Error) -> String {
    let (line, help) = line_and_help(err);
    format!("{line} (see `{help}`)")
}

/// clap's first line with its tips, and the `--help` command of the subcommand it names.
fn line_and_help(err: &clap::Error) -> (String, String) {
    // `Display` of clap's styled text leaves the colours out.
    let text = err.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let mut help = "loopscope --help".to_owned();
    for l in lines {
        if let Some(tip) = l.strip_prefix("tip: ") {
            line.push_str("; ");
            line.push_str(tip);
        } else if let Some(usage) = l.strip_prefix("Usage: ") {
            let command: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            if !command.is_empty() {
                help = format!("{} --help", command.join(" "));
            }
        }
    }
    (line, help)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::Cli;

    fn error_of(args: &[&str]) -> String {
        let err = Cli::try_parse_from(args).unwrap_err();
        one_line(&err)
    }

    #[test]
    fn value_errors_name_the_flag_and_the_value() {
        let e = error_of(&["loopscope", "misses", "k.c", "--time-limit", "nan"]);
        assert_eq!(e, "--time-limit nan: expected a finite number");
        let e = error_of(&["loopscope", "misses", "k.c", "-D", "N=1e3"]);
        assert_eq!(e, "-D N=1e3: the value of `N` is not a 64-bit integer");
        let e = error_of(&["loopscope", "misses", "k.c", "-D", "a b=5"]);
        assert!(e.starts_with("-D 'a b=5': `a b` is not a name"), "{e}");
        let e = error_of(&["loopscope", "roofline", "k.c", "--traffic", "exact"]);
        assert_eq!(e, "--traffic exact: expected one of sim, model");
        let e = error_of(&[
            "loopscope",
            "roofline",
            "--counts",
            "mem=1",
            "--threads",
            "0",
        ]);
        assert!(e.starts_with("--threads 0: "), "{e}");
    }

    #[test]
    fn other_errors_are_one_line_with_their_tips() {
        let e = error_of(&["loopscope", "misses", "k.c", "--jsn"]);
        assert!(e.starts_with("unexpected argument '--jsn' found; "), "{e}");
        assert!(e.contains("'--json'"), "{e}");
        assert!(e.ends_with("(see `loopscope misses --help`)"), "{e}");
        let e = error_of(&["loopscope", "frobnicate"]);
        assert!(e.starts_with("unrecognized subcommand 'frobnicate'"), "{e}");
        for e in [e, error_of(&["loopscope", "misses"])] {
            assert!(!e.contains('\n') && !e.contains('\x1b'), "{e}");
        }
    }

    #[test]
    fn a_missing_argument_is_named() {
        let e = error_of(&["loopscope", "record"]);
        assert!(e.contains("not provided: <CMD>..."), "{e}");
        assert!(e.ends_with("(see `loopscope record --help`)"), "{e}");
        let e = error_of(&["loopscope", "blocks", "prog"]);
        assert!(e.contains("not provided: --function <NAME>"), "{e}");
        let e = error_of(&["loopscope", "loops"]);
        assert!(e.contains("not provided: <BINARY>"), "{e}");
    }

    #[test]
    fn help_and_version_are_not_errors() {
        for args in [["loopscope", "--help"], ["loopscope", "--version"]] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert!(!err.use_stderr());
        }
    }
}
