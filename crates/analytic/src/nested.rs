//! Counts as piecewise quasi-polynomials in several parameters, fitted one parameter at a time.
//!
//! A count in parameters `(X, Z)` is, for each fixed `X`, a piecewise quasi-polynomial in `Z`
//! ([`crate::fit_formulas`] finds it: its pieces' bounds, and per piece and residue class of `Z`
//! a polynomial). On a chamber of the parameter space the count is one quasi-polynomial in both,
//! so as `X` moves inside a range, every number of that fit (each bound, each coefficient) is a
//! quasi-polynomial in `X`. The method: fit in `Z` at each `X` the fitting asks for, write the
//! fit as a vector of integers (coefficients times a scale that clears their denominators) at
//! the periods of a few neighbouring values' fits (its shape), and fit those vectors in `X` as
//! series of their own. A formula in `X` holds at a value when the fit in `Z` it gives there
//! equals that value's own fit at every point that fit checked, so values whose pieces in `Z`
//! were cut differently (too short, near the lowest values, to fit a period) agree when their
//! counts do. Below the ranges where formulas in `X` hold, each `X` keeps its own chambers.
//! Three parameters nest the same way, but rarely fit: near the lowest values the middle
//! parameter's pieces change in number with the outer value. The result is a list of
//! [`Chamber`]s: per parameter, a lowest and a highest value that are formulas in the
//! parameters before it (`Z ≥ 4⌈X/4⌉ − 3`), and the count on it.
//!
//! What is checked: every fit in `Z` checks every `Z` from the lowest value to the top of its
//! windows, which start past `2·|X|` and a few periods (breakpoints such as `Z = X` lie
//! below), or to the top of a range of interest; the fit in `X` checks every `X` the same way,
//! each with its whole fit in `Z`. So the formulas equal the exact counts at every point of a
//! region that [`NestedFormulas::checked`] bounds from inside; beyond it (without a range of
//! interest) they are the counts' quasi-polynomials if no breakpoint lies further out.
//!
//! Why not symbolic counting: see [`crate::symbolic`]; the counts are exact at any point in time
//! independent of the values, which is what interpolation needs.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::AnalyticError;
use crate::quasi_n::{MultiQuasiPolynomial, Terms, class_count, class_of, residues_of};
use crate::symbolic::{
    Counts, FitOptions, Formula, Fraction, MAX_LOWER_PIECES, QuasiPolynomial, fit_below,
    fit_counts, fit_formulas,
};

/// Where one formula holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chamber {
    /// Per parameter, its lowest value (`None`: unbounded below), a formula in the parameters
    /// before it.
    pub lowest: Vec<Option<MultiQuasiPolynomial>>,
    /// Per parameter, its highest value (`None`: unbounded above).
    pub highest: Vec<Option<MultiQuasiPolynomial>>,
    /// The count on the chamber.
    pub value: MultiQuasiPolynomial,
}

