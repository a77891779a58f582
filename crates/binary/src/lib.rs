//! tmp
#![deny(missing_docs)]
mod classes;
mod elf;
mod error;
pub use classes::*;
pub use elf::*;
pub use error::*;
