//! The cache hierarchy: levels wired together with their write and inclusion policies, and the
//! counters per level, per reference and for memory.

use std::ops::Range;

use crate::config::{Inclusion, LevelConfig, Replacement};
use crate::level::{Level, Stop};
use crate::seen::SeenLines;
use crate::stack::StackDistance;

/// How a [`Hierarchy`] classifies misses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissSplit {
    /// Misses only.
    #[default]
    None,
    /// Compulsory misses (on a line the level never brought in) counted apart, capacity and
    /// conflict left at 0: one bit per line, looked at on misses only, so hits run as fast as
    /// without a split.
    Compulsory,
    /// Compulsory, capacity and conflict: one stack-distance tracker per level, O(log n) on
    /// every access, hits included.
    ThreeC,
}

/// Counters of one level. `accesses`, `hits` and `misses` count demand requests (loads and
/// stores from the level above); write-backs arriving from above are counted separately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Demand requests.
    pub accesses: u64,
    /// Requests that found their line.
    pub hits: u64,
    /// Requests that did not.
    pub misses: u64,
    /// Misses on a line this level never brought in (with [`MissSplit::Compulsory`] or
    /// [`MissSplit::ThreeC`]): its first touch, and under no-write-allocate every store before
    /// the first load, since an infinite cache with the same policy misses those too.
    pub compulsory: u64,
    /// Misses a fully associative LRU cache of the same size and allocation policy would also
    /// have (3C split).
    pub capacity: u64,
    /// The other misses (3C split).
    pub conflict: u64,
    /// Lines evicted to make room.
    pub evictions: u64,
    /// Dirty lines written to the next level.
    pub writebacks: u64,
    /// Dirty lines received from the level above.
    pub writebacks_received: u64,
    /// Lines removed from the levels above because this inclusive level evicted them.
    pub back_invalidations: u64,
    /// Bytes loaded into this level from the next level (or memory).
    pub fill_bytes: u64,
    /// Bytes this level wrote to the next level (write-backs and write-through stores).
    pub write_bytes: u64,
}

/// Counters of one reference at one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefStats {
    /// Demand requests of this reference that reached the level.
    pub accesses: u64,
    /// Of those, hits.
    pub hits: u64,
    /// Of those, misses.
    pub misses: u64,
    /// Compulsory misses ([`MissSplit::Compulsory`] or [`MissSplit::ThreeC`]).
    pub compulsory: u64,
    /// Capacity misses (3C split).
    pub capacity: u64,
    /// Conflict misses (3C split).
    pub conflict: u64,
}

/// Traffic that reached main memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes read (fills of the last level).
    pub read_bytes: u64,
    /// Bytes written (write-backs and write-through stores of the last level).
    pub write_bytes: u64,
}

/// An exact simulator of a cache hierarchy, innermost level first.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    configs: Vec<LevelConfig>,
    levels: Vec<Level>,
    stats: Vec<LevelStats>,
    refs: Vec<RefStats>,
    trackers: Vec<StackDistance>,
    /// With [`MissSplit::Compulsory`], the lines each level has seen.
    seen: Vec<SeenLines>,
    memory: MemoryStats,
    /// The first level is write-back and not exclusive, so a hit there needs nothing else.
    fast_first_level: bool,
    /// The highest reference id counted separately (later ids share its counters).
    last_reference: usize,
    /// First-level hits per reference taken by [`Hierarchy::access_many`]'s fast path, not yet
    /// added to `refs` (one counter per hit instead of four).
    fast_hits: Vec<u64>,
    /// Every level is LRU, write-back, write-allocate and non-inclusive, without the 3C split:
    /// misses take [`Hierarchy::plain_demand`].
    plain: bool,
}

