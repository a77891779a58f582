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
    fn new(succs: &[Vec<u32>], entry: u32) -> Dfs {
        let n = succs.len();
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
            if let Some(&w) = succs[v as usize].get(i) {
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
    if (entry as usize) >= succs.len() || succs.iter().flatten().any(|&s| s as usize >= succs.len())
    {
        return Vec::new();
    }
    havlak(succs, entry)
}

pub(crate) fn havlak(succs: &[Vec<u32>], entry: u32) -> Vec<RawLoop> {
    let dfs = Dfs::new(succs, entry);
    let count = dfs.node.len();
    let mut back_preds: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut non_back_preds: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (v, &node) in dfs.node.iter().enumerate() {
        for &succ in &succs[node as usize] {
            let w = dfs.num[succ as usize];
            if dfs.is_ancestor(w, v) {
                back_preds[w].push(v);
            } else {
                non_back_preds[w].push(v);
            }
        }
    }
    for list in back_preds.iter_mut().chain(non_back_preds.iter_mut()) {
        list.sort_unstable();
        list.dedup();
    }
    let mut uf: Vec<usize> = (0..count).collect();
    let mut header: Vec<Option<usize>> = vec![None; count];
    let mut kind = vec![NodeType::NonHeader; count];
    let mut in_p = vec![usize::MAX; count]; // in_p[x] == w marks x ∈ P while visiting w
    for w in (0..count).rev() {
        let mut p: Vec<usize> = Vec::new();
        for &v in &back_preds[w] {
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
        let mut worklist = p.clone();
        while let Some(x) = worklist.pop() {
            for i in 0..non_back_preds[x].len() {
                let y = find(&mut uf, non_back_preds[x][i]);
                if !dfs.is_ancestor(w, y) {
                    kind[w] = NodeType::Irreducible;
                    if !non_back_preds[w].contains(&y) {
                        non_back_preds[w].push(y);
                    }
                } else if in_p[y] != w && y != w {
                    in_p[y] = w;
                    p.push(y);
                    worklist.push(y);
                }
            }
        }
        for x in p {
            header[x] = Some(w);
            uf[x] = w;
        }
    }
    collect_loops(succs, &dfs, &header, &kind, &back_preds)
}

fn collect_loops(
    succs: &[Vec<u32>],
    dfs: &Dfs,
    header: &[Option<usize>],
    kind: &[NodeType],
    back_preds: &[Vec<usize>],
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
        let back_edges = back_preds[w]
            .iter()
            .map(|&v| (dfs.node[v], dfs.node[w]))
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
    for l in &mut loops {
        l.blocks.sort_unstable();
        let inside = |b: u32| l.blocks.binary_search(&b).is_ok();
        for &b in &l.blocks {
            for &s in &succs[b as usize] {
                if !inside(s) {
                    l.exit_edges.push((b, s));
                }
            }
        }
        for (u, list) in succs.iter().enumerate() {
            let u = u as u32;
            if dfs.num[u as usize] == UNVISITED || inside(u) {
                continue;
            }
            for &s in list {
                if inside(s) {
                    l.entry_edges.push((u, s));
                }
            }
        }
    }
    loops
}

/// Immediate dominators (Cooper, Harvey and Kennedy's iterative algorithm): `idom[entry] ==
/// Some(entry)`, `None` for unreachable nodes.
pub fn dominators(succs: &[Vec<u32>], entry: u32) -> Vec<Option<u32>> {
    let dfs = Dfs::new(succs, entry);
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
