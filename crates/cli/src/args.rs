//! The command-line grammar (clap derive). Each subcommand's arguments live beside its handler
//! in `cmd/`; this file only lists the subcommands and the global flags.

use clap::{Args, Parser, Subcommand};

use crate::cmd;

/// Measure the machine, model loop kernels, and profile the loop nests of native binaries.
#[derive(Debug, Parser)]
#[command(
    name = "loopscope",
    version,
    about,
    propagate_version = true,
    after_help = "Exit codes: 0 success, 1 analysis failure, 2 usage error or bad input, 130 when `misses`, `roofline` or `record` is interrupted (Ctrl-C, SIGTERM, SIGHUP)."
)]
pub struct Cli {
    /// Flags every subcommand accepts.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Say more about what is being done (on stderr).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print results only: no warnings, notes or progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Show progress bars even when stderr is not a terminal.
    #[arg(long, global = true)]
    pub progress: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Describe this machine (caches, cores, ISA, peak FLOPs), or import a kerncraft file.
    #[command(after_help = "Examples:\n  \
        loopscope machine\n  \
        loopscope machine --json\n  \
        loopscope machine --out machine.toml\n  \
        loopscope machine --import SkylakeSP.yml --out skx.toml")]
    Machine(cmd::machine::MachineArgs),
    /// Predict a kernel's attainable rate with the cache-aware roofline, and which level limits it.
    #[command(after_help = "Examples:\n  \
        loopscope roofline --counts mem=3,l2=6,flops=78 -m machine.toml\n  \
        loopscope roofline --counts mem=5,l2=21,l1s=12,l1l=6,flops=43 --profile k-computer --paper-rounding\n  \
        loopscope roofline --counts mem=3,l2=8,flops=8 --bandwidth L2=146,MEM=46 --peak-gflops 128 --plot r.svg")]
    Roofline(cmd::roofline::RooflineArgs),
    /// Simulate a kernel's (or a trace's) accesses through a cache hierarchy, exactly.
    #[command(after_help = "Examples:\n  \
        loopscope simulate examples/kernels/2d-5pt.c -D M=1000 -D N=1000 --cache L1=32K:8:64,L2=1M:16:64\n  \
        loopscope simulate examples/kernels/spec000.c -D X=10 -D Y=10 -D Z=10 --cache L1=256:2:32 \\\n      \
        --base A=0,B=800,C=1600 --per-ref --3c\n  \
        loopscope simulate --trace accesses.txt -m machine.toml --json")]
    Simulate(cmd::simulate::SimulateArgs),
    /// Count each reference's compulsory and conflict misses per cache level analytically
    /// (spec 000: integer sets, no simulation), optionally checked against the simulator.
    #[command(after_help = "Examples:\n  \
        loopscope misses examples/kernels/spec000.c -D X=10 -D Y=10 -D Z=10 --cache L1=256:2:32 \\\n      \
        --base A=0,B=800,C=1600 --explain\n  \
        loopscope misses examples/kernels/2d-5pt.c -D M=100 -D N=1024 --cache L1=32K:8:64 --check\n  \
        loopscope misses examples/kernels/triad.c -D N=100000 -m machine.toml --json\n  \
        loopscope misses examples/kernels/2d-5pt.c -D M=12 --scan N=448..1088:32 --cache L1=8K:2:64")]
    Misses(cmd::misses::MissesArgs),
    /// One cache level of the analytic model, for `misses` and `roofline` (internal).
    #[command(hide = true)]
    ModelLevel(cmd::model_level::ModelLevelArgs),
    /// Measure caches (instruction and data), latencies, bandwidths and the peak FLOP rate.
    #[command(after_help = "Examples:\n  \
        loopscope probe --quick\n  \
        loopscope probe --out machine.toml --plot plots/\n  \
        loopscope probe --json > probe.json\n  \
        loopscope probe --baseline recompile")]
    Probe(cmd::probe::ProbeArgs),
    /// Recover the loop nests of a binary from its machine code, with source lines.
    #[command(after_help = "Examples:\n  \
        loopscope loops ./a.out\n  \
        loopscope loops ./a.out --function main --json\n  \
        loopscope loops /usr/lib/x86_64-linux-gnu/libm.so.6 --split after-branch")]
    Loops(cmd::loops::LoopsArgs),
    /// List the blocks of one function with their instruction classes and loops.
    #[command(after_help = "Examples:\n  \
        loopscope blocks ./a.out --function main\n  \
        loopscope blocks ./a.out --function 0x401126 --classes my-classes.toml --json")]
    Blocks(cmd::blocks::BlocksArgs),
    /// Run a program and record where its time goes, loop by loop and calling context.
    #[command(after_help = "Examples:\n  \
        loopscope record -- ./app input.dat\n  \
        loopscope record --backend ptrace -o exact.profile -- ./app\n  \
        loopscope record --native --freq 4000 -- ./app\n  \
        mpirun -np 4 loopscope record -o 'prof.%r' -- ./app")]
    Record(cmd::record::RecordArgs),
    /// Show a profile as a loop-call-context tree: time, entries and trips per loop and context.
    #[command(after_help = "Examples:\n  \
        loopscope report\n  \
        loopscope report exact.profile --hot 8\n  \
        loopscope report --by loop --threshold 5\n  \
        loopscope report --dot | dot -Tsvg > lcct.svg\n  \
        loopscope report prof.* --html ranks.html --firefox ranks.json")]
    Report(cmd::report::ReportArgs),
    /// Count the executed instructions per type (fp, SIMD, FMA, load/store, branch, integer)
    /// from a profile's samples or a perf.data file (spec 001), per function, loop or block.
    #[command(after_help = "Examples:\n  \
        loopscope record -o run.profile -- ./app && loopscope mix run.profile\n  \
        loopscope record --exact -o exact.profile -- ./app && loopscope mix exact.profile --by block\n  \
        loopscope mix perf.data --binary ./app --types fp,other --json")]
    Mix(cmd::mix::MixArgs),
    /// Run both pipelines on the bundled examples in about a minute: measure this machine, model
    /// and time example kernels, profile an example program, and write one HTML report.
    #[command(after_help = "Examples:\n  \
        loopscope demo\n  \
        loopscope demo --out /tmp/demo --json")]
    Demo(cmd::demo::DemoArgs),
    /// Print a shell completion script.
    #[command(after_help = "Example:\n  \
        loopscope completions bash > /etc/bash_completion.d/loopscope")]
    Completions(cmd::completions::CompletionsArgs),
}
