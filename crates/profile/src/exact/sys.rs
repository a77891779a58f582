//! The few ptrace, wait and memory calls the tracer needs, each behind a safe function.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub use libc::user_regs_struct as Registers;

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Starts `program` with `argv` stopped at its `exec`, traced by this thread.
pub fn spawn_traced(program: &CString, argv: &[CString]) -> io::Result<i32> {
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: fork has no memory preconditions. The child only calls async-signal-safe
    // functions (ptrace, execv, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child; the pointers stay valid until execv replaces the image.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::execv(program.as_ptr(), pointers.as_ptr());
            libc::_exit(127);
        }
    }
    Ok(pid)
}

/// What `waitpid` reported for one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// It exited with a status.
    Exited(i32),
    /// A signal killed it.
    Killed(i32),
    /// It stopped on a signal (a breakpoint is `SIGTRAP`).
    Signal(i32),
    /// A ptrace event stop (`PTRACE_EVENT_*`).
    Event(i32),
}

/// Waits for any thread this thread traces. `__WNOTHREAD` keeps other threads' children out:
/// two tracers in one process (tests run in parallel) would otherwise reap each other's exits.
pub fn wait_any() -> io::Result<(i32, Stop)> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL | libc::__WNOTHREAD) };
        if tid == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok((tid, decode(status)));
    }
}

/// Waits for one thread.
pub fn wait_for(tid: i32) -> io::Result<Stop> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let got = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        if got == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(decode(status));
    }
}

fn decode(status: i32) -> Stop {
    if libc::WIFEXITED(status) {
        Stop::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Stop::Killed(libc::WTERMSIG(status))
    } else if status >> 16 != 0 {
        Stop::Event(status >> 16)
    } else {
        Stop::Signal(libc::WSTOPSIG(status))
    }
}

fn request(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: the requests used here take integers or pointers the callers own for the call.
    check(unsafe { libc::ptrace(req, tid, addr, data) })
}

/// Sets `PTRACE_O_*` options.
pub fn set_options(tid: i32, options: i32) -> io::Result<()> {
    request(libc::PTRACE_SETOPTIONS, tid, 0, options as usize).map(drop)
}

/// Resumes a stopped thread, delivering `signal` (0 for none).
pub fn resume(tid: i32, signal: i32) -> io::Result<()> {
    request(libc::PTRACE_CONT, tid, 0, signal as usize).map(drop)
}

/// Executes one instruction of a stopped thread.
pub fn single_step(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_SINGLESTEP, tid, 0, 0).map(drop)
}

/// Lets a stopped thread go untraced.
pub fn detach(tid: i32, signal: i32) -> io::Result<()> {
    request(libc::PTRACE_DETACH, tid, 0, signal as usize).map(drop)
}

/// The message of the last event stop (a new thread's id, an exit status).
pub fn event_message(tid: i32) -> io::Result<u64> {
    let mut message: libc::c_ulong = 0;
    request(
        libc::PTRACE_GETEVENTMSG,
        tid,
        0,
        &mut message as *mut _ as usize,
    )?;
    Ok(message)
}

/// A stopped thread's registers.
pub fn registers(tid: i32) -> io::Result<Registers> {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    let mut regs: Registers = unsafe { std::mem::zeroed() };
    request(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut _ as usize)?;
    Ok(regs)
}

/// Sets a stopped thread's registers.
pub fn set_registers(tid: i32, regs: &Registers) -> io::Result<()> {
    request(libc::PTRACE_SETREGS, tid, 0, regs as *const _ as usize).map(drop)
}

/// Whether `tid` is a thread of another thread's process (not a process's first thread).
/// A thread that cannot be looked up is taken as one, as threads are the common case.
pub fn is_thread(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse::<i32>().ok())
        })
        .is_none_or(|tgid| tgid != tid)
}

/// Stops one thread of a process with `SIGSTOP`.
pub fn stop_thread(pid: i32, tid: i32) -> io::Result<()> {
    // SAFETY: tgkill takes plain integers.
    check(unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGSTOP) }).map(drop)
}

/// Sends a signal to a process.
pub fn signal_process(pid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    check(unsafe { libc::kill(pid, signal) }.into()).map(drop)
}

/// A traced process's memory, written through `/proc/PID/mem` (which, for a tracer, also
/// writes read-only code pages, as breakpoints need).
#[derive(Debug)]
pub struct Memory {
    file: File,
}

impl Memory {
    /// Opens the memory of `pid`.
    pub fn open(pid: i32) -> io::Result<Memory> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))?;
        Ok(Memory { file })
    }

    /// Reads `buf.len()` bytes at `address`.
    pub fn read(&self, address: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, address)
    }

    /// Writes `bytes` at `address`.
    pub fn write(&self, address: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, address)
    }
}
