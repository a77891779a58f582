//! What the machine offers: peak and effective FLOP rates and one bandwidth per level.

use loopscope_machine::{Bandwidth, Machine, Measured};
use serde::Serialize;

use crate::mixes::{MixBandwidth, bandwidth_at_share, measured_mixes};
use crate::pairs::{level_pairs, plural};
use crate::{Level, LevelTraffic, RooflineError};

/// A level's effective bandwidth, possibly depending on the access volume (eq. 14).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BandwidthFn {
    /// The same bandwidth whatever the volume.
    Constant {
        /// 10^9 bytes per second.
        gb_per_s: f64,
    },
    /// `B(D) = slope_per_s × D + intercept`, D in bytes: the paper's Haswell L3 (eq. 14).
    Linear {
        /// Bandwidth gained per byte of access volume, in 1/s.
        slope_per_s: f64,
        /// Bandwidth at zero volume, 10^9 bytes per second.
        intercept_gb_per_s: f64,
    },
}

impl BandwidthFn {
    /// The bandwidth in 10^9 bytes per second at an access volume of `volume_bytes`.
    pub fn gb_per_s(&self, volume_bytes: u64) -> f64 {
        match *self {
            BandwidthFn::Constant { gb_per_s } => gb_per_s,
            BandwidthFn::Linear {
                slope_per_s,
                intercept_gb_per_s,
            } => intercept_gb_per_s + slope_per_s * volume_bytes as f64 / 1e9,
        }
    }
}

/// One level's ceiling and where its number came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelCeiling {
    /// The level.
    pub level: Level,
    /// Its effective bandwidth.
    pub bandwidth: BandwidthFn,
    /// Where the number came from (`--bandwidth`, `machine.toml measured copy, 2 threads`).
    pub source: String,
    /// Bandwidth of stores alone, when they go through ports of their own (L1): the level's
    /// time is then the longer of its loads over `bandwidth` and its stores over this.
    pub store: Option<StoreBandwidth>,
    /// probe's bandwidths at several shares of written bytes (levels beyond L1), by write
    /// share: a kernel whose traffic through the level knows its write-backs is timed at the
    /// bandwidth of its own share ([`LevelCeiling::gb_per_s_for`]). Empty: `bandwidth` alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mixes: Vec<MixBandwidth>,
}

impl LevelCeiling {
    /// The bandwidth `traffic` through this level runs at: at its share of written bytes
    /// when the level has [`Self::mixes`] and the traffic knows its write-backs (and the level
    /// has no store ports of its own), else `bandwidth` at the traffic's access volume.
    pub fn gb_per_s_for(&self, traffic: &LevelTraffic) -> f64 {
        self.gb_per_s_at(traffic, self.write_share_of(traffic))
    }

    /// The share of written bytes [`Self::gb_per_s_for`] takes `traffic`'s bandwidth at: its
    /// own, when the level has [`Self::mixes`] and no store ports, and the traffic moves bytes
    /// and knows its write-backs.
    pub fn write_share_of(&self, traffic: &LevelTraffic) -> Option<f64> {
        match (traffic.store_bytes, &self.store) {
            (Some(written), None) if traffic.bytes > 0 && !self.mixes.is_empty() => {
                Some(written.min(traffic.bytes) as f64 / traffic.bytes as f64)
            }
            _ => None,
        }
    }

    /// The bandwidth `traffic` runs at through this level when `write_share` of it is written:
    /// from [`Self::mixes`] when the level has them and a share is given, else `bandwidth` at
    /// the traffic's access volume.
    pub fn gb_per_s_at(&self, traffic: &LevelTraffic, write_share: Option<f64>) -> f64 {
        write_share
            .and_then(|share| bandwidth_at_share(&self.mixes, share))
            .unwrap_or_else(|| {
                self.bandwidth
                    .gb_per_s(traffic.volume_bytes.unwrap_or(traffic.bytes))
            })
    }
}

/// A level's store bandwidth and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreBandwidth {
    /// GB/s of stored bytes.
    pub gb_per_s: f64,
    /// Where the number came from.
    pub source: String,
}

