//! The loop-call-context tree (spec 004 §2.2, §3.7): a call-context tree whose nodes are
//! functions and loops, the same loop reached from another context being another node.
//!
//! Every back-end feeds this one structure, so one run gives one tree whatever watched it.
//! Recursion is folded (spec §3.7, as Exana does): entering a function that already has a node
//! on the path from the root re-enters that node, so a recursive call chain of any depth is
//! one node whose counts add up every level. Loops are not folded: a loop is entered only from
//! its own function's node.

use serde::{Deserialize, Serialize};

/// Index of a node in its [`Lcct`].
pub type NodeId = u32;

/// What a node stands for. Addresses are static (link-time) addresses of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NodeKey {
    /// The root of a thread's tree.
    Root,
    /// A function of a mapped object, by its entry address.
    Function {
        /// Index of the object in the profile.
        object: u32,
        /// Entry address.
        address: u64,
    },
    /// A call through a PLT stub, timed with whatever it reaches (spec §8.6 `--libs off`).
    Plt {
        /// Index of the object holding the stub.
        object: u32,
        /// Address of the stub.
        address: u64,
    },
    /// Code of an object outside every known function.
    Unknown {
        /// Index of the object, or `u32::MAX` for addresses in no mapped object.
        object: u32,
    },
    /// A loop, by its static loop id in its object.
    Loop {
        /// Index of the object.
        object: u32,
        /// Static loop id.
        id: u32,
    },
}

impl NodeKey {
    fn is_procedure(self) -> bool {
        matches!(self, NodeKey::Function { .. } | NodeKey::Plt { .. })
    }
}

/// One node with what was measured in it alone (its self part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// What the node stands for.
    pub key: NodeKey,
    /// Parent node (`None` for the root).
    pub parent: Option<NodeId>,
    /// Children in the order they were first reached.
    pub children: Vec<NodeId>,
    /// Time attributed to this node alone, in TSC cycles (exact back-ends) or nanoseconds of
    /// sampled time (sampling: samples × period).
    pub self_time: u64,
    /// Samples whose innermost frame was here.
    pub self_samples: u64,
    /// Analysis events that closed a section charged here (used to subtract the trap cost).
    pub events_charged: u64,
    /// Times the node was entered (calls, loop entries).
    pub entries: u64,
    /// Header executions (loops only).
    pub header_executions: u64,
    /// Back-edge traversals (loops only): header executions while the loop was active.
    pub back_edges: u64,
    /// Exits (loops only).
    pub exits: u64,
    /// Fewest header executions in one entry (loops only; `None` before the first exit).
    pub trips_min: Option<u64>,
    /// Most header executions in one entry.
    pub trips_max: Option<u64>,
}

impl Node {
    pub(crate) fn new(key: NodeKey, parent: Option<NodeId>) -> Node {
        Node {
            key,
            parent,
            children: Vec::new(),
            self_time: 0,
            self_samples: 0,
            events_charged: 0,
            entries: 0,
            header_executions: 0,
            back_edges: 0,
            exits: 0,
            trips_min: None,
            trips_max: None,
        }
    }

    /// Adds another node's counts to this one's.
    fn add(&mut self, other: &Node) {
        self.self_time += other.self_time;
        self.self_samples += other.self_samples;
        self.events_charged += other.events_charged;
        self.entries += other.entries;
        self.header_executions += other.header_executions;
        self.back_edges += other.back_edges;
        self.exits += other.exits;
        self.trips_min = min_option(self.trips_min, other.trips_min);
        self.trips_max = self.trips_max.max(other.trips_max);
    }

    /// Mean header executions per entry.
    pub fn trips_mean(&self) -> Option<f64> {
        (self.entries > 0).then(|| self.header_executions as f64 / self.entries as f64)
    }
}

/// A loop-call-context tree: node 0 is the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lcct {
    /// The nodes; a child's index is always larger than its parent's.
    pub nodes: Vec<Node>,
}

impl Default for Lcct {
    fn default() -> Self {
        Lcct::new()
    }
}

impl Lcct {
    /// A tree with only its root.
    pub fn new() -> Lcct {
        Lcct {
            nodes: vec![Node::new(NodeKey::Root, None)],
        }
    }

    /// The root's id.
    pub const ROOT: NodeId = 0;

