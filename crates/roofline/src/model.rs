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
    /// min(Ppeak, B·X) in 10^9 FLOP/s.
    pub gflops: f64,
    /// Cp of eq. (3).
    pub fraction_of_peak: f64,
    /// The level, or `compute` when the peak caps it.
    pub limit: Limit,
    /// The level whose traffic and bandwidth it uses.
    pub level: Level,
    /// That level's b/f, `None` without FLOPs.
    pub bytes_per_flop: Option<f64>,
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
        .map(|latency| traffic.chained_adds as f64 * latency.ns * 1e-9);
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

/// The classic roofline on the outermost timed level: P = min(F, B·X), eq. (2).
pub fn classic(traffic: &Traffic, ceilings: &Ceilings) -> Result<Classic, RooflineError> {
    traffic.validate()?;
    let outer = traffic.levels.last().ok_or(RooflineError::NoTimedLevel)?;
    let bandwidth = bandwidth_at(ceilings, outer)?;
    let peak = ceilings.peak_gflops;
    let flops = traffic.flops as f64;
    let bytes = outer.bytes as f64;
    let memory_gflops = bandwidth.map_or(f64::INFINITY, |b| b * flops / bytes);
    let (gflops, limit) = if traffic.flops == 0 {
        (0.0, Limit::Level(outer.level))
    } else if outer.bytes == 0 || memory_gflops >= peak {
        (peak, Limit::Compute)
    } else {
        (memory_gflops, Limit::Level(outer.level))
    };
    Ok(Classic {
        gflops,
        fraction_of_peak: gflops / peak,
        limit,
        level: outer.level,
        bytes_per_flop: (traffic.flops > 0).then(|| bytes / flops),
    })
}

fn level_times(traffic: &Traffic, ceilings: &Ceilings) -> Result<Vec<LevelTime>, RooflineError> {
    let flops = traffic.flops as f64;
    traffic
        .levels
        .iter()
        .map(|l| {
            let bandwidth = bandwidth_at(ceilings, l)?;
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

/// The bandwidth `traffic` runs at through its level ([`crate::LevelCeiling::gb_per_s_for`]); an
/// error when the level moves bytes but has no bandwidth, or its bandwidth is not positive
/// there.
pub(crate) fn bandwidth_at(
    ceilings: &Ceilings,
    traffic: &LevelTraffic,
) -> Result<Option<f64>, RooflineError> {
    let level = traffic.level;
    let Some(ceiling) = ceilings.level(level) else {
        return if traffic.bytes == 0 {
            Ok(None)
        } else {
            Err(RooflineError::MissingBandwidth {
                level,
                bytes: traffic.bytes,
            })
        };
    };
    let gb_per_s = ceiling.gb_per_s_for(traffic);
    if gb_per_s.is_finite() && gb_per_s > 0.0 {
        Ok(Some(gb_per_s))
    } else {
        let volume = traffic.volume_bytes.unwrap_or(traffic.bytes);
        Err(RooflineError::NotPositive {
            what: format!("the {level} bandwidth at an access volume of {volume} bytes"),
            value: gb_per_s,
        })
    }
}

fn rate_gflops(flops: u64, time_s: f64) -> f64 {
    if flops == 0 || time_s <= 0.0 {
        0.0
    } else {
        flops as f64 / time_s / 1e9
    }
}