impl Chamber {
    /// Whether `point` lies in the chamber.
    pub fn contains(&self, point: &[i64]) -> Result<bool, AnalyticError> {
        if point.len() != self.lowest.len() || point.len() != self.highest.len() {
            return Err(AnalyticError::Program(format!(
                "a point of {} values for formulas in {} parameters",
                point.len(),
                self.lowest.len()
            )));
        }
        for (i, &v) in point.iter().enumerate() {
            let v = i128::from(v);
            if let Some(low) = &self.lowest[i] {
                if v < low.at_integer(point)? {
                    return Ok(false);
                }
            }
            if let Some(high) = &self.highest[i] {
                if v > high.at_integer(point)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Every formula of the chamber, bounds first.
    fn formulas(&self) -> impl Iterator<Item = &MultiQuasiPolynomial> {
        self.lowest
            .iter()
            .chain(&self.highest)
            .flatten()
            .chain(std::iter::once(&self.value))
    }
}

/// One count as chambers, and the region checked against exact counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NestedFormulas {
    /// The chambers, the outermost parameter's highest range first.
    pub chambers: Vec<Chamber>,
    /// Per parameter, a range such that every point of their product was checked.
    pub checked: Vec<(i64, i64)>,
}

impl NestedFormulas {
    /// The count at `point`.
    pub fn at(&self, point: &[i64]) -> Result<i128, AnalyticError> {
        for chamber in &self.chambers {
            if chamber.contains(point)? {
                return chamber.value.at_integer(point);
            }
        }
        Err(AnalyticError::Program(format!(
            "no formula covers the point {point:?}"
        )))
    }
}

/// About how many exact counts [`fit_nested`] takes with these options: each parameter's
/// values from its lowest to its window's start (or to its highest value of interest), the
/// inner ones' windows starting past twice the outer values (the windows themselves and the far
/// checks add a few periods more).
pub fn points_to_check(options: &[FitOptions]) -> u128 {
    let mut outer_sum = 0u128;
    let mut points = 1u128;
    for o in options {
        if let Some(highest) = o.highest {
            let span = i128::from(highest) - i128::from(o.lowest) + 1;
            points = points.saturating_mul(span.max(1) as u128);
            continue;
        }
        let start = o.start.max(0) as u128;
        let span = start.max(2 * outer_sum) - o.lowest.clamp(0, o.start.max(0)) as u128;
        points = points.saturating_mul(span.max(1));
        outer_sum += start;
    }
    points
}

/// Every series' exact count at a point of the parameters.
pub type PointCounts<'a> = dyn FnMut(&[i64]) -> Result<Vec<i128>, AnalyticError> + 'a;

/// One formula per series in the parameters `options` describe (outermost first; each
/// parameter's fitting window, degree and periods), from `count(point)`, every series' exact
/// value at a point. The innermost parameter's fit is shared by all series (its breakpoints
/// are theirs together); each series is fitted in the outer parameters on its own.
pub fn fit_nested(
    series: usize,
    options: &[FitOptions],
    count: &mut PointCounts<'_>,
) -> Result<Vec<NestedFormulas>, AnalyticError> {
    let Some((outer, inner)) = options.split_first() else {
        return Err(AnalyticError::Program("formulas in no parameter".into()));
    };
    if inner.is_empty() {
        let formulas = fit_formulas(series, *outer, |n| count(&[n]))?;
        let highest = outer.highest;
        return Ok(formulas.iter().map(|f| one_parameter(f, highest)).collect());
    }
    let mut fits = Outer {
        series,
        inner,
        scale: Scale::new(inner),
        selected: 0,
        shape: Shape(Vec::new()),
        fits: HashMap::new(),
        count,
    };
    // The outer fit starts at its windows: the top of the range of interest, or the start.
    let first = outer.highest.unwrap_or(outer.start);
    let window: Vec<i64> = match outer.highest {
        Some(h) => (h.saturating_sub(REFERENCE_VALUES - 1).max(outer.lowest)..=h)
            .rev()
            .collect(),
        None => (outer.start..outer.start.saturating_add(REFERENCE_VALUES)).collect(),
    };
    if fits.fit(first)?.is_none() {
        return Err(AnalyticError::NoFormula(format!(
            "no formula in the inner parameters at the outer value {first}"
        )));
    }
    // Each series is fitted in the outer parameter on its own (the inner fits are shared):
    // one series' breakpoint in X does not cut every other series' formula there.
    let mut out = Vec::with_capacity(series);
    for s in 0..series {
        fits.selected = s;
        let Some(shape) = fits.reference_shape(window.iter().copied())? else {
            return Err(AnalyticError::NoFormula("no inner formula to fit".into()));
        };
        fits.shape = shape;
        let leaves = fits.shape.leaves(&fits.scale);
        let formulas = match fit_counts(leaves, *outer, &mut fits) {
            Ok(formulas) => formulas,
            // A series with no formula in the outer parameter (a period longer than those
            // tried) keeps its fits in the inner ones, one per outer value, so that the other
            // series' formulas are not lost with it.
            Err(AnalyticError::NoFormula(_)) => {
                let top = outer.highest.unwrap_or(outer.start);
                for x in outer.lowest..=top {
                    fits.fit(x)?;
                }
                out.push(assemble(&fits, &[], outer.lowest, top)?);
                continue;
            }
            Err(e) => return Err(e),
        };
        let ranges = outer_ranges(&formulas, &mut fits, *outer)?;
        out.push(assemble(
            &fits,
            &ranges,
            outer.lowest,
            formulas[0].verified_to,
        )?);
    }
    Ok(out)
}

/// One range of the outer parameter: its bounds (the top one open above), the formulas of the
/// inner fit's numbers on it, and the inner fit's shape there.
type OuterRange = (i64, Option<i64>, Vec<QuasiPolynomial>, Shape);

/// The ranges of the outer fit: the top one and those below it of the same inner shape, then
/// more below, each with the inner shape found just under the range above (a chamber of
/// another shape: the inner fit has more pieces there), as long as formulas fit.
fn outer_ranges(
    formulas: &[Formula],
    fits: &mut Outer<'_>,
    options: FitOptions,
) -> Result<Vec<OuterRange>, AnalyticError> {
    let first = &formulas[0];
    let leaves = |pick: &dyn Fn(&Formula) -> &QuasiPolynomial| {
        formulas.iter().map(|f| pick(f).clone()).collect::<Vec<_>>()
    };
    let mut ranges: Vec<OuterRange> = vec![(
        first.holds_from,
        options.highest,
        leaves(&|f| &f.quasi_polynomial),
        fits.shape.clone(),
    )];
    for (k, piece) in first.lower.iter().enumerate() {
        let qps = leaves(&|f| &f.lower[k].quasi_polynomial);
        ranges.push((piece.from, Some(piece.to), qps, fits.shape.clone()));
    }
    let mut upper = first.lower.last().map_or(first.holds_from, |p| p.from);
    while upper > options.lowest && ranges.len() <= MAX_LOWER_PIECES {
        let below = (upper - REFERENCE_VALUES).max(options.lowest)..upper;
        let Some(shape) = fits.reference_shape(below.rev())? else {
            break;
        };
        if shape == fits.shape {
            break;
        }
        fits.shape = shape;
        let leaves = fits.shape.leaves(&fits.scale);
        let Some((from, qps)) = fit_below(leaves, upper, options, fits)? else {
            break;
        };
        ranges.push((from, Some(upper - 1), qps, fits.shape.clone()));
        upper = from;
    }
    Ok(ranges)
}

/// The counts of the outer parameter: at each value, the inner parameters' fit, as numbers
/// when it has the reference's shape; and a formula agrees at a value when the inner formulas
/// it gives there equal that fit at every point the fit checked (so an outer value whose fit
/// was cut into other pieces, for want of room below a breakpoint, still agrees when the
/// values do).
struct Outer<'a> {
    series: usize,
    inner: &'a [FitOptions],
    scale: Scale,
    /// The series being fitted in the outer parameter, and its shape at the reference value.
    selected: usize,
    shape: Shape,
    fits: HashMap<i64, Option<Vec<NestedFormulas>>>,
    count: &'a mut PointCounts<'a>,
}

/// Outer values whose inner fits set a range's shape: a formula's period may drop at one value
/// (a coefficient that vanishes there), not at all of a few consecutive ones.
const REFERENCE_VALUES: i64 = 4;

impl Outer<'_> {
    /// The selected series' shape over the outer values `xs`: the first fit's, each period
    /// raised to a multiple of the others' of the same structure.
    fn reference_shape(
        &mut self,
        xs: impl Iterator<Item = i64>,
    ) -> Result<Option<Shape>, AnalyticError> {
        let mut shape: Option<Shape> = None;
        for x in xs {
            let selected = self.selected;
            let Some(fit) = self.fit(x)? else {
                continue;
            };
            let found = Shape::of(&fit[selected]);
            shape = match shape {
                None => Some(found),
                Some(s) => Some(s.widened(&found).unwrap_or(s)),
            };
        }
        Ok(shape)
    }

