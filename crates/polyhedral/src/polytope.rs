//! Size-independent counting of the integer points of a bounded polytope `{t : A·t + b ≥ 0}`.
//!
//! The method sums over the first coordinate. The slice counts, as a function of that
//! coordinate, form a quasi-polynomial of degree at most `n − 1` between two consecutive
//! projections of the polytope's vertices (the slice keeps its combinatorial type there), with
//! a period dividing the lcm `L` of the slice system's maximal minors (the denominators of the
//! slice's vertices). So each such stretch costs `L · n` slice counts plus a closed-form sum of
//! Newton forward differences, whatever its length: the work depends on the constraint
//! structure, never on how far apart the bounds are.

use crate::PolyError;
use crate::rational::{Rat, Res, add, binom, ceil_div, det, floor_div, gcd, lcm, mul, solve};

/// Limit on the `n`-subsets of constraints examined for vertices, to bound the work.
const MAX_SUBSETS: u128 = 2_000_000;
/// Limit on the quasi-polynomial period, to bound the work.
const MAX_PERIOD: i128 = 1 << 16;

/// A polytope `{t ∈ Zⁿ : row·t + constant ≥ 0 for every row}` with integer data. It must be
/// bounded (callers check boundedness on the set it comes from); an unbounded one has no
/// meaningful count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IntPolytope {
    dims: usize,
    rows: Vec<(Vec<i128>, i128)>,
}

impl IntPolytope {
    /// A polytope of `dims` dimensions with no constraint yet (unbounded until constrained).
    pub(crate) fn new(dims: usize) -> IntPolytope {
        IntPolytope {
            dims,
            rows: Vec::new(),
        }
    }

    /// Adds `coeffs·t + constant ≥ 0`.
    pub(crate) fn add_inequality(&mut self, coeffs: Vec<i128>, constant: i128) {
        debug_assert_eq!(coeffs.len(), self.dims);
        self.rows.push((coeffs, constant));
    }

    /// Adds `coeffs·t + constant = 0`.
    pub(crate) fn add_equality(&mut self, coeffs: Vec<i128>, constant: i128) {
        let neg = coeffs.iter().map(|c| -c).collect();
        self.rows.push((coeffs, constant));
        self.rows.push((neg, -constant));
    }

    /// The number of integer points. Errors when the work bound is exceeded.
    pub(crate) fn count(&self) -> Result<i128, PolyError> {
        let Some(p) = self.normalized() else {
            return Ok(0);
        };
        p.count_normalized()
    }

