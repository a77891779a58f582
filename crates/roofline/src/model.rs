//! The classic roofline (eqs. 2–3) and the extended, cache-aware model (eqs. 4–11) over any
//! number of levels: t_E = max(t_L for every timed level, t_C), with t_L = D_L / B_L and
//! t_C = Nc / Peff.

use serde::{Serialize, Serializer};

use crate::{Ceilings, Level, LevelTraffic, RooflineError, Traffic};

/// What limits a kernel: one level's bandwidth, or the arithmetic units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The level's transfer time is the largest.
    Level(Level),
    /// The compute time is the largest.
    Compute,
    /// The additions of an in-order sum, one latency after another, take the longest.
    Chain,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Level(level) => level.fmt(f),
            Limit::Compute => f.write_str("compute"),
            Limit::Chain => f.write_str("chain"),
        }
    }
}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One level's term of eq. (4).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelTime {
    /// The level.
    pub name: Level,
    /// Bytes through it over all iterations (D_L).
    pub bytes: u64,
    /// Bytes through it per iteration.
    pub bytes_per_iteration: f64,
    /// The effective bandwidth used (B_L), `None` for an untouched level without one; the
    /// bandwidth of loads alone when the level's stores are timed apart.
    pub bandwidth_gb_per_s: Option<f64>,
    /// The bandwidth the level's stores were timed with, when they were timed apart.
    pub store_bandwidth_gb_per_s: Option<f64>,
    /// The share of written bytes the bandwidth was taken at, when the level's bandwidth
    /// depends on it (probe's kernels by write share): the level's own, or for a level the
    /// kernel moves no bytes through, the kernel's share beyond L1 (`untouched_share`).
    pub write_share: Option<f64>,
    /// t_L = D_L / B_L over all iterations.
    pub time_s: f64,
    /// The kernel's required bytes per FLOP at this level (b/f), `None` without FLOPs.
    pub bytes_per_flop: Option<f64>,
    /// This level's roof alone as a fraction of peak, (B_L/Ppeak)/(b/f), uncapped.
    pub roof_fraction_of_peak: Option<f64>,
}

/// The extended model's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Predicted rate, 10^9 FLOP/s (0 for a kernel without FLOPs).
    pub gflops: f64,
    /// Cp of eq. (9): predicted rate over the theoretical peak.
    pub fraction_of_peak: f64,
    /// The largest term of eq. (4).
    pub limit: Limit,
    /// t_E over all iterations.
    pub time_s: f64,
    /// t_E per iteration.
    pub time_per_iteration_s: f64,
    /// t_C = Nc / Peff over all iterations.
    pub compute_time_s: f64,
    /// The chained additions one latency after another, over all iterations; `None` without
    /// chained additions or without an add latency.
    pub chain_time_s: Option<f64>,
    /// The level with the largest transfer time (ties go outwards, as §6.2 puts ties in the
    /// memory-bound region).
    pub bandwidth_limit: Level,
    /// Cp without the compute cap, as §6.2's procedure and eqs. (10)–(11) give it.
    pub uncapped_fraction_of_peak: f64,
    /// Every level's term.
    pub levels: Vec<LevelTime>,
}

/// The classic roofline's answer (eq. 2), from the outermost level's traffic alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classic {
    /// min(Ppeak, B·X) in 10^9 FLOP/s (0 for a kernel without FLOPs).
    pub gflops: f64,
    /// Cp of eq. (3).
    pub fraction_of_peak: f64,
    /// The level, or `compute` when the peak caps it; `None` for a kernel with neither FLOPs
    /// nor bytes through that level, which the classic roofline does not bound.
    pub limit: Option<Limit>,
    /// The level whose traffic and bandwidth it uses: memory, or the outermost level the
    /// traffic lists when it lists no memory.
    pub level: Level,
    /// That level's b/f, `None` without FLOPs.
    pub bytes_per_flop: Option<f64>,
    /// Its time over all iterations, the longer of the level's transfer time and the FLOPs
    /// at Ppeak: what it predicts for a kernel without FLOPs.
    pub time_s: f64,
}

