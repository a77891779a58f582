/// The stack a thread that calls isl should have: 256 MiB.
///
/// isl's parametric integer programming (`find_solutions` in `isl_tab_pip.c`, reached from
/// `compute_divs`, lexmin and lexmax) recurses once for every split of its context, and nothing
/// bounds how often a set splits: the projection of a random 2D set with two modulo conditions
/// went 9 000 levels deep, after overflowing the 2 MiB that Rust gives a thread by default
/// (which aborts the process). Its counting now gives up early, but the operation bound of
/// [`crate::Ctx::with_max_operations`] stops long work, not deep work, so for every other call
/// the stack is what must be large. A stack is reserved, not committed: pages the recursion
/// never reaches cost address space only.
pub const ISL_STACK_BYTES: usize = 256 << 20;

/// A thread builder whose threads have [`ISL_STACK_BYTES`] of stack: every thread that builds
/// or counts sets should come from one.
///
/// ```
/// let answer = loopscope_polyhedral::isl_thread()
///     .spawn(|| 6 * 7)
///     .expect("a thread")
///     .join()
///     .expect("no panic");
/// assert_eq!(answer, 42);
/// ```
pub fn isl_thread() -> std::thread::Builder {
    std::thread::Builder::new().stack_size(ISL_STACK_BYTES)
}
