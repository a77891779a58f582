//! The executed instruction mix (spec 001): how many floating-point, load/store, branch,
//! integer, SIMD and FMA instructions a program executed, per block, function and loop, from
//! samples of its run and the static type counts of its blocks.
//!
//! # Method (spec 001 §3)
//!
//! 1. **Block map** (§3.3, §6.3): every block of every analysed object (true basic blocks,
//!    `loopscope-binary`'s leaders mode) with its static count of each type, `n(b,t)`, and of
//!    all instructions, `n(b)` ([`method`]).
//! 2. **First count** (§3.8): each sample's address is mapped to its object's static address
//!    and looked up in the map; the sample's instruction count is added to that block's N1.
//!    Samples no block covers (the kernel, the vDSO, JIT code, objects whose file is missing)
//!    go to the unattributed bucket. An object with samples whose file was rebuilt since the
//!    recording is refused, as `report` refuses it, unless it is the file given as `binary`.
//! 3. **Second count** (§3.9): N2(b,t) = N1(b)·n(b,t)/n(b), multiplied before it is divided,
//!    in integers; the exclusive types of a block add up to its N1 exactly.
//! 4. **Third count** (§3.10): N3(t) = Σ_b N2(b,t); over the exclusive types it adds up to
//!    Σ_b N1(b), the instructions attributed.
//!
//! # What a sample's instruction count is
//!
//! - `instructions` sampling (embodiment 3): the sample's period.
//! - A group with an instruction counter (embodiments 1 and 2: `{cycles,instructions}`,
//!   `{cache-misses,instructions}`): the instructions the thread retired since its previous
//!   sample.
//! - Time only (`cpu-clock`, or `cycles` alone), as on machines without hardware counters:
//!   there is no instruction count, so N1 is **estimated from time**. A sample of period `p`
//!   (nanoseconds, converted to cycles at the TSC rate measured during the recording; or
//!   cycles) in block `b` stands for `p / c(b)` executions of `b`, that is `p·n(b)/c(b)`
//!   instructions, where `c(b)` is the block's cost in cycles per execution from the static
//!   model of [`cost`] (issue width, ports, dividers, and for a block that loops on itself the
//!   longest loop-carried dependency chain). This is an extension beyond the patent, which
//!   always has an instruction counter.
//! - An exact profile (`record --exact`): every block's executions `E(b)` were counted, and
//!   N1(b) = E(b)·n(b) with no estimate at all.
//!
//! # Error bars
//!
//! Every count carries one standard error. A block's N1 has the relative variance
//! `Σ w² / (Σ w)²` over the weights `w` of its samples (Poisson counting of samples), plus,
//! for the time-based estimate, `MODEL_RELATIVE_ERROR²` for its modelled cost. Blocks are taken
//! as independent: the error of a sum of N2s is the root of the sum of their variances, and a
//! type's share of all instructions uses the ratio's first-order propagation.

mod cost;
mod estimate;
pub mod method;
mod perfcheck;
mod perfdata;

pub use cost::{BlockCost, Bound, Core, block_cost};
pub use estimate::{
    EXACT_COVERAGE_NOTE, MODEL_RELATIVE_ERROR, MixBy, MixEstimate, MixOptions, MixReport, MixRow,
    TypeCount, build_mix,
};
pub use method::{BlockMap, InstrType, MapBlock, TypeCounts};
pub use perfcheck::PERF_DATA_CAP_BYTES;
pub use perfdata::mix_of_perf_data;
