//! `loopscope misses`: compulsory and conflict misses of every reference of a kernel, per cache
//! level, from the analytic model of spec 000 (no simulation), with `--check` against the exact
//! simulator, `--sources` for which references compete for the sets of the conflict misses,
//! `--symbolic` for formulas in one parameter and `--scan` for its conflict spikes.

use std::path::PathBuf;

use clap::Args;
use loopscope_analytic::{Misses, MissesRequest, MissesWait, misses, misses_wait};

use crate::inputs::{CachesArg, cache_levels, level_command, stop_level_processes_on_signal};
use crate::ui::Ui;

/// Arguments of `misses`.
#[derive(Debug, Args)]
pub struct MissesArgs {
    /// Kernel file in the kerncraft C subset.
    #[arg(value_name = "KERNEL.c")]
    pub kernel: PathBuf,
    /// Value of a kernel symbol, e.g. `-D N=1000` (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Machine file whose data caches to model (default: this machine, detected).
    #[arg(
        short = 'm',
        long = "machine",
        value_name = "FILE",
        conflicts_with = "cache"
    )]
    pub machine: Option<PathBuf>,
    /// Cache levels, innermost first: `NAME=SIZE:WAYS:LINE`, comma-separated (LRU,
    /// write-allocate: the model's cache).
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
    /// Which sizes of the machine's caches to use: `effective` (what the machine file's probe
    /// measured, where it has them) or `advertised` (sysfs, CPUID, the file's `[[caches]]`).
    #[arg(long, value_enum, default_value_t = CachesArg::Effective, conflicts_with = "cache")]
    pub caches: CachesArg,
    /// Array base addresses, e.g. `A=0,B=800,C=0x640` (others follow, 64-byte aligned).
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Also run the exact simulator on each level alone and print both, with the difference.
    #[arg(long)]
    pub check: bool,
    /// Print the intermediate integer sets of spec 000 (hit sources, pieces, conflict factors).
    #[arg(long)]
    pub explain: bool,
    /// Also say where the conflict misses come from: for each reference with conflict misses,
    /// which references brought other lines into the same set since the line's last use, and
    /// in how many of its misses (a "conflict sources" table per level; `sources` in JSON).
    #[arg(long)]
    pub sources: bool,
    /// Bound on isl's elementary operations for each reference of a level, building its sets
    /// and again for each count of them (formulas count thousands of times); a level that
    /// needs more is reported as not modelled instead of running for hours.
    #[arg(long, value_name = "N", default_value_t = 200_000_000)]
    pub max_operations: u64,
    /// Seconds each level may take: the model, and for a level it did not finish in time the
    /// exact simulator (when its estimate fits), before the level is reported missing (default
    /// 30; the default is announced before starting, with what the simulation would take).
    #[arg(long, value_name = "SECONDS", value_parser = crate::values::seconds, allow_hyphen_values = true)]
    pub time_limit: Option<f64>,
    /// Report a level the model does not finish within the time limit as missing (exit 1 if
    /// none is modelled) instead of simulating it.
    #[arg(long)]
    pub model_only: bool,
    /// Give every count as a formula in these parameters, `NAME[=LO..HI][,NAME...]` (a
    /// quasi-polynomial fitted from exact counts, with the range where it was verified; in
    /// several parameters, one per chamber of the parameter space). A range LO..HI fits the
    /// formulas to those values and checks every one. The other parameters need -D values.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["check", "sources", "explain"])]
    pub symbolic: Option<String>,
    /// With --symbolic: evaluate the formulas at a point, `NAME=VALUE[,NAME=VALUE...]` giving
    /// every symbolic parameter (repeatable; prefix differences of two values are the misses of
    /// a range, spec §4.4).
    // Parsed by the analytic model rather than by clap, so that every error is one line.
    #[arg(long, value_name = "NAME=VALUE,...")]
    pub at: Vec<String>,
    /// Model every value of one parameter, `NAME=LO..HI[:STEP]` (STEP 1 by default, at most 4096
    /// values; the parameter may size arrays), and report the values where conflict misses
    /// spike. A value is a spike at a level when its conflict misses as a fraction of its
    /// accesses are at least twice the median fraction of the 8 values before it and of the 8
    /// after it, and at least one percentage point above each: fractions, not counts, so that
    /// misses growing with the size are no spike; a median, so that one spike does not hide
    /// its neighbour. The first and last values are not judged.
    // Parsed by the analytic model rather than by clap, so that every error is one line.
    #[arg(long, value_name = "NAME=LO..HI[:STEP]")]
    pub scan: Option<String>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs `misses`.
