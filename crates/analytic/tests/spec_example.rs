//! The worked example of spec 000 (§4): the ★ row, the whole acceptance table of §4.5, the
//! per-piece third and fourth counts, and the range queries of §4.4.

use loopscope_analytic::{
    Affine, Array, Cache, Loop, Model, Node, Program, Reference, ReferenceMisses, Statement,
};
use loopscope_polyhedral::Ctx;

fn program() -> Program {
    let r = |array: &str, var: &str, is_write| Reference {
        array: array.into(),
        subscripts: vec![Affine::var(var)],
        is_write,
    };
    let lp = |var: &str, n: &str, name: &str, refs| {
        Node::Loop(Loop {
            var: var.into(),
            lower: Affine::constant(0),
            upper_inclusive: Affine::var(n).plus(-1),
            step: 1,
            body: vec![Node::Statement(Statement {
                name: name.into(),
                refs,
            })],
        })
    };
    let array = |name: &str, base| Array {
        name: name.into(),
        base_bytes: base,
        element_bytes: 8,
        extents: vec![100],
    };
    Program {
        params: vec!["X".into(), "Y".into(), "Z".into()],
        arrays: vec![array("A", 0), array("B", 800), array("C", 1600)],
        body: vec![
            lp("i", "X", "S1", vec![r("A", "i", true)]),
            lp("j", "Y", "S2", vec![r("B", "j", true)]),
            lp("k", "Z", "S3", vec![r("A", "k", false), r("C", "k", true)]),
        ],
    }
}

const CACHE: Cache = Cache {
    ways: 2,
    line_bytes: 32,
    sets: 4,
};

/// The spec's names of the hit-source pieces, from the candidates covering each piece:
/// Γ1,1′ = P0 with i = 4q + 3, Γ1,2′ = P0 with i = X − 1, Γ2,1′ = P2′.
fn spec_name(model: &Model<'_>, sources: &[String]) -> &'static str {
    let candidates = model.hit_sources(0);
    let kind = |label: &String| {
        let map = &candidates.iter().find(|(l, _)| l == label).unwrap().1;
        match (label.starts_with("P0"), map.contains("= -1 + X]")) {
            (true, false) => "G11",
            (true, true) => "G12",
            (false, _) => "G21",
        }
    };
    let mut kinds: Vec<&str> = sources.iter().map(kind).collect();
    kinds.sort();
    match kinds.as_slice() {
        ["G11", "G21"] => "C1",
        ["G21"] => "C2",
        ["G12", "G21"] => "C3",
        ["G12"] => "C4",
        ["G11"] => "C5",
        other => panic!("unexpected piece {other:?}"),
    }
}

fn analyse<'c>(ctx: &'c Ctx) -> Model<'c> {
    Model::for_positions(ctx, &program(), CACHE, &[2]).unwrap()
}

fn at(model: &Model<'_>, x: i64, y: i64, z: i64) -> ReferenceMisses {
    model
        .evaluate(&[("X", x), ("Y", y), ("Z", z)])
        .unwrap()
        .remove(0)
}

fn piece_counts(model: &Model<'_>, r: &ReferenceMisses) -> [i128; 5] {
    let mut v = [0; 5];
    for p in &r.pieces {
        let n = spec_name(model, &p.sources);
        v[n[1..].parse::<usize>().unwrap() - 1] += p.executions;
    }
    v
}

