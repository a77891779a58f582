//! The exact simulator as the model's fallback: a level the model does not finish within the
//! time limit is counted by simulating the kernel through that level alone (the model's own
//! assumption, as `--check` does), when the simulation is estimated to fit the same limit. The
//! estimate comes from the kernel's iteration counts, before anything runs: a bound from the
//! loops' ranges first (free, whatever the sizes), then the exact count of accesses when the
//! bound says counting them is cheap. A kernel whose simulation is estimated to take under
//! [`RACE_S`] is simulated beside the model from the start ([`Race`]).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use loopscope_cache::{AloneLevel, CacheError, LevelConfig, simulate_each_level_alone};
use loopscope_kernel::{Kernel, LoadedKernel, Program as Stream, Silent, Sym};

use super::counts::{check_work, kernel_request_error};
use super::process::{GRACE_S, cores};
use super::{MissesRequest, checked_request};
use crate::{AnalyticError, program_from_kernel};

/// Accesses per second the simulator is assumed to count through one level alone, counting
/// compulsory misses by first touch, on one core. Measured on an AMD EPYC KVM guest (family
/// 0x19 model 0x1, 2 cores) with `misses KERNEL --cache LEVEL --check --json`
/// (`check.levels[].duration_s`): 150 million per second for `examples/kernels/triad.c -D
/// N=4000000` in `L1=32K:8:64` or `L3=32M:16:64`, 58 million for the miss-heavy
/// `transpose.c -D N=3000` in `L1=32K:8:64`; with its three levels (the last a 256 MiB one,
/// stored sparsely) at once on the two cores, 14.5 million each, which the estimate (two
/// rounds of levels) reads as 29 million. About a third of that slowest, so that a slower
/// machine or a busy one still finishes within the estimate.
pub const SIMULATED_ACCESSES_PER_S: u64 = 10_000_000;

/// Beyond this many times the accesses a simulation may take, the accesses are not counted
/// exactly (counting walks the loops whose inner bounds depend on them): a loop-range bound that
/// far past the budget means the simulation is out of reach anyway, since no triangle or simplex
/// of loops is that much smaller than its box.
const COUNT_MARGIN: u128 = 1000;

/// What simulating some levels of a kernel would take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimulationEstimate {
    /// The kernel's accesses, exactly; `None` when they were not counted because a bound from
    /// the loop ranges is already far past what could be simulated in time.
    pub accesses: Option<u64>,
    /// The bound from the loop ranges (at least `accesses`).
    pub accesses_bound: u128,
    /// Estimated seconds to simulate the levels, all at once, on this machine's cores.
    pub seconds: f64,
}

impl SimulationEstimate {
    /// Whether the simulation is estimated to finish within `limit_s` seconds.
    pub fn fits(&self, limit_s: f64) -> bool {
        self.accesses.is_some() && self.seconds <= limit_s
    }
}

/// Estimates simulating `levels` levels of `loaded` at once (one thread each, on `cores`
/// cores), given `limit_s` seconds: counts the accesses exactly unless the loop ranges bound
/// them far beyond what `limit_s` allows. Returns the compiled access stream too when it was
/// built (the simulation reuses it).
pub(super) fn estimate(
    loaded: &LoadedKernel,
    levels: usize,
    cores: usize,
    limit_s: f64,
) -> Result<(SimulationEstimate, Option<Stream>), AnalyticError> {
    let bound = accesses_bound(&loaded.kernel, &loaded.params);
    let rounds = levels.div_ceil(cores.max(1)).max(1) as f64;
    let seconds_for = |accesses: f64| accesses * rounds / SIMULATED_ACCESSES_PER_S as f64;
    let affordable = (limit_s.max(0.0) / rounds * SIMULATED_ACCESSES_PER_S as f64) as u128;
    if bound > affordable.saturating_mul(COUNT_MARGIN) {
        let estimate = SimulationEstimate {
            accesses: None,
            accesses_bound: bound,
            seconds: seconds_for(bound as f64),
        };
        return Ok((estimate, None));
    }
    let stream = Stream::new(&loaded.kernel, &loaded.params, &loaded.layout)?;
    let accesses = stream.total_accesses(&loaded.kernel);
    let estimate = SimulationEstimate {
        accesses: Some(accesses),
        accesses_bound: bound.max(u128::from(accesses)),
        seconds: seconds_for(accesses as f64),
    };
    Ok((estimate, Some(stream)))
}

