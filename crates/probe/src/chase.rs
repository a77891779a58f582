//! The data-cache probe: dependent loads through a random cyclic permutation of cache lines,
//! so neither the prefetchers nor out-of-order execution can hide a miss.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::knee::Point;
use crate::mem::Mapping;
use crate::timer::undisturbed_samples;
use crate::{ProbeError, Timer};

/// Distance between two chased pointers: one per cache line.
pub const CHASE_STRIDE_BYTES: usize = 64;

/// Most rounds of a walk: one pointer per 8 bytes of a line.
pub const MAX_ROUNDS: usize = CHASE_STRIDE_BYTES / size_of::<usize>();

/// A buffer that holds a pointer-chasing cycle over its first `size` bytes.
#[derive(Debug)]
pub struct ChaseBuffer {
    mapping: Mapping,
    rng: rand::rngs::SmallRng,
}

impl ChaseBuffer {
    /// Room for cycles up to `max_bytes`; `seed` fixes the permutations.
    pub fn new(max_bytes: usize, seed: u64) -> Result<ChaseBuffer, ProbeError> {
        Ok(ChaseBuffer {
            mapping: Mapping::new(max_bytes)?,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
        })
    }

    /// The largest footprint this buffer can hold.
    pub fn capacity(&self) -> usize {
        self.mapping.len()
    }

    /// KiB of the buffer on huge pages.
    pub fn huge_page_kib(&self) -> Option<u64> {
        self.mapping.huge_page_kib()
    }

    /// Lays a random walk over the first `size_bytes` and returns its start and length in
    /// loads: `rounds` rounds (at most [`MAX_ROUNDS`]), each visiting every line once in its
    /// own random order through the pointer at offset `8 * round` of the line, the last
    /// round leading back to the first. One round is a cyclic walk: every line's reuse comes
    /// after all the others.
    fn build(
        &mut self,
        size_bytes: usize,
        rounds: usize,
    ) -> Result<(*const usize, usize), ProbeError> {
        if size_bytes > self.capacity() {
            return Err(ProbeError::Invalid(format!(
                "footprint {size_bytes} exceeds the chase buffer ({} bytes)",
                self.capacity()
            )));
        }
        let rounds = rounds.clamp(1, MAX_ROUNDS);
        let lines = (size_bytes / CHASE_STRIDE_BYTES).max(1);
        let orders: Vec<Vec<usize>> = (0..rounds)
            .map(|_| {
                let mut order: Vec<usize> = (0..lines).collect();
                order.shuffle(&mut self.rng);
                order
            })
            .collect();
        let base = self.mapping.as_ptr();
        let slot = |line: usize, round: usize| {
            base.wrapping_add(line * CHASE_STRIDE_BYTES + round * size_of::<usize>())
        };
        for (round, order) in orders.iter().enumerate() {
            for (i, &line) in order.iter().enumerate() {
                let next = match order.get(i + 1) {
                    Some(&next) => slot(next, round),
                    None => slot(orders[(round + 1) % rounds][0], (round + 1) % rounds),
                };
                // SAFETY: every slot lies below lines * 64 <= capacity, inside the writable
                // mapping, at a multiple of 8 (MAX_ROUNDS * 8 <= 64), so the store is aligned.
                unsafe { slot(line, round).cast::<usize>().write(next as usize) };
            }
        }
        Ok((
            slot(orders[0][0], 0).cast::<usize>().cast_const(),
            lines * rounds,
        ))
    }

    /// Nanoseconds per dependent load at footprint `size_bytes`: the minimum and the median
    /// of `repeats` timings of `loads` loads each, after a warming walk (a whole pass up to
    /// 64 Ki lines).
    pub fn measure(
        &mut self,
        timer: &Timer,
        size_bytes: usize,
        loads: usize,
        repeats: u32,
    ) -> Result<Point, ProbeError> {
        self.measure_rounds(timer, size_bytes, (loads, repeats), 1)
    }

