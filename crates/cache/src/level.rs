//! One set-associative cache level: tags, dirty bits and replacement state, without counters.
//!
//! Each set is a slice of `ways` entries. For LRU and FIFO the slice is kept in order (most
//! recent or newest first, invalid entries last), so a hit is a short rotation and the victim is
//! the last entry. Tree-PLRU and random keep lines in place and use per-set bits or a generator.
//!
//! A level whose sets would take more than [`DENSE_LEVEL_CAP_BYTES`] keeps only the sets that
//! accesses touch, each made on first touch (a hash map from set to its place in storage), so
//! `L1=64G:1:64` costs memory in proportion to the lines a run touches, not to the size it
//! names. The results are the same either way: an untouched set is an empty one.

use std::collections::HashMap;

use crate::config::{LevelConfig, Replacement};

/// The most memory a level's sets take stored whole (8 bytes per line); larger levels store
/// only the sets accesses touch.
pub const DENSE_LEVEL_CAP_BYTES: u64 = 64 << 20;

/// The most memory the sparsely stored levels of one kernel simulation may take, estimated
/// before it starts from the lines its accesses could touch.
pub const SPARSE_MEMORY_CAP_BYTES: u64 = 8 << 30;

/// What a stored set of a sparse level takes besides its ways: its hash-map entry with the
/// table's slack, and a tree-PLRU word.
const SPARSE_SET_OVERHEAD_BYTES: u128 = 48;

/// The most memory `cfg` takes stored sparsely when at most `lines` distinct lines reach it
/// (each in one set); `None` for a level stored whole, whose memory is fixed and small.
pub(crate) fn sparse_bytes_at_most(cfg: &LevelConfig, lines: u128) -> Option<u128> {
    let dense_bytes = cfg.sets().saturating_mul(cfg.ways).saturating_mul(8);
    (dense_bytes > DENSE_LEVEL_CAP_BYTES).then(|| {
        let sets = lines.min(u128::from(cfg.sets()));
        sets * (u128::from(cfg.ways) * 8 + SPARSE_SET_OVERHEAD_BYTES)
    })
}

const DIRTY: u64 = 1 << 63;
const INVALID: u64 = u64::MAX;
const LINE_MASK: u64 = !DIRTY;

/// The storage of one level.
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub(crate) shift: u32,
    ways: usize,
    set_mask: u64,
    /// The number of sets where it is not a power of two, else 0 (the mask indexes them). Some
    /// L3s have such numbers (Intel's with 12 or 28 slices); their hardware hashes lines over
    /// the slices, so `line mod sets` models the level's size and associativity, not its own
    /// mapping.
    remainder_sets: u64,
    replacement: Replacement,
    /// Every stored set's `ways` entries, one chunk after another.
    entries: Vec<u64>,
    /// Tree-PLRU bits, one word per stored set.
    plru: Vec<u64>,
    rng: u64,
    /// For a level stored sparsely: the chunk of `entries` and `plru` of each touched set.
    /// `None`: every set is stored, set `s` in chunk `s`.
    sparse: Option<HashMap<usize, usize>>,
}

impl Level {
    pub(crate) fn new(cfg: &LevelConfig, seed: u64) -> Level {
        let dense_bytes = cfg.sets().saturating_mul(cfg.ways).saturating_mul(8);
        Level::with_storage(cfg, seed, dense_bytes > DENSE_LEVEL_CAP_BYTES)
    }

    /// A level stored sparsely (only touched sets) or whole.
    pub(crate) fn with_storage(cfg: &LevelConfig, seed: u64, sparse: bool) -> Level {
        let stored_sets = if sparse { 0 } else { cfg.sets() as usize };
        let ways = cfg.ways as usize;
        Level {
            shift: cfg.line_bytes.trailing_zeros(),
            ways,
            set_mask: cfg.sets().wrapping_sub(1),
            remainder_sets: if cfg.sets().is_power_of_two() {
                0
            } else {
                cfg.sets()
            },
            replacement: cfg.replacement,
            entries: vec![INVALID; stored_sets * ways],
            plru: if cfg.replacement == Replacement::TreePlru {
                vec![0; stored_sets]
            } else {
                Vec::new()
            },
            // xorshift must not start at zero.
            rng: seed | 1,
            sparse: sparse.then(HashMap::new),
        }
    }

