//! Counting the points of an isl set at concrete parameter values, without enumerating them.
//!
//! The set is split into disjoint basic sets whose existential variables are all explicit floor
//! divisions `q = ⌊(a·x + g·q' + c)/d⌋`. Each division is *lifted* into a dimension of its own:
//! the polytope `{(x, q) : the basic set's rows, 0 ≤ a·x + g·q' + c − d·q ≤ d − 1}` has exactly
//! as many integer points as the basic set, because every `q` is a function of `x`. It has no
//! division left and is counted by [`IntPolytope`], whose cost does not depend on the bounds.
//!
//! Why lifting rather than splitting residues: the earlier counter wrote `x = P∘t + r` for every
//! residue `r` of the lcm `P` of the divisions' slope denominators, so that each division became
//! affine in `t`. `P` is the line size times the number of sets over the element size (512 per
//! dimension for a 32 KiB 8-way cache of doubles), so 2D and 3D kernels needed millions of
//! residue classes. Lifted, the same divisions are a few extra dimensions that take few values
//! (a tag or a set index varies slowly with the loop indices), which the sweep of
//! [`IntPolytope`] slices away cheaply. Measured on the bench kernels: the 2D stencil's L1 sets
//! at 180 × 180 count in 0.05 s instead of 1.6 s, and the levels that needed 2²¹ to 2⁴¹
//! residue classes now count in hundredths of a second.

use isl_rs as isl;

use crate::PolyError;
use crate::polytope::{IntPolytope, Work};
use crate::rational::{Res, add, ceil_div, floor_div, mul};
use crate::sets::isl_err;

/// One explicit division `⌊(dims·x + divs·q + constant) / denominator⌋`.
#[derive(Clone)]
struct Div {
    dims: Vec<i128>,
    divs: Vec<i128>,
    constant: i128,
    denominator: i128,
}

/// A basic set with parameters substituted: rows over `x` and the divisions.
struct QuasiBasicSet {
    dims: usize,
    divs: Vec<Div>,
    rows: Vec<QuasiRow>,
}

/// `x·x + q·divisions + constant ≥ 0` (or `= 0`).
#[derive(Clone)]
struct QuasiRow {
    x: Vec<i128>,
    q: Vec<i128>,
    constant: i128,
    equality: bool,
    /// A negated residue row: splitting it again would only give back the set it came from.
    negated: bool,
}

/// The points of `set` at the parameter `values`, each basic set's count allowed
/// `slice_limit` polytope slices.
pub(crate) fn count_isl_set(
    set: &isl::Set,
    values: &[(&str, i64)],
    slice_limit: u64,
) -> Result<i128, PolyError> {
    let bounded = set.is_bounded().map_err(isl_err("is_bounded"))?;
    let raw = set.copy().map_err(isl_err("copy"))?;
    let params = param_values(&raw, values)?;
    let fixed = fix_all(raw, &params)?;
    if !bounded && !fixed.is_bounded().map_err(isl_err("is_bounded"))? {
        return Err(PolyError::Unbounded {
            set: fixed.to_str().unwrap_or("?").to_string(),
        });
    }
    let mut total = 0i128;
    for bset in disjoint_basic_sets(fixed)? {
        let q = extract(&bset, &params)?;
        total = add(total, q.count(SPLITS, slice_limit)?, "count")?;
    }
    Ok(total)
}

/// The set as disjoint basic sets whose existential variables are explicit divisions.
fn disjoint_basic_sets(set: isl::Set) -> Res<Vec<isl::BasicSet>> {
    let list = set
        .compute_divs()
        .map_err(isl_err("compute_divs"))?
        .make_disjoint()
        .map_err(isl_err("make_disjoint"))?
        .get_basic_set_list()
        .map_err(isl_err("basic sets"))?;
    (0..list.size().map_err(isl_err("basic sets"))?)
        .map(|i| list.get_at(i).map_err(isl_err("basic sets")))
        .collect()
}

fn param_values(set: &isl::Set, values: &[(&str, i64)]) -> Res<Vec<i128>> {
    let n = set.dim(isl::DimType::Param).map_err(isl_err("dim"))?;
    (0..n)
        .map(|p| {
            let name = set
                .get_dim_name(isl::DimType::Param, p as u32)
                .map_err(isl_err("dim name"))?;
            values
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| *v as i128)
                .ok_or_else(|| PolyError::MissingParameter {
                    name: name.to_string(),
                })
        })
        .collect()
}