impl Hierarchy {
    /// A cold hierarchy. `references` is how many distinct reference ids accesses may carry;
    /// `three_c` enables the compulsory/capacity/conflict split (one stack-distance tracker per
    /// level, O(log n) per access); `seed` drives random replacement.
    ///
    /// The configs must have passed [`crate::check_hierarchy`] and
    /// [`LevelConfig::check_simulable`].
    pub fn new(configs: &[LevelConfig], references: usize, three_c: bool, seed: u64) -> Hierarchy {
        let split = if three_c {
            MissSplit::ThreeC
        } else {
            MissSplit::None
        };
        Hierarchy::with_split(configs, references, split, seed)
    }

    /// A cold hierarchy that classifies misses as `split` says; otherwise as
    /// [`Hierarchy::new`]. Every count but capacity and conflict is the same under every split.
    pub fn with_split(
        configs: &[LevelConfig],
        references: usize,
        split: MissSplit,
        seed: u64,
    ) -> Hierarchy {
        let three_c = split == MissSplit::ThreeC;
        Hierarchy {
            configs: configs.to_vec(),
            levels: configs
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    Level::new(
                        c,
                        seed.wrapping_add(i as u64)
                            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    )
                })
                .collect(),
            stats: vec![LevelStats::default(); configs.len()],
            refs: vec![RefStats::default(); references.max(1) * configs.len()],
            trackers: if three_c {
                configs.iter().map(|_| StackDistance::new()).collect()
            } else {
                Vec::new()
            },
            seen: if split == MissSplit::Compulsory {
                configs.iter().map(|_| SeenLines::default()).collect()
            } else {
                Vec::new()
            },
            memory: MemoryStats::default(),
            last_reference: references.max(1) - 1,
            fast_hits: vec![0; references.max(1)],
            plain: !three_c
                && configs.iter().all(|c| {
                    c.replacement == Replacement::Lru
                        && c.write_back
                        && c.write_allocate
                        && c.inclusion == Inclusion::NonInclusive
                }),
            fast_first_level: configs
                .first()
                .is_some_and(|c| c.write_back && c.inclusion != Inclusion::Exclusive),
        }
    }

    /// Sizes the compulsory split's sets of seen lines for accesses within `arrays` (address
    /// ranges), so that counting them does not allocate: a bitmap over the lines they span
    /// when that is at most 16 MiB of bits. Accesses elsewhere are still counted right. Call it
    /// on a cold hierarchy; without [`MissSplit::Compulsory`] it does nothing.
    pub fn expect_addresses(&mut self, arrays: &[Range<u64>]) {
        for (seen, level) in self.seen.iter_mut().zip(&self.levels) {
            *seen = SeenLines::for_arrays(arrays, level.shift);
        }
    }

    /// The levels' descriptions.
    pub fn configs(&self) -> &[LevelConfig] {
        &self.configs
    }

    /// Counters of every level, innermost first.
    pub fn stats(&self) -> &[LevelStats] {
        &self.stats
    }

    /// Counters of `reference` at `level`.
    pub fn ref_stats(&self, reference: usize, level: usize) -> RefStats {
        self.refs
            .get(reference * self.levels.len() + level)
            .copied()
            .unwrap_or_default()
    }

    /// Traffic that reached memory.
    pub fn memory(&self) -> MemoryStats {
        self.memory
    }

    /// Simulates one access of `size_bytes` at `addr` by `reference`; an access that spans
    /// several first-level lines counts once per line.
    #[inline]
    pub fn access(&mut self, addr: u64, size_bytes: u32, write: bool, reference: u32) {
        let shift = self.levels[0].shift;
        let first = addr >> shift;
        let last = addr.saturating_add(u64::from(size_bytes.max(1)) - 1) >> shift;
        let r = (reference as usize).min(self.last_reference);
        if first == last && self.first_level_hit(first, write, r) {
            return;
        }
        self.demand_lines(addr, size_bytes, write, reference, false);
    }

    /// An access through the demand path (the plain hierarchy's when `plain`), once per
    /// first-level line it touches.
    fn demand_lines(
        &mut self,
        addr: u64,
        size_bytes: u32,
        write: bool,
        reference: u32,
        plain: bool,
    ) {
        let shift = self.levels[0].shift;
        let first = addr >> shift;
        let last = addr.saturating_add(u64::from(size_bytes.max(1)) - 1) >> shift;
        let r = (reference as usize).min(self.last_reference);
        for line in first..=last {
            if plain {
                self.plain_demand(0, line << shift, write, r);
            } else {
                self.demand(0, line << shift, write, r);
            }
        }
    }

    /// Simulates a batch of a kernel's access stream ([`loopscope_kernel::AccessStream`]), in
    /// order, through [`Hierarchy::access_many`].
    pub fn access_kernel_batch(&mut self, batch: &[loopscope_kernel::Access]) {
        self.access_many(
            batch
                .iter()
                .map(|a| (a.addr, a.size_bytes, a.write, a.reference)),
        );
    }

    /// Simulates `(addr, size_bytes, write, reference)` accesses in order: the same counts as
    /// calling [`Hierarchy::access`] on each, faster on long streams (first-level hits are
    /// counted in bulk).
    pub fn access_many(&mut self, accesses: impl IntoIterator<Item = (u64, u32, bool, u32)>) {
        if !self.trackers.is_empty()
            || !self.fast_first_level
            || self.configs[0].replacement != Replacement::Lru
        {
            for (addr, size_bytes, write, reference) in accesses {
                self.access(addr, size_bytes, write, reference);
            }
            return;
        }
        let mut accesses = accesses.into_iter();
        loop {
            let stop = self.levels[0].take_lru_hits(&mut accesses, &mut self.fast_hits, self.plain);
            match stop {
                Stop::End => break,
                Stop::Missed((addr, _, write, reference), victim) => {
                    let r = (reference as usize).min(self.last_reference);
                    self.plain_demand_after_first_miss(addr, write, r, victim);
                }
                Stop::Other((addr, size_bytes, write, reference)) if self.plain => {
                    self.demand_lines(addr, size_bytes, write, reference, true);
                }
                Stop::Other((addr, size_bytes, write, reference)) => {
                    self.demand_lines(addr, size_bytes, write, reference, false);
                }
            }
        }
        self.settle_fast_hits();
    }

    /// Adds the fast path's first-level hits to the counters.
    fn settle_fast_hits(&mut self) {
        let n = self.levels.len();
        for (r, h) in self.fast_hits.iter_mut().enumerate() {
            self.stats[0].accesses += *h;
            self.stats[0].hits += *h;
            let rs = &mut self.refs[r * n];
            rs.accesses += *h;
            rs.hits += *h;
            *h = 0;
        }
    }

    /// The common case without the 3C split: a first-level hit in a write-back level, counted
    /// here; anything else is left to [`Hierarchy::demand`] (false).
    #[inline]
    fn first_level_hit(&mut self, line: u64, write: bool, r: usize) -> bool {
        if !self.trackers.is_empty() || !self.fast_first_level {
            return false;
        }
        if !self.levels[0].lookup(line, write) {
            return false;
        }
        let n = self.levels.len();
        self.stats[0].accesses += 1;
        self.stats[0].hits += 1;
        let rs = &mut self.refs[r * n];
        rs.accesses += 1;
        rs.hits += 1;
        true
    }

    /// [`Hierarchy::demand`] for a plain hierarchy, from level `k` (the first level when
    /// `write`, whose line becomes dirty), in the same order of events: a level that misses
    /// makes room in the same pass over its set, the levels below are served first, then it
    /// fills and passes its dirty victim down.
    fn plain_demand(&mut self, k: usize, addr: u64, write: bool, r: usize) {
        let n = self.levels.len();
        let Some(level) = self.levels.get_mut(k) else {
            self.memory.read_bytes += 1 << self.levels[n - 1].shift;
            return;
        };
        let looked_up = level.lru_lookup_or_make_room(addr >> level.shift, write);
        let stats = &mut self.stats[k];
        let rs = &mut self.refs[r * n + k];
        stats.accesses += 1;
        rs.accesses += 1;
        let Some(victim) = looked_up else {
            stats.hits += 1;
            rs.hits += 1;
            return;
        };
        stats.misses += 1;
        rs.misses += 1;
        if self
            .seen
            .get_mut(k)
            .is_some_and(|s| s.first_touch(addr >> level.shift))
        {
            stats.compulsory += 1;
            rs.compulsory += 1;
        }
        self.plain_fill(k, addr, write, r, victim);
    }

    /// The rest of [`Hierarchy::plain_demand`] once level `k` has missed and made room,
    /// giving up `victim`: the levels below, then the fill.
    fn plain_fill(
        &mut self,
        k: usize,
        addr: u64,
        dirty: bool,
        r: usize,
        victim: Option<(u64, bool)>,
    ) {
        self.plain_demand(k + 1, addr, false, r);
        let shift = self.levels[k].shift;
        self.stats[k].fill_bytes += 1 << shift;
        self.levels[k].lru_fill_front(addr >> shift, dirty);
        self.plain_evicted(k, victim);
    }

    /// [`Hierarchy::plain_demand`] when the first level's lookup already missed and made room,
    /// giving up `victim`.
    fn plain_demand_after_first_miss(
        &mut self,
        addr: u64,
        write: bool,
        r: usize,
        victim: Option<(u64, bool)>,
    ) {
        let n = self.levels.len();
        self.stats[0].accesses += 1;
        self.stats[0].misses += 1;
        let rs = &mut self.refs[r * n];
        rs.accesses += 1;
        rs.misses += 1;
        let line = addr >> self.levels[0].shift;
        if self.seen.first_mut().is_some_and(|s| s.first_touch(line)) {
            self.stats[0].compulsory += 1;
            rs.compulsory += 1;
        }
        self.plain_fill(0, addr, write, r, victim);
    }

    /// Counts a line that level `k` gave up and passes it down when dirty.
    fn plain_evicted(&mut self, k: usize, victim: Option<(u64, bool)>) {
        let Some((line, dirty)) = victim else {
            return;
        };
        self.stats[k].evictions += 1;
        if dirty {
            self.record_writeback(k);
            let shift = self.levels[k].shift;
            self.plain_put(k + 1, line << shift, 1 << shift);
        }
    }

    /// [`Hierarchy::put`] of a dirty line of `bytes` for a plain hierarchy.
    fn plain_put(&mut self, k: usize, addr: u64, bytes: u64) {
        if k == self.levels.len() {
            self.memory.write_bytes += bytes;
            return;
        }
        self.stats[k].writebacks_received += 1;
        let line = addr >> self.levels[k].shift;
        if let Some(seen) = self.seen.get_mut(k) {
            seen.first_touch(line);
        }
        if let Some(victim) = self.levels[k].lru_lookup_or_make_room(line, true) {
            // A whole line arrives, so it is allocated without fetching it from below.
            self.levels[k].lru_fill_front(line, true);
            self.plain_evicted(k, victim);
        }
    }

    /// Writes every dirty line back to memory, level by level (counted as write-backs).
    pub fn flush(&mut self) {
        for k in 0..self.levels.len() {
            let shift = self.levels[k].shift;
            for line in self.levels[k].take_dirty() {
                self.record_writeback(k);
                self.put(k + 1, line << shift, true, self.configs[k].line_bytes);
            }
        }
    }

    /// A demand request for the line holding `addr` at level `k`; returns whether the line
    /// comes back dirty (it left an exclusive level that held it dirty).
    fn demand(&mut self, k: usize, addr: u64, write: bool, r: usize) -> bool {
        let n = self.levels.len();
        if k == n {
            let bytes = self.configs[k - 1].line_bytes;
            if write {
                self.memory.write_bytes += bytes;
            } else {
                self.memory.read_bytes += bytes;
            }
            return false;
        }
        let cfg = &self.configs[k];
        let (write_back, write_allocate, inclusion, line_bytes) = (
            cfg.write_back,
            cfg.write_allocate,
            cfg.inclusion,
            cfg.line_bytes,
        );
        let line = addr >> self.levels[k].shift;
        let allocates = !write || write_allocate;
        let distance = (self.trackers.get_mut(k))
            .map(|t| fully_associative_distance(t, line, allocates, cfg.lines()));
        let stats = &mut self.stats[k];
        let rs = &mut self.refs[r * n + k];
        stats.accesses += 1;
        rs.accesses += 1;
        if self.levels[k].lookup(line, write && write_back) {
            stats.hits += 1;
            rs.hits += 1;
            if write && !write_back {
                self.write_through(k, addr, r);
            }
            if inclusion == Inclusion::Exclusive && !write {
                return self.levels[k].remove(line).unwrap_or(false);
            }
            return false;
        }
        stats.misses += 1;
        rs.misses += 1;
        if let Some(d) = distance {
            let capacity_lines = cfg.lines();
            match d {
                None => {
                    stats.compulsory += 1;
                    rs.compulsory += 1;
                }
                Some(d) if d >= capacity_lines => {
                    stats.capacity += 1;
                    rs.capacity += 1;
                }
                Some(_) => {
                    stats.conflict += 1;
                    rs.conflict += 1;
                }
            }
        } else if (self.seen.get_mut(k)).is_some_and(|s| never_brought_in(s, line, allocates)) {
            stats.compulsory += 1;
            rs.compulsory += 1;
        }
        if write && !write_allocate {
            self.write_through(k, addr, r);
            return false;
        }
        let dirty_below = self.demand(k + 1, addr, false, r);
        self.stats[k].fill_bytes += line_bytes;
        if inclusion == Inclusion::Exclusive {
            // A victim cache does not keep what passes through it.
            return dirty_below;
        }
        if write && !write_back {
            self.write_through(k, addr, r);
        }
        self.install(k, addr, write_back && (write || dirty_below));
        if dirty_below && !write_back {
            self.put(k + 1, addr, true, line_bytes);
        }
        false
    }

    fn write_through(&mut self, k: usize, addr: u64, r: usize) {
        self.stats[k].write_bytes += self.configs[k].line_bytes;
        self.demand(k + 1, addr, true, r);
    }

    /// Puts the line holding `addr` into level `k`, handling the victim.
    fn install(&mut self, k: usize, addr: u64, dirty: bool) {
        let shift = self.levels[k].shift;
        let Some((victim, mut victim_dirty)) = self.levels[k].insert(addr >> shift, dirty) else {
            return;
        };
        let line_bytes = self.configs[k].line_bytes;
        let victim_addr = victim << shift;
        self.stats[k].evictions += 1;
        if self.configs[k].inclusion == Inclusion::Inclusive {
            for j in 0..k {
                let step = self.configs[j].line_bytes;
                let upper_shift = self.levels[j].shift;
                for a in
                    (victim_addr..victim_addr.saturating_add(line_bytes)).step_by(step as usize)
                {
                    if let Some(d) = self.levels[j].remove(a >> upper_shift) {
                        self.stats[k].back_invalidations += 1;
                        victim_dirty |= d;
                    }
                }
            }
        }
        if victim_dirty {
            self.record_writeback(k);
        }
        self.put(k + 1, victim_addr, victim_dirty, line_bytes);
    }

    fn record_writeback(&mut self, k: usize) {
        self.stats[k].writebacks += 1;
        self.stats[k].write_bytes += self.configs[k].line_bytes;
    }

    /// A line evicted from level `k - 1` (`bytes` long) arrives at level `k`.
    fn put(&mut self, k: usize, addr: u64, dirty: bool, bytes: u64) {
        if k == self.levels.len() {
            if dirty {
                self.memory.write_bytes += bytes;
            }
            return;
        }
        let cfg = &self.configs[k];
        let (inclusion, write_back) = (cfg.inclusion, cfg.write_back);
        if inclusion != Inclusion::Exclusive && !dirty {
            return;
        }
        let line = addr >> self.levels[k].shift;
        // A write-through level passes a written-back line on without keeping it, unless it is
        // exclusive (below), so the line is not brought in.
        let allocates = write_back || inclusion == Inclusion::Exclusive;
        if let Some(t) = self.trackers.get_mut(k) {
            fully_associative_distance(t, line, allocates, cfg.lines());
        }
        if let Some(seen) = self.seen.get_mut(k) {
            never_brought_in(seen, line, allocates);
        }
        if dirty {
            self.stats[k].writebacks_received += 1;
        }
        if !write_back {
            self.levels[k].lookup(line, false);
            if dirty {
                self.stats[k].write_bytes += bytes;
                self.put(k + 1, addr, true, bytes);
            }
            if inclusion == Inclusion::Exclusive && !self.levels[k].contains(line) {
                self.install(k, addr, false);
            }
            return;
        }
        if !self.levels[k].lookup(line, dirty) {
            // A whole line arrives, so it is allocated without fetching it from below.
            self.install(k, addr, dirty);
        }
    }
}

