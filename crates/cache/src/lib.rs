//! The exact cache-hierarchy simulator: the oracle every cache model of loopscope is checked
//! against.
//!
//! This room simulates any number of set-associative levels ([`LevelConfig`]): exact LRU, FIFO,
//! tree-PLRU or seeded random replacement; write-back with write-allocate by default, or
//! write-through and no-write-allocate; non-inclusive, inclusive (with back-invalidation) or
//! exclusive (victim) levels. [`Hierarchy`] counts per level and per reference: accesses, hits,
//! misses, evictions, write-backs and bytes moved, and optionally ([`MissSplit`]) the compulsory
//! misses alone (a line the level never brought in: its first touch, and under no-write-allocate
//! every store before its first load; cheap, looked up on misses only) or the whole 3C split
//! (compulsory; capacity: a fully associative LRU cache of the same size and allocation policy
//! would miss too; conflict: the rest; a stack-distance tracker on every access). [`Hierarchy::access_many`] takes a stream in batches
//! and is several times faster than [`Hierarchy::access`] per access when the first level is
//! LRU and write-back, with the same counts. [`StackDistance`] and [`MissCurve`] give LRU stack
//! distances in O(log n) per access, hence the misses of a fully associative LRU cache of every
//! size in one pass. Addresses come from anywhere: a kernel's access stream or a trace
//! ([`parse_trace_line`]). [`simulate`] runs a kernel file or a trace through a hierarchy as
//! `loopscope simulate` does; [`simulate_each_level_alone`] runs a kernel through each level on
//! its own, the analytic model's assumption, counting compulsory misses, to check that model
//! against.
//!
//! It must not parse kernels (it loads them through `loopscope-kernel`) or model misses
//! analytically, print, or exit: bad geometry or trace input is a [`CacheError`].
//!
//! # Example
//!
//! ```
//! use loopscope_cache::{parse_cache_spec, Hierarchy};
//!
//! // Spec 000's cache: 256 B, 2 ways, 32-byte lines (4 sets).
//! let levels = parse_cache_spec("L1=256:2:32").unwrap();
//! let mut sim = Hierarchy::new(&levels, 1, true, 0);
//! for addr in (0..512).step_by(8) {
//!     sim.access(addr, 8, false, 0);
//! }
//! let l1 = sim.stats()[0];
//! assert_eq!((l1.accesses, l1.misses, l1.compulsory), (64, 16, 16));
//! ```
#![deny(missing_docs)]

mod config;
mod error;
mod hierarchy;
mod level;
mod seen;
mod simulation;
mod stack;
mod trace;

pub use config::{
    Inclusion, LevelConfig, Replacement, check_hierarchy, levels_from_machine, parse_cache_spec,
};
pub use error::CacheError;
pub use hierarchy::{Hierarchy, LevelStats, MemoryStats, MissSplit, RefStats};
pub use level::{DENSE_LEVEL_CAP_BYTES, SPARSE_MEMORY_CAP_BYTES};
pub use simulation::{
    AloneLevel, CurvePoint, MAX_SIMULATED_ACCESSES, MemoryTraffic, SimulatedLevel,
    SimulatedReference, Simulation, SimulationInput, SimulationOptions, TRACE_LINE_CAP_BYTES,
    check_simulation_work, check_sparse_memory, simulate, simulate_each_level_alone,
};
pub use stack::{MissCurve, StackDistance};
pub use trace::{TraceAccess, parse_trace_line};