/// An upper bound on the kernel's accesses at parameter values `params`: each statement's
/// references times the product of its loops' largest trip counts, each loop variable's range
/// taken from its bounds over the enclosing variables' ranges (loops are numbered outermost
/// first). Exact for rectangular nests; a loop whose bounds cannot be evaluated counts as
/// unbounded.
pub fn accesses_bound(kernel: &Kernel, params: &[i64]) -> u128 {
    let unbounded = u128::MAX;
    let mut ranges: Vec<Option<(i128, i128)>> = Vec::with_capacity(kernel.loops.len());
    let mut trips: Vec<u128> = Vec::with_capacity(kernel.loops.len());
    for l in &kernel.loops {
        let start = interval(&l.start, params, &ranges);
        let end = interval(&l.end_inclusive, params, &ranges);
        let (range, most) = match (start, end) {
            (Some(s), Some(e)) if l.step > 0 => ((s.0, e.1), e.1 - s.0),
            (Some(s), Some(e)) => ((e.0, s.1), s.1 - e.0),
            _ => {
                ranges.push(None);
                trips.push(unbounded);
                continue;
            }
        };
        let step = i128::from(l.step).unsigned_abs();
        trips.push(if most < 0 {
            0
        } else {
            most.unsigned_abs() / step + 1
        });
        ranges.push(Some(range));
    }
    kernel
        .statements
        .iter()
        .map(|s| {
            s.loops.iter().fold(s.refs.len() as u128, |n, &l| {
                n.saturating_mul(trips.get(l).copied().unwrap_or(unbounded))
            })
        })
        .fold(0u128, u128::saturating_add)
}

/// The smallest and largest value of `a` over the loop variables' `ranges`, or `None` when a
/// parameter has no value or a loop no range.
fn interval(
    a: &loopscope_kernel::Affine,
    params: &[i64],
    ranges: &[Option<(i128, i128)>],
) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (i128::from(a.constant), i128::from(a.constant));
    for &(s, c) in &a.terms {
        let c = i128::from(c);
        let (x, y) = match s {
            Sym::Param(p) => {
                let v = c.checked_mul(i128::from(*params.get(p)?))?;
                (v, v)
            }
            Sym::Loop(l) => {
                let (from, to) = (*ranges.get(l)?)?;
                let (x, y) = (c.checked_mul(from)?, c.checked_mul(to)?);
                (x.min(y), x.max(y))
            }
        };
        lo = lo.checked_add(x)?;
        hi = hi.checked_add(y)?;
    }
    Some((lo, hi))
}

/// How long `misses` may take, as far as is known before it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MissesWait {
    /// Seconds the model may take: the time limit (the levels run at once) and the grace after
    /// it for a level process to be stopped.
    pub model_s: f64,
    /// What simulating every level would take, should the model finish none (`None` with
    /// `model_only`): the levels are simulated only if this fits the time limit.
    pub simulation: Option<SimulationEstimate>,
}

impl MissesWait {
    /// The longest the command may take, in seconds: the model's time, then the simulation's
    /// when it fits the limit.
    pub fn longest_s(&self, limit_s: f64) -> f64 {
        self.model_s
            + self
                .simulation
                .filter(|s| s.fits(limit_s))
                .map_or(0.0, |s| s.seconds)
    }
}

/// How long `misses` may take for `request` (its counts form: `None` for `--scan` and
/// `--symbolic`, whose work depends on more than the limit), before starting it: checks the
/// request as [`crate::misses`] does (the same errors), loads the kernel (warnings go nowhere:
/// [`crate::misses`] gives them) and estimates the simulation of every level.
pub fn misses_wait(
    request: &MissesRequest<'_>,
    levels: &[LevelConfig],
) -> Result<Option<MissesWait>, AnalyticError> {
    checked_request(request, levels)?;
    if request.scan.is_some() || request.symbolic.is_some() {
        return Ok(None);
    }
    let loaded = LoadedKernel::load(request.kernel, request.define, request.base, &Silent)?;
    // A kernel the model refuses is bad input, said alone: not after a wait announced for it.
    program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout)
        .map_err(|e| kernel_request_error(&loaded.origin, e, &Silent))?;
    // And so is a `--check` the simulator cannot run.
    if request.check {
        check_work(&loaded)?;
    }
    let simulation = if request.model_only {
        None
    } else {
        Some(estimate(&loaded, levels.len(), cores(), request.time_limit_s)?.0)
    };
    Ok(Some(MissesWait {
        model_s: request.time_limit_s + GRACE_S,
        simulation,
    }))
}

/// Most seconds the simulator is estimated to take, every level at once, for it to run beside
/// the model ([`Race`]).
pub(super) const RACE_S: f64 = 0.5;

/// The exact simulator counting every level alone on a thread of its own, beside the model: on
/// a small kernel it finishes in milliseconds where the model may take seconds, and both give
/// the same counts. The model's levels that are done when the simulation ends are kept; the
/// others take the simulator's counts. A simulation the model outruns is left to end by itself
/// within [`RACE_S`] or so; its results are dropped.
pub(super) struct Race {
    /// Set when the simulation has finished (or failed).
    pub(super) done: Arc<AtomicBool>,
    results: mpsc::Receiver<Vec<Result<AloneLevel, CacheError>>>,
}