    /// The inner parameters' fit at the outer value `x` (`None`: no formula fits there).
    fn fit(&mut self, x: i64) -> Result<Option<&Vec<NestedFormulas>>, AnalyticError> {
        if !self.fits.contains_key(&x) {
            // Breakpoints of the inner parameters follow the outer ones (`Z = X`): their
            // windows start past twice the outer values, and a few periods more.
            let shifted: Vec<FitOptions> = self
                .inner
                .iter()
                .map(|o| {
                    if o.highest.is_some() {
                        // A range of interest is the same whatever the outer values.
                        return *o;
                    }
                    let past = x.saturating_abs().saturating_mul(2);
                    let start = o.start.max(past.saturating_add(4 * o.max_period.max(16)));
                    FitOptions { start, ..*o }
                })
                .collect();
            let count = &mut *self.count;
            let mut at_x = |rest: &[i64]| {
                let mut point = vec![x];
                point.extend(rest);
                count(&point)
            };
            let fit = match fit_nested(self.series, &shifted, &mut at_x) {
                Ok(fit) => Some(fit),
                Err(AnalyticError::NoFormula(_)) => None,
                Err(e) => return Err(e),
            };
            self.fits.insert(x, fit);
        }
        Ok(self.fits.get(&x).and_then(Option::as_ref))
    }
}

impl Counts for Outer<'_> {
    fn value(&mut self, x: i64) -> Result<Option<Vec<i128>>, AnalyticError> {
        let (scale, selected) = (self.scale, self.selected);
        let shape = self.shape.clone();
        let Some(fit) = self.fit(x)? else {
            return Ok(None);
        };
        encode(&fit[selected], &shape, &scale)
    }

    fn agrees(&mut self, qps: &[QuasiPolynomial], x: i64) -> Result<bool, AnalyticError> {
        let leaves = qps.iter().map(|qp| qp.at(x)).collect::<Result<Vec<_>, _>>();
        let Ok(leaves) = leaves else {
            return Ok(false);
        };
        let Ok(decoded) = decode_at(&self.shape, &self.scale, &leaves) else {
            return Ok(false);
        };
        let selected = self.selected;
        let Some(fit) = self.fit(x)? else {
            return Ok(false);
        };
        let fit = &fit[selected];
        if decoded.chambers == fit.chambers {
            return Ok(true);
        }
        let mut equal = true;
        for_each_point(&fit.checked, &mut |point| {
            equal = matches!((decoded.at(point), fit.at(point)), (Ok(a), Ok(b)) if a == b);
            equal
        });
        Ok(equal)
    }
}

/// Calls `visit` at every point of the product of `ranges` until it returns false.
fn for_each_point(ranges: &[(i64, i64)], visit: &mut dyn FnMut(&[i64]) -> bool) {
    fn walk(
        ranges: &[(i64, i64)],
        point: &mut Vec<i64>,
        visit: &mut dyn FnMut(&[i64]) -> bool,
    ) -> bool {
        let Some(((low, high), rest)) = ranges.split_first() else {
            return visit(point);
        };
        for v in *low..=*high {
            point.push(v);
            let more = walk(rest, point, visit);
            point.pop();
            if !more {
                return false;
            }
        }
        true
    }
    walk(ranges, &mut Vec::new(), visit);
}

