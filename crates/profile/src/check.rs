//! What a profile's JSON types cannot say and the report relies on: trees that are trees (one
//! root, each node listed once by its parent, parents before children, at most
//! [`MAX_TREE_DEPTH`] deep), indexes that point at something, counters whose sums fit in 64
//! bits and clock rates that are rates. Checked once, when a profile is read, so that the code
//! that builds reports can index and add without checking again.

use std::collections::BTreeSet;

use loopscope_binary::Program;

use crate::exact::ExactRun;
use crate::lcct::{Lcct, Node, NodeKey};
use crate::sample::MAX_FRAMES;
use crate::sample::SampledRun;
use crate::{Profile, Recording};

/// The deepest a loop-call-context tree may nest. Recursion is folded when a tree is recorded
/// (a call to a function already on the path re-enters its node), so a tree is only as deep as
/// its longest chain of distinct functions and loops; the report's indented text and JSON grow
/// with the square of the depth.
pub const MAX_TREE_DEPTH: usize = 1024;

/// Checks a decoded profile; the error says which field is wrong and where.
pub(crate) fn check_profile(profile: &Profile) -> Result<(), String> {
    let objects = profile.objects.len();
    match &profile.recording {
        Recording::Sample(run) => check_sampled(run),
        Recording::Ptrace(run) | Recording::Patch(run) => check_exact(run, objects),
    }
}

/// A clock rate: finite and at least one per second (so its inverse is finite too).
fn check_rate(field: &str, hz: f64, unit: &str) -> Result<(), String> {
    if hz.is_finite() && hz >= 1.0 {
        Ok(())
    } else {
        Err(format!(
            "{field} is {hz}, not a rate (expected {unit}, at least 1)"
        ))
    }
}

fn check_exact(run: &ExactRun, objects: usize) -> Result<(), String> {
    check_rate("recording.tsc_hz", run.tsc_hz, "hertz")?;
    let mut totals = Totals::default();
    for (t, thread) in run.threads.iter().enumerate() {
        let at = || format!("recording.threads[{t}].tree.nodes");
        check_tree(&thread.tree, objects).map_err(|e| format!("{}{e}", at()))?;
        for (i, node) in thread.tree.nodes.iter().enumerate() {
            totals
                .add(node)
                .map_err(|field| format!("{}[{i}].{field}: {PAST_U64}", at()))?;
        }
    }
    totals
        .self_time
        .checked_add(run.analysis_cycles)
        .ok_or_else(|| format!("recording.analysis_cycles: {PAST_U64}"))?;
    if let Some(cost) = run.trap_cost {
        totals
            .events_charged
            .checked_mul(cost.cycles_per_event)
            .ok_or_else(|| {
                format!(
                    "recording.trap_cost.cycles_per_event: {} cycles for each of {} events is {PAST_U64}",
                    cost.cycles_per_event, totals.events_charged
                )
            })?;
    }
    for (b, blocks) in run.blocks.iter().enumerate() {
        if blocks.object as usize >= run.objects.len() {
            return Err(format!(
                "recording.blocks[{b}].object is {}, but {}",
                blocks.object,
                listed_objects(run.objects.len())
            ));
        }
        if blocks.starts.len() != blocks.executions.len() {
            return Err(format!(
                "recording.blocks[{b}]: {} starts but {} executions",
                blocks.starts.len(),
                blocks.executions.len()
            ));
        }
    }
    Ok(())
}

/// Checks that every loop node of an exact run names a loop of its object, for the objects
/// `programs` holds (by object index, with their paths; `None` where the object could not be
/// analysed): a loop id the analysis does not find is an edited or foreign profile, whose
/// nodes would show with no function or source.
pub(crate) fn check_loop_ids(
    run: &ExactRun,
    programs: &[(&str, Option<&Program>)],
) -> Result<(), String> {
    let ids: Vec<Option<(&str, BTreeSet<u32>)>> = programs
        .iter()
        .map(|&(path, program)| {
            program.map(|p| {
                let ids = p.functions.iter().flat_map(|f| &f.loops).map(|l| l.id);
                (path, ids.collect())
            })
        })
        .collect();
    for (t, thread) in run.threads.iter().enumerate() {
        for (i, node) in thread.tree.nodes.iter().enumerate() {
            let NodeKey::Loop { object, id } = node.key else {
                continue;
            };
            let Some(Some((path, known))) = ids.get(object as usize) else {
                continue;
            };
            if !known.contains(&id) {
                let has = match (known.first(), known.last()) {
                    (Some(lo), Some(hi)) => format!("its loops are {lo} to {hi}"),
                    _ => "it has no loops".into(),
                };
                return Err(format!(
                    "recording.threads[{t}].tree.nodes[{i}].key.id is {id}, but {path} has no \
                     loop {id} ({has})"
                ));
            }
        }
    }
    Ok(())
}

