//! Miss counts as formulas in one parameter: quasi-polynomials found from exact counts.
//!
//! A count of integer points of a parametric set is, beyond its last breakpoint, a
//! quasi-polynomial in the parameter: a polynomial of degree at most the loop depth whose
//! coefficients repeat with some period (Ehrhart; Clauss, "Counting solutions to linear and
//! nonlinear constraints through Ehrhart polynomials", ICS 1996, finds them the same way). The
//! model counts exactly at any value in time independent of it, so the formula is interpolated
//! from counts: for each candidate period `P` (powers of two up to a bound), `degree + 1` counts
//! per residue class fix the polynomials, and one more per class and a second window further
//! up must agree before the formula is taken. Every value from where the formula starts to
//! hold to the top of the windows is then checked, so the formula is **verified exactly on a
//! stated range**; above it, it is the quasi-polynomial the counts follow if no breakpoint lies
//! higher, which the report says. Values below the start are listed as they are.
//!
//! Why interpolation: isl counts only by enumerating, barvinok (which counts symbolically) is
//! GPL and not packaged, and isl-rs does not expose isl's parametric vertices, the basis of a
//! symbolic counter of our own.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::AnalyticError;

/// A rational number, `num / den` with `den > 0` and no common factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fraction {
    /// Numerator.
    pub num: i128,
    /// Denominator, positive.
    pub den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn too_big() -> AnalyticError {
    AnalyticError::Program("a formula's coefficients do not fit in 128-bit integers".into())
}

impl Fraction {
    pub(crate) fn new(num: i128, den: i128) -> Result<Fraction, AnalyticError> {
        if den == 0 || num == i128::MIN || den == i128::MIN {
            return Err(too_big());
        }
        let g = gcd(num, den).max(1);
        let sign = if den < 0 { -1 } else { 1 };
        Ok(Fraction {
            num: sign * num / g,
            den: sign * den / g,
        })
    }

    pub(crate) fn int(v: i128) -> Fraction {
        Fraction { num: v, den: 1 }
    }

    pub(crate) fn neg(self) -> Result<Fraction, AnalyticError> {
        Fraction::new(self.num.checked_neg().ok_or_else(too_big)?, self.den)
    }

    pub(crate) fn add(self, o: Fraction) -> Result<Fraction, AnalyticError> {
        let num = self
            .num
            .checked_mul(o.den)
            .and_then(|a| o.num.checked_mul(self.den).and_then(|b| a.checked_add(b)));
        let den = self.den.checked_mul(o.den);
        Fraction::new(num.ok_or_else(too_big)?, den.ok_or_else(too_big)?)
    }

    pub(crate) fn mul(self, o: Fraction) -> Result<Fraction, AnalyticError> {
        let num = self.num.checked_mul(o.num).ok_or_else(too_big)?;
        let den = self.den.checked_mul(o.den).ok_or_else(too_big)?;
        Fraction::new(num, den)
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// `Σ_j c_j(n mod period) · n^j`: per residue class of the parameter, the polynomial's
/// coefficients, lowest degree first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuasiPolynomial {
    /// How often the coefficients repeat.
    pub period: i64,
    /// `coefficients[r][j]`: the coefficient of `n^j` when `n mod period = r`.
    pub coefficients: Vec<Vec<Fraction>>,
}

impl QuasiPolynomial {
    /// The value at `n`, when it is an integer that fits.
    pub fn at(&self, n: i64) -> Result<i128, AnalyticError> {
        let class = &self.coefficients[n.rem_euclid(self.period) as usize];
        let mut sum = Fraction::int(0);
        let mut power = Fraction::int(1);
        for c in class {
            sum = sum.add(c.mul(power)?)?;
            power = power.mul(Fraction::int(i128::from(n)))?;
        }
        if sum.den != 1 {
            return Err(AnalyticError::Program(format!(
                "the formula is not an integer at {n}"
            )));
        }
        Ok(sum.num)
    }

