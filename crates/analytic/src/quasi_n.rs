//! Quasi-polynomials in several parameters, and how they are written for people.
//!
//! A count of a parametric set is, on each chamber of the parameter space, a polynomial whose
//! coefficients depend on the parameters' residues: `Σ_e c_e(p mod periods) · Π p_i^e_i`. The
//! type keeps one polynomial per residue class (dense over classes, sparse over monomials), in
//! canonical form (no zero term, each period as small as the values allow), so that two
//! formulas are equal exactly when their canonical forms are.
//!
//! Writing: `1/4·Z + [0, 3/4, 1/2, 1/4]` is exact but unreadable; the same function is
//! `⌈Z/4⌉`. [`MultiQuasiPolynomial::render`] writes floors whenever the periodic part is a sum
//! of one-parameter steps (times monomials of the other parameters), which covers the counts of
//! affine loops over cache lines, and falls back to coefficients listed per residue class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::AnalyticError;
use crate::symbolic::{Fraction, QuasiPolynomial};

/// `Σ_e c_e(p mod periods) · Π p_i^e_i`: a polynomial per residue class of the parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiQuasiPolynomial {
    /// How often the coefficients repeat, per parameter.
    pub periods: Vec<i64>,
    /// Per residue class (mixed radix, the last parameter fastest), the non-zero terms:
    /// exponent per parameter and coefficient, sorted by exponents.
    pub classes: Vec<Vec<(Vec<u32>, Fraction)>>,
}

/// One class's polynomial while it is built.
pub(crate) type Terms = BTreeMap<Vec<u32>, Fraction>;

pub(crate) fn class_count(periods: &[i64]) -> usize {
    periods.iter().map(|&p| p.max(1) as usize).product()
}

/// The residues of class `index` (the last parameter fastest).
pub(crate) fn residues_of(mut index: usize, periods: &[i64]) -> Vec<i64> {
    let mut residues = vec![0; periods.len()];
    for (r, &p) in residues.iter_mut().zip(periods).rev() {
        let p = p.max(1) as usize;
        *r = (index % p) as i64;
        index /= p;
    }
    residues
}

/// The class of a point (or of residues) under `periods`.
pub(crate) fn class_of(point: &[i64], periods: &[i64]) -> usize {
    point.iter().zip(periods).fold(0, |index, (&v, &p)| {
        index * p.max(1) as usize + v.rem_euclid(p.max(1)) as usize
    })
}

fn power(base: i64, exponent: u32) -> Result<Fraction, AnalyticError> {
    let mut out = Fraction::int(1);
    for _ in 0..exponent {
        out = out.mul(Fraction::int(i128::from(base)))?;
    }
    Ok(out)
}

impl MultiQuasiPolynomial {
    /// The quasi-polynomial of `classes` (one term map per class of `periods`), canonical.
    pub(crate) fn from_terms(periods: Vec<i64>, classes: Vec<Terms>) -> MultiQuasiPolynomial {
        let classes = classes
            .into_iter()
            .map(|terms| terms.into_iter().filter(|(_, c)| c.num != 0).collect())
            .collect();
        MultiQuasiPolynomial { periods, classes }.reduced()
    }

    /// The constant `value` in `parameters` parameters.
    pub fn constant(parameters: usize, value: Fraction) -> MultiQuasiPolynomial {
        let mut terms = Terms::new();
        terms.insert(vec![0; parameters], value);
        MultiQuasiPolynomial::from_terms(vec![1; parameters], vec![terms])
    }

    /// A quasi-polynomial in one parameter as one in `parameters` parameters, in parameter
    /// `index`.
    pub fn from_one(qp: &QuasiPolynomial, parameters: usize, index: usize) -> MultiQuasiPolynomial {
        let mut periods = vec![1; parameters];
        periods[index] = qp.period.max(1);
        let classes = (0..class_count(&periods))
            .map(|class| {
                let r = residues_of(class, &periods)[index] as usize;
                let mut terms = Terms::new();
                for (j, c) in qp.coefficients[r].iter().enumerate() {
                    let mut e = vec![0; parameters];
                    e[index] = j as u32;
                    terms.insert(e, *c);
                }
                terms
            })
            .collect();
        MultiQuasiPolynomial::from_terms(periods, classes)
    }