impl Race {
    /// Starts the simulation of `levels` when it is estimated to take under [`RACE_S`]; `None`
    /// otherwise, or when the simulator cannot run the kernel.
    pub(super) fn start(
        loaded: &LoadedKernel,
        levels: &[LevelConfig],
        arrays: &[Range<u64>],
    ) -> Option<Race> {
        if levels.iter().any(|l| l.check_simulable().is_err()) {
            return None;
        }
        let (estimate, stream) = estimate(loaded, levels.len(), cores(), RACE_S).ok()?;
        let stream = stream.filter(|_| estimate.seconds <= RACE_S)?;
        let done = Arc::new(AtomicBool::new(false));
        let (send, results) = mpsc::channel();
        let references = loaded.kernel.references().count();
        let (levels, arrays, finished) = (levels.to_vec(), arrays.to_vec(), done.clone());
        std::thread::spawn(move || {
            let counted = simulate_each_level_alone(&stream, references, &levels, &arrays);
            // The receiver is gone when the model finished first: nothing to tell.
            let _ = send.send(counted);
            finished.store(true, Ordering::Release);
        });
        Some(Race { done, results })
    }

    /// The simulation's counts of every level, when it has finished.
    pub(super) fn finished(&self) -> Option<Vec<Result<AloneLevel, CacheError>>> {
        if self.done.load(Ordering::Acquire) {
            self.results.try_recv().ok()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, define: &[(&str, i64)]) -> LoadedKernel {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.c");
        std::fs::write(&path, text).unwrap();
        let define: Vec<(String, i64)> = define.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        LoadedKernel::load(&path, &define, None, &Silent).unwrap()
    }

    const MATMUL: &str = "double a[N][N], b[N][N], c[N][N];\n\
        for (int i = 0; i < N; ++i)\n for (int j = 0; j < N; ++j)\n  for (int k = 0; k < N; ++k)\n\
        \x20  c[i][j] += a[i][k] * b[k][j];\n";

    #[test]
    fn a_rectangular_nest_is_bounded_exactly() {
        let k = load(MATMUL, &[("N", 70)]);
        // Four references (c read and written, a, b) in 70³ iterations.
        assert_eq!(accesses_bound(&k.kernel, &k.params), 4 * 70 * 70 * 70);
        let (estimate, stream) = estimate(&k, 1, 2, 30.0).unwrap();
        assert_eq!(estimate.accesses, Some(4 * 70 * 70 * 70));
        assert!(stream.is_some());
        let expected = (4 * 70 * 70 * 70) as f64 / SIMULATED_ACCESSES_PER_S as f64;
        assert!((estimate.seconds - expected).abs() < 1e-9);
        assert!(estimate.fits(30.0));
        assert!(!estimate.fits(expected / 2.0));
    }

    #[test]
    fn a_triangle_is_bounded_by_its_box_and_counted_exactly() {
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n for (int j = i; j < N; j += 2)\n  \
                    a[j] = a[i];\n";
        let k = load(text, &[("N", 11)]);
        assert_eq!(accesses_bound(&k.kernel, &k.params), 2 * 11 * 6);
        let (estimate, _) = estimate(&k, 1, 1, 30.0).unwrap();
        // Σ over i of ⌈(11 − i)/2⌉ = 6+5+5+4+4+3+3+2+2+1+1 = 36 iterations, two accesses each.
        assert_eq!(estimate.accesses, Some(72));
    }

    #[test]
    fn levels_beyond_the_cores_take_rounds() {
        let k = load(MATMUL, &[("N", 10)]);
        let (one, _) = estimate(&k, 1, 2, 30.0).unwrap();
        let (two, _) = estimate(&k, 2, 2, 30.0).unwrap();
        let (three, _) = estimate(&k, 3, 2, 30.0).unwrap();
        assert_eq!(one.seconds, two.seconds);
        assert_eq!(three.seconds, 2.0 * one.seconds);
    }

    #[test]
    fn a_huge_kernel_is_not_counted_and_does_not_fit() {
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n for (int j = 0; j < N; ++j)\n  \
                    for (int k = 0; k < N; ++k)\n   a[k] = a[j];\n";
        let k = load(text, &[("N", 1_000_000)]);
        let (estimate, stream) = estimate(&k, 1, 2, 30.0).unwrap();
        assert_eq!(estimate.accesses, None);
        assert_eq!(estimate.accesses_bound, 2 * 1_000_000u128.pow(3));
        assert!(stream.is_none());
        assert!(!estimate.fits(1e9));
    }
}