    /// Divides each row by the gcd of its coefficients (rounding the constant down, which keeps
    /// the same integer points), drops duplicates; `None` when a constant row is violated.
    fn normalized(&self) -> Option<IntPolytope> {
        let mut rows: Vec<(Vec<i128>, i128)> = Vec::with_capacity(self.rows.len());
        for (c, b) in &self.rows {
            let g = c.iter().fold(0, |g, &v| gcd(g, v));
            if g == 0 {
                if *b < 0 {
                    return None;
                }
                continue;
            }
            let row = (c.iter().map(|v| v / g).collect(), floor_div(*b, g));
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        Some(IntPolytope {
            dims: self.dims,
            rows,
        })
    }

    fn count_normalized(&self) -> Res<i128> {
        match self.dims {
            0 => Ok(1),
            1 => self.count_interval(),
            _ => self.count_by_sweep(),
        }
    }

    fn count_interval(&self) -> Res<i128> {
        let (mut lo, mut hi) = (None::<i128>, None::<i128>);
        for (c, b) in &self.rows {
            if c[0] > 0 {
                let v = ceil_div(-b, c[0]);
                lo = Some(lo.map_or(v, |l| l.max(v)));
            } else {
                let v = floor_div(*b, -c[0]);
                hi = Some(hi.map_or(v, |h| h.min(v)));
            }
        }
        match (lo, hi) {
            (Some(l), Some(h)) => Ok((h - l + 1).max(0)),
            _ => Err(PolyError::Unbounded {
                set: "a one-dimensional slice".into(),
            }),
        }
    }

    /// The slice at `t₀ = v`, as a polytope in the remaining coordinates.
    fn slice(&self, v: i128) -> Res<Option<IntPolytope>> {
        let mut rows = Vec::with_capacity(self.rows.len());
        for (c, b) in &self.rows {
            rows.push((c[1..].to_vec(), add(*b, mul(c[0], v, "slice")?, "slice")?));
        }
        Ok(IntPolytope {
            dims: self.dims - 1,
            rows,
        }
        .normalized())
    }

    fn slice_count(&self, v: i128) -> Res<i128> {
        match self.slice(v)? {
            Some(p) => p.count_normalized(),
            None => Ok(0),
        }
    }

    fn count_by_sweep(&self) -> Res<i128> {
        let critical = self.vertex_first_coordinates()?;
        if critical.is_empty() {
            // A bounded non-empty polytope has vertices (callers guarantee boundedness).
            return Ok(0);
        }
        let period = self.slice_period()?;
        let mut total = 0i128;
        for (i, c) in critical.iter().enumerate() {
            if c.den == 1 {
                total = add(total, self.slice_count(c.num)?, "sum")?;
            }
            if let Some(next) = critical.get(i + 1) {
                let (a, b) = (c.floor() + 1, next.ceil() - 1);
                if a <= b {
                    total = add(total, self.sum_stretch(a, b, period)?, "sum")?;
                }
            }
        }
        Ok(total)
    }

    /// Σ slice counts over `a..=b`, a stretch with no vertex projection strictly inside.
    fn sum_stretch(&self, a: i128, b: i128, period: i128) -> Res<i128> {
        let degree = self.dims as i128 - 1;
        let samples = degree + 1;
        if b - a < 2 * samples * period {
            let mut s = 0;
            for v in a..=b {
                s = add(s, self.slice_count(v)?, "sum")?;
            }
            return Ok(s);
        }
        let mut total = 0i128;
        for rho in 0..period {
            let last_u = floor_div(b - a - rho, period);
            let values = (0..samples)
                .map(|u| self.slice_count(a + rho + period * u))
                .collect::<Res<Vec<_>>>()?;
            total = add(total, sum_polynomial(&values, last_u)?, "sum")?;
        }
        Ok(total)
    }

    /// The first coordinates of all vertices, sorted and distinct.
    fn vertex_first_coordinates(&self) -> Res<Vec<Rat>> {
        let n = self.dims;
        let m = self.rows.len();
        let subsets = binom(m as i128, n)? as u128;
        if subsets > MAX_SUBSETS {
            return Err(PolyError::TooComplex {
                what: "constraint subsets for vertex enumeration",
                needed: subsets,
                limit: MAX_SUBSETS,
            });
        }
        let mut out: Vec<Rat> = Vec::new();
        let mut pick = Vec::with_capacity(n);
        self.each_subset(0, n, &mut pick, &mut |rows| {
            let mat: Vec<Vec<i128>> = rows.iter().map(|&r| self.rows[r].0.clone()).collect();
            let rhs: Vec<i128> = rows.iter().map(|&r| -self.rows[r].1).collect();
            if let Some(x) = solve(&mat, &rhs)? {
                if self.satisfies(&x)? && !out.contains(&x[0]) {
                    out.push(x[0]);
                }
            }
            Ok(())
        })?;
        out.sort_by(|a, b| a.cmp_val(*b));
        Ok(out)
    }

    fn satisfies(&self, x: &[Rat]) -> Res<bool> {
        for (c, b) in &self.rows {
            let mut s = Rat::int(*b);
            for (ci, xi) in c.iter().zip(x) {
                s = s.add(Rat::int(*ci).mul(*xi)?)?;
            }
            if s.num < 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn each_subset(
        &self,
        start: usize,
        k: usize,
        pick: &mut Vec<usize>,
        f: &mut dyn FnMut(&[usize]) -> Res<()>,
    ) -> Res<()> {
        if k == 0 {
            return f(pick);
        }
        for r in start..self.rows.len() {
            if self.rows.len() - r < k {
                break;
            }
            pick.push(r);
            self.each_subset(r + 1, k - 1, pick, f)?;
            pick.pop();
        }
        Ok(())
    }

    /// lcm of the non-zero maximal minors of the slice system (coefficients of `t₁…`).
    fn slice_period(&self) -> Res<i128> {
        let k = self.dims - 1;
        let mut period = 1i128;
        let mut pick = Vec::with_capacity(k);
        self.each_subset(0, k, &mut pick, &mut |rows| {
            let mat: Vec<Vec<i128>> = rows.iter().map(|&r| self.rows[r].0[1..].to_vec()).collect();
            let d = det(&mat)?;
            if d != 0 {
                period = lcm(period, d)?;
            }
            Ok(())
        })?;
        if period > MAX_PERIOD {
            return Err(PolyError::TooComplex {
                what: "quasi-polynomial period",
                needed: period as u128,
                limit: MAX_PERIOD as u128,
            });
        }
        Ok(period)
    }
}

/// Σ_{u=0}^{last} p(u) for the polynomial of degree < values.len() with p(u) = values[u].
fn sum_polynomial(values: &[i128], last: i128) -> Res<i128> {
    if last < 0 {
        return Ok(0);
    }
    let mut diffs = values.to_vec();
    let mut total = 0i128;
    for j in 0..values.len() {
        // diffs[0] is now Δʲp(0); Σ_{u=0}^{last} C(u, j) = C(last + 1, j + 1).
        total = add(total, mul(diffs[0], binom(last + 1, j + 1)?, "sum")?, "sum")?;
        for i in 0..diffs.len() - 1 - j {
            diffs[i] = diffs[i + 1] - diffs[i];
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(p: &IntPolytope, lo: i128, hi: i128) -> i128 {
        let n = p.dims;
        let mut t = vec![lo; n];
        let mut count = 0;
        loop {
            if p.rows
                .iter()
                .all(|(c, b)| c.iter().zip(&t).map(|(a, x)| a * x).sum::<i128>() + b >= 0)
            {
                count += 1;
            }
            let mut i = 0;
            while i < n {
                t[i] += 1;
                if t[i] <= hi {
                    break;
                }
                t[i] = lo;
                i += 1;
            }
            if i == n {
                return count;
            }
        }
    }

    #[test]
    fn triangle_closed_form() {
        // 0 ≤ j ≤ i ≤ N−1 has N(N+1)/2 points, for a size where enumeration would be slow.
        let n = 10_000_000i128;
        let mut p = IntPolytope::new(2);
        p.add_inequality(vec![1, -1], 0);
        p.add_inequality(vec![-1, 0], n - 1);
        p.add_inequality(vec![0, 1], 0);
        assert_eq!(p.count().unwrap(), n * (n + 1) / 2);
    }

    #[test]
    fn skewed_strip_with_period() {
        // 0 ≤ i < 1000, 2j ≤ i < 2j + 3: each i has one or two js.
        let mut p = IntPolytope::new(2);
        p.add_inequality(vec![1, 0], 0);
        p.add_inequality(vec![-1, 0], 999);
        p.add_inequality(vec![1, -2], 0);
        p.add_inequality(vec![-1, 2], 2);
        let expected = (0..1000)
            .map(|i: i128| (-2..=i).filter(|j| 2 * j <= i && i < 2 * j + 3).count() as i128)
            .sum();
        assert_eq!(p.count().unwrap(), expected);
    }

    #[test]
    fn empty_and_equalities() {
        let mut p = IntPolytope::new(2);
        p.add_inequality(vec![1, 0], -5);
        p.add_inequality(vec![-1, 0], 4);
        p.add_inequality(vec![0, 1], 0);
        p.add_inequality(vec![0, -1], 3);
        assert_eq!(p.count().unwrap(), 0);
        let mut q = IntPolytope::new(2);
        q.add_equality(vec![1, -3], 0);
        q.add_inequality(vec![1, 0], 0);
        q.add_inequality(vec![-1, 0], 100);
        assert_eq!(q.count().unwrap(), 34);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        #[test]
        fn matches_brute_force(
            dims in 1usize..=3,
            rows in proptest::collection::vec((proptest::collection::vec(-3i128..=3, 3), -12i128..=12), 0..5),
        ) {
            let mut p = IntPolytope::new(dims);
            for d in 0..dims {
                let mut lo = vec![0; dims]; lo[d] = 1;
                let mut hi = vec![0; dims]; hi[d] = -1;
                p.add_inequality(lo, 6);
                p.add_inequality(hi, 6);
            }
            for (c, b) in rows {
                p.add_inequality(c[..dims].to_vec(), b);
            }
            proptest::prop_assert_eq!(p.count().unwrap(), brute(&p, -6, 6));
        }

        #[test]
        fn long_stretches_match_brute_force(
            rows in proptest::collection::vec((proptest::collection::vec(-2i128..=2, 2), -40i128..=40), 0..4),
            size in 30i128..=90,
        ) {
            // Wide boxes force the interpolation path (stretches longer than 2·n·L).
            let mut p = IntPolytope::new(2);
            p.add_inequality(vec![1, 0], 0);
            p.add_inequality(vec![-1, 0], size);
            p.add_inequality(vec![0, 1], 0);
            p.add_inequality(vec![0, -1], size);
            for (c, b) in rows {
                p.add_inequality(c, b);
            }
            proptest::prop_assert_eq!(p.count().unwrap(), brute(&p, 0, size));
        }
    }
}
