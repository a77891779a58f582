//! `loopscope report`: the loop-call-context tree of a profile.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use loopscope_profile::{HotRule, Profile, build_report};
use loopscope_report::{NodeFilter, render_profile_by_loop, render_profile_dot, render_profile_header, render_profile_tree};

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
}

/// Runs `report`.
pub fn run(args: &ReportArgs, _ui: &Ui) -> anyhow::Result<()> {
    let rule = match (args.hot, args.threshold) {
        (Some(0), _) => return Err(bad_input("--hot 0: expected a rank of 1 or more")),
        (Some(rank), _) => HotRule::Rank(rank),
        (None, Some(p)) if !(0.0..=100.0).contains(&p) => {
            return Err(bad_input(format!("--threshold {p}: expected a percentage from 0 to 100")));
        }
        (None, p) => HotRule::Share(p.unwrap_or(1.0) / 100.0),
    };
    let profile = Profile::read(&args.profile)?;
    let report = build_report(&profile, rule)?;
    if args.json {
        return print_json(&report);
    }
    let filter = if args.all { NodeFilter::All } else { NodeFilter::Hot };
    if args.dot {
        return print_text(&render_profile_dot(&report, filter));
    }
    let body = match args.by {
        By::Context => render_profile_tree(&report, filter),
        By::Loop => render_profile_by_loop(&report, filter),
    };
    print_text(&format!("{}\n{body}", render_profile_header(&report)))
}
