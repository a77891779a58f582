//! Binary analysis: what the loops of an x86-64 ELF file are, where they are in the source and
//! what they are made of, without running it.
//!
//! The room reads the ELF file (sections, `PT_LOAD` segments, `.symtab`/`.dynsym` function
//! symbols demangled, PLT stubs, `.eh_frame` FDEs for stripped code), disassembles each function
//! by recursive descent (iced-x86) with jump tables, noreturn calls, tail calls and `.cold`
//! parts, classifies every instruction (spec 001 §6.4: exclusive br/fp/ls/int classes plus
//! non-exclusive tags, overridable by a TOML table), splits blocks (true basic blocks, or the
//! patent's after-branch rule), builds the CFG and Havlak's loop forest (spec 004 §3.6) with
//! back, entry and exit edges, and maps loop headers to `file:line` with inlined frames.
//! Functions are analysed in parallel (rayon); [`Program::analyze_functions`] analyses only
//! those a [`FunctionFilter`] picks by address or name. A finished analysis can be cached
//! ([`cache_file_name`], [`write_cache`]); where the cache lives is the caller's choice.
//!
//! It must not print, exit, read the environment or run the binary: it returns values and
//! [`BinaryError`]s (with [`BinaryError::is_bad_input`]).
//!
//! # Example
//!
//! ```
//! use loopscope_binary::{havlak_forest, LoopKind};
//!
//! // 0 → 1 → 2 → 1 (a loop headed by 1), 1 → 3 (its exit).
//! let succs = vec![vec![1], vec![2, 3], vec![1], vec![]];
//! let forest = havlak_forest(&succs, 0);
//! assert_eq!(forest.len(), 1);
//! assert_eq!((forest[0].header, forest[0].kind), (1, LoopKind::Reducible));
//! assert_eq!(forest[0].blocks, vec![1, 2]);
//! ```
#![deny(missing_docs)]

mod blocks;
mod cache;
mod classes;
mod decode;
mod demangle;
mod elf;
mod error;
mod lines;
mod loops;
mod program;
mod seeds;

pub use blocks::{Block, EdgeKind, Exit, SplitMode, Succ};
pub use cache::{CACHE_FILE_CAP_BYTES, cache_file_name, read_cache, write_cache};
pub use classes::{CLASS_TABLE_CAP_BYTES, Class, ClassCounts, Classifier, TagCounts, tag};
pub use demangle::demangle;
pub use elf::{BINARY_CAP_BYTES, BinaryKind, Image, LoadSegment, PltRange, has_interpreter};
pub use error::BinaryError;
pub use lines::Frame;
pub use loops::{ForestLoop, LoopKind, dominates, dominators, havlak_forest};
pub use program::{Edge, Function, FunctionFilter, Loop, Options, Program};
pub use seeds::SeedSource;
