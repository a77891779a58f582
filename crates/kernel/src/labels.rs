//! How reports name a kernel's references: the text as written, the kind of access and where it
//! is in the file.

use serde::Serialize;

use crate::ir::{AccessKind, Kernel};

/// What produced a stream of accesses, for labelling a reference's row in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefLabel {
    /// The array referenced; `None` for a trace's reads or writes.
    pub array: Option<String>,
    /// Each subscript as written.
    pub subscripts: Vec<String>,
    /// The reference as written, e.g. `a[j-1][i]`.
    pub text: String,
    /// `read` or `write`.
    pub kind: &'static str,
    /// The statement's index in [`Kernel::statements`].
    pub statement: Option<usize>,
    /// 1-based line in the kernel file.
    pub line: Option<u32>,
    /// 1-based column in the kernel file.
    pub column: Option<u32>,
}

impl RefLabel {
    /// `line:column`, when known; empty otherwise.
    pub fn place(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{l}:{c}"),
            _ => String::new(),
        }
    }
}

impl Kernel {
    /// A label for every reference, in [`Kernel::references`] order.
    pub fn reference_labels(&self) -> Vec<RefLabel> {
        self.references()
            .map(|(s, r)| RefLabel {
                array: Some(self.arrays[r.array].name.clone()),
                subscripts: r.subscripts.iter().map(|e| self.render(e)).collect(),
                text: self.render_ref(r),
                kind: match r.kind {
                    AccessKind::Read => "read",
                    AccessKind::Write => "write",
                },
                statement: Some(s),
                line: Some(r.pos.line),
                column: Some(r.pos.column),
            })
            .collect()
    }
}
