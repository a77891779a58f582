//! One module per subcommand: its arguments and its handler.

pub mod completions;
pub mod machine;
pub mod roofline;
pub mod simulate;

use crate::args::Command;
use crate::ui::Ui;

/// Runs one subcommand.
pub fn run(command: Command, ui: &Ui) -> anyhow::Result<()> {
    match command {
        Command::Machine(args) => machine::run(&args, ui),
        Command::Completions(args) => completions::run(&args),
        Command::Roofline(args) => roofline::run(&args, ui),
        Command::Simulate(args) => simulate::run(&args, ui),
    }
}

/// Prints a value as one pretty JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    println!("{text}");
    Ok(())
}
