//! `loopscope simulate`: a kernel file's or an address trace's accesses through a hierarchy,
//! counted per level and per reference, with the fully associative miss curve on request; and
//! each level alone (the analytic model's assumption), for checking that model.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use loopscope_kernel::{Listener, LoadedKernel, Program, RefLabel};
use serde::Serialize;

use crate::level::SPARSE_MEMORY_CAP_BYTES;
use crate::{
    CacheError, Hierarchy, Inclusion, LevelConfig, MissCurve, MissSplit, parse_trace_line,
};

/// The longest line an address trace may have. A trace is streamed, so its length is not
/// capped; a line is, so that a file without line ends (`/dev/zero`) is refused at once.
pub const TRACE_LINE_CAP_BYTES: u64 = 4096;

/// The most accesses (plus loop iterations) a kernel's simulation may take: about four minutes
/// through two levels at the 45 million accesses per second measured on a 2-core KVM guest
/// (AMD EPYC, `simulate examples/kernels/triad.c -D N=30000000 --cache
/// L1=32K:8:64,L2=1M:16:64` in 2.7 s, release build). Past it a simulation is refused before
/// it starts: the analytic model (`loopscope misses`) counts the same misses at any size.
pub const MAX_SIMULATED_ACCESSES: u64 = 10_000_000_000;

/// Refuses to simulate `runs` executions of the kernel when they would take more than
/// [`MAX_SIMULATED_ACCESSES`] accesses (estimated from the loops' trip counts, not by running
/// them); otherwise returns the accesses of one execution.
pub fn check_simulation_work(
    kernel: &loopscope_kernel::Kernel,
    params: &[i64],
    runs: u32,
) -> Result<u128, CacheError> {
    let estimate = kernel.estimate_accesses(params)?;
    let steps = estimate.steps().saturating_mul(u128::from(runs));
    if steps > u128::from(MAX_SIMULATED_ACCESSES) {
        return Err(CacheError::TooMuchWork {
            origin: kernel.origin.clone(),
            accesses: estimate.accesses.saturating_mul(u128::from(runs)),
            iterations: estimate.iterations.saturating_mul(u128::from(runs)),
            exact: estimate.exact,
            cap: MAX_SIMULATED_ACCESSES,
        });
    }
    Ok(estimate.accesses)
}

/// Refuses a kernel simulation whose sparsely stored levels could take more than
/// [`SPARSE_MEMORY_CAP_BYTES`]: each of `accesses` may touch a new line (a strided subscript
/// does), and each new line may need a new set stored.
pub fn check_sparse_memory(levels: &[LevelConfig], accesses: u128) -> Result<(), CacheError> {
    let mut total = 0u128;
    for level in levels {
        let Some(bytes) = crate::level::sparse_bytes_at_most(level, accesses) else {
            continue;
        };
        total = total.saturating_add(bytes);
        if total > u128::from(SPARSE_MEMORY_CAP_BYTES) {
            return Err(CacheError::Geometry {
                name: level.name.clone(),
                message: format!(
                    "{accesses} accesses could touch as many sets of this level, stored as \
                     touched: up to {} GiB with the levels before it, more than the {} GiB \
                     cap (see docs/limits.md); a level of at most 64 MiB of lines is stored \
                     whole, and `loopscope misses` counts any size",
                    total >> 30,
                    SPARSE_MEMORY_CAP_BYTES >> 30
                ),
            });
        }
    }
    Ok(())
}

/// What to simulate.
#[derive(Debug, Clone, Copy)]
pub enum SimulationInput<'a> {
    /// A kernel file, its `-D` values and its `--base` addresses.
    Kernel {
        /// The kernel file.
        path: &'a Path,
        /// `NAME=VALUE` of its parameters.
        define: &'a [(String, i64)],
        /// Array base addresses, `A=0,B=800`.
        base: Option<&'a str>,
    },
    /// An address trace: one `R|W HEX-ADDRESS SIZE` per line.
    Trace(&'a Path),
}

