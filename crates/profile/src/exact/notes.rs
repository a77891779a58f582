//! What `report` says about an exact recording (either back-end) beyond the patch summary:
//! marker events that could not be placed in the tree, a patched run slowed too much for its
//! times to be trusted, and OpenMP regions whose barrier time lands in their own body.

use loopscope_binary::Program;

use super::ExactRun;
use crate::Overhead;
use crate::lcct::NodeKey;

/// Below this share of the profiled run being the program's own, the patch runtime's
/// handler has slowed it enough to reshape the profile.
const TRUSTED_APP_RATIO: f64 = 0.8;
/// Above this ratio of profiled to native wall time, likewise (the trampolines' cost is
/// application time, so only the native run shows it).
const TRUSTED_TIME_RATIO: f64 = 1.5;

/// The notes of an exact recording; `programs` are its objects' analyses, by object index.
pub fn exact_notes(
    run: &ExactRun,
    overhead: &Overhead,
    programs: &[Option<&Program>],
) -> Vec<String> {
    let mut notes = Vec::new();
    notes.extend(unmatched_note(run));
    notes.extend(trap_cost_note(run));
    if run.patch.is_some() {
        notes.extend(slowdown_note(overhead));
        notes.extend(openmp_note(run, programs));
    }
    notes
}

fn unmatched_note(run: &ExactRun) -> Option<String> {
    let unmatched: u64 = run.threads.iter().map(|t| t.unmatched_events).sum();
    (unmatched > 0).then(|| {
        let events: u64 = run.threads.iter().map(|t| t.events).sum();
        format!(
            "{unmatched} of {} loop marker events not counted: they ran in another function \
             than the one the thread was in, as far as its calls and returns were seen (code \
             entered or left without a call or return, such as a signal handler's return or a \
             context switch); loop counts may be short by as much",
            events + unmatched
        )
    })
}

/// Above this share of the time measured between markers being the trap cost subtracted, what
/// is left is of the order of the cost's own swing between runs (it changes with the machine's
/// load by tens of percent), and small loops' times are uncertain.
const UNCERTAIN_CORRECTION_SHARE: f64 = 0.5;

/// The ptrace back-end's calibrated trap cost, when subtracting it per marker removed most of
/// what was measured: then the times left are differences of two large, noisy figures.
fn trap_cost_note(run: &ExactRun) -> Option<String> {
    let cost = run.trap_cost?.cycles_per_event;
    let mut tree = crate::Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    let (mut measured, mut subtracted, mut mostly_cost) = (0u64, 0u64, 0usize);
    for node in tree.nodes.iter().skip(1) {
        let removed = node.self_time.min(node.events_charged.saturating_mul(cost));
        measured += node.self_time;
        subtracted += removed;
        if node.self_time > 0 && removed * 2 > node.self_time {
            mostly_cost += 1;
        }
    }
    let share = subtracted as f64 / measured.max(1) as f64;
    if share <= UNCERTAIN_CORRECTION_SHARE {
        return None;
    }
    let ms = |cycles: u64| cycles as f64 / run.tsc_hz * 1e3;
    let nodes = match mostly_cost {
        1 => "1 node".to_owned(),
        n => format!("{n} nodes"),
    };
    Some(format!(
        "the trap cost subtracted ({cost} cycles per marker, measured before the run) is \
         {:.1} % of the time measured between markers ({:.1} of {:.1} ms); it changes with the \
         machine's load by tens of percent between runs, so the times of small loops and \
         functions are uncertain ({nodes} lost more than half their time to it, \
         some may show 0 s): take counts from this profile and times from the sample back-end \
         or --backend patch",
        100.0 * share,
        ms(subtracted),
        ms(measured)
    ))
}

fn slowdown_note(overhead: &Overhead) -> Option<String> {
    let app = overhead.app_ratio.filter(|&a| a < TRUSTED_APP_RATIO);
    let time = overhead.time_ratio.filter(|&t| t > TRUSTED_TIME_RATIO);
    let figure = match (app, time) {
        (_, Some(t)) => format!("the patched run took {t:.1}× the native one"),
        (Some(a), None) => format!(
            "the runtime took {:.1} % of the patched run (App. ratio {:.1} %)",
            100.0 * (1.0 - a),
            100.0 * a
        ),
        (None, None) => return None,
    };
    Some(format!(
        "{figure}: times and shares are those of a slowed program, most where loops are entered \
         or functions called millions of times a second (short inner loops, small functions); \
         entries and trips are exact, but take times and shares from the sample back-end \
         (loopscope record -o PROFILE -- PROGRAM ARGS)"
    ))
}