    /// Whether the two give the same value at every integer (periods may differ).
    pub fn equivalent(&self, other: &QuasiPolynomial) -> bool {
        let trimmed = |c: &[Fraction]| {
            let mut c = c.to_vec();
            while c.last().is_some_and(|f| f.num == 0) {
                c.pop();
            }
            c
        };
        let period = self.period.max(other.period);
        (0..period).all(|r| {
            let a = &self.coefficients[(r % self.period) as usize];
            let b = &other.coefficients[(r % other.period) as usize];
            trimmed(a) == trimmed(b)
        })
    }

    /// The formula in `name`: with floors where the periodic part allows (`⌈N/4⌉`, see
    /// [`crate::MultiQuasiPolynomial::render`]), else `1/2·N^2 + [0, -1/2]·N` where a bracket
    /// lists a coefficient per `N mod period`.
    pub fn render(&self, name: &str) -> String {
        crate::MultiQuasiPolynomial::from_one(self, 1, 0).render(&[name])
    }
}

/// A count as a formula: where it holds, and the exact values below that.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Formula {
    /// The formula.
    pub quasi_polynomial: QuasiPolynomial,
    /// The smallest value of the parameter from which the formula holds.
    pub holds_from: i64,
    /// Every value from [`Formula::holds_from`] to this one was checked against an exact count.
    pub verified_to: i64,
    /// Formulas of the ranges below `holds_from`, highest first, each verified at every value.
    #[serde(default)]
    pub lower: Vec<Piece>,
    /// Exact counts below the lowest formula, down to the lowest value asked for:
    /// `(value, count)`.
    pub below: Vec<(i64, i128)>,
}

/// A formula that holds on a bounded range of the parameter (every value checked).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The first value.
    pub from: i64,
    /// The last value.
    pub to: i64,
    /// The formula on `from..=to`.
    pub quasi_polynomial: QuasiPolynomial,
}

impl Formula {
    /// The count at `n`: the formula where it holds, the listed value below.
    pub fn at(&self, n: i64) -> Result<i128, AnalyticError> {
        if n >= self.holds_from {
            return self.quasi_polynomial.at(n);
        }
        if let Some(piece) = self.lower.iter().find(|p| (p.from..=p.to).contains(&n)) {
            return piece.quasi_polynomial.at(n);
        }
        self.below
            .iter()
            .find(|(v, _)| *v == n)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                AnalyticError::Program(format!("no count below the formula's range at {n}"))
            })
    }
}

/// How to search for formulas.
#[derive(Clone, Copy, Debug)]
pub struct FitOptions {
    /// The lowest parameter value of interest (below it, nothing is checked).
    pub lowest: i64,
    /// Where the fitting windows start: beyond every breakpoint, ideally.
    pub start: i64,
    /// Highest degree tried (the loop depth).
    pub max_degree: usize,
    /// Largest period tried (a power of two).
    pub max_period: i64,
    /// The highest value of interest, when the parameter has one (a loop bound that keeps the
    /// accesses inside their arrays): the windows then end there, every value from `lowest` to
    /// it is checked, and `start` is not used.
    pub highest: Option<i64>,
}

/// Fits one formula per series: `count(n)` gives every series' exact value at `n` (all series
/// at once, as the model evaluates every reference together). The formulas share a period and
/// degree (the smallest that fits every series) so their sum is a formula too.
pub fn fit_formulas(
    series: usize,
    options: FitOptions,
    count: impl FnMut(i64) -> Result<Vec<i128>, AnalyticError>,
) -> Result<Vec<Formula>, AnalyticError> {
    let mut counts = Cached {
        series,
        count,
        cache: std::collections::HashMap::new(),
    };
    fit_counts(series, options, &mut counts)
}

/// Exact counts to fit formulas to.
pub(crate) trait Counts {
    /// Every series' value at `n`, or `None` where the values have another shape (no formula
    /// in `n` holds there).
    fn value(&mut self, n: i64) -> Result<Option<Vec<i128>>, AnalyticError>;

    /// Whether the formulas give every series' count at `n`.
    fn agrees(&mut self, qps: &[QuasiPolynomial], n: i64) -> Result<bool, AnalyticError> {
        let Some(got) = self.value(n)? else {
            return Ok(false);
        };
        Ok(got.len() == qps.len()
            && qps
                .iter()
                .zip(&got)
                .all(|(qp, g)| qp.at(n).ok() == Some(*g)))
    }
}

