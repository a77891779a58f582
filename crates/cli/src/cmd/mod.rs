//! One module per subcommand: its arguments and its handler.

pub mod blocks;
pub mod completions;
pub mod demo;
pub mod loops;
pub mod machine;
pub mod misses;
pub mod mix;
pub mod model_level;
pub mod probe;
pub mod record;
pub mod report;
pub mod roofline;
pub mod simulate;

use crate::args::Command;
use crate::ui::Ui;

/// Runs one subcommand.
pub fn run(command: Command, ui: &Ui) -> anyhow::Result<()> {
    match command {
        Command::Machine(args) => machine::run(&args, ui),
        Command::Probe(args) => probe::run(&args, ui),
        Command::Completions(args) => completions::run(&args),
        Command::Roofline(args) => roofline::run(&args, ui),
        Command::Simulate(args) => simulate::run(&args, ui),
        Command::Misses(args) => misses::run(&args, ui),
        Command::Mix(args) => mix::run(&args, ui),
        Command::ModelLevel(args) => model_level::run(&args, ui),
        Command::Loops(args) => loops::run(&args, ui),
        Command::Blocks(args) => blocks::run(&args, ui),
        Command::Record(args) => record::run(&args, ui),
        Command::Report(args) => report::run(&args, ui),
        Command::Demo(args) => demo::run(&args, ui),
    }
}

/// Prints a value as one pretty JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    print_text(&text)
}

/// Writes results to stdout. A closed pipe (`loopscope ... | head`) is not an error: the reader
/// has what it wanted, so the command ends quietly instead of panicking like `print!` would.
pub fn print_text(text: &str) -> anyhow::Result<()> {
    Ok(write_stdout(text)?)
}

/// [`print_text`] for library calls that hand over text as they go.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}