    /// Number of parameters.
    pub fn parameters(&self) -> usize {
        self.periods.len()
    }

    /// The class's terms as a map.
    pub(crate) fn terms(&self, class: usize) -> Terms {
        self.classes[class].iter().cloned().collect()
    }

    /// The value at `point` (one value per parameter).
    pub fn at(&self, point: &[i64]) -> Result<Fraction, AnalyticError> {
        if point.len() != self.periods.len() || self.classes.len() != class_count(&self.periods) {
            return Err(AnalyticError::Program(format!(
                "a point of {} values for a formula in {} parameters",
                point.len(),
                self.periods.len()
            )));
        }
        let mut sum = Fraction::int(0);
        for (e, c) in &self.classes[class_of(point, &self.periods)] {
            let mut term = *c;
            for (&v, &k) in point.iter().zip(e) {
                term = term.mul(power(v, k)?)?;
            }
            sum = sum.add(term)?;
        }
        Ok(sum)
    }

    /// The value at `point`, which must be an integer.
    pub fn at_integer(&self, point: &[i64]) -> Result<i128, AnalyticError> {
        let v = self.at(point)?;
        if v.den != 1 {
            return Err(AnalyticError::Program(format!(
                "a formula is not an integer at {point:?}"
            )));
        }
        Ok(v.num)
    }

    /// The same function with `periods` (each a multiple of the current one).
    pub(crate) fn with_periods(&self, periods: &[i64]) -> MultiQuasiPolynomial {
        let classes = (0..class_count(periods))
            .map(|class| {
                self.classes[class_of(&residues_of(class, periods), &self.periods)].clone()
            })
            .collect();
        MultiQuasiPolynomial {
            periods: periods.to_vec(),
            classes,
        }
    }

    /// Each period made as small as the values allow (the period's divisors, smallest first).
    fn reduced(mut self) -> MultiQuasiPolynomial {
        for i in 0..self.periods.len() {
            let period = self.periods[i];
            for divisor in (1..period).filter(|d| period % d == 0) {
                let repeats = (0..self.classes.len()).all(|class| {
                    let mut r = residues_of(class, &self.periods);
                    r[i] %= divisor;
                    self.classes[class] == self.classes[class_of(&r, &self.periods)]
                });
                if repeats {
                    let mut periods = self.periods.clone();
                    periods[i] = divisor;
                    let classes = (0..class_count(&periods))
                        .map(|class| {
                            let r = residues_of(class, &periods);
                            self.classes[class_of(&r, &self.periods)].clone()
                        })
                        .collect();
                    self = MultiQuasiPolynomial { periods, classes };
                    break;
                }
            }
        }
        self
    }

    /// The same function with a parameter added in front, on which it does not depend
    /// (period 1: the classes keep their order).
    pub(crate) fn lifted(&self) -> MultiQuasiPolynomial {
        let front = |values: &[u32]| std::iter::once(0).chain(values.iter().copied()).collect();
        let classes = self
            .classes
            .iter()
            .map(|terms| terms.iter().map(|(e, c)| (front(e), *c)).collect())
            .collect();
        MultiQuasiPolynomial {
            periods: std::iter::once(1)
                .chain(self.periods.iter().copied())
                .collect(),
            classes,
        }
    }

    /// The same function without its first parameter, on which it must not depend.
    pub(crate) fn dropped(&self) -> MultiQuasiPolynomial {
        debug_assert!(
            self.periods.first().is_none_or(|&p| p == 1)
                && self.classes.iter().flatten().all(|(e, _)| e[0] == 0),
            "a formula that depends on the parameter it drops"
        );
        let periods = self.periods[1..].to_vec();
        let classes = (0..class_count(&periods))
            .map(|class| {
                self.terms(class)
                    .into_iter()
                    .map(|(e, c)| (e[1..].to_vec(), c))
                    .collect()
            })
            .collect();
        MultiQuasiPolynomial::from_terms(periods, classes)
    }

