//! The adapter from the kernel language's IR (`loopscope-kernel`) to the model's own program
//! description, with every parameter bound to its value and the arrays placed by a layout.
//!
//! Binding the parameters first keeps every address affine: a kernel's array extents are
//! parameters (`double a[M][N]`), so with `N` symbolic the address `8·(N·j + i)` would not be.
//! The model's cost still does not grow with the values (the sets are built from the loop
//! structure; counting is size-independent).

use loopscope_kernel::{Kernel, Layout, Node as KNode, Sym};

use crate::AnalyticError;
use crate::program::{Affine, Array, Loop, Node, Program, Reference, Statement};

/// The program of `kernel` at parameter values `params` (in [`Kernel::params`] order), with the
/// arrays where `layout` puts them. Statements are named `S1`, `S2`, … in textual order, and the
/// references keep the kernel's order, so position `Pn` is the kernel's `n`-th reference
/// ([`Kernel::references`]).
pub fn program_from_kernel(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
) -> Result<Program, AnalyticError> {
    program_with_symbols(kernel, params, &[], layout)
}

/// Like [`program_from_kernel`], but the parameters with indices `symbolic` (in
/// [`Kernel::params`]) stay parameters of the program (their values in `params` are ignored),
/// for formulas in them. They may bound loops but not size an array: the addresses would not be
/// affine in them. The layout must not depend on them either (it does not when no extent
/// mentions them).
pub fn program_with_symbols(
    kernel: &Kernel,
    params: &[i64],
    symbolic: &[usize],
    layout: &Layout,
) -> Result<Program, AnalyticError> {
    for &p in symbolic {
        let name = kernel.params.get(p).ok_or_else(|| {
            AnalyticError::Program(format!("no parameter number {p} in the kernel"))
        })?;
        if let Some(a) = kernel
            .arrays
            .iter()
            .find(|a| a.extents.iter().any(|e| e.mentions(Sym::Param(p))))
        {
            return Err(AnalyticError::SymbolSizesArray {
                parameter: name.clone(),
                array: a.name.clone(),
            });
        }
    }
    let adapter = Adapter {
        kernel,
        params,
        symbolic,
        names: vec![String::new(); kernel.loops.len()],
    };
    adapter.program(layout)
}

struct Adapter<'a> {
    kernel: &'a Kernel,
    params: &'a [i64],
    /// The parameters kept symbolic.
    symbolic: &'a [usize],
    /// The name each loop variable gets in the program (unique along every nest).
    names: Vec<String>,
}

fn overflow(what: &str) -> AnalyticError {
    AnalyticError::Program(format!("{what} does not fit in 64-bit integers"))
}

