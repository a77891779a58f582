//! Affine expressions over loop variables and parameters, with exact (checked) integer arithmetic.

use std::fmt;

/// A symbol an affine expression may refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sym {
    /// A parameter (a symbolic size such as `N`), by index into [`crate::Kernel::params`].
    Param(usize),
    /// A loop variable, by index into [`crate::Kernel::loops`].
    Loop(usize),
}

/// `constant + Σ coefficient · symbol`, with terms sorted by symbol and no zero coefficient.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Affine {
    /// The constant term.
    pub constant: i64,
    /// The non-zero terms, sorted by symbol.
    pub terms: Vec<(Sym, i64)>,
}

impl Affine {
    /// The constant `value`.
    pub fn constant(value: i64) -> Affine {
        Affine {
            constant: value,
            terms: Vec::new(),
        }
    }

    /// The symbol `sym` with coefficient 1.
    pub fn symbol(sym: Sym) -> Affine {
        Affine {
            constant: 0,
            terms: vec![(sym, 1)],
        }
    }

    /// The constant value, when the expression has no symbol.
    pub fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// The coefficient of `sym` (0 when absent).
    pub fn coefficient(&self, sym: Sym) -> i64 {
        self.terms
            .iter()
            .find(|(s, _)| *s == sym)
            .map_or(0, |(_, c)| *c)
    }

    /// True when the expression refers to `sym`.
    pub fn mentions(&self, sym: Sym) -> bool {
        self.terms.iter().any(|(s, _)| *s == sym)
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Affine) -> Option<Affine> {
        let mut terms = self.terms.clone();
        for &(sym, c) in &other.terms {
            match terms.binary_search_by_key(&sym, |(s, _)| *s) {
                Ok(i) => terms[i].1 = terms[i].1.checked_add(c)?,
                Err(i) => terms.insert(i, (sym, c)),
            }
        }
        terms.retain(|(_, c)| *c != 0);
        Some(Affine {
            constant: self.constant.checked_add(other.constant)?,
            terms,
        })
    }

    /// `factor · self`, or `None` on overflow.
    pub fn checked_scale(&self, factor: i64) -> Option<Affine> {
        if factor == 0 {
            return Some(Affine::constant(0));
        }
        let terms = self
            .terms
            .iter()
            .map(|&(s, c)| c.checked_mul(factor).map(|c| (s, c)))
            .collect::<Option<Vec<_>>>()?;
        Some(Affine {
            constant: self.constant.checked_mul(factor)?,
            terms,
        })
    }

    /// `self - other`, or `None` on overflow.
    pub fn checked_sub(&self, other: &Affine) -> Option<Affine> {
        self.checked_add(&other.checked_scale(-1)?)
    }

    /// The value with every symbol looked up in `value`, in 128-bit arithmetic (`None` on overflow).
    pub fn eval(&self, value: impl Fn(Sym) -> i64) -> Option<i128> {
        let mut sum = i128::from(self.constant);
        for &(s, c) in &self.terms {
            sum = sum.checked_add(i128::from(c).checked_mul(i128::from(value(s)))?)?;
        }
        Some(sum)
    }

    /// Replaces every parameter by its value, keeping loop variables symbolic.
    pub fn bind_params(&self, params: &[i64]) -> Option<Affine> {
        let mut out = Affine::constant(self.constant);
        for &(s, c) in &self.terms {
            let term = match s {
                Sym::Param(p) => Affine::constant(c.checked_mul(*params.get(p)?)?),
                Sym::Loop(_) => Affine {
                    constant: 0,
                    terms: vec![(s, c)],
                },
            };
            out = out.checked_add(&term)?;
        }
        Some(out)
    }

    /// Writes the expression with symbol names from `name`, e.g. `2*i + N - 1`.
    pub fn render(&self, name: impl Fn(Sym) -> String) -> String {
        let mut out = String::new();
        for &(s, c) in &self.terms {
            let (sign, magnitude) = if c < 0 {
                ("-", c.unsigned_abs())
            } else {
                ("+", c.unsigned_abs())
            };
            if out.is_empty() {
                if sign == "-" {
                    out.push('-');
                }
            } else {
                out.push_str(sign);
            }
            if magnitude != 1 {
                out.push_str(&format!("{magnitude}*"));
            }
            out.push_str(&name(s));
        }
        if out.is_empty() {
            out = self.constant.to_string();
        } else if self.constant != 0 {
            let sign = if self.constant < 0 { '-' } else { '+' };
            out.push_str(&format!("{sign}{}", self.constant.unsigned_abs()));
        }
        out
    }
}

impl fmt::Display for Affine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(|s| match s {
            Sym::Param(p) => format!("p{p}"),
            Sym::Loop(l) => format!("l{l}"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_keeps_terms_sorted_and_drops_zeros() {
        let i = Affine::symbol(Sym::Loop(0));
        let n = Affine::symbol(Sym::Param(0));
        let e = i
            .checked_add(&n)
            .unwrap()
            .checked_add(&Affine::constant(-1))
            .unwrap();
        assert_eq!(e.terms, vec![(Sym::Param(0), 1), (Sym::Loop(0), 1)]);
        let zero = e.checked_sub(&e).unwrap();
        assert_eq!(zero.as_constant(), Some(0));
        assert_eq!(e.checked_scale(2).unwrap().coefficient(Sym::Loop(0)), 2);
        assert_eq!(e.eval(|s| if s == Sym::Loop(0) { 3 } else { 10 }), Some(12));
        assert_eq!(e.bind_params(&[10]).unwrap().constant, 9);
        let rendered = e.render(|s| {
            if s == Sym::Loop(0) {
                "i".into()
            } else {
                "N".into()
            }
        });
        assert_eq!(rendered, "N+i-1");
        assert!(
            Affine::constant(i64::MAX)
                .checked_add(&Affine::constant(1))
                .is_none()
        );
    }
}
