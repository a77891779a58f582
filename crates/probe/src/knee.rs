//! Knee detection: where a timing curve over a geometric size axis steps up, which is where
//! a cache level runs out, found without a person reading the plot.
//!
//! The curve `ln(value)` over `log2(size)` is cut into piecewise-constant segments by optimal
//! partitioning (dynamic programming, a penalty per segment scaled by the noise). Segments that
//! are wide (at least `min_plateau_octaves`, or half that when a cliff ends them) and flat are
//! plateaus; consecutive plateaus whose levels differ by at least `min_rise_ratio` frame a knee.
//!
//! The knee's size is read from the miss fraction: each point's time is placed between the
//! two plateaus in linear time (`t = hit + miss * penalty`, see [`miss_fraction`]). Where misses
//! start at the steepest rise, they are the walk's own (a cyclic walk over an LRU, pseudo-LRU
//! or random-replacement cache starts missing at the capacity, where the slope is largest),
//! and the steepest rise ([`steepest_rise`]) is the capacity; where they creep in well before
//! it, something else shares the cache and the footprint where half the accesses miss is the
//! estimate ([`capacity_gap`]). The miss fraction's scale runs from the lower plateau's level
//! at its start to the level an octave past the rise's log-midpoint (plateaus that drift up
//! carry other misses). The result is snapped to a cache-like size (`2^k` or `3 * 2^k`)
//! within an eighth of an octave; for a creeping rise, to the cache-like size nearest the
//! half-miss point among those where a quarter to three quarters of the accesses miss (with
//! that slack), since interference that varies while the curve is measured spreads the
//! rise around the capacity. The earlier rule, the cache-like size nearest the rise's
//! midpoint in `ln t`, followed the creep: 768 KiB for a Zen 4 guest's 1 MiB L2, whose misses
//! start near 300 KiB. Adaptive sampling spends extra points across each rise and around its
//! estimate, measures the points already there again, and measures again any point of a
//! rise that stands above a larger footprint's (misses only grow with the footprint, so that
//! point was disturbed), keeping the faster.

use serde::Serialize;

/// One point of a timing curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Footprint (code or data) in bytes.
    pub size_bytes: u64,
    /// Time per unit (per load, per line, per byte) in nanoseconds: the minimum of repeats.
    pub value: f64,
    /// Median of the repeats, to show the noise.
    pub median: f64,
}

/// A step up in a timing curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Knee {
    /// The capacity estimate: the cache-like size (`2^k` or `3 * 2^k`) between
    /// `cliff_lo_bytes` and `cliff_hi_bytes` (an eighth of an octave of slack either side),
    /// else `cliff_lo_bytes`.
    pub size_bytes: u64,
    /// Last point before the capacity ([`capacity_gap`]: the steepest rise of the miss
    /// fraction, or where half the accesses miss when misses creep in well before it).
    pub cliff_lo_bytes: u64,
    /// First point after the capacity.
    pub cliff_hi_bytes: u64,
    /// Start of the rise: the largest size still at the lower level.
    pub rise_start_bytes: u64,
    /// The largest size below the midpoint (in log) of the two levels.
    pub rise_mid_bytes: u64,
    /// First size at the upper level.
    pub end_bytes: u64,
    /// Level below the knee (same unit as the curve).
    pub before: f64,
    /// Level above the knee.
    pub after: f64,
    /// `after / before`.
    pub ratio: f64,
    /// From 0 to 1: how far the step stands out of the noise, and how sharp it is.
    pub confidence: f64,
}

/// Tuning of [`find_knees`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KneeOptions {
    /// Smallest level ratio counted as a knee.
    pub min_rise_ratio: f64,
    /// Narrowest plateau, in octaves of size.
    pub min_plateau_octaves: f64,
    /// Largest rise inside a plateau (as a ratio) before it counts as part of a ramp.
    pub max_plateau_drift: f64,
}

impl Default for KneeOptions {
    fn default() -> KneeOptions {
        KneeOptions {
            min_rise_ratio: 1.25,
            min_plateau_octaves: 0.5,
            max_plateau_drift: 1.3,
        }
    }
}

/// A piecewise-constant segment: points `first..=last`, at level `exp(mean ln value)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Index of the first point.
    pub first: usize,
    /// Index of the last point.
    pub last: usize,
    /// Mean of `ln(value)` over the segment.
    pub log_level: f64,
}

/// Robust noise of `ln(value)`: the median absolute first difference, scaled to a standard
/// deviation, with a floor so a perfectly clean curve is not over-fitted.
pub fn log_noise(points: &[Point]) -> f64 {
    let mut diffs: Vec<f64> = points
        .windows(2)
        .map(|w| (w[1].value.ln() - w[0].value.ln()).abs())
        .filter(|d| d.is_finite())
        .collect();
    if diffs.is_empty() {
        return 0.02;
    }
    diffs.sort_by(f64::total_cmp);
    let mad = diffs[diffs.len() / 2];
    (mad / 0.6745 / std::f64::consts::SQRT_2).max(0.01)
}

/// Optimal partition of `ln(value)` into constant segments of at least two points.
pub fn segment(points: &[Point]) -> Vec<Segment> {
    let n = points.len();
    if n < 4 {
        return whole(points);
    }
    let y: Vec<f64> = points
        .iter()
        .map(|p| p.value.max(f64::MIN_POSITIVE).ln())
        .collect();
    let mut sum = vec![0.0; n + 1];
    let mut sq = vec![0.0; n + 1];
    for i in 0..n {
        sum[i + 1] = sum[i] + y[i];
        sq[i + 1] = sq[i] + y[i] * y[i];
    }
    let cost = |i: usize, j: usize| {
        // SSE of y[i..j] about its mean.
        let k = (j - i) as f64;
        let s = sum[j] - sum[i];
        (sq[j] - sq[i] - s * s / k).max(0.0)
    };
    let sigma = log_noise(points);
    let penalty = 4.0 * sigma * sigma * (n as f64).ln();
    const MIN_LEN: usize = 2;
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = -penalty;
    for j in MIN_LEN..=n {
        for i in 0..=j - MIN_LEN {
            if best[i].is_finite() {
                let c = best[i] + cost(i, j) + penalty;
                if c < best[j] {
                    best[j] = c;
                    from[j] = i;
                }
            }
        }
    }
    let mut cuts = Vec::new();
    let mut j = n;
    while j > 0 {
        cuts.push((from[j], j));
        j = from[j];
    }
    cuts.reverse();
    cuts.into_iter()
        .map(|(i, j)| Segment {
            first: i,
            last: j - 1,
            log_level: (sum[j] - sum[i]) / (j - i) as f64,
        })
        .collect()
}

