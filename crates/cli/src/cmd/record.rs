//! `loopscope record`: run a command under a back-end and write its profile.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::{Args, ValueEnum};
use loopscope_profile::{
    DEFAULT_FREQUENCY_HZ, DEFAULT_STACK_BYTES, EventChoice, ExactOptions, MAX_STACK_BYTES,
    MIN_STACK_BYTES, NameValues, PatchOptions, Profile, SampleOptions, expand_output_name,
    has_placeholders, measure_trap_cost, record_exact, record_patch, record_sampled,
};

use crate::failure::bad_input;
use crate::ui::Ui;

/// Which back-end watches the program.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Backend {
    /// Timer samples with DWARF-unwound call stacks: time per loop and context, near-native speed.
    Sample,
    /// int3 markers at loop and call sites: exact entries and trips, slower.
    Ptrace,
    /// Jumps patched into the program at loop and call sites: exact entries and trips at close
    /// to native speed.
    Patch,
}

/// Which event drives the sample back-end.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Event {
    /// {cycles,instructions}, else cycles, else cpu-clock (no hardware counters).
    Auto,
    /// Precise instructions (the best for `mix`), else as auto.
    Instructions,
    /// {cache-misses,instructions}, else as auto.
    CacheMisses,
    /// The cpu-clock timer only.
    CpuClock,
}

/// Arguments of `record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// How to watch the program [default: sample]. An option rather than a clap default, so
    /// that `--exact` can refuse a back-end given with it.
    #[arg(long, value_enum, help = "How to watch the program [default: sample]")]
    pub backend: Option<Backend>,
    /// Where to write the profile; `%r` is the process's rank under mpirun or srun
    /// (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID; 0 without), `%p` loopscope's process id,
    /// `%h` the host name, `%%` a percent sign: `-o 'prof.%r'`.
    #[arg(
        short,
        long,
        value_name = "PROFILE",
        default_value = "loopscope.profile"
    )]
    pub output: PathBuf,
    /// Count every block execution with a marker at each block (implies the ptrace back-end;
    /// one stop per block, so for small runs): the exact reference of `loopscope mix`.
    #[arg(long)]
    pub exact: bool,
    /// Also count every block's executions (patch or ptrace back-end): the exact instruction mix
    /// of `loopscope mix`; with the patch back-end at a fraction of the cost of `--exact`.
    #[arg(long)]
    pub blocks: bool,
    /// Also patch the shared libraries the program loads at start (patch back-end; not the C
    /// runtime's): their functions and loops get nodes of their own below `name@plt`.
    #[arg(long)]
    pub libraries: bool,
    /// The sampling event (sample back-end), [`DEFAULT_EVENT`] when not given. Options, not
    /// clap defaults, so that giving one with another back-end can be refused; the help
    /// names the defaults from the constants ([`event_help`] and the others).
    #[arg(long, value_enum, help = event_help())]
    pub event: Option<Event>,
    /// Samples per second and thread (sample back-end), [`DEFAULT_FREQUENCY_HZ`] when not
    /// given.
    #[arg(long, value_name = "HZ", help = freq_help())]
    pub freq: Option<u64>,
    /// Bytes of user stack copied with each sample for unwinding (sample back-end),
    /// [`DEFAULT_STACK_BYTES`] when not given.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32)
            .range(i64::from(MIN_STACK_BYTES)..=i64::from(MAX_STACK_BYTES)),
        help = stack_bytes_help()
    )]
    pub stack_bytes: Option<u32>,
    /// Also run the command once without loopscope first, for the overhead line of `report`.
    #[arg(long)]
    pub native: bool,
    /// Do not measure the cost of one marker (ptrace back-end); times are then raw.
    #[arg(long)]
    pub no_calibrate: bool,
    /// The command to profile and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// The event the sample back-end uses when `--event` is not given.
const DEFAULT_EVENT: Event = Event::Auto;

