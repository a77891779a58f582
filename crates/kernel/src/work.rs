//! How many accesses a kernel makes for some parameter values, known before any is produced,
//! so that a caller can refuse a stream that would run for days instead of starting it.
//!
//! Loops whose variable no inner bound uses are counted by multiplication, whatever their trip
//! counts; loops that bound inner ones (triangular nests) are walked, up to
//! [`EXPLICIT_STEPS`] iterations. Past that the count is an upper bound from the loops' value
//! ranges (each loop's most trips over the box of its enclosing loops' ranges), which is never
//! below the exact count.

use crate::KernelError;
use crate::ir::{Kernel, Node};
use crate::layout::Layout;
use crate::stream::{
    Lin, address_space_message, first_refs, inner_bounds_use, reference_addresses, trip_count,
};

/// Statements evaluated at corners of the loop nest by [`Kernel::check_addresses`] before it
/// stops looking (a nest of depth d has 2^d corners).
const CORNER_VISITS: u64 = 1 << 16;

/// Iterations of loops that bound inner loops walked for an exact count before an upper bound
/// is taken instead: a few milliseconds.
pub const EXPLICIT_STEPS: u64 = 1 << 22;

/// The work of streaming a kernel's accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessEstimate {
    /// Memory accesses (saturating at `u128::MAX`).
    pub accesses: u128,
    /// Loop iterations, every loop's counted (saturating): work even where a body is empty.
    pub iterations: u128,
    /// True when both counts are exact, false when they are upper bounds.
    pub exact: bool,
}

impl AccessEstimate {
    /// Accesses plus loop iterations: the steps a stream takes.
    pub fn steps(&self) -> u128 {
        self.accesses.saturating_add(self.iterations)
    }
}

/// Why a walk stopped.
enum Stop {
    /// A bound does not fit in 64 bits.
    Overflow,
    /// More than [`EXPLICIT_STEPS`] iterations to walk.
    Budget,
}

struct Tally<'k> {
    kernel: &'k Kernel,
    starts: Vec<Lin>,
    ends: Vec<Lin>,
    per_statement: Vec<u128>,
    iterations: u128,
    budget: u64,
}

impl Kernel {
    /// How many accesses (and loop iterations) the kernel makes with parameter values `params`
    /// (in [`Kernel::params`] order), without producing them: exact in time independent of the
    /// trip counts for rectangular nests, an upper bound when walking the loops that bound
    /// others would take more than [`EXPLICIT_STEPS`] iterations.
    pub fn estimate_accesses(&self, params: &[i64]) -> Result<AccessEstimate, KernelError> {
        const OVERFLOW: &str =
            "a loop bound or trip count overflows 64 bits with these parameter values";
        let overflow = || self.binding_error(OVERFLOW);
        let (starts, ends) = self.bound_lins(params, OVERFLOW)?;
        let mut tally = Tally {
            kernel: self,
            starts,
            ends,
            per_statement: vec![0; self.statements.len()],
            iterations: 0,
            budget: EXPLICIT_STEPS,
        };
        let mut vars = vec![0i64; self.loops.len()];
        match tally.walk(&self.body, 1, &mut vars) {
            Ok(()) => Ok(AccessEstimate {
                accesses: tally.accesses(&tally.per_statement),
                iterations: tally.iterations,
                exact: true,
            }),
            Err(Stop::Overflow) => Err(overflow()),
            Err(Stop::Budget) => Ok(tally.upper_bound()),
        }
    }
}

/// Why [`Kernel::check_addresses`] refuses a kernel whose arithmetic leaves 64 bits.
const ADDRESS_OVERFLOW: &str =
    "an address, loop bound or trip count overflows 64 bits with these parameter values";

impl Kernel {
    fn binding_error(&self, message: &str) -> KernelError {
        KernelError::Binding {
            origin: self.origin.clone(),
            message: message.into(),
        }
    }

