//! Naming knees: which knee of which curve is which cache level. Data levels are the pointer
//! chase's knees matched in order to the levels the machine description advertises (the
//! measured size may differ, notably an effective L3); the L1i is the capacity of a cache model
//! fitted to the indirect jump chain, or, where that fit is refused, the NOP body's first big
//! step (counted in bytes), or the jump chains' when the NOP body has none below a quarter of
//! the L2 ([`l1i_knee`]).

use loopscope_machine::{CacheKind, Machine, MeasuredCache, format_bytes};

use crate::knee::{Knee, Point, miss_fraction, plausible_size};
use crate::placement::{
    CapacityFit, FitShape, Placement, Replacement, fit_capacity, replacement_from_walks,
};
use crate::run::{Curve, INDIRECT_CURVE};

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
    /// For a rise smeared by random page placement, the model fit that sized it.
    pub ramp_fit: Option<RampFit>,
    /// For an L1i sized from the indirect jump chain, the model fit that sized it.
    pub code_fit: Option<CodeFit>,
}

/// The evidence behind an L1i sized by [`fit_capacity`] over the indirect jump chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodeFit {
    /// The better of the two policies' fits.
    pub fit: CapacityFit,
    /// Residual of the other policy's best fit: how clearly the curve chose.
    pub other_rms_ns: f64,
}

/// The evidence behind a level sized by [`fit_capacity`] rather than by its knee.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampFit {
    /// The fit.
    pub fit: CapacityFit,
    /// Share of the cyclic walk's extra time the walk in new orders kept (the replacement
    /// policy's evidence, see [`replacement_from_walks`]).
    pub shuffled_share: f64,
    /// The knee's own estimate, before the fit.
    pub knee_bytes: u64,
}

/// Name of the curve of walks in a new random order every round, measured at a few sizes of
/// each private level's rise.
pub const SHUFFLED_CURVE: &str = "pointer_chase_rounds";

/// Re-sizes a private level whose rise is what random page placement predicts (misses creeping
/// in from well below the capacity): the replacement policy from the walks in new
/// orders at sizes inside the rise (against the level's latency `hit_ns`), then [`fit_capacity`] over the chase between the levels
/// around it. `None` (the knee stands) without the ways, the walks, a good fit, or when
/// contiguous placement fits better (then the step is sharp and the knee's own rule holds).
fn ramp_fit(
    chase: &Curve,
    shuffled: &Curve,
    (knee, hit_ns): (&Knee, f64),
    (advertised_bytes, ways): (u64, usize),
    window: (u64, u64),
) -> Option<RampFit> {
    let pairs: Vec<(f64, f64)> = shuffled
        .points
        .iter()
        .filter(|p| (knee.rise_start_bytes..=knee.end_bytes).contains(&p.size_bytes))
        .filter_map(|p| {
            let cyclic = chase.points.iter().find(|c| c.size_bytes == p.size_bytes)?;
            Some((cyclic.value, p.value))
        })
        .collect();
    let (replacement, share) = replacement_from_walks(&pairs, hit_ns)?;
    let window = (window.0, window.1.min(advertised_bytes.saturating_mul(4)));
    let fit = fit_capacity(
        &chase.points,
        window,
        (advertised_bytes, ways),
        replacement,
        FitShape {
            placements: &[Placement::RandomPages, Placement::Contiguous],
            step_below: true,
        },
    )?;
    // A fit worse than a tenth of the step explains nothing.
    if fit.placement != Placement::RandomPages || fit.rms_ns > 0.1 * fit.miss_penalty_ns {
        return None;
    }
    Some(RampFit {
        fit,
        shuffled_share: share,
        knee_bytes: knee.size_bytes,
    })
}

