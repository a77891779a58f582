//! Dependency chains of in-order sums: the one in-core limit a bandwidth or peak ceiling cannot
//! see.
//!
//! A statement such as `y[i] += a[i][j] * x[j]` inside the `j` loop adds into the same element
//! on every iteration. Without `-ffast-math` a C compiler must keep the additions in source
//! order, so each waits for the one before: the loop cannot run faster than one addition
//! latency per iteration, whatever the caches deliver. On this class of kernel (matrix-vector
//! products, dot products, matrix multiply in `ijk` order) the roofline over-predicts by
//! several times without this term.
//!
//! Chains of different iterations of the next loop out are independent, and a vectorising
//! compiler runs them side by side in one register when that loop walks the sum's target and
//! every operand contiguously (gcc does this at `-O2` for `ijk` matrix multiply): then a vector
//! of chains advances per latency. The vector width is the x86-64 baseline's 16 bytes, what the
//! harness's `cc -O2` (no `-march`) compiles for.
//!
//! Scalars carry chains too: `s += a[i] * b[i]` (a dot product) adds into `s` on every
//! iteration, and Kahan's compensated sum carries `sum` and `c` through several statements. For
//! each loop the scalars its body assigns form a graph (an edge from `u` to `v` weighted by the
//! floating-point operations between `u`'s value at the start of an iteration and `v`'s at its
//! end); the loop cannot run faster than the heaviest cycle's operations per iteration (its
//! mean weight), one add latency each. No vector runs scalar chains side by side: the next
//! loop out feeds the same scalar, and only a compiler allowed to reassociate (`-ffast-math`)
//! splits a scalar sum into partial sums. A loop body assigning more than
//! [`MAX_CHAIN_SCALARS`] scalars is not searched for them.
//!
//! Recurrences through memory chain too: a statement that reads back the element it stored an
//! iteration of its innermost loop earlier (`a[i] = a[i-1] + b[i]`, or Gauss-Seidel's
//! `a[j][i] = (a[j][i-1] + a[j][i+1] + a[j-1][i] + a[j+1][i]) * s`) cannot start before that
//! store's value exists, so each iteration waits for the operations between the read and the
//! store (four in Gauss-Seidel: three additions and the product, as C evaluates them left to
//! right), over the distance in iterations. Every operation on such a path is timed at the add
//! latency (a product's latency equals an addition's on current x86 cores; a division's is
//! longer, so a path through one is under-counted). Nothing runs these side by side: the loop
//! cannot be vectorised along its recurrence, and reassociation does not shorten it. The store
//! and the read are taken as forwarded without extra latency, as out-of-order cores with memory
//! renaming do for this pattern.
//!
//! Not modelled: the overlap of short chains in the out-of-order window (a 32-iteration chain
//! overlaps the next one almost entirely, so the bound is pessimistic for short inner loops),
//! and recurrences through memory that pass from one statement to another.

use std::collections::HashMap;

use loopscope_kernel::{AccessKind, Affine, Kernel, Layout, Program, Reference, Statement, Sym};

use crate::RooflineError;
use crate::kernel_file::kernel_error;

/// Most scalars a loop body may assign for its scalar chains to be searched (the search takes
/// time cubic in their number).
pub const MAX_CHAIN_SCALARS: usize = 256;

/// Bytes of the vector registers the harness's build uses (SSE2, the x86-64 baseline).
pub const BASELINE_VECTOR_BYTES: u64 = 16;

/// The chained additions of one run of `kernel` at `params`, for a build whose vectors hold
/// `vector_bytes` (the traffic functions assume [`BASELINE_VECTOR_BYTES`]). A build that may
/// reassociate sums (`-ffast-math`) splits each into one vector of partial sums, as gcc
/// vectorises a reduction with one vector accumulator: every chain then advances a vector's
/// lanes per addition, and still waits for the one before.
pub fn in_order_sums(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
    vector_bytes: u64,
    reassociates: bool,
) -> Result<u64, RooflineError> {
    let program = Program::new(kernel, params, layout).map_err(kernel_error)?;
    Ok(build_chains(
        kernel,
        program.executions(),
        vector_bytes,
        reassociates,
    ))
}

