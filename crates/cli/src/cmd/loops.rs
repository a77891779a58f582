//! `loopscope loops`: the loop forest of a binary, with source lines and static class mix.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use loopscope_binary::{
    Classifier, Function, Image, Options, Program, SplitMode, cache_file_name, read_cache,
    write_cache,
};
use serde::Serialize;

use crate::ui::Ui;

/// How blocks are split (`--split`).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Split {
    /// True basic blocks: also start a block at every branch target.
    Leaders,
    /// The patent's rule: end a block only after a control transfer.
    AfterBranch,
}

/// The binary and how to analyse it; shared with `blocks`.
#[derive(Debug, Args)]
pub struct BinaryArgs {
    /// An x86-64 ELF executable, PIE or shared library.
    #[arg(value_name = "BINARY")]
    pub binary: PathBuf,
    /// Block splitting rule.
    #[arg(long, value_enum, default_value = "leaders")]
    pub split: Split,
    /// A TOML table overriding instruction classes: `[classes]` with `mnemonic = "fp"`.
    #[arg(long, value_name = "FILE.toml")]
    pub classes: Option<PathBuf>,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `loops`.
#[derive(Debug, Args)]
pub struct LoopsArgs {
    #[command(flatten)]
    pub binary: BinaryArgs,
    /// Only this function (demangled or raw name, or its hex address).
    #[arg(short, long, value_name = "NAME")]
    pub function: Option<String>,
}

#[derive(Serialize)]
struct LoopsJson<'a> {
    binary: &'a str,
    kind: loopscope_binary::BinaryKind,
    build_id: Option<&'a str>,
    stripped: bool,
    split: SplitMode,
    loop_count: usize,
    functions: Vec<FunctionJson<'a>>,
    warnings: &'a [String],
}

#[derive(Serialize)]
struct FunctionJson<'a> {
    name: &'a str,
    symbol: &'a str,
    address: u64,
    size: u64,
    instructions: u64,
    loops: &'a [loopscope_binary::Loop],
}

/// Runs `loops`.
pub fn run(args: &LoopsArgs, ui: &Ui) -> anyhow::Result<()> {
    let program = load_program(&args.binary, ui)?;
    let functions: Vec<&Function> = match &args.function {
        Some(name) => vec![find_function(&program, &args.binary.binary, name)?],
        None => program
            .functions
            .iter()
            .filter(|f| !f.loops.is_empty())
            .collect(),
    };
    if args.binary.json {
        let json = LoopsJson {
            binary: &program.binary,
            kind: program.kind,
            build_id: program.build_id.as_deref(),
            stripped: program.stripped,
            split: program.split,
            loop_count: functions.iter().map(|f| f.loops.len()).sum(),
            functions: functions
                .iter()
                .map(|f| FunctionJson {
                    name: &f.name,
                    symbol: &f.symbol,
                    address: f.address,
                    size: f.size,
                    instructions: f.instructions,
                    loops: &f.loops,
                })
                .collect(),
            warnings: &program.warnings,
        };
        return crate::cmd::print_json(&json);
    }
    crate::cmd::print_text(&loopscope_report::render_loops(&program, &functions))?;
    Ok(())
}

/// The function asked for, or a bad-input error naming the binary.
pub fn find_function<'p>(
    program: &'p Program,
    binary: &Path,
    name: &str,
) -> anyhow::Result<&'p Function> {
    program.function(name).ok_or_else(|| {
        loopscope_binary::BinaryError::NoFunction {
            path: binary.to_owned(),
            name: name.to_owned(),
        }
        .into()
    })
}

/// Analyses a binary, or reads the analysis from the cache when the binary is unchanged.
pub fn load_program(args: &BinaryArgs, ui: &Ui) -> anyhow::Result<Program> {
    let image = Image::open(&args.binary)?;
    for warning in &image.warnings {
        ui.warn(format!("{}: {warning}", args.binary.display()));
    }
    let classifier = match &args.classes {
        Some(path) => Classifier::from_toml_file(path)?,
        None => Classifier::new(),
    };
    let options = Options {
        split: match args.split {
            Split::Leaders => SplitMode::Leaders,
            Split::AfterBranch => SplitMode::AfterBranch,
        },
        classifier,
        lines: true,
    };
    let cache = (!args.no_cache)
        .then(cache_dir)
        .flatten()
        .map(|dir| cache_file_name(&image, &options).map(|name| dir.join(name)))
        .transpose()?;
    if let Some(file) = &cache {
        if let Ok(mut program) = read_cache(file) {
            ui.note(format!("analysis read from {}", file.display()));
            program.binary = args.binary.display().to_string();
            return Ok(program);
        }
    }
    ui.note(format!("analysing {}", args.binary.display()));
    let program = Program::analyze(&image, &options);
    for warning in program.warnings.iter().skip(image.warnings.len()) {
        ui.warn(format!("{}: {warning}", args.binary.display()));
    }
    if let Some(file) = &cache {
        let saved = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(anyhow::Error::from)
            .and_then(|()| Ok(write_cache(&program, file)?));
        match saved {
            Ok(()) => ui.note(format!("analysis cached in {}", file.display())),
            Err(e) => ui.warn(format!("analysis not cached: {e}")),
        }
    }
    Ok(program)
}

/// `$XDG_CACHE_HOME/loopscope`, else `~/.cache/loopscope`.
fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("loopscope"))
}
