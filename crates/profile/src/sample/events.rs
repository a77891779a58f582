//! Opening the sampling events (one per online CPU, inherited by the target's threads and
//! children, enabled by its `exec`) and reading their ring buffers.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Clock, Counter, ReadFormat, SampleFlag, SampleSkid, Sampler};

use super::records::{self, Queue};
use super::{MAX_STACK_BYTES, MIN_STACK_BYTES, SampleOptions, SampledEvent, maps};
use crate::ProfileError;

/// Registers copied with each sample, by their bit in the x86-64 `perf_regs` numbering:
/// only what the unwinder needs (`bp`, `sp`, `ip`), in this order in the record.
pub(super) const REGS_USER_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// Smallest ring buffer tried: it must hold a few full-size samples.
const MIN_BUFFER_BYTES: usize = 64 * 1024;

/// How long `wait` sleeps at most, so `stop` and the target's exit are noticed when no
/// buffer fills (and no pidfd tells of the exit).
const POLL_TIMEOUT_MS: i32 = 20;

/// The clock of the records' timestamps, `CLOCK_MONOTONIC`, read now.
pub(super) fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

/// Refuses options no kernel accepts, with what the limit is.
pub(super) fn check_options(options: &SampleOptions) -> Result<(), ProfileError> {
    let bad = |what: String| Err(ProfileError::Options { what });
    if options.frequency_hz == 0 {
        return bad("the sampling frequency must be at least 1 Hz".to_string());
    }
    if let Some(max) = read_sysctl("perf_event_max_sample_rate")
        && i128::from(options.frequency_hz) > i128::from(max)
    {
        return bad(format!(
            "a sampling frequency of {} Hz is above this kernel's limit of {max} Hz \
             (/proc/sys/kernel/perf_event_max_sample_rate)",
            options.frequency_hz
        ));
    }
    if !(MIN_STACK_BYTES..=MAX_STACK_BYTES).contains(&options.stack_bytes) {
        return bad(format!(
            "a user-stack copy of {} bytes is outside {MIN_STACK_BYTES}..={MAX_STACK_BYTES}",
            options.stack_bytes
        ));
    }
    Ok(())
}

/// The open events of one recording, one ring buffer per CPU.
pub(super) struct Rings {
    event: SampledEvent,
    precise_ip: u8,
    samplers: Vec<Sampler>,
    /// The instruction counters of group events, kept open with their leaders.
    _members: Vec<Counter>,
    /// Per sampler: still polled (false once the kernel says the target it was opened on
    /// has exited; its buffer still receives the records of the target's other threads).
    polled: Vec<bool>,
    buffer_bytes: usize,
    stack_bytes: u32,
}

impl Rings {
    /// Opens the first of `options.event`'s candidates the kernel accepts on every online CPU
    /// for `pid` (still waiting to `exec`), each at the most precise `precise_ip` it takes,
    /// and maps the largest buffers the kernel lets us lock.
    pub(super) fn open(pid: libc::pid_t, options: &SampleOptions) -> Result<Rings, ProfileError> {
        let cpus = online_cpus();
        let stack_bytes = options.stack_bytes & !7;
        let mut last_error = None;
        for event in options.event.candidates() {
            for precise_ip in precise_levels(event) {
                let wanted = Wanted {
                    event,
                    precise_ip,
                    stack_bytes,
                };
                // Like perf and samply: any refusal of a hardware event (none in a VM, an
                // unsupported exclude bit, a busy PMU) falls back to the next candidate.
                match open_all(&wanted, pid, &cpus, options) {
                    Ok(opened) => {
                        return Ok(Rings {
                            event,
                            precise_ip,
                            polled: vec![true; opened.samplers.len()],
                            samplers: opened.samplers,
                            _members: opened.members,
                            buffer_bytes: opened.bytes,
                            stack_bytes,
                        });
                    }
                    Err(error) => last_error = Some(error),
                }
            }
        }
        Err(last_error.map_or_else(
            || ProfileError::PerfUnavailable {
                what: "no sampling event to try".to_string(),
            },
            OpenError::into_profile_error,
        ))
    }