/// Records an access to `line` in the stack of a fully associative LRU cache of `lines` lines
/// with the level's allocation policy, returning its stack distance (`None`: never brought
/// in). An access that does not allocate on a miss (a no-write-allocate store) moves its line
/// up only where that cache holds it: an infinite cache with the same policy never brings the
/// line in, so its misses stay compulsory until a load does.
fn fully_associative_distance(
    stack: &mut StackDistance,
    line: u64,
    allocates: bool,
    lines: u64,
) -> Option<u64> {
    if allocates {
        return stack.access(line);
    }
    let distance = stack.distance(line);
    if distance.is_some_and(|d| d < lines) {
        stack.access(line);
    }
    distance
}

/// Whether `line` was never brought into the level, as [`fully_associative_distance`] decides
/// it: marked when the access allocates, only looked up when it does not.
fn never_brought_in(seen: &mut SeenLines, line: u64, allocates: bool) -> bool {
    if allocates {
        seen.first_touch(line)
    } else {
        !seen.contains(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_cache_spec;

    fn sim(spec: &str, three_c: bool) -> Hierarchy {
        Hierarchy::new(&parse_cache_spec(spec).unwrap(), 4, three_c, 1)
    }

    #[test]
    fn hand_checked_two_levels() {
        // L1: 1 set × 2 ways × 64 B; L2: 4 lines fully associative.
        let mut h = sim("L1=128:2:64,L2=256:4:64", true);
        for addr in [0, 64, 128, 0, 8, 192, 64] {
            h.access(addr, 8, false, 0);
        }
        let l1 = h.stats()[0];
        // 0 m, 64 m, 128 m (evicts 0), 0 m (evicts 64), 8 h, 192 m (evicts 128), 64 m (evicts 0).
        assert_eq!(
            (l1.accesses, l1.hits, l1.misses, l1.evictions),
            (7, 1, 6, 4)
        );
        // 3C at L1: 0,64,128,192 compulsory; 0 again has distance 2 >= 2 lines: capacity; 64 has
        // distance 3: capacity.
        assert_eq!((l1.compulsory, l1.capacity, l1.conflict), (4, 2, 0));
        let l2 = h.stats()[1];
        assert_eq!((l2.accesses, l2.hits, l2.misses), (6, 2, 4));
        assert_eq!(h.memory().read_bytes, 4 * 64);
    }

    #[test]
    fn write_back_counts_dirty_evictions() {
        let mut h = sim("L1=128:2:64", false);
        h.access(0, 8, true, 1);
        h.access(64, 8, false, 1);
        h.access(128, 8, false, 1); // evicts dirty line 0
        h.access(192, 8, false, 1); // evicts clean line 64
        let l1 = h.stats()[0];
        assert_eq!((l1.evictions, l1.writebacks), (2, 1));
        assert_eq!(
            h.memory(),
            MemoryStats {
                read_bytes: 256,
                write_bytes: 64
            }
        );
        assert_eq!(h.ref_stats(1, 0).misses, 4);
    }

    #[test]
    fn write_through_no_allocate_sends_stores_down() {
        let mut h = sim("L1=128:2:64:wt:nwa", false);
        h.access(0, 8, true, 0);
        h.access(0, 8, true, 0);
        let l1 = h.stats()[0];
        assert_eq!((l1.misses, l1.writebacks), (2, 0));
        assert_eq!(
            h.memory(),
            MemoryStats {
                read_bytes: 0,
                write_bytes: 128
            }
        );
    }

    #[test]
    fn no_write_allocate_stores_miss_compulsorily_until_a_load_brings_the_line() {
        // One set of 2 ways: the same as a fully associative cache of 2 lines, so no conflict.
        let configs = parse_cache_spec("L1=128:2:64:nwa").unwrap();
        let run = |split| {
            let mut h = Hierarchy::with_split(&configs, 1, split, 1);
            // Stores to 0 never bring it in; the load does, then 64 and 128 push it out.
            for (addr, write) in [
                (0, true),
                (0, true),
                (0, false),
                (0, true),
                (64, false),
                (128, false),
                (0, true),
                (0, true),
            ] {
                h.access(addr, 8, write, 0);
            }
            h.stats()[0]
        };
        let three_c = run(MissSplit::ThreeC);
        assert_eq!(
            (
                three_c.misses,
                three_c.compulsory,
                three_c.capacity,
                three_c.conflict
            ),
            (7, 5, 2, 0)
        );
        assert_eq!(run(MissSplit::Compulsory).compulsory, 5);
    }

    #[test]
    fn exclusive_level_holds_only_victims() {
        let mut h = sim("L1=64:1:64,L2=128:2:64:excl", false);
        h.access(0, 8, false, 0); // L1 miss, L2 miss, from memory into L1 only
        h.access(64, 8, false, 0); // evicts 0 into L2
        h.access(0, 8, false, 0); // L2 hit: moves up; 64 goes down
        let l2 = h.stats()[1];
        assert_eq!((l2.accesses, l2.hits, l2.misses), (3, 1, 2));
        assert_eq!(h.memory().read_bytes, 128);
    }

    #[test]
    fn inclusive_level_back_invalidates() {
        let mut h = sim("L1=128:2:64,L2=128:2:64:incl", false);
        h.access(0, 8, true, 0);
        h.access(64, 8, false, 0);
        h.access(0, 8, false, 0); // L1 hit; L2's LRU order still has 0 as oldest
        h.access(128, 8, false, 0); // L2 evicts 0 and removes it from L1 (dirty)
        assert_eq!(h.stats()[1].back_invalidations, 1);
        assert_eq!(h.memory().write_bytes, 64);
        h.access(0, 8, false, 0);
        assert_eq!(h.stats()[0].misses, 4);
    }

    #[test]
    fn straddling_access_touches_two_lines() {
        let mut h = sim("L1=128:2:64", false);
        h.access(60, 8, false, 0);
        assert_eq!(h.stats()[0].accesses, 2);
    }

    #[test]
    fn a_huge_sparse_level_counts_as_a_stored_one() {
        // Direct-mapped, so lines closer than the set count never conflict: a 64 GiB level
        // (stored sparsely) and a 16 MiB one (stored whole) see the same run below 16 MiB.
        let mut huge = sim("L1=4K:4:64,L2=64G:1:64:wt", false);
        let mut stored = sim("L1=4K:4:64,L2=16M:1:64:wt", false);
        assert!(huge.levels[1].is_sparse() && !stored.levels[1].is_sparse());
        let mut x = 12345u64;
        let accesses: Vec<(u64, u32, bool, u32)> = (0..20_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % (16 << 20)) & !7, 8, i % 3 == 0, (i % 4) as u32)
            })
            .collect();
        huge.access_many(accesses.iter().copied());
        stored.access_many(accesses.iter().copied());
        assert_eq!(huge.stats(), stored.stats());
        assert_eq!(huge.memory(), stored.memory());
    }
}
