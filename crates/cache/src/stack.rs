//! LRU stack distances in O(log n) per access: a Fenwick tree over access timestamps marks, for
//! every line, only its latest access; the distance of a re-access is the number of marks after
//! the line's previous timestamp. Timestamps are renumbered when the tree fills, so memory stays
//! proportional to the number of distinct lines.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for line numbers (a multiply-xorshift mix; inputs are not adversarial).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

/// Lines per chunk of [`LastAccess`]: one 64-byte host cache line of timestamps.
const CHUNK_LINES: u64 = 16;

/// No access yet (timestamps stay below `u32::MAX`: the tree never has that many slots).
const NEVER: u32 = u32::MAX;

/// The latest access time of every line seen, in chunks of `CHUNK_LINES` consecutive lines:
/// kernels touch lines in runs, so a chunk serves several lookups from one host cache line and
/// the hash table indexes 16 times fewer keys than a map per line (it stays in the host's
/// caches on large working sets).
#[derive(Debug, Clone, Default)]
struct LastAccess {
    chunks: HashMap<u64, u32, BuildHasherDefault<LineHasher>>,
    times: Vec<[u32; CHUNK_LINES as usize]>,
    live: u64,
}

impl LastAccess {
    /// Sets `line`'s time to `now`; returns the previous one.
    #[inline]
    fn insert(&mut self, line: u64, now: u32) -> Option<u32> {
        let next_chunk = self.times.len() as u32;
        let chunk = *self.chunks.entry(line / CHUNK_LINES).or_insert(next_chunk);
        if chunk == next_chunk {
            self.times.push([NEVER; CHUNK_LINES as usize]);
        }
        let slot = self
            .times
            .get_mut(chunk as usize)?
            .get_mut((line % CHUNK_LINES) as usize)?;
        let previous = std::mem::replace(slot, now);
        if previous == NEVER {
            self.live += 1;
            return None;
        }
        Some(previous)
    }

    /// `line`'s time, if it was accessed.
    #[inline]
    fn get(&self, line: u64) -> Option<u32> {
        let chunk = *self.chunks.get(&(line / CHUNK_LINES))?;
        let time = *self
            .times
            .get(chunk as usize)?
            .get((line % CHUNK_LINES) as usize)?;
        (time != NEVER).then_some(time)
    }

    /// Every (time, line) pair.
    fn entries(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::with_capacity(self.live as usize);
        for (&chunk, &index) in &self.chunks {
            let Some(times) = self.times.get(index as usize) else {
                continue;
            };
            for (offset, &t) in (0..).zip(times) {
                if t != NEVER {
                    out.push((t, chunk * CHUNK_LINES + offset));
                }
            }
        }
        out
    }
}

/// Distances of a stream of line accesses in a fully associative LRU stack.
#[derive(Debug, Clone, Default)]
pub struct StackDistance {
    last: LastAccess,
    tree: Vec<u32>,
    next: u32,
}

const MIN_SLOTS: usize = 1 << 12;

impl StackDistance {
    /// An empty stack.
    pub fn new() -> StackDistance {
        StackDistance {
            last: LastAccess::default(),
            tree: vec![0; MIN_SLOTS + 1],
            next: 0,
        }
    }

    /// Number of distinct lines seen.
    pub fn distinct_lines(&self) -> u64 {
        self.last.live
    }

    /// Records an access to `line`; returns how many distinct other lines were accessed since
    /// its previous access, or `None` on its first access. A fully associative LRU cache of
    /// `c` lines hits exactly when the distance is below `c`.
    #[inline]
    pub fn access(&mut self, line: u64) -> Option<u64> {
        if self.next as usize + 1 >= self.tree.len() {
            self.compact();
        }
        let now = self.next;
        self.next += 1;
        let previous = self.last.insert(line, now);
        let distance = previous.map(|prev| {
            let live = self.last.live;
            let after = live - u64::from(self.prefix(prev));
            self.add(prev, -1);
            after
        });
        self.add(now, 1);
        distance
    }

