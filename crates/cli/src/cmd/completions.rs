//! `loopscope completions SHELL`.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::args::Cli;

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script to stdout.
pub fn run(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "loopscope", &mut script);
    crate::cmd::print_text(&String::from_utf8_lossy(&script))
}
