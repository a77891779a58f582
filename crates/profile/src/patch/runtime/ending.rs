//! Threads starting and ending, `fork`, fatal signals, and writing the process's result.
//!
//! Writing the result must work inside a signal handler that may have interrupted anything,
//! `malloc` included, so it allocates nothing: the trees are finished in place and serialised
//! straight into a file through a fixed buffer, and every lock is only tried for a while.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::super::handover::Ending;
use super::threads::{ENDED, Fast, Slot, SlotPtr, fast, thread_pointer};
use super::{ENDING, FINISHED, RUNTIME, Runtime, SLOTS};
use crate::exact::thread::ThreadState;

/// How long the writer waits for a lock or for a thread to leave the handler.
const PATIENCE: Duration = Duration::from_millis(200);

/// The `pthread` key whose destructor hands a thread's tree over when the thread ends.
static THREAD_KEY: std::sync::OnceLock<libc::pthread_key_t> = std::sync::OnceLock::new();
/// The process's result has been written.
static WRITTEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The process the runtime's state belongs to (set at start and after `fork`). A child made
/// by `vfork` shares the parent's memory without the `fork` handlers running: it must write
/// nothing (its `_exit` would otherwise write the parent's trees and stop the parent's events).
static OWNER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Signals whose default action ends the process, caught (when their action is the default)
/// so the result is written first.
const FATAL_SIGNALS: [libc::c_int; 13] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The handler starts work on its thread's slot: `false` when the process's result is being
/// written (then the slot is left alone).
///
/// The handshake with [`write_result`] is asymmetric: here a plain store and a compiler
/// barrier (a fence per event would cost more than the rest of the handler), there a
/// `membarrier` system call, which makes every thread of the process pass a full barrier: after
/// it, either this thread's `busy` is visible to the writer or this thread sees `ENDING`.
pub(super) fn enter(slot: &Slot) -> bool {
    slot.busy.store(true, Ordering::Relaxed);
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    if ENDING.load(Ordering::Relaxed) {
        slot.busy.store(false, Ordering::Release);
        return false;
    }
    true
}

/// The handler is done with its thread's slot.
pub(super) fn leave(slot: &Slot) {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    slot.busy.store(false, Ordering::Release);
}

/// Makes every thread of the process pass a full memory barrier (see [`enter`]); without the
/// system call (kernels before 4.14), waits long enough for any handler running to finish.
fn barrier_on_every_thread() {
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let done = unsafe {
        libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0
            || libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0) == 0
    };
    if !done {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Registers the process for the expedited `membarrier` (done once, at start).
pub(super) fn register_barrier() {
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    // SAFETY: as above.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
        );
    }
}

/// A new slot for this thread, listed for the end of the process.
pub(super) fn new_slot(rt: &Runtime, f: &mut Fast, entry: u64) -> *mut Slot {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
    let mut slot = Box::new(Slot {
        state: Some(ThreadState::new(pid, tid, entry)),
        counters: vec![0; rt.counted_blocks],
        busy: Default::default(),
        analysis_cycles: 0,
        last_entry: 0,
        fast: f as *mut Fast,
    });
    if !slot.counters.is_empty() && words_are_here(rt) {
        f.counters = slot.counters.as_mut_ptr();
    }
    let slot = Box::into_raw(slot);
    SLOTS.lock().push(SlotPtr(slot));
    if let Some(&key) = THREAD_KEY.get() {
        // SAFETY: the key was created by `pthread_key_create`; the value is only a pointer.
        unsafe { libc::pthread_setspecific(key, slot.cast()) };
    }
    slot
}

/// Whether this thread's words are where the trampolines look (static TLS, checked per thread:
/// a thread whose words were elsewhere gets no fast paths, so the trampolines never write for
/// it; the slow path finds its words through the normal thread-local access).
fn words_are_here(rt: &Runtime) -> bool {
    let offset = (fast() as u64).wrapping_sub(thread_pointer()) as i64;
    super::threads::thread_words(offset) == Some(rt.words)
}

/// Installs the process-wide hooks: the thread-end key, `fork` handlers and fatal signals.
pub(super) fn arm_process_hooks() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    register_barrier();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `thread_ended` matches the destructor signature and copes with any value set.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_ended)) } == 0 {
        let _ = THREAD_KEY.set(key);
    }
    // SAFETY: the three handlers only take and release the runtime's locks and reset its state.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        );
    }
    for signal in FATAL_SIGNALS {
        catch_if_default(signal, on_fatal_signal as *const () as usize);
    }
    catch_always(libc::SIGTRAP, on_trap_signal as *const () as usize);
}

