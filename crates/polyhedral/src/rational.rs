//! Exact rationals and integer helpers on `i128`, with overflow reported instead of wrapped.

use crate::PolyError;

pub(crate) type Res<T> = Result<T, PolyError>;

fn overflow(context: &'static str) -> PolyError {
    PolyError::Overflow { context }
}

pub(crate) fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i128
}

pub(crate) fn lcm(a: i128, b: i128) -> Res<i128> {
    if a == 0 || b == 0 {
        return Ok(a.max(b));
    }
    (a / gcd(a, b))
        .checked_mul(b)
        .map(i128::abs)
        .ok_or_else(|| overflow("lcm"))
}

pub(crate) fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

pub(crate) fn ceil_div(a: i128, b: i128) -> i128 {
    -floor_div(-a, b)
}

pub(crate) fn mul(a: i128, b: i128, context: &'static str) -> Res<i128> {
    a.checked_mul(b).ok_or_else(|| overflow(context))
}

pub(crate) fn add(a: i128, b: i128, context: &'static str) -> Res<i128> {
    a.checked_add(b).ok_or_else(|| overflow(context))
}

/// A reduced fraction with positive denominator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Rat {
    pub num: i128,
    pub den: i128,
}

impl Rat {
    pub fn int(v: i128) -> Rat {
        Rat { num: v, den: 1 }
    }

    pub fn new(num: i128, den: i128) -> Res<Rat> {
        if den == 0 {
            return Err(overflow("division by zero"));
        }
        let g = gcd(num, den).max(1);
        let s = if den < 0 { -1 } else { 1 };
        Ok(Rat {
            num: s * num / g,
            den: s * den / g,
        })
    }

    pub fn is_zero(self) -> bool {
        self.num == 0
    }

    pub fn add(self, o: Rat) -> Res<Rat> {
        let n = add(
            mul(self.num, o.den, "rational")?,
            mul(o.num, self.den, "rational")?,
            "rational",
        )?;
        Rat::new(n, mul(self.den, o.den, "rational")?)
    }

    pub fn sub(self, o: Rat) -> Res<Rat> {
        self.add(Rat {
            num: -o.num,
            den: o.den,
        })
    }

    pub fn mul(self, o: Rat) -> Res<Rat> {
        Rat::new(
            mul(self.num, o.num, "rational")?,
            mul(self.den, o.den, "rational")?,
        )
    }

    pub fn div(self, o: Rat) -> Res<Rat> {
        Rat::new(
            mul(self.num, o.den, "rational")?,
            mul(self.den, o.num, "rational")?,
        )
    }

    pub fn floor(self) -> i128 {
        floor_div(self.num, self.den)
    }

    pub fn ceil(self) -> i128 {
        ceil_div(self.num, self.den)
    }

    pub fn cmp_val(self, o: Rat) -> std::cmp::Ordering {
        match (self.num.checked_mul(o.den), o.num.checked_mul(self.den)) {
            (Some(l), Some(r)) => l.cmp(&r),
            _ => cmp_fractions(self.num, self.den, o.num, o.den),
        }
    }
}

/// `a/b` against `c/d` (`b, d > 0`) exactly, whatever their size: whole parts first, then the
/// fractional parts by their reciprocals (a continued-fraction expansion), so no product can
/// overflow. A rounded comparison could misorder two close bounds and pick the wrong edge.
fn cmp_fractions(a: i128, b: i128, c: i128, d: i128) -> std::cmp::Ordering {
    let (qa, qc) = (floor_div(a, b), floor_div(c, d));
    if qa != qc {
        return qa.cmp(&qc);
    }
    let (ra, rc) = (a - qa * b, c - qc * d);
    match (ra == 0, rc == 0) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        // ra/b < rc/d exactly when d/rc < b/ra.
        (false, false) => cmp_fractions(d, rc, b, ra),
    }
}

/// Solves the square system `m · x = rhs` exactly; `None` when it is singular.
pub(crate) fn solve(m: &[Vec<i128>], rhs: &[i128]) -> Res<Option<Vec<Rat>>> {
    let n = rhs.len();
    let mut a: Vec<Vec<Rat>> = m
        .iter()
        .zip(rhs)
        .map(|(row, &r)| {
            row.iter()
                .map(|&v| Rat::int(v))
                .chain([Rat::int(r)])
                .collect()
        })
        .collect();
    for col in 0..n {
        let Some(p) = (col..n).find(|&r| !a[r][col].is_zero()) else {
            return Ok(None);
        };
        a.swap(col, p);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col && !row[col].is_zero() {
                let f = row[col].div(pivot[col])?;
                for (v, p) in row.iter_mut().zip(&pivot).skip(col) {
                    *v = v.sub(f.mul(*p)?)?;
                }
            }
        }
    }
    (0..n)
        .map(|i| a[i][n].div(a[i][i]))
        .collect::<Res<Vec<_>>>()
        .map(Some)
}

