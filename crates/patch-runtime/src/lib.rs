//! The runtime library of loopscope's patch back-end: `loopscope record --backend patch`
//! preloads it into the program it profiles (`LD_PRELOAD`).
//!
//! It is only the library's shell: a constructor that starts the runtime (which patches the
//! executable before any of its code runs, see `loopscope_profile`'s `patch` module), a
//! destructor that writes the process's result when it exits, and `_exit`/`_Exit`, interposed
//! so that a process ending through them writes its result too. It must not print and does
//! nothing unless `record` named a handover file in the environment variable
//! [`loopscope_profile::HANDOVER_VARIABLE`] (which is how `record` talks to it).
//!
//! The library is built with the workspace (`cargo build` puts `libloopscope_patch_runtime.so`
//! next to the `loopscope` binary); it is not meant to be linked into anything.
//!
//! ```
//! // The variable `record` sets for the target:
//! assert_eq!(loopscope_profile::HANDOVER_VARIABLE, "LOOPSCOPE_PATCH_HANDOVER");
//! ```
#![deny(missing_docs)]

use loopscope_profile::patch_runtime;

// SAFETY: `.init_array` entries are called once by the dynamic loader, after the C library is
// initialised and before the executable's own constructors and `main`.
#[used]
#[unsafe(link_section = ".init_array")]
static START: extern "C" fn() = start;

// SAFETY: `.fini_array` entries are called once by `exit`, after the executable's destructors.
#[used]
#[unsafe(link_section = ".fini_array")]
static END: extern "C" fn() = end;

extern "C" fn start() {
    if let Some(handover) = std::env::var_os(loopscope_profile::HANDOVER_VARIABLE) {
        patch_runtime::start(&handover);
    }
}

extern "C" fn end() {
    patch_runtime::end_process();
}

/// `_exit`, interposed: the process's result is written, then it ends with `status`.
// SAFETY: the symbol replaces the C library's `_exit` for the program; it has its signature and
// ends the process as it does.
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: libc::c_int) -> ! {
    patch_runtime::quick_exit(status)
}

/// `_Exit`, interposed like [`_exit`].
// SAFETY: as for `_exit`.
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: libc::c_int) -> ! {
    patch_runtime::quick_exit(status)
}
