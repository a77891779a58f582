//! Size-independent counting of the integer points of a bounded polytope
//! `{t : A·t + b ≥ 0, E·t + e = 0}`.
//!
//! Equalities are removed first: a unimodular change of variables turns `a·t = −e` into one
//! fixed coordinate, so the polytope loses a dimension and keeps its points (a bijection of
//! `Zⁿ`). Rows that are equal up to their constant keep only the tightest one, and opposite rows
//! whose constants cancel are recognised as equalities; slices produce many of both.
//!
//! Then a coordinate `w` that the others determine is dropped: after a unimodular shift of the
//! others by multiples of it, it appears only in two opposite rows that hold `a·w` in a window
//! of `a` consecutive integers, which contains one multiple of `a`: each point of the rest has
//! exactly one `w`. A cache model's tag and set index are the case that matters: read together
//! as a line, the tag is the line's quotient. This is searched once per count, not per slice.
//!
//! The rest is a sweep over one coordinate `tₖ`. Between two consecutive projections of the
//! polytope's vertices on `tₖ` (a *stretch*), the slice keeps its combinatorial type, and its
//! vertices move along the edges of the polytope that cross the stretch. A slice vertex on an
//! edge with primitive integer direction `e` moves by `e/eₖ` per unit of `tₖ`, so after `L` steps,
//! with `L` the lcm of those `|eₖ|`, every slice vertex has moved by an integer vector; the slice
//! at `tₖ + L·u` is then the slice at `tₖ` plus `u` times a lattice polytope, whose point count is
//! a polynomial in `u` of degree at most `n − 1` (McMullen). So a stretch costs at most `L·n`
//! slice counts plus a closed-form sum of Newton forward differences, whatever its length: the
//! work depends on the constraint structure, never on how far apart the bounds are.
//!
//! `L` is taken per stretch and per coordinate from the edges (not from all the maximal minors
//! of the constraint matrix, a bound that is often thousands of times larger), and the sweep
//! coordinate is the one whose stretches need the fewest slice counts. That choice is what makes
//! the lifted division variables of [`crate::count`] cheap: a division such as
//! `q = ⌊(180i + j)/16384⌋` takes few values, so sweeping `q` costs a handful of slices where
//! sweeping `i` would need thousands.
//!
//! A sweep may also follow a row's normal `c·t` instead of a coordinate (a unimodular change of
//! variables with `c` as its first row, done slice by slice by eliminating the equality
//! `c·t = v`): the periods are then `|c·e|`, and where the edges run diagonally to every
//! coordinate (a cache set index `⌊(236t₀ + t₁ − 237t₂)/512⌋`) that is what keeps them small. A
//! thin slab between a row and its opposite row is sliced across at once, as a narrow coordinate
//! is. Matrix multiply at N = 1300 in L1 has sets that took 9–18 s along coordinates and 0.7–1.1 s
//! so.
//!
//! Vertices and edges come from the double description method (rays of the homogenised cone,
//! combined only when adjacent), whose work follows the number of vertices; solving every
//! `n`-subset of the rows, as an earlier version did, costs `C(m, n)` solves, over 10⁵ for the
//! eight-dimensional lifted sets of a matrix multiply. Before that, bounds propagated through
//! the rows (interval arithmetic) find coordinates with fewer values than dimensions, typically
//! a lifted tag or set index with one to three values; those are sliced at each value right
//! away, which removes a dimension from every vertex enumeration below.

use crate::PolyError;
use crate::rational::{
    Rat, Res, add, binom, ceil_div, floor_div, gcd, integer_solution, lcm, mul, solve,
};

/// Limit on the ray comparisons of vertex enumeration in one count (all slices together), to
/// bound the work (about a second).
const MAX_RAY_TESTS: u64 = 200_000_000;
/// Limit on the slices counted in one count (all levels of the recursion together).
pub(crate) const MAX_SLICES: u64 = 1_000_000;

/// From this many dimensions on (a set with many lifted divisions, such as a column walk's
/// residue windows), vertex enumeration is dearer than slicing a coordinate of up to
/// [`WIDE_SLICE`] values at each of them.
const MANY_DIMS: usize = 8;
/// See [`MANY_DIMS`].
const WIDE_SLICE: i128 = 1024;

/// The work spent so far in one count, checked against the limits.
pub(crate) struct Work {
    ray_tests: u64,
    slices: u64,
    slice_limit: u64,
}

impl Default for Work {
    fn default() -> Work {
        Work::with_slice_limit(MAX_SLICES)
    }
}

impl Work {
    pub(crate) fn with_slice_limit(slice_limit: u64) -> Work {
        Work {
            ray_tests: 0,
            slices: 0,
            slice_limit,
        }
    }

    fn spend_ray_tests(&mut self, n: u128) -> Res<()> {
        let total = self.ray_tests as u128 + n;
        if total > MAX_RAY_TESTS as u128 {
            return Err(PolyError::TooComplex {
                what: "ray comparisons for vertex enumeration",
                needed: total,
                limit: MAX_RAY_TESTS as u128,
            });
        }
        self.ray_tests = total as u64;
        Ok(())
    }

    fn spend_slice(&mut self) -> Res<()> {
        self.slices += 1;
        if self.slices > self.slice_limit {
            return Err(PolyError::TooComplex {
                what: "polytope slices",
                needed: self.slices as u128,
                limit: self.slice_limit as u128,
            });
        }
        Ok(())
    }
}

type Row = (Vec<i128>, i128);

/// A polytope `{t ∈ Zⁿ : row·t + constant ≥ 0 for every row, eq·t + constant = 0 for every
/// equality}` with integer data. It must be bounded (callers check boundedness on the set it
/// comes from); an unbounded one has no meaningful count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IntPolytope {
    dims: usize,
    rows: Vec<Row>,
    eqs: Vec<Row>,
}

/// `c` without its entry `k`.
fn without_entry(c: &[i128], k: usize) -> Vec<i128> {
    c.iter()
        .enumerate()
        .filter_map(|(i, v)| (i != k).then_some(*v))
        .collect()
}

/// A vertex and the rows tight at it.
struct Vertex {
    point: Vec<Rat>,
    tight: Vec<usize>,
}

impl IntPolytope {
    /// A polytope of `dims` dimensions with no constraint yet (unbounded until constrained).
    pub(crate) fn new(dims: usize) -> IntPolytope {
        IntPolytope {
            dims,
            rows: Vec::new(),
            eqs: Vec::new(),
        }
    }

