//! Running one kernel on several cores at once: one pinned thread per CPU, started together.

use std::sync::Barrier;

use crate::pin_current_thread;

/// Runs `setup` then `work` on one thread per CPU in `cpus`, each pinned to its CPU (an
/// unpinned thread still runs; callers report pinning separately). Every `work` starts after
/// every `setup` has finished. A thread that panicked gives `None`.
pub fn on_each_cpu<S, T: Send>(
    cpus: &[usize],
    setup: impl Fn() -> S + Sync,
    work: impl Fn(S) -> T + Sync,
) -> Vec<Option<T>> {
    let barrier = Barrier::new(cpus.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let (barrier, setup, work) = (&barrier, &setup, &work);
                scope.spawn(move || {
                    let _ = pin_current_thread(cpu);
                    let state = setup();
                    barrier.wait();
                    work(state)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_runs_setup_then_work() {
        let cpus = crate::allowed_cpus();
        let out = on_each_cpu(&cpus, || 20, |x| x + 1);
        assert_eq!(out, vec![Some(21); cpus.len()]);
    }
}
