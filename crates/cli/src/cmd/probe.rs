//! `loopscope probe`: measure this machine and fill the `measured` section of a machine file.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use clap::{Args, ValueEnum};
use loopscope_machine::{machine_to_update, write_atomically, write_measured_machine_file};
use loopscope_probe::{ProbeOptions, run_baseline, run_probe};

use crate::failure::bad_input;
use crate::ui::Ui;

/// Arguments of `probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the measurements into this machine file's `measured` section (the file is
    /// created from the detected machine when it does not exist).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write SVG plots of the curves, knees marked, into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// About 10 s instead of about 60 s (coarser grids, fewer repeats).
    #[arg(long)]
    pub quick: bool,
    /// Update `--out` even when it describes another processor model.
    #[arg(long)]
    pub force: bool,
    /// Instead of probing, compare in-place code rewriting with the paper's recompile method
    /// over the same instruction-cache sweep (0 to 40 KB in 400-byte steps).
    #[arg(long, value_enum, value_name = "METHOD")]
    pub baseline: Option<Baseline>,
    /// Seed of the random permutations.
    #[arg(long, default_value_t = 1, hide = true)]
    pub seed: u64,
}

/// Baselines `--baseline` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    /// Write a C source per size, compile it with `cc`, run it (spec 003's old method).
    Recompile,
}

/// Runs `probe`.
pub fn run(args: &ProbeArgs, ui: &Ui) -> anyhow::Result<()> {
    let stop = interrupt_flag(ui);
    if args.baseline.is_some() {
        return baseline(args, ui, &stop);
    }
    let detected = loopscope_machine::detect().context("cannot detect this machine")?;
    let mut machine = match &args.out {
        Some(path) => machine_to_update(path, detected, args.force)?,
        None => detected,
    };
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).map_err(|e| {
            bad_input(format!(
                "{}: cannot create the plot directory: {e}",
                dir.display()
            ))
        })?;
    }
    let bar = ui.progress_bar(1000, "probe");
    let mut progress = |phase: &str, fraction: f64| {
        bar.set_message(phase.to_owned());
        bar.set_position((fraction * 1000.0) as u64);
    };
    let options = ProbeOptions {
        quick: args.quick,
        seed: args.seed,
    };
    let report = run_probe(&machine, &options, &stop, &mut progress)?;
    bar.finish_and_clear();
    for note in report
        .measured
        .notes
        .iter()
        .filter(|n| n.contains("not pinned") || n.contains("huge pages: none"))
    {
        ui.warn(note);
    }
    let mut written = None;
    if let Some(path) = &args.out {
        machine.measured = Some(report.measured.clone());
        let to = write_measured_machine_file(path, &machine)?;
        if to == *path {
            ui.note(format!("wrote the measured section of {}", path.display()));
        } else {
            ui.warn(format!(
                "interrupted: {} keeps its complete earlier result; the partial one went to {}",
                path.display(),
                to.display()
            ));
        }
        written = Some(to);
    }
    if let Some(dir) = &args.plot {
        for (name, svg) in loopscope_report::probe_plots(&report, &machine)? {
            write_atomically(&dir.join(&name), svg.as_bytes())?;
        }
        ui.note(format!("wrote plots into {}", dir.display()));
    }
    if args.json {
        crate::cmd::print_json(&report)?;
    } else {
        let shown = crate::cmd::machine::printable_machine(&machine);
        crate::cmd::print_text(&loopscope_report::render_probe(&report, &shown))?;
    }
    if report.measured.partial {
        match written {
            Some(to) => anyhow::bail!(
                "interrupted: the results above are partial (written marked partial to {})",
                to.display()
            ),
            None => anyhow::bail!("interrupted: the results above are partial"),
        }
    }
    Ok(())
}

/// A flag SIGINT sets, so that measuring stops between points and keeps what it has.
fn interrupt_flag(ui: &Ui) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)) {
        ui.warn(format!(
            "Ctrl-C will end the run without keeping results: {e}"
        ));
    }
    stop
}

fn baseline(args: &ProbeArgs, ui: &Ui, stop: &AtomicBool) -> anyhow::Result<()> {
    if args.out.is_some() || args.plot.is_some() {
        return Err(bad_input(
            "--baseline compares sweep times only; it takes neither --out nor --plot",
        ));
    }
    // The paper's 0 to 40 KB sweep: 100 points of 400 bytes (25 points of 1600 with --quick).
    let (step, points) = if args.quick { (1600, 25) } else { (400, 100) };
    let dir =
        tempfile::tempdir().context("cannot create a temporary directory for the C sources")?;
    ui.note(format!(
        "compiling {points} C programs in {}",
        dir.path().display()
    ));
    let report = run_baseline(step, points, dir.path(), stop)?;
    if args.json {
        crate::cmd::print_json(&report)?;
    } else {
        crate::cmd::print_text(&loopscope_report::render_baseline(&report))?;
    }
    if report.partial {
        anyhow::bail!("interrupted: the sweep above is partial");
    }
    Ok(())
}