/// Two segments as one, its level the point-weighted mean.
fn join(a: &Segment, b: &Segment) -> Segment {
    let (na, nb) = ((a.last - a.first + 1) as f64, (b.last - b.first + 1) as f64);
    Segment {
        first: a.first,
        last: b.last,
        log_level: (a.log_level * na + b.log_level * nb) / (na + nb),
    }
}

fn whole(points: &[Point]) -> Vec<Segment> {
    if points.is_empty() {
        return Vec::new();
    }
    let mean = points.iter().map(|p| p.value.ln()).sum::<f64>() / points.len() as f64;
    vec![Segment {
        first: 0,
        last: points.len() - 1,
        log_level: mean,
    }]
}

fn octaves(points: &[Point], first: usize, last: usize) -> f64 {
    (points[last].size_bytes as f64 / points[first].size_bytes.max(1) as f64).log2()
}

/// Rise of `ln(value)` across a segment, from a least-squares line over `log2(size)`.
fn drift(points: &[Point], seg: &Segment) -> f64 {
    let xs: Vec<f64> = (seg.first..=seg.last)
        .map(|i| (points[i].size_bytes.max(1) as f64).log2())
        .collect();
    let ys: Vec<f64> = (seg.first..=seg.last)
        .map(|i| points[i].value.ln())
        .collect();
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if sxx == 0.0 {
        return 0.0;
    }
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    sxy / sxx * (xs[xs.len() - 1] - xs[0])
}

/// The plateaus of a curve: wide, flat segments, with adjacent ones of nearly equal level
/// merged. A flat segment half as wide counts too when a cliff ends it (`ends_in_cliff`).
pub fn plateaus(points: &[Point], options: &KneeOptions) -> Vec<Segment> {
    // Wiggles the segmentation split off are not steps: merge neighbours within 12 %.
    let mut merged: Vec<Segment> = Vec::new();
    for seg in segment(points) {
        match merged.last_mut() {
            Some(prev)
                if (seg.log_level - prev.log_level).abs() < 1.12f64.ln()
                    && drift(points, &join(prev, &seg)).abs() <= options.max_plateau_drift.ln() =>
            {
                *prev = join(prev, &seg);
            }
            _ => merged.push(seg),
        }
    }
    let mut out: Vec<Segment> = Vec::new();
    for seg in merged {
        let width = octaves(points, seg.first, seg.last);
        let wide = width >= options.min_plateau_octaves
            || (width >= options.min_plateau_octaves / 2.0 && ends_in_cliff(points, &seg, options));
        let flat = drift(points, &seg).abs() <= options.max_plateau_drift.ln();
        if !(wide && flat) {
            continue;
        }
        match out.last_mut() {
            Some(prev) if (seg.log_level - prev.log_level).abs() < options.min_rise_ratio.ln() => {
                *prev = join(prev, &seg);
            }
            _ => out.push(seg),
        }
    }
    out
}

/// Whether the point after `seg` stands a whole step (`min_rise_ratio`) above its level: the
/// end of a cache level as a cyclic walk meets it under LRU, or of a shared level a guest sees
/// only part of. The flat stretch before such a cliff is that level's plateau even when it is
/// narrow: the level before it may take most of the octaves between the two capacities to
/// fill. Zen 3 and Zen 4 guests (L2 of 512 KiB or 1 MiB, 8 ways; an effective L3 of 3 to 8
/// MiB) leave their L3 plateau more than an octave wide, but an Intel server core's 2 MiB,
/// 16-way L2 whose replacement keeps hits past its capacity, over random 4 KiB pages, rises
/// until about 4.5 MiB, and a guest may see only 6.7 MiB of the L3: a plateau of half an
/// octave or less, which otherwise merged the L2 and L3 steps into one knee.
fn ends_in_cliff(points: &[Point], seg: &Segment, options: &KneeOptions) -> bool {
    // Two points, so one disturbed sample makes no cliff.
    let after = &points[(seg.last + 1).min(points.len())..];
    !after.is_empty()
        && after
            .iter()
            .take(2)
            .all(|p| p.value.ln() - seg.log_level >= options.min_rise_ratio.ln())
}

/// The knees of a code curve: [`find_knees`] over its points, each lowered to the least value
/// at any larger size. Time per unit of code only grows with the footprint and a code sample
/// lasts microseconds, so a point above a larger one's was slowed by something else; a run
/// of such points below the L1i (another task's burst) would read as a step of its own.
pub fn find_code_knees(points: &[Point]) -> Vec<Knee> {
    let mut lowered = points.to_vec();
    let mut least = f64::INFINITY;
    for p in lowered.iter_mut().rev() {
        if p.value.is_finite() {
            least = least.min(p.value);
            p.value = least;
        }
    }
    find_knees(&lowered, &KneeOptions::default())
}

/// The knees of a curve sorted by size (points must be sorted by size).
pub fn find_knees(points: &[Point], options: &KneeOptions) -> Vec<Knee> {
    let clean = |v: f64| if v.is_finite() && v > 1e-12 { v } else { 1e-12 };
    let points: Vec<Point> = points
        .iter()
        .map(|p| Point {
            value: clean(p.value),
            ..*p
        })
        .collect();
    let points = &points[..];
    let sigma = log_noise(points);
    let plateaus = plateaus(points, options);
    // (knee, index of its lower plateau)
    let mut knees: Vec<(Knee, usize)> = Vec::new();
    for (i, w) in plateaus.windows(2).enumerate() {
        if w[1].log_level - w[0].log_level < options.min_rise_ratio.ln() {
            continue;
        }
        let knee = knee_between(points, &w[0], &w[1], sigma);
        match knees.last_mut() {
            // A short plateau inside one rise (noise, or a cache that finishes thrashing in
            // two stages) splits it into two knees at one capacity; misses creeping in before
            // a cache's step (a small step, then a plateau a little higher) are part of that
            // step. Either way, one knee from the lower plateau of the first.
            Some((prev, low)) if prev.size_bytes == knee.size_bytes || prev.ratio < CREEP_RATIO => {
                *prev = knee_between(points, &plateaus[*low], &w[1], sigma);
            }
            _ => knees.push((knee, i)),
        }
    }
    knees.into_iter().map(|(k, _)| k).collect()
}