/// `help` followed by the default as clap writes its own: `… [default: 1000]`.
fn with_default(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

fn event_help() -> String {
    let name = DEFAULT_EVENT
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    with_default("The sampling event (sample back-end)", name)
}

fn freq_help() -> String {
    with_default(
        &format!("Samples per second and thread (sample back-end; 1 to {MAX_FREQUENCY_HZ})"),
        DEFAULT_FREQUENCY_HZ,
    )
}

fn stack_bytes_help() -> String {
    with_default(
        &format!(
            "Bytes of user stack copied with each sample for unwinding (sample back-end; \
             {MIN_STACK_BYTES} to {MAX_STACK_BYTES}): deeper call chains are cut, their callers \
             missing"
        ),
        DEFAULT_STACK_BYTES,
    )
}

/// Highest `--freq`: Linux's default `perf_event_max_sample_rate`, above which the kernel
/// refuses or throttles the rate.
const MAX_FREQUENCY_HZ: u64 = 100_000;

/// Runs `record`.
pub fn run(args: &RecordArgs, ui: &Ui) -> anyhow::Result<()> {
    let freq = args.freq.unwrap_or(DEFAULT_FREQUENCY_HZ);
    if freq == 0 || freq > MAX_FREQUENCY_HZ {
        return Err(bad_input(format!(
            "--freq {freq}: expected 1 to {MAX_FREQUENCY_HZ} samples per second"
        )));
    }
    let backend = chosen_backend(args)?;
    const SAMPLES_HOW: &str = "sets how the sample back-end samples";
    for (given, flag, purpose) in [
        (args.event.is_some(), "--event", SAMPLES_HOW),
        (args.freq.is_some(), "--freq", SAMPLES_HOW),
        (
            args.stack_bytes.is_some(),
            "--stack-bytes",
            "sizes the stack copied with each sample",
        ),
    ] {
        if given && !matches!(backend, Backend::Sample) {
            return Err(bad_input(format!(
                "{flag} {purpose}: use it with --backend sample \
                 (the {} back-end counts exactly)",
                if matches!(backend, Backend::Patch) {
                    "patch"
                } else {
                    "ptrace"
                }
            )));
        }
    }
    if args.libraries && !matches!(backend, Backend::Patch) {
        return Err(bad_input("--libraries needs --backend patch"));
    }
    if args.blocks && matches!(backend, Backend::Sample) {
        return Err(bad_input(
            "--blocks counts blocks with markers: use it with --backend patch or ptrace",
        ));
    }
    let output = output_path(&args.output, ui)?;
    check_writable(&output)?;
    let search_path = std::env::var_os("PATH");
    refuse_output_over_program(&output, &args.command, search_path.as_deref())?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        ui.warn(format!(
            "cannot catch Ctrl-C ({e}); an interrupted run loses its profile"
        ));
    }
    let native_wall_ns = if args.native {
        Some(run_native(&args.command, search_path.as_deref())?)
    } else {
        None
    };
    let text: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut profile = match backend {
        Backend::Sample => {
            let event = match args.event.unwrap_or(DEFAULT_EVENT) {
                Event::Auto => EventChoice::Auto,
                Event::Instructions => EventChoice::Instructions,
                Event::CacheMisses => EventChoice::CacheMisses,
                Event::CpuClock => EventChoice::CpuClock,
            };
            let options = SampleOptions {
                frequency_hz: freq,
                search_path: search_path.clone(),
                event,
                stack_bytes: args.stack_bytes.unwrap_or(DEFAULT_STACK_BYTES),
                ..SampleOptions::default()
            };
            let run = record_sampled(&args.command, &options, &stop)?;
            if let Some(warning) = event_fallback_warning(args.event, run.event) {
                ui.warn(warning);
            }
            Profile::sampled(text, run)
        }
        Backend::Ptrace => {
            let trap_cost = if args.no_calibrate {
                None
            } else {
                Some(measure_trap_cost(20_000)?)
            };
            let options = ExactOptions {
                search_path,
                trap_cost,
                count_blocks: args.exact || args.blocks,
            };
            Profile::exact(text, record_exact(&args.command, &options, &stop)?)
        }
        Backend::Patch => {
            let options = PatchOptions {
                search_path,
                runtime: patch_runtime()?,
                preload: std::env::var_os("LD_PRELOAD"),
                count_blocks: args.blocks,
                libraries: args.libraries,
                scratch: None,
            };
            Profile::patched(text, record_patch(&args.command, &options, &stop)?)
        }
    };
    profile.native_wall_ns = native_wall_ns;
    profile.record_flags = Some(recording_flags(args, backend));
    profile.identify_unversioned_objects();
    profile.write(&output)?;
    ui.done(summary(&profile, &output));
    if let loopscope_profile::Recording::Sample(run) = &profile.recording
        && let Some(note) = run.few_samples_note()
    {
        ui.warn(note);
    }
    if stop.load(Ordering::SeqCst) {
        std::process::exit(130);
    }
    Ok(())
}

