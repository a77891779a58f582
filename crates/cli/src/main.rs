//! `loopscope`: the command line over loopscope's library crates.
//!
//! This binary parses arguments, wires the rooms together and decides what to print and which
//! exit code to return (0 success, 1 analysis failure, 2 usage or bad input). It must not
//! compute, measure or render: each command makes one library call and hands the result to
//! `loopscope-report`; everything else lives in the library crates.

// Results go through `cmd::print_text`, which survives a closed pipe; `print!` would panic.
#![deny(clippy::print_stdout)]

mod args;
mod binaries;
mod cmd;
mod failure;
mod inputs;
mod ui;
mod usage;
mod values;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(usage::report(&err)),
    };
    // The analytic model calls isl on this thread too, and isl recurses deeper than a main
    // thread's stack (8 MiB by default, less under some `ulimit -s`) is sure to hold.
    let run = move || {
        let ui = ui::Ui::new(&cli.global);
        match cmd::run(cli.command, &ui) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                ui.error(&err);
                ExitCode::from(failure::exit_code(&err))
            }
        }
    };
    match loopscope_polyhedral::isl_thread().spawn(run) {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(err) => {
            eprintln!("loopscope: error: cannot start the thread that runs the command: {err}");
            ExitCode::FAILURE
        }
    }
}
