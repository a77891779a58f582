//! Counting the points of an isl set at concrete parameter values, without enumerating them.
//!
//! The set is split into disjoint basic sets whose existential variables are all explicit floor
//! divisions `⌊(a·x + g·q + c)/d⌋`. Each division's slope in `x` is rational; with `Pᵢ` the lcm
//! of the denominators of the slopes along `xᵢ`, writing `x = P∘t + r` for each residue vector
//! `0 ≤ r < P` turns every division into an affine function of `t` (exactly, because the slope
//! times `P` is integral). Each residue thus gives a division-free polytope in `t`, counted by
//! [`IntPolytope`], whose cost does not depend on the bounds either. The number of residues
//! depends on the address layout (line size, sets), not on the trip counts; it is bounded.

use isl_rs as isl;

use crate::PolyError;
use crate::polytope::IntPolytope;
use crate::rational::{Rat, Res, add, floor_div, lcm, mul};

/// Limit on the number of residue classes examined for one basic set.
const MAX_RESIDUES: u128 = 1 << 20;

fn isl_err(op: &'static str) -> impl FnOnce(isl::LibISLError) -> PolyError {
    move |e| PolyError::from_isl(op, e.to_string())
}

/// One explicit division `⌊(dims·x + divs·q + constant) / denominator⌋`.
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
    /// `(coefficients on x, coefficients on divisions, constant, is_equality)`.
    rows: Vec<(Vec<i128>, Vec<i128>, i128, bool)>,
}

