//! `loopscope roofline`: the cache-aware roofline prediction of a kernel, with the classic
//! roofline beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use loopscope_cache::{levels_from_machine, parse_cache_spec};
use loopscope_kernel::Kernel;
use loopscope_machine::{Machine, read_machine_file, write_atomically};
use loopscope_report::format_bytes;
use loopscope_report::{RooflineAxis, render_roofline, render_roofline_svg};
use loopscope_roofline::{
    Analysis, BASELINE_VECTOR_BYTES, BandwidthFn, Ceilings, Counts, HarnessKernel, HarnessRun,
    KernelHarness, ModelledLevel, Options, PAPER_PROFILES, Traffic, analyse, check_model_caches,
    harness_source, in_order_sums, modelled_traffic, paper_profile, parse_bandwidths, parse_counts,
    parse_volumes, run_harness, simulated_accesses, simulated_traffic, theoretical_peak_gflops,
};
use serde::Serialize;

use crate::failure::bad_input;
use crate::ui::Ui;
use loopscope_analytic::{LevelsRequest, model_levels};

/// Arguments of `roofline`.
#[derive(Debug, Args)]
pub struct RooflineArgs {
    /// Per-iteration references served from each level, in 8-byte words (a store counts 2), and
    /// FLOPs: `mem=3,l2=6,flops=78`. Also `l1s=`, `l1l=` (L1 references with short and long
    /// spacing, for the L1 conditions), `l3=`, `l1=` (a timed L1), `chain=` (dependent
    /// additions per iteration), `word=`, `iterations=`.
    #[arg(
        long,
        value_name = "KEY=N,...",
        required_unless_present = "kernel",
        conflicts_with = "kernel"
    )]
    pub counts: Option<String>,
    /// Kernel file in the kerncraft C subset: its per-level traffic comes from --traffic.
    #[arg(value_name = "KERNEL.c")]
    pub kernel: Option<PathBuf>,
    /// Value of a kernel symbol, e.g. `-D N=1000` (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition, requires = "kernel")]
    pub define: Vec<(String, i64)>,
    /// Cache levels to simulate for a kernel file, innermost first:
    /// `NAME=SIZE:WAYS:LINE[:OPTION...]` (default: the machine's data caches).
    #[arg(long, value_name = "SPEC", requires = "kernel")]
    pub cache: Option<String>,
    /// Where a kernel file's per-level traffic comes from: `sim` (the exact cache simulator,
    /// steady state of repeated runs) or `model` (the analytic cache model).
    #[arg(long, value_enum, default_value_t = TrafficSource::Sim, requires = "kernel")]
    pub traffic: TrafficSource,
    /// With --traffic model: seconds each level's model may take; a level that needs more is
    /// stopped and taken from the simulator instead.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "kernel"
    )]
    pub time_limit: f64,
    /// With --traffic model: bound on isl's elementary operations per reference of a level.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 200_000_000,
        requires = "kernel"
    )]
    pub max_operations: u64,
    /// Compile the kernel file into a timing harness with `cc -O2`, run it, and print the
    /// measured GFLOP/s beside the prediction.
    #[arg(long, requires = "kernel", conflicts_with = "measured_gflops")]
    pub measure: bool,
    /// C compiler for --measure (flags: --cflags).
    #[arg(long, value_name = "PATH", default_value = "cc", requires = "measure")]
    pub cc: PathBuf,
    /// The build the kernel is predicted and measured for, as compiler flags (default `-O2`, the
    /// x86-64 baseline's 16-byte vectors). `-ffast-math`/`-Ofast` let the compiler split
    /// in-order sums (no chain term); `-march=native`/`-mavx2`/`-mavx512f` widen the vectors
    /// (L1's ports from probe's runs at that width, more sums side by side).
    #[arg(
        long,
        value_name = "FLAGS",
        allow_hyphen_values = true,
        requires = "kernel"
    )]
    pub cflags: Option<String>,
    /// Machine file with a `measured` section (from `loopscope probe --out`); without it and
    /// without --profile, this machine is detected (which gives a peak but no bandwidths).
    #[arg(short = 'm', long = "machine", value_name = "FILE")]
    pub machine: Option<PathBuf>,
    /// Use one of the paper's machines: k-computer, k-computer-base, haswell-paper.
    #[arg(long, value_name = "NAME", conflicts_with = "machine")]
    pub profile: Option<String>,
    /// Effective bandwidths in GB/s, overriding the machine's: `L2=146,MEM=46`; a
    /// volume-dependent one as `L3=57.45+3.332/s` (intercept GB/s + slope per second, eq. 14).
    #[arg(long, value_name = "LEVEL=GB/s,...")]
    pub bandwidth: Option<String>,
    /// Store bandwidth in GB/s of a level whose loads and stores go through separate ports
    /// (L1): `L1=56`. The level's --bandwidth then counts its loads alone, and its time is
    /// the longer of the two.
    #[arg(long, value_name = "LEVEL=GB/s,...")]
    pub store_bandwidth: Option<String>,
    /// Access volume in bytes at which a volume-dependent bandwidth is evaluated, per level:
    /// `L3=2457600` (default: the bytes the kernel moves through the level).
    #[arg(long, value_name = "LEVEL=BYTES,...")]
    pub volume: Option<String>,
    /// Threads the kernel runs on: the machine file's peak and bandwidths are taken for that
    /// many (its runs with that thread count). Default: the whole machine, or 1 with --measure,
    /// whose harness runs the kernel on one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Theoretical peak Ppeak in GFLOP/s (whole chip); fractions of peak refer to it.
    #[arg(long, value_name = "GFLOP/s")]
    pub peak_gflops: Option<f64>,
    /// Attainable compute rate Peff in GFLOP/s (default: the measured peak, else Ppeak).
    #[arg(long, value_name = "GFLOP/s")]
    pub effective_gflops: Option<f64>,
    /// Latency of a dependent floating-point addition in ns, for kernels that sum in order
    /// through their innermost loop (default: the machine file's, else timed on this machine).
    #[arg(long, value_name = "NS")]
    pub add_latency_ns: Option<f64>,
    /// A measured rate of the kernel, printed beside the prediction with the error.
    #[arg(long, value_name = "GFLOP/s")]
    pub measured_gflops: Option<f64>,
    /// The kernel's loads are scalar: the L1 conditions (which assume SIMD loads) may not hold.
    #[arg(long)]
    pub scalar_loads: bool,
    /// Use the paper's rounded coefficients (0.36, 1.14, 0.88, 2.17), as its Table 6 does.
    #[arg(long)]
    pub paper_rounding: bool,
    /// Write the roofline plot to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Horizontal axis of the plot.
    #[arg(long, value_enum, default_value_t = Axis::FlopPerByte)]
    pub axis: Axis,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Source of a kernel file's per-level traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrafficSource {
    /// The exact cache simulator.
    Sim,
    /// The analytic cache model.
    Model,
}