/// The machine side of the model: Ppeak, Peff and the effective bandwidths (whole chip).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceilings {
    /// Theoretical peak Ppeak in 10^9 FLOP/s; fractions of peak are relative to it.
    pub peak_gflops: f64,
    /// Attainable compute rate Peff (t_C = Nc / Peff, eq. 7), at most `peak_gflops`.
    pub effective_gflops: f64,
    /// Where the peak figures came from.
    pub peak_source: String,
    /// Bandwidth per level, innermost first.
    pub levels: Vec<LevelCeiling>,
    /// Latency of a dependent floating-point addition, for kernels that sum in order.
    pub add_latency: Option<AddLatency>,
    /// Threads the kernel's iterations are split over (those the bandwidths and peak were
    /// measured with): each runs its share of the dependency chains beside the others.
    pub chain_threads: u32,
}

/// How long one floating-point addition takes when it needs the result of the one before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddLatency {
    /// Nanoseconds per dependent addition.
    pub ns: f64,
    /// Where the number came from.
    pub source: String,
}

impl Ceilings {
    /// Ceilings with no bandwidths yet; checks that the peaks are positive and Peff ≤ Ppeak.
    pub fn new(
        peak_gflops: f64,
        effective_gflops: f64,
        peak_source: impl Into<String>,
    ) -> Result<Ceilings, RooflineError> {
        positive("the peak FLOP rate (GFLOP/s)", peak_gflops)?;
        positive("the effective FLOP rate (GFLOP/s)", effective_gflops)?;
        if effective_gflops > peak_gflops {
            return Err(RooflineError::Invalid(format!(
                "the effective FLOP rate {effective_gflops} GFLOP/s exceeds the peak \
                 {peak_gflops} GFLOP/s"
            )));
        }
        Ok(Ceilings {
            peak_gflops,
            effective_gflops,
            peak_source: peak_source.into(),
            levels: Vec::new(),
            add_latency: None,
            chain_threads: 1,
        })
    }

    /// Sets (or replaces) the bandwidth of `level`, refusing non-positive numbers.
    pub fn set_bandwidth(
        &mut self,
        level: Level,
        bandwidth: BandwidthFn,
        source: impl Into<String>,
    ) -> Result<(), RooflineError> {
        match bandwidth {
            BandwidthFn::Constant { gb_per_s } => {
                positive(&format!("{level} bandwidth"), gb_per_s)?
            }
            BandwidthFn::Linear {
                slope_per_s,
                intercept_gb_per_s,
            } => {
                positive(&format!("{level} bandwidth intercept"), intercept_gb_per_s)?;
                if !slope_per_s.is_finite() {
                    return Err(RooflineError::NotPositive {
                        what: format!("{level} bandwidth slope"),
                        value: slope_per_s,
                    });
                }
            }
        }
        let mut ceiling = LevelCeiling {
            level,
            bandwidth,
            source: source.into(),
            store: None,
            mixes: Vec::new(),
        };
        match self.levels.iter_mut().find(|c| c.level == level) {
            Some(slot) => {
                ceiling.store = slot.store.take();
                *slot = ceiling;
            }
            None => {
                self.levels.push(ceiling);
                self.levels.sort_by_key(|c| c.level);
            }
        }
        Ok(())
    }

    /// Sets the store bandwidth of `level`, which must already have a bandwidth (then taken
    /// for its loads alone).
    pub fn set_store_bandwidth(
        &mut self,
        level: Level,
        gb_per_s: f64,
        source: impl Into<String>,
    ) -> Result<(), RooflineError> {
        positive(&format!("{level} store bandwidth"), gb_per_s)?;
        let slot = self
            .levels
            .iter_mut()
            .find(|c| c.level == level)
            .ok_or_else(|| {
                RooflineError::Invalid(format!(
                    "{level} has a store bandwidth but no (load) bandwidth"
                ))
            })?;
        slot.store = Some(StoreBandwidth {
            gb_per_s,
            source: source.into(),
        });
        Ok(())
    }

    /// Sets the latency of a dependent floating-point addition, refusing non-positive numbers.
    pub fn set_add_latency(
        &mut self,
        ns: f64,
        source: impl Into<String>,
    ) -> Result<(), RooflineError> {
        positive("the add latency (ns)", ns)?;
        self.add_latency = Some(AddLatency {
            ns,
            source: source.into(),
        });
        Ok(())
    }

