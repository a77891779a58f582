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
}

/// For each target size, the index of the knee matched to it: order-preserving, minimising
/// the summed `|log2(knee / target)|`, a level without a knee costing
/// [`MISSING_LEVEL_OCTAVES`].
pub fn match_knees(knees: &[u64], targets: &[u64]) -> Vec<Option<usize>> {
    let (k, t) = (knees.len(), targets.len());
    let dist = |i: usize, j: usize| (knees[j].max(1) as f64 / targets[i].max(1) as f64).log2().abs();
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
    curve.knees.iter().copied().filter(|k| k.before < 0.5 * memory).collect()
}

/// Names the knees of the `pointer_chase` curve (data levels) and of the `jump_chain` curve
/// (L1i).
pub fn assign_levels(machine: &Machine, curves: &[Curve]) -> Vec<LevelKnee> {
    let mut out = Vec::new();
    let curve = |name: &str| curves.iter().find(|c| c.name == name);
    if let Some(chase) = curve("pointer_chase") {
        let advertised: Vec<(u8, CacheKind, u64)> = machine
            .data_caches()
            .map(|c| (c.level, c.kind, c.size_bytes))
            .collect();
        let knees = cache_knees(chase);
        let sizes: Vec<u64> = knees.iter().map(|k| k.size_bytes).collect();
        if advertised.is_empty() {
            for (i, knee) in knees.iter().enumerate() {
                let level = i as u8 + 1;
                let kind = if level == 1 { CacheKind::Data } else { CacheKind::Unified };
                out.push(LevelKnee { level, kind, knee: *knee, advertised_bytes: None, method: "pointer chase" });
            }
        } else {
            let targets: Vec<u64> = advertised.iter().map(|a| a.2).collect();
            for (a, m) in advertised.iter().zip(match_knees(&sizes, &targets)) {
                if let Some(j) = m {
                    out.push(LevelKnee {
                        level: a.0,
                        kind: a.1,
                        knee: knees[j],
                        advertised_bytes: Some(a.2),
                        method: "pointer chase",
                    });
                }
            }
        }
    }
    // The random-order chain defeats next-line prefetch, so its L1i step is the cleaner one.
    if let Some(jumps) = curve("random_jump_chain").or_else(|| curve("jump_chain")) {
        let l1i = machine
            .caches
            .iter()
            .find(|c| c.level == 1 && c.kind == CacheKind::Instruction)
            .map(|c| c.size_bytes);
        let sizes: Vec<u64> = jumps.knees.iter().map(|k| k.size_bytes).collect();
        let pick = match l1i {
            Some(target) => match_knees(&sizes, &[target])[0],
            None => (!sizes.is_empty()).then_some(0),
        };
        if let Some(j) = pick {
            out.push(LevelKnee {
                level: 1,
                kind: CacheKind::Instruction,
                knee: jumps.knees[j],
                advertised_bytes: l1i,
                method: if jumps.name == "jump_chain" { "sequential jump chain" } else { "random jump chain" },
            });
        }
    }
    out
}

/// The measured caches, with latencies in ns and core cycles, and the memory latency: the
/// level above the last data knee.
pub fn level_caches(levels: &[LevelKnee], core_hz: f64) -> (Vec<MeasuredCache>, Option<f64>) {
    let caches = levels
        .iter()
        .map(|l| MeasuredCache {
            level: l.level,
            kind: l.kind,
            size_bytes: l.knee.size_bytes,
            latency_cycles: l.knee.before * core_hz / 1e9,
            latency_ns: l.knee.before,
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
        .collect();
    let memory = levels
        .iter()
        .filter(|l| l.kind != CacheKind::Instruction)
        .max_by_key(|l| l.knee.size_bytes)
        .map(|l| l.knee.after);
    (caches, memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn knees_match_levels_in_order_even_when_the_l3_is_much_smaller() {
        // A TLB knee at 256 KiB, a 32 KiB L1, a 512 KiB L2 and an effective L3 of 8 MiB
        // where 32 MiB is advertised.
        let knees = [32 * K, 256 * K, 512 * K, 8192 * K];
        let targets = [32 * K, 512 * K, 32768 * K];
        assert_eq!(match_knees(&knees, &targets), vec![Some(0), Some(2), Some(3)]);
    }

    #[test]
    fn missing_knees_leave_levels_empty() {
        assert_eq!(match_knees(&[], &[32 * K]), vec![None]);
        assert_eq!(match_knees(&[40 * K], &[32 * K, 1024 * K]), vec![Some(0), None]);
        assert_eq!(match_knees(&[40 * K], &[]), Vec::<Option<usize>>::new());
    }
}
