//! The `KEY=VALUE,KEY=VALUE` syntax shared by `--counts`, `--bandwidth` and `--volume`, with
//! 1-based columns for error messages, and the plural of a counted noun for descriptions.

use crate::{Level, RooflineError};

/// One `KEY=VALUE` pair.
pub(crate) struct Pair<'a> {
    /// The key, trimmed.
    pub key: &'a str,
    /// The value, trimmed.
    pub value: &'a str,
    /// Column of the pair's first character.
    pub column: usize,
    /// Column of the value's first character.
    pub value_column: usize,
}

/// A syntax error of `input` at `column`.
pub(crate) fn syntax(input: &str, column: usize, message: String) -> RooflineError {
    RooflineError::Syntax {
        input: input.to_owned(),
        column,
        message,
    }
}

/// Splits `text` into pairs; `expected` describes the syntax in errors. Keys given twice
/// (ignoring case) and pairs without `=` are errors.
pub(crate) fn pairs<'a>(
    input: &str,
    text: &'a str,
    expected: &str,
) -> Result<Vec<Pair<'a>>, RooflineError> {
    let mut out: Vec<Pair<'a>> = Vec::new();
    let mut column = 1;
    for pair in text.split(',') {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(syntax(input, column, format!("`{pair}`: {expected}")));
        };
        if out.iter().any(|p| p.key.eq_ignore_ascii_case(key.trim())) {
            return Err(syntax(
                input,
                column,
                format!("`{}` is given twice", key.trim()),
            ));
        }
        out.push(Pair {
            key: key.trim(),
            value: value.trim(),
            column,
            value_column: column + key.len() + 1,
        });
        column += pair.len() + 1;
    }
    Ok(out)
}

/// Parses per-level pairs (`L2=...,MEM=...`) with `value` turning each value into a `T`;
/// a level named twice (`mem` and `memory`) is an error.
pub(crate) fn level_pairs<T>(
    input: &str,
    text: &str,
    expected: &str,
    value: impl Fn(&str) -> Option<T>,
) -> Result<Vec<(Level, T)>, RooflineError> {
    let mut out: Vec<(Level, T)> = Vec::new();
    for pair in pairs(input, text, expected)? {
        let level: Level = pair
            .key
            .parse()
            .map_err(|e: String| syntax(input, pair.column, format!("{e}; {expected}")))?;
        if out.iter().any(|(l, _)| *l == level) {
            return Err(syntax(
                input,
                pair.column,
                format!("{level} is given twice"),
            ));
        }
        let parsed = value(pair.value).ok_or_else(|| {
            syntax(
                input,
                pair.value_column,
                format!("`{}` is not valid here; {expected}", pair.value),
            )
        })?;
        out.push((level, parsed));
    }
    Ok(out)
}

/// `1 thread`, `2 threads`: a count with its noun.
pub(crate) fn plural(count: u32, noun: &str) -> String {
    format!("{count} {noun}{}", if count == 1 { "" } else { "s" })
}