fn fix_all(mut set: isl::Set, params: &[i128]) -> Res<isl::Set> {
    for (p, &v) in params.iter().enumerate() {
        let val = isl::Val::int_from_si(&set.get_ctx(), v as i64).map_err(isl_err("value"))?;
        set = set
            .fix_val(isl::DimType::Param, p as u32, val)
            .map_err(isl_err("fix_val"))?;
    }
    Ok(set)
}

fn int_val(v: isl::Val, op: &'static str) -> Res<i128> {
    if !v.is_int().map_err(isl_err(op))? {
        return Err(PolyError::Isl {
            op,
            message: format!("expected an integer, got {}", v.to_str().unwrap_or("?")),
        });
    }
    Ok(v.get_num_si().map_err(isl_err(op))? as i128)
}

/// `Σ coefficient(kind, i) · scale` for the listed kinds, read through `get`.
fn coefficients(
    n: i32,
    get: impl Fn(i32) -> Result<isl::Val, isl::LibISLError>,
    scale: Option<&isl::Val>,
) -> Res<Vec<i128>> {
    (0..n)
        .map(|i| {
            let v = get(i).map_err(isl_err("coefficient"))?;
            let v = match scale {
                Some(s) => v
                    .mul(s.copy().map_err(isl_err("copy"))?)
                    .map_err(isl_err("coefficient"))?,
                None => v,
            };
            int_val(v, "coefficient")
        })
        .collect()
}

fn dot(a: &[i128], b: &[i128]) -> Res<i128> {
    a.iter().zip(b).try_fold(0i128, |s, (x, y)| {
        add(s, mul(*x, *y, "substitution")?, "substitution")
    })
}

/// An affine form over a basic set's dimensions, its divisions and its parameters, with integer
/// coefficients, as isl stores a constraint or a division's numerator.
pub(crate) struct LinearForm {
    pub dims: Vec<i128>,
    pub divs: Vec<i128>,
    pub params: Vec<i128>,
    pub constant: i128,
}

impl LinearForm {
    /// The form with the parameters replaced by their values: `(dims, divs, constant)`.
    fn at(&self, params: &[i128]) -> Res<(Vec<i128>, Vec<i128>, i128)> {
        let constant = add(self.constant, dot(&self.params, params)?, "substitution")?;
        Ok((self.dims.clone(), self.divs.clone(), constant))
    }
}

/// A division `⌊numerator / denominator⌋` of a basic set.
pub(crate) struct DivForm {
    pub numerator: LinearForm,
    pub denominator: i128,
}

/// A constraint `form ≥ 0`, or `form = 0`.
pub(crate) struct ConstraintForm {
    pub form: LinearForm,
    pub equality: bool,
}

/// The divisions of `bset` with integer numerators; `None` when one has no explicit expression
/// (an existential isl has not rewritten as a division).
pub(crate) fn read_divs(bset: &isl::BasicSet) -> Res<Option<Vec<DivForm>>> {
    use isl::DimType::{Div, In, Param, Set};
    let dims = bset.dim(Set).map_err(isl_err("dim"))?;
    let ndiv = bset.dim(Div).map_err(isl_err("dim"))?;
    let params = bset.dim(Param).map_err(isl_err("dim"))?;
    let mut out = Vec::with_capacity(ndiv as usize);
    for j in 0..ndiv {
        // isl refuses the division of an existential it has no expression for.
        let Ok(aff) = bset.get_div(j) else {
            return Ok(None);
        };
        if aff.is_nan().map_err(isl_err("div"))? || aff.dim(Div).map_err(isl_err("div"))? != ndiv {
            return Ok(None);
        }
        let den = aff.get_denominator_val().map_err(isl_err("div"))?;
        let constant = aff
            .get_constant_val()
            .and_then(|c| c.mul(den.copy()?))
            .map_err(isl_err("div"))?;
        out.push(DivForm {
            numerator: LinearForm {
                dims: coefficients(dims, |i| aff.get_coefficient_val(In, i), Some(&den))?,
                divs: coefficients(ndiv, |i| aff.get_coefficient_val(Div, i), Some(&den))?,
                params: coefficients(params, |i| aff.get_coefficient_val(Param, i), Some(&den))?,
                constant: int_val(constant, "div")?,
            },
            denominator: int_val(den, "div")?,
        });
    }
    Ok(Some(out))
}