    /// The child of `parent` with this key, made if it does not exist.
    pub fn child(&mut self, parent: NodeId, key: NodeKey) -> NodeId {
        if let Some(&c) = self.nodes[parent as usize]
            .children
            .iter()
            .find(|&&c| self.nodes[c as usize].key == key)
        {
            return c;
        }
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node::new(key, Some(parent)));
        self.nodes[parent as usize].children.push(id);
        id
    }

    /// Where a call from `from` to the procedure `key` lands: an ancestor (or `from` itself) for
    /// the same procedure when there is one (folded recursion), else a child of `from`.
    pub fn procedure_node(&mut self, from: NodeId, key: NodeKey) -> NodeId {
        debug_assert!(key.is_procedure());
        let mut at = Some(from);
        while let Some(n) = at {
            if self.nodes[n as usize].key == key {
                return n;
            }
            at = self.nodes[n as usize].parent;
        }
        self.child(from, key)
    }

    /// The nearest procedure node at or above `node` (the root if none).
    pub fn enclosing_procedure(&self, node: NodeId) -> NodeId {
        let mut at = node;
        while !self.nodes[at as usize].key.is_procedure() {
            match self.nodes[at as usize].parent {
                Some(p) => at = p,
                None => return at,
            }
        }
        at
    }

    /// Counts one entry into `node` (a call or a loop entry).
    pub fn enter(&mut self, node: NodeId) {
        self.nodes[node as usize].entries += 1;
    }

    /// Counts one execution of a loop's header; `back_edge` when the loop was already active.
    pub fn header(&mut self, node: NodeId, back_edge: bool) {
        let n = &mut self.nodes[node as usize];
        n.header_executions += 1;
        if back_edge {
            n.back_edges += 1;
        }
    }

    /// Closes one entry of a loop that made `trips` header executions (counted by the caller
    /// per activation: with recursion folded, one node can have several entries open at once).
    pub fn exit(&mut self, node: NodeId, trips: u64) {
        let n = &mut self.nodes[node as usize];
        n.exits += 1;
        n.trips_min = Some(n.trips_min.map_or(trips, |m| m.min(trips)));
        n.trips_max = Some(n.trips_max.map_or(trips, |m| m.max(trips)));
    }

    /// Inclusive values (self plus every descendant) of a per-node quantity.
    pub fn inclusive(&self, value: impl Fn(&Node) -> u64) -> Vec<u64> {
        self.inclusive_of(self.nodes.iter().map(value).collect())
    }

    /// Inclusive values of per-node self values given by node id.
    pub fn inclusive_of(&self, mut total: Vec<u64>) -> Vec<u64> {
        // Children always come after their parent, so one backward pass sums every subtree.
        for i in (1..self.nodes.len()).rev() {
            if let Some(p) = self.nodes[i].parent {
                total[p as usize] += total[i];
            }
        }
        total
    }

    /// Adds another tree of the same program into this one, node by node along equal key paths
    /// (`--by context` over threads).
    pub fn merge(&mut self, other: &Lcct) {
        let mut map = vec![Lcct::ROOT; other.nodes.len()];
        for (i, node) in other.nodes.iter().enumerate().skip(1) {
            let parent = map[node.parent.unwrap_or(0) as usize];
            map[i] = self.child(parent, node.key);
        }
        for (i, node) in other.nodes.iter().enumerate() {
            self.nodes[map[i] as usize].add(node);
        }
    }

    /// The same tree with every outermost node that `is_new_root` picks moved under the root,
    /// its ancestors keeping only their own counts; returns the tree and where each old node
    /// went.
    pub fn rerooted(&self, is_new_root: impl Fn(NodeKey) -> bool) -> (Lcct, Vec<NodeId>) {
        let mut out = Lcct::new();
        let mut map = vec![Lcct::ROOT; self.nodes.len()];
        let mut below_new_root = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            let parent = node.parent.unwrap_or(Lcct::ROOT) as usize;
            let lift = !below_new_root[parent] && is_new_root(node.key);
            below_new_root[i] = below_new_root[parent] || lift;
            map[i] = out.child(if lift { Lcct::ROOT } else { map[parent] }, node.key);
        }
        for (i, node) in self.nodes.iter().enumerate() {
            out.nodes[map[i] as usize].add(node);
        }
        (out, map)
    }
}