/// Additions on dependency chains over one run of `kernel`, each counted once per vector of
/// chains that advance together; `executions` holds how often each statement runs.
pub(crate) fn chained_adds(kernel: &Kernel, executions: &[u64], vector_bytes: u64) -> u64 {
    build_chains(kernel, executions, vector_bytes, false)
}

fn build_chains(kernel: &Kernel, executions: &[u64], vector_bytes: u64, reassociates: bool) -> u64 {
    let lanes = |bytes: u64| (vector_bytes / bytes.max(1)).max(1);
    let in_order = kernel
        .statements
        .iter()
        .zip(executions)
        .filter(|(s, _)| is_in_order_sum(s))
        .map(|(s, &n)| {
            let mut together = side_by_side(kernel, s, vector_bytes);
            if let Some(target) = written(s).filter(|_| reassociates) {
                together = together.max(lanes(kernel.arrays[target.array].elem.bytes()));
            }
            n.div_ceil(together)
        })
        .fold(0u64, u64::saturating_add)
        .saturating_add(scalar_chained_adds(kernel, executions, |body| {
            if reassociates {
                lanes(widest_assigned_scalar(kernel, body))
            } else {
                1
            }
        }));
    in_order.saturating_add(recurrence_adds(kernel, executions))
}

/// Operations on recurrences through memory over one run of `kernel` (each statement's
/// heaviest one per iteration of its innermost loop), counted as additions: already part of
/// [`chained_adds`] and [`in_order_sums`].
pub(crate) fn recurrence_adds(kernel: &Kernel, executions: &[u64]) -> u64 {
    kernel
        .statements
        .iter()
        .zip(executions)
        .filter_map(|(statement, &runs)| {
            let (operations, distance) = heaviest_recurrence(kernel, statement)?;
            let adds = (u128::from(operations) * u128::from(runs)).div_ceil(u128::from(distance));
            Some(u64::try_from(adds).unwrap_or(u64::MAX))
        })
        .fold(0u64, u64::saturating_add)
}

/// The read of `statement` that waits longest per iteration for a store of an earlier iteration
/// of its innermost loop, as (operations from the read to the store, distance in iterations).
fn heaviest_recurrence(kernel: &Kernel, statement: &Statement) -> Option<(u32, u64)> {
    let &inner = statement.loops.last()?;
    let store = written(statement)?;
    let step = kernel.loops[inner].step;
    statement
        .refs
        .iter()
        .zip(&statement.ref_depths)
        .filter(|(r, depth)| r.kind == AccessKind::Read && r.array == store.array && **depth > 0)
        .filter_map(|(r, &depth)| Some((depth, distance(store, r, Sym::Loop(inner), step)?)))
        .max_by(|a, b| {
            (u128::from(a.0) * u128::from(b.1)).cmp(&(u128::from(b.0) * u128::from(a.1)))
        })
}

/// How many iterations of loop `sym` (stepping by `step`) before the store of `store` the
/// element `read` reads was stored: `Some(d)`, d ≥ 1, when every subscript of `read` is
/// `store`'s as it was d iterations earlier.
fn distance(store: &Reference, read: &Reference, sym: Sym, step: i64) -> Option<u64> {
    let mut found = None;
    for (w, r) in store.subscripts.iter().zip(&read.subscripts) {
        let offset = r.checked_sub(w)?.as_constant()?;
        let per_iteration = w.coefficient(sym).checked_mul(step)?;
        if per_iteration == 0 {
            if offset != 0 {
                return None;
            }
            continue;
        }
        if offset.checked_rem(per_iteration)? != 0 {
            return None;
        }
        let d = offset.checked_div(per_iteration)?.checked_neg()?;
        if d < 1 || found.is_some_and(|f| f != d) {
            return None;
        }
        found = Some(d);
    }
    u64::try_from(found?).ok()
}

