//! Roofline models: what rate a loop kernel can reach on a machine, and which level limits it.
//!
//! This room implements the classic roofline (Williams et al.; spec 002 eqs. 2–3) and Minami et
//! al.'s extended, cache-aware model (eqs. 4–11), generalised from memory + L2 to any number of
//! levels: the execution time is the largest of each level's transfer time D_L / B_L (with
//! effective, measured bandwidths) and the compute time Nc / Peff. Around it: the region
//! boundary between adjacent levels (eqs. 12–13), the L1 applicability conditions (§2.4, §6.2
//! step 3) as warnings, volume-dependent bandwidths (eq. 14, [`BandwidthFn::Linear`]), the
//! paper's rounded coefficients ([`Options::paper_rounding`]) and the paper's machines
//! ([`paper_profile`]).
//!
//! Two terms go beyond the paper, for what x86 cores do that its SPARC did not need. L1 can be
//! timed by its ports ([`Ceilings::set_store_bandwidth`]): loads and stores go through separate
//! ones, so the level's time is the longer of the two. And an in-order sum through the innermost
//! loop (`y[i] += a[i][j] * x[j]` without `-ffast-math`) cannot run faster than one addition
//! latency per link ([`Traffic::chained_adds`], [`Ceilings::set_add_latency`]): the chain term,
//! which the max of eq. (4) takes with the others. Both are documented where they are built.
//!
//! The kernel enters as a [`Traffic`]: bytes through each level and FLOPs over some iterations.
//! It comes from the paper's per-iteration counts ([`parse_counts`]) or from a kernel file
//! run through the exact cache simulator ([`simulated_traffic`]) or the analytic cache model of
//! spec 000 ([`modelled_traffic`]). [`run_roofline`] is `loopscope roofline` as one call: the
//! ceilings, a kernel file's traffic (the model's levels run as level processes, the ones it
//! cannot do taken from the simulator), the analysis and the measured run.
//!
//! This room must not measure the machine, print, or read files other than the kernel file it
//! is given: the caller hands it the machine description (with a `measured` section from the
//! probe, [`best_bandwidths`]) and a way to time this machine's add latency, and renders the
//! result. The one thing it runs besides the model's level processes is a kernel's generated
//! timing harness ([`harness_source`], [`run_harness`]), for a measured rate beside the
//! prediction.
//!
//! # Example
//!
//! Loop 10 of the paper's Table 3 (3 memory and 8 L2 references, 8 FLOPs per iteration) on
//! the K computer is L2-bound at 0.1037 of peak, where the classic roofline says 0.1198:
//!
//! ```
//! use loopscope_roofline::{analyse, paper_profile, parse_counts, Level, Limit, Options};
//!
//! let traffic = parse_counts("mem=3,l2=8,flops=8").unwrap().traffic();
//! let k = paper_profile("k-computer").unwrap();
//! let analysis = analyse(&traffic, &k, Options::default()).unwrap();
//! assert_eq!(analysis.prediction.limit, Limit::Level(Level::Cache(2)));
//! assert_eq!(format!("{:.4}", analysis.prediction.fraction_of_peak), "0.1037");
//! assert_eq!(format!("{:.4}", analysis.classic.fraction_of_peak), "0.1198");
//! ```
#![deny(missing_docs)]

mod ceilings;
mod chains;
mod command;
mod error;
mod harness;
mod kernel_file;
mod level;
mod mixes;
mod model;
mod modelled;
mod pairs;
mod procedure;
mod profiles;
mod registers;
mod sizes;
mod traffic;

pub use ceilings::{
    AddLatency, BandwidthFn, Ceilings, LevelCeiling, Precision, StoreBandwidth, best_bandwidths,
    effective_bandwidth_gb_per_s, parse_bandwidths, parse_volumes, peak_clock, round2,
    theoretical_peak_gflops,
};
pub use chains::{BASELINE_VECTOR_BYTES, in_order_sums};
pub use command::{
    HarnessReport, KernelInput, KernelInputRequest, MachineInput, ModelBudget, Roofline,
    RooflineInput, RooflineRequest, run_roofline,
};
pub use error::RooflineError;
pub use harness::{HarnessArray, HarnessKernel, HarnessRun, harness_source, run_harness};
pub use kernel_file::{KernelHarness, simulated_accesses, simulated_traffic};
pub use level::Level;
pub use mixes::MixBandwidth;
pub use model::{Classic, LevelTime, Limit, Prediction, classic, predict};
pub use modelled::{ModelledLevel, check_model_caches, modelled_traffic};
pub use procedure::{
    Analysis, Boundary, Comparison, L1Check, L1Thresholds, L1Verdict, Options, analyse, boundaries,
    l1_verdict,
};
pub use profiles::{PAPER_PROFILES, paper_profile};
pub use sizes::{CacheSizes, SizedLevel, describe_sizes, sized_levels};
pub use traffic::{Counts, L1Refs, LevelTraffic, Traffic, parse_counts};
