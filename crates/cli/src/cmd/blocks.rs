//! `loopscope blocks`: the blocks of one function with their instruction classes.

use clap::Args;
use loopscope_binary::Block;
use serde::Serialize;

use crate::binaries::{BinaryArgs, find_function, load_program};
use crate::inputs::text_layout;
use crate::ui::Ui;

/// Arguments of `blocks`.
#[derive(Debug, Args)]
pub struct BlocksArgs {
    #[command(flatten)]
    pub binary: BinaryArgs,
    /// The function (demangled or raw name, or its hex address).
    #[arg(short, long, value_name = "NAME")]
    pub function: String,
}

#[derive(Serialize)]
struct BlocksJson<'a> {
    binary: &'a str,
    function: &'a str,
    address: u64,
    entry_block: u32,
    blocks: Vec<BlockJson<'a>>,
}

#[derive(Serialize)]
struct BlockJson<'a> {
    index: usize,
    #[serde(flatten)]
    block: &'a Block,
    /// Innermost loop containing the block.
    loop_id: Option<u32>,
}

/// Runs `blocks`.
pub fn run(args: &BlocksArgs, ui: &Ui) -> anyhow::Result<()> {
    let program = load_program(&args.binary, ui)?;
    let function = find_function(&program, &args.binary.binary, &args.function)?;
    if args.binary.json {
        let blocks = function
            .blocks
            .iter()
            .enumerate()
            .map(|(index, block)| BlockJson {
                index,
                block,
                loop_id: loopscope_report::innermost_loop(function, index as u32),
            })
            .collect();
        return crate::cmd::print_json(&BlocksJson {
            binary: &program.binary,
            function: &function.name,
            address: function.address,
            entry_block: function.entry_block,
            blocks,
        });
    }
    let layout = text_layout(args.binary.full_names);
    crate::cmd::print_text(&loopscope_report::render_blocks(function, &layout))?;
    Ok(())
}
