//! Differential tests: our size-independent count against isl's enumerating `count_val`, on
//! random small sets with floor divisions, modulo constraints, existentials and unions.

use isl_rs as isl;
use loopscope_polyhedral::Ctx;
use proptest::prelude::*;

const VARS: [&str; 3] = ["a", "b", "c"];

fn isl_count(text: &str, n: i64) -> i128 {
    let ctx = isl::Context::alloc();
    let set = isl::Set::read_from_str(&ctx, text).unwrap();
    let params = isl::Set::read_from_str(&ctx, &format!("[N] -> {{ : N = {n} }}")).unwrap();
    let v = set.intersect_params(params).unwrap().count_val().unwrap();
    v.get_num_si().unwrap() as i128
}

fn affine(dims: usize, coeffs: &[i64], constant: i64) -> String {
    let mut s = format!("{constant}");
    for (v, c) in VARS[..dims].iter().zip(coeffs) {
        s.push_str(&format!(" + {c}*{v}"));
    }
    s
}

fn conjunct() -> impl Strategy<Value = (usize, Vec<i64>, i64, i64, u8)> {
    (
        0usize..3,
        prop::collection::vec(-3i64..=3, 3),
        -6i64..=6,
        2i64..=5,
        0u8..4,
    )
}

fn render(dims: usize, parts: &[(usize, Vec<i64>, i64, i64, u8)]) -> String {
    let vars = VARS[..dims].join(", ");
    let mut conds: Vec<String> = VARS[..dims]
        .iter()
        .map(|v| format!("0 <= {v} < N"))
        .collect();
    for (_, coeffs, constant, d, kind) in parts {
        let e = affine(dims, coeffs, *constant);
        conds.push(match kind {
            0 => format!("{e} >= 0"),
            1 => format!("({e}) mod {d} != 0"),
            2 => format!("floor(({e})/{d}) <= {}", constant / 2),
            _ => format!("exists (q : {d}q <= {e} <= {d}q + 1)"),
        });
    }
    format!("[N] -> {{ [{vars}] : {} }}", conds.join(" and "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn matches_isl_enumeration(
        dims in 1usize..=3,
        first in prop::collection::vec(conjunct(), 0..3),
        second in prop::collection::vec(conjunct(), 0..3),
        n in 0i64..=14,
    ) {
        // isl's recursion outgrows a test thread's stack on rare sets (the library's own threads
        // are built by `isl_thread`): the case runs on a thread like theirs.
        loopscope_polyhedral::isl_thread()
            .spawn(move || check_case(dims, &first, &second, n))
            .expect("a thread for the case")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
    }
}

fn check_case(
    dims: usize,
    first: &[(usize, Vec<i64>, i64, i64, u8)],
    second: &[(usize, Vec<i64>, i64, i64, u8)],
    n: i64,
) -> Result<(), TestCaseError> {
    let a = render(dims, first);
    let b = render(dims, second);
    let ctx = Ctx::new();
    let sa = ctx.set(&a).unwrap();
    let sb = ctx.set(&b).unwrap();
    prop_assert_eq!(sa.count(&[("N", n)]).unwrap(), isl_count(&a, n), "{}", a);
    let union = sa.union(&sb).unwrap();
    let diff = sa.subtract(&sb).unwrap();
    prop_assert_eq!(
        union.count(&[("N", n)]).unwrap(),
        isl_count(&union.to_string(), n),
        "{}",
        union
    );
    prop_assert_eq!(
        diff.count(&[("N", n)]).unwrap(),
        isl_count(&diff.to_string(), n),
        "{}",
        diff
    );
    let proj = sa.project_out(0, 1).unwrap();
    prop_assert_eq!(
        proj.count(&[("N", n)]).unwrap(),
        isl_count(&proj.to_string(), n),
        "{}",
        proj
    );
    Ok(())
}

#[test]
fn large_parameters_cost_the_same() {
    // The cache-model shape: an index, its line and set, at a size enumeration cannot reach.
    let ctx = Ctx::new();
    let s = ctx
        .set("[N] -> { [k, w, s] : 0 <= k < N and 0 <= s <= 3 and 16w + 4s <= k <= 16w + 4s + 3 and s != 1 }")
        .unwrap();
    let n: i64 = 1_000_000_000_000;
    assert_eq!(s.count(&[("N", n)]).unwrap(), (n as i128) * 3 / 4);
    assert_eq!(s.count(&[("N", 20)]).unwrap(), 16);
}

#[test]
fn a_set_whose_preparation_runs_away_is_counted_at_each_value() {
    // Found by `matches_isl_enumeration`: isl's parametric `compute_divs` on this projection
    // splits its context without end (it overflowed a test thread's stack, and with a larger
    // one ran for minutes); with N fixed it takes a millisecond. The preparation's own
    // operation bound gives up, and the count goes through isl at the value.
    let set = "[N] -> { [a, b] : 0 <= a < N and 0 <= b < N \
        and exists (q : 5q <= 4 + 2*a + -2*b <= 5q + 1) \
        and exists (q : 5q <= -6 + 2*a + -1*b <= 5q + 1) }";
    let ctx = Ctx::new();
    let proj = ctx.set(set).unwrap().project_out(0, 1).unwrap();
    for n in [0, 7, 40] {
        assert_eq!(
            proj.count(&[("N", n)]).unwrap(),
            isl_count(&proj.to_string(), n)
        );
    }
    assert_eq!(proj.count(&[("N", 7)]).unwrap(), 5);
}

#[test]
fn missing_parameter_and_unbounded_are_bad_input() {
    let ctx = Ctx::new();
    let s = ctx.set("[N] -> { [i] : 0 <= i < N }").unwrap();
    assert!(s.count(&[]).unwrap_err().is_bad_input());
    let u = ctx.set("{ [i] : i >= 0 }").unwrap();
    assert!(u.count(&[]).unwrap_err().is_bad_input());
    assert!(ctx.set("{ [i] : i >= }").unwrap_err().is_bad_input());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    /// The shape of the cache model's sets: a row-major address, its line (a division by the
    /// line size) and that line's set (a nested division by the number of sets), with the
    /// large denominators real caches give; lifted, these are extra dimensions that take few
    /// values, where the old residue split needed line × sets classes per dimension.
    #[test]
    fn cache_shaped_divisions_match_isl_enumeration(
        dims in 2usize..=3,
        row in 5i64..=40,
        line in prop::sample::select(vec![4i64, 8, 16, 64]),
        sets in prop::sample::select(vec![2i64, 4, 8, 64]),
        offset in 0i64..=100,
        target in 0i64..=7,
        compare in 0u8..3,
        n in 0i64..=12,
    ) {
        let vars = VARS[..dims].join(", ");
        let address = match dims {
            2 => format!("{row}a + b + {offset}"),
            _ => format!("{}a + {row}b + c + {offset}", row * 3),
        };
        let tag = format!("floor(floor(({address})/{line})/{sets})");
        let set_index = format!("floor(({address})/{line}) - {sets}*{tag}");
        let cond = match compare {
            0 => format!("{set_index} = {}", target % sets),
            1 => format!("{set_index} <= {}", target % sets),
            _ => format!("{tag} mod 3 != {}", target % 3),
        };
        let bounds: Vec<String> = VARS[..dims].iter().map(|v| format!("0 <= {v} < N")).collect();
        let text = format!("[N] -> {{ [{vars}] : {} and {cond} }}", bounds.join(" and "));
        let ctx = Ctx::new();
        let s = ctx.set(&text).unwrap();
        prop_assert_eq!(s.count(&[("N", n)]).unwrap(), isl_count(&text, n), "{}", text);
    }
}
