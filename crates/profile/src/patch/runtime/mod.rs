//! The runtime: the part of the patch back-end that runs inside the target, loaded with it by
//! `LD_PRELOAD` (the `loopscope-patch-runtime` library calls [`start`] from its constructor).
//!
//! [`start`] reads the handover `record` wrote, checks that the process runs the executable it
//! was made for, finds where the executable is loaded, and patches every planned site before
//! any code of the executable runs (the constructors of preloaded libraries run before the
//! executable's). Then, per event, the handler (`on_event`) drives the thread's
//! `ThreadState`, the same bookkeeping as the ptrace back-end's, so both give the same trees.
//!
//! Threads: each thread's state is made at its first event, kept in a slot the thread finds
//! through its thread-local words, and handed over when the thread ends (a `pthread` key
//! destructor) or when the process ends (every live slot). Events count from `main`'s entry
//! to its return, as in the ptrace back-end: `main`'s return address is replaced by a stub that
//! closes `main`'s frame and jumps to the real one.
//!
//! Ending: the result is written when the process ends by `exit` or a return from `main` (the
//! runtime's destructor), by `_exit`/`_Exit` (interposed by the runtime library), and on a
//! fatal signal whose action was the default when the runtime started (its handler writes,
//! then lets the signal kill the process as it would have). A process killed by `SIGKILL`, or
//! that ends through a raw `exit_group` system call, writes nothing.

mod ending;
mod install;
mod threads;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use super::handover::{Handover, Refusal};
use super::trampoline::{MAX_SITE_ID, ThreadWords, UNCOUNTED_FLAG};
use crate::exact::markers::Site;
use crate::exact::thread::ThreadState;
use crate::lcct::NodeKey;
use threads::{ENDED, Fast, Slot, SlotPtr, SpinLock, fast};

pub use ending::{end_process, quick_exit};

/// One site as the handler needs it.
struct RuntimeSite {
    /// Its roles (static addresses).
    site: Site,
    /// Index of its object (0: the executable).
    object: u32,
    /// Where it is in this process.
    address: u64,
    /// Its block counter's index over all objects.
    counter: Option<u32>,
    /// For a PLT call: the stub's static address and where the call returns.
    plt: Option<(u64, u64)>,
    /// For a loop header that is nothing else: (function, loop) whose repeat the trampoline
    /// may count itself.
    repeats: Option<(u32, u32)>,
}

impl RuntimeSite {
    /// Whether the site has events for the tree (not only a block counter).
    fn handled(&self) -> bool {
        let s = &self.site;
        s.return_site || s.function_entry.is_some() || s.block.is_some() || s.plt_call
    }
}

/// A site patched with `int3`: where its displaced copy is.
#[derive(Debug, Clone, Copy)]
struct TrapSite {
    site: u32,
    resume: u64,
}

/// Everything fixed once the sites are patched.
struct Runtime {
    sites: Vec<RuntimeSite>,
    /// Entry address of each function, per object.
    functions: Vec<Vec<u64>>,
    main_entry_site: Option<u32>,
    /// The site id of the stub `main` returns through.
    main_return_site: u32,
    main_return_stub: u64,
    /// Where the stub finds the real return address.
    main_return_slot: *mut u64,
    traps: std::collections::HashMap<u64, TrapSite>,
    counted_blocks: usize,
    results: std::path::PathBuf,
    jump_sites: u64,
    trap_sites: u64,
    refused: Vec<Refusal>,
    unloaded: Vec<u32>,
    words: ThreadWords,
}

// SAFETY: the raw pointer is to the runtime's own data page, written only by the thread that
// enters `main` (once per process) and read by the stub.
unsafe impl Sync for Runtime {}
// SAFETY: as above.
unsafe impl Send for Runtime {}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
/// Events count (between `main`'s entry and its return).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// `main`'s return address has been replaced in this process.
static MAIN_HOOKED: AtomicBool = AtomicBool::new(false);
/// The process's result is being written: handlers leave the slots alone.
static ENDING: AtomicBool = AtomicBool::new(false);
/// Every live thread's slot.
static SLOTS: SpinLock<Vec<SlotPtr>> = SpinLock::new(Vec::new());
/// What ended threads left.
static FINISHED: SpinLock<Finished> = SpinLock::new(Finished::new());