    /// Adds `coeffs·t + constant ≥ 0`.
    pub(crate) fn add_inequality(&mut self, coeffs: Vec<i128>, constant: i128) {
        debug_assert_eq!(coeffs.len(), self.dims);
        self.rows.push((coeffs, constant));
    }

    /// Adds `coeffs·t + constant = 0`.
    pub(crate) fn add_equality(&mut self, coeffs: Vec<i128>, constant: i128) {
        debug_assert_eq!(coeffs.len(), self.dims);
        self.eqs.push((coeffs, constant));
    }

    /// The number of integer points. Errors when the work bound is exceeded.
    #[cfg(test)]
    pub(crate) fn count(&self) -> Result<i128, PolyError> {
        self.count_with(&mut Work::default())
    }

    /// The number of integer points, spending from `work`. Coordinates the others determine
    /// are dropped first ([`Self::without_determined`]); the slices of the sweep below are not
    /// searched again, as the search's linear systems would cost more than most slices.
    pub(crate) fn count_with(&self, work: &mut Work) -> Result<i128, PolyError> {
        match self.clone().reduced()?.map(|p| p.without_determined()) {
            Some(Ok(Some(p))) => p.count_reduced(work),
            Some(Err(e)) => Err(e),
            _ => Ok(0),
        }
    }

    /// [`Self::count_with`] of a slice.
    fn count_slice(&self, work: &mut Work) -> Result<i128, PolyError> {
        match self.clone().reduced()? {
            Some(p) => p.count_reduced(work),
            None => Ok(0),
        }
    }

    /// The same count with every coordinate that the others determine dropped, repeatedly
    /// (the polytope must be reduced). Coordinate `w` is determined when, after a unimodular
    /// change `tₖ = t'ₖ − mₖ·w` of the other coordinates, it appears in only two opposite rows
    /// `a·w + L(t') + b₁ ≥ 0` and `−a·w − L(t') + b₂ ≥ 0` with `b₁ + b₂ = a − 1`: `a·w` then lies
    /// in a window of `a` consecutive integers, which holds exactly one multiple of `a`, so each
    /// `t'` has one `w` and the count is that of the rest without `w` and the two rows. The
    /// change leaves every other coordinate's coefficients as they are, so those rows need not
    /// even be rewritten.
    ///
    /// This is what a cache set's tag and index need: `(w, s)` with `0 ≤ s < 64` and every other
    /// row reading them as the line `64w + s` is, after `s = s' − 64w`, the line `s'` alone with
    /// `w` its quotient. The 3D stencil's sets at 80 × 300 in L1 took 0.3 s each with the
    /// tag's 13 700 values; without it, a millisecond.
    fn without_determined(self) -> Res<Option<IntPolytope>> {
        let mut p = self;
        while let Some((i, j, w)) = p.determined() {
            let rows = p
                .rows
                .iter()
                .enumerate()
                .filter(|(r, _)| *r != i && *r != j)
                .map(|(_, (c, b))| (without_entry(c, w), *b))
                .collect();
            let dropped = IntPolytope {
                dims: p.dims - 1,
                rows,
                eqs: Vec::new(),
            };
            match dropped.reduced()? {
                Some(q) => p = q,
                None => return Ok(None),
            }
        }
        Ok(Some(p))
    }

    /// Opposite rows `i`, `j` and a coordinate `w` they determine ([`Self::without_determined`]).
    fn determined(&self) -> Option<(usize, usize, usize)> {
        if self.dims < 2 {
            return None;
        }
        for i in 0..self.rows.len() {
            let neg: Vec<i128> = self.rows[i].0.iter().map(|v| -v).collect();
            let Some(j) = (i + 1..self.rows.len()).find(|&j| self.rows[j].0 == neg) else {
                continue;
            };
            let width = self.rows[i].1.checked_add(self.rows[j].1);
            let Some(a) = width.and_then(|w| w.checked_add(1)) else {
                continue;
            };
            if let Some(w) = (0..self.dims).find(|&w| self.cancels(i, j, w, a)) {
                return Some((i, j, w));
            }
        }
        None
    }

    /// Whether some integer `m` makes `w`'s coefficient `r_w − Σₖ mₖ·r_k` zero in every row but
    /// `i` and `j`, and `±a` in row `i`.
    fn cancels(&self, i: usize, j: usize, w: usize, a: i128) -> bool {
        let (ci, _) = &self.rows[i];
        let others: Vec<&Row> = (0..self.rows.len())
            .filter(|&r| r != i && r != j)
            .map(|r| &self.rows[r])
            .collect();
        // A row without `w` on one other coordinate `k` (a bound of `k`) forces `mₖ = 0`. Most
        // candidates fail on that alone, before any system is solved: a row with `w` on only
        // forced coordinates keeps its `w`.
        let mut forced = vec![false; self.dims];
        for (c, _) in &others {
            let mut on = (0..self.dims).filter(|&k| k != w && c[k] != 0);
            if let (Some(k), None, 0) = (on.next(), on.next(), c[w]) {
                forced[k] = true;
            }
        }
        let free = |c: &[i128]| (0..self.dims).any(|k| k != w && c[k] != 0 && !forced[k]);
        if others.iter().any(|(c, _)| c[w] != 0 && !free(c)) || (ci[w].abs() != a && !free(ci)) {
            return false;
        }
        let mut m: Vec<Vec<i128>> = others.iter().map(|(c, _)| without_entry(c, w)).collect();
        let mut rhs: Vec<i128> = others.iter().map(|(c, _)| c[w]).collect();
        m.push(without_entry(ci, w));
        rhs.push(0);
        [a, -a].into_iter().any(|target| {
            if let Some(last) = rhs.last_mut() {
                *last = ci[w] - target;
            }
            integer_solution(&m, &rhs).is_some()
        })
    }

    /// The same points without equalities and with normalised rows; `None` when empty.
    fn reduced(mut self) -> Res<Option<IntPolytope>> {
        loop {
            let Some(p) = self.normalized()? else {
                return Ok(None);
            };
            self = p;
            let Some((a, e)) = self.eqs.pop() else {
                return Ok(Some(self));
            };
            match self.eliminate(&a, e)? {
                Some(p) => self = p,
                None => return Ok(None),
            }
        }
    }