/// Sizes at which to measure walks in new orders: up to three points of each private knee's
/// rise (ending below an eighth of `llc_bytes`) whose miss fraction is nearest a half,
/// within 0.3 to 0.7.
pub fn shuffled_walk_sizes(chase: &Curve, llc_bytes: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    for knee in cache_knees(chase)
        .iter()
        .filter(|k| k.end_bytes <= llc_bytes / 8)
    {
        let mut inside: Vec<(f64, u64)> = chase
            .points
            .iter()
            .filter(|p| (knee.rise_start_bytes..=knee.end_bytes).contains(&p.size_bytes))
            .map(|p| {
                (
                    miss_fraction(p.value, knee.before, knee.after),
                    p.size_bytes,
                )
            })
            .filter(|(m, _)| (0.3..=0.7).contains(m))
            .map(|(m, s)| ((m - 0.5).abs(), s))
            .collect();
        inside.sort_by(|a, b| a.0.total_cmp(&b.0));
        sizes.extend(inside.iter().take(3).map(|&(_, s)| s));
    }
    sizes.sort_unstable();
    sizes
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
/// level than a small one nearby), a level without a knee costing `MISSING_LEVEL_OCTAVES`.
/// Knees are (size in bytes, level ratio).
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

/// Names the knees of the `pointer_chase` curve (data levels) and of the code curves (L1i,
/// see [`l1i_knee`]).
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
        for (i, &(level, kind, advertised_bytes, mut knee)) in named.iter().enumerate() {
            let latency_ns = median_between(chase, from, knee.rise_start_bytes, knee.before);
            // The last level is shared: its effective size is what it is.
            let next_rise = named.get(i + 1).map(|n| n.3.rise_start_bytes);
            let ways = machine
                .data_caches()
                .find(|c| c.level == level)
                .map(|c| c.ways as usize);
            let ramp_fit = match (next_rise, advertised_bytes, ways, curve(SHUFFLED_CURVE)) {
                (Some(next), Some(adv), Some(ways), Some(shuffled)) => ramp_fit(
                    chase,
                    shuffled,
                    (&knee, latency_ns),
                    (adv, ways),
                    (from, next),
                ),
                _ => None,
            };
            if let Some(r) = &ramp_fit {
                let c = r.fit.capacity_bytes;
                knee.size_bytes = plausible_size(c, c, 1.0 / 8.0).unwrap_or(c);
            }
            out.push(LevelKnee {
                level,
                kind,
                knee,
                advertised_bytes,
                method: "pointer chase",
                latency_ns,
                ramp_fit,
                code_fit: None,
            });
            from = knee.end_bytes;
        }
        if from > 0 {
            let last = chase.knees.last().map_or(f64::NAN, |k| k.after);
            memory_latency_ns = Some(median_between(chase, from, u64::MAX, last));
        }
    }
    let l2_bytes = out
        .iter()
        .find(|l| l.level == 2 && l.kind != CacheKind::Instruction)
        .map(|l| l.knee.size_bytes);
    if let Some(l1i) = l1i_knee(machine, curves, l2_bytes) {
        out.push(l1i);
    }
    Levels {
        knees: out,
        memory_latency_ns,
    }
}

/// Smallest level ratio of an instruction curve's knee that can be the L1i: leaving the L1i
/// sends fetch to L2, which at least halves the rate of straight-line code and costs a jump
/// chain an L2 latency per line. Smaller steps before it are front-end throughput limits
/// (op cache to decoders; 1.3x at 7 and 24 KiB in a Zen 3's NOP body).
pub const MIN_L1I_RATIO: f64 = 1.5;

/// The jump chains, random order first (ties in size go to it: it defeats next-line
/// prefetch).
const JUMP_CURVES: [(&str, &str); 2] = [
    ("random_jump_chain", "random jump chain"),
    ("jump_chain", "sequential jump chain"),
];

/// Widest rise (octaves from its start to its end) an L1i candidate may have: leaving a cache
/// is a step, while a drift over many octaves (the NOP body's per-byte time creeping up 1.3x
/// from 8 to 40 KiB on a Zen 3, then again at the L2) is front-end throughput.
pub const MAX_L1I_RISE_OCTAVES: f64 = 2.0;

/// Octaves from the start of a knee's rise to its end.
fn rise_octaves(knee: &Knee) -> f64 {
    (knee.end_bytes.max(1) as f64 / knee.rise_start_bytes.max(1) as f64).log2()
}

/// The first knee of at least [`MIN_L1I_RATIO`] of the curve `name` whose rise is no wider
/// than [`MAX_L1I_RISE_OCTAVES`].
fn first_big_knee<'a>(curves: &'a [Curve], name: &str) -> Option<(&'a Curve, Knee)> {
    let curve = curves.iter().find(|c| c.name == name)?;
    let knee = curve
        .knees
        .iter()
        .find(|k| k.ratio >= MIN_L1I_RATIO && rise_octaves(k) <= MAX_L1I_RISE_OCTAVES)?;
    Some((curve, *knee))
}

