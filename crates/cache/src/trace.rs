//! External address traces: one access per line, `R|W hex-address size`.

use std::path::Path;

use crate::CacheError;

/// One access of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceAccess {
    /// True for `W`.
    pub write: bool,
    /// Byte address.
    pub addr: u64,
    /// Bytes accessed (at least 1).
    pub size_bytes: u32,
}

/// Parses one trace line (1-based `line_number`, for messages); blank lines and lines starting
/// with `#` give `None`.
pub fn parse_trace_line(
    text: &str,
    path: &Path,
    line_number: u64,
) -> Result<Option<TraceAccess>, CacheError> {
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let bad = |message: String| CacheError::Trace {
        path: path.to_owned(),
        line: line_number,
        message,
    };
    let mut fields = text.split_whitespace();
    let write = match fields.next() {
        Some("R" | "r") => false,
        Some("W" | "w") => true,
        Some(other) => return Err(bad(format!("expected `R` or `W`, found `{other}`"))),
        None => return Ok(None),
    };
    let addr_text = fields
        .next()
        .ok_or_else(|| bad("expected a hexadecimal address after R/W".into()))?;
    let digits = addr_text
        .strip_prefix("0x")
        .or_else(|| addr_text.strip_prefix("0X"))
        .unwrap_or(addr_text);
    let addr = u64::from_str_radix(digits, 16)
        .map_err(|_| bad(format!("`{addr_text}` is not a 64-bit hexadecimal address")))?;
    let size_text = fields
        .next()
        .ok_or_else(|| bad("expected the access size in bytes after the address".into()))?;
    let size_bytes: u32 = size_text
        .parse()
        .ok()
        .filter(|s| *s > 0 && *s <= 4096)
        .ok_or_else(|| {
            bad(format!(
                "size `{size_text}` is not a byte count between 1 and 4096"
            ))
        })?;
    if addr.checked_add(u64::from(size_bytes) - 1).is_none() {
        return Err(bad(
            "the access runs past the end of the 64-bit address space".into(),
        ));
    }
    if let Some(extra) = fields.next() {
        return Err(bad(format!("unexpected `{extra}` after the size")));
    }
    Ok(Some(TraceAccess {
        write,
        addr,
        size_bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_or_name_their_number() {
        let p = Path::new("t.trace");
        assert_eq!(
            parse_trace_line("W 0x7f00 8", p, 1).unwrap(),
            Some(TraceAccess {
                write: true,
                addr: 0x7f00,
                size_bytes: 8
            })
        );
        assert_eq!(parse_trace_line("r ff 4", p, 1).unwrap().unwrap().addr, 255);
        assert_eq!(parse_trace_line("  # c", p, 1).unwrap(), None);
        let e = parse_trace_line("X 10 8", p, 7).unwrap_err();
        assert_eq!(e.to_string(), "t.trace:7: expected `R` or `W`, found `X`");
        for bad in [
            "R",
            "R zz 8",
            "R 10",
            "R 10 0",
            "R 10 8 9",
            "R ffffffffffffffff 8",
        ] {
            assert!(parse_trace_line(bad, p, 1).is_err(), "{bad}");
        }
    }
}
