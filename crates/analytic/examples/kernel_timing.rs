//! Times the model on a kernel file at one cache geometry.
//! Run: `cargo run --release -p loopscope-analytic --example kernel_timing -- FILE WAYS SETS LINE NAME=VALUE...`

use std::time::Instant;

use loopscope_analytic::{Cache, Model, program_from_kernel};
use loopscope_kernel::parse_kernel;
use loopscope_polyhedral::Ctx;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).unwrap();
    let kernel = parse_kernel(&text, &args[1]).unwrap();
    let cache = Cache {
        ways: args[2].parse().unwrap(),
        sets: args[3].parse().unwrap(),
        line_bytes: args[4].parse().unwrap(),
    };
    let values: Vec<(String, i64)> = args[5..]
        .iter()
        .map(|d| {
            let (n, v) = d.split_once('=').unwrap();
            (n.to_string(), v.parse().unwrap())
        })
        .collect();
    let params = kernel.param_values(&values).unwrap();
    let layout = kernel.layout(&params, &[]).unwrap();
    let program = program_from_kernel(&kernel, &params, &layout).unwrap();
    let ctx = match std::env::var("LIMIT") {
        Ok(l) => Ctx::with_max_operations(l.parse().unwrap()),
        Err(_) => Ctx::new(),
    };
    let t0 = Instant::now();
    let model = match Model::new(&ctx, &program, cache) {
        Ok(m) => m,
        Err(e) => {
            println!("error after {:.3} s: {e}", t0.elapsed().as_secs_f64());
            return;
        }
    };
    println!("build: {:.3} s", t0.elapsed().as_secs_f64());
    let t = Instant::now();
    for r in model.evaluate(&[]).unwrap() {
        println!(
            "{} {}: {} accesses, {} compulsory, {} conflict",
            r.position, r.array, r.accesses, r.compulsory, r.conflict
        );
    }
    println!("evaluate: {:.3} s", t.elapsed().as_secs_f64());
}