/// The L1i, from the code curves; `l2_bytes` is the measured L2 (data side), when known.
///
/// First the indirect jump chain's model fit (`indirect_fit`), which needs the advertised
/// size and ways. Without it, the NOP body's first big step is counted in bytes: on a Zen 4 guest it stays at 32 KiB
/// with 4-, 8- and 16-byte NOPs, where an op cache's 6.75K ops would put it at 27, 54 and
/// 108 KiB. It is the L1i unless a sequential prefetcher hides that step (Intel), which
/// leaves the L2's as the first; an L1 is at most a quarter of its L2, so a first step past
/// a quarter of the measured L2 is taken for the L2's. The jump chains step where a branch
/// or op structure in front of the L1i runs out, counted in lines: Zen 4's op cache holds
/// one jump per entry over 48 KiB (768 entries), its predictor takes one jump per cycle up
/// to 16 KiB in some runs and not others; so they are used only without that NOP step. Of
/// their first big steps the sharper (narrower rise, in octaves) is then taken: leaving a
/// cache is a step, while a rise spread over an octave is a sharer's code coming and going
/// or a structure counted in other units (on a Zen 3 guest one chain's first step drifts to
/// 48 or 64 KiB in some runs while the other stays sharp at 32 KiB).
/// The latency is a jump chain's time per line below the size found.
pub fn l1i_knee<'a>(
    machine: &Machine,
    curves: &'a [Curve],
    l2_bytes: Option<u64>,
) -> Option<LevelKnee> {
    let advertised = machine
        .caches
        .iter()
        .find(|c| c.level == 1 && c.kind == CacheKind::Instruction);
    let per_line = |fallback: &'a Curve| {
        curves
            .iter()
            .find(|c| c.name == "random_jump_chain" || c.name == "jump_chain")
            .unwrap_or(fallback)
    };
    if let Some(cache) = advertised
        && let Some(indirect) = curves.iter().find(|c| c.name == INDIRECT_CURVE)
        && let Some(code_fit) =
            indirect_fit(indirect, (cache.size_bytes, cache.ways as usize), l2_bytes)
    {
        let knee = fitted_knee(indirect, &code_fit.fit);
        let per_line = per_line(indirect);
        let fallback = per_line.knees.first().map_or(knee.before, |k| k.before);
        return Some(LevelKnee {
            level: 1,
            kind: CacheKind::Instruction,
            latency_ns: median_between(per_line, 0, knee.cliff_lo_bytes, fallback),
            knee,
            advertised_bytes: Some(cache.size_bytes),
            method: "indirect jump chain",
            ramp_fit: None,
            code_fit: Some(code_fit),
        });
    }
    let nop = first_big_knee(curves, "nop_body")
        .filter(|(_, k)| l2_bytes.is_none_or(|l2| k.size_bytes <= l2 / 4))
        .map(|(c, k)| (c, "NOP body", k));
    let (curve, method, knee) = nop.or_else(|| {
        JUMP_CURVES
            .iter()
            .filter_map(|&(name, method)| first_big_knee(curves, name).map(|(c, k)| (c, method, k)))
            .min_by(|a, b| rise_octaves(&a.2).total_cmp(&rise_octaves(&b.2)))
    })?;
    let per_line = per_line(curve);
    let below = knee.rise_start_bytes.min(knee.cliff_lo_bytes);
    let fallback = per_line.knees.first().map_or(knee.before, |k| k.before);
    Some(LevelKnee {
        level: 1,
        kind: CacheKind::Instruction,
        knee,
        advertised_bytes: advertised.map(|c| c.size_bytes),
        method,
        latency_ns: median_between(per_line, 0, below, fallback),
        ramp_fit: None,
        code_fit: None,
    })
}

/// Largest residual of an L1i fit, as a share of its miss penalty: clean runs on a Zen 3
/// guest leave 0.06 to 0.08, runs in which a sharer slowed a stretch of sizes 0.11 to 0.12
/// (and put the L1i at 22 or 37 KiB).
const MAX_L1I_RESIDUAL_SHARE: f64 = 0.1;

/// Smallest miss penalty of an L1i fit, as a share of the hit time: a miss costs at least an
/// L2 access on top of a mispredicted jump (1.8 to 2.0 ns on 6.2 ns on a Zen 3).
const MIN_L1I_PENALTY_SHARE: f64 = 0.1;

/// The L1i's capacity from the indirect jump chain: every set sees its lines in the same
/// cyclic order every call (see `icache::interleaved_order`), so the time per line is a hit
/// time plus a miss penalty times the miss fraction of a cache of capacity `C`, zero up to
/// `C` under any replacement policy and rising past it by the policy's own rule: all misses
/// for LRU, a ramp for random replacement. Both policies are fitted with contiguous
/// placement (the L1i is indexed inside the page) and no step below the capacity (an ITLB
/// reaches 256 KiB or more) over the curve up to four times the advertised size (and a
/// quarter of the measured L2); the better fit stands when its residual is small and its
/// step real.
fn indirect_fit(
    curve: &Curve,
    (advertised_bytes, ways): (u64, usize),
    l2_bytes: Option<u64>,
) -> Option<CodeFit> {
    let hi = (4 * advertised_bytes).min(l2_bytes.map_or(u64::MAX, |l2| l2 / 4));
    let fit = |replacement| {
        fit_capacity(
            &curve.points,
            (0, hi),
            (advertised_bytes, ways),
            replacement,
            FitShape {
                placements: &[Placement::Contiguous],
                step_below: false,
            },
        )
    };
    let (lru, random) = (fit(Replacement::Lru)?, fit(Replacement::Random)?);
    let (best, other) = if random.rms_ns < lru.rms_ns {
        (random, lru)
    } else {
        (lru, random)
    };
    (best.rms_ns <= MAX_L1I_RESIDUAL_SHARE * best.miss_penalty_ns
        && best.miss_penalty_ns >= MIN_L1I_PENALTY_SHARE * best.hit_ns)
        .then_some(CodeFit {
            fit: best,
            other_rms_ns: other.rms_ns,
        })
}