    /// The ceiling of `level`, if known.
    pub fn level(&self, level: Level) -> Option<&LevelCeiling> {
        self.levels.iter().find(|c| c.level == level)
    }

    /// Takes every level's bandwidth from `probe`'s measurements; see [`best_bandwidths`].
    /// Caches beyond L1 also take probe's kernels by write share, when it timed several with
    /// the same threads ([`LevelCeiling::mixes`]). L1 takes probe's `load` and `store` runs as
    /// its ports, both at one vector width (`l1_ports`): `l1_vector_bytes`, the width the
    /// kernel is built for, when probe timed both there (L1's bandwidth depends on it).
    pub fn add_measured(
        &mut self,
        measured: &Measured,
        threads: Option<u32>,
        file: &str,
        l1_vector_bytes: Option<u32>,
    ) -> Result<(), RooflineError> {
        for (level, gb_per_s, run) in best_runs(measured, threads) {
            // L1 has its ports; memory's rate follows how many streams run at once more than
            // their write share (see crate::mixes), so it keeps the fastest run.
            let mixes = match level {
                Level::Cache(1) | Level::Memory => Vec::new(),
                Level::Cache(_) => measured_mixes(measured, level, run.threads),
            };
            let how = if mixes.is_empty() {
                describe_run(run)
            } else {
                let kernels: Vec<&str> = mixes.iter().map(|m| m.kernel.as_str()).collect();
                format!(
                    "measured {} kernels, {}, by the share of written bytes",
                    kernels.join(", "),
                    plural(run.threads, "thread")
                )
            };
            self.set_bandwidth(
                level,
                BandwidthFn::Constant { gb_per_s },
                format!("{file}: {how}"),
            )?;
            if let Some(slot) = self.levels.iter_mut().find(|c| c.level == level) {
                slot.mixes = mixes;
            }
        }
        // L1's load and store ports apart, when probe timed both: a store that hits L1 moves
        // no write-allocate line, so the best run counting one overstates L1.
        if let Some(((load, load_how), (store, store_how))) =
            l1_ports(measured, threads, l1_vector_bytes)
        {
            let l1 = Level::Cache(1);
            let bandwidth = BandwidthFn::Constant { gb_per_s: load };
            self.set_bandwidth(l1, bandwidth, format!("{file}: {load_how}"))?;
            self.set_store_bandwidth(l1, store, format!("{file}: {store_how}"))?;
        }
        Ok(())
    }

    /// The ceilings with every constant bandwidth and Peff replaced by the paper's rounding:
    /// B/Ppeak and Peff/Ppeak rounded half-up to two decimals (0.36, 1.14, 0.88), as §7 does.
    pub fn paper_rounded(&self) -> Ceilings {
        let peak = self.peak_gflops;
        let mut rounded = self.clone();
        rounded.effective_gflops = (round2(self.effective_gflops / peak) * peak).min(peak);
        for ceiling in &mut rounded.levels {
            if let BandwidthFn::Constant { gb_per_s } = &mut ceiling.bandwidth {
                *gb_per_s = round2(*gb_per_s / peak) * peak;
            }
        }
        rounded
    }
}