/// The constraints of `bset` with integer coefficients.
pub(crate) fn read_constraints(bset: &isl::BasicSet) -> Res<Vec<ConstraintForm>> {
    use isl::DimType::{Div, Param, Set};
    let dims = bset.dim(Set).map_err(isl_err("dim"))?;
    let ndiv = bset.dim(Div).map_err(isl_err("dim"))?;
    let params = bset.dim(Param).map_err(isl_err("dim"))?;
    let list = bset.get_constraint_list().map_err(isl_err("constraints"))?;
    (0..list.size().map_err(isl_err("constraints"))?)
        .map(|i| {
            let c = list.get_at(i).map_err(isl_err("constraints"))?;
            Ok(ConstraintForm {
                form: LinearForm {
                    dims: coefficients(dims, |k| c.get_coefficient_val(Set, k), None)?,
                    divs: coefficients(ndiv, |k| c.get_coefficient_val(Div, k), None)?,
                    params: coefficients(params, |k| c.get_coefficient_val(Param, k), None)?,
                    constant: int_val(
                        c.get_constant_val().map_err(isl_err("constraints"))?,
                        "constraints",
                    )?,
                },
                equality: c.is_equality().map_err(isl_err("constraints"))?,
            })
        })
        .collect()
}

fn extract(bset: &isl::BasicSet, params: &[i128]) -> Res<QuasiBasicSet> {
    let basic = read_basic(bset)?.ok_or_else(|| PolyError::Isl {
        op: "div",
        message: "a division without explicit form".into(),
    })?;
    basic.at(params)
}

/// A basic set as isl holds it, parameters included: what counting needs at any values.
struct ParametricBasic {
    dims: usize,
    divs: Vec<DivForm>,
    constraints: Vec<ConstraintForm>,
}

/// The basic set's forms; `None` when a division has no explicit expression.
fn read_basic(bset: &isl::BasicSet) -> Res<Option<ParametricBasic>> {
    let dims = bset.dim(isl::DimType::Set).map_err(isl_err("dim"))? as usize;
    let Some(divs) = read_divs(bset)? else {
        return Ok(None);
    };
    Ok(Some(ParametricBasic {
        dims,
        divs,
        constraints: read_constraints(bset)?,
    }))
}