/// Horizontal axis of the plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Axis {
    /// Arithmetic intensity, FLOP per byte (the classic look).
    FlopPerByte,
    /// Required bytes per FLOP, b/f (the paper's figures).
    BytesPerFlop,
}

/// The JSON document: the analysis plus the counts or kernel it came from.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    analysis: &'a Analysis,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<&'a Counts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<&'a KernelInput>,
}

/// Where a kernel file's traffic came from, for the JSON document.
#[derive(Serialize)]
struct KernelInput {
    file: String,
    params: BTreeMap<String, i64>,
    traffic_source: String,
    caches: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    harness: Option<HarnessReport>,
    /// The kernel as the harness compiles it, with --measure.
    #[serde(skip)]
    to_measure: Option<KernelHarness>,
}

/// The timed run of `--measure`.
#[derive(Serialize)]
struct HarnessReport {
    compiler: String,
    seconds_per_run: f64,
    repetitions: u64,
}

/// Runs `roofline`.
pub fn run(args: &RooflineArgs, ui: &Ui) -> anyhow::Result<()> {
    let build = Build::from_args(args);
    let mut ceilings = ceilings(args, &build, ui)?;
    let options = Options {
        paper_rounding: args.paper_rounding,
        ..Options::default()
    };
    let (mut traffic, counts, mut kernel) = match (&args.counts, &args.kernel) {
        (Some(text), _) => {
            let mut counts = parse_counts(text)?;
            counts.simd_loads = !args.scalar_loads;
            (counts.traffic(), Some(counts), None)
        }
        (None, Some(path)) => {
            let (traffic, input) = kernel_traffic(args, &build, path, &ceilings, ui)?;
            (traffic, None, Some(input))
        }
        (None, None) => return Err(bad_input("give --counts or a kernel file")),
    };
    if let Some(text) = &args.volume {
        for (level, bytes) in parse_volumes(text)? {
            let slot = traffic
                .levels
                .iter_mut()
                .find(|l| l.level == level)
                .ok_or_else(|| {
                    bad_input(format!(
                        "--volume: {level} is not among the levels the kernel moves data through"
                    ))
                })?;
            slot.volume_bytes = Some(bytes);
        }
    }
    if traffic.chained_adds > 0 {
        time_add_latency(args, &mut ceilings)?;
    }
    let mut analysis = analyse(&traffic, &ceilings, options)?;
    if let Some(gflops) = args.measured_gflops {
        analysis = analysis.with_measured(gflops)?;
    }
    if let Some(input) = kernel.as_mut()
        && let Some(harness) = input.to_measure.take()
    {
        let run = measure(args, &build, &input.file, &harness, ui)?;
        analysis = analysis.with_measured(run.gflops)?;
        input.harness = Some(HarnessReport {
            compiler: format!("{} {}", args.cc.display(), build.flags.join(" ")),
            seconds_per_run: run.seconds_per_run,
            repetitions: run.repetitions,
        });
    }
    for warning in &analysis.warnings {
        ui.warn(warning);
    }
    if let Some(path) = &args.plot {
        let axis = match args.axis {
            Axis::FlopPerByte => RooflineAxis::FlopPerByte,
            Axis::BytesPerFlop => RooflineAxis::BytesPerFlop,
        };
        let svg = render_roofline_svg(&analysis, axis)?;
        write_atomically(path, svg.as_bytes())?;
        ui.note(format!("wrote {}", path.display()));
    }
    if args.json {
        crate::cmd::print_json(&Output {
            analysis: &analysis,
            counts: counts.as_ref(),
            kernel: kernel.as_ref(),
        })
    } else {
        let mut text = String::new();
        if let Some(input) = &kernel {
            text.push_str(&render_kernel_input(input));
        }
        text.push_str(&render_roofline(&analysis, counts.as_ref()));
        crate::cmd::print_text(&text)
    }
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
}

