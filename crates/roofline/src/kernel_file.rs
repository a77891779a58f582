//! A kernel file as the model's input: per-level traffic from the exact cache simulator, and
//! the loop nest handed to the timing harness.
//!
//! Traffic is the steady state of repeated executions, as `--measure` times them: the kernel
//! runs once to warm the caches, and only a second run is counted. Bytes through a level are
//! whole lines crossing its outer boundary (fills and write-backs), summed over the kernel and
//! reported with the number of innermost-loop iterations, so per-iteration figures are exact
//! averages.

use loopscope_cache::{Hierarchy, LevelConfig, LevelStats};
use loopscope_kernel::{Kernel, Layout, Node, Program};

use crate::chains::{BASELINE_VECTOR_BYTES, chained_adds, recurrence_adds};
use crate::{HarnessArray, HarnessKernel, Level, LevelTraffic, RooflineError, Traffic};

/// Steady-state traffic of `kernel` through the simulated `levels` (innermost first). A level
/// is listed when bytes cross it or `timed(level)` says it has a bandwidth; L1 (bytes between
/// the registers and L1: every access) only when `timed(L1)`, as the paper does not time L1.
/// `progress` hears how many accesses have been simulated, now and then, out of
/// [`simulated_accesses`].
pub fn simulated_traffic(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
    levels: &[LevelConfig],
    timed: impl Fn(Level) -> bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Traffic, RooflineError> {
    let program = Program::new(kernel, params, layout).map_err(kernel_error)?;
    for level in levels {
        level.check_simulable().map_err(|e| RooflineError::Kernel {
            bad_input: true,
            message: e.to_string(),
        })?;
    }
    let references = kernel.references().count();
    let mut sim = Hierarchy::new(levels, references, false, 0);
    run_once(&program, &mut sim, progress)?;
    let warm: Vec<LevelStats> = sim.stats().to_vec();
    run_once(&program, &mut sim, progress)?;
    let boundary = sim
        .stats()
        .iter()
        .zip(&warm)
        .enumerate()
        .map(|(index, (after, before))| {
            let written_bytes = after.write_bytes - before.write_bytes;
            Boundary {
                level: outer_level(levels, index),
                bytes: (after.fill_bytes - before.fill_bytes) + written_bytes,
                written_bytes,
            }
        })
        .collect();
    Ok(assemble(kernel, &program, boundary, timed))
}

/// Bytes crossing a cache level's outer boundary in one run, as traffic of the next level out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Boundary {
    /// The next level out, whose traffic these bytes are.
    pub(crate) level: Level,
    /// Fills (write-allocate fills included) and write-backs.
    pub(crate) bytes: u64,
    /// Of `bytes`, the write-backs: the level's bandwidth depends on their share.
    pub(crate) written_bytes: u64,
}

/// The traffic of one run: the bytes between the registers and L1 (listed only when
/// `timed(L1)`, as the paper does not time L1), then the bytes crossing each cache level's outer
/// boundary, listed when non-zero or when `timed` says the level has a bandwidth.
pub(crate) fn assemble(
    kernel: &Kernel,
    program: &Program,
    boundary: Vec<Boundary>,
    timed: impl Fn(Level) -> bool,
) -> Traffic {
    let mut traffic_levels = Vec::new();
    if timed(Level::Cache(1)) {
        let accessed = crate::registers::access_bytes(kernel, program);
        traffic_levels.push(LevelTraffic {
            store_bytes: Some(accessed.store),
            ..level_traffic(Level::Cache(1), accessed.load + accessed.store)
        });
    }
    for crossing in boundary {
        if crossing.bytes > 0 || timed(crossing.level) {
            traffic_levels.push(LevelTraffic {
                store_bytes: Some(crossing.written_bytes),
                ..level_traffic(crossing.level, crossing.bytes)
            });
        }
    }
    Traffic {
        levels: traffic_levels,
        flops: executed_flops(kernel, program),
        iterations: innermost_iterations(kernel, program.executions()).max(1),
        l1: None,
        word_bytes: kernel.arrays.first().map_or(8, |a| a.elem.bytes()).max(1),
        chained_adds: chained_adds(kernel, program.executions(), BASELINE_VECTOR_BYTES),
        recurrence_adds: recurrence_adds(kernel, program.executions()),
    }
}