/// Bytes of the widest scalar `body` assigns (8 when it names none the kernel declares).
fn widest_assigned_scalar(kernel: &Kernel, body: &[&Statement]) -> u64 {
    body.iter()
        .filter_map(|s| s.scalar_target.as_deref())
        .filter_map(|name| kernel.scalars.iter().find(|(n, _)| n == name))
        .map(|(_, elem)| elem.bytes())
        .max()
        .unwrap_or(8)
}

/// Additions on chains carried by scalars over one run: for each loop, its heaviest scalar
/// cycle's operations per iteration times its iterations (rounded up), over `split(body)`
/// partial sums.
fn scalar_chained_adds(
    kernel: &Kernel,
    executions: &[u64],
    split: impl Fn(&[&Statement]) -> u64,
) -> u64 {
    // Each loop's own statements in textual order, with how often the first one runs.
    let mut bodies: HashMap<usize, (u64, Vec<&Statement>)> = HashMap::new();
    for (statement, &runs) in kernel.statements.iter().zip(executions) {
        if let Some(&inner) = statement.loops.last() {
            bodies
                .entry(inner)
                .or_insert_with(|| (runs, Vec::new()))
                .1
                .push(statement);
        }
    }
    bodies
        .values()
        .filter_map(|(runs, body)| {
            let (operations, iterations) = heaviest_cycle(&carried_graph(body)?)?;
            let adds = u128::from(operations) * u128::from(*runs);
            let partial_sums = u128::from(iterations) * u128::from(split(body).max(1));
            let per_run = adds.div_ceil(partial_sums);
            Some(u64::try_from(per_run).unwrap_or(u64::MAX))
        })
        .fold(0u64, u64::saturating_add)
}

/// The loop-carried graph of a loop body's scalars: `weights[u][v]` is the most floating-point
/// operations between scalar `u` at the start of an iteration and scalar `v` at its end (`None`
/// when `v` does not depend on `u`). `None` when the body assigns more than
/// [`MAX_CHAIN_SCALARS`] scalars.
fn carried_graph(body: &[&Statement]) -> Option<Vec<Vec<Option<u64>>>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for name in body.iter().filter_map(|s| s.scalar_target.as_deref()) {
        let next = index.len();
        index.entry(name).or_insert(next);
    }
    let n = index.len();
    if n == 0 || n > MAX_CHAIN_SCALARS {
        return None;
    }
    // depth[v][u]: operations from u's start value to v's current value.
    let mut depth: Vec<Vec<Option<u64>>> = (0..n)
        .map(|v| (0..n).map(|u| (u == v).then_some(0)).collect())
        .collect();
    for statement in body {
        let Some(target) = statement.scalar_target.as_deref() else {
            continue;
        };
        let mut current = vec![None; n];
        for (name, operations) in &statement.scalar_reads {
            let Some(&read) = index.get(name.as_str()) else {
                continue;
            };
            for (u, d) in depth[read].iter().enumerate() {
                if let Some(d) = d {
                    let through = d.saturating_add(u64::from(*operations));
                    current[u] = current[u].max(Some(through));
                }
            }
        }
        depth[index[target]] = current;
    }
    Some(
        (0..n)
            .map(|u| (0..n).map(|v| depth[v][u]).collect())
            .collect(),
    )
}

/// The cycle of `weights` with the most operations per iteration, as (operations, iterations)
/// of one such cycle; `None` when no cycle has an operation. Karp's maximum mean cycle.
fn heaviest_cycle(weights: &[Vec<Option<u64>>]) -> Option<(u64, u64)> {
    let n = weights.len();
    // walks[k][v]: the heaviest walk of k edges ending at v (from anywhere).
    let mut walks: Vec<Vec<Option<u64>>> = vec![vec![Some(0); n]];
    for k in 1..=n {
        let next = (0..n)
            .map(|v| {
                (0..n)
                    .filter_map(|u| Some(walks[k - 1][u]?.saturating_add(weights[u][v]?)))
                    .max()
            })
            .collect();
        walks.push(next);
    }
    let mean_at = |v: usize| -> Option<(i128, i128)> {
        let full = i128::from(walks[n][v]?);
        // Karp: the heaviest cycle mean through walks ending at v is the least of these.
        (0..n)
            .filter_map(|k| Some((full - i128::from(walks[k][v]?), (n - k) as i128)))
            .min_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)))
    };
    let mut best: Option<(i128, i128)> = None;
    for mean in (0..n).filter_map(mean_at) {
        if best.is_none_or(|b| mean.0 * b.1 > b.0 * mean.1) {
            best = Some(mean);
        }
    }
    let (operations, iterations) = best.filter(|&(operations, _)| operations > 0)?;
    Some((u64::try_from(operations).ok()?, iterations as u64))
}

