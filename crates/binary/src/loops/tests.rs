use super::*;
use proptest::prelude::*;

fn graph(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<u32>> {
    let mut succs = vec![Vec::new(); n];
    for &(a, b) in edges {
        succs[a as usize].push(b);
    }
    succs
}

#[test]
fn single_loop_with_edges() {
    let g = graph(4, &[(0, 1), (1, 2), (2, 1), (1, 3)]);
    let loops = havlak_forest(&g, 0);
    assert_eq!(loops.len(), 1);
    let l = &loops[0];
    assert_eq!((l.header, l.kind, l.parent), (1, LoopKind::Reducible, None));
    assert_eq!(l.blocks, vec![1, 2]);
    assert_eq!(l.back_edges, vec![(2, 1)]);
    assert_eq!(l.entry_edges, vec![(0, 1)]);
    assert_eq!(l.exit_edges, vec![(1, 3)]);
}

#[test]
fn nested_loops() {
    let g = graph(6, &[(0, 1), (1, 2), (2, 3), (3, 2), (3, 4), (4, 1), (1, 5)]);
    let loops = havlak_forest(&g, 0);
    assert_eq!(loops.len(), 2);
    assert_eq!((loops[0].header, loops[0].parent), (1, None));
    assert_eq!(loops[0].blocks, vec![1, 2, 3, 4]);
    assert_eq!((loops[1].header, loops[1].parent), (2, Some(0)));
    assert_eq!(loops[1].blocks, vec![2, 3]);
    assert_eq!(loops[1].exit_edges, vec![(3, 4)]);
}

#[test]
fn irreducible_loop_has_two_entries() {
    let g = graph(4, &[(0, 1), (0, 2), (1, 2), (2, 1), (1, 3)]);
    let loops = havlak_forest(&g, 0);
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0].kind, LoopKind::Irreducible);
    assert_eq!(loops[0].blocks, vec![1, 2]);
    assert_eq!(loops[0].entry_edges, vec![(0, 1), (0, 2)]);
}

#[test]
fn self_loop_and_disjoint_loops() {
    let g = graph(5, &[(0, 1), (1, 1), (1, 2), (2, 3), (3, 2), (3, 4)]);
    let loops = havlak_forest(&g, 0);
    assert_eq!(loops.len(), 2);
    assert_eq!((loops[0].header, loops[0].kind), (1, LoopKind::SelfLoop));
    assert_eq!(loops[0].blocks, vec![1]);
    assert_eq!(
        (loops[1].header, loops[1].kind, loops[1].parent),
        (2, LoopKind::Reducible, None)
    );
}

#[test]
fn unreachable_blocks_stay_outside() {
    let g = graph(4, &[(0, 1), (1, 0), (2, 3), (3, 2), (3, 1)]);
    let loops = havlak_forest(&g, 0);
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0].blocks, vec![0, 1]);
    assert!(loops[0].entry_edges.is_empty());
}

#[test]
fn dominators_of_a_diamond() {
    let g = graph(4, &[(0, 1), (0, 2), (1, 3), (2, 3)]);
    let idom = dominators(&g, 0);
    assert_eq!(idom, vec![Some(0), Some(0), Some(0), Some(0)]);
    assert!(dominates(&idom, 0, 3));
    assert!(!dominates(&idom, 1, 3));
}

fn arb_graph() -> impl Strategy<Value = Vec<Vec<u32>>> {
    (1usize..24).prop_flat_map(|n| {
        proptest::collection::vec(proptest::collection::vec(0..n as u32, 0..3), n)
    })
}

proptest! {
    /// Loops are nested or disjoint; natural loops match dominator-based back edges; reducible
    /// loops are entered only at their header, which dominates their blocks.
    #[test]
    fn forest_properties(g in arb_graph()) {
        let loops = havlak_forest(&g, 0);
        let idom = dominators(&g, 0);
        for (i, l) in loops.iter().enumerate() {
            prop_assert!(l.blocks.contains(&l.header));
            if let Some(p) = l.parent {
                prop_assert!(p < i);
                prop_assert!(l.blocks.iter().all(|b| loops[p].blocks.contains(b)));
            }
            for other in &loops[i + 1..] {
                let shared = l.blocks.iter().filter(|b| other.blocks.contains(b)).count();
                let nested = shared == l.blocks.len().min(other.blocks.len());
                prop_assert!(shared == 0 || nested);
            }
            if l.kind != LoopKind::Irreducible {
                prop_assert!(l.entry_edges.iter().all(|&(_, to)| to == l.header));
                prop_assert!(l.blocks.iter().all(|&b| dominates(&idom, l.header, b)));
            }
        }
        for (v, list) in g.iter().enumerate() {
            for &h in list {
                if idom[v].is_some() && dominates(&idom, h, v as u32) {
                    prop_assert!(loops.iter().any(|l| l.header == h));
                }
            }
        }
    }
}

/// Havlak with a list per node and entry edges found by scanning every node: the plain form
/// the packed implementation must agree with.
fn reference_forest(succs: &[Vec<u32>], entry: u32) -> Vec<ForestLoop> {
    let graph = Graph::from_lists(succs).unwrap();
    let dfs = Dfs::new(&graph, entry);
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
    for w in (0..count).rev() {
        let mut p: Vec<usize> = Vec::new();
        for &v in &back_preds[w] {
            if v == w {
                kind[w] = NodeType::SelfLoop;
            } else {
                let x = find(&mut uf, v);
                if !p.contains(&x) {
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
                } else if !p.contains(&y) && y != w {
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
    let mut loop_of = vec![usize::MAX; count];
    let mut loops: Vec<ForestLoop> = Vec::new();
    for w in 0..count {
        let loop_kind = match kind[w] {
            NodeType::NonHeader => continue,
            NodeType::Reducible => LoopKind::Reducible,
            NodeType::Irreducible => LoopKind::Irreducible,
            NodeType::SelfLoop => LoopKind::SelfLoop,
        };
        loop_of[w] = loops.len();
        loops.push(ForestLoop {
            header: dfs.node[w],
            kind: loop_kind,
            parent: header[w].map(|h| loop_of[h]),
            blocks: Vec::new(),
            back_edges: back_preds[w]
                .iter()
                .map(|&v| (dfs.node[v], dfs.node[w]))
                .collect(),
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
            if dfs.num[u] == UNVISITED || inside(u as u32) {
                continue;
            }
            for &s in list {
                if inside(s) {
                    l.entry_edges.push((u as u32, s));
                }
            }
        }
    }
    loops
}

proptest! {
    /// The packed implementation finds the same forest, in the same order, as the plain one.
    #[test]
    fn packed_havlak_equals_plain(g in arb_graph(), entry in 0u32..24) {
        let entry = entry % g.len() as u32;
        prop_assert_eq!(havlak_forest(&g, entry), reference_forest(&g, entry));
    }
}
