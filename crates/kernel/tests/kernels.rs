//! The kernel language: example kernels, execution order, FLOPs, refusals with positions, and
//! a parser that never panics.

use loopscope_kernel::{
    AccessKind, Kernel, KernelError, Program, Side, parse_kernel, parse_kernel_with_values,
};
use proptest::prelude::*;

fn example(name: &str) -> Kernel {
    let path = format!(
        "{}/../../examples/kernels/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    parse_kernel(&text, name).unwrap()
}

fn refs(kernel: &Kernel) -> Vec<String> {
    kernel
        .references()
        .map(|(_, r)| kernel.render_ref(r))
        .collect()
}

fn addresses(
    kernel: &Kernel,
    defs: &[(&str, i64)],
    bases: &[(&str, u64)],
) -> Vec<(u32, u64, bool)> {
    let defs: Vec<(String, i64)> = defs.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let bases: Vec<(String, u64)> = bases.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let params = kernel.param_values(&defs).unwrap();
    let layout = kernel.layout(&params, &bases).unwrap();
    let program = Program::new(kernel, &params, &layout).unwrap();
    let mut stream = program.accesses();
    let out: Vec<_> = stream
        .by_ref()
        .map(|a| (a.reference, a.addr, a.write))
        .collect();
    assert!(stream.error().is_none());
    assert_eq!(out.len() as u64, program.total_accesses(kernel));
    out
}

#[test]
fn jacobi_reads_left_to_right_then_writes() {
    let k = example("2d-5pt.c");
    assert_eq!(k.params, ["M", "N"]);
    assert_eq!(
        refs(&k),
        [
            "a[j][i-1]",
            "a[j][i+1]",
            "a[j-1][i]",
            "a[j+1][i]",
            "b[j][i]"
        ]
    );
    let st = &k.statements[0];
    assert_eq!((st.flops.add, st.flops.mul, st.flops.total()), (3, 1, 4));
    assert_eq!(st.refs[4].kind, AccessKind::Write);
    assert_eq!(st.refs[4].side, Side::Left);
    assert_eq!(
        st.refs.iter().map(|r| r.ordinal).collect::<Vec<_>>(),
        [1, 2, 3, 4, 1]
    );
    assert_eq!(k.render(&k.loops[0].end_inclusive), "M-2");
    assert_eq!((st.pos.line, st.pos.column), (7, 9));
}

#[test]
fn triad_and_matmul() {
    let t = example("triad.c");
    assert_eq!(refs(&t), ["b[i]", "c[i]", "d[i]", "a[i]"]);
    assert_eq!(t.statements[0].flops.total(), 2);
    let m = example("matmul.c");
    // A compound assignment reads its target after the right-hand side, then writes it.
    assert_eq!(refs(&m), ["a[i][k]", "b[k][j]", "c[i][j]", "c[i][j]"]);
    assert_eq!(m.statements[0].flops.total(), 2);
    assert_eq!(m.statements[0].loops, [0, 1, 2]);
}

#[test]
fn stream_walks_imperfect_nests_in_order() {
    let k = parse_kernel(
        "double x[N], y[N][N];\nfor (i = N-1; i >= 0; i -= 2) {\n  x[i] = 0;\n  for (j = 0; j <= i; j++) y[i][j] = x[j] * 2.0;\n}\n",
        "t.c",
    )
    .unwrap();
    let got = addresses(&k, &[("N", 3)], &[("x", 1000), ("y", 0)]);
    // i = 2: x[2]; j = 0..2: read x[j], write y[2][j]; i = 0: x[0]; j = 0: x[0], y[0][0].
    let want = vec![
        (0, 1016, true),
        (1, 1000, false),
        (2, 48, true),
        (1, 1008, false),
        (2, 56, true),
        (1, 1016, false),
        (2, 64, true),
        (0, 1000, true),
        (1, 1000, false),
        (2, 0, true),
    ];
    assert_eq!(got, want);
}

#[test]
fn loops_count_their_entries_with_at_least_one_trip() {
    let k = parse_kernel(
        "double y[N][N];\nfor (i = 0; i < N; i++)\n  for (j = 0; j < i; j++)\n    for (k = 0; k < 3; k++)\n      y[i][j] = y[j][i] + 1.0;\n",
        "t.c",
    )
    .unwrap();
    let params = k.param_values(&[("N".into(), 4)]).unwrap();
    let program = Program::new(&k, &params, &k.layout(&params, &[]).unwrap()).unwrap();
    // i = 0 has no j trip: j starts 3 times (i = 1, 2, 3), k once per (i, j): 1 + 2 + 3.
    assert_eq!(program.loop_entries(), [1, 3, 6]);
    assert_eq!(program.executions(), [18]);
}

#[test]
fn default_layout_is_declaration_order_aligned() {
    let k = parse_kernel(
        "float a[3]; double b[2];\nfor (i = 0; i < 1; i++) b[i] = a[i];",
        "t.c",
    )
    .unwrap();
    let params = k.param_values(&[]).unwrap();
    let layout = k.layout(&params, &[]).unwrap();
    assert_eq!(layout.base, [0, 64]);
    assert_eq!(layout.size_bytes, [12, 16]);
}

fn error(text: &str) -> String {
    parse_kernel(text, "k.c").unwrap_err().to_string()
}

#[test]
fn refusals_name_line_column_and_expectation() {
    let cases = [
        (
            "double a[N];\nfor (i = 0; i < N; i++)\n  a[i*i] = 1;",
            "k.c:3:6: `i*i`: a product of two loop variables is not affine",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i] = sqrt(a[i]);",
            "k.c:2:32: function call `sqrt(...)` is outside the kernel subset",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) *a = 1;",
            "k.c:2:25: pointer dereference `*` is outside the kernel subset (expected a \
             declaration, `for` or an assignment to an array element)",
        ),
        (
            "double a[N], b[N];\nfor (i = 0; i < N; i++) a[b[i]] = 1;",
            "k.c:2:27: indirect subscripts (an array inside a subscript or bound) are outside the kernel subset",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i/2] = 1;",
            "k.c:2:28: `i/2`: a division of a loop variable is not affine",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i] = a[i] + p;\nwhile (1) {}",
            "k.c:3:1: `while` is outside the kernel subset (expected a declaration, `for` or an assignment)",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i--) a[i] = 1;",
            "k.c:2:1: the step of `i` (-1) moves away from its bound `<` (a loop `i < ...` needs a positive step)",
        ),
        (
            "double a[N][N];\nfor (i = 0; i < N; i++) a[i] = 1;",
            "k.c:2:25: `a` has 2 dimensions but 1 subscripts are given",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i] = 1",
            "k.c:2:33: expected `;`, found the end of the file",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) { a[i] = a + 1; }",
            "k.c:2:34: array `a` used without subscripts (pointer arithmetic is outside the kernel subset)",
        ),
        (
            "double s;",
            "k.c:1:10: the kernel has no statement: expected an assignment",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(error(text), want, "for {text:?}");
    }
}

