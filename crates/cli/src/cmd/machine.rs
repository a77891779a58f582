//! `loopscope machine`: detect, show, save or import a machine description.

use std::path::{Path, PathBuf};

use clap::Args;
use loopscope_machine::{Machine, import_kerncraft, write_machine_file};

use crate::inputs::load_machine;
use crate::ui::{Ui, printable};

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
        crate::cmd::print_text(&loopscope_report::render_machine(&printable_machine(
            &machine,
        )))
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

/// `machine` with every text it holds made [`printable`]: a model name, a note or a method read
/// from a file cannot move the cursor, ring the bell, reverse the line or break it in a table.
pub(crate) fn printable_machine(machine: &Machine) -> Machine {
    let mut shown = machine.clone();
    let escape = |text: &mut String| *text = printable(text);
    escape(&mut shown.model);
    escape(&mut shown.vendor);
    if let Some(microarchitecture) = &mut shown.microarchitecture {
        escape(microarchitecture);
    }
    escape(&mut shown.source);
    for cache in &mut shown.caches {
        if let Some(replacement) = &mut cache.replacement {
            escape(replacement);
        }
    }
    if let Some(measured) = &mut shown.measured {
        measured.notes.iter_mut().for_each(escape);
        for cache in &mut measured.caches {
            escape(&mut cache.method);
        }
        for run in &mut measured.bandwidth {
            escape(&mut run.level);
            escape(&mut run.kernel);
            escape(&mut run.method);
        }
        if let Some(peak) = &mut measured.peak_gflops {
            escape(&mut peak.method);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_machine::Measured;

    #[test]
    fn every_text_of_a_machine_is_made_printable() {
        let mut machine = Machine::unknown();
        machine.model = "AMD\x1b[31mRED\u{202e}EPYC\x07\n2nd".into();
        machine.source = "from\tfile".into();
        machine.microarchitecture = Some("\u{feff}zen".into());
        machine.measured = Some(Measured {
            notes: vec!["a\rb".into()],
            ..Measured::default()
        });
        let shown = printable_machine(&machine);
        assert_eq!(shown.model, "AMD\\x1b[31mRED\\u{202e}EPYC\\x07\\n2nd");
        assert_eq!(shown.source, "from\\tfile");
        assert_eq!(shown.microarchitecture.as_deref(), Some("\\u{feff}zen"));
        assert_eq!(shown.measured.unwrap().notes, ["a\\rb"]);
    }
}
