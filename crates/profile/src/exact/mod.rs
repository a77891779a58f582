//! The exact back-end (`--backend ptrace`): int3 markers at the loop, call and return sites of
//! the executable (see [`markers`]), one loop-call-context tree per thread, the paper's timing
//! rule (spec 004 §3.2) with the TSC read when a stop is seen and when the thread is resumed.
//!
//! Scope (spec §3.5): markers are armed when `main` is entered, in the executable only; a call
//! through the PLT opens a `name@plt` node that holds the library's time until the call returns.
//! Forked processes and threads are followed, each thread with its own tree; a process that
//! executes another program is instrumented again for that program.

mod calibrate;
pub(crate) mod markers;
mod notes;
mod sys;
pub(crate) mod thread;
mod tracer;

pub use calibrate::{TrapCost, measure_trap_cost};
pub(crate) use notes::exact_notes;
pub use thread::ThreadTree;
pub use tracer::{BlockCounts, ExactOptions, ExactRun, record_exact};