    /// Whether only touched sets are stored.
    #[cfg(test)]
    pub(crate) fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }

    /// The chunk `set` is stored in, `None` when a sparse level has not stored it yet (it is
    /// empty).
    #[inline]
    fn chunk(&self, set: usize) -> Option<usize> {
        match &self.sparse {
            None => Some(set),
            Some(chunks) => chunks.get(&set).copied(),
        }
    }

    /// The chunk `set` is stored in, made empty on first touch.
    #[inline]
    fn chunk_mut(&mut self, set: usize) -> usize {
        let Some(chunks) = &mut self.sparse else {
            return set;
        };
        let next = chunks.len();
        let chunk = *chunks.entry(set).or_insert(next);
        if chunk == next {
            self.entries.extend(std::iter::repeat_n(INVALID, self.ways));
            if self.replacement == Replacement::TreePlru {
                self.plru.push(0);
            }
        }
        chunk
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        if self.remainder_sets == 0 {
            (line & self.set_mask) as usize
        } else {
            (line % self.remainder_sets) as usize
        }
    }

    /// The entries of the set stored in `chunk`.
    #[inline]
    fn slots(&mut self, chunk: usize) -> &mut [u64] {
        let start = chunk * self.ways;
        &mut self.entries[start..start + self.ways]
    }

    /// Looks `line` up; on a hit updates the replacement state, sets the dirty bit when
    /// `make_dirty`, and returns true.
    #[inline]
    pub(crate) fn lookup(&mut self, line: u64, make_dirty: bool) -> bool {
        let Some(set) = self.chunk(self.set_of(line)) else {
            return false;
        };
        let replacement = self.replacement;
        let slots = self.slots(set);
        let Some(way) = slots.iter().position(|e| e & LINE_MASK == line) else {
            return false;
        };
        let dirty = if make_dirty { DIRTY } else { 0 };
        match replacement {
            Replacement::Lru => {
                // A hand-written shift: the ways are few and `rotate_right` is an out-of-line call.
                let entry = slots[way] | dirty;
                let mut i = way;
                while i > 0 {
                    slots[i] = slots[i - 1];
                    i -= 1;
                }
                slots[0] = entry;
            }
            Replacement::TreePlru => {
                slots[way] |= dirty;
                self.plru_touch(set, way);
            }
            Replacement::Fifo | Replacement::Random => slots[way] |= dirty,
        }
        true
    }

    /// For an LRU level: takes accesses from `accesses` while they are single-line hits
    /// (updating the LRU order and dirty bits like [`Level::lookup`], and counting each in
    /// `hits_by_reference`), and returns why it stopped. With
    /// `keep_room`, a single-line miss leaves room at the front of its set as
    /// [`Level::lru_lookup_or_make_room`] does; without, the set is left as it was. The
    /// level's fields are copied into locals once, so the loop runs from registers.
    #[inline(always)]
    pub(crate) fn take_lru_hits(
        &mut self,
        accesses: &mut impl Iterator<Item = (u64, u32, bool, u32)>,
        hits_by_reference: &mut [u64],
        keep_room: bool,
    ) -> Stop {
        // A sparse level's sets are found through its map, which the general path does.
        if self.sparse.is_some() {
            return accesses.next().map_or(Stop::End, Stop::Other);
        }
        // A number of sets other than a power of two (some L3s) takes the general copy, with a
        // remainder per access.
        if self.remainder_sets != 0 {
            return self.take_lru_hits_with::<0, false>(accesses, hits_by_reference, keep_room);
        }
        // The usual associativities get a copy with the set size known to the compiler, so
        // the scan is unrolled and the bounds checks fold.
        match self.ways {
            4 => self.take_lru_hits_with::<4, true>(accesses, hits_by_reference, keep_room),
            8 => self.take_lru_hits_with::<8, true>(accesses, hits_by_reference, keep_room),
            12 => self.take_lru_hits_with::<12, true>(accesses, hits_by_reference, keep_room),
            16 => self.take_lru_hits_with::<16, true>(accesses, hits_by_reference, keep_room),
            _ => self.take_lru_hits_with::<0, true>(accesses, hits_by_reference, keep_room),
        }
    }

    /// [`Level::take_lru_hits`] for sets of `WAYS` entries (0: as many as the level has),
    /// indexed by a mask when `MASKED`, else by remainder.
    #[inline(always)]
    fn take_lru_hits_with<const WAYS: usize, const MASKED: bool>(
        &mut self,
        accesses: &mut impl Iterator<Item = (u64, u32, bool, u32)>,
        hits_by_reference: &mut [u64],
        keep_room: bool,
    ) -> Stop {
        let ways = if WAYS == 0 { self.ways } else { WAYS };
        let (shift, set_mask, sets) = (self.shift, self.set_mask, self.remainder_sets.max(1));
        let offset_mask = (1u64 << shift) - 1;
        let line_bytes = 1u64 << shift;
        let last_reference = hits_by_reference.len().saturating_sub(1);
        let entries = self.entries.as_mut_slice();
        for access in accesses {
            let (addr, size_bytes, write, reference) = access;
            // Size 0 counts as 1 byte elsewhere; both stay within the line here.
            if (addr & offset_mask) + u64::from(size_bytes) > line_bytes {
                return Stop::Other(access);
            }
            let line = addr >> shift;
            let set = if MASKED { line & set_mask } else { line % sets };
            let start = set as usize * ways;
            let Some(slots) = entries.get_mut(start..start + ways) else {
                return Stop::Other(access);
            };
            if let Some(dropped) = lru_touch_or_shift(slots, line, if write { DIRTY } else { 0 }) {
                if keep_room {
                    return Stop::Missed(access, split_entry(dropped));
                }
                undo_shift(slots, dropped);
                return Stop::Other(access);
            }
            if let Some(h) = hits_by_reference.get_mut((reference as usize).min(last_reference)) {
                *h += 1;
            }
        }
        Stop::End
    }

    /// For an LRU level: looks `line` up; on a hit moves it to the front (dirty when
    /// `make_dirty`) and returns `None`; on a miss makes room at the front of its set (fill it
    /// with [`Level::lru_fill_front`] before touching the level again) and returns the line
    /// that fell out with its dirty bit, `Some(None)` when nothing did.
    #[inline]
    pub(crate) fn lru_lookup_or_make_room(
        &mut self,
        line: u64,
        make_dirty: bool,
    ) -> Option<Option<(u64, bool)>> {
        let dirty = if make_dirty { DIRTY } else { 0 };
        let start = self.chunk_mut(self.set_of(line)) * self.ways;
        let slots = self.entries.get_mut(start..start + self.ways)?;
        // As in `take_lru_hits`: unrolled scans for the usual associativities.
        let dropped = match slots.len() {
            8 => lru_touch_or_shift(fixed::<8>(slots)?, line, dirty),
            16 => lru_touch_or_shift(fixed::<16>(slots)?, line, dirty),
            _ => lru_touch_or_shift(slots, line, dirty),
        }?;
        Some(split_entry(dropped))
    }

    /// Puts `line` in the front slot [`Level::lru_lookup_or_make_room`] freed.
    #[inline]
    pub(crate) fn lru_fill_front(&mut self, line: u64, dirty: bool) {
        let start = self.chunk_mut(self.set_of(line)) * self.ways;
        if let Some(front) = self.entries.get_mut(start) {
            *front = line | if dirty { DIRTY } else { 0 };
        }
    }

    /// Whether `line` is present, without touching the replacement state.
    pub(crate) fn contains(&self, line: u64) -> bool {
        let Some(chunk) = self.chunk(self.set_of(line)) else {
            return false;
        };
        let start = chunk * self.ways;
        self.entries[start..start + self.ways]
            .iter()
            .any(|e| e & LINE_MASK == line)
    }

    /// Inserts `line` (which must be absent); returns the evicted line and its dirty bit.
    #[inline]
    pub(crate) fn insert(&mut self, line: u64, dirty: bool) -> Option<(u64, bool)> {
        let set = self.chunk_mut(self.set_of(line));
        let entry = line | if dirty { DIRTY } else { 0 };
        let replacement = self.replacement;
        let victim = match replacement {
            Replacement::Lru | Replacement::Fifo => {
                let slots = self.slots(set);
                let mut i = slots.len() - 1;
                let victim = slots[i];
                while i > 0 {
                    slots[i] = slots[i - 1];
                    i -= 1;
                }
                slots[0] = entry;
                victim
            }
            Replacement::TreePlru | Replacement::Random => {
                let way = match self.slots(set).iter().position(|e| *e == INVALID) {
                    Some(w) => w,
                    None if replacement == Replacement::Random => self.random_way(),
                    None => self.plru_victim(set),
                };
                let slots = self.slots(set);
                let victim = slots[way];
                slots[way] = entry;
                if replacement == Replacement::TreePlru {
                    self.plru_touch(set, way);
                }
                victim
            }
        };
        (victim != INVALID).then_some((victim & LINE_MASK, victim & DIRTY != 0))
    }

    /// Removes `line` if present; returns its dirty bit.
    pub(crate) fn remove(&mut self, line: u64) -> Option<bool> {
        let set = self.chunk(self.set_of(line))?;
        let replacement = self.replacement;
        let slots = self.slots(set);
        let way = slots.iter().position(|e| e & LINE_MASK == line)?;
        let dirty = slots[way] & DIRTY != 0;
        match replacement {
            Replacement::Lru | Replacement::Fifo => {
                slots[way..].rotate_left(1);
                let last = slots.len() - 1;
                slots[last] = INVALID;
            }
            Replacement::TreePlru | Replacement::Random => slots[way] = INVALID,
        }
        Some(dirty)
    }

    /// Every dirty line in set order, cleaning it (for a final flush).
    pub(crate) fn take_dirty(&mut self) -> Vec<u64> {
        let chunks: Vec<usize> = match &self.sparse {
            None => (0..self.entries.len() / self.ways.max(1)).collect(),
            Some(chunks) => {
                let mut by_set: Vec<(usize, usize)> =
                    chunks.iter().map(|(&s, &c)| (s, c)).collect();
                by_set.sort_unstable();
                by_set.into_iter().map(|(_, c)| c).collect()
            }
        };
        let mut out = Vec::new();
        for chunk in chunks {
            for e in self.slots(chunk) {
                if *e != INVALID && *e & DIRTY != 0 {
                    *e &= LINE_MASK;
                    out.push(*e);
                }
            }
        }
        out
    }

    fn random_way(&mut self) -> usize {
        // xorshift64: fast, reproducible from the seed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % self.ways as u64) as usize
    }

    /// Points every tree node on the path to `way` away from it. Node `n` has children `2n`
    /// and `2n+1`; bit `n` set means "the victim is in the right subtree".
    fn plru_touch(&mut self, chunk: usize, way: usize) {
        let depth = self.ways.trailing_zeros();
        let mut node = 1usize;
        let bits = &mut self.plru[chunk];
        for level in (0..depth).rev() {
            let right = (way >> level) & 1;
            if right == 1 {
                *bits &= !(1u64 << node);
            } else {
                *bits |= 1u64 << node;
            }
            node = 2 * node + right;
        }
    }

    fn plru_victim(&self, chunk: usize) -> usize {
        let depth = self.ways.trailing_zeros();
        let bits = self.plru[chunk];
        let mut node = 1usize;
        let mut way = 0usize;
        for _ in 0..depth {
            let right = ((bits >> node) & 1) as usize;
            way = (way << 1) | right;
            node = 2 * node + right;
        }
        way
    }
}