    /// Every loop's start and inclusive end with `params` bound; `overflow` names a bound that
    /// does not fit in 64 bits.
    fn bound_lins(
        &self,
        params: &[i64],
        overflow: &str,
    ) -> Result<(Vec<Lin>, Vec<Lin>), KernelError> {
        let lins = |bound: fn(&crate::ir::Loop) -> &crate::Affine| {
            self.loops
                .iter()
                .map(|l| {
                    Lin::from_affine(bound(l), params).ok_or_else(|| self.binding_error(overflow))
                })
                .collect::<Result<Vec<Lin>, KernelError>>()
        };
        Ok((lins(|l| &l.start)?, lins(|l| &l.end_inclusive)?))
    }

    /// The corner walk of [`Kernel::check_addresses`], before it starts.
    fn corners(&self, params: &[i64], layout: &Layout) -> Result<Corners<'_>, KernelError> {
        let (starts, ends) = self.bound_lins(params, ADDRESS_OVERFLOW)?;
        Ok(Corners {
            kernel: self,
            starts,
            ends,
            addresses: reference_addresses(self, params, layout)?,
            first_ref: first_refs(self),
            visits: CORNER_VISITS,
        })
    }

    /// Refuses addresses outside `[0, 2^63)` and loop bounds that overflow, found without
    /// streaming: every reference is evaluated where each enclosing loop is at its first or its
    /// last iteration (given the outer loops' values), where an affine address takes its
    /// extremes in a convex nest. Every point checked is executed, so a refusal is never wrong;
    /// the access stream still checks every address it produces.
    pub fn check_addresses(&self, params: &[i64], layout: &Layout) -> Result<(), KernelError> {
        let mut corners = self.corners(params, layout)?;
        let mut vars = vec![0i64; self.loops.len()];
        match corners.walk(&self.body, &mut vars) {
            Ok(()) | Err(CornerStop::Enough) => Ok(()),
            Err(CornerStop::Overflow) => Err(self.binding_error(ADDRESS_OVERFLOW)),
            Err(CornerStop::Outside) => {
                let at: Vec<String> = self
                    .loops
                    .iter()
                    .zip(&vars)
                    .map(|(l, v)| format!("{}={v}", l.var))
                    .collect();
                Err(KernelError::Binding {
                    origin: self.origin.clone(),
                    message: address_space_message(&at.join(", ")),
                })
            }
        }
    }
}

enum CornerStop {
    Overflow,
    /// An address outside `[0, 2^63)`; the variables hold where.
    Outside,
    /// [`CORNER_VISITS`] spent.
    Enough,
}

struct Corners<'k> {
    kernel: &'k Kernel,
    starts: Vec<Lin>,
    ends: Vec<Lin>,
    addresses: Vec<Lin>,
    first_ref: Vec<usize>,
    visits: u64,
}

