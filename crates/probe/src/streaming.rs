//! How large a working set the last cache level still streams at its own bandwidth.
//!
//! The pointer chase sizes a level by latency: where random loads start to miss it. A
//! sequential stream can find more of the level than that. On a guest of a shared host the
//! difference is large (a Zen 3 guest with 32 MiB of L3 advertised: random loads miss past
//! 4.8 MiB, in a step of 10x, while the triad keeps the L3's bandwidth to 11 MiB and reaches
//! halfway to memory's near 16 MiB), because how much of the L3 a working set keeps depends
//! on the access pattern and on what other tenants do to it. The models of loop kernels
//! (`roofline`, `misses`) mostly see streams, so for them the last level's size is the one
//! this curve measures.
//!
//! The curve is the triad on one thread over working sets from the last level's bandwidth
//! working set to half of memory's, in time per 64 bytes of the working set, so that it
//! rises like the other curves. The size is where it crosses the geometric mean of the
//! level's time and memory's, interpolated in log-log between the points either side: a
//! kernel whose traffic the simulation sends to the wrong side of that size is mispredicted
//! by at most the square root of the two bandwidths' ratio, whichever side it falls.

use crate::knee::{Knee, Point, geometric_sizes};

/// Name of the curve.
pub const STREAMING_CURVE: &str = "streaming_triad";

/// Unit of the curve's values.
pub const STREAMING_UNIT: &str = "ns per 64 B of the working set, triad on one thread";

/// Memory must be at least this much slower than the level for a capacity to be read.
const MIN_RATIO: f64 = 1.25;

/// A point within this factor of the level's (memory's) time is still at the level
/// (already at memory).
const PLATEAU_SLACK: f64 = 1.1;

/// Nanoseconds per 64 bytes of the working set at `gb_per_s` (triad bytes, 24 per element,
/// over a working set of 24 bytes per element).
pub fn ns_per_line(gb_per_s: f64) -> f64 {
    64.0 / gb_per_s
}

/// Working sets of the sweep: from `first_bytes` to `last_bytes`, `per_octave` to the octave,
/// in whole 4 KiB pages.
pub fn streaming_spans(first_bytes: u64, last_bytes: u64, per_octave: u32) -> Vec<u64> {
    if last_bytes < first_bytes {
        return Vec::new();
    }
    geometric_sizes(first_bytes, last_bytes, per_octave, 4096)
}

/// The time, between the level's and memory's, at which the stream counts as left the level.
fn threshold_ns(level_ns: f64, memory_ns: f64) -> f64 {
    (level_ns * memory_ns).sqrt()
}

/// The level's time: the fastest of its own measurement and the sweep's points, as other work
/// only ever slows a kernel down.
fn level_time(points: &[Point], level_ns: f64) -> f64 {
    points.iter().map(|p| p.value).fold(level_ns, f64::min)
}

/// Index of the first point at or above the threshold whose successor is too: one slow point
/// between two fast ones is a disturbance, not the level ending, and one slow last point is
/// not yet a confirmed end.
fn crossing(points: &[Point], threshold: f64) -> Option<usize> {
    (0..points.len()).find(|&i| {
        points[i].value >= threshold && points.get(i + 1).is_some_and(|p| p.value >= threshold)
    })
}

/// Whether the sweep has what it needs: two points past the crossing.
pub fn streaming_sweep_done(points: &[Point], level_ns: f64, memory_ns: f64) -> bool {
    let threshold = threshold_ns(level_time(points, level_ns), memory_ns);
    let above = points.iter().rev().take_while(|p| p.value >= threshold);
    above.count() >= 2
}

/// Why a sweep gave no streaming size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoStreamingSize {
    /// Memory's triad is less than 1.25x slower than the level's.
    MemoryAsFast,
    /// No working set lies between the level's and memory's bandwidth working sets.
    NothingSwept,
    /// The first two points are already past the crossing.
    FromTheFirst,
    /// No two points in a row reach the crossing, up to this largest working set swept.
    NotReached {
        /// The largest working set swept.
        largest_bytes: u64,
    },
}