fn catch_if_default(signal: libc::c_int, handler: usize) {
    // SAFETY: sigaction with a zeroed struct only reads the current action.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
    }
    catch_always(signal, handler);
}

fn catch_always(signal: libc::c_int, handler: usize) {
    // SAFETY: the handler has the SA_SIGINFO signature; the mask is filled by sigemptyset.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

extern "C" fn on_trap_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(context as *mut libc::ucontext_t) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    let rsp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    if let Some(resume) = super::on_trap(rip.wrapping_sub(1), rsp) {
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = resume as i64;
        return;
    }
    // Not one of ours: the program's own breakpoint gets the default action.
    let _ = info;
    die_of(signal);
}

extern "C" fn on_fatal_signal(
    signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: this thread's own words.
    let f = unsafe { &mut *fast() };
    let asynchronous = !matches!(
        signal,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL
    );
    if f.in_handler != 0 && asynchronous {
        // The handler this interrupted finishes first; it acts on the signal when it returns.
        f.deferred_signal = signal;
        return;
    }
    write_result(Ending::Signal(signal), f.in_handler != 0);
    die_of(signal);
}

/// Called by the handler when it returns after a fatal signal arrived during it.
pub(super) fn act_on_deferred_signal(f: &mut Fast) {
    let signal = std::mem::take(&mut f.deferred_signal);
    write_result(Ending::Signal(signal), false);
    die_of(signal);
}

