//! Binding parameters to values and placing arrays in memory.

use crate::KernelError;
use crate::affine::Sym;
use crate::ir::Kernel;

/// Alignment of arrays placed by default, in bytes (a cache line on current x86 and Arm cores).
pub const DEFAULT_ALIGN_BYTES: u64 = 64;

/// Where each array lives: base address and size in bytes, by array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Start address of each array.
    pub base: Vec<u64>,
    /// Size of each array in bytes (extents multiplied, times the element size).
    pub size_bytes: Vec<u64>,
    /// Row-major stride of each dimension of each array, in elements.
    pub strides: Vec<Vec<i64>>,
}

impl Kernel {
    /// Parameter values in [`Kernel::params`] order, looked up by name in `values`.
    ///
    /// Errors name the first use of a symbol that has no value. Names in `values` the kernel does
    /// not use are ignored; [`Kernel::unused_definitions`] lists them.
    pub fn param_values(&self, values: &[(String, i64)]) -> Result<Vec<i64>, KernelError> {
        self.params
            .iter()
            .zip(&self.param_pos)
            .map(|(name, pos)| {
                values
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| *v)
                    .ok_or_else(|| KernelError::UnboundSymbol {
                        origin: self.origin.clone(),
                        line: pos.line,
                        column: pos.column,
                        name: name.clone(),
                        fix: self.unbound_fix(name),
                    })
            })
            .collect()
    }

    /// How to give parameter `name` a value. One that no bound, extent or subscript uses is
    /// read only by arithmetic: most likely a coefficient the kernel forgot to declare, as
    /// kerncraft's kernels declare theirs (`double s;`).
    fn unbound_fix(&self, name: &str) -> String {
        let Some(p) = self.params.iter().position(|n| n == name) else {
            return format!("give it with -D {name}=VALUE");
        };
        let sym = Sym::Param(p);
        let shapes_the_nest = self
            .arrays
            .iter()
            .flat_map(|a| &a.extents)
            .any(|e| e.mentions(sym))
            || self
                .loops
                .iter()
                .any(|l| l.start.mentions(sym) || l.end_inclusive.mentions(sym))
            || self
                .statements
                .iter()
                .flat_map(|s| &s.refs)
                .flat_map(|r| &r.subscripts)
                .any(|e| e.mentions(sym));
        if shapes_the_nest {
            format!("give it with -D {name}=VALUE")
        } else {
            let elem = if self.single_precision() {
                "float"
            } else {
                "double"
            };
            format!(
                "declare it in the kernel file ({elem} {name};) or give it with -D {name}=VALUE"
            )
        }
    }

    /// The names in `values` that are not parameters of this kernel.
    pub fn unused_definitions<'a>(&self, values: &'a [(String, i64)]) -> Vec<&'a str> {
        values
            .iter()
            .filter(|(n, _)| !self.params.contains(n))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Places the arrays: those named in `fixed` at their given addresses, the others in
    /// declaration order after the highest end so far, each aligned to [`DEFAULT_ALIGN_BYTES`]
    /// (the first one at 0 when nothing is fixed).
    pub fn layout(&self, params: &[i64], fixed: &[(String, u64)]) -> Result<Layout, KernelError> {
        let bad = |message: String| KernelError::Binding {
            origin: self.origin.clone(),
            message,
        };
        for (name, _) in fixed {
            if !self.arrays.iter().any(|a| a.name == *name) {
                return Err(bad(format!(
                    "--base names `{name}`, which is not an array of the kernel"
                )));
            }
        }
        let mut size_bytes = Vec::new();
        let mut strides = Vec::new();
        for array in &self.arrays {
            let mut extents = Vec::new();
            for e in &array.extents {
                let v = e
                    .eval(|s| match s {
                        Sym::Param(p) => params[p],
                        Sym::Loop(_) => 0,
                    })
                    .filter(|v| *v > 0 && *v <= i128::from(i64::MAX))
                    .ok_or_else(|| {
                        bad(format!(
                            "array `{}` has an extent `{}` that is not a positive 64-bit integer",
                            array.name,
                            self.render(e)
                        ))
                    })?;
                extents.push(v as i64);
            }
            let mut stride = vec![1i64; extents.len()];
            for d in (0..extents.len().saturating_sub(1)).rev() {
                stride[d] = stride[d + 1]
                    .checked_mul(extents[d + 1])
                    .ok_or_else(|| bad(format!("array `{}` is too large", array.name)))?;
            }
            let elements = stride
                .first()
                .map_or(Some(1), |s| s.checked_mul(extents[0]));
            let bytes = elements
                .and_then(|n| (n as u64).checked_mul(array.elem.bytes()))
                .ok_or_else(|| bad(format!("array `{}` is too large", array.name)))?;
            size_bytes.push(bytes);
            strides.push(stride);
        }
        let mut base = vec![None; self.arrays.len()];
        let mut next_free = 0u64;
        for (name, address) in fixed {
            let i = self
                .arrays
                .iter()
                .position(|a| a.name == *name)
                .unwrap_or(0);
            base[i] = Some(*address);
            let end = address.checked_add(size_bytes[i]).ok_or_else(|| {
                bad(format!(
                    "array `{name}` at {address:#x} ends beyond the 64-bit address space"
                ))
            })?;
            next_free = next_free.max(end);
        }
        let mut out = Vec::with_capacity(self.arrays.len());
        for (i, b) in base.into_iter().enumerate() {
            let address = match b {
                Some(a) => a,
                None => {
                    let a = next_free
                        .checked_next_multiple_of(DEFAULT_ALIGN_BYTES)
                        .ok_or_else(|| {
                            bad("the arrays do not fit in the 64-bit address space".into())
                        })?;
                    next_free = a.checked_add(size_bytes[i]).ok_or_else(|| {
                        bad("the arrays do not fit in the 64-bit address space".into())
                    })?;
                    a
                }
            };
            out.push(address);
        }
        Ok(Layout {
            base: out,
            size_bytes,
            strides,
        })
    }
}

impl Layout {
    /// Pairs of arrays (by index, the earlier first) whose byte ranges share at least one byte:
    /// only `--base` can place them so, and aliasing may be what the user means.
    pub fn overlaps(&self) -> Vec<(usize, usize)> {
        let range = |i: usize| {
            (
                self.base[i],
                self.base[i].saturating_add(self.size_bytes[i]),
            )
        };
        let mut pairs = Vec::new();
        for i in 0..self.base.len() {
            for j in i + 1..self.base.len() {
                let ((a_start, a_end), (b_start, b_end)) = (range(i), range(j));
                if a_start < b_end && b_start < a_end {
                    pairs.push((i, j));
                }
            }
        }
        pairs
    }
}