/// The knee a fitted capacity stands for: the cache-like size within an eighth of an octave
/// of the fit, hit and hit-plus-penalty either side, the rise starting at the last point
/// below the capacity (no misses before it, in this model) and running to the fit's end.
fn fitted_knee(curve: &Curve, fit: &CapacityFit) -> Knee {
    let c = fit.capacity_bytes;
    let sizes = || curve.points.iter().map(|p: &Point| p.size_bytes);
    let below = sizes().filter(|&s| s <= c).max();
    let above = sizes().filter(|&s| s > c).min();
    let before = fit.hit_ns;
    let after = fit.hit_ns + fit.miss_penalty_ns;
    Knee {
        size_bytes: plausible_size(c, c, 1.0 / 8.0).unwrap_or(c),
        cliff_lo_bytes: below.unwrap_or(c),
        cliff_hi_bytes: above.unwrap_or(c),
        rise_start_bytes: below.unwrap_or(c),
        rise_mid_bytes: below.unwrap_or(c),
        end_bytes: curve.points.last().map_or(c, |p| p.size_bytes).max(c),
        before,
        after,
        ratio: after / before,
        confidence: (1.0 - fit.rms_ns / fit.miss_penalty_ns).clamp(0.0, 1.0),
    }
}

/// Whether `bytes` is a size caches are built in: `2^k` or `3 * 2^k`.
fn is_cache_like(bytes: u64) -> bool {
    bytes.is_power_of_two() || (bytes.is_multiple_of(3) && (bytes / 3).is_power_of_two())
}

/// The size a machine file records for `level`, and a note when it is not the knee's own.
/// Knees are snapped to a cache-like size (`2^k` or `3 * 2^k`) within an eighth of an octave;
/// one that found none (a rise that ends just past the slack, a fit between two sizes) would
/// make the models simulate a cache of odd sets, so the advertised size stands in when the
/// knee lies within an octave of it, else the cache-like size nearest the knee (an effective
/// size far below the advertised one, as a shared last level in a guest).
pub fn written_size(level: &LevelKnee) -> (u64, Option<String>) {
    let knee = level.knee.size_bytes;
    if knee == 0 || is_cache_like(knee) || Some(knee) == level.advertised_bytes {
        return (knee, None);
    }
    let name = format!("L{}{}", level.level, level.kind.suffix());
    let octaves = |a: u64, b: u64| ((a as f64) / (b as f64)).log2().abs();
    if let Some(advertised) = level.advertised_bytes.filter(|&a| octaves(knee, a) <= 1.0) {
        return (
            advertised,
            Some(format!(
                "{name}: the step at {} is no cache-like size (2^k or 3·2^k within an eighth of \
                 an octave); the advertised {} is recorded and modelled",
                format_bytes(knee),
                format_bytes(advertised)
            )),
        );
    }
    let nearest = (6..48u32)
        .flat_map(|k| [1u64 << k, 3u64 << (k - 1)])
        .min_by(|&a, &b| octaves(knee, a).total_cmp(&octaves(knee, b)))
        .unwrap_or(knee);
    let advertised = level.advertised_bytes.map_or(String::new(), |a| {
        format!(" (advertised {})", format_bytes(a))
    });
    (
        nearest,
        Some(format!(
            "{name}: the step at {} is no cache-like size (2^k or 3·2^k within an eighth of an \
             octave); the nearest, {}, is recorded and modelled{advertised}",
            format_bytes(knee),
            format_bytes(nearest)
        )),
    )
}