/// How to simulate.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimulationOptions {
    /// Split misses into compulsory, capacity and conflict.
    pub three_c: bool,
    /// Write dirty lines back at the end.
    pub flush: bool,
    /// Seed of random replacement.
    pub seed: u64,
    /// Also the misses of a fully associative LRU cache of every size.
    pub curve: bool,
}

/// The result of `simulate`, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Simulation {
    /// The kernel file, when a kernel was simulated.
    pub kernel: Option<String>,
    /// The trace file, when a trace was.
    pub trace: Option<String>,
    /// The kernel's parameter values.
    pub params: BTreeMap<String, i64>,
    /// Per level, innermost first.
    pub levels: Vec<SimulatedLevel>,
    /// Traffic to and from memory.
    pub memory: MemoryTraffic,
    /// Per reference and level.
    pub references: Vec<SimulatedReference>,
    /// Accesses simulated (those reaching the first level).
    pub accesses: u64,
    /// Floating-point operations the kernel executes (0 for a trace).
    pub flops: u64,
    /// Misses of a fully associative LRU cache by size, when asked for.
    pub curve: Option<Vec<CurvePoint>>,
    /// Seconds the simulation took, reading the input included.
    pub duration_s: f64,
    /// Simulation speed.
    pub accesses_per_s: f64,
}

/// One level's configuration and counters.
#[derive(Debug, Clone, Serialize)]
pub struct SimulatedLevel {
    /// `L1`, `L2`, …
    pub name: String,
    /// Capacity.
    pub size_bytes: u64,
    /// Line size.
    pub line_bytes: u64,
    /// Associativity.
    pub ways: u64,
    /// Number of sets.
    pub sets: u64,
    /// Replacement policy's name.
    pub replacement: &'static str,
    /// Write-back (else write-through).
    pub write_back: bool,
    /// Write-allocate.
    pub write_allocate: bool,
    /// Inclusion policy's name.
    pub inclusion: &'static str,
    /// Accesses reaching the level.
    pub accesses: u64,
    /// Hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// Compulsory misses, with the 3C split.
    pub compulsory: Option<u64>,
    /// Capacity misses, with the 3C split.
    pub capacity: Option<u64>,
    /// Conflict misses, with the 3C split.
    pub conflict: Option<u64>,
    /// Lines evicted.
    pub evictions: u64,
    /// Dirty lines written to the next level.
    pub writebacks: u64,
    /// Dirty lines received from the level inside.
    pub writebacks_received: u64,
    /// Lines invalidated because an inclusive outer level evicted them.
    pub back_invalidations: u64,
    /// Bytes of lines brought in.
    pub fill_bytes: u64,
    /// Bytes written to the next level.
    pub write_bytes: u64,
}

/// Bytes read from and written to memory.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryTraffic {
    /// Read from memory.
    pub read_bytes: u64,
    /// Written to memory.
    pub write_bytes: u64,
}

/// One reference's counters at one level.
#[derive(Debug, Clone, Serialize)]
pub struct SimulatedReference {
    /// The reference's position among the kernel's (or 0 reads, 1 writes of a trace).
    pub id: usize,
    /// What the reference is.
    #[serde(flatten)]
    pub label: RefLabel,
    /// The level's name.
    pub level: String,
    /// Accesses reaching the level.
    pub accesses: u64,
    /// Hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// Compulsory misses, with the 3C split.
    pub compulsory: Option<u64>,
    /// Capacity misses, with the 3C split.
    pub capacity: Option<u64>,
    /// Conflict misses, with the 3C split.
    pub conflict: Option<u64>,
}

/// Misses of a fully associative LRU cache of one size.
#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    /// The cache's size.
    pub size_bytes: u64,
    /// Its misses.
    pub misses: u64,
}

