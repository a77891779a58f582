//! `Map::inputs_with_at_least`: the inputs with at least `d` outputs, from the sizes of
//! intervals, lattices and intervals with holes, against a count of each input's outputs by
//! enumeration.

use loopscope_polyhedral::Ctx;

/// Inputs `0 ≤ t ≤ 40` of `map` with at least `d` outputs, by walking the outputs.
fn by_walking(ctx: &Ctx, map: &str, d: usize) -> i128 {
    (0..=40)
        .filter(|t| {
            let image = ctx
                .set(&format!("{{ [q] : exists t : t = {t} and ({map}) }}"))
                .unwrap();
            usize::try_from(image.count(&[]).unwrap()).unwrap() >= d
        })
        .count() as i128
}

fn check(constraints: &str) {
    let ctx = Ctx::new();
    let map = ctx
        .map(&format!(
            "{{ [t] -> [q] : 0 <= t <= 40 and ({constraints}) }}"
        ))
        .unwrap();
    let sets = map
        .inputs_with_at_least(&[1, 2, 3, 4, 5, 6])
        .unwrap()
        .expect("every part has a known size");
    for (i, set) in sets.iter().enumerate() {
        assert_eq!(
            set.count(&[]).unwrap(),
            by_walking(&ctx, constraints, i + 1),
            "at least {} outputs of {constraints}",
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