fn knee_between(points: &[Point], low: &Segment, high: &Segment, sigma: f64) -> Knee {
    let rise = high.log_level - low.log_level;
    let threshold = (0.15 * rise).max(3.0 * sigma).min(0.5 * rise);
    let start = last_below(points, low, high, low.log_level + threshold);
    let mid = last_below(points, low, high, low.log_level + 0.5 * rise).max(start);
    let end = (mid + 1..=high.first.max(mid + 1))
        .find(|&i| i < points.len() && points[i].value.ln() >= high.log_level - threshold)
        .unwrap_or(high.first)
        .min(points.len() - 1);
    let (start_bytes, mid_bytes) = (points[start].size_bytes, points[mid].size_bytes);
    let z = rise / sigma;
    let width = octaves(points, start, end.max(start));
    let step = octaves(points, start, (start + 1).min(points.len() - 1));
    let sharpness = 1.0 / (1.0 + (width - step).max(0.0));
    let confidence = ((1.0 - (-z / 5.0).exp()) * sharpness).clamp(0.0, 1.0);
    let (before, after) = (low.log_level.exp(), high.log_level.exp());
    let range = (low.first, high.first, high.last);
    let estimate = capacity_estimate(
        points,
        range,
        rise_start_level(points, low),
        rise_end_level(points, mid, high),
    );
    let cliff = estimate.gap;
    let (cliff_lo, cliff_hi) = (points[cliff].size_bytes, points[cliff + 1].size_bytes);
    let size_bytes = match estimate.central_bytes {
        // Misses crept in: the capacity is the cache-like size in the central half of the
        // rise (with the snap's slack either side) nearest (in log) to where half the loads
        // miss.
        Some((lo, hi)) => cache_like_sizes_between(
            (lo as f64 / SNAP_SLACK_OCTAVES.exp2()) as u64,
            (hi as f64 * SNAP_SLACK_OCTAVES.exp2()) as u64,
        )
        .min_by(|a, b| {
            let d = |s: u64| ((s as f64).log2() - (cliff_hi.max(1) as f64).log2()).abs();
            d(*a).total_cmp(&d(*b))
        })
        .or_else(|| plausible_size(cliff_lo, cliff_hi, SNAP_SLACK_OCTAVES)),
        None => plausible_size(cliff_lo, cliff_hi, SNAP_SLACK_OCTAVES),
    };
    Knee {
        size_bytes: size_bytes.unwrap_or(cliff_lo),
        cliff_lo_bytes: cliff_lo,
        cliff_hi_bytes: cliff_hi,
        rise_start_bytes: start_bytes,
        rise_mid_bytes: mid_bytes,
        end_bytes: points[end].size_bytes,
        before,
        after,
        ratio: rise.exp(),
        confidence,
    }
}

/// Half-width of the windows compared by [`steepest_rise`], and the slack of the snap to a
/// cache-like size, in octaves.
const STEEP_WINDOW_OCTAVES: f64 = 0.125;
const SNAP_SLACK_OCTAVES: f64 = 0.125;
/// How steep, as a fraction of the steepest, the rise chosen by [`steepest_rise`] must be.
pub const NEARLY_STEEPEST: f64 = 0.7;

/// Where a point's time lies between the levels `before` (every access hits) and `after`
/// (every access misses): the miss fraction, since the time per access is
/// `before + miss * (after - before)`, clamped to `0..=1`: a point below the lower level (the
/// tail of the level before) or above the upper one is no more than no misses or all.
pub fn miss_fraction(value: f64, before: f64, after: f64) -> f64 {
    let span = after - before;
    if span.is_nan() || span.abs() <= f64::MIN_POSITIVE {
        return 0.0;
    }
    ((value - before) / span).clamp(0.0, 1.0)
}

/// The first index `j` whose gap to `j + 1` (for `first <= j < last`, windows within
/// `first..=last_outer`) has a rise of the miss
/// fraction per octave of at least [`NEARLY_STEEPEST`] of the steepest: the mean miss fraction
/// over the points up to an eighth of an octave above the gap, less that over the points up to
/// an eighth below, over the distance of their centres (at least an eighth of an octave, so
/// neither a narrow gap nor a single noisy point dominates).
///
/// Why the steepest rise is the capacity: under LRU the miss fraction of a cyclic walk jumps
/// from 0 to 1 at the capacity; under random replacement it solves `1 - m = exp(-m W / C)`,
/// which leaves 0 at `W = C` with its largest slope there; and when something else shares the
/// cache (other hardware threads, the hypervisor, page tables) misses creep in below the
/// capacity while the step stays at it. The start of a rise follows that creep, and its
/// midpoint (in `ln t`) lands where the creep and the step add up to half; the steepest point
/// does not move. Random replacement's slope falls only slowly past the capacity (by a sixth
/// at 1.125 times it), so with noise the single steepest gap can land well past it: the first
/// gap nearly as steep is taken.
pub fn steepest_rise(
    points: &[Point],
    (first, last, last_outer): (usize, usize, usize),
    before: f64,
    after: f64,
) -> usize {
    let n = points.len();
    // The windows stay within the two plateaus: beyond them lie other levels.
    let outer = last_outer.min(n.saturating_sub(1));
    let last = last.min(n.saturating_sub(1));
    if n < 2 || first >= last {
        return first.min(n.saturating_sub(2));
    }
    let x: Vec<f64> = points
        .iter()
        .map(|p| (p.size_bytes.max(1) as f64).log2())
        .collect();
    let m: Vec<f64> = points
        .iter()
        .map(|p| miss_fraction(p.value, before, after))
        .collect();
    let mean = |range: std::ops::RangeInclusive<usize>| {
        let k = range.clone().count() as f64;
        let (sx, sm) = range.fold((0.0, 0.0), |(sx, sm), i| (sx + x[i], sm + m[i]));
        (sx / k, sm / k)
    };
    let score = |j: usize| {
        let lo = (first..=j)
            .rev()
            .take_while(|&i| x[j] - x[i] <= STEEP_WINDOW_OCTAVES)
            .last()
            .unwrap_or(j);
        let hi = (j + 1..=outer.max(j + 1))
            .take_while(|&i| x[i] - x[j + 1] <= STEEP_WINDOW_OCTAVES)
            .last()
            .unwrap_or(j + 1);
        let ((xl, ml), (xr, mr)) = (mean(lo..=j), mean(j + 1..=hi));
        (mr - ml) / (xr - xl).max(STEEP_WINDOW_OCTAVES)
    };
    let scores: Vec<f64> = (first..last).map(score).collect();
    let steepest = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let nearly = scores
        .iter()
        .position(|&s| s >= NEARLY_STEEPEST * steepest)
        .unwrap_or(0);
    first + nearly
}