/// The measured caches, with latencies in ns and core cycles.
pub fn level_caches(levels: &[LevelKnee], core_hz: f64) -> Vec<MeasuredCache> {
    levels
        .iter()
        .map(|l| MeasuredCache {
            level: l.level,
            kind: l.kind,
            size_bytes: written_size(l).0,
            latency_cycles: l.latency_ns * core_hz / 1e9,
            latency_ns: l.latency_ns,
            advertised_size_bytes: l.advertised_bytes,
            confidence: l.knee.confidence,
            method: match l.kind {
                CacheKind::Instruction if l.code_fit.is_some() => format!(
                    "{}: lines of indirect jumps through a table in a new order every call, each page offset's lines in a fixed order; size from a cache model fitted to its rise; latency is a jump chain's time per line",
                    l.method
                ),
                CacheKind::Instruction => format!(
                    "{}: in-place rewritten code, first step of at least 1.5x (NOP body unless it is the L2's); latency is a jump chain's time per line",
                    l.method
                ),
                _ if l.ramp_fit.is_some() => format!(
                    "{}: random cyclic permutation of 64-byte lines; size from a model of random 4 KiB page placement fitted to its rise",
                    l.method
                ),
                _ => format!("{}: random cyclic permutation of 64-byte lines", l.method),
            },
            streaming_size_bytes: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture_curves;
    use crate::placement::Replacement;
    use loopscope_machine::Cache;

    const K: u64 = 1024;

    fn knee_of(level: u8, kind: CacheKind, size: u64, advertised: Option<u64>) -> LevelKnee {
        LevelKnee {
            level,
            kind,
            knee: Knee {
                size_bytes: size,
                cliff_lo_bytes: size,
                cliff_hi_bytes: size,
                rise_start_bytes: size,
                rise_mid_bytes: size,
                end_bytes: size,
                before: 1.0,
                after: 3.0,
                ratio: 3.0,
                confidence: 0.5,
            },
            advertised_bytes: advertised,
            method: "pointer chase",
            latency_ns: 1.0,
            ramp_fit: None,
            code_fit: None,
        }
    }

    #[test]
    fn unsnapped_knees_are_written_as_the_advertised_or_a_cache_like_size() {
        // A loaded `--quick` run's L1d step at 34.94 KiB: the advertised 32 KiB is written.
        let (size, note) = written_size(&knee_of(1, CacheKind::Data, 35776, Some(32 * K)));
        assert_eq!(size, 32 * K);
        let note = note.unwrap();
        assert!(
            note.starts_with("L1d: the step at 34.94 KiB is no cache-like size"),
            "{note}"
        );
        assert!(
            note.ends_with("the advertised 32 KiB is recorded and modelled"),
            "{note}"
        );
        // Cache-like sizes stand, with no note.
        for size in [32 * K, 48 * K, 768 * K, 4 << 20] {
            assert_eq!(
                written_size(&knee_of(2, CacheKind::Unified, size, Some(K))),
                (size, None)
            );
        }
        // An effective last level far below the advertised one: the nearest cache-like size.
        let (size, note) = written_size(&knee_of(3, CacheKind::Unified, 5_300_000, Some(32 << 20)));
        assert_eq!(size, 6 << 20, "{note:?}");
        assert!(
            note.unwrap()
                .ends_with("the nearest, 6 MiB, is recorded and modelled (advertised 32 MiB)")
        );
        let (size, note) = written_size(&knee_of(3, CacheKind::Unified, 5_300_000, None));
        assert!(is_cache_like(size) && note.is_some());
    }

    proptest::proptest! {
        #[test]
        fn every_written_size_is_cache_like_or_advertised(
            size in 1u64..(1 << 40),
            advertised in proptest::option::of(1u64..(1 << 40)),
        ) {
            let (written, note) = written_size(&knee_of(2, CacheKind::Unified, size, advertised));
            proptest::prop_assert!(is_cache_like(written) || Some(written) == advertised);
            proptest::prop_assert_eq!(note.is_none(), written == size);
        }
    }

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

    /// Curves of one full run on a Zen 4 guest (L1d and L1i 32 KiB, L2 1 MiB 8-way), knees
    /// found afresh.
    fn zen4_curves() -> Vec<Curve> {
        fixture_curves(include_str!("../testdata/zen4_curves.json"))
    }

    /// A machine with `caches`: (level, kind, size, ways), 64-byte lines.
    fn machine_with(caches: &[(u8, CacheKind, u64, u64)]) -> Machine {
        let mut machine = Machine::unknown();
        for &(level, kind, size, ways) in caches {
            machine
                .caches
                .push(Cache::new(level, kind, size, 64, ways, 1));
        }
        machine
    }

    fn zen4_machine() -> Machine {
        machine_with(&[
            (1, CacheKind::Data, 32 * K, 8),
            (1, CacheKind::Instruction, 32 * K, 8),
            (2, CacheKind::Unified, 1024 * K, 8),
            (3, CacheKind::Unified, 32768 * K, 16),
        ])
    }

    fn zen3_machine() -> Machine {
        machine_with_l1i(32 * K, 8)
    }

    /// The Zen 3 guest's caches with another L1i.
    fn machine_with_l1i(size_bytes: u64, ways: u64) -> Machine {
        machine_with(&[
            (1, CacheKind::Data, 32 * K, 8),
            (1, CacheKind::Instruction, size_bytes, ways),
            (2, CacheKind::Unified, 512 * K, 8),
            (3, CacheKind::Unified, 32768 * K, 16),
        ])
    }

    #[test]
    fn a_zen4_run_gives_its_l1d_l1i_and_l2() {
        let curves = zen4_curves();
        let levels = assign_levels(&zen4_machine(), &curves);
        let size = |level: u8, kind: CacheKind| {
            levels
                .knees
                .iter()
                .find(|l| l.level == level && l.kind == kind)
                .map(|l| (l.knee.size_bytes, l.method))
        };
        assert_eq!(size(1, CacheKind::Data), Some((32 * K, "pointer chase")));
        assert_eq!(size(1, CacheKind::Instruction), Some((32 * K, "NOP body")));
        // Misses creep in from 300 KiB (43 % at 912 KiB), the step is at 1 MiB.
        assert_eq!(
            size(2, CacheKind::Unified),
            Some((1024 * K, "pointer chase"))
        );
        // The jump chains' first steps are the op cache's reach (768 entries of 64 bytes).
        for name in ["random_jump_chain", "jump_chain"] {
            let curve = curves.iter().find(|c| c.name == name).unwrap();
            assert_eq!(curve.knees[0].size_bytes, 48 * K, "{name}");
        }
    }

    #[test]
    fn a_zen3_run_gives_its_l1d_l1i_and_l2() {
        // A Zen 3 guest (family 0x19 model 0x1: L1d and L1i 32 KiB, L2 512 KiB 8-way, 32 MiB
        // L3 shared with other guests), its chase stopped on the memory plateau at 13 MiB.
        let curves = fixture_curves(include_str!("../testdata/zen3_curves.json"));
        let levels = assign_levels(&zen3_machine(), &curves);
        let size = |level: u8, kind: CacheKind| {
            levels
                .knees
                .iter()
                .find(|l| l.level == level && l.kind == kind)
                .map(|l| l.knee.size_bytes)
        };
        assert_eq!(size(1, CacheKind::Data), Some(32 * K));
        assert_eq!(size(1, CacheKind::Instruction), Some(32 * K));
        assert_eq!(size(2, CacheKind::Unified), Some(512 * K));
        // The L3 the guest sees is a few MiB of the 32 advertised.
        let l3 = size(3, CacheKind::Unified).unwrap();
        assert!((3 * 1024 * K..=8 * 1024 * K).contains(&l3), "{l3}");
        assert!(levels.memory_latency_ns.unwrap() > 100.0);
    }

    #[test]
    fn a_zen3_l2_smeared_by_random_pages_is_sized_by_the_placement_model() {
        // A Zen 3 guest whose host backs it with 4 KiB pages: the L2's misses creep in from
        // 300 KiB and half the loads miss near 700 KiB; the knee alone gave 341 KiB. Walks in
        // new orders keep all of the cyclic walk's extra time: random replacement.
        let curves = fixture_curves(include_str!("../testdata/zen3_random_pages.json"));
        let levels = assign_levels(&zen3_machine(), &curves);
        let l2 = levels.knees.iter().find(|l| l.level == 2).unwrap();
        let fit = l2.ramp_fit.expect("the ramp is fitted");
        assert_eq!(l2.knee.size_bytes, 512 * K, "{fit:?}");
        assert_eq!(fit.knee_bytes, 349_952);
        assert_eq!(fit.fit.replacement, Replacement::Random);
        assert_eq!(fit.fit.placement, Placement::RandomPages);
        assert!(fit.shuffled_share > 0.9, "{fit:?}");
        assert!(fit.fit.rms_ns < 0.05 * fit.fit.miss_penalty_ns, "{fit:?}");
        let l1i = levels
            .knees
            .iter()
            .find(|l| l.kind == CacheKind::Instruction);
        assert_eq!(l1i.unwrap().knee.size_bytes, 32 * K);
        // Without the walks in new orders the policy is unknown and the knee stands.
        let without: Vec<Curve> = curves
            .into_iter()
            .filter(|c| c.name != SHUFFLED_CURVE)
            .collect();
        let levels = assign_levels(&zen3_machine(), &without);
        let l2 = levels.knees.iter().find(|l| l.level == 2).unwrap();
        assert!(l2.ramp_fit.is_none());
        assert_eq!(l2.knee.size_bytes, 349_952);
    }

    #[test]
    fn zen4_chases_whose_l2_rise_is_a_ramp_give_1_mib() {
        // Under others' builds the L2 rise is a ramp: TLB and shared-cache misses from 288
        // KiB, half the loads missing near 1 MiB, nine tenths near 2 MiB, and an L3 plateau
        // climbing from 13 to 16 ns. The rule before gave 1.26 MiB, 683 KiB and 1.09 MiB.
        let curves = fixture_curves(include_str!("../testdata/zen4_ramp_chases.json"));
        assert_eq!(curves.len(), 3);
        for (i, chase) in curves.into_iter().enumerate() {
            let levels = assign_levels(&zen4_machine(), &[chase]);
            let l2 = levels.knees.iter().find(|l| l.level == 2).unwrap();
            assert_eq!(l2.knee.size_bytes, 1024 * K, "curve {i}: {:?}", l2.knee);
            let l1 = levels.knees.iter().find(|l| l.level == 1).unwrap();
            assert_eq!(l1.knee.size_bytes, 32 * K, "curve {i}");
        }
    }

    #[test]
    fn a_loaded_zen4_chase_keeps_its_l2_knee() {
        // Under load the L2 step smears into a ramp from 300 KiB to 2 MiB, no cliff: its knee
        // must stay a knee of its own (not be sized in the L1's tail and merged into it).
        let curves = fixture_curves(include_str!("../testdata/zen4_loaded_chase.json"));
        let knees = &curves[0].knees;
        let sizes: Vec<u64> = knees.iter().map(|k| k.size_bytes / K).collect();
        assert_eq!(sizes.len(), 3, "{knees:?}");
        assert_eq!(sizes[0], 32);
        assert_eq!(sizes[1], 1024, "{knees:?}");
    }

    fn code_curve(name: &str, knees: &[(u64, f64)]) -> Curve {
        Curve {
            name: name.into(),
            unit: "ns per line".into(),
            points: Vec::new(),
            knees: knees
                .iter()
                .map(|&(size, ratio)| Knee {
                    size_bytes: size * K,
                    cliff_lo_bytes: size * K,
                    cliff_hi_bytes: size * K + 1024,
                    rise_start_bytes: size * K,
                    rise_mid_bytes: size * K,
                    end_bytes: size * K + 1024,
                    before: 1.0,
                    after: ratio,
                    ratio,
                    confidence: 0.9,
                })
                .collect(),
        }
    }

    #[test]
    fn the_l1i_is_the_nop_step_unless_it_is_the_l2s() {
        let machine = Machine::unknown();
        let size = |curves: &[Curve], l2: Option<u64>| {
            let l = l1i_knee(&machine, curves, l2).unwrap();
            (l.knee.size_bytes / K, l.method)
        };
        // Zen 4, a run where the predictor took a jump per cycle up to 16 KiB.
        let zen4 = [
            code_curve("random_jump_chain", &[(16, 3.6), (256, 9.0)]),
            code_curve("jump_chain", &[(16, 4.7), (512, 7.7)]),
            code_curve("nop_body", &[(8, 1.3), (32, 2.2)]),
        ];
        assert_eq!(size(&zen4, Some(1024 * K)), (32, "NOP body"));
        // Intel: the NOP body's first big step is the L2's; the chains give the L1i.
        let intel = [
            code_curve("random_jump_chain", &[(36, 2.5), (66, 2.0)]),
            code_curve("jump_chain", &[(32, 2.2)]),
            code_curve("nop_body", &[(1536, 1.8)]),
        ];
        // Both chains' steps are equally sharp here; the random chain's is a hair narrower
        // (36 KiB, 1.125x).
        assert_eq!(size(&intel, Some(1024 * K)), (36, "random jump chain"));
        assert_eq!(size(&intel[..2], None), (36, "random jump chain"));
        // A chain whose first step drifts over an octave loses to the sharp one.
        let mut drifting = intel[0].clone();
        drifting.knees[0].rise_start_bytes = 20 * K;
        let zen3 = [drifting, intel[1].clone()];
        assert_eq!(size(&zen3, None), (32, "sequential jump chain"));
        assert!(l1i_knee(&machine, &intel[2..], Some(1024 * K)).is_none());
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

    /// `curve` under one name: an indirect jump chain from 2 to 128 KiB, 24 sizes per
    /// octave, timed as a hit plus a miss penalty times the modelled miss fraction.
    fn modelled_chain(capacity_bytes: f64, ways: usize, replacement: Replacement) -> Curve {
        modelled_chain_over(24, capacity_bytes, ways, replacement)
    }

    /// [`modelled_chain`] with `per_octave` sizes per octave.
    fn modelled_chain_over(
        per_octave: u32,
        capacity_bytes: f64,
        ways: usize,
        replacement: Replacement,
    ) -> Curve {
        let table = crate::placement::HitTable::new(ways, replacement, 400);
        let points: Vec<Point> = crate::knee::geometric_sizes(2 * K, 128 * K, per_octave, 64)
            .into_iter()
            .enumerate()
            .map(|(i, size)| {
                let miss = crate::placement::modelled_miss_fraction(
                    size,
                    capacity_bytes,
                    Placement::Contiguous,
                    &table,
                );
                // A deterministic wobble of 1 %.
                let value = (6.0 + 2.0 * miss) * (1.0 + 0.01 * ((i % 3) as f64 - 1.0));
                Point {
                    size_bytes: size,
                    value,
                    median: value,
                }
            })
            .collect();
        Curve {
            name: INDIRECT_CURVE.into(),
            unit: "ns per line".into(),
            points,
            knees: Vec::new(),
        }
    }

    #[test]
    fn the_indirect_chain_sizes_the_l1i_on_a_zen3() {
        let curves = fixture_curves(include_str!("../testdata/zen3_indirect_chain.json"));
        let l1i = l1i_knee(&zen3_machine(), &curves, Some(512 * K)).unwrap();
        let fit = l1i.code_fit.expect("the indirect chain is fitted");
        assert_eq!(l1i.knee.size_bytes, 32 * K, "{fit:?}");
        assert_eq!(l1i.method, "indirect jump chain");
        assert_eq!(fit.fit.replacement, Replacement::Random);
        assert!(fit.fit.rms_ns < 0.6 * fit.other_rms_ns, "{fit:?}");
        // The latency is the predicted chain's, not the mispredicted one's.
        assert!(l1i.latency_ns < 0.5 * fit.fit.hit_ns, "{l1i:?}");
        // Without the indirect chain the other code curves decide.
        let without: Vec<Curve> = curves
            .into_iter()
            .filter(|c| c.name != INDIRECT_CURVE)
            .collect();
        let l1i = l1i_knee(&zen3_machine(), &without, Some(512 * K)).unwrap();
        assert!(l1i.code_fit.is_none());
        assert_ne!(l1i.method, "indirect jump chain");
    }

    #[test]
    fn modelled_chains_give_back_their_capacity_and_policy() {
        for (size, ways, replacement) in [
            (32 * K, 8, Replacement::Lru),
            (48 * K, 12, Replacement::Lru),
            (32 * K, 8, Replacement::Random),
            (64 * K, 16, Replacement::Random),
        ] {
            let curves = [modelled_chain(size as f64, ways, replacement)];
            let machine = machine_with_l1i(size, ways as u64);
            let l1i = l1i_knee(&machine, &curves, Some(2048 * K)).unwrap();
            let fit = l1i.code_fit.unwrap();
            assert_eq!(l1i.knee.size_bytes, size, "{fit:?}");
            assert_eq!(fit.fit.replacement, replacement, "{fit:?}");
        }
        // A smaller cache than advertised (another task's code in half of it) is found too.
        let curves = [modelled_chain(16.0 * K as f64, 8, Replacement::Lru)];
        let l1i = l1i_knee(&zen3_machine(), &curves, Some(512 * K)).unwrap();
        assert_eq!(l1i.knee.size_bytes, 16 * K);
    }

    #[test]
    fn indirect_chains_without_a_clear_step_are_not_fitted() {
        // Flat: no miss penalty to speak of.
        let mut flat = modelled_chain(32.0 * K as f64, 8, Replacement::Lru);
        flat.points.iter_mut().for_each(|p| p.value = 6.0);
        assert!(indirect_fit(&flat, (32 * K, 8), Some(512 * K)).is_none());
        // Two single-pass curves a sharer disturbed: their fits (22 and 37 KiB) leave
        // residuals above a tenth of the step.
        for curve in fixture_curves(include_str!("../testdata/zen3_indirect_disturbed.json")) {
            assert!(indirect_fit(&curve, (32 * K, 8), Some(512 * K)).is_none());
        }
    }

    /// Whether `found` lies within an eighth of `truth`.
    fn within_an_eighth(found: u64, truth: u64) -> bool {
        (found as f64 / truth as f64 - 1.0).abs() <= 0.125
    }

    #[test]
    fn modelled_intel_chases_give_their_l1d_and_l2() {
        // An Emerald Rapids guest's chase (crate::fixtures::intel): L1d 48 KiB 12-way, L2
        // 2 MiB 16-way over random 4 KiB pages, 6.7 MiB of L3, swept as quick and full runs
        // sweep, the L2 under LRU (its ramp 1.2 to 3 MiB) or a policy that keeps hits past
        // the capacity (1.4 to 4.5 MiB, leaving the L3 plateau under half an octave).
        use crate::fixtures::intel;
        let machine = intel::machine();
        for quick in [true, false] {
            for replacement in [Replacement::Lru, Replacement::Random] {
                for seed in 0..4 {
                    let curves = intel::chase_curves(quick, replacement, seed);
                    let levels = assign_levels(&machine, &curves);
                    let run = format!("quick {quick}, {replacement:?}, seed {seed}");
                    let size = |level: u8| {
                        levels
                            .knees
                            .iter()
                            .find(|l| l.level == level)
                            .map(|l| l.knee.size_bytes)
                    };
                    let l1 = size(1).unwrap_or(0);
                    assert!(within_an_eighth(l1, intel::L1D.0), "{run}: L1d {l1}");
                    let l2 = size(2).unwrap_or(0);
                    assert!(within_an_eighth(l2, intel::L2.0), "{run}: L2 {l2}");
                    // The L3's step is a level of its own, not merged into the L2's.
                    let l3 = size(3).unwrap_or(0);
                    assert!(
                        (4 * 1024 * K..=8 * 1024 * K).contains(&l3),
                        "{run}: L3 {l3}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_modelled_intel_l1i_is_found() {
        // A 32 KiB, 8-way L1i, the indirect chain on the probe's fine grid (16 and 24 sizes
        // per octave), beside the modelled chase that gives the L2.
        use crate::fixtures::intel;
        let machine = intel::machine();
        for quick in [true, false] {
            let (_, fine, _) = intel::budget(quick);
            for replacement in [Replacement::Lru, Replacement::Random] {
                let mut curves = intel::chase_curves(quick, Replacement::Lru, 0);
                let (size, ways) = intel::L1I;
                curves.push(modelled_chain_over(fine, size as f64, ways, replacement));
                let levels = assign_levels(&machine, &curves);
                let l1i = levels
                    .knees
                    .iter()
                    .find(|l| l.kind == CacheKind::Instruction)
                    .expect("an L1i");
                assert_eq!(l1i.method, "indirect jump chain");
                assert!(
                    within_an_eighth(l1i.knee.size_bytes, size),
                    "quick {quick}, {replacement:?}: {l1i:?}"
                );
            }
        }
    }
}