/// Where [`Level::take_lru_hits`] stopped.
pub(crate) enum Stop {
    /// The accesses ran out.
    End,
    /// At an access it did not resolve (it spans lines, or it missed without `keep_room`).
    Other((u64, u32, bool, u32)),
    /// At a single-line miss, with room made in its set and the line that fell out.
    Missed((u64, u32, bool, u32), Option<(u64, bool)>),
}

/// `slots` as an array of `N` entries, when it has that many.
#[inline(always)]
fn fixed<const N: usize>(slots: &mut [u64]) -> Option<&mut [u64; N]> {
    slots.try_into().ok()
}

/// An entry as (line, dirty), or `None` for an empty slot.
fn split_entry(entry: u64) -> Option<(u64, bool)> {
    (entry != INVALID).then_some((entry & LINE_MASK, entry & DIRTY != 0))
}

/// Reverses a missed [`lru_touch_or_shift`] that dropped `dropped`.
fn undo_shift(slots: &mut [u64], dropped: u64) {
    if let Some((_, older)) = slots.split_first_mut() {
        if !older.is_empty() {
            older.rotate_left(1);
        }
        if let Some(last) = older.last_mut() {
            *last = dropped;
        }
    }
}

/// Finds `line` in an LRU-ordered set (most recent first). On a hit moves it to the front with
/// `dirty` or'ed in and returns `None`. On a miss every entry has moved down one place, the
/// front is free for the missing line, and the entry that fell off the end (`INVALID` when the
/// set was not full) is returned. One pass: entries shift while the scan goes on, so a hit
/// needs no second loop and a miss has already made room.
#[inline(always)]
fn lru_touch_or_shift(slots: &mut [u64], line: u64, dirty: u64) -> Option<u64> {
    let (front, older) = slots.split_first_mut()?;
    let mut carried = *front;
    if carried & LINE_MASK == line {
        *front = carried | dirty;
        return None;
    }
    for slot in older.iter_mut() {
        let here = std::mem::replace(slot, carried);
        if here & LINE_MASK == line {
            *front = here | dirty;
            return None;
        }
        carried = here;
    }
    Some(carried)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(spec: &str) -> Level {
        Level::new(&crate::parse_cache_spec(spec).unwrap()[0], 7)
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut l = level("L1=128:2:64"); // one set, 2 ways
        assert_eq!(l.insert(1, false), None);
        assert_eq!(l.insert(2, true), None);
        assert!(l.lookup(1, false));
        assert_eq!(l.insert(3, false), Some((2, true)));
        assert!(l.contains(1) && l.contains(3) && !l.contains(2));
        assert_eq!(l.remove(1), Some(false));
        assert_eq!(l.insert(4, false), None);
    }

    #[test]
    fn fifo_ignores_hits() {
        let mut l = level("L1=128:2:64:fifo");
        l.insert(1, false);
        l.insert(2, false);
        assert!(l.lookup(1, false));
        assert_eq!(l.insert(3, false), Some((1, false)));
    }

    #[test]
    fn tree_plru_follows_the_tree() {
        let mut l = level("L1=256:4:64:plru"); // one set, 4 ways
        for line in 0..4 {
            assert_eq!(l.insert(line, false), None);
        }
        // Fill order 0,1,2,3 points the root left, node 2 to way 0: way 0 (line 0) goes first.
        assert_eq!(l.insert(4, false), Some((0, false)));
        // Now way 0 was just used; the tree points right, at node 3's choice: way 2 (line 2).
        assert_eq!(l.insert(5, false), Some((2, false)));
        assert!(l.lookup(1, false));
        assert_eq!(l.insert(6, false), Some((3, false)));
    }

    #[test]
    fn random_is_reproducible() {
        let run = || {
            let mut l = level("L1=512:8:64:random");
            (0..100)
                .filter_map(|x| l.insert(x, false))
                .map(|v| v.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn a_huge_level_stores_only_the_sets_it_touches() {
        let mut l = level("L1=64G:1:64");
        assert!(l.sparse.is_some());
        for line in (0..4000u64).map(|i| i * 7919) {
            assert_eq!(l.insert(line, line % 2 == 0), None);
        }
        assert!(l.contains(7919) && !l.contains(1));
        assert!(l.entries.len() <= 4000);
        assert_eq!(l.take_dirty().len(), 2000);
        // A level of the usual size is stored whole.
        assert!(level("L1=32K:8:64").sparse.is_none());
    }

    /// One step of the storage comparison: insert, look up, remove or flush a line.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, bool),
        Lookup(u64, bool),
        Remove(u64),
        Flush,
        /// The LRU demand path: look up or make room, then fill.
        Demand(u64, bool),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..200, any::<bool>()).prop_map(|(l, d)| Op::Insert(l, d)),
            (0u64..200, any::<bool>()).prop_map(|(l, d)| Op::Lookup(l, d)),
            (0u64..200).prop_map(Op::Remove),
            Just(Op::Flush),
            (0u64..200, any::<bool>()).prop_map(|(l, d)| Op::Demand(l, d)),
        ]
    }

    fn apply(l: &mut Level, op: &Op) -> String {
        match *op {
            Op::Insert(line, dirty) if !l.contains(line) => format!("{:?}", l.insert(line, dirty)),
            Op::Insert(..) => "present".into(),
            Op::Lookup(line, dirty) => format!("{}", l.lookup(line, dirty)),
            Op::Remove(line) => format!("{:?}", l.remove(line)),
            Op::Flush => format!("{:?}", l.take_dirty()),
            Op::Demand(..) if l.replacement != Replacement::Lru => "not lru".into(),
            Op::Demand(line, dirty) => {
                let outcome = l.lru_lookup_or_make_room(line, dirty);
                if outcome.is_some() {
                    l.lru_fill_front(line, dirty);
                }
                format!("{outcome:?}")
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn sparse_storage_answers_as_dense_storage_does(
            ops in proptest::collection::vec(op(), 0..300),
            policy in 0usize..4,
        ) {
            let name = ["lru", "fifo", "plru", "random"][policy];
            let cfg = &crate::parse_cache_spec(&format!("L1=2K:4:64:{name}")).unwrap()[0];
            let mut dense = Level::with_storage(cfg, 7, false);
            let mut sparse = Level::with_storage(cfg, 7, true);
            for op in &ops {
                proptest::prop_assert_eq!(apply(&mut dense, op), apply(&mut sparse, op));
            }
            for line in 0..200 {
                proptest::prop_assert_eq!(dense.contains(line), sparse.contains(line));
            }
        }
    }
}
