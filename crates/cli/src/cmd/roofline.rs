//! `loopscope roofline`: the cache-aware roofline prediction of a kernel, with the classic
//! roofline beside it.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use loopscope_machine::{Machine, read_machine_file, write_atomically};
use loopscope_report::{RooflineAxis, render_roofline, render_roofline_svg};
use loopscope_roofline::{
    Analysis, Ceilings, Counts, Options, PAPER_PROFILES, analyse, paper_profile, parse_bandwidths,
    parse_counts, parse_volumes, theoretical_peak_gflops,
};
use serde::Serialize;

use crate::failure::bad_input;
use crate::ui::Ui;

/// Arguments of `roofline`.
#[derive(Debug, Args)]
pub struct RooflineArgs {
    /// Per-iteration references served from each level, in 8-byte words (a store counts 2), and
    /// FLOPs: `mem=3,l2=6,flops=78`. Also `l1s=`, `l1l=` (L1 references with short and long
    /// spacing, for the L1 conditions), `l3=`, `l1=` (a timed L1), `word=`, `iterations=`.
    #[arg(long, value_name = "KEY=N,...")]
    pub counts: String,
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
    /// Access volume in bytes at which a volume-dependent bandwidth is evaluated, per level:
    /// `L3=2457600` (default: the bytes the kernel moves through the level).
    #[arg(long, value_name = "LEVEL=BYTES,...")]
    pub volume: Option<String>,
    /// Theoretical peak Ppeak in GFLOP/s (whole chip); fractions of peak refer to it.
    #[arg(long, value_name = "GFLOP/s")]
    pub peak_gflops: Option<f64>,
    /// Attainable compute rate Peff in GFLOP/s (default: the measured peak, else Ppeak).
    #[arg(long, value_name = "GFLOP/s")]
    pub effective_gflops: Option<f64>,
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

/// Horizontal axis of the plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Axis {
    /// Arithmetic intensity, FLOP per byte (the classic look).
    FlopPerByte,
    /// Required bytes per FLOP, b/f (the paper's figures).
    BytesPerFlop,
}

/// The JSON document: the analysis plus the counts it came from.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    analysis: &'a Analysis,
    counts: &'a Counts,
}

/// Runs `roofline`.
pub fn run(args: &RooflineArgs, ui: &Ui) -> anyhow::Result<()> {
    let mut counts = parse_counts(&args.counts)?;
    counts.simd_loads = !args.scalar_loads;
    let ceilings = ceilings(args, ui)?;
    let options = Options {
        paper_rounding: args.paper_rounding,
        ..Options::default()
    };
    let mut traffic = counts.traffic();
    if let Some(text) = &args.volume {
        for (level, bytes) in parse_volumes(text)? {
            let slot = traffic
                .levels
                .iter_mut()
                .find(|l| l.level == level)
                .ok_or_else(|| {
                    bad_input(format!(
                        "--volume: {level} is not among the levels of --counts"
                    ))
                })?;
            slot.volume_bytes = Some(bytes);
        }
    }
    let mut analysis = analyse(&traffic, &ceilings, options)?;
    if let Some(gflops) = args.measured_gflops {
        analysis = analysis.with_measured(gflops)?;
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
            counts: &counts,
        })
    } else {
        crate::cmd::print_text(&render_roofline(&analysis, Some(&counts)))
    }
}

/// Ppeak, Peff and bandwidths: a paper profile or a machine (file or detected), then flags.
fn ceilings(args: &RooflineArgs, ui: &Ui) -> anyhow::Result<Ceilings> {
    let mut ceilings = match &args.profile {
        Some(name) => paper_profile(name).ok_or_else(|| {
            bad_input(format!(
                "--profile: unknown profile `{name}` (expected one of {})",
                PAPER_PROFILES.join(", ")
            ))
        })?,
        None => machine_ceilings(args, ui)?,
    };
    if args.peak_gflops.is_some() || args.effective_gflops.is_some() {
        let peak = args.peak_gflops.unwrap_or(ceilings.peak_gflops);
        let effective = args
            .effective_gflops
            .unwrap_or(ceilings.effective_gflops.min(peak));
        let mut updated = Ceilings::new(peak, effective, "--peak-gflops/--effective-gflops")
            .context("--peak-gflops/--effective-gflops")?;
        updated.levels = std::mem::take(&mut ceilings.levels);
        ceilings = updated;
    }
    if let Some(text) = &args.bandwidth {
        for (level, bandwidth) in parse_bandwidths(text)? {
            ceilings
                .set_bandwidth(level, bandwidth, "--bandwidth")
                .context("--bandwidth")?;
        }
    }
    Ok(ceilings)
}

fn machine_ceilings(args: &RooflineArgs, ui: &Ui) -> anyhow::Result<Ceilings> {
    let (machine, mut name) = match &args.machine {
        Some(path) => (read_machine_file(path)?, path.display().to_string()),
        None if args.peak_gflops.is_some() => (Machine::unknown(), String::new()),
        None => (
            crate::cmd::machine::load_machine(None, ui)?,
            "this machine".to_owned(),
        ),
    };
    let measured_peak = machine
        .measured
        .as_ref()
        .and_then(|m| m.peak_gflops.as_ref())
        .map(|p| p.dp)
        .filter(|p| p.is_finite() && *p > 0.0);
    let theoretical = theoretical_peak_gflops(&machine);
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
    let source = format!("{name}: {source}");
    let mut ceilings = Ceilings::new(peak, effective, source).context("--peak-gflops")?;
    if let Some(measured) = &machine.measured {
        ceilings.add_measured(measured, &name)?;
    }
    if ceilings.levels.is_empty() && args.bandwidth.is_none() {
        ui.note(format!("{name}: no measured bandwidths"));
    }
    Ok(ceilings)
}
