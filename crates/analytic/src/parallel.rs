//! One level's references spread over threads. Each reference's sets are built independently
//! of the others' (spec 000 analyses one target at a time), so the work splits cleanly: every
//! thread takes the next reference not yet taken, builds its sets in an isl context of its own
//! (a context and its sets must stay on one thread) and hands the model to the caller's work.
//! Taking one reference at a time balances references whose costs differ by 100× (the 3D
//! stencil's seven references at L1 take 0.003–0.9 s).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loopscope_polyhedral::Ctx;

use crate::AnalyticError;
use crate::evaluate::Model;
use crate::program::{Cache, Program};

/// How much one level may cost.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// isl's elementary operations, per reference (each has its own context).
    pub max_operations: u64,
    /// Wall-clock time for building every reference's sets, from the call on.
    pub time_limit: Duration,
    /// Threads to use (at least one).
    pub threads: usize,
}

/// Builds the model of each reference of `program` for `cache` alone and returns `work` of it,
/// in position order. The first error in position order is returned; once one reference fails,
/// no thread takes another.
pub fn each_reference<T, F>(
    program: &Program,
    cache: Cache,
    budget: Budget,
    work: F,
) -> Result<Vec<T>, AnalyticError>
where
    T: Send,
    F: Fn(&Model<'_>) -> Result<T, AnalyticError> + Sync,
{
    let references = program.positions()?.len();
    let deadline = (Instant::now() + budget.time_limit, budget.time_limit);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<T, AnalyticError>>>> =
        Mutex::new((0..references).map(|_| None).collect());
    let worker = || {
        while !failed.load(Ordering::Relaxed) {
            let target = next.fetch_add(1, Ordering::Relaxed);
            if target >= references {
                break;
            }
            let ctx = Ctx::with_max_operations(budget.max_operations);
            let result = Model::build(&ctx, program, cache, &[target], Some(deadline))
                .and_then(|model| work(&model));
            failed.fetch_or(result.is_err(), Ordering::Relaxed);
            // A poisoned lock only means another worker panicked; its slot stays empty.
            if let Ok(mut slots) = results.lock() {
                slots[target] = Some(result);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..budget.threads.clamp(1, references.max(1)) {
            scope.spawn(worker);
        }
        worker();
    });
    let slots = results
        .into_inner()
        .map_err(|_| AnalyticError::Program("internal: a model thread panicked".into()))?;
    // Slots left empty were not taken because some reference failed: its error is returned.
    let mut out = Vec::with_capacity(references);
    let mut first_error = None;
    for slot in slots {
        match slot {
            Some(Ok(value)) => out.push(value),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    match first_error {
        Some(e) => Err(e),
        None if out.len() < references => Err(AnalyticError::Program(
            "internal: a model thread panicked".into(),
        )),
        None => Ok(out),
    }
}
