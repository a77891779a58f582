//! The capacity of a physically indexed cache whose step is smeared by page placement.
//!
//! A cache of `C` bytes and `W` ways indexed by physical address sees a buffer through its
//! pages. When the pages are placed at random in physical memory (4 KiB pages: a guest whose
//! host backs it with small pages, or a kernel without page colouring), the buffer's pages
//! fall into `C / (W * 4 KiB)` colours at random, a colour's sets each get one line of every
//! page of that colour, and some sets overflow long before the buffer fills the cache. A
//! cyclic walk then misses from well below `C` and the step becomes a ramp whose half-miss
//! point lies past `C` (1.35x for 8 ways under random replacement). On a Zen 3 guest the L2
//! (512 KiB, 8 ways) ramps from 290 KiB to 1 MiB in every run.
//!
//! [`fit_capacity`] fits the expected miss fraction of such a cache (a binomial number of
//! pages per colour, each set's misses under cyclic reuse from [`HitTable`]) to the ramp,
//! over `C` and the placement (random pages or contiguous), with one free step below `C` for
//! a TLB's reach. The replacement policy cannot be told from the ramp (an LRU cache 1.4x
//! larger gives nearly the same one); it is measured instead by [`replacement_from_walks`]:
//! a walk that visits the lines in a new random order every round reuses some lines sooner
//! than the cycle does, which an LRU cache turns into hits and random replacement hardly
//! notices.

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::knee::Point;

/// Page size of the random placement model: the smallest x86-64 page.
pub const PLACEMENT_PAGE_BYTES: u64 = 4096;

/// Replacement policy, as far as a cyclic walk can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Replacement {
    /// A set holding more lines than ways misses on every access of a cyclic walk.
    Lru,
    /// A miss evicts a random way: a cyclic walk keeps some hits past the capacity.
    Random,
}

/// How the buffer's pages map onto the cache's sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// 4 KiB pages at random physical addresses.
    RandomPages,
    /// Physically contiguous: every set gets the same number of lines.
    Contiguous,
}

/// A hit rate below which a set counts as missing every access.
const NEGLIGIBLE_HIT_RATE: f64 = 1e-3;

/// Steady-state hit rate of a cyclic walk over `k` lines in one set, for `k` up to a limit.
#[derive(Debug, Clone)]
pub struct HitTable {
    ways: usize,
    hits: Vec<f64>,
}

impl HitTable {
    /// The table for `ways` ways under `replacement`, for up to `max_lines` lines per set.
    /// Random replacement is simulated with a fixed seed (the closed forms are approximations
    /// off by 0.1 near `k = W + 1`), so the table is the same on every run.
    pub fn new(ways: usize, replacement: Replacement, max_lines: usize) -> HitTable {
        let ways = ways.max(1);
        let mut hits = vec![1.0; ways + 1];
        if replacement == Replacement::Random {
            // Past a thousandth the rate no longer moves a fit: the table ends there.
            for k in ways + 1..=max_lines {
                let rate = simulated_random_hits(k, ways);
                if rate < NEGLIGIBLE_HIT_RATE {
                    break;
                }
                hits.push(rate);
            }
        }
        HitTable { ways, hits }
    }

    /// Hit rate with `k` lines in the set (0 past the table).
    pub fn hit_rate(&self, k: usize) -> f64 {
        self.hits.get(k).copied().unwrap_or(0.0)
    }
}

/// Hit rate of a cyclic walk over `k` lines in a `ways`-way random-replacement set.
fn simulated_random_hits(k: usize, ways: usize) -> f64 {
    const WARM_ROUNDS: usize = 50;
    const ROUNDS: usize = 600;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(k as u64 * 1_000_003 + ways as u64);
    let mut slots: Vec<usize> = (0..ways).collect();
    let mut present = vec![false; k];
    for &line in &slots {
        present[line] = true;
    }
    let mut hits = 0usize;
    for round in 0..WARM_ROUNDS + ROUNDS {
        for line in 0..k {
            if present[line] {
                hits += usize::from(round >= WARM_ROUNDS);
            } else {
                let victim = rng.random_range(0..ways);
                present[slots[victim]] = false;
                slots[victim] = line;
                present[line] = true;
            }
        }
    }
    hits as f64 / (ROUNDS * k) as f64
}

