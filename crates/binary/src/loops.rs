//! Havlak's loop-nesting forest (spec 004 §3.6 steps 2–6) and, for checking it, dominators.

use serde::{Deserialize, Serialize};

/// What kind of loop a header heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopKind {
    /// A natural loop: entered only through its header.
    Reducible,
    /// Entered at more than one block (e.g. a `goto` into its body).
    Irreducible,
    /// A single block branching to itself.
    SelfLoop,
}

impl LoopKind {
    /// The name `--json` and serde spell it with: `reducible`, `irreducible` or `self-loop`.
    pub fn name(self) -> &'static str {
        match self {
            LoopKind::Reducible => "reducible",
            LoopKind::Irreducible => "irreducible",
            LoopKind::SelfLoop => "self-loop",
        }
    }
}

/// A loop of the forest, in node (block) indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForestLoop {
    /// The header node.
    pub header: u32,
    /// Reducible, irreducible or self loop.
    pub kind: LoopKind,
    /// Index of the enclosing loop in the forest.
    pub parent: Option<usize>,
    /// Every node of the region, nested loops included, sorted.
    pub blocks: Vec<u32>,
    /// Edges `v → header` with `v` a DFS descendant of the header.
    pub back_edges: Vec<(u32, u32)>,
    /// Edges from outside the region into it.
    pub entry_edges: Vec<(u32, u32)>,
    /// Edges from the region to outside.
    pub exit_edges: Vec<(u32, u32)>,
}

pub(crate) type RawLoop = ForestLoop;

