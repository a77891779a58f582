//! The compulsory-only split ([`MissSplit::Compulsory`], what `loopscope misses` simulates with)
//! against the full 3C split ([`MissSplit::ThreeC`], `loopscope simulate --3c`): every counter
//! but capacity and conflict the same, per level and per reference, under every replacement,
//! write and inclusion policy, on random streams and on example kernels.

use std::ops::Range;

use loopscope_cache::{
    Hierarchy, LevelStats, MissSplit, RefStats, parse_cache_spec, simulate_each_level_alone,
};
use loopscope_kernel::{LoadedKernel, Program, Silent};
use proptest::prelude::*;

mod common;
use common::Access;

const REFERENCES: usize = 4;

/// The counters both splits keep: everything but capacity and conflict.
fn without_capacity(s: &LevelStats) -> LevelStats {
    LevelStats {
        capacity: 0,
        conflict: 0,
        ..*s
    }
}

fn ref_without_capacity(s: RefStats) -> RefStats {
    RefStats {
        capacity: 0,
        conflict: 0,
        ..s
    }
}

/// Runs `accesses` (in batches, as a stream hands them over) through `spec` under both splits
/// and compares them.
fn compare(spec: &str, accesses: &[Access], arrays: &[Range<u64>]) -> Result<(), String> {
    let configs = parse_cache_spec(spec).map_err(|e| e.to_string())?;
    let mut full = Hierarchy::with_split(&configs, REFERENCES, MissSplit::ThreeC, 7);
    let mut compulsory = Hierarchy::with_split(&configs, REFERENCES, MissSplit::Compulsory, 7);
    compulsory.expect_addresses(arrays);
    for chunk in accesses.chunks(97) {
        full.access_many(chunk.iter().copied());
        compulsory.access_many(chunk.iter().copied());
    }
    full.flush();
    compulsory.flush();
    for (k, (f, c)) in full.stats().iter().zip(compulsory.stats()).enumerate() {
        if without_capacity(f) != *c {
            return Err(format!("{spec}: level {k}: 3C {f:?}, compulsory {c:?}"));
        }
        if f.compulsory + f.capacity + f.conflict != f.misses {
            return Err(format!("{spec}: level {k}: 3C parts {f:?}"));
        }
        for r in 0..REFERENCES {
            let (f, c) = (full.ref_stats(r, k), compulsory.ref_stats(r, k));
            if ref_without_capacity(f) != c {
                return Err(format!("{spec}: reference {r} at {k}: {f:?} vs {c:?}"));
            }
        }
    }
    if full.memory() != compulsory.memory() {
        return Err(format!("{spec}: memory traffic differs"));
    }
    Ok(())
}

fn stream() -> impl Strategy<Value = Vec<Access>> {
    common::stream(4096, REFERENCES as u32, 600)
}

fn geometry() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    common::geometry(vec![1, 2, 3, 4, 8], vec![1, 2, 4, 5, 8])
}

fn spec(levels: &[(u64, u64, u64)], policy: &str, first: &str, lower: &str) -> String {
    levels
        .iter()
        .enumerate()
        .map(|(i, &(sets, ways, line))| {
            let ways = if policy == "plru" {
                ways.next_power_of_two().min(4)
            } else {
                ways
            };
            let options = if i == 0 { first } else { lower };
            format!(
                "L{}={}:{ways}:{line}:{policy}{options}",
                i + 1,
                sets * ways * line
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn compulsory_and_totals_equal_the_3c_split(
        accesses in stream(),
        levels in geometry(),
        policy in prop::sample::select(vec!["lru", "fifo", "plru", "random"]),
        first in prop::sample::select(vec!["", ":wt", ":nwa", ":wt:nwa"]),
        lower in prop::sample::select(vec!["", ":incl", ":excl", ":wt", ":nwa"]),
        // The arrays' extent as the caller declares it: right, partial, elsewhere or none.
        arrays in prop::sample::select(vec![
            vec![0..4200],
            vec![1000..2000],
            vec![0..100, 3000..3100],
            vec![1 << 40..(1 << 40) + 64],
            vec![0..64, 1 << 50..(1 << 50) + 64],
            vec![],
        ]),
    ) {
        let spec = spec(&levels, policy, first, lower);
        prop_assert_eq!(compare(&spec, &accesses, &arrays), Ok(()));
    }
}

/// Example kernels at small sizes through each level alone (as `loopscope misses --check`
/// runs them) against the same stream through the 3C split, under every replacement policy.
#[test]
fn example_kernels_count_alike_under_both_splits() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/kernels/");
    let kernels: [(&str, &[(&str, i64)]); 5] = [
        ("matmul.c", &[("N", 24)]),
        ("2d-5pt.c", &[("N", 70), ("M", 12)]),
        ("3d-7pt.c", &[("N", 18), ("M", 9)]),
        ("transpose.c", &[("N", 40)]),
        ("stride-conflict.c", &[("N", 64), ("M", 64)]),
    ];
    // Misses past the first touch, so the comparison covers both kinds.
    let mut other_misses = 0;
    for (name, define) in kernels {
        let define: Vec<(String, i64)> = define.iter().map(|&(k, v)| (k.into(), v)).collect();
        let path = format!("{root}{name}");
        let loaded = LoadedKernel::load(path.as_ref(), &define, None, &Silent).unwrap();
        let program = Program::new(&loaded.kernel, &loaded.params, &loaded.layout).unwrap();
        let references = loaded.kernel.references().count();
        let layout = &loaded.layout;
        let arrays: Vec<_> = (layout.base.iter().zip(&layout.size_bytes))
            .map(|(&b, &s)| b..b + s)
            .collect();
        for policy in ["lru", "fifo", "plru", "random"] {
            let spec = format!("L1=2K:4:32:{policy},L2=12K:4:64:{policy}");
            let levels = parse_cache_spec(&spec).unwrap();
            let alone = simulate_each_level_alone(&program, references, &levels, &arrays);
            for (level, alone) in levels.iter().zip(alone) {
                let alone = alone.unwrap().hierarchy;
                let mut full = Hierarchy::with_split(
                    std::slice::from_ref(level),
                    references,
                    MissSplit::ThreeC,
                    0,
                );
                let mut stream = program.accesses();
                loop {
                    let batch = stream.next_batch();
                    if batch.is_empty() {
                        break;
                    }
                    full.access_kernel_batch(batch);
                }
                let (f, c) = (full.stats()[0], alone.stats()[0]);
                assert_eq!(without_capacity(&f), c, "{name} {spec} {}", level.name);
                other_misses += f.misses - f.compulsory;
                for r in 0..references {
                    assert_eq!(
                        ref_without_capacity(full.ref_stats(r, 0)),
                        alone.ref_stats(r, 0),
                        "{name} {spec} {} reference {r}",
                        level.name
                    );
                }
            }
        }
    }
    assert!(other_misses > 0);
}