/// Expected miss fraction of a cyclic walk over `size_bytes` in a cache of `capacity_bytes`
/// with the table's ways.
pub fn modelled_miss_fraction(
    size_bytes: u64,
    capacity_bytes: f64,
    placement: Placement,
    table: &HitTable,
) -> f64 {
    let ways = table.ways as f64;
    let way_bytes = capacity_bytes / ways;
    let colours = way_bytes / PLACEMENT_PAGE_BYTES as f64;
    if placement == Placement::Contiguous || colours <= 1.0 {
        // Every set gets size / way_bytes lines, some one more than others.
        let per_set = size_bytes as f64 / way_bytes;
        let (lo, frac) = (per_set.floor(), per_set.fract());
        let misses = |k: f64| k * (1.0 - table.hit_rate(k as usize));
        return if per_set > 0.0 {
            ((1.0 - frac) * misses(lo) + frac * misses(lo + 1.0)) / per_set
        } else {
            0.0
        };
    }
    // Pages per colour are Binomial(pages, 1 / colours); a colour's sets each hold one line
    // of each of its pages.
    let pages = (size_bytes as f64 / PLACEMENT_PAGE_BYTES as f64)
        .round()
        .max(1.0) as usize;
    let p = 1.0 / colours;
    let mean = pages as f64 * p;
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    let mut ln_pmf = pages as f64 * ln_q;
    let mut misses = 0.0;
    for k in 0..=pages {
        if k > 0 {
            ln_pmf += ((pages - k + 1) as f64 / k as f64).ln() + ln_p - ln_q;
        }
        if k > table.ways {
            let pmf = ln_pmf.exp();
            if pmf < 1e-12 && k as f64 > mean {
                break;
            }
            misses += pmf * k as f64 * (1.0 - table.hit_rate(k));
        }
    }
    misses / mean
}

/// A capacity fitted to a ramp.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CapacityFit {
    /// The fitted capacity.
    pub capacity_bytes: u64,
    /// The placement that fitted better.
    pub placement: Placement,
    /// The replacement policy the fit assumed.
    pub replacement: Replacement,
    /// Time of a hit (the level's latency), in the curve's unit.
    pub hit_ns: f64,
    /// Extra time of a miss.
    pub miss_penalty_ns: f64,
    /// A step below the capacity (a TLB's reach), with its height.
    pub step: Option<(u64, f64)>,
    /// Root-mean-square residual of the fit.
    pub rms_ns: f64,
    /// Where the misses reach a tenth, by the fitted model.
    pub tenth_miss_bytes: u64,
}

/// Candidate capacities per octave of the fit's grid.
const GRID_PER_OCTAVE: i32 = 32;

/// Octaves either side of the advertised size the grid covers.
const GRID_OCTAVES: i32 = 2;

/// Largest step below the capacity, as a share of the miss penalty: a TLB's reach costs a
/// page walk's part of a load, a cache level a whole next-level access.
const MAX_STEP_SHARE: f64 = 0.25;

/// Fewest points in the window for a fit.
pub const MIN_FIT_POINTS: usize = 8;

/// What a fit may choose besides the capacity.
#[derive(Debug, Clone, Copy)]
pub struct FitShape<'a> {
    /// Placements to try.
    pub placements: &'a [Placement],
    /// Whether one step below the capacity (a TLB's reach) may be fitted.
    pub step_below: bool,
}

