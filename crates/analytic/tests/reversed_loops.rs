//! Loops that count down (`for (i = N-1; i >= 0; i--)`) and mixed directions: the hit source of
//! an access is the latest earlier access to its line in execution order, which in a loop with
//! a negative step is the one with the smallest value of its variable. The counts per reference
//! equal a brute-force LRU walk, on a direct-mapped and an 8-way cache.

use loopscope_analytic::{Affine, Array, Cache, Loop, Model, Node, Program, Reference, Statement};
use loopscope_polyhedral::Ctx;

mod common;
use common::brute_force;

const DIRECT_MAPPED: Cache = Cache {
    ways: 1,
    line_bytes: 64,
    sets: 16,
};

const EIGHT_WAY: Cache = Cache {
    ways: 8,
    line_bytes: 64,
    sets: 64,
};

/// `sum(coef·var) + constant`.
fn affine(terms: &[(&str, i64)], constant: i64) -> Affine {
    terms
        .iter()
        .fold(Affine::constant(constant), |e, (v, k)| e.plus_term(v, *k))
}

fn read(array: &str, subscripts: Vec<Affine>) -> Reference {
    Reference {
        array: array.into(),
        subscripts,
        is_write: false,
    }
}

fn write(array: &str, subscripts: Vec<Affine>) -> Reference {
    Reference {
        is_write: true,
        ..read(array, subscripts)
    }
}

/// A loop over `0 ≤ var ≤ n − 1` (or `1 ≤ var` with `from_one`) in steps of `step`. The
/// bounds are numbers, as `misses` builds them from `-D` values.
fn over_n(var: &str, n: i64, step: i64, from_one: bool, body: Vec<Node>) -> Node {
    Node::Loop(Loop {
        var: var.into(),
        lower: Affine::constant(i64::from(from_one)),
        upper_inclusive: Affine::constant(n - 1),
        step,
        body,
    })
}

fn statement(name: &str, refs: Vec<Reference>) -> Node {
    Node::Statement(Statement {
        name: name.into(),
        refs,
    })
}

/// Doubles, one array after the other from `base_bytes` on.
fn arrays(names: &[&str], extents: &[i64], first_base: i64, gap: i64) -> Vec<Array> {
    let size: i64 = 8 * extents.iter().product::<i64>();
    names
        .iter()
        .enumerate()
        .map(|(k, name)| Array {
            name: (*name).into(),
            base_bytes: first_base + k as i64 * (size + gap),
            element_bytes: 8,
            extents: extents.to_vec(),
        })
        .collect()
}

/// The model's compulsory and conflict misses per reference equal the LRU walk's.
fn assert_exact(what: &str, program: &Program, cache: Cache, n: i64) {
    let ctx = Ctx::new();
    let params: [(&str, i64); 0] = [];
    let got = Model::new(&ctx, program, cache)
        .and_then(|model| model.evaluate(&params))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = brute_force(program, cache, &params);
    for (k, r) in got.iter().enumerate() {
        assert_eq!(
            (r.compulsory, r.conflict),
            (want.compulsory[k], want.conflict[k]),
            "{what}, {} at N = {n} on {cache:?}",
            r.position
        );
    }
}

/// `b[i][j] = a[j][i]` over `N × N` (`j` outer), each loop counting up (+1) or down (−1).
fn transpose(outer_step: i64, inner_step: i64, n: i64) -> Program {
    let (i, j) = (affine(&[("i", 1)], 0), affine(&[("j", 1)], 0));
    let body = statement(
        "S",
        vec![
            read("a", vec![j.clone(), i.clone()]),
            write("b", vec![i, j]),
        ],
    );
    let inner = over_n("i", n, inner_step, false, vec![body]);
    Program {
        params: Vec::new(),
        arrays: arrays(&["a", "b"], &[n, n], 0, 0),
        body: vec![over_n("j", n, outer_step, false, vec![inner])],
    }
}

#[test]
fn a_transpose_with_both_loops_counting_down_is_exact() {
    for n in [16, 24, 64] {
        let p = transpose(-1, -1, n);
        assert_exact("both reversed", &p, EIGHT_WAY, n);
        assert_exact("both reversed", &p, DIRECT_MAPPED, n);
    }
}