/// The flags given that shape the recording, in the order `record --help` lists them, so that
/// `report` can show a command that records the same way. The back-end is always named: a
/// later default must not change what the command does.
fn recording_flags(args: &RecordArgs, backend: Backend) -> Vec<String> {
    let name = |value: Option<clap::builder::PossibleValue>| {
        value.map(|v| v.get_name().to_owned()).unwrap_or_default()
    };
    let mut flags = Vec::new();
    if args.exact {
        flags.push("--exact".to_owned());
    } else {
        flags.extend(["--backend".to_owned(), name(backend.to_possible_value())]);
    }
    for (given, flag) in [(args.blocks, "--blocks"), (args.libraries, "--libraries")] {
        if given {
            flags.push(flag.to_owned());
        }
    }
    if let Some(event) = args.event {
        flags.extend(["--event".to_owned(), name(event.to_possible_value())]);
    }
    if let Some(freq) = args.freq {
        flags.extend(["--freq".to_owned(), freq.to_string()]);
    }
    if let Some(bytes) = args.stack_bytes {
        flags.extend(["--stack-bytes".to_owned(), bytes.to_string()]);
    }
    for (given, flag) in [
        (args.native, "--native"),
        (args.no_calibrate, "--no-calibrate"),
    ] {
        if given {
            flags.push(flag.to_owned());
        }
    }
    flags
}

/// The back-end `--backend` and `--exact` choose together. `--exact` is the ptrace back-end with
/// a marker per block, so it goes with `--backend ptrace` or none; with another back-end one of
/// the two flags would be silently dropped.
fn chosen_backend(args: &RecordArgs) -> anyhow::Result<Backend> {
    match (args.exact, args.backend) {
        (false, backend) => Ok(backend.unwrap_or(Backend::Sample)),
        (true, None | Some(Backend::Ptrace)) => Ok(Backend::Ptrace),
        (true, Some(Backend::Patch)) => Err(bad_input(
            "--exact and --backend patch: --exact counts blocks with the ptrace back-end; \
             for the patch back-end's block counts use --backend patch --blocks",
        )),
        (true, Some(Backend::Sample)) => Err(bad_input(
            "--exact and --backend sample: --exact counts every block with the ptrace back-end, \
             the sample back-end does not count; give one of the two",
        )),
    }
}

/// A profile written over the program it profiles would destroy the program: `-o` naming the
/// executable the command runs, through whatever path (a link, `./` or not), is refused before
/// anything runs. Compared by device and inode, so another spelling of the same file is caught.
/// Any other ELF file is refused too: a profile never replaces a binary on purpose.
fn refuse_output_over_program(
    output: &std::path::Path,
    command: &[OsString],
    search_path: Option<&std::ffi::OsStr>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(first) = command.first() else {
        return Ok(());
    };
    // A command that cannot be found is the back-end's error to report, with its own wording.
    let Ok(out) = std::fs::metadata(output) else {
        return Ok(());
    };
    let program = loopscope_profile::resolve_command(first, search_path)
        .ok()
        .and_then(|p| std::fs::metadata(p).ok());
    if program.is_some_and(|p| (out.dev(), out.ino()) == (p.dev(), p.ino())) {
        return Err(bad_input(format!(
            "-o {}: that is the program `{}` runs; the profile would overwrite it (choose \
             another -o)",
            output.display(),
            first.to_string_lossy()
        )));
    }
    if is_elf(output) {
        return Err(bad_input(format!(
            "-o {}: an ELF binary is there; the profile would overwrite it (choose another -o, \
             or remove the file first)",
            output.display()
        )));
    }
    Ok(())
}

