//! `loopscope roofline`: the cache-aware roofline prediction of a kernel, with the classic
//! roofline beside it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use loopscope_machine::{Machine, write_atomically};
use loopscope_report::{RooflineAxis, render_roofline_report, render_roofline_svg};
use loopscope_roofline::{
    CacheSizes, KernelInputRequest, MachineInput, ModelBudget, RooflineInput, RooflineRequest,
    run_roofline,
};

use crate::inputs::{
    CachesArg, cache_levels, level_command, load_machine, stop_level_processes_on_signal,
};
use crate::ui::Ui;

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
    /// Which cache sizes a kernel file's traffic is simulated with: `effective` (the sizes the
    /// machine file's probe measured, where it found them) or `advertised` (sysfs, CPUID, the
    /// file's `[[caches]]`). Not with --cache, whose sizes are used as given.
    #[arg(long, value_enum, default_value_t = CachesArg::Effective, requires = "kernel")]
    pub caches: CachesArg,
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
        value_parser = crate::values::seconds,
        allow_hyphen_values = true,
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
    /// in-order sums into one vector of partial sums; `-march=native`/`-mavx2`/`-mavx512f`
    /// widen the vectors (L1's ports from probe's runs at that width, more sums side by side).
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
    #[arg(
        long,
        value_name = "GFLOP/s",
        value_parser = crate::values::positive,
        allow_hyphen_values = true
    )]
    pub peak_gflops: Option<f64>,
    /// Attainable compute rate Peff in GFLOP/s (default: the measured peak, else Ppeak).
    #[arg(
        long,
        value_name = "GFLOP/s",
        value_parser = crate::values::positive,
        allow_hyphen_values = true
    )]
    pub effective_gflops: Option<f64>,
    /// Latency of a dependent floating-point addition in ns, for kernels that sum in order
    /// through their innermost loop (default: the machine file's, else timed on this machine).
    #[arg(
        long,
        value_name = "NS",
        value_parser = crate::values::positive,
        allow_hyphen_values = true
    )]
    pub add_latency_ns: Option<f64>,
    /// A measured rate of the kernel, printed beside the prediction with the error.
    #[arg(
        long,
        value_name = "GFLOP/s",
        value_parser = crate::values::positive,
        allow_hyphen_values = true
    )]
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

/// Runs `roofline`.
pub fn run(args: &RooflineArgs, ui: &Ui) -> anyhow::Result<()> {
    check_flags(args)?;
    let described = match (&args.profile, &args.machine) {
        (Some(_), _) => None,
        (None, Some(path)) => Some((load_machine(Some(path), ui)?, path.display().to_string())),
        (None, None) if args.peak_gflops.is_some() => Some((Machine::unknown(), String::new())),
        (None, None) => Some((load_machine(None, ui)?, "this machine".to_owned())),
    };
    // Only this machine's add latency can be timed here.
    let time_add_latency = || {
        let timer = loopscope_probe::Timer::calibrate(std::time::Duration::from_millis(20));
        loopscope_probe::add_latency_ns(&timer, 30)
    };
    let machine = match &described {
        Some((machine, name)) => MachineInput::Machine {
            machine,
            name,
            time_add_latency: args.machine.is_none().then_some(&time_add_latency as _),
        },
        None => MachineInput::Profile(args.profile.as_deref().unwrap_or_default()),
    };
    let command = level_command()?;
    stop_level_processes_on_signal(ui);
    let input = match (&args.counts, &args.kernel) {
        (Some(text), _) => RooflineInput::Counts {
            text,
            simd_loads: !args.scalar_loads,
        },
        (None, Some(path)) => RooflineInput::Kernel(KernelInputRequest {
            path,
            define: &args.define,
            levels: cache_levels(
                args.cache.as_deref(),
                args.machine.as_deref(),
                ui,
                "simulate",
                CachesArg::Advertised,
            )?,
            // Sized here from the advertised levels, so the output can name both.
            cache_sizes: match &args.cache {
                Some(_) => CacheSizes::Given,
                None => args.caches.sizes(),
            },
            model: (args.traffic == TrafficSource::Model).then_some(ModelBudget {
                time_limit_s: args.time_limit,
                max_operations: args.max_operations,
                command: &command,
            }),
            cflags: args.cflags.as_deref(),
            measure: args.measure.then_some(args.cc.as_path()),
            native_vector_bytes: loopscope_probe::Simd::detect().vector_bytes(),
        }),
        (None, None) => return Err(crate::failure::bad_input("give --counts or a kernel file")),
    };
    let request = RooflineRequest {
        input,
        machine,
        bandwidth: args.bandwidth.as_deref(),
        store_bandwidth: args.store_bandwidth.as_deref(),
        volume: args.volume.as_deref(),
        threads: args.threads,
        peak_gflops: args.peak_gflops,
        effective_gflops: args.effective_gflops,
        add_latency_ns: args.add_latency_ns,
        measured_gflops: args.measured_gflops,
        paper_rounding: args.paper_rounding,
    };
    let roofline = run_roofline(&request, ui)?;
    if let Some(path) = &args.plot {
        let axis = match args.axis {
            Axis::FlopPerByte => RooflineAxis::FlopPerByte,
            Axis::BytesPerFlop => RooflineAxis::BytesPerFlop,
        };
        let svg = render_roofline_svg(&roofline.analysis, axis)?;
        write_atomically(path, svg.as_bytes())?;
        ui.note(format!("wrote {}", path.display()));
    }
    if args.json {
        crate::cmd::print_json(&roofline)
    } else {
        crate::cmd::print_text(&render_roofline_report(&roofline))
    }
}

/// Refuses flags that cannot do what they say, before anything is loaded, compiled or run.
fn check_flags(args: &RooflineArgs) -> anyhow::Result<()> {
    if let Some(threads) = args.threads.filter(|&t| t > 1)
        && args.measure
    {
        return Err(crate::failure::bad_input(format!(
            "--threads {threads} with --measure: the harness runs the kernel on one thread, so \
             it would compare a {threads}-thread prediction with a 1-thread measurement; give \
             --threads 1 (or leave it out) to measure, or drop --measure"
        )));
    }
    if let Some(path) = &args.plot {
        let is_svg = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        if !is_svg {
            return Err(crate::failure::bad_input(format!(
                "--plot {}: the plot is written as SVG; give a file name ending in .svg",
                path.display()
            )));
        }
    }
    Ok(())
}
