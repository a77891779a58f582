//! Subscripts against declared extents: every subscript's smallest and largest value over the
//! iterations the kernel executes, for concrete parameter values, so that a kernel reading or
//! writing past an array is refused before anything simulates, models or runs it.
//!
//! Loops that bound inner loops (triangular nests) are walked value by value, up to
//! [`ENUMERATED_STEPS`] values; the others are taken as their whole range at once (no loop
//! inside depends on their variable, so their ranges form a box and each term of an affine
//! subscript takes its extremes independently).
//! Past the budget a loop that bounds inner ones is taken at its first and last values at which
//! its body executes, which is exact for a two-deep nest with unit steps and for every
//! rectangular nest.

use crate::KernelError;
use crate::ir::{Kernel, Node};
use crate::stream::{Lin, first_refs, inner_bounds_use, trip_count};

/// Values of loops that bound inner loops walked one by one before the walk takes only their
/// first and last executing values.
pub const ENUMERATED_STEPS: u64 = 1 << 22;

/// The smallest and largest value a subscript took, if it was evaluated at all.
type Span = Option<(i64, i64)>;

/// Loops and statements visited before the walk stops looking: a deep nest of triangular
/// loops past [`ENUMERATED_STEPS`] has 2^depth executing ends.
const VISITS: u64 = 1 << 24;

/// Why the walk stopped.
enum Stop {
    /// A bound or subscript does not fit in 64 bits.
    Overflow,
    /// The budgets are spent: what was seen so far is checked.
    Enough,
}

struct Walk<'k> {
    kernel: &'k Kernel,
    starts: Vec<Lin>,
    ends: Vec<Lin>,
    /// Per reference, per dimension: the subscript with the parameters bound.
    subscripts: Vec<Vec<Lin>>,
    first_ref: Vec<usize>,
    spans: Vec<Vec<Span>>,
    budget: u64,
    visits: u64,
}

impl Kernel {
    /// Refuses a reference whose subscript leaves its array's declared extent (below 0 or at or
    /// past the extent) at some iteration the kernel executes with parameter values `params`.
    /// The error names the reference's position, the array, the subscript's range and the
    /// extent.
    pub fn check_subscripts(&self, params: &[i64]) -> Result<(), KernelError> {
        let overflow = || KernelError::Binding {
            origin: self.origin.clone(),
            message: "a subscript, loop bound or trip count overflows 64 bits with these \
                      parameter values"
                .into(),
        };
        let lin = |a: &crate::Affine| Lin::from_affine(a, params).ok_or_else(overflow);
        let mut walk = Walk {
            kernel: self,
            starts: self
                .loops
                .iter()
                .map(|l| lin(&l.start))
                .collect::<Result<_, _>>()?,
            ends: self
                .loops
                .iter()
                .map(|l| lin(&l.end_inclusive))
                .collect::<Result<_, _>>()?,
            subscripts: self
                .references()
                .map(|(_, r)| r.subscripts.iter().map(lin).collect::<Result<_, _>>())
                .collect::<Result<_, _>>()?,
            first_ref: first_refs(self),
            spans: self
                .references()
                .map(|(_, r)| vec![None; r.subscripts.len()])
                .collect(),
            budget: ENUMERATED_STEPS,
            visits: VISITS,
        };
        let mut ranges = vec![(0i128, 0i128); self.loops.len()];
        match walk.walk(&self.body, &mut ranges) {
            Ok(_) | Err(Stop::Enough) => {}
            Err(Stop::Overflow) => return Err(overflow()),
        }
        for (index, (_, r)) in self.references().enumerate() {
            for (dim, span) in walk.spans[index].iter().enumerate() {
                let Some((lo, hi)) = *span else { continue };
                let extent = self.arrays[r.array].extents[dim]
                    .bind_params(params)
                    .and_then(|e| e.as_constant())
                    .ok_or_else(overflow)?;
                if lo < 0 || hi >= extent {
                    return Err(self.out_of_bounds(r, dim, (lo, hi), extent, params));
                }
            }
        }
        Ok(())
    }

    fn out_of_bounds(
        &self,
        r: &crate::Reference,
        dim: usize,
        (lo, hi): (i64, i64),
        extent: i64,
        params: &[i64],
    ) -> KernelError {
        let array = &self.arrays[r.array];
        let which = if r.subscripts.len() > 1 {
            format!(" (dimension {} of {})", dim + 1, r.subscripts.len())
        } else {
            String::new()
        };
        let valid = if extent > 0 {
            format!("0 to {}", extent - 1)
        } else {
            "none".to_owned()
        };
        let values: Vec<String> = self
            .params
            .iter()
            .zip(params)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        let with = if values.is_empty() {
            String::new()
        } else {
            format!(" with {}", values.join(", "))
        };
        KernelError::OutOfBounds {
            origin: self.origin.clone(),
            line: r.pos.line,
            column: r.pos.column,
            message: format!(
                "`{}`: subscript `{}`{which} runs from {lo} to {hi}{with}, outside `{}`'s \
                 extent {extent} (valid subscripts {valid})",
                self.render_ref(r),
                self.render(&r.subscripts[dim]),
                array.name,
            ),
        }
    }
}

