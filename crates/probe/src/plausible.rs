//! Bandwidth figures checked against each other. Another task on the machine only ever slows
//! a kernel down, and not every run alike: a loaded run can come out below what the physics
//! allows. On a quiet machine a cache level streams a kernel at least as fast as the next
//! level out (its misses go there), and all threads together at least as fast as one. A run
//! that breaks either rule is flagged: the lower figure of the two is the one slowed.

use loopscope_machine::{Bandwidth, Implausible};

/// Where a level lies, innermost first: `L1` < `L2` < ... < `MEM`; `None` for other names.
fn depth(level: &str) -> Option<u32> {
    if level == "MEM" {
        return Some(u32::MAX);
    }
    level.strip_prefix('L')?.parse().ok()
}

/// `L2 store on 1 thread`.
fn describe(run: &Bandwidth) -> String {
    let threads = if run.threads == 1 {
        "1 thread".to_owned()
    } else {
        format!("{} threads", run.threads)
    };
    format!("{} {} on {threads}", run.level, run.kernel)
}

/// The runs of `runs` that contradict another run, each with the figures that contradict:
/// below the same kernel's on the same threads and vector width one level further out, or
/// with several threads below one thread's at the same level.
pub fn implausible_bandwidths(runs: &[Bandwidth]) -> Vec<Implausible> {
    let mut out = Vec::new();
    for run in runs {
        let Some(here) = depth(&run.level) else {
            continue;
        };
        let mut reasons = Vec::new();
        let next_out = runs
            .iter()
            .filter(|o| {
                o.kernel == run.kernel
                    && o.threads == run.threads
                    && o.vector_bytes == run.vector_bytes
            })
            .filter_map(|o| Some((depth(&o.level)?, o)))
            .filter(|(d, _)| *d > here)
            .min_by_key(|(d, _)| *d);
        if let Some((_, outer)) = next_out
            && run.gb_per_s < outer.gb_per_s
        {
            reasons.push(format!(
                "{}, {:.2} GB/s, is below the {}'s {:.2} GB/s",
                describe(run),
                run.gb_per_s,
                outer.level,
                outer.gb_per_s
            ));
        }
        let one_thread = runs.iter().find(|o| {
            o.threads == 1
                && o.level == run.level
                && o.kernel == run.kernel
                && o.vector_bytes == run.vector_bytes
        });
        if run.threads > 1
            && let Some(one) = one_thread
            && run.gb_per_s < one.gb_per_s
        {
            reasons.push(format!(
                "{}, {:.2} GB/s, is below 1 thread's {:.2} GB/s",
                describe(run),
                run.gb_per_s,
                one.gb_per_s
            ));
        }
        if !reasons.is_empty() {
            out.push(Implausible {
                level: run.level.clone(),
                kernel: run.kernel.clone(),
                threads: run.threads,
                vector_bytes: run.vector_bytes,
                reason: reasons.join(", and "),
            });
        }
    }
    out
}

/// The note for one implausible run.
pub fn implausible_note(flag: &Implausible) -> String {
    format!(
        "bandwidth implausible: {}, which a quiet machine does not give (another task slowed \
         the run); rerun `loopscope probe` on a quiet machine before trusting it",
        flag.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(level: &str, kernel: &str, threads: u32, gb_per_s: f64) -> Bandwidth {
        Bandwidth {
            level: level.into(),
            kernel: kernel.into(),
            threads,
            cores: None,
            working_set_bytes: 1 << 20,
            gb_per_s,
            gb_per_s_with_write_allocate: None,
            method: String::new(),
            vector_bytes: Some(32),
        }
    }

    /// Figures of a `probe --quick` on a loaded Zen 3 guest (2 cores), rounded.
    fn loaded() -> Vec<Bandwidth> {
        vec![
            run("L1", "copy", 1, 49.08),
            run("L1", "copy", 2, 21.82),
            run("L2", "copy", 1, 41.61),
            run("L2", "copy", 2, 65.69),
            run("L2", "store", 1, 1.03),
            run("L3", "store", 1, 10.69),
            run("MEM", "store", 1, 2.01),
            run("L2", "triad", 1, 6.59),
            run("L3", "triad", 1, 12.75),
            run("MEM", "triad", 1, 11.71),
        ]
    }

    #[test]
    fn slower_than_the_next_level_out_or_than_one_thread_is_flagged() {
        let flags = implausible_bandwidths(&loaded());
        let reasons: Vec<&str> = flags.iter().map(|f| f.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "L1 copy on 2 threads, 21.82 GB/s, is below the L2's 65.69 GB/s, and L1 copy \
                 on 2 threads, 21.82 GB/s, is below 1 thread's 49.08 GB/s",
                "L2 store on 1 thread, 1.03 GB/s, is below the L3's 10.69 GB/s",
                "L2 triad on 1 thread, 6.59 GB/s, is below the L3's 12.75 GB/s",
            ]
        );
        assert_eq!(
            (
                flags[1].level.as_str(),
                flags[1].kernel.as_str(),
                flags[1].threads
            ),
            ("L2", "store", 1)
        );
        let note = implausible_note(&flags[2]);
        assert!(
            note.starts_with("bandwidth implausible: L2 triad on 1 thread, 6.59 GB/s, is below"),
            "{note}"
        );
        assert!(
            note.contains("rerun `loopscope probe` on a quiet machine"),
            "{note}"
        );
    }

    #[test]
    fn consistent_figures_and_other_widths_are_not_flagged() {
        let mut quiet = vec![
            run("L1", "load", 1, 131.7),
            run("L1", "load", 2, 238.6),
            run("L2", "load", 1, 100.3),
            run("L3", "load", 1, 76.7),
            run("MEM", "load", 1, 15.5),
            // A narrower vector's run is compared with runs of its own width only.
            run("L1", "load", 1, 79.4),
            run("weird", "load", 1, 1.0),
        ];
        quiet[5].vector_bytes = Some(16);
        assert!(implausible_bandwidths(&quiet).is_empty());
        assert!(implausible_bandwidths(&[]).is_empty());
    }
}
