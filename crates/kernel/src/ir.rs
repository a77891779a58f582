//! The loop-nest IR: arrays, loops with affine bounds, statements with their references in
//! execution order, and the FLOPs of each statement.

use crate::affine::{Affine, Sym};
use crate::lexer::Pos;

/// Element type of an array or scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemType {
    /// `double`, 8 bytes.
    Double,
    /// `float`, 4 bytes.
    Float,
    /// `int`, 4 bytes.
    Int,
    /// `long`, 8 bytes.
    Long,
}

impl ElemType {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            ElemType::Double | ElemType::Long => 8,
            ElemType::Float | ElemType::Int => 4,
        }
    }

    /// True for the floating-point types, whose arithmetic counts as FLOPs.
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::Double | ElemType::Float)
    }

    /// The C spelling.
    pub fn name(self) -> &'static str {
        match self {
            ElemType::Double => "double",
            ElemType::Float => "float",
            ElemType::Int => "int",
            ElemType::Long => "long",
        }
    }
}

/// A declared array, row-major (C order).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Its name.
    pub name: String,
    /// Element type.
    pub elem: ElemType,
    /// Extent of each dimension, outermost first (affine in parameters).
    pub extents: Vec<Affine>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A `for` loop: `var` runs from `start` by `step` while it has not passed `end_inclusive`.
#[derive(Debug, Clone, PartialEq)]
pub struct Loop {
    /// The loop variable.
    pub var: String,
    /// First value (affine in parameters and enclosing loop variables).
    pub start: Affine,
    /// Last value the variable may take (inclusive bound, already adjusted for `<`/`>`).
    pub end_inclusive: Affine,
    /// Constant, non-zero increment.
    pub step: i64,
    /// The enclosing loop, if any.
    pub parent: Option<usize>,
    /// Where the `for` keyword is.
    pub pos: Pos,
}

/// Whether a reference reads or writes memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A load.
    Read,
    /// A store.
    Write,
}

/// The side of the assignment a reference appears on (spec 000's position information).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Right-hand side (and the read of a compound assignment's target).
    Right,
    /// Left-hand side.
    Left,
}

/// One array reference of a statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The array, by index into [`Kernel::arrays`].
    pub array: usize,
    /// One affine subscript per dimension.
    pub subscripts: Vec<Affine>,
    /// Load or store.
    pub kind: AccessKind,
    /// Side of the assignment.
    pub side: Side,
    /// 1-based ordinal of the term on its side, counted from the left (spec 000).
    pub ordinal: u32,
    /// Where it appears.
    pub pos: Pos,
}

/// Floating-point operations of one execution of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flops {
    /// Additions and subtractions.
    pub add: u64,
    /// Multiplications.
    pub mul: u64,
    /// Divisions.
    pub div: u64,
}

impl Flops {
    /// All operations together.
    pub fn total(&self) -> u64 {
        self.add + self.mul + self.div
    }
}

/// An assignment executed once per iteration of its enclosing loops.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// Enclosing loops, outermost first (indices into [`Kernel::loops`]).
    pub loops: Vec<usize>,
    /// Array references in execution order: right-hand side left to right, then the left-hand
    /// side (its read first for a compound assignment).
    pub refs: Vec<Reference>,
    /// FLOPs per execution.
    pub flops: Flops,
    /// Per reference of `refs`: the floating-point operations between the value it reads and
    /// the value the statement stores (`a[i-1]` in `a[i] = (a[i-1] + b[i]) * s` at depth 2; 0
    /// for the store).
    pub ref_depths: Vec<u32>,
    /// The scalar the statement assigns (`s` in `s += a[i]`), if it assigns one.
    pub scalar_target: Option<String>,
    /// The scalars the statement reads, each with the floating-point operations between its
    /// value and the value stored (`s += a[i] * b[i]` reads `s` at depth 1; a compound
    /// assignment's own target is listed last).
    pub scalar_reads: Vec<(String, u32)>,
    /// Where the statement starts.
    pub pos: Pos,
}

/// A node of the program tree, in textual order.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A loop and its body.
    Loop {
        /// Index into [`Kernel::loops`].
        id: usize,
        /// The body, in textual order.
        body: Vec<Node>,
    },
    /// A statement, by index into [`Kernel::statements`].
    Statement(usize),
}

/// A parsed kernel: parameters stay symbolic until they are given values
/// ([`Kernel::param_values`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// Where the text came from (file name), used in messages.
    pub origin: String,
    /// Parameter names, in order of first use.
    pub params: Vec<String>,
    /// Where each parameter is first used.
    pub param_pos: Vec<Pos>,
    /// Declared arrays, in declaration order.
    pub arrays: Vec<Array>,
    /// Declared scalars and their types, in declaration order.
    pub scalars: Vec<(String, ElemType)>,
    /// Every loop, in textual order.
    pub loops: Vec<Loop>,
    /// Every statement, in textual order.
    pub statements: Vec<Statement>,
    /// The top-level nodes in textual order.
    pub body: Vec<Node>,
}

impl Kernel {
    /// True when the kernel's floating-point data is all `float`: its declared floating-point
    /// arrays and scalars are `float` (constants such as `2.0` do not count) and there is at
    /// least one. A `double` anywhere makes its arithmetic double precision.
    pub fn single_precision(&self) -> bool {
        let floating: Vec<ElemType> = self
            .arrays
            .iter()
            .map(|a| a.elem)
            .chain(self.scalars.iter().map(|(_, t)| *t))
            .filter(|t| t.is_float())
            .collect();
        !floating.is_empty() && floating.iter().all(|t| *t == ElemType::Float)
    }

    /// The name of a symbol.
    pub fn sym_name(&self, sym: Sym) -> &str {
        match sym {
            Sym::Param(p) => &self.params[p],
            Sym::Loop(l) => &self.loops[l].var,
        }
    }

    /// An affine expression written with this kernel's names, e.g. `j-1`.
    pub fn render(&self, expr: &Affine) -> String {
        expr.render(|s| self.sym_name(s).to_owned())
    }

    /// A reference written as in the source, e.g. `a[j-1][i]`.
    pub fn render_ref(&self, r: &Reference) -> String {
        let mut out = self.arrays[r.array].name.clone();
        for s in &r.subscripts {
            out.push('[');
            out.push_str(&self.render(s));
            out.push(']');
        }
        out
    }

    /// Every reference of every statement as (statement, reference), in textual order; the
    /// position in this sequence is the reference id the access stream reports.
    pub fn references(&self) -> impl Iterator<Item = (usize, &Reference)> {
        self.statements
            .iter()
            .enumerate()
            .flat_map(|(s, st)| st.refs.iter().map(move |r| (s, r)))
    }
}
