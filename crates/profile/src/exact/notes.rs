//! What `report` says about an exact recording (either back-end) beyond the patch summary:
//! marker events that could not be placed in the tree.

use super::ExactRun;

/// The notes of an exact recording.
pub fn exact_notes(run: &ExactRun) -> Vec<String> {
    let mut notes = Vec::new();
    let unmatched: u64 = run.threads.iter().map(|t| t.unmatched_events).sum();
    if unmatched > 0 {
        let events: u64 = run.threads.iter().map(|t| t.events).sum();
        notes.push(format!(
            "{unmatched} of {} loop marker events not counted: they ran in another function \
             than the one the thread was in, as far as its calls and returns were seen (code \
             entered or left without a call or return, such as a signal handler's return or a \
             context switch); loop counts may be short by as much",
            events + unmatched
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::thread::ThreadState;
    use crate::{ExactRun, TargetExit};

    fn run(threads: Vec<crate::ThreadTree>) -> ExactRun {
        ExactRun {
            objects: Vec::new(),
            threads,
            tsc_hz: 1e9,
            analysis_cycles: 0,
            sites: 0,
            stepped_sites: 0,
            trap_cost: None,
            exit: TargetExit::Exited(0),
            wall_ns: 1,
            static_analysis_ns: 0,
            blocks: Vec::new(),
            patch: None,
        }
    }

    #[test]
    fn unmatched_events_are_counted_in_a_note() {
        let mut t = ThreadState::new(1, 1, 0);
        t.block(3, &[1], Some(1), 0);
        t.block(3, &[1], Some(1), 0);
        let notes = exact_notes(&run(vec![t.finish()]));
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("2 of 2 loop marker events not counted"),
            "{notes:?}"
        );
        assert!(exact_notes(&run(vec![ThreadState::new(1, 1, 0).finish()])).is_empty());
    }
}
