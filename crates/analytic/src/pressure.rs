//! Whether a cache level can have conflict misses at all. A set that never receives more than
//! `ways` distinct lines over the whole run never evicts under LRU, so when that holds for every
//! set the conflict sets of every reference are empty, and the costliest part of the model (the
//! evicting instances, the tag maps and the peel, S21–S55) can be skipped. This is the common
//! case at the levels that hold a kernel's data: the 3D stencil at 12 × 12 spends 60 % of each
//! level in those steps only to find nothing.
//!
//! The bound is exact per set for the lines the kernel's references can touch: each position's
//! lowest and highest address (two integer programs at the concrete parameters), merged into
//! disjoint line intervals, then for each set the number of lines of those intervals that map to
//! it. Lines inside an interval that no reference touches (a strided walk, an untouched row tail)
//! are counted too, so the bound can only overestimate: the skip is never taken wrongly.

use loopscope_polyhedral::Ctx;

use crate::AnalyticError;
use crate::program::{Cache, Position, Program};
use crate::text::{address, domain, params, tuple};

/// The largest number of distinct lines any one set of `cache` can receive from `positions`,
/// or `None` when it is not known: the program has symbolic parameters (the sets are built for
/// every value at once) or a reference's addresses are unbounded.
pub(crate) fn most_lines_in_a_set(
    ctx: &Ctx,
    program: &Program,
    positions: &[Position],
    cache: Cache,
) -> Result<Option<i128>, AnalyticError> {
    if !program.params.is_empty() {
        return Ok(None);
    }
    let mut lines = Vec::with_capacity(positions.len());
    for p in positions {
        let text = format!(
            "{} -> {{ [{}] -> [a__] : {} and a__ = {} }}",
            params(program),
            tuple("u", p).join(", "),
            domain(p, "u"),
            address(p, &program.arrays[p.array], "u")
        );
        let range = ctx.map(&text)?.range()?;
        match range.dim_range(0)? {
            Some((lo, hi)) => lines.push((
                i128::from(lo).div_euclid(i128::from(cache.line_bytes)),
                i128::from(hi).div_euclid(i128::from(cache.line_bytes)),
            )),
            None if range.is_empty()? => {}
            None => return Ok(None),
        }
    }
    Ok(Some(most_in_a_set(merge(lines), i128::from(cache.sets))))
}

/// Sorted, disjoint intervals covering the same lines.
fn merge(mut intervals: Vec<(i128, i128)>) -> Vec<(i128, i128)> {
    intervals.sort_unstable();
    let mut out: Vec<(i128, i128)> = Vec::with_capacity(intervals.len());
    for (lo, hi) in intervals {
        match out.last_mut() {
            Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The largest number of lines of `intervals` that share one set (line mod `sets`).
fn most_in_a_set(intervals: Vec<(i128, i128)>, sets: i128) -> i128 {
    // An interval holds `len / sets` lines of every set and one more of the `len % sets` sets
    // from its first line's set on (wrapping around): a difference array over the sets adds the
    // extra ones in O(intervals + sets).
    let mut base = 0i128;
    let mut extra = vec![0i128; sets as usize + 1];
    for (lo, hi) in intervals {
        let len = hi - lo + 1;
        base += len / sets;
        let (first, rest) = (lo.rem_euclid(sets), len % sets);
        let end = first + rest;
        if end <= sets {
            extra[first as usize] += 1;
            extra[end as usize] -= 1;
        } else {
            extra[first as usize] += 1;
            extra[sets as usize] -= 1;
            extra[0] += 1;
            extra[(end - sets) as usize] -= 1;
        }
    }
    let mut running = 0;
    let mut most = 0;
    for e in &extra[..sets as usize] {
        running += e;
        most = most.max(running);
    }
    base + most
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same count by walking every line.
    fn by_walking(intervals: &[(i128, i128)], sets: i128) -> i128 {
        let mut per_set = vec![0i128; sets as usize];
        for &(lo, hi) in intervals {
            for l in lo..=hi {
                per_set[l.rem_euclid(sets) as usize] += 1;
            }
        }
        per_set.into_iter().max().unwrap_or(0)
    }

    #[test]
    fn merging_joins_touching_and_overlapping_intervals() {
        assert_eq!(
            merge(vec![(10, 12), (0, 3), (4, 5), (11, 20), (30, 30)]),
            vec![(0, 5), (10, 20), (30, 30)]
        );
    }

    #[test]
    fn lines_per_set_match_a_walk_over_the_lines() {
        let cases: &[(&[(i128, i128)], i128)] = &[
            (&[(0, 63)], 64),
            (&[(0, 64)], 64),
            (&[(5, 200)], 64),
            (&[(60, 70), (100, 130)], 64),
            (&[(3, 3), (67, 67), (131, 131)], 64),
            (&[(-7, 9)], 4),
            (&[], 8),
        ];
        for &(intervals, sets) in cases {
            assert_eq!(
                most_in_a_set(intervals.to_vec(), sets),
                by_walking(intervals, sets),
                "{intervals:?} in {sets} sets"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn lines_per_set_match_a_walk_for_any_intervals(
            raw in proptest::collection::vec((-300i128..300, 0i128..200), 0..6),
            sets in 1i128..40,
        ) {
            let intervals = merge(raw.into_iter().map(|(lo, len)| (lo, lo + len)).collect());
            proptest::prop_assert_eq!(
                most_in_a_set(intervals.clone(), sets),
                by_walking(&intervals, sets)
            );
        }
    }
}
