//! The core clock: two dependent chains of different instructions timed with the calibrated
//! timer, checked against each other and against the nominal clock before any latency is
//! turned into cycles.
//!
//! A chain of `add reg, imm` is not a clock on every core: Golden Cove and later Intel cores
//! fold immediate additions at rename, several per cycle, which once gave 11.3 GHz on a
//! 2.1 GHz part. Both chains here take a register operand whose value the core cannot know
//! (it comes through `black_box`), which no current x86 core eliminates or fuses: `imul` (3
//! cycles on every Intel core since Core 2 and every AMD core since Zen) and `add` (1 cycle).
//! They use different execution units, so a core that shortened one would not shorten the
//! other in the same proportion.

use serde::Serialize;

use crate::timer::Timer;

/// Latency of a 64-bit `imul reg, reg`, in cycles, on every current x86-64 core.
pub const IMUL_LATENCY_CYCLES: f64 = 3.0;

/// Latency of `add reg, reg`, in cycles.
pub const ADD_LATENCY_CYCLES: f64 = 1.0;

/// How far apart (relative to the lower) the two chains' clocks may be.
pub const CLOCK_AGREEMENT: f64 = 0.10;

/// The range, as multiples of the nominal clock, a measured clock must lie in: below it no
/// core runs while executing (even throttled by power), above it none boosts.
pub const CLOCK_RANGE: (f64, f64) = (0.5, 2.0);

/// Which clock survived the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The `imul` chain, confirmed by the `add` chain and in range of the nominal clock.
    Measured,
    /// The nominal clock: the chains disagreed or gave a clock out of range.
    Nominal,
    /// The lower of the two chains' clocks: they disagreed and no nominal clock is known.
    LowerChain,
}

/// The core clock and the evidence for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CoreClock {
    /// The clock latencies in cycles and the peak fraction use, in Hz.
    pub hz: f64,
    /// Which clock that is.
    pub source: ClockSource,
    /// The clock the `imul` chain gives, in Hz.
    pub imul_hz: f64,
    /// The clock the `add` chain gives, in Hz.
    pub add_hz: f64,
    /// The nominal clock checked against (the machine description's, else the TSC rate).
    pub nominal_hz: Option<f64>,
}

impl CoreClock {
    /// The relative disagreement of the two chains: `max / min - 1`.
    pub fn disagreement(&self) -> f64 {
        self.imul_hz.max(self.add_hz) / self.imul_hz.min(self.add_hz) - 1.0
    }

    /// One line for the notes, saying which clock is used and why.
    pub fn describe(&self) -> String {
        let ghz = |hz: f64| hz / 1e9;
        let chains = format!(
            "imul chain {:.3} GHz, add chain {:.3} GHz",
            ghz(self.imul_hz),
            ghz(self.add_hz)
        );
        match self.source {
            ClockSource::Measured => format!(
                "core clock {:.3} GHz measured ({chains}: agree within {:.1} %{})",
                ghz(self.hz),
                100.0 * self.disagreement(),
                self.nominal_hz.map_or(String::new(), |n| format!(
                    "; {:.2}x the nominal {:.3} GHz",
                    self.hz / n,
                    ghz(n)
                )),
            ),
            ClockSource::Nominal => format!(
                "core clock {:.3} GHz nominal, not measured: {chains}, {}",
                ghz(self.hz),
                self.rejection()
            ),
            ClockSource::LowerChain => format!(
                "core clock {:.3} GHz from the slower chain, uncertain: {chains}, {}",
                ghz(self.hz),
                self.rejection()
            ),
        }
    }

    fn rejection(&self) -> String {
        if self.disagreement() > CLOCK_AGREEMENT {
            return format!(
                "which disagree by {:.0} % (more than {:.0} %: a core folded or fused one)",
                100.0 * self.disagreement(),
                100.0 * CLOCK_AGREEMENT
            );
        }
        let nominal = self.nominal_hz.unwrap_or(f64::NAN);
        format!(
            "{:.2}x the nominal clock, outside {}-{}x",
            self.imul_hz / nominal,
            CLOCK_RANGE.0,
            CLOCK_RANGE.1
        )
    }
}