/// One integer solution of `m · x = rhs` (any number of equations and unknowns): Gaussian
/// elimination with the free unknowns set to zero. `None` when the system has no rational
/// solution, when that one is not integral (another choice of the free unknowns might be; the
/// callers only lose a shortcut) or when the arithmetic overflows.
pub(crate) fn integer_solution(m: &[Vec<i128>], rhs: &[i128]) -> Option<Vec<i128>> {
    let unknowns = m.first().map_or(0, Vec::len);
    let mut a: Vec<Vec<Rat>> = m
        .iter()
        .zip(rhs)
        .map(|(row, &r)| row.iter().chain([&r]).map(|&v| Rat::int(v)).collect())
        .collect();
    let mut pivots: Vec<(usize, usize)> = Vec::new();
    for col in 0..unknowns {
        let done = pivots.len();
        let Some(p) = (done..a.len()).find(|&r| !a[r][col].is_zero()) else {
            continue;
        };
        a.swap(done, p);
        let pivot = a[done].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != done && !row[col].is_zero() {
                let f = row[col].div(pivot[col]).ok()?;
                for (v, p) in row.iter_mut().zip(&pivot).skip(col) {
                    *v = v.sub(f.mul(*p).ok()?).ok()?;
                }
            }
        }
        pivots.push((done, col));
    }
    // A row left without a pivot reads 0 = its right-hand side.
    if a[pivots.len()..].iter().any(|row| !row[unknowns].is_zero()) {
        return None;
    }
    let mut x = vec![0i128; unknowns];
    for (r, col) in pivots {
        let v = a[r][unknowns].div(a[r][col]).ok()?;
        if v.den != 1 {
            return None;
        }
        x[col] = v.num;
    }
    Some(x)
}

/// Binomial coefficient `C(n, k)` for small `k`.
pub(crate) fn binom(n: i128, k: usize) -> Res<i128> {
    let mut r = 1i128;
    for i in 0..k as i128 {
        r = mul(r, n - i, "binomial")? / (i + 1);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_integer_solution_is_found_and_an_inconsistent_system_has_none() {
        let m = vec![vec![1, 0], vec![0, 2], vec![1, 1], vec![2, 2]];
        assert_eq!(integer_solution(&m, &[3, -2, 2, 4]), Some(vec![3, -1]));
        assert_eq!(integer_solution(&m, &[3, -2, 2, 5]), None);
        // x₁ = 1/2: rational, not integral.
        assert_eq!(integer_solution(&[vec![0, 2]], &[1]), None);
    }

    proptest::proptest! {
        #[test]
        fn integer_solutions_solve(
            m in proptest::collection::vec(proptest::collection::vec(-4i128..=4, 3), 0..6),
            x in proptest::collection::vec(-5i128..=5, 3),
            off in -2i128..=2,
        ) {
            // A consistent system gives some integer solution or none; whatever it gives solves
            // it. Perturbing one right-hand side may make it inconsistent: still only solutions.
            let mut rhs: Vec<i128> = m.iter().map(|r| r.iter().zip(&x).map(|(a, b)| a * b).sum()).collect();
            for rhs in [rhs.clone(), { if let Some(v) = rhs.first_mut() { *v += off; } rhs }] {
                if let Some(y) = integer_solution(&m, &rhs) {
                    for (r, b) in m.iter().zip(&rhs) {
                        proptest::prop_assert_eq!(r.iter().zip(&y).map(|(a, v)| a * v).sum::<i128>(), *b);
                    }
                }
            }
        }

        #[test]
        fn fractions_compare_exactly(a in -10_000i128..10_000, b in 1i128..500, c in -10_000i128..10_000, d in 1i128..500, k in 0u32..100) {
            // Scaled up so the cross products overflow, the order must stay the small one's.
            let scale = 1i128 << k;
            let want = (a * d).cmp(&(c * b));
            proptest::prop_assert_eq!(cmp_fractions(a * scale, b * scale, c * scale, d * scale), want);
            proptest::prop_assert_eq!(cmp_fractions(a, b, c, d), want);
        }
    }
}
