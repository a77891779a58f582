//! The binary `loops` and `blocks` analyse, found the way the user asked: its analysis read
//! from the cache when the binary is unchanged, else analysed and cached.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use loopscope_binary::{
    Classifier, Function, Image, Options, Program, SplitMode, cache_file_name, read_cache,
    write_cache,
};

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
    /// Show function names whole (with template arguments, parameter lists and return types),
    /// as `--json` always does; text output shortens them to `std::sort<…>(…)`.
    #[arg(long)]
    pub full_names: bool,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
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
    if let Some(file) = cache.as_ref().filter(|f| f.exists()) {
        match read_cache(file) {
            Ok(mut program) => {
                ui.note(format!("analysis read from {}", file.display()));
                program.binary = args.binary.display().to_string();
                return Ok(program);
            }
            // A damaged or stale entry is rebuilt below; it costs one analysis, nothing more.
            Err(e) => ui.note(format!("{e}; analysing again")),
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