/// Gives `signal` its default action and raises it: it is delivered when the current handler
/// returns (a fault is simply met again), and ends the process as it would have without us.
fn die_of(signal: libc::c_int) {
    // SAFETY: signal, sigemptyset, sigaddset, pthread_sigmask and raise are async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::raise(signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

extern "C" fn thread_ended(value: *mut libc::c_void) {
    // SAFETY: this thread's own words.
    let f = unsafe { &mut *fast() };
    let slot = value as *mut Slot;
    if slot.is_null() || f.slot != slot {
        return;
    }
    f.in_handler = 1;
    {
        let mut slots = SLOTS.lock();
        if !ENDING.load(Ordering::SeqCst) {
            slots.retain(|s| s.0 != slot);
            // SAFETY: the slot is this thread's, now out of the list, so no one else reads it.
            let mut owned = unsafe { Box::from_raw(slot) };
            let mut finished = FINISHED.lock();
            if let Some(tree) = finish_slot(&mut owned, f, crate::tsc::read()) {
                finished.threads.push(tree);
            }
            for (total, n) in finished.executions.iter_mut().zip(&owned.counters) {
                *total += n;
            }
            finished.analysis_cycles += owned.analysis_cycles;
            finished.dropped_events += f.dropped;
            f.slot = ENDED;
        }
    }
    f.counters = std::ptr::null_mut();
    f.hot = u64::MAX;
    f.in_handler = 0;
}

/// Applies the thread's pending header executions, charges its time since its last event up
/// to `ended_tsc` to where it was (a hot loop's repeated headers read no clock, so that is the
/// loop's whole run when the process is interrupted or crashes in it) and closes its tree.
fn finish_slot(slot: &mut Slot, f: &Fast, ended_tsc: u64) -> Option<crate::exact::ThreadTree> {
    slot.close_previous_call(f.exit_tsc);
    let mut state = slot.state.take()?;
    // SAFETY: another thread's word may still be counted up while this reads it; a torn or
    // stale value is impossible for an aligned u64 on x86-64, at worst one count is missed.
    let pending = unsafe { std::ptr::read_volatile(&f.pending) };
    state.repeat_back_edges(pending);
    Some(state.finish_at(ended_tsc))
}

extern "C" fn before_fork() {
    SLOTS.acquire();
    FINISHED.acquire();
}

extern "C" fn after_fork_parent() {
    FINISHED.release();
    SLOTS.release();
}

extern "C" fn after_fork_child() {
    // SAFETY: this thread's own words; in the child only this thread exists.
    let f = unsafe { &mut *fast() };
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
    // SAFETY: this thread took both locks before the fork (`before_fork`), and in the child
    // no other thread exists to take them.
    let (slots, finished) = unsafe { (SLOTS.held_value(), FINISHED.held_value()) };
    // The other threads do not exist here; their slots are left as they are.
    slots.retain(|s| s.0 == f.slot);
    if let Some(&SlotPtr(slot)) = slots.first() {
        // SAFETY: this thread's slot.
        let slot = unsafe { &mut *slot };
        if let Some(state) = &slot.state {
            slot.state = Some(state.forked(pid, tid, crate::tsc::read()));
        }
        slot.counters.iter_mut().for_each(|c| *c = 0);
        slot.analysis_cycles = 0;
        slot.busy.store(false, Ordering::SeqCst);
    }
    finished.threads.clear();
    finished.executions.iter_mut().for_each(|c| *c = 0);
    finished.analysis_cycles = 0;
    finished.dropped_events = 0;
    f.pending = 0;
    f.dropped = 0;
    WRITTEN.store(false, Ordering::SeqCst);
    OWNER.store(pid as i32, Ordering::SeqCst);
    FINISHED.release();
    SLOTS.release();
    if let Some(rt) = RUNTIME.get() {
        announce(&rt.results);
    }
}

/// The runtime's destructor: the process is ending through `exit` or `main`'s return.
pub fn end_process() {
    write_result(Ending::Exit, false);
}

/// `_exit`/`_Exit`: write the result, then end the process with `status`.
pub fn quick_exit(status: libc::c_int) -> ! {
    write_result(Ending::QuickExit(status), false);
    loop {
        // SAFETY: exit_group ends the process; it does not return.
        unsafe {
            libc::syscall(libc::SYS_exit_group, status);
        }
    }
}

/// Writes this process's result once: every thread's tree (those that ended and every live
/// one), the block counts and the runtime's figures. `skip_current`: this thread was in the
/// handler, so its tree is mid-change and left out.
fn write_result(ending: Ending, skip_current: bool) {
    let Some(rt) = RUNTIME.get() else {
        return;
    };
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != OWNER.load(Ordering::SeqCst) {
        return;
    }
    if WRITTEN.swap(true, Ordering::SeqCst) {
        return;
    }
    let ended_tsc = crate::tsc::read();
    ENDING.store(true, Ordering::SeqCst);
    barrier_on_every_thread();
    let me = fast();
    let mut out = ResultWriter::create(&rt.results);
    let slots = SLOTS.lock_within(PATIENCE);
    let mut finished = FINISHED.lock_within(PATIENCE);
    let mut lost_threads = u32::from(slots.is_none() || finished.is_none());
    let mut analysis_cycles = 0u64;
    // SAFETY: this thread's own words.
    let mut dropped = unsafe { (*me).dropped };
    out.text("{\"pid\":");
    // SAFETY: getpid has no preconditions.
    out.json(&(unsafe { libc::getpid() } as u32));
    out.text(",\"ending\":");
    out.json(&ending);
    out.text(",\"threads\":[");
    let mut first = true;
    let mut separator = |out: &mut ResultWriter| {
        if !std::mem::take(&mut first) {
            out.text(",");
        }
    };
    if let Some(finished) = &finished {
        for tree in &finished.threads {
            separator(&mut out);
            out.json(tree);
        }
        analysis_cycles += finished.analysis_cycles;
        dropped += finished.dropped_events;
    }
    let live: &[SlotPtr] = slots.as_deref().map_or(&[], |s| s.as_slice());
    for &SlotPtr(slot) in live {
        // SAFETY: a listed slot stays allocated while the list is locked (a thread unlists its
        // slot before freeing it, under the lock).
        let slot = unsafe { &mut *slot };
        let mine = slot.fast == me;
        if (mine && skip_current) || (!mine && !wait_until_idle(slot)) {
            lost_threads += 1;
            continue;
        }
        // SAFETY: the slot's thread is not in the handler and will not enter it (ENDING).
        let f = unsafe { &*slot.fast };
        if let Some(tree) = finish_slot(slot, f, ended_tsc) {
            separator(&mut out);
            out.json(&tree);
        }
        analysis_cycles += slot.analysis_cycles;
        if let Some(finished) = &mut finished {
            for (total, n) in finished.executions.iter_mut().zip(&slot.counters) {
                *total += n;
            }
        }
    }
    out.text("],\"executions\":");
    match &finished {
        Some(finished) => out.json(&finished.executions),
        None => out.text("[]"),
    }
    out.text(",\"analysis_cycles\":");
    out.json(&analysis_cycles);
    out.text(",\"dropped_events\":");
    out.json(&dropped);
    out.text(",\"jump_sites\":");
    out.json(&rt.jump_sites);
    out.text(",\"trap_sites\":");
    out.json(&rt.trap_sites);
    out.text(",\"refused\":");
    out.json(&rt.refused);
    out.text(",\"unloaded\":");
    out.json(&rt.unloaded);
    out.text(",\"lost_threads\":");
    out.json(&lost_threads);
    out.text("}");
    out.finish();
}

/// Waits (a while) for a thread to leave the handler; `false` if it did not.
fn wait_until_idle(slot: &Slot) -> bool {
    let started = std::time::Instant::now();
    while slot.busy.load(Ordering::SeqCst) {
        if started.elapsed() > PATIENCE {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Tells `record` this process runs instrumented and will write a result (`PID.started`), so
/// that it waits for it.
pub(super) fn announce(results: &Path) {
    let _ = std::fs::File::create(results.join(format!("{}.started", std::process::id())));
}

/// The result of a process that runs another program than the one analysed.
pub(super) fn write_uninstrumented(results: &Path) {
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut out = ResultWriter::create(results);
    out.text("{\"pid\":");
    out.json(&std::process::id());
    out.text(",\"ending\":");
    out.json(&Ending::Exec);
    out.text(",\"uninstrumented\":");
    out.json(&exe);
    out.text("}");
    out.finish();
}

/// The result of a process whose runtime could not start.
pub(super) fn write_failure(results: &Path, why: &str) {
    let mut out = ResultWriter::create(results);
    out.text("{\"pid\":");
    out.json(&std::process::id());
    out.text(",\"ending\":");
    out.json(&Ending::Exit);
    out.text(",\"failure\":");
    out.json(&why);
    out.text("}");
    out.finish();
}

/// A result file written through a fixed buffer with plain system calls (no allocation), to a
/// temporary name renamed into place when complete.
struct ResultWriter {
    fd: libc::c_int,
    buffer: [u8; 8192],
    used: usize,
    temporary: [u8; 4096],
    target: [u8; 4096],
}

impl ResultWriter {
    fn create(results: &Path) -> ResultWriter {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mut writer = ResultWriter {
            fd: -1,
            buffer: [0; 8192],
            used: 0,
            temporary: [0; 4096],
            target: [0; 4096],
        };
        let dir = std::os::unix::ffi::OsStrExt::as_bytes(results.as_os_str());
        let written = c_path(&mut writer.target, dir, pid, b".json")
            && c_path(&mut writer.temporary, dir, pid, b".part");
        if written {
            // SAFETY: the path is NUL-terminated in a buffer that outlives the call.
            writer.fd = unsafe {
                libc::open(
                    writer.temporary.as_ptr().cast(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                    0o600,
                )
            };
        }
        writer
    }

    fn text(&mut self, s: &str) {
        let _ = self.write_all(s.as_bytes());
    }

    fn json<T: serde::Serialize + ?Sized>(&mut self, value: &T) {
        let _ = serde_json::to_writer(&mut *self, value);
    }

    fn finish(mut self) {
        let _ = self.flush();
        if self.fd < 0 {
            return;
        }
        // SAFETY: the descriptor is ours; both paths are NUL-terminated.
        unsafe {
            libc::close(self.fd);
            libc::rename(self.temporary.as_ptr().cast(), self.target.as_ptr().cast());
        }
    }
}

/// `dir/pid.suffix` as a NUL-terminated string in `out`, built without allocating.
fn c_path(out: &mut [u8], dir: &[u8], pid: i32, suffix: &[u8]) -> bool {
    let mut digits = [0u8; 12];
    let mut n = pid.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let parts: [&[u8]; 4] = [dir, b"/", &digits[at..], suffix];
    let mut used = 0;
    for part in parts {
        if used + part.len() + 1 > out.len() {
            return false;
        }
        out[used..used + part.len()].copy_from_slice(part);
        used += part.len();
    }
    out[used] = 0;
    true
}

impl Write for ResultWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.used + bytes.len() > self.buffer.len() {
            self.flush()?;
        }
        if bytes.len() > self.buffer.len() {
            return self.write_through(bytes);
        }
        self.buffer[self.used..self.used + bytes.len()].copy_from_slice(bytes);
        self.used += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let used = std::mem::take(&mut self.used);
        let buffer = self.buffer;
        self.write_through(&buffer[..used]).map(drop)
    }
}

impl ResultWriter {
    fn write_through(&mut self, mut bytes: &[u8]) -> std::io::Result<usize> {
        let all = bytes.len();
        while !bytes.is_empty() {
            if self.fd < 0 {
                return Err(std::io::Error::other("no result file"));
            }
            // SAFETY: the pointer and length describe `bytes`.
            let n = unsafe { libc::write(self.fd, bytes.as_ptr().cast(), bytes.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            bytes = &bytes[n as usize..];
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_paths_are_built_without_allocation() {
        let mut out = [0u8; 64];
        assert!(c_path(&mut out, b"/tmp/r", 4071, b".json"));
        assert_eq!(&out[..17], b"/tmp/r/4071.json\0");
        let mut small = [0u8; 8];
        assert!(!c_path(&mut small, b"/tmp/r", 1, b".json"));
    }
}