/// Simulates `input` through `levels` (innermost first). Warnings (unused `-D` values) and
/// progress go to `listener`.
pub fn simulate(
    input: SimulationInput<'_>,
    levels: &[LevelConfig],
    options: SimulationOptions,
    listener: &dyn Listener,
) -> Result<Simulation, CacheError> {
    let first = levels.first().ok_or_else(|| CacheError::Geometry {
        name: "hierarchy".into(),
        message: "no cache level to simulate".into(),
    })?;
    for level in levels {
        level.check_simulable()?;
    }
    let line_shift = first.line_bytes.trailing_zeros();
    let mut curve = options.curve.then(MissCurve::new);
    let start = Instant::now();
    let (sim, labels, kernel, params, flops) = match input {
        SimulationInput::Kernel { path, define, base } => {
            let loaded = LoadedKernel::load(path, define, base, listener)?;
            let mut on_line = |line| curve.as_mut().map_or((), |c| c.access(line));
            let (sim, flops) = run_kernel(&loaded, levels, options, listener, &mut on_line)?;
            let labels = loaded.kernel.reference_labels();
            (
                sim,
                labels,
                Some(loaded.origin.clone()),
                loaded.param_map(),
                flops,
            )
        }
        SimulationInput::Trace(path) => {
            let mut on_line = |line| curve.as_mut().map_or((), |c| c.access(line));
            let sim = run_trace(path, levels, options, listener, line_shift, &mut on_line)?;
            (sim, trace_labels(), None, BTreeMap::new(), 0)
        }
    };
    let duration_s = start.elapsed().as_secs_f64();
    let trace = match input {
        SimulationInput::Trace(path) => Some(path.display().to_string()),
        SimulationInput::Kernel { .. } => None,
    };
    let curve = curve.map(|c| curve_points(&c, first.line_bytes));
    Ok(report(
        &sim, &labels, kernel, trace, params, flops, curve, duration_s, options,
    ))
}

/// The kernel's accesses through a new hierarchy, each line also to `on_line`; and the
/// kernel's FLOPs.
fn run_kernel(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    options: SimulationOptions,
    listener: &dyn Listener,
    on_line: &mut dyn FnMut(u64),
) -> Result<(Hierarchy, u64), CacheError> {
    let kernel = &loaded.kernel;
    let accesses = check_simulation_work(kernel, &loaded.params, 1)?;
    check_sparse_memory(levels, accesses)?;
    let program = Program::new(kernel, &loaded.params, &loaded.layout)?;
    let references = kernel.references().count();
    let mut sim = Hierarchy::new(levels, references, options.three_c, options.seed);
    listener.begin("simulating", program.total_accesses(kernel));
    let line_shift = levels[0].line_bytes.trailing_zeros();
    let mut stream = program.accesses();
    // The bar is redrawn every few million accesses, not per batch.
    const BAR_STEP: u64 = 1 << 22;
    let mut since_bar = 0u64;
    loop {
        let batch = stream.next_batch();
        if batch.is_empty() {
            break;
        }
        sim.access_kernel_batch(batch);
        if options.curve {
            for a in batch {
                on_line(a.addr >> line_shift);
            }
        }
        since_bar += batch.len() as u64;
        if since_bar >= BAR_STEP {
            listener.advance(since_bar);
            since_bar = 0;
        }
    }
    listener.advance(since_bar);
    listener.end();
    if let Some(e) = stream.error() {
        return Err(e.clone().into());
    }
    if options.flush {
        sim.flush();
    }
    let flops = kernel
        .statements
        .iter()
        .zip(program.executions())
        .map(|(s, n)| s.flops.total().saturating_mul(*n))
        .fold(0u64, u64::saturating_add);
    Ok((sim, flops))
}