pub(crate) fn count_isl_set(set: &isl::Set, values: &[(&str, i64)]) -> Result<i128, PolyError> {
    let bounded = set.is_bounded().map_err(isl_err("is_bounded"))?;
    let raw = set.copy().map_err(isl_err("copy"))?;
    let params = param_values(&raw, values)?;
    let fixed = fix_all(raw, &params)?;
    if !bounded && !fixed.is_bounded().map_err(isl_err("is_bounded"))? {
        return Err(PolyError::Unbounded {
            set: fixed.to_str().unwrap_or("?").to_string(),
        });
    }
    let disjoint = fixed
        .compute_divs()
        .map_err(isl_err("compute_divs"))?
        .make_disjoint()
        .map_err(isl_err("make_disjoint"))?;
    let list = disjoint
        .get_basic_set_list()
        .map_err(isl_err("basic sets"))?;
    let mut total = 0i128;
    for i in 0..list.size().map_err(isl_err("basic sets"))? {
        let bset = list.get_at(i).map_err(isl_err("basic sets"))?;
        let q = extract(&bset, &params)?;
        total = add(total, q.count()?, "count")?;
    }
    Ok(total)
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

fn extract(bset: &isl::BasicSet, params: &[i128]) -> Res<QuasiBasicSet> {
    use isl::DimType::{Div as D, In, Param, Set};
    let dims = bset.dim(Set).map_err(isl_err("dim"))?;
    let ndiv = bset.dim(D).map_err(isl_err("dim"))?;
    let mut divs = Vec::new();
    for j in 0..ndiv {
        let aff = bset.get_div(j).map_err(isl_err("div"))?;
        if aff.is_nan().map_err(isl_err("div"))? || aff.dim(D).map_err(isl_err("div"))? != ndiv {
            return Err(PolyError::Isl {
                op: "div",
                message: "a division without explicit form".into(),
            });
        }
        let den = aff.get_denominator_val().map_err(isl_err("div"))?;
        let c_dims = coefficients(dims, |i| aff.get_coefficient_val(In, i), Some(&den))?;
        let c_divs = coefficients(ndiv, |i| aff.get_coefficient_val(D, i), Some(&den))?;
        let c_par = coefficients(
            params.len() as i32,
            |i| aff.get_coefficient_val(Param, i),
            Some(&den),
        )?;
        let cst = aff.get_constant_val().map_err(isl_err("div"))?;
        let cst = int_val(
            cst.mul(den.copy().map_err(isl_err("copy"))?)
                .map_err(isl_err("div"))?,
            "div",
        )?;
        divs.push(Div {
            dims: c_dims,
            divs: c_divs,
            constant: add(cst, dot(&c_par, params)?, "div")?,
            denominator: int_val(den, "div")?,
        });
    }
    let list = bset.get_constraint_list().map_err(isl_err("constraints"))?;
    let mut rows = Vec::new();
    for i in 0..list.size().map_err(isl_err("constraints"))? {
        let c = list.get_at(i).map_err(isl_err("constraints"))?;
        let x = coefficients(dims, |k| c.get_coefficient_val(Set, k), None)?;
        let q = coefficients(ndiv, |k| c.get_coefficient_val(D, k), None)?;
        let p = coefficients(
            params.len() as i32,
            |k| c.get_coefficient_val(Param, k),
            None,
        )?;
        let cst = int_val(
            c.get_constant_val().map_err(isl_err("constraints"))?,
            "constraints",
        )?;
        let eq = c.is_equality().map_err(isl_err("constraints"))?;
        rows.push((x, q, add(cst, dot(&p, params)?, "constraints")?, eq));
    }
    Ok(QuasiBasicSet {
        dims: dims as usize,
        divs,
        rows,
    })
}

impl QuasiBasicSet {
    /// The slope of each division along each dimension.
    fn slopes(&self) -> Res<Vec<Vec<Rat>>> {
        let mut slopes: Vec<Vec<Rat>> = Vec::with_capacity(self.divs.len());
        for d in &self.divs {
            let mut s = Vec::with_capacity(self.dims);
            for i in 0..self.dims {
                let mut num = Rat::int(d.dims[i]);
                for (l, g) in d.divs.iter().enumerate().filter(|(_, g)| **g != 0) {
                    let inner = slopes.get(l).ok_or_else(|| PolyError::Isl {
                        op: "div",
                        message: "a division refers to a later one".into(),
                    })?;
                    num = num.add(Rat::int(*g).mul(inner[i])?)?;
                }
                s.push(num.div(Rat::int(d.denominator))?);
            }
            slopes.push(s);
        }
        Ok(slopes)
    }

    fn count(&self) -> Res<i128> {
        let slopes = self.slopes()?;
        let mut period = vec![1i128; self.dims];
        for s in &slopes {
            for (i, r) in s.iter().enumerate() {
                period[i] = lcm(period[i], r.den)?;
            }
        }
        let residues = period
            .iter()
            .try_fold(1u128, |a, &p| a.checked_mul(p as u128));
        let residues = residues.ok_or(PolyError::Overflow {
            context: "residues",
        })?;
        if residues > MAX_RESIDUES {
            return Err(PolyError::TooComplex {
                what: "residue classes",
                needed: residues,
                limit: MAX_RESIDUES,
            });
        }
        // Slope of each division in t: P∘σ, integral by construction of P.
        let t_slopes: Vec<Vec<i128>> = slopes
            .iter()
            .map(|s| {
                s.iter()
                    .zip(&period)
                    .map(|(r, p)| r.num * (p / r.den))
                    .collect()
            })
            .collect();
        let mut total = 0i128;
        let mut r = vec![0i128; self.dims];
        loop {
            total = add(
                total,
                self.residue_polytope(&r, &period, &t_slopes)?.count()?,
                "count",
            )?;
            if !next_residue(&mut r, &period) {
                return Ok(total);
            }
        }
    }

    fn residue_polytope(
        &self,
        r: &[i128],
        period: &[i128],
        t_slopes: &[Vec<i128>],
    ) -> Res<IntPolytope> {
        // Division values at the residue (their part that does not grow with t).
        let mut at_r: Vec<i128> = Vec::with_capacity(self.divs.len());
        for d in &self.divs {
            let num = add(
                add(dot(&d.dims, r)?, dot(&d.divs[..at_r.len()], &at_r)?, "div")?,
                d.constant,
                "div",
            )?;
            at_r.push(floor_div(num, d.denominator));
        }
        let mut poly = IntPolytope::new(self.dims);
        for (x, q, cst, eq) in &self.rows {
            let mut coeffs: Vec<i128> = x.iter().zip(period).map(|(a, p)| a * p).collect();
            for (qj, s) in q.iter().zip(t_slopes) {
                for (c, sj) in coeffs.iter_mut().zip(s) {
                    *c = add(*c, mul(*qj, *sj, "substitution")?, "substitution")?;
                }
            }
            let constant = add(
                add(dot(x, r)?, dot(q, &at_r)?, "substitution")?,
                *cst,
                "substitution",
            )?;
            if *eq {
                poly.add_equality(coeffs, constant);
            } else {
                poly.add_inequality(coeffs, constant);
            }
        }
        Ok(poly)
    }
}

fn next_residue(r: &mut [i128], period: &[i128]) -> bool {
    for (ri, p) in r.iter_mut().zip(period) {
        *ri += 1;
        if *ri < *p {
            return true;
        }
        *ri = 0;
    }
    false
}