/// The closest non-decreasing fit (least squares, pool-adjacent-violators) to `values`.
pub fn monotone_fit(values: &[f64]) -> Vec<f64> {
    // (mean, count) of pooled blocks
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &v in values {
        blocks.push((v, 1));
        while blocks.len() > 1 && blocks[blocks.len() - 2].0 > blocks[blocks.len() - 1].0 {
            let (v2, n2) = blocks.pop().unwrap_or((0.0, 0));
            let (v1, n1) = blocks.pop().unwrap_or((0.0, 0));
            let n = n1 + n2;
            blocks.push(((v1 * n1 as f64 + v2 * n2 as f64) / n as f64, n));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(v, n)| std::iter::repeat_n(v, n))
        .collect()
}

/// A knee smaller than this that is followed by another is misses creeping in before that
/// one's step, and is merged into it.
const CREEP_RATIO: f64 = 1.5;

/// Miss fraction at which misses have started (on the monotone fit), and how far (octaves)
/// before the steepest rise they may start and still be the walk's own.
const ONSET_MISS: f64 = 0.1;
const CREEP_OCTAVES: f64 = 0.25;

/// How far past a rise's log-midpoint (octaves) its end level is read, and over how wide a
/// window ([`rise_end_level`]).
const RISE_END_OCTAVES: (f64, f64) = (1.0, 0.5);

/// The level a rise ends at, the top of its miss-fraction scale: the median of the points
/// from one octave past the log-midpoint `mid` over half an octave (under LRU a cyclic walk
/// misses on every load past the capacity, under random replacement on 80 % at twice it),
/// or the upper plateau's level if that is lower or there are no such points. The plateau's
/// level alone is too high when it drifts up (the next level's own misses creeping in, as in
/// a shared L3): it put the half-miss point of a Zen 4 guest's 1 MiB L2 at 1.29 MiB, its L3
/// plateau climbing from 13 to 16 ns.
fn rise_end_level(points: &[Point], mid: usize, high: &Segment) -> f64 {
    let from = points[mid].size_bytes.max(1) as f64 * RISE_END_OCTAVES.0.exp2();
    let to = from * RISE_END_OCTAVES.1.exp2();
    let upto = &points[..=high.last.min(points.len() - 1)];
    median_capped(upto, from, to, high.log_level.exp())
}

/// The median value of the points sized `from..=to` bytes, or `cap` if that is lower or there
/// are none.
fn median_capped(points: &[Point], from: f64, to: f64, cap: f64) -> f64 {
    let mut values: Vec<f64> = points
        .iter()
        .filter(|p| (from..=to).contains(&(p.size_bytes as f64)))
        .map(|p| p.value)
        .collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).map_or(cap, |&v| v.min(cap))
}

/// The level the accesses hit at, the bottom of a rise's miss-fraction scale: the median of
/// the lower plateau's first half octave, or its level if that is lower. A plateau that
/// drifts up within its tolerance already has misses (or TLB misses) creeping in: on a
/// Zen 4 guest's L2 plateau, 3.8 ns at 288 KiB and 4.9 ns at 600 KiB, which hid the creep
/// of a rise whose misses started there.
fn rise_start_level(points: &[Point], low: &Segment) -> f64 {
    let to = points[low.first].size_bytes.max(1) as f64 * 0.5f64.exp2();
    let plateau = &points[low.first..=low.last.min(points.len() - 1)];
    median_capped(plateau, 0.0, to, low.log_level.exp())
}

/// Cache-like sizes (`2^k` or `3 * 2^k` bytes) from `lo` to `hi`.
fn cache_like_sizes_between(lo: u64, hi: u64) -> impl Iterator<Item = u64> {
    (6..48u32)
        .flat_map(|k| [1u64 << k, 3u64 << (k - 1)])
        .filter(move |&s| s >= lo && s <= hi)
}

/// Where a knee's capacity lies ([`capacity_gap`]), and, when misses crept in before it,
/// the sizes between which a quarter and three quarters of the loads miss (on the monotone
/// fit): the central half of the rise, where the capacity is under interference that varies
/// while the curve is measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityEstimate {
    /// The gap `j` to `j + 1` of [`capacity_gap`].
    pub gap: usize,
    /// The central half of a creeping rise, in bytes.
    pub central_bytes: Option<(u64, u64)>,
}

/// Quarter and three-quarter miss fractions bounding the central half of a creeping rise.
const CENTRAL_MISS: (f64, f64) = (0.25, 0.75);

/// The gap `j` to `j + 1` where the capacity lies, for `(first, last, last_outer)` as in
/// [`steepest_rise`]. Two shapes, told apart by where misses start (the monotone fit of the
/// miss fraction reaching a tenth) against where they rise fastest:
/// - they start at the steepest rise (within a quarter octave): the misses are the walk's
///   own, as under LRU, pseudo-LRU or random replacement, and the steepest rise is the
///   capacity;
/// - they start well before it: something else shares the cache (on a Zen 4 guest misses
///   start near 300 KiB of the 1 MiB L2), the capacity the walk sees moves while it is
///   measured, and the point where half the loads miss, the median of that capacity, is the
///   estimate. On ten runs of that guest, quiet and loaded, it gave 1 MiB (within 12.5 %) nine
///   times; the steepest rise four to six times, the rise's start or log-midpoint never.
pub fn capacity_gap(
    points: &[Point],
    range: (usize, usize, usize),
    before: f64,
    after: f64,
) -> usize {
    capacity_estimate(points, range, before, after).gap
}

/// [`capacity_gap`] with the central half of a creeping rise ([`CapacityEstimate`]).
pub fn capacity_estimate(
    points: &[Point],
    (first, last, last_outer): (usize, usize, usize),
    before: f64,
    after: f64,
) -> CapacityEstimate {
    let cliff = steepest_rise(points, (first, last, last_outer), before, after);
    let steep = CapacityEstimate {
        gap: cliff,
        central_bytes: None,
    };
    let outer = last_outer.min(points.len().saturating_sub(1));
    if first >= outer {
        return steep;
    }
    let misses: Vec<f64> = points[first..=outer]
        .iter()
        .map(|p| miss_fraction(p.value, before, after))
        .collect();
    let fit = monotone_fit(&misses);
    let reach = |m: f64| fit.iter().position(|&f| f >= m).map(|i| first + i);
    let (Some(onset), Some(half)) = (reach(ONSET_MISS), reach(0.5)) else {
        return steep;
    };
    if onset >= cliff || octaves(points, onset, cliff) <= CREEP_OCTAVES {
        return steep;
    }
    // Each crossing lies in a gap: the central half runs from the last point below a quarter
    // to the first at three quarters.
    let below_quarter = reach(CENTRAL_MISS.0).map(|i| points[i.saturating_sub(1).max(first)]);
    let three_quarters = reach(CENTRAL_MISS.1).map_or(points[outer], |i| points[i]);
    let central_bytes = below_quarter.map(|lo| (lo.size_bytes, three_quarters.size_bytes));
    CapacityEstimate {
        gap: half.saturating_sub(1).max(first),
        central_bytes,
    }
}