/// Fits the ramp of `points` within `window` (bytes, inclusive) to a cache of the advertised
/// size's order with `ways` ways and `replacement`: the capacity and placement (of the
/// shape's) with the least squared residual of `t = hit + penalty * miss(S) + step *
/// [S >= s0]`, the step only where the shape allows it.
pub fn fit_capacity(
    points: &[Point],
    window: (u64, u64),
    (advertised_bytes, ways): (u64, usize),
    replacement: Replacement,
    shape: FitShape<'_>,
) -> Option<CapacityFit> {
    let inside: Vec<&Point> = points
        .iter()
        .filter(|p| (window.0..=window.1).contains(&p.size_bytes) && p.value.is_finite())
        .collect();
    if inside.len() < MIN_FIT_POINTS || ways == 0 || advertised_bytes == 0 {
        return None;
    }
    let largest = inside.iter().map(|p| p.size_bytes).max().unwrap_or(0);
    let smallest_capacity = advertised_bytes as f64 / f64::from(1 << GRID_OCTAVES);
    // Lines per set reach at most a few times the mean of the smallest capacity's fullest set.
    let max_lines = (largest as f64 / smallest_capacity * ways as f64 * 3.0) as usize + 64;
    let table = HitTable::new(ways, replacement, max_lines);
    let mut best: Option<CapacityFit> = None;
    for &placement in shape.placements {
        for j in -GRID_OCTAVES * GRID_PER_OCTAVE..=GRID_OCTAVES * GRID_PER_OCTAVE {
            let capacity =
                advertised_bytes as f64 * (f64::from(j) / f64::from(GRID_PER_OCTAVE)).exp2();
            let misses: Vec<f64> = inside
                .iter()
                .map(|p| modelled_miss_fraction(p.size_bytes, capacity, placement, &table))
                .collect();
            let step_limit = if shape.step_below { capacity } else { 0.0 };
            let candidate = best_with_step(&inside, &misses, step_limit);
            if let Some(fit) = candidate
                && best.is_none_or(|b| fit.mean_square < b.rms_ns * b.rms_ns)
            {
                best = Some(CapacityFit {
                    capacity_bytes: capacity.round() as u64,
                    placement,
                    replacement,
                    hit_ns: fit.hit_ns,
                    miss_penalty_ns: fit.penalty_ns,
                    step: fit.step,
                    rms_ns: fit.mean_square.sqrt(),
                    tenth_miss_bytes: tenth_miss(&inside, &misses),
                });
            }
        }
    }
    best
}

/// The smallest size whose modelled miss fraction reaches a tenth.
fn tenth_miss(points: &[&Point], misses: &[f64]) -> u64 {
    points
        .iter()
        .zip(misses)
        .find(|(_, m)| **m >= 0.1)
        .map_or(0, |(p, _)| p.size_bytes)
}

/// The best linear fit of a ramp to one candidate's miss fractions.
#[derive(Debug, Clone, Copy)]
struct LinearFit {
    hit_ns: f64,
    penalty_ns: f64,
    step: Option<(u64, f64)>,
    mean_square: f64,
}

/// The best linear fit with no step or one step at a point below `limit_bytes`.
fn best_with_step(points: &[&Point], misses: &[f64], limit_bytes: f64) -> Option<LinearFit> {
    let values: Vec<f64> = points.iter().map(|p| p.value).collect();
    let mut best = least_squares(misses, None, &values)
        .filter(|&(_, penalty, _, _)| penalty > 0.0)
        .map(|(hit_ns, penalty_ns, _, mean_square)| LinearFit {
            hit_ns,
            penalty_ns,
            step: None,
            mean_square,
        });
    for (i, p) in points.iter().enumerate().skip(1) {
        if p.size_bytes as f64 >= limit_bytes {
            break;
        }
        let Some((hit_ns, penalty_ns, height, mean_square)) =
            least_squares(misses, Some(i), &values)
        else {
            continue;
        };
        if penalty_ns > 0.0
            && (0.0..=MAX_STEP_SHARE * penalty_ns).contains(&height)
            && best.is_none_or(|b| mean_square < b.mean_square)
        {
            best = Some(LinearFit {
                hit_ns,
                penalty_ns,
                step: Some((p.size_bytes, height)),
                mean_square,
            });
        }
    }
    best
}

