//! A level's bandwidth as a function of how much of its traffic is written.
//!
//! Beyond L1 a cache moves lines both ways, and the two directions do not cost the same: on
//! the x86 cores probe has timed, a level fed only loads runs at 50–75 % of the rate of one
//! that takes a write-back for every fill (probe's `load` against its `store` kernel). Taking
//! the fastest of probe's kernels for every loop overstates the level for a loop that mostly
//! reads, by up to the ratio between them. probe times four kernels whose traffic (write-allocate
//! fills counted) is 0 % written (`load`), 25 % (`triad`), 33 % (`copy`) and 50 % (`store`); a
//! loop's level is timed at the bandwidth of its own write share, interpolated between those
//! points in time per byte (a read and a write then cost what they cost in the kernels either
//! side) and held at the nearest end outside them.
//!
//! Memory is left out: there the rate follows how many streams run at once (the prefetchers'
//! and the core's outstanding misses) more than their write share. On the Zen 3 guest probe's
//! one-stream `load` kernel reads memory at 15.5 GB/s and its three-stream `triad` moves
//! 25.6 GB/s counting write-allocate; a `cc -O2` daxpy (two streams read, one written) moves
//! 24 GB/s, and interpolating would predict it 20 % slow. Memory keeps the fastest kernel.

use loopscope_machine::Measured;
use serde::Serialize;

use crate::Level;

/// A bandwidth measured at a known share of written bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixBandwidth {
    /// Of the bytes crossing the level (fills, write-allocate fills and write-backs), the share
    /// written back: 0 for loads alone, 0.5 for stores alone.
    pub write_share: f64,
    /// 10^9 bytes per second, write-allocate fills counted.
    pub gb_per_s: f64,
    /// The probe kernel that was measured (`load`, `triad`, `copy`, `store`).
    pub kernel: String,
}

/// probe's runs of `level` with `threads` threads, as bandwidths by write share, sorted by
/// write share (the fastest run where two share one). Empty when fewer than two distinct
/// shares were measured: one point says nothing about the mix.
pub(crate) fn measured_mixes(measured: &Measured, level: Level, threads: u32) -> Vec<MixBandwidth> {
    let mut mixes: Vec<MixBandwidth> = Vec::new();
    let runs = measured.bandwidth.iter().filter(|run| {
        run.threads == threads && run.level.parse::<Level>().is_ok_and(|l| l == level)
    });
    for run in runs {
        let total = run.gb_per_s_with_write_allocate.unwrap_or(run.gb_per_s);
        if !(total.is_finite() && total > 0.0 && run.gb_per_s.is_finite()) {
            continue;
        }
        // The write-allocate fills are as many bytes as the stores, which are the write-backs.
        let write_share = ((total - run.gb_per_s) / total).clamp(0.0, 0.5);
        let point = MixBandwidth {
            write_share,
            gb_per_s: total,
            kernel: run.kernel.clone(),
        };
        match mixes
            .iter_mut()
            .find(|m| (m.write_share - write_share).abs() < 1e-6)
        {
            Some(slot) if total > slot.gb_per_s => *slot = point,
            Some(_) => {}
            None => mixes.push(point),
        }
    }
    mixes.sort_by(|a, b| a.write_share.total_cmp(&b.write_share));
    if mixes.len() < 2 {
        mixes.clear();
    }
    mixes
}

/// The bandwidth at `write_share` from `mixes` (sorted by write share, not empty): linear in
/// time per byte between the points either side, the nearest point's outside them.
pub(crate) fn bandwidth_at_share(mixes: &[MixBandwidth], write_share: f64) -> Option<f64> {
    let first = mixes.first()?;
    let last = mixes.last()?;
    // A NaN share takes the first point too.
    if write_share.is_nan() || write_share <= first.write_share {
        return Some(first.gb_per_s);
    }
    if write_share >= last.write_share {
        return Some(last.gb_per_s);
    }
    let upper = mixes.iter().position(|m| m.write_share >= write_share)?;
    let (a, b) = (&mixes[upper - 1], &mixes[upper]);
    let along = (write_share - a.write_share) / (b.write_share - a.write_share);
    let ns_per_byte = (1.0 - along) / a.gb_per_s + along / b.gb_per_s;
    Some(1.0 / ns_per_byte)
}