/// Floating-point operations of one execution of the whole kernel.
fn executed_flops(kernel: &Kernel, program: &Program) -> u64 {
    kernel
        .statements
        .iter()
        .zip(program.executions())
        .map(|(s, n)| s.flops.total().saturating_mul(*n))
        .fold(0u64, u64::saturating_add)
}

fn level_traffic(level: Level, bytes: u64) -> LevelTraffic {
    LevelTraffic {
        level,
        bytes,
        volume_bytes: None,
        store_bytes: None,
    }
}

/// The level whose traffic the misses of `levels[index]` are: the next level out, or memory.
pub(crate) fn outer_level(levels: &[LevelConfig], index: usize) -> Level {
    match levels.get(index + 1) {
        Some(next) => level_of(next, index + 1),
        None => Level::Memory,
    }
}

/// The model's level for a simulated cache: its name when it is `L<n>`, else its position.
fn level_of(config: &LevelConfig, index: usize) -> Level {
    config
        .name
        .parse()
        .unwrap_or(Level::Cache(u8::try_from(index + 1).unwrap_or(u8::MAX)))
}

/// How many accesses [`simulated_traffic`] simulates: the kernel's, twice (warm-up, counted).
pub fn simulated_accesses(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
) -> Result<u64, RooflineError> {
    let program = Program::new(kernel, params, layout).map_err(kernel_error)?;
    Ok(program.total_accesses(kernel).saturating_mul(2))
}

/// Feeds one execution of the kernel to the simulator.
fn run_once(
    program: &Program,
    sim: &mut Hierarchy,
    progress: &mut dyn FnMut(u64),
) -> Result<(), RooflineError> {
    const CHUNK: u64 = 1 << 20;
    let mut stream = program.accesses();
    let mut count = 0u64;
    loop {
        let batch = stream.next_batch();
        if batch.is_empty() {
            break;
        }
        sim.access_kernel_batch(batch);
        count += batch.len() as u64;
        if count >= CHUNK {
            progress(count);
            count = 0;
        }
    }
    progress(count);
    match stream.error() {
        Some(e) => Err(kernel_error(e.clone())),
        None => Ok(()),
    }
}

pub(crate) fn kernel_error(e: loopscope_kernel::KernelError) -> RooflineError {
    RooflineError::Kernel {
        bad_input: e.is_bad_input(),
        message: e.to_string(),
    }
}

/// Iterations of innermost loops: for each loop without inner loops, the most any of its
/// statements executes, summed (statements outside any loop count their executions).
fn innermost_iterations(kernel: &Kernel, executions: &[u64]) -> u64 {
    let has_inner: Vec<bool> = (0..kernel.loops.len())
        .map(|id| kernel.loops.iter().any(|l| l.parent == Some(id)))
        .collect();
    let mut per_loop = vec![0u64; kernel.loops.len()];
    let mut outside = 0u64;
    for (statement, &n) in kernel.statements.iter().zip(executions) {
        match statement.loops.last() {
            Some(&id) if !has_inner[id] => per_loop[id] = per_loop[id].max(n),
            _ => outside += n,
        }
    }
    per_loop.iter().sum::<u64>() + outside
}

/// A parsed kernel with concrete parameter values, as the harness compiles it: the arrays with
/// their declared extents, the scalars the file declares, and the file's own loop text.
#[derive(Debug, Clone)]
pub struct KernelHarness {
    arrays: Vec<HarnessArray>,
    scalars: Vec<(String, String, f64)>,
    indices: Vec<String>,
    loop_source: String,
    flops: u64,
}