/// Least squares of `y = a + b * x + c * [i >= step]`: `(a, b, c, mean squared residual)`.
fn least_squares(x: &[f64], step: Option<usize>, y: &[f64]) -> Option<(f64, f64, f64, f64)> {
    let n = x.len();
    let column = |i: usize| step.map_or(0.0, |s| f64::from(u8::from(i >= s)));
    // Normal equations over the columns (1, x, step).
    let mut m = [[0.0f64; 3]; 3];
    let mut r = [0.0f64; 3];
    for i in 0..n {
        let row = [1.0, x[i], column(i)];
        for a in 0..3 {
            for b in 0..3 {
                m[a][b] += row[a] * row[b];
            }
            r[a] += row[a] * y[i];
        }
    }
    let dims = if step.is_some() { 3 } else { 2 };
    let coef = solve(&m, &r, dims)?;
    let mse = (0..n)
        .map(|i| (coef[0] + coef[1] * x[i] + coef[2] * column(i) - y[i]).powi(2))
        .sum::<f64>()
        / n as f64;
    Some((coef[0], coef[1], coef[2], mse))
}

/// Gaussian elimination of the leading `dims` x `dims` system; `None` when singular.
fn solve(m: &[[f64; 3]; 3], r: &[f64; 3], dims: usize) -> Option<[f64; 3]> {
    let (mut a, mut b) = (*m, *r);
    for col in 0..dims {
        let pivot = (col..dims).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in 0..dims {
            if row != col {
                let f = a[row][col] / a[col][col];
                let pivot_row = a[col];
                for (x, p) in a[row].iter_mut().zip(pivot_row).take(dims).skip(col) {
                    *x -= f * p;
                }
                b[row] -= f * b[col];
            }
        }
    }
    let mut out = [0.0; 3];
    for i in 0..dims {
        out[i] = b[i] / a[i][i];
    }
    Some(out)
}

/// Share of a cyclic walk's extra time that a walk in a new random order every round keeps,
/// above which the policy is taken for random replacement: simulated over random 4 KiB
/// placement at 0.8 to 1.3 times the capacity, random replacement keeps 0.87 to 0.88 and LRU
/// 0.46 to 0.63.
pub const RANDOM_REPLACEMENT_SHARE: f64 = 0.75;

