//! The model's own small input: affine loop nests over named parameters, array layouts and the
//! cache geometry. The kernel language's IR is converted into this by an adapter, so the model
//! does not depend on how kernels are written.

use std::ops::RangeInclusive;

use serde::Serialize;

use crate::AnalyticError;

/// `Σ coefficient·name + constant`, names being loop variables or parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Affine {
    /// `(name, coefficient)` pairs.
    pub terms: Vec<(String, i64)>,
    /// The constant term.
    pub constant: i64,
}

impl Affine {
    /// The constant `c`.
    pub fn constant(c: i64) -> Affine {
        Affine {
            terms: Vec::new(),
            constant: c,
        }
    }

    /// The variable `name`.
    pub fn var(name: &str) -> Affine {
        Affine {
            terms: vec![(name.to_string(), 1)],
            constant: 0,
        }
    }

    /// `self + c`.
    pub fn plus(mut self, c: i64) -> Affine {
        self.constant += c;
        self
    }

    /// `self + k·name`.
    pub fn plus_term(mut self, name: &str, k: i64) -> Affine {
        self.terms.push((name.to_string(), k));
        self
    }
}

/// An array's place in memory: row-major, `extents` elements per dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Array {
    /// Name as written in references.
    pub name: String,
    /// Address of element 0, in bytes.
    pub base_bytes: i64,
    /// Size of one element, in bytes.
    pub element_bytes: i64,
    /// Elements per dimension, outermost first (the first may be 0 when unknown: it does not
    /// enter the address).
    pub extents: Vec<i64>,
}

impl Array {
    /// The first and last byte the array occupies; `None` when its size is unknown (an extent
    /// that is not positive) or its end lies past `i64`.
    pub fn byte_range(&self) -> Option<RangeInclusive<i64>> {
        let elements = self
            .extents
            .iter()
            .try_fold(1i64, |n, &e| (e > 0).then(|| n.checked_mul(e)).flatten())?;
        let last = self
            .base_bytes
            .checked_add(elements.checked_mul(self.element_bytes)?)?
            .checked_sub(1)?;
        Some(self.base_bytes..=last)
    }
}

/// A loop over `lower ≤ var ≤ upper_inclusive` in steps of `step`: counting up from `lower`
/// when the step is positive (`for (var = lower; var <= upper_inclusive; var += step)`), down
/// from `upper_inclusive` when it is negative.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Loop {
    /// Iterator name.
    pub var: String,
    /// Smallest value.
    pub lower: Affine,
    /// Largest value.
    pub upper_inclusive: Affine,
    /// Constant, non-zero increment.
    pub step: i64,
    /// Loops and statements in textual order.
    pub body: Vec<Node>,
}

/// One statement's memory references, in execution order (right-hand side left to right, then
/// the left-hand side).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Statement {
    /// A name for reports, e.g. `S3`.
    pub name: String,
    /// The references, in execution order.
    pub refs: Vec<Reference>,
}

/// One array reference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// Array name.
    pub array: String,
    /// One affine subscript per array dimension.
    pub subscripts: Vec<Affine>,
    /// Whether the reference writes (reported only: the cache is write-allocate).
    pub is_write: bool,
}

/// A loop or a statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Node {
    /// A loop.
    Loop(Loop),
    /// A statement.
    Statement(Statement),
}

/// A whole program: parameters, arrays and the top-level nodes in textual order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Program {
    /// Parameter names (symbolic sizes).
    pub params: Vec<String>,
    /// Arrays.
    pub arrays: Vec<Array>,
    /// Top-level loops and statements.
    pub body: Vec<Node>,
}

/// One cache level: `ways`-way set-associative, LRU, write-allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// Associativity.
    pub ways: u32,
    /// Line (block) size in bytes.
    pub line_bytes: i64,
    /// Number of sets.
    pub sets: i64,
}

impl Cache {
    pub(crate) fn check(&self) -> Result<(), AnalyticError> {
        if self.ways == 0 || self.line_bytes <= 0 || self.sets <= 0 {
            return Err(AnalyticError::Cache(format!(
                "ways, line size and sets must be positive, got {} ways, {} B lines, {} sets",
                self.ways, self.line_bytes, self.sets
            )));
        }
        Ok(())
    }
}

/// An enclosing loop as a position sees it.
#[derive(Clone, Debug)]
pub(crate) struct Bounds {
    pub var: String,
    pub lower: Affine,
    pub upper_inclusive: Affine,
    pub step: i64,
}