/// The streaming capacity as a knee of the curve (`before` the level's time, `after`
/// memory's), or why there is none. `level_ns` and `memory_ns` are the triad's times at the
/// level's and memory's bandwidth working sets.
pub fn streaming_knee(
    points: &[Point],
    level_ns: f64,
    memory_ns: f64,
) -> Result<Knee, NoStreamingSize> {
    let level_ns = level_time(points, level_ns);
    if !(level_ns > 0.0 && memory_ns >= MIN_RATIO * level_ns) {
        return Err(NoStreamingSize::MemoryAsFast);
    }
    let Some(last) = points.last() else {
        return Err(NoStreamingSize::NothingSwept);
    };
    let threshold = threshold_ns(level_ns, memory_ns);
    let i = crossing(points, threshold).ok_or(NoStreamingSize::NotReached {
        largest_bytes: last.size_bytes,
    })?;
    let lo = &points[i.checked_sub(1).ok_or(NoStreamingSize::FromTheFirst)?];
    let hi = &points[i];
    let log = |v: u64| (v.max(1) as f64).ln();
    let share =
        ((threshold.ln() - lo.value.ln()) / (hi.value.ln() - lo.value.ln())).clamp(0.0, 1.0);
    let size = (log(lo.size_bytes) + share * (log(hi.size_bytes) - log(lo.size_bytes))).exp();
    let line = crate::CHASE_STRIDE_BYTES as u64;
    let rise_start = points[..i]
        .iter()
        .rev()
        .find(|p| p.value <= level_ns * PLATEAU_SLACK)
        .unwrap_or(&points[0]);
    let end = points[i..]
        .iter()
        .find(|p| p.value * PLATEAU_SLACK >= memory_ns)
        .unwrap_or(last);
    let agreeing = points
        .iter()
        .enumerate()
        .filter(|(j, p)| (*j < i) == (p.value < threshold))
        .count();
    Ok(Knee {
        // Between the two points, whatever a NaN share made of it.
        size_bytes: ((size as u64).clamp(
            lo.size_bytes.min(hi.size_bytes),
            lo.size_bytes.max(hi.size_bytes),
        ) / line)
            .max(1)
            * line,
        cliff_lo_bytes: lo.size_bytes,
        cliff_hi_bytes: hi.size_bytes,
        rise_start_bytes: rise_start.size_bytes,
        rise_mid_bytes: lo.size_bytes,
        end_bytes: end.size_bytes,
        before: level_ns,
        after: memory_ns,
        ratio: memory_ns / level_ns,
        confidence: agreeing as f64 / points.len() as f64,
    })
}

