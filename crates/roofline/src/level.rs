//! Memory-hierarchy levels: `L1`, `L2`, ..., `MEM`, ordered from the core outwards.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// One level of the memory hierarchy; orders innermost first, memory last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Cache level `n` (1 for L1).
    Cache(u8),
    /// Main memory.
    Memory,
}

impl Level {
    /// True for main memory.
    pub fn is_memory(self) -> bool {
        self == Level::Memory
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Cache(n) => write!(f, "L{n}"),
            Level::Memory => f.write_str("MEM"),
        }
    }
}

impl Serialize for Level {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl FromStr for Level {
    type Err = String;

    /// Accepts `L1`..`L9` (an optional `d` suffix, any case), `MEM`, `memory`, `DRAM`.
    fn from_str(text: &str) -> Result<Level, String> {
        let lower = text.trim().to_ascii_lowercase();
        if matches!(lower.as_str(), "mem" | "memory" | "dram") {
            return Ok(Level::Memory);
        }
        let digits = lower
            .strip_prefix('l')
            .map(|rest| rest.strip_suffix('d').unwrap_or(rest));
        match digits.and_then(|d| d.parse::<u8>().ok()) {
            Some(n) if (1..=9).contains(&n) => Ok(Level::Cache(n)),
            _ => Err(format!("`{text}` is not a level (expected L1..L9 or MEM)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_outwards() {
        for name in ["L1", "L2", "L3", "MEM"] {
            assert_eq!(name.parse::<Level>().unwrap().to_string(), name);
        }
        assert_eq!("l1d".parse::<Level>(), Ok(Level::Cache(1)));
        assert_eq!("memory".parse::<Level>(), Ok(Level::Memory));
        assert!("L0".parse::<Level>().is_err());
        assert!("L10".parse::<Level>().is_err());
        assert!(Level::Cache(1) < Level::Cache(3) && Level::Cache(3) < Level::Memory);
    }
}
