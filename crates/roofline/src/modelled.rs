//! A kernel file's per-level traffic from the analytic cache model of spec 000, without
//! running or simulating the loops.
//!
//! The roofline times the steady state of repeated runs (what `--measure` times), while spec
//! 000 counts one cold run. A warm run repeats the cold run's conflict misses exactly (an access
//! whose line was used earlier in the same run sees the same accesses in between in every run);
//! only the cold run's compulsory misses may turn into hits, when the line survived from the
//! previous run. They are taken to recur when the kernel's footprint (its distinct lines, the
//! compulsory misses) exceeds the level's lines, and to hit otherwise: the LRU answer when the
//! lines spread evenly over the sets. (Wrapping the kernel in a repetition loop and subtracting
//! one run from two is exact, but made the sets ten to a hundred times slower to build and
//! count.) Each
//! level is modelled as a cache of its own geometry seeing every access (spec 000 models one
//! cache); in a real hierarchy an outer level sees only the inner level's misses, which under
//! LRU with equal lines and a larger outer level changes the counts little (`--traffic sim` is
//! the exact answer). The model's counts come from `loopscope-analytic`'s level processes (one
//! that overruns its time limit can be stopped; [`crate::run_roofline`] starts them); this
//! function turns the counts into bytes.
//!
//! Write-backs are not part of spec 000: a line is counted as written back once per miss when
//! its array is stored to anywhere in the kernel. That is exact when every line of a written
//! array that comes in is also written before it leaves (stores to `a[i]`, updates `c[i][j] +=`),
//! and counts too many write-backs for an array read widely but written in few places.

use loopscope_analytic::ReferenceMisses;
use loopscope_cache::{LevelConfig, Replacement};
use loopscope_kernel::{AccessKind, EXPLICIT_STEPS, Kernel, Layout, Program};

use crate::kernel_file::{Boundary, assemble, kernel_error, outer_level};
use crate::{Level, RooflineError, Traffic};

/// What the model gave for one cache level.
#[derive(Debug, Clone)]
pub struct ModelledLevel {
    /// The cache level's name (`L1`, ...).
    pub name: String,
    /// The level whose traffic this level's misses are: the next one out.
    pub outer: Level,
    /// Bytes crossing the level's outer boundary in one warm run (fills and write-backs), or
    /// why the level could not be modelled.
    pub bytes: Result<u64, String>,
    /// Of [`Self::bytes`], the write-backs (0 when the level could not be modelled).
    pub written_bytes: u64,
    /// Seconds the model took for this level.
    pub duration_s: f64,
}

/// Steady-state traffic of `kernel` through `levels` (innermost first) from the analytic
/// model's counts of one cold run, `per_level[i]` for `levels[i]` with the seconds it took.
/// Levels without counts are left out of the returned traffic and listed with their reason, so
/// the caller can take them from elsewhere.
pub fn modelled_traffic(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
    levels: &[LevelConfig],
    timed: impl Fn(Level) -> bool,
    per_level: &[(Result<Vec<ReferenceMisses>, String>, f64)],
) -> Result<(Traffic, Vec<ModelledLevel>), RooflineError> {
    check_model_caches(levels)?;
    let program = Program::new(kernel, params, layout).map_err(kernel_error)?;
    let written = written_arrays(kernel);
    let modelled: Vec<ModelledLevel> = levels
        .iter()
        .zip(per_level)
        .enumerate()
        .map(|(index, (config, (refs, duration_s)))| {
            let capacity_lines = config.size_bytes / config.line_bytes.max(1);
            let lines = refs
                .as_ref()
                .map(|refs| warm_run_lines(refs, capacity_lines, kernel, &written))
                .map_err(String::clone);
            ModelledLevel {
                name: config.name.clone(),
                outer: outer_level(levels, index),
                written_bytes: lines
                    .as_ref()
                    .map_or(0, |l| l.written.saturating_mul(config.line_bytes)),
                bytes: lines.map(|l| l.moved.saturating_mul(config.line_bytes)),
                duration_s: *duration_s,
            }
        })
        .collect();
    let boundary: Vec<Boundary> = modelled
        .iter()
        .filter_map(|m| {
            let bytes = *m.bytes.as_ref().ok()?;
            Some(Boundary {
                level: m.outer,
                bytes,
                written_bytes: m.written_bytes,
            })
        })
        .collect();
    let traffic = assemble(kernel, &program, boundary, timed);
    Ok((traffic, modelled))
}

/// Refuses a kernel whose statement executions cannot be counted in bounded time. The model
/// gives misses, but the flops, the accessed bytes and the iterations come from counting each
/// statement's executions, which walks every iteration of a loop that bounds an inner loop (a
/// triangular nest); past [`EXPLICIT_STEPS`] such iterations that walk could take hours, so the
/// kernel is refused up front, before any level is modelled.
pub(crate) fn check_model_work(kernel: &Kernel, params: &[i64]) -> Result<(), RooflineError> {
    let estimate = kernel.estimate_accesses(params).map_err(kernel_error)?;
    if estimate.exact {
        return Ok(());
    }
    Err(RooflineError::Kernel {
        bad_input: true,
        message: format!(
            "{}: counting its statements' executions walks more than {EXPLICIT_STEPS} \
             iterations of loops that bound inner loops (up to {} accesses), past what \
             --traffic model counts; `loopscope misses` counts its misses at any size \
             (see docs/limits.md)",
            kernel.origin, estimate.accesses
        ),
    })
}

