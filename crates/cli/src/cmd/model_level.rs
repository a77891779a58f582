//! `loopscope model-level` (hidden): one level process of the analytic model, which `misses`
//! and `roofline --traffic model` start for each line size of their caches
//! (`loopscope_analytic::model_levels`). It prints each level as a line of JSON when done, and
//! ends when the process that started it ends (`--parent-pid`), however that ends: the kernel
//! kills it at once (the parent-death signal), and a watchdog checks the parent too.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use loopscope_analytic::{LevelJob, run_level_job};

use crate::ui::Ui;

/// Arguments of the hidden `model-level` command: levels of one line size, the kernel as
/// `misses` loads it.
#[derive(Debug, Args)]
pub struct ModelLevelArgs {
    /// Kernel file.
    #[arg(value_name = "KERNEL.c")]
    pub kernel: PathBuf,
    /// Value of a kernel symbol.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Array base addresses.
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Associativity of each level, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub ways: Vec<u32>,
    /// Line size in bytes (every level's).
    #[arg(long)]
    pub line_bytes: i64,
    /// Number of sets of each level, in the order of `--ways`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub sets: Vec<i64>,
    /// Bound on isl's elementary operations.
    #[arg(long)]
    pub max_operations: u64,
    /// Seconds the sets of all levels may take to build (checked between set operations).
    #[arg(long, value_parser = crate::values::seconds, allow_hyphen_values = true)]
    pub time_limit: f64,
    /// Threads building the references' sets.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Also return the intermediate sets as text.
    #[arg(long)]
    pub explain: bool,
    /// Also attribute conflict misses to competing references.
    #[arg(long)]
    pub sources: bool,
    /// Give the counts as formulas in these parameters, NAME[,NAME...] (their `-D` values are
    /// placeholders). One level only.
    #[arg(long, value_name = "NAME")]
    pub symbolic: Option<String>,
    /// The process that started this one: when it ends, this one ends too.
    #[arg(long, value_name = "PID")]
    pub parent_pid: Option<u32>,
}

impl ModelLevelArgs {
    fn job(&self) -> LevelJob {
        LevelJob {
            kernel: self.kernel.clone(),
            define: self.define.clone(),
            base: self.base.clone(),
            ways: self.ways.clone(),
            line_bytes: self.line_bytes,
            sets: self.sets.clone(),
            max_operations: self.max_operations,
            time_limit_s: self.time_limit,
            threads: self.threads,
            explain: self.explain,
            sources: self.sources,
            symbolic: self.symbolic.clone(),
        }
    }
}

/// Runs `model-level`: each level goes to stdout as soon as it is done.
pub fn run(args: &ModelLevelArgs, ui: &Ui) -> anyhow::Result<()> {
    if let Some(parent) = args.parent_pid {
        die_with_parent(parent)?;
    }
    Ok(run_level_job(&args.job(), ui, &crate::cmd::write_stdout)?)
}

/// How often the watchdog checks that the parent still runs.
const PARENT_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Ends this process when `parent` ends. The parent-death signal (SIGKILL) acts at once, but
/// only when the thread that started this process ends, and may be unavailable; the watchdog
/// thread sees within a tenth of a second that this process has a new parent. A parent already
/// gone is an error at once.
fn die_with_parent(parent: u32) -> anyhow::Result<()> {
    // Set before the check below, so that a parent ending between them is seen by one or the
    // other. A failure leaves the watchdog alone to do the job.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if std::os::unix::process::parent_id() != parent {
        anyhow::bail!("the process that started this model level (pid {parent}) has ended");
    }
    std::thread::Builder::new()
        .name("parent watchdog".into())
        .spawn(move || {
            while std::os::unix::process::parent_id() == parent {
                std::thread::sleep(PARENT_CHECK_INTERVAL);
            }
            std::process::exit(crate::inputs::INTERRUPTED);
        })?;
    Ok(())
}