/// Index of the last point, from the lower plateau on, before the curve leaves `level` for
/// good (the point after the crossing stays above too).
fn last_below(points: &[Point], low: &Segment, high: &Segment, level: f64) -> usize {
    let above = |i: usize| points[i].value.ln() > level;
    let mut last = low.first;
    for i in low.first..high.first.max(low.first + 1).min(points.len()) {
        if above(i) && (i + 1 >= points.len() || above(i + 1)) {
            break;
        }
        last = i;
    }
    last
}

/// The cache-like size (`2^k` or `3 * 2^k` bytes) closest to `hi` (in log) between `lo`
/// less `slack_octaves` and `hi` plus twice that (the capacity lies at or past the last point
/// below the midpoint), if there is one. Capacities are such sizes;
/// the rise of a cache that thrashes (LRU under a cyclic walk) completes just past its
/// capacity, while interference (another hardware thread, way prediction, page colouring)
/// can start it earlier, so the midpoint of the rise (`hi`) is the better anchor.
pub fn plausible_size(lo: u64, hi: u64, slack_octaves: f64) -> Option<u64> {
    let anchor = (hi.max(1) as f64).log2();
    let (floor, ceiling) = (
        lo as f64 / slack_octaves.exp2(),
        hi as f64 * slack_octaves.exp2(),
    );
    (6..48u32)
        .flat_map(|k| [1u64 << k, 3u64 << (k - 1)])
        .filter(|&s| s as f64 >= floor && s as f64 <= ceiling)
        .min_by(|a, b| {
            let d = |s: u64| ((s as f64).log2() - anchor).abs();
            d(*a).total_cmp(&d(*b))
        })
}

/// Sizes from `lo` to `hi` (inclusive) spaced `per_octave` to the octave, rounded to multiples
/// of `granule`, without duplicates.
pub fn geometric_sizes(lo: u64, hi: u64, per_octave: u32, granule: u64) -> Vec<u64> {
    let granule = granule.max(1);
    let lo = lo.max(granule);
    let mut sizes = Vec::new();
    let factor = 2f64.powf(1.0 / f64::from(per_octave.max(1)));
    let mut s = lo as f64;
    while s <= hi as f64 * 1.000_001 {
        let rounded = ((s / granule as f64).round() as u64).max(1) * granule;
        if sizes.last() != Some(&rounded) {
            sizes.push(rounded);
        }
        s *= factor;
    }
    sizes
}

/// The sizes a knee hangs on: its rise, and an eighth of an octave either side of its
/// capacity estimate ([`capacity_gap`]).
fn knee_span(knee: &Knee) -> (u64, u64) {
    let widen = STEEP_WINDOW_OCTAVES.exp2();
    (
        knee.rise_start_bytes
            .min((knee.cliff_lo_bytes as f64 / widen) as u64),
        knee.end_bytes
            .max((knee.cliff_hi_bytes as f64 * widen) as u64),
    )
}