/// L1's load and store ports, each as GB/s the kernel moved (no write-allocate in L1) and its
/// description: probe's `load` and `store` runs with `threads` threads (the most both kernels
/// were timed with when `None`), both at one vector width, since a port's rate scales with the
/// width and a build uses one. That width is `vector_bytes` (the build's) when probe timed
/// both there; else the recorded width nearest to it (the narrower on a tie); for a build of
/// unknown width (`None`), the width with the fastest loads. Runs without a recorded width
/// count as one width of their own. Without a thread count and width at which both were
/// timed, each port takes its fastest run, its width named.
fn l1_ports(
    measured: &Measured,
    threads: Option<u32>,
    vector_bytes: Option<u32>,
) -> Option<((f64, String), (f64, String))> {
    let runs = |kernel: &str| -> Vec<&Bandwidth> {
        measured
            .bandwidth
            .iter()
            .filter(|run| {
                run.level == "L1"
                    && run.kernel == kernel
                    && threads.is_none_or(|t| t == run.threads)
                    && run.gb_per_s.is_finite()
                    && run.gb_per_s > 0.0
            })
            .collect()
    };
    let (loads, stores) = (runs("load"), runs("store"));
    // The fastest of `runs` with `threads` threads (any when `None`) at `width` (any when
    // `None`), the most threads first.
    fn best<'a>(
        runs: &[&'a Bandwidth],
        threads: Option<u32>,
        width: Option<Option<u32>>,
    ) -> Option<&'a Bandwidth> {
        runs.iter()
            .copied()
            .filter(|r| threads.is_none_or(|t| t == r.threads))
            .filter(|r| width.is_none_or(|w| w == r.vector_bytes))
            .max_by(|a, b| {
                (a.threads, a.gb_per_s)
                    .partial_cmp(&(b.threads, b.gb_per_s))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    }
    let mut shared: Vec<(u32, Option<u32>)> = loads
        .iter()
        .map(|r| (r.threads, r.vector_bytes))
        .filter(|key| stores.iter().any(|s| (s.threads, s.vector_bytes) == *key))
        .collect();
    let most = shared.iter().map(|&(t, _)| t).max();
    shared.retain(|&(t, _)| Some(t) == most);
    let widths: Vec<Option<u32>> = shared.iter().map(|&(_, w)| w).collect();
    let chosen = match vector_bytes {
        Some(wanted) if widths.contains(&Some(wanted)) => {
            Some((Some(wanted), ", the build's".to_owned()))
        }
        Some(wanted) => widths
            .iter()
            .copied()
            .min_by_key(|w| w.map_or((u32::MAX, 0), |w| (w.abs_diff(wanted), w)))
            .map(|w| (w, format!(": no {wanted}-byte runs, the build's width"))),
        None => widths
            .iter()
            .copied()
            .max_by(|a, b| {
                let load = |w| best(&loads, most, Some(w)).map_or(0.0, |r| r.gb_per_s);
                load(*a).total_cmp(&load(*b))
            })
            .map(|w| (w, ", the fastest: the build's width is unknown".to_owned())),
    };
    let describe = |run: &Bandwidth, why: &str| {
        let width = run
            .vector_bytes
            .map_or(String::new(), |b| format!(", {b}-byte vectors{why}"));
        (
            run.gb_per_s,
            format!(
                "measured {} kernel, {}{width}",
                run.kernel,
                plural(run.threads, "thread")
            ),
        )
    };
    match chosen {
        Some((width, why)) => Some((
            describe(best(&loads, most, Some(width))?, &why),
            describe(best(&stores, most, Some(width))?, &why),
        )),
        None => Some((
            describe(best(&loads, None, None)?, ""),
            describe(best(&stores, None, None)?, ""),
        )),
    }
}

/// Rounds half-up to two decimals, as the paper prints its coefficients. A tiny epsilon keeps
/// binary fractions such as 0.885 (stored as 0.88499...) on the paper's side.
pub fn round2(x: f64) -> f64 {
    ((x * 100.0) + 0.5 + 1e-9).floor() / 100.0
}

fn positive(what: &str, value: f64) -> Result<(), RooflineError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(RooflineError::NotPositive {
            what: what.to_owned(),
            value,
        })
    }
}

/// Per level, the bandwidth the model should use from `probe`'s measurements: among the runs
/// with `threads` threads, or with the most threads when `None` (the paper's whole-chip
/// figures), the highest, counting write-allocate traffic (the paper counts a store twice).
/// Returns `(level, GB/s, description)`.
pub fn best_bandwidths(measured: &Measured, threads: Option<u32>) -> Vec<(Level, f64, String)> {
    best_runs(measured, threads)
        .into_iter()
        .map(|(level, gb_per_s, run)| (level, gb_per_s, describe_run(run)))
        .collect()
}

