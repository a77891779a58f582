//! Per-thread state of the runtime: the words the trampolines read through `fs`, and the slot
//! holding the thread's tree, found through those words and listed for the end of the process.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::trampoline::ThreadWords;
use crate::exact::thread::ThreadState;

/// The words a trampoline reads and writes through the thread pointer, then the handler's own.
/// `repr(C)` so that their offsets are fixed.
#[repr(C)]
pub struct Fast {
    /// Site id of the repeating header (`u64::MAX`: none).
    pub hot: u64,
    /// Its executions not yet in the tree.
    pub pending: u64,
    /// The thread's block counters (null before its slot exists).
    pub counters: *mut u64,
    /// TSC at the slow path's entry.
    pub entry_tsc: u64,
    /// TSC at the slow path's exit.
    pub exit_tsc: u64,
    /// The thread's slot: null before its first event, [`ENDED`] after its end.
    pub slot: *mut Slot,
    /// Non-zero while the handler runs on this thread.
    pub in_handler: u32,
    /// A fatal signal that arrived while the handler ran, acted on when it returns.
    pub deferred_signal: i32,
    /// Events met while the handler was running (a signal handler of the program).
    pub dropped: u64,
}

/// The slot pointer of a thread whose tree has been handed over.
pub const ENDED: *mut Slot = std::ptr::dangling_mut::<Slot>();

impl Fast {
    const EMPTY: Fast = Fast {
        hot: u64::MAX,
        pending: 0,
        counters: std::ptr::null_mut(),
        entry_tsc: 0,
        exit_tsc: 0,
        slot: std::ptr::null_mut(),
        in_handler: 0,
        deferred_signal: 0,
        dropped: 0,
    };
}

thread_local! {
    static FAST: UnsafeCell<Fast> = const { UnsafeCell::new(Fast::EMPTY) };
}

/// This thread's words.
pub fn fast() -> *mut Fast {
    FAST.with(|f| f.get())
}

/// The thread pointer (`fs` base): glibc keeps it at `fs:0`.
pub fn thread_pointer() -> u64 {
    let tp: u64;
    // SAFETY: on x86-64 Linux `fs:0` is the thread control block's pointer to itself, readable
    // by every thread of a process using glibc's threads.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
    }
    tp
}

/// Where this thread's words are relative to its thread pointer. The runtime is loaded with the
/// program (`LD_PRELOAD`), so its thread-local block is in the static TLS area, at the same
/// offset from every thread's pointer; the trampolines rely on that.
pub fn words_offset() -> i64 {
    (fast() as u64).wrapping_sub(thread_pointer()) as i64
}

/// The offsets of the trampoline words for threads whose block is at `base`.
pub fn thread_words(base: i64) -> Option<ThreadWords> {
    let field = |offset: usize| i32::try_from(base + offset as i64).ok();
    Some(ThreadWords {
        hot: field(std::mem::offset_of!(Fast, hot))?,
        pending: field(std::mem::offset_of!(Fast, pending))?,
        counters: field(std::mem::offset_of!(Fast, counters))?,
        entry_tsc: field(std::mem::offset_of!(Fast, entry_tsc))?,
        exit_tsc: field(std::mem::offset_of!(Fast, exit_tsc))?,
    })
}

/// A thread's tree and counters.
pub struct Slot {
    /// The tree; taken when the thread's result is written.
    pub state: Option<ThreadState>,
    /// Executions per counted block.
    pub counters: Vec<u64>,
    /// Set while the handler works on this slot.
    pub busy: AtomicBool,
    /// Cycles in the handler so far.
    pub analysis_cycles: u64,
    /// TSC at the last handler entry (0 before the first).
    pub last_entry: u64,
    /// The owning thread's words.
    pub fast: *mut Fast,
}

impl Slot {
    /// Closes the time of the previous handler call: its cycles are analysis, and the
    /// application's section starts when it returned.
    pub fn close_previous_call(&mut self, exit_tsc: u64) {
        if self.last_entry != 0 && exit_tsc >= self.last_entry {
            self.analysis_cycles += exit_tsc - self.last_entry;
            if let Some(state) = &mut self.state {
                state.last_tsc = exit_tsc;
            }
        }
    }
}

/// A slot pointer that can be listed in a static.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SlotPtr(pub *mut Slot);

// SAFETY: a slot is reached from another thread only under the runtime's locks and its `busy`
// handshake (see `ending`), never while its own thread changes it.
unsafe impl Send for SlotPtr {}

/// A lock that can be tried from a signal handler and taken across `fork` (held in the atfork
/// prepare handler, released in both processes), which `std::sync::Mutex` cannot.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which exists for one holder at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Access to a [`SpinLock`]'s value; unlocks when dropped.
pub struct Guard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    /// An unlocked lock.
    pub const fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    fn try_acquire(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Waits for the lock.
    pub fn lock(&self) -> Guard<'_, T> {
        while !self.try_acquire() {
            std::thread::yield_now();
        }
        Guard { lock: self }
    }

    /// Waits for the lock at most `limit` (a signal handler may have interrupted its holder).
    pub fn lock_within(&self, limit: Duration) -> Option<Guard<'_, T>> {
        let started = Instant::now();
        loop {
            if self.try_acquire() {
                return Some(Guard { lock: self });
            }
            if started.elapsed() > limit {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// Takes the lock with no guard (the atfork prepare handler).
    pub fn acquire(&self) {
        std::mem::forget(self.lock());
    }

    /// The value, for the holder of a lock taken by [`SpinLock::acquire`].
    ///
    /// # Safety
    /// The caller holds the lock (took it with `acquire` and has not released it) and makes
    /// no other reference to the value while this one lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn held_value(&self) -> &mut T {
        // SAFETY: the caller holds the lock.
        unsafe { &mut *self.value.get() }
    }

    /// Releases a lock taken by [`SpinLock::acquire`].
    pub fn release(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl<T> std::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so no other reference exists.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_are_found_through_the_thread_pointer_in_every_thread() {
        let base = words_offset();
        let words = thread_words(base).unwrap();
        assert_eq!(words.pending - words.hot, 8);
        let other = std::thread::spawn(words_offset).join().unwrap();
        assert_eq!(other, base, "static TLS: one offset for all threads");
    }

    #[test]
    fn a_held_lock_is_not_taken_twice() {
        let lock = SpinLock::new(1);
        let held = lock.lock();
        assert!(lock.lock_within(Duration::from_millis(5)).is_none());
        drop(held);
        *lock.lock() += 1;
        assert_eq!(*lock.lock_within(Duration::from_millis(5)).unwrap(), 2);
    }
}