    /// The `precise_ip` the event was opened with.
    pub(super) fn precise_ip(&self) -> u8 {
        self.precise_ip
    }

    /// The event sampled.
    pub(super) fn event(&self) -> SampledEvent {
        self.event
    }

    /// Ring-buffer bytes per CPU.
    pub(super) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// User-stack bytes copied per sample.
    pub(super) fn stack_bytes(&self) -> u32 {
        self.stack_bytes
    }

    /// The period the kernel derives from the frequency: exact for `cpu-clock` (a timer of
    /// `1e9 / frequency` ns); `cycles` adapts its period as it goes, so there is none.
    pub(super) fn nominal_period(&self, frequency_hz: u64) -> u64 {
        match self.event {
            SampledEvent::CpuClock => 1_000_000_000 / frequency_hz.max(1),
            _ => 0,
        }
    }

    /// Sleeps until a buffer reaches its watermark, `exit_fd` becomes readable, or
    /// `POLL_TIMEOUT_MS` passes.
    pub(super) fn wait(&mut self, exit_fd: Option<RawFd>) -> Result<(), ProfileError> {
        let mut fds: Vec<libc::pollfd> = self
            .samplers
            .iter()
            .zip(&self.polled)
            .map(|(sampler, &polled)| libc::pollfd {
                fd: if polled { sampler.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if let Some(fd) = exit_fd {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries that outlives the call.
        let ready =
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_TIMEOUT_MS) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(ProfileError::System {
                what: "poll on the perf ring buffers".to_string(),
                source: error,
            });
        }
        for (polled, fd) in self.polled.iter_mut().zip(&fds) {
            // The event's own task has exited: the kernel now reports POLLHUP at every poll,
            // which would spin; its buffer is still drained after each wait.
            if fd.revents & libc::POLLHUP != 0 {
                *polled = false;
            }
        }
        Ok(())
    }

    /// Moves every record now in the buffers into `queue`.
    pub(super) fn drain(&mut self, queue: &mut Queue) {
        for sampler in &mut self.samplers {
            let config = sampler.config().clone();
            while let Some(record) = sampler.next_record() {
                let bytes = record.to_contiguous();
                if let Some(event) = records::convert(record.ty(), record.misc(), &bytes, &config) {
                    queue.push(event);
                }
            }
        }
    }
}

/// Why an event could not be opened.
struct OpenError {
    event: SampledEvent,
    step: &'static str,
    source: io::Error,
}

impl OpenError {
    fn into_profile_error(self) -> ProfileError {
        let errno = self.source.raw_os_error().unwrap_or(0);
        let what = format!(
            "perf_event_open({}) {}: {}",
            self.event.name(),
            self.step,
            self.source
        );
        match errno {
            libc::EACCES | libc::EPERM => ProfileError::PerfUnavailable {
                what: format!("{what}; {}", paranoid_advice(self.step)),
            },
            libc::ENOSYS | libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP | libc::ENXIO => {
                ProfileError::PerfUnavailable {
                    what: format!(
                        "{what}: this kernel offers neither cycles nor cpu-clock sampling"
                    ),
                }
            }
            _ => ProfileError::System {
                what,
                source: self.source,
            },
        }
    }
}

/// What to change when the kernel refuses: the paranoid level as it is now, or, when that
/// level allows profiling, the lock limit or the sandbox that must be the cause.
fn paranoid_advice(step: &str) -> String {
    if step.starts_with("mapping") {
        let lock = read_sysctl("perf_event_mlock_kb")
            .map_or_else(|| "unknown".to_string(), |kb| format!("{kb} KiB"));
        return format!(
            "the kernel would not lock even {} KiB per CPU for the ring buffers \
             (perf_event_mlock_kb is {lock}, shared by every perf user of this account); \
             raise `ulimit -l` or `sysctl kernel.perf_event_mlock_kb`",
            MIN_BUFFER_BYTES / 1024
        );
    }
    paranoid_level_advice(read_sysctl("perf_event_paranoid"))
}

fn paranoid_level_advice(level: Option<i64>) -> String {
    let fix =
        "`sudo sysctl kernel.perf_event_paranoid=2` (or lower) allows profiling your own processes";
    match level {
        Some(level) if level > 2 => {
            format!("/proc/sys/kernel/perf_event_paranoid is {level}: {fix}")
        }
        Some(level) => format!(
            "/proc/sys/kernel/perf_event_paranoid is {level}, which allows it, so a container \
             or seccomp policy blocks perf_event_open (allow the syscall, or add CAP_PERFMON)"
        ),
        None => format!("/proc/sys/kernel/perf_event_paranoid cannot be read; {fix}"),
    }
}

/// A value of `/proc/sys/kernel/<name>`, when readable.
fn read_sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .map(|text| maps::parse_cpu_list(&text))
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(|| {
            let count = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..count).collect()
        })
}