pub fn run(args: &MissesArgs, ui: &Ui) -> anyhow::Result<()> {
    let levels = cache_levels(
        args.cache.as_deref(),
        args.machine.as_deref(),
        ui,
        "model",
        args.caches,
    )?;
    let command = level_command()?;
    stop_level_processes_on_signal(ui);
    let request = MissesRequest {
        kernel: &args.kernel,
        define: &args.define,
        base: args.base.as_deref(),
        check: args.check,
        explain: args.explain,
        sources: args.sources,
        max_operations: args.max_operations,
        time_limit_s: args.time_limit.unwrap_or(DEFAULT_TIME_LIMIT_S),
        model_only: args.model_only,
        symbolic: args.symbolic.as_deref(),
        at: &args.at,
        scan: args.scan.as_deref(),
        command: &command,
    };
    if args.time_limit.is_none()
        && let Some(wait) = misses_wait(&request, &levels)?
    {
        ui.done(wait_message(&wait, request.time_limit_s));
    }
    let result = misses(&request, &levels, ui)?;
    if args.json {
        for warning in result.unlisted_warnings() {
            ui.warn(warning);
        }
        crate::cmd::print_json(&result)?;
    } else {
        crate::cmd::print_text(&loopscope_report::render_misses(&result))?;
    }
    check_outcome(&result)
}

/// `--check` fails (exit 1) when the model and the simulator differ, after printing both, so
/// that a script sees it: the first difference named, and how many more there are. It fails
/// too when the model counted no level, since a script gating on the check must not pass
/// without a comparison.
fn check_outcome(result: &Misses) -> anyhow::Result<()> {
    let Misses::Counts(report) = result else {
        return Ok(());
    };
    if let Some(check) = &report.check
        && check.equal.is_none()
    {
        let levels: Vec<&str> = report.levels.iter().map(|l| l.name.as_str()).collect();
        anyhow::bail!(
            "--check: nothing compared: the model counted no level ({} not modelled)",
            levels.join(", ")
        );
    }
    match report.check_differences().as_slice() {
        [] => Ok(()),
        [one] => anyhow::bail!("--check: the model differs from the simulator at {one}"),
        [first, rest @ ..] => anyhow::bail!(
            "--check: the model differs from the simulator at {first}, and at {} more (see the table)",
            rest.len()
        ),
    }
}

/// Seconds each level may take when `--time-limit` is not given.
const DEFAULT_TIME_LIMIT_S: f64 = 30.0;

/// The one line said before the default time limit starts running: how long the command may
/// take and what happens past the limit.
fn wait_message(wait: &MissesWait, limit_s: f64) -> String {
    let past = match wait.simulation {
        None => "a level not modelled by then is reported missing (--model-only)".to_owned(),
        Some(s) if s.fits(limit_s) => format!(
            "a level not modelled by then is simulated instead ({})",
            about_seconds(s.seconds)
        ),
        Some(s) => format!(
            "a level not modelled by then is reported missing (simulating would take {})",
            about_seconds(s.seconds)
        ),
    };
    format!(
        "misses may take up to {:.0} s: {limit_s} s per level for the model (--time-limit); {past}",
        wait.longest_s(limit_s)
    )
}

fn about_seconds(seconds: f64) -> String {
    match seconds {
        s if s < 0.1 => "under 0.1 s".to_owned(),
        s if s < 10.0 => format!("about {s:.1} s"),
        s => format!("about {s:.0} s"),
    }
}
