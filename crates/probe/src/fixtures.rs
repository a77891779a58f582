//! Curves for tests: recorded probe runs, whose points are `[size_bytes, value, median]` as
//! the JSON report keeps them, with their knees found afresh by today's rules; and curves
//! modelled for a machine that is not at hand ([`intel`]).

use crate::knee::Point;
use crate::run::{Curve, curve_knees};

/// The curves of a recorded run (`include_str!` of a file under `testdata/`).
pub(crate) fn fixture_curves(text: &str) -> Vec<Curve> {
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    doc["curves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let points: Vec<Point> = c["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| Point {
                    size_bytes: p[0].as_u64().unwrap(),
                    value: p[1].as_f64().unwrap(),
                    median: p[2].as_f64().unwrap(),
                })
                .collect();
            let name = c["name"].as_str().unwrap();
            Curve {
                name: name.into(),
                unit: c["unit"].as_str().unwrap().into(),
                knees: curve_knees(name, &points),
                points,
            }
        })
        .collect()
}

/// Modelled curves of an Intel core of the Golden Cove / Raptor Cove generation, as a guest
/// of an Emerald Rapids Xeon (family 6 model 0xcf) would measure them: a machine of that
/// geometry is not at hand, so the knee rules are checked on curves built from its caches.
///
/// The pointer chase's time per load is the sum over the levels of the share of loads served
/// there times its latency (L1 5 cycles and L2 16 cycles at 2.1 GHz, L3 33 ns, memory
/// 110 ns): the L1d (48 KiB, 12 ways, indexed inside the page) misses like an LRU cache under
/// a cyclic walk, the L2 (2 MiB, 16 ways, physically indexed) by the random 4 KiB page
/// placement model of [`crate::placement`], and the L3 the guest sees steps at 6.7 MiB. Past
/// the STLB's reach a load pays an eighth of a page walk (the chase enters a page once every
/// eight loads). Each measurement carries up to 3 % of noise from a seeded generator.
pub(crate) mod intel {
    use loopscope_machine::{Cache, CacheKind, Machine};
    use rand::{Rng, SeedableRng};

    use crate::knee::{KneeOptions, Point, adaptive_sweep_until, geometric_sizes};
    use crate::levels::{SHUFFLED_CURVE, shuffled_walk_sizes};
    use crate::placement::{HitTable, Placement, Replacement, modelled_miss_fraction};
    use crate::plateau::memory_plateau_reached;
    use crate::run::Curve;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    const CORE_HZ: f64 = 2.1e9;

    /// L1d: 48 KiB, 12 ways.
    pub(crate) const L1D: (u64, usize) = (48 * KIB, 12);
    /// L1i: 32 KiB, 8 ways.
    pub(crate) const L1I: (u64, usize) = (32 * KIB, 8);
    /// L2: 2 MiB, 16 ways.
    pub(crate) const L2: (u64, usize) = (2 * MIB, 16);
    /// L3 as advertised and as a guest sees it (its ways do not matter: the last level is
    /// not fitted).
    pub(crate) const L3_ADVERTISED_BYTES: u64 = 300 * MIB;
    const L3_EFFECTIVE_BYTES: f64 = 6.7 * MIB as f64;
    /// First-level DTLB and STLB entries (4 KiB pages) and their ways.
    pub(crate) const DTLB: (u64, usize) = (64, 4);
    pub(crate) const STLB: (u64, usize) = (2048, 16);

    const L1_NS: f64 = 5.0 / CORE_HZ * 1e9;
    const L2_NS: f64 = 16.0 / CORE_HZ * 1e9;
    const L3_NS: f64 = 33.0;
    const MEMORY_NS: f64 = 110.0;
    /// A DTLB miss that hits the STLB (7 cycles), and a page walk of a guest.
    const STLB_HIT_NS: f64 = 7.0 / CORE_HZ * 1e9;
    const WALK_NS: f64 = 25.0;
    /// Relative noise of one measurement, either way.
    const NOISE: f64 = 0.03;

    /// The machine description a guest of that Xeon reads from CPUID.
    pub(crate) fn machine() -> Machine {
        let mut machine = Machine::unknown();
        for (level, kind, size, ways) in [
            (1, CacheKind::Data, L1D.0, L1D.1 as u64),
            (1, CacheKind::Instruction, L1I.0, L1I.1 as u64),
            (2, CacheKind::Unified, L2.0, L2.1 as u64),
            (3, CacheKind::Unified, L3_ADVERTISED_BYTES, 15),
        ] {
            machine
                .caches
                .push(Cache::new(level, kind, size, 64, ways, 1));
        }
        machine
    }

    /// The probe's sweep densities: (coarse, fine) points per octave and refinement rounds,
    /// as `run::Budget` sets them for quick and full runs.
    pub(crate) fn budget(quick: bool) -> (u32, u32, u32) {
        if quick { (4, 16, 1) } else { (6, 24, 2) }
    }

    /// Per-level miss fractions of a cyclic walk over `size_bytes`.
    struct Misses {
        l1: HitTable,
        l2: HitTable,
    }

    impl Misses {
        fn new(l2_replacement: Replacement) -> Misses {
            Misses {
                l1: HitTable::new(L1D.1, Replacement::Lru, 64),
                l2: HitTable::new(L2.1, l2_replacement, 4000),
            }
        }

