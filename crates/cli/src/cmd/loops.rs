//! `loopscope loops`: the loop forest of a binary, with source lines and static class mix.

use clap::Args;
use loopscope_binary::{Function, SplitMode};
use serde::Serialize;

use crate::binaries::{BinaryArgs, find_function, load_program};
use crate::inputs::text_layout;
use crate::ui::Ui;

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
    let layout = text_layout(args.binary.full_names);
    crate::cmd::print_text(&loopscope_report::render_loops(
        &program, &functions, &layout,
    ))?;
    Ok(())
}
