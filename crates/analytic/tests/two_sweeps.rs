//! Two sweeps over one array. The skip of the conflict sets at a level where no set receives
//! more than `ways` distinct lines: taken exactly when the lines fit, and the counts equal a
//! brute-force LRU walk on both sides of the boundary. And `Model::evaluate_with`: above four
//! ways the pieces' third counts are detail, counted only when asked for, and the misses are the
//! same either way.

use loopscope_analytic::{
    Affine, Array, Cache, Detail, Loop, Model, Node, Program, Reference, ReferenceMisses, Statement,
};
use loopscope_polyhedral::Ctx;

mod common;
use common::brute_force;

/// Two sweeps over `elements` doubles of `A` (32-byte lines, so 4 elements a line).
fn two_sweeps(elements: i64) -> Program {
    let sweep = |var: &str, is_write| {
        Node::Loop(Loop {
            var: var.into(),
            lower: Affine::constant(0),
            upper_inclusive: Affine::constant(elements - 1),
            step: 1,
            body: vec![Node::Statement(Statement {
                name: format!("S{var}"),
                refs: vec![Reference {
                    array: "A".into(),
                    subscripts: vec![Affine::var(var)],
                    is_write,
                }],
            })],
        })
    };
    Program {
        params: Vec::new(),
        arrays: vec![Array {
            name: "A".into(),
            base_bytes: 0,
            element_bytes: 8,
            extents: vec![elements],
        }],
        body: vec![sweep("i", true), sweep("j", false)],
    }
}

const CACHE: Cache = Cache {
    ways: 2,
    line_bytes: 32,
    sets: 4,
};

fn model_and_truth(elements: i64) -> (String, Vec<(i128, i128, usize)>) {
    let program = two_sweeps(elements);
    let ctx = Ctx::new();
    let model = Model::new(&ctx, &program, CACHE).unwrap();
    let got = model.evaluate(&[]).unwrap();
    let want = brute_force(&program, CACHE, &[]);
    for (n, r) in got.iter().enumerate() {
        assert_eq!(
            (r.compulsory, r.conflict),
            (want.compulsory[n], want.conflict[n]),
            "{} with {elements} elements",
            r.position
        );
    }
    let detail = got
        .iter()
        .map(|r| {
            let third = r.pieces.iter().map(|p| p.evicted_by.len()).sum();
            (r.compulsory, r.conflict, third)
        })
        .collect();
    (model.explain(), detail)
}

#[test]
fn eight_lines_in_four_two_way_sets_skip_the_conflict_sets() {
    let (explain, detail) = model_and_truth(32);
    assert!(
        explain.starts_with("no set receives more than 2 distinct lines (2 ways)"),
        "{explain}"
    );
    // 8 compulsory misses in the first sweep, every access of the second hits, and no third
    // count was built.
    assert_eq!(detail, vec![(8, 0, 0), (0, 0, 0)]);
}

#[test]
fn a_ninth_line_builds_them_and_finds_the_conflicts() {
    let (explain, detail) = model_and_truth(36);
    assert!(!explain.contains("no conflict sets built"), "{explain}");
    // Set 0 holds lines 0, 4 and 8: the second sweep misses them by conflict.
    assert_eq!(detail[0].0, 9);
    assert!(detail[1].1 > 0, "{detail:?}");
    assert!(detail[1].2 > 0, "{detail:?}");
}

#[test]
fn third_counts_above_four_ways_only_when_asked_for() {
    let cache = Cache {
        ways: 5,
        line_bytes: 32,
        sets: 1,
    };
    let ctx = Ctx::new();
    // 10 lines of 32 bytes through one 5-way set.
    let model = Model::new(&ctx, &two_sweeps(40), cache).unwrap();
    let full = model.evaluate(&[]).unwrap();
    let lean = model.evaluate_with(&[], Detail::default()).unwrap();
    let misses = |r: &[ReferenceMisses]| {
        r.iter()
            .map(|r| (r.compulsory, r.conflict))
            .collect::<Vec<_>>()
    };
    // The second sweep finds none of its 10 lines: the last 5 of the first evicted the rest,
    // and each line it brings back evicts one it needs later.
    assert_eq!(misses(&full), vec![(10, 0), (0, 10)]);
    assert_eq!(misses(&lean), misses(&full));
    let thirds = |r: &[ReferenceMisses]| {
        r.iter()
            .flat_map(|r| &r.pieces)
            .map(|p| p.evicted_by.len())
            .sum::<usize>()
    };
    assert!(thirds(&full) > 0);
    assert_eq!(thirds(&lean), 0);
}
