//! The bytes between the registers and L1: each reference's executions, except that a
//! reference whose address does not change in its innermost loop is kept in a register there.
//!
//! `cc -O2` hoists such a load out of the loop and sinks such a store after it (loop-invariant
//! motion; the harness passes the arrays as `restrict` pointers): `a[i][k]` in
//! `for (j …) c[i][j] += a[i][k] * b[k][j]` is loaded once per start of the `j` loop, and
//! `c[i][j]` in `for (k …) c[i][j] += a[i][k] * b[k][j]` is loaded before the `k` loop and
//! stored after it. Counting those every iteration made an L1-bound matmul look half as fast as
//! it runs. The cache levels beyond L1 are unchanged: the accesses left out would have hit L1.
//!
//! A reference stays in memory when another reference of the loop to the same array, with
//! other subscripts, could meet it and one of the two is a store (the compiler cannot prove
//! they never do); and when the loop has loops inside it, where the compiler's choice depends
//! on register pressure.

use loopscope_kernel::{AccessKind, Kernel, Layout, Node, Program, Sym};

use crate::{Level, RooflineError, Traffic};

/// Bytes between the registers and L1 in one run, loads and stores apart: they go through
/// separate ports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AccessBytes {
    pub(crate) load: u64,
    pub(crate) store: u64,
}

/// Bytes the kernel's references move between the registers and L1 in one run of an
/// optimised build.
pub(crate) fn access_bytes(kernel: &Kernel, program: &Program) -> AccessBytes {
    bytes_keeping(kernel, program, &kept_in_registers(kernel))
}

/// `traffic`'s L1 bytes (when it lists L1) as a build that does not optimise moves them: every
/// reference each time it runs, none kept in a register.
pub(crate) fn count_every_access(
    traffic: &mut Traffic,
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
) -> Result<(), RooflineError> {
    let Some(l1) = traffic
        .levels
        .iter_mut()
        .find(|l| l.level == Level::Cache(1))
    else {
        return Ok(());
    };
    let program = Program::new(kernel, params, layout).map_err(crate::kernel_file::kernel_error)?;
    let bytes = bytes_keeping(kernel, &program, &vec![None; kernel.references().count()]);
    l1.bytes = bytes.load.saturating_add(bytes.store);
    l1.store_bytes = Some(bytes.store);
    Ok(())
}

/// [`access_bytes`] with `kept` saying which references stay in a register across which loop.
fn bytes_keeping(kernel: &Kernel, program: &Program, kept: &[Option<usize>]) -> AccessBytes {
    let mut bytes = AccessBytes::default();
    let mut index = 0;
    for (statement, &executions) in kernel.statements.iter().zip(program.executions()) {
        for r in &statement.refs {
            let times = match kept[index] {
                Some(id) => program.loop_entries()[id],
                None => executions,
            };
            index += 1;
            let slot = match r.kind {
                AccessKind::Write => &mut bytes.store,
                AccessKind::Read => &mut bytes.load,
            };
            let moved = kernel.arrays[r.array].elem.bytes().saturating_mul(times);
            *slot = slot.saturating_add(moved);
        }
    }
    bytes
}

/// Per reference ([`Kernel::references`] order): the innermost loop it is kept in a register
/// across, if it is.
pub(crate) fn kept_in_registers(kernel: &Kernel) -> Vec<Option<usize>> {
    let innermost = innermost_loops(kernel);
    let mut kept = Vec::new();
    for statement in &kernel.statements {
        let loop_id = statement.loops.last().copied();
        for r in &statement.refs {
            let keeps = loop_id.filter(|&id| {
                innermost[id]
                    && !r.subscripts.iter().any(|s| s.mentions(Sym::Loop(id)))
                    && !may_meet_another(kernel, id, r)
            });
            kept.push(keeps);
        }
    }
    kept
}

/// Whether a reference to `r`'s array in loop `id`'s body has other subscripts and, with `r`,
/// includes a store.
fn may_meet_another(kernel: &Kernel, id: usize, r: &loopscope_kernel::Reference) -> bool {
    kernel
        .statements
        .iter()
        .filter(|s| s.loops.last() == Some(&id))
        .flat_map(|s| &s.refs)
        .any(|other| {
            other.array == r.array
                && other.subscripts != r.subscripts
                && (other.kind == AccessKind::Write || r.kind == AccessKind::Write)
        })
}

/// Per loop: whether its body is statements only.
fn innermost_loops(kernel: &Kernel) -> Vec<bool> {
    fn walk(nodes: &[Node], out: &mut [bool]) {
        for node in nodes {
            if let Node::Loop { id, body } = node {
                out[*id] = body.iter().all(|n| matches!(n, Node::Statement(_)));
                walk(body, out);
            }
        }
    }
    let mut out = vec![false; kernel.loops.len()];
    walk(&kernel.body, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(text: &str) -> Vec<Option<usize>> {
        kept_in_registers(&loopscope_kernel::parse_kernel(text, "k.c").unwrap())
    }

    const IJK: &str = "double a[N][N], b[N][N], c[N][N];\nfor (i = 0; i < N; i++)\n  \
                       for (j = 0; j < N; j++)\n    for (k = 0; k < N; k++)\n      \
                       c[i][j] += a[i][k] * b[k][j];\n";

    #[test]
    fn the_accumulator_of_a_dot_product_stays_in_a_register() {
        // References: a[i][k], b[k][j], then c[i][j] read and written.
        assert_eq!(kept(IJK), [None, None, Some(2), Some(2)]);
    }

    #[test]
    fn an_invariant_factor_is_loaded_once_per_start_of_the_loop() {
        let text = "double a[N][N], b[N][N], c[N][N];\nfor (i = 0; i < N; i++)\n  \
                    for (k = 0; k < N; k++)\n    for (j = 0; j < N; j++)\n      \
                    c[i][j] += a[i][k] * b[k][j];\n";
        assert_eq!(kept(text), [Some(2), None, None, None]);
    }

    #[test]
    fn a_store_the_invariant_reference_could_meet_keeps_it_in_memory() {
        // a[i][j] is written in the j loop and a[i][i] could be the same element.
        let text = "double a[N][N];\nfor (i = 0; i < N; i++)\n  for (j = 0; j < N; j++)\n    \
                    a[i][j] = a[i][j] - a[i][i];\n";
        assert_eq!(kept(text), [None, None, None]);
        // Reading another array's invariant element is safe beside the store.
        let text = "double a[N][N], d[N];\nfor (i = 0; i < N; i++)\n  for (j = 0; j < N; j++)\n    \
                    a[i][j] = a[i][j] - d[i];\n";
        assert_eq!(kept(text), [None, Some(1), None]);
    }

    #[test]
    fn a_loop_with_loops_inside_keeps_nothing() {
        let text = "double a[N], s[N];\nfor (i = 0; i < N; i++) {\n  s[0] = s[0] + a[i];\n  \
                    for (j = 0; j < N; j++)\n    s[j] = a[j];\n}\n";
        assert_eq!(kept(text), [None, None, None, None, None]);
    }

    #[test]
    fn kept_references_count_once_per_start_of_their_loop() {
        let kernel = loopscope_kernel::parse_kernel(IJK, "k.c").unwrap();
        let params = kernel.param_values(&[("N".into(), 10)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let program = Program::new(&kernel, &params, &layout).unwrap();
        let bytes = access_bytes(&kernel, &program);
        // a and b every iteration (1000 each), c read and written once per (i, j).
        assert_eq!(bytes.load, 8 * (1000 + 1000 + 100));
        assert_eq!(bytes.store, 8 * 100);
    }
}
