//! `loopscope roofline` as one call: the ceilings (a paper profile, or a machine and the
//! flags), the kernel's traffic (the paper's counts, or a kernel file through the simulator or
//! the analytic model, with the build's vectors and in-order sums), the analysis and, with
//! `--measure`, the kernel timed in the generated harness.

use std::collections::BTreeMap;
use std::path::Path;

use loopscope_analytic::{LevelCommand, LevelsRequest, model_levels};
use loopscope_cache::{LevelConfig, check_simulation_work};
use loopscope_kernel::{Layout, Listener, LoadedKernel};
use loopscope_machine::Machine;
use serde::Serialize;

use crate::kernel_file::kernel_error;
use crate::pairs::plural;
use crate::sizes::{CacheSizes, SizedLevel, describe_sizes, sized_levels};
use crate::{
    Analysis, BASELINE_VECTOR_BYTES, Ceilings, Counts, HarnessKernel, KernelHarness, Level,
    ModelledLevel, Options, PAPER_PROFILES, Precision, RooflineError, Traffic, analyse,
    check_model_caches, harness_source, in_order_sums, modelled_traffic, paper_profile,
    parse_bandwidths, parse_counts, parse_volumes, peak_clock, run_harness, simulated_accesses,
    simulated_traffic, theoretical_peak_gflops,
};

/// What `loopscope roofline` was asked, with what the caller found out about this machine.
#[derive(Debug, Clone)]
pub struct RooflineRequest<'a> {
    /// The kernel's traffic: the paper's counts or a kernel file.
    pub input: RooflineInput<'a>,
    /// Where the peak and bandwidths come from.
    pub machine: MachineInput<'a>,
    /// Effective bandwidths overriding the machine's (`--bandwidth L2=146,MEM=46`).
    pub bandwidth: Option<&'a str>,
    /// Store bandwidths of levels with ports of their own (`--store-bandwidth L1=56`).
    pub store_bandwidth: Option<&'a str>,
    /// Access volumes at which volume-dependent bandwidths are evaluated (`--volume`).
    pub volume: Option<&'a str>,
    /// Threads the kernel runs on.
    pub threads: Option<u32>,
    /// Ppeak in GFLOP/s.
    pub peak_gflops: Option<f64>,
    /// Peff in GFLOP/s.
    pub effective_gflops: Option<f64>,
    /// Latency of a dependent floating-point addition in ns.
    pub add_latency_ns: Option<f64>,
    /// A measured rate to print beside the prediction.
    pub measured_gflops: Option<f64>,
    /// The paper's rounded coefficients.
    pub paper_rounding: bool,
}

/// Where the kernel's traffic comes from.
#[derive(Debug, Clone)]
pub enum RooflineInput<'a> {
    /// The paper's per-iteration counts (`--counts`).
    Counts {
        /// `mem=3,l2=6,flops=78`.
        text: &'a str,
        /// Whether the loads are SIMD (the L1 conditions assume they are).
        simd_loads: bool,
    },
    /// A kernel file.
    Kernel(KernelInputRequest<'a>),
}

/// A kernel file and how to get its traffic.
#[derive(Debug, Clone)]
pub struct KernelInputRequest<'a> {
    /// The kernel file.
    pub path: &'a Path,
    /// Its parameters' values.
    pub define: &'a [(String, i64)],
    /// The cache levels, innermost first (the machine's advertised data caches, or `--cache`).
    pub levels: Vec<LevelConfig>,
    /// Which sizes to simulate them with: with [`CacheSizes::Effective`], the machine's
    /// measured sizes replace the advertised ones in `levels` ([`sized_levels`]).
    pub cache_sizes: CacheSizes,
    /// The analytic model's budget, when the traffic comes from it (else the simulator's).
    pub model: Option<ModelBudget<'a>>,
    /// The build's compiler flags (`--cflags`); `None` for the default, `-O2`.
    pub cflags: Option<&'a str>,
    /// The compiler to time the kernel with (`--measure`).
    pub measure: Option<&'a Path>,
    /// Bytes of this machine's widest vectors, for `-march=native`.
    pub native_vector_bytes: u32,
}

/// How much the analytic model may spend per level.
#[derive(Debug, Clone, Copy)]
pub struct ModelBudget<'a> {
    /// Seconds per level.
    pub time_limit_s: f64,
    /// isl operations per reference of a level.
    pub max_operations: u64,
    /// How to start a level process.
    pub command: &'a LevelCommand,
}

/// Where the peak FLOP rate and the bandwidths come from.
#[derive(Clone, Copy)]
pub enum MachineInput<'a> {
    /// One of the paper's machines (`--profile`).
    Profile(&'a str),
    /// A machine description, as the messages name it (a file's path, `this machine`, or empty
    /// for none: only the flags' peak). `time_add_latency` times a dependent-add chain on this
    /// machine, for a machine detected here.
    Machine {
        /// The description.
        machine: &'a Machine,
        /// Its name in messages and sources.
        name: &'a str,
        /// Times the add latency in ns, when the machine is this one.
        time_add_latency: Option<&'a dyn Fn() -> f64>,
    },
}