#[test]
fn acceptance_table() {
    // X, Y, Z, V_G, V_C1..V_C5, compulsory, conflict (spec §4.5; the first row is ★).
    let table: [[i128; 11]; 20] = [
        [10, 10, 10, 10, 6, 0, 1, 1, 2, 0, 1],
        [10, 10, 6, 6, 4, 0, 0, 0, 2, 0, 0],
        [10, 10, 3, 3, 2, 0, 0, 0, 1, 0, 0],
        [10, 10, 8, 8, 6, 0, 0, 0, 2, 0, 0],
        [10, 10, 9, 9, 6, 0, 0, 1, 2, 0, 1],
        [10, 10, 1, 1, 0, 0, 0, 0, 1, 0, 0],
        [10, 0, 10, 10, 6, 0, 1, 1, 2, 0, 0],
        [10, 40, 10, 10, 6, 0, 1, 1, 2, 0, 3],
        [0, 0, 10, 10, 0, 7, 0, 0, 0, 3, 0],
        [5, 17, 9, 9, 3, 0, 3, 1, 1, 1, 1],
        [19, 0, 17, 17, 12, 0, 0, 1, 4, 0, 1],
        [19, 10, 17, 17, 12, 0, 0, 1, 4, 0, 3],
        [20, 20, 20, 20, 15, 0, 0, 0, 5, 0, 5],
        [13, 29, 40, 40, 9, 18, 3, 1, 3, 6, 4],
        [37, 53, 91, 91, 27, 38, 3, 1, 9, 13, 10],
        [50, 100, 100, 100, 36, 36, 3, 1, 12, 12, 13],
        [64, 64, 64, 64, 48, 0, 0, 0, 16, 0, 16],
        [100, 0, 100, 100, 75, 0, 0, 0, 25, 0, 25],
        [100, 100, 100, 100, 75, 0, 0, 0, 25, 0, 25],
        [100, 100, 50, 50, 37, 0, 0, 0, 13, 0, 13],
    ];
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    for row in table {
        let r = at(&model, row[0] as i64, row[1] as i64, row[2] as i64);
        let got = [r.accesses, r.compulsory, r.conflict];
        assert_eq!(got, [row[3], row[9], row[10]], "row {row:?}");
        assert_eq!(
            piece_counts(&model, &r),
            [row[4], row[5], row[6], row[7], row[8]],
            "row {row:?}"
        );
    }
}

type Combo = (Vec<(String, u32)>, i128);

/// (third per position, fourth per combination) of the piece the spec calls `name`.
fn third_fourth(
    model: &Model<'_>,
    r: &ReferenceMisses,
    name: &str,
) -> (Vec<(String, i128)>, Vec<Combo>) {
    let (mut third, mut fourth) = (Vec::new(), Vec::new());
    for p in r
        .pieces
        .iter()
        .filter(|p| spec_name(model, &p.sources) == name)
    {
        third.extend(p.evicted_by.iter().filter(|(_, v)| *v > 0).cloned());
        fourth.extend(p.still_cached.iter().filter(|(_, v)| *v > 0).cloned());
    }
    (third, fourth)
}

fn named(v: &[(&str, i128)]) -> Vec<(String, i128)> {
    v.iter().map(|(l, n)| (l.to_string(), *n)).collect()
}

#[test]
fn per_piece_third_and_fourth_counts() {
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    // Positions: P0 = A[i], P1 = B[j], P2 = A[k] (P2′ as evictor), P3 = C[k].
    let r = at(&model, 10, 10, 10);
    assert_eq!(
        third_fourth(&model, &r, "C4"),
        (named(&[("P1", 1)]), vec![])
    );
    assert_eq!(
        third_fourth(&model, &r, "C5"),
        (named(&[("P1", 1)]), vec![(vec![("P1".to_string(), 1)], 1)])
    );

    let r = at(&model, 19, 0, 17);
    assert_eq!(
        third_fourth(&model, &r, "C4"),
        (named(&[("P2", 1)]), vec![])
    );
    assert_eq!(
        third_fourth(&model, &r, "C5"),
        (
            named(&[("P0", 1), ("P3", 2)]),
            vec![
                (vec![("P0".to_string(), 1)], 1),
                (vec![("P3".to_string(), 1)], 2)
            ]
        )
    );
    assert_eq!(r.conflict, 1);

    let r = at(&model, 10, 40, 10);
    assert_eq!(
        third_fourth(&model, &r, "C4")
            .0
            .iter()
            .map(|x| x.1)
            .sum::<i128>(),
        1
    );
    assert!(third_fourth(&model, &r, "C4").1.is_empty());
    assert_eq!(
        third_fourth(&model, &r, "C5"),
        (named(&[("P1", 2)]), vec![])
    );
    assert_eq!(r.conflict, 3);

    let r = at(&model, 100, 100, 100);
    assert_eq!(
        third_fourth(&model, &r, "C5"),
        (named(&[("P0", 21), ("P1", 4)]), vec![])
    );
    assert_eq!(r.conflict, 25);
}

#[test]
fn range_queries_by_prefix_difference() {
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    let misses = |z| at(&model, 10, 10, z).misses();
    let r6 = at(&model, 10, 10, 6);
    assert_eq!((r6.compulsory, r6.conflict), (0, 0));
    assert_eq!(misses(8) - misses(3), 0, "k = 3..7");
    assert_eq!(misses(9) - misses(8), 1, "k = 8");
}