fn min_option(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The paper's hot-region threshold (spec 004 §3.5): a node is hot when its inclusive share is at
/// least the threshold, taken from the `rank` nodes with the largest self shares (8 in the paper).
/// The paper names the inclusive share of the `rank`-th of them; that node can be an outer node
/// (`main`, an outer loop) whose share is above an inner hot loop's, which would then be hidden,
/// so the threshold is the smallest inclusive share among the `rank` (the paper's intent: its
/// hottest regions are shown). Only nodes with some self value are ranked; with none, everything
/// is hot.
pub fn hot_threshold(self_values: &[u64], inclusive_values: &[u64], rank: usize) -> f64 {
    let total = inclusive_values.first().copied().unwrap_or(0);
    if total == 0 || rank == 0 {
        return 0.0;
    }
    let mut order: Vec<usize> = (1..self_values.len())
        .filter(|&i| self_values[i] > 0)
        .collect();
    // Ties broken by node id so the threshold does not depend on sort stability.
    order.sort_by_key(|&i| (std::cmp::Reverse(self_values[i]), i));
    order
        .iter()
        .take(rank)
        .map(|&i| inclusive_values[i])
        .min()
        .map_or(0.0, |v| v as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(address: u64) -> NodeKey {
        NodeKey::Function { object: 0, address }
    }

    #[test]
    fn recursion_folds_into_the_first_node() {
        let mut t = Lcct::new();
        let main = t.procedure_node(Lcct::ROOT, function(1));
        let fib = t.procedure_node(main, function(2));
        let again = t.procedure_node(fib, function(2));
        assert_eq!(fib, again);
        let l = t.child(fib, NodeKey::Loop { object: 0, id: 7 });
        assert_eq!(t.procedure_node(l, function(2)), fib);
        assert_eq!(t.enclosing_procedure(l), fib);
        assert_eq!(t.nodes.len(), 4);
    }

    #[test]
    fn same_function_from_two_contexts_is_two_nodes() {
        let mut t = Lcct::new();
        let main = t.procedure_node(Lcct::ROOT, function(1));
        let l1 = t.child(main, NodeKey::Loop { object: 0, id: 0 });
        let l2 = t.child(main, NodeKey::Loop { object: 0, id: 1 });
        assert_ne!(
            t.procedure_node(l1, function(3)),
            t.procedure_node(l2, function(3))
        );
    }

    #[test]
    fn trips_and_inclusive_time() {
        let mut t = Lcct::new();
        let main = t.procedure_node(Lcct::ROOT, function(1));
        let l = t.child(main, NodeKey::Loop { object: 0, id: 0 });
        for trips in [3u64, 5] {
            t.enter(l);
            for i in 0..trips {
                t.header(l, i > 0);
            }
            t.exit(l, trips);
        }
        let n = &t.nodes[l as usize];
        assert_eq!((n.entries, n.header_executions, n.back_edges), (2, 8, 6));
        assert_eq!(
            (n.trips_min, n.trips_max, n.trips_mean()),
            (Some(3), Some(5), Some(4.0))
        );
        t.nodes[l as usize].self_time = 30;
        t.nodes[main as usize].self_time = 10;
        assert_eq!(t.inclusive(|n| n.self_time), vec![40, 40, 30]);
    }

    #[test]
    fn merge_adds_along_key_paths() {
        let mut a = Lcct::new();
        let m = a.procedure_node(Lcct::ROOT, function(1));
        a.nodes[m as usize].self_time = 5;
        let mut b = a.clone();
        let l = b.child(m, NodeKey::Loop { object: 0, id: 2 });
        b.nodes[l as usize].self_time = 7;
        a.merge(&b);
        assert_eq!(a.nodes.len(), 3);
        assert_eq!(a.inclusive(|n| n.self_time)[0], 17);
    }

    #[test]
    fn rerooting_lifts_the_outermost_match_and_keeps_every_count() {
        let mut t = Lcct::new();
        let start = t.procedure_node(Lcct::ROOT, function(1));
        let main = t.procedure_node(start, function(2));
        let l = t.child(main, NodeKey::Loop { object: 0, id: 0 });
        t.nodes[start as usize].self_samples = 1;
        t.nodes[l as usize].self_samples = 5;
        let (r, map) = t.rerooted(|k| k == function(2));
        assert_eq!(
            r.nodes[map[main as usize] as usize].parent,
            Some(Lcct::ROOT)
        );
        assert_eq!(
            r.nodes[map[start as usize] as usize].children,
            Vec::<NodeId>::new()
        );
        assert_eq!(r.inclusive(|n| n.self_samples)[0], 6);
        assert_eq!(r.nodes[map[l as usize] as usize].self_samples, 5);
    }

    #[test]
    fn hot_threshold_is_the_eighth_largest_self_nodes_inclusive_share() {
        // A chain root → 1 → 2 → … → 9, node k having self time k.
        let mut t = Lcct::new();
        let mut at = Lcct::ROOT;
        for k in 1..=9u64 {
            at = t.child(at, function(k));
            t.nodes[at as usize].self_time = k;
        }
        let selfs: Vec<u64> = t.nodes.iter().map(|n| n.self_time).collect();
        let incl = t.inclusive(|n| n.self_time);
        // The 8 largest selfs are nodes 2..=9; the smallest inclusive among them is node 9's 9.
        assert_eq!(hot_threshold(&selfs, &incl, 8), 9.0 / 45.0);
        // Fewer ranked nodes than the rank: all of them count (node 9 still the smallest).
        assert_eq!(hot_threshold(&selfs, &incl, 20), 9.0 / 45.0);
        assert_eq!(hot_threshold(&[0, 0], &[0, 0], 8), 0.0);
    }
}
