//! Loop kernels: the C subset kerncraft accepts, parsed into a loop-nest IR, and the exact
//! stream of memory accesses such a kernel makes for concrete parameter values.
//!
//! This room reads kernel files ([`parse_kernel`]) into a [`Kernel`]: arrays with extents affine
//! in parameters, `for` loops with affine bounds and constant steps (perfect or imperfect
//! nests), and statements whose array references are listed in execution order (right-hand side
//! left to right, then the left-hand side, as spec 000 assumes) with affine subscripts
//! ([`Affine`]) and FLOPs counted per statement; [`parse_kernel_with_values`] also accepts
//! products and divisions of symbols (`a[j*N+i]`, `i < N/2`) by folding the `-D` values in. [`Kernel::layout`] places arrays in memory
//! (row-major, declaration order, 64-byte aligned, or at addresses the user gives), and
//! [`Program`] turns a kernel plus parameter values into a streaming [`AccessStream`], whose
//! length [`Kernel::estimate_accesses`] tells before it starts.
//! [`LoadedKernel::load`] does it all for a kernel file and `-D`/`--base` values, as every
//! command that takes one starts; [`Listener`] is how this and the rooms above report warnings
//! and progress without printing.
//!
//! It must not simulate caches or model misses (that is `loopscope-cache`), print or exit:
//! every problem with the input is a [`KernelError`] naming the file, line and column.
//!
//! # Example
//!
//! ```
//! use loopscope_kernel::{parse_kernel, Program};
//!
//! let kernel = parse_kernel(
//!     "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  a[i] = 2.0 * b[i];\n",
//!     "scale.c",
//! ).unwrap();
//! assert_eq!(kernel.statements[0].flops.mul, 1);
//! let params = kernel.param_values(&[("N".to_string(), 4)]).unwrap();
//! let layout = kernel.layout(&params, &[]).unwrap();
//! let program = Program::new(&kernel, &params, &layout).unwrap();
//! let addresses: Vec<u64> = program.accesses().map(|a| a.addr).collect();
//! // b starts at 64 (a is 32 bytes, b is aligned to 64); read b[i], then write a[i].
//! assert_eq!(addresses, [64, 0, 72, 8, 80, 16, 88, 24]);
//! ```
#![deny(missing_docs)]

mod affine;
mod bounded;
mod error;
mod ir;
mod labels;
mod layout;
mod lexer;
mod listener;
mod load;
mod parser;
mod stream;
mod subscripts;
mod work;

pub use affine::{Affine, Sym};
pub use bounded::KERNEL_FILE_CAP_BYTES;
pub use error::KernelError;
pub use ir::{AccessKind, Array, ElemType, Flops, Kernel, Loop, Node, Reference, Side, Statement};
pub use labels::RefLabel;
pub use layout::{DEFAULT_ALIGN_BYTES, Layout};
pub use lexer::Pos;
pub use listener::{Listener, Silent};
pub use load::{
    LoadedKernel, parse_bases, parse_definition, read_kernel_file, read_kernel_file_with_values,
};
pub use parser::{parse_kernel, parse_kernel_with_values};
pub use stream::{Access, AccessStream, Program};
pub use subscripts::ENUMERATED_STEPS;
pub use work::{AccessEstimate, EXPLICIT_STEPS};