#[test]
fn closed_forms_at_large_sizes() {
    // §4.3 closed forms, at sizes a simulation would need seconds for.
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    for (x, z) in [(1_000_003i64, 3_000_000i64), (10_000_000, 10_000_000)] {
        let r = at(&model, x, 7, z);
        let q = |v: i64| v as i128;
        let ceil4 = |v: i64| q((v + 3) / 4);
        assert_eq!(r.accesses, q(z));
        if z >= 4 * ((x + 3) / 4) {
            assert_eq!(r.compulsory, ceil4(z) - ceil4(x));
            let c = piece_counts(&model, &r);
            assert_eq!((c[0], c[4]), (3 * q(x / 4), q(x / 4)));
            assert_eq!(
                (c[3], c[2]),
                (q((x % 4 != 0) as i64), 3 * q((x % 4 != 0) as i64))
            );
        } else {
            assert_eq!(r.compulsory, 0);
        }
    }
}

/// The fit of spec §4.3's closed forms: lines of 4 elements, so periods up to 16 and degree 1.
fn spec_fit() -> loopscope_analytic::FitOptions {
    loopscope_analytic::FitOptions {
        lowest: 0,
        start: 64,
        max_degree: 1,
        max_period: 16,
        highest: None,
    }
}

/// Spec §4.3's closed form in symbolic mode: at X = Y = 10, for Z ≥ 4⌈X/4⌉ = 12 the compulsory
/// misses of A[k] are ⌈Z/4⌉ − ⌈X/4⌉ = ⌈Z/4⌉ − 3, and every count below and on the verified range
/// equals the model's own evaluation (the acceptance table's Z values included).
#[test]
fn closed_form_in_z_at_x_y_10() {
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    let options = spec_fit();
    let formulas = model
        .formulas("Z", &[("X", 10), ("Y", 10)], options)
        .unwrap();
    let a_k = &formulas[0];
    assert_eq!(a_k.position, "P2");
    assert!(a_k.compulsory.holds_from <= 12, "{:?}", a_k.compulsory);
    for z in 12..400i64 {
        let ceil = (z + 3).div_euclid(4);
        assert_eq!(
            a_k.compulsory.at(z).unwrap(),
            i128::from(ceil - 3),
            "Z = {z}"
        );
    }
    for z in [1, 3, 6, 8, 9, 10] {
        let direct = at(&model, 10, 10, z);
        assert_eq!(a_k.compulsory.at(z).unwrap(), direct.compulsory, "Z = {z}");
        assert_eq!(a_k.conflict.at(z).unwrap(), direct.conflict, "Z = {z}");
    }
    assert_eq!(a_k.accesses.quasi_polynomial.render("Z"), "Z");
}

/// Spec §4.3's closed form in two parameters: with X and Z symbolic (Y = 10), A[k]'s
/// compulsory misses are ⌈Z/4⌉ − ⌈X/4⌉ on a chamber that contains Z ≥ 4⌈X/4⌉ (the spec's
/// condition) for 5 ≤ X ≤ 100 (the spec's chamber once the arrays' extents bound X), and the
/// chambers give the model's own count at every point of a grid around them.
#[test]
fn closed_form_in_x_and_z() {
    let ctx = Ctx::new();
    let model = analyse(&ctx);
    let options = spec_fit();
    let (refs, _) = model
        .nested_formulas(&["X", "Z"], &[("Y", 10)], &[options, options])
        .unwrap();
    let a_k = &refs[0];
    // Two chambers: the spec's closed form above Z = 4⌈X/4⌉ − 3 (where it also gives 0), and
    // no compulsory miss below.
    let rendered: Vec<String> = a_k
        .compulsory
        .chambers
        .iter()
        .map(|c| c.value.render(&["X", "Z"]))
        .collect();
    assert_eq!(rendered, ["⌈Z/4⌉ - ⌈X/4⌉", "0"]);
    let spec_chamber = a_k
        .compulsory
        .chambers
        .iter()
        .find(|c| c.value.render(&["X", "Z"]) == "⌈Z/4⌉ - ⌈X/4⌉")
        .expect("the spec's closed form");
    for x in 5..=100 {
        let z = 4 * ((x + 3) / 4);
        assert!(spec_chamber.contains(&[x, z]).unwrap(), "X = {x}, Z = {z}");
    }
    for x in (0..130).step_by(3) {
        for z in (0..300).step_by(7) {
            let direct = at(&model, x, 10, z);
            assert_eq!(
                a_k.compulsory.at(&[x, z]).unwrap(),
                direct.compulsory,
                "({x}, {z})"
            );
            assert_eq!(
                a_k.conflict.at(&[x, z]).unwrap(),
                direct.conflict,
                "({x}, {z})"
            );
        }
    }
}