/// The inner chambers that the numbers `leaves` (as [`encode`] writes them) describe.
fn decode_at(
    shape: &Shape,
    scale: &Scale,
    leaves: &[i128],
) -> Result<NestedFormulas, AnalyticError> {
    let constants: Vec<QuasiPolynomial> = leaves
        .iter()
        .map(|&v| QuasiPolynomial {
            period: 1,
            coefficients: vec![vec![Fraction::int(v)]],
        })
        .collect();
    let refs: Vec<&QuasiPolynomial> = constants.iter().collect();
    let mut next = 0;
    let mut chambers = Vec::with_capacity(shape.0.len());
    let drop_first =
        |bounds: &[Option<MultiQuasiPolynomial>]| -> Vec<Option<MultiQuasiPolynomial>> {
            bounds[1..]
                .iter()
                .map(|b| b.as_ref().map(MultiQuasiPolynomial::dropped))
                .collect()
        };
    for chamber_shape in &shape.0 {
        // Decoded over a dummy outer parameter, which is then dropped.
        let chamber = decode_chamber(chamber_shape, scale, &refs, &mut next, (None, None))?;
        chambers.push(Chamber {
            lowest: drop_first(&chamber.lowest),
            highest: drop_first(&chamber.highest),
            value: chamber.value.dropped(),
        });
    }
    Ok(NestedFormulas {
        chambers,
        checked: Vec::new(),
    })
}

/// A count in one parameter as chambers: the top range, each lower range, each value listed
/// below them; adjacent ranges with the same formula merged.
fn one_parameter(formula: &Formula, highest: Option<i64>) -> NestedFormulas {
    let constant = |v: i64| {
        Some(MultiQuasiPolynomial::constant(
            1,
            Fraction::int(i128::from(v)),
        ))
    };
    let mut chambers = vec![Chamber {
        lowest: vec![constant(formula.holds_from)],
        highest: vec![highest.and_then(constant)],
        value: MultiQuasiPolynomial::from_one(&formula.quasi_polynomial, 1, 0),
    }];
    let pieces = formula
        .lower
        .iter()
        .map(|p| (p.from, p.to, &p.quasi_polynomial));
    let values: Vec<(i64, QuasiPolynomial)> = formula
        .below
        .iter()
        .rev()
        .map(|&(n, c)| {
            let qp = QuasiPolynomial {
                period: 1,
                coefficients: vec![vec![Fraction::int(c)]],
            };
            (n, qp)
        })
        .collect();
    let below = values.iter().map(|(n, qp)| (*n, *n, qp));
    for (from, to, qp) in pieces.chain(below) {
        let value = MultiQuasiPolynomial::from_one(qp, 1, 0);
        let last = chambers.len() - 1;
        if chambers[last].value == value {
            chambers[last].lowest[0] = constant(from);
            continue;
        }
        chambers.push(Chamber {
            lowest: vec![constant(from)],
            highest: vec![constant(to)],
            value,
        });
    }
    NestedFormulas {
        chambers,
        checked: vec![(lowest_of(formula), formula.verified_to)],
    }
}

fn lowest_of(formula: &Formula) -> i64 {
    formula
        .below
        .first()
        .map(|(n, _)| *n)
        .or(formula.lower.last().map(|p| p.from))
        .unwrap_or(formula.holds_from)
}

/// What must be the same at two outer values for one series' fits to be one formula: per
/// chamber, which bounds exist (`2 × m` flags, `[0]` or `[1]`) and every formula's periods
/// (the value's last). A fit matches a shape when its structure is the same and its periods
/// divide the shape's: it is then written at the shape's periods.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shape(Vec<Vec<Vec<i64>>>);

impl Shape {
    fn of(fit: &NestedFormulas) -> Shape {
        Shape(
            fit.chambers
                .iter()
                .map(|chamber| {
                    let bounds = chamber.lowest.iter().chain(&chamber.highest);
                    bounds
                        .map(|b| vec![i64::from(b.is_some())])
                        .chain(chamber.formulas().map(|qp| qp.periods.clone()))
                        .collect()
                })
                .collect(),
        )
    }

    /// The shape with the periods of both, when the structures agree.
    fn widened(&self, other: &Shape) -> Option<Shape> {
        if self.0.len() != other.0.len() {
            return None;
        }
        let mut out = Vec::with_capacity(self.0.len());
        for (a, b) in self.0.iter().zip(&other.0) {
            let flags = 2 * a.last().map_or(0, Vec::len);
            if a.len() != b.len() || a[..flags.min(a.len())] != b[..flags.min(b.len())] {
                return None;
            }
            let chamber = a
                .iter()
                .zip(b)
                .enumerate()
                .map(|(k, (x, y))| match k < flags {
                    true => Some(x.clone()),
                    false => x.iter().zip(y).map(|(p, q)| lcm(*p, *q)).collect(),
                })
                .collect::<Option<Vec<Vec<i64>>>>()?;
            out.push(chamber);
        }
        Some(Shape(out))
    }

    /// How many numbers a fit of this shape is written as.
    fn leaves(&self, scale: &Scale) -> usize {
        let per_class = |periods: &[i64]| {
            scale.exponents(periods.len()).len() * crate::quasi_n::class_count(periods)
        };
        self.0
            .iter()
            .map(|chamber| {
                let flags = 2 * chamber.last().map_or(0, Vec::len);
                chamber[flags.min(chamber.len())..]
                    .iter()
                    .map(|p| per_class(p))
                    .sum::<usize>()
            })
            .sum()
    }
}

