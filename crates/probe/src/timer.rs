//! The clock every measurement is read with: the TSC (fenced `rdtscp`), calibrated against
//! `CLOCK_MONOTONIC_RAW`, or `clock_gettime` itself where the TSC is not trustworthy.

use std::time::Duration;

use serde::Serialize;

use crate::ProbeError;

/// Which counter a [`Timer`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerSource {
    /// The time-stamp counter, read with `rdtscp` + `lfence`; ticks are TSC cycles.
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC_RAW)`; ticks are nanoseconds.
    Monotonic,
}

/// A calibrated clock with its own cost measured.
#[derive(Debug, Clone, Serialize)]
pub struct Timer {
    /// The counter read.
    pub source: TimerSource,
    /// Ticks per second (the TSC frequency, or 1e9 for the monotonic clock).
    pub ticks_per_s: f64,
    /// Cost of one empty timed interval (start + stop), in ticks: the minimum of many.
    pub overhead_ticks: u64,
    /// Smallest non-zero step between two consecutive reads, in nanoseconds.
    pub resolution_ns: f64,
    /// Why the TSC was not used, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

impl Timer {
    /// Chooses the TSC when the CPU says it is invariant, calibrating it over `calibration`;
    /// otherwise the monotonic clock.
    pub fn calibrate(calibration: Duration) -> Timer {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let invariant = flags.contains(" constant_tsc") && flags.contains(" nonstop_tsc");
        if !cfg!(target_arch = "x86_64") {
            return Timer::monotonic(Some("not x86-64".to_owned()));
        }
        if !invariant {
            return Timer::monotonic(Some(
                "/proc/cpuinfo lacks constant_tsc or nonstop_tsc".to_owned(),
            ));
        }
        Timer::tsc(calibration)
    }

    /// The TSC, calibrated against `CLOCK_MONOTONIC_RAW` over `calibration`.
    pub fn tsc(calibration: Duration) -> Timer {
        let (t0, c0) = (monotonic_raw_ns(), read_tsc());
        let deadline = t0 + calibration.as_nanos() as u64;
        while monotonic_raw_ns() < deadline {
            std::hint::spin_loop();
        }
        let (t1, c1) = (monotonic_raw_ns(), read_tsc());
        let ticks_per_s = (c1 - c0) as f64 / ((t1 - t0) as f64 * 1e-9);
        let mut timer = Timer {
            source: TimerSource::Tsc,
            ticks_per_s,
            overhead_ticks: 0,
            resolution_ns: 0.0,
            fallback_reason: None,
        };
        timer.measure_self();
        timer
    }

    /// `clock_gettime(CLOCK_MONOTONIC_RAW)`, the analogue of the paper's `gethrtime()`.
    pub fn monotonic(fallback_reason: Option<String>) -> Timer {
        let mut timer = Timer {
            source: TimerSource::Monotonic,
            ticks_per_s: 1e9,
            overhead_ticks: 0,
            resolution_ns: 0.0,
            fallback_reason,
        };
        timer.measure_self();
        timer
    }

    fn measure_self(&mut self) {
        let mut overhead = u64::MAX;
        let mut step = u64::MAX;
        for _ in 0..2000 {
            let a = self.start();
            let b = self.stop();
            overhead = overhead.min(b.saturating_sub(a));
            let c = self.start();
            let mut d = self.start();
            while d == c {
                d = self.start();
            }
            step = step.min(d - c);
        }
        self.overhead_ticks = overhead;
        self.resolution_ns = self.ticks_to_ns(step);
    }

    /// Reads the counter at the start of an interval (fenced so earlier work is done).
    #[inline(always)]
    pub fn start(&self) -> u64 {
        match self.source {
            TimerSource::Tsc => read_tsc(),
            TimerSource::Monotonic => monotonic_raw_ns(),
        }
    }

    /// Reads the counter at the end of an interval (waits for the timed work to finish).
    #[inline(always)]
    pub fn stop(&self) -> u64 {
        match self.source {
            TimerSource::Tsc => read_tscp(),
            TimerSource::Monotonic => monotonic_raw_ns(),
        }
    }

    /// Ticks converted to nanoseconds.
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.ticks_per_s
    }

    /// The time between `start` and `stop` in nanoseconds, less the timer's own cost.
    pub fn elapsed_ns(&self, start: u64, stop: u64) -> f64 {
        self.ticks_to_ns(
            stop.saturating_sub(start)
                .saturating_sub(self.overhead_ticks),
        )
    }

    /// Times `work` once, in nanoseconds net of the timer's cost.
    #[inline(always)]
    pub fn time_ns(&self, work: impl FnOnce()) -> f64 {
        let a = self.start();
        work();
        let b = self.stop();
        self.elapsed_ns(a, b)
    }

    /// One line for notes and tables.
    pub fn describe(&self) -> String {
        let overhead_ns = self.ticks_to_ns(self.overhead_ticks);
        match self.source {
            TimerSource::Tsc => format!(
                "TSC (rdtscp) at {:.4} GHz calibrated against CLOCK_MONOTONIC_RAW, \
                 overhead {overhead_ns:.1} ns, resolution {:.2} ns",
                self.ticks_per_s / 1e9,
                self.resolution_ns
            ),
            TimerSource::Monotonic => format!(
                "clock_gettime(CLOCK_MONOTONIC_RAW), overhead {overhead_ns:.1} ns, \
                 resolution {:.1} ns{}",
                self.resolution_ns,
                self.fallback_reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(" (TSC not used: {r})"))
            ),
        }
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC_RAW` (not slewed by NTP).
pub fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_RAW exists on every Linux
    // this builds for, and on failure `ts` stays zero, which only spoils a measurement.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Context switches (voluntary and involuntary) of the calling thread so far, or `None`