impl std::fmt::Debug for MachineInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MachineInput::Profile(name) => write!(f, "Profile({name})"),
            MachineInput::Machine { name, .. } => write!(f, "Machine({name})"),
        }
    }
}

/// The result of `roofline`, as `--json` prints it: the analysis, and the counts or the kernel
/// it came from.
#[derive(Debug, Serialize)]
pub struct Roofline {
    /// The analysis.
    #[serde(flatten)]
    pub analysis: Analysis,
    /// The paper's counts, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
    /// The kernel file, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelInput>,
}

/// Where a kernel file's traffic came from.
#[derive(Debug, Serialize)]
pub struct KernelInput {
    /// The kernel file.
    pub file: String,
    /// Its parameters' values.
    pub params: BTreeMap<String, i64>,
    /// The simulator or the model, in words.
    pub traffic_source: String,
    /// The cache levels as simulated, `L1d 32 KiB`, `L3 4 MiB (measured; 32 MiB advertised)`.
    pub caches: Vec<String>,
    /// Which sizes those are: effective (measured by the probe), advertised, or given.
    pub cache_sizes: String,
    /// The timed run of `--measure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessReport>,
}

/// The timed run of `--measure`.
#[derive(Debug, Serialize)]
pub struct HarnessReport {
    /// The compiler and its flags.
    pub compiler: String,
    /// Seconds per run of the kernel.
    pub seconds_per_run: f64,
    /// Runs per sample.
    pub repetitions: u64,
}

/// Runs `roofline`: ceilings, traffic, analysis and the measured run. Warnings and notes (the
/// analysis's, levels the model could not do) and progress go to `listener`.
pub fn run_roofline(
    request: &RooflineRequest<'_>,
    listener: &dyn Listener,
) -> Result<Roofline, RooflineError> {
    let build = match &request.input {
        RooflineInput::Kernel(k) => Build::from_flags(k.cflags, k.native_vector_bytes),
        RooflineInput::Counts { .. } => Build::from_flags(None, 16),
    };
    // A kernel file is loaded once: its precision chooses the peak, its accesses the traffic.
    let input = match &request.input {
        RooflineInput::Counts { text, simd_loads } => LoadedInput::Counts {
            text,
            simd_loads: *simd_loads,
        },
        RooflineInput::Kernel(k) => LoadedInput::Kernel(
            k,
            LoadedKernel::load(k.path, k.define, None, listener)
                .map(Box::new)
                .map_err(kernel_error)?,
        ),
    };
    let precision = match &input {
        LoadedInput::Kernel(_, loaded) if loaded.kernel.single_precision() => Precision::Single,
        _ => Precision::Double,
    };
    let mut ceilings = ceilings(request, &build, precision, listener)?;
    let options = Options {
        paper_rounding: request.paper_rounding,
        ..Options::default()
    };
    let (mut traffic, counts, mut kernel) = match &input {
        LoadedInput::Counts { text, simd_loads } => {
            let mut counts = parse_counts(text)?;
            counts.simd_loads = *simd_loads;
            (counts.traffic(), Some(counts), None)
        }
        LoadedInput::Kernel(k, loaded) => {
            let machine = match request.machine {
                MachineInput::Machine { machine, .. } => Some(machine),
                MachineInput::Profile(_) => None,
            };
            let (traffic, input, harness) =
                kernel_traffic(k, loaded, machine, &build, &ceilings, listener)?;
            (traffic, None, Some((input, harness, *k)))
        }
    };
    if let Some(text) = request.volume {
        set_volumes(&mut traffic, text)?;
    }
    if let Some(text) = request.bandwidth {
        warn_unused_bandwidths(text, &traffic, listener)?;
    }
    if traffic.chained_adds > 0 && ceilings.add_latency.is_none() {
        if let MachineInput::Machine {
            time_add_latency: Some(time),
            ..
        } = request.machine
        {
            ceilings.set_add_latency(time(), "timed on this machine, dependent-add chain")?;
        }
    }
    let mut analysis =
        analyse(&traffic, &ceilings, options).map_err(|e| explain_missing_bandwidth(e, request))?;
    if let Some(gflops) = request.measured_gflops {
        analysis = analysis
            .with_measured(gflops)
            .map_err(|e| within("--measured-gflops", e))?;
    }
    if let Some((input, Some(harness), k)) = kernel.as_mut()
        && let Some(cc) = k.measure
    {
        let run = measure(cc, &build, &input.file, harness, listener)?;
        // Without floating-point work the prediction is a time: compare times.
        analysis = if analysis.traffic.flops == 0 {
            analysis.with_measured_time(run.seconds_per_run)
        } else {
            analysis.with_measured(run.gflops)
        }
        .map_err(|e| within(format!("{}: --measure", input.file), e))?;
        input.harness = Some(HarnessReport {
            compiler: format!("{} {}", cc.display(), build.flags.join(" ")),
            seconds_per_run: run.seconds_per_run,
            repetitions: run.repetitions,
        });
    }
    for warning in &analysis.warnings {
        listener.warn(warning);
    }
    Ok(Roofline {
        analysis,
        counts,
        kernel: kernel.map(|(input, _, _)| input),
    })
}

