//! Micro-benchmarks that measure what a machine can really do: cache sizes (instruction and
//! data) and latencies, per-level bandwidths and the peak floating-point rate.
//!
//! The instruction-cache probe follows spec 003 (Nagamatsu & Hoshino): one executable mapping
//! whose code is rewritten in place for every size point (no recompilation), timed with a
//! calibrated TSC. Two code kinds are generated: the paper's NOP body and a jump chain that
//! fetches one new cache line per instruction (a NOP sled hides the L1i step on modern cores).
//! The `recompile` baseline rebuilds a C program per point with the system `cc`, so the
//! speed-up of in-place rewriting is measured, not quoted. Data caches are found by pointer
//! chasing over a random cyclic permutation; knees are detected automatically.
//!
//! This room measures and returns values. It never prints, exits or reads the environment for
//! policy; interruption is a flag the caller sets. It is one of the two crates allowed `unsafe`
//! (generated code, `rdtscp`, `mmap`), and every block says why it is sound.
//!
//! # Example
//!
//! ```
//! use loopscope_probe::{find_knees, geometric_sizes, KneeOptions, Point};
//!
//! // A curve that steps from 1.5 ns to 5 ns above 32 KiB.
//! let points: Vec<Point> = geometric_sizes(1024, 1 << 20, 8, 64)
//!     .into_iter()
//!     .map(|s| {
//!         let v = if s <= 32 * 1024 { 1.5 } else { 5.0 };
//!         Point { size_bytes: s, value: v, median: v }
//!     })
//!     .collect();
//! let knees = find_knees(&points, &KneeOptions::default());
//! assert_eq!(knees.len(), 1);
//! assert_eq!(knees[0].size_bytes, 32 * 1024);
//! ```
#![deny(missing_docs)]

mod bandwidth;
mod chase;
mod code;
mod error;
mod flops;
mod icache;
mod knee;
mod levels;
mod mem;
mod recompile;
mod run;
mod simd;
mod timer;

pub use bandwidth::{measure_bandwidth, BandwidthSample, Kernel};
pub use chase::{point_from_samples, ChaseBuffer, CHASE_STRIDE_BYTES};
pub use flops::{flops_per_call, measure_flops, FlopsSample, Precision, ACCUMULATORS};
pub use icache::{generate, CodeProbe, CodeSample, CALLS_PER_SAMPLE};
pub use levels::{assign_levels, cache_knees, level_caches, match_knees, LevelKnee, Levels};
pub use recompile::{
    c_source, dynamic_sweep, paper_sizes, recompile_sweep, run_baseline, BaselineReport, speedup_size_change, speedup_total,
    SweepPhases,
};
pub use run::{run_probe, Curve, ProbeOptions, ProbeReport, ProgressFn};
pub use simd::Simd;

pub use code::{
    jump_chain, nop_function, CodeKind, CodeRegion, Generated, RewriteTimes, EPILOGUE,
    LINE_BYTES, NOP4, PROLOGUE,
};
pub use error::ProbeError;
pub use knee::{
    adaptive_sweep, find_knees, geometric_sizes, log_noise, plateaus, plausible_size, refinement_sizes,
    segment,
    Knee, KneeOptions, Point, Segment,
};
pub use mem::{anon_huge_kib, Mapping, HUGE_PAGE_BYTES};
pub use timer::{
    allowed_cpus, core_hz, monotonic_raw_ns, pin_current_thread, Timer, TimerSource,
};
