//! tmp
#![deny(missing_docs)]
mod classes;
mod elf;
mod error;
pub use classes::*;
pub use elf::*;
pub use error::*;
mod blocks;
mod cache;
mod decode;
mod lines;
mod loops;
mod program;
mod seeds;
pub use blocks::*;
pub use loops::{dominates, dominators, LoopKind};
pub use lines::Frame;
pub use program::*;
pub use seeds::SeedSource;
pub use cache::{cache_file_name, read_cache, write_cache};