/// The trace's accesses through a new hierarchy (reads as reference 0, writes as 1), each line
/// also to `on_line`.
fn run_trace(
    path: &Path,
    levels: &[LevelConfig],
    options: SimulationOptions,
    listener: &dyn Listener,
    line_shift: u32,
    on_line: &mut dyn FnMut(u64),
) -> Result<Hierarchy, CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut sim = Hierarchy::new(levels, 2, options.three_c, options.seed);
    listener.begin("simulating", total);
    let mut line = String::new();
    let (mut number, mut read_bytes, mut shown) = (0u64, 0u64, 0u64);
    loop {
        line.clear();
        let n = (&mut reader)
            .take(TRACE_LINE_CAP_BYTES + 2)
            .read_line(&mut line)
            .map_err(io)?;
        if n == 0 {
            break;
        }
        number += 1;
        // The cap is on the line itself, its end (`\n` or `\r\n`) not counted.
        let content = line
            .strip_suffix('\n')
            .map_or(line.as_str(), |l| l.strip_suffix('\r').unwrap_or(l))
            .len();
        if content as u64 > TRACE_LINE_CAP_BYTES {
            return Err(CacheError::Trace {
                path: path.to_owned(),
                line: number,
                message: format!(
                    "longer than {TRACE_LINE_CAP_BYTES} bytes, the cap on a trace line \
                     (expected `R|W HEX-ADDRESS SIZE`; see docs/limits.md)"
                ),
            });
        }
        read_bytes += n as u64;
        if number % (1 << 16) == 0 {
            let position = read_bytes.min(total);
            listener.advance(position - shown);
            shown = position;
        }
        if let Some(a) = parse_trace_line(&line, path, number)? {
            sim.access(a.addr, a.size_bytes, a.write, u32::from(a.write));
            if options.curve {
                on_line(a.addr >> line_shift);
            }
        }
    }
    listener.end();
    if options.flush {
        sim.flush();
    }
    Ok(sim)
}