impl Build {
    fn from_args(args: &RooflineArgs) -> Build {
        let flags: Vec<String> = args
            .cflags
            .as_deref()
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
                "-march=native" => {
                    Some(Some(loopscope_probe::Simd::detect().vector_bytes().max(16)))
                }
                "-mavx512f" => Some(Some(64)),
                "-mavx2" | "-mavx" => Some(Some(32)),
                other if other.starts_with("-march=") => Some(None),
                _ => None,
            })
            .unwrap_or(Some(16));
        Build {
            flags,
            vector_bytes,
            reassociates,
        }
    }
}

fn render_kernel_input(input: &KernelInput) -> String {
    let params: Vec<String> = input
        .params
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    let mut out = format!(
        "kernel       {} ({}), traffic from the {} of {}, steady state of repeated runs\n",
        input.file,
        params.join(", "),
        input.traffic_source,
        input.caches.join(", ")
    );
    if let Some(h) = &input.harness {
        out.push_str(&format!(
            "measured     {}: {:.3e} s per run, fastest of 5 samples of {} runs (thread CPU time)\n",
            h.compiler, h.seconds_per_run, h.repetitions
        ));
    }
    out.push('\n');
    out
}

fn read_kernel(
    args: &RooflineArgs,
    path: &Path,
    ui: &Ui,
) -> anyhow::Result<(String, Kernel, Vec<i64>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad_input(format!("{}: cannot read: {e}", path.display())))?;
    let kernel = loopscope_kernel::parse_kernel(&text, &path.display().to_string())?;
    for unused in kernel.unused_definitions(&args.define) {
        ui.warn(format!("-D {unused}: the kernel does not use `{unused}`"));
    }
    let params = kernel.param_values(&args.define)?;
    Ok((text, kernel, params))
}

