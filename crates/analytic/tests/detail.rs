//! `Model::evaluate_with`: above four ways the pieces' third counts are detail, counted only
//! when asked for, and the misses are the same either way.

use loopscope_analytic::{
    Affine, Array, Cache, Detail, Loop, Model, Node, Program, Reference, Statement,
};
use loopscope_polyhedral::Ctx;

/// Two sweeps over 40 doubles: 10 lines of 32 bytes through one 5-way set.
fn two_sweeps() -> Program {
    let sweep = |var: &str| {
        Node::Loop(Loop {
            var: var.into(),
            lower: Affine::constant(0),
            upper_inclusive: Affine::constant(39),
            step: 1,
            body: vec![Node::Statement(Statement {
                name: format!("S{var}"),
                refs: vec![Reference {
                    array: "A".into(),
                    subscripts: vec![Affine::var(var)],
                    is_write: false,
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
            extents: vec![40],
        }],
        body: vec![sweep("i"), sweep("j")],
    }
}

#[test]
fn third_counts_above_four_ways_only_when_asked_for() {
    let cache = Cache {
        ways: 5,
        line_bytes: 32,
        sets: 1,
    };
    let ctx = Ctx::new();
    let model = Model::new(&ctx, &two_sweeps(), cache).unwrap();
    let full = model.evaluate(&[]).unwrap();
    let lean = model.evaluate_with(&[], Detail::default()).unwrap();
    let misses = |r: &[loopscope_analytic::ReferenceMisses]| {
        r.iter()
            .map(|r| (r.compulsory, r.conflict))
            .collect::<Vec<_>>()
    };
    // The second sweep finds none of its 10 lines: the last 5 of the first evicted the rest,
    // and each line it brings back evicts one it needs later.
    assert_eq!(misses(&full), vec![(10, 0), (0, 10)]);
    assert_eq!(misses(&lean), misses(&full));
    let thirds = |r: &[loopscope_analytic::ReferenceMisses]| {
        r.iter()
            .flat_map(|r| &r.pieces)
            .map(|p| p.evicted_by.len())
            .sum::<usize>()
    };
    assert!(thirds(&full) > 0);
    assert_eq!(thirds(&lean), 0);
}