const PAST_U64: &str = "the counts add up past 2^64";

/// Every node counter summed over every thread: what merging the threads and taking
/// inclusive values adds at most.
#[derive(Default)]
struct Totals {
    self_time: u64,
    self_samples: u64,
    events_charged: u64,
    entries: u64,
    header_executions: u64,
    back_edges: u64,
    exits: u64,
}

impl Totals {
    /// Adds a node's counters, or names the first that overflows.
    fn add(&mut self, node: &Node) -> Result<(), &'static str> {
        let add = |sum: &mut u64, value: u64, field: &'static str| {
            *sum = sum.checked_add(value).ok_or(field)?;
            Ok(())
        };
        add(&mut self.self_time, node.self_time, "self_time")?;
        add(&mut self.self_samples, node.self_samples, "self_samples")?;
        add(
            &mut self.events_charged,
            node.events_charged,
            "events_charged",
        )?;
        add(&mut self.entries, node.entries, "entries")?;
        add(
            &mut self.header_executions,
            node.header_executions,
            "header_executions",
        )?;
        add(&mut self.back_edges, node.back_edges, "back_edges")?;
        add(&mut self.exits, node.exits, "exits")
    }
}

/// Checks that a tree is one: the error starts where its text follows the nodes' field name
/// (`[3].parent ...`, `: ...`).
pub(crate) fn check_tree(tree: &Lcct, objects: usize) -> Result<(), String> {
    let nodes = &tree.nodes;
    let Some(root) = nodes.first() else {
        return Err(": empty (a tree has at least its root)".into());
    };
    if root.key != NodeKey::Root || root.parent.is_some() {
        return Err("[0]: not a root (kind `root`, no parent)".into());
    }
    let mut depth = vec![0usize; nodes.len()];
    let mut listed = 0usize;
    for (i, node) in nodes.iter().enumerate() {
        if i > 0 {
            let parent = match node.parent {
                Some(p) if (p as usize) < i => p as usize,
                Some(p) => return Err(format!("[{i}].parent is {p}, not an earlier node")),
                None => return Err(format!("[{i}].parent is missing (only the root has none)")),
            };
            if node.key == NodeKey::Root {
                return Err(format!("[{i}].key: a second root"));
            }
            depth[i] = depth[parent] + 1;
            if depth[i] > MAX_TREE_DEPTH {
                return Err(format!(
                    "[{i}] is {} levels deep, past the limit of {MAX_TREE_DEPTH} (see docs/limits.md)",
                    depth[i]
                ));
            }
        }
        check_key(node.key, objects).map_err(|e| format!("[{i}].key.{e}"))?;
        check_children(nodes, i)?;
        listed += node.children.len();
        let trips_ok = match (node.trips_min, node.trips_max) {
            (Some(min), Some(max)) => min <= max,
            (min, max) => min.is_none() && max.is_none(),
        };
        if !trips_ok {
            let text = |t: Option<u64>| t.map_or("null".into(), |t| t.to_string());
            return Err(format!(
                "[{i}]: trips_min {} and trips_max {} are not a range",
                text(node.trips_min),
                text(node.trips_max)
            ));
        }
        // A loop's header runs, and a trip ends, only after the loop was entered.
        if node.entries == 0 && (node.header_executions > 0 || node.trips_max.is_some()) {
            return Err(format!(
                "[{i}]: 0 entries but {} header_executions{}: a loop runs only once entered",
                node.header_executions,
                node.trips_max
                    .map_or(String::new(), |max| format!(" and trips up to {max}"))
            ));
        }
        if node.back_edges > node.header_executions {
            return Err(format!(
                "[{i}]: {} back_edges but only {} header_executions",
                node.back_edges, node.header_executions
            ));
        }
    }
    // Every listed child names its parent and no list repeats one, so equal counts mean every
    // node but the root is listed exactly once.
    if listed != nodes.len() - 1 {
        return Err(format!(
            ": {} nodes but {listed} listed as children",
            nodes.len()
        ));
    }
    Ok(())
}