/// [`best_bandwidths`]' runs: per level, its bandwidth and the run it came from.
fn best_runs(measured: &Measured, threads: Option<u32>) -> Vec<(Level, f64, &Bandwidth)> {
    let mut best: Vec<(Level, f64, &Bandwidth)> = Vec::new();
    for run in &measured.bandwidth {
        let Ok(level) = run.level.parse::<Level>() else {
            continue;
        };
        if threads.is_some_and(|t| t != run.threads) {
            continue;
        }
        let gb_per_s = run.gb_per_s_with_write_allocate.unwrap_or(run.gb_per_s);
        if !(gb_per_s.is_finite() && gb_per_s > 0.0) {
            continue;
        }
        match best.iter_mut().find(|b| b.0 == level) {
            Some(slot) if (run.threads, gb_per_s) > (slot.2.threads, slot.1) => {
                *slot = (level, gb_per_s, run);
            }
            Some(_) => {}
            None => best.push((level, gb_per_s, run)),
        }
    }
    best.sort_by_key(|b| b.0);
    best
}

fn describe_run(run: &Bandwidth) -> String {
    format!(
        "measured {} kernel, {}",
        run.kernel,
        plural(run.threads, "thread")
    )
}

/// The floating-point precision a kernel computes in, which picks its compute peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// `double` arithmetic (also the paper's counts and profiles).
    #[default]
    Double,
    /// `float` arithmetic: twice the operations per vector.
    Single,
}

impl Precision {
    /// `double precision` or `single precision`, as the peak's source names it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Double => "double precision",
            Precision::Single => "single precision",
        }
    }
}

/// The theoretical peak in GFLOP/s of `cores` cores (the whole machine when `None`) at
/// `precision`: FLOPs per cycle and core × cores × clock, the clock being the probe's core
/// clock when the machine file has one (the clock its latencies in cycles use, after its
/// checks), else the nominal one ([`peak_clock`]). Single precision takes the file's `sp`
/// FLOPs per cycle, or twice `dp` when it has none.
pub fn theoretical_peak_gflops(
    machine: &Machine,
    cores: Option<u32>,
    precision: Precision,
) -> Option<f64> {
    let (hz, _) = peak_clock(machine)?;
    let flops = machine.peak_flops_per_cycle;
    let per_cycle = match precision {
        Precision::Double => flops.dp,
        Precision::Single if flops.sp > 0 => flops.sp,
        Precision::Single => flops.dp.saturating_mul(2),
    };
    let cores = cores.unwrap_or(machine.cores).min(machine.cores);
    (per_cycle > 0 && cores > 0).then(|| f64::from(per_cycle) * f64::from(cores) * hz / 1e9)
}

/// The clock the theoretical peak is taken at, in Hz, and its name: the probe's core clock
/// (`measured` section), else the nominal clock; `None` without a positive one.
pub fn peak_clock(machine: &Machine) -> Option<(f64, &'static str)> {
    let probed = machine
        .measured
        .as_ref()
        .and_then(|m| m.core_hz)
        .filter(|hz| hz.is_finite() && *hz > 0.0)
        .map(|hz| (hz, "the probe's core clock"));
    probed.or_else(|| {
        machine
            .nominal_hz
            .filter(|&hz| hz > 0)
            .map(|hz| (hz as f64, "the nominal clock"))
    })
}