impl Adapter<'_> {
    fn program(mut self, layout: &Layout) -> Result<Program, AnalyticError> {
        let arrays = self.arrays(layout)?;
        let mut enclosing = Vec::new();
        let body = self.nodes(&self.kernel.body.clone(), &mut enclosing)?;
        Ok(Program {
            params: self
                .symbolic
                .iter()
                .map(|&p| self.kernel.params[p].clone())
                .collect(),
            arrays,
            body,
        })
    }

    fn arrays(&self, layout: &Layout) -> Result<Vec<Array>, AnalyticError> {
        let mut out = Vec::with_capacity(self.kernel.arrays.len());
        for (i, a) in self.kernel.arrays.iter().enumerate() {
            let base = layout.base.get(i).copied().unwrap_or(0);
            let base_bytes = i64::try_from(base).map_err(|_| overflow("an array's address"))?;
            let extents = a
                .extents
                .iter()
                .map(|e| {
                    e.eval(|s| match s {
                        Sym::Param(p) => self.params.get(p).copied().unwrap_or(0),
                        Sym::Loop(_) => 0,
                    })
                    .and_then(|v| i64::try_from(v).ok())
                    .ok_or_else(|| overflow("an array extent"))
                })
                .collect::<Result<_, _>>()?;
            let element_bytes = a.elem.bytes() as i64;
            if base_bytes % element_bytes != 0 {
                // The model places an access by its first byte; one that spans two lines
                // touches both, which the simulator counts and the model would not.
                return Err(AnalyticError::Program(format!(
                    "array `{}` at byte {base_bytes} is not aligned to its {element_bytes}-byte \
                     elements: its accesses would span two cache lines, which the model does not \
                     count (give --base a multiple of {element_bytes}, or use `loopscope simulate`)",
                    a.name
                )));
            }
            out.push(Array {
                name: a.name.clone(),
                base_bytes,
                element_bytes,
                extents,
            });
        }
        Ok(out)
    }

    fn nodes(
        &mut self,
        nodes: &[KNode],
        enclosing: &mut Vec<String>,
    ) -> Result<Vec<Node>, AnalyticError> {
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            out.push(match node {
                KNode::Loop { id, body } => Node::Loop(self.lp(*id, body, enclosing)?),
                KNode::Statement(s) => Node::Statement(self.statement(*s)?),
            });
        }
        Ok(out)
    }

    fn lp(
        &mut self,
        id: usize,
        body: &[KNode],
        enclosing: &mut Vec<String>,
    ) -> Result<Loop, AnalyticError> {
        let l = &self.kernel.loops[id];
        // C lets an inner loop reuse an outer loop's name; the model needs them distinct.
        let mut name = l.var.clone();
        if enclosing.contains(&name) {
            name = format!("{}_{id}", l.var);
        }
        self.names[id] = name.clone();
        let (start, end) = (self.affine(&l.start)?, self.affine(&l.end_inclusive)?);
        let (lower, upper_inclusive) = if l.step > 0 {
            (start, end)
        } else {
            (end, start)
        };
        enclosing.push(name.clone());
        let body = self.nodes(body, enclosing)?;
        enclosing.pop();
        Ok(Loop {
            var: name,
            lower,
            upper_inclusive,
            step: l.step,
            body,
        })
    }

    fn statement(&self, index: usize) -> Result<Statement, AnalyticError> {
        let s = &self.kernel.statements[index];
        let refs = s
            .refs
            .iter()
            .map(|r| {
                Ok(Reference {
                    array: self.kernel.arrays[r.array].name.clone(),
                    subscripts: r
                        .subscripts
                        .iter()
                        .map(|e| self.affine(e))
                        .collect::<Result<_, AnalyticError>>()?,
                    is_write: r.kind == loopscope_kernel::AccessKind::Write,
                })
            })
            .collect::<Result<_, AnalyticError>>()?;
        Ok(Statement {
            name: format!("S{}", index + 1),
            refs,
        })
    }

    /// The expression with parameters replaced by their values and loop variables by their
    /// program names.
    fn affine(&self, e: &loopscope_kernel::Affine) -> Result<Affine, AnalyticError> {
        let mut out = Affine::constant(e.constant);
        for &(sym, k) in &e.terms {
            out = match sym {
                Sym::Loop(l) => out.plus_term(&self.names[l], k),
                Sym::Param(p) if self.symbolic.contains(&p) => {
                    out.plus_term(&self.kernel.params[p], k)
                }
                Sym::Param(p) => {
                    let value = self.params.get(p).copied().unwrap_or(0);
                    let term = k
                        .checked_mul(value)
                        .and_then(|v| v.checked_add(out.constant))
                        .ok_or_else(|| overflow("an affine expression"))?;
                    Affine {
                        constant: term,
                        ..out
                    }
                }
            };
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_kernel::parse_kernel;

    fn program(text: &str, values: &[(&str, i64)]) -> Program {
        let kernel = parse_kernel(text, "k.c").unwrap();
        let values: Vec<(String, i64)> = values.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let params = kernel.param_values(&values).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        program_from_kernel(&kernel, &params, &layout).unwrap()
    }

    #[test]
    fn binds_parameters_and_places_arrays() {
        let p = program(
            "double a[M][N], b[M][N];\nfor (int j = 1; j < M - 1; ++j)\n for (int i = 1; i < N - 1; ++i)\n  b[j][i] = a[j][i-1];\n",
            &[("M", 10), ("N", 20)],
        );
        assert_eq!(p.arrays[1].base_bytes, 1600);
        assert_eq!(p.arrays[0].extents, [10, 20]);
        let Node::Loop(outer) = &p.body[0] else {
            panic!("expected a loop")
        };
        assert_eq!(outer.upper_inclusive, Affine::constant(8));
        let Node::Loop(inner) = &outer.body[0] else {
            panic!("expected a loop")
        };
        assert_eq!(inner.upper_inclusive, Affine::constant(18));
        let Node::Statement(s) = &inner.body[0] else {
            panic!("expected a statement")
        };
        assert_eq!(s.refs[0].subscripts[1], Affine::var("i").plus(-1));
        assert!(s.refs[1].is_write);
    }

    #[test]
    fn a_base_not_aligned_to_the_elements_is_refused() {
        let kernel = parse_kernel(
            "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  b[i] = a[i];\n",
            "k.c",
        )
        .unwrap();
        let params = kernel.param_values(&[("N".to_string(), 100)]).unwrap();
        for (base, refused) in [(1604, true), (1601, true), (1608, false), (1640, false)] {
            let layout = kernel.layout(&params, &[("b".to_string(), base)]).unwrap();
            match program_from_kernel(&kernel, &params, &layout) {
                Err(e) => {
                    assert!(refused, "{base}: {e}");
                    let text = e.to_string();
                    assert!(
                        text.contains("`b` at byte") && text.contains("multiple of 8"),
                        "{text}"
                    );
                    assert!(e.is_bad_input());
                }
                Ok(_) => assert!(!refused, "{base} accepted"),
            }
        }
    }

    #[test]
    fn downward_loops_keep_their_range() {
        let p = program(
            "double a[N];\nfor (int i = N - 1; i >= 0; i -= 2)\n  a[i] = 1.0;\n",
            &[("N", 9)],
        );
        let Node::Loop(l) = &p.body[0] else {
            panic!("expected a loop")
        };
        assert_eq!(
            (l.lower.constant, l.upper_inclusive.constant, l.step),
            (0, 8, -2)
        );
    }
}