impl KernelHarness {
    /// Builds the harness input from the kernel's `text` (the file it was parsed from).
    pub fn new(
        kernel: &Kernel,
        params: &[i64],
        text: &str,
    ) -> Result<KernelHarness, RooflineError> {
        let program = Program::new(
            kernel,
            params,
            &kernel.layout(params, &[]).map_err(kernel_error)?,
        )
        .map_err(kernel_error)?;
        let arrays = kernel
            .arrays
            .iter()
            .map(|a| {
                let extents = a
                    .extents
                    .iter()
                    .map(|e| {
                        e.bind_params(params)
                            .and_then(|b| b.as_constant())
                            .and_then(|v| u64::try_from(v).ok())
                            .ok_or_else(|| {
                                RooflineError::Invalid(format!(
                                    "{}: extent `{}` of `{}` is not a non-negative constant",
                                    kernel.origin,
                                    kernel.render(e),
                                    a.name
                                ))
                            })
                    })
                    .collect::<Result<Vec<u64>, RooflineError>>()?;
                Ok(HarnessArray {
                    name: a.name.clone(),
                    element: a.elem.name().to_owned(),
                    extents,
                })
            })
            .collect::<Result<Vec<_>, RooflineError>>()?;
        let start =
            body_start(kernel).map_or(text.len(), |(line, column)| byte_offset(text, line, column));
        let (prefix, body) = text.split_at(start);
        let mut indices: Vec<String> = Vec::new();
        for l in &kernel.loops {
            if !indices.contains(&l.var) {
                indices.push(l.var.clone());
            }
        }
        let scalars = scalar_declarations(prefix)
            .into_iter()
            .filter(|(_, name, _)| !indices.contains(name))
            .collect();
        let defines: String = kernel
            .params
            .iter()
            .zip(params)
            .map(|(name, value)| format!("#define {name} {value}L\n"))
            .collect();
        // Undefined after the loops, so a parameter named like the harness's own names
        // (`main`, `sink`) does not rewrite them.
        let undefines: String = kernel
            .params
            .iter()
            .map(|name| format!("\n#undef {name}"))
            .collect();
        let flops = executed_flops(kernel, &program);
        Ok(KernelHarness {
            arrays,
            scalars,
            indices,
            loop_source: format!("{defines}{}{undefines}\n", body.trim_end()),
            flops,
        })
    }
}

impl HarnessKernel for KernelHarness {
    fn arrays(&self) -> Vec<HarnessArray> {
        self.arrays.clone()
    }
    fn scalars(&self) -> Vec<(String, String, f64)> {
        self.scalars.clone()
    }
    fn indices(&self) -> Vec<String> {
        self.indices.clone()
    }
    fn loop_source(&self) -> String {
        self.loop_source.clone()
    }
    fn flops(&self) -> u64 {
        self.flops
    }
}

/// Line and column where the first loop or statement begins.
fn body_start(kernel: &Kernel) -> Option<(u32, u32)> {
    let pos = match kernel.body.first()? {
        Node::Loop { id, .. } => kernel.loops[*id].pos,
        Node::Statement(s) => kernel.statements[*s].pos,
    };
    Some((pos.line, pos.column))
}

/// Byte offset of a 1-based line and character column in `text`.
fn byte_offset(text: &str, line: u32, column: u32) -> usize {
    let mut offset = 0;
    for (index, row) in text.split_inclusive('\n').enumerate() {
        if index + 1 == line as usize {
            return offset
                + row
                    .char_indices()
                    .nth(column.saturating_sub(1) as usize)
                    .map_or(row.len(), |(i, _)| i);
        }
        offset += row.len();
    }
    text.len()
}

