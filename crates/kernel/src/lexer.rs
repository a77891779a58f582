//! Tokens of the kernel subset, each with its line and column.

use crate::KernelError;

/// A position in the kernel text (1-based line and column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Punct(&'static str),
    End,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("`{name}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::End => "the end of the file".to_owned(),
        }
    }
}

/// One token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

// Longest first, so that `+=` is not read as `+` `=`.
const PUNCTS: [&str; 27] = [
    "+=", "-=", "*=", "/=", "++", "--", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]",
    "{", "}", ";", ",", "=", "+", "-", "*", "/", "<", ">",
];

struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    pos: Pos,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.pos.line += 1;
            self.pos.column = 1;
        } else {
            self.pos.column += 1;
        }
        Some(c)
    }
}

/// Splits `text` into tokens; comments and `#pragma` lines are skipped.
pub(crate) fn tokenize(text: &str, origin: &str) -> Result<Vec<Token>, KernelError> {
    let mut cur = Cursor {
        chars: text.chars().peekable(),
        pos: Pos { line: 1, column: 1 },
    };
    let mut rest = text;
    let mut tokens = Vec::new();
    let err = |pos: Pos, message: String| KernelError::Syntax {
        origin: origin.to_owned(),
        line: pos.line,
        column: pos.column,
        message,
    };
    let mut at_line_start = true;
    while let Some(c) = cur.peek() {
        let pos = cur.pos;
        if c == '\n' {
            at_line_start = true;
            cur.bump();
            rest = &rest[1..];
            continue;
        }
        if c.is_whitespace() {
            cur.bump();
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if rest.starts_with("//") || (at_line_start && rest.starts_with("#pragma")) {
            let n = rest.find('\n').unwrap_or(rest.len());
            for _ in rest[..n].chars() {
                cur.bump();
            }
            rest = &rest[n..];
            continue;
        }
        at_line_start = false;
        if rest.starts_with("/*") {
            let Some(n) = rest[2..].find("*/") else {
                return Err(err(pos, "comment not closed: expected `*/`".into()));
            };
            let n = n + 4;
            for _ in rest[..n].chars() {
                cur.bump();
            }
            rest = &rest[n..];
            continue;
        }
        if c == '#' {
            return Err(err(
                pos,
                "preprocessor directives are outside the kernel subset (give constants with -D NAME=VALUE)".into(),
            ));
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let n = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token {
                tok: Tok::Ident(rest[..n].to_owned()),
                pos,
            });
            advance(&mut cur, &mut rest, n);
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            let (tok, n) = number(rest).map_err(|m| err(pos, m))?;
            tokens.push(Token { tok, pos });
            advance(&mut cur, &mut rest, n);
            continue;
        }
        if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            tokens.push(Token {
                tok: Tok::Punct(p),
                pos,
            });
            advance(&mut cur, &mut rest, p.len());
            continue;
        }
        return Err(err(pos, format!("unexpected character `{c}`")));
    }
    tokens.push(Token {
        tok: Tok::End,
        pos: cur.pos,
    });
    Ok(tokens)
}

fn advance(cur: &mut Cursor<'_>, rest: &mut &str, bytes: usize) {
    for _ in rest[..bytes].chars() {
        cur.bump();
    }
    *rest = &rest[bytes..];
}

/// Reads a C number literal at the start of `text`: its token and length in bytes.
fn number(text: &str) -> Result<(Tok, usize), String> {
    let bytes = text.as_bytes();
    let mut n = 0;
    let digits = |n: &mut usize| {
        while *n < bytes.len() && bytes[*n].is_ascii_digit() {
            *n += 1;
        }
    };
    if text.starts_with("0x") || text.starts_with("0X") {
        n = 2;
        while n < bytes.len() && bytes[n].is_ascii_hexdigit() {
            n += 1;
        }
        let value = i64::from_str_radix(&text[2..n], 16).map_err(|_| {
            format!(
                "hexadecimal constant `{}` is not a 64-bit integer",
                &text[..n]
            )
        })?;
        return Ok((Tok::Int(value), n + int_suffix(&bytes[n..])));
    }
    digits(&mut n);
    let mut is_float = false;
    if n < bytes.len() && bytes[n] == b'.' {
        is_float = true;
        n += 1;
        digits(&mut n);
    }
    if n < bytes.len() && (bytes[n] == b'e' || bytes[n] == b'E') {
        let mut m = n + 1;
        if m < bytes.len() && (bytes[m] == b'+' || bytes[m] == b'-') {
            m += 1;
        }
        if m < bytes.len() && bytes[m].is_ascii_digit() {
            is_float = true;
            n = m;
            digits(&mut n);
        } else {
            return Err(format!(
                "malformed exponent in `{}`: expected digits",
                &text[..m]
            ));
        }
    }
    let literal = &text[..n];
    if is_float {
        let value: f64 = literal
            .parse()
            .map_err(|_| format!("malformed floating-point constant `{literal}`"))?;
        let suffix = usize::from(n < bytes.len() && matches!(bytes[n], b'f' | b'F' | b'l' | b'L'));
        return Ok((Tok::Float(value), n + suffix));
    }
    let value: i64 = literal
        .parse()
        .map_err(|_| format!("integer constant `{literal}` does not fit in 64 bits"))?;
    Ok((Tok::Int(value), n + int_suffix(&bytes[n..])))
}

fn int_suffix(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| matches!(b, b'u' | b'U' | b'l' | b'L'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        tokenize(text, "t.c")
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn numbers_punctuation_and_comments() {
        assert_eq!(
            toks("a[i] += 0.5e1f*b; // x\n/* y */ 0x10"),
            vec![
                Tok::Ident("a".into()),
                Tok::Punct("["),
                Tok::Ident("i".into()),
                Tok::Punct("]"),
                Tok::Punct("+="),
                Tok::Float(5.0),
                Tok::Punct("*"),
                Tok::Ident("b".into()),
                Tok::Punct(";"),
                Tok::Int(16),
                Tok::End
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let t = tokenize("x\n  /* a\n b */ yy", "t.c").unwrap();
        assert_eq!(t[1].pos, Pos { line: 3, column: 7 });
    }

    #[test]
    fn errors_name_the_position() {
        let e = tokenize("a\n  $", "k.c").unwrap_err();
        assert_eq!(e.to_string(), "k.c:2:3: unexpected character `$`");
        assert!(tokenize("/* open", "k.c").is_err());
        assert!(tokenize("#include <x>", "k.c").is_err());
        assert!(tokenize("1e+", "k.c").is_err());
        assert!(tokenize("99999999999999999999", "k.c").is_err());
    }
}