/// A graph as successor lists packed in one array (one allocation for a function's edges,
/// where a list per node was a good part of the analysis time of a large library).
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    /// Node `v`'s successors are `targets[offsets[v]..offsets[v + 1]]`.
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Graph {
    /// From one successor list per node; `None` when an edge names a node that is not there.
    pub fn from_lists(succs: &[Vec<u32>]) -> Option<Graph> {
        Graph::from_iter(succs.len(), succs.iter().map(|l| l.iter().copied()))
    }

    /// From `nodes` successor lists; `None` when an edge names a node that is not there.
    pub fn from_iter<L: IntoIterator<Item = u32>>(
        nodes: usize,
        lists: impl IntoIterator<Item = L>,
    ) -> Option<Graph> {
        let mut graph = Graph {
            offsets: Vec::with_capacity(nodes + 1),
            targets: Vec::with_capacity(nodes * 2),
        };
        graph.offsets.push(0);
        for list in lists {
            for s in list {
                if s as usize >= nodes {
                    return None;
                }
                graph.targets.push(s);
            }
            graph.offsets.push(u32::try_from(graph.targets.len()).ok()?);
        }
        (graph.offsets.len() == nodes + 1).then_some(graph)
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn succs(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }
}

/// Lists of node numbers packed in one array, with lists that may grow afterwards (Havlak
/// adds predecessors to irreducible headers).
struct Lists {
    offsets: Vec<u32>,
    items: Vec<u32>,
    added: Vec<Vec<u32>>,
}

impl Lists {
    /// From (list, item) pairs; each list comes out sorted and without repeats.
    fn from_pairs(count: usize, pairs: &[(u32, u32)]) -> Lists {
        let mut offsets = vec![0u32; count + 1];
        for &(list, _) in pairs {
            offsets[list as usize + 1] += 1;
        }
        for i in 0..count {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut items = vec![0u32; pairs.len()];
        for &(list, item) in pairs {
            items[fill[list as usize] as usize] = item;
            fill[list as usize] += 1;
        }
        // Sort and dedup each list in place, packing them again.
        let mut write = 0usize;
        let mut start = 0usize;
        for i in 0..count {
            let end = offsets[i + 1] as usize;
            let list = &mut items[start..end];
            list.sort_unstable();
            let mut kept = 0usize;
            for j in 0..list.len() {
                if j == 0 || list[j] != list[j - 1] {
                    list[kept] = list[j];
                    kept += 1;
                }
            }
            items.copy_within(start..start + kept, write);
            offsets[i] = write as u32;
            write += kept;
            start = end;
        }
        offsets[count] = write as u32;
        items.truncate(write);
        Lists {
            offsets,
            items,
            added: vec![Vec::new(); count],
        }
    }

    fn len_of(&self, list: usize) -> usize {
        (self.offsets[list + 1] - self.offsets[list]) as usize + self.added[list].len()
    }

    fn get(&self, list: usize, i: usize) -> u32 {
        let start = self.offsets[list] as usize;
        let packed = self.offsets[list + 1] as usize - start;
        if i < packed {
            self.items[start + i]
        } else {
            self.added[list][i - packed]
        }
    }

    fn iter(&self, list: usize) -> impl Iterator<Item = u32> + '_ {
        let packed = &self.items[self.offsets[list] as usize..self.offsets[list + 1] as usize];
        packed.iter().chain(&self.added[list]).copied()
    }

    fn contains(&self, list: usize, item: u32) -> bool {
        self.iter(list).any(|x| x == item)
    }

    fn push(&mut self, list: usize, item: u32) {
        self.added[list].push(item);
    }
}

const UNVISITED: usize = usize::MAX;

/// Depth-first preorder numbers and last-descendant numbers from `entry`.
struct Dfs {
    /// Preorder number of each node (`UNVISITED` if unreachable).
    num: Vec<usize>,
    /// Node of each preorder number.
    node: Vec<u32>,
    /// Largest preorder number in the subtree of each preorder number.
    last: Vec<usize>,
}

impl Dfs {
    fn new(graph: &Graph, entry: u32) -> Dfs {
        let n = graph.len();
        let mut dfs = Dfs {
            num: vec![UNVISITED; n],
            node: Vec::with_capacity(n),
            last: Vec::with_capacity(n),
        };
        if (entry as usize) >= n {
            return dfs;
        }
        // (node, next successor to look at)
        let mut stack: Vec<(u32, usize)> = vec![(entry, 0)];
        dfs.num[entry as usize] = 0;
        dfs.node.push(entry);
        dfs.last.push(0);
        while let Some(top) = stack.last_mut() {
            let (v, i) = *top;
            if let Some(&w) = graph.succs(v).get(i) {
                top.1 += 1;
                if dfs.num[w as usize] == UNVISITED {
                    dfs.num[w as usize] = dfs.node.len();
                    dfs.node.push(w);
                    dfs.last.push(0);
                    stack.push((w, 0));
                }
            } else {
                stack.pop();
                let p = dfs.num[v as usize];
                dfs.last[p] = dfs.node.len() - 1;
            }
        }
        dfs
    }

    /// `w` is an ancestor of `v` (both preorder numbers) in the spanning tree.
    fn is_ancestor(&self, w: usize, v: usize) -> bool {
        w <= v && v <= self.last[w]
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    let mut root = x;
    while parent[root] != root {
        root = parent[root];
    }
    while parent[x] != root {
        let next = parent[x];
        parent[x] = root;
        x = next;
    }
    root
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NodeType {
    NonHeader,
    Reducible,
    Irreducible,
    SelfLoop,
}

/// The loop forest of a graph given as successor lists, from `entry`. Loops are listed in
/// preorder of their headers, so a parent always comes before its children.
pub fn havlak_forest(succs: &[Vec<u32>], entry: u32) -> Vec<ForestLoop> {
    match Graph::from_lists(succs) {
        Some(graph) if (entry as usize) < graph.len() => havlak(&graph, entry),
        _ => Vec::new(),
    }
}

pub(crate) fn havlak(graph: &Graph, entry: u32) -> Vec<RawLoop> {
    let dfs = Dfs::new(graph, entry);
    let count = dfs.node.len();
    // (w, v) for each edge v → w, in preorder numbers.
    let mut back: Vec<(u32, u32)> = Vec::new();
    let mut non_back: Vec<(u32, u32)> = Vec::new();
    for (v, &node) in dfs.node.iter().enumerate() {
        for &succ in graph.succs(node) {
            let w = dfs.num[succ as usize];
            let pair = (w as u32, v as u32);
            if dfs.is_ancestor(w, v) {
                back.push(pair);
            } else {
                non_back.push(pair);
            }
        }
    }
    let back_preds = Lists::from_pairs(count, &back);
    let mut non_back_preds = Lists::from_pairs(count, &non_back);
    let mut uf: Vec<usize> = (0..count).collect();
    let mut header: Vec<Option<usize>> = vec![None; count];
    let mut kind = vec![NodeType::NonHeader; count];
    let mut in_p = vec![usize::MAX; count]; // in_p[x] == w marks x ∈ P while visiting w
    let mut p: Vec<usize> = Vec::new();
    let mut worklist: Vec<usize> = Vec::new();
    for w in (0..count).rev() {
        p.clear();
        for v in back_preds.iter(w) {
            let v = v as usize;
            if v == w {
                kind[w] = NodeType::SelfLoop;
            } else {
                let x = find(&mut uf, v);
                if in_p[x] != w {
                    in_p[x] = w;
                    p.push(x);
                }
            }
        }
        if !p.is_empty() {
            kind[w] = NodeType::Reducible;
        }
        worklist.clear();
        worklist.extend_from_slice(&p);
        while let Some(x) = worklist.pop() {
            for i in 0..non_back_preds.len_of(x) {
                let y = find(&mut uf, non_back_preds.get(x, i) as usize);
                if !dfs.is_ancestor(w, y) {
                    kind[w] = NodeType::Irreducible;
                    if !non_back_preds.contains(w, y as u32) {
                        non_back_preds.push(w, y as u32);
                    }
                } else if in_p[y] != w && y != w {
                    in_p[y] = w;
                    p.push(y);
                    worklist.push(y);
                }
            }
        }
        for &x in &p {
            header[x] = Some(w);
            uf[x] = w;
        }
    }
    collect_loops(graph, &dfs, &header, &kind, &back_preds)
}

fn collect_loops(
    graph: &Graph,
    dfs: &Dfs,
    header: &[Option<usize>],
    kind: &[NodeType],
    back_preds: &Lists,
) -> Vec<RawLoop> {
    let count = dfs.node.len();
    let mut loop_of = vec![usize::MAX; count];
    let mut loops = Vec::new();
    for w in 0..count {
        let loop_kind = match kind[w] {
            NodeType::NonHeader => continue,
            NodeType::Reducible => LoopKind::Reducible,
            NodeType::Irreducible => LoopKind::Irreducible,
            NodeType::SelfLoop => LoopKind::SelfLoop,
        };
        loop_of[w] = loops.len();
        let parent = header[w].map(|h| loop_of[h]);
        let back_edges = back_preds
            .iter(w)
            .map(|v| (dfs.node[v as usize], dfs.node[w]))
            .collect();
        loops.push(RawLoop {
            header: dfs.node[w],
            kind: loop_kind,
            parent,
            blocks: Vec::new(),
            back_edges,
            entry_edges: Vec::new(),
            exit_edges: Vec::new(),
        });
    }
    if loops.is_empty() {
        return loops;
    }
    for x in 0..count {
        let mut h = if kind[x] != NodeType::NonHeader {
            Some(x)
        } else {
            header[x]
        };
        while let Some(w) = h {
            loops[loop_of[w]].blocks.push(dfs.node[x]);
            h = header[w];
        }
    }
    let preds = reachable_preds(graph, dfs);
    // mark[b] == i + 1 while loop i's edges are collected.
    let mut mark = vec![0usize; graph.len()];
    let mut sources: Vec<u32> = Vec::new();
    for (i, l) in loops.iter_mut().enumerate() {
        l.blocks.sort_unstable();
        for &b in &l.blocks {
            mark[b as usize] = i + 1;
        }
        let inside = |b: u32| mark[b as usize] == i + 1;
        for &b in &l.blocks {
            for &s in graph.succs(b) {
                if !inside(s) {
                    l.exit_edges.push((b, s));
                }
            }
        }
        sources.clear();
        for &b in &l.blocks {
            sources.extend(preds.succs(b).iter().filter(|&&u| !inside(u)));
        }
        sources.sort_unstable();
        sources.dedup();
        for &u in &sources {
            for &s in graph.succs(u) {
                if inside(s) {
                    l.entry_edges.push((u, s));
                }
            }
        }
    }
    loops
}

/// The predecessors of each node among the nodes the DFS reached.
fn reachable_preds(graph: &Graph, dfs: &Dfs) -> Graph {
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for &u in &dfs.node {
        pairs.extend(graph.succs(u).iter().map(|&s| (s, u)));
    }
    let lists = Lists::from_pairs(graph.len(), &pairs);
    Graph {
        offsets: lists.offsets,
        targets: lists.items,
    }
}

/// Immediate dominators (Cooper, Harvey and Kennedy's iterative algorithm): `idom[entry] ==
/// Some(entry)`, `None` for unreachable nodes.
pub fn dominators(succs: &[Vec<u32>], entry: u32) -> Vec<Option<u32>> {
    let Some(graph) = Graph::from_lists(succs).filter(|g| (entry as usize) < g.len()) else {
        return vec![None; succs.len()];
    };
    let dfs = Dfs::new(&graph, entry);
    let n = succs.len();
    let mut idom: Vec<Option<u32>> = vec![None; n];
    if dfs.node.is_empty() {
        return idom;
    }
    let rpo = reverse_postorder(succs, entry, &dfs);
    let mut order = vec![usize::MAX; n];
    for (i, &v) in rpo.iter().enumerate() {
        order[v as usize] = i;
    }
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &v in &rpo {
        for &s in &succs[v as usize] {
            preds[s as usize].push(v);
        }
    }
    idom[entry as usize] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new = None;
            for &p in &preds[b as usize] {
                if idom[p as usize].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(q) => intersect(&idom, &order, p, q),
                });
            }
            if new.is_some() && idom[b as usize] != new {
                idom[b as usize] = new;
                changed = true;
            }
        }
    }
    idom
}