/// Counts from a function, each value asked for once.
struct Cached<F> {
    series: usize,
    count: F,
    cache: std::collections::HashMap<i64, Option<Vec<i128>>>,
}

impl<F: FnMut(i64) -> Result<Vec<i128>, AnalyticError>> Counts for Cached<F> {
    fn value(&mut self, n: i64) -> Result<Option<Vec<i128>>, AnalyticError> {
        if let Some(v) = self.cache.get(&n) {
            return Ok(v.clone());
        }
        let v = (self.count)(n)?;
        if v.len() != self.series {
            return Err(AnalyticError::Program(
                "a count with the wrong length".into(),
            ));
        }
        self.cache.insert(n, Some(v.clone()));
        Ok(Some(v))
    }
}

/// [`fit_formulas`] on any [`Counts`].
pub(crate) fn fit_counts(
    series: usize,
    options: FitOptions,
    counts: &mut impl Counts,
) -> Result<Vec<Formula>, AnalyticError> {
    let degree = options.max_degree;
    if let Some(highest) = options.highest {
        // The top formula is the one just below the end of the range, like a lower piece's.
        let upper = highest.checked_add(1).ok_or_else(too_big)?;
        if let Some((holds_from, qps)) = fit_below(series, upper, options, counts)? {
            return pieces(qps, holds_from, highest, options, counts);
        }
    } else {
        let mut period = 1i64;
        while period <= options.max_period.max(1) {
            if let Some(qps) = try_fit(series, period, degree, options.start, true, counts)? {
                return finish(qps, options, counts);
            }
            period *= 2;
        }
    }
    Err(AnalyticError::NoFormula(format!(
        "no quasi-polynomial of degree ≤ {degree} and period ≤ {} fits the counts",
        options.max_period
    )))
}

/// Polynomials per residue class fitted on one window and checked on the next point of each
/// class (and, when `far`, on a second window further up), or `None`.
fn try_fit(
    series: usize,
    period: i64,
    degree: usize,
    start: i64,
    far: bool,
    counts: &mut impl Counts,
) -> Result<Option<Vec<QuasiPolynomial>>, AnalyticError> {
    let points = degree as i64 + 1;
    let mut qps: Vec<QuasiPolynomial> = (0..series)
        .map(|_| QuasiPolynomial {
            period,
            coefficients: Vec::new(),
        })
        .collect();
    for r in 0..period {
        let first = start + (r - start).rem_euclid(period);
        let xs: Vec<i64> = (0..points).map(|k| first + k * period).collect();
        let mut ys: Vec<Vec<i128>> = vec![Vec::new(); series];
        for &x in &xs {
            let Some(values) = counts.value(x)? else {
                return Ok(None);
            };
            for (s, v) in values.into_iter().enumerate() {
                ys[s].push(v);
            }
        }
        for (qp, y) in qps.iter_mut().zip(&ys) {
            qp.coefficients.push(interpolate(&xs, y)?);
        }
    }
    // One more point per class right after, and a second window further up.
    let far_start = start + 7 * period * (points + 1) + 3;
    let far_checks = if far {
        far_start..far_start + period
    } else {
        0..0
    };
    let checks = (start + points * period..start + (points + 1) * period).chain(far_checks);
    for n in checks {
        if !counts.agrees(&qps, n)? {
            return Ok(None);
        }
    }
    Ok(Some(qps))
}

/// Checks downwards from the window to find where the formulas start to hold, fits formulas
/// to the ranges below in turn, and lists the values left below them.
fn finish(
    qps: Vec<QuasiPolynomial>,
    options: FitOptions,
    counts: &mut impl Counts,
) -> Result<Vec<Formula>, AnalyticError> {
    let period = qps[0].period;
    let points = options.max_degree as i64 + 2;
    let verified_to = options.start + points * period - 1;
    for n in options.start..=verified_to {
        if !counts.agrees(&qps, n)? {
            return Err(AnalyticError::NoFormula(format!(
                "the fitted formula misses the count at {n}"
            )));
        }
    }
    let holds_from = first_agreeing(&qps, options.lowest, options.start, counts)?;
    pieces(qps, holds_from, verified_to, options, counts)
}