    /// The distance [`StackDistance::access`] would return, without recording the access: for
    /// an access that a fully associative cache does not allocate on a miss.
    #[inline]
    pub fn distance(&self, line: u64) -> Option<u64> {
        let previous = self.last.get(line)?;
        Some(self.last.live - u64::from(self.prefix(previous)))
    }

    fn add(&mut self, slot: u32, delta: i32) {
        let mut i = slot as usize + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Marks at slots `0..=slot`.
    fn prefix(&self, slot: u32) -> u32 {
        let mut i = slot as usize + 1;
        let mut sum = 0u32;
        while i > 0 {
            sum = sum.wrapping_add(self.tree[i]);
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// Renumbers the live timestamps `0..live` (keeping their order) in a tree with room to grow.
    fn compact(&mut self) {
        let mut live = self.last.entries();
        live.sort_unstable();
        let slots = (4 * live.len()).max(MIN_SLOTS).min(u32::MAX as usize - 1);
        for (i, (_, line)) in live.iter().enumerate() {
            self.last.insert(*line, i as u32);
        }
        // A Fenwick tree of ones at 0..live: node i covers (i - lowbit(i), i].
        self.tree = (0..=slots)
            .map(|i| {
                let low = i & i.wrapping_neg();
                (i.min(live.len()).saturating_sub(i - low)) as u32
            })
            .collect();
        self.tree[0] = 0;
        self.next = live.len() as u32;
    }
}

/// Misses of a fully associative LRU cache for every capacity at once (one pass).
#[derive(Debug, Clone, Default)]
pub struct MissCurve {
    stack: StackDistance,
    histogram: Vec<u64>,
    cold: u64,
    accesses: u64,
}

impl MissCurve {
    /// An empty curve.
    pub fn new() -> MissCurve {
        MissCurve {
            stack: StackDistance::new(),
            ..MissCurve::default()
        }
    }

    /// Records an access to `line`.
    #[inline]
    pub fn access(&mut self, line: u64) {
        self.accesses += 1;
        match self.stack.access(line) {
            None => self.cold += 1,
            Some(d) => {
                let d = d as usize;
                if d >= self.histogram.len() {
                    self.histogram.resize(d + 1, 0);
                }
                self.histogram[d] += 1;
            }
        }
    }

    /// Accesses recorded.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// First accesses to a line (misses at any capacity).
    pub fn cold_misses(&self) -> u64 {
        self.cold
    }

    /// Distinct lines accessed.
    pub fn distinct_lines(&self) -> u64 {
        self.stack.distinct_lines()
    }

    /// Misses of a fully associative LRU cache holding `lines` lines.
    pub fn misses(&self, lines: u64) -> u64 {
        let from = usize::try_from(lines)
            .unwrap_or(usize::MAX)
            .min(self.histogram.len());
        self.cold + self.histogram[from..].iter().sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_distinct_lines_in_between() {
        let mut s = StackDistance::new();
        let d: Vec<Option<u64>> = [1, 2, 3, 1, 1, 3, 2].iter().map(|&l| s.access(l)).collect();
        assert_eq!(d, [None, None, None, Some(2), Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn compaction_keeps_distances() {
        let mut s = StackDistance::new();
        let mut naive: Vec<u64> = Vec::new();
        let mut x = 12345u64;
        for _ in 0..12_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let line = (x >> 33) % 150;
            let expect = naive.iter().rposition(|&l| l == line).map(|p| {
                let mut seen: Vec<u64> = naive[p + 1..].to_vec();
                seen.sort_unstable();
                seen.dedup();
                seen.len() as u64
            });
            assert_eq!(s.access(line), expect);
            naive.retain(|&l| l != line);
            naive.push(line);
        }
    }

    #[test]
    fn curve_counts_misses_per_capacity() {
        let mut c = MissCurve::new();
        for _ in 0..3 {
            for line in 0..4 {
                c.access(line);
            }
        }
        assert_eq!(c.misses(3), 12);
        assert_eq!(c.misses(4), 4);
        assert_eq!(c.cold_misses(), 4);
    }
}