/// when the kernel does not say.
pub fn context_switches() -> Option<u64> {
    // SAFETY: `rusage` is plain data for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_THREAD only reads the caller's counts.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (rc == 0).then(|| (usage.ru_nvcsw + usage.ru_nivcsw) as u64)
}

/// Up to `repeats` samples from `sample`, keeping only those taken with the caches as the
/// previous sample left them: no context switch during the sample nor during the one before
/// (another task on this CPU evicts what the sample relies on, and its run time lands inside
/// the timed interval). At most `2 * repeats + 4` attempts; when too few are clean, the
/// disturbed ones fill up the rest, so the minimum still has something to choose from.
pub fn undisturbed_samples(repeats: u32, sample: &mut dyn FnMut() -> f64) -> Vec<f64> {
    let repeats = repeats.max(1) as usize;
    let (mut clean, mut disturbed) = (Vec::with_capacity(repeats), Vec::new());
    let mut before = context_switches();
    let mut warm = true;
    for _ in 0..2 * repeats + 4 {
        let value = sample();
        let after = context_switches();
        let quiet = before.is_some() && before == after;
        if quiet && warm {
            clean.push(value);
        } else {
            disturbed.push(value);
        }
        (before, warm) = (after, quiet);
        if clean.len() >= repeats {
            break;
        }
    }
    let missing = repeats.saturating_sub(clean.len());
    clean.extend(disturbed.into_iter().take(missing));
    clean
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_tsc() -> u64 {
    use std::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: rdtsc and lfence exist on every x86-64 CPU; the fences keep earlier
    // instructions from drifting past the read.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_tscp() -> u64 {
    use std::arch::x86_64::{__rdtscp, _mm_lfence};
    let mut aux = 0u32;
    // SAFETY: rdtscp exists on every x86-64 CPU this probe targets (it predates AVX); it waits
    // for earlier instructions, and the lfence keeps later ones from starting early.
    unsafe {
        let t = __rdtscp(&mut aux);
        _mm_lfence();
        t
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    monotonic_raw_ns()
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tscp() -> u64 {
    monotonic_raw_ns()
}

/// The logical CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's capacity.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pins the calling thread to one logical CPU, so the TSC, the caches and rewritten code stay
/// on one core.
pub fn pin_current_thread(cpu: usize) -> Result<(), ProbeError> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(ProbeError::Invalid(format!(
            "CPU {cpu} is beyond CPU_SETSIZE"
        )));
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` was checked against the set's capacity above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(ProbeError::last_os(format!("sched_setaffinity(cpu {cpu})")));
    }
    Ok(())
}

/// Nanoseconds per double-precision addition that needs the result of the one before: what an
/// in-order floating-point sum waits per element (3 or 4 cycles on current x86 cores).
pub fn add_latency_ns(timer: &Timer, chains: u32) -> f64 {
    crate::clock::ns_per_link(timer, chains, float_add_chain)
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn float_add_chain(iterations: u64) {
    let mut sum = 1.0f64;
    let step = std::hint::black_box(1e-9f64);
    // SAFETY: pure register arithmetic on `sum`, `step` and the counter; no memory is touched.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 64",
            "addsd {sum}, {step}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            sum = inout(xmm_reg) sum,
            step = in(xmm_reg) step,
            n = inout(reg) iterations => _,
            options(nostack, nomem),
        );
    }
    std::hint::black_box(sum);
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
fn float_add_chain(iterations: u64) {
    let mut sum = 1.0f64;
    for _ in 0..iterations * 64 {
        sum = std::hint::black_box(sum + 1e-9);
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn undisturbed_sampling_returns_the_samples_asked_for() {
        assert!(context_switches().is_some());
        let mut next = 0.0;
        let samples = undisturbed_samples(5, &mut || {
            next += 1.0;
            next
        });
        assert_eq!(samples.len(), 5);
        assert!(
            samples.iter().all(|&v| (1.0..=14.0).contains(&v)),
            "{samples:?}"
        );
        assert_eq!(undisturbed_samples(0, &mut || 1.0), vec![1.0]);
    }
    use super::*;

    #[test]
    fn timer_overhead_is_positive_and_below_a_microsecond() {
        for timer in [
            Timer::calibrate(Duration::from_millis(20)),
            Timer::monotonic(None),
        ] {
            let overhead_ns = timer.ticks_to_ns(timer.overhead_ticks);
            assert!(overhead_ns < 1000.0, "{}", timer.describe());
            assert!(timer.resolution_ns > 0.0, "{}", timer.describe());
            assert!(timer.ticks_per_s > 1e6, "{}", timer.describe());
        }
    }

    #[test]
    fn intervals_are_ordered_and_net_of_overhead() {
        let timer = Timer::calibrate(Duration::from_millis(10));
        let a = timer.start();
        let b = timer.stop();
        assert!(b >= a);
        assert_eq!(timer.elapsed_ns(5, 5), 0.0);
    }

    #[test]
    fn pinning_to_an_allowed_cpu_works_and_a_huge_one_is_refused() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        pin_current_thread(cpus[0]).unwrap();
        assert!(pin_current_thread(1 << 20).unwrap_err().is_bad_input());
    }
}