#[test]
fn a_transpose_with_the_outer_loop_counting_down_is_exact() {
    for n in [16, 24, 64] {
        let p = transpose(-1, 1, n);
        assert_exact("outer reversed", &p, EIGHT_WAY, n);
        assert_exact("outer reversed", &p, DIRECT_MAPPED, n);
    }
}

#[test]
fn a_transpose_with_the_inner_loop_counting_down_is_exact() {
    for n in [16, 24, 64] {
        let p = transpose(1, -1, n);
        assert_exact("inner reversed", &p, EIGHT_WAY, n);
        assert_exact("inner reversed", &p, DIRECT_MAPPED, n);
    }
}

/// `a[i] = a[i-1] + b[i]` for `i = N-1` down to 1: the read `a[i-1]` meets its line's next
/// element first, so its hit source is the access one iteration earlier in time, at `i + 1`.
#[test]
fn a_one_dimensional_recurrence_counting_down_is_exact() {
    let i = |c| affine(&[("i", 1)], c);
    for n in [40, 200, 512] {
        let program = Program {
            params: Vec::new(),
            arrays: arrays(&["a", "b"], &[n], 0, 0),
            body: vec![over_n(
                "i",
                n,
                -1,
                true,
                vec![statement(
                    "S",
                    vec![
                        read("a", vec![i(-1)]),
                        read("b", vec![i(0)]),
                        write("a", vec![i(0)]),
                    ],
                )],
            )],
        };
        assert_exact("a[i] = a[i-1] + b[i] downwards", &program, DIRECT_MAPPED, n);
        assert_exact("a[i] = a[i-1] + b[i] downwards", &program, EIGHT_WAY, n);
    }
}

/// `b[i] = a[N-1-i]` counting down, with `b` 8 bytes past a line boundary: one array walks up
/// in memory while the other walks down.
#[test]
fn a_reversed_copy_with_an_unaligned_array_is_exact() {
    let n = 200;
    let program = Program {
        params: Vec::new(),
        arrays: arrays(&["a", "b"], &[n], 0, 8),
        body: vec![over_n(
            "i",
            n,
            -1,
            false,
            vec![statement(
                "S",
                vec![
                    read("a", vec![affine(&[("i", -1)], n - 1)]),
                    write("b", vec![affine(&[("i", 1)], 0)]),
                ],
            )],
        )],
    };
    assert_exact("b[i] = a[N-1-i] downwards", &program, DIRECT_MAPPED, n);
    assert_exact("b[i] = a[N-1-i] downwards", &program, EIGHT_WAY, n);
}

/// A forward sweep, then a sweep counting down by 2 over the same array, then a nest whose
/// outer loop counts down and whose inner loop counts up by 3: hit sources cross nests of
/// different directions and steps.
#[test]
fn nests_of_mixed_directions_and_steps_are_exact() {
    for n in [20, 33, 64] {
        let i = affine(&[("i", 1)], 0);
        let k = affine(&[("k", 1)], 0);
        let (r, c) = (affine(&[("r", 1)], 0), affine(&[("c", 1)], 0));
        let mut arrays = arrays(&["a", "m"], &[n * n], 0, 0);
        arrays[1].extents = vec![n, n];
        let program = Program {
            params: Vec::new(),
            arrays,
            body: vec![
                over_n(
                    "i",
                    n,
                    1,
                    false,
                    vec![statement("S1", vec![write("a", vec![i])])],
                ),
                over_n(
                    "k",
                    n,
                    -2,
                    false,
                    vec![statement(
                        "S2",
                        vec![
                            read("a", vec![k.clone()]),
                            read("m", vec![affine(&[], 0), k]),
                        ],
                    )],
                ),
                over_n(
                    "r",
                    n,
                    -1,
                    false,
                    vec![over_n(
                        "c",
                        n,
                        3,
                        false,
                        vec![statement(
                            "S3",
                            vec![
                                read("m", vec![c.clone(), r.clone()]),
                                write("m", vec![r, c]),
                            ],
                        )],
                    )],
                ),
            ],
        };
        assert_exact("mixed", &program, DIRECT_MAPPED, n);
        assert_exact("mixed", &program, EIGHT_WAY, n);
    }
}
