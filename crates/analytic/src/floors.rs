//! Quasi-polynomials written with floors: `⌈Z/4⌉ − ⌈X/4⌉` rather than its coefficients per
//! residue class.
//!
//! A one-parameter step `h(n) = L·n + g(n mod p)` with `g(0) = 0` is the sum of its increments:
//! `h(n) = Σ_r d_r·F_r(n)`, where `d_r = h(r) − h(r − 1)` is the increment into residue `r` and
//! `F_r(n)` counts the integers of `1..=n` in that residue (`⌊n/p⌋` for `r = 0`, `⌊(n + p − r)/p⌋`
//! otherwise). Both sides are quasi-polynomials of degree one that agree on every `n ≥ 0`, so
//! they agree everywhere. Taking out the most common increment `D` (as `D·n`, since `Σ_r F_r(n) =
//! n`) leaves a floor per residue whose increment differs, usually one. A quasi-polynomial in
//! several parameters is written this way when every coefficient is a constant plus a sum of
//! one-parameter steps in parameters its monomial does not contain, and the monomial times that
//! parameter has a constant coefficient (`M·⌈N/8⌉` is monomial `M` with a step in `N`).

use std::collections::BTreeMap;

use crate::quasi_n::{MultiQuasiPolynomial, class_count, class_of, monomial, residues_of};
use crate::symbolic::Fraction;

/// More floors than this in one step read worse than the listed coefficients.
const MAX_FLOORS_PER_STEP: usize = 3;

/// `Σ plain + Σ steps`: a quasi-polynomial as polynomial terms and floor steps.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FloorForm {
    /// Monomial → constant coefficient.
    plain: BTreeMap<Vec<u32>, Fraction>,
    /// `factor · (slope·n + Σ coefficient·F_r(n))` in parameter `parameter`.
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
struct Step {
    /// The monomial of the other parameters the step multiplies.
    factor: Vec<u32>,
    parameter: usize,
    period: i64,
    /// `(r, coefficient)`: `coefficient · F_r(n)`.
    floors: Vec<(i64, Fraction)>,
}

#[cfg(test)]
/// `F_r(n)`: the integers of `1..=n` congruent to `r` (for `n ≥ 0`; its quasi-polynomial
/// elsewhere).
fn counted(n: i64, r: i64, period: i64) -> i64 {
    if r == 0 {
        n.div_euclid(period)
    } else {
        (n + period - r).div_euclid(period)
    }
}

impl FloorForm {
    /// The floor form of `qp`, when its periodic part has one (see the module docs).
    pub(crate) fn of(qp: &MultiQuasiPolynomial) -> Option<FloorForm> {
        let classes: Vec<BTreeMap<Vec<u32>, Fraction>> =
            (0..qp.classes.len()).map(|c| qp.terms(c)).collect();
        let coefficient =
            |class: usize, e: &Vec<u32>| classes[class].get(e).copied().unwrap_or(Fraction::int(0));
        let mut monomials: Vec<Vec<u32>> = classes.iter().flat_map(|t| t.keys().cloned()).collect();
        monomials.sort();
        monomials.dedup();
        let mut form = FloorForm {
            plain: BTreeMap::new(),
            steps: Vec::new(),
        };
        // The monomials folded into a step as its slope: their coefficient must be constant,
        // and no two steps may share one (its split between them would be arbitrary).
        let mut slopes: Vec<Vec<u32>> = Vec::new();
        let mut steps = Vec::new();
        for m in &monomials {
            let base = coefficient(0, m);
            let mut steps_of_m = Vec::new();
            for (v, &period) in qp.periods.iter().enumerate().filter(|(_, p)| **p > 1) {
                let at = |r: i64| {
                    let mut residues = vec![0; qp.periods.len()];
                    residues[v] = r;
                    let minus_base = base.neg().ok()?;
                    coefficient(class_of(&residues, &qp.periods), m)
                        .add(minus_base)
                        .ok()
                };
                let g: Vec<Fraction> = (0..period).map(at).collect::<Option<_>>()?;
                if g.iter().all(|c| c.num == 0) {
                    continue;
                }
                if m[v] > 0 {
                    return None;
                }
                let mut with_v = m.clone();
                with_v[v] += 1;
                if slopes.contains(&with_v) {
                    return None;
                }
                slopes.push(with_v.clone());
                let slope = constant_coefficient(qp, &classes, &with_v)?;
                steps_of_m.push((v, period, g, slope));
            }
            // The coefficient must be the constant plus the steps, class by class.
            for class in 0..qp.classes.len() {
                let residues = residues_of(class, &qp.periods);
                let mut want = base;
                for (v, _, g, _) in &steps_of_m {
                    want = want.add(g[residues[*v] as usize]).ok()?;
                }
                if want != coefficient(class, m) {
                    return None;
                }
            }
            if base.num != 0 {
                form.plain.insert(m.clone(), base);
            }
            steps.extend(steps_of_m.into_iter().map(|s| (m.clone(), s)));
        }
        for s in &slopes {
            form.plain.remove(s);
        }
        for (m, (v, period, g, slope)) in steps {
            form.add_step(&m, v, period, &g, slope)?;
        }
        Some(form)
    }

