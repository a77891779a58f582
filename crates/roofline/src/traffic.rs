//! What a kernel asks of the machine: bytes through each level and floating-point operations.
//!
//! [`Traffic`] is the model's only kernel input, so any source can feed it: the paper's
//! per-iteration reference counts ([`Counts`], parsed by [`parse_counts`]), or per-level traffic
//! from the cache model or simulator of a kernel file.

use serde::Serialize;

use crate::pairs::{pairs, syntax};
use crate::{Level, RooflineError};

/// Bytes one level must deliver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelTraffic {
    /// The level.
    pub level: Level,
    /// Bytes through this level over [`Traffic::iterations`] iterations, including the bytes
    /// that pass through it on their way from outer levels (the paper's D_L2 = 8(m+n)).
    pub bytes: u64,
    /// The access volume a volume-dependent bandwidth is evaluated at (eq. 14); `None` means
    /// [`Self::bytes`].
    pub volume_bytes: Option<u64>,
    /// Of [`Self::bytes`], those stored, when known: L1 (registers to L1) has separate load
    /// and store ports, timed apart when the level has a store bandwidth.
    pub store_bytes: Option<u64>,
}

/// References served from L1, split by the spacing of §2.4; they are not timed, only checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct L1Refs {
    /// Bytes of references with short difference spacing (±1, ±2 elements).
    pub short_bytes: u64,
    /// Bytes of references with long difference spacing (a new stream cluster).
    pub long_bytes: u64,
    /// Whether the loads are SIMD loads, which the paper's thresholds assume.
    pub simd_loads: bool,
}

/// A kernel's demands over `iterations` iterations of its innermost loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// The timed levels, innermost first, each at most once.
    pub levels: Vec<LevelTraffic>,
    /// Floating-point operations (a multiply-add counts 2).
    pub flops: u64,
    /// How many iterations `levels` and `flops` cover (1 for per-iteration counts).
    pub iterations: u64,
    /// L1 references for the applicability conditions, when known.
    pub l1: Option<L1Refs>,
    /// Bytes of one counted reference (8 for the paper's double-precision words), for display.
    pub word_bytes: u64,
    /// Floating-point additions that each wait for the one before (in-order sums through the
    /// innermost loop), over all iterations; chains that advance side by side count once.
    pub chained_adds: u64,
    /// Of `chained_adds`, the operations on recurrences through memory (a statement reading
    /// back what an earlier iteration of its innermost loop stored), each timed as an addition.
    pub recurrence_adds: u64,
}

impl Traffic {
    /// Whether most of the chained operations are on recurrences through memory rather than
    /// in-order sums (what would lift the chain differs).
    pub fn chain_is_recurrence(&self) -> bool {
        self.recurrence_adds > 0 && self.recurrence_adds.saturating_mul(2) >= self.chained_adds
    }