/// Scalars declared before the loops (`double s;`, `float x = 2, y;`, `const double w = 0.5;`,
/// `static double s;`), as `(type, name, initial value)`: the declared value, else a harmless
/// non-zero one. `const` and `static` are dropped: the harness makes every scalar a global the
/// compiler cannot fold.
fn scalar_declarations(prefix: &str) -> Vec<(String, String, f64)> {
    let code = strip_comments(prefix);
    let mut scalars = Vec::new();
    for declaration in code.split(';') {
        let mut rest = declaration.trim();
        while let Some(after) = ["const", "static"].iter().find_map(|q| {
            rest.strip_prefix(q)
                .filter(|a| a.starts_with(char::is_whitespace))
        }) {
            rest = after.trim_start();
        }
        let mut words = rest.splitn(2, char::is_whitespace);
        let (Some(ty), Some(rest)) = (words.next(), words.next()) else {
            continue;
        };
        if !matches!(ty, "double" | "float" | "int" | "long") {
            continue;
        }
        for declarator in rest.split(',').filter(|d| !d.contains('[')) {
            let (name, value) = match declarator.split_once('=') {
                Some((name, value)) => (name.trim(), value.trim().parse().ok()),
                None => (declarator.trim(), None),
            };
            if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                let fallback = if ty == "double" || ty == "float" {
                    0.5
                } else {
                    1.0
                };
                scalars.push((ty.to_owned(), name.to_owned(), value.unwrap_or(fallback)));
            }
        }
    }
    scalars
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness_source;
    use loopscope_cache::parse_cache_spec;
    use loopscope_kernel::parse_kernel;

    const TRIAD: &str = "// triad\ndouble a[N], b[N], c[N], d[N];\n\nfor(int i=0; i<N; ++i)\n    a[i] = b[i] + c[i] * d[i];\n";

    fn traffic(text: &str, n: i64, cache: &str) -> Traffic {
        let kernel = parse_kernel(text, "k.c").unwrap();
        let params = kernel.param_values(&[("N".into(), n)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let levels = parse_cache_spec(cache).unwrap();
        simulated_traffic(&kernel, &params, &layout, &levels, |_| false, &mut |_| {}).unwrap()
    }

    #[test]
    fn triad_beyond_the_caches_moves_five_words_per_iteration_from_memory() {
        // 4 arrays of 1024 doubles (32 KiB) through an 8 KiB L1 and 16 KiB L2: every iteration
        // loads b, c, d, allocates a (4 words) and later writes a back (1 word).
        let t = traffic(TRIAD, 1024, "L1=8K:8:64,L2=16K:8:64");
        assert_eq!(t.iterations, 1024);
        assert_eq!(t.flops, 2 * 1024);
        let per_iteration: Vec<(Level, u64)> = t
            .levels
            .iter()
            .map(|l| (l.level, l.bytes / t.iterations))
            .collect();
        assert_eq!(per_iteration, [(Level::Cache(2), 40), (Level::Memory, 40)]);
    }

    #[test]
    fn a_working_set_that_fits_moves_nothing_in_steady_state() {
        // 4 KiB in a 16 KiB L2 behind a 2 KiB L1: only L1<->L2 traffic after the warm-up run.
        let t = traffic(TRIAD, 128, "L1=2K:4:64,L2=16K:8:64");
        assert_eq!(t.levels.len(), 1, "{t:?}");
        assert_eq!(t.levels[0].level, Level::Cache(2));
        assert_eq!(t.levels[0].bytes, 128 * 40);
    }

    #[test]
    fn timed_l1_counts_every_access() {
        let kernel = parse_kernel(TRIAD, "k.c").unwrap();
        let params = kernel.param_values(&[("N".into(), 64)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let levels = parse_cache_spec("L1=32K:8:64").unwrap();
        let mut seen = 0;
        let t = simulated_traffic(
            &kernel,
            &params,
            &layout,
            &levels,
            |l| l == Level::Cache(1),
            &mut |n| seen += n,
        )
        .unwrap();
        assert_eq!(seen, simulated_accesses(&kernel, &params, &layout).unwrap());
        assert_eq!(t.levels.len(), 1);
        assert_eq!(t.levels[0].bytes, 64 * 4 * 8);
        // Of the four accesses per iteration, the store to a[i].
        assert_eq!(t.levels[0].store_bytes, Some(64 * 8));
    }

    #[test]
    fn l1_ports_time_loads_and_stores_apart() {
        let kernel = parse_kernel(TRIAD, "k.c").unwrap();
        let params = kernel.param_values(&[("N".into(), 64)]).unwrap();
        let layout = kernel.layout(&params, &[]).unwrap();
        let levels = parse_cache_spec("L1=32K:8:64").unwrap();
        let l1 = |l: Level| l == Level::Cache(1);
        let t = simulated_traffic(&kernel, &params, &layout, &levels, l1, &mut |_| {}).unwrap();
        let mut ceilings = crate::Ceilings::new(100.0, 100.0, "test").unwrap();
        let loads = crate::BandwidthFn::Constant { gb_per_s: 24.0 };
        ceilings.set_bandwidth(Level::Cache(1), loads, "t").unwrap();
        let per_iteration = |c: &crate::Ceilings| {
            crate::predict(&t, c).unwrap().levels[0].time_s / t.iterations as f64
        };
        // One bandwidth: all 32 bytes at 24 GB/s.
        assert!((per_iteration(&ceilings) - 32.0 / 24e9).abs() < 1e-18);
        // Ports: 24 load bytes at 24 GB/s, and 8 store bytes at 4 GB/s, which take longer.
        ceilings
            .set_store_bandwidth(Level::Cache(1), 4.0, "t")
            .unwrap();
        assert!((per_iteration(&ceilings) - 8.0 / 4e9).abs() < 1e-18);
        ceilings
            .set_store_bandwidth(Level::Cache(1), 80.0, "t")
            .unwrap();
        assert!((per_iteration(&ceilings) - 24.0 / 24e9).abs() < 1e-18);
        // Replacing the load bandwidth keeps the store bandwidth.
        ceilings
            .set_bandwidth(Level::Cache(1), loads, "again")
            .unwrap();
        assert!(ceilings.level(Level::Cache(1)).unwrap().store.is_some());
        // No store bandwidth without a level to attach it to.
        assert!(
            ceilings
                .set_store_bandwidth(Level::Memory, 1.0, "t")
                .is_err()
        );
    }

    #[test]
    fn innermost_iterations_of_a_nest() {
        let text = "double a[M][N], b[M][N];\ndouble s;\nfor(int j=1; j<M-1; ++j)\n  for(int i=1; i<N-1; ++i)\n    b[j][i] = (a[j][i-1] + a[j][i+1]) * s;\n";
        let kernel = parse_kernel(text, "k.c").unwrap();
        let params = kernel
            .param_values(&[("M".into(), 10), ("N".into(), 20)])
            .unwrap();
        let program =
            Program::new(&kernel, &params, &kernel.layout(&params, &[]).unwrap()).unwrap();
        assert_eq!(innermost_iterations(&kernel, program.executions()), 8 * 18);
    }

    #[test]
    fn harness_gets_the_loop_text_sizes_and_scalars() {
        let text = "double a[M][N], b[M][N];\n/* factor */ double s = 0.25, t;\nint i;\nfor(i=1; i<M-1; ++i)\n  for(int j=1; j<N-1; ++j)\n    b[i][j] = a[i][j] * s;\n";
        let kernel = parse_kernel(text, "k.c").unwrap();
        let params = kernel
            .param_values(&[("M".into(), 10), ("N".into(), 20)])
            .unwrap();
        let h = KernelHarness::new(&kernel, &params, text).unwrap();
        assert_eq!(h.arrays()[1].extents, [10, 20]);
        assert_eq!(
            h.scalars(),
            [
                ("double".to_owned(), "s".to_owned(), 0.25),
                ("double".to_owned(), "t".to_owned(), 0.5)
            ]
        );
        assert_eq!(h.indices(), ["i", "j"]);
        assert!(
            h.loop_source()
                .starts_with("#define M 10L\n#define N 20L\nfor(i=1;")
        );
        assert_eq!(h.flops(), 8 * 18);
        let source = harness_source(&h);
        assert!(source.contains("double (*restrict b)[20]"), "{source}");
    }

    #[test]
    fn const_and_static_scalars_are_declared_for_the_harness() {
        let text = "static double a[N];\nconst double w = 0.5;\nstatic const float s, t = 2;\n\
                    constant_name;\nfor(int i=0; i<N; ++i)\n  a[i] = w * s * a[i];\n";
        assert_eq!(
            scalar_declarations(text),
            [
                ("double".to_owned(), "w".to_owned(), 0.5),
                ("float".to_owned(), "s".to_owned(), 0.5),
                ("float".to_owned(), "t".to_owned(), 2.0)
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn declaration_scanning_never_panics(text in "\\PC{0,200}", line in 0u32..8, column in 0u32..40) {
            let _ = scalar_declarations(&text);
            let offset = byte_offset(&text, line, column);
            proptest::prop_assert!(text.is_char_boundary(offset));
        }
    }

    #[test]
    fn byte_offsets_count_characters() {
        assert_eq!(byte_offset("ab\ncd", 2, 2), 4);
        assert_eq!(byte_offset("é\nx", 1, 2), 2);
        assert_eq!(byte_offset("a", 5, 1), 1);
    }
}