    /// `m · (L·n + g(n mod p))` as `m · (D·n + Σ floors)`, `D·n` going to the plain terms.
    fn add_step(
        &mut self,
        m: &[u32],
        v: usize,
        period: i64,
        g: &[Fraction],
        slope: Fraction,
    ) -> Option<()> {
        let p = period as usize;
        let increments: Vec<Fraction> = (0..p)
            .map(|r| {
                let previous = g[(r + p - 1) % p];
                slope.add(g[r]).and_then(|x| x.add(previous.neg()?)).ok()
            })
            .collect::<Option<_>>()?;
        let common = most_common(&increments);
        let floors: Vec<(i64, Fraction)> = increments
            .iter()
            .enumerate()
            .filter(|(_, d)| **d != common)
            .map(|(r, d)| Some((r as i64, d.add(common.neg().ok()?).ok()?)))
            .collect::<Option<_>>()?;
        if floors.len() > MAX_FLOORS_PER_STEP {
            return None;
        }
        if common.num != 0 {
            let mut with_v = m.to_vec();
            with_v[v] += 1;
            self.plain.insert(with_v, common);
        }
        self.steps.push(Step {
            factor: m.to_vec(),
            parameter: v,
            period,
            floors,
        });
        Some(())
    }

    /// The value at `point` (for tests: the form must equal its quasi-polynomial).
    #[cfg(test)]
    pub(crate) fn at(&self, point: &[i64]) -> Fraction {
        let monomial_at = |e: &[u32]| {
            e.iter()
                .zip(point)
                .fold(1i128, |acc, (&k, &v)| acc * i128::from(v).pow(k))
        };
        let mut sum = Fraction::int(0);
        for (e, c) in &self.plain {
            sum = sum
                .add(c.mul(Fraction::int(monomial_at(e))).unwrap())
                .unwrap();
        }
        for s in &self.steps {
            for (r, c) in &s.floors {
                let f = i128::from(counted(point[s.parameter], *r, s.period));
                let term = c.mul(Fraction::int(f * monomial_at(&s.factor))).unwrap();
                sum = sum.add(term).unwrap();
            }
        }
        sum
    }