/// True when the statement adds (or multiplies) into an element its innermost loop does not
/// move: the target is read and written with the same subscripts, none of them the innermost
/// loop's variable.
fn is_in_order_sum(statement: &Statement) -> bool {
    let (Some(&inner), Some(target)) = (statement.loops.last(), written(statement)) else {
        return false;
    };
    let arithmetic = statement.flops.add + statement.flops.mul > 0;
    let invariant = !target
        .subscripts
        .iter()
        .any(|s| s.mentions(Sym::Loop(inner)));
    let reads_target = statement.refs.iter().any(|r| {
        r.kind == AccessKind::Read && r.array == target.array && r.subscripts == target.subscripts
    });
    arithmetic && invariant && reads_target
}

fn written(statement: &Statement) -> Option<&Reference> {
    statement.refs.iter().find(|r| r.kind == AccessKind::Write)
}

/// How many of the statement's chains advance together: a vector's worth when the next loop
/// out steps by one through the last subscript of the target and of every operand that moves
/// with it, and the innermost loop's bounds do not depend on it; else one.
fn side_by_side(kernel: &Kernel, statement: &Statement, vector_bytes: u64) -> u64 {
    let [.., outer, inner] = statement.loops[..] else {
        return 1;
    };
    let Some(target) = written(statement) else {
        return 1;
    };
    let outer_sym = Sym::Loop(outer);
    let inner_loop = &kernel.loops[inner];
    let rectangular =
        !inner_loop.start.mentions(outer_sym) && !inner_loop.end_inclusive.mentions(outer_sym);
    let unit_step = kernel.loops[outer].step == 1;
    let target_contiguous = contiguous_in(target, outer_sym) == Some(true);
    let operands_fit = statement
        .refs
        .iter()
        .all(|r| contiguous_in(r, outer_sym).is_some());
    if !(rectangular && unit_step && target_contiguous && operands_fit) {
        return 1;
    }
    let element_bytes = kernel.arrays[target.array].elem.bytes().max(1);
    (vector_bytes / element_bytes).max(1)
}

