//! What `report` says about a patch recording: how its sites were patched, every site left
//! out and why, and what the runtime could not see.

use loopscope_binary::Program;

use super::record::PatchSummary;

/// Fallback sites named one by one in the notes; the rest are counted.
const TRAPS_LISTED: usize = 12;
/// Skipped sites named one by one in the notes; the rest are counted.
const SKIPPED_LISTED: usize = 12;

/// The notes of a patch recording; `programs` (by object index) name the functions of the
/// sites listed.
pub fn patch_notes(summary: &PatchSummary, programs: &[Option<&Program>]) -> Vec<String> {
    let program = |object: u32| programs.get(object as usize).copied().flatten();
    let mut notes = Vec::new();
    let short = summary.springboard_sites + summary.fall_through_sites;
    if short > 0 {
        notes.push(format!(
            "{short} markers sit in blocks shorter than a jump: {} reached through a 2-byte jump \
             to a springboard, {} on the jump of the block before{}",
            summary.springboard_sites,
            summary.fall_through_sites,
            if summary.room_jumps > 0 {
                format!(
                    " ({} blocks with no marker run through a trampoline to make that possible)",
                    summary.room_jumps
                )
            } else {
                String::new()
            }
        ));
    }
    if summary.trap_sites > 0 {
        let reasons: Vec<String> = summary
            .trap_reasons
            .iter()
            .map(|(why, n)| format!("{n} where {why}"))
            .collect();
        notes.push(format!(
            "{} of {} markers are in-process traps, each about a microsecond per execution \
             (no 5-byte jump fits: {})",
            summary.trap_sites,
            summary.trap_sites + summary.jump_sites,
            reasons.join("; ")
        ));
        for t in summary.traps.iter().take(TRAPS_LISTED) {
            notes.push(format!(
                "trap at {}: {}",
                place(program(t.object), t.address),
                t.reason
            ));
        }
        if summary.traps.len() > TRAPS_LISTED {
            notes.push(format!(
                "{} more traps (the profile file lists them all)",
                summary.traps.len() - TRAPS_LISTED
            ));
        }
    }
    for s in summary.skipped.iter().take(SKIPPED_LISTED) {
        notes.push(format!(
            "marker at {} skipped: {}",
            place(program(s.object), s.address),
            s.reason
        ));
    }
    if summary.skipped.len() > SKIPPED_LISTED {
        notes.push(format!(
            "{} more markers skipped (the profile file lists them all)",
            summary.skipped.len() - SKIPPED_LISTED
        ));
    }
    if summary.dropped_events > 0 {
        notes.push(format!(
            "{} events not counted: a signal handler interrupted the runtime's handler",
            summary.dropped_events
        ));
    }
    if summary.lost_threads > 0 {
        notes.push(format!(
            "{} threads' trees lost: they were in the runtime's handler when their process ended",
            summary.lost_threads
        ));
    }
    for library in &summary.unloaded {
        notes.push(format!("{library}: not loaded at start, not instrumented"));
    }
    for program in &summary.uninstrumented {
        notes.push(format!("{program}: another program, not instrumented"));
    }
    if summary.processes_without_result > 0 {
        notes.push(format!(
            "{} processes ended without writing their trees (SIGKILL, a raw exit system call, or \
             an exec of a program that does not load the runtime)",
            summary.processes_without_result
        ));
    }
    if summary.processes_executed > 0 {
        notes.push(format!(
            "{} processes executed another program: their counts before the exec are not in the \
             profile (under the patch back-end a process writes its trees when it ends; \
             --backend ptrace keeps them)",
            summary.processes_executed
        ));
    }
    notes
}

/// `function+0xoffset (0xaddress)`, or the address alone.
fn place(program: Option<&Program>, address: u64) -> String {
    let function = program.and_then(|p| {
        p.functions
            .iter()
            .filter(|f| f.address <= address)
            .filter(|f| f.ranges.iter().any(|r| (r[0]..r[1]).contains(&address)))
            .max_by_key(|f| f.address)
    });
    match function {
        Some(f) => format!("{}+{:#x} ({address:#x})", f.name, address - f.address),
        None => format!("{address:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::record::SkippedSite;

    #[test]
    fn skipped_markers_are_listed_up_to_a_few_then_counted() {
        let site = |address| SkippedSite {
            object: 0,
            address,
            reason: "the bytes do not decode".into(),
        };
        let summary = PatchSummary {
            skipped: (0..300).map(|i| site(0x1000 + i)).collect(),
            ..PatchSummary::default()
        };
        let notes = patch_notes(&summary, &[]);
        let listed = notes.iter().filter(|n| n.contains(" skipped: ")).count();
        assert_eq!(listed, SKIPPED_LISTED, "{notes:?}");
        assert_eq!(
            notes.last().map(String::as_str),
            Some("288 more markers skipped (the profile file lists them all)")
        );
    }
}