/// Statements a C file, or a kerncraft kernel, may hold beyond the subset: each is named for
/// what it is, not taken for an assignment to a name.
#[test]
fn statements_outside_the_subset_are_named() {
    let cases = [
        (
            "double a[N], b[N];\nfor (i = 1; i < N-1; i++)\n  b[i] = a[i];\nswap(a, b);",
            "k.c:4:1: function call `swap(...)` is outside the kernel subset (kerncraft's `swap` \
             exchanges arrays between sweeps; delete it to model one sweep of the loop nest)",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) {\n  a[i] = 1;\n  flush(a);\n}",
            "k.c:4:3: function call `flush(...)` is outside the kernel subset",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i] = 2 * f(i);",
            "k.c:2:36: function call `f(...)` is outside the kernel subset",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) a[i]++;",
            "k.c:2:25: the increment `a[...]++` is outside the kernel subset (write `a[...] += 1`)",
        ),
        (
            "double a[N], s;\nfor (i = 0; i < N; i++) { s--; a[i] = s; }",
            "k.c:2:27: the increment `s--` is outside the kernel subset (write `s -= 1`)",
        ),
        (
            "double a[N];\nint n;\nfor (i = 0; i < N; i++) { ++n; a[i] = n; }",
            "k.c:3:27: the increment `++` is outside the kernel subset (write `x += 1`)",
        ),
        (
            "double *a;\nfor (i = 0; i < N; i++) a[i] = 1;",
            "k.c:1:8: pointers are outside the kernel subset (declare an array: `double a[N];`)",
        ),
        (
            "unsigned int a[N];\nfor (i = 0; i < N; i++) a[i] = 1;",
            "k.c:1:1: type `unsigned` is outside the kernel subset (declarations use `double`, \
             `float`, `int` or `long`)",
        ),
        (
            "size_t n;\ndouble a[N];\nfor (i = 0; i < N; i++) a[i] = 1;",
            "k.c:1:1: type `size_t` is outside the kernel subset (declarations use `double`, \
             `float`, `int` or `long`)",
        ),
        (
            "double a[N];\nfor (size_t i = 0; i < N; i++) a[i] = 1;",
            "k.c:2:6: type `size_t` is outside the kernel subset (loop variables are `int` or \
             `long`)",
        ),
        (
            "volatile double a[N];\nfor (i = 0; i < N; i++) a[i] = 1;",
            "k.c:1:1: `volatile` is outside the kernel subset (declarations use `double`, \
             `float`, `int` or `long`)",
        ),
        (
            "double a[2] = {1, 2};\nfor (i = 0; i < 2; i++) a[i] = 1;",
            "k.c:1:13: the initialiser of array `a` is outside the kernel subset",
        ),
        (
            "float a[N];\ndouble b[N];\nfor (i = 0; i < N; i++) a[i] = (float)b[i];",
            "k.c:3:32: the cast `(float)` is outside the kernel subset",
        ),
        (
            "double a[N];\n{\n  for (i = 0; i < N; i++) a[i] = 1;\n}",
            "k.c:2:1: a block `{` outside a loop is outside the kernel subset (expected a \
             declaration, `for` or an assignment)",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) { if (i) a[i] = 1; }",
            "k.c:2:27: `if` is outside the kernel subset (expected a declaration, `for` or an \
             assignment)",
        ),
        (
            "double a[N];\nfor (i = 0; i < N; i++) { a[i] = 1; return; }",
            "k.c:2:37: `return` is outside the kernel subset (expected a declaration, `for` or \
             an assignment)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(error(text), want, "for {text:?}");
    }
}

