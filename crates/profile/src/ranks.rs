//! Several profiles of one program merged, one per process of a parallel run (MPI ranks):
//! their trees summed along equal calling-context paths, and the hottest loops' time per rank
//! side by side, so that load imbalance shows as the spread between the ranks.

use serde::Serialize;

use crate::view::{HotRule, Overhead, ProfileReport, TreeNode};
use crate::{ObjectRef, ProfileError, TargetExit, hot_threshold};

/// Reports of several profiles merged.
#[derive(Debug, Clone, Serialize)]
pub struct RankMerge {
    /// The merged report: every tree summed node by node along equal context paths, shares
    /// of the sum.
    #[serde(flatten)]
    pub merged: ProfileReport,
    /// Each profile's label (`rank 3`, or its file name), in the order given.
    pub ranks: Vec<String>,
    /// How each profile's target ended, in the order of [`RankMerge::ranks`].
    pub exits: Vec<TargetExit>,
    /// The loops with the most inclusive time over all ranks, with each rank's.
    pub imbalance: Vec<RankLoop>,
}

/// One loop (in one calling context) and its inclusive time in each rank.
#[derive(Debug, Clone, Serialize)]
pub struct RankLoop {
    /// `loop N`.
    pub name: String,
    /// The function holding the loop.
    pub function: Option<String>,
    /// Source file of the loop's header.
    pub file: Option<String>,
    /// Source line of the loop's header (the user's line it was inlined at, when it is inlined
    /// code).
    pub line: Option<u32>,
    /// The header's inlined call chain, innermost first, as [`TreeNode::inlined`].
    pub inlined: Vec<loopscope_binary::Frame>,
    /// The calling context, outermost first (function and loop names), the loop last.
    pub context: Vec<String>,
    /// Inclusive seconds per rank, in the order of [`RankMerge::ranks`] (0 where a rank never
    /// reached the loop in this context).
    pub per_rank_s: Vec<f64>,
    /// Fewest seconds of a rank.
    pub min_s: f64,
    /// Mean seconds over the ranks.
    pub mean_s: f64,
    /// Most seconds of a rank.
    pub max_s: f64,
    /// `max_s / mean_s - 1`: how much longer the slowest rank spends than the average (0 when
    /// balanced); the others wait that long at the next synchronisation.
    pub imbalance: f64,
    /// Index into [`RankMerge::ranks`] of the slowest rank.
    pub slowest: usize,
}

/// What makes two nodes of different profiles the same node.
#[derive(Debug, Clone, PartialEq)]
struct NodeIdentity<'a> {
    kind: &'a str,
    name: &'a str,
    loop_id: Option<u32>,
    file: Option<&'a str>,
    line: Option<u32>,
}