    /// Divides each row by the gcd of its coefficients (rounding the constant down, which keeps
    /// the same integer points), keeps the tightest of rows equal up to the constant, and turns
    /// opposite rows whose constants cancel into equalities; `None` when a row with no
    /// coefficient is violated, an equality has no integer solution or opposite rows exclude
    /// each other.
    fn normalized(&self) -> Res<Option<IntPolytope>> {
        let mut eqs: Vec<Row> = Vec::with_capacity(self.eqs.len());
        for (c, b) in &self.eqs {
            let g = c.iter().fold(0, |g, &v| gcd(g, v));
            if g == 0 {
                if *b != 0 {
                    return Ok(None);
                }
                continue;
            }
            if b % g != 0 {
                return Ok(None);
            }
            eqs.push((c.iter().map(|v| v / g).collect(), b / g));
        }
        let mut rows: Vec<Row> = Vec::with_capacity(self.rows.len());
        for (c, b) in &self.rows {
            let g = c.iter().fold(0, |g, &v| gcd(g, v));
            if g == 0 {
                if *b < 0 {
                    return Ok(None);
                }
                continue;
            }
            let c: Vec<i128> = c.iter().map(|v| v / g).collect();
            let b = floor_div(*b, g);
            match rows.iter_mut().find(|(r, _)| *r == c) {
                Some(row) => row.1 = row.1.min(b),
                None => rows.push((c, b)),
            }
        }
        let mut keep = vec![true; rows.len()];
        for i in 0..rows.len() {
            if !keep[i] {
                continue;
            }
            let neg: Vec<i128> = rows[i].0.iter().map(|v| -v).collect();
            if let Some(j) = (i + 1..rows.len()).find(|&j| keep[j] && rows[j].0 == neg) {
                // c·t ≥ −bᵢ and c·t ≤ bⱼ.
                let slack = add(rows[i].1, rows[j].1, "normalise")?;
                if slack < 0 {
                    return Ok(None);
                }
                if slack == 0 {
                    keep[i] = false;
                    keep[j] = false;
                    eqs.push(rows[i].clone());
                }
            }
        }
        let rows = rows
            .into_iter()
            .zip(keep)
            .filter_map(|(r, k)| k.then_some(r))
            .collect();
        Ok(Some(IntPolytope {
            dims: self.dims,
            rows,
            eqs,
        }))
    }

    /// Removes the equality `a·t + e = 0` (`a` primitive, non-zero) by a unimodular change of
    /// variables `t = U·y` with `a·U = (1, 0, …, 0)`: then `y₀ = −e` and the other `y` are free,
    /// so substituting `y₀` leaves a polytope of one dimension less with the same points.
    fn eliminate(&self, a: &[i128], e: i128) -> Res<Option<IntPolytope>> {
        let n = self.dims;
        // Columns of U, as column operations on the row `a` are applied to U too.
        let mut u: Vec<Vec<i128>> = (0..n)
            .map(|j| (0..n).map(|i| i128::from(i == j)).collect())
            .collect();
        let mut row = a.to_vec();
        loop {
            let nonzero: Vec<usize> = (0..n).filter(|&j| row[j] != 0).collect();
            let Some(&p) = nonzero.iter().min_by_key(|&&j| row[j].unsigned_abs()) else {
                return Ok(None);
            };
            if nonzero.len() == 1 {
                if row[p] < 0 {
                    row[p] = -row[p];
                    for v in &mut u[p] {
                        *v = -*v;
                    }
                }
                u.swap(0, p);
                row.swap(0, p);
                break;
            }
            for &j in &nonzero {
                if j != p {
                    let q = floor_div(row[j], row[p]);
                    row[j] = add(row[j], -mul(q, row[p], "unimodular")?, "unimodular")?;
                    let pivot_column = u[p].clone();
                    for (v, w) in u[j].iter_mut().zip(&pivot_column) {
                        *v = add(*v, -mul(q, *w, "unimodular")?, "unimodular")?;
                    }
                }
            }
        }
        // `a` is primitive, so the remaining entry is 1: y₀ = −e.
        debug_assert_eq!(row[0], 1);
        let y0 = -e;
        let transform = |(c, b): &Row| -> Res<Row> {
            let mut coeffs = Vec::with_capacity(n - 1);
            let mut constant = *b;
            for (j, col) in u.iter().enumerate() {
                let mut v = 0i128;
                for (ci, ui) in c.iter().zip(col) {
                    v = add(v, mul(*ci, *ui, "unimodular")?, "unimodular")?;
                }
                if j == 0 {
                    constant = add(constant, mul(v, y0, "unimodular")?, "unimodular")?;
                } else {
                    coeffs.push(v);
                }
            }
            Ok((coeffs, constant))
        };
        Ok(Some(IntPolytope {
            dims: n - 1,
            rows: self.rows.iter().map(transform).collect::<Res<_>>()?,
            eqs: self.eqs.iter().map(transform).collect::<Res<_>>()?,
        }))
    }

    fn count_reduced(&self, work: &mut Work) -> Res<i128> {
        match self.dims {
            0 => Ok(1),
            1 => self.count_interval(),
            2 => self.count_polygon(work),
            _ => self.count_by_sweep(work),
        }
    }

    /// A polygon's points in closed form: between two consecutive vertex abscissas one edge
    /// bounds `y` above and one below, so the column counts `⌊U(x)⌋ − ⌈L(x)⌉ + 1` sum to three
    /// floor sums, each `O(log)` by the Euclidean reduction, whatever the slopes. A sweep would
    /// need the lcm of the edges' slope denominators in slices per stretch (128 for the slope
    /// 75/128 of a 300-element row's cache sets), at the bottom of every recursion.
    fn count_polygon(&self, work: &mut Work) -> Res<i128> {
        let vertices = self.vertices(work)?;
        let xs = sorted_distinct(vertices.iter().map(|v| v.point[0]));
        sum_over_stretches(
            &xs,
            work,
            |x, work| self.slice_count(&Direction::Axis(0), x, work),
            |i, a, b, _| {
                let middle = xs[i].add(xs[i + 1])?.mul(Rat::new(1, 2)?)?;
                self.columns(a, b, middle)
            },
        )
    }