impl Corners<'_> {
    fn walk(&mut self, nodes: &[Node], vars: &mut [i64]) -> Result<(), CornerStop> {
        for node in nodes {
            match node {
                Node::Statement(s) => {
                    self.visits = self.visits.checked_sub(1).ok_or(CornerStop::Enough)?;
                    let first = self.first_ref[*s];
                    for r in first..first + self.kernel.statements[*s].refs.len() {
                        match self.addresses[r].eval(vars) {
                            Some(a) if a >= 0 => {}
                            _ => return Err(CornerStop::Outside),
                        }
                    }
                }
                Node::Loop { id, body } => {
                    // A visit per loop too: a nest of empty loops has 2^depth corners and no
                    // statement to spend visits on.
                    self.visits = self.visits.checked_sub(1).ok_or(CornerStop::Enough)?;
                    let start = self.starts[*id].eval(vars).ok_or(CornerStop::Overflow)?;
                    let end = self.ends[*id].eval(vars).ok_or(CornerStop::Overflow)?;
                    let step = self.kernel.loops[*id].step;
                    let trips = trip_count(start, end, step).ok_or(CornerStop::Overflow)?;
                    if trips == 0 {
                        continue;
                    }
                    let last = i128::from(start) + i128::from(step) * (i128::from(trips) - 1);
                    let last = i64::try_from(last).map_err(|_| CornerStop::Overflow)?;
                    vars[*id] = start;
                    self.walk(body, vars)?;
                    if last != start {
                        vars[*id] = last;
                        self.walk(body, vars)?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Tally<'_> {
    /// Adds the executions of the statements under `nodes`, run `times` times with the
    /// enclosing loops' variables in `vars`.
    fn walk(&mut self, nodes: &[Node], times: u128, vars: &mut [i64]) -> Result<(), Stop> {
        for node in nodes {
            match node {
                Node::Statement(s) => {
                    self.per_statement[*s] = self.per_statement[*s].saturating_add(times);
                }
                Node::Loop { id, body } => {
                    let start = self.starts[*id].eval(vars).ok_or(Stop::Overflow)?;
                    let end = self.ends[*id].eval(vars).ok_or(Stop::Overflow)?;
                    let step = self.kernel.loops[*id].step;
                    let trips = trip_count(start, end, step).ok_or(Stop::Overflow)?;
                    if trips == 0 {
                        continue;
                    }
                    self.iterations = self
                        .iterations
                        .saturating_add(times.saturating_mul(u128::from(trips)));
                    if inner_bounds_use(body, self.kernel, *id) {
                        self.budget = self.budget.checked_sub(trips).ok_or(Stop::Budget)?;
                        let mut v = start;
                        for _ in 0..trips {
                            vars[*id] = v;
                            self.walk(body, times, vars)?;
                            v = v.wrapping_add(step);
                        }
                    } else {
                        vars[*id] = start;
                        self.walk(body, times.saturating_mul(u128::from(trips)), vars)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn accesses(&self, executions: &[u128]) -> u128 {
        self.kernel
            .statements
            .iter()
            .zip(executions)
            .map(|(s, n)| n.saturating_mul(s.refs.len() as u128))
            .fold(0, u128::saturating_add)
    }

    /// Counts from each loop's most trips over the ranges its enclosing loops' variables span
    /// (loop ids are in textual order, so enclosing loops come first).
    fn upper_bound(&self) -> AccessEstimate {
        let loops = &self.kernel.loops;
        let mut ranges = vec![(0.0, 0.0); loops.len()];
        let mut most_trips = vec![0.0f64; loops.len()];
        for (id, l) in loops.iter().enumerate() {
            let (start, end) = (
                self.starts[id].interval_f64(&ranges),
                self.ends[id].interval_f64(&ranges),
            );
            let step = l.step as f64;
            let (span, range) = if l.step > 0 {
                (end.1 - start.0, (start.0, end.1))
            } else {
                (start.1 - end.0, (end.0, start.1))
            };
            ranges[id] = if span.is_nan() {
                (f64::NEG_INFINITY, f64::INFINITY)
            } else {
                range
            };
            most_trips[id] = most_trips_of(span, step);
        }
        // Executions of a loop's body: its trips times its enclosing loops' (a loop that never
        // runs has none, even under loops of infinite bound, where 0 x inf would be NaN).
        let mut runs = vec![0.0f64; loops.len()];
        for (id, l) in loops.iter().enumerate() {
            runs[id] = match most_trips[id] {
                0.0 => 0.0,
                trips => trips * l.parent.map_or(1.0, |p| runs[p]),
            };
        }
        let executions: Vec<u128> = self
            .kernel
            .statements
            .iter()
            .map(|s| s.loops.last().map_or(1.0, |&l| runs[l]) as u128)
            .collect();
        AccessEstimate {
            accesses: self.accesses(&executions),
            iterations: runs.iter().sum::<f64>() as u128,
            exact: false,
        }
    }
}

/// The most trips of a loop whose values span `span` by `step`: infinite when the span is not
/// a number (inf - inf), which a cast to an integer would turn into 0.
fn most_trips_of(span: f64, step: f64) -> f64 {
    if span.is_nan() {
        f64::INFINITY
    } else if span < 0.0 {
        0.0
    } else {
        (span / step.abs()).floor() + 1.0
    }
}

#[cfg(test)]
mod tests {
    use crate::parse_kernel;
    use proptest::prelude::*;

    fn estimate(text: &str, params: &[(&str, i64)]) -> super::AccessEstimate {
        let kernel = parse_kernel(text, "k.c").unwrap();
        let define: Vec<(String, i64)> =
            params.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
        let values = kernel.param_values(&define).unwrap();
        kernel.estimate_accesses(&values).unwrap()
    }

    const TRIAD: &str = "double a[N], b[N], c[N], d[N];\n\
        for (int i = 0; i < N; ++i)\n  a[i] = b[i] + c[i] * d[i];\n";
    const TRIANGLE: &str = "double a[N][N];\n\
        for (int i = 0; i < N; ++i)\n  for (int j = 0; j <= i; ++j)\n    a[i][j] = 1.0;\n";

    #[test]
    fn huge_rectangular_nests_are_counted_at_once() {
        let e = estimate(TRIAD, &[("N", 1_000_000_000_000)]);
        assert_eq!(e.accesses, 4_000_000_000_000);
        assert_eq!(e.iterations, 1_000_000_000_000);
        assert!(e.exact);
        let e = estimate(TRIAD, &[("N", i64::MAX)]);
        assert_eq!(e.accesses, 4 * i64::MAX as u128);
    }

    #[test]
    fn triangular_nests_are_exact_when_small_and_bounded_when_huge() {
        let e = estimate(TRIANGLE, &[("N", 1000)]);
        assert_eq!((e.accesses, e.exact), (1000 * 1001 / 2, true));
        let e = estimate(TRIANGLE, &[("N", i64::MAX / 2)]);
        assert!(!e.exact);
        let n = (i64::MAX / 2) as f64;
        assert!(e.accesses as f64 >= n * (n + 1.0) / 2.0);
    }

    #[test]
    fn a_span_that_is_not_a_number_bounds_nothing() {
        assert_eq!(super::most_trips_of(f64::NAN, 1.0), f64::INFINITY);
        assert_eq!(super::most_trips_of(f64::INFINITY, 2.0), f64::INFINITY);
        assert_eq!(super::most_trips_of(-1.0, 1.0), 0.0);
        assert_eq!(super::most_trips_of(9.0, 2.0), 5.0);
    }

    #[test]
    fn a_loop_of_two_to_the_64_iterations_is_refused() {
        let text = "double a[8];\nfor (long i = M; i <= N; ++i)\n  a[0] = a[0] + 1.0;\n";
        let kernel = parse_kernel(text, "k.c").unwrap();
        let params = kernel
            .param_values(&[("M".into(), i64::MIN), ("N".into(), i64::MAX)])
            .unwrap();
        let e = kernel.estimate_accesses(&params).unwrap_err().to_string();
        assert!(e.contains("trip count overflows 64 bits"), "{e}");
        let layout = kernel.layout(&params, &[]).unwrap();
        assert!(crate::Program::new(&kernel, &params, &layout).is_err());
        // One fewer iteration is counted.
        let params = kernel
            .param_values(&[("M".into(), i64::MIN + 1), ("N".into(), i64::MAX)])
            .unwrap();
        let e = kernel.estimate_accesses(&params).unwrap();
        assert_eq!(e.iterations, u128::from(u64::MAX));
    }

    #[test]
    fn empty_nests_spend_the_corner_visits_too() {
        // 2^20 corners and not one statement in them: the walk stops when its visits are spent
        // (at depth 30 it used to take minutes).
        let mut text = String::from("double a[8];\nfor (int s = 0; s < 1; ++s)\n  a[s] = 1.0;\n");
        for depth in 0..20 {
            text += &format!("for (int i{depth} = 0; i{depth} < 2; ++i{depth})\n");
        }
        text += "{}\n";
        let kernel = parse_kernel(&text, "k.c").unwrap();
        let layout = kernel.layout(&[], &[]).unwrap();
        let mut corners = kernel.corners(&[], &layout).unwrap();
        let mut vars = vec![0i64; kernel.loops.len()];
        let stop = corners.walk(&kernel.body, &mut vars);
        assert!(matches!(stop, Err(super::CornerStop::Enough)));
        assert_eq!(corners.visits, 0);
    }

    #[test]
    fn addresses_outside_the_address_space_are_found_without_streaming() {
        let text = "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  b[i] = a[i-1000];\n";
        let kernel = parse_kernel(text, "k.c").unwrap();
        let params = kernel.param_values(&[("N".into(), 100)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let e = kernel
            .check_addresses(&params, &layout)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("k.c: an address leaves the 64-bit address space"),
            "{e}"
        );
        assert!(e.contains("at i=0;"), "{e}");
        // The same reference with room below `a` is fine, as the stream finds it.
        let placed = kernel.layout(&params, &[("a".into(), 8000)]).unwrap();
        kernel.check_addresses(&params, &placed).unwrap();
        // A triangular nest whose subscript is never negative, though a box of the ranges says
        // it could be: no refusal.
        let text = "double a[N][N];\nfor (int i = 0; i < N; ++i)\n  for (int j = 0; j <= i; ++j)\n    a[i][i-j] = 1.0;\n";
        let kernel = parse_kernel(text, "t.c").unwrap();
        let params = kernel.param_values(&[("N".into(), 50)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        kernel.check_addresses(&params, &layout).unwrap();
        assert_eq!(
            crate::Program::new(&kernel, &params, &layout)
                .unwrap()
                .accesses()
                .count(),
            50 * 51 / 2
        );
    }

    proptest! {
        /// Whenever the corners find an address outside, the stream does too (a refusal is
        /// never wrong).
        #[test]
        fn a_corner_refusal_is_a_stream_refusal(n in 1i64..30, shift in -300i64..300, base in 0u64..2000) {
            let text = "double a[N], b[N];\n\
                for (int i = 0; i < N; ++i)\n  for (int j = i; j < N; j += 2)\n    b[j] = a[j + S];\n";
            let kernel = parse_kernel(text, "k.c").unwrap();
            let params = kernel.param_values(&[("N".into(), n), ("S".into(), shift)]).unwrap();
            let layout = kernel.layout(&params, &[("a".into(), base)]).unwrap();
            let program = crate::Program::new(&kernel, &params, &layout).unwrap();
            let mut stream = program.accesses();
            while !stream.next_batch().is_empty() {}
            let streamed_ok = stream.error().is_none();
            let corners_ok = kernel.check_addresses(&params, &layout).is_ok();
            prop_assert_eq!(corners_ok, streamed_ok);
        }

        #[test]
        fn the_estimate_is_the_stream_length(n in 1i64..40, m in 1i64..40) {
            let text = "double a[N][M];\n\
                for (int i = 0; i < N; ++i)\n  for (int j = i; j < M; j += 3)\n    a[i][j] = a[i][j] + 1.0;\n";
            let kernel = parse_kernel(text, "k.c").unwrap();
            let values = kernel
                .param_values(&[("N".into(), n), ("M".into(), m)])
                .unwrap();
            let layout = kernel.layout(&values, &[]).unwrap();
            let program = crate::Program::new(&kernel, &values, &layout).unwrap();
            let streamed = program.accesses().count() as u128;
            let e = kernel.estimate_accesses(&values).unwrap();
            prop_assert!(e.exact);
            prop_assert_eq!(e.accesses, streamed);
        }
    }
}