#[test]
fn unbound_symbols_and_bad_addresses_are_errors() {
    let k = example("triad.c");
    let e = k.param_values(&[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "triad.c:1:10: symbol `N` has no value (give it with -D N=VALUE)"
    );
    assert!(matches!(e, KernelError::UnboundSymbol { .. }));
    let params = k.param_values(&[("N".into(), 0)]).unwrap();
    assert!(k.layout(&params, &[]).is_err(), "zero extent accepted");
    let params = k.param_values(&[("N".into(), 4)]).unwrap();
    assert!(k.layout(&params, &[("zz".into(), 0)]).is_err());
    // An array placed at the top of the address space overflows.
    let layout = k.layout(&params, &[("b".into(), u64::MAX - 8)]);
    assert!(layout.is_err());
    // Reading before address 0 stops the stream with an error instead of wrapping around.
    let k = parse_kernel(
        "double a[N];\nfor (i = 0; i < N; i++) a[i] = a[i-1];",
        "k.c",
    )
    .unwrap();
    let params = k.param_values(&[("N".into(), 4)]).unwrap();
    let layout = k.layout(&params, &[]).unwrap();
    let program = Program::new(&k, &params, &layout).unwrap();
    let mut s = program.accesses();
    assert_eq!(s.by_ref().count(), 0);
    let e = s.error().unwrap().to_string();
    assert!(
        e.starts_with("k.c: an address leaves the 64-bit address space"),
        "{e}"
    );
}

#[test]
fn an_undeclared_coefficient_is_told_to_be_declared_or_given() {
    let text = "double a[N];\nfor(int i=0; i<N; ++i)\n    a[i] = a[i] * s;\n";
    let k = parse_kernel(text, "k.c").unwrap();
    let e = k.param_values(&[("N".into(), 8)]).unwrap_err().to_string();
    assert_eq!(
        e,
        "k.c:3:19: symbol `s` has no value (declare it in the kernel file (double s;) or give \
         it with -D s=VALUE)"
    );
    let e = k.param_values(&[("s".into(), 2)]).unwrap_err().to_string();
    assert_eq!(
        e,
        "k.c:1:10: symbol `N` has no value (give it with -D N=VALUE)"
    );
    let single = parse_kernel(
        "float a[N];\nfor(int i=0; i<N; ++i)\n    a[i] = s;\n",
        "f.c",
    )
    .unwrap();
    let e = single
        .param_values(&[("N".into(), 8)])
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("(declare it in the kernel file (float s;) or give it with -D s=VALUE)"),
        "{e}"
    );
}