/// The replacement policy from pairs of `(cyclic, shuffled)` times per load at the same
/// sizes, both above a hit time `hit_ns`: the share of the cyclic walk's extra time the
/// shuffled walk keeps, and the policy it points to. `None` without a pair whose cyclic walk
/// stands clear of the hit time.
pub fn replacement_from_walks(pairs: &[(f64, f64)], hit_ns: f64) -> Option<(Replacement, f64)> {
    let (mut kept, mut extra) = (0.0, 0.0);
    for &(cyclic, shuffled) in pairs {
        if cyclic.is_finite() && shuffled.is_finite() && cyclic > hit_ns * 1.1 {
            kept += (shuffled - hit_ns).max(0.0);
            extra += cyclic - hit_ns;
        }
    }
    if extra <= 0.0 {
        return None;
    }
    let share = kept / extra;
    let policy = if share >= RANDOM_REPLACEMENT_SHARE {
        Replacement::Random
    } else {
        Replacement::Lru
    };
    Some((policy, share))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;
    const BOTH: FitShape<'static> = FitShape {
        placements: &[Placement::RandomPages, Placement::Contiguous],
        step_below: true,
    };

    #[test]
    fn random_replacement_keeps_hits_past_the_ways_and_lru_none() {
        let random = HitTable::new(8, Replacement::Random, 40);
        let lru = HitTable::new(8, Replacement::Lru, 40);
        assert_eq!(random.hit_rate(8), 1.0);
        assert_eq!(lru.hit_rate(9), 0.0);
        // A simulation of 3000 rounds gives 0.776 at 9 lines, 0.403 at 12, 0.053 at 24.
        assert!(
            (random.hit_rate(9) - 0.776).abs() < 0.02,
            "{}",
            random.hit_rate(9)
        );
        assert!((random.hit_rate(12) - 0.403).abs() < 0.02);
        assert!((random.hit_rate(24) - 0.053).abs() < 0.01);
        assert!(random.hit_rate(1000) <= random.hit_rate(24));
    }

    #[test]
    fn contiguous_caches_miss_from_their_capacity_and_random_pages_before_it() {
        let table = HitTable::new(8, Replacement::Lru, 200);
        let c = 512.0 * K as f64;
        let miss = |s: u64, placement| modelled_miss_fraction(s * K, c, placement, &table);
        assert_eq!(miss(500, Placement::Contiguous), 0.0);
        assert_eq!(miss(1024, Placement::Contiguous), 1.0);
        // 16 colours: at 341 KiB a colour holds 5.3 pages on average, some over 8.
        let early = miss(341, Placement::RandomPages);
        assert!((0.1..0.2).contains(&early), "{early}");
        assert!((0.5..0.6).contains(&miss(512, Placement::RandomPages)));
        assert!(miss(2048, Placement::RandomPages) > 0.99);
        // A cache of one colour (a 4 KiB way) is contiguous whatever the pages.
        let l1 = modelled_miss_fraction(30 * K, 32.0 * K as f64, Placement::RandomPages, &table);
        assert_eq!(l1, 0.0);
    }

    fn curve(
        capacity: f64,
        placement: Placement,
        replacement: Replacement,
        tlb: Option<u64>,
    ) -> Vec<Point> {
        let table = HitTable::new(8, replacement, 400);
        crate::knee::geometric_sizes(64 * K, 4096 * K, 24, 64)
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let wobble = if i % 2 == 0 { 0.05 } else { -0.05 };
                let tlb_ns = tlb.map_or(0.0, |t| if s >= t { 0.6 } else { 0.0 });
                let v = 4.0
                    + tlb_ns
                    + 12.0 * modelled_miss_fraction(s, capacity, placement, &table)
                    + wobble;
                Point {
                    size_bytes: s,
                    value: v,
                    median: v,
                }
            })
            .collect()
    }

    #[test]
    fn fits_recover_capacity_and_placement_with_a_tlb_step() {
        for replacement in [Replacement::Random, Replacement::Lru] {
            for placement in [Placement::RandomPages, Placement::Contiguous] {
                for capacity_kib in [448.0, 512.0, 600.0] {
                    let points = curve(
                        capacity_kib * K as f64,
                        placement,
                        replacement,
                        Some(256 * K),
                    );
                    let fit =
                        fit_capacity(&points, (40 * K, 4096 * K), (512 * K, 8), replacement, BOTH)
                            .unwrap();
                    let ratio = fit.capacity_bytes as f64 / (capacity_kib * K as f64);
                    assert!(
                        (0.97..1.03).contains(&ratio),
                        "{replacement:?} {placement:?} {capacity_kib}: {fit:?}"
                    );
                    assert_eq!(fit.placement, placement);
                    // A sharp step between two grid points leaves one point off by a share.
                    assert!(fit.rms_ns < 0.2, "{fit:?}");
                }
            }
        }
    }

    #[test]
    fn too_few_points_or_no_ways_give_no_fit() {
        let points = curve(
            512.0 * K as f64,
            Placement::RandomPages,
            Replacement::Random,
            None,
        );
        assert!(
            fit_capacity(
                &points[..5],
                (0, u64::MAX),
                (512 * K, 8),
                Replacement::Random,
                BOTH
            )
            .is_none()
        );
        assert!(
            fit_capacity(
                &points,
                (0, u64::MAX),
                (512 * K, 0),
                Replacement::Random,
                BOTH
            )
            .is_none()
        );
        assert!(fit_capacity(&points, (1, 2), (512 * K, 8), Replacement::Random, BOTH).is_none());
    }

    #[test]
    fn shuffled_walks_tell_random_replacement_from_lru() {
        // Zen 3 L2 pairs near 600 KiB: the shuffled walk keeps most of the extra time.
        let (policy, share) = replacement_from_walks(&[(9.0, 8.4), (10.0, 9.3)], 4.0).unwrap();
        assert_eq!(policy, Replacement::Random);
        assert!((share - 0.873).abs() < 0.01, "{share}");
        let (policy, _) = replacement_from_walks(&[(9.0, 6.5)], 4.0).unwrap();
        assert_eq!(policy, Replacement::Lru);
        assert!(replacement_from_walks(&[(4.1, 4.0)], 4.0).is_none());
        assert!(replacement_from_walks(&[(f64::NAN, 4.0)], 4.0).is_none());
        assert!(replacement_from_walks(&[], 4.0).is_none());
    }
}
