//! When a pointer chase has seen every cache: the memory plateau established past its last
//! knee. The sweep stops there instead of running to a multiple of the advertised last-level
//! cache, which on a machine advertising hundreds of MiB (an Intel Xeon's 300 MiB L3, of
//! which a guest sees a few) means building and walking gigabyte cycles for nothing.
//!
//! A plateau past the last knee is memory's when it lies beyond the advertised last-level
//! cache (no cache is larger than advertised), or when its level is at least
//! [`MEMORY_OVER_L1`] times the curve's first level. That second rule rests on two facts of
//! every current x86-64 core: an L1d hit takes 4 or 5 cycles, and a DRAM access at least about
//! 60 ns (150 cycles and more at 2.5 GHz), while no last-level cache takes more than about 25
//! times an L1 hit (a Sapphire or Emerald Rapids mesh L3, about 33 ns at 3.8 GHz against 5
//! cycles; Zen 3 and Zen 4 guests here 13 to 14 times, their memory 100 to 125 times).

use crate::knee::{KneeOptions, Point, find_knees, plateaus};

/// Smallest ratio of a plateau's level to the curve's first (L1 hit) level for it to be
/// memory's.
pub const MEMORY_OVER_L1: f64 = 32.0;

/// How wide (octaves, ending at the newest point) the flat stretch past the last knee must be.
pub const PLATEAU_OCTAVES: f64 = 1.0;

/// Fewest points in that stretch.
pub const PLATEAU_MIN_POINTS: usize = 3;

/// True when the points so far (sorted by size, the newest the largest) end in the memory
/// plateau: the last plateau of the curve (as [`plateaus`] finds them, which frames the last
/// knee) holds the newest point, spans at least [`PLATEAU_OCTAVES`] and [`PLATEAU_MIN_POINTS`]
/// points (twice the narrowest plateau, so the refinement that follows, adding and measuring
/// again points of the rise, leaves it a plateau), and either starts beyond `llc_bytes` (the
/// advertised last-level cache) or lies at least [`MEMORY_OVER_L1`] times the first knee's
/// lower level.
pub fn memory_plateau_reached(points: &[Point], llc_bytes: u64, options: &KneeOptions) -> bool {
    if points.len() < PLATEAU_MIN_POINTS
        || points
            .iter()
            .any(|p| !(p.value.is_finite() && p.value > 0.0))
    {
        return false;
    }
    let knees = find_knees(points, options);
    let (Some(first), Some(last_knee)) = (knees.first(), knees.last()) else {
        return false;
    };
    let Some(top) = plateaus(points, options).last().copied() else {
        return false;
    };
    let newest = points.len() - 1;
    let (start, end) = (points[top.first].size_bytes, points[newest].size_bytes);
    let frames_last_knee = (top.log_level.exp() / last_knee.after - 1.0).abs() < 1e-9;
    let wide = (end as f64 / start.max(1) as f64).log2() >= PLATEAU_OCTAVES
        && newest + 1 - top.first >= PLATEAU_MIN_POINTS;
    if top.last != newest || !frames_last_knee || !wide {
        return false;
    }
    start >= llc_bytes || last_knee.after >= MEMORY_OVER_L1 * first.before
}

