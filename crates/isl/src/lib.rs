//! isl, the Integer Set Library, for loopscope-polyhedral: the C library compiled from source
//! with nothing but a C compiler, and the isl-rs crate's safe Rust bindings over it (the same
//! API as `isl_rs`, which loopscope-polyhedral imports under that name).
//!
//! This room only builds and exposes isl; loopscope-polyhedral decides what to compute with it.
//! Nothing here is written by hand beyond the build: `build.rs` takes isl's C sources and the
//! generated bindings from the isl-rs crate (pinned in Cargo.lock, fetched by cargo from
//! crates.io, never built by its own autotools script), compiles isl with its small-integer
//! imath arithmetic (`--with-int=imath-32`, 3-5x faster for the analytic model than the plain
//! imath isl-rs configures), and compiles the bindings as this crate's module.
//!
//! # Example
//!
//! ```
//! use loopscope_isl::{Context, Set};
//!
//! let ctx = Context::alloc();
//! let square = Set::read_from_str(&ctx, "{ [i, j] : 0 <= i < 3 and 0 <= j < 3 }").unwrap();
//! assert_eq!(square.count_val().unwrap().get_num_si().unwrap(), 9);
//! ```

#![deny(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

pub use bindings::*;
