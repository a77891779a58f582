//! Micro-benchmarks that measure what a machine can really do: cache sizes (instruction and
//! data) and latencies, per-level bandwidths and the peak floating-point rate.
//!
//! The instruction-cache probe follows spec 003 (Nagamatsu & Hoshino): one executable mapping
//! whose code is rewritten in place for every size point (no recompilation), timed with a
//! calibrated TSC. Three code kinds are generated: the paper's NOP body, a jump chain that
//! fetches one new cache line per instruction (in order or in a random order), and lines of
//! indirect jumps through a table refilled in a new order before every call
//! ([`indirect_jump_lines`]). The last defeats every branch predictor, so the front end cannot
//! prefetch, while each set of the L1i sees its lines in the same cyclic order; the L1i is the
//! capacity of a cache model fitted to that curve. Where the fit is refused, the NOP body's
//! first big step (counted in bytes) is the L1i, else the sharper of the direct jump chains'
//! (counted in lines: Zen 4's op cache holds a chain over 48 KiB): see [`l1i_knee`]. This
//! departs from the paper, whose SPARC front end fetched in order: a current x86 front end
//! runs ahead along predicted branches and hides the L1i's misses from predictable code.
//! The `recompile` baseline rebuilds a C program per point with the system `cc`, so the
//! speed-up of in-place rewriting is measured, not quoted. Data caches are found by pointer
//! chasing over a random cyclic permutation; knees are detected automatically, each sized at
//! the steepest rise of its miss fraction ([`steepest_rise`]), or where half the accesses miss
//! when misses creep in well before it ([`capacity_estimate`]). A step that another task
//! sharing the cache moved earlier is measured again later: the L1i candidates many times
//! over the pointer chase, the private data levels once after it ([`run_probe`]).
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
mod clock;
mod code;
mod error;
#[cfg(test)]
mod fixtures;
mod flops;
mod icache;
mod knee;
mod levels;
mod mem;
mod placement;
mod plateau;
mod plausible;
mod recompile;
mod run;
mod simd;
mod streaming;
mod threads;
mod timer;
mod tlb;

pub use bandwidth::{BandwidthSample, Kernel, measure_bandwidth};
pub use chase::{CHASE_STRIDE_BYTES, ChaseBuffer, TLB_PAGE_BYTES, point_from_samples};
pub use clock::{
    ADD_LATENCY_CYCLES, CLOCK_AGREEMENT, CLOCK_RANGE, ClockSource, CoreClock, IMUL_LATENCY_CYCLES,
    judge_clock, measure_core_clock,
};
pub use flops::{ACCUMULATORS, FlopsSample, Precision, flops_per_call, measure_flops};
pub use icache::{CALLS_PER_SAMPLE, CodeProbe, CodeSample, generate};
pub use levels::{
    LevelKnee, Levels, MIN_L1I_RATIO, assign_levels, cache_knees, l1i_knee, level_caches,
    match_knees,
};
pub use recompile::{
    BaselineReport, SweepPhases, c_source, dynamic_sweep, paper_sizes, recompile_sweep,
    run_baseline, speedup_size_change, speedup_total,
};
pub use run::{Curve, ProbeOptions, ProbeReport, ProgressFn, curve_knees, run_probe};
pub use simd::Simd;
pub use streaming::{
    NoStreamingSize, STREAMING_CURVE, STREAMING_UNIT, ns_per_line, streaming_knee, streaming_note,
    streaming_spans, streaming_sweep_done,
};
pub use threads::on_each_cpu;
pub use tlb::{PAGE_WALK_CURVE, page_walk_note, page_walk_spans, tlb_knees};

pub use code::{
    CodeKind, CodeRegion, EPILOGUE, Generated, LINE_BYTES, NOP4, PROLOGUE, RewriteTimes,
    TargetTable, indirect_jump_lines, jump_chain, nop_function,
};
pub use error::ProbeError;
pub use knee::{
    CapacityEstimate, Knee, KneeOptions, NEARLY_STEEPEST, Point, Segment, adaptive_sweep,
    adaptive_sweep_until, capacity_estimate, capacity_gap, find_code_knees, find_knees,
    geometric_sizes, log_noise, miss_fraction, monotone_fit, out_of_order, plateaus,
    plausible_size, refinement_sizes, segment, span_indices, steepest_rise,
};
pub use mem::{HUGE_PAGE_BYTES, Mapping, anon_huge_kib};
pub use placement::{
    CapacityFit, FitShape, HitTable, PLACEMENT_PAGE_BYTES, Placement, RANDOM_REPLACEMENT_SHARE,
    Replacement, fit_capacity, modelled_miss_fraction, replacement_from_walks,
};
pub use plateau::{
    MEMORY_OVER_L1, PLATEAU_MIN_POINTS, PLATEAU_OCTAVES, memory_plateau_reached, stopping_point,
};
pub use plausible::{implausible_bandwidths, implausible_note};
pub use timer::{
    Timer, TimerSource, add_latency_ns, allowed_cpus, context_switches, monotonic_raw_ns,
    pin_current_thread, undisturbed_samples,
};
