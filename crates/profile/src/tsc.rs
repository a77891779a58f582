//! The time-stamp counter, the clock of the paper's timing rule (spec 004 §3.2).

use std::time::{Duration, Instant};

/// Reads the TSC.
pub fn read() -> u64 {
    // SAFETY: rdtsc exists on every x86-64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// TSC ticks per second, measured against the monotonic clock over 20 ms.
pub fn tsc_hz() -> f64 {
    let (t0, c0) = (Instant::now(), read());
    while t0.elapsed() < Duration::from_millis(20) {
        std::hint::spin_loop();
    }
    let (elapsed, c1) = (t0.elapsed(), read());
    (c1 - c0) as f64 / elapsed.as_secs_f64()
}

/// The CPUID vendor string (`GenuineIntel`, `AuthenticAMD`, …).
pub fn cpu_vendor() -> String {
    let leaf = core::arch::x86_64::__cpuid(0);
    let bytes: Vec<u8> = [leaf.ebx, leaf.edx, leaf.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Iterations of the clock loop per measurement: 8 dependent additions each, about 0.3 ms.
const CLOCK_LOOP_ITERATIONS: u64 = 1 << 17;

/// The core clock in cycles per nanosecond: a chain of dependent register additions (one cycle
/// each on every x86-64 core) timed against the monotonic clock, the fastest of five runs so
/// that a preempted run does not count.
pub fn core_cycles_per_ns() -> f64 {
    (0..5)
        .map(|_| {
            let started = Instant::now();
            dependent_additions(CLOCK_LOOP_ITERATIONS);
            let ns = started.elapsed().as_nanos().max(1) as f64;
            (CLOCK_LOOP_ITERATIONS * 8) as f64 / ns
        })
        .fold(0.0, f64::max)
}

/// `iterations` times eight additions, each waiting for the one before.
fn dependent_additions(iterations: u64) {
    let mut value: u64 = 0;
    let mut left = iterations;
    // SAFETY: the assembly only reads and writes the two registers it is given and the flags;
    // it touches no memory and no stack.
    unsafe {
        core::arch::asm!(
            "2:",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "add {v}, 1",
            "dec {n}",
            "jnz 2b",
            v = inout(reg) value,
            n = inout(reg) left,
            options(nomem, nostack),
        );
    }
    std::hint::black_box((value, left));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_core_clock_is_a_plausible_frequency() {
        let ghz = super::core_cycles_per_ns();
        // Any x86-64 core this runs on, even throttled or emulated slowly, is between these.
        assert!((0.2..8.0).contains(&ghz), "{ghz} GHz");
    }
}