fn lcm(a: i64, b: i64) -> Option<i64> {
    let (mut x, mut y) = (a.max(1), b.max(1));
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a.max(1) / x).checked_mul(b.max(1))
}

/// The factor that makes every coefficient of the inner formulas an integer: a polynomial of
/// degree `d` that is an integer on every `n ≡ r (mod p)` has coefficients with denominators
/// dividing `d!·p^d`, and each level of nesting divides by its own such factor.
#[derive(Clone, Copy)]
struct Scale {
    degree: u32,
}

impl Scale {
    fn new(inner: &[FitOptions]) -> Scale {
        let degree = inner.iter().map(|o| o.max_degree).max().unwrap_or(0);
        Scale {
            degree: degree as u32,
        }
    }

    /// The factor for a formula of these periods.
    fn of(&self, periods: &[i64]) -> Result<i128, AnalyticError> {
        let factorial: i128 = (1..=i128::from(self.degree)).product();
        periods.iter().try_fold(1i128, |acc, &p| {
            i128::from(p)
                .checked_pow(self.degree)
                .and_then(|x| x.checked_mul(factorial))
                .and_then(|x| x.checked_mul(acc))
                .ok_or_else(|| AnalyticError::Program("a formula's scale overflows".into()))
        })
    }

    /// Every exponent vector of the dense layout: each exponent up to the degree (each
    /// parameter's own fit has at most that degree in it).
    fn exponents(&self, parameters: usize) -> Vec<Vec<u32>> {
        let top = self.degree;
        let mut all = vec![Vec::new()];
        for _ in 0..parameters {
            all = all
                .into_iter()
                .flat_map(|e| {
                    (0..=top).map(move |k| {
                        let mut e = e.clone();
                        e.push(k);
                        e
                    })
                })
                .collect();
        }
        all
    }
}

/// A fit's numbers as integers in a fixed order, written at `shape`'s periods; `None` when the
/// fit does not match the shape.
fn encode(
    fit: &NestedFormulas,
    shape: &Shape,
    scale: &Scale,
) -> Result<Option<Vec<i128>>, AnalyticError> {
    if shape.widened(&Shape::of(fit)).as_ref() != Some(shape) {
        return Ok(None);
    }
    let mut leaves = Vec::new();
    for (chamber, chamber_shape) in fit.chambers.iter().zip(&shape.0) {
        let periods = chamber_shape
            .iter()
            .rev()
            .take(chamber.formulas().count())
            .rev();
        for (qp, p) in chamber.formulas().zip(periods) {
            encode_one(&qp.with_periods(p), scale, &mut leaves)?;
        }
    }
    Ok(Some(leaves))
}

fn encode_one(
    qp: &MultiQuasiPolynomial,
    scale: &Scale,
    leaves: &mut Vec<i128>,
) -> Result<(), AnalyticError> {
    let factor = scale.of(&qp.periods)?;
    let exponents = scale.exponents(qp.parameters());
    for class in 0..qp.classes.len() {
        let terms = qp.terms(class);
        if terms.keys().any(|e| e.iter().any(|&k| k > scale.degree)) {
            return Err(AnalyticError::Program(
                "a formula's degree exceeds the fitting's".into(),
            ));
        }
        for e in &exponents {
            let c = terms.get(e).copied().unwrap_or(Fraction::int(0));
            let scaled = c.mul(Fraction::int(factor))?;
            if scaled.den != 1 {
                return Err(AnalyticError::Program(format!(
                    "a coefficient {c} is finer than the scale {factor}"
                )));
            }
            leaves.push(scaled.num);
        }
    }
    Ok(())
}

/// The selected series' chambers in all parameters: each range of its fit in the outer
/// parameter with the inner chambers' numbers as formulas in it, then each outer value below
/// those ranges with its own inner chambers.
fn assemble(
    outer: &Outer<'_>,
    ranges: &[OuterRange],
    lowest: i64,
    top_checked: i64,
) -> Result<NestedFormulas, AnalyticError> {
    let mut chambers = Vec::new();
    for (from, to, qps, shape) in ranges {
        let leaves: Vec<&QuasiPolynomial> = qps.iter().collect();
        let mut next = 0;
        for chamber_shape in &shape.0 {
            let range = (Some(*from), *to);
            chambers.push(decode_chamber(
                chamber_shape,
                &outer.scale,
                &leaves,
                &mut next,
                range,
            )?);
        }
    }
    let covered_from = ranges.last().map_or(top_checked.saturating_add(1), |r| r.0);
    let fit_at = |x: i64| outer.fits.get(&x).and_then(Option::as_ref);
    for x in (lowest..covered_from).rev() {
        let Some(fit) = fit_at(x) else {
            continue;
        };
        for chamber in &fit[outer.selected].chambers {
            // The outer parameter's bound, `x` itself, in all the parameters.
            let parameters = chamber.lowest.len() + 1;
            let at_x = Some(MultiQuasiPolynomial::constant(
                parameters,
                Fraction::int(i128::from(x)),
            ));
            chambers.push(Chamber {
                lowest: prepend(at_x.clone(), &chamber.lowest),
                highest: prepend(at_x.clone(), &chamber.highest),
                value: chamber.value.lifted(),
            });
        }
    }
    // Every point of this region was checked: the outer values from the lowest to the top of
    // the windows, each with the region its own fit checked; an outer value whose inner counts
    // fit no formula has no chamber, so the region starts above the highest such value.
    let top = top_checked;
    let from = (lowest..covered_from)
        .rev()
        .find(|&x| fit_at(x).is_none())
        .map_or(lowest, |gap| gap + 1);
    let mut checked = vec![(from, top)];
    let inner: Vec<&Vec<(i64, i64)>> = (from..=top)
        .filter_map(fit_at)
        .map(|fit| &fit[outer.selected].checked)
        .collect();
    if let Some(first) = inner.first() {
        for i in 0..first.len() {
            let low = inner.iter().map(|c| c[i].0).max().unwrap_or(0);
            let high = inner.iter().map(|c| c[i].1).min().unwrap_or(0);
            checked.push((low, high));
        }
    }
    Ok(NestedFormulas { chambers, checked })
}

