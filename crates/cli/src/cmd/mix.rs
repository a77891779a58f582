//! `loopscope mix`: the executed instruction mix of a profile or a perf.data file (spec 001).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use loopscope_profile::{
    EXACT_COVERAGE_NOTE, InstrType, MixBy, MixOptions, Profile, build_mix, mix_of_perf_data,
};
use loopscope_report::render_mix;

use crate::cmd::{print_json, print_text};
use crate::failure::bad_input;
use crate::ui::Ui;

/// How rows are grouped.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum By {
    /// One row per block.
    Block,
    /// One row per function.
    Function,
    /// One row per function, followed by its loops (each counting its nested loops too).
    Loop,
}

/// Arguments of `mix`.
#[derive(Debug, Args)]
pub struct MixArgs {
    /// A profile written by `loopscope record` (sampled, or `--exact`), or a perf.data file
    /// written by `perf record`.
    #[arg(value_name = "PROFILE|PERF.DATA", default_value = "loopscope.profile")]
    pub input: PathBuf,
    /// The executable or library to analyse for the recorded object of the same build-id (or
    /// file name): for a perf.data from another machine, a moved file, or the original kept
    /// under another name. It is trusted even when its build-id differs (with a warning).
    /// Samples elsewhere are unattributed.
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
    /// Types to count, comma-separated: fp, simd, simd128, simd256, simd512, fma, ls, br, int.
    /// Exclusive types (fp, ls, br, int) left out are summed as `other` [default:
    /// fp,simd,fma,ls,br,int].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Rows per block, per function, or per function with its loop forest.
    #[arg(long, value_enum, default_value = "loop")]
    pub by: By,
    /// Rows shown in the text output: the N functions (with their loops) or blocks with the
    /// most instructions.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Print one JSON document (every row).
    #[arg(long)]
    pub json: bool,
}

/// Runs `mix`.
pub fn run(args: &MixArgs, ui: &Ui) -> anyhow::Result<()> {
    let types = parse_types(&args.types)?;
    let options = MixOptions {
        types,
        by: match args.by {
            By::Block => MixBy::Block,
            By::Function => MixBy::Function,
            By::Loop => MixBy::Loop,
        },
        binary: args.binary.clone(),
    };
    let report = if is_perf_data(&args.input)? {
        mix_of_perf_data(&args.input, &options)?
    } else {
        let profile = Profile::read(&args.input)?;
        build_mix(&profile, &options, &args.input)?
    };
    for note in &report.notes {
        // How an exact mix was counted is what the result is, not a caveat about it.
        if note == EXACT_COVERAGE_NOTE {
            ui.done(note);
        } else {
            ui.warn(note);
        }
    }
    if args.json {
        return print_json(&report);
    }
    print_text(&render_mix(&report, args.top))
}

/// `--types` as a list, `other` accepted (and implied) for the exclusive types left out.
fn parse_types(names: &[String]) -> anyhow::Result<Vec<InstrType>> {
    if names.is_empty() {
        return Ok(MixOptions::default().types);
    }
    let mut types = Vec::new();
    for name in names {
        let name = name.trim();
        if name == "other" {
            continue;
        }
        let t = InstrType::parse(name).ok_or_else(|| {
            let known: Vec<&str> = InstrType::ALL.iter().map(|t| t.name()).collect();
            bad_input(format!(
                "--types {name}: expected {} or other",
                known.join(", ")
            ))
        })?;
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.is_empty() {
        return Err(bad_input("--types: name at least one type besides `other`"));
    }
    Ok(types)
}

/// Whether the file starts with perf's magic (`PERFILE2`).
fn is_perf_data(path: &std::path::Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 8];
    let cannot = |e: std::io::Error| bad_input(format!("{}: cannot read: {e}", path.display()));
    loopscope_machine::refuse_pipe(path).map_err(cannot)?;
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let n = file.read(&mut magic).unwrap_or(0);
    Ok(n == 8 && (&magic == b"PERFILE2" || &magic == b"2ELIFREP"))
}
