//! The sampling back-end of `loopscope record`: runs a command under a perf_event timer,
//! copies each sample's user registers and stack, and unwinds it with DWARF CFI while the
//! target runs, so only return addresses are kept.
//!
//! One event per CPU follows the target (`inherit`), so its threads and child processes are
//! sampled too. Side-band records (mappings, `exec`, `fork`, exits) keep one unwinder per
//! process. Records from the per-CPU buffers are handled in time order: each pass takes
//! those older than a short horizon, so a mapping or an `exec` seen on one CPU is known
//! before the samples of another CPU that follow it.

mod events;
mod maps;
mod records;
mod spawn;
mod tracker;
mod unwind;

pub(crate) use unwind::MAX_FRAMES;

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Mapping, ProfileError, Sample, TargetExit};

/// Samples per second when the caller has no preference: below 1 % of one core's time spent
/// in the kernel's sampling path on the machines we measured, enough for shares of ±0.02 in a
/// one-second run.
pub const DEFAULT_FREQUENCY_HZ: u64 = 1000;

/// Bytes of user stack copied with each sample when the caller has no preference: deep
/// enough for the call chains of numerical code, small enough to keep the copy cheap.
pub const DEFAULT_STACK_BYTES: u32 = 16 * 1024;
/// Smallest user-stack copy per sample: one 8-byte word, as the kernel copies whole words.
pub const MIN_STACK_BYTES: u32 = 8;
/// Largest user-stack copy per sample the kernel accepts (`sample_stack_user` below
/// `u16::MAX`, a multiple of 8).
pub const MAX_STACK_BYTES: u32 = 65528;

/// Ring-buffer bytes requested per CPU (a power of two): about 60 samples with the default
/// stack copy, 30 ms of two threads at the default rate. Halved while the kernel refuses to
/// lock that much memory (`perf_event_mlock_kb`, `ulimit -l`).
pub const DEFAULT_BUFFER_BYTES: usize = 1024 * 1024;

/// How long an interrupted target has to exit after its SIGINT before it is left running.
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);

/// How `record_sampled` samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleOptions {
    /// Samples per second and thread.
    pub frequency_hz: u64,
    /// Bytes of user stack copied per sample (rounded down to a multiple of 8).
    pub stack_bytes: u32,
    /// Ring-buffer bytes per CPU to ask for (rounded up to a power of two).
    pub buffer_bytes: usize,
    /// The `PATH` used to find the command (the default search list when `None`).
    pub search_path: Option<OsString>,
    /// The events to try.
    pub event: EventChoice,
}

impl Default for SampleOptions {
    fn default() -> SampleOptions {
        SampleOptions {
            frequency_hz: DEFAULT_FREQUENCY_HZ,
            stack_bytes: DEFAULT_STACK_BYTES,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            search_path: None,
            event: EventChoice::Auto,
        }
    }
}

/// The event that drove the sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SampledEvent {
    /// `PERF_COUNT_HW_CPU_CYCLES`, user-mode cycles.
    #[serde(rename = "cycles")]
    Cycles,
    /// `PERF_COUNT_SW_CPU_CLOCK`, a per-CPU timer: the fallback without hardware counters.
    #[serde(rename = "cpu-clock")]
    CpuClock,
    /// `PERF_COUNT_HW_INSTRUCTIONS`, user-mode instructions, as precise as the PMU offers
    /// (spec 001 embodiment 3): each sample stands for its period of instructions.
    #[serde(rename = "instructions")]
    Instructions,
    /// A group led by cycles with an instruction counter read at every sample (spec 001
    /// embodiment 1, `perf record -e '{cycles,instructions}:S'`).
    #[serde(rename = "cycles+instructions")]
    CyclesWithInstructions,
    /// A group led by cache misses with an instruction counter read at every sample (spec 001
    /// embodiment 2).
    #[serde(rename = "cache-misses+instructions")]
    CacheMissesWithInstructions,
}

impl SampledEvent {
    /// The event's name as `perf` spells it.
    pub fn name(self) -> &'static str {
        match self {
            SampledEvent::Cycles => "cycles",
            SampledEvent::CpuClock => "cpu-clock",
            SampledEvent::Instructions => "instructions",
            SampledEvent::CyclesWithInstructions => "{cycles,instructions}",
            SampledEvent::CacheMissesWithInstructions => "{cache-misses,instructions}",
        }
    }

    /// What the event counts, the unit of [`SampledRun::period`].
    pub fn unit(self) -> &'static str {
        match self {
            SampledEvent::Cycles | SampledEvent::CyclesWithInstructions => "cycles",
            SampledEvent::CpuClock => "ns",
            SampledEvent::Instructions => "instructions",
            SampledEvent::CacheMissesWithInstructions => "cache misses",
        }
    }

    /// Whether each sample carries the instructions retired since the thread's previous one.
    pub fn reads_instructions(self) -> bool {
        matches!(
            self,
            SampledEvent::CyclesWithInstructions | SampledEvent::CacheMissesWithInstructions
        )
    }
}