/// Evaluates eq. (4)–(9) for `traffic` under `ceilings`. Every level the kernel moves bytes
/// through needs a bandwidth.
pub fn predict(traffic: &Traffic, ceilings: &Ceilings) -> Result<Prediction, RooflineError> {
    traffic.validate()?;
    let levels = level_times(traffic, ceilings)?;
    let compute_time_s = traffic.flops as f64 / (ceilings.effective_gflops * 1e9);
    // Iterate outwards-last so that `>` keeps the outer level on ties.
    let bound = levels
        .iter()
        .rev()
        .fold(None::<&LevelTime>, |best, l| match best {
            Some(b) if b.time_s >= l.time_s => Some(b),
            _ => Some(l),
        })
        .ok_or(RooflineError::NoTimedLevel)?;
    let (mut limit, mut time_s) = if compute_time_s > bound.time_s {
        (Limit::Compute, compute_time_s)
    } else {
        (Limit::Level(bound.name), bound.time_s)
    };
    // Not part of the paper's max: an extension for sums the compiler must keep in order.
    let chain_time_s = ceilings
        .add_latency
        .as_ref()
        .filter(|_| traffic.chained_adds > 0)
        .map(|latency| chain_adds_per_thread(traffic, ceilings) * latency.ns * 1e-9);
    if let Some(chain) = chain_time_s.filter(|&t| t > time_s) {
        (limit, time_s) = (Limit::Chain, chain);
    }
    let fraction = |t: f64| rate_gflops(traffic.flops, t) / ceilings.peak_gflops;
    Ok(Prediction {
        gflops: rate_gflops(traffic.flops, time_s),
        fraction_of_peak: fraction(time_s),
        limit,
        time_s,
        time_per_iteration_s: time_s / traffic.iterations as f64,
        compute_time_s,
        chain_time_s,
        bandwidth_limit: bound.name,
        uncapped_fraction_of_peak: fraction(bound.time_s),
        levels,
    })
}

/// The classic roofline on the outermost timed level: P = min(F, B·X), eq. (2). That level is
/// memory whenever the traffic lists it; the paper's base tests list only the level their data
/// comes from (Table 2's L2 column is eq. (2) with L2's bandwidth), so without memory the
/// outermost listed level stands in, and [`Classic::level`] names it.
pub fn classic(traffic: &Traffic, ceilings: &Ceilings) -> Result<Classic, RooflineError> {
    traffic.validate()?;
    let outer = traffic.levels.last().ok_or(RooflineError::NoTimedLevel)?;
    let bandwidth = bandwidth_at(ceilings, traffic, outer)?
        .map(|(b, _)| b)
        .filter(|_| outer.bytes > 0);
    let peak = ceilings.peak_gflops;
    let flops = traffic.flops as f64;
    let bytes = outer.bytes as f64;
    let level_time_s = bandwidth.map_or(0.0, |b| bytes / (b * 1e9));
    let compute_time_s = flops / (peak * 1e9);
    let (gflops, limit, time_s) = match bandwidth {
        Some(b) if level_time_s > compute_time_s => (
            b * flops / bytes,
            Some(Limit::Level(outer.level)),
            level_time_s,
        ),
        _ if traffic.flops > 0 => (peak, Some(Limit::Compute), compute_time_s),
        _ => (0.0, None, 0.0),
    };
    Ok(Classic {
        gflops,
        fraction_of_peak: gflops / peak,
        limit,
        level: outer.level,
        bytes_per_flop: (traffic.flops > 0).then(|| bytes / flops),
        time_s,
    })
}

fn level_times(traffic: &Traffic, ceilings: &Ceilings) -> Result<Vec<LevelTime>, RooflineError> {
    let flops = traffic.flops as f64;
    traffic
        .levels
        .iter()
        .map(|l| {
            let rate = bandwidth_at(ceilings, traffic, l)?;
            let bandwidth = rate.map(|(b, _)| b);
            let bytes = l.bytes as f64;
            let bytes_per_flop = (traffic.flops > 0).then(|| bytes / flops);
            let store = store_split(ceilings, l);
            let time_s = match (bandwidth, store) {
                // Separate ports: loads and stores overlap, the busier port decides.
                (Some(b), Some((stored, store_gb_per_s))) => {
                    ((bytes - stored) / (b * 1e9)).max(stored / (store_gb_per_s * 1e9))
                }
                (Some(b), None) => bytes / (b * 1e9),
                (None, _) => 0.0,
            };
            Ok(LevelTime {
                name: l.level,
                bytes: l.bytes,
                bytes_per_iteration: bytes / traffic.iterations as f64,
                bandwidth_gb_per_s: bandwidth,
                store_bandwidth_gb_per_s: store.map(|(_, b)| b),
                write_share: rate.and_then(|(_, share)| share),
                time_s,
                bytes_per_flop,
                // With separate ports, the rate the level sustains for this mix of loads
                // and stores.
                roof_fraction_of_peak: match (bandwidth, bytes_per_flop) {
                    (Some(_), Some(bf)) if bf > 0.0 && time_s > 0.0 => {
                        Some(bytes / time_s / 1e9 / ceilings.peak_gflops / bf)
                    }
                    _ => None,
                },
            })
        })
        .collect()
}

