//! Which cache sizes a kernel file's traffic is simulated with: the effective ones the probe
//! measured, or the ones the hardware advertises.
//!
//! They differ most in the last level. A guest on a 300 MiB-L3 Xeon sees a few MiB of it
//! (other tenants hold the rest), so a 128 MB triad simulated over the advertised L3 moves no
//! byte to memory and is called L3-bound, while it runs at memory's bandwidth. The bandwidths
//! come from the same probe run, measured at working sets inside the effective sizes, so the
//! traffic should be cut at the same sizes.
//!
//! For the last level the probe measures two sizes: where random loads start to miss (the
//! pointer chase) and up to where a stream still runs at the level's bandwidth (the triad
//! swept past it). A guest's L3 can hold a stream three or four times longer than a random
//! walk, and loop kernels mostly stream, so the streaming size is the one simulated.

use loopscope_cache::LevelConfig;
use loopscope_machine::{CacheKind, Machine, format_bytes};
use serde::Serialize;

/// The cache sizes a kernel file's traffic is simulated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheSizes {
    /// The machine file's measured (effective) sizes where it has them, else the advertised.
    Effective,
    /// The sizes the machine description advertises (sysfs, CPUID, the file's `[[caches]]`).
    Advertised,
    /// The levels given on the command line (`--cache`), as they are.
    Given,
}

/// One simulated level's size and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizedLevel {
    /// The level as simulated.
    pub config: LevelConfig,
    /// The advertised size, when the simulated one is the measured one and differs.
    pub advertised_bytes: Option<u64>,
    /// The pointer chase's size, when the simulated one is the streaming size of the last
    /// level (`streaming_size_bytes` in the machine file).
    pub random_loads_bytes: Option<u64>,
}

impl SizedLevel {
    /// `L3 4 MiB (measured; 32 MiB advertised)`, `L3 22.5 MiB (measured streaming; random
    /// loads 4 MiB; 32 MiB advertised)`, or `L1d 32 KiB`.
    pub fn describe(&self) -> String {
        let size = format!(
            "{} {}",
            self.config.name,
            format_bytes(self.config.size_bytes)
        );
        let advertised = |adv: u64| format!("{} advertised", format_bytes(adv));
        match (self.random_loads_bytes, self.advertised_bytes) {
            (Some(random), Some(adv)) => format!(
                "{size} (measured streaming; random loads {}; {})",
                format_bytes(random),
                advertised(adv)
            ),
            (None, Some(adv)) => format!("{size} (measured; {})", advertised(adv)),
            (_, None) => size,
        }
    }
}