impl ParametricBasic {
    /// The basic set at the parameter values `params`.
    fn at(&self, params: &[i128]) -> Res<QuasiBasicSet> {
        let divs = self
            .divs
            .iter()
            .map(|d| {
                let (dims, divs, constant) = d.numerator.at(params)?;
                Ok(Div {
                    dims,
                    divs,
                    constant,
                    denominator: d.denominator,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        let rows = self
            .constraints
            .iter()
            .map(|c| {
                let (x, q, constant) = c.form.at(params)?;
                Ok(QuasiRow {
                    x,
                    q,
                    constant,
                    equality: c.equality,
                    negated: false,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        Ok(QuasiBasicSet {
            dims: self.dims,
            divs,
            rows,
        }
        .without_unused_divs())
    }
}

/// A parametric set read once, split into disjoint basic sets with the parameters as columns,
/// so that counting it at many parameter values (formulas take thousands) substitutes the
/// values in Rust instead of having isl fix, simplify and split the set at each: the model's
/// evaluations for spec 000 in X and Z (13 000 of them) went from 0.38 ms to 0.19 ms each.
pub(crate) struct Prepared {
    names: Vec<String>,
    basics: Vec<ParametricBasic>,
}

/// isl's operations (tableau pivots) a preparation may spend before the set is counted at each
/// value instead. Every set the tests and spec 000's formulas prepare fits (with 3 000 many do
/// not); the runaway projection described in [`prepare`] spends 0.1 s on 10⁵ and 6 s on 10⁶
/// (the deeper its recursion, the larger the tableaux each step copies).
const PREPARE_MAX_OPERATIONS: u64 = 100_000;

/// The set prepared for counting at many parameter values; `None` when it cannot be (no
/// parameter, unbounded for some values, a division without explicit form), and the counts
/// go through isl at each value instead.
pub(crate) fn prepare(set: &isl::Set) -> Res<Option<Prepared>> {
    let n = set.dim(isl::DimType::Param).map_err(isl_err("dim"))?;
    if n == 0 || !set.is_bounded().map_err(isl_err("is_bounded"))? {
        return Ok(None);
    }
    let names = (0..n)
        .map(|p| {
            set.get_dim_name(isl::DimType::Param, p as u32)
                .map(str::to_owned)
                .map_err(isl_err("dim name"))
        })
        .collect::<Res<Vec<_>>>()?;
    // In a context of its own, under a bound of its own: isl's parametric `compute_divs` can
    // split its context without end (a projection of a 2D set with two modulo conditions went
    // 9 000 levels deep in a minute, where the same set at fixed parameters takes a
    // millisecond), and a preparation that gives up must leave the caller's context usable for
    // the counts at each value. Declared first, the context is dropped after its sets.
    let scratch = crate::sets::quiet_context();
    scratch.set_max_operations(PREPARE_MAX_OPERATIONS);
    let text = set.to_str().map_err(isl_err("print"))?;
    let split = isl::Set::read_from_str(&scratch, text)
        .map_err(isl_err("read"))
        .and_then(disjoint_basic_sets);
    let Ok(basic_sets) = split else {
        return Ok(None);
    };
    let mut basics = Vec::new();
    for bset in &basic_sets {
        match read_basic(bset)? {
            Some(b) => basics.push(b),
            None => return Ok(None),
        }
    }
    Ok(Some(Prepared { names, basics }))
}

impl Prepared {
    /// The points at the parameter `values`, each basic set allowed `slice_limit` slices.
    pub(crate) fn count(&self, values: &[(&str, i64)], slice_limit: u64) -> Res<i128> {
        let params = self
            .names
            .iter()
            .map(|name| {
                values
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| i128::from(*v))
                    .ok_or_else(|| PolyError::MissingParameter { name: name.clone() })
            })
            .collect::<Res<Vec<_>>>()?;
        let mut total = 0i128;
        for basic in &self.basics {
            total = add(
                total,
                basic.at(&params)?.count(SPLITS, slice_limit)?,
                "count",
            )?;
        }
        Ok(total)
    }
}

/// How much of a division's remainders a residue row keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    Most,
    AtMostHalf,
}

/// How many rows [`QuasiBasicSet::count`] may split off, one inside the other, when a direct
/// count is over the work limits.
const SPLITS: usize = 4;

impl QuasiBasicSet {
    /// The same set without the divisions no row reads, directly or through another division.
    /// isl keeps divisions its operations no longer use (16 in one matrix multiply set whose
    /// rows read 3); each would be a lifted dimension, and the count does not depend on them
    /// (a division is a function of the point). That set counted in 7 s, pruned in 0.3 s.
    fn without_unused_divs(self) -> QuasiBasicSet {
        let n = self.divs.len();
        let mut used = vec![false; n];
        let mut stack: Vec<usize> = (0..n)
            .filter(|&j| self.rows.iter().any(|r| r.q[j] != 0))
            .collect();
        while let Some(j) = stack.pop() {
            if !std::mem::replace(&mut used[j], true) {
                stack.extend((0..n).filter(|&k| self.divs[j].divs[k] != 0 && !used[k]));
            }
        }
        if used.iter().all(|u| *u) {
            return self;
        }
        self.retaining(&used, |_| true)
    }

    /// The set with the divisions `kept` (which the kept rows and divisions must be the only
    /// readers of) and the rows `row_kept` keeps.
    fn retaining(&self, kept: &[bool], row_kept: impl Fn(usize) -> bool) -> QuasiBasicSet {
        let keep = |v: &[i128]| -> Vec<i128> {
            v.iter()
                .zip(kept)
                .filter_map(|(c, k)| k.then_some(*c))
                .collect()
        };
        QuasiBasicSet {
            dims: self.dims,
            divs: (self.divs.iter().zip(kept))
                .filter(|(_, k)| **k)
                .map(|(d, _)| Div {
                    divs: keep(&d.divs),
                    ..d.clone()
                })
                .collect(),
            rows: (self.rows.iter().enumerate())
                .filter(|(i, _)| row_kept(*i))
                .map(|(_, r)| QuasiRow {
                    q: keep(&r.q),
                    ..r.clone()
                })
                .collect(),
        }
    }

    /// The number of points: the lifted polytope's count, or, when that needs more work than the
    /// limits allow and a row is the only use of a division (a residue condition such as
    /// `a mod 75 ≤ 73`), the count without that row minus the count with the row negated. The
    /// first has one division fewer (a division used nowhere else does not change the count:
    /// it is a function of the point), the second a narrow range of residues, often a single
    /// one that the polytope turns into an equality or a thin slab it slices across; both can
    /// be far cheaper to sweep than the thin slab the row cuts out of the lifted division's
    /// period. A row known to keep more than half of its division's remainders is split before
    /// any direct count: matrix multiply at N = 1300 in L1 has basic sets with three such rows
    /// (`(236t₀ + t₁ − 237t₂ − 229) mod 512 ≥ 8`), whose direct count spends 8 s before it
    /// gives up, where the eight pieces the splits make take 1.4 s together. A row that keeps
    /// at most half (a thin window) is never split: its negation would be the wide one.
    fn count(&self, splits: usize, slice_limit: u64) -> Res<i128> {
        if splits > 0 {
            if let Some(split) = self.split_residue_row(|kept| kept == Some(Kept::Most)) {
                return self.count_split(split, splits, slice_limit);
            }
        }
        let direct = self
            .lifted()
            .count_with(&mut Work::with_slice_limit(slice_limit));
        if let (Err(PolyError::TooComplex { .. }), true) = (&direct, splits > 0) {
            // A row of no residue form may be what bounds a coordinate (`128·⌊(236t₀ − t₂ +
            // 8s − 1)/512⌋ ≥ 59t₀ + 2s − 324` bounds t₂): then the split is no help.
            if let Some(split) = self.split_residue_row(|kept| kept.is_none()) {
                match self.count_split(split, splits, slice_limit) {
                    Err(PolyError::Unbounded { .. }) => {}
                    counted => return counted,
                }
            }
        }
        direct
    }

    fn count_split(&self, (i, j): (usize, usize), splits: usize, slice_limit: u64) -> Res<i128> {
        let (without, negated) = self.split_row(i, j);
        let all = without.count(splits - 1, slice_limit)?;
        add(all, -negated.count(splits - 1, slice_limit)?, "count")
    }

    /// The first inequality `i`, not itself a negated one, whose only division `j` is used by
    /// no other row and no other division, and whose share of `j`'s remainders `take` accepts.
    fn split_residue_row(&self, take: impl Fn(Option<Kept>) -> bool) -> Option<(usize, usize)> {
        let users = |j: usize| {
            self.rows.iter().filter(|r| r.q[j] != 0).count()
                + self.divs.iter().filter(|d| d.divs[j] != 0).count()
        };
        self.rows.iter().enumerate().find_map(|(i, row)| {
            if row.equality || row.negated {
                return None;
            }
            let mut used = (0..self.divs.len()).filter(|&j| row.q[j] != 0);
            match (used.next(), used.next()) {
                (Some(j), None) if users(j) == 1 && take(self.kept(row, j)) => Some((i, j)),
                _ => None,
            }
        })
    }

    /// When `row` reads `λ·(r − c) + b ≥ 0` for the remainder `r ∈ [0, d)` of division `j`
    /// (`r = numerator − d·q`), whether it keeps more than half of the remainders.
    fn kept(&self, row: &QuasiRow, j: usize) -> Option<Kept> {
        let div = &self.divs[j];
        let d = div.denominator;
        if row.q[j] % d != 0 {
            return None;
        }
        let lambda = -row.q[j] / d;
        let mut remainder_q = div.divs.clone();
        remainder_q[j] -= d;
        let same = |a: &[i128], b: &[i128]| a.iter().zip(b).all(|(x, y)| *x == lambda * y);
        if lambda == 0 || !same(&row.x, &div.dims) || !same(&row.q, &remainder_q) {
            return None;
        }
        // λ·r ≥ λ·c − b.
        let bound = lambda
            .checked_mul(div.constant)?
            .checked_sub(row.constant)?;
        let kept = if lambda > 0 {
            d - ceil_div(bound, lambda).clamp(0, d)
        } else {
            (floor_div(bound, lambda) + 1).clamp(0, d)
        };
        Some(if 2 * kept > d {
            Kept::Most
        } else {
            Kept::AtMostHalf
        })
    }

    /// The set without row `i` and division `j`, and the set with row `i` negated.
    fn split_row(&self, i: usize, j: usize) -> (QuasiBasicSet, QuasiBasicSet) {
        let kept: Vec<bool> = (0..self.divs.len()).map(|k| k != j).collect();
        // Without the row, divisions only it read through `j` are unused too.
        let without = self.retaining(&kept, |k| k != i).without_unused_divs();
        let mut negated = QuasiBasicSet {
            dims: self.dims,
            divs: self.divs.clone(),
            rows: self.rows.clone(),
        };
        let row = &mut negated.rows[i];
        row.x.iter_mut().chain(&mut row.q).for_each(|v| *v = -*v);
        row.constant = -row.constant - 1;
        row.negated = true;
        (without, negated)
    }

    /// The set with every division as a dimension of its own: `(x, q)` with the original rows
    /// and `0 ≤ a·x + g·q' + c − d·q ≤ d − 1` for each division. `q` is a function of `x`, so the
    /// points correspond one to one.
    fn lifted(&self) -> IntPolytope {
        let n = self.dims + self.divs.len();
        let mut poly = IntPolytope::new(n);
        for row in &self.rows {
            let coeffs: Vec<i128> = row.x.iter().chain(&row.q).copied().collect();
            if row.equality {
                poly.add_equality(coeffs, row.constant);
            } else {
                poly.add_inequality(coeffs, row.constant);
            }
        }
        for (j, d) in self.divs.iter().enumerate() {
            let mut lower: Vec<i128> = d.dims.iter().chain(&d.divs).copied().collect();
            lower.resize(n, 0);
            lower[self.dims + j] -= d.denominator;
            let upper: Vec<i128> = lower.iter().map(|v| -v).collect();
            poly.add_inequality(lower, d.constant);
            poly.add_inequality(upper, d.denominator - 1 - d.constant);
        }
        poly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::polytope::MAX_SLICES;

    fn quasi(text: &str) -> QuasiBasicSet {
        let ctx = isl::Context::alloc();
        let set = isl::Set::read_from_str(&ctx, text).unwrap();
        let list = set.get_basic_set_list().unwrap();
        assert_eq!(list.size().unwrap(), 1);
        extract(&list.get_at(0).unwrap(), &[]).unwrap()
    }

    /// Splitting a residue row off (count without it, minus count with it negated) gives the
    /// direct count, and the brute-force one.
    #[test]
    fn residue_row_split_equals_direct_count() {
        type Member = fn(i128, i128) -> bool;
        let cases: [(&str, Member); 3] = [
            (
                "{ [i, j] : 0 <= i < 50 and 0 <= j < 40 and (3i + 5j) mod 7 <= 4 }",
                |i, j| i < 50 && j < 40 && (3 * i + 5 * j) % 7 <= 4,
            ),
            (
                "{ [i, j] : 0 <= i < 30 and i <= j < 60 and (2i - j + 100) mod 75 >= 2 }",
                |i, j| i < 30 && i <= j && j < 60 && (2 * i - j + 100) % 75 >= 2,
            ),
            (
                "{ [i, j] : 0 <= i < 64 and 0 <= j < 64 and (i + 64j) mod 75 != 74 }",
                |i, j| (i + 64 * j) % 75 != 74,
            ),
        ];
        for (text, member) in cases {
            let q = quasi(text);
            let (i, j) = q
                .split_residue_row(|kept| kept == Some(Kept::Most))
                .unwrap_or_else(|| panic!("no wide residue row in {text}"));
            let (without, negated) = q.split_row(i, j);
            let split =
                without.count(0, MAX_SLICES).unwrap() - negated.count(0, MAX_SLICES).unwrap();
            let brute = (0..64i128)
                .flat_map(|i| (0..64i128).map(move |j| (i, j)))
                .filter(|&(i, j)| member(i, j))
                .count() as i128;
            assert_eq!(q.count(0, MAX_SLICES).unwrap(), brute, "{text}");
            assert_eq!(split, brute, "{text}");
        }
    }

    /// A residue row is read as the share of remainders it keeps, on either side and at the
    /// edges (half is not most); a row that is no residue window is not read.
    #[test]
    fn residue_rows_are_read_as_kept_shares() {
        let cases = [
            ("(i + 2j) mod 16 <= 7", Some(Kept::AtMostHalf)),
            ("(i + 2j) mod 16 <= 8", Some(Kept::Most)),
            ("(i + 2j) mod 16 >= 8", Some(Kept::AtMostHalf)),
            ("(i + 2j) mod 16 >= 7", Some(Kept::Most)),
            ("(i - j + 5) mod 16 >= 15", Some(Kept::AtMostHalf)),
            ("(i - j + 5) mod 16 >= 1", Some(Kept::Most)),
            ("i + 16*floor((i + 2j)/16) >= 3", None),
        ];
        for (row, want) in cases {
            let text = format!("{{ [i, j] : 0 <= i < 40 and 0 <= j < 40 and {row} }}");
            let q = quasi(&text);
            let read = (0..q.rows.len())
                .find_map(|i| (q.rows[i].q[0] != 0).then(|| q.kept(&q.rows[i], 0)))
                .unwrap_or_else(|| panic!("no row reads the division in {text}"));
            assert!(read == want, "{row}");
        }
    }
}
