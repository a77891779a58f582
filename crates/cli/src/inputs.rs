//! The inputs several commands share, found the way the user asked: the machine (a file or
//! this one, detected) and the cache levels (`--cache`, else the machine's).

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Context;
use loopscope_analytic::LevelCommand;
use loopscope_cache::{LevelConfig, levels_from_machine, parse_cache_spec};
use loopscope_machine::{Machine, read_machine_file};
use loopscope_report::TextLayout;
use loopscope_roofline::{CacheSizes, SizedLevel, sized_levels};

use crate::failure::bad_input;
use crate::ui::Ui;

/// The machine a command works for: the file given with `-m`, or this machine, detected.
pub fn load_machine(file: Option<&Path>, ui: &Ui) -> anyhow::Result<Machine> {
    match file {
        Some(path) if is_yaml(path) => Err(bad_input(format!(
            "{}: a YAML file is not a loopscope machine file; convert a kerncraft file with \
             `loopscope machine --import {} --out machine.toml`",
            path.display(),
            path.display()
        ))),
        Some(path) => Ok(read_machine_file(path)?),
        None => {
            ui.note("detecting this machine (sysfs, /proc/cpuinfo, CPUID)");
            let machine = loopscope_machine::detect().context("cannot detect this machine")?;
            if machine.caches.is_empty() {
                ui.warn("no cache description found in sysfs or CPUID");
            }
            Ok(machine)
        }
    }
}

fn is_yaml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yml") || e.eq_ignore_ascii_case("yaml"))
}

/// Which cache sizes a command takes from a machine description (`--caches`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CachesArg {
    /// The sizes the machine file's probe measured (effective), where it has them, else the
    /// advertised.
    Effective,
    /// The advertised sizes (sysfs, CPUID, the file's `[[caches]]`).
    Advertised,
}

impl CachesArg {
    /// The library's name for the choice.
    pub fn sizes(self) -> CacheSizes {
        match self {
            CachesArg::Effective => CacheSizes::Effective,
            CachesArg::Advertised => CacheSizes::Advertised,
        }
    }
}

/// The levels of `--cache SPEC`, else of the machine file, else of this machine, which the
/// command is to `verb` (`model`, `simulate`), sized as `caches` says (a note names the
/// measured sizes taken).
pub fn cache_levels(
    spec: Option<&str>,
    machine: Option<&Path>,
    ui: &Ui,
    verb: &str,
    caches: CachesArg,
) -> anyhow::Result<Vec<LevelConfig>> {
    if let Some(spec) = spec {
        return Ok(parse_cache_spec(spec)?);
    }
    let described = load_machine(machine, ui)?;
    let levels = levels_from_machine(&described).with_context(|| match machine {
        Some(p) => format!("{}: cannot {verb} its caches (give --cache)", p.display()),
        None => format!("cannot {verb} this machine's caches (give --cache)"),
    })?;
    let sized = sized_levels(&levels, &described, caches.sizes());
    let measured: Vec<String> = sized
        .iter()
        .filter(|l| l.advertised_bytes.is_some())
        .map(SizedLevel::describe)
        .collect();
    if !measured.is_empty() {
        ui.note(format!(
            "caches: {} (--caches advertised for the advertised sizes)",
            measured.join(", ")
        ));
    }
    Ok(sized.into_iter().map(|l| l.config).collect())
}

/// Exit code of a command ended by SIGINT, SIGTERM or SIGHUP: 128 + SIGINT's number, as a shell
/// reports Ctrl-C.
pub const INTERRUPTED: i32 = 130;

/// For the commands that run the model's level processes (`misses`, `roofline`): SIGINT,
/// SIGTERM and SIGHUP kill them and end this program with [`INTERRUPTED`]. (The level processes
/// also end by themselves when this one ends otherwise, SIGKILL included: `model-level`.)
pub fn stop_level_processes_on_signal(ui: &Ui) {
    let handler = || {
        loopscope_analytic::stop_level_processes();
        std::process::exit(INTERRUPTED);
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        ui.note(format!(
            "cannot catch Ctrl-C ({e}); the model's processes end by themselves when this one does"
        ));
    }
}

/// How the analytic model starts a level process: this program's hidden `model-level`.
pub fn level_command() -> anyhow::Result<LevelCommand> {
    let program = std::env::current_exe().context("cannot find loopscope itself")?;
    Ok(LevelCommand {
        program,
        args: vec!["-q".into(), "model-level".into()],
    })
}

/// How text output is laid out: fitted to the terminal's width when stdout is one (`COLUMNS`
/// when set, else the terminal's own size), names whole with `--full-names`.
pub fn text_layout(full_names: bool) -> TextLayout {
    let stdout = std::io::stdout();
    let width = stdout
        .is_terminal()
        .then(|| terminal_width(&stdout))
        .flatten();
    TextLayout { width, full_names }
}

fn terminal_width(stdout: &std::io::Stdout) -> Option<usize> {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&w| w > 0);
    from_env.or_else(|| terminal_size::terminal_size_of(stdout).map(|(w, _)| usize::from(w.0)))
}
