//! Quantities as people write them: `32K`, `32.00 kB`, `1 MiB`, `2.4 GHz`.

/// Parses a byte size: a number with an optional binary prefix (`K`, `k`, `KB`, `kB`, `KiB`, `M`,
/// `MB`, `MiB`, `G`, ...; all powers of 1024, as sysfs and kerncraft mean them) and an optional
/// `B`. Returns `None` for anything else, or a size that is not a whole number of bytes.
pub fn parse_size_bytes(text: &str) -> Option<u64> {
    let (number, unit) = split_number(text)?;
    let unit = unit.trim();
    let unit = unit.strip_suffix('B').unwrap_or(unit);
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    let scale: f64 = match unit {
        "" => 1.0,
        "k" | "K" => 1024.0,
        "m" | "M" => 1024.0 * 1024.0,
        "g" | "G" => 1024.0 * 1024.0 * 1024.0,
        "t" | "T" => 1024.0f64.powi(4),
        _ => return None,
    };
    // A plain byte count must be whole; prefixed sizes ("21.12 kB") are printed rounded, so
    // they are rounded to the nearest byte.
    if scale == 1.0 && number.fract() != 0.0 {
        return None;
    }
    let bytes = (number * scale).round();
    (0.0..1.8e19).contains(&bytes).then_some(bytes as u64)
}

/// Parses a frequency such as `2.4 GHz`, `2400 MHz` or `2400000000` into Hz.
pub fn parse_frequency_hz(text: &str) -> Option<u64> {
    let (number, unit) = split_number(text)?;
    let scale = match unit.trim() {
        "" | "Hz" => 1.0,
        "kHz" => 1e3,
        "MHz" => 1e6,
        "GHz" => 1e9,
        _ => return None,
    };
    let hz = number * scale;
    (hz.is_finite() && (0.0..1.8e19).contains(&hz)).then_some(hz.round() as u64)
}

/// A byte count with a binary prefix and at most two decimals, as [`parse_size_bytes`] reads
/// it back: `64 B`, `32 KiB`, `35.75 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {}", UNITS[unit])
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number: f64 = text[..end].parse().ok()?;
    number.is_finite().then_some((number, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("32K"), Some(32768));
        assert_eq!(parse_size_bytes("32768K"), Some(32 << 20));
        assert_eq!(parse_size_bytes("32.00 kB"), Some(32768));
        assert_eq!(parse_size_bytes("1.00 MB"), Some(1 << 20));
        assert_eq!(parse_size_bytes("27.5 MB"), Some(28_835_840));
        assert_eq!(parse_size_bytes("35.75 MiB"), Some(37_486_592));
        assert_eq!(parse_size_bytes("64 B"), Some(64));
        assert_eq!(parse_size_bytes("64"), Some(64));
        assert_eq!(parse_size_bytes("lots"), None);
        assert_eq!(parse_size_bytes("3 parsecs"), None);
        assert_eq!(parse_size_bytes("0.3 B"), None);
    }

    #[test]
    fn sizes_written() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(64), "64 B");
        assert_eq!(format_bytes(32768), "32 KiB");
        assert_eq!(format_bytes(1 << 20), "1 MiB");
        assert_eq!(format_bytes(37_486_592), "35.75 MiB");
        assert_eq!(format_bytes(u64::MAX), "16 EiB");
        assert_eq!(
            parse_size_bytes(&format_bytes(37_486_592)),
            Some(37_486_592)
        );
    }

    #[test]
    fn frequencies() {
        assert_eq!(parse_frequency_hz("2.4 GHz"), Some(2_400_000_000));
        assert_eq!(parse_frequency_hz("2300 MHz"), Some(2_300_000_000));
        assert_eq!(parse_frequency_hz("fast"), None);
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,24}") {
            let _ = parse_size_bytes(&text);
            let _ = parse_frequency_hz(&text);
        }
    }
}