/// The trees and counts of the threads that have ended.
struct Finished {
    threads: Vec<crate::exact::ThreadTree>,
    executions: Vec<u64>,
    analysis_cycles: u64,
    dropped_events: u64,
}

impl Finished {
    const fn new() -> Finished {
        Finished {
            threads: Vec::new(),
            executions: Vec::new(),
            analysis_cycles: 0,
            dropped_events: 0,
        }
    }
}

/// Starts the runtime in this process: reads the handover named by `handover` (the value of
/// [`super::HANDOVER_VARIABLE`]) and patches the executable. A failure is written as this
/// process's result for `record` to report; the program then runs unpatched.
pub fn start(handover: &std::ffi::OsStr) {
    let handover = match Handover::read(std::path::Path::new(handover)) {
        Ok(h) => h,
        Err(e) => {
            // No results directory is known without the handover: nothing can be reported.
            let _ = e;
            return;
        }
    };
    match install::install(&handover) {
        Ok(Some(runtime)) => {
            let no_main = runtime.main_entry_site.is_none();
            FINISHED.lock().executions = vec![0; runtime.counted_blocks];
            let results = runtime.results.clone();
            if RUNTIME.set(runtime).is_ok() {
                ending::arm_process_hooks();
                ending::announce(&results);
                ACTIVE.store(no_main, Ordering::SeqCst);
            }
        }
        Ok(None) => ending::write_uninstrumented(&handover.results),
        Err(why) => ending::write_failure(&handover.results, &why),
    }
}

/// The handler the slow path calls: `word` is the site id (with `UNCOUNTED_FLAG` when the
/// trampoline could not count the block), `stack_pointer` the program's at the site, `words`
/// this thread's words (found by the slow path through the thread pointer, which is cheaper
/// than the runtime's own thread-local access from a shared library).
extern "C" fn on_event(word: u32, stack_pointer: u64, words: *mut Fast) {
    // SAFETY: this thread's own words, touched only by this thread (and read, racily but
    // harmlessly, by a thread writing the process's result).
    let f = unsafe { &mut *words };
    if f.in_handler != 0 {
        f.dropped += 1;
        return;
    }
    f.in_handler = 1;
    let entry = f.entry_tsc;
    handle(f, word, stack_pointer, entry);
    f.in_handler = 0;
    if f.deferred_signal != 0 {
        ending::act_on_deferred_signal(f);
    }
}

fn handle(f: &mut Fast, word: u32, stack_pointer: u64, entry: u64) {
    let Some(rt) = RUNTIME.get() else {
        return;
    };
    if ENDING.load(Ordering::Relaxed) {
        return;
    }
    let id = word & MAX_SITE_ID;
    if id == rt.main_return_site {
        return main_returned(rt, f, stack_pointer, entry);
    }
    let Some(site) = rt.sites.get(id as usize) else {
        return;
    };
    if !ACTIVE.load(Ordering::Acquire) {
        if Some(id) != rt.main_entry_site || MAIN_HOOKED.swap(true, Ordering::SeqCst) {
            return;
        }
        // SAFETY: at `main`'s entry the return address is on top of the program's stack; the
        // slot is the runtime's data page. `main` returns through the stub, which jumps on to
        // the address kept in the slot.
        unsafe {
            let top = stack_pointer as *mut u64;
            rt.main_return_slot.write(top.read());
            top.write(rt.main_return_stub);
        }
        ACTIVE.store(true, Ordering::SeqCst);
    }
    let Some(slot) = threads_slot(rt, f, entry) else {
        return;
    };
    // SAFETY: the slot belongs to this thread; `busy` keeps a thread writing the result away
    // from it until this returns.
    let slot = unsafe { &mut *slot };
    if !ending::enter(slot) {
        return;
    }
    if word & UNCOUNTED_FLAG != 0
        && let Some(c) = site.counter
        && let Some(count) = slot.counters.get_mut(c as usize)
    {
        *count += 1;
    }
    if site.handled() {
        slot.close_previous_call(f.exit_tsc);
        slot.last_entry = entry;
        if let Some(state) = slot.state.as_mut() {
            state.repeat_back_edges(std::mem::take(&mut f.pending));
            state.charge(entry);
            events(rt, state, site, stack_pointer);
            f.hot = match site.repeats {
                Some((function, id_of_loop))
                    if state.repeating_loop(function) == Some(id_of_loop) =>
                {
                    u64::from(id)
                }
                _ => u64::MAX,
            };
        }
    }
    ending::leave(slot);
}

