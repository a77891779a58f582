//! The one error type of this room.

use std::path::PathBuf;

/// What can go wrong while reading and analysing a binary.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    /// The file could not be read.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("read", "write cache").
        action: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not an ELF file at all.
    #[error("{}: offset 0: not an ELF file (expected the magic bytes 7f 45 4c 46)", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// An ELF file loopscope cannot analyse (32-bit, another architecture).
    #[error("{}: {what}; expected a 64-bit x86-64 ELF", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What the file is.
        what: String,
    },
    /// An ELF file of a kind the analysis does not read: a relocatable object (`ET_REL`),
    /// whose sections all start at address 0 and whose calls wait for the linker, or a core
    /// file.
    #[error("{}: {what}", path.display())]
    NotLinked {
        /// The file.
        path: PathBuf,
        /// What the file is and what to do.
        what: String,
    },
    /// The ELF structure is broken (truncated, headers pointing outside the file).
    #[error("{}: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where and what is wrong.
        what: String,
    },
    /// No function of that name in the binary.
    #[error(
        "{}: no function {} `{name}` (expected a symbol name, mangled or demangled, or the hex \
         address a function starts at, as `loops` lists them)",
        path.display(),
        if name.starts_with("0x") { "starts at" } else { "named" }
    )]
    NoFunction {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// A bad instruction-class table.
    #[error("{}:{line}:{column}: {what}", path.display())]
    ClassTable {
        /// The table file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        what: String,
    },
    /// A cache file that cannot be decoded (stale format or damaged); callers recompute.
    #[error("{}: unreadable analysis cache: {what}", path.display())]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// What failed.
        what: String,
    },
}

impl BinaryError {
    /// Whether the user gave bad input (exit 2) rather than the analysis failing.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, BinaryError::Cache { .. })
    }
}