/// Which events `record_sampled` tries, in order, until the kernel accepts one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EventChoice {
    /// Cycles with an instruction counter (one recording serves the time tree and the
    /// instruction mix), else cycles, else `cpu-clock`.
    #[default]
    Auto,
    /// Precise instructions (the instruction mix's best estimate), else as `Auto`.
    Instructions,
    /// Cache misses with an instruction counter, else as `Auto`.
    CacheMisses,
    /// `cpu-clock` only.
    CpuClock,
}

impl EventChoice {
    /// The events to try, most wanted first.
    pub fn candidates(self) -> Vec<SampledEvent> {
        let auto = [
            SampledEvent::CyclesWithInstructions,
            SampledEvent::Cycles,
            SampledEvent::CpuClock,
        ];
        let first = match self {
            EventChoice::Auto => None,
            EventChoice::Instructions => Some(SampledEvent::Instructions),
            EventChoice::CacheMisses => Some(SampledEvent::CacheMissesWithInstructions),
            EventChoice::CpuClock => return vec![SampledEvent::CpuClock],
        };
        first.into_iter().chain(auto).collect()
    }
}

/// An `execve` of one process of the target: from then on the process's earlier mappings
/// are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    /// The process.
    pub pid: u32,
    /// When, in nanoseconds since `record_sampled` was called.
    pub time_ns: u64,
    /// The new command name (the kernel's `comm`, at most 15 bytes).
    pub command: String,
    /// Index in [`SampledRun::mappings`] of the first mapping made after this `exec`.
    pub first_mapping: usize,
}

/// What a sampled run recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledRun {
    /// The event that drove the sampling.
    pub event: SampledEvent,
    /// `precise_ip` the event was opened with (0: arbitrary skid … 3: zero skid).
    #[serde(default)]
    pub precise_ip: u8,
    /// The requested sampling frequency.
    pub frequency_hz: u64,
    /// Mean event count between two samples ([`SampledEvent::unit`]: nanoseconds for
    /// `cpu-clock`, cycles for `cycles`); the nominal period when there is no sample.
    pub period: u64,
    /// The samples' periods added up: the event count the samples stand for.
    pub sampled_total: u64,
    /// The samples, in time order.
    pub samples: Vec<Sample>,
    /// Every executable mapping of every process, in the order they were made. A process
    /// created by `fork` starts with copies of its parent's mappings (the kernel reports
    /// none for them). See [`SampledRun::mapping_at`].
    pub mappings: Vec<Mapping>,
    /// The `exec`s seen, the target's own first.
    pub execs: Vec<Exec>,
    /// Samples the kernel dropped because a ring buffer was full.
    pub lost_samples: u64,
    /// Times the kernel throttled the event because samples came faster than it allows
    /// (`perf_event_max_sample_rate`); each throttled interval has no samples.
    #[serde(default)]
    pub throttled: u64,
    /// TSC ticks per second over the run, when measured.
    #[serde(default)]
    pub tsc_hz: Option<f64>,
    /// The core clock in cycles per nanosecond, measured by a chain of dependent additions
    /// just after the run (the time-based instruction estimate converts sampled nanoseconds
    /// to cycles with it).
    #[serde(default)]
    pub core_cycles_per_ns: Option<f64>,
    /// The CPUID vendor of the recording machine (the cost model's latencies depend on it).
    #[serde(default)]
    pub cpu_vendor: Option<String>,
    /// How the target's first process ended.
    pub exit: TargetExit,
    /// From the target's `exec` to its first process's exit, in nanoseconds.
    pub wall_ns: u64,
    /// From the call of `record_sampled` to the target's `exec`, in nanoseconds.
    pub startup_ns: u64,
    /// Processes seen (the target's first process and every one created under it).
    pub processes: u32,
    /// Threads seen, over all processes.
    pub threads: u32,
    /// User-stack bytes copied per sample.
    pub stack_bytes: u32,
    /// Ring-buffer bytes per CPU obtained from the kernel.
    pub buffer_bytes: u64,
}

/// Below this many samples a share's standard error can pass 11 % (`0.5 / sqrt(n)`), too
/// coarse to rank loops by: `record` and `report` say so.
const FEW_SAMPLES: usize = 20;

impl SampledRun {
    /// What to do about a run that gave fewer than 20 samples (one shorter than a
    /// few sampling periods): `None` when it gave enough.
    pub fn few_samples_note(&self) -> Option<String> {
        let n = self.samples.len();
        if n >= FEW_SAMPLES {
            return None;
        }
        let what = match n {
            0 => "no samples".to_owned(),
            1 => "only 1 sample".to_owned(),
            n => format!("only {n} samples"),
        };
        Some(format!(
            "{what} at {} Hz in a run of {:.3} s: the program ran for too few sampling periods \
             to show where its time goes; record with a higher --freq, or with --backend patch \
             or ptrace, which count every loop however short the run",
            self.frequency_hz,
            self.wall_ns as f64 * 1e-9
        ))
    }