impl<'a> NodeIdentity<'a> {
    fn of(n: &'a TreeNode) -> NodeIdentity<'a> {
        NodeIdentity {
            kind: n.kind,
            name: &n.name,
            loop_id: n.loop_id,
            file: n.file.as_deref(),
            line: n.line,
        }
    }
}

/// Merges the reports of several profiles, `(label, report)` each, and lists the `top` loops
/// with the most inclusive time with their time per rank. All must come from one back-end and
/// one program (the same file, or the same build-id).
pub fn merge_reports(
    reports: &[(String, ProfileReport)],
    rule: HotRule,
    top: usize,
) -> Result<RankMerge, ProfileError> {
    let Some((_, first)) = reports.first() else {
        return Err(ProfileError::Merge("no profiles to merge".into()));
    };
    if let Some((label, other)) = reports.iter().find(|(_, r)| r.backend != first.backend) {
        return Err(ProfileError::Merge(format!(
            "{label} was recorded by the {} back-end, {} by the {} back-end; merge profiles of one \
             back-end",
            other.backend, reports[0].0, first.backend
        )));
    }
    for (label, other) in &reports[1..] {
        check_same_program((&reports[0].0, first), (label, other))?;
    }
    let mut tree = first.tree.clone();
    for (_, r) in &reports[1..] {
        add_tree(&mut tree, &r.tree);
    }
    let total_samples = tree.self_samples.map(|_| sum_samples(&tree));
    let mut next_id = 0;
    let total_s = tree.inclusive_s;
    finish_tree(&mut tree, total_s, total_samples, &mut next_id);
    let threshold = threshold(&tree, rule);
    mark_hot(&mut tree, threshold);
    let mut notes = merged_notes(reports);
    let exits: Vec<TargetExit> = reports.iter().map(|(_, r)| r.exit).collect();
    if exits.iter().any(|&e| e != first.exit) {
        let each: Vec<String> = reports
            .iter()
            .map(|(label, r)| format!("{label} {}", r.exit))
            .collect();
        notes.insert(
            0,
            format!("the ranks ended differently: {}", each.join(", ")),
        );
    }
    let merged = ProfileReport {
        backend: first.backend,
        command: first.command.clone(),
        measure: format!("{} ({} profiles summed)", first.measure, reports.len()),
        program: first.program.clone(),
        exit: first.exit,
        events: reports.iter().map(|(_, r)| r.events).sum(),
        hot_threshold: threshold,
        overhead: Overhead {
            native_s: None,
            profiled_s: reports
                .iter()
                .map(|(_, r)| r.overhead.profiled_s)
                .fold(0.0, f64::max),
            time_ratio: None,
            app_ratio: None,
            est_app_overhead: None,
        },
        tree,
        notes,
        threads: Vec::new(),
    };
    let imbalance = hottest_loops(&merged.tree, reports, top);
    Ok(RankMerge {
        merged,
        ranks: reports.iter().map(|(l, _)| l.clone()).collect(),
        exits,
        imbalance,
    })
}

/// Refuses two profiles of different programs: another file (unless its build-id, or for a
/// program without one the hash of its loaded code, says it is a copy of the same build), or
/// the same file rebuilt.
fn check_same_program(
    (first_label, first): (&str, &ProfileReport),
    (label, other): (&str, &ProfileReport),
) -> Result<(), ProfileError> {
    let (Some(a), Some(b)) = (&first.program, &other.program) else {
        return Ok(());
    };
    let (build_a, build_b) = (build_of(a), build_of(b));
    if a.path != b.path && !(build_a.is_some() && build_a == build_b) {
        return Err(ProfileError::Merge(format!(
            "{label} is a profile of {}, {first_label} of {}; merge only the profiles of one \
             program (the ranks of one run)",
            b.path, a.path
        )));
    }
    if build_a != build_b {
        let name = |build: Option<String>| build.unwrap_or_else(|| "no build-id".into());
        return Err(ProfileError::Merge(format!(
            "{label} was recorded from {} with {}, {first_label} with {}; merge only the \
             profiles of one build",
            b.path,
            name(build_b),
            name(build_a)
        )));
    }
    Ok(())
}

/// What tells one build of a program from another: its build-id, else its loaded code's hash.
fn build_of(program: &ObjectRef) -> Option<String> {
    match (&program.build_id, &program.content_id) {
        (Some(id), _) => Some(format!("build-id {id}")),
        (None, Some(hash)) => Some(format!("loaded code {hash}")),
        (None, None) => None,
    }
}

/// Each distinct note once: as it is when every profile has it, else after the labels of the
/// profiles that do.
fn merged_notes(reports: &[(String, ProfileReport)]) -> Vec<String> {
    let mut by_note: Vec<(&str, Vec<&str>)> = Vec::new();
    for (label, r) in reports {
        for note in &r.notes {
            match by_note.iter_mut().find(|(n, _)| n == note) {
                Some((_, labels)) => labels.push(label),
                None => by_note.push((note, vec![label])),
            }
        }
    }
    by_note
        .into_iter()
        .map(|(note, labels)| {
            if labels.len() == reports.len() {
                note.to_owned()
            } else {
                format!("{}: {note}", labels.join(", "))
            }
        })
        .collect()
}

/// Adds `other` into `into`, node by node along equal identities.
fn add_tree(into: &mut TreeNode, other: &TreeNode) {
    add_counts(into, other);
    for child in &other.children {
        let id = NodeIdentity::of(child);
        match into.children.iter().position(|c| NodeIdentity::of(c) == id) {
            Some(i) => add_tree(&mut into.children[i], child),
            None => into.children.push(child.clone()),
        }
    }
}

fn add_option(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn add_counts(into: &mut TreeNode, other: &TreeNode) {
    into.self_s += other.self_s;
    into.inclusive_s += other.inclusive_s;
    into.self_cycles = add_option(into.self_cycles, other.self_cycles);
    into.inclusive_cycles = add_option(into.inclusive_cycles, other.inclusive_cycles);
    into.self_samples = add_option(into.self_samples, other.self_samples);
    into.entries = add_option(into.entries, other.entries);
    into.iterations = add_option(into.iterations, other.iterations);
    into.trips = match (into.trips, other.trips) {
        (Some([lo_a, _, hi_a]), Some([lo_b, _, hi_b])) => {
            let mean = match (into.iterations, into.entries) {
                (Some(i), Some(e)) if e > 0 => i as f64 / e as f64,
                _ => 0.0,
            };
            Some([lo_a.min(lo_b), mean, hi_a.max(hi_b)])
        }
        (a, b) => a.or(b),
    };
}

fn sum_samples(n: &TreeNode) -> u64 {
    n.self_samples.unwrap_or(0) + n.children.iter().map(sum_samples).sum::<u64>()
}

/// Shares of the merged total, fresh node ids in depth-first order, children by decreasing
/// inclusive share.
fn finish_tree(n: &mut TreeNode, total_s: f64, total_samples: Option<u64>, next_id: &mut u32) {
    let total = if total_s > 0.0 { total_s } else { 1.0 };
    n.self_share = n.self_s / total;
    n.inclusive_share = n.inclusive_s / total;
    n.share_error = total_samples.filter(|&t| t > 0).map(|t| {
        let p = sum_samples(n) as f64 / t as f64;
        (p * (1.0 - p) / t as f64).sqrt()
    });
    n.node_id = *next_id;
    *next_id += 1;
    n.children
        .sort_by(|a, b| b.inclusive_s.total_cmp(&a.inclusive_s));
    for c in &mut n.children {
        finish_tree(c, total_s, total_samples, next_id);
    }
}

/// The hot threshold of the merged tree under `rule`, in nanoseconds as the single-profile
/// report ranks them.
fn threshold(root: &TreeNode, rule: HotRule) -> f64 {
    match rule {
        HotRule::Share(share) => share,
        HotRule::Rank(rank) => {
            let mut self_ns = Vec::new();
            let mut inclusive_ns = Vec::new();
            fn walk(n: &TreeNode, s: &mut Vec<u64>, i: &mut Vec<u64>) {
                s.push((n.self_s * 1e9) as u64);
                i.push((n.inclusive_s * 1e9) as u64);
                n.children.iter().for_each(|c| walk(c, s, i));
            }
            walk(root, &mut self_ns, &mut inclusive_ns);
            hot_threshold(&self_ns, &inclusive_ns, rank)
        }
    }
}

fn mark_hot(n: &mut TreeNode, threshold: f64) {
    n.hot = n.inclusive_share >= threshold;
    n.children.iter_mut().for_each(|c| mark_hot(c, threshold));
}

/// The `top` loop nodes of the merged tree with the most inclusive time, each with the time
/// of the node at the same context path in every rank.
fn hottest_loops(
    merged: &TreeNode,
    reports: &[(String, ProfileReport)],
    top: usize,
) -> Vec<RankLoop> {
    let mut loops: Vec<(Vec<&TreeNode>, f64)> = Vec::new();
    fn collect<'a>(
        n: &'a TreeNode,
        path: &mut Vec<&'a TreeNode>,
        out: &mut Vec<(Vec<&'a TreeNode>, f64)>,
    ) {
        path.push(n);
        if n.kind == "loop" {
            out.push((path.clone(), n.inclusive_s));
        }
        n.children.iter().for_each(|c| collect(c, path, out));
        path.pop();
    }
    collect(merged, &mut Vec::new(), &mut loops);
    loops.sort_by(|a, b| b.1.total_cmp(&a.1));
    loops.truncate(top);
    loops
        .into_iter()
        .map(|(path, _)| {
            let per_rank_s: Vec<f64> = reports
                .iter()
                .map(|(_, r)| find_path(&r.tree, &path[1..]).map_or(0.0, |n| n.inclusive_s))
                .collect();
            let node = path[path.len() - 1];
            let (min_s, max_s) = per_rank_s
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| {
                    (lo.min(s), hi.max(s))
                });
            let mean_s = per_rank_s.iter().sum::<f64>() / per_rank_s.len().max(1) as f64;
            let slowest = per_rank_s
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i);
            RankLoop {
                name: node.name.clone(),
                function: node.function.clone(),
                file: node.file.clone(),
                line: node.line,
                inlined: node.inlined.clone(),
                context: path[1..].iter().map(|n| n.name.clone()).collect(),
                per_rank_s,
                min_s: if min_s.is_finite() { min_s } else { 0.0 },
                mean_s,
                max_s,
                imbalance: if mean_s > 0.0 {
                    max_s / mean_s - 1.0
                } else {
                    0.0
                },
                slowest,
            }
        })
        .collect()
}

