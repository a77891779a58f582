//! The cost of one marker, measured on an empty marker (spec 004 §8.6): the kernel's trap and
//! the tracer's round trip fall between two readings of the TSC and would count as time of the
//! program, so it is measured once and subtracted from every section a marker closes.

use serde::{Deserialize, Serialize};

use super::markers::{Resume, decode_at, plan_resume};
use super::sys::{self, Memory, Stop};
use crate::ProfileError;
use crate::tsc;

/// The measured cost of a marker.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrapCost {
    /// TSC cycles a marker adds to the section it closes.
    pub cycles_per_event: u64,
    /// Markers the measurement took.
    pub events: u64,
}

#[inline(never)]
extern "C" fn empty_marker(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

fn call_many(n: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        sum = sum.wrapping_add(empty_marker(std::hint::black_box(i)));
    }
    sum
}

/// Runs `events` calls of an empty function in a forked copy of this process with a marker on
/// its entry, and the same calls untraced here; the difference per call is the marker's cost.
/// The lower quartile of the traced intervals is taken, not their mean: on a busy machine some
/// intervals include time the tracer or the child waited for a core, which a marker in the real
/// run pays only sometimes, and a mean would subtract it from every section.
pub fn measure_trap_cost(events: u64) -> Result<TrapCost, ProfileError> {
    let system = |what: &'static str| {
        move |source| ProfileError::System {
            what: what.to_owned(),
            source,
        }
    };
    let start = tsc::read();
    std::hint::black_box(call_many(events));
    let native = tsc::read() - start;
    // SAFETY: the child only calls async-signal-safe functions (ptrace, raise, _exit) and code
    // that does not allocate.
    let child = unsafe { libc::fork() };
    if child == -1 {
        return Err(system("fork")(std::io::Error::last_os_error()));
    }
    if child == 0 {
        // SAFETY: in the child of the fork above.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            call_many(events);
            libc::_exit(0);
        }
    }
    let traced = trace_calls(child).map_err(system("timing an empty marker"));
    if traced.is_err() {
        let _ = sys::signal_process(child, libc::SIGKILL);
        let _ = sys::wait_for(child);
    }
    let mut intervals = traced?;
    intervals.sort_unstable();
    let quartile = intervals.get(intervals.len() / 4).copied().unwrap_or(0);
    let per_event = quartile.saturating_sub(native / events.max(1));
    Ok(TrapCost {
        cycles_per_event: per_event,
        events,
    })
}

/// The application cycles the tracer sees between consecutive markers, as in a real run.
fn trace_calls(child: i32) -> std::io::Result<Vec<u64>> {
    if sys::wait_for(child)? != Stop::Signal(libc::SIGSTOP) {
        return Err(std::io::Error::other("the child did not stop"));
    }
    let memory = Memory::open(child)?;
    let at = empty_marker as *const () as u64;
    let mut bytes = [0u8; 15];
    memory.read(at, &mut bytes)?;
    let instr = decode_at(at, &bytes).ok_or_else(|| std::io::Error::other("undecodable"))?;
    let scratch = map_scratch(child, at, 4096)?;
    let (Resume::Displaced { copy }, Some(code)) = plan_resume(&instr, scratch) else {
        return Err(std::io::Error::other(
            "the empty marker's instruction cannot be displaced",
        ));
    };
    memory.write(copy, &code)?;
    memory.write(at, &[0xcc])?;
    let mut intervals = Vec::new();
    let mut last = tsc::read();
    sys::resume(child, 0)?;
    loop {
        match sys::wait_for(child)? {
            Stop::Signal(libc::SIGTRAP) => {
                let now = tsc::read();
                intervals.push(now - last);
                let mut regs = sys::registers(child)?;
                regs.rip = copy;
                sys::set_registers(child, &regs)?;
                last = tsc::read();
                sys::resume(child, 0)?;
            }
            Stop::Exited(_) | Stop::Killed(_) => return Ok(intervals),
            Stop::Signal(signal) => sys::resume(child, signal)?,
            Stop::Event(_) => sys::resume(child, 0)?,
        }
    }
}

/// Maps `bytes` of executable memory in stopped process `pid`, as close below `near` as the
/// kernel allows (displaced copies use 32-bit displacements), by making the thread execute one
/// `mmap` system call in place.
pub fn map_scratch(pid: i32, near: u64, bytes: u64) -> std::io::Result<u64> {
    let saved = sys::registers(pid)?;
    let memory = Memory::open(pid)?;
    let mut original = [0u8; 2];
    memory.read(saved.rip, &mut original)?;
    memory.write(saved.rip, &[0x0f, 0x05])?;
    let mut regs = saved;
    regs.rax = libc::SYS_mmap as u64;
    regs.orig_rax = u64::MAX;
    regs.rdi = near.saturating_sub(bytes + (1 << 20)) & !0xfff;
    regs.rsi = bytes;
    regs.rdx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    regs.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    regs.r8 = u64::MAX;
    regs.r9 = 0;
    let outcome = sys::set_registers(pid, &regs)
        .and_then(|()| sys::single_step(pid))
        .and_then(|()| sys::wait_for(pid))
        .and_then(|_| sys::registers(pid));
    memory.write(saved.rip, &original)?;
    sys::set_registers(pid, &saved)?;
    let address = outcome?.rax;
    if (address as i64) < 0 && (address as i64) > -4096 {
        return Err(std::io::Error::from_raw_os_error(-(address as i64) as i32));
    }
    Ok(address)
}
