//! Running a target and measuring it loop by loop: the back-ends that watch a program run, the
//! loop-call-context tree (LCCT, spec 004 §2.2 and §3.7) they all feed, and the profile file.
//!
//! It must not print, exit or read the environment for policy: it returns values and
//! [`ProfileError`]s. Rendering belongs to `loopscope-report`.
#![deny(missing_docs)]

mod check;
mod command;
mod error;
mod exact;
mod file;
mod lcct;
mod mix;
mod naming;
mod patch;
mod procfs;
mod ranks;
mod recording;
mod sample;
mod sites;
mod threads;
mod tsc;
mod view;

pub use check::MAX_TREE_DEPTH;
pub use command::resolve_command;
pub use error::ProfileError;
pub use exact::{
    BlockCounts, ExactOptions, ExactRun, ThreadTree, TrapCost, measure_trap_cost, record_exact,
};
pub use file::{PROFILE_CAP_BYTES, PROFILE_MAGIC, PROFILE_VERSION, Profile, Recording, build_id};
pub use lcct::{Lcct, Node, NodeId, NodeKey, hot_threshold};
pub use mix::{
    BlockCost, BlockMap, Bound, Core, EXACT_COVERAGE_NOTE, InstrType, MODEL_RELATIVE_ERROR,
    MapBlock, MixBy, MixEstimate, MixOptions, MixReport, MixRow, PERF_DATA_CAP_BYTES, TypeCount,
    TypeCounts, block_cost, build_mix, method, mix_of_perf_data,
};
pub use naming::{NameValues, expand_output_name, has_placeholders};
pub use patch::{
    HANDOVER_VARIABLE, PatchOptions, PatchSummary, SkippedSite, record_patch,
    runtime as patch_runtime,
};
pub use ranks::{RankLoop, RankMerge, merge_reports};
pub use recording::{Mapping, ObjectRef, Sample, TargetExit};
pub use sample::{
    DEFAULT_BUFFER_BYTES, DEFAULT_FREQUENCY_HZ, DEFAULT_STACK_BYTES, EventChoice, Exec,
    MAX_STACK_BYTES, MIN_STACK_BYTES, SampleOptions, SampledEvent, SampledRun, record_sampled,
};
pub use sites::{CodeIndex, Place};
pub use threads::{ThreadActivity, ThreadSample, ThreadTime};
pub use view::{HotRule, Overhead, ProfileReport, TreeNode, build_report};