    /// As [`ChaseBuffer::measure`], over a walk of `rounds` rounds in different orders
    /// (see `build`): beside the cyclic walk it tells the replacement policy (see
    /// [`crate::replacement_from_walks`]).
    pub fn measure_rounds(
        &mut self,
        timer: &Timer,
        size_bytes: usize,
        (loads, repeats): (usize, u32),
        rounds: usize,
    ) -> Result<Point, ProbeError> {
        let (start, lines) = self.build(size_bytes, rounds)?;
        let loads = loads.max(64);
        // SAFETY: `start` begins a walk `build` just wrote, every element of which points to
        // another element inside the mapping, so any number of steps stays inside it.
        // Building the cycle touched every line already; a short walk settles the replacement
        // state without paying a full pass of misses over footprints far beyond the caches.
        let mut p = unsafe { chase(start, lines.min(1 << 16)) };
        let samples = undisturbed_samples(repeats, &mut || {
            let t0 = timer.start();
            // SAFETY: as above; `p` is an element of the same cycle.
            p = unsafe { chase(p, loads) };
            let t1 = timer.stop();
            timer.elapsed_ns(t0, t1) / loads as f64
        });
        std::hint::black_box(p);
        Ok(point_from_samples(size_bytes as u64, samples))
    }
}

/// A curve point from repeated samples: the minimum as the value, the median beside it.
pub fn point_from_samples(size_bytes: u64, mut samples: Vec<f64>) -> Point {
    samples.sort_by(f64::total_cmp);
    Point {
        size_bytes,
        value: samples.first().copied().unwrap_or(f64::NAN),
        median: samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN),
    }
}

/// Follows `n` (rounded up to 8) pointers from `p` and returns where it ended.
///
/// # Safety
/// `p` must start a cycle of pointers that stays inside readable memory.
#[inline(never)]
unsafe fn chase(mut p: *const usize, n: usize) -> *const usize {
    for _ in 0..n.div_ceil(8) {
        for _ in 0..8 {
            // SAFETY: the caller guarantees every pointer in the cycle is readable.
            p = unsafe { *p } as *const usize;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cycles_cover_every_line_once() {
        let mut buffer = ChaseBuffer::new(64 * 1024, 3).unwrap();
        let (start, lines) = buffer.build(4096, 1).unwrap();
        assert_eq!(lines, 64);
        let mut seen = std::collections::HashSet::new();
        let mut p = start;
        for _ in 0..lines {
            assert!(seen.insert(p as usize));
            // SAFETY: the cycle was just built inside the buffer.
            p = unsafe { *p } as *const usize;
        }
        assert_eq!(
            p, start,
            "the cycle closes after every line was visited once"
        );
    }

    #[test]
    fn walks_of_rounds_visit_every_line_once_a_round_in_new_orders() {
        let mut buffer = ChaseBuffer::new(64 * 1024, 5).unwrap();
        let (start, loads) = buffer.build(4096, 4).unwrap();
        assert_eq!(loads, 256);
        let mut p = start;
        let mut rounds: Vec<Vec<usize>> = vec![Vec::new(); 4];
        for _ in 0..loads {
            let offset = p as usize - buffer.mapping.as_ptr() as usize;
            rounds[offset % 64 / 8].push(offset / 64);
            // SAFETY: the walk was just built inside the buffer.
            p = unsafe { *p } as *const usize;
        }
        assert_eq!(p, start, "the walk closes after its last round");
        for order in &rounds {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..64).collect::<Vec<_>>());
        }
        assert_ne!(rounds[0], rounds[1]);
        assert_eq!(buffer.build(4096, 100).unwrap().1, 64 * MAX_ROUNDS);
    }

    #[test]
    fn measuring_gives_positive_times_and_refuses_oversized_footprints() {
        let timer = Timer::calibrate(Duration::from_millis(5));
        let mut buffer = ChaseBuffer::new(1 << 20, 1).unwrap();
        let point = buffer.measure(&timer, 16 * 1024, 10_000, 3).unwrap();
        assert!(
            point.value > 0.0 && point.value <= point.median,
            "{point:?}"
        );
        assert!(
            buffer
                .measure(&timer, 1 << 30, 10, 1)
                .unwrap_err()
                .is_bad_input()
        );
    }

    #[test]
    fn points_keep_the_minimum_and_the_median() {
        let p = point_from_samples(64, vec![3.0, 1.0, 2.0]);
        assert_eq!((p.value, p.median), (1.0, 2.0));
    }
}
