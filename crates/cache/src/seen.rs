//! The lines a level has ever brought in, one bit each: enough to tell a compulsory miss from
//! the others without the stack-distance tracker, which must be updated on every access, hits
//! included. This set is consulted on misses and on lines arriving from above only: a hit's
//! line is in the cache, so it was marked when it came in. A line is marked when the level
//! allocates it, not when an access it does not keep (a no-write-allocate store) passes by:
//! such a line was never brought in, so its next miss is still compulsory.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::Range;

use crate::stack::LineHasher;

/// The most lines a dense bitmap covers: 2^27 lines (16 MiB of bits, 8 GiB of addresses with
/// 64-byte lines). Arrays spread wider (far-apart `--base` addresses) are kept sparsely.
const DENSE_LINES_CAP: u64 = 1 << 27;

/// At most this many 64-line words are reserved ahead in the sparse map (16 MiB).
const SPARSE_RESERVE_CAP: u64 = 1 << 20;

/// One bit per line seen: a bitmap over the range of lines the kernel's arrays span, when
/// known and small enough, and a map of 64-line words for every other line (a trace's, or a
/// subscript outside its array).
#[derive(Debug, Clone, Default)]
pub(crate) struct SeenLines {
    first_line: u64,
    dense: Vec<u64>,
    sparse: HashMap<u64, u64, BuildHasherDefault<LineHasher>>,
}

impl SeenLines {
    /// A set sized for `arrays` (address ranges) at lines of `1 << line_shift` bytes, so that
    /// marking their lines does not allocate.
    pub(crate) fn for_arrays(arrays: &[Range<u64>], line_shift: u32) -> SeenLines {
        let lines = |r: &Range<u64>| {
            let first = r.start >> line_shift;
            let end = r.end.saturating_add((1 << line_shift) - 1) >> line_shift;
            first..end.max(first)
        };
        let mut seen = SeenLines::default();
        let Some(first) = arrays.iter().map(|r| lines(r).start).min() else {
            return seen;
        };
        let end = arrays.iter().map(|r| lines(r).end).max().unwrap_or(first);
        if end - first <= DENSE_LINES_CAP {
            seen.first_line = first;
            seen.dense = vec![0; (end - first).div_ceil(64) as usize];
        } else {
            let words: u64 = arrays
                .iter()
                .map(|r| lines(r).end - lines(r).start)
                .sum::<u64>()
                / 64;
            seen.sparse.reserve(words.min(SPARSE_RESERVE_CAP) as usize);
        }
        seen
    }

    /// Marks `line` seen; true when it was not before.
    #[inline]
    pub(crate) fn first_touch(&mut self, line: u64) -> bool {
        let offset = line.wrapping_sub(self.first_line);
        let dense = usize::try_from(offset / 64)
            .ok()
            .filter(|&w| w < self.dense.len());
        // Dense words start at `first_line`, sparse ones at a multiple of 64.
        let (word, bit) = match dense {
            Some(w) => (&mut self.dense[w], offset % 64),
            None => (self.sparse.entry(line / 64).or_insert(0), line % 64),
        };
        let mask = 1u64 << bit;
        let first = *word & mask == 0;
        *word |= mask;
        first
    }

    /// Whether `line` was marked seen.
    #[inline]
    pub(crate) fn contains(&self, line: u64) -> bool {
        let offset = line.wrapping_sub(self.first_line);
        let bit = match usize::try_from(offset / 64)
            .ok()
            .and_then(|w| self.dense.get(w))
        {
            Some(w) => (*w >> (offset % 64)) & 1,
            None => (self.sparse.get(&(line / 64))).map_or(0, |w| (*w >> (line % 64)) & 1),
        };
        bit == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_new_once_inside_and_outside_the_bitmap() {
        let mut seen = SeenLines::for_arrays(&[1000..5000, 9000..9100], 6);
        assert!(!seen.dense.is_empty());
        let lines = [15u64, 16, 78, 142, 0, 1, 1 << 40, u64::MAX, 15 + 64];
        for &line in &lines {
            assert!(!seen.contains(line), "{line}");
            assert!(seen.first_touch(line), "{line}");
            assert!(seen.contains(line), "{line}");
        }
        for &line in &lines {
            assert!(!seen.first_touch(line), "{line}");
        }
        assert!(!seen.contains(17) && !seen.contains(1 << 41));
    }

    #[test]
    fn arrays_far_apart_are_kept_sparsely() {
        let mut seen = SeenLines::for_arrays(&[0..4096, (1 << 45)..(1 << 45) + 4096], 6);
        assert!(seen.dense.is_empty());
        assert!(seen.first_touch(1 << 39));
        assert!(!seen.first_touch(1 << 39));
        assert!(seen.first_touch(3));
    }
}