/// Where a sweep over `points` (sorted by size), measured in order, would have stopped by
/// [`memory_plateau_reached`]: the number of points it would have measured.
pub fn stopping_point(points: &[Point], llc_bytes: u64, options: &KneeOptions) -> usize {
    (1..=points.len())
        .find(|&n| memory_plateau_reached(&points[..n], llc_bytes, options))
        .unwrap_or(points.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture_curves;
    use crate::knee::{adaptive_sweep_until, geometric_sizes};
    use crate::levels::assign_levels;
    use crate::run::Curve;
    use loopscope_machine::{Cache, CacheKind, Machine};

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn machine(l1: u64, l2: u64, l3: u64) -> Machine {
        let mut machine = Machine::unknown();
        for (level, kind, size) in [
            (1, CacheKind::Data, l1),
            (2, CacheKind::Unified, l2),
            (3, CacheKind::Unified, l3),
        ] {
            machine.caches.push(Cache::new(level, kind, size, 64, 8, 1));
        }
        machine
    }

    fn staircase(caps: &[u64], levels: &[f64], hi: u64, per_octave: u32) -> Vec<Point> {
        geometric_sizes(KIB, hi, per_octave, 64)
            .into_iter()
            .map(|s| {
                let i = caps.iter().position(|&c| s <= c).unwrap_or(caps.len());
                // A slow drift of the memory plateau (TLB and host paging), as measured.
                let drift = if i == caps.len() {
                    1.0 + 0.03 * (s as f64 / caps[i - 1] as f64).log2()
                } else {
                    1.0
                };
                Point {
                    size_bytes: s,
                    value: levels[i] * drift,
                    median: levels[i] * drift,
                }
            })
            .collect()
    }

    #[test]
    fn an_intel_guest_with_a_small_effective_l3_stops_long_before_its_advertised_l3() {
        // 48 KiB L1d (1.8 ns), 2 MiB L2 (7 ns), 6.7 MiB seen of a 300 MiB L3 (33 ns), memory
        // 120 ns: the sweep used to run to 1.2 GB.
        let points = staircase(
            &[48 * KIB, 2 * MIB, 6 * MIB + 700 * KIB],
            &[1.8, 7.0, 33.0, 120.0],
            1200 * MIB,
            4,
        );
        let n = stopping_point(&points, 300 * MIB, &KneeOptions::default());
        let stop = points[n - 1].size_bytes;
        assert!((12 * MIB..=20 * MIB).contains(&stop), "{}", stop / KIB);
    }

    #[test]
    fn a_whole_large_l3_is_not_taken_for_memory() {
        // Bare metal: all of a 32 MiB L3 at 14 times the L1 hit, then memory past it.
        let points = staircase(
            &[32 * KIB, 512 * KIB, 32 * MIB],
            &[1.2, 4.0, 17.0, 120.0],
            128 * MIB,
            6,
        );
        let n = stopping_point(&points, 32 * MIB, &KneeOptions::default());
        let stop = points[n - 1].size_bytes;
        assert!(
            stop >= 64 * MIB,
            "stopped in the L3 plateau at {} KiB",
            stop / KIB
        );
        let knees = find_knees(&points[..n], &KneeOptions::default());
        assert_eq!(knees.last().unwrap().size_bytes, 32 * MIB);
    }

    #[test]
    fn a_plateau_that_refinement_undoes_makes_the_sweep_go_on() {
        // A shared L3 whose last MiB and a half another guest held while the grid was
        // measured: memory's level from 4 MiB on, the L3's up to 6.5 MiB when measured again
        // or refined. Refining the memory step then shortens the plateau that ended the grid.
        let options = KneeOptions::default();
        let grid = geometric_sizes(KIB, 128 * MIB, 6, 64);
        let coarse = grid.clone();
        let mut seen = std::collections::HashMap::new();
        let mut measure = |size: u64| {
            // Sizes off the coarse grid are the refinement's, measured later.
            let again = seen.insert(size, ()).is_some() || !coarse.contains(&size);
            let value = match size {
                s if s <= 32 * KIB => 1.3,
                s if s <= 512 * KIB => 4.0,
                s if s <= 4 * MIB => 17.0,
                s if s <= 6 * MIB + 512 * KIB && again => 17.0,
                _ => 140.0,
            };
            Some(Point {
                size_bytes: size,
                value,
                median: value,
            })
        };
        let enough = |points: &[Point]| memory_plateau_reached(points, 32 * MIB, &options);
        let (points, knees, complete) =
            adaptive_sweep_until(&grid, (24, 64, 2), &options, &enough, &mut measure);
        assert!(complete);
        assert!(
            enough(&points),
            "the final curve ends in the memory plateau"
        );
        let last = knees.last().unwrap();
        assert!(last.ratio > 5.0, "{knees:?}");
        assert!(points.last().unwrap().size_bytes <= 32 * MIB);
    }

    #[test]
    fn a_curve_without_a_plateau_runs_to_its_end() {
        let points: Vec<Point> = geometric_sizes(KIB, 64 * MIB, 4, 64)
            .into_iter()
            .map(|s| Point {
                size_bytes: s,
                value: (s as f64).sqrt(),
                median: 0.0,
            })
            .collect();
        assert_eq!(
            stopping_point(&points, 32 * MIB, &KneeOptions::default()),
            points.len()
        );
        assert!(!memory_plateau_reached(&[], MIB, &KneeOptions::default()));
    }

    /// A sweep of the chase as the probe runs it (a coarse grid of 6 points per octave from
    /// 1 KiB to 4x the last-level cache, refined), each size measured as the recorded point
    /// nearest to it (in log): ended by the rule, it stops by 32 MiB (a quarter of the old
    /// 128 MiB sweep) and finds the same three levels as the same sweep run to the grid's end.
    fn stops_early_with_the_same_levels(machine: &Machine, chases: &[Curve]) {
        let options = KneeOptions::default();
        let llc = machine.data_caches().map(|c| c.size_bytes).max().unwrap();
        let grid = geometric_sizes(KIB, 4 * llc, 6, 64);
        for (i, chase) in chases.iter().enumerate() {
            let sweep = |enough: &dyn Fn(&[Point]) -> bool| {
                let mut measure = |size: u64| {
                    let d = |p: &Point| (p.size_bytes as f64 / size as f64).log2().abs();
                    let p = chase.points.iter().min_by(|a, b| d(a).total_cmp(&d(b)))?;
                    Some(Point {
                        size_bytes: size,
                        ..*p
                    })
                };
                let (points, knees, complete) =
                    adaptive_sweep_until(&grid, (24, 64, 2), &options, enough, &mut measure);
                assert!(complete);
                Curve {
                    points,
                    knees,
                    ..chase.clone()
                }
            };
            let stopped = sweep(&|points| memory_plateau_reached(points, llc, &options));
            let whole = sweep(&|_| false);
            let stop = stopped.points.last().unwrap().size_bytes;
            assert!(stop <= 32 * MIB, "curve {i} stopped at {} KiB", stop / KIB);
            let sizes = |c: &Curve| {
                let levels = assign_levels(machine, std::slice::from_ref(c));
                levels
                    .knees
                    .iter()
                    .map(|l| (l.level, l.knee.size_bytes))
                    .collect::<Vec<_>>()
            };
            let (stopped, whole) = (sizes(&stopped), sizes(&whole));
            assert_eq!(whole.len(), 3, "curve {i}: {whole:?}");
            assert_eq!(stopped.len(), 3, "curve {i}: {stopped:?}");
            assert_eq!(
                stopped[..2],
                whole[..2],
                "curve {i} stopped at {} KiB",
                stop / KIB
            );
            // The shared L3's estimate hangs on the memory plateau's level, which drifts up
            // with the footprint (TLB, host paging): within a quarter of an octave.
            let l3_octaves = (stopped[2].1 as f64 / whole[2].1 as f64).log2();
            assert!(
                l3_octaves.abs() <= 0.25,
                "curve {i}: L3 {stopped:?} against {whole:?}"
            );
        }
    }

    fn chases(text: &str) -> Vec<Curve> {
        fixture_curves(text)
            .into_iter()
            .filter(|c| c.name == "pointer_chase")
            .collect()
    }

    #[test]
    fn recorded_zen4_chases_stop_early_with_the_same_levels() {
        let zen4 = machine(32 * KIB, MIB, 32 * MIB);
        for text in [
            include_str!("../testdata/zen4_curves.json"),
            include_str!("../testdata/zen4_ramp_chases.json"),
            include_str!("../testdata/zen4_loaded_chase.json"),
            include_str!("../testdata/zen4_shared_steps.json"),
        ] {
            stops_early_with_the_same_levels(&zen4, &chases(text));
        }
    }

    #[test]
    fn a_recorded_zen3_chase_stops_early_with_the_same_levels() {
        let zen3 = machine(32 * KIB, 512 * KIB, 32 * MIB);
        let text = include_str!("../testdata/zen3_whole_chase.json");
        stops_early_with_the_same_levels(&zen3, &chases(text));
    }
}