/// What to open: the event, its precision and the stack copy.
pub(super) struct Wanted {
    pub(super) event: SampledEvent,
    pub(super) precise_ip: u8,
    pub(super) stack_bytes: u32,
}

/// The `precise_ip` levels to try, most precise first: only the instruction event asks for
/// precision (spec 001 §6.5: the sampled address is then the instruction that overflowed).
fn precise_levels(event: SampledEvent) -> Vec<u8> {
    match event {
        SampledEvent::Instructions => vec![3, 2, 1, 0],
        _ => vec![0],
    }
}

/// Events open on every CPU, with their buffers.
struct Opened {
    samplers: Vec<Sampler>,
    members: Vec<Counter>,
    bytes: usize,
}

/// Opens the event on every CPU and maps a buffer for each, halving the buffer size while the
/// kernel refuses to lock it.
fn open_all(
    wanted: &Wanted,
    pid: libc::pid_t,
    cpus: &[usize],
    options: &SampleOptions,
) -> Result<Opened, OpenError> {
    let builder = builder(wanted, options);
    let mut bytes = options
        .buffer_bytes
        .max(MIN_BUFFER_BYTES)
        .checked_next_power_of_two()
        .unwrap_or(MIN_BUFFER_BYTES);
    loop {
        match open_sized(&builder, wanted.event, pid, cpus, bytes) {
            Err(error) if error.step.starts_with("mapping") && bytes > MIN_BUFFER_BYTES => {
                let errno = error.source.raw_os_error();
                if errno != Some(libc::EPERM) && errno != Some(libc::ENOMEM) {
                    return Err(error);
                }
                bytes /= 2;
            }
            result => {
                return result.map(|(samplers, members)| Opened {
                    samplers,
                    members,
                    bytes,
                });
            }
        }
    }
}

fn open_sized(
    builder: &Builder<'_>,
    event: SampledEvent,
    pid: libc::pid_t,
    cpus: &[usize],
    bytes: usize,
) -> Result<(Vec<Sampler>, Vec<Counter>), OpenError> {
    let mut samplers = Vec::with_capacity(cpus.len());
    let mut members = Vec::new();
    for &cpu in cpus {
        let mut builder = builder.clone();
        builder.observe_pid(pid).one_cpu(cpu);
        // Wake up with three quarters still free: the time to fill them is how late this
        // process may be scheduled (or busy unwinding) before the kernel drops samples.
        builder.wakeup_watermark(bytes / 4);
        let mut counter = builder.build().map_err(|source| OpenError {
            event,
            step: "opening",
            source,
        })?;
        if event.reads_instructions() {
            let member = instruction_counter(pid, cpu)
                .build_with_group(&mut counter)
                .map_err(|source| OpenError {
                    event,
                    step: "adding the instruction counter to its group",
                    source,
                })?;
            members.push(member);
        }
        let sampler = counter.sampled(bytes).map_err(|source| OpenError {
            event,
            step: "mapping its ring buffer",
            source,
        })?;
        samplers.push(sampler);
    }
    Ok((samplers, members))
}