/// The request's input with its kernel file, if any, loaded.
enum LoadedInput<'r, 'a> {
    /// The paper's counts and whether the loads are SIMD, parsed when the traffic is taken.
    Counts { text: &'a str, simd_loads: bool },
    /// A kernel file's request and the kernel it holds.
    Kernel(&'r KernelInputRequest<'a>, Box<LoadedKernel>),
}

/// A missing bandwidth said in terms of where the bandwidths were to come from: a machine file
/// without runs at the asked thread count, one without that level, one without measurements,
/// or no machine file at all (the error's own advice).
fn explain_missing_bandwidth(e: RooflineError, request: &RooflineRequest<'_>) -> RooflineError {
    let level = match &e {
        RooflineError::MissingBandwidth { level, .. } => *level,
        RooflineError::NoTimedLevel => Level::Cache(1),
        _ => return e,
    };
    let MachineInput::Machine {
        machine,
        name,
        time_add_latency,
    } = request.machine
    else {
        return e;
    };
    if name.is_empty() {
        return RooflineError::Invalid(format!(
            "no bandwidth for {level}, which the kernel uses: give `--bandwidth {level}=GB/s`, \
             or `-m machine.toml` from `loopscope probe --out machine.toml`"
        ));
    }
    if time_add_latency.is_some() {
        // This machine, detected: no bandwidths until a probe measures them.
        return e;
    }
    let flag = format!("`--bandwidth {level}=GB/s`");
    // An imported machine is one the user may not be on: its bandwidths come from the
    // kerncraft file, so more of them come from there, not from a probe here.
    let remeasure = |what: &str, it: &str| match machine.kerncraft_file() {
        Some(yml) => format!(
            "the kerncraft file it was imported from ({yml}) has no {what}: add {it} there and \
             import the file again"
        ),
        None => format!("rerun `loopscope probe --out {name}`"),
    };
    let Some(measured) = machine
        .measured
        .as_ref()
        .filter(|m| !m.bandwidth.is_empty())
    else {
        let remedy = match machine.kerncraft_file() {
            Some(_) => remeasure("benchmarks", "them"),
            None => format!("{} (without --quick if it was quick)", remeasure("", "")),
        };
        return RooflineError::Invalid(format!(
            "{name} has no measured bandwidths: {remedy}, or give {flag}"
        ));
    };
    let threads = ceiling_threads(request);
    let mut counts: Vec<u32> = measured.bandwidth.iter().map(|b| b.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    match threads {
        Some(t) if !counts.contains(&t) => {
            let listed: Vec<String> = counts.iter().map(u32::to_string).collect();
            let options: Vec<String> = counts.iter().map(|c| format!("`--threads {c}`")).collect();
            RooflineError::Invalid(format!(
                "{name} has no bandwidth measured with {} (its runs use {} threads; the \
                 machine has {} cores): give {}, or {flag}",
                plural(t, "thread"),
                listed.join(" or "),
                machine.cores,
                options.join(" or "),
            ))
        }
        Some(t) => RooflineError::Invalid(format!(
            "{name} has no {level} bandwidth measured with {}, and the kernel uses {level}: \
             {}, or give {flag}",
            plural(t, "thread"),
            remeasure(
                &format!("{level} benchmark with {}", plural(t, "thread")),
                "it"
            )
        )),
        None => RooflineError::Invalid(format!(
            "{name} has no {level} bandwidth, and the kernel uses {level}: {}, or give {flag}",
            remeasure(&format!("{level} benchmark"), "it")
        )),
    }
}

/// Warns once when a bandwidth the ceilings took is one that `probe` flagged as implausible
/// (a loaded machine's): a run of a ceiling's level and thread count whose figure the ceiling
/// holds, as its bandwidth, its store ports' or one of its mixes'.
fn warn_implausible(
    measured: &loopscope_machine::Measured,
    ceilings: &Ceilings,
    threads: Option<u32>,
    name: &str,
    listener: &dyn Listener,
) {
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    let reasons: Vec<&str> = measured
        .bandwidth
        .iter()
        .filter(|run| threads.is_none_or(|t| t == run.threads))
        .filter(|run| {
            ceilings.levels.iter().any(|c| {
                c.level.to_string() == run.level
                    && (matches!(c.bandwidth, crate::BandwidthFn::Constant { gb_per_s } if same(gb_per_s, run.gb_per_s))
                        || c.store.as_ref().is_some_and(|s| same(s.gb_per_s, run.gb_per_s))
                        || c.mixes.iter().any(|m| same(m.gb_per_s, run.gb_per_s)))
            })
        })
        .filter_map(|run| measured.implausible_reason(run))
        .collect();
    if !reasons.is_empty() {
        listener.warn(&format!(
            "{name}: probe found bandwidths it uses implausible ({}): the prediction inherits \
             a loaded machine's figures; rerun `loopscope probe --out {name}` on a quiet machine",
            reasons.join("; ")
        ));
    }
}

/// Sets the access volumes of `--volume` on the levels the kernel moves data through.
fn set_volumes(traffic: &mut Traffic, text: &str) -> Result<(), RooflineError> {
    for (level, bytes) in parse_volumes(text)? {
        let slot = traffic
            .levels
            .iter_mut()
            .find(|l| l.level == level)
            .ok_or_else(|| {
                RooflineError::Invalid(format!(
                    "--volume: {level} is not among the levels the kernel moves data through"
                ))
            })?;
        slot.volume_bytes = Some(bytes);
    }
    Ok(())
}

/// Warns of each `--bandwidth` level the kernel's traffic does not have (`L7` on a machine
/// with three cache levels, a typo for another level): its bandwidth changes nothing.
fn warn_unused_bandwidths(
    text: &str,
    traffic: &Traffic,
    listener: &dyn Listener,
) -> Result<(), RooflineError> {
    let known: Vec<String> = traffic.levels.iter().map(|l| l.level.to_string()).collect();
    for (level, _) in parse_bandwidths(text)? {
        if traffic.level(level).is_none() {
            listener.warn(&format!(
                "--bandwidth {level}: the kernel's traffic has no {level} (its levels: {}); \
                 this bandwidth is not used",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    Ok(())
}

/// The flags `--measure` compiles with by default: a plain optimised build, no `-march`, so the
/// measurement reflects what a default build of the kernel does.
const DEFAULT_CFLAGS: &str = "-O2";

/// The build a kernel file is predicted and measured for, from --cflags.
struct Build {
    flags: Vec<String>,
    /// Bytes of the vectors it uses, when the flags tell (`None`: an unknown `-march`).
    vector_bytes: Option<u32>,
    /// Whether the compiler may reassociate floating-point sums (no in-order chains).
    reassociates: bool,
    /// Whether the build optimises (its last `-O` flag is not `-O0`; gcc's default is `-O0`):
    /// without it every reference is loaded and stored each time it runs.
    optimises: bool,
}

impl Build {
    fn from_flags(cflags: Option<&str>, native_vector_bytes: u32) -> Build {
        let flags: Vec<String> = cflags
            .unwrap_or(DEFAULT_CFLAGS)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let reassociates = flags
            .iter()
            .any(|f| matches!(f.as_str(), "-ffast-math" | "-Ofast" | "-fassociative-math"));
        // The last flag that sets the vector width wins, as with the compiler.
        let vector_bytes = flags
            .iter()
            .rev()
            .find_map(|flag| match flag.as_str() {
                "-march=native" => Some(Some(native_vector_bytes.max(16))),
                "-mavx512f" => Some(Some(64)),
                "-mavx2" | "-mavx" => Some(Some(32)),
                other if other.starts_with("-march=") => Some(None),
                _ => None,
            })
            .unwrap_or(Some(16));
        let optimises = flags
            .iter()
            .rev()
            .find(|f| f.starts_with("-O"))
            .is_some_and(|f| f != "-O0");
        Build {
            flags,
            vector_bytes,
            reassociates,
            optimises,
        }
    }
}

/// Per-level traffic of a kernel file from the simulator or the model of its cache levels, the
/// description of where it came from, and the kernel as the harness compiles it (`--measure`).
fn kernel_traffic(
    k: &KernelInputRequest<'_>,
    loaded: &LoadedKernel,
    machine: Option<&Machine>,
    build: &Build,
    ceilings: &Ceilings,
    listener: &dyn Listener,
) -> Result<(Traffic, KernelInput, Option<KernelHarness>), RooflineError> {
    let (kernel, params, layout) = (&loaded.kernel, &loaded.params, &loaded.layout);
    // Two executions are simulated (warm-up, counted): refused before anything runs when they
    // would never end.
    let check_work = || {
        check_simulation_work(kernel, params, 2).map_err(|e| RooflineError::Kernel {
            bad_input: e.is_bad_input(),
            message: e.to_string(),
        })
    };
    if k.model.is_none() {
        check_work()?;
    }
    // Built before simulating, so a kernel the harness cannot take fails fast.
    let to_measure = k
        .measure
        .map(|_| KernelHarness::new(kernel, params, &loaded.text))
        .transpose()?;
    let sized = match (machine, k.cache_sizes) {
        (Some(machine), sizes) if sizes != CacheSizes::Given => {
            sized_levels(&k.levels, machine, sizes)
        }
        _ => sized_levels(&k.levels, &Machine::unknown(), CacheSizes::Given),
    };
    let levels: &Vec<LevelConfig> = &sized.iter().map(|l| l.config.clone()).collect();
    let timed = |level| ceilings.level(level).is_some();
    let simulate = || -> Result<Traffic, RooflineError> {
        check_work()?;
        listener.begin("simulating", simulated_accesses(kernel, params, layout)?);
        let traffic = simulated_traffic(kernel, params, layout, levels, timed, &mut |n| {
            listener.advance(n)
        })?;
        listener.end();
        Ok(traffic)
    };
    let (traffic, traffic_source) = match k.model {
        None => (simulate()?, "exact cache simulator".to_owned()),
        Some(budget) => {
            check_model_caches(levels)?;
            crate::modelled::check_model_work(kernel, params)?;
            let request = LevelsRequest::counts(
                k.path,
                k.define,
                None,
                budget.max_operations,
                budget.time_limit_s,
                budget.command,
            );
            listener.begin("modelling", 0);
            let outcomes: Vec<_> = model_levels(&request, levels)
                .into_iter()
                .map(|o| (o.refs, o.duration_s))
                .collect();
            listener.end();
            let (traffic, per_level) =
                modelled_traffic(kernel, params, layout, levels, timed, &outcomes)?;
            with_simulated_fallback(traffic, &per_level, k.path, listener, simulate)?
        }
    };
    let traffic = for_build(traffic, build, loaded, layout, listener)?;
    let input = KernelInput {
        file: loaded.origin.clone(),
        params: loaded.param_map(),
        traffic_source,
        caches: sized.iter().map(SizedLevel::describe).collect(),
        cache_sizes: describe_sizes(k.cache_sizes, &sized, machine),
        harness: None,
    };
    Ok((traffic, input, to_measure))
}

/// The in-order sums as the build compiles them: as many side by side as its vectors hold, and
/// each split into one vector of partial sums when it may reassociate them.
fn for_build(
    mut traffic: Traffic,
    build: &Build,
    loaded: &LoadedKernel,
    layout: &Layout,
    listener: &dyn Listener,
) -> Result<Traffic, RooflineError> {
    if !build.optimises {
        listener.warn(
            "--cflags do not optimise (no -O, or -O0 last): every reference counts at L1 each \
             time it runs; the loads and stores of loop variables such a build keeps in memory \
             are not counted, so it runs below the prediction",
        );
        crate::registers::count_every_access(&mut traffic, &loaded.kernel, &loaded.params, layout)?;
    }
    if traffic.chained_adds == 0 {
        return Ok(traffic);
    }
    let vector_bytes = build.vector_bytes.map_or(BASELINE_VECTOR_BYTES, u64::from);
    if build.reassociates {
        listener.note(
            "--cflags let the compiler reassociate floating-point sums: each in-order sum is \
             timed as one vector of partial sums, as gcc vectorises a reduction",
        );
    }
    if build.reassociates || vector_bytes != BASELINE_VECTOR_BYTES {
        traffic.chained_adds = in_order_sums(
            &loaded.kernel,
            &loaded.params,
            layout,
            vector_bytes,
            build.reassociates,
        )?;
    }
    Ok(traffic)
}

/// The model's traffic, with the levels it could not do taken from the simulator (with a
/// warning naming each and why), and the description of where the traffic came from.
fn with_simulated_fallback(
    mut traffic: Traffic,
    per_level: &[ModelledLevel],
    path: &Path,
    listener: &dyn Listener,
    simulate: impl FnOnce() -> Result<Traffic, RooflineError>,
) -> Result<(Traffic, String), RooflineError> {
    let failed: Vec<&ModelledLevel> = per_level.iter().filter(|l| l.bytes.is_err()).collect();
    let modelled: Vec<&str> = per_level
        .iter()
        .filter(|l| l.bytes.is_ok())
        .map(|l| l.name.as_str())
        .collect();
    let seconds = per_level.iter().map(|l| l.duration_s).fold(0.0, f64::max);
    let mut source = format!(
        "analytic cache model ({}: {seconds:.2} s)",
        if modelled.is_empty() {
            "no level".to_owned()
        } else {
            modelled.join(", ")
        }
    );
    if failed.is_empty() {
        return Ok((traffic, source));
    }
    for l in &failed {
        if let Err(e) = &l.bytes {
            listener.warn(&format!(
                "{}: {} not modelled ({e}); its traffic comes from the simulator",
                path.display(),
                l.name
            ));
        }
    }
    let simulated = simulate()?;
    for l in &failed {
        if let Some(sim) = simulated.level(l.outer) {
            traffic.levels.push(sim.clone());
        }
    }
    traffic.levels.sort_by_key(|l| l.level);
    let names: Vec<&str> = failed.iter().map(|l| l.name.as_str()).collect();
    source.push_str(&format!(
        " and exact cache simulator ({})",
        names.join(", ")
    ));
    Ok((traffic, source))
}

/// Compiles and times the kernel file in the generated harness.
fn measure(
    cc: &Path,
    build: &Build,
    file: &str,
    harness: &KernelHarness,
    listener: &dyn Listener,
) -> Result<crate::HarnessRun, RooflineError> {
    let flags: Vec<&str> = build.flags.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().map_err(|e| {
        RooflineError::Harness(format!("cannot create a directory for the harness: {e}"))
    })?;
    listener.begin("measuring", 0);
    let run = run_harness(
        &harness_source(harness),
        harness.flops(),
        cc,
        &flags,
        dir.path(),
    );
    listener.end();
    run.map_err(|e| within(format!("{file}: --measure"), e))
}

/// `error` said of `context` (`--bandwidth: …`).
fn within(context: impl Into<String>, error: RooflineError) -> RooflineError {
    RooflineError::Context {
        context: context.into(),
        source: Box::new(error),
    }
}

/// Ppeak, Peff and bandwidths: a paper profile or a machine, then flags.
fn ceilings(
    request: &RooflineRequest<'_>,
    build: &Build,
    precision: Precision,
    listener: &dyn Listener,
) -> Result<Ceilings, RooflineError> {
    let mut ceilings = match request.machine {
        MachineInput::Profile(name) => paper_profile(name).ok_or_else(|| {
            RooflineError::Invalid(format!(
                "--profile: unknown profile `{name}` (expected one of {})",
                PAPER_PROFILES.join(", ")
            ))
        })?,
        MachineInput::Machine { machine, name, .. } => {
            machine_ceilings(request, machine, name, build, precision, listener)?
        }
    };
    if request.peak_gflops.is_some() || request.effective_gflops.is_some() {
        let peak = request.peak_gflops.unwrap_or(ceilings.peak_gflops);
        let effective = request
            .effective_gflops
            .unwrap_or(ceilings.effective_gflops.min(peak));
        let flags = "--peak-gflops/--effective-gflops";
        // Checked as new ceilings; everything but the peaks is kept.
        let checked = Ceilings::new(peak, effective, flags).map_err(|e| within(flags, e))?;
        ceilings = Ceilings {
            peak_gflops: checked.peak_gflops,
            effective_gflops: checked.effective_gflops,
            peak_source: checked.peak_source,
            ..ceilings
        };
    }
    if let Some(text) = request.bandwidth {
        for (level, bandwidth) in parse_bandwidths(text)? {
            ceilings
                .set_bandwidth(level, bandwidth, "--bandwidth")
                .map_err(|e| within("--bandwidth", e))?;
        }
    }
    if let Some(text) = request.store_bandwidth {
        for (level, gb_per_s) in crate::ceilings::parse_store_bandwidths(text)? {
            ceilings
                .set_store_bandwidth(level, gb_per_s, "--store-bandwidth")
                .map_err(|e| within("--store-bandwidth", e))?;
        }
    }
    if let Some(ns) = request.add_latency_ns {
        ceilings
            .set_add_latency(ns, "--add-latency-ns")
            .map_err(|e| within("--add-latency-ns", e))?;
    }
    Ok(ceilings)
}

fn machine_ceilings(
    request: &RooflineRequest<'_>,
    machine: &Machine,
    name: &str,
    build: &Build,
    precision: Precision,
    listener: &dyn Listener,
) -> Result<Ceilings, RooflineError> {
    let threads = ceiling_threads(request);
    // The peak covers the cores the bandwidths were measured on, so that compute and memory
    // ceilings describe one set of cores: the asked-for threads, else the runs' thread count.
    let peak_threads = threads.or_else(|| bandwidth_threads(machine));
    let peak_cores = peak_threads.map(|t| cores_of(machine, t));
    let measured_peak = machine
        .measured
        .as_ref()
        .and_then(|m| m.peak_gflops.as_ref())
        .map(|p| {
            let rate = match precision {
                Precision::Double => p.dp,
                Precision::Single => p.sp,
            };
            match peak_cores {
                // The FMA kernel scales with the cores it runs on.
                Some(c) if p.threads > 0 => {
                    rate / f64::from(cores_of(machine, p.threads)) * f64::from(c)
                }
                _ => rate,
            }
        })
        .filter(|p| p.is_finite() && *p > 0.0);
    let theoretical = theoretical_peak_gflops(machine, peak_cores, precision);
    let clock = peak_clock(machine).map_or(String::new(), |(hz, name)| {
        format!(
            "{} theoretical at {name} ({:.3} GHz)",
            precision.name(),
            hz / 1e9
        )
    });
    let (peak, effective, source) = match (request.peak_gflops, theoretical, measured_peak) {
        (Some(peak), _, measured) => (
            peak,
            measured.unwrap_or(peak).min(peak),
            "--peak-gflops".to_owned(),
        ),
        // A turbo clock can beat the nominal one: the measured rate is then the better peak,
        // and the line says so rather than calling it theoretical.
        (None, Some(t), Some(m)) if m > t => (
            m,
            m,
            format!(
                "{} measured, above the {t:.2} GFLOP/s{}; Peff measured",
                precision.name(),
                clock.strip_prefix(precision.name()).unwrap_or(&clock)
            ),
        ),
        (None, Some(t), Some(m)) => (t, m, format!("{clock}; Peff measured")),
        (None, Some(t), None) => (t, t, clock),
        (None, None, Some(m)) => (m, m, format!("measured {} peak", precision.name())),
        (None, None, None) => {
            return Err(RooflineError::Invalid(format!(
                "{}: no peak FLOP rate (no nominal clock, no measured peak): run `loopscope \
                 probe --out machine.toml` or give --peak-gflops",
                if name.is_empty() { "machine" } else { name }
            )));
        }
    };
    let name = if name.is_empty() { "machine" } else { name };
    let source = match (threads, peak_threads) {
        (Some(t), _) => format!("{name}: {source}, for {}", threads_on_cores(machine, t)),
        (None, Some(t)) => format!(
            "{name}: {source}, peak of {}, as the bandwidths",
            cores_of_threads(machine, t)
        ),
        (None, None) => format!("{name}: {source}"),
    };
    // Only a peak the user gave is the flag's fault; otherwise the machine's figures are.
    let blamed = if request.peak_gflops.is_some() {
        "--peak-gflops"
    } else {
        name
    };
    let mut ceilings = Ceilings::new(peak, effective, source).map_err(|e| within(blamed, e))?;
    ceilings.chain_threads = peak_threads.unwrap_or(1).max(1);
    if let Some(measured) = &machine.measured {
        // L1's bandwidth at the width the build uses: a default build's is the baseline's.
        ceilings.add_measured(measured, threads, name, build.vector_bytes)?;
        warn_implausible(measured, &ceilings, threads, name, listener);
        if let Some(ns) = measured.add_latency_ns {
            ceilings.set_add_latency(ns, format!("{name}: measured"))?;
        }
    }
    if ceilings.levels.is_empty() && request.bandwidth.is_none() {
        listener.note(&format!("{name}: no measured bandwidths"));
    }
    Ok(ceilings)
}

/// Whether `--measure` times the kernel file in the harness.
fn measures_kernel(request: &RooflineRequest<'_>) -> bool {
    matches!(&request.input, RooflineInput::Kernel(k) if k.measure.is_some())
}

/// The threads the ceilings are taken at: `--threads`, else 1 when `--measure` times the
/// kernel (the harness runs it on one thread), else none (the machine file's runs decide).
fn ceiling_threads(request: &RooflineRequest<'_>) -> Option<u32> {
    request.threads.or(measures_kernel(request).then_some(1))
}

/// The thread count of the machine file's bandwidth runs the ceilings take when no
/// `--threads` is given: the most threads of any run (each level takes its all-thread run).
fn bandwidth_threads(machine: &Machine) -> Option<u32> {
    let measured = machine.measured.as_ref()?;
    measured.bandwidth.iter().map(|b| b.threads).max()
}

/// The cores `threads` threads occupy: those a bandwidth run of that many threads records (a
/// kerncraft import keeps them), else `threads per core` threads share one core, as probe fills
/// a core's hardware threads; at least 1, at most the machine's.
fn cores_of(machine: &Machine, threads: u32) -> u32 {
    let recorded = machine.measured.as_ref().and_then(|m| {
        m.bandwidth
            .iter()
            .find(|b| b.threads == threads && b.cores.is_some())
            .and_then(|b| b.cores)
    });
    recorded
        .unwrap_or_else(|| threads.div_ceil(machine.threads_per_core.max(1)))
        .clamp(1, machine.cores.max(1))
}

/// `1 thread`, `40 threads on 20 cores (2 threads per core)` when threads share cores, or
/// `100 threads on 40 cores (capped at the machine's cores)` when there are more threads than
/// the cores' hardware threads, so the figures in the line add up.
fn threads_on_cores(machine: &Machine, threads: u32) -> String {
    let cores = cores_of(machine, threads);
    if cores == threads {
        return plural(threads, "thread");
    }
    let per_core = machine.threads_per_core.max(1);
    let sharing = if u64::from(cores) * u64::from(per_core) >= u64::from(threads) {
        format!("{} per core", plural(per_core, "thread"))
    } else {
        "capped at the machine's cores".to_owned()
    };
    format!(
        "{} on {} ({sharing})",
        plural(threads, "thread"),
        plural(cores, "core"),
    )
}

/// `20 cores (40 threads, one socket)`: the cores the bandwidth runs' threads occupy, and
/// which share of a multi-socket machine that is.
fn cores_of_threads(machine: &Machine, threads: u32) -> String {
    let cores = cores_of(machine, threads);
    let sockets = machine.sockets.max(1);
    let mut scope = vec![plural(threads, "thread")];
    if sockets > 1 && cores == machine.cores {
        scope.push(format!("all {sockets} sockets"));
    } else if sockets > 1 && cores.saturating_mul(sockets) == machine.cores {
        scope.push("one socket".to_owned());
    }
    format!("{} ({})", plural(cores, "core"), scope.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_kernel::Silent;

    const SKYLAKE_SP: &str = include_str!("../../../examples/machines/skylake-sp.yml");

    /// The peak and its source for Gold 6148 (2 sockets × 20 cores × 2 threads, 32 DP FLOPs
    /// per cycle at 2.4 GHz) at `threads`, its bandwidths run as kerncraft's full file runs
    /// them: up to one socket's 20 cores × 2 threads.
    fn skylake_peak(threads: Option<u32>) -> (f64, String) {
        let mut machine = loopscope_machine::import_kerncraft_str(SKYLAKE_SP, "skx.yml".as_ref())
            .unwrap()
            .machine;
        let bandwidth = &mut machine.measured.as_mut().unwrap().bandwidth;
        let one_socket: Vec<_> = bandwidth
            .iter()
            .map(|b| loopscope_machine::Bandwidth {
                threads: 40,
                cores: Some(20),
                ..b.clone()
            })
            .collect();
        bandwidth.extend(one_socket);
        let request = RooflineRequest {
            input: RooflineInput::Counts {
                text: "mem=3,flops=2",
                simd_loads: true,
            },
            machine: MachineInput::Machine {
                machine: &machine,
                name: "skx.toml",
                time_add_latency: None,
            },
            bandwidth: None,
            store_bandwidth: None,
            volume: None,
            threads,
            peak_gflops: None,
            effective_gflops: None,
            add_latency_ns: None,
            measured_gflops: None,
            paper_rounding: false,
        };
        let ceilings = ceilings(
            &request,
            &Build::from_flags(None, 16),
            Precision::Double,
            &Silent,
        )
        .unwrap();
        (ceilings.peak_gflops, ceilings.peak_source)
    }

    #[test]
    fn the_default_peak_covers_the_cores_of_the_bandwidth_runs() {
        let (peak, source) = skylake_peak(None);
        // 20 cores × 32 × 2.4 GHz, not the two sockets' 3072.
        assert!((peak - 1536.0).abs() < 1e-9, "{peak}");
        assert!(
            source.ends_with("peak of 20 cores (40 threads, one socket), as the bandwidths"),
            "{source}"
        );
    }

    #[test]
    fn threads_sharing_a_core_count_once_in_the_peak() {
        let (peak, source) = skylake_peak(Some(40));
        assert!((peak - 1536.0).abs() < 1e-9, "{peak}");
        assert!(
            source.ends_with("for 40 threads on 20 cores (2 threads per core)"),
            "{source}"
        );
        let (peak, source) = skylake_peak(Some(1));
        assert!((peak - 76.8).abs() < 1e-9, "{peak}");
        assert!(source.ends_with("for 1 thread"), "{source}");
        // The file's 2-thread runs are kerncraft's one-thread-per-core group: 2 cores.
        let (peak, source) = skylake_peak(Some(2));
        assert!((peak - 153.6).abs() < 1e-9, "{peak}");
        assert!(source.ends_with("for 2 threads"), "{source}");
    }

    #[test]
    fn threads_beyond_the_hardware_threads_say_the_cores_were_capped() {
        let machine = Machine {
            cores: 40,
            threads_per_core: 2,
            ..Machine::unknown()
        };
        assert_eq!(
            threads_on_cores(&machine, 80),
            "80 threads on 40 cores (2 threads per core)"
        );
        assert_eq!(
            threads_on_cores(&machine, 100),
            "100 threads on 40 cores (capped at the machine's cores)"
        );
        let single = Machine {
            cores: 4,
            ..Machine::unknown()
        };
        assert_eq!(
            threads_on_cores(&single, 6),
            "6 threads on 4 cores (capped at the machine's cores)"
        );
    }
}
