//! `loopscope simulate`: exact cache-hierarchy simulation of a kernel or an address trace.

use std::path::PathBuf;

use clap::Args;
use loopscope_cache::{SimulationInput, SimulationOptions, simulate};
use loopscope_report::{SimulationView, render_simulation};

use crate::failure::bad_input;
use crate::inputs::{CachesArg, cache_levels};
use crate::ui::Ui;

/// Arguments of `simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Kernel file in the kerncraft C subset.
    #[arg(
        value_name = "KERNEL.c",
        required_unless_present = "trace",
        conflicts_with = "trace"
    )]
    pub kernel: Option<PathBuf>,
    /// Value of a kernel symbol, e.g. `-D N=1000` (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Machine file whose data caches to simulate (default: this machine, detected).
    #[arg(
        short = 'm',
        long = "machine",
        value_name = "FILE",
        conflicts_with = "cache"
    )]
    pub machine: Option<PathBuf>,
    /// Cache levels, innermost first: `NAME=SIZE:WAYS:LINE[:OPTION...]`, comma-separated.
    /// Options: lru fifo plru random, wb wt, wa nwa, nincl incl excl.
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
    /// Which sizes of the machine's caches to use: `effective` (what the machine file's probe
    /// measured, where it has them) or `advertised` (sysfs, CPUID, the file's `[[caches]]`).
    #[arg(long, value_enum, default_value_t = CachesArg::Effective, conflicts_with = "cache")]
    pub caches: CachesArg,
    /// Array base addresses, e.g. `A=0,B=800,C=0x640` (others follow, 64-byte aligned).
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Also print counters per reference and level.
    #[arg(long)]
    pub per_ref: bool,
    /// Split misses into compulsory, capacity and conflict (slower: O(log n) per access).
    #[arg(long = "3c")]
    pub three_c: bool,
    /// Also compute misses of a fully associative LRU cache for every size (stack distances).
    #[arg(long)]
    pub curve: bool,
    /// Write dirty lines back at the end, so write-backs count all stored data.
    #[arg(long)]
    pub flush: bool,
    /// Seed of random replacement.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Simulate an address trace instead of a kernel: one `R|W HEX-ADDRESS SIZE` per line.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs `simulate`.
pub fn run(args: &SimulateArgs, ui: &Ui) -> anyhow::Result<()> {
    let levels = cache_levels(
        args.cache.as_deref(),
        args.machine.as_deref(),
        ui,
        "simulate",
        args.caches,
    )?;
    let input = match (&args.kernel, &args.trace) {
        (Some(path), _) => SimulationInput::Kernel {
            path,
            define: &args.define,
            base: args.base.as_deref(),
        },
        (None, Some(path)) => {
            // A trace holds its own addresses: kernel values and placements would do nothing.
            if !args.define.is_empty() || args.base.is_some() {
                return Err(bad_input(
                    "-D and --base describe a kernel; --trace FILE reads addresses as they are, \
                     so give them only with a kernel file",
                ));
            }
            SimulationInput::Trace(path)
        }
        (None, None) => return Err(bad_input("give a kernel file or --trace FILE")),
    };
    let options = SimulationOptions {
        three_c: args.three_c,
        flush: args.flush,
        seed: args.seed,
        curve: args.curve,
    };
    let simulation = simulate(input, &levels, options, ui)?;
    if args.json {
        return crate::cmd::print_json(&simulation);
    }
    let view = SimulationView {
        per_reference: args.per_ref,
        three_c: args.three_c,
    };
    crate::cmd::print_text(&render_simulation(&simulation, view))
}