/// The formulas of the top range `holds_from..` (checked up to `verified_to`), those fitted
/// to the ranges below it in turn, and the values left below them.
fn pieces(
    qps: Vec<QuasiPolynomial>,
    holds_from: i64,
    verified_to: i64,
    options: FitOptions,
    counts: &mut impl Counts,
) -> Result<Vec<Formula>, AnalyticError> {
    let mut lower: Vec<(i64, i64, Vec<QuasiPolynomial>)> = Vec::new();
    let mut upper = holds_from;
    while upper > options.lowest && lower.len() < MAX_LOWER_PIECES {
        let Some((from, piece)) = fit_below(qps.len(), upper, options, counts)? else {
            break;
        };
        lower.push((from, upper - 1, piece));
        upper = from;
    }
    let mut below: Vec<Vec<(i64, i128)>> = vec![Vec::new(); qps.len()];
    for n in options.lowest..upper {
        for (b, v) in below.iter_mut().zip(counts.value(n)?.unwrap_or_default()) {
            b.push((n, v));
        }
    }
    Ok(qps
        .into_iter()
        .zip(below)
        .enumerate()
        .map(|(s, (quasi_polynomial, below))| Formula {
            quasi_polynomial,
            holds_from,
            verified_to,
            lower: lower
                .iter()
                .map(|(from, to, piece)| Piece {
                    from: *from,
                    to: *to,
                    quasi_polynomial: piece[s].clone(),
                })
                .collect(),
            below,
        })
        .collect())
}

/// Formulas below a breakpoint found by [`finish`] are looked for this many times at most; the
/// rest is listed value by value.
pub(crate) const MAX_LOWER_PIECES: usize = 8;

/// The lowest `n` in `lowest..=start` from which the formulas agree all the way up to `start`.
fn first_agreeing(
    qps: &[QuasiPolynomial],
    lowest: i64,
    start: i64,
    counts: &mut impl Counts,
) -> Result<i64, AnalyticError> {
    for n in (lowest..start).rev() {
        if !counts.agrees(qps, n)? {
            return Ok(n + 1);
        }
    }
    Ok(lowest)
}

/// A formula for the values just below `upper` (its window ends there, so it checks only
/// values below the breakpoint), and the lowest value from which it holds; `None` when no
/// period fits in the room left. Of the periods that fit, the one whose formula reaches
/// lowest is taken (the smallest of those): fewer pieces, and the same pieces wherever the
/// other parameters sit, which formulas in several parameters need (a step function fitted
/// as short constant runs would have as many pieces as steps).
pub(crate) fn fit_below(
    series: usize,
    upper: i64,
    options: FitOptions,
    counts: &mut impl Counts,
) -> Result<Option<(i64, Vec<QuasiPolynomial>)>, AnalyticError> {
    let points = options.max_degree as i64 + 2;
    let mut best: Option<(i64, Vec<QuasiPolynomial>)> = None;
    let mut period = 1i64;
    while period <= options.max_period.max(1) {
        let start = upper - points * period;
        if start < options.lowest {
            break;
        }
        if let Some(qps) = try_fit(series, period, options.max_degree, start, false, counts)? {
            let from = first_agreeing(&qps, options.lowest, start, counts)?;
            if best.as_ref().is_none_or(|(lowest, _)| from < *lowest) {
                best = Some((from, qps));
            }
            if from == options.lowest {
                break;
            }
        }
        period *= 2;
    }
    Ok(best)
}

