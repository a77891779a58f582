//! Integer-set machinery for loopscope's analytic cache model: Presburger sets and maps with
//! floor-division (existential) variables, their union, intersection, subtraction, projection and
//! parametric lexicographic maximum, and counting of their points at concrete parameter values
//! in time independent of those values; for a map with one output dimension, the inputs with at
//! least `d` outputs ([`Map::inputs_with_at_least`]) where its parts' sizes have a closed form
//! (intervals, lattices, and residue windows such as a column walk's rows in one cache set, whose
//! size is written per residue class with the modular inverse as a constant instead of asking
//! isl for a parametric minimum).
//!
//! This room only computes with sets. It knows nothing of caches, loops or kernels, never prints,
//! never reads files or the environment.
//!
//! # Why isl, and why our own counting
//!
//! The cache-miss method (spec 000) needs exact integer projection with existentials, set
//! subtraction and parametric integer programming (lexmax). Writing those in Rust (Omega test,
//! Feautrier's PIP) is a project of its own, and getting integer projection exactly right is where
//! such projects fail. isl (MIT) does all of them and is the reference implementation of them;
//! the `isl-rs` crate's bindings wrap it safely, so no `unsafe` lives in loopscope's own code.
//! `crates/isl` (imported here as `isl_rs`) compiles isl from the sources isl-rs bundles with
//! nothing but the C compiler (imath, no GMP, no autotools): a one-time build of a few minutes.
//!
//! isl's integer arithmetic was half of the model's time in a profile, so which backend isl is built with
//! matters. isl-rs's own build configures plain imath (every integer arbitrary-precision);
//! `crates/isl` builds `imath-32` instead (integers that fit in 32 bits held inline, imath only
//! beyond; isl's authors call it the fastest). Measured on one cache level, model time per run,
//! imath → imath-32, with GMP (and Debian's libisl 0.25, built with GMP) in between: matrix
//! multiply N = 30 3.4 s → 0.7 s (GMP 1.2 s, isl 0.25 1.4 s), the 3D stencil 20 × 40 8.4 s →
//! 1.9 s (GMP 3.4 s, isl 0.25 5.5 s), the 2D stencil 180 × 180 0.6 s → 0.17 s, stride conflict
//! 0.27 s → 0.09 s; every count unchanged. So a binding
//! to the system's libisl, which would drop the build, would be 2-3x slower than this.
//! `tests/isl_backend.rs` fails to link if isl was built without it; it declares one isl symbol,
//! never called, the only `unsafe` (an `unsafe extern` block) in this crate.
//!
//! isl's own point counting enumerates the points, which would make the model as slow as a
//! simulation for large trip counts; barvinok (which counts symbolically) is GPL and not
//! packaged. So counting is ours ([`Set::count`]): each floor division of a basic set is lifted
//! into a dimension of its own (it is a function of the point, so the count is unchanged) and
//! the division-free polytope is counted by sweeping one coordinate between vertex projections,
//! where the slice counts form a quasi-polynomial that is summed in closed form. The vertices
//! come from the double description method, the quasi-polynomial's period from the edges that
//! cross each stretch, and the swept direction is the cheapest one: a coordinate (lifted
//! divisions such as a cache set index take few values) or a row's normal, whose slices are
//! equalities (a set index `⌊(236t₀ + t₁ − 237t₂)/512⌋` runs diagonally to every coordinate).
//! Polygons, where every sweep ends, are counted in closed form (floor sums by the Euclidean
//! reduction), whatever their slopes. A residue row that keeps most of its division's
//! remainders (`x mod 512 ≥ 8`) is counted as the set without it minus the thin window it
//! leaves out. Splitting residue classes of the division periods instead,
//! as an earlier version did, needs line × sets / element classes per dimension: millions for
//! real caches. A polytope of eight or more dimensions (many lifted divisions, as the residue
//! windows' sizes give) slices a coordinate of up to 1024 values at each value instead: its
//! vertex enumeration cost more than 10⁸ ray comparisons where the slices cost half a second.
//! Work is bounded and exceeding the bound is an error, never a hang.
//! Depth is not: isl's parametric integer programming recurses once per split, so threads that
//! call isl need a larger stack than Rust's default ([`isl_thread`]).
//! Symbolic counting (piecewise quasi-polynomials) is not implemented yet.
//!
//! # Example
//!
//! ```
//! use loopscope_polyhedral::Ctx;
//!
//! let ctx = Ctx::new();
//! // Iterations of a triangular loop nest whose `i` is not a multiple of 4.
//! let s = ctx.set("[N] -> { [i, j] : 0 <= j <= i < N and i mod 4 != 0 }").unwrap();
//! assert_eq!(s.count(&[("N", 8)]).unwrap(), 2 + 3 + 4 + 6 + 7 + 8);
//! // The same set at N = 10^7 costs the same time.
//! let n: i128 = 10_000_000;
//! let all = n * (n + 1) / 2;
//! let m = n / 4; // i = 4q contributes 4q + 1 points, q < m
//! let multiples = 2 * m * (m - 1) + m;
//! assert_eq!(s.count(&[("N", 10_000_000)]).unwrap(), all - multiples);
//! ```
#![deny(missing_docs)]

mod count;
mod error;
mod images;
mod polytope;
mod rational;
mod sets;
mod stack;
mod window;

pub use error::PolyError;
pub use sets::{Ctx, Map, Set};
pub use stack::{ISL_STACK_BYTES, isl_thread};
