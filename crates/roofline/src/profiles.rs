//! The machines of the paper, as the spec's §6.1 lists them, so its tables can be reproduced.

use crate::{BandwidthFn, Ceilings, Level};

/// Names accepted by [`paper_profile`].
pub const PAPER_PROFILES: [&str; 3] = ["k-computer", "k-computer-base", "haswell-paper"];

/// A paper machine: `k-computer` (Ppeak 128, Peff 0.88, B_M 46, B_L2 146: the mixed-test
/// values of §5.3), `k-computer-base` (46.3 and 159.2 from the base tests, no Peff) or
/// `haswell-paper` (441.6, Peff 0.72, B_M 49, B_L3 331.8).
pub fn paper_profile(name: &str) -> Option<Ceilings> {
    let (peak, effective, levels): (f64, f64, &[(Level, f64)]) = match name {
        "k-computer" => (
            128.0,
            0.88 * 128.0,
            &[(Level::Cache(2), 146.0), (Level::Memory, 46.0)],
        ),
        "k-computer-base" => (
            128.0,
            128.0,
            &[(Level::Cache(2), 159.2), (Level::Memory, 46.3)],
        ),
        "haswell-paper" => (
            441.6,
            0.72 * 441.6,
            &[(Level::Cache(3), 331.8), (Level::Memory, 49.0)],
        ),
        _ => return None,
    };
    let source = format!("paper profile {name}");
    let mut ceilings = Ceilings::new(peak, effective, source.clone()).ok()?;
    for &(level, gb_per_s) in levels {
        ceilings
            .set_bandwidth(level, BandwidthFn::Constant { gb_per_s }, source.clone())
            .ok()?;
    }
    Some(ceilings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_profile_exists() {
        for name in PAPER_PROFILES {
            assert!(paper_profile(name).is_some(), "{name}");
        }
        assert!(paper_profile("cray-1").is_none());
    }
}