/// The stored bytes of a level and its store bandwidth, when both are known.
pub(crate) fn store_split(ceilings: &Ceilings, traffic: &LevelTraffic) -> Option<(f64, f64)> {
    let stored = traffic.store_bytes?.min(traffic.bytes);
    let store = ceilings.level(traffic.level)?.store.as_ref()?;
    Some((stored as f64, store.gb_per_s))
}

/// The bandwidth `level` runs at for `traffic` and the share of written bytes it was taken at
/// (when it depends on one): a level the kernel moves bytes through at its own share
/// ([`crate::LevelCeiling::gb_per_s_for`]), one it moves none through at the kernel's
/// ([`untouched_share`]). An error when the level moves bytes but has no bandwidth, or its
/// bandwidth is not positive there.
pub(crate) fn bandwidth_at(
    ceilings: &Ceilings,
    traffic: &Traffic,
    level: &LevelTraffic,
) -> Result<Option<(f64, Option<f64>)>, RooflineError> {
    let name = level.level;
    let Some(ceiling) = ceilings.level(name) else {
        return if level.bytes == 0 {
            Ok(None)
        } else {
            Err(RooflineError::MissingBandwidth {
                level: name,
                bytes: level.bytes,
            })
        };
    };
    let share = if level.bytes == 0 && ceiling.store.is_none() && !ceiling.mixes.is_empty() {
        untouched_share(traffic)
    } else {
        ceiling.write_share_of(level)
    };
    let gb_per_s = ceiling.gb_per_s_at(level, share);
    if gb_per_s.is_finite() && gb_per_s > 0.0 {
        Ok(Some((gb_per_s, share)))
    } else {
        let volume = level.volume_bytes.unwrap_or(level.bytes);
        Err(RooflineError::NotPositive {
            what: format!("the {name} bandwidth at an access volume of {volume} bytes"),
            value: gb_per_s,
        })
    }
}

/// The share of written bytes a level the kernel moves no bytes through is timed at: that of
/// the kernel's traffic through the outermost level beyond L1 it uses, so that the untouched
/// level's roof is the one the kernel would meet there and ranks with the roofs of the levels
/// it uses (probe's store kernel, at 50 %, can put an L3 above an L2 read at 0 %); 0 (loads
/// alone) when it moves nothing beyond L1. `None` when the traffic does not know its
/// write-backs (`--counts`): every level then takes its single bandwidth.
pub(crate) fn untouched_share(traffic: &Traffic) -> Option<f64> {
    let beyond_l1 = || traffic.levels.iter().filter(|l| l.level > Level::Cache(1));
    if beyond_l1().all(|l| l.store_bytes.is_none()) {
        return None;
    }
    let used = beyond_l1()
        .filter_map(|l| Some((l.store_bytes?.min(l.bytes), l.bytes)))
        .rfind(|&(_, bytes)| bytes > 0);
    Some(used.map_or(0.0, |(written, bytes)| written as f64 / bytes as f64))
}

fn rate_gflops(flops: u64, time_s: f64) -> f64 {
    if flops == 0 || time_s <= 0.0 {
        0.0
    } else {
        flops as f64 / time_s / 1e9
    }
}

/// The chained additions one thread waits for: the in-order sums are split over the threads
/// as their iterations are, while a recurrence through memory (a prefix sum, Gauss-Seidel) is
/// no parallel loop as written and stays whole.
fn chain_adds_per_thread(traffic: &Traffic, ceilings: &Ceilings) -> f64 {
    let recurrences = traffic.recurrence_adds.min(traffic.chained_adds);
    let sums = traffic.chained_adds - recurrences;
    sums as f64 / f64::from(ceilings.chain_threads.max(1)) + recurrences as f64
}
