//! Properties of the simulator on random access streams.

use loopscope_cache::{Hierarchy, LevelConfig, MissCurve, parse_cache_spec};
use proptest::prelude::*;

/// Random accesses over a small address range (so lines are reused): (addr, write, reference).
fn stream() -> impl Strategy<Value = Vec<(u64, bool, u32)>> {
    prop::collection::vec((0u64..4096, any::<bool>(), 0u32..3), 1..400)
}

fn fully_associative(lines: u64) -> Vec<LevelConfig> {
    parse_cache_spec(&format!("L1={}:{lines}:16", lines * 16)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn three_c_parts_sum_to_the_misses(
        accesses in stream(),
        l1_ways in prop::sample::select(vec![1u64, 2, 4]),
        l2_ways in prop::sample::select(vec![1u64, 2, 8]),
        policy in prop::sample::select(vec!["lru", "fifo", "plru", "random"]),
        relation in prop::sample::select(vec!["nincl", "incl", "excl"]),
        write in prop::sample::select(vec!["wb:wa", "wt:nwa", "wt:wa", "wb:nwa"]),
    ) {
        let spec = format!("L1={}:{l1_ways}:16:{policy}:{write},L2={}:{l2_ways}:32:{relation}", 64 * l1_ways, 256 * l2_ways);
        let levels = parse_cache_spec(&spec).unwrap();
        let mut sim = Hierarchy::new(&levels, 3, true, 9);
        for &(addr, write, r) in &accesses {
            sim.access(addr, 8, write, r);
        }
        for (k, s) in sim.stats().iter().enumerate() {
            prop_assert_eq!(s.compulsory + s.capacity + s.conflict, s.misses);
            prop_assert_eq!(s.hits + s.misses, s.accesses);
            let mut by_ref = 0;
            for r in 0..3 {
                let rs = sim.ref_stats(r, k);
                prop_assert_eq!(rs.compulsory + rs.capacity + rs.conflict, rs.misses);
                by_ref += rs.misses;
            }
            prop_assert_eq!(by_ref, s.misses);
        }
    }

    #[test]
    fn fully_associative_lru_equals_stack_distance_for_every_size(lines in prop::collection::vec(0u64..64, 1..300)) {
        let mut curve = MissCurve::new();
        for &l in &lines {
            curve.access(l);
        }
        for size in [1u64, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 64] {
            let mut sim = Hierarchy::new(&fully_associative(size), 1, false, 0);
            for &l in &lines {
                sim.access(l * 16, 8, false, 0);
            }
            prop_assert_eq!(sim.stats()[0].misses, curve.misses(size), "size {} lines", size);
        }
    }

    #[test]
    fn more_ways_never_add_misses_in_fully_associative_lru(
        lines in prop::collection::vec(0u64..48, 1..300),
        size in 1u64..40,
    ) {
        let misses = |n: u64| {
            let mut sim = Hierarchy::new(&fully_associative(n), 1, false, 0);
            for &l in &lines {
                sim.access(l * 16, 8, false, 0);
            }
            sim.stats()[0].misses
        };
        prop_assert!(misses(size + 1) <= misses(size));
    }
}
