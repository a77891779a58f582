//! tmp
#![deny(missing_docs)]
mod classes;
mod elf;
mod error;
pub use classes::*;
pub use elf::*;
pub use error::*;
mod blocks;
mod decode;
mod loops;
pub use blocks::*;
pub use loops::{dominates, dominators, LoopKind};