/// The paper's effective bandwidth from a base test (§3.2): the mean bandwidth of the runs
/// whose required bytes per FLOP is at least `min_bytes_per_flop` (0 for memory, where all seven
/// runs count; the achieved B/F for a cache, excluding compute-bound runs). `rows` are
/// `(bytes_per_flop, gb_per_s)`; `None` when no row qualifies.
pub fn effective_bandwidth_gb_per_s(rows: &[(f64, f64)], min_bytes_per_flop: f64) -> Option<f64> {
    let kept: Vec<f64> = rows
        .iter()
        .filter(|(bf, _)| *bf >= min_bytes_per_flop)
        .map(|(_, gb)| *gb)
        .collect();
    (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Parses `--bandwidth L2=146,MEM=46` (GB/s) and the volume-dependent form
/// `L3=57.45+3.332/s` (intercept GB/s `+` slope per second, eq. 14).
pub fn parse_bandwidths(text: &str) -> Result<Vec<(Level, BandwidthFn)>, RooflineError> {
    let expected = "expected LEVEL=GB/s pairs such as L2=146,MEM=46, or \
                    LEVEL=INTERCEPT+SLOPE/s for a volume-dependent bandwidth";
    let number = |s: &str| s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    level_pairs("--bandwidth", text, expected, |value| {
        match value.split_once('+') {
            Some((intercept, slope)) => Some(BandwidthFn::Linear {
                intercept_gb_per_s: number(intercept)?,
                slope_per_s: number(slope.trim().strip_suffix("/s").unwrap_or(slope))?,
            }),
            None => Some(BandwidthFn::Constant {
                gb_per_s: number(value)?,
            }),
        }
    })
}

/// Parses `--store-bandwidth L1=56`: one constant GB/s per level, errors naming that flag.
pub(crate) fn parse_store_bandwidths(text: &str) -> Result<Vec<(Level, f64)>, RooflineError> {
    let expected = "expected LEVEL=GB/s pairs such as L1=56 (a store bandwidth is one number)";
    level_pairs("--store-bandwidth", text, expected, |value| {
        value.trim().parse::<f64>().ok().filter(|v| v.is_finite())
    })
}

/// Parses `--volume L3=2457600`: the access volume in bytes at which a level's
/// volume-dependent bandwidth is evaluated (eq. 14's D).
pub fn parse_volumes(text: &str) -> Result<Vec<(Level, u64)>, RooflineError> {
    let expected = "expected LEVEL=BYTES pairs such as L3=2457600";
    level_pairs("--volume", text, expected, |value| {
        value.parse::<u64>().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_machine::Bandwidth;
    use proptest::prelude::*;

    #[test]
    fn a_zero_clock_gives_no_theoretical_peak() {
        let mut machine = Machine::unknown();
        machine.cores = 4;
        machine.peak_flops_per_cycle.dp = 16;
        machine.nominal_hz = Some(0);
        let dp = Precision::Double;
        assert_eq!(theoretical_peak_gflops(&machine, None, dp), None);
        machine.nominal_hz = Some(2_000_000_000);
        assert_eq!(theoretical_peak_gflops(&machine, None, dp), Some(128.0));
        assert_eq!(theoretical_peak_gflops(&machine, Some(1), dp), Some(32.0));
        // The probe's core clock, when the file has one, is the one latencies in cycles use.
        machine.measured = Some(loopscope_machine::Measured {
            core_hz: Some(3.0e9),
            ..Default::default()
        });
        assert_eq!(theoretical_peak_gflops(&machine, None, dp), Some(192.0));
        assert_eq!(peak_clock(&machine).unwrap().1, "the probe's core clock");
    }

    #[test]
    fn single_precision_takes_the_sp_rate_or_twice_dp() {
        let mut machine = Machine::unknown();
        machine.cores = 2;
        machine.nominal_hz = Some(1_000_000_000);
        machine.peak_flops_per_cycle.dp = 16;
        machine.peak_flops_per_cycle.sp = 0;
        let sp = Precision::Single;
        assert_eq!(theoretical_peak_gflops(&machine, None, sp), Some(64.0));
        machine.peak_flops_per_cycle.sp = 24;
        assert_eq!(theoretical_peak_gflops(&machine, Some(1), sp), Some(24.0));
        let dp = Precision::Double;
        assert_eq!(theoretical_peak_gflops(&machine, Some(1), dp), Some(16.0));
    }

    use crate::mixes::tests::run;

    #[test]
    fn measured_bandwidths_prefer_all_threads_then_the_highest() {
        let measured = Measured {
            bandwidth: vec![
                run("MEM", "load", 1, 30.0, None),
                run("MEM", "copy", 2, 20.0, Some(30.0)),
                run("MEM", "load", 2, 25.0, None),
                run("L2", "load", 2, 150.0, None),
                run("weird", "load", 2, 1.0, None),
                run("L3", "load", 2, 0.0, None),
            ],
            ..Measured::default()
        };
        let best = best_bandwidths(&measured, None);
        assert_eq!(best.len(), 2);
        assert_eq!((best[0].0, best[0].1), (Level::Cache(2), 150.0));
        assert_eq!((best[1].0, best[1].1), (Level::Memory, 30.0));
        assert!(best[1].2.contains("copy"), "{}", best[1].2);
        // One thread, as `--measure`'s harness runs: only the one-thread runs count.
        let single = best_bandwidths(&measured, Some(1));
        assert_eq!(single.len(), 1);
        assert_eq!((single[0].0, single[0].1), (Level::Memory, 30.0));
        assert!(
            single[0].2.ends_with("load kernel, 1 thread"),
            "{}",
            single[0].2
        );
    }

    #[test]
    fn l1_takes_probes_load_and_store_runs_as_its_ports() {
        let measured = Measured {
            bandwidth: vec![
                run("L1", "load", 1, 140.0, None),
                run("L1", "store", 1, 100.0, Some(200.0)),
                run("L1", "copy", 1, 150.0, Some(230.0)),
            ],
            ..Measured::default()
        };
        let mut ceilings = Ceilings::new(40.0, 40.0, "t").unwrap();
        ceilings
            .add_measured(&measured, Some(1), "m.toml", None)
            .unwrap();
        let l1 = ceilings.level(Level::Cache(1)).unwrap();
        // Not the copy run's 230 GB/s, which counts a write-allocate line no L1 hit moves.
        assert_eq!(l1.bandwidth, BandwidthFn::Constant { gb_per_s: 140.0 });
        assert_eq!(l1.store.as_ref().map(|s| s.gb_per_s), Some(100.0));
        assert!(l1.source.contains("load kernel"), "{}", l1.source);
        // Asked for 16-byte vectors, the runs at that width, when probe recorded them.
        let narrow = |kernel: &str, gb: f64| Bandwidth {
            vector_bytes: Some(16),
            ..run("L1", kernel, 1, gb, None)
        };
        let mut widths = measured.clone();
        widths
            .bandwidth
            .extend([narrow("load", 110.0), narrow("store", 55.0)]);
        let mut ceilings = Ceilings::new(40.0, 40.0, "t").unwrap();
        ceilings
            .add_measured(&widths, Some(1), "m.toml", Some(16))
            .unwrap();
        let l1 = ceilings.level(Level::Cache(1)).unwrap();
        assert_eq!(l1.bandwidth, BandwidthFn::Constant { gb_per_s: 110.0 });
        assert_eq!(l1.store.as_ref().map(|s| s.gb_per_s), Some(55.0));
        assert!(
            l1.source.ends_with("16-byte vectors, the build's"),
            "{}",
            l1.source
        );
        // A file without them: the fastest runs, whatever their width.
        let mut ceilings = Ceilings::new(40.0, 40.0, "t").unwrap();
        ceilings
            .add_measured(&measured, Some(1), "m.toml", Some(16))
            .unwrap();
        let l1 = ceilings.level(Level::Cache(1)).unwrap();
        assert_eq!(l1.bandwidth, BandwidthFn::Constant { gb_per_s: 140.0 });
        // Without a store run, L1 keeps its single best bandwidth.
        let loads_only = Measured {
            bandwidth: vec![run("L1", "load", 1, 140.0, None)],
            ..Measured::default()
        };
        let mut ceilings = Ceilings::new(40.0, 40.0, "t").unwrap();
        ceilings
            .add_measured(&loads_only, Some(1), "m.toml", None)
            .unwrap();
        assert!(ceilings.level(Level::Cache(1)).unwrap().store.is_none());
    }

    #[test]
    fn both_l1_ports_come_from_one_vector_width() {
        // The loads are fastest at 16 bytes, the stores at 32 (the AMD EPYC guest's runs).
        let at = |kernel: &str, gb: f64, width: u32| Bandwidth {
            vector_bytes: Some(width),
            ..run("L1", kernel, 1, gb, None)
        };
        let measured = Measured {
            bandwidth: vec![
                at("load", 50.8, 32),
                at("store", 36.9, 32),
                at("load", 53.1, 16),
                at("store", 22.5, 16),
                // A store timed only with two threads is no partner for one-thread loads.
                Bandwidth {
                    threads: 2,
                    ..at("store", 92.0, 64)
                },
                at("load", 99.0, 64),
            ],
            ..Measured::default()
        };
        let ports = |width: Option<u32>| {
            let mut ceilings = Ceilings::new(40.0, 40.0, "t").unwrap();
            ceilings
                .add_measured(&measured, Some(1), "m.toml", width)
                .unwrap();
            let l1 = ceilings.level(Level::Cache(1)).unwrap().clone();
            let store = l1.store.unwrap();
            (
                l1.bandwidth.gb_per_s(0),
                store.gb_per_s,
                l1.source,
                store.source,
            )
        };
        let (load, store, load_how, store_how) = ports(Some(16));
        assert_eq!((load, store), (53.1, 22.5));
        assert!(
            load_how.ends_with("16-byte vectors, the build's"),
            "{load_how}"
        );
        assert!(
            store_how.ends_with("16-byte vectors, the build's"),
            "{store_how}"
        );
        let (load, store, _, _) = ports(Some(32));
        assert_eq!((load, store), (50.8, 36.9));
        // No 64-byte store with one thread: the nearest width both were timed at, said so.
        let (load, store, load_how, _) = ports(Some(64));
        assert_eq!((load, store), (50.8, 36.9));
        assert!(
            load_how.ends_with("32-byte vectors: no 64-byte runs, the build's width"),
            "{load_how}"
        );
        // A build of unknown width: the width with the fastest loads, for both ports.
        let (load, store, load_how, _) = ports(None);
        assert_eq!((load, store), (53.1, 22.5));
        assert!(
            load_how.ends_with("the build's width is unknown"),
            "{load_how}"
        );
    }

    #[test]
    fn store_bandwidth_errors_name_their_own_flag() {
        assert_eq!(
            parse_store_bandwidths("L1=56,L2=30").unwrap(),
            [(Level::Cache(1), 56.0), (Level::Cache(2), 30.0)]
        );
        for bad in ["L1=fast", "L1=1+2/s", "L9x=3", "L1=nan", "L1=1,L1=2", "L1"] {
            let err = parse_store_bandwidths(bad).unwrap_err().to_string();
            assert!(err.starts_with("--store-bandwidth:"), "{bad}: {err}");
        }
    }

    #[test]
    fn bandwidth_flags_parse_and_refuse_nonsense() {
        let parsed = parse_bandwidths("L2=146,MEM=46").unwrap();
        assert_eq!(
            parsed[1],
            (Level::Memory, BandwidthFn::Constant { gb_per_s: 46.0 })
        );
        let linear = parse_bandwidths("L3=57.45+3.332/s").unwrap();
        assert_eq!(
            linear[0].1,
            BandwidthFn::Linear {
                intercept_gb_per_s: 57.45,
                slope_per_s: 3.332
            }
        );
        let err = parse_bandwidths("L2=146,L7x=3").unwrap_err();
        assert!(err.to_string().starts_with("--bandwidth:8:"), "{err}");
        assert!(parse_bandwidths("L2=fast").is_err());
        assert!(parse_bandwidths("mem=1,memory=2").is_err());
        assert_eq!(
            parse_volumes("L3=2457600").unwrap(),
            [(Level::Cache(3), 2_457_600)]
        );
        let err = parse_volumes("L3=2.4MB").unwrap_err();
        assert!(err.to_string().starts_with("--volume:4:"), "{err}");
        let mut ceilings = Ceilings::new(100.0, 100.0, "test").unwrap();
        let err = ceilings
            .set_bandwidth(Level::Memory, BandwidthFn::Constant { gb_per_s: -1.0 }, "x")
            .unwrap_err();
        assert!(matches!(err, RooflineError::NotPositive { .. }));
        assert!(Ceilings::new(0.0, 1.0, "x").is_err());
        assert!(Ceilings::new(10.0, 11.0, "x").is_err());
        assert!(Ceilings::new(f64::NAN, 1.0, "x").is_err());
    }

    #[test]
    fn rounding_is_half_up() {
        assert_eq!(round2(46.0 / 128.0), 0.36);
        assert_eq!(round2(146.0 / 128.0), 1.14);
        assert_eq!(round2(146.0 / 46.0 - 1.0), 2.17);
        assert_eq!(round2(0.885), 0.89);
    }

    proptest! {
        #[test]
        fn bandwidth_parser_never_panics(text in ".{0,40}") {
            let _ = parse_bandwidths(&text);
            let _ = parse_volumes(&text);
        }
    }
}