fn is_elf(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

/// The warning for an `--event` the processor could not count, naming the event sampled
/// instead; `None` when the asked event (or `auto`'s choice) was used.
fn event_fallback_warning(
    asked: Option<Event>,
    used: loopscope_profile::SampledEvent,
) -> Option<String> {
    use loopscope_profile::SampledEvent;
    let (flag, wanted) = match asked? {
        Event::Auto => return None,
        Event::Instructions => ("instructions", SampledEvent::Instructions),
        Event::CacheMisses => ("cache-misses", SampledEvent::CacheMissesWithInstructions),
        Event::CpuClock => ("cpu-clock", SampledEvent::CpuClock),
    };
    (used != wanted).then(|| {
        format!(
            "--event {flag}: the kernel refused it (this processor, or virtual machine, offers \
             no hardware counter for it); sampled {} instead",
            used.name()
        )
    })
}

/// The patch back-end's runtime library: `LOOPSCOPE_PATCH_RUNTIME` if set, else the one cargo
/// builds beside this binary: in its `deps/` directory first (where every build of loopscope
/// leaves it; the copy next to the binary is only refreshed when the library itself is built
/// as a workspace member), then next to it (an installed copy).
pub(crate) fn patch_runtime() -> anyhow::Result<PathBuf> {
    const NAME: &str = "libloopscope_patch_runtime.so";
    if let Some(path) = std::env::var_os("LOOPSCOPE_PATCH_RUNTIME") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    [dir.join("deps").join(NAME), dir.join(NAME)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{NAME} is not next to {} (it is built with loopscope: `cargo build --release`), \
                 and LOOPSCOPE_PATCH_RUNTIME does not name it",
                exe.display()
            )
        })
}

fn run_native(command: &[OsString], search_path: Option<&std::ffi::OsStr>) -> anyhow::Result<u64> {
    let program = loopscope_profile::resolve_command(&command[0], search_path)?;
    let started = Instant::now();
    std::process::Command::new(program)
        .args(&command[1..])
        .stdout(std::process::Stdio::null())
        .status()?;
    Ok(started.elapsed().as_nanos() as u64)
}

fn summary(profile: &Profile, output: &std::path::Path) -> String {
    let (what, exit, wall_ns) = match &profile.recording {
        loopscope_profile::Recording::Sample(run) => (
            format!("{} samples", run.samples.len()),
            run.exit,
            run.wall_ns,
        ),
        loopscope_profile::Recording::Ptrace(run) | loopscope_profile::Recording::Patch(run) => {
            let events: u64 = run.threads.iter().map(|t| t.events).sum();
            let threads = match run.threads.len() {
                1 => "1 thread".to_owned(),
                n => format!("{n} threads"),
            };
            (
                format!("{events} markers in {threads}"),
                run.exit,
                run.wall_ns,
            )
        }
    };
    format!(
        "recorded {what} of `{}` ({exit}) in {:.2} s into {}",
        loopscope_report::shell_words(&profile.command),
        wall_ns as f64 * 1e-9,
        output.display()
    )
}

/// The launcher variables that give a process's rank, in the order they are looked at.
const RANK_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"];

