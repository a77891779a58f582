//! `Map::inputs_with_at_least`: the inputs with at least `d` outputs, from the sizes of
//! intervals, lattices and intervals with holes, against a count of each input's outputs by
//! enumeration; and the bounds the analysis takes from a tag map, `Map::output_spread` (with
//! its relaxed bound), `Set::dim_range_bound` and `Map::output_strides`.

use loopscope_polyhedral::{Ctx, Set};

/// The outputs of input `t` of the map `{ [t] -> [q] : map }`.
fn image<'c>(ctx: &'c Ctx, map: &str, t: i64) -> Set<'c> {
    ctx.set(&format!("{{ [q] : exists t : t = {t} and ({map}) }}"))
        .unwrap()
}

/// The number of outputs of each input `0 ≤ t ≤ 40` of `map`, by walking them.
fn outputs_by_walking(ctx: &Ctx, map: &str) -> Vec<usize> {
    (0..=40)
        .map(|t| usize::try_from(image(ctx, map, t).count(&[]).unwrap()).unwrap())
        .collect()
}

fn check(constraints: &str) {
    check_counts(constraints, &[1, 2, 3, 4, 5, 6]);
}

/// Like [`check`], for the given numbers of outputs.
fn check_counts(constraints: &str, counts: &[u32]) {
    let ctx = Ctx::new();
    let map = ctx
        .map(&format!(
            "{{ [t] -> [q] : 0 <= t <= 40 and ({constraints}) }}"
        ))
        .unwrap();
    let sets = map
        .inputs_with_at_least(counts)
        .unwrap()
        .expect("every part has a known size");
    let walked = outputs_by_walking(&ctx, constraints);
    for (set, &d) in sets.iter().zip(counts) {
        assert_eq!(
            set.count(&[]).unwrap(),
            walked.iter().filter(|&&n| n >= d as usize).count() as i128,
            "at least {d} outputs of {constraints}"
        );
    }
}

