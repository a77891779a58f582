//! `loopscope report`: the loop-call-context tree of a profile.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::{Args, ValueEnum};
use loopscope_machine::write_atomically;
use loopscope_profile::{
    HotRule, MixOptions, Profile, ProfileReport, RankMerge, build_mix, build_report, merge_reports,
};
use loopscope_report::{
    Figure, FirefoxInput, HtmlReport, NodeFilter, render_firefox_profile, render_html,
    render_profile_by_loop, render_profile_dot, render_profile_header, render_profile_tree,
    render_ranks, shell_word, shell_words,
};

use crate::cmd::{print_json, print_text};
use crate::failure::bad_input;
use crate::inputs::text_layout;
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
    /// The profile `record` wrote; several (`prof.*`, one per MPI rank) are merged: their
    /// trees summed, and the hottest loops' time shown per rank.
    #[arg(value_name = "PROFILE", default_value = "loopscope.profile", num_args = 1..)]
    pub profiles: Vec<PathBuf>,
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
    /// Hot nodes: inclusive share at least P percent.
    #[arg(
        long,
        value_name = "P",
        value_parser = crate::values::percent,
        allow_hyphen_values = true,
        default_value_t = DEFAULT_THRESHOLD_PERCENT
    )]
    pub threshold: f64,
    /// Show every node, hot or not.
    #[arg(long)]
    pub all: bool,
    /// Show function names whole (with template arguments, parameter lists and return types),
    /// as `--json` always does; the tables shorten them to `std::sort<…>(…)`.
    #[arg(long)]
    pub full_names: bool,
    /// Group by calling context (tree) or by loop (flat).
    #[arg(long, value_enum, default_value = "context")]
    pub by: By,
    /// Also write the profile in the Firefox Profiler's format to this file, loops as frames
    /// under their functions (open it in the Firefox Profiler, profiler.firefox.com).
    #[arg(long, value_name = "OUT.json")]
    pub firefox: Option<PathBuf>,
    /// Also write one self-contained HTML page: the tree (collapsible, hot nodes marked), the
    /// instruction mix when the profile has one, the per-rank table of merged profiles.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

/// The report of `profile`, read from `path`; an error names the profile (of several merged,
/// the one that failed).
fn report_of(profile: &Profile, path: &Path, rule: HotRule) -> anyhow::Result<ProfileReport> {
    build_report(profile, rule).with_context(|| path.display().to_string())
}

/// The `--threshold` of hot nodes when it is not given (and `--hot` is not either).
const DEFAULT_THRESHOLD_PERCENT: f64 = 1.0;

/// Runs `report`.
pub fn run(args: &ReportArgs, ui: &Ui) -> anyhow::Result<()> {
    let rule = match args.hot {
        Some(0) => return Err(bad_input("--hot 0: expected a rank of 1 or more")),
        Some(rank) => HotRule::Rank(rank),
        None => HotRule::Share(args.threshold / 100.0),
    };
    if args.profiles.len() > 1 {
        return run_merged(args, rule, ui);
    }
    let path = &args.profiles[0];
    let profile = read_profile(path)?;
    let report = report_of(&profile, path, rule)?;
    if let Some(out) = &args.firefox {
        write_firefox(out, &[("", path, &report)], ui)?;
    }
    if let Some(out) = &args.html {
        write_html(out, &[(path, &profile, &report)], None, ui)?;
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
        By::Context => render_profile_tree(&report, filter, &text_layout(args.full_names)),
        By::Loop => render_profile_by_loop(&report, filter, &text_layout(args.full_names)),
    };
    print_text(&format!(
        "{}\n{body}",
        render_profile_header(&report, filter)
    ))
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
        .checked_sub(Duration::try_from_secs_f64(report.overhead.profiled_s).unwrap_or_default())
        .unwrap_or(written)
}

/// A profile to report; a missing one says how profiles are made.
fn read_profile(path: &Path) -> anyhow::Result<Profile> {
    if !path.exists() && path.symlink_metadata().is_err() {
        return Err(bad_input(format!(
            "{}: no such profile (make one with `loopscope record -o {} -- PROGRAM ARGS`)",
            path.display(),
            shell_word(&path.display().to_string())
        )));
    }
    Ok(Profile::read(path)?)
}