/// What the curve found, in words, for the level named `level` (`L3`) whose pointer chase
/// found `chase_bytes`.
pub fn streaming_note(
    level: &str,
    found: Result<&Knee, NoStreamingSize>,
    points: &[Point],
    chase_bytes: u64,
    level_ns: f64,
    memory_ns: f64,
) -> String {
    let table_ns = level_ns;
    let level_ns = level_time(points, level_ns);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let gbs = |ns: f64| 64.0 / ns;
    // Both rates count the triad's 24 bytes per element, as the table's `GB/s` column does;
    // the level's is the sweep's fastest point when that beats the table's run, which a loaded
    // machine slows, so the note names both.
    let fastest_point = points
        .iter()
        .find(|p| p.value == level_ns && level_ns < table_ns);
    let level_rate = match fastest_point {
        Some(p) => format!(
            "{:.1} GB/s in the {level} at the sweep's fastest point, {:.1} MiB, where the \
             table's one-thread {level} triad has {:.1} GB/s",
            gbs(level_ns),
            mib(p.size_bytes),
            gbs(table_ns)
        ),
        None => format!("{:.1} GB/s in the {level}", gbs(level_ns)),
    };
    let separator = if fastest_point.is_some() { ";" } else { "," };
    let rates = format!(
        "{level_rate}{separator} {:.1} GB/s in memory",
        gbs(memory_ns)
    );
    let why = match found {
        Ok(k) => {
            return format!(
                "{level} streaming size {:.1} MiB: the triad on one thread ({rates}) runs at the {level}'s rate to {:.1} MiB and halfway (geometrically) to memory's at {:.1} MiB; the pointer chase's {:.1} MiB is where random loads miss; roofline and misses simulate the {level} at the streaming size",
                mib(k.size_bytes),
                mib(k.rise_start_bytes),
                mib(k.size_bytes),
                mib(chase_bytes)
            );
        }
        Err(NoStreamingSize::MemoryAsFast) => {
            format!("memory streams nearly as fast as the {level} ({rates})")
        }
        Err(NoStreamingSize::NothingSwept) => {
            format!("no working set lies between the {level}'s and memory's bandwidth working sets")
        }
        Err(NoStreamingSize::FromTheFirst) => {
            format!("the triad ran at memory's rate from the first working set swept ({rates})")
        }
        Err(NoStreamingSize::NotReached { largest_bytes }) => format!(
            "the triad did not fall halfway to memory's rate twice in a row up to the largest working set swept, {:.1} MiB ({rates})",
            mib(largest_bytes)
        ),
    };
    format!(
        "{level} streaming size not measured: {why}; roofline and misses simulate the {level} at the pointer chase's {:.1} MiB",
        mib(chase_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn curve(rates_gb_per_s: &[(f64, f64)]) -> Vec<Point> {
        rates_gb_per_s
            .iter()
            .map(|&(mib, gbs)| Point {
                size_bytes: (mib * MIB as f64) as u64,
                value: ns_per_line(gbs),
                median: ns_per_line(gbs),
            })
            .collect()
    }

    /// A Zen 3 guest's sweep (`cc -O2` triad, one thread): flat to 11 MiB, then a slow fall.
    fn zen3_guest() -> Vec<Point> {
        curve(&[
            (2.83, 62.6),
            (4.0, 62.8),
            (5.66, 61.9),
            (8.0, 61.1),
            (11.31, 64.8),
            (16.0, 42.8),
            (22.63, 32.7),
            (32.0, 25.9),
            (45.25, 22.2),
        ])
    }

    #[test]
    fn a_gradual_fall_is_sized_where_it_crosses_the_geometric_mean() {
        let (level, memory) = (ns_per_line(62.0), ns_per_line(17.0));
        let knee = streaming_knee(&zen3_guest(), level, memory).unwrap();
        // The level's time is its fastest point's (64.8 GB/s at 11.31 MiB): sqrt(64.8 x 17) =
        // 33.2 GB/s is crossed between 16 and 22.6 MiB, near 22.6.
        let mib = knee.size_bytes as f64 / MIB as f64;
        assert!((21.0..22.63).contains(&mib), "{mib}");
        assert_eq!(knee.rise_start_bytes, (11.31 * MIB as f64) as u64);
        assert_eq!(knee.cliff_hi_bytes, (22.63 * MIB as f64) as u64);
        assert_eq!(knee.confidence, 1.0);
        assert!(knee.ratio > 3.0);
        assert!(streaming_sweep_done(&zen3_guest(), level, memory));
        let note = streaming_note("L3", Ok(&knee), &zen3_guest(), 5 * MIB, level, memory);
        assert!(
            note.starts_with(&format!("L3 streaming size {mib:.1} MiB:")),
            "{note}"
        );
        assert!(note.contains("to 11.3 MiB"), "{note}");
    }

    /// A loaded machine slowed the table's L3 triad (30.49 GB/s at 1 MiB) below the sweep's
    /// points, as in a `probe --quick` on a Zen 3 guest: the note's L3 rate is the sweep's, and
    /// it says so beside the table's figure.
    #[test]
    fn a_level_rate_from_the_sweep_is_named_beside_the_tables() {
        let points = curve(&[
            (1.41, 65.6),
            (2.0, 60.0),
            (2.83, 58.0),
            (5.66, 55.0),
            (8.0, 9.0),
            (11.31, 8.6),
        ]);
        let (table, memory) = (ns_per_line(30.49), ns_per_line(8.57));
        let knee = streaming_knee(&points, table, memory).unwrap();
        let note = streaming_note("L3", Ok(&knee), &points, 2 * MIB, table, memory);
        assert!(
            note.contains(
                "the triad on one thread (65.6 GB/s in the L3 at the sweep's fastest point, \
                 1.4 MiB, where the table's one-thread L3 triad has 30.5 GB/s; 8.6 GB/s in \
                 memory)"
            ),
            "{note}"
        );
        // When the table's run is the fastest, the note gives its rate alone.
        let note = streaming_note("L3", Ok(&knee), &points, 2 * MIB, ns_per_line(70.0), memory);
        assert!(
            note.contains("(70.0 GB/s in the L3, 8.6 GB/s in memory)"),
            "{note}"
        );
    }

    #[test]
    fn a_sharp_step_is_sized_inside_it() {
        let points = curve(&[
            (4.0, 60.0),
            (5.66, 60.0),
            (8.0, 60.0),
            (11.31, 15.0),
            (16.0, 15.0),
        ]);
        let knee = streaming_knee(&points, ns_per_line(60.0), ns_per_line(15.0)).unwrap();
        // Halfway in log between 8 and 11.31 MiB.
        let mib = knee.size_bytes as f64 / MIB as f64;
        assert!((mib - (8.0f64 * 11.31).sqrt()).abs() < 0.01, "{mib}");
        assert_eq!(knee.end_bytes, (11.31 * MIB as f64) as u64);
    }

    #[test]
    fn one_slow_point_does_not_end_the_level() {
        let points = curve(&[
            (4.0, 60.0),
            (5.66, 20.0),
            (8.0, 60.0),
            (11.31, 15.0),
            (16.0, 15.0),
        ]);
        let knee = streaming_knee(&points, ns_per_line(60.0), ns_per_line(15.0)).unwrap();
        assert!(knee.size_bytes > 8 * MIB, "{}", knee.size_bytes);
        assert_eq!(knee.confidence, 0.8);
        assert!(!streaming_sweep_done(
            &points[..3],
            ns_per_line(60.0),
            ns_per_line(15.0)
        ));
    }

    #[test]
    fn no_crossing_no_size() {
        let (level, memory) = (ns_per_line(60.0), ns_per_line(15.0));
        let note =
            |points: &[Point], why| streaming_note("L3", Err(why), points, 6 * MIB, level, memory);
        let flat = curve(&[(4.0, 60.0), (8.0, 58.0), (16.0, 59.0)]);
        let why = streaming_knee(&flat, level, memory).unwrap_err();
        assert_eq!(
            why,
            NoStreamingSize::NotReached {
                largest_bytes: 16 * MIB
            }
        );
        assert!(note(&flat, why).contains("up to the largest working set swept, 16.0 MiB"));
        // One slow last point is not yet the level's end.
        let one_slow = curve(&[(4.0, 60.0), (8.0, 58.0), (16.0, 15.0)]);
        assert!(matches!(
            streaming_knee(&one_slow, level, memory),
            Err(NoStreamingSize::NotReached { .. })
        ));
        assert!(!streaming_sweep_done(&one_slow, level, memory));
        let slow = curve(&[(4.0, 15.0), (8.0, 15.0), (16.0, 15.0)]);
        let why = streaming_knee(&slow, level, memory).unwrap_err();
        assert_eq!(why, NoStreamingSize::FromTheFirst);
        assert!(note(&slow, why).contains("from the first working set"));
        let close = streaming_knee(&zen3_guest(), level, level * 1.1);
        assert_eq!(close.unwrap_err(), NoStreamingSize::MemoryAsFast);
        let why = streaming_knee(&[], level, memory).unwrap_err();
        assert_eq!(why, NoStreamingSize::NothingSwept);
        let text = note(&[], why);
        assert!(text.contains("no working set lies between"), "{text}");
        assert!(text.ends_with("at the pointer chase's 6.0 MiB"), "{text}");
    }

    #[test]
    fn nan_and_unsorted_points_give_a_size_between_two_points_or_none() {
        let (level, memory) = (ns_per_line(60.0), ns_per_line(15.0));
        let mut points = zen3_guest();
        points[5].value = f64::NAN;
        points[6].value = f64::INFINITY;
        if let Ok(knee) = streaming_knee(&points, level, memory) {
            assert!(knee.size_bytes >= 2 * MIB && knee.size_bytes <= 46 * MIB);
        }
        points.reverse();
        let _ = streaming_knee(&points, level, memory);
        let _ = streaming_knee(&points, f64::NAN, f64::INFINITY);
    }

    #[test]
    fn recorded_zen3_guest_sweeps_give_their_streaming_size() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../testdata/zen3_streaming.json")).unwrap();
        let curves =
            crate::fixtures::fixture_curves(include_str!("../testdata/zen3_streaming.json"));
        for (run, curve) in doc["curves"].as_array().unwrap().iter().zip(&curves) {
            let gbs = |key: &str| run[key].as_f64().unwrap();
            let level = ns_per_line(gbs("l3_triad_gb_per_s"));
            let memory = ns_per_line(gbs("mem_triad_gb_per_s"));
            let knee = streaming_knee(&curve.points, level, memory).unwrap();
            // The L3 keeps the triad's rate to 9.5-11.3 MiB and falls halfway near 18 MiB,
            // four to five times where random loads miss.
            let mib = |b: u64| b as f64 / MIB as f64;
            assert!(
                (16.0..22.0).contains(&mib(knee.size_bytes)),
                "{}",
                mib(knee.size_bytes)
            );
            assert!((8.0..12.0).contains(&mib(knee.rise_start_bytes)));
            // As the run found it, but for the fixture's rounding of the times.
            let found = run["streaming_size_bytes"].as_u64().unwrap();
            assert!(knee.size_bytes.abs_diff(found) < found / 1000, "{found}");
            assert!(knee.size_bytes > 4 * run["chase_l3_bytes"].as_u64().unwrap());
            assert!(streaming_sweep_done(&curve.points, level, memory));
        }
    }

    #[test]
    fn spans_are_whole_pages_between_the_ends() {
        let spans = streaming_spans(3 * MIB, 64 * MIB, 2);
        assert_eq!(spans.first(), Some(&(3 * MIB)));
        assert!(*spans.last().unwrap() <= 64 * MIB);
        assert!(spans.iter().all(|s| s % 4096 == 0));
        assert!(spans.windows(2).all(|w| w[1] > w[0]));
        assert!(streaming_spans(8 * MIB, 4 * MIB, 2).is_empty());
    }
}