/// `-o` with `%r`, `%p` and `%h` filled in from this process's environment.
fn output_path(template: &std::path::Path, ui: &Ui) -> anyhow::Result<PathBuf> {
    let Some(text) = template.to_str().filter(|t| has_placeholders(t)) else {
        return Ok(template.to_owned());
    };
    let mut rank = None;
    for name in RANK_VARIABLES {
        if let Ok(value) = std::env::var(name) {
            let parsed = value.trim().parse::<u32>().map_err(|_| {
                bad_input(format!("{name}={value}: expected a rank (0, 1, 2, ...)"))
            })?;
            rank = Some(parsed);
            break;
        }
    }
    if rank.is_none() && text.contains("%r") {
        ui.note("no rank in OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID: %r is 0");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    let values = NameValues {
        rank: rank.unwrap_or(0),
        pid: std::process::id(),
        host,
    };
    Ok(PathBuf::from(expand_output_name(text, &values)?))
}

/// A profile that cannot be written is found out before the program runs, not after, by the
/// rules every written file follows: a regular file this process may write or nothing yet,
/// through any links (never a directory, FIFO or device), in a directory that takes a new file.
fn check_writable(output: &std::path::Path) -> anyhow::Result<()> {
    loopscope_machine::check_write_target(output)
        .map(drop)
        .map_err(|e| bad_input(e.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command, FromArgMatches};

    use super::*;

    fn help() -> String {
        RecordArgs::augment_args(Command::new("record"))
            .term_width(10_000)
            .render_help()
            .to_string()
    }

    fn line_of<'h>(help: &'h str, flag: &str) -> &'h str {
        help.lines()
            .find(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("no {flag} in\n{help}"))
    }

    #[test]
    fn the_help_names_the_defaults_the_code_uses() {
        let help = help();
        let freq = line_of(&help, "--freq");
        assert!(
            freq.ends_with(&format!("[default: {DEFAULT_FREQUENCY_HZ}]")),
            "{freq}"
        );
        let stack = line_of(&help, "--stack-bytes");
        assert!(
            stack.ends_with(&format!("[default: {DEFAULT_STACK_BYTES}]")),
            "{stack}"
        );
        assert!(
            stack.contains(&format!("{MIN_STACK_BYTES} to {MAX_STACK_BYTES})")),
            "{stack}"
        );
        assert!(
            freq.contains(&format!("1 to {MAX_FREQUENCY_HZ})")),
            "{freq}"
        );
        let event = line_of(&help, "--event");
        let name = DEFAULT_EVENT.to_possible_value().unwrap();
        assert!(
            event.contains(&format!("[default: {}]", name.get_name())),
            "{event}"
        );
    }

    fn flags_of(command: &[&str]) -> Vec<String> {
        let matches = RecordArgs::augment_args(Command::new("record"))
            .try_get_matches_from(command)
            .unwrap();
        let args = RecordArgs::from_arg_matches(&matches).unwrap();
        recording_flags(&args, chosen_backend(&args).unwrap())
    }

    #[test]
    fn the_stored_flags_record_the_same_way() {
        assert_eq!(
            flags_of(&["record", "--", "./app"]),
            ["--backend", "sample"]
        );
        assert_eq!(
            flags_of(&[
                "record",
                "-o",
                "x",
                "--freq",
                "30000",
                "--stack-bytes",
                "4096",
                "--event",
                "cpu-clock",
                "--native",
                "--",
                "./app",
                "--freq",
                "1",
            ]),
            [
                "--backend",
                "sample",
                "--event",
                "cpu-clock",
                "--freq",
                "30000",
                "--stack-bytes",
                "4096",
                "--native"
            ]
        );
        assert_eq!(
            flags_of(&[
                "record",
                "--backend",
                "patch",
                "--libraries",
                "--blocks",
                "--",
                "./a"
            ]),
            ["--backend", "patch", "--blocks", "--libraries"]
        );
        assert_eq!(
            flags_of(&["record", "--exact", "--no-calibrate", "--", "./a"]),
            ["--exact", "--no-calibrate"]
        );
        // Every flag of `record` is either stored or known not to change what is recorded.
        let stored = [
            "backend",
            "exact",
            "blocks",
            "libraries",
            "event",
            "freq",
            "stack_bytes",
            "native",
            "no_calibrate",
        ];
        let elsewhere = ["output", "command"];
        for arg in RecordArgs::augment_args(Command::new("record")).get_arguments() {
            let id = arg.get_id().as_str();
            assert!(
                stored.contains(&id) || elsewhere.contains(&id),
                "record flag {id}: store it in the profile's record_flags if it changes what \
                 is recorded"
            );
        }
    }

    #[test]
    fn the_sampling_flags_stay_unset_when_not_given() {
        let matches = RecordArgs::augment_args(Command::new("record"))
            .try_get_matches_from(["record", "--", "./app"])
            .unwrap();
        let args = RecordArgs::from_arg_matches(&matches).unwrap();
        assert!(args.event.is_none() && args.freq.is_none() && args.stack_bytes.is_none());
    }
}