    /// `Σ_{x = a..=b} (⌊U(x)⌋ − ⌈L(x)⌉ + 1)` for the edges `U`, `L` that bound the polygon's
    /// column at `middle`, a stretch with no vertex inside.
    fn columns(&self, a: i128, b: i128, middle: Rat) -> Res<i128> {
        // Row `c₀x + c₁y + e ≥ 0` bounds y by `(c₀x + e)/(−c₁)` above (c₁ < 0) or below.
        let bound = |(c, e): &Row| -> Res<Rat> {
            Rat::int(c[0])
                .mul(middle)?
                .add(Rat::int(*e))?
                .div(Rat::int(-c[1]))
        };
        let pick = |above: bool| -> Res<Option<&Row>> {
            let mut best: Option<(&Row, Rat)> = None;
            for row in self
                .rows
                .iter()
                .filter(|(c, _)| (c[1] < 0) == above && c[1] != 0)
            {
                let v = bound(row)?;
                let better = |old: Rat| {
                    let order = v.cmp_val(old);
                    if above { order.is_lt() } else { order.is_gt() }
                };
                if best.is_none_or(|(_, old)| better(old)) {
                    best = Some((row, v));
                }
            }
            Ok(best.map(|(row, _)| row))
        };
        let (Some((cu, eu)), Some((cl, el))) = (pick(true)?, pick(false)?) else {
            return Err(PolyError::Unbounded {
                set: "a polygon".into(),
            });
        };
        let n = b - a + 1;
        // ⌊(c₀x + e)/(−c₁)⌋ above; −⌈L⌉ = ⌊(c₀x + e)/c₁⌋ below.
        let start = |c: &[i128], e: i128| add(mul(c[0], a, "floor sum")?, e, "floor sum");
        let upper = floor_sum(n, -cu[1], cu[0], start(cu, *eu)?)?;
        let lower = floor_sum(n, cl[1], cl[0], start(cl, *el)?)?;
        add(add(upper, lower, "floor sum")?, n, "floor sum")
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

    /// The slice at `tₖ = v`, as a polytope in the other coordinates.
    fn slice(&self, k: usize, v: i128) -> Res<IntPolytope> {
        let cut = |rows: &[Row]| -> Res<Vec<Row>> {
            rows.iter()
                .map(|(c, b)| {
                    let mut rest = c.clone();
                    let ck = rest.remove(k);
                    Ok((rest, add(*b, mul(ck, v, "slice")?, "slice")?))
                })
                .collect()
        };
        Ok(IntPolytope {
            dims: self.dims - 1,
            rows: cut(&self.rows)?,
            eqs: cut(&self.eqs)?,
        })
    }

    /// The narrowest slab `−bᵢ ≤ c·t ≤ bⱼ` that a row and its opposite row cut out, when `c`
    /// is not a coordinate axis (those the propagated bounds see): `(width, c, −bᵢ, bⱼ)`. A
    /// residue window such as `0 ≤ t₁ − t₂ − 512q − 225 ≤ 7` is thin across a diagonal that no
    /// coordinate follows; sliced across it, each slice is an equality and loses a dimension.
    fn narrowest_slab(&self) -> Res<Option<(i128, Direction, i128, i128)>> {
        let mut best: Option<(i128, Direction, i128, i128)> = None;
        for (c, b) in &self.rows {
            if c.iter().filter(|v| **v != 0).count() < 2 {
                continue;
            }
            let opposite = self
                .rows
                .iter()
                .find(|(d, _)| d.iter().zip(c).all(|(x, y)| *x == -y));
            if let Some((_, b2)) = opposite {
                let width = add(*b, *b2, "slab")?;
                if best.as_ref().is_none_or(|w| width < w.0) {
                    best = Some((width, Direction::Functional(c.clone()), -b, *b2));
                }
            }
        }
        Ok(best)
    }

    /// The count of the slice where the direction's value is `v`.
    fn slice_count(&self, along: &Direction, v: i128, work: &mut Work) -> Res<i128> {
        work.spend_slice()?;
        match along {
            Direction::Axis(k) => self.slice(*k, v)?.count_slice(work),
            Direction::Functional(c) => {
                let mut cut = self.clone();
                cut.eqs.push((c.clone(), -v));
                cut.count_slice(work)
            }
        }
    }

    /// Σ slice counts over `lo..=hi`.
    fn sum_slices(&self, along: &Direction, lo: i128, hi: i128, work: &mut Work) -> Res<i128> {
        let mut total = 0i128;
        for v in lo..=hi {
            total = add(total, self.slice_count(along, v, work)?, "sum")?;
        }
        Ok(total)
    }

    /// The directions a sweep may follow: every coordinate, and every row's normal that is no
    /// coordinate (once per line). Sweeping across a row's normal slices the polytope into
    /// equalities, each eliminated by a unimodular change of variables, so it costs a little
    /// more per slice; it pays where the edges run diagonally to every coordinate (a lifted
    /// division `⌊(236t₀ + …)/512⌋` gives stretches of period 236 along each coordinate of a
    /// matrix multiply's L1 set, nested four deep).
    fn directions(&self) -> Vec<Direction> {
        let mut out: Vec<Direction> = (0..self.dims).map(Direction::Axis).collect();
        let mut seen: Vec<&Vec<i128>> = Vec::new();
        for (c, _) in &self.rows {
            let diagonal = c.iter().filter(|v| **v != 0).count() >= 2;
            let negated: Vec<i128> = c.iter().map(|v| -v).collect();
            if diagonal && !seen.iter().any(|d| **d == *c || **d == negated) {
                seen.push(c);
                out.push(Direction::Functional(c.clone()));
            }
        }
        out
    }

    fn count_by_sweep(&self, work: &mut Work) -> Res<i128> {
        // A coordinate with few values is cheaper to slice at each value than to find vertices
        // for: lifted divisions often take one, two or three values, and every coordinate
        // sliced away makes vertex enumeration cheaper for what remains.
        let Some(bounds) = self.propagated_bounds()? else {
            return Ok(0);
        };
        let narrowest = bounds
            .iter()
            .enumerate()
            .filter_map(|(k, b)| b.map(|(lo, hi)| (hi.saturating_sub(lo), k, lo, hi)))
            .min();
        let narrow = |width: i128| {
            width < self.dims as i128 || (self.dims >= MANY_DIMS && width < WIDE_SLICE)
        };
        let slab = self.narrowest_slab()?;
        if let Some((width, along, lo, hi)) = slab {
            if narrow(width) && narrowest.is_none_or(|n| width < n.0) {
                return self.sum_slices(&along, lo, hi, work);
            }
        }
        if let Some((width, k, lo, hi)) = narrowest {
            if narrow(width) {
                return self.sum_slices(&Direction::Axis(k), lo, hi, work);
            }
        }
        let vertices = self.vertices(work)?;
        if vertices.is_empty() {
            // A bounded non-empty polytope has vertices (callers guarantee boundedness).
            return Ok(0);
        }
        let edges = self.edges(&vertices, work)?;
        let mut best: Option<(u128, Direction, Vec<Rat>, Vec<i128>)> = None;
        for along in self.directions() {
            let (critical, periods) = stretches(&vertices, &edges, &along)?;
            let cost = sweep_cost(&critical, &periods, self.dims as i128);
            if best.as_ref().is_none_or(|b| cost < b.0) {
                best = Some((cost, along, critical, periods));
            }
        }
        let Some((_, along, critical, periods)) = best else {
            return Ok(0);
        };
        sum_over_stretches(
            &critical,
            work,
            |c, work| self.slice_count(&along, c, work),
            |i, a, b, work| self.sum_stretch(&along, a, b, periods[i], work),
        )
    }

    /// Σ slice counts over `a..=b`, a stretch with no vertex projection strictly inside whose
    /// slice counts are a quasi-polynomial of period `period`.
    fn sum_stretch(
        &self,
        along: &Direction,
        a: i128,
        b: i128,
        period: i128,
        work: &mut Work,
    ) -> Res<i128> {
        let samples = self.dims as i128;
        if direct_stretch(b - a, period, samples) {
            return self.sum_slices(along, a, b, work);
        }
        let mut total = 0i128;
        for rho in 0..period {
            let last_u = floor_div(b - a - rho, period);
            let values = (0..samples)
                .map(|u| self.slice_count(along, a + rho + period.saturating_mul(u), work))
                .collect::<Res<Vec<_>>>()?;
            total = add(total, sum_polynomial(&values, last_u)?, "sum")?;
        }
        Ok(total)
    }

    /// Integer bounds on each coordinate that the rows imply through interval arithmetic (bound
    /// propagation, `n + 1` rounds at most: weaker than a projection but cheap); `None` for a
    /// coordinate not bounded that way, and `None` overall when bounds cross (no point).
    #[allow(clippy::type_complexity)]
    fn propagated_bounds(&self) -> Res<Option<Vec<Option<(i128, i128)>>>> {
        let n = self.dims;
        let mut lo: Vec<Option<i128>> = vec![None; n];
        let mut hi: Vec<Option<i128>> = vec![None; n];
        for _round in 0..=n {
            let mut changed = false;
            for (c, b) in &self.rows {
                // c·t + b ≥ 0 gives c_k·t_k ≥ −b − Σ_{j≠k} max(c_j·t_j): needs every other
                // term bounded above, so at most one coordinate may lack its bound.
                let mut sum_max = *b;
                let mut missing = None;
                let mut usable = true;
                for (j, &cj) in c.iter().enumerate().filter(|(_, c)| **c != 0) {
                    match if cj > 0 { hi[j] } else { lo[j] } {
                        Some(v) => sum_max = add(sum_max, mul(cj, v, "bounds")?, "bounds")?,
                        None if missing.is_none() => missing = Some(j),
                        None => usable = false,
                    }
                }
                if !usable {
                    continue;
                }
                for (k, &ck) in c.iter().enumerate() {
                    if ck == 0 || missing.is_some_and(|u| u != k) {
                        continue;
                    }
                    let own = match missing {
                        Some(_) => 0,
                        None => mul(
                            ck,
                            if ck > 0 { hi[k] } else { lo[k] }.unwrap_or(0),
                            "bounds",
                        )?,
                    };
                    let others = add(sum_max, -own, "bounds")?;
                    if ck > 0 {
                        let v = ceil_div(-others, ck);
                        if lo[k].is_none_or(|l| v > l) {
                            lo[k] = Some(v);
                            changed = true;
                        }
                    } else {
                        let v = floor_div(others, -ck);
                        if hi[k].is_none_or(|h| v < h) {
                            hi[k] = Some(v);
                            changed = true;
                        }
                    }
                }
            }
            if lo
                .iter()
                .zip(&hi)
                .any(|(l, h)| matches!((l, h), (Some(l), Some(h)) if l > h))
            {
                return Ok(None);
            }
            if !changed {
                break;
            }
        }
        Ok(Some(
            lo.into_iter().zip(hi).map(|(l, h)| l.zip(h)).collect(),
        ))
    }

    /// All vertices, distinct, with the rows tight at each, by the double description method
    /// on the homogenised cone `{(t, λ) : A·t + b·λ ≥ 0, λ ≥ 0}`: start from the simplicial
    /// cone of `n + 1` independent rows and add the others one at a time, combining only
    /// adjacent rays (no other ray is zero on all the rows both are zero on). Work grows with
    /// the vertices met, not with the `C(m, n)` row subsets a direct enumeration would solve.
    fn vertices(&self, work: &mut Work) -> Res<Vec<Vertex>> {
        let n = self.dims;
        let m = self.rows.len();
        // Homogenised rows, the cone's own `λ ≥ 0` last.
        let mut h: Vec<Vec<i128>> = self
            .rows
            .iter()
            .map(|(c, b)| c.iter().copied().chain([*b]).collect())
            .collect();
        h.push((0..=n).map(|i| i128::from(i == n)).collect());
        if h.len() > 128 {
            return Err(PolyError::TooComplex {
                what: "constraints of one polytope",
                needed: h.len() as u128,
                limit: 128,
            });
        }
        // n + 1 independent rows, `λ ≥ 0` first so that it is always among them.
        let mut basis: Vec<usize> = Vec::with_capacity(n + 1);
        for r in std::iter::once(m).chain(0..m) {
            let mut trial: Vec<Vec<i128>> = basis.iter().map(|&b| h[b].clone()).collect();
            trial.push(h[r].clone());
            if rank(&trial)? == trial.len() {
                basis.push(r);
                if basis.len() == n + 1 {
                    break;
                }
            }
        }
        if basis.len() < n + 1 {
            // The rows do not bound any direction of some coordinate: only an empty polytope
            // can be given like that here (callers count bounded sets).
            return Ok(Vec::new());
        }
        let square: Vec<Vec<i128>> = basis.iter().map(|&b| h[b].clone()).collect();
        let mut rays: Vec<(Vec<i128>, u128)> = Vec::with_capacity(n + 1);
        for (i, &b) in basis.iter().enumerate() {
            let unit: Vec<i128> = (0..=n).map(|j| i128::from(j == i)).collect();
            let Some(x) = solve(&square, &unit)? else {
                return Ok(Vec::new());
            };
            let mask = basis
                .iter()
                .filter(|&&o| o != b)
                .fold(0u128, |a, &o| a | 1 << o);
            rays.push((primitive(&x)?, mask));
        }
        for r in (0..m).filter(|r| !basis.contains(r)) {
            let row = &h[r];
            let values: Vec<i128> = rays.iter().map(|(y, _)| dot(row, y)).collect::<Res<_>>()?;
            let plus: Vec<usize> = (0..rays.len()).filter(|&i| values[i] > 0).collect();
            let minus: Vec<usize> = (0..rays.len()).filter(|&i| values[i] < 0).collect();
            work.spend_ray_tests((plus.len() * minus.len() * rays.len()) as u128)?;
            let mut next: Vec<(Vec<i128>, u128)> = Vec::new();
            for &p in &plus {
                for &q in &minus {
                    let common = rays[p].1 & rays[q].1;
                    if (common.count_ones() as usize) + 1 < n {
                        continue;
                    }
                    let adjacent = rays
                        .iter()
                        .enumerate()
                        .all(|(o, (_, z))| o == p || o == q || common & z != common);
                    if !adjacent {
                        continue;
                    }
                    let (vp, vq) = (values[p], -values[q]);
                    let combined: Vec<i128> = rays[p]
                        .0
                        .iter()
                        .zip(&rays[q].0)
                        .map(|(a, b)| {
                            add(
                                mul(vq, *a, "vertices")?,
                                mul(vp, *b, "vertices")?,
                                "vertices",
                            )
                        })
                        .collect::<Res<_>>()?;
                    next.push((reduce(combined), common | 1 << r));
                }
            }
            for (i, ray) in rays.into_iter().enumerate() {
                if values[i] > 0 {
                    next.push(ray);
                } else if values[i] == 0 {
                    next.push((ray.0, ray.1 | 1 << r));
                }
            }
            rays = next;
        }
        // Rays with λ = 0 are directions of recession. Without any ray with λ > 0 the polytope
        // is empty (its rows may still leave directions open); with one it is unbounded, which
        // callers exclude.
        if rays.iter().all(|(y, _)| y[n] <= 0) {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(rays.len());
        for (y, mask) in rays {
            if y[n] <= 0 {
                return Err(PolyError::Unbounded {
                    set: "a polytope slice".into(),
                });
            }
            let point = y[..n]
                .iter()
                .map(|&v| Rat::new(v, y[n]))
                .collect::<Res<Vec<_>>>()?;
            let tight = (0..m).filter(|&r| mask & 1 << r != 0).collect();
            out.push(Vertex { point, tight });
        }
        Ok(out)
    }

    /// Pairs of vertices joined by an edge: no third vertex is tight on every row both are
    /// (the smallest face holding both then has two vertices, so it is a segment).
    fn edges(&self, vertices: &[Vertex], work: &mut Work) -> Res<Vec<(usize, usize)>> {
        let v = vertices.len() as u128;
        work.spend_ray_tests(v * v * v / 2)?;
        let masks: Vec<u128> = vertices
            .iter()
            .map(|v| v.tight.iter().fold(0u128, |a, &r| a | 1 << r))
            .collect();
        let mut out = Vec::new();
        for i in 0..masks.len() {
            for j in i + 1..masks.len() {
                let common = masks[i] & masks[j];
                let alone = masks
                    .iter()
                    .enumerate()
                    .all(|(o, z)| o == i || o == j || common & z != common);
                if alone {
                    out.push((i, j));
                }
            }
        }
        Ok(out)
    }
}

/// The values once each, in increasing order.
fn sorted_distinct(values: impl Iterator<Item = Rat>) -> Vec<Rat> {
    let mut out: Vec<Rat> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out.sort_by(|a, b| a.cmp_val(*b));
    out
}

/// `Σ at(c)` over the integer critical values `c` plus `Σ between(i, a, b)` over the integers
/// `a..=b` strictly between critical values `i` and `i + 1`: a sweep's total.
fn sum_over_stretches(
    critical: &[Rat],
    work: &mut Work,
    mut at: impl FnMut(i128, &mut Work) -> Res<i128>,
    mut between: impl FnMut(usize, i128, i128, &mut Work) -> Res<i128>,
) -> Res<i128> {
    let mut total = 0i128;
    for (i, c) in critical.iter().enumerate() {
        if c.den == 1 {
            total = add(total, at(c.num, work)?, "sum")?;
        }
        if let Some(next) = critical.get(i + 1) {
            let (a, b) = (c.floor() + 1, next.ceil() - 1);
            if a <= b {
                total = add(total, between(i, a, b, work)?, "sum")?;
            }
        }
    }
    Ok(total)
}

/// The vertex projections on `tₖ` (sorted, distinct) and, for each stretch between two
/// consecutive ones, the period of its slice counts: the lcm of `|eₖ|` over the primitive
/// directions `e` of the edges that cross it.
fn stretches(
    vertices: &[Vertex],
    edges: &[(usize, usize)],
    along: &Direction,
) -> Res<(Vec<Rat>, Vec<i128>)> {
    let values: Vec<Rat> = vertices
        .iter()
        .map(|v| along.value(&v.point))
        .collect::<Res<_>>()?;
    let critical = sorted_distinct(values.iter().copied());
    let mut periods = vec![1i128; critical.len().saturating_sub(1)];
    for &(i, j) in edges {
        let step = along.step(&segment_direction(&vertices[i].point, &vertices[j].point)?)?;
        if step == 0 {
            continue;
        }
        let (lo, hi) = if values[i].cmp_val(values[j]).is_lt() {
            (values[i], values[j])
        } else {
            (values[j], values[i])
        };
        for (s, period) in periods.iter_mut().enumerate() {
            if lo.cmp_val(critical[s]).is_le() && hi.cmp_val(critical[s + 1]).is_ge() {
                *period = lcm(*period, step)?;
            }
        }
    }
    Ok((critical, periods))
}

/// What a sweep follows: a coordinate, or a linear form `c·t` across the polytope.
#[derive(Clone, Debug)]
enum Direction {
    Axis(usize),
    Functional(Vec<i128>),
}

impl Direction {
    /// The direction's value at a point.
    fn value(&self, point: &[Rat]) -> Res<Rat> {
        match self {
            Direction::Axis(k) => Ok(point[*k]),
            Direction::Functional(c) => c
                .iter()
                .zip(point)
                .try_fold(Rat::int(0), |s, (a, x)| s.add(x.mul(Rat::int(*a))?)),
        }
    }

    /// How far one step along the integer direction `e` moves the value, in absolute terms.
    fn step(&self, e: &[i128]) -> Res<i128> {
        match self {
            Direction::Axis(k) => Ok(e[*k].abs()),
            Direction::Functional(c) => Ok(dot(c, e)?.abs()),
        }
    }
}

/// The primitive integer direction of the segment `p → q` (zero when they coincide).
fn segment_direction(p: &[Rat], q: &[Rat]) -> Res<Vec<i128>> {
    let diff: Vec<Rat> = p
        .iter()
        .zip(q)
        .map(|(a, b)| b.sub(*a))
        .collect::<Res<_>>()?;
    primitive(&diff)
}

/// `Σ_{i=0}^{n−1} ⌊(a·i + b)/m⌋` for `m > 0`, by the Euclidean reduction: `O(log m)` steps.
fn floor_sum(n: i128, m: i128, a: i128, b: i128) -> Res<i128> {
    let pairs = mul(n, n - 1, "floor sum")? / 2;
    let (a0, b0) = (a.rem_euclid(m), b.rem_euclid(m));
    // a = a0 + m·⌊a/m⌋ and b likewise: the whole parts sum in closed form.
    let whole = add(
        mul(pairs, floor_div(a, m), "floor sum")?,
        mul(n, floor_div(b, m), "floor sum")?,
        "floor sum",
    )?;
    add(whole, floor_sum_reduced(n, m, a0, b0)?, "floor sum")
}

/// [`floor_sum`] for `0 ≤ a, b < m`.
fn floor_sum_reduced(mut n: i128, mut m: i128, mut a: i128, mut b: i128) -> Res<i128> {
    let mut total = 0i128;
    loop {
        if a >= m {
            let pairs = mul(n, n - 1, "floor sum")? / 2;
            total = add(total, mul(pairs, a / m, "floor sum")?, "floor sum")?;
            a %= m;
        }
        if b >= m {
            total = add(total, mul(n, b / m, "floor sum")?, "floor sum")?;
            b %= m;
        }
        let top = add(mul(a, n, "floor sum")?, b, "floor sum")?;
        if top < m {
            return Ok(total);
        }
        (n, b) = (top / m, top % m);
        (m, a) = (a, m);
    }
}

/// Whether a stretch of `width + 1` values is cheaper to count slice by slice than by
/// interpolation (`samples` values per residue of `period`).
fn direct_stretch(width: i128, period: i128, samples: i128) -> bool {
    width < samples.saturating_mul(period).saturating_mul(2)
}

/// Slice counts a sweep along a coordinate needs: one per integral vertex projection, and per
/// stretch either every value or `samples` per residue of its period.
fn sweep_cost(critical: &[Rat], periods: &[i128], samples: i128) -> u128 {
    let mut cost = critical.iter().filter(|c| c.den == 1).count() as u128;
    for (i, &period) in periods.iter().enumerate() {
        let (a, b) = (critical[i].floor() + 1, critical[i + 1].ceil() - 1);
        if a > b {
            continue;
        }
        cost += if direct_stretch(b - a, period, samples) {
            (b - a + 1) as u128
        } else {
            samples.saturating_mul(period) as u128
        };
    }
    cost
}

fn dot(a: &[i128], b: &[i128]) -> Res<i128> {
    a.iter().zip(b).try_fold(0i128, |s, (x, y)| {
        add(s, mul(*x, *y, "vertices")?, "vertices")
    })
}

/// The integer vector with coprime entries along a rational direction.
fn primitive(x: &[Rat]) -> Res<Vec<i128>> {
    let den = x.iter().try_fold(1i128, |l, d| lcm(l, d.den))?;
    let ints: Vec<i128> = x
        .iter()
        .map(|d| mul(d.num, den / d.den, "vertices"))
        .collect::<Res<_>>()?;
    Ok(reduce(ints))
}

/// `v` divided by the gcd of its entries.
fn reduce(v: Vec<i128>) -> Vec<i128> {
    let g = v.iter().fold(0, |g, &x| gcd(g, x));
    if g <= 1 {
        v
    } else {
        v.into_iter().map(|x| x / g).collect()
    }
}

/// The rank of an integer matrix (exact rational elimination).
fn rank(m: &[Vec<i128>]) -> Res<usize> {
    let mut a: Vec<Vec<Rat>> = m
        .iter()
        .map(|r| r.iter().map(|&v| Rat::int(v)).collect())
        .collect();
    let cols = a.first().map_or(0, Vec::len);
    let mut rank = 0;
    for col in 0..cols {
        let Some(p) = (rank..a.len()).find(|&r| !a[r][col].is_zero()) else {
            continue;
        };
        a.swap(rank, p);
        let pivot = a[rank].clone();
        for row in a.iter_mut().skip(rank + 1) {
            if !row[col].is_zero() {
                let f = row[col].div(pivot[col])?;
                for (v, p) in row.iter_mut().zip(&pivot).skip(col) {
                    *v = v.sub(f.mul(*p)?)?;
                }
            }
        }
        rank += 1;
    }
    Ok(rank)
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
        let value = |c: &[i128], b: i128, t: &[i128]| -> i128 {
            c.iter().zip(t).map(|(a, x)| a * x).sum::<i128>() + b
        };
        loop {
            if p.rows.iter().all(|(c, b)| value(c, *b, &t) >= 0)
                && p.eqs.iter().all(|(c, b)| value(c, *b, &t) == 0)
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
    fn a_tag_the_line_determines_is_dropped() {
        // Byte addresses 0 ≤ t < 10⁶ and their 8-byte line 64w + s, as a cache model writes
        // it: 0 ≤ s ≤ 63 and t − 7 ≤ 8·(64w + s) ≤ t. The tag goes first (the rows read only
        // the line), then the line (8 consecutive values of 8·line hold one multiple of 8).
        let mut p = IntPolytope::new(3);
        p.add_inequality(vec![1, 0, 0], 0);
        p.add_inequality(vec![-1, 0, 0], 999_999);
        p.add_inequality(vec![0, 0, 1], 0);
        p.add_inequality(vec![0, 0, -1], 63);
        p.add_inequality(vec![-1, 512, 8], 7);
        p.add_inequality(vec![1, -512, -8], 0);
        let kept = p.clone().reduced().unwrap().unwrap();
        let dropped = kept.without_determined().unwrap().unwrap();
        assert_eq!(dropped.dims, 1, "{dropped:?}");
        assert_eq!(p.count().unwrap(), 1_000_000);
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
    fn many_dimensions_are_sliced_exactly() {
        // Eight coordinates in [0, 3] chained by t_{k+1} ≤ t_k + 1 and a sum bound: above
        // MANY_DIMS' threshold the narrowest coordinate is sliced instead of enumerating
        // vertices; the count must not change.
        let n = 8;
        let mut p = IntPolytope::new(n);
        for k in 0..n {
            let mut lower = vec![0; n];
            lower[k] = 1;
            p.add_inequality(lower.clone(), 0);
            p.add_inequality(lower.iter().map(|v| -v).collect(), 3);
            if k + 1 < n {
                let mut chain = vec![0; n];
                chain[k] = 1;
                chain[k + 1] = -1;
                p.add_inequality(chain, 1);
            }
        }
        p.add_inequality(vec![-1; n], 13);
        assert!(p.dims >= MANY_DIMS);
        assert_eq!(p.count().unwrap(), brute(&p, 0, 3));
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
        // 4i + 6j = 2k has solutions only for some k; no coefficient is ±1 after the gcd.
        let mut r = IntPolytope::new(3);
        r.add_equality(vec![4, 6, -10], 2);
        for d in 0..3 {
            let mut lo = vec![0; 3];
            lo[d] = 1;
            let mut hi = vec![0; 3];
            hi[d] = -1;
            r.add_inequality(lo, 0);
            r.add_inequality(hi, 20);
        }
        assert_eq!(r.count().unwrap(), brute(&r, 0, 20));
    }

    #[test]
    fn few_values_of_a_lifted_division() {
        // { (i, j, q) : 0 ≤ i, j < 3000, q = ⌊(180i + j)/16384⌋ }: 9·10⁶ points, counted by
        // sweeping q (34 values) rather than i, whose stretch period is 4096.
        let mut p = IntPolytope::new(3);
        p.add_inequality(vec![1, 0, 0], 0);
        p.add_inequality(vec![-1, 0, 0], 2999);
        p.add_inequality(vec![0, 1, 0], 0);
        p.add_inequality(vec![0, -1, 0], 2999);
        p.add_inequality(vec![180, 1, -16384], 0);
        p.add_inequality(vec![-180, -1, 16384], 16383);
        let mut work = Work::default();
        assert_eq!(p.count_with(&mut work).unwrap(), 3000 * 3000);
        assert!(work.slices < 2000, "{} slices", work.slices);
    }

    #[test]
    fn thin_diagonal_slab_is_sliced_across() {
        // 0 ≤ a < 1300 and 0 ≤ 128b − 325a + 127 ≤ 1: two lines of slope 325/128, as the cache
        // sets of a 1300-element row walk leave them (8s = 1300t₀ + t₂ − 512w, divided by 4).
        // Swept along a or b, each stretch has period 128 or 325; sliced across the band,
        // each of its two values is an equality, one dimension less.
        let mut p = IntPolytope::new(2);
        p.add_inequality(vec![1, 0], 0);
        p.add_inequality(vec![-1, 0], 1299);
        p.add_inequality(vec![-325, 128], 127);
        p.add_inequality(vec![325, -128], -126);
        let expected = (0..1300i128)
            .flat_map(|a| [325 * a - 127, 325 * a - 126])
            .filter(|v| v.rem_euclid(128) == 0)
            .count() as i128;
        let mut work = Work::default();
        assert_eq!(p.count_with(&mut work).unwrap(), expected);
        assert!(work.slices <= 2, "{} slices", work.slices);
    }

    proptest::proptest! {
        #[test]
        fn floor_sums_match_brute_force(n in 1i128..60, m in 1i128..40, a in -90i128..90, b in -500i128..500) {
            let brute: i128 = (0..n).map(|i| floor_div(a * i + b, m)).sum();
            proptest::prop_assert_eq!(floor_sum(n, m, a, b).unwrap(), brute);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        #[test]
        fn thin_slabs_match_brute_force(
            c in proptest::collection::vec(-3i128..=3, 3),
            low in -8i128..=8,
            width in 0i128..=4,
            rows in proptest::collection::vec((proptest::collection::vec(-3i128..=3, 3), -12i128..=12), 0..3),
        ) {
            let mut p = IntPolytope::new(3);
            for d in 0..3 {
                let mut lo = vec![0; 3]; lo[d] = 1;
                let mut hi = vec![0; 3]; hi[d] = -1;
                p.add_inequality(lo, 6);
                p.add_inequality(hi, 6);
            }
            // low ≤ c·t ≤ low + width.
            p.add_inequality(c.clone(), -low);
            p.add_inequality(c.iter().map(|v| -v).collect(), low + width);
            for (r, b) in rows {
                p.add_inequality(r, b);
            }
            proptest::prop_assert_eq!(p.count().unwrap(), brute(&p, -6, 6));
        }

        /// A cache line `u = m·w + s` as tag `w` and index `0 ≤ s < m`, with rows that read the
        /// line (which drop the tag) and sometimes one that reads the tag alone (which keeps it).
        #[test]
        fn tag_and_index_match_brute_force(
            m in 2i128..=4,
            line_rows in proptest::collection::vec((-2i128..=2, -2i128..=2, -2i128..=2, -6i128..=6), 0..3),
            tag_row in proptest::option::of((-2i128..=2, -2i128..=2, -3i128..=3)),
        ) {
            // Coordinates (t₀, t₁, w, s).
            let mut p = IntPolytope::new(4);
            for d in 0..2 {
                let mut lo = vec![0; 4]; lo[d] = 1;
                let mut hi = vec![0; 4]; hi[d] = -1;
                p.add_inequality(lo, 6);
                p.add_inequality(hi, 6);
            }
            p.add_inequality(vec![0, 0, 0, 1], 0);
            p.add_inequality(vec![0, 0, 0, -1], m - 1);
            // −6 ≤ u ≤ 6 keeps w in the enumerated box.
            p.add_inequality(vec![0, 0, m, 1], 6);
            p.add_inequality(vec![0, 0, -m, -1], 6);
            for (c0, c1, k, b) in line_rows {
                p.add_inequality(vec![c0, c1, k * m, k], b);
            }
            if let Some((c0, k, b)) = tag_row {
                p.add_inequality(vec![c0, 0, k, 0], b);
            }
            proptest::prop_assert_eq!(p.count().unwrap(), brute(&p, -6, 6));
        }

        #[test]
        fn matches_brute_force(
            dims in 1usize..=3,
            rows in proptest::collection::vec((proptest::collection::vec(-3i128..=3, 3), -12i128..=12), 0..5),
            eq in proptest::option::of((proptest::collection::vec(-4i128..=4, 3), -6i128..=6)),
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
            if let Some((c, b)) = eq {
                p.add_equality(c[..dims].to_vec(), b);
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

        #[test]
        fn long_stretches_3d_match_brute_force(
            rows in proptest::collection::vec((proptest::collection::vec(-3i128..=3, 3), -30i128..=30), 0..4),
            size in 14i128..=24,
        ) {
            // Interpolation in three dimensions, with edge periods above 1.
            let mut p = IntPolytope::new(3);
            for d in 0..3 {
                let mut lo = vec![0; 3]; lo[d] = 1;
                let mut hi = vec![0; 3]; hi[d] = -1;
                p.add_inequality(lo, 0);
                p.add_inequality(hi, size);
            }
            for (c, b) in rows {
                p.add_inequality(c, b);
            }
            proptest::prop_assert_eq!(p.count().unwrap(), brute(&p, 0, size));
        }
    }
}