        fn l1(&self, size_bytes: u64) -> f64 {
            modelled_miss_fraction(size_bytes, L1D.0 as f64, Placement::Contiguous, &self.l1)
        }

        fn l2(&self, size_bytes: u64) -> f64 {
            modelled_miss_fraction(size_bytes, L2.0 as f64, Placement::RandomPages, &self.l2)
        }
    }

    /// Share of a cyclic walk's extra time that walks in new orders keep near a capacity
    /// (see `placement::RANDOM_REPLACEMENT_SHARE`).
    fn shuffled_share(replacement: Replacement) -> f64 {
        match replacement {
            Replacement::Random => 0.87,
            Replacement::Lru => 0.55,
        }
    }

    /// Noiseless time per load of the chase over `size_bytes`; `shares` scales the misses of
    /// the L1d and L2 where they are partial (walks in new orders).
    fn chase_ns(misses: &Misses, size_bytes: u64, shares: (f64, f64)) -> f64 {
        let partial = |m: f64, share: f64| if m < 1.0 { m * share } else { m };
        let m1 = partial(misses.l1(size_bytes), shares.0);
        let m2 = partial(misses.l2(size_bytes), shares.1);
        let m3 = f64::from(u8::from(size_bytes as f64 > L3_EFFECTIVE_BYTES));
        let pages = size_bytes / 4096;
        let walks = f64::from(u8::from(pages > STLB.0)) / 8.0;
        L1_NS
            + m1 * (L2_NS - L1_NS)
            + m2 * (L3_NS - L2_NS)
            + m3 * (MEMORY_NS - L3_NS)
            + walks * WALK_NS
    }

    fn noisy(value: f64, rng: &mut rand::rngs::StdRng) -> Point {
        let value = value * (1.0 + NOISE * (2.0 * rng.random::<f64>() - 1.0));
        Point {
            size_bytes: 0,
            value,
            median: value,
        }
    }

    /// The pointer chase swept as the probe sweeps it (a coarse grid from 1 KiB to four times
    /// the advertised L3, ended on the memory plateau, refined around the knees) and the walks
    /// in new orders at the sizes the probe picks, with the L2 under `l2_replacement`.
    pub(crate) fn chase_curves(quick: bool, l2_replacement: Replacement, seed: u64) -> Vec<Curve> {
        let misses = Misses::new(l2_replacement);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (coarse, fine, rounds) = budget(quick);
        let llc = L3_ADVERTISED_BYTES;
        let grid = geometric_sizes(KIB, 4 * llc, coarse, 64);
        let options = KneeOptions::default();
        let enough = |points: &[Point]| memory_plateau_reached(points, llc, &options);
        let mut measure = |size: u64| {
            Some(Point {
                size_bytes: size,
                ..noisy(chase_ns(&misses, size, (1.0, 1.0)), &mut rng)
            })
        };
        let (points, knees, _) =
            adaptive_sweep_until(&grid, (fine, 64, rounds), &options, &enough, &mut measure);
        let chase = Curve {
            name: "pointer_chase".into(),
            unit: "ns per load".into(),
            points,
            knees,
        };
        let shares = (
            shuffled_share(Replacement::Lru),
            shuffled_share(l2_replacement),
        );
        let shuffled = shuffled_walk_sizes(&chase, llc)
            .into_iter()
            .map(|size| Point {
                size_bytes: size,
                ..noisy(chase_ns(&misses, size, shares), &mut rng)
            })
            .collect();
        let shuffled = Curve {
            name: SHUFFLED_CURVE.into(),
            unit: "ns per load, rounds in new random orders".into(),
            points: shuffled,
            knees: Vec::new(),
        };
        vec![chase, shuffled]
    }

    /// The page walk (one line in each of more and more 4 KiB pages, at the page's line
    /// `page % 64`, in a random cyclic order) over the probe's spans: the lines miss the L1d
    /// and L2 by the same models as the chase (one line a page over random pages fills an L2
    /// set as a buffer of `pages * 64` bytes does), every load misses the DTLB past its
    /// entries and pays a walk past the STLB's.
    pub(crate) fn page_walk(quick: bool, seed: u64) -> Vec<Point> {
        let misses = Misses::new(Replacement::Lru);
        let dtlb = HitTable::new(DTLB.1, Replacement::Lru, 64);
        let stlb = HitTable::new(STLB.1, Replacement::Lru, 64);
        // An entry per page: a TLB of `n` entries is a cache of `n` lines over `pages` lines.
        let tlb_misses = |pages: u64, (entries, _): (u64, usize), table: &HitTable| {
            modelled_miss_fraction(
                pages * 64,
                (entries * 64) as f64,
                Placement::Contiguous,
                table,
            )
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (coarse, _, _) = budget(quick);
        crate::tlb::page_walk_spans(L2.0, 4 * L3_ADVERTISED_BYTES, coarse)
            .into_iter()
            .map(|span| {
                let pages = span / 4096;
                let lines_bytes = pages * 64;
                let value = L1_NS
                    + misses.l1(lines_bytes) * (L2_NS - L1_NS)
                    + misses.l2(lines_bytes) * (L3_NS - L2_NS)
                    + tlb_misses(pages, DTLB, &dtlb) * STLB_HIT_NS
                    + tlb_misses(pages, STLB, &stlb) * WALK_NS;
                Point {
                    size_bytes: span,
                    ..noisy(value, &mut rng)
                }
            })
            .collect()
    }
}
