//! References built side by side (`each_reference`) give the same counts as one model of the
//! whole program, in position order, and a failure is reported, not lost. Levels built together
//! (`each_reference_at_levels`, sharing hit sources per line size) give each level's counts
//! alone, and one level's failure leaves the others.

use loopscope_analytic::{
    Affine, AnalyticError, Array, Budget, Cache, Loop, Model, Node, Program, Reference, Statement,
    each_reference, each_reference_at_levels,
};
use loopscope_polyhedral::Ctx;
use std::sync::{Condvar, Mutex};
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

/// Levels of two line sizes, one of them (12 sets of 8 ways) holding both arrays whole, so that
/// it cannot evict, and one (3 sets) whose sets are not a power of two.
const LEVELS: [Cache; 4] = [
    CACHE,
    Cache {
        ways: 8,
        line_bytes: 32,
        sets: 12,
    },
    Cache {
        ways: 1,
        line_bytes: 64,
        sets: 3,
    },
    Cache {
        ways: 2,
        line_bytes: 64,
        sets: 2,
    },
];

/// Runs every level of `LEVELS` together and returns what each level reported, and how often.
fn together(
    threads: usize,
    fail_level: Option<usize>,
) -> Vec<Vec<Result<Vec<loopscope_analytic::ReferenceMisses>, String>>> {
    let reported = Mutex::new(vec![Vec::new(); LEVELS.len()]);
    each_reference_at_levels(
        &sweeps(),
        &LEVELS,
        budget(threads, 60),
        |level, m| match fail_level {
            Some(f) if f == level => Err(AnalyticError::Program(format!("level {level}"))),
            _ => m.evaluate(&[]),
        },
        |level, result| {
            reported.lock().unwrap()[level]
                .push(result.map(|r| r.concat()).map_err(|e| e.to_string()))
        },
    )
    .unwrap();
    reported.into_inner().unwrap()
}

#[test]
fn levels_built_together_count_as_each_level_alone() {
    let program = sweeps();
    let alone: Vec<_> = LEVELS
        .iter()
        .map(|&cache| {
            let ctx = Ctx::new();
            Model::new(&ctx, &program, cache)
                .unwrap()
                .evaluate(&[])
                .unwrap()
        })
        .collect();
    assert!(alone[0].iter().any(|r| r.conflict > 0), "{:?}", alone[0]);
    assert!(alone[1].iter().all(|r| r.conflict == 0), "{:?}", alone[1]);
    assert!(alone[2].iter().any(|r| r.conflict > 0), "{:?}", alone[2]);
    for threads in [1, 2, 5] {
        let reported = together(threads, None);
        for (level, got) in reported.into_iter().enumerate() {
            assert_eq!(
                got,
                vec![Ok(alone[level].clone())],
                "{threads} threads, level {level}"
            );
        }
    }
}

#[test]
fn a_failing_level_leaves_the_others() {
    for threads in [1, 2] {
        let reported = together(threads, Some(2));
        for (level, got) in reported.iter().enumerate() {
            assert_eq!(got.len(), 1, "level {level} reported once: {got:?}");
            assert_eq!(got[0].is_err(), level == 2, "level {level}: {got:?}");
        }
        assert_eq!(reported[2][0], Err("level 2".to_string()));
    }
}

/// The levels that cannot evict are reported before any level that can is built, and the
/// levels that can go largest first: a level whose work waits for those (as one slow to build
/// would hold its thread) does not hold them back.
#[test]
fn cheap_and_large_levels_do_not_wait_for_small_ones() {
    // LEVELS[1] cannot evict; LEVELS[3] (2 × 2 lines) is built before LEVELS[2] (3 × 1).
    let reported = Mutex::new([false; 4]);
    let changed = Condvar::new();
    for threads in [1, 2] {
        *reported.lock().unwrap() = [false; 4];
        each_reference_at_levels(
            &sweeps(),
            &LEVELS,
            budget(threads, 60),
            |level, m| {
                if level == 2 {
                    let (done, timeout) = changed
                        .wait_timeout_while(
                            reported.lock().unwrap(),
                            Duration::from_secs(20),
                            |r| !(r[0] && r[1] && r[3]),
                        )
                        .unwrap();
                    assert!(!timeout.timed_out(), "{threads} threads: {:?}", *done);
                }
                m.evaluate(&[])
            },
            |level, result| {
                assert!(result.is_ok(), "level {level}: {:?}", result.err());
                reported.lock().unwrap()[level] = true;
                changed.notify_all();
            },
        )
        .unwrap();
        assert_eq!(*reported.lock().unwrap(), [true; 4]);
    }
}