/// `first` for the outer parameter, then the inner bounds lifted.
fn prepend(
    first: Option<MultiQuasiPolynomial>,
    bounds: &[Option<MultiQuasiPolynomial>],
) -> Vec<Option<MultiQuasiPolynomial>> {
    std::iter::once(first)
        .chain(
            bounds
                .iter()
                .map(|b| b.as_ref().map(MultiQuasiPolynomial::lifted)),
        )
        .collect()
}

/// One inner chamber over the outer range `from..=to`, its numbers read from `leaves` (one
/// formula in the outer parameter each) from position `next` on. The shape lists `2 × m`
/// presence flags (lowest bounds, then highest) and then the periods of each formula present,
/// the value last.
fn decode_chamber(
    chamber_shape: &[Vec<i64>],
    scale: &Scale,
    leaves: &[&QuasiPolynomial],
    next: &mut usize,
    outer_range: (Option<i64>, Option<i64>),
) -> Result<Chamber, AnalyticError> {
    let parameters = chamber_shape.last().map_or(0, Vec::len);
    let (flags, periods) = chamber_shape.split_at((2 * parameters).min(chamber_shape.len()));
    let mut formulas = Vec::with_capacity(periods.len());
    for p in periods {
        formulas.push(decode_one(p, scale, leaves, next)?);
    }
    let mut formulas = formulas.into_iter();
    let mut bounds = flags
        .iter()
        .map(|f| if f[0] == 1 { formulas.next() } else { None });
    let lowest: Vec<_> = (0..parameters).map(|_| bounds.next().flatten()).collect();
    let highest: Vec<_> = (0..parameters).map(|_| bounds.next().flatten()).collect();
    let value = formulas
        .next()
        .ok_or_else(|| AnalyticError::Program("a chamber without its formula".into()))?;
    let outer = |v: Option<i64>| {
        v.map(|v| MultiQuasiPolynomial::constant(parameters + 1, Fraction::int(i128::from(v))))
    };
    Ok(Chamber {
        lowest: std::iter::once(outer(outer_range.0))
            .chain(lowest)
            .collect(),
        highest: std::iter::once(outer(outer_range.1))
            .chain(highest)
            .collect(),
        value,
    })
}

