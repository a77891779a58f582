//! The patching back-end (`record --backend patch`, spec 004 §8.6 "static binary rewriting"):
//! the exact trees of the ptrace back-end at close to the program's own speed.
//!
//! The marker sites are the ptrace back-end's ([`crate::exact`]'s `marker_sites`: function
//! entries, return sites, loop blocks, PLT calls, and with block counting every block start),
//! and each thread's tree is moved by the same `ThreadState`, so both back-ends give the same
//! trees, entries and trips on the same run. What differs is how a site is reached: instead of
//! a breakpoint and two context switches per event, the site's first bytes become a jump to a
//! trampoline in the target's own memory.
//!
//! How it is built:
//! 1. `record` (the parent, [`record_patch`]) analyses the executable, plans every site
//!    against the control-flow graph ([`plan`]) and writes a handover file ([`handover`]).
//! 2. It starts the target with the runtime library preloaded (`LD_PRELOAD`; the library is
//!    the `loopscope-patch-runtime` crate, a `cdylib` built with the workspace that calls
//!    [`runtime::start`] from its constructor) and the handover's path in
//!    [`HANDOVER_VARIABLE`].
//! 3. The runtime, before any code of the executable runs, maps an area within a 32-bit
//!    displacement of the executable's code, generates the trampolines there
//!    ([`trampoline`]) and writes the jumps (code pages writable, not executable, only while
//!    written). Events then drive each thread's tree in the runtime's handler.
//! 4. Each process writes its result when it ends; the parent gathers them into an
//!    [`crate::ExactRun`] with a [`PatchSummary`] of how the sites were patched.
//!
//! Why these choices:
//! - The runtime is in-process, so the handler is a function call, and the common event — one
//!   more header execution of the loop the thread is already in — does not call it at all: the
//!   trampoline counts it in a thread-local word (flags untouched), and the handler applies
//!   the count at the thread's next real event. Block counters are thread-local arrays the
//!   trampoline increments in the same way. Nothing is shared between threads per event.
//! - The handler is ordinary Rust and calls the C library (an allocation when a tree grows), so
//!   the slow path saves the whole extended register state (`xsavec`), not only the
//!   general-purpose registers: the C library's string functions use vector registers.
//! - A site where a 5-byte jump would cover a branch target gets an `int3` handled in-process
//!   (a `SIGTRAP` handler running the same handler, then resuming at a displaced copy), which
//!   costs a signal delivery per execution; the plan says which sites and why, and `report`
//!   lists them. Sites that cannot be displaced at all are skipped and listed.
//! - Calls under a jump are emulated (the original return address pushed), so return
//!   addresses, the shadow stack's matching and C++ unwinding see the program's own addresses.
//!
//! Limits: only the executable is patched (a process that runs another program is noted, not
//! instrumented); a process killed by `SIGKILL`, or ending through a raw `exit_group` system
//! call, leaves no result; a signal handler of the program that interrupts the runtime's own
//! handler has its events dropped (counted).

mod handover;
mod landing;
mod notes;
mod plan;
mod record;
pub mod runtime;
mod target;
mod trampoline;

pub use handover::HANDOVER_VARIABLE;
pub(crate) use notes::patch_notes;
pub use record::{PatchOptions, PatchSummary, SkippedSite, record_patch};