/// A node's children are later nodes, ascending (the order they were made in), that name it
/// as their parent.
fn check_children(nodes: &[Node], i: usize) -> Result<(), String> {
    let mut previous = i;
    for &c in &nodes[i].children {
        let c = c as usize;
        let why = match nodes.get(c) {
            None => format!("{c} is not a node (there are {})", nodes.len()),
            Some(_) if c <= previous => format!("{c} is not after {previous}"),
            Some(child) if child.parent != Some(i as u32) => {
                let parent = child.parent.map_or("none".into(), |p| p.to_string());
                format!("{c} names {parent} as its parent, not {i}")
            }
            Some(_) => {
                previous = c;
                continue;
            }
        };
        return Err(format!("[{i}].children: {why}"));
    }
    Ok(())
}

/// An object index points at one of the profile's objects (`u32::MAX`: none, for code of no
/// mapped object).
fn check_key(key: NodeKey, objects: usize) -> Result<(), String> {
    let object = match key {
        NodeKey::Root => return Ok(()),
        NodeKey::Unknown { object: u32::MAX } => return Ok(()),
        NodeKey::Function { object, .. }
        | NodeKey::Plt { object, .. }
        | NodeKey::Unknown { object }
        | NodeKey::Loop { object, .. } => object,
    };
    if (object as usize) < objects {
        Ok(())
    } else {
        Err(format!(
            "object is {object}, but {}",
            listed_objects(objects)
        ))
    }
}

fn listed_objects(objects: usize) -> String {
    match objects {
        0 => "the profile lists no objects".into(),
        1 => "the profile lists 1 object".into(),
        n => format!("the profile lists {n} objects"),
    }
}

fn check_sampled(run: &SampledRun) -> Result<(), String> {
    if let Some(hz) = run.tsc_hz {
        check_rate("recording.tsc_hz", hz, "hertz")?;
    }
    if let Some(rate) = run.core_cycles_per_ns
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(format!(
            "recording.core_cycles_per_ns is {rate}, not a clock rate"
        ));
    }
    for (m, mapping) in run.mappings.iter().enumerate() {
        let fits = mapping.start < mapping.end
            && mapping
                .file_offset
                .checked_add(mapping.end - mapping.start)
                .is_some();
        if !fits {
            return Err(format!(
                "recording.mappings[{m}]: {:#x}..{:#x} at file offset {:#x} is not a range of the file",
                mapping.start, mapping.end, mapping.file_offset
            ));
        }
    }
    for (e, exec) in run.execs.iter().enumerate() {
        if exec.first_mapping > run.mappings.len() {
            return Err(format!(
                "recording.execs[{e}].first_mapping is {}, past the {} mappings",
                exec.first_mapping,
                run.mappings.len()
            ));
        }
    }
    check_samples(run)
}

fn check_samples(run: &SampledRun) -> Result<(), String> {
    // A recording asks for at least one sample a second, and each sample stands for at least
    // one event and has at least its instruction pointer: zeros would print samples of 0 ns.
    if run.frequency_hz == 0 {
        return Err("recording.frequency_hz is 0, not a sampling rate".into());
    }
    if run.period == 0 {
        return Err("recording.period is 0: a sample stands for at least one event".into());
    }
    u64::try_from(run.samples.len())
        .ok()
        .and_then(|n| n.checked_mul(run.period))
        .ok_or_else(|| {
            format!(
                "recording.period: {} samples of {} each is {PAST_U64}",
                run.samples.len(),
                run.period
            )
        })?;
    let mut total: u64 = 0;
    for (s, sample) in run.samples.iter().enumerate() {
        if sample.period == 0 {
            return Err(format!(
                "recording.samples[{s}].period is 0: a sample stands for at least one event"
            ));
        }
        if sample.stack.is_empty() {
            return Err(format!(
                "recording.samples[{s}].stack is empty: a sample has at least the address it \
                 interrupted"
            ));
        }
        total = total
            .checked_add(sample.period)
            .ok_or_else(|| format!("recording.samples[{s}].period: {PAST_U64}"))?;
        if sample.stack.len() > MAX_FRAMES {
            return Err(format!(
                "recording.samples[{s}].stack has {} frames, more than the {MAX_FRAMES} a \
                 recording keeps",
                sample.stack.len()
            ));
        }
    }
    Ok(())
}

