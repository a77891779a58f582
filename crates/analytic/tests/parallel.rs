//! References built side by side (`each_reference`) give the same counts as one model of the
//! whole program, in position order, and a failure is reported, not lost.

use loopscope_analytic::{
    Affine, AnalyticError, Array, Budget, Cache, Loop, Model, Node, Program, Reference, Statement,
    each_reference,
};
use loopscope_polyhedral::Ctx;
use std::time::Duration;

/// `for t < 3: for i in 1..=38: b[i] = a[i-1] + a[i+1]`, arrays of 40 doubles.
fn sweeps() -> Program {
    let r = |array: &str, offset, is_write| Reference {
        array: array.into(),
        subscripts: vec![Affine::var("i").plus(offset)],
        is_write,
    };
    let inner = Node::Loop(Loop {
        var: "i".into(),
        lower: Affine::constant(1),
        upper_inclusive: Affine::constant(38),
        step: 1,
        body: vec![Node::Statement(Statement {
            name: "S".into(),
            refs: vec![r("a", -1, false), r("a", 1, false), r("b", 0, true)],
        })],
    });
    let array = |name: &str, base| Array {
        name: name.into(),
        base_bytes: base,
        element_bytes: 8,
        extents: vec![40],
    };
    Program {
        params: Vec::new(),
        arrays: vec![array("a", 0), array("b", 320)],
        body: vec![Node::Loop(Loop {
            var: "t".into(),
            lower: Affine::constant(0),
            upper_inclusive: Affine::constant(2),
            step: 1,
            body: vec![inner],
        })],
    }
}

const CACHE: Cache = Cache {
    ways: 2,
    line_bytes: 32,
    sets: 4,
};

fn budget(threads: usize, seconds: u64) -> Budget {
    Budget {
        max_operations: 100_000_000,
        time_limit: Duration::from_secs(seconds),
        threads,
    }
}

#[test]
fn side_by_side_counts_equal_one_models_in_position_order() {
    let program = sweeps();
    let ctx = Ctx::new();
    let whole = Model::new(&ctx, &program, CACHE)
        .unwrap()
        .evaluate(&[])
        .unwrap();
    assert!(whole.iter().any(|r| r.conflict > 0), "{whole:?}");
    for threads in [1, 2, 5] {
        let parts = each_reference(&program, CACHE, budget(threads, 60), |m| m.evaluate(&[]))
            .unwrap()
            .concat();
        assert_eq!(parts, whole, "{threads} threads");
    }
}

#[test]
fn a_reference_that_fails_fails_the_level() {
    let err = each_reference(&sweeps(), CACHE, budget(2, 0), |m| m.evaluate(&[])).unwrap_err();
    assert!(matches!(err, AnalyticError::TimeLimit { .. }), "{err}");
    let err = each_reference(&sweeps(), CACHE, budget(2, 60), |_| {
        Err::<(), _>(AnalyticError::Program("stop".into()))
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        AnalyticError::Program("stop".into()).to_string()
    );
}