/// Per-level traffic of a kernel file, from the simulator of the given or the machine's caches.
fn kernel_traffic(
    args: &RooflineArgs,
    build: &Build,
    path: &Path,
    ceilings: &Ceilings,
    ui: &Ui,
) -> anyhow::Result<(Traffic, KernelInput)> {
    let (text, kernel, params) = read_kernel(args, path, ui)?;
    // Built before simulating, so a kernel the harness cannot take fails fast.
    let to_measure = args
        .measure
        .then(|| KernelHarness::new(&kernel, &params, &text))
        .transpose()?;
    let levels = match &args.cache {
        Some(spec) => parse_cache_spec(spec)?,
        None => {
            let machine = crate::inputs::load_machine(args.machine.as_deref(), ui)?;
            levels_from_machine(&machine).with_context(|| match &args.machine {
                Some(p) => format!("{}: cannot simulate its caches (give --cache)", p.display()),
                None => "cannot simulate this machine's caches (give --cache)".to_owned(),
            })?
        }
    };
    let layout = kernel.layout(&params, &[])?;
    let timed = |level| ceilings.level(level).is_some();
    let simulate = || -> anyhow::Result<Traffic> {
        let bar = ui.progress_bar(simulated_accesses(&kernel, &params, &layout)?, "simulating");
        let traffic = simulated_traffic(&kernel, &params, &layout, &levels, timed, &mut |n| {
            bar.inc(n)
        })?;
        bar.finish_and_clear();
        Ok(traffic)
    };
    let (traffic, traffic_source) = match args.traffic {
        TrafficSource::Sim => (simulate()?, "exact cache simulator".to_owned()),
        TrafficSource::Model => {
            check_model_caches(&levels)?;
            let command = crate::inputs::level_command()?;
            let request = LevelsRequest::counts(
                path,
                &args.define,
                None,
                args.max_operations,
                args.time_limit,
                &command,
            );
            let bar = ui.progress_bar(0, "modelling");
            let outcomes: Vec<_> = model_levels(&request, &levels)
                .into_iter()
                .map(|o| (o.refs, o.duration_s))
                .collect();
            bar.finish_and_clear();
            let (traffic, per_level) =
                modelled_traffic(&kernel, &params, &layout, &levels, timed, &outcomes)?;
            with_simulated_fallback(traffic, &per_level, path, ui, simulate)?
        }
    };
    let traffic = for_build(traffic, build, &kernel, &params, &layout, ui)?;
    let input = KernelInput {
        file: path.display().to_string(),
        params: kernel.params.iter().cloned().zip(params).collect(),
        traffic_source,
        caches: levels
            .iter()
            .map(|l| format!("{} {}", l.name, format_bytes(l.size_bytes)))
            .collect(),
        harness: None,
        to_measure,
    };
    Ok((traffic, input))
}

/// The in-order sums as the build compiles them: none when it may reassociate them, and as
/// many side by side as its vectors hold.
fn for_build(
    mut traffic: Traffic,
    build: &Build,
    kernel: &Kernel,
    params: &[i64],
    layout: &loopscope_kernel::Layout,
    ui: &Ui,
) -> anyhow::Result<Traffic> {
    if traffic.chained_adds == 0 {
        return Ok(traffic);
    }
    if build.reassociates {
        ui.note("--cflags let the compiler reassociate floating-point sums: no chain term");
        traffic.chained_adds = 0;
    } else if let Some(bytes) = build
        .vector_bytes
        .filter(|&b| u64::from(b) != BASELINE_VECTOR_BYTES)
    {
        traffic.chained_adds = in_order_sums(kernel, params, layout, u64::from(bytes))?;
    }
    Ok(traffic)
}