/// Outlined OpenMP region bodies of the executable with a node in the tree, when the OpenMP
/// runtime itself was not patched: the body is entered from the runtime, and the runtime's
/// work and waiting between its calls is charged to the body until its next event.
fn openmp_note(run: &ExactRun, programs: &[Option<&Program>]) -> Option<String> {
    let runtime_patched = run.objects.iter().skip(1).any(|o| {
        let name = o.path.rsplit('/').next().unwrap_or(&o.path);
        ["libgomp", "libomp", "libiomp"]
            .iter()
            .any(|l| name.starts_with(l))
    });
    let program = programs.first().copied().flatten()?;
    if runtime_patched {
        return None;
    }
    let entered: std::collections::HashSet<u64> = run
        .threads
        .iter()
        .flat_map(|t| &t.tree.nodes)
        .filter_map(|n| match n.key {
            NodeKey::Function { object: 0, address } => Some(address),
            _ => None,
        })
        .collect();
    let regions: Vec<&str> = program
        .functions
        .iter()
        .filter(|f| entered.contains(&f.address) && is_openmp_region(&f.name))
        .map(|f| f.name.as_str())
        .collect();
    let first = regions.first()?;
    let more = match regions.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "{first}{more}: an OpenMP region body, called by the OpenMP runtime, which was not \
         patched: the runtime's scheduling and barrier waits between the body's events are \
         charged to the body's self time; record with --libraries to see them in the runtime's \
         own functions"
    ))
}

/// GCC's (`main._omp_fn.0`) and Clang's (`.omp_outlined.`) names for an outlined region.
fn is_openmp_region(name: &str) -> bool {
    name.contains("._omp_fn.") || name.contains(".omp_outlined.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::thread::ThreadState;
    use crate::{ExactRun, PatchSummary, TargetExit};

    fn run(threads: Vec<crate::ThreadTree>, patch: bool) -> ExactRun {
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
            patch: patch.then(PatchSummary::default),
        }
    }

    fn overhead(time_ratio: Option<f64>, app_ratio: f64) -> Overhead {
        Overhead {
            native_s: time_ratio.map(|_| 1.0),
            profiled_s: time_ratio.unwrap_or(1.0),
            time_ratio,
            app_ratio: Some(app_ratio),
            est_app_overhead: None,
        }
    }

    #[test]
    fn unmatched_events_are_counted_in_a_note() {
        let mut t = ThreadState::new(1, 1, 0);
        t.block(3, &[1], Some(1), 0);
        t.block(3, &[1], Some(1), 0);
        let notes = exact_notes(&run(vec![t.finish()], false), &overhead(None, 1.0), &[]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("2 of 2 loop marker events not counted"),
            "{notes:?}"
        );
        let clean = run(vec![ThreadState::new(1, 1, 0).finish()], false);
        assert!(exact_notes(&clean, &overhead(None, 1.0), &[]).is_empty());
    }

    #[test]
    fn a_slow_patched_run_says_its_times_are_those_of_a_slowed_program() {
        let patched = run(Vec::new(), true);
        let notes = exact_notes(&patched, &overhead(None, 0.278), &[]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("the runtime took 72.2 % of the patched run (App. ratio 27.8 %)"),
            "{notes:?}"
        );
        let notes = exact_notes(&patched, &overhead(Some(1.88), 0.99), &[]);
        assert!(
            notes[0].starts_with("the patched run took 1.9× the native one: times and shares"),
            "{notes:?}"
        );
        assert!(exact_notes(&patched, &overhead(Some(1.2), 0.95), &[]).is_empty());
        let traced = run(Vec::new(), false);
        assert!(
            exact_notes(&traced, &overhead(Some(40.0), 0.05), &[]).is_empty(),
            "the ptrace back-end subtracts its trap cost and says so in its measure line"
        );
    }

    #[test]
    fn a_trap_cost_that_is_most_of_the_measured_time_makes_small_loops_uncertain() {
        // One loop of 1000 markers: 3.5 million cycles measured, 3 million of them trap cost.
        let mut t = ThreadState::new(1, 1, 0).finish();
        let node = t.tree.child(
            crate::Lcct::ROOT,
            NodeKey::Function {
                object: 0,
                address: 0x1000,
            },
        );
        t.tree.nodes[node as usize].self_time = 3_500_000;
        t.tree.nodes[node as usize].events_charged = 1000;
        let mut traced = run(vec![t], false);
        traced.trap_cost = Some(crate::TrapCost {
            cycles_per_event: 3000,
            events: 20_000,
        });
        let notes = exact_notes(&traced, &overhead(None, 0.9), &[]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "the trap cost subtracted (3000 cycles per marker, measured before the run) is \
                 85.7 % of the time measured between markers (3.0 of 3.5 ms)"
            ),
            "{notes:?}"
        );
        assert!(
            notes[0].contains("(1 node lost more than half"),
            "{notes:?}"
        );
        traced.trap_cost = Some(crate::TrapCost {
            cycles_per_event: 1000,
            events: 20_000,
        });
        assert!(exact_notes(&traced, &overhead(None, 0.9), &[]).is_empty());
    }

    #[test]
    fn outlined_region_names_are_recognised() {
        assert!(is_openmp_region("main._omp_fn.0"));
        assert!(is_openmp_region(".omp_outlined._debug__.1"));
        assert!(!is_openmp_region("omp_get_thread_num"));
    }
}