/// An inner formula whose scaled coefficients are `leaves[next..]` (formulas in the outer
/// parameter), as one formula in the outer parameter and the inner ones.
fn decode_one(
    periods: &[i64],
    scale: &Scale,
    leaves: &[&QuasiPolynomial],
    next: &mut usize,
) -> Result<MultiQuasiPolynomial, AnalyticError> {
    let factor = scale.of(periods)?;
    let exponents = scale.exponents(periods.len());
    let outer_period = leaves.first().map_or(1, |l| l.period.max(1));
    let mut all_periods = vec![outer_period];
    all_periods.extend(periods);
    let mut classes: Vec<Terms> = vec![Terms::new(); class_count(&all_periods)];
    for inner_class in 0..class_count(periods) {
        for e in &exponents {
            let leaf = leaves
                .get(*next)
                .ok_or_else(|| AnalyticError::Program("fewer numbers than the shape".into()))?;
            *next += 1;
            for a in 0..outer_period {
                let mut residues = vec![a];
                residues.extend(residues_of(inner_class, periods));
                let class = class_of(&residues, &all_periods);
                let coefficients = &leaf.coefficients[(a % leaf.period.max(1)) as usize];
                for (i, c) in coefficients.iter().enumerate() {
                    let mut exponent = vec![i as u32];
                    exponent.extend(e);
                    let c = c.mul(Fraction::new(1, factor)?)?;
                    if c.num != 0 {
                        classes[class].insert(exponent, c);
                    }
                }
            }
        }
    }
    Ok(MultiQuasiPolynomial::from_terms(all_periods, classes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(start: i64) -> FitOptions {
        FitOptions {
            lowest: 0,
            start,
            max_degree: 1,
            max_period: 8,
            highest: None,
        }
    }

    /// `⌈Z/4⌉ − ⌈X/4⌉` above `Z = X`, zero below; and `⌊(min(X, Z) − 1)/4⌋`.
    fn counts(point: &[i64]) -> Vec<i128> {
        let (x, z) = (point[0], point[1]);
        let ceil4 = |n: i64| (n + 3).div_euclid(4);
        let first = if z >= x { ceil4(z) - ceil4(x) } else { 0 };
        let second = (x.min(z) - 1).div_euclid(4);
        vec![i128::from(first), i128::from(second)]
    }

    #[test]
    fn two_parameters_give_chambers_that_equal_the_counts() {
        let mut count = |p: &[i64]| Ok(counts(p));
        let fitted = fit_nested(2, &[options(16), options(16)], &mut count).unwrap();
        // Two chambers each: the diagonal (as 4⌈X/4⌉ − 3, where the formulas meet) splits them.
        for f in &fitted {
            assert_eq!(f.chambers.len(), 2, "{:?}", f.chambers);
        }
        for x in 0..120 {
            for z in 0..200 {
                let want = counts(&[x, z]);
                for (s, f) in fitted.iter().enumerate() {
                    assert_eq!(f.at(&[x, z]).unwrap(), want[s], "series {s} at ({x}, {z})");
                }
            }
        }
    }

    /// A coefficient that vanishes at some outer values (`X mod 4 = 0`) drops the inner
    /// formula's period there; the fit writes it at the period of its neighbours.
    #[test]
    fn a_coefficient_that_vanishes_at_some_values_still_fits() {
        let f = |x: i64, z: i64| i128::from(x.rem_euclid(4) * z.div_euclid(4));
        let mut count = |p: &[i64]| Ok(vec![f(p[0], p[1])]);
        let fitted = fit_nested(1, &[options(16), options(16)], &mut count).unwrap();
        let (xs, zs) = (fitted[0].checked[0], fitted[0].checked[1]);
        for x in xs.0..=xs.1 + 40 {
            for z in zs.0..=zs.1 + 40 {
                assert_eq!(fitted[0].at(&[x, z]).unwrap(), f(x, z), "({x}, {z})");
            }
        }
    }

    /// A series with no formula in the outer parameter (period 32, more than the 8 tried)
    /// keeps one fit per outer value, and the other series still get their formulas.
    #[test]
    fn a_series_without_an_outer_formula_keeps_its_values() {
        let f = |x: i64, z: i64| {
            let flag = i128::from(x.rem_euclid(32) == 5);
            vec![i128::from(z + x), flag * i128::from(z)]
        };
        let mut count = |p: &[i64]| Ok(f(p[0], p[1]));
        let fitted = fit_nested(2, &[options(16), options(16)], &mut count).unwrap();
        assert_eq!(fitted[0].chambers.len(), 1, "{:?}", fitted[0].chambers);
        let (xs, zs) = (fitted[1].checked[0], fitted[1].checked[1]);
        assert!(xs.1 >= 16 && zs.1 >= 16, "{:?}", fitted[1].checked);
        for x in xs.0..=xs.1 {
            for z in zs.0..=zs.1 {
                assert_eq!(fitted[1].at(&[x, z]).unwrap(), f(x, z)[1], "({x}, {z})");
            }
        }
    }

    /// An outer value whose inner counts fit no formula has no chamber, and the checked region
    /// starts above it.
    #[test]
    fn the_checked_region_leaves_out_values_without_a_formula() {
        let f = |x: i64, z: i64| i128::from(if x == 3 { z * z * z } else { z + x });
        let mut count = |p: &[i64]| Ok(vec![f(p[0], p[1])]);
        let fitted = fit_nested(1, &[options(16), options(16)], &mut count).unwrap();
        assert!(fitted[0].checked[0].0 > 3, "{:?}", fitted[0].checked);
        assert!(fitted[0].at(&[3, 5]).is_err());
        assert_eq!(fitted[0].at(&[2, 5]).unwrap(), 7);
    }
}

/// What a second model needs to be built on a thread of its own: the program and the level.
#[derive(Clone, Copy)]
pub struct Helper<'a> {
    /// The program the first model was built from.
    pub program: &'a crate::Program,
    /// The level.
    pub cache: crate::Cache,
    /// isl's operation bound per count ([`loopscope_polyhedral::Ctx::with_max_operations`]).
    pub max_operations: u64,
}

/// Every reference's accesses, compulsory, conflict misses and misses, then the total misses.
fn point_counts(
    model: &crate::Model<'_>,
    values: &[(&str, i64)],
) -> Result<Vec<i128>, AnalyticError> {
    let refs = model.evaluate_with(values, crate::Detail::default())?;
    let total: i128 = refs.iter().map(|r| r.compulsory + r.conflict).sum();
    let mut out: Vec<i128> = refs
        .iter()
        .flat_map(|r| {
            let misses = r.compulsory + r.conflict;
            [r.accesses, r.compulsory, r.conflict, misses]
        })
        .collect();
    out.push(total);
    Ok(out)
}

/// Every series' count at a point.
type Counted = Result<Vec<i128>, AnalyticError>;

/// How far below the point asked the helper looks for one not yet counted.
const HELPER_LOOKS_BELOW: i64 = 64;

/// Runs `fit` with a count that, for each point it computes, has the helper's model compute the
/// point below it in the innermost parameter meanwhile, and keeps that answer for when it is
/// asked. The models count the same sets, so the answers are the same whichever counts.
fn with_helper<T>(
    helper: Helper<'_>,
    counts: &(dyn Fn(&crate::Model<'_>, &[i64]) -> Counted + Sync),
    fit: impl FnOnce(&mut dyn FnMut(&crate::Model<'_>, &[i64]) -> Counted) -> Result<T, AnalyticError>,
) -> Result<T, AnalyticError> {
    use std::sync::mpsc;
    std::thread::scope(|scope| {
        let (ask, asked) = mpsc::channel::<Vec<i64>>();
        let (answer, answered) = mpsc::channel::<(Vec<i64>, Option<Vec<i128>>)>();
        // A helper the system refuses drops `asked` unused: no point is then sent to it.
        let _ = loopscope_polyhedral::isl_thread().spawn_scoped(scope, move || {
            let ctx = loopscope_polyhedral::Ctx::with_max_operations(helper.max_operations);
            let model = crate::Model::new(&ctx, helper.program, helper.cache).ok();
            for point in asked {
                let counted = model.as_ref().and_then(|m| counts(m, &point).ok());
                if answer.send((point, counted)).is_err() {
                    break;
                }
            }
        });
        let mut ahead: HashMap<Vec<i64>, Vec<i128>> = HashMap::new();
        // Every point either model has counted: the helper takes the first point below the
        // one asked that neither has (the fits end up counting every value from their windows
        // down, asked in the windows' order, then downwards).
        let mut done: std::collections::HashSet<Vec<i64>> = std::collections::HashSet::new();
        let result = fit(&mut |model, point| {
            if let Some(v) = ahead.remove(point) {
                return Ok(v);
            }
            done.insert(point.to_vec());
            let mut next = point.to_vec();
            let below = (1..=HELPER_LOOKS_BELOW).find_map(|k| {
                let last = next.last_mut()?;
                *last = point.last()?.checked_sub(k)?;
                (!done.contains(&next)).then(|| next.clone())
            });
            let sent = match below {
                Some(next) => {
                    done.insert(next.clone());
                    ask.send(next).is_ok()
                }
                None => false,
            };
            let here = counts(model, point);
            if sent {
                if let Ok((p, Some(v))) = answered.recv() {
                    ahead.insert(p, v);
                }
            }
            here
        });
        drop(ask);
        result
    })
}

/// One reference's counts as formulas in several parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceChambers {
    /// Position number, `P0`, `P1`, … (the kernel's reference order).
    pub position: String,
    /// Executions of the reference.
    pub accesses: NestedFormulas,
    /// Compulsory misses.
    pub compulsory: NestedFormulas,
    /// Conflict misses (capacity included, under LRU).
    pub conflict: NestedFormulas,
    /// All misses, fitted as a series of their own (so with chambers of their own).
    pub misses: NestedFormulas,
}

impl crate::Model<'_> {
    /// Every analysed reference's accesses, compulsory and conflict misses as formulas in the
    /// parameters `names` (outermost first, one [`FitOptions`] each), the others at their
    /// `fixed` values, fitted from exact counts (see the module docs); and the misses of all
    /// of them. Sums are fitted as series of their own: formulas on different chambers do not
    /// add up term by term.
    pub fn nested_formulas(
        &self,
        names: &[&str],
        fixed: &[(&str, i64)],
        options: &[FitOptions],
    ) -> Result<(Vec<ReferenceChambers>, NestedFormulas), AnalyticError> {
        self.nested_formulas_with(names, fixed, options, None)
    }

    /// [`crate::Model::nested_formulas`], with a `helper` model on a thread of its own counting the
    /// point the fit is likely to ask for next (the fits walk the innermost parameter one
    /// value at a time, downwards): both cores count.
    pub fn nested_formulas_with(
        &self,
        names: &[&str],
        fixed: &[(&str, i64)],
        options: &[FitOptions],
        helper: Option<Helper<'_>>,
    ) -> Result<(Vec<ReferenceChambers>, NestedFormulas), AnalyticError> {
        if names.len() != options.len() {
            return Err(AnalyticError::Program(
                "one set of fitting options per parameter".into(),
            ));
        }
        let counts = |model: &crate::Model<'_>, point: &[i64]| {
            let mut values = fixed.to_vec();
            values.extend(names.iter().copied().zip(point.iter().copied()));
            point_counts(model, &values)
        };
        let starts: Vec<i64> = options.iter().map(|o| o.start).collect();
        let mut values = fixed.to_vec();
        values.extend(names.iter().copied().zip(starts.iter().copied()));
        let positions: Vec<String> = self
            .evaluate_with(&values, crate::Detail::default())?
            .into_iter()
            .map(|r| r.position)
            .collect();
        let series = 4 * positions.len() + 1;
        let mut fitted = match helper {
            None => fit_nested(series, options, &mut |point| counts(self, point))?,
            Some(helper) => with_helper(helper, &counts, |count| {
                fit_nested(series, options, &mut |point| count(self, point))
            })?,
        };
        let total = fitted
            .pop()
            .ok_or_else(|| AnalyticError::Program("no total".into()))?;
        let references = positions
            .into_iter()
            .zip(fitted.chunks(4))
            .map(|(position, f)| ReferenceChambers {
                position,
                accesses: f[0].clone(),
                compulsory: f[1].clone(),
                conflict: f[2].clone(),
                misses: f[3].clone(),
            })
            .collect();
        Ok((references, total))
    }
}