/// The level number of a simulated level's name (`L2` → 2, `L1d` → 1).
fn level_number(name: &str) -> Option<u8> {
    let digits: String = name
        .strip_prefix(['L', 'l'])?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `levels` (built from `machine`'s advertised data caches) with each size replaced, under
/// [`CacheSizes::Effective`], by the data or unified size the probe measured for that level
/// (for the last measured level, the size a stream finds when the probe measured it, at most
/// the advertised size, else where random loads miss), rounded down to whole sets of the
/// level's ways and lines (at least one set).
/// Other choices, and levels without a measured size, stay as they are.
pub fn sized_levels(
    levels: &[LevelConfig],
    machine: &Machine,
    sizes: CacheSizes,
) -> Vec<SizedLevel> {
    let measured = machine
        .measured
        .as_ref()
        .filter(|_| sizes == CacheSizes::Effective)
        .map(|m| m.caches.as_slice())
        .unwrap_or_default();
    // The streaming size belongs to the last measured data level only.
    let last_measured = measured
        .iter()
        .filter(|c| c.kind != CacheKind::Instruction)
        .map(|c| c.level)
        .max();
    levels
        .iter()
        .map(|level| {
            let found = level_number(&level.name).and_then(|n| {
                measured
                    .iter()
                    .find(|c| c.level == n && c.kind != CacheKind::Instruction)
            });
            let mut config = level.clone();
            let mut advertised_bytes = None;
            let mut random_loads_bytes = None;
            if let Some(m) = found {
                let set_bytes = (level.ways * level.line_bytes).max(1);
                // A stream cannot keep more than the level holds.
                let streaming = m
                    .streaming_size_bytes
                    .filter(|_| Some(m.level) == last_measured)
                    .map(|s| s.min(level.size_bytes));
                let size = (streaming.unwrap_or(m.size_bytes) / set_bytes).max(1) * set_bytes;
                if size != level.size_bytes {
                    advertised_bytes = Some(level.size_bytes);
                    random_loads_bytes = streaming.map(|_| m.size_bytes);
                    config.size_bytes = size;
                }
            }
            SizedLevel {
                config,
                advertised_bytes,
                random_loads_bytes,
            }
        })
        .collect()
}

/// In words, which sizes were simulated: for the output's `cache_sizes`.
pub fn describe_sizes(
    sizes: CacheSizes,
    levels: &[SizedLevel],
    machine: Option<&Machine>,
) -> String {
    let has_measured = machine
        .and_then(|m| m.measured.as_ref())
        .is_some_and(|m| m.caches.iter().any(|c| c.kind != CacheKind::Instruction));
    match sizes {
        CacheSizes::Given => "given with --cache".to_owned(),
        CacheSizes::Advertised => "advertised (--caches advertised)".to_owned(),
        CacheSizes::Effective if !has_measured => {
            "advertised (the machine description has no measured sizes: run `loopscope probe --out FILE` and pass -m FILE)".to_owned()
        }
        CacheSizes::Effective if levels.iter().any(|l| l.advertised_bytes.is_some()) => {
            "effective, as the machine file's probe measured them (--caches advertised for the advertised ones)".to_owned()
        }
        CacheSizes::Effective => "effective, as measured (equal to the advertised ones)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_machine::{Measured, MeasuredCache};

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn measured(level: u8, kind: CacheKind, size_bytes: u64) -> MeasuredCache {
        MeasuredCache {
            level,
            kind,
            size_bytes,
            latency_cycles: 4.0,
            latency_ns: 1.3,
            advertised_size_bytes: None,
            confidence: 0.9,
            method: String::new(),
            streaming_size_bytes: None,
        }
    }

    fn levels() -> Vec<LevelConfig> {
        vec![
            LevelConfig::new("L1d", 32 * KIB, 8, 64).unwrap(),
            LevelConfig::new("L2", 512 * KIB, 8, 64).unwrap(),
            LevelConfig::new("L3", 32 * MIB, 16, 64).unwrap(),
        ]
    }

    fn machine() -> Machine {
        let mut machine = Machine::unknown();
        machine.measured = Some(Measured {
            caches: vec![
                measured(1, CacheKind::Data, 32 * KIB),
                measured(1, CacheKind::Instruction, 64 * KIB),
                measured(2, CacheKind::Unified, 768 * KIB),
                measured(3, CacheKind::Unified, 6 * MIB + 700 * KIB + 5),
            ],
            ..Measured::default()
        });
        machine
    }

    #[test]
    fn effective_sizes_replace_the_advertised_in_whole_sets() {
        let sized = sized_levels(&levels(), &machine(), CacheSizes::Effective);
        let sizes: Vec<u64> = sized.iter().map(|l| l.config.size_bytes).collect();
        // 6 MiB + 700 KiB rounded down to whole sets of 16 ways x 64 B.
        assert_eq!(sizes, vec![32 * KIB, 768 * KIB, 6 * MIB + 700 * KIB]);
        for l in &sized {
            l.config.validate().unwrap();
        }
        assert_eq!(sized[0].describe(), "L1d 32 KiB");
        assert_eq!(sized[2].advertised_bytes, Some(32 * MIB));
        assert!(
            sized[2].describe().contains("32 MiB advertised"),
            "{}",
            sized[2].describe()
        );
        let text = describe_sizes(CacheSizes::Effective, &sized, Some(&machine()));
        assert!(text.starts_with("effective"), "{text}");
    }

    #[test]
    fn the_last_levels_streaming_size_replaces_its_random_loads_size() {
        let mut machine = machine();
        let caches = &mut machine.measured.as_mut().unwrap().caches;
        caches[3].streaming_size_bytes = Some(22 * MIB + 300 * KIB);
        let sized = sized_levels(&levels(), &machine, CacheSizes::Effective);
        assert_eq!(sized[2].config.size_bytes, 22 * MIB + 300 * KIB);
        assert_eq!(sized[2].random_loads_bytes, Some(6 * MIB + 700 * KIB + 5));
        assert_eq!(
            sized[2].describe(),
            format!(
                "L3 {} (measured streaming; random loads {}; 32 MiB advertised)",
                format_bytes(22 * MIB + 300 * KIB),
                format_bytes(6 * MIB + 700 * KIB + 5)
            )
        );
        assert!(sized[1].random_loads_bytes.is_none());
        let advertised = sized_levels(&levels(), &machine, CacheSizes::Advertised);
        assert_eq!(advertised[2].config.size_bytes, 32 * MIB);
        // At most the advertised size; and only on the last measured level.
        let caches = &mut machine.measured.as_mut().unwrap().caches;
        caches[3].streaming_size_bytes = Some(40 * MIB);
        caches[2].streaming_size_bytes = Some(8 * MIB);
        let sized = sized_levels(&levels(), &machine, CacheSizes::Effective);
        assert_eq!(sized[2].config.size_bytes, 32 * MIB);
        assert_eq!(sized[2].advertised_bytes, None);
        assert_eq!(sized[1].config.size_bytes, 768 * KIB);
        assert!(sized[1].random_loads_bytes.is_none());
    }

    #[test]
    fn advertised_and_unmeasured_levels_stay_as_they_are() {
        let sized = sized_levels(&levels(), &machine(), CacheSizes::Advertised);
        assert!(sized.iter().zip(levels()).all(|(s, l)| s.config == l));
        let bare = Machine::unknown();
        let sized = sized_levels(&levels(), &bare, CacheSizes::Effective);
        assert!(sized.iter().all(|s| s.advertised_bytes.is_none()));
        let text = describe_sizes(CacheSizes::Effective, &sized, Some(&bare));
        assert!(text.starts_with("advertised (the machine"), "{text}");
    }

    #[test]
    fn level_numbers_come_from_the_names() {
        assert_eq!(level_number("L1d"), Some(1));
        assert_eq!(level_number("L3"), Some(3));
        assert_eq!(level_number("l2"), Some(2));
        assert_eq!(level_number("MEM"), None);
        assert_eq!(level_number("L"), None);
    }
}