    /// `3·⌈X/4⌉ + N·M − 1`: polynomial terms by degree, then floors (positive first), then
    /// the constant.
    pub(crate) fn render(&self, names: &[&str]) -> String {
        let degree = |e: &Vec<u32>| e.iter().sum::<u32>();
        let mut plain: Vec<(&Vec<u32>, &Fraction)> = self.plain.iter().collect();
        plain.sort_by(|a, b| degree(b.0).cmp(&degree(a.0)).then(b.0.cmp(a.0)));
        let constant = plain
            .iter()
            .position(|(e, _)| degree(e) == 0)
            .map(|i| plain.remove(i).1.to_string());
        let mut floors: Vec<(Fraction, String)> = Vec::new();
        for s in &self.steps {
            let name = names[s.parameter];
            for (r, c) in &s.floors {
                let floor = match (r, s.period - r) {
                    (0, _) => format!("⌊{name}/{}⌋", s.period),
                    (_, shift) if shift == s.period - 1 => format!("⌈{name}/{}⌉", s.period),
                    (_, shift) => format!("⌊({name} + {shift})/{}⌋", s.period),
                };
                let factor = monomial(&s.factor, names);
                let factor = if factor.is_empty() {
                    floor
                } else {
                    format!("{factor}·{floor}")
                };
                floors.push((*c, factor));
            }
        }
        floors.sort_by_key(|(c, _)| c.num < 0);
        let mut terms: Vec<String> = plain
            .iter()
            .map(|(e, c)| times(&c.to_string(), &monomial(e, names)))
            .collect();
        terms.extend(floors.iter().map(|(c, f)| times(&c.to_string(), f)));
        terms.extend(constant);
        joined(terms)
    }
}

/// The coefficient of `e`, when the same in every class.
fn constant_coefficient(
    qp: &MultiQuasiPolynomial,
    classes: &[BTreeMap<Vec<u32>, Fraction>],
    e: &Vec<u32>,
) -> Option<Fraction> {
    let first = classes[0].get(e).copied().unwrap_or(Fraction::int(0));
    (0..class_count(&qp.periods))
        .all(|c| classes[c].get(e).copied().unwrap_or(Fraction::int(0)) == first)
        .then_some(first)
}

/// The value most often in `values`; on a tie, zero if it is one, else the first.
fn most_common(values: &[Fraction]) -> Fraction {
    let tally = |v: &Fraction| values.iter().filter(|x| *x == v).count();
    let best = values.iter().map(tally).max().unwrap_or(0);
    let zero = Fraction::int(0);
    if values.contains(&zero) && tally(&zero) == best {
        return zero;
    }
    values
        .iter()
        .find(|v| tally(v) == best)
        .copied()
        .unwrap_or(zero)
}

/// `coefficient·factor`, without a unit coefficient or an empty factor.
pub(crate) fn times(coefficient: &str, factor: &str) -> String {
    match (coefficient, factor) {
        (c, "") => c.to_owned(),
        ("1", f) => f.to_owned(),
        ("-1", f) => format!("-{f}"),
        (c, f) => format!("{c}·{f}"),
    }
}