/// `Some(true)` when `reference` steps by one element per iteration of `sym` (only its last
/// subscript mentions it, with coefficient 1), `Some(false)` when it does not mention `sym`,
/// `None` otherwise (a stride or a gather, which keeps the compiler from vectorising).
fn contiguous_in(reference: &Reference, sym: Sym) -> Option<bool> {
    let Some((last, leading)) = reference.subscripts.split_last() else {
        return Some(false);
    };
    if leading.iter().any(|s: &Affine| s.mentions(sym)) {
        return None;
    }
    match last.coefficient(sym) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_kernel::parse_kernel;

    fn chains(text: &str, n: i64) -> (u64, u64) {
        let kernel = parse_kernel(text, "test.c").unwrap();
        let params = kernel.param_values(&[("N".into(), n)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let program = Program::new(&kernel, &params, &layout).unwrap();
        let executions: u64 = program.executions().iter().sum();
        (
            chained_adds(&kernel, program.executions(), BASELINE_VECTOR_BYTES),
            executions,
        )
    }

    #[test]
    fn a_matrix_vector_product_is_one_chain_per_row() {
        let text = "double a[N][N], x[N], y[N];\n\
                    for(int i=0; i<N; ++i)\n  for(int j=0; j<N; ++j)\n    y[i] += a[i][j] * x[j];";
        // a[i][j] moves by a row per i: no side-by-side chains.
        assert_eq!(chains(text, 10), (100, 100));
    }

    #[test]
    fn ijk_matrix_multiply_runs_two_double_chains_side_by_side() {
        let text = "double a[N][N], b[N][N], c[N][N];\n\
                    for(int i=0; i<N; ++i)\n for(int j=0; j<N; ++j)\n  for(int k=0; k<N; ++k)\n\
                    c[i][j] += a[i][k] * b[k][j];";
        assert_eq!(chains(text, 8), (256, 512));
    }

    #[test]
    fn streams_and_ikj_matrix_multiply_have_no_chain() {
        let triad = "double a[N], b[N], c[N];\nfor(int i=0; i<N; ++i)\n a[i] = b[i] + c[i];";
        assert_eq!(chains(triad, 16).0, 0);
        let ikj = "double a[N][N], b[N][N], c[N][N];\n\
                   for(int i=0; i<N; ++i)\n for(int k=0; k<N; ++k)\n  for(int j=0; j<N; ++j)\n\
                   c[i][j] += a[i][k] * b[k][j];";
        assert_eq!(chains(ikj, 8).0, 0);
    }

    #[test]
    fn a_triangular_inner_loop_keeps_its_chains_apart() {
        let text = "double a[N][N], x[N], y[N];\n\
                    for(int i=0; i<N; ++i)\n  for(int j=0; j<=i; ++j)\n    y[i] += a[i][j] * x[j];";
        // 1 + 2 + ... + 8 additions; the inner bounds depend on i, so nothing runs side by side.
        assert_eq!(chains(text, 8), (36, 36));
    }

    /// Chained additions at 16-byte vectors when the build may reassociate sums.
    fn reassociated(text: &str, n: i64) -> u64 {
        let kernel = parse_kernel(text, "test.c").unwrap();
        let params = kernel.param_values(&[("N".into(), n)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        in_order_sums(&kernel, &params, &layout, BASELINE_VECTOR_BYTES, true).unwrap()
    }

    #[test]
    fn reassociated_sums_advance_a_vector_of_partial_sums() {
        // A row's sum splits into two partial sums of doubles, four of floats (counted over
        // all the rows' additions).
        let matvec = "double a[N][N], x[N], y[N];
                      for(int i=0; i<N; ++i)\n  for(int j=0; j<N; ++j)\n    y[i] += a[i][j] * x[j];";
        assert_eq!(reassociated(matvec, 10), 50);
        let single = matvec.replace("double", "float");
        assert_eq!(reassociated(&single, 10), 25);
        // A dot product's scalar chain splits the same way.
        let dot = "double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n s += a[i] * b[i];";
        assert_eq!(chains(dot, 16).0, 16);
        assert_eq!(reassociated(dot, 16), 8);
        // Chains already side by side gain nothing more.
        let ijk = "double a[N][N], b[N][N], c[N][N];\n\
                   for(int i=0; i<N; ++i)\n for(int j=0; j<N; ++j)\n  for(int k=0; k<N; ++k)\n\
                   c[i][j] += a[i][k] * b[k][j];";
        assert_eq!(reassociated(ijk, 8), 256);
    }

    #[test]
    fn a_copy_into_an_invariant_element_is_not_a_sum() {
        let text = "double a[N], y[N];\nfor(int i=0; i<N; ++i)\n y[0] = a[i];";
        assert_eq!(chains(text, 16).0, 0);
    }

    #[test]
    fn a_scalar_dot_product_is_one_addition_per_iteration() {
        let text = "double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  s += a[i] * b[i];";
        assert_eq!(chains(text, 100), (100, 100));
        let spelled =
            "double a[N], b[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n  s = s + a[i] * b[i];";
        assert_eq!(chains(spelled, 100), (100, 100));
    }

    #[test]
    fn kahans_sum_carries_four_operations_per_iteration() {
        // kerncraft's kahan-dot.c: c goes through y = prod - c, t = sum + y, c = (t - sum) - y.
        let text = "double a[N], b[N];\ndouble c, sum, prod, t, y;\nfor(int i=0; i<N; ++i) {\n\
                    prod = a[i]*b[i];\n y = prod-c;\n t = sum+y;\n c = (t-sum)-y;\n sum = t;\n}";
        assert_eq!(chains(text, 50), (200, 250));
    }

    #[test]
    fn a_scalar_reset_for_each_row_chains_only_the_inner_loop() {
        let text = "double a[N][N], y[N];\ndouble s;\nfor(int i=0; i<N; ++i) {\n s = 0;\n\
                    for(int j=0; j<N; ++j)\n  s += a[i][j];\n y[i] = s;\n}";
        // No vector of rows runs side by side: every row's additions are on the chain.
        assert_eq!(chains(text, 8).0, 64);
    }

    #[test]
    fn a_cycle_through_two_iterations_counts_its_mean() {
        // s feeds p a round later, p feeds s: one addition every two iterations.
        let text = "double a[N];\ndouble s, p, t;\nfor(int i=0; i<N; ++i) {\n\
                    t = s;\n s = p + a[i];\n p = t;\n}";
        assert_eq!(chains(text, 9).0, 5);
    }

    #[test]
    fn copies_and_integer_counters_are_no_chain() {
        let copy = "double a[N];\ndouble s;\nfor(int i=0; i<N; ++i)\n s = a[i] * 2.0;";
        assert_eq!(chains(copy, 16).0, 0);
        let count = "double a[N];\nlong k;\nfor(int i=0; i<N; ++i) {\n k += 1;\n a[i] = 1.0;\n}";
        assert_eq!(chains(count, 16).0, 0);
    }

    /// (chained additions, of them on recurrences through memory) at N.
    fn recurrences(text: &str, n: i64) -> (u64, u64) {
        let kernel = parse_kernel(text, "test.c").unwrap();
        let params = kernel.param_values(&[("N".into(), n)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let program = Program::new(&kernel, &params, &layout).unwrap();
        (
            chained_adds(&kernel, program.executions(), BASELINE_VECTOR_BYTES),
            recurrence_adds(&kernel, program.executions()),
        )
    }

    #[test]
    fn a_statement_reading_back_the_last_iterations_store_chains_through_memory() {
        let prefix = "double a[N], b[N];
for(int i=1; i<N; ++i)
 a[i] = a[i-1] + b[i];";
        assert_eq!(recurrences(prefix, 10), (9, 9));
        // Gauss-Seidel: a[j][i-1] is four operations below the store, on each of 4 × 4 points.
        let gauss_seidel = "double a[N][N];
double s;
for(int j=1; j<N-1; ++j)
                             for(int i=1; i<N-1; ++i)
  a[j][i] = (a[j][i-1] + a[j][i+1]                             + a[j-1][i] + a[j+1][i]) * s;";
        assert_eq!(recurrences(gauss_seidel, 6), (64, 64));
        // Two chains interleave when the element read back is two iterations old.
        let two_apart = "double a[N];
double s;
for(int i=2; i<N; ++i)
 a[i] = a[i-2] * s;";
        assert_eq!(recurrences(two_apart, 11), (5, 5));
        // Counting down, the element stored before is the one above.
        let down = "double a[N], b[N];
for(int i=N-2; i>=0; --i)
 a[i] = a[i+1] + b[i];";
        assert_eq!(recurrences(down, 10), (9, 9));
    }

    #[test]
    fn reads_of_elements_not_yet_stored_or_of_another_array_are_no_recurrence() {
        let ahead = "double a[N], b[N];
for(int i=0; i<N-1; ++i)
 a[i] = a[i+1] + b[i];";
        assert_eq!(recurrences(ahead, 10), (0, 0));
        let jacobi = "double a[N][N], b[N][N];
for(int j=1; j<N-1; ++j)
                       for(int i=1; i<N-1; ++i)
  b[j][i] = a[j][i-1] + a[j][i+1];";
        assert_eq!(recurrences(jacobi, 6), (0, 0));
        // The row above was stored a whole inner loop ago: no tight chain.
        let row_above = "double a[N][N];
for(int j=1; j<N; ++j)
 for(int i=0; i<N; ++i)
                           a[j][i] = a[j-1][i] * 0.5;";
        assert_eq!(recurrences(row_above, 6), (0, 0));
        let update = "double a[N], b[N];
for(int i=0; i<N; ++i)
 a[i] += b[i];";
        assert_eq!(recurrences(update, 10), (0, 0));
    }

    fn matvec_analysis(
        latency_ns: Option<f64>,
        threads: u32,
        recurrence_adds: u64,
    ) -> crate::Analysis {
        let traffic = crate::Traffic {
            levels: vec![crate::LevelTraffic {
                level: crate::Level::Memory,
                bytes: 8 * 1000,
                volume_bytes: None,
                store_bytes: None,
            }],
            flops: 2000,
            iterations: 1000,
            l1: None,
            word_bytes: 8,
            chained_adds: 1000,
            recurrence_adds,
        };
        let mut ceilings = crate::Ceilings::new(40.0, 20.0, "test").unwrap();
        let memory = crate::BandwidthFn::Constant { gb_per_s: 40.0 };
        ceilings
            .set_bandwidth(crate::Level::Memory, memory, "test")
            .unwrap();
        if let Some(ns) = latency_ns {
            ceilings.set_add_latency(ns, "test").unwrap();
        }
        ceilings.chain_threads = threads;
        crate::analyse(&traffic, &ceilings, crate::Options::default()).unwrap()
    }

    #[test]
    fn a_chain_longer_than_every_transfer_limits_the_prediction() {
        // Memory: 8 B / 40 GB/s = 0.2 ns per iteration; the chain: one 0.8 ns addition.
        let analysis = matvec_analysis(Some(0.8), 1, 0);
        let p = &analysis.prediction;
        assert_eq!(p.limit, crate::Limit::Chain);
        assert!((p.time_per_iteration_s - 0.8e-9).abs() < 1e-15);
        assert!((p.gflops - 2.5).abs() < 1e-9);
        // The classic roofline does not see it.
        assert!((analysis.classic.gflops - 10.0).abs() < 1e-9);
        // A short latency leaves memory in charge.
        let fast = matvec_analysis(Some(0.1), 1, 0);
        assert_eq!(
            fast.prediction.limit,
            crate::Limit::Level(crate::Level::Memory)
        );
    }

    #[test]
    fn threads_run_their_shares_of_the_chains_side_by_side() {
        // The 1000 additions of 0.4 ns split over 4 threads: 0.1 ns per iteration, below
        // memory's 0.2 ns, which on one thread they would outlast.
        let analysis = matvec_analysis(Some(0.4), 4, 0);
        let chain = analysis.prediction.chain_time_s.unwrap();
        assert!((chain - 1000.0 * 0.4e-9 / 4.0).abs() < 1e-15, "{chain}");
        assert_eq!(
            analysis.prediction.limit,
            crate::Limit::Level(crate::Level::Memory)
        );
        let alone = matvec_analysis(Some(0.4), 1, 0);
        assert_eq!(alone.prediction.limit, crate::Limit::Chain);
        // A recurrence through memory is no parallel loop: its chain stays whole.
        let recurrence = matvec_analysis(Some(0.4), 4, 1000);
        let whole = recurrence.prediction.chain_time_s.unwrap();
        assert!((whole - 1000.0 * 0.4e-9).abs() < 1e-15, "{whole}");
        let bound = matvec_analysis(Some(1.6), 4, 0);
        assert_eq!(bound.prediction.limit, crate::Limit::Chain);
        assert!(
            bound
                .notes
                .iter()
                .any(|n| n.contains("4 threads side by side")),
            "{:?}",
            bound.notes
        );
    }

    #[test]
    fn without_a_latency_the_chain_is_a_warning_not_a_guess() {
        let analysis = matvec_analysis(None, 1, 0);
        assert_eq!(analysis.prediction.chain_time_s, None);
        assert!(
            analysis
                .warnings
                .iter()
                .any(|w| w.contains("no add latency"))
        );
    }
}