/// The group member of embodiments 1 and 2: user-mode instructions, counted, not sampled; it
/// is enabled and disabled with its leader.
fn instruction_counter(pid: libc::pid_t, cpu: usize) -> Builder<'static> {
    let mut builder = Builder::new(Hardware::INSTRUCTIONS);
    builder
        .enabled(true)
        .inherit(true)
        .exclude_kernel(true)
        .exclude_hv(true)
        .observe_pid(pid)
        .one_cpu(cpu);
    builder
}

/// The event's attributes: user space only, inherited by threads and children, enabled at
/// `exec`, sampling IP, thread, time, period, the unwinding registers and a stack copy, with
/// the side-band records that keep track of mappings, `exec`s and processes.
pub(super) fn builder(wanted: &Wanted, options: &SampleOptions) -> Builder<'static> {
    let mut builder = match wanted.event {
        SampledEvent::Cycles | SampledEvent::CyclesWithInstructions => {
            Builder::new(Hardware::CPU_CYCLES)
        }
        SampledEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
        SampledEvent::Instructions => Builder::new(Hardware::INSTRUCTIONS),
        SampledEvent::CacheMissesWithInstructions => Builder::new(Hardware::CACHE_MISSES),
    };
    let mut flags = SampleFlag::IP
        | SampleFlag::TID
        | SampleFlag::TIME
        | SampleFlag::PERIOD
        | SampleFlag::REGS_USER
        | SampleFlag::STACK_USER;
    if wanted.event.reads_instructions() {
        // Leader sampling: every sample carries the group's counters (leader first), and the
        // CPU, since a thread's counter on each CPU is a counter of its own.
        flags |= SampleFlag::READ | SampleFlag::CPU;
        builder.read_format(ReadFormat::GROUP | ReadFormat::ID);
    }
    builder
        .enabled(false)
        .enable_on_exec(true)
        .inherit(true)
        .exclude_kernel(true)
        .exclude_hv(true)
        .precise_ip(match wanted.precise_ip {
            0 => SampleSkid::Arbitrary,
            1 => SampleSkid::Constant,
            2 => SampleSkid::RequestZero,
            _ => SampleSkid::RequireZero,
        })
        .sample_frequency(options.frequency_hz)
        .sample(flags)
        .sample_regs_user(REGS_USER_MASK)
        .sample_stack_user(wanted.stack_bytes)
        .mmap(true)
        .mmap2(true)
        .comm(true)
        .comm_exec(true)
        .task(true)
        .sample_id_all(true)
        .clockid(Clock::MONOTONIC);
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_paranoid_level_and_the_setting_that_allows_profiling() {
        let strict = paranoid_level_advice(Some(3));
        assert!(strict.contains("perf_event_paranoid is 3"), "{strict}");
        assert!(
            strict.contains("sysctl kernel.perf_event_paranoid=2"),
            "{strict}"
        );
        let sandboxed = paranoid_level_advice(Some(2));
        assert!(sandboxed.contains("seccomp"), "{sandboxed}");
        let refused = OpenError {
            event: SampledEvent::CpuClock,
            step: "opening",
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        let error = refused.into_profile_error();
        assert!(
            matches!(error, ProfileError::PerfUnavailable { .. }),
            "{error}"
        );
        assert!(error.is_bad_input());
        assert!(!error.to_string().contains('\n'));
    }

    #[test]
    fn options_beyond_the_kernels_limits_are_refused() {
        let with = |frequency_hz, stack_bytes| SampleOptions {
            frequency_hz,
            stack_bytes,
            ..SampleOptions::default()
        };
        assert!(check_options(&SampleOptions::default()).is_ok());
        for bad in [
            with(0, 4096),
            with(1000, 4),
            with(1000, 70000),
            with(u64::MAX, 4096),
        ] {
            assert!(
                matches!(check_options(&bad), Err(ProfileError::Options { .. })),
                "{bad:?}"
            );
        }
    }
}