    /// What the samples the kernel dropped mean for the shares; `None` when none were.
    pub fn lost_samples_note(&self) -> Option<String> {
        lost_samples_note(
            self.lost_samples,
            self.samples.len() as u64,
            self.frequency_hz,
        )
    }

    /// The mapping of process `pid` that held `address` at `time_ns`: among the mappings
    /// the process had after its last `exec` before `time_ns`, the latest one containing
    /// the address.
    pub fn mapping_at(&self, pid: u32, time_ns: u64, address: u64) -> Option<&Mapping> {
        mapping_at(&self.mappings, &self.execs, pid, time_ns, address)
    }
}

/// [`SampledRun::mapping_at`] over any list of mappings and `exec`s recorded the same way.
pub(crate) fn mapping_at<'a>(
    mappings: &'a [Mapping],
    execs: &[Exec],
    pid: u32,
    time_ns: u64,
    address: u64,
) -> Option<&'a Mapping> {
    let mut first = 0;
    let mut end = mappings.len();
    for exec in execs.iter().filter(|exec| exec.pid == pid) {
        if exec.time_ns <= time_ns {
            first = exec.first_mapping;
        } else {
            end = exec.first_mapping;
            break;
        }
    }
    mappings
        .get(first..end.max(first))?
        .iter()
        .rev()
        .find(|m| m.pid == pid && m.start <= address && address < m.end)
}

/// Runs `command` (its first word looked up in `options.search_path` unless it holds a `/`)
/// under a sampling perf event until its first process exits, and returns the unwound
/// samples.
///
/// A target that exits non-zero or dies by a signal is not an error. When `stop` becomes
/// true the target gets a SIGINT; what was recorded until it exits (or until it has had a
/// second to do so, after which it is left running and reported [`TargetExit::Detached`]) is
/// returned.
///
/// Errors: [`ProfileError::Command`] for a command that cannot be run,
/// [`ProfileError::PerfUnavailable`] when the kernel refuses perf events (the message names
/// `perf_event_paranoid`), [`ProfileError::Options`] for options the kernel cannot honour.
pub fn record_sampled(
    command: &[OsString],
    options: &SampleOptions,
    stop: &AtomicBool,
) -> Result<SampledRun, ProfileError> {
    let called_ns = events::monotonic_ns();
    let called_tsc = crate::tsc::read();
    events::check_options(options)?;
    let program = crate::command::resolve_program(command, options.search_path.as_deref())?;
    let mut child = spawn::Child::fork_waiting(&program, command)?;
    let mut rings = match events::Rings::open(child.pid(), options) {
        Ok(rings) => rings,
        Err(error) => {
            child.abandon();
            return Err(error);
        }
    };
    let released_ns = events::monotonic_ns();
    child.exec()?;
    let mut tracker = tracker::Tracker::new(called_ns, child.pid() as u32);
    let exit = watch(&mut child, &mut rings, &mut tracker, stop)?;
    let ended_ns = events::monotonic_ns();
    let elapsed_ns = ended_ns.saturating_sub(called_ns);
    let tsc_hz = (elapsed_ns > 0)
        .then(|| crate::tsc::read().saturating_sub(called_tsc) as f64 * 1e9 / elapsed_ns as f64);
    let period_nominal = rings.nominal_period(options.frequency_hz);
    Ok(tracker.finish(tracker::Finish {
        event: rings.event(),
        precise_ip: rings.precise_ip(),
        frequency_hz: options.frequency_hz,
        period_nominal,
        exit,
        released_ns,
        ended_ns,
        stack_bytes: rings.stack_bytes(),
        buffer_bytes: rings.buffer_bytes() as u64,
        tsc_hz,
        core_cycles_per_ns: Some(crate::tsc::core_cycles_per_ns()),
        cpu_vendor: Some(crate::tsc::cpu_vendor()),
    }))
}

/// Share of the samples taken that may be dropped before the shares are said to lean: the
/// kernel drops samples while a buffer is full, that is while the code sampled most densely
/// runs, so the loss is not spread evenly over the run.
const LOST_SHARE_BIASED: f64 = 0.01;

