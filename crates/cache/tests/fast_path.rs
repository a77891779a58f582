//! The batched fast path ([`Hierarchy::access_many`]) against the one-access-at-a-time path and
//! against a deliberately naive model of write-back, write-allocate LRU levels, on random
//! small streams and geometries.

use loopscope_cache::{Hierarchy, LevelStats, MemoryStats, parse_cache_spec};
use proptest::prelude::*;

mod common;
use common::Access;

fn stream() -> impl Strategy<Value = Vec<Access>> {
    common::stream(2048, 5, 500)
}

fn geometry() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    common::geometry(
        // Numbers of sets other than powers of two index by remainder.
        vec![1, 2, 3, 4, 6, 8],
        // Every associativity the fast path has its own copy for, and others.
        vec![1, 2, 3, 4, 5, 8, 12, 16],
    )
}

fn spec(levels: &[(u64, u64, u64)], options: &str) -> String {
    levels
        .iter()
        .enumerate()
        .map(|(i, (sets, ways, line))| {
            format!("L{}={}:{ways}:{line}{options}", i + 1, sets * ways * line)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The counters the naive model keeps too.
fn summary(h: &Hierarchy, references: usize) -> (Vec<[u64; 7]>, Vec<[u64; 3]>, MemoryStats) {
    let levels = h
        .stats()
        .iter()
        .map(|s: &LevelStats| {
            [
                s.accesses,
                s.hits,
                s.misses,
                s.evictions,
                s.writebacks,
                s.fill_bytes,
                s.write_bytes,
            ]
        })
        .collect();
    let refs = (0..references)
        .flat_map(|r| (0..h.stats().len()).map(move |k| (r, k)))
        .map(|(r, k)| {
            let s = h.ref_stats(r, k);
            [s.accesses, s.hits, s.misses]
        })
        .collect();
    (levels, refs, h.memory())
}

/// Write-back, write-allocate, non-inclusive LRU levels, as plainly as possible: each set is a
/// list of (line, dirty), most recent first.
struct Naive {
    levels: Vec<(u64, usize, u64)>,
    sets: Vec<Vec<Vec<(u64, bool)>>>,
    stats: Vec<[u64; 7]>,
    refs: Vec<[u64; 3]>,
    memory: MemoryStats,
}

impl Naive {
    fn new(levels: &[(u64, u64, u64)], references: usize) -> Naive {
        Naive {
            levels: levels
                .iter()
                .map(|&(sets, ways, line)| (sets, ways as usize, line))
                .collect(),
            sets: levels
                .iter()
                .map(|&(sets, _, _)| vec![Vec::new(); sets as usize])
                .collect(),
            stats: vec![[0; 7]; levels.len()],
            refs: vec![[0; 3]; references * levels.len()],
            memory: MemoryStats::default(),
        }
    }

    fn access(&mut self, (addr, size, write, r): Access) {
        let line_bytes = self.levels[0].2;
        let first = addr / line_bytes;
        let last = (addr + u64::from(size) - 1) / line_bytes;
        for line in first..=last {
            self.demand(0, line * line_bytes, write, r as usize);
        }
    }

    fn set(&mut self, k: usize, addr: u64) -> (&mut Vec<(u64, bool)>, u64) {
        let (sets, _, line_bytes) = self.levels[k];
        let line = addr / line_bytes;
        (&mut self.sets[k][(line % sets) as usize], line)
    }

    fn demand(&mut self, k: usize, addr: u64, write: bool, r: usize) {
        let n = self.levels.len();
        if k == n {
            let bytes = self.levels[n - 1].2;
            if write {
                self.memory.write_bytes += bytes;
            } else {
                self.memory.read_bytes += bytes;
            }
            return;
        }
        self.stats[k][0] += 1;
        self.refs[r * n + k][0] += 1;
        let (set, line) = self.set(k, addr);
        if let Some(i) = set.iter().position(|e| e.0 == line) {
            let (_, dirty) = set.remove(i);
            set.insert(0, (line, dirty || write));
            self.stats[k][1] += 1;
            self.refs[r * n + k][1] += 1;
            return;
        }
        self.stats[k][2] += 1;
        self.refs[r * n + k][2] += 1;
        self.demand(k + 1, addr, false, r);
        self.stats[k][5] += self.levels[k].2;
        self.install(k, addr, write);
    }

    fn install(&mut self, k: usize, addr: u64, dirty: bool) {
        let ways = self.levels[k].1;
        let line_bytes = self.levels[k].2;
        let (set, line) = self.set(k, addr);
        set.insert(0, (line, dirty));
        if set.len() <= ways {
            return;
        }
        let Some((victim, victim_dirty)) = set.pop() else {
            return;
        };
        self.stats[k][3] += 1;
        if victim_dirty {
            self.stats[k][4] += 1;
            self.stats[k][6] += line_bytes;
            self.write_back(k + 1, victim * line_bytes, line_bytes);
        }
    }

    /// A dirty line of `bytes` evicted from the level above arrives at level `k`.
    fn write_back(&mut self, k: usize, addr: u64, bytes: u64) {
        if k == self.levels.len() {
            self.memory.write_bytes += bytes;
            return;
        }
        let (set, line) = self.set(k, addr);
        match set.iter().position(|e| e.0 == line) {
            Some(i) => {
                set.remove(i);
                set.insert(0, (line, true));
            }
            None => self.install(k, addr, true),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_equals_a_naive_lru_model(accesses in stream(), levels in geometry(), split in 1usize..300) {
        let configs = parse_cache_spec(&spec(&levels, "")).unwrap();
        let mut fast = Hierarchy::new(&configs, 5, false, 0);
        // Two batches, as a stream hands them over.
        let (head, tail) = accesses.split_at(split.min(accesses.len()));
        fast.access_many(head.iter().copied());
        fast.access_many(tail.iter().copied());
        let mut naive = Naive::new(&levels, 5);
        for &a in &accesses {
            naive.access(a);
        }
        let (stats, refs, memory) = summary(&fast, 5);
        prop_assert_eq!(stats, naive.stats);
        prop_assert_eq!(refs, naive.refs);
        prop_assert_eq!(memory, naive.memory);
    }

    #[test]
    fn batches_equal_single_accesses_under_every_policy(
        accesses in stream(),
        levels in geometry(),
        policy in prop::sample::select(vec!["lru", "fifo", "plru", "random"]),
        lower in prop::sample::select(vec!["", ":incl", ":excl", ":wt", ":nwa"]),
        first in prop::sample::select(vec!["", ":wt", ":nwa", ":wt:nwa"]),
        three_c in any::<bool>(),
    ) {
        let mut levels = levels;
        if policy == "plru" {
            levels[0].1 = levels[0].1.next_power_of_two().min(4);
        }
        let mut text = spec(&levels, "");
        if let Some((l1, rest)) = text.split_once(',') {
            text = format!("{l1}:{policy}{first},{}", rest.replace(',', &format!("{lower},")) + lower);
        } else {
            text = format!("{text}:{policy}{first}");
        }
        let configs = parse_cache_spec(&text).unwrap();
        let mut one = Hierarchy::new(&configs, 4, three_c, 3);
        let mut many = Hierarchy::new(&configs, 4, three_c, 3);
        for &(addr, size, write, r) in &accesses {
            one.access(addr, size, write, r);
        }
        many.access_many(accesses.iter().copied());
        one.flush();
        many.flush();
        prop_assert_eq!(one.stats(), many.stats(), "{}", text);
        prop_assert_eq!(one.memory(), many.memory());
        for r in 0..5 {
            for k in 0..configs.len() {
                prop_assert_eq!(one.ref_stats(r, k), many.ref_stats(r, k));
            }
        }
    }
}