/// Judges two chains' timings (nanoseconds per link) against each other and the nominal
/// clock, and picks the clock to use: the `imul` chain's when the `add` chain agrees within
/// [`CLOCK_AGREEMENT`] and it lies within [`CLOCK_RANGE`] of `nominal_hz`; otherwise the
/// nominal clock, or without one the slower chain's (folding only makes a chain faster).
pub fn judge_clock(
    imul_ns_per_link: f64,
    add_ns_per_link: f64,
    nominal_hz: Option<f64>,
) -> CoreClock {
    let hz = |cycles: f64, ns: f64| {
        if ns > 0.0 && ns.is_finite() {
            cycles / ns * 1e9
        } else {
            f64::INFINITY
        }
    };
    let imul_hz = hz(IMUL_LATENCY_CYCLES, imul_ns_per_link);
    let add_hz = hz(ADD_LATENCY_CYCLES, add_ns_per_link);
    let nominal_hz = nominal_hz.filter(|n| *n > 0.0 && n.is_finite());
    let mut clock = CoreClock {
        hz: imul_hz,
        source: ClockSource::Measured,
        imul_hz,
        add_hz,
        nominal_hz,
    };
    let agree = clock.disagreement() <= CLOCK_AGREEMENT;
    let in_range = nominal_hz.is_none_or(|n| {
        let ratio = imul_hz / n;
        ratio >= CLOCK_RANGE.0 && ratio <= CLOCK_RANGE.1
    });
    if agree && in_range {
        return clock;
    }
    (clock.hz, clock.source) = match nominal_hz {
        Some(n) => (n, ClockSource::Nominal),
        None => (imul_hz.min(add_hz), ClockSource::LowerChain),
    };
    clock
}

/// Times both chains (`runs` times each, keeping the fastest) and judges them
/// ([`judge_clock`]).
pub fn measure_core_clock(timer: &Timer, runs: u32, nominal_hz: Option<f64>) -> CoreClock {
    let imul = ns_per_link(timer, runs, imul_chain);
    let add = ns_per_link(timer, runs, add_chain);
    judge_clock(imul, add, nominal_hz)
}

