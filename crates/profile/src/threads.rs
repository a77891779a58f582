//! Where each recorded thread's time went, node by node of the report's tree: what a timeline
//! viewer (the Firefox Profiler export) needs besides the merged tree.
//!
//! A sampled profile keeps every sample's time and the node it landed in. An exact profile has
//! no time order inside a thread, only each node's self time; it is given as such, and the
//! exporter decides how to lay it out.

use crate::exact::ExactRun;
use crate::lcct::{Lcct, NodeId};
use crate::sample::SampledRun;

/// One recorded thread and where its time went.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadActivity {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Samples in time order, or self times.
    pub time: ThreadTime,
}

/// A thread's time, as its back-end measured it.
#[derive(Debug, Clone, PartialEq)]
pub enum ThreadTime {
    /// Sampling: every sample of the thread in time order.
    Samples(Vec<ThreadSample>),
    /// Exact: the thread's self time per report node with any, in node order (parents before
    /// children), trap cost subtracted. Nodes are [`crate::TreeNode::node_id`]s.
    SelfSeconds(Vec<(NodeId, f64)>),
}

/// One sample of one thread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadSample {
    /// Nanoseconds since the recording started.
    pub time_ns: u64,
    /// The report node whose self part the sample counts in.
    pub node_id: NodeId,
    /// CPU nanoseconds the sample stands for, when the sampling event counts time
    /// (`cpu-clock`); `None` for event counts (cycles, instructions).
    pub cpu_ns: Option<u64>,
}

/// The threads of a sampled run, given the node each sample landed in (same order as
/// `run.samples`). Threads appear in the order of their first sample.
pub(crate) fn sampled_threads(run: &SampledRun, leaves: &[NodeId]) -> Vec<ThreadActivity> {
    let counts_time = run.event.unit() == "ns";
    let mut threads: Vec<ThreadActivity> = Vec::new();
    for (s, &node_id) in run.samples.iter().zip(leaves) {
        let sample = ThreadSample {
            time_ns: s.time_ns,
            node_id,
            cpu_ns: counts_time.then_some(if s.period > 0 { s.period } else { run.period }),
        };
        let at = threads
            .iter()
            .position(|t| (t.pid, t.tid) == (s.pid, s.tid));
        match at.map(|i| &mut threads[i].time) {
            Some(ThreadTime::Samples(samples)) => samples.push(sample),
            _ => threads.push(ThreadActivity {
                pid: s.pid,
                tid: s.tid,
                time: ThreadTime::Samples(vec![sample]),
            }),
        }
    }
    threads
}

/// The threads of an exact run, their nodes mapped onto the merged tree the report shows
/// (merged in the same order, so the ids agree), the trap cost of each charged event
/// subtracted as the report does.
pub(crate) fn exact_threads(run: &ExactRun, merged: &Lcct) -> Vec<ThreadActivity> {
    let cost = run.trap_cost.map_or(0, |c| c.cycles_per_event);
    let seconds_per_cycle = 1.0 / run.tsc_hz;
    run.threads
        .iter()
        .map(|t| {
            let map = node_map(merged, &t.tree);
            let self_seconds = t
                .tree
                .nodes
                .iter()
                .enumerate()
                // The root's time lies outside `main`, which the report does not show.
                .skip(1)
                .filter_map(|(i, n)| {
                    let cycles = n.self_time.saturating_sub(n.events_charged * cost);
                    let node = map[i]?;
                    (cycles > 0).then_some((node, cycles as f64 * seconds_per_cycle))
                })
                .collect();
            ThreadActivity {
                pid: t.pid,
                tid: t.tid,
                time: ThreadTime::SelfSeconds(self_seconds),
            }
        })
        .collect()
}

/// Each node of `part` as the node of `merged` with the same key path (`None` if absent).
fn node_map(merged: &Lcct, part: &Lcct) -> Vec<Option<NodeId>> {
    let mut map: Vec<Option<NodeId>> = vec![None; part.nodes.len()];
    map[0] = Some(Lcct::ROOT);
    for (i, node) in part.nodes.iter().enumerate().skip(1) {
        let parent = node.parent.and_then(|p| map[p as usize]);
        map[i] = parent.and_then(|p| {
            merged.nodes[p as usize]
                .children
                .iter()
                .copied()
                .find(|&c| merged.nodes[c as usize].key == node.key)
        });
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lcct::NodeKey;

    fn function(address: u64) -> NodeKey {
        NodeKey::Function { object: 0, address }
    }

    #[test]
    fn a_threads_nodes_map_onto_the_merged_tree_by_key_path() {
        let mut a = Lcct::new();
        let main = a.procedure_node(Lcct::ROOT, function(1));
        a.child(main, NodeKey::Loop { object: 0, id: 3 });
        let mut b = Lcct::new();
        let worker = b.procedure_node(Lcct::ROOT, function(9));
        let bl = b.child(worker, NodeKey::Loop { object: 0, id: 4 });
        let mut merged = Lcct::new();
        merged.merge(&a);
        merged.merge(&b);
        let map = node_map(&merged, &b);
        let at = map[bl as usize].expect("mapped");
        assert_eq!(
            merged.nodes[at as usize].key,
            NodeKey::Loop { object: 0, id: 4 }
        );
        let parent = merged.nodes[at as usize].parent.expect("has a parent");
        assert_eq!(merged.nodes[parent as usize].key, function(9));
    }
}