/// `report A B ...`: the profiles merged, with the per-rank table.
fn run_merged(args: &ReportArgs, rule: HotRule, ui: &Ui) -> anyhow::Result<()> {
    let mut paths: Vec<&PathBuf> = args.profiles.iter().collect();
    paths.sort_by_key(|p| natural_key(&p.display().to_string()));
    paths.dedup();
    let mut profiles = Vec::new();
    for path in paths {
        let profile = read_profile(path)?;
        let report = report_of(&profile, path, rule)?;
        let label = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        profiles.push((label, path.as_path(), profile, report));
    }
    let labelled: Vec<(String, ProfileReport)> = profiles
        .iter()
        .map(|(label, _, _, report)| (label.clone(), report.clone()))
        .collect();
    let merge = merge_reports(&labelled, rule, IMBALANCE_ROWS)?;
    if let Some(out) = &args.firefox {
        let inputs: Vec<(&str, &Path, &ProfileReport)> = profiles
            .iter()
            .map(|(label, path, _, report)| (label.as_str(), *path, report))
            .collect();
        write_firefox(out, &inputs, ui)?;
    }
    if let Some(out) = &args.html {
        let all: Vec<(&Path, &Profile, &ProfileReport)> = profiles
            .iter()
            .map(|(_, path, profile, _)| (*path, profile, &merge.merged))
            .collect();
        write_html(out, &all[..1], Some(&merge), ui)?;
    }
    if args.json {
        return print_json(&merge);
    }
    let filter = if args.all {
        NodeFilter::All
    } else {
        NodeFilter::Hot
    };
    if args.dot {
        return print_text(&render_profile_dot(&merge.merged, filter));
    }
    let body = match args.by {
        By::Context => render_profile_tree(&merge.merged, filter, &text_layout(args.full_names)),
        By::Loop => render_profile_by_loop(&merge.merged, filter, &text_layout(args.full_names)),
    };
    print_text(&format!(
        "{}\n{body}\n{}",
        render_profile_header(&merge.merged, filter),
        render_ranks(&merge)
    ))
}

/// Loops listed in the per-rank table.
const IMBALANCE_ROWS: usize = 10;

/// Sorts `prof.2` before `prof.10`: runs of digits compare as numbers.
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut digits = String::from(c);
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                digits.push(d);
            }
            key.push((
                std::mem::take(&mut text),
                digits.parse().unwrap_or(u64::MAX),
            ));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

/// Writes the HTML page of a profile (the first of `profiles`, whose report may be a merged
/// one) with its instruction mix when the profile has one.
fn write_html(
    out: &Path,
    profiles: &[(&Path, &Profile, &ProfileReport)],
    merge: Option<&RankMerge>,
    ui: &Ui,
) -> anyhow::Result<()> {
    let Some(&(path, profile, report)) = profiles.first() else {
        return Ok(());
    };
    let shown = path.display().to_string();
    let mut notes = Vec::new();
    let mix = if merge.is_some() {
        None
    } else {
        match build_mix(profile, &MixOptions::default(), path) {
            Ok(mix) => Some(mix),
            Err(e) => {
                notes.push(format!("no instruction mix: {e}"));
                None
            }
        }
    };
    let record_command = record_command(profile, &shown);
    let report_command = match merge {
        Some(m) => format!("loopscope report {}", shell_words(&m.ranks)),
        None => format!(
            "loopscope report {}  (recorded with: {record_command}{})",
            shell_word(&shown),
            if profile.record_flags.is_none() {
                "; other flags of the recording are not stored in this profile"
            } else {
                ""
            }
        ),
    };
    let mix_command = format!("loopscope mix {}", shell_word(&shown));
    let mut page = HtmlReport {
        title: format!("loopscope report: {}", shell_words(&profile.command)),
        subtitle: format!("{} back-end, {}", report.backend, report.measure),
        notes,
        ..HtmlReport::default()
    };
    page.profiles.push(Figure {
        title: "Loop-call-context tree",
        command: &report_command,
        data: report,
    });
    if let Some(m) = merge {
        page.ranks = Some(Figure {
            title: "Time per rank of the hottest loops",
            command: &report_command,
            data: m,
        });
    }
    if let Some(mix) = &mix {
        page.mixes.push(Figure {
            title: "Executed instruction mix",
            command: &mix_command,
            data: mix,
        });
    }
    write_atomically(out, render_html(&page)?.as_bytes())?;
    ui.done(format!("wrote {}", out.display()));
    Ok(())
}

/// The `record` command that makes `profile` again into `path`, quoted for a shell: with the
/// flags the profile stores, or, for a profile that stores none, the back-end alone (the one
/// flag known from the recording).
fn record_command(profile: &Profile, path: &str) -> String {
    let backend = [
        "--backend".to_owned(),
        profile.recording.backend().to_owned(),
    ];
    let flags = profile.record_flags.as_deref().unwrap_or(&backend);
    format!(
        "loopscope record {} -o {} -- {}",
        shell_words(flags),
        shell_word(path),
        shell_words(&profile.command)
    )
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command, FromArgMatches};

    use super::*;

    #[test]
    fn the_help_names_the_threshold_the_code_uses() {
        let help = ReportArgs::augment_args(Command::new("report"))
            .term_width(10_000)
            .render_help()
            .to_string();
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with("--threshold"))
            .unwrap_or_else(|| panic!("no --threshold in\n{help}"));
        assert!(
            line.ends_with(&format!("[default: {DEFAULT_THRESHOLD_PERCENT}]")),
            "{line}"
        );
    }

    #[test]
    fn the_default_threshold_does_not_conflict_with_hot() {
        let command = ReportArgs::augment_args(Command::new("report"));
        let matches = command
            .clone()
            .try_get_matches_from(["report", "--hot", "3"])
            .unwrap();
        let args = ReportArgs::from_arg_matches(&matches).unwrap();
        assert_eq!(
            (args.hot, args.threshold),
            (Some(3), DEFAULT_THRESHOLD_PERCENT)
        );
        assert!(
            command
                .try_get_matches_from(["report", "--hot", "3", "--threshold", "5"])
                .is_err()
        );
    }
}
