//! `loopscope machine`: detect, show, save or import a machine description.

use std::path::{Path, PathBuf};

use clap::Args;
use loopscope_machine::{Machine, import_kerncraft, write_machine_file};

use crate::inputs::load_machine;
use crate::ui::Ui;

/// Arguments of `machine`.
#[derive(Debug, Args)]
pub struct MachineArgs {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the description to this TOML machine file (atomically).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Read a kerncraft YAML machine file instead of detecting this machine.
    #[arg(long, value_name = "FILE.yml", conflicts_with = "file")]
    pub import: Option<PathBuf>,
    /// Show a loopscope machine file instead of detecting this machine.
    #[arg(short = 'm', long = "machine", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// Runs `machine`.
pub fn run(args: &MachineArgs, ui: &Ui) -> anyhow::Result<()> {
    let machine = if let Some(path) = &args.import {
        import(path, ui)?
    } else {
        load_machine(args.file.as_deref(), ui)?
    };
    if let Some(out) = &args.out {
        write_machine_file(out, &machine)?;
        ui.note(format!("wrote {}", out.display()));
    }
    if args.json {
        crate::cmd::print_json(&machine)
    } else {
        crate::cmd::print_text(&loopscope_report::render_machine(&machine))
    }
}

fn import(path: &Path, ui: &Ui) -> anyhow::Result<Machine> {
    let imported = import_kerncraft(path)?;
    if !imported.unmapped.is_empty() {
        ui.warn(format!(
            "{}: {} keys not mapped: {}",
            path.display(),
            imported.unmapped.len(),
            imported.unmapped.join("; ")
        ));
    }
    Ok(imported.machine)
}