/// The polynomial through `(xs[k], ys[k])` (distinct `xs`), coefficients lowest degree first,
/// by Lagrange's formula in exact rationals.
fn interpolate(xs: &[i64], ys: &[i128]) -> Result<Vec<Fraction>, AnalyticError> {
    let mut result = vec![Fraction::int(0); xs.len()];
    for (k, (&xk, &yk)) in xs.iter().zip(ys).enumerate() {
        // Π_{m≠k} (x − x_m) / (x_k − x_m), built as a coefficient vector.
        let mut basis = vec![Fraction::int(1)];
        for xm in xs
            .iter()
            .enumerate()
            .filter(|(m, _)| *m != k)
            .map(|(_, x)| *x)
        {
            let scale = Fraction::new(1, i128::from(xk) - i128::from(xm))?;
            let mut next = vec![Fraction::int(0); basis.len() + 1];
            for (j, c) in basis.iter().enumerate() {
                let c = c.mul(scale)?;
                next[j + 1] = next[j + 1].add(c)?;
                next[j] = next[j].add(c.mul(Fraction::int(-i128::from(xm)))?)?;
            }
            basis = next;
        }
        for (r, b) in result.iter_mut().zip(&basis) {
            *r = r.add(b.mul(Fraction::int(yk))?)?;
        }
    }
    while result.len() > 1 && result.last().is_some_and(|c| c.num == 0) {
        result.pop();
    }
    Ok(result)
}

/// One reference's counts as formulas in the parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceFormulas {
    /// Position number, `P0`, `P1`, … (the kernel's reference order).
    pub position: String,
    /// Executions of the reference.
    pub accesses: Formula,
    /// Compulsory misses.
    pub compulsory: Formula,
    /// Conflict misses (capacity included, under LRU).
    pub conflict: Formula,
    /// All misses: compulsory + conflict.
    pub misses: Formula,
}

impl Formula {
    /// The sum of two formulas fitted together (same period and range).
    pub fn plus(&self, other: &Formula) -> Result<Formula, AnalyticError> {
        let (a, b) = (&self.quasi_polynomial, &other.quasi_polynomial);
        if a.period != b.period || self.holds_from != other.holds_from {
            return Err(AnalyticError::Program(
                "formulas fitted apart cannot be added".into(),
            ));
        }
        if self.lower.len() != other.lower.len() {
            return Err(AnalyticError::Program(
                "formulas fitted apart cannot be added".into(),
            ));
        }
        Ok(Formula {
            quasi_polynomial: add_quasi(a, b)?,
            holds_from: self.holds_from,
            verified_to: self.verified_to.min(other.verified_to),
            lower: self
                .lower
                .iter()
                .zip(&other.lower)
                .map(|(x, y)| {
                    let sum = add_quasi(&x.quasi_polynomial, &y.quasi_polynomial)?;
                    Ok(Piece {
                        from: x.from,
                        to: x.to,
                        quasi_polynomial: sum,
                    })
                })
                .collect::<Result<Vec<_>, AnalyticError>>()?,
            below: self
                .below
                .iter()
                .zip(&other.below)
                .map(|((n, x), (_, y))| (*n, x + y))
                .collect(),
        })
    }
}

