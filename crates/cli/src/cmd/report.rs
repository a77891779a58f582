//! `loopscope report`: the loop-call-context tree of a profile.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::{Args, ValueEnum};
use loopscope_machine::write_atomically;
use loopscope_profile::{HotRule, Profile, ProfileReport, build_report};
use loopscope_report::{
    FirefoxInput, NodeFilter, render_firefox_profile, render_profile_by_loop, render_profile_dot,
    render_profile_header, render_profile_tree,
};

use crate::cmd::{print_json, print_text};
use crate::failure::bad_input;
use crate::ui::Ui;

/// How nodes are grouped.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum By {
    /// One node per calling context (the loop-call-context tree).
    Context,
    /// One row per function or loop, summed over its contexts.
    Loop,
}

/// Arguments of `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The profile `record` wrote.
    #[arg(value_name = "PROFILE", default_value = "loopscope.profile")]
    pub profile: PathBuf,
    /// Print one JSON document (the whole tree, hot nodes flagged).
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print Graphviz DOT of the hot nodes (`| dot -Tsvg > tree.svg`).
    #[arg(long)]
    pub dot: bool,
    /// Hot nodes by the paper's rule: inclusive share at least that of the node with the N-th
    /// largest self share.
    #[arg(long, value_name = "N", conflicts_with = "threshold")]
    pub hot: Option<usize>,
    /// Hot nodes: inclusive share at least P percent [default: 1].
    #[arg(long, value_name = "P")]
    pub threshold: Option<f64>,
    /// Show every node, hot or not.
    #[arg(long)]
    pub all: bool,
    /// Group by calling context (tree) or by loop (flat).
    #[arg(long, value_enum, default_value = "context")]
    pub by: By,
    /// Also write the profile in the Firefox Profiler's format to this file, loops as frames
    /// under their functions (open it at https://profiler.firefox.com).
    #[arg(long, value_name = "OUT.json")]
    pub firefox: Option<PathBuf>,
}

/// Runs `report`.
pub fn run(args: &ReportArgs, ui: &Ui) -> anyhow::Result<()> {
    let rule = match (args.hot, args.threshold) {
        (Some(0), _) => return Err(bad_input("--hot 0: expected a rank of 1 or more")),
        (Some(rank), _) => HotRule::Rank(rank),
        (None, Some(p)) if !(0.0..=100.0).contains(&p) => {
            return Err(bad_input(format!(
                "--threshold {p}: expected a percentage from 0 to 100"
            )));
        }
        (None, p) => HotRule::Share(p.unwrap_or(1.0) / 100.0),
    };
    let profile = Profile::read(&args.profile)?;
    let report = build_report(&profile, rule)?;
    if let Some(out) = &args.firefox {
        write_firefox(out, &[("", &args.profile, &report)], ui)?;
    }
    if args.json {
        return print_json(&report);
    }
    let filter = if args.all {
        NodeFilter::All
    } else {
        NodeFilter::Hot
    };
    if args.dot {
        return print_text(&render_profile_dot(&report, filter));
    }
    let body = match args.by {
        By::Context => render_profile_tree(&report, filter),
        By::Loop => render_profile_by_loop(&report, filter),
    };
    print_text(&format!("{}\n{body}", render_profile_header(&report)))
}

/// Writes the reports as one Firefox Profiler document: `(label, profile file, report)` each.
fn write_firefox(
    out: &Path,
    reports: &[(&str, &Path, &ProfileReport)],
    ui: &Ui,
) -> anyhow::Result<()> {
    let inputs: Vec<FirefoxInput<'_>> = reports
        .iter()
        .map(|&(label, _, report)| FirefoxInput { label, report })
        .collect();
    let start = reports
        .first()
        .map_or(SystemTime::UNIX_EPOCH, |&(_, path, report)| {
            recording_start(path, report)
        });
    let json = render_firefox_profile(&inputs, start)?;
    write_atomically(out, json.as_bytes())?;
    ui.done(format!(
        "wrote {} (open it at https://profiler.firefox.com)",
        out.display()
    ));
    Ok(())
}

/// When the recording began: the profile was written as the run ended.
fn recording_start(path: &Path, report: &ProfileReport) -> SystemTime {
    let written = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    written
        .checked_sub(Duration::from_secs_f64(report.overhead.profiled_s.max(0.0)))
        .unwrap_or(written)
}