/// `sets[i]`, counted at `values`, has the inputs with more than `i` outputs in `walked`.
fn assert_at_least(sets: &[Set<'_>], values: &[(&str, i64)], walked: &[usize], what: &str) {
    for (i, set) in sets.iter().enumerate() {
        assert_eq!(
            set.count(values).unwrap(),
            walked.iter().filter(|&&n| n > i).count() as i128,
            "at least {} outputs of {what} at {values:?}",
            i + 1
        );
    }
}

#[test]
fn overlapping_intervals_count_each_output_once() {
    check("t <= q <= t + 2 or t + 1 <= q <= 2t - 3");
    check("(q <= t and 3q >= 2t) or (10 <= q <= 13)");
    check("q != t and t - 4 <= q <= t + 1");
}

#[test]
fn floors_of_the_input_keep_intervals() {
    check("2*floor(t/2) <= q <= floor(t/3) + 5 or q = 30");
}

#[test]
fn every_mth_output_and_an_interval_less_one_residue() {
    check("t <= q <= t + 9 and q mod 3 = 0");
    check("t <= q <= 2t + 9 and (q - t) mod 4 = 1");
    check("t - 3 <= q <= t + 20 and q mod 5 != 0");
    check("(7t - 7q) mod 45 != 0 and t <= q <= 3t + 50");
}

#[test]
fn two_residues_taken_out_are_not_known() {
    let ctx = Ctx::new();
    let map = ctx
        .map("{ [t] -> [q] : 0 <= t <= 40 and t <= q <= t + 30 and q mod 3 != 0 and q mod 5 != 0 }")
        .unwrap();
    assert!(map.inputs_with_at_least(&[2]).unwrap().is_none());
}

#[test]
fn an_empty_map_has_no_input_with_an_output() {
    let ctx = Ctx::new();
    let map = ctx
        .map("{ [t] -> [q] : 0 <= t <= 40 and q > t and q < t }")
        .unwrap();
    let sets = map.inputs_with_at_least(&[1, 2, 3]).unwrap().unwrap();
    assert_eq!(sets.len(), 3);
    assert!(sets.iter().all(|s| s.is_empty().unwrap()));
}

#[test]
fn a_residue_window_is_counted_per_class() {
    // A column walk's rows in one cache set: a window of residues of a·q + c.
    check("(62q + t) mod 150 >= 142 and t <= q <= t + 300");
    check("(75q + 3t) mod 256 <= 3 and 0 <= q <= 5t");
    check("(3q + floor(t/2)) mod 11 <= 4 and t - 20 <= q <= 2t");
    check("(4q + t) mod 12 >= 4 and 0 <= q <= t + 7");
}

#[test]
fn counts_beyond_every_parts_bound_have_no_input() {
    // Each window has at most four classes in a span shorter than its period: at most four
    // outputs per part, so no input reaches ten, decided from the bounds alone.
    check_counts(
        "(62q + t) mod 150 >= 142 and t <= q <= t + 40",
        &[3, 10, 20],
    );
    check_counts(
        "((62q + t) mod 150 >= 142 and t <= q <= t + 40) or (q = t + 100)",
        &[2, 5, 9],
    );
}

#[test]
fn a_window_with_a_parameter_in_its_residue() {
    let ctx = Ctx::new();
    let map = ctx
        .map(
            "[N] -> { [t] -> [q] : 0 <= t <= 40 and t <= q <= t + N and (5q + N + t) mod 16 <= 3 }",
        )
        .unwrap();
    let sets = map
        .inputs_with_at_least(&[1, 2])
        .unwrap()
        .expect("a window's size is known");
    for n in [0i64, 7, 33] {
        let constraints = format!("t <= q <= t + {n} and (5q + {n} + t) mod 16 <= 3");
        let walked = outputs_by_walking(&ctx, &constraints);
        assert_at_least(&sets, &[("N", n)], &walked, &constraints);
    }
}

#[test]
fn a_wide_window_is_counted_by_its_complement() {
    check("(7q - t) mod 45 >= 1 and t <= q <= 4t + 3");
    check("(6q + t) mod 40 <= 35 and 2 <= q <= 3t");
}

#[test]
fn a_window_whose_classes_depend_on_the_input_is_counted_per_piece() {
    // g = gcd(4, 10) = 2 does not divide the width 3: a·q + c takes two of the window's
    // residues where c is even (0 and 2) and one where it is odd (1).
    check("(4q + t) mod 10 <= 2 and 0 <= q <= t + 12");
    // Wider than half the modulus, counted by its complement of 5 residues, g = 2.
    check("(6q + t) mod 14 >= 5 and t <= q <= 2t + 3");
    // Matrix multiply's shape at N = 4000 in a 48 KiB 12-way L1 (below), and scaled down: a
    // window of 8 residues with g = 16 and with g = 32.
    check("(32q + t) mod 400 >= 392 and t <= q <= t + 30");
    check("(512q + t) mod 4000 >= 3992 and 0 <= q <= 3t + 40");
}

#[test]
fn a_window_whose_pieces_isl_joins_slowly() {
    // Found by `windows_match_enumeration`: joining this window's size pieces into one
    // piecewise function (isl's `union_add`) took 8 s; the regions take the pieces as written.
    let constraints = "4 <= (13q + t + 1) mod 58 <= 41 and t - 5 <= q <= t + 24";
    check(constraints);
    check_counts(constraints, &[4, 8, 16]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    #[test]
    fn windows_match_enumeration(
        a in 1i64..40,
        modulus in 2i64..64,
        shift in -20i64..20,
        lo_frac in 0.0f64..1.0,
        width_frac in 0.0f64..1.0,
        span in 0i64..60,
    ) {
        let lo = ((modulus - 1) as f64 * lo_frac) as i64;
        let hi = lo + ((modulus - 1 - lo) as f64 * width_frac) as i64;
        let constraints = format!(
            "{lo} <= ({a}q + t + {shift}) mod {modulus} <= {hi} and t - 5 <= q <= t + {span}"
        );
        let ctx = Ctx::new();
        let map = ctx
            .map(&format!("{{ [t] -> [q] : 0 <= t <= 40 and ({constraints}) }}"))
            .unwrap();
        if map.inputs_with_at_least(&[1]).unwrap().is_some() {
            check(&constraints);
            check_counts(&constraints, &[4, 8, 16]);
        }
    }
}

#[test]
fn many_parts_are_summed_per_region() {
    // Six disjoint parts without a window, none merged by coalescing.
    check("q = t or q = t + 2 or q = t + 4 or q = t + 6 or q = t + 8 or 2t - 1 <= q <= 2t + 1");
}

/// The largest `max − min` of one input's outputs, by walking the inputs `0 ≤ t ≤ 40`.
fn spread_by_walking(ctx: &Ctx, map: &str) -> Option<i64> {
    (0..=40)
        .filter_map(|t| {
            image(ctx, map, t)
                .dim_range(0)
                .unwrap()
                .map(|(lo, hi)| hi - lo)
        })
        .max()
}

#[test]
fn output_spread_is_the_widest_image() {
    let ctx = Ctx::new();
    for constraints in [
        "t <= q <= t + 2 or q = 3t - 5",
        "q = 25 * floor(t / 4) or q = t",
        "(t - 4 <= q <= t + 1 and q != t) or (q >= 2t and q <= 2t + 7 and t <= 10)",
        "q = t",
    ] {
        let map = ctx
            .map(&format!(
                "{{ [t] -> [q] : 0 <= t <= 40 and ({constraints}) }}"
            ))
            .unwrap();
        let spread = spread_by_walking(&ctx, constraints);
        assert_eq!(map.output_spread().unwrap(), spread, "{constraints}");
        // The linear programs' bound holds the spread; on these maps, whose divisions are
        // exact at the extremes, it is the spread.
        assert_eq!(map.output_spread_bound().unwrap(), spread, "{constraints}");
    }
    let empty = ctx
        .map("{ [t] -> [q] : 0 <= t <= 4 and q > t and q < t }")
        .unwrap();
    assert_eq!(empty.output_spread().unwrap(), None);
    assert_eq!(empty.output_spread_bound().unwrap(), None);
}

#[test]
fn the_relaxed_bounds_hold_the_integer_ones() {
    let ctx = Ctx::new();
    // A residue window's divisions: the relaxation is looser than the integer points.
    let map = ctx
        .map("{ [t] -> [q] : 0 <= t <= 40 and 3 <= (5q + t) mod 64 <= 9 and t <= q <= t + 70 }")
        .unwrap();
    let spread = map.output_spread().unwrap().unwrap();
    let bound = map.output_spread_bound().unwrap().unwrap();
    assert!(bound >= spread, "bound {bound} below the spread {spread}");
    let range = map.range().unwrap();
    let (lo, hi) = range.dim_range(0).unwrap().unwrap();
    let (lo_bound, hi_bound) = range.dim_range_bound(0).unwrap().unwrap();
    assert!(
        lo_bound <= lo && hi <= hi_bound,
        "{lo_bound}..{hi_bound} misses {lo}..{hi}"
    );
    let empty = ctx.set("{ [q] : q > 3 and q < 2 }").unwrap();
    assert_eq!(empty.dim_range_bound(0).unwrap(), None);
    let unbounded = ctx.set("{ [q] : q > 3 }").unwrap();
    assert_eq!(unbounded.dim_range_bound(0).unwrap(), None);
}

#[test]
fn a_sampled_input_is_one_point_of_the_domain() {
    let ctx = Ctx::new();
    let map = ctx
        .map("{ [t, u] -> [q] : 3 <= t <= 40 and 0 <= u < t and t + u <= q <= t + u + 3 and (t + q) mod 5 = 2 }")
        .unwrap();
    let input = map
        .sample_input()
        .unwrap()
        .expect("a non-empty map has an input");
    assert_eq!(input.count(&[]).unwrap(), 1);
    assert!(
        input
            .subtract(&map.domain().unwrap())
            .unwrap()
            .is_empty()
            .unwrap()
    );
    let empty = ctx
        .map("{ [t] -> [q] : 0 <= t <= 4 and q > t and q < t }")
        .unwrap();
    assert!(empty.sample_input().unwrap().is_none());
}

#[test]
fn output_strides_name_each_parts_stride_once() {
    let ctx = Ctx::new();
    // Every 25th tag on either side of t (a column walk's blocks in one set), every 3rd tag of a
    // row, and an interval (stride 1, not listed).
    let map = ctx
        .map(
            "{ [t] -> [q] : 0 <= t <= 40 and ((exists k : q = t + 25k and 1 <= k <= 6) or \
             (exists k : q = t - 25k and 1 <= k <= 6) or (exists k : q = 3k and 0 <= k <= t) or \
             (t + 100 <= q <= t + 104)) }",
        )
        .unwrap();
    assert_eq!(map.output_strides().unwrap(), vec![3, 25]);
}