fn intersect(idom: &[Option<u32>], order: &[usize], mut a: u32, mut b: u32) -> u32 {
    while a != b {
        while order[a as usize] > order[b as usize] {
            a = idom[a as usize].unwrap_or(a);
        }
        while order[b as usize] > order[a as usize] {
            b = idom[b as usize].unwrap_or(b);
        }
    }
    a
}

fn reverse_postorder(succs: &[Vec<u32>], entry: u32, dfs: &Dfs) -> Vec<u32> {
    let mut seen = vec![false; succs.len()];
    let mut post = Vec::with_capacity(dfs.node.len());
    let mut stack: Vec<(u32, usize)> = vec![(entry, 0)];
    seen[entry as usize] = true;
    while let Some(top) = stack.last_mut() {
        let (v, i) = *top;
        if let Some(&w) = succs[v as usize].get(i) {
            top.1 += 1;
            if !seen[w as usize] {
                seen[w as usize] = true;
                stack.push((w, 0));
            }
        } else {
            post.push(v);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// Whether `a` dominates `b` under `idom`.
pub fn dominates(idom: &[Option<u32>], a: u32, b: u32) -> bool {
    let mut x = b;
    loop {
        if x == a {
            return true;
        }
        match idom.get(x as usize).copied().flatten() {
            Some(p) if p != x => x = p,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests;
