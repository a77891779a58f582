//! Times the model on a 2D five-point-like nest (build once, evaluate at several sizes), to show
//! that evaluation cost does not grow with the trip counts.
//! Run: `cargo run --release -p loopscope-analytic --example timing`

use std::time::Instant;

use loopscope_analytic::{Affine, Array, Cache, Loop, Model, Node, Program, Reference, Statement};
use loopscope_polyhedral::Ctx;

fn main() {
    let sub = |v: &str, c: i64| Affine::var(v).plus(c);
    let r = |a: &str, i: i64, j: i64, w| Reference {
        array: a.into(),
        subscripts: vec![sub("i", i), sub("j", j)],
        is_write: w,
    };
    let program = Program {
        params: vec!["N".into()],
        arrays: vec![
            Array {
                name: "a".into(),
                base_bytes: 0,
                element_bytes: 8,
                extents: vec![1 << 20, 1000],
            },
            Array {
                name: "b".into(),
                base_bytes: 8 << 33,
                element_bytes: 8,
                extents: vec![1 << 20, 1000],
            },
        ],
        body: vec![Node::Loop(Loop {
            var: "i".into(),
            lower: Affine::constant(1),
            upper_inclusive: Affine::var("N").plus(-2),
            step: 1,
            body: vec![Node::Loop(Loop {
                var: "j".into(),
                lower: Affine::constant(1),
                upper_inclusive: Affine::constant(998),
                step: 1,
                body: vec![Node::Statement(Statement {
                    name: "S".into(),
                    refs: vec![
                        r("a", -1, 0, false),
                        r("a", 0, 0, false),
                        r("a", 1, 0, false),
                        r("b", 0, 0, true),
                    ],
                })],
            })],
        })],
    };
    let ctx = Ctx::new();
    let cache = Cache {
        ways: 2,
        line_bytes: 64,
        sets: 64,
    };
    let t0 = Instant::now();
    let model = Model::new(&ctx, &program, cache).unwrap();
    println!("build: {:.3} s", t0.elapsed().as_secs_f64());
    for n in [10i64, 1000, 100_000, 10_000_000] {
        let t = Instant::now();
        let res = model.evaluate(&[("N", n)]).unwrap();
        let summary: Vec<String> = res
            .iter()
            .map(|r| {
                format!(
                    "{}:{}/{}/{}",
                    r.position, r.accesses, r.compulsory, r.conflict
                )
            })
            .collect();
        println!(
            "N={n}: evaluate {:.3} s  {}",
            t.elapsed().as_secs_f64(),
            summary.join(" ")
        );
    }
}