    /// The formula in `names` (one per parameter; missing ones are written `?`), with floors
    /// where the periodic part allows them (see the module docs), else coefficients listed per
    /// residue class.
    pub fn render(&self, names: &[&str]) -> String {
        let mut names = names.to_vec();
        names.resize(self.periods.len().max(names.len()), "?");
        let names = names.as_slice();
        match crate::floors::FloorForm::of(self) {
            Some(form) => form.render(names),
            None => self.render_listed(names),
        }
    }

    /// Coefficients that vary with the residues are listed per class: `[a, b, …]` with the
    /// classes named once at the end.
    fn render_listed(&self, names: &[&str]) -> String {
        let mut monomials: Vec<Vec<u32>> = self
            .classes
            .iter()
            .flat_map(|t| t.iter().map(|(e, _)| e.clone()))
            .collect();
        monomials.sort_by(|a, b| {
            let degree = |e: &Vec<u32>| e.iter().sum::<u32>();
            degree(b).cmp(&degree(a)).then(b.cmp(a))
        });
        monomials.dedup();
        let mut terms = Vec::new();
        for e in monomials {
            let per_class: Vec<Fraction> = self
                .classes
                .iter()
                .map(|t| {
                    t.iter()
                        .find(|(x, _)| *x == e)
                        .map_or(Fraction::int(0), |(_, c)| *c)
                })
                .collect();
            let coefficient = if per_class.iter().all(|c| *c == per_class[0]) {
                per_class[0].to_string()
            } else {
                let listed: Vec<String> = per_class.iter().map(Fraction::to_string).collect();
                format!("[{}]", listed.join(", "))
            };
            terms.push(crate::floors::times(&coefficient, &monomial(&e, names)));
        }
        let mut out = crate::floors::joined(terms);
        let varying: Vec<String> = names
            .iter()
            .zip(&self.periods)
            .filter(|(_, p)| **p > 1)
            .map(|(n, p)| format!("{n} mod {p}"))
            .collect();
        if out.contains('[') {
            out.push_str(&format!("  ([…] by {})", varying.join(", ")));
        }
        out
    }
}

/// `N^2·M`, or `` for the constant monomial.
pub(crate) fn monomial(e: &[u32], names: &[&str]) -> String {
    let factors: Vec<String> = e
        .iter()
        .zip(names)
        .filter(|(k, _)| **k > 0)
        .map(|(k, n)| {
            if *k == 1 {
                (*n).to_owned()
            } else {
                format!("{n}^{k}")
            }
        })
        .collect();
    factors.join("·")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qp(period: i64, coefficients: Vec<Vec<(i128, i128)>>) -> QuasiPolynomial {
        QuasiPolynomial {
            period,
            coefficients: coefficients
                .into_iter()
                .map(|c| {
                    c.into_iter()
                        .map(|(n, d)| Fraction { num: n, den: d })
                        .collect()
                })
                .collect(),
        }
    }

    #[test]
    fn periods_shrink_to_what_the_values_need() {
        // Z/4 + [0, 3/4, 1/2, 1/4] repeated twice: period 8 written, period 4 meant.
        let one = qp(
            8,
            (0..8)
                .map(|r| vec![[(0, 1), (3, 4), (1, 2), (1, 4)][r % 4], (1, 4)])
                .collect(),
        );
        let multi = MultiQuasiPolynomial::from_one(&one, 2, 1);
        assert_eq!(multi.periods, vec![1, 4]);
        for z in -20..20 {
            assert_eq!(
                multi.at_integer(&[7, z]).unwrap(),
                i128::from((z + 3).div_euclid(4))
            );
        }
        assert_eq!(multi.render(&["X", "Z"]), "⌈Z/4⌉");
    }

    #[test]
    fn a_lifted_formula_ignores_the_new_parameter() {
        let one = qp(2, vec![vec![(0, 1), (1, 2)], vec![(1, 2), (1, 2)]]);
        let multi = MultiQuasiPolynomial::from_one(&one, 1, 0).lifted();
        assert_eq!(multi.periods, vec![1, 2]);
        for (x, z) in [(0, 5), (9, 5), (3, 8)] {
            assert_eq!(multi.at_integer(&[x, z]).unwrap(), i128::from((z + 1) / 2));
        }
    }
}
