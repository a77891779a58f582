//! Quantities with units, as people read them.

/// A byte count with a binary prefix and at most two decimals: `64 B`, `32 KiB`, `35.75 MiB`.
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

/// A frequency in GHz with up to three decimals: `2.445 GHz`.
pub fn format_hz(hz: u64) -> String {
    let text = format!("{:.3}", hz as f64 / 1e9);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} GHz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(64), "64 B");
        assert_eq!(format_bytes(32768), "32 KiB");
        assert_eq!(format_bytes(1 << 20), "1 MiB");
        assert_eq!(format_bytes(37_486_592), "35.75 MiB");
        assert_eq!(format_bytes(u64::MAX), "16 EiB");
    }

    #[test]
    fn hertz() {
        assert_eq!(format_hz(2_400_000_000), "2.4 GHz");
        assert_eq!(format_hz(2_445_426_000), "2.445 GHz");
    }
}