#[cfg(test)]
pub(crate) mod tests {
    use loopscope_machine::Bandwidth;
    use proptest::prelude::*;

    use super::*;

    /// A probe bandwidth run of 1 MiB (shared with the ceilings' tests).
    pub(crate) fn run(
        level: &str,
        kernel: &str,
        threads: u32,
        gb: f64,
        wa: Option<f64>,
    ) -> Bandwidth {
        Bandwidth {
            level: level.into(),
            kernel: kernel.into(),
            threads,
            cores: None,
            working_set_bytes: 1 << 20,
            gb_per_s: gb,
            gb_per_s_with_write_allocate: wa,
            method: String::new(),
            vector_bytes: None,
        }
    }

    /// probe's L3 runs on one thread of an AMD EPYC (Zen 3) guest.
    fn zen3_l3() -> Measured {
        Measured {
            bandwidth: vec![
                run("L3", "load", 1, 76.7, None),
                run("L3", "store", 1, 69.1, Some(69.1 * 2.0)),
                run("L3", "copy", 1, 72.6, Some(72.6 * 1.5)),
                run("L3", "triad", 1, 76.1, Some(76.1 * 4.0 / 3.0)),
                run("L3", "load", 2, 139.1, None),
                run("L2", "load", 1, 100.3, None),
            ],
            ..Measured::default()
        }
    }

    #[test]
    fn probe_kernels_give_their_write_shares() {
        let mixes = measured_mixes(&zen3_l3(), Level::Cache(3), 1);
        let shares: Vec<(&str, f64)> = mixes
            .iter()
            .map(|m| (m.kernel.as_str(), (m.write_share * 1000.0).round() / 1000.0))
            .collect();
        assert_eq!(
            shares,
            [
                ("load", 0.0),
                ("triad", 0.25),
                ("copy", 0.333),
                ("store", 0.5)
            ]
        );
        assert_eq!(mixes[3].gb_per_s, 138.2);
    }

    #[test]
    fn one_measured_share_is_no_mix() {
        assert!(measured_mixes(&zen3_l3(), Level::Cache(3), 2).is_empty());
        assert!(measured_mixes(&zen3_l3(), Level::Cache(2), 1).is_empty());
        assert!(measured_mixes(&zen3_l3(), Level::Memory, 1).is_empty());
    }

    #[test]
    fn a_kernel_at_a_measured_share_gets_that_kernels_bandwidth() {
        let mixes = measured_mixes(&zen3_l3(), Level::Cache(3), 1);
        let at = |w: f64| bandwidth_at_share(&mixes, w).unwrap();
        assert_eq!(at(0.0), 76.7);
        assert!((at(0.25) - 76.1 * 4.0 / 3.0).abs() < 1e-9);
        assert!((at(1.0 / 3.0) - 72.6 * 1.5).abs() < 1e-9);
        assert_eq!(at(0.5), 138.2);
        // Outside the measured shares: the nearest end.
        assert_eq!(at(-0.1), 76.7);
        assert_eq!(at(0.9), 138.2);
    }

    #[test]
    fn between_two_kernels_time_per_byte_is_linear() {
        let mixes = measured_mixes(&zen3_l3(), Level::Cache(3), 1);
        // A four-array triad (three loads, one store): 5 lines moved, 1 written.
        let b = bandwidth_at_share(&mixes, 0.2).unwrap();
        let expected = 1.0 / (0.2 / 76.7 + 0.8 / (76.1 * 4.0 / 3.0));
        assert!((b - expected).abs() < 1e-9, "{b} against {expected}");
    }

    proptest! {
        #[test]
        fn the_bandwidth_stays_within_the_measured_ones(
            gbs in prop::collection::vec(1.0f64..500.0, 2..5),
            share in -1.0f64..2.0,
        ) {
            let mixes: Vec<MixBandwidth> = gbs.iter().enumerate().map(|(i, &gb_per_s)| {
                MixBandwidth { write_share: i as f64 / 8.0, gb_per_s, kernel: String::new() }
            }).collect();
            let b = bandwidth_at_share(&mixes, share).unwrap();
            let lo = gbs.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = gbs.iter().cloned().fold(0.0, f64::max);
            prop_assert!(b >= lo - 1e-9 && b <= hi + 1e-9);
            prop_assert!(bandwidth_at_share(&mixes, f64::NAN).is_some());
        }
    }
}