/// A reference with everything the sets need: its position number, enclosing loops and
/// execution-order timestamp.
#[derive(Clone, Debug)]
pub(crate) struct Position {
    pub label: String,
    pub statement: String,
    pub reference: Reference,
    pub array: usize,
    pub loops: Vec<Bounds>,
    /// Textual positions `c₀, c₁, …` (one more than loops) and the reference ordinal.
    pub order: Vec<i64>,
    pub ordinal: i64,
}

impl Program {
    /// All references in textual order, numbered `P0, P1, …`.
    pub(crate) fn positions(&self) -> Result<Vec<Position>, AnalyticError> {
        let mut out = Vec::new();
        let mut loops = Vec::new();
        let mut order = Vec::new();
        self.walk(&self.body, &mut loops, &mut order, &mut out)?;
        Ok(out)
    }

    fn walk(
        &self,
        nodes: &[Node],
        loops: &mut Vec<Bounds>,
        order: &mut Vec<i64>,
        out: &mut Vec<Position>,
    ) -> Result<(), AnalyticError> {
        for (i, node) in nodes.iter().enumerate() {
            order.push(i as i64);
            match node {
                Node::Loop(l) => {
                    self.check_affine(&l.lower, loops)?;
                    self.check_affine(&l.upper_inclusive, loops)?;
                    if loops.iter().any(|b| b.var == l.var) || self.params.contains(&l.var) {
                        return Err(AnalyticError::Program(format!(
                            "loop variable `{}` reused",
                            l.var
                        )));
                    }
                    if l.step == 0 {
                        return Err(AnalyticError::Program(format!(
                            "loop `{}` has a zero step",
                            l.var
                        )));
                    }
                    loops.push(Bounds {
                        var: l.var.clone(),
                        lower: l.lower.clone(),
                        upper_inclusive: l.upper_inclusive.clone(),
                        step: l.step,
                    });
                    self.walk(&l.body, loops, order, out)?;
                    loops.pop();
                }
                Node::Statement(s) => {
                    for (k, r) in s.refs.iter().enumerate() {
                        let array = self.array_index(r)?;
                        for sub in &r.subscripts {
                            self.check_affine(sub, loops)?;
                        }
                        out.push(Position {
                            label: format!("P{}", out.len()),
                            statement: s.name.clone(),
                            reference: r.clone(),
                            array,
                            loops: loops.clone(),
                            order: order.clone(),
                            ordinal: k as i64,
                        });
                    }
                }
            }
            order.pop();
        }
        Ok(())
    }

    fn array_index(&self, r: &Reference) -> Result<usize, AnalyticError> {
        let (i, a) = self
            .arrays
            .iter()
            .enumerate()
            .find(|(_, a)| a.name == r.array)
            .ok_or_else(|| AnalyticError::Program(format!("unknown array `{}`", r.array)))?;
        if a.extents.len() != r.subscripts.len() {
            return Err(AnalyticError::Program(format!(
                "array `{}` has {} dimensions but is referenced with {} subscripts",
                a.name,
                a.extents.len(),
                r.subscripts.len()
            )));
        }
        Ok(i)
    }

    fn check_affine(&self, e: &Affine, loops: &[Bounds]) -> Result<(), AnalyticError> {
        for (name, _) in &e.terms {
            if !self.params.contains(name) && !loops.iter().any(|b| b.var == *name) {
                return Err(AnalyticError::Program(format!(
                    "`{name}` is neither a parameter nor an enclosing loop variable"
                )));
            }
        }
        Ok(())
    }

    /// Whether arrays `a` and `b` may have elements in one line of `line_bytes` bytes (always
    /// for the same array; for others, when their line ranges overlap, or when an extent is
    /// unknown).
    pub(crate) fn may_share_lines(&self, a: usize, b: usize, line_bytes: i64) -> bool {
        if a == b {
            return true;
        }
        match (
            self.line_range(a, line_bytes),
            self.line_range(b, line_bytes),
        ) {
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
            _ => true,
        }
    }

    /// The first and last line an array occupies, when its size is known.
    fn line_range(&self, a: usize, line_bytes: i64) -> Option<(i64, i64)> {
        let bytes = self.arrays[a].byte_range()?;
        Some((
            bytes.start().div_euclid(line_bytes),
            bytes.end().div_euclid(line_bytes),
        ))
    }

    /// The deepest loop nesting, which sizes the timestamp vectors.
    pub(crate) fn depth(positions: &[Position]) -> usize {
        positions.iter().map(|p| p.loops.len()).max().unwrap_or(0)
    }
}
