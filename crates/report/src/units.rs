//! Quantities with units, as people read them.

/// A byte count with a binary prefix and at most two decimals: `64 B`, `32 KiB`, `35.75 MiB`.
pub use loopscope_machine::format_bytes;

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
    fn hertz() {
        assert_eq!(format_hz(2_400_000_000), "2.4 GHz");
        assert_eq!(format_hz(2_445_426_000), "2.445 GHz");
    }
}