/// [`SampledRun::lost_samples_note`] of a run that lost `lost` samples and kept `kept`, at
/// `frequency_hz`.
fn lost_samples_note(lost: u64, kept: u64, frequency_hz: u64) -> Option<String> {
    if lost == 0 {
        return None;
    }
    let taken = lost.saturating_add(kept);
    let share = lost as f64 / taken as f64;
    let mut note = format!(
        "{lost} samples lost (ring buffer full): {:.1} % of the {taken} taken",
        100.0 * share
    );
    if share >= LOST_SHARE_BIASED {
        note.push_str(&format!(
            "; the shares lean toward code that ran while the buffer had room, and the ± \
             columns do not count that: record again at a lower --freq (this run: {frequency_hz} \
             Hz)"
        ));
    }
    Some(note)
}

/// Reads the buffers until the target's processes have exited (or were given up on after
/// an interruption), handing every record to the tracker in time order.
fn watch(
    child: &mut spawn::Child,
    rings: &mut events::Rings,
    tracker: &mut tracker::Tracker,
    stop: &AtomicBool,
) -> Result<TargetExit, ProfileError> {
    let mut queue = records::Queue::default();
    let mut interrupted_at = None;
    let exit = loop {
        if interrupted_at.is_none() && stop.load(Ordering::Relaxed) {
            child.interrupt();
            interrupted_at = Some(std::time::Instant::now());
        }
        rings.wait(child.exit_fd())?;
        let horizon_ns = events::monotonic_ns().saturating_sub(records::HORIZON_NS);
        handle_before(horizon_ns, rings, &mut queue, tracker);
        if let Some(exit) = child.try_wait()? {
            break exit;
        }
        if interrupted_at.is_some_and(|at| at.elapsed() >= INTERRUPT_GRACE) {
            break TargetExit::Detached;
        }
    };
    // The first process is reaped, so all its records are in, its forks included.
    handle_before(events::monotonic_ns(), rings, &mut queue, tracker);
    follow_descendants(rings, &mut queue, tracker, stop, interrupted_at)?;
    handle_before(events::monotonic_ns(), rings, &mut queue, tracker);
    Ok(exit)
}

/// Keeps reading while processes the target started still run after its first process ended
/// (a launcher, a parent that returns before its children): their samples are the run's too.
/// A process that left the session (a daemon, after `setsid`) is not waited for: it may run
/// for ever. On `stop` the others get a SIGINT, and are given up on [`INTERRUPT_GRACE`] later.
fn follow_descendants(
    rings: &mut events::Rings,
    queue: &mut records::Queue,
    tracker: &mut tracker::Tracker,
    stop: &AtomicBool,
    mut interrupted_at: Option<std::time::Instant>,
) -> Result<(), ProfileError> {
    let session = crate::procfs::session_of(std::process::id() as i32);
    loop {
        // A lost exit record would keep a process listed for ever: the process table says
        // whether it still runs.
        let running: Vec<u32> = tracker
            .running_descendants()
            .filter(|&p| {
                crate::procfs::alive(p as i32) && crate::procfs::session_of(p as i32) == session
            })
            .collect();
        if running.is_empty() {
            return Ok(());
        }
        if stop.load(Ordering::Relaxed) && interrupted_at.is_none() {
            for &pid in &running {
                // SAFETY: kill takes plain integers. The pid was a live process of the
                // target's session a poll (20 ms) ago; its number being reused within that
                // window is the one way this interrupt could reach another process.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
            }
            interrupted_at = Some(std::time::Instant::now());
        }
        if interrupted_at.is_some_and(|at| at.elapsed() >= INTERRUPT_GRACE) {
            return Ok(());
        }
        rings.wait(None)?;
        let horizon_ns = events::monotonic_ns().saturating_sub(records::HORIZON_NS);
        handle_before(horizon_ns, rings, queue, tracker);
    }
}

/// Events handled between two reads of the buffers: unwinding a batch takes long enough for
/// the buffers to fill at high rates, and reading them is cheap.
const BATCH: usize = 64;

/// Hands the tracker, in time order, every event stamped before `horizon_ns`, reading the
/// buffers again after each batch.
fn handle_before(
    horizon_ns: u64,
    rings: &mut events::Rings,
    queue: &mut records::Queue,
    tracker: &mut tracker::Tracker,
) {
    loop {
        rings.drain(queue);
        for _ in 0..BATCH {
            let Some(event) = queue.pop_before(horizon_ns) else {
                return;
            };
            tracker.handle(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lost_samples_note;

    #[test]
    fn a_loss_past_a_percent_says_the_shares_lean() {
        assert_eq!(lost_samples_note(0, 1000, 1000), None);
        let few = lost_samples_note(5, 995, 1000).unwrap();
        assert_eq!(
            few,
            "5 samples lost (ring buffer full): 0.5 % of the 1000 taken"
        );
        let many = lost_samples_note(250, 750, 100_000).unwrap();
        assert!(
            many.starts_with(
                "250 samples lost (ring buffer full): 25.0 % of the 1000 taken; the shares lean"
            ),
            "{many}"
        );
        assert!(many.ends_with("(this run: 100000 Hz)"), "{many}");
    }
}