/// A trace's two "references": its reads and its writes.
fn trace_labels() -> Vec<RefLabel> {
    ["read", "write"]
        .into_iter()
        .map(|kind| RefLabel {
            array: None,
            subscripts: Vec::new(),
            text: format!("{kind}s"),
            kind,
            statement: None,
            line: None,
            column: None,
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn report(
    sim: &Hierarchy,
    labels: &[RefLabel],
    kernel: Option<String>,
    trace: Option<String>,
    params: BTreeMap<String, i64>,
    flops: u64,
    curve: Option<Vec<CurvePoint>>,
    duration_s: f64,
    options: SimulationOptions,
) -> Simulation {
    let split = |v: u64| options.three_c.then_some(v);
    let levels: Vec<SimulatedLevel> = sim
        .configs()
        .iter()
        .zip(sim.stats())
        .map(|(c, s)| SimulatedLevel {
            name: c.name.clone(),
            size_bytes: c.size_bytes,
            line_bytes: c.line_bytes,
            ways: c.ways,
            sets: c.sets(),
            replacement: c.replacement.name(),
            write_back: c.write_back,
            write_allocate: c.write_allocate,
            inclusion: c.inclusion.name(),
            accesses: s.accesses,
            hits: s.hits,
            misses: s.misses,
            compulsory: split(s.compulsory),
            capacity: split(s.capacity),
            conflict: split(s.conflict),
            evictions: s.evictions,
            writebacks: s.writebacks,
            writebacks_received: s.writebacks_received,
            back_invalidations: s.back_invalidations,
            fill_bytes: s.fill_bytes,
            write_bytes: s.write_bytes,
        })
        .collect();
    let mut references = Vec::new();
    for (id, label) in labels.iter().enumerate() {
        for (k, c) in sim.configs().iter().enumerate() {
            let s = sim.ref_stats(id, k);
            references.push(SimulatedReference {
                id,
                label: label.clone(),
                level: c.name.clone(),
                accesses: s.accesses,
                hits: s.hits,
                misses: s.misses,
                compulsory: split(s.compulsory),
                capacity: split(s.capacity),
                conflict: split(s.conflict),
            });
        }
    }
    let accesses = sim.stats().first().map_or(0, |s| s.accesses);
    Simulation {
        kernel,
        trace,
        params,
        levels,
        memory: MemoryTraffic {
            read_bytes: sim.memory().read_bytes,
            write_bytes: sim.memory().write_bytes,
        },
        references,
        accesses,
        flops,
        curve,
        duration_s,
        accesses_per_s: if duration_s > 0.0 {
            accesses as f64 / duration_s
        } else {
            0.0
        },
    }
}

/// Misses at every power-of-two size from one line up to the size that holds every line.
fn curve_points(curve: &MissCurve, line_bytes: u64) -> Vec<CurvePoint> {
    let mut points = Vec::new();
    let mut lines = 1u64;
    loop {
        points.push(CurvePoint {
            size_bytes: lines.saturating_mul(line_bytes),
            misses: curve.misses(lines),
        });
        if lines >= curve.distinct_lines() || lines >= 1 << 40 {
            break;
        }
        lines *= 2;
    }
    points
}

/// A level simulated alone, with its compulsory misses counted ([`MissSplit::Compulsory`]:
/// capacity and conflict are not split, the misses that are not compulsory are the rest), and
/// the seconds it took.
#[derive(Debug, Clone)]
pub struct AloneLevel {
    /// The one-level hierarchy after the kernel's accesses.
    pub hierarchy: Hierarchy,
    /// Seconds the simulation took.
    pub duration_s: f64,
}

/// The kernel's whole stream through each of `levels` alone (each non-inclusive, seeing every
/// access: the analytic model's assumption), one thread per level, counting compulsory misses.
/// `arrays` are the address ranges of the kernel's arrays, to size the sets of lines seen.
pub fn simulate_each_level_alone(
    program: &Program,
    references: usize,
    levels: &[LevelConfig],
    arrays: &[Range<u64>],
) -> Vec<Result<AloneLevel, CacheError>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = levels
            .iter()
            .map(|l| scope.spawn(move || simulate_alone(program, l, references, arrays)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

fn simulate_alone(
    program: &Program,
    level: &LevelConfig,
    references: usize,
    arrays: &[Range<u64>],
) -> Result<AloneLevel, CacheError> {
    let start = Instant::now();
    level.check_simulable()?;
    let mut alone = level.clone();
    alone.inclusion = Inclusion::NonInclusive;
    let mut sim = Hierarchy::with_split(&[alone], references, MissSplit::Compulsory, 0);
    sim.expect_addresses(arrays);
    let mut accesses = program.accesses();
    loop {
        let batch = accesses.next_batch();
        if batch.is_empty() {
            break;
        }
        sim.access_kernel_batch(batch);
    }
    if let Some(e) = accesses.error() {
        return Err(e.clone().into());
    }
    Ok(AloneLevel {
        hierarchy: sim,
        duration_s: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_cache_spec;
    use loopscope_kernel::Silent;

    #[test]
    fn a_simulation_past_the_limit_is_refused_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("triad.c");
        let text = "double a[N], b[N], c[N], d[N];\n\
                    for (int i = 0; i < N; ++i)\n  a[i] = b[i] + c[i] * d[i];\n";
        std::fs::write(&kernel, text).unwrap();
        let levels = parse_cache_spec("L1=32K:8:64").unwrap();
        let sum = dir.path().join("sum.c");
        std::fs::write(
            &sum,
            "double s[1];\nfor (long i = 0; i < N; ++i)\n  s[0] = s[0] + 1.0;\n",
        )
        .unwrap();
        for (kernel, n, shown) in [
            (
                &kernel,
                1_000_000_000_000i64,
                "4000000000000 (4.0e12) accesses",
            ),
            (&sum, i64::MAX, "18446744073709551614 (1.8e19) accesses"),
        ] {
            let define = [("N".to_string(), n)];
            let input = SimulationInput::Kernel {
                path: kernel,
                define: &define,
                base: None,
            };
            let e = simulate(input, &levels, SimulationOptions::default(), &Silent).unwrap_err();
            assert!(
                matches!(e, CacheError::TooMuchWork { exact: true, .. }),
                "{e}"
            );
            let message = e.to_string();
            assert!(message.contains(shown), "{message}");
            assert!(
                message.contains("past the limit of 10000000000"),
                "{message}"
            );
            assert!(message.contains("`loopscope misses`"), "{message}");
        }
        // Just under the limit is allowed (checked, not run).
        let kernel = loopscope_kernel::parse_kernel(text, "triad.c").unwrap();
        let n = (MAX_SIMULATED_ACCESSES / 5) as i64;
        assert_eq!(
            check_simulation_work(&kernel, &[n], 1).unwrap(),
            4 * n as u128
        );
        assert!(check_simulation_work(&kernel, &[n], 2).is_err());
    }

    #[test]
    fn a_kernel_and_its_trace_count_alike() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("copy.c");
        let text = "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  b[i] = a[i];\n";
        std::fs::write(&kernel, text).unwrap();
        // The same accesses as a trace: read a[i] at 8i, write b[i] at 512 + 8i.
        let trace = dir.path().join("copy.trace");
        let lines: String = (0..64)
            .map(|i| format!("R {:x} 8\nW {:x} 8\n", 8 * i, 512 + 8 * i))
            .collect();
        std::fs::write(&trace, lines).unwrap();
        let levels = parse_cache_spec("L1=256:2:32").unwrap();
        let options = SimulationOptions {
            three_c: true,
            curve: true,
            ..SimulationOptions::default()
        };
        let define = [("N".to_string(), 64)];
        let input = SimulationInput::Kernel {
            path: &kernel,
            define: &define,
            base: Some("a=0,b=512"),
        };
        let k = simulate(input, &levels, options, &Silent).unwrap();
        let t = simulate(SimulationInput::Trace(&trace), &levels, options, &Silent).unwrap();
        assert_eq!((k.accesses, t.accesses), (128, 128));
        assert_eq!(k.levels[0].misses, t.levels[0].misses);
        assert_eq!(k.levels[0].compulsory, Some(32));
        assert_eq!(k.params.get("N"), Some(&64));
        assert_eq!(k.flops, 0);
        assert_eq!(t.references[1].label.text, "writes");
        let curve = k.curve.unwrap();
        assert!(curve.windows(2).all(|w| w[0].misses >= w[1].misses));
        assert_eq!(curve.last().unwrap().misses, 32);
    }

    #[test]
    fn each_level_alone_sees_every_access() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sum.c");
        std::fs::write(
            &path,
            "double a[N];\nfor (int i = 0; i < N; ++i)\n  a[i] = a[i];\n",
        )
        .unwrap();
        let loaded = LoadedKernel::load(&path, &[("N".into(), 100)], None, &Silent).unwrap();
        let program = Program::new(&loaded.kernel, &loaded.params, &loaded.layout).unwrap();
        let levels = parse_cache_spec("L1=256:2:32,L2=1K:4:64").unwrap();
        let layout = &loaded.layout;
        let arrays: Vec<_> = (layout.base.iter().zip(&layout.size_bytes))
            .map(|(&b, &s)| b..b + s)
            .collect();
        // With the arrays' extent known (a bitmap of lines) and without (a map).
        for arrays in [&arrays[..], &[]] {
            let alone = simulate_each_level_alone(&program, 2, &levels, arrays);
            let stats: Vec<_> = alone
                .iter()
                .map(|r| r.as_ref().unwrap().hierarchy.stats()[0])
                .collect();
            assert_eq!((stats[0].accesses, stats[1].accesses), (200, 200));
            assert_eq!((stats[0].misses, stats[1].misses), (25, 13));
            assert_eq!((stats[0].compulsory, stats[1].compulsory), (25, 13));
        }
    }

    #[test]
    fn a_trace_without_line_ends_is_refused_at_the_cap() {
        let levels = parse_cache_spec("L1=32K:8:64").unwrap();
        let options = SimulationOptions::default();
        let zero = Path::new("/dev/zero");
        let e = simulate(SimulationInput::Trace(zero), &levels, options, &Silent).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero:1: longer than 4096 bytes, the cap on a trace line \
             (expected `R|W HEX-ADDRESS SIZE`; see docs/limits.md)"
        );
    }

    #[test]
    fn the_trace_line_cap_does_not_count_the_line_end() {
        let levels = parse_cache_spec("L1=32K:8:64").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.trace");
        let line = |bytes: usize| format!("R 40 8{}", " ".repeat(bytes - 6));
        for end in ["\n", "\r\n"] {
            std::fs::write(&trace, line(4096) + end).unwrap();
            let input = SimulationInput::Trace(&trace);
            let s = simulate(input, &levels, SimulationOptions::default(), &Silent).unwrap();
            assert_eq!(s.levels[0].accesses, 1);
            std::fs::write(&trace, line(4097) + end).unwrap();
            let input = SimulationInput::Trace(&trace);
            let e = simulate(input, &levels, SimulationOptions::default(), &Silent).unwrap_err();
            assert!(e.to_string().contains(":1: longer than 4096 bytes"), "{e}");
        }
    }

    #[test]
    fn a_refusal_counts_the_loop_iterations_it_weighs() {
        // Two accesses, but ten billion iterations of an empty loop: the message names both.
        let text = "double a[4];\nfor (long i = 0; i < 1; ++i) {\n  a[i] = a[i] + 1.0;\n  \
                    for (long j = 0; j < N; ++j)\n  {}\n}\n";
        let kernel = loopscope_kernel::parse_kernel(text, "empty.c").unwrap();
        let e = check_simulation_work(&kernel, &[10_000_000_000], 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "takes 2 accesses and 10000000001 (1.0e10) loop iterations, \
                 10000000003 (1.0e10) steps in all, past the limit of 10000000000 steps"
            ),
            "{e}"
        );
    }

    #[test]
    fn sparse_levels_that_could_outgrow_memory_are_refused_before_running() {
        let levels = parse_cache_spec("L1=32K:8:64,L2=64G:1:64").unwrap();
        // 8 Gi ways of 8 bytes plus 48 per set: 10^8 touched sets take 5.2 GiB, 2 * 10^8 more
        // than the cap.
        check_sparse_memory(&levels, 100_000_000).unwrap();
        let e = check_sparse_memory(&levels, 200_000_000)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cache L2: 200000000 accesses"), "{e}");
        assert!(e.contains("up to 10 GiB"), "{e}");
        assert!(e.contains("more than the 8 GiB cap"), "{e}");
        // Levels stored whole take their fixed size at any count.
        let whole = parse_cache_spec("L1=32K:8:64,L2=1M:16:64").unwrap();
        check_sparse_memory(&whole, u128::MAX).unwrap();
        // Through simulate: a strided kernel under the simulator's limit.
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("update.c");
        std::fs::write(
            &kernel,
            "double a[N];\nfor (long i = 0; i < N; ++i)\n  a[i] = a[i] + 1.0;\n",
        )
        .unwrap();
        let define = [("N".to_string(), 1_000_000_000)];
        let input = SimulationInput::Kernel {
            path: &kernel,
            define: &define,
            base: None,
        };
        let e = simulate(input, &levels, SimulationOptions::default(), &Silent).unwrap_err();
        assert!(e.to_string().contains("GiB cap"), "{e}");
    }

    #[test]
    fn a_64_gib_level_is_simulated_in_little_memory() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.trace");
        let lines: String = (0..4000u64)
            .map(|i| format!("R {:x} 8\n", (i % 1000) * 4096))
            .collect();
        std::fs::write(&trace, lines).unwrap();
        let levels = parse_cache_spec("L1=64G:1:64").unwrap();
        let input = SimulationInput::Trace(&trace);
        let options = SimulationOptions::default();
        let s = simulate(input, &levels, options, &Silent).unwrap();
        assert_eq!((s.levels[0].accesses, s.levels[0].misses), (4000, 1000));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn any_trace_bytes_give_an_answer(bytes in proptest::collection::vec(
            proptest::prelude::any::<u8>(), 0..6000), newline_every in 1usize..6000) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("fuzz.trace");
            let mut text = bytes;
            for i in (0..text.len()).step_by(newline_every) {
                text[i] = b'\n';
            }
            std::fs::write(&path, &text).unwrap();
            let levels = parse_cache_spec("L1=1K:2:64").unwrap();
            let input = SimulationInput::Trace(&path);
            let _ = simulate(input, &levels, SimulationOptions::default(), &Silent);
        }
    }
}