/// The fastest of `runs` runs of `chain` (64 dependent operations per iteration), in
/// nanoseconds per operation.
pub(crate) fn ns_per_link(timer: &Timer, runs: u32, chain: fn(u64)) -> f64 {
    const LINKS_PER_ITERATION: u64 = 64;
    const ITERATIONS: u64 = 20_000;
    let best_ns = (0..runs.max(1))
        .map(|_| timer.time_ns(|| chain(ITERATIONS)))
        .fold(f64::INFINITY, f64::min);
    best_ns / (ITERATIONS * LINKS_PER_ITERATION) as f64
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn imul_chain(iterations: u64) {
    let mut x = 1u64;
    let factor = std::hint::black_box(3u64);
    // SAFETY: pure register arithmetic on `x`, `factor` and the counter; no memory is touched.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 64",
            "imul {x}, {f}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            f = in(reg) factor,
            n = inout(reg) iterations => _,
            options(nostack, nomem),
        );
    }
    std::hint::black_box(x);
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn add_chain(iterations: u64) {
    let mut x = 0u64;
    let step = std::hint::black_box(1u64);
    // SAFETY: pure register arithmetic on `x`, `step` and the counter; no memory is touched.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 64",
            "add {x}, {s}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            s = in(reg) step,
            n = inout(reg) iterations => _,
            options(nostack, nomem),
        );
    }
    std::hint::black_box(x);
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
fn imul_chain(iterations: u64) {
    let mut x = 1u64;
    let factor = std::hint::black_box(3u64);
    for _ in 0..iterations * 64 {
        x = std::hint::black_box(x.wrapping_mul(factor));
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
fn add_chain(iterations: u64) {
    let mut x = 0u64;
    let step = std::hint::black_box(1u64);
    for _ in 0..iterations * 64 {
        x = std::hint::black_box(x.wrapping_add(step));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nanoseconds per link of an `imul` and an `add` chain on a core running at `hz`.
    fn chains_at(hz: f64) -> (f64, f64) {
        (
            IMUL_LATENCY_CYCLES / hz * 1e9,
            ADD_LATENCY_CYCLES / hz * 1e9,
        )
    }

    #[test]
    fn a_normal_core_is_measured() {
        // A 2.1 GHz part boosting to 3.1 GHz.
        let (imul, add) = chains_at(3.1e9);
        let clock = judge_clock(imul, add * 1.03, Some(2.1e9));
        assert_eq!(clock.source, ClockSource::Measured);
        assert!((clock.hz / 3.1e9 - 1.0).abs() < 1e-9, "{clock:?}");
        assert!(
            clock.describe().contains("3.100 GHz measured"),
            "{}",
            clock.describe()
        );
    }

    #[test]
    fn a_folded_chain_falls_back_to_the_nominal_clock() {
        // Golden Cove folding four additions a cycle: the add chain says 8.4 GHz.
        let (imul, add) = chains_at(2.1e9);
        let clock = judge_clock(imul, add / 4.0, Some(2.1e9));
        assert_eq!(clock.source, ClockSource::Nominal);
        assert_eq!(clock.hz, 2.1e9);
        assert!(
            clock.describe().contains("disagree by 300 %"),
            "{}",
            clock.describe()
        );
        // Without a nominal clock, the slower chain, never the impossible one.
        let clock = judge_clock(imul, add / 4.0, None);
        assert_eq!(clock.source, ClockSource::LowerChain);
        assert!((clock.hz / 2.1e9 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn both_chains_folded_alike_are_out_of_range() {
        // Both chains 5.4x too fast (the old 11.3 GHz on a 2.1 GHz part) agree with each other.
        let (imul, add) = chains_at(11.3e9);
        let clock = judge_clock(imul, add, Some(2.1e9));
        assert_eq!(clock.source, ClockSource::Nominal);
        assert_eq!(clock.hz, 2.1e9);
        assert!(
            clock.describe().contains("outside 0.5-2x"),
            "{}",
            clock.describe()
        );
    }

    #[test]
    fn a_throttled_core_is_measured_until_it_is_implausibly_slow() {
        let (imul, add) = chains_at(1.2e9);
        let clock = judge_clock(imul, add, Some(2.1e9));
        assert_eq!(
            (clock.source, clock.hz),
            (ClockSource::Measured, clock.imul_hz)
        );
        assert!((clock.hz / 1.2e9 - 1.0).abs() < 1e-9);
        let (imul, add) = chains_at(0.9e9);
        let clock = judge_clock(imul, add, Some(2.1e9));
        assert_eq!((clock.source, clock.hz), (ClockSource::Nominal, 2.1e9));
    }

    #[test]
    fn chains_just_inside_the_agreement_are_measured_and_just_outside_are_not() {
        let (imul, add) = chains_at(3.0e9);
        assert_eq!(
            judge_clock(imul, add / 1.09, Some(3.0e9)).source,
            ClockSource::Measured
        );
        assert_eq!(
            judge_clock(imul, add / 1.11, Some(3.0e9)).source,
            ClockSource::Nominal
        );
        // A timing of zero (a broken timer) is not a clock.
        assert_eq!(
            judge_clock(0.0, add, Some(3.0e9)).source,
            ClockSource::Nominal
        );
    }

    #[test]
    fn the_chains_run_and_give_a_finite_clock() {
        let timer = Timer::calibrate(std::time::Duration::from_millis(5));
        let clock = measure_core_clock(&timer, 2, None);
        assert!(
            clock.imul_hz.is_finite() && clock.imul_hz > 0.0,
            "{clock:?}"
        );
        assert!(clock.add_hz.is_finite() && clock.add_hz > 0.0, "{clock:?}");
    }
}