/// kerncraft's 2d-5pt-linear.c: the 2-D stencil over arrays linearised by hand.
const LINEAR_5PT: &str = "double a[M*N];\ndouble b[M*N];\ndouble s;\n\nfor(int j=1; j<M-1; ++j)\n    for(int i=1; i<N-1; ++i)\n        b[j*N+i] = ( a[j*N+i-1] + a[j*N+i+1]\n                   + a[(j-1)*N+i] + a[(j+1)*N+i]) * s;\n";

fn values(defs: &[(&str, i64)]) -> Vec<(String, i64)> {
    defs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

#[test]
fn linearised_arrays_are_affine_once_sizes_have_values() {
    let defs = [("M", 7), ("N", 9)];
    let linear = parse_kernel_with_values(LINEAR_5PT, "lin.c", &values(&defs)).unwrap();
    assert_eq!(linear.params, ["M", "N"]);
    assert_eq!(linear.arrays[0].extents[0].as_constant(), Some(63));
    assert_eq!(
        refs(&linear),
        [
            "a[9*j+i-1]",
            "a[9*j+i+1]",
            "a[9*j+i-9]",
            "a[9*j+i+9]",
            "b[9*j+i]"
        ]
    );
    // The same stencil on 2-D arrays makes the very same accesses.
    assert_eq!(
        addresses(&linear, &defs, &[]),
        addresses(&example("2d-5pt.c"), &defs, &[])
    );
    assert_eq!(
        linear.statements[0].flops,
        example("2d-5pt.c").statements[0].flops
    );
}

#[test]
fn divided_bounds_use_c_division_once_sizes_have_values() {
    let text = "double a[N];\nfor (i = N/2; i < (N+1)/2 + N/3; i++) a[i] = 1.0;";
    let k = parse_kernel_with_values(text, "half.c", &values(&[("N", 7)])).unwrap();
    // 7/2 = 3, 8/2 = 4 and 7/3 = 2, truncated as C does: i runs over 3..5.
    assert_eq!(k.loops[0].start.as_constant(), Some(3));
    assert_eq!(k.loops[0].end_inclusive.as_constant(), Some(5));
    let k = parse_kernel_with_values(
        "double a[N];\nfor (i = 0; i < (0-N)/2; i++) a[i] = 1.0;",
        "neg.c",
        &values(&[("N", 7)]),
    )
    .unwrap();
    assert_eq!(k.loops[0].end_inclusive.as_constant(), Some(-4));
}

const BLOCKED_MATMUL: &str = "double A[N][N], B[N][N], C[N][N];
for (int ii = 0; ii < N; ii += BS)
  for (int kk = 0; kk < N; kk = kk + BS)
    for (int jj = 0; jj < N; jj += 2*BS/2)
      for (int i = ii; i < ii+BS; ++i)
        for (int k = kk; k < kk+BS; ++k)
          for (int j = jj; j < jj+BS; ++j)
            C[i][j] += A[i][k] * B[k][j];
";

#[test]
fn a_step_given_by_a_parameter_is_its_value() {
    let defs = values(&[("N", 8), ("BS", 4)]);
    let k = parse_kernel_with_values(BLOCKED_MATMUL, "mm.c", &defs).unwrap();
    let steps: Vec<i64> = k.loops.iter().map(|l| l.step).collect();
    assert_eq!(steps, [4, 4, 4, 1, 1, 1]);
    // The tiles cover the matrices once: N^3 iterations of 4 references.
    let params = k.param_values(&defs).unwrap();
    let layout = k.layout(&params, &[]).unwrap();
    let program = Program::new(&k, &params, &layout).unwrap();
    assert_eq!(program.accesses().count(), 8 * 8 * 8 * 4);
    // Counting down by a parameter.
    let down = "double a[N];\nfor (i = N-1; i >= 0; i -= S) a[i] = 1;";
    let k = parse_kernel_with_values(down, "k.c", &values(&[("N", 9), ("S", 3)])).unwrap();
    assert_eq!(k.loops[0].step, -3);
}

#[test]
fn a_parameter_step_without_a_usable_value_is_refused() {
    let with = |text: &str, defs: &[(&str, i64)]| {
        parse_kernel_with_values(text, "k.c", &values(defs))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        with(BLOCKED_MATMUL, &[("N", 8)]),
        "k.c:2:32: the step of `ii` is `BS`, a constant only once BS has a value (give it with \
         -D BS=VALUE)"
    );
    assert_eq!(
        with(BLOCKED_MATMUL, &[("N", 8), ("BS", 0)]),
        "k.c:2:26: a loop step must not be zero (the step of `ii` is `BS` = 0)"
    );
    assert_eq!(
        with(BLOCKED_MATMUL, &[("N", 8), ("BS", -4)]),
        "k.c:2:1: the step of `ii` (-4) moves away from its bound `<` (a loop `ii < ...` needs \
         a positive step)"
    );
    let loop_step =
        "double a[N][N];\nfor (j = 1; j < N; j++)\n for (i = 0; i < N; i += j) a[j][i] = 1;";
    assert_eq!(
        with(loop_step, &[("N", 8)]),
        "k.c:3:26: loop variable `j` cannot appear here"
    );
    let own = "double a[N];\nfor (i = 1; i < N; i += i) a[i] = 1;";
    assert_eq!(
        with(own, &[("N", 8)]),
        "k.c:2:25: the step of `i` cannot be `i` itself"
    );
    assert_eq!(
        with(
            "double a[N];\nfor (i = 0; i < N; i += 2.5) a[i] = 1;",
            &[("N", 8)]
        ),
        "k.c:2:25: expected an integer expression, found a floating-point constant"
    );
}

#[test]
fn products_stay_refused_when_not_affine_or_unbound() {
    let with = |text: &str, defs: &[(&str, i64)]| {
        parse_kernel_with_values(text, "k.c", &values(defs))
            .unwrap_err()
            .to_string()
    };
    let nm = [("M", 4), ("N", 5)];
    // `M*N` is affine in `N` once `M` has a value; `j*N` is not.
    assert_eq!(
        with(LINEAR_5PT, &[("M", 4)]),
        "k.c:7:12: `j*N`: a product of symbols is affine only once `N` has a value (give it \
         with -D N=VALUE)"
    );
    // Callers (misses --symbolic) take the expression from the error, not from its message.
    assert!(matches!(
        parse_kernel_with_values(LINEAR_5PT, "k.c", &values(&[("M", 4)])).unwrap_err(),
        KernelError::NotAffine { expression, .. } if expression == "j*N"
    ));
    assert_eq!(
        error(LINEAR_5PT),
        "k.c:1:11: `M*N`: a product of symbols is affine only once `M` has a value (give it \
         with -D M=VALUE)"
    );
    let ij =
        "double a[M*N];\nfor (j = 0; j < M; j++)\n  for (i = 0; i < N; i++)\n    a[(j+1)*i] = 1.0;";
    assert_eq!(
        with(ij, &nm),
        "k.c:4:12: `(j+1)*i`: a product of two loop variables is not affine"
    );
    let half = "double a[N];\nfor (i = 0; i < N/2; i++) a[i] = 1.0;";
    assert_eq!(
        with(half, &[]),
        "k.c:2:18: `N/2`: a division of symbols is affine only once `N` has a value (give it \
         with -D N=VALUE)"
    );
    assert_eq!(
        with(
            "double a[N];\nfor (i = 0; i < N/M; i++) a[i] = 1.0;",
            &[("N", 4), ("M", 0)]
        ),
        "k.c:2:18: `N/M`: division by zero"
    );
    assert_eq!(
        with(
            "double a[N];\nfor (i = 0; i < N; i++) a[N/i] = 1.0;",
            &[("N", 4)]
        ),
        "k.c:2:28: `N/i`: a division of a loop variable is not affine"
    );
}

/// A statement's scalar target and the scalars it reads, with their depths.
type ScalarUse<'a> = (Option<&'a str>, Vec<(&'a str, u32)>);

#[test]
fn statements_list_the_scalars_they_read_and_assign_with_depths() {
    let k = parse_kernel(
        "double a[N], b[N];\ndouble c, sum, t, y;\nlong k;\nfor (i = 0; i < N; i++) {\n  \
         double prod = a[i]*b[i];\n  y = prod - c;\n  t = sum + y;\n  c = (t - sum) - y;\n  \
         sum = t;\n  sum += a[i] * -y;\n  k += 1;\n}",
        "kahan.c",
    )
    .unwrap();
    let got: Vec<ScalarUse> = k
        .statements
        .iter()
        .map(|s| {
            let reads = s
                .scalar_reads
                .iter()
                .map(|(n, d)| (n.as_str(), *d))
                .collect();
            (s.scalar_target.as_deref(), reads)
        })
        .collect();
    let want: Vec<ScalarUse> = vec![
        (Some("prod"), vec![]),
        (Some("y"), vec![("prod", 1), ("c", 1)]),
        (Some("t"), vec![("sum", 1), ("y", 1)]),
        (Some("c"), vec![("t", 2), ("sum", 2), ("y", 1)]),
        (Some("sum"), vec![("t", 0)]),
        // `sum += a[i] * -y` is `sum + (a[i] * -y)`: y is two operations from the result.
        (Some("sum"), vec![("y", 2), ("sum", 1)]),
        // Integer arithmetic is no floating-point operation.
        (Some("k"), vec![("k", 0)]),
    ];
    assert_eq!(got, want);
    // A compound assignment to a floating-point scalar counts its operation.
    let k = parse_kernel("double s;\nfor (i = 0; i < 4; i++) s += 1;", "s.c").unwrap();
    assert_eq!(k.statements[0].flops.add, 1);
}

#[test]
fn precision_is_single_only_when_all_floating_data_is_float() {
    let single = |text: &str| parse_kernel(text, "p.c").unwrap().single_precision();
    let body = "for (i = 0; i < N; i++) a[i] = b[i] * 2.0;";
    assert!(single(&format!("float a[N], b[N];\nfloat s;\n{body}")));
    assert!(single(&format!("float a[N], b[N];\nint k;\n{body}")));
    assert!(!single(&format!("float a[N], b[N];\ndouble s;\n{body}")));
    assert!(!single(&format!("float a[N];\ndouble b[N];\n{body}")));
    assert!(!single(&format!("int a[N], b[N];\n{body}")));
    let k = parse_kernel(
        "const float w = 0.5;\nfloat a[N];\nfor (i = 0; i < N; i++) a[i] = w;",
        "w.c",
    )
    .unwrap();
    assert_eq!(
        k.scalars,
        [("w".to_string(), loopscope_kernel::ElemType::Float)]
    );
}

#[test]
fn long_expressions_are_refused_not_overflowed() {
    let text = format!(
        "double a[N];\nfor (i = 0; i < N; i++) a[i{}] = 1.0;",
        "+1".repeat(100_000)
    );
    let e = parse_kernel(&text, "long.c").unwrap_err().to_string();
    assert!(e.contains("expression longer than 2000 operators"), "{e}");
    let text = format!(
        "double a[N];\nfor (i = 0; i < N; i++) a[i] = 1.0{};",
        "*2.0".repeat(100_000)
    );
    assert!(parse_kernel(&text, "long.c").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics_on_arbitrary_text(text in "\\PC{0,200}") {
        let _ = parse_kernel(&text, "fuzz.c");
    }

    #[test]
    fn parser_never_panics_on_mutated_kernels(
        cut in 0usize..200,
        insert in prop::sample::select(vec!["", "[", "]", "(", ")", "{", "}", ";", "+", "*", "/", "=", "i", "N", "0", "1e", "for", "double", "-", "--", "<", "9999999999999999999", "\n"]),
        repeat in 1usize..80,
    ) {
        let base = "double a[M][N], b[M][N];\ndouble s;\nfor(int j=1; j<M-1; ++j)\n  for(int i=1; i<N-1; ++i) {\n    b[j][i] = (a[j][i-1] + a[j][i+1]) * s;\n    s += 0.5 / a[j][i];\n  }\n";
        let at = cut.min(base.len());
        let text = format!("{}{}{}", &base[..at], insert.repeat(repeat), &base[at..]);
        if let Ok(k) = parse_kernel(&text, "fuzz.c") {
            let defs = vec![("M".to_string(), 5), ("N".to_string(), 6)];
            if let Ok(params) = k.param_values(&defs) {
                if let Ok(layout) = k.layout(&params, &[]) {
                    if let Ok(p) = Program::new(&k, &params, &layout) {
                        let _ = p.accesses().take(10_000).count();
                    }
                }
            }
        }
    }

    #[test]
    fn folding_values_never_panics_on_mutated_linear_kernels(
        cut in 0usize..250,
        insert in prop::sample::select(vec!["", "*", "/", "(", ")", "N", "M", "j", "0", "-", "9223372036854775807", "*N*N"]),
        repeat in 1usize..20,
        m in prop::sample::select(vec![0i64, 1, 3, -2, i64::MAX, i64::MIN]),
        n in prop::sample::select(vec![0i64, 2, 5, -1, i64::MAX, i64::MIN]),
    ) {
        let at = cut.min(LINEAR_5PT.len());
        let text = format!("{}{}{}", &LINEAR_5PT[..at], insert.repeat(repeat), &LINEAR_5PT[at..]);
        let defs = values(&[("M", m), ("N", n)]);
        if let Ok(k) = parse_kernel_with_values(&text, "fuzz.c", &defs) {
            if let Ok(params) = k.param_values(&defs) {
                if let Ok(layout) = k.layout(&params, &[]) {
                    if let Ok(p) = Program::new(&k, &params, &layout) {
                        let _ = p.accesses().take(10_000).count();
                    }
                }
            }
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed(depth in prop::sample::select(vec![60usize, 199, 201, 400, 3000])) {
        let text = format!("double a[N];\nfor (i = 0; i < N; i++) a[i] = {}1{};", "(".repeat(depth), ")".repeat(depth));
        let _ = parse_kernel(&text, "deep.c");
        let text = format!("double a[N];\n{}a[0] = 1;", "for (i = 0; i < N; i++) ".repeat(depth.min(400)));
        let _ = parse_kernel(&text, "deep.c");
    }
}

/// Every access by direct recursive evaluation of the IR: the reference for the stream.
fn naive(
    kernel: &Kernel,
    params: &[i64],
    layout: &loopscope_kernel::Layout,
) -> Vec<(u32, u64, bool)> {
    use loopscope_kernel::{Node, Sym};
    fn value<'a>(p: &'a [i64], vars: &'a [i64]) -> impl Fn(Sym) -> i64 + 'a {
        move |s| match s {
            Sym::Param(i) => p[i],
            Sym::Loop(i) => vars[i],
        }
    }
    fn walk(
        nodes: &[Node],
        k: &Kernel,
        p: &[i64],
        l: &loopscope_kernel::Layout,
        vars: &mut Vec<i64>,
        first: &[u32],
        out: &mut Vec<(u32, u64, bool)>,
    ) {
        for node in nodes {
            match node {
                Node::Statement(s) => {
                    for (n, r) in k.statements[*s].refs.iter().enumerate() {
                        let mut offset = 0i128;
                        for (sub, stride) in r.subscripts.iter().zip(&l.strides[r.array]) {
                            offset += sub.eval(value(p, vars)).unwrap() * i128::from(*stride);
                        }
                        let addr = i128::from(l.base[r.array])
                            + offset * i128::from(k.arrays[r.array].elem.bytes() as i64);
                        out.push((
                            first[*s] + n as u32,
                            addr as u64,
                            r.kind == AccessKind::Write,
                        ));
                    }
                }
                Node::Loop { id, body } => {
                    let lp = &k.loops[*id];
                    let start = lp.start.eval(value(p, vars)).unwrap() as i64;
                    let end = lp.end_inclusive.eval(value(p, vars)).unwrap() as i64;
                    let mut v = start;
                    while (lp.step > 0 && v <= end) || (lp.step < 0 && v >= end) {
                        vars[*id] = v;
                        walk(body, k, p, l, vars, first, out);
                        v += lp.step;
                    }
                }
            }
        }
    }
    let mut first = Vec::new();
    let mut n = 0;
    for s in &kernel.statements {
        first.push(n);
        n += s.refs.len() as u32;
    }
    let mut out = Vec::new();
    walk(
        &kernel.body,
        kernel,
        params,
        layout,
        &mut vec![0; kernel.loops.len()],
        &first,
        &mut out,
    );
    out
}

/// A random imperfect nest over `x[N]` and `y[N][N]`, as kernel text.
fn random_nest() -> impl Strategy<Value = String> {
    let stmt = prop::sample::select(vec![
        "x[{v}] = y[{v}][{o}] + 1.0;",
        "y[{o}][{v}] += x[{o}] * x[{v}];",
        "x[{o}] = x[{v}];",
    ]);
    let level = (
        0i64..3,
        prop::sample::select(vec!["N-1", "N-2", "{o}"]),
        prop::sample::select(vec![1i64, 2, -1]),
        stmt.clone(),
        prop::option::of(stmt),
    );
    prop::collection::vec(level, 1..4).prop_map(|levels| {
        let vars = ["i", "j", "k"];
        let mut text = String::from("double x[N], y[N][N];\n");
        let mut close = String::new();
        for (d, (lo, hi, step, before, after)) in levels.iter().enumerate() {
            let v = vars[d];
            let o = if d == 0 {
                "0".to_string()
            } else {
                vars[d - 1].to_string()
            };
            let hi = hi.replace("{o}", &o);
            let head = if *step > 0 {
                format!("for ({v} = {lo}; {v} <= {hi}; {v} += {step}) {{\n")
            } else {
                format!("for ({v} = {hi}; {v} >= {lo}; {v}--) {{\n")
            };
            text.push_str(&head);
            text.push_str(&before.replace("{v}", v).replace("{o}", &o));
            text.push('\n');
            if let Some(a) = after {
                close = format!("{}\n}}\n{close}", a.replace("{v}", v).replace("{o}", &o));
            } else {
                close = format!("}}\n{close}");
            }
        }
        text + &close
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn stream_equals_direct_evaluation(text in random_nest(), n in 1i64..7) {
        let kernel = parse_kernel(&text, "random.c").unwrap();
        let params = kernel.param_values(&[("N".to_string(), n)]).unwrap();
        let layout = kernel.layout(&params, &[("y".to_string(), 4096), ("x".to_string(), 8192)]).unwrap();
        let program = Program::new(&kernel, &params, &layout).unwrap();
        let mut stream = program.accesses();
        let got: Vec<(u32, u64, bool)> = stream.by_ref().map(|a| (a.reference, a.addr, a.write)).collect();
        prop_assert!(stream.error().is_none());
        prop_assert_eq!(got.len() as u64, program.total_accesses(&kernel));
        prop_assert_eq!(got, naive(&kernel, &params, &layout));
    }
}

#[test]
fn qualifiers_may_be_combined_in_any_order() {
    for decl in [
        "static const double a[N];",
        "const static double a[N];",
        "static double const a[N];",
        "const double a[N];",
    ] {
        let text = format!("{decl}\nfor (int i = 0; i < N; ++i) a[i] = 1.0;\n");
        let k = parse_kernel(&text, "q.c").unwrap_or_else(|e| panic!("{decl}: {e}"));
        assert_eq!(k.arrays[0].name, "a", "{decl}");
        assert_eq!(
            k.arrays[0].elem,
            loopscope_kernel::ElemType::Double,
            "{decl}"
        );
    }
}

#[test]
fn statements_give_each_reference_its_depth_below_the_stored_value() {
    let k = parse_kernel(
        "double a[M][N];\ndouble s;\nfor (j = 1; j < M-1; j++)\n  for (i = 1; i < N-1; i++) {\n    \
         a[j][i] = (a[j][i-1] + a[j][i+1] + a[j-1][i] + a[j+1][i]) * s;\n    \
         a[j][i] += a[j][i-1];\n  }",
        "gs.c",
    )
    .unwrap();
    let depths: Vec<&[u32]> = k.statements.iter().map(|s| &s.ref_depths[..]).collect();
    // Left to right: ((a[j][i-1] + a[j][i+1]) + a[j-1][i]) + a[j+1][i], then the product; the
    // compound assignment's own read sits one addition below the store.
    assert_eq!(depths, [&[4, 4, 3, 2, 0][..], &[1, 1, 0][..]]);
    for s in &k.statements {
        assert_eq!(s.ref_depths.len(), s.refs.len());
    }
}