/// Refuses levels the modelled traffic would get wrong: spec 000's cache is LRU and
/// write-allocate, and the write-backs assume write-back.
pub fn check_model_caches(levels: &[LevelConfig]) -> Result<(), RooflineError> {
    match levels
        .iter()
        .find(|l| l.replacement != Replacement::Lru || !l.write_allocate || !l.write_back)
    {
        Some(l) => Err(RooflineError::Invalid(format!(
            "level {}: --traffic model covers LRU, write-back, write-allocate caches only \
             (use --traffic sim)",
            l.name
        ))),
        None => Ok(()),
    }
}

/// Per array of the kernel: whether any reference stores to it.
fn written_arrays(kernel: &Kernel) -> Vec<bool> {
    let mut written = vec![false; kernel.arrays.len()];
    for (_, r) in kernel.references() {
        if r.kind == AccessKind::Write {
            written[r.array] = true;
        }
    }
    written
}

/// Lines filled and written back in a warm run: the cold run's conflict misses, and its
/// compulsory ones too when the footprint exceeds the level's `capacity_lines`; each miss of a
/// written array's line counts twice (in, and back out).
fn warm_run_lines(
    refs: &[ReferenceMisses],
    capacity_lines: u64,
    kernel: &Kernel,
    written: &[bool],
) -> WarmLines {
    let count = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
    let footprint_lines = refs
        .iter()
        .map(|r| count(r.compulsory))
        .fold(0, u64::saturating_add);
    let compulsory_recur = footprint_lines > capacity_lines;
    let mut lines = WarmLines::default();
    for r in refs {
        let misses = if compulsory_recur {
            count(r.misses())
        } else {
            count(r.conflict)
        };
        let array = kernel.arrays.iter().position(|a| a.name == r.array);
        let written_back = if array.is_some_and(|i| written.get(i) == Some(&true)) {
            misses
        } else {
            0
        };
        lines.moved = lines
            .moved
            .saturating_add(misses)
            .saturating_add(written_back);
        lines.written = lines.written.saturating_add(written_back);
    }
    lines
}

/// Lines crossing a level's outer boundary in a warm run.
#[derive(Debug, Clone, Copy, Default)]
struct WarmLines {
    /// Fills and write-backs.
    moved: u64,
    /// Of those, write-backs.
    written: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(array: &str, compulsory: i128, conflict: i128) -> ReferenceMisses {
        ReferenceMisses {
            position: "P0".into(),
            statement: "S1".into(),
            array: array.into(),
            is_write: false,
            accesses: 100,
            compulsory,
            conflict,
            pieces: Vec::new(),
            sources: None,
        }
    }

    #[test]
    fn a_triangular_nest_too_large_to_count_is_refused_at_once() {
        let text = "double a[N][N];\nfor (int i = 0; i < N; ++i)\n    \
                    for (int j = 0; j <= i; ++j)\n        a[i][j] = a[i][j] * 2.0;\n";
        let kernel = loopscope_kernel::parse_kernel(text, "tri.c").unwrap();
        assert!(check_model_work(&kernel, &[1000]).is_ok());
        let err = check_model_work(&kernel, &[1 << 40]).unwrap_err();
        assert!(err.is_bad_input());
        assert!(err.to_string().starts_with("tri.c: counting"), "{err}");
        // Rectangular nests are counted by multiplication at any size.
        let text = "double a[N];\nfor (int i = 0; i < N; ++i)\n    a[i] = a[i] * 2.0;\n";
        let kernel = loopscope_kernel::parse_kernel(text, "big.c").unwrap();
        assert!(check_model_work(&kernel, &[1 << 40]).is_ok());
    }

    #[test]
    fn compulsory_misses_recur_only_beyond_the_capacity() {
        let text = "double a[100], b[100];\nfor (int i = 0; i < 100; ++i)\n    b[i] = a[i];\n";
        let kernel = loopscope_kernel::parse_kernel(text, "copy.c").unwrap();
        let written = written_arrays(&kernel);
        assert_eq!(written, [false, true]);
        let refs = [reference("a", 10, 3), reference("b", 6, 1)];
        // 16 distinct lines: in a 16-line level they stay; only conflicts recur.
        let lines = warm_run_lines(&refs, 16, &kernel, &written);
        assert_eq!((lines.moved, lines.written), (3 + 2, 1));
        // In a 15-line level they are all missed again; `b`'s lines also go back out.
        let lines = warm_run_lines(&refs, 15, &kernel, &written);
        assert_eq!((lines.moved, lines.written), (13 + 2 * 7, 7));
    }
}