/// The events one site stands for, in the order control meets them (as the ptrace back-end's
/// `events`).
fn events(rt: &Runtime, state: &mut ThreadState, site: &RuntimeSite, stack_pointer: u64) {
    let s = &site.site;
    let object = site.object;
    if s.return_site {
        state.returned_to(site.address, stack_pointer);
    }
    if let Some(fi) = s.function_entry {
        // SAFETY: at a function's entry the program's stack holds its return address.
        let return_address = unsafe { (stack_pointer as *const u64).read() };
        let address = rt
            .functions
            .get(object as usize)
            .and_then(|f| f.get(fi as usize))
            .copied()
            .unwrap_or(0);
        state.call(
            NodeKey::Function { object, address },
            Some(fi),
            return_address,
            stack_pointer,
        );
    }
    if let Some(block) = &s.block {
        state.block(block.function, &block.chain, block.header_of, stack_pointer);
    }
    if let Some((stub, return_address)) = site.plt {
        state.call(
            NodeKey::Plt {
                object,
                address: stub,
            },
            None,
            return_address,
            stack_pointer.wrapping_sub(8),
        );
    }
}

fn main_returned(rt: &Runtime, f: &mut Fast, stack_pointer: u64, entry: u64) {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    if f.slot.is_null() || f.slot == ENDED {
        return;
    }
    // SAFETY: this thread's slot, as in `handle`.
    let slot = unsafe { &mut *f.slot };
    if ending::enter(slot) {
        slot.close_previous_call(f.exit_tsc);
        slot.last_entry = entry;
        if let Some(state) = slot.state.as_mut() {
            state.repeat_back_edges(std::mem::take(&mut f.pending));
            state.charge(entry);
            // SAFETY: written when `main` was entered, in this process.
            let return_address = unsafe { rt.main_return_slot.read() };
            state.returned_to(return_address, stack_pointer);
        }
        ending::leave(slot);
    }
    f.hot = u64::MAX;
    f.counters = std::ptr::null_mut();
}

/// This thread's slot, made at its first event.
fn threads_slot(rt: &Runtime, f: &mut Fast, entry: u64) -> Option<*mut Slot> {
    if f.slot == ENDED {
        return None;
    }
    if f.slot.is_null() {
        f.slot = ending::new_slot(rt, f, entry);
    }
    Some(f.slot)
}

/// The `SIGTRAP` handler's work for a trapped site: the same events, then the displaced copy.
fn on_trap(address: u64, stack_pointer: u64) -> Option<u64> {
    let rt = RUNTIME.get()?;
    let trap = *rt.traps.get(&address)?;
    // SAFETY: this thread's own words (see `on_event`).
    let f = unsafe { &mut *fast() };
    if f.in_handler == 0 {
        f.in_handler = 1;
        let entry = crate::tsc::read();
        handle(f, trap.site | UNCOUNTED_FLAG, stack_pointer, entry);
        f.exit_tsc = crate::tsc::read();
        f.in_handler = 0;
        if f.deferred_signal != 0 {
            ending::act_on_deferred_signal(f);
        }
    } else {
        f.dropped += 1;
    }
    Some(trap.resume)
}
