//! Naming knees: which knee of which curve is which cache level, matched against what the
//! machine description advertises (the measured size may differ, notably an effective L3).

use loopscope_machine::{CacheKind, Machine, MeasuredCache};

use crate::knee::Knee;
use crate::run::Curve;

/// Cost of leaving an advertised level without a knee, in octaves of mismatch.
const MISSING_LEVEL_OCTAVES: f64 = 10.0;

/// A knee named as a cache level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelKnee {
    /// Cache level.
    pub level: u8,
    /// Data/unified (from the pointer chase) or instruction (from the jump chain).
    pub kind: CacheKind,
    /// The knee.
    pub knee: Knee,
    /// Advertised size of this level, when the machine description has one.
    pub advertised_bytes: Option<u64>,
    /// Which curve it came from.
    pub method: &'static str,
    /// Median time per unit of the curve between the previous level's knee and this one.
    pub latency_ns: f64,
}

/// The named levels and the latency beyond the last of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Levels {
    /// Knees named as cache levels.
    pub knees: Vec<LevelKnee>,
    /// Median load time beyond the last data level, in nanoseconds.
    pub memory_latency_ns: Option<f64>,
}

/// Median of the curve's values at sizes in `lo..=hi`, or `fallback` when there are none.
fn median_between(curve: &Curve, lo: u64, hi: u64, fallback: f64) -> f64 {
    let mut values: Vec<f64> = curve
        .points
        .iter()
        .filter(|p| p.size_bytes >= lo && p.size_bytes <= hi)
        .map(|p| p.value)
        .collect();
    if values.is_empty() {
        return fallback;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// For each target size, the index of the knee matched to it: order-preserving, minimising
/// the summed `|log2(knee / target)| - log2(ratio) / 2` (a big step is more likely a cache
/// level than a small one nearby), a level without a knee costing
/// [`MISSING_LEVEL_OCTAVES`]. Knees are (size in bytes, level ratio).
pub fn match_knees(knees: &[(u64, f64)], targets: &[u64]) -> Vec<Option<usize>> {
    let (k, t) = (knees.len(), targets.len());
    let dist = |i: usize, j: usize| {
        (knees[j].0.max(1) as f64 / targets[i].max(1) as f64)
            .log2()
            .abs()
            - knees[j].1.max(1.0).log2() / 2.0
    };
    // cost[i][j]: best cost of targets[i..] using knees[j..].
    let mut cost = vec![vec![0.0f64; k + 1]; t + 1];
    for i in (0..t).rev() {
        cost[i][k] = MISSING_LEVEL_OCTAVES * (t - i) as f64;
        for j in (0..k).rev() {
            let take = dist(i, j) + cost[i + 1][j + 1];
            let skip_knee = cost[i][j + 1];
            let skip_level = MISSING_LEVEL_OCTAVES + cost[i + 1][j];
            cost[i][j] = take.min(skip_knee).min(skip_level);
        }
    }
    let mut out = vec![None; t];
    let (mut i, mut j) = (0, 0);
    while i < t && j < k {
        if (cost[i][j] - (dist(i, j) + cost[i + 1][j + 1])).abs() < 1e-12 {
            out[i] = Some(j);
            i += 1;
            j += 1;
        } else if (cost[i][j] - cost[i][j + 1]).abs() < 1e-12 {
            j += 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The knees of a latency curve that can end a cache level: those that start below half of
/// the final (memory) level. Later steps (TLB reach, host paging in a virtual machine) are
/// memory-side effects.
pub fn cache_knees(curve: &Curve) -> Vec<Knee> {
    let memory = curve.knees.last().map_or(f64::INFINITY, |k| k.after);
    curve
        .knees
        .iter()
        .copied()
        .filter(|k| k.before < 0.5 * memory)
        .collect()
}

/// Names the knees of the `pointer_chase` curve (data levels) and of the `jump_chain` curve
/// (L1i).
pub fn assign_levels(machine: &Machine, curves: &[Curve]) -> Levels {
    let mut out = Vec::new();
    let mut memory_latency_ns = None;
    let curve = |name: &str| curves.iter().find(|c| c.name == name);
    if let Some(chase) = curve("pointer_chase") {
        let advertised: Vec<(u8, CacheKind, u64)> = machine
            .data_caches()
            .map(|c| (c.level, c.kind, c.size_bytes))
            .collect();
        let knees = cache_knees(chase);
        let sizes: Vec<(u64, f64)> = knees.iter().map(|k| (k.size_bytes, k.ratio)).collect();
        let named: Vec<(u8, CacheKind, Option<u64>, Knee)> = if advertised.is_empty() {
            knees
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let level = i as u8 + 1;
                    (
                        level,
                        if level == 1 {
                            CacheKind::Data
                        } else {
                            CacheKind::Unified
                        },
                        None,
                        *k,
                    )
                })
                .collect()
        } else {
            let targets: Vec<u64> = advertised.iter().map(|a| a.2).collect();
            advertised
                .iter()
                .zip(match_knees(&sizes, &targets))
                .filter_map(|(a, m)| m.map(|j| (a.0, a.1, Some(a.2), knees[j])))
                .collect()
        };
        let mut from = 0;
        for (level, kind, advertised_bytes, knee) in named {
            out.push(LevelKnee {
                level,
                kind,
                knee,
                advertised_bytes,
                method: "pointer chase",
                latency_ns: median_between(chase, from, knee.rise_start_bytes, knee.before),
            });
            from = knee.end_bytes;
        }
        if from > 0 {
            let last = chase.knees.last().map_or(f64::NAN, |k| k.after);
            memory_latency_ns = Some(median_between(chase, from, u64::MAX, last));
        }
    }
    // The random-order chain defeats next-line prefetch, so its L1i step is the cleaner one.
    if let Some(jumps) = curve("random_jump_chain").or_else(|| curve("jump_chain")) {
        let l1i = machine
            .caches
            .iter()
            .find(|c| c.level == 1 && c.kind == CacheKind::Instruction)
            .map(|c| c.size_bytes);
        let sizes: Vec<(u64, f64)> = jumps
            .knees
            .iter()
            .map(|k| (k.size_bytes, k.ratio))
            .collect();
        let pick = match l1i {
            Some(target) => match_knees(&sizes, &[target])[0],
            None => (!sizes.is_empty()).then_some(0),
        };
        if let Some(j) = pick {
            out.push(LevelKnee {
                level: 1,
                kind: CacheKind::Instruction,
                knee: jumps.knees[j],
                latency_ns: median_between(
                    jumps,
                    0,
                    jumps.knees[j].rise_start_bytes,
                    jumps.knees[j].before,
                ),
                advertised_bytes: l1i,
                method: if jumps.name == "jump_chain" {
                    "sequential jump chain"
                } else {
                    "random jump chain"
                },
            });
        }
    }
    Levels {
        knees: out,
        memory_latency_ns,
    }
}

/// The measured caches, with latencies in ns and core cycles.
pub fn level_caches(levels: &[LevelKnee], core_hz: f64) -> Vec<MeasuredCache> {
    levels
        .iter()
        .map(|l| MeasuredCache {
            level: l.level,
            kind: l.kind,
            size_bytes: l.knee.size_bytes,
            latency_cycles: l.latency_ns * core_hz / 1e9,
            latency_ns: l.latency_ns,
            advertised_size_bytes: l.advertised_bytes,
            confidence: l.knee.confidence,
            method: match l.kind {
                CacheKind::Instruction => format!(
                    "{}: in-place rewritten code, one taken jump per 64-byte line; latency is time per line",
                    l.method
                ),
                _ => format!("{}: random cyclic permutation of 64-byte lines", l.method),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn knees_match_levels_in_order_even_when_the_l3_is_much_smaller() {
        // A TLB knee at 256 KiB, a 32 KiB L1, a 512 KiB L2 and an effective L3 of 8 MiB
        // where 32 MiB is advertised.
        let knees = [
            (32 * K, 3.0),
            (256 * K, 1.3),
            (512 * K, 3.0),
            (8192 * K, 10.0),
        ];
        let targets = [32 * K, 512 * K, 32768 * K];
        assert_eq!(
            match_knees(&knees, &targets),
            vec![Some(0), Some(2), Some(3)]
        );
        // Between two knees equally far from the target, the bigger step wins.
        let knees = [(362 * K, 2.3), (724 * K, 1.4)];
        assert_eq!(match_knees(&knees, &[512 * K]), vec![Some(0)]);
    }

    #[test]
    fn missing_knees_leave_levels_empty() {
        assert_eq!(match_knees(&[], &[32 * K]), vec![None]);
        assert_eq!(
            match_knees(&[(40 * K, 2.0)], &[32 * K, 1024 * K]),
            vec![Some(0), None]
        );
        assert_eq!(
            match_knees(&[(40 * K, 2.0)], &[]),
            Vec::<Option<usize>>::new()
        );
    }
}