    /// Checks the invariants the models rely on: at least one level or some FLOPs, levels
    /// sorted and distinct, a positive iteration count.
    pub fn validate(&self) -> Result<(), RooflineError> {
        if self.iterations == 0 {
            return Err(RooflineError::Invalid(
                "iterations must be at least 1".into(),
            ));
        }
        if self.word_bytes == 0 {
            return Err(RooflineError::Invalid(
                "the word size must be at least 1 byte".into(),
            ));
        }
        if self.levels.windows(2).any(|w| w[0].level >= w[1].level) {
            return Err(RooflineError::Invalid(
                "levels must be listed once each, innermost first".into(),
            ));
        }
        if self.flops == 0 && self.levels.iter().all(|l| l.bytes == 0) {
            return Err(RooflineError::Invalid(
                "the kernel moves no bytes and does no floating-point work: nothing to predict"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The traffic through `level`, if it is timed.
    pub fn level(&self, level: Level) -> Option<&LevelTraffic> {
        self.levels.iter().find(|l| l.level == level)
    }
}

/// The paper's per-iteration counts (§2.5 step 1): references served from each level, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// References served from each level (`mem` = the paper's m or nM, `l2` = n or nL2),
    /// innermost first. A stored array counts 2 (write-allocate).
    pub served_words: Vec<(Level, u64)>,
    /// Floating-point operations per iteration (the paper's l).
    pub flops: u64,
    /// L1 references with short spacing (nL1s), when given.
    pub l1_short_words: Option<u64>,
    /// L1 references with long spacing (nL1l), when given.
    pub l1_long_words: Option<u64>,
    /// Bytes per counted reference (8).
    pub word_bytes: u64,
    /// Trip count of the loop, to report total times (1 when not given).
    pub iterations: u64,
    /// Whether loads are SIMD loads (the L1 thresholds assume they are).
    pub simd_loads: bool,
    /// Dependent additions per iteration (an in-order sum's links; 0 when not given).
    pub chained_adds: u64,
}

impl Counts {
    /// The traffic these counts imply: a level delivers its own references and every reference
    /// served from beyond it ("data accessed from memory also passes through L2", §5.2).
    pub fn traffic(&self) -> Traffic {
        let levels = self
            .served_words
            .iter()
            .map(|&(level, _)| {
                let words: u64 = self
                    .served_words
                    .iter()
                    .filter(|(other, _)| *other >= level)
                    .map(|(_, w)| w)
                    .sum();
                LevelTraffic {
                    level,
                    bytes: words * self.word_bytes * self.iterations,
                    volume_bytes: None,
                    store_bytes: None,
                }
            })
            .collect();
        let l1 = (self.l1_short_words.is_some() || self.l1_long_words.is_some()).then(|| L1Refs {
            short_bytes: self.l1_short_words.unwrap_or(0) * self.word_bytes * self.iterations,
            long_bytes: self.l1_long_words.unwrap_or(0) * self.word_bytes * self.iterations,
            simd_loads: self.simd_loads,
        });
        Traffic {
            levels,
            flops: self.flops * self.iterations,
            iterations: self.iterations,
            l1,
            word_bytes: self.word_bytes,
            chained_adds: self.chained_adds * self.iterations,
            recurrence_adds: 0,
        }
    }
}

const COUNTS_EXPECTED: &str = "expected KEY=INTEGER pairs separated by commas, with KEY one of \
    mem, l1..l9, flops, l1s, l1l, chain, word, iterations (example: mem=3,l2=6,flops=78)";

/// Parses `--counts`: `mem=3,l2=6,flops=78`, optionally `l1s=`, `l1l=` (L1 references by
/// spacing), `l1=` (a timed L1), `chain=` (dependent additions per iteration), `word=` (bytes
/// per reference, default 8), `iterations=`.
/// Errors name the column of the offending pair.
pub fn parse_counts(text: &str) -> Result<Counts, RooflineError> {
    let mut counts = Counts {
        served_words: Vec::new(),
        flops: 0,
        l1_short_words: None,
        l1_long_words: None,
        word_bytes: 8,
        iterations: 1,
        simd_loads: true,
        chained_adds: 0,
    };
    for pair in pairs("--counts", text, COUNTS_EXPECTED)? {
        let error = |column: usize, message: String| syntax("--counts", column, message);
        let number: u64 = pair.value.parse().map_err(|_| {
            error(
                pair.value_column,
                format!(
                    "`{}` is not a non-negative integer ({COUNTS_EXPECTED})",
                    pair.value
                ),
            )
        })?;
        match pair.key.to_ascii_lowercase().as_str() {
            "flops" => counts.flops = number,
            "l1s" => counts.l1_short_words = Some(number),
            "l1l" => counts.l1_long_words = Some(number),
            "chain" => counts.chained_adds = number,
            "word" | "iterations" if number == 0 => {
                return Err(error(
                    pair.value_column,
                    format!("`{}` must be at least 1", pair.key),
                ));
            }
            "word" => counts.word_bytes = number,
            "iterations" => counts.iterations = number,
            other => {
                let level: Level = other.parse().map_err(|_| {
                    error(
                        pair.column,
                        format!("unknown key `{}`: {COUNTS_EXPECTED}", pair.key),
                    )
                })?;
                if counts.served_words.iter().any(|(l, _)| *l == level) {
                    return Err(error(pair.column, format!("{level} is given twice")));
                }
                counts.served_words.push((level, number));
            }
        }
    }
    counts.served_words.sort_by_key(|(level, _)| *level);
    finish_counts(counts)
}

fn finish_counts(counts: Counts) -> Result<Counts, RooflineError> {
    let words: u64 = counts.served_words.iter().map(|(_, w)| w).sum();
    let overflow = words
        .checked_mul(counts.word_bytes)
        .and_then(|b| b.checked_mul(counts.iterations))
        .is_none()
        || counts.flops.checked_mul(counts.iterations).is_none()
        || counts.chained_adds.checked_mul(counts.iterations).is_none();
    if overflow {
        return Err(RooflineError::Invalid(
            "--counts: the counts times the word size and iterations overflow 64 bits".into(),
        ));
    }
    if counts.served_words.is_empty() {
        return Err(RooflineError::Invalid(
            "--counts names no level: give at least one of mem=, l2=, l3= (references per \
             iteration served from that level)"
                .into(),
        ));
    }
    if words == 0 && counts.flops == 0 {
        return Err(RooflineError::Invalid(
            "--counts: every count is zero; the kernel must move data or do floating-point work"
                .into(),
        ));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paper_counts_give_inclusive_traffic() {
        let counts = parse_counts("mem=3,l2=6,flops=78").unwrap();
        let traffic = counts.traffic();
        assert_eq!(traffic.flops, 78);
        let bytes: Vec<(Level, u64)> = traffic.levels.iter().map(|l| (l.level, l.bytes)).collect();
        assert_eq!(bytes, [(Level::Cache(2), 72), (Level::Memory, 24)]);
        assert!(traffic.l1.is_none());
        traffic.validate().unwrap();
    }

    #[test]
    fn l1_spacing_and_iterations_scale() {
        let counts = parse_counts("MEM=5, L2=21, l1s=12, l1l=6, flops=43, iterations=10").unwrap();
        let traffic = counts.traffic();
        assert_eq!(traffic.level(Level::Cache(2)).unwrap().bytes, 26 * 8 * 10);
        let l1 = traffic.l1.unwrap();
        assert_eq!((l1.short_bytes, l1.long_bytes), (960, 480));
        assert_eq!(traffic.flops, 430);
        assert_eq!(traffic.chained_adds, 0);
        let chained = parse_counts("mem=1,flops=2,chain=1,iterations=10").unwrap();
        assert_eq!(chained.traffic().chained_adds, 10);
    }

    #[test]
    fn errors_name_the_column() {
        let err = parse_counts("mem=3,l2=x").unwrap_err();
        assert!(
            err.to_string().starts_with("--counts:10: `x` is not"),
            "{err}"
        );
        let err = parse_counts("mem=3,bogus=1").unwrap_err();
        assert!(
            err.to_string().starts_with("--counts:7: unknown key"),
            "{err}"
        );
        assert!(parse_counts("mem=-3,flops=1").is_err());
        assert!(parse_counts("mem=3,mem=4").is_err());
        assert!(parse_counts("flops=4").is_err());
        assert!(parse_counts("mem=0,flops=0").is_err());
        assert!(parse_counts("mem=1,word=0").is_err());
        assert!(parse_counts("mem=18446744073709551615,flops=1").is_err());
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in ".{0,60}") {
            let _ = parse_counts(&text);
        }

        #[test]
        fn valid_counts_always_validate(m in 0u64..1000, n in 0u64..1000, l in 1u64..1000) {
            let counts = parse_counts(&format!("mem={m},l2={n},flops={l}")).unwrap();
            prop_assert!(counts.traffic().validate().is_ok());
        }
    }
}
