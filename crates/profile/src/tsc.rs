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