/// New sizes worth measuring: inside each knee's span (its rise, and around its steepest
/// part), at `per_octave` density, that are not measured yet. A size within a quarter step
/// of a measured one counts as measured: measuring it again is what helps there.
pub fn refinement_sizes(
    points: &[Point],
    knees: &[Knee],
    per_octave: u32,
    granule: u64,
) -> Vec<u64> {
    let near = 0.25 / f64::from(per_octave.max(1));
    let measured = |s: u64| {
        points
            .iter()
            .any(|p| (s as f64 / p.size_bytes.max(1) as f64).log2().abs() < near)
    };
    let mut out = Vec::new();
    for knee in knees {
        let (start, end) = knee_span(knee);
        for s in geometric_sizes(start, end, per_octave, granule) {
            if s > start && s < end && !measured(s) {
                out.push(s);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Measures a curve adaptively: a coarse geometric grid, then `rounds` of refinement around
/// the knees found so far, then up to `rounds` passes that measure again the points of a rise
/// standing above a larger footprint's. `measure` returns `None` to stop early (interrupt);
/// what was measured is kept.
pub fn adaptive_sweep(
    grid: &[u64],
    fine_per_octave: u32,
    granule: u64,
    rounds: u32,
    options: &KneeOptions,
    measure: &mut dyn FnMut(u64) -> Option<Point>,
) -> (Vec<Point>, Vec<Knee>, bool) {
    adaptive_sweep_until(
        grid,
        (fine_per_octave, granule, rounds),
        options,
        &|_| false,
        measure,
    )
}

/// [`adaptive_sweep`] whose coarse grid ends early, at the first point after which `enough`
/// holds of the points so far (in grid order), for example once the memory plateau is
/// established ([`crate::memory_plateau_reached`]). `fine` is (points per octave of the
/// refinement, size granule, rounds).
pub fn adaptive_sweep_until(
    grid: &[u64],
    (fine_per_octave, granule, rounds): (u32, u64, u32),
    options: &KneeOptions,
    enough: &dyn Fn(&[Point]) -> bool,
    measure: &mut dyn FnMut(u64) -> Option<Point>,
) -> (Vec<Point>, Vec<Knee>, bool) {
    let mut points: Vec<Point> = Vec::new();
    let mut next = 0;
    let mut knees;
    // Refining can undo what ended the grid (measured again, the points of a rise that sat
    // at the upper level take their lower values, and a plateau they made can become too
    // short): the grid then goes on, up to `MAX_RESUMES` times.
    let mut resumes = 0;
    loop {
        let mut complete = true;
        while next < grid.len() {
            match measure(grid[next]) {
                Some(p) => points.push(p),
                None => {
                    complete = false;
                    break;
                }
            }
            next += 1;
            if enough(&points) {
                break;
            }
        }
        points.sort_by_key(|p| p.size_bytes);
        let (refined, still_complete) = refine(
            &mut points,
            (fine_per_octave, granule, rounds),
            options,
            complete,
            measure,
        );
        knees = refined;
        let resume = still_complete && next < grid.len() && !enough(&points);
        if !resume || resumes == MAX_RESUMES {
            return (points, knees, still_complete);
        }
        resumes += 1;
    }
}

/// How many times [`adaptive_sweep_until`] goes on with its grid after refining undid what
/// ended it.
const MAX_RESUMES: u32 = 3;

/// The refinement rounds of [`adaptive_sweep`] over `points` (sorted): new points in each
/// rise, the rise's points measured again, then the points standing above a larger
/// footprint's measured again. Returns the knees and whether `measure` went on to the end.
fn refine(
    points: &mut Vec<Point>,
    (fine_per_octave, granule, rounds): (u32, u64, u32),
    options: &KneeOptions,
    mut complete: bool,
    measure: &mut dyn FnMut(u64) -> Option<Point>,
) -> (Vec<Knee>, bool) {
    let mut knees = find_knees(points, options);
    for _ in 0..rounds {
        let extra = refinement_sizes(points, &knees, fine_per_octave, granule);
        if !complete || extra.is_empty() {
            break;
        }
        // Points already in a rise are measured again and the lower kept: a knee's position
        // should not hang on one disturbed sample.
        let again = span_indices(points, &knees);
        complete = measure_again(points, &again, measure) && measure_new(points, &extra, measure);
        points.sort_by_key(|p| p.size_bytes);
        knees = find_knees(points, options);
    }
    for _ in 0..rounds {
        let odd = out_of_order(points, &knees);
        if !complete || odd.is_empty() {
            break;
        }
        complete = measure_again(points, &odd, measure);
        knees = find_knees(points, options);
    }
    (knees, complete)
}

/// Indices of the points inside any of `knees`' spans (its rise, and an eighth of an octave
/// either side of its capacity estimate).
pub fn span_indices(points: &[Point], knees: &[Knee]) -> Vec<usize> {
    (0..points.len())
        .filter(|&i| knees.iter().any(|k| in_span(points[i].size_bytes, k)))
        .collect()
}

fn in_span(size_bytes: u64, knee: &Knee) -> bool {
    let (start, end) = knee_span(knee);
    size_bytes >= start && size_bytes <= end
}

/// How far (as a ratio) a point of a rise may stand above a larger footprint's before it is
/// taken for disturbed.
const OUT_OF_ORDER_RATIO: f64 = 1.05;

/// Indices of the points inside a knee's span that stand above a larger footprint's point of
/// the same span: misses only grow with the footprint, so the higher one was disturbed (a
/// minimum of repeats can only err upwards).
pub fn out_of_order(points: &[Point], knees: &[Knee]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut lowest_after = f64::INFINITY;
    for i in (0..points.len()).rev() {
        let Some(knee) = knees.iter().find(|k| in_span(points[i].size_bytes, k)) else {
            lowest_after = f64::INFINITY;
            continue;
        };
        if points[i].value > OUT_OF_ORDER_RATIO * lowest_after {
            out.push(i);
        }
        let same_span = i > 0 && in_span(points[i - 1].size_bytes, knee);
        lowest_after = if same_span {
            lowest_after.min(points[i].value)
        } else {
            f64::INFINITY
        };
    }
    out.reverse();
    out
}

/// Measures `sizes` and adds them; false when `measure` stopped.
fn measure_new(
    points: &mut Vec<Point>,
    sizes: &[u64],
    measure: &mut dyn FnMut(u64) -> Option<Point>,
) -> bool {
    for &s in sizes {
        match measure(s) {
            Some(p) => points.push(p),
            None => return false,
        }
    }
    true
}

/// Measures the points at `indices` again, keeping the lower value; false when `measure`
/// stopped.
fn measure_again(
    points: &mut [Point],
    indices: &[usize],
    measure: &mut dyn FnMut(u64) -> Option<Point>,
) -> bool {
    for &i in indices {
        match measure(points[i].size_bytes) {
            Some(p) if p.value < points[i].value => points[i] = p,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const KIB: u64 = 1024;

    /// A cache hierarchy's latency: `levels[i]` up to `caps[i]`, then the next level.
    fn step_latency(size: u64, caps: &[u64], levels: &[f64]) -> f64 {
        let i = caps.iter().position(|&c| size <= c).unwrap_or(caps.len());
        levels[i]
    }

    fn noisy(value: f64, rng: &mut rand::rngs::StdRng, noise: f64) -> f64 {
        value * (1.0 + noise * (rng.random::<f64>() * 2.0 - 1.0))
    }

    fn point(size: u64, value: f64) -> Point {
        Point {
            size_bytes: size,
            value,
            median: value,
        }
    }

    fn within_steps(found: u64, truth: u64, per_octave: u32, steps: f64) -> bool {
        ((found as f64 / truth as f64).log2() * f64::from(per_octave)).abs() <= steps + 1e-9
    }

    #[test]
    fn noisy_step_curves_give_their_sizes_within_one_fine_step() {
        let caps = [32 * KIB, 512 * KIB, 8192 * KIB];
        let levels = [1.6, 5.0, 19.0, 90.0];
        for seed in 0..20 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let grid = geometric_sizes(KIB, 128 * 1024 * KIB, 4, 64);
            let mut measure = |s: u64| {
                let v = noisy(step_latency(s, &caps, &levels), &mut rng, 0.04);
                Some(point(s, v))
            };
            let (points, knees, complete) =
                adaptive_sweep(&grid, 16, 64, 2, &KneeOptions::default(), &mut measure);
            assert!(complete);
            assert_eq!(knees.len(), 3, "seed {seed}: {knees:?}");
            for (knee, &cap) in knees.iter().zip(&caps) {
                assert!(
                    within_steps(knee.size_bytes, cap, 16, 1.0),
                    "seed {seed}: {knee:?}"
                );
                assert!(knee.confidence > 0.5, "{knee:?}");
            }
            // Refinement spent points near the knees (the rise and an eighth of an octave
            // either side of its capacity estimate), not everywhere.
            assert!(points.len() < grid.len() + 3 * 8, "{}", points.len());
            assert!((knees[1].before - 5.0).abs() < 0.5, "{:?}", knees[1]);
        }
    }

    #[test]
    fn a_gradual_rise_gives_its_capacity_first() {
        // Capacity misses grow like 1 - C/s above the capacity C.
        let cap = 256 * KIB;
        let (a, b) = (4.0, 40.0);
        let grid = geometric_sizes(KIB, 64 * 1024 * KIB, 4, 64);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut measure = |s: u64| {
            let miss = if s <= cap {
                0.0
            } else {
                1.0 - cap as f64 / s as f64
            };
            Some(point(s, noisy(a + (b - a) * miss, &mut rng, 0.02)))
        };
        let (_, knees, _) = adaptive_sweep(&grid, 16, 64, 2, &KneeOptions::default(), &mut measure);
        // The slow approach to the upper level may add a small later knee; the first is the
        // capacity.
        assert!(!knees.is_empty() && knees[0].ratio > 4.0, "{knees:?}");
        assert!(
            within_steps(knees[0].rise_start_bytes, cap, 16, 3.0),
            "{knees:?}"
        );
        assert_eq!(
            knees[0].size_bytes, cap,
            "snapped to the cache-like size in the rise"
        );
    }

    /// Sweeps `latency` like a full probe (6 points per octave, 24 in rises, two rounds) with
    /// 3 % noise.
    fn full_sweep(seed: u64, latency: &dyn Fn(u64) -> f64) -> Vec<Knee> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let grid = geometric_sizes(KIB, 128 * 1024 * KIB, 6, 64);
        let mut measure = |s: u64| Some(point(s, noisy(latency(s), &mut rng, 0.03)));
        adaptive_sweep(&grid, 24, 64, 2, &KneeOptions::default(), &mut measure).1
    }

    /// The knee nearest (in octaves) to `size`.
    fn knee_near(knees: &[Knee], size: u64) -> Knee {
        let d = |k: &Knee| (k.size_bytes as f64 / size as f64).log2().abs();
        *knees.iter().min_by(|a, b| d(a).total_cmp(&d(b))).unwrap()
    }

    #[test]
    fn misses_creeping_in_below_a_capacity_do_not_move_its_step() {
        // A Zen 4 guest's L2 (1 MiB): misses creep in from 288 KiB (another user of the
        // cache) to 43 % at 912 KiB, then the cyclic walk thrashes it; L1 32 KiB, an
        // effective L3 of 6 MiB.
        let (l2, creep_from) = (1024 * KIB, 288 * KIB);
        let latency = |s: u64| {
            let miss = if s > l2 {
                1.0
            } else if s > creep_from {
                0.45 * (s as f64 / creep_from as f64).log2()
                    / (l2 as f64 / creep_from as f64).log2()
            } else {
                0.0
            };
            let l2_time = 3.9 + miss * (13.5 - 3.9);
            step_latency(
                s,
                &[32 * KIB, l2, 6144 * KIB],
                &[1.1, l2_time, l2_time, 150.0],
            )
        };
        for seed in 0..20 {
            let knees = full_sweep(seed, &latency);
            for cap in [32 * KIB, l2, 6144 * KIB] {
                let knee = knee_near(&knees, cap);
                assert!(
                    within_steps(knee.size_bytes, cap, 24, 1.0),
                    "seed {seed}: {knee:?}"
                );
            }
        }
    }

    /// Steady-state miss fraction of a cyclic walk over `x` times the capacity under random
    /// replacement: a line survives the `m x C` misses between its uses with probability
    /// `(1 - 1/C)^(m x C) = exp(-m x)`, so `1 - m = exp(-m x)`.
    fn random_replacement_misses(x: f64) -> f64 {
        if x <= 1.0 {
            return 0.0;
        }
        let (mut lo, mut hi) = (1e-9, 1.0);
        for _ in 0..60 {
            let m = 0.5 * (lo + hi);
            if 1.0 - m > (-m * x).exp() {
                lo = m;
            } else {
                hi = m;
            }
        }
        lo
    }

    #[test]
    fn a_random_replacement_rise_gives_its_capacity() {
        assert!((random_replacement_misses(2.0) - 0.797).abs() < 0.001);
        let (l1, l2) = (48 * KIB, 512 * KIB);
        let latency = |s: u64| {
            let x = |c: u64| s as f64 / c as f64;
            let (m1, m2) = (
                random_replacement_misses(x(l1)),
                random_replacement_misses(x(l2)),
            );
            1.2 + m1 * (4.0 - 1.2) + m2 * (14.0 - 4.0)
        };
        for seed in 0..20 {
            let knees = full_sweep(seed, &latency);
            for cap in [l1, l2] {
                let knee = knee_near(&knees, cap);
                assert!(
                    within_steps(knee.size_bytes, cap, 24, 1.0),
                    "seed {seed}: {knee:?}"
                );
            }
        }
    }

    #[test]
    fn the_steepest_rise_is_found_in_miss_fractions() {
        let points: Vec<Point> = [(100, 1.0), (110, 1.5), (120, 2.0), (130, 9.0), (140, 10.0)]
            .iter()
            .map(|&(s, v)| point(s * KIB, v))
            .collect();
        // In ln t the first gaps rise as much as the third; in time only the third does.
        assert_eq!(steepest_rise(&points, (0, 4, 4), 1.0, 10.0), 2);
        assert_eq!(miss_fraction(5.5, 1.0, 10.0), 0.5);
        assert_eq!(miss_fraction(100.0, 1.0, 10.0), 1.0);
        assert_eq!(miss_fraction(0.5, 1.0, 10.0), 0.0);
        assert_eq!(miss_fraction(2.0, 1.0, 1.0), 0.0);
        assert_eq!(steepest_rise(&points[..1], (0, 4, 4), 1.0, 10.0), 0);
    }

    #[test]
    fn creeping_misses_switch_to_the_half_miss_point() {
        // Misses creep from 300 KiB to 30 % at 900 KiB and a sharp local jump at 1.5 MiB
        // (the steepest): the half-miss point, 1 MiB, is the capacity.
        let sizes = geometric_sizes(128 * KIB, 4096 * KIB, 24, 64);
        let points: Vec<Point> = sizes
            .iter()
            .map(|&s| {
                let x = s as f64 / KIB as f64;
                let m = if x <= 300.0 {
                    0.0
                } else if x <= 1000.0 {
                    0.45 * (x / 300.0).log2() / (1000.0f64 / 300.0).log2()
                } else if x <= 1500.0 {
                    0.55 + 0.1 * (x - 1000.0) / 500.0
                } else {
                    1.0
                };
                point(s, 4.0 + 10.0 * m)
            })
            .collect();
        let last = points.len() - 1;
        let gap = capacity_gap(&points, (0, last, last), 4.0, 14.0);
        assert!(points[gap].size_bytes <= 1000 * KIB && points[gap + 1].size_bytes > 1000 * KIB);
        let cliff = steepest_rise(&points, (0, last, last), 4.0, 14.0);
        assert!(
            points[cliff].size_bytes >= 1400 * KIB,
            "{:?}",
            points[cliff]
        );
        assert_eq!(
            monotone_fit(&[0.0, 0.5, 0.1, 0.3, 1.0]),
            vec![0.0, 0.3, 0.3, 0.3, 1.0]
        );
    }

    #[test]
    fn a_rise_split_by_a_short_plateau_is_one_knee() {
        // 1 ns to 32 KiB, 2 ns for a few points just past it, then 4 ns: both steps snap to
        // 32 KiB, so they are one knee from 1 to 4 ns.
        let points: Vec<Point> = geometric_sizes(KIB, 1024 * KIB, 24, 64)
            .into_iter()
            .map(|s| {
                let v = if s <= 32 * KIB {
                    1.0
                } else if s <= 35 * KIB {
                    2.0
                } else {
                    4.0
                };
                point(s, v)
            })
            .collect();
        let options = KneeOptions {
            min_plateau_octaves: 0.05,
            ..KneeOptions::default()
        };
        let knees = find_knees(&points, &options);
        assert_eq!(knees.len(), 1, "{knees:?}");
        assert_eq!(knees[0].size_bytes, 32 * KIB);
        assert!((knees[0].ratio - 4.0).abs() < 1e-9, "{:?}", knees[0]);
    }

    #[test]
    fn points_above_a_larger_footprint_in_a_rise_are_measured_again() {
        let knee = Knee {
            size_bytes: 32 * KIB,
            cliff_lo_bytes: 32 * KIB,
            cliff_hi_bytes: 34 * KIB,
            rise_start_bytes: 30 * KIB,
            rise_mid_bytes: 32 * KIB,
            end_bytes: 40 * KIB,
            before: 1.0,
            after: 4.0,
            ratio: 4.0,
            confidence: 1.0,
        };
        // 33 KiB stands above 34 KiB (disturbed); 8 KiB is outside the span.
        let points: Vec<Point> = [
            (8, 9.0),
            (30, 1.0),
            (33, 3.5),
            (34, 3.0),
            (38, 4.0),
            (64, 2.0),
        ]
        .iter()
        .map(|&(s, v)| point(s * KIB, v))
        .collect();
        assert_eq!(out_of_order(&points, &[knee]), vec![2]);
        assert!(out_of_order(&points, &[]).is_empty());
        // Measured again, the disturbed point comes down and the curve is in order.
        let mut calls = Vec::new();
        let mut measure = |s: u64| {
            calls.push(s);
            let v = [(30, 1.0), (33, 2.0), (34, 3.0), (38, 4.0)]
                .iter()
                .find(|&&(k, _)| k * KIB == s)
                .map_or(9.0, |&(_, v)| v);
            Some(point(s, v))
        };
        let mut again = points.clone();
        assert!(measure_again(&mut again, &[2], &mut measure));
        assert_eq!(again[2].value, 2.0);
        assert_eq!(calls, vec![33 * KIB]);
    }

    #[test]
    fn plausible_sizes_are_powers_of_two_or_three_times_them() {
        assert_eq!(plausible_size(24 * KIB, 30 * KIB, 0.125), Some(32 * KIB));
        assert_eq!(plausible_size(40 * KIB, 50 * KIB, 0.0), Some(48 * KIB));
        assert_eq!(plausible_size(33 * KIB, 47 * KIB, 0.0), None);
        assert_eq!(plausible_size(33 * KIB, 33 * KIB, 0.125), Some(32 * KIB));
        assert_eq!(plausible_size(200 * KIB, 600 * KIB, 0.0), Some(512 * KIB));
        assert_eq!(plausible_size(32 * KIB, 32 * KIB, 0.0), Some(32 * KIB));
        assert_eq!(plausible_size(0, 0, 0.0), None);
    }

    #[test]
    fn a_narrow_level_that_a_cliff_ends_is_a_plateau() {
        // An L2 ramp (7.6 to 31 ns over 1.3 octaves from 2 MiB) ending 0.4 octave before a
        // cliff to memory at 6.5 MiB: two knees, not one from 7.6 to 110 ns.
        let ramp = |s: u64| {
            let x = ((s as f64 / (2048 * KIB) as f64).log2() / 1.3).clamp(0.0, 1.0);
            7.6 * (31.0f64 / 7.6).powf(x)
        };
        let cliff = 6656 * KIB;
        let points: Vec<Point> = geometric_sizes(64 * KIB, 32 * 1024 * KIB, 24, 64)
            .into_iter()
            .map(|s| point(s, if s <= cliff { ramp(s) } else { 110.0 }))
            .collect();
        let knees = find_knees(&points, &KneeOptions::default());
        assert_eq!(knees.len(), 2, "{knees:?}");
        assert_eq!(knees[1].size_bytes, 6 * 1024 * KIB, "{knees:?}");
    }

    #[test]
    fn wiggles_inside_a_plateau_are_not_steps() {
        // +-8 % systematic wiggle on the lower plateau, one real 3x step at 64 KiB.
        let points: Vec<Point> = geometric_sizes(KIB, 8 * 1024 * KIB, 8, 64)
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let base = if s <= 64 * KIB { 1.0 } else { 3.0 };
                point(s, base * (1.0 + 0.08 * ((i % 4) as f64 - 1.5) / 1.5))
            })
            .collect();
        let knees = find_knees(&points, &KneeOptions::default());
        assert_eq!(knees.len(), 1, "{knees:?}");
        assert_eq!(knees[0].size_bytes, 64 * KIB);
    }

    #[test]
    fn flat_and_tiny_curves_have_no_knee() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let flat: Vec<Point> = geometric_sizes(KIB, 1 << 30, 4, 64)
            .into_iter()
            .map(|s| point(s, noisy(3.0, &mut rng, 0.05)))
            .collect();
        assert!(find_knees(&flat, &KneeOptions::default()).is_empty());
        assert!(find_knees(&[], &KneeOptions::default()).is_empty());
        assert!(find_knees(&flat[..3], &KneeOptions::default()).is_empty());
    }

    #[test]
    fn interrupted_sweeps_keep_their_points() {
        let grid = geometric_sizes(KIB, 1024 * KIB, 4, 64);
        let mut left = 5;
        let mut measure = |s: u64| {
            left -= 1;
            (left >= 0).then(|| point(s, 1.0))
        };
        let (points, _, complete) =
            adaptive_sweep(&grid, 16, 64, 2, &KneeOptions::default(), &mut measure);
        assert!(!complete);
        assert_eq!(points.len(), 5);
    }

    #[test]
    fn geometric_sizes_are_rounded_increasing_and_bounded() {
        let s = geometric_sizes(1000, 64_000, 4, 64);
        assert_eq!(s[0], 1024);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(*s.last().unwrap() <= 64_000);
        assert!(s.iter().all(|x| x % 64 == 0));
        assert_eq!(geometric_sizes(0, 0, 0, 0), Vec::<u64>::new());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_curves_never_panic(values in proptest::collection::vec(0.0f64..1e6, 0..60)) {
            let points: Vec<Point> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| point(1024 << (i / 4), v))
                .collect();
            for k in find_knees(&points, &KneeOptions::default()) {
                proptest::prop_assert!(k.confidence >= 0.0 && k.confidence <= 1.0);
            }
        }
    }
}
