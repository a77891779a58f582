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
    let loops = havlak(&g, 0);
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
    let loops = havlak(&g, 0);
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
    let loops = havlak(&g, 0);
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0].kind, LoopKind::Irreducible);
    assert_eq!(loops[0].blocks, vec![1, 2]);
    assert_eq!(loops[0].entry_edges, vec![(0, 1), (0, 2)]);
}

#[test]
fn self_loop_and_disjoint_loops() {
    let g = graph(5, &[(0, 1), (1, 1), (1, 2), (2, 3), (3, 2), (3, 4)]);
    let loops = havlak(&g, 0);
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
    let loops = havlak(&g, 0);
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
        let loops = havlak(&g, 0);
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