impl Walk<'_> {
    /// Walks `nodes` with the enclosing loops' values in `ranges`: a single value for a loop
    /// walked value by value, the whole range for one taken at once. True when a statement ran.
    fn walk(&mut self, nodes: &[Node], ranges: &mut [(i128, i128)]) -> Result<bool, Stop> {
        let mut ran = false;
        for node in nodes {
            self.visits = self.visits.checked_sub(1).ok_or(Stop::Enough)?;
            ran |= match node {
                Node::Statement(s) => {
                    self.statement(*s, ranges)?;
                    true
                }
                Node::Loop { id, body } => self.walk_loop(*id, body, ranges)?,
            };
        }
        Ok(ran)
    }

    fn statement(&mut self, s: usize, ranges: &[(i128, i128)]) -> Result<(), Stop> {
        let first = self.first_ref[s];
        for r in first..first + self.kernel.statements[s].refs.len() {
            for (sub, span) in self.subscripts[r].iter().zip(&mut self.spans[r]) {
                let (lo, hi) = sub.interval(ranges);
                let (lo, hi) = (
                    i64::try_from(lo).map_err(|_| Stop::Overflow)?,
                    i64::try_from(hi).map_err(|_| Stop::Overflow)?,
                );
                *span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            }
        }
        Ok(())
    }

    /// A loop bound: only loops walked value by value appear in bounds, so the low ends are
    /// their values.
    fn bound(lin: &Lin, ranges: &[(i128, i128)]) -> Result<i64, Stop> {
        let (lo, _) = lin.interval(ranges);
        i64::try_from(lo).map_err(|_| Stop::Overflow)
    }

    fn walk_loop(
        &mut self,
        id: usize,
        body: &[Node],
        ranges: &mut [(i128, i128)],
    ) -> Result<bool, Stop> {
        let start = Self::bound(&self.starts[id], ranges)?;
        let end = Self::bound(&self.ends[id], ranges)?;
        let step = self.kernel.loops[id].step;
        let trips = trip_count(start, end, step).ok_or(Stop::Overflow)?;
        if trips == 0 {
            return Ok(false);
        }
        let value = |k: u64| i128::from(start) + i128::from(step) * i128::from(k);
        if !inner_bounds_use(body, self.kernel, id) {
            // No inner bound depends on this loop: its body runs the same way for every value,
            // and each subscript's extremes are at the loop's first or last value.
            let last = value(trips - 1);
            ranges[id] = (value(0).min(last), value(0).max(last));
            return self.walk(body, ranges);
        }
        if self.budget >= trips {
            self.budget -= trips;
            let mut ran = false;
            for k in 0..trips {
                ranges[id] = (value(k), value(k));
                ran |= self.walk(body, ranges)?;
            }
            return Ok(ran);
        }
        self.executing_ends(id, body, ranges, trips, value)
    }

    /// The loop at the first and the last of its values at which the body executes, looked for
    /// from each end while the budget lasts.
    fn executing_ends(
        &mut self,
        id: usize,
        body: &[Node],
        ranges: &mut [(i128, i128)],
        trips: u64,
        value: impl Fn(u64) -> i128,
    ) -> Result<bool, Stop> {
        let mut first = None;
        for k in 0..trips {
            ranges[id] = (value(k), value(k));
            if self.walk(body, ranges)? {
                first = Some(k);
                break;
            }
            self.budget = self.budget.checked_sub(1).ok_or(Stop::Enough)?;
        }
        let Some(first) = first else { return Ok(false) };
        for k in (first + 1..trips).rev() {
            ranges[id] = (value(k), value(k));
            if self.walk(body, ranges)? {
                break;
            }
            self.budget = self.budget.checked_sub(1).ok_or(Stop::Enough)?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::{KernelError, parse_kernel};
    use proptest::prelude::*;

    fn check(text: &str, params: &[(&str, i64)]) -> Result<(), KernelError> {
        let kernel = parse_kernel(text, "k.c").unwrap();
        let define: Vec<(String, i64)> = params.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let values = kernel.param_values(&define).unwrap();
        kernel.check_subscripts(&values)
    }

    #[test]
    fn a_shifted_store_past_the_end_is_refused_with_its_range() {
        let text = "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  a[i+N] = b[i]*2.0;\n";
        let message = check(text, &[("N", 1000)]).unwrap_err().to_string();
        assert_eq!(
            message,
            "k.c:3:3: `a[N+i]`: subscript `N+i` runs from 1000 to 1999 with N=1000, outside \
             `a`'s extent 1000 (valid subscripts 0 to 999)"
        );
    }

    #[test]
    fn a_loop_longer_than_the_array_is_refused() {
        let text = "double a[SZ], b[SZ];\nfor (int i = 0; i < N; ++i)\n  a[i] = b[i];\n";
        let message = check(text, &[("SZ", 1000), ("N", 2071)])
            .unwrap_err()
            .to_string();
        assert!(message.starts_with("k.c:3:10: `b[i]`: subscript `i` runs from 0 to 2070"));
        assert!(check(text, &[("SZ", 2071), ("N", 2071)]).is_ok());
    }

    #[test]
    fn negative_subscripts_are_refused() {
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n  a[i] = a[i-1];\n";
        let message = check(text, &[("N", 10)]).unwrap_err().to_string();
        assert!(
            message.contains("subscript `i-1` runs from -1 to 8"),
            "{message}"
        );
    }

    #[test]
    fn halos_inside_the_extent_are_accepted() {
        let text = "double a[M][N], b[M][N];\nfor (int j = 1; j < M-1; ++j)\n  for (int i = 1; \
                    i < N-1; ++i)\n    b[j][i] = a[j-1][i] + a[j+1][i] + a[j][i-1] + a[j][i+1];\n";
        assert!(check(text, &[("M", 50), ("N", 60)]).is_ok());
        let wide = text.replace("i < N-1", "i < N");
        let message = check(&wide, &[("M", 50), ("N", 60)])
            .unwrap_err()
            .to_string();
        assert!(message.contains("(dimension 2 of 2)"), "{message}");
    }

    #[test]
    fn a_triangular_nest_is_checked_where_it_executes() {
        // At i = N-1 the inner loop is empty: a[i+1] never reaches a[N].
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n  for (int j = i+1; j < N; ++j)\n    \
                    a[i+1] += a[j];\n";
        assert!(check(text, &[("N", 100)]).is_ok());
        let text = text.replace("a[i+1]", "a[i+2]");
        assert!(check(&text, &[("N", 100)]).is_err());
    }

    #[test]
    fn past_the_budget_a_triangular_nest_is_checked_at_its_executing_ends() {
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n  for (int j = i+1; j < N; ++j)\n    \
                    a[i+1] += a[j];\n";
        let n = (super::ENUMERATED_STEPS + 10) as i64;
        assert!(check(text, &[("N", n)]).is_ok());
        let text = text.replace("a[i+1]", "a[i+2]");
        assert!(check(&text, &[("N", n)]).is_err());
    }

    #[test]
    fn a_deep_rectangular_nest_is_checked_without_walking_its_corners() {
        // 2^40 corners; the box of ranges gives the subscript's extremes at once.
        let mut text = String::from("double a[N];\n");
        let mut sub = String::from("0");
        for depth in 0..40 {
            text += &format!("for (int i{depth} = 0; i{depth} < 2; ++i{depth})\n");
            sub += &format!("+i{depth}");
        }
        let body = format!("{text}  a[{sub}] = 1.0;\n");
        assert!(check(&body, &[("N", 41)]).is_ok());
        let message = check(&body, &[("N", 40)]).unwrap_err().to_string();
        assert!(message.contains("runs from 0 to 40"), "{message}");
    }

    #[test]
    fn loops_that_never_run_check_nothing() {
        let text = "double a[N];\nfor (int i = 0; i < M; ++i)\n  a[i+N] = 1.0;\n";
        assert!(check(text, &[("N", 10), ("M", 0)]).is_ok());
    }

    #[test]
    fn a_strided_descending_loop_is_checked_at_its_last_value() {
        let text = "double a[N];\nfor (int i = N-1; i >= 0; i -= 3)\n  a[i-1] = 1.0;\n";
        // i takes 9, 6, 3, 0 for N = 10; a[i-1] reaches -1.
        assert!(check(text, &[("N", 10)]).is_err());
        // For N = 9: 8, 5, 2; a[i-1] stays within 1..7.
        assert!(check(text, &[("N", 9)]).is_ok());
    }

    proptest! {
        /// The check agrees with evaluating every iteration of a small triangular nest.
        #[test]
        fn agrees_with_every_iteration(n in 1i64..12, lo in -3i64..4, hi in -3i64..4,
                                       shift in -3i64..4, step in 1i64..3) {
            let text = format!(
                "double a[N];\nfor (int i = 0; i < N; ++i)\n  for (int j = i+{lo}; j < N+{hi}; \
                 j += {step})\n    a[j-i+{shift}] = 1.0;\n"
            );
            let mut inside = true;
            for i in 0..n {
                let mut j = i + lo;
                while j < n + hi {
                    let s = j - i + shift;
                    inside &= (0..n).contains(&s);
                    j += step;
                }
            }
            prop_assert_eq!(check(&text, &[("N", n)]).is_ok(), inside);
        }
    }
}