/// The model's traffic, with the levels it could not do taken from the simulator (with a
/// warning naming each and why), and the description of where the traffic came from.
fn with_simulated_fallback(
    mut traffic: Traffic,
    per_level: &[ModelledLevel],
    path: &Path,
    ui: &Ui,
    simulate: impl FnOnce() -> anyhow::Result<Traffic>,
) -> anyhow::Result<(Traffic, String)> {
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
            ui.warn(format!(
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
    args: &RooflineArgs,
    build: &Build,
    file: &str,
    harness: &KernelHarness,
    ui: &Ui,
) -> anyhow::Result<HarnessRun> {
    let flags: Vec<&str> = build.flags.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().context("cannot create a directory for the harness")?;
    let bar = ui.progress_bar(0, "measuring");
    let run = run_harness(
        &harness_source(harness),
        harness.flops(),
        &args.cc,
        &flags,
        dir.path(),
    );
    bar.finish_and_clear();
    run.with_context(|| format!("{file}: --measure"))
}

/// Ppeak, Peff and bandwidths: a paper profile or a machine (file or detected), then flags.
fn ceilings(args: &RooflineArgs, build: &Build, ui: &Ui) -> anyhow::Result<Ceilings> {
    let mut ceilings = match &args.profile {
        Some(name) => paper_profile(name).ok_or_else(|| {
            bad_input(format!(
                "--profile: unknown profile `{name}` (expected one of {})",
                PAPER_PROFILES.join(", ")
            ))
        })?,
        None => machine_ceilings(args, build, ui)?,
    };
    if args.peak_gflops.is_some() || args.effective_gflops.is_some() {
        let peak = args.peak_gflops.unwrap_or(ceilings.peak_gflops);
        let effective = args
            .effective_gflops
            .unwrap_or(ceilings.effective_gflops.min(peak));
        let mut updated = Ceilings::new(peak, effective, "--peak-gflops/--effective-gflops")
            .context("--peak-gflops/--effective-gflops")?;
        updated.levels = std::mem::take(&mut ceilings.levels);
        updated.add_latency = ceilings.add_latency.take();
        ceilings = updated;
    }
    if let Some(text) = &args.bandwidth {
        for (level, bandwidth) in parse_bandwidths(text)? {
            ceilings
                .set_bandwidth(level, bandwidth, "--bandwidth")
                .context("--bandwidth")?;
        }
    }
    if let Some(text) = &args.store_bandwidth {
        for (level, bandwidth) in parse_bandwidths(text)? {
            let BandwidthFn::Constant { gb_per_s } = bandwidth else {
                return Err(bad_input(format!(
                    "--store-bandwidth: {level}: a store bandwidth is one number of GB/s"
                )));
            };
            ceilings
                .set_store_bandwidth(level, gb_per_s, "--store-bandwidth")
                .context("--store-bandwidth")?;
        }
    }
    if let Some(ns) = args.add_latency_ns {
        ceilings
            .set_add_latency(ns, "--add-latency-ns")
            .context("--add-latency-ns")?;
    }
    Ok(ceilings)
}

/// For a kernel with in-order sums and no add latency from the flag or the machine file: on
/// this machine, timed on the spot (a 10 ms chain of dependent additions); for another
/// machine's file or a profile, none (the analysis warns).
fn time_add_latency(args: &RooflineArgs, ceilings: &mut Ceilings) -> anyhow::Result<()> {
    if ceilings.add_latency.is_none() && args.machine.is_none() && args.profile.is_none() {
        let timer = loopscope_probe::Timer::calibrate(std::time::Duration::from_millis(20));
        let ns = loopscope_probe::add_latency_ns(&timer, 30);
        ceilings.set_add_latency(ns, "timed on this machine, dependent-add chain")?;
    }
    Ok(())
}

fn machine_ceilings(args: &RooflineArgs, build: &Build, ui: &Ui) -> anyhow::Result<Ceilings> {
    let (machine, mut name) = match &args.machine {
        Some(path) => (read_machine_file(path)?, path.display().to_string()),
        None if args.peak_gflops.is_some() => (Machine::unknown(), String::new()),
        None => (
            crate::inputs::load_machine(None, ui)?,
            "this machine".to_owned(),
        ),
    };
    let threads = args.threads.or(args.measure.then_some(1));
    let measured_peak = machine
        .measured
        .as_ref()
        .and_then(|m| m.peak_gflops.as_ref())
        .map(|p| match threads {
            // The FMA kernel scales with the cores it runs on.
            Some(t) if p.threads > 0 => p.dp / f64::from(p.threads) * f64::from(t),
            _ => p.dp,
        })
        .filter(|p| p.is_finite() && *p > 0.0);
    let theoretical = theoretical_peak_gflops(&machine, threads);
    let (peak, effective, source) = match (args.peak_gflops, theoretical, measured_peak) {
        (Some(peak), _, measured) => (peak, measured.unwrap_or(peak).min(peak), "--peak-gflops"),
        // A turbo clock can beat the nominal one: the measured rate is then the better peak.
        (None, Some(t), Some(m)) => (
            t.max(m),
            m,
            "theoretical from the nominal clock; Peff measured",
        ),
        (None, Some(t), None) => (t, t, "theoretical from the nominal clock"),
        (None, None, Some(m)) => (m, m, "measured peak"),
        (None, None, None) => {
            return Err(bad_input(format!(
                "{}: no peak FLOP rate (no nominal clock, no measured peak): run `loopscope \
                 probe --out machine.toml` or give --peak-gflops",
                if name.is_empty() {
                    "machine"
                } else {
                    name.as_str()
                }
            )));
        }
    };
    if name.is_empty() {
        name = "machine".to_owned();
    }
    let source = match threads {
        Some(t) => format!(
            "{name}: {source}, for {t} thread{}",
            if t == 1 { "" } else { "s" }
        ),
        None => format!("{name}: {source}"),
    };
    let mut ceilings = Ceilings::new(peak, effective, source).context("--peak-gflops")?;
    if let Some(measured) = &machine.measured {
        // L1's bandwidth at the width the build uses, when the build is known.
        let l1_vector_bytes = (args.measure || args.cflags.is_some())
            .then_some(build.vector_bytes)
            .flatten();
        ceilings.add_measured(measured, threads, &name, l1_vector_bytes)?;
        if let Some(ns) = measured.add_latency_ns {
            ceilings.set_add_latency(ns, format!("{name}: measured"))?;
        }
    }
    if ceilings.levels.is_empty() && args.bandwidth.is_none() {
        ui.note(format!("{name}: no measured bandwidths"));
    }
    Ok(ceilings)
}