/// The first depth past [`MAX_TREE_DEPTH`] in a tree whose parents come before their
/// children, if it goes that deep.
pub(crate) fn too_deep(tree: &Lcct) -> Option<usize> {
    let mut depth = vec![0usize; tree.nodes.len()];
    for (i, node) in tree.nodes.iter().enumerate().skip(1) {
        depth[i] = node.parent.map_or(0, |p| depth[p as usize] + 1);
        if depth[i] > MAX_TREE_DEPTH {
            return Some(depth[i]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::{ThreadTree, TrapCost};
    use crate::{HotRule, ObjectRef, TargetExit, build_report};
    use proptest::prelude::*;
    use std::path::Path;

    fn function(address: u64) -> NodeKey {
        NodeKey::Function { object: 0, address }
    }

    /// main with a loop calling two functions, one with a loop of its own: every kind of link.
    fn tree() -> Lcct {
        let mut t = Lcct::new();
        let main = t.procedure_node(Lcct::ROOT, function(0x10));
        let outer = t.child(main, NodeKey::Loop { object: 0, id: 0 });
        let f = t.procedure_node(outer, function(0x20));
        let inner = t.child(f, NodeKey::Loop { object: 0, id: 1 });
        t.procedure_node(outer, function(0x30));
        for (i, n) in t.nodes.iter_mut().enumerate() {
            n.self_time = 100 * i as u64;
            n.events_charged = i as u64;
            n.entries = 1;
        }
        for l in [outer, inner] {
            let n = &mut t.nodes[l as usize];
            (n.header_executions, n.back_edges, n.exits) = (5, 4, 1);
            (n.trips_min, n.trips_max) = (Some(5), Some(5));
        }
        t
    }

    fn profile(tree: Lcct) -> Profile {
        let run = ExactRun {
            // A path that does not exist: the report names its code by address.
            objects: vec![ObjectRef {
                path: "/nonexistent/loopscope-check/a.out".into(),
                build_id: None,
                content_id: None,
            }],
            threads: vec![ThreadTree {
                pid: 1,
                tid: 1,
                tree,
                events: 10,
                unmatched_events: 0,
            }],
            tsc_hz: 2.5e9,
            analysis_cycles: 10,
            sites: 3,
            stepped_sites: 0,
            trap_cost: Some(TrapCost {
                cycles_per_event: 7,
                events: 100,
            }),
            exit: TargetExit::Exited(0),
            wall_ns: 5,
            static_analysis_ns: 1,
            blocks: Vec::new(),
            patch: None,
        };
        Profile::exact(vec!["a.out".into()], run)
    }

    /// A change to a valid tree and the words its refusal must contain.
    type Damage = (fn(&mut Lcct), &'static str);

    fn refusal(damage: impl FnOnce(&mut Lcct)) -> String {
        let mut t = tree();
        damage(&mut t);
        check_profile(&profile(t)).expect_err("damage is refused")
    }

    #[test]
    fn a_recorded_tree_passes() {
        check_profile(&profile(tree())).unwrap();
        check_profile(&profile(Lcct::new())).unwrap();
    }

    #[test]
    fn broken_links_are_refused_naming_the_node() {
        let cases: [Damage; 9] = [
            (|t| t.nodes.clear(), "nodes: empty"),
            (
                |t| t.nodes[1].parent = Some(1),
                "nodes[0].children: 1 names 1 as its parent",
            ),
            (
                |t| t.nodes[3].parent = Some(9),
                "nodes[2].children: 3 names 9 as its parent",
            ),
            (
                |t| t.nodes[1].children = vec![99_999],
                "nodes[1].children: 99999 is not a node",
            ),
            (
                |t| t.nodes[1].children = vec![0],
                "nodes[1].children: 0 is not after 1",
            ),
            (
                |t| t.nodes[2].children.push(3),
                "nodes[2].children: 3 is not after 5",
            ),
            (
                |t| t.nodes[3].children.clear(),
                "nodes: 6 nodes but 4 listed",
            ),
            (|t| t.nodes[0].key = function(1), "nodes[0]: not a root"),
            (
                |t| t.nodes[5].key = NodeKey::Root,
                "nodes[5].key: a second root",
            ),
        ];
        for (damage, needle) in cases {
            let what = refusal(damage);
            assert!(what.contains(needle), "{what} lacks {needle}");
            assert!(what.starts_with("recording.threads[0].tree."), "{what}");
        }
    }

    #[test]
    fn values_that_cannot_be_are_refused_naming_the_field() {
        let cases: [Damage; 7] = [
            (
                |t| t.nodes[2].entries = 0,
                "nodes[2]: 0 entries but 5 header_executions and trips up to 5: a loop runs only \
                 once entered",
            ),
            (
                |t| {
                    t.nodes[1].key = NodeKey::Function {
                        object: 7,
                        address: 1,
                    }
                },
                "nodes[1].key.object is 7, but the profile lists 1 object",
            ),
            (
                |t| t.nodes[2].key = NodeKey::Unknown { object: 1 },
                "nodes[2].key.object is 1",
            ),
            (
                |t| {
                    t.nodes[2].self_time = u64::MAX;
                    t.nodes[3].self_time = u64::MAX;
                },
                "nodes[2].self_time: the counts add up past 2^64",
            ),
            (
                |t| t.nodes[2].trips_min = Some(9),
                "nodes[2]: trips_min 9 and trips_max 5 are not a range",
            ),
            (
                |t| t.nodes[4].trips_max = None,
                "nodes[4]: trips_min 5 and trips_max null",
            ),
            (
                |t| t.nodes[2].back_edges = 6,
                "nodes[2]: 6 back_edges but only 5",
            ),
        ];
        for (damage, needle) in cases {
            let what = refusal(damage);
            assert!(what.contains(needle), "{what} lacks {needle}");
        }
        let mut t = tree();
        t.nodes[1].key = NodeKey::Unknown { object: u32::MAX };
        check_profile(&profile(t)).unwrap();
    }

    #[test]
    fn rates_and_run_totals_are_checked() {
        for hz in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.5] {
            let mut p = profile(tree());
            let Recording::Ptrace(run) = &mut p.recording else {
                unreachable!()
            };
            run.tsc_hz = hz;
            let what = check_profile(&p).unwrap_err();
            assert!(what.starts_with("recording.tsc_hz is "), "{what}");
        }
        let with = |set: fn(&mut ExactRun)| {
            let mut p = profile(tree());
            if let Recording::Ptrace(run) = &mut p.recording {
                set(run);
            }
            check_profile(&p).unwrap_err()
        };
        let what = with(|run| {
            run.trap_cost = Some(TrapCost {
                cycles_per_event: u64::MAX / 2,
                events: 1,
            })
        });
        assert!(
            what.starts_with("recording.trap_cost.cycles_per_event"),
            "{what}"
        );
        let what = with(|run| run.analysis_cycles = u64::MAX);
        assert!(what.starts_with("recording.analysis_cycles"), "{what}");
        let what = with(|run| {
            run.blocks = vec![crate::BlockCounts {
                object: 0,
                starts: vec![1, 2],
                executions: vec![3],
            }]
        });
        assert_eq!(what, "recording.blocks[0]: 2 starts but 1 executions");
    }

    /// A sampled run of one process with one sample in its one mapping, as a recording writes.
    fn sampled_run() -> SampledRun {
        serde_json::from_value(serde_json::json!({
            "backend": "sample", "event": "cpu-clock", "precise_ip": 0, "frequency_hz": 1000,
            "period": 1_000_000, "sampled_total": 1_000_000,
            "samples": [{"pid": 7, "tid": 7, "time_ns": 10, "stack": [0x1010, 0x1020],
                         "truncated": false, "period": 1_000_000}],
            "mappings": [{"pid": 7, "start": 0x1000, "end": 0x2000, "file_offset": 0,
                          "path": "/nonexistent/a.out"}],
            "execs": [{"pid": 7, "time_ns": 0, "command": "a.out", "first_mapping": 0}],
            "lost_samples": 0, "throttled": 0, "tsc_hz": 2.4e9, "core_cycles_per_ns": 3.2,
            "cpu_vendor": "AuthenticAMD", "exit": {"kind": "exited", "code": 0},
            "wall_ns": 1_000_000, "startup_ns": 0, "processes": 1, "threads": 1,
            "stack_bytes": 16384, "buffer_bytes": 1_048_576
        }))
        .unwrap()
    }

    #[test]
    fn samples_that_stand_for_nothing_are_refused() {
        let check = |damage: fn(&mut SampledRun)| {
            let mut run = sampled_run();
            damage(&mut run);
            check_profile(&Profile::sampled(vec!["a.out".into()], run))
        };
        check(|_| ()).unwrap();
        type RunDamage = (fn(&mut SampledRun), &'static str);
        let cases: [RunDamage; 4] = [
            (|r| r.frequency_hz = 0, "recording.frequency_hz is 0"),
            (|r| r.period = 0, "recording.period is 0"),
            (
                |r| r.samples[0].period = 0,
                "recording.samples[0].period is 0",
            ),
            (
                |r| r.samples[0].stack.clear(),
                "recording.samples[0].stack is empty",
            ),
        ];
        for (damage, needle) in cases {
            let what = check(damage).unwrap_err();
            assert!(what.starts_with(needle), "{what}");
        }
    }

    /// A chain of distinct functions `length` deep below the root.
    fn chain(length: usize) -> Lcct {
        let mut t = Lcct::new();
        let mut at = Lcct::ROOT;
        for k in 0..length {
            at = t.procedure_node(at, function(k as u64));
        }
        t
    }

    #[test]
    fn trees_nest_up_to_the_depth_limit() {
        check_profile(&profile(chain(MAX_TREE_DEPTH))).unwrap();
        let what = check_profile(&profile(chain(MAX_TREE_DEPTH + 1))).unwrap_err();
        assert!(
            what.ends_with("is 1025 levels deep, past the limit of 1024 (see docs/limits.md)"),
            "{what}"
        );
        assert_eq!(too_deep(&chain(MAX_TREE_DEPTH)), None);
        assert_eq!(
            too_deep(&chain(MAX_TREE_DEPTH + 3)),
            Some(MAX_TREE_DEPTH + 1)
        );
        // Recursion folds, however deep the calls went.
        let mut t = Lcct::new();
        let mut at = Lcct::ROOT;
        for k in 0..100_000u64 {
            at = t.procedure_node(at, function(k % 3));
        }
        assert_eq!(t.nodes.len(), 4);
    }

    /// Numbers worth trying in a field: edges, small indexes and plausible values.
    fn number() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::MAX),
            Just(u64::MAX / 2 + 1),
            Just(u32::MAX as u64),
            0u64..16,
            any::<u64>(),
        ]
    }

    /// Sets field `field` (in the order of [`Node`]'s counters and links) of node `node` to
    /// `value`.
    fn mutate(t: &mut Lcct, node: usize, field: usize, value: u64) {
        let id = value as u32;
        let count = t.nodes.len();
        let n = &mut t.nodes[node % count];
        match field {
            0 => n.parent = Some(id),
            1 => n.parent = None,
            2 => n.children.push(id),
            3 => n.children.retain(|&c| c != id % 8),
            4 => n.self_time = value,
            5 => n.self_samples = value,
            6 => n.events_charged = value,
            7 => n.entries = value,
            8 => n.header_executions = value,
            9 => n.back_edges = value,
            10 => n.exits = value,
            11 => n.trips_min = Some(value),
            12 => n.trips_max = Some(value),
            13 => n.key = NodeKey::Loop { object: id, id },
            _ => n.key = NodeKey::Unknown { object: id },
        }
    }

    proptest! {
        /// A profile whose numbers and indexes were changed is refused or reported, never a
        /// panic (tests build with overflow checks, so a wrapping sum panics here).
        #[test]
        fn mutated_trees_are_refused_or_reported(
            edits in proptest::collection::vec((0usize..8, 0usize..15, number()), 1..4),
            tsc_hz in prop_oneof![Just(2.5e9), Just(0.0), Just(f64::NAN), Just(1.0)],
            cost in prop_oneof![Just(None), number().prop_map(Some)],
        ) {
            let mut t = tree();
            for (node, field, value) in edits {
                mutate(&mut t, node, field, value);
            }
            let mut p = profile(t);
            if let Recording::Ptrace(run) = &mut p.recording {
                run.tsc_hz = tsc_hz;
                run.trap_cost = cost.map(|cycles_per_event| TrapCost { cycles_per_event, events: 1 });
            }
            let mut bytes = format!("{} {}\n", crate::PROFILE_MAGIC, crate::PROFILE_VERSION).into_bytes();
            bytes.extend(serde_json::to_vec(&p).unwrap());
            if let Ok(read) = Profile::parse(Path::new("p"), &bytes) {
                let report = build_report(&read, HotRule::Rank(8)).unwrap();
                prop_assert!(report.tree.inclusive_s.is_finite());
                prop_assert!(report.tree.inclusive_share <= 1.0);
                let mut nodes = vec![&report.tree];
                while let Some(node) = nodes.pop() {
                    if node.entries == Some(0) {
                        prop_assert!(node.iterations.unwrap_or(0) == 0 && node.trips.is_none());
                    }
                    nodes.extend(&node.children);
                }
            }
        }
    }
}