/// The node of `root` reached along `path`'s identities (the root itself excluded from it).
fn find_path<'a>(root: &'a TreeNode, path: &[&TreeNode]) -> Option<&'a TreeNode> {
    let mut at = root;
    for step in path {
        let id = NodeIdentity::of(step);
        at = at.children.iter().find(|c| NodeIdentity::of(c) == id)?;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: &'static str, name: &str, self_s: f64, children: Vec<TreeNode>) -> TreeNode {
        let inclusive_s = self_s + children.iter().map(|c| c.inclusive_s).sum::<f64>();
        TreeNode {
            kind,
            name: name.into(),
            loop_id: (kind == "loop").then_some(name.len() as u32),
            node_id: 0,
            irreducible: false,
            file: (kind == "loop").then(|| "app.c".into()),
            line: (kind == "loop").then_some(10),
            inlined: Vec::new(),
            object: None,
            function: (kind == "loop").then(|| "main".into()),
            self_s,
            inclusive_s,
            self_share: 0.0,
            inclusive_share: 0.0,
            share_error: None,
            self_cycles: None,
            inclusive_cycles: None,
            self_samples: None,
            entries: (kind == "loop").then_some(2),
            iterations: (kind == "loop").then_some(20),
            trips: (kind == "loop").then_some([5.0, 10.0, 15.0]),
            hot: false,
            children,
        }
    }

    fn report(loop_s: f64, extra: Option<f64>) -> ProfileReport {
        let mut loops = vec![node("loop", "loop 1", loop_s, vec![])];
        if let Some(s) = extra {
            loops.push(node("loop", "loop 22", s, vec![]));
        }
        ProfileReport {
            backend: "ptrace",
            command: vec!["./app".into()],
            measure: "TSC".into(),
            program: Some(ObjectRef {
                path: "/work/app".into(),
                build_id: Some("aa11".into()),
                content_id: None,
            }),
            exit: TargetExit::Exited(0),
            events: 5,
            hot_threshold: 0.0,
            overhead: Overhead {
                native_s: None,
                profiled_s: 1.0,
                time_ratio: None,
                app_ratio: None,
                est_app_overhead: None,
            },
            tree: node(
                "root",
                "all",
                0.0,
                vec![node("function", "main", 1.0, loops)],
            ),
            notes: vec!["same note".into()],
            threads: Vec::new(),
        }
    }

    #[test]
    fn ranks_sum_along_context_paths_and_the_spread_is_listed() {
        let reports = vec![
            ("rank 0".to_owned(), report(3.0, None)),
            ("rank 1".to_owned(), report(1.0, Some(2.0))),
        ];
        let merge = merge_reports(&reports, HotRule::Share(0.01), 10).unwrap();
        let main = &merge.merged.tree.children[0];
        assert_eq!(main.inclusive_s, 8.0);
        assert_eq!(main.children.len(), 2);
        let l1 = &main.children[0];
        assert_eq!((l1.name.as_str(), l1.inclusive_s), ("loop 1", 4.0));
        assert_eq!((l1.entries, l1.iterations), (Some(4), Some(40)));
        assert_eq!(l1.trips, Some([5.0, 10.0, 15.0]));
        assert_eq!(l1.inclusive_share, 0.5);
        let first = &merge.imbalance[0];
        assert_eq!(first.per_rank_s, [3.0, 1.0]);
        assert_eq!((first.min_s, first.mean_s, first.max_s), (1.0, 2.0, 3.0));
        assert!((first.imbalance - 0.5).abs() < 1e-12);
        assert_eq!(first.slowest, 0);
        assert_eq!(first.context, ["main", "loop 1"]);
        let second = &merge.imbalance[1];
        assert_eq!(second.per_rank_s, [0.0, 2.0], "a loop one rank never ran");
        assert_eq!(merge.merged.notes, ["same note"]);
        let ids: Vec<u32> = [&merge.merged.tree, main, l1]
            .iter()
            .map(|n| n.node_id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
    }

    #[test]
    fn a_note_of_some_ranks_names_them() {
        let mut one = report(1.0, None);
        one.notes.push("only here".into());
        let reports = vec![
            ("rank 0".to_owned(), report(1.0, None)),
            ("rank 1".to_owned(), one),
        ];
        let merge = merge_reports(&reports, HotRule::Rank(8), 5).unwrap();
        assert_eq!(merge.merged.notes, ["same note", "rank 1: only here"]);
    }

    #[test]
    fn back_ends_are_not_mixed() {
        let mut sampled = report(1.0, None);
        sampled.backend = "sample";
        let reports = vec![
            ("a".to_owned(), report(1.0, None)),
            ("b".to_owned(), sampled),
        ];
        let err = merge_reports(&reports, HotRule::Rank(8), 5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("back-end"), "{err}");
    }

    #[test]
    fn profiles_of_other_programs_or_builds_are_not_merged() {
        let mut other = report(1.0, None);
        other.program = Some(ObjectRef {
            path: "/work/other".into(),
            build_id: Some("bb22".into()),
            content_id: None,
        });
        let reports = vec![
            ("a.prof".to_owned(), report(1.0, None)),
            ("b.prof".to_owned(), other),
        ];
        let err = merge_reports(&reports, HotRule::Rank(8), 5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.prof") && err.contains("a.prof"), "{err}");
        assert!(
            err.contains("/work/other") && err.contains("/work/app"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");

        let mut rebuilt = report(1.0, None);
        rebuilt.program.as_mut().unwrap().build_id = Some("cc33".into());
        let reports = vec![
            ("a.prof".to_owned(), report(1.0, None)),
            ("b.prof".to_owned(), rebuilt),
        ];
        let err = merge_reports(&reports, HotRule::Rank(8), 5)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("build-id cc33") && err.contains("aa11"),
            "{err}"
        );

        // Without build-ids, the loaded code's hash tells builds apart.
        let without_build_id = |hash: &str| {
            let mut r = report(1.0, None);
            let program = r.program.as_mut().unwrap();
            (program.build_id, program.content_id) = (None, Some(hash.into()));
            r
        };
        let reports = vec![
            ("a.prof".to_owned(), without_build_id("1111")),
            ("b.prof".to_owned(), without_build_id("2222")),
        ];
        let err = merge_reports(&reports, HotRule::Rank(8), 5)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("with loaded code 2222, a.prof with loaded code 1111"),
            "{err}"
        );
        let reports = vec![
            ("a.prof".to_owned(), without_build_id("1111")),
            ("b.prof".to_owned(), without_build_id("1111")),
        ];
        assert!(merge_reports(&reports, HotRule::Rank(8), 5).is_ok());

        let mut copy = report(1.0, None);
        copy.program.as_mut().unwrap().path = "/scratch/app".into();
        let reports = vec![
            ("a.prof".to_owned(), report(1.0, None)),
            ("b.prof".to_owned(), copy),
        ];
        assert!(
            merge_reports(&reports, HotRule::Rank(8), 5).is_ok(),
            "a copy of one build is one program"
        );
    }

    #[test]
    fn ranks_that_ended_differently_are_named() {
        let mut crashed = report(1.0, None);
        crashed.exit = TargetExit::Signaled(11);
        let reports = vec![
            ("rank 0".to_owned(), report(1.0, None)),
            ("rank 1".to_owned(), crashed),
        ];
        let merge = merge_reports(&reports, HotRule::Rank(8), 5).unwrap();
        assert_eq!(
            merge.merged.notes[0],
            "the ranks ended differently: rank 0 exited 0, rank 1 killed by signal 11"
        );
        assert_eq!(
            merge.exits,
            [TargetExit::Exited(0), TargetExit::Signaled(11)]
        );
    }
}
