//! The analytic cache-miss model of spec 000: for each array reference of an affine loop nest,
//! the number of compulsory and conflict misses in an LRU, write-allocate, set-associative cache,
//! computed from integer sets rather than by running or simulating the loops.
//!
//! The sets (hit conditions, hit sources by parametric lexmax, conflict-miss factors, the split
//! by distinct evicting blocks and their common expressions) are built once with the loop bounds'
//! parameters symbolic ([`Model::new`]); counting them at parameter values ([`Model::evaluate`])
//! costs the same for a trip count of 10 or of 10⁷. Range queries are prefix differences of two
//! evaluations (spec §4.4). [`Model::evaluate_with_sources`] also says where each reference's
//! conflict misses come from: for every reference (itself included), in how many of them it
//! brought another line into the set since the hit source (spec §5's "causes of the misses";
//! exact, and overlapping across references). [`each_reference`] builds a level's references side
//! by side on threads, one isl context each; [`each_reference_at_levels`] builds several levels so,
//! and levels with the same line size share each reference's hit sources.
//!
//! Formulas: [`Model::formulas`] gives every count as a quasi-polynomial in one parameter and
//! [`Model::nested_formulas`] as piecewise quasi-polynomials on chambers of several
//! ([`NestedFormulas`]), both fitted from exact counts and checked at every point of a stated
//! range; [`MultiQuasiPolynomial::render`] writes them with floors (`⌈Z/4⌉ - ⌈X/4⌉`).
//!
//! This room takes its own small program description ([`Program`]): the kernel language's IR is
//! converted into it by [`program_from_kernel`].
//!
//! Orchestration: [`misses`] runs `loopscope misses` in all its forms (counts with `--sources`
//! and `--check`, `--scan`, `--symbolic`), each cache level in a child process
//! ([`model_levels`], the child's side [`run_level_job`]) so that a level past its time limit
//! can be stopped; [`Misses`] is its result, which serialises as the command's JSON. It never
//! prints: warnings and progress go to a [`loopscope_kernel::Listener`]. It simulates only to
//! check the model, through `loopscope-cache`'s simulator.
//!
//! # Example: the worked example of the spec (§4)
//!
//! ```
//! use loopscope_analytic::{Affine, Array, Cache, Loop, Model, Node, Program, Reference, Statement};
//! use loopscope_polyhedral::Ctx;
//!
//! let r = |array: &str, var: &str, is_write| Reference {
//!     array: array.into(), subscripts: vec![Affine::var(var)], is_write,
//! };
//! let lp = |var: &str, n: &str, refs| Node::Loop(Loop {
//!     var: var.into(), lower: Affine::constant(0), upper_inclusive: Affine::var(n).plus(-1), step: 1,
//!     body: vec![Node::Statement(Statement { name: format!("S{var}"), refs })],
//! });
//! let array = |name: &str, base| Array { name: name.into(), base_bytes: base, element_bytes: 8, extents: vec![100] };
//! let program = Program {
//!     params: vec!["X".into(), "Y".into(), "Z".into()],
//!     arrays: vec![array("A", 0), array("B", 800), array("C", 1600)],
//!     body: vec![
//!         lp("i", "X", vec![r("A", "i", true)]),
//!         lp("j", "Y", vec![r("B", "j", true)]),
//!         lp("k", "Z", vec![r("A", "k", false), r("C", "k", true)]),
//!     ],
//! };
//! let ctx = Ctx::new();
//! let cache = Cache { ways: 2, line_bytes: 32, sets: 4 };
//! let model = Model::for_positions(&ctx, &program, cache, &[2]).unwrap();
//! let a_k = &model.evaluate(&[("X", 10), ("Y", 10), ("Z", 10)]).unwrap()[0];
//! assert_eq!((a_k.accesses, a_k.compulsory, a_k.conflict), (10, 0, 1));
//! ```
#![deny(missing_docs)]

mod error;
mod evaluate;
mod floors;
mod from_kernel;
mod nested;
mod orchestration;
mod parallel;
mod pipeline;
mod pressure;
mod program;
mod quasi_n;
mod symbolic;
mod text;

pub use error::AnalyticError;
pub use evaluate::{ConflictSource, Detail, Model, PieceCounts, ReferenceMisses};
pub use from_kernel::{program_from_kernel, program_with_symbols};
pub use nested::{
    Chamber, Helper, NestedFormulas, PointCounts, ReferenceChambers, fit_nested, points_to_check,
};
pub use orchestration::{
    AtCounts, AtPoint, AtValue, ChambersLevel, ChambersReference, ChambersReport, Check,
    CheckLevel, CheckReference, ConflictSources, Evictor, Failure, FormulasLevel,
    FormulasReference, FormulasReport, Geometry, LevelChambers, LevelCommand, LevelInfo, LevelJob,
    LevelLine, LevelOutcome, LevelsRequest, LineSink, Misses, MissesArray, MissesLevel,
    MissesReference, MissesReport, MissesRequest, MissesWait, RangeReport,
    SIMULATED_ACCESSES_PER_S, SPIKE_RULE, ScanRange, ScanReport, SimulationEstimate, SpikeReport,
    SymbolicParameter, ValueLevel, ValueReport, Written, accesses_bound, children, cores, misses,
    misses_wait, model_levels, parse_range, run_level_job, stop_level_processes,
    symbolic_parameters,
};
pub use parallel::{Budget, each_reference, each_reference_at_levels};
pub use program::{Affine, Array, Cache, Loop, Node, Program, Reference, Statement};
pub use quasi_n::MultiQuasiPolynomial;
pub use symbolic::{
    FitOptions, Formula, Fraction, Piece, QuasiPolynomial, ReferenceFormulas, fit_formulas,
};
