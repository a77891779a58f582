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

    /// Lays a random cycle over the first `size_bytes` and returns its start and length.
    fn build(&mut self, size_bytes: usize) -> Result<(*const usize, usize), ProbeError> {
        if size_bytes > self.capacity() {
            return Err(ProbeError::Invalid(format!(
                "footprint {size_bytes} exceeds the chase buffer ({} bytes)",
                self.capacity()
            )));
        }
        let lines = (size_bytes / CHASE_STRIDE_BYTES).max(1);
        let mut order: Vec<usize> = (0..lines).collect();
        order.shuffle(&mut self.rng);
        let base = self.mapping.as_ptr();
        for (i, &line) in order.iter().enumerate() {
            let next = order[(i + 1) % lines];
            // SAFETY: both offsets are below lines * 64 <= capacity, inside the writable
            // mapping, and 64-byte aligned, so the usize store is aligned.
            unsafe {
                let slot = base.add(line * CHASE_STRIDE_BYTES).cast::<usize>();
                slot.write(base.add(next * CHASE_STRIDE_BYTES) as usize);
            }
        }
        let start = base
            .wrapping_add(order[0] * CHASE_STRIDE_BYTES)
            .cast::<usize>();
        Ok((start.cast_const(), lines))
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
        let (start, lines) = self.build(size_bytes)?;
        let loads = loads.max(64);
        // SAFETY: `start` begins a cycle `build` just wrote, every element of which points to
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
        let (start, lines) = buffer.build(4096).unwrap();
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
