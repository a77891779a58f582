//! One level's references spread over threads. Each reference's sets are built independently
//! of the others' (spec 000 analyses one target at a time), so the work splits cleanly: every
//! thread takes the next reference not yet taken, builds its sets in an isl context of its own
//! (a context and its sets must stay on one thread) and hands the model to the caller's work.
//! Taking one reference at a time balances references whose costs differ by 100× (the 3D
//! stencil's seven references at L1 take 0.003–0.9 s).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loopscope_polyhedral::{Ctx, isl_thread};

use crate::AnalyticError;
use crate::evaluate::Model;
use crate::pressure::most_lines_in_a_set;
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
/// no thread takes another. Whether the level can evict at all (the most lines one cache set
/// receives) is found once for all references.
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
    cache.check()?;
    let positions = program.positions()?;
    // A property of the level, not of a reference: found once, not once per reference.
    let most_lines = most_lines_in_a_set(
        &Ctx::with_max_operations(budget.max_operations),
        program,
        &positions,
        cache,
    )?;
    let deadline = (Instant::now() + budget.time_limit, budget.time_limit);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let target = next.fetch_add(1, Ordering::Relaxed);
            if target >= positions.len() {
                break;
            }
            let ctx = Ctx::with_max_operations(budget.max_operations);
            let result = Model::build_knowing(
                &ctx,
                program,
                positions.clone(),
                cache,
                &[target],
                Some(deadline),
                most_lines,
            )
            .and_then(|model| work(&model));
            failed.fetch_or(result.is_err(), Ordering::Relaxed);
            done.push((target, result));
        }
        done
    };
    let mut done = std::thread::scope(|scope| {
        // A helper the system refuses leaves its references to the others, this thread's too.
        let helpers: Vec<_> = (1..budget.threads.clamp(1, positions.len().max(1)))
            .filter_map(|_| isl_thread().spawn_scoped(scope, worker).ok())
            .collect();
        let mut done = worker();
        for helper in helpers {
            // A helper that panicked carries the panic on: no reference's result is lost silently.
            done.extend(
                helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        done
    });
    // Position order; a reference not taken is one after a failure, whose error comes first.
    done.sort_by_key(|(target, _)| *target);
    done.into_iter().map(|(_, result)| result).collect()
}