/// Terms as a sum, `a - b` rather than `a + -b`; `0` when there is none.
pub(crate) fn joined(terms: Vec<String>) -> String {
    if terms.is_empty() {
        return "0".into();
    }
    terms.join(" + ").replace("+ -", "- ")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::quasi_n::Terms;

    /// `Σ_k c_k · m_k · F_{r_k}(n_{v_k})` plus a polynomial, built as a quasi-polynomial in two
    /// parameters from its values' definition.
    fn quasi(
        periods: [i64; 2],
        steps: &[(i64, usize, i64, u32)],
        plain: &[(i64, [u32; 2])],
    ) -> MultiQuasiPolynomial {
        // Each F_r(n) is n/p − (its fractional part), a quasi-polynomial of degree one.
        let classes = (0..class_count(&periods))
            .map(|class| {
                let residues = residues_of(class, &periods);
                let mut terms = Terms::new();
                let mut add = |e: Vec<u32>, c: Fraction| {
                    let now = terms.get(&e).copied().unwrap_or(Fraction::int(0));
                    terms.insert(e, now.add(c).unwrap());
                };
                for &(c, v, r, other_power) in steps {
                    let p = periods[v];
                    let n = residues[v];
                    // F_r(n) = (n − n mod p)/p + [n mod p ≥ r > 0] + ... exactly: value at the
                    // residue minus n/p at it, plus n/p.
                    let at_residue = Fraction::int(i128::from(counted(n, r, p)));
                    let offset = at_residue
                        .add(Fraction::new(-i128::from(n), i128::from(p)).unwrap())
                        .unwrap();
                    let mut e = [0u32; 2];
                    e[1 - v] = other_power;
                    add(
                        e.to_vec(),
                        offset.mul(Fraction::int(i128::from(c))).unwrap(),
                    );
                    e[v] = 1;
                    add(
                        e.to_vec(),
                        Fraction::new(i128::from(c), i128::from(p)).unwrap(),
                    );
                }
                for &(c, e) in plain {
                    add(e.to_vec(), Fraction::int(i128::from(c)));
                }
                terms
            })
            .collect();
        MultiQuasiPolynomial::from_terms(periods.to_vec(), classes)
    }

    #[test]
    fn the_spec_closed_form_is_written_with_ceilings() {
        // ⌈Z/4⌉ − ⌈X/4⌉: F_1 is the ceiling.
        let qp = quasi([4, 4], &[(1, 1, 1, 0), (-1, 0, 1, 0)], &[]);
        let form = FloorForm::of(&qp).expect("a floor form");
        assert_eq!(form.render(&["X", "Z"]), "⌈Z/4⌉ - ⌈X/4⌉");
        // 3⌊X/4⌋ + N·M − 1.
        let qp = quasi([4, 1], &[(3, 0, 0, 0)], &[(1, [1, 1]), (-1, [0, 0])]);
        assert_eq!(qp.render(&["X", "M"]), "X·M + 3·⌊X/4⌋ - 1");
    }

    #[test]
    fn a_step_times_another_parameter() {
        // M·⌈N/8⌉.
        let qp = quasi([8, 1], &[(1, 0, 1, 1)], &[]);
        assert_eq!(qp.render(&["N", "M"]), "M·⌈N/8⌉");
    }

    #[test]
    fn a_periodic_product_is_listed() {
        // Z·⌊Z/2⌋ has a periodic linear coefficient: no floor form.
        let mut even = Terms::new();
        even.insert(vec![2], Fraction::new(1, 2).unwrap());
        let mut odd = even.clone();
        odd.insert(vec![1], Fraction::new(-1, 2).unwrap());
        let qp = MultiQuasiPolynomial::from_terms(vec![2], vec![even, odd]);
        assert!(FloorForm::of(&qp).is_none());
        assert_eq!(qp.render(&["Z"]), "1/2·Z^2 + [0, -1/2]·Z  ([…] by Z mod 2)");
    }

    proptest! {
        /// Whatever floor form is found equals the quasi-polynomial at every point.
        #[test]
        fn floor_forms_are_exact(
            px in 0u32..4, pz in 0u32..4,
            steps in proptest::collection::vec((-3i64..4, 0usize..2, 0i64..8, 0u32..2), 0..4),
            plain in proptest::collection::vec((-3i64..4, 0u32..3, 0u32..3), 0..4),
        ) {
            let periods = [1i64 << px, 1i64 << pz];
            let steps: Vec<(i64, usize, i64, u32)> = steps
                .into_iter()
                .map(|(c, v, r, k)| (c, v, r % periods[v], k))
                .collect();
            let plain: Vec<(i64, [u32; 2])> = plain.into_iter().map(|(c, a, b)| (c, [a, b])).collect();
            let qp = quasi(periods, &steps, &plain);
            if let Some(form) = FloorForm::of(&qp) {
                for x in -9..9 {
                    for z in -9..9 {
                        prop_assert_eq!(form.at(&[x, z]), qp.at(&[x, z]).unwrap(), "at {} {}", x, z);
                    }
                }
            }
            // Single-parameter steps without products always have a floor form.
            if steps.iter().all(|s| s.3 == 0) && plain.iter().all(|p| p.1[0] + p.1[1] <= 1) {
                prop_assert!(steps.len() > 1 || FloorForm::of(&qp).is_some());
            }
        }
    }
}