/// The coefficient-wise sum of two quasi-polynomials of the same period.
fn add_quasi(a: &QuasiPolynomial, b: &QuasiPolynomial) -> Result<QuasiPolynomial, AnalyticError> {
    if a.period != b.period {
        return Err(AnalyticError::Program(
            "formulas fitted apart cannot be added".into(),
        ));
    }
    let zero = Fraction::int(0);
    let coefficients = a
        .coefficients
        .iter()
        .zip(&b.coefficients)
        .map(|(x, y)| {
            (0..x.len().max(y.len()))
                .map(|j| x.get(j).unwrap_or(&zero).add(*y.get(j).unwrap_or(&zero)))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(QuasiPolynomial {
        period: a.period,
        coefficients,
    })
}

impl crate::Model<'_> {
    /// Every analysed reference's accesses, compulsory and conflict misses as formulas in the
    /// parameter `name`, the others at their `fixed` values, fitted from exact counts (see the
    /// module docs).
    pub fn formulas(
        &self,
        name: &str,
        fixed: &[(&str, i64)],
        options: FitOptions,
    ) -> Result<Vec<ReferenceFormulas>, AnalyticError> {
        let values = |n: i64| {
            let mut v = fixed.to_vec();
            v.push((name, n));
            v
        };
        // The formulas need the misses only, not every piece's third counts.
        let lean = crate::Detail::default();
        let first = self.evaluate_with(&values(options.start), lean)?;
        let positions: Vec<String> = first.iter().map(|r| r.position.clone()).collect();
        let fitted = fit_formulas(3 * positions.len(), options, |n| {
            Ok(self
                .evaluate_with(&values(n), lean)?
                .iter()
                .flat_map(|r| [r.accesses, r.compulsory, r.conflict])
                .collect())
        })?;
        positions
            .into_iter()
            .zip(fitted.chunks(3))
            .map(|(position, f)| {
                Ok(ReferenceFormulas {
                    position,
                    accesses: f[0].clone(),
                    compulsory: f[1].clone(),
                    conflict: f[2].clone(),
                    misses: f[1].plus(&f[2])?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(start: i64) -> FitOptions {
        FitOptions {
            lowest: 0,
            start,
            max_degree: 2,
            max_period: 16,
            highest: None,
        }
    }

    #[test]
    fn finds_a_ceiling_and_its_breakpoint() {
        // ⌈n/4⌉ − 3 from n = 12 on, something else below.
        let f = |n: i64| -> i128 {
            if n >= 12 {
                i128::from((n + 3).div_euclid(4) - 3)
            } else {
                i128::from(n % 3)
            }
        };
        let formulas = fit_formulas(1, options(40), |n| Ok(vec![f(n)])).unwrap();
        let formula = &formulas[0];
        assert_eq!(formula.quasi_polynomial.period, 4);
        assert_eq!(formula.holds_from, 12);
        assert_eq!(formula.quasi_polynomial.render("Z"), "⌈Z/4⌉ - 3");
        for n in 0..500 {
            assert_eq!(formula.at(n).unwrap(), f(n), "at {n}");
        }
    }

    #[test]
    fn a_breakpoint_gives_a_second_piece() {
        let f = |n: i64| i128::from(if n < 20 { 3 * n } else { n + 40 });
        let formulas = fit_formulas(1, options(64), |n| Ok(vec![f(n)])).unwrap();
        let formula = &formulas[0];
        assert_eq!(formula.holds_from, 20);
        assert_eq!(formula.quasi_polynomial.render("n"), "n + 40");
        assert_eq!(formula.lower.len(), 1, "{formula:?}");
        let piece = &formula.lower[0];
        assert_eq!((piece.from, piece.to), (0, 19));
        assert_eq!(piece.quasi_polynomial.render("n"), "3·n");
        assert!(formula.below.is_empty());
        for n in 0..300 {
            assert_eq!(formula.at(n).unwrap(), f(n), "at {n}");
        }
    }

    #[test]
    fn a_quadratic_without_period() {
        let f = |n: i64| i128::from(n * (n + 1) / 2);
        let formulas = fit_formulas(2, options(10), |n| Ok(vec![f(n), 2 * f(n)])).unwrap();
        assert_eq!(formulas[0].quasi_polynomial.period, 1);
        assert_eq!(formulas[0].quasi_polynomial.render("N"), "1/2·N^2 + 1/2·N");
        assert_eq!(formulas[1].quasi_polynomial.render("N"), "N^2 + N");
        assert_eq!(formulas[0].holds_from, 0);
    }

    #[test]
    fn a_range_of_interest_is_fitted_from_its_top_and_checked_throughout() {
        // ⌈n/4⌉ up to 40, then flat: within 0..=30 one formula, found at the range's end.
        let f = |n: i64| i128::from((n.min(40) + 3).div_euclid(4));
        let mut seen = Vec::new();
        let options = FitOptions {
            highest: Some(30),
            ..options(1000)
        };
        let formulas = fit_formulas(1, options, |n| {
            seen.push(n);
            Ok(vec![f(n)])
        })
        .unwrap();
        assert!(seen.iter().all(|n| (0..=30).contains(n)), "{seen:?}");
        assert_eq!(formulas[0].verified_to, 30);
        assert_eq!(formulas[0].holds_from, 0);
        assert_eq!(formulas[0].quasi_polynomial.render("n"), "⌈n/4⌉");
    }

    #[test]
    fn a_count_of_higher_degree_is_refused() {
        let err = fit_formulas(1, options(10), |n| Ok(vec![i128::from(n).pow(3)])).unwrap_err();
        assert!(err.to_string().contains("no quasi-polynomial"), "{err}");
    }
}
