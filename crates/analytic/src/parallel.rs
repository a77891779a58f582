//! The references of one or more levels spread over threads. Each reference's sets are built
//! independently of the others' (spec 000 analyses one target at a time), so the work splits
//! cleanly: every thread takes the next reference not yet taken, builds its sets in an isl
//! context of its own (a context and its sets must stay on one thread), with the hit sources
//! built once per line size, and hands each level's model to the caller's work. Taking one
//! reference at a time balances references whose costs differ by 30× (the 3D stencil's seven
//! references at 80 × 300 take 0.03–0.63 s for three levels).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loopscope_polyhedral::{Ctx, isl_thread};

use crate::AnalyticError;
use crate::evaluate::{Model, evicts};
use crate::pipeline::{LineSets, build_lines};
use crate::pressure::most_lines_in_a_set;
use crate::program::{Cache, Position, Program};

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
    let outcome = Mutex::new(None);
    each_reference_at_levels(
        program,
        &[cache],
        budget,
        |_, model| work(model),
        |_, result| *lock(&outcome) = Some(result),
    )?;
    lock(&outcome).take().unwrap_or_else(|| {
        Err(AnalyticError::Program(
            "internal: the level was not reported".into(),
        ))
    })
}

/// [`each_reference`] at several levels at once: `work(level, model)` for every level (an index
/// into `caches`) and reference, and `level_done(level, results)` once per level as soon as
/// every reference has it (in position order; if one failed, the first error in position order
/// among the references built, as a failed level skips the references not yet begun). Levels with the same line size share each reference's hit sources and their
/// regions, which depend on the line alone (the pipeline's `LineSets`: built over the line,
/// they cost the 3D stencil at 80 × 300 0.12 s for its seven references, against 0.37 s per
/// level over tag and set). Each level of a reference starts with the full operation budget.
///
/// In rounds, so that a level slow to build holds back as little as possible: first every
/// reference at the levels that cannot evict (little more than the shared sets), then every
/// reference at each other level, the largest cache first. A thread keeps the shared sets of the
/// references it built (they live in its isl context) and takes those references first in
/// each round; a thread left without any takes over references not yet begun, building their
/// shared sets again. So the 480 MiB L3 of matrix multiply at N = 5200 is modelled in 0.04 s
/// while its L1 and L2 run into the time limit, and one reference's levels run on both cores
/// (the 3D stencil at 80 × 300 0.90 s → 0.83 s). Fails only when a cache is invalid or the
/// program has no positions; a level's own failure goes to `level_done`.
pub fn each_reference_at_levels<T, F, D>(
    program: &Program,
    caches: &[Cache],
    budget: Budget,
    work: F,
    level_done: D,
) -> Result<(), AnalyticError>
where
    T: Send,
    F: Fn(usize, &Model<'_>) -> Result<T, AnalyticError> + Sync,
    D: Fn(usize, Result<Vec<T>, AnalyticError>) + Sync,
{
    for cache in caches {
        cache.check()?;
    }
    let positions = program.positions()?;
    let run = Run {
        levels: Levels::new(program, &positions, caches, budget),
        program,
        positions,
        caches,
        deadline: (Instant::now() + budget.time_limit, budget.time_limit),
        work,
        level_done,
    };
    let next = AtomicUsize::new(0);
    let n = run.positions.len();
    // Per level that can evict, per reference: whether a thread has begun it.
    let begun: Vec<Vec<AtomicBool>> = run
        .levels
        .evicting
        .iter()
        .map(|_| (0..n).map(|_| AtomicBool::new(false)).collect())
        .collect();
    let worker = || {
        // One context for every reference the thread builds, so that the shared sets it builds
        // can serve each later round.
        let ctx = Ctx::with_max_operations(budget.max_operations);
        let mut kept: Vec<Vec<Option<Lines<'_>>>> = (0..n)
            .map(|_| run.levels.line_sizes.iter().map(|_| None).collect())
            .collect();
        loop {
            let target = next.fetch_add(1, Ordering::Relaxed);
            if target >= n || run.levels.all_failed() {
                break;
            }
            run.keep_lines(&ctx, target, &mut kept[target], None);
            run.build(&ctx, &run.levels.cheap, target, &mut kept[target]);
        }
        for (round, &level) in run.levels.evicting.iter().enumerate() {
            // This thread's own references first; then, the references taken last being the
            // likeliest not yet begun by their thread, any other from the end.
            let own: Vec<usize> = (0..n)
                .filter(|&t| kept[t].iter().any(Option::is_some))
                .collect();
            for target in own.into_iter().chain((0..n).rev()) {
                if !begun[round][target].swap(true, Ordering::Relaxed) {
                    run.build(&ctx, &[level], target, &mut kept[target]);
                }
            }
        }
    };
    std::thread::scope(|scope| {
        // A helper the system refuses leaves its references to the others, this thread's too.
        let helpers: Vec<_> = (1..budget.threads.clamp(1, run.positions.len().max(1)))
            .filter_map(|_| isl_thread().spawn_scoped(scope, worker).ok())
            .collect();
        worker();
        for helper in helpers {
            // A helper that panicked carries the panic on: no reference's result is lost silently.
            helper
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
    });
    run.levels.report_unfinished(&run.level_done);
    Ok(())
}

/// What every thread of [`each_reference_at_levels`] shares.
struct Run<'a, T, F, D> {
    program: &'a Program,
    positions: Vec<Position>,
    caches: &'a [Cache],
    deadline: (Instant, Duration),
    levels: Levels<T>,
    work: F,
    level_done: D,
}

impl<T, F, D> Run<'_, T, F, D>
where
    F: Fn(usize, &Model<'_>) -> Result<T, AnalyticError>,
    D: Fn(usize, Result<Vec<T>, AnalyticError>),
{
    /// Builds the shared sets of `target` for every line size with a level left (`only`: for
    /// that one).
    fn keep_lines<'c>(
        &self,
        ctx: &'c Ctx,
        target: usize,
        kept: &mut [Option<Lines<'c>>],
        only: Option<usize>,
    ) {
        for (size, &line_bytes) in self.levels.line_sizes.iter().enumerate() {
            let wanted = only.is_none_or(|o| o == size)
                && (0..self.caches.len())
                    .any(|l| self.caches[l].line_bytes == line_bytes && !self.levels.failed(l));
            if wanted && kept[size].is_none() {
                ctx.reset_operations();
                kept[size] = Some(build_lines(
                    ctx,
                    self.program,
                    &self.positions,
                    line_bytes,
                    target,
                    Some(self.deadline),
                ));
            }
        }
    }

    /// Builds `target` at each of `levels` from its shared sets (built first where this thread
    /// has none), and records the results.
    fn build<'c>(
        &self,
        ctx: &'c Ctx,
        levels: &[usize],
        target: usize,
        kept: &mut [Option<Lines<'c>>],
    ) {
        for &l in levels {
            let result = if self.levels.failed(l) {
                None
            } else {
                let size = self.levels.line_size_of(self.caches[l]);
                self.keep_lines(ctx, target, kept, Some(size));
                match &kept[size] {
                    None => None,
                    Some(Err(e)) => Some(Err(e.clone())),
                    Some(Ok(lines)) => Some(self.level(ctx, l, lines)),
                }
            };
            self.levels.finish(l, target, result, &self.level_done);
        }
    }

    /// The work of one level of the reference of `lines`.
    fn level(&self, ctx: &Ctx, level: usize, lines: &LineSets<'_>) -> Result<T, AnalyticError> {
        ctx.reset_operations();
        let model = Model::from_lines(
            ctx,
            self.program,
            self.positions.clone(),
            self.caches[level],
            lines,
            Some(self.deadline),
            self.levels.most_lines[level],
        )?;
        (self.work)(level, &model)
    }
}

/// A reference's shared sets for one line size, or why they could not be built.
type Lines<'c> = Result<LineSets<'c>, AnalyticError>;

/// What [`each_reference_at_levels`] knows of its levels while the threads work.
struct Levels<T> {
    /// The distinct line sizes, in the order of the levels.
    line_sizes: Vec<i64>,
    /// The levels that cannot evict, built in the first round.
    cheap: Vec<usize>,
    /// The others, one round each, the largest first (usually the quickest: its sets hold
    /// more, so fewer of the target's pieces see another block come in).
    evicting: Vec<usize>,
    most_lines: Vec<Option<i128>>,
    slots: Vec<Mutex<Slot<T>>>,
}

/// One level's results so far.
struct Slot<T> {
    results: Vec<Option<Result<T, AnalyticError>>>,
    /// Why the level failed before any reference was built (its eviction test).
    setup_error: Option<AnalyticError>,
    /// References not yet finished at this level.
    remaining: usize,
    failed: bool,
    reported: bool,
}

impl<T> Levels<T> {
    fn new(
        program: &Program,
        positions: &[Position],
        caches: &[Cache],
        budget: Budget,
    ) -> Levels<T> {
        // A property of the level, not of a reference: found once, not once per reference, each
        // level with its own operation budget and its own failure.
        let ctx = Ctx::with_max_operations(budget.max_operations);
        let mut setup_errors = Vec::with_capacity(caches.len());
        let mut most_lines = Vec::with_capacity(caches.len());
        for &cache in caches {
            ctx.reset_operations();
            match most_lines_in_a_set(&ctx, program, positions, cache) {
                Ok(most) => {
                    most_lines.push(most);
                    setup_errors.push(None);
                }
                Err(e) => {
                    most_lines.push(None);
                    setup_errors.push(Some(e));
                }
            }
        }
        let mut line_sizes = Vec::new();
        for cache in caches {
            if !line_sizes.contains(&cache.line_bytes) {
                line_sizes.push(cache.line_bytes);
            }
        }
        let (mut evicting, cheap): (Vec<usize>, Vec<usize>) =
            (0..caches.len()).partition(|&l| evicts(most_lines[l], caches[l]));
        evicting.sort_by_key(|&l| {
            std::cmp::Reverse(i128::from(caches[l].sets) * i128::from(caches[l].ways))
        });
        let slots = setup_errors
            .into_iter()
            .map(|setup_error| {
                Mutex::new(Slot {
                    results: (0..positions.len()).map(|_| None).collect(),
                    remaining: positions.len(),
                    failed: setup_error.is_some(),
                    setup_error,
                    reported: false,
                })
            })
            .collect();
        Levels {
            line_sizes,
            cheap,
            evicting,
            most_lines,
            slots,
        }
    }

    /// The index in `line_sizes` of `cache`'s line size.
    fn line_size_of(&self, cache: Cache) -> usize {
        self.line_sizes
            .iter()
            .position(|&b| b == cache.line_bytes)
            .unwrap_or(0)
    }

    fn failed(&self, level: usize) -> bool {
        lock(&self.slots[level]).failed
    }

    fn all_failed(&self) -> bool {
        (0..self.slots.len()).all(|l| self.failed(l))
    }

    /// Records one reference's result at one level (`None`: skipped after the level failed)
    /// and reports the level once every reference has finished it.
    fn finish<D>(
        &self,
        level: usize,
        target: usize,
        result: Option<Result<T, AnalyticError>>,
        level_done: &D,
    ) where
        D: Fn(usize, Result<Vec<T>, AnalyticError>),
    {
        let mut slot = lock(&self.slots[level]);
        slot.failed |= matches!(result, Some(Err(_)));
        slot.results[target] = result;
        slot.remaining -= 1;
        if slot.remaining == 0 {
            slot.report(level, level_done);
        }
    }

    /// Reports the levels with references no thread took (every level had failed by then, so
    /// each has its error).
    fn report_unfinished<D>(&self, level_done: &D)
    where
        D: Fn(usize, Result<Vec<T>, AnalyticError>),
    {
        for (level, slot) in self.slots.iter().enumerate() {
            lock(slot).report(level, level_done);
        }
    }
}

impl<T> Slot<T> {
    /// Gives the level's results to `level_done`, once: every reference's in position order,
    /// or the first error in position order.
    fn report<D>(&mut self, level: usize, level_done: &D)
    where
        D: Fn(usize, Result<Vec<T>, AnalyticError>),
    {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        let mut results = Vec::with_capacity(self.results.len());
        let mut error = self.setup_error.take();
        for result in self.results.drain(..).flatten() {
            match result {
                Ok(r) => results.push(r),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        level_done(
            level,
            match error {
                Some(e) => Err(e),
                None => Ok(results),
            },
        );
    }
}

/// A lock that a panicked holder does not poison for the others: the panic is carried on by
/// the scope that joins its thread.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
