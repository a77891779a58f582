//! The data-cache probe: dependent loads through a random cyclic permutation of cache lines,
//! so neither the prefetchers nor out-of-order execution can hide a miss, grouped by page so
//! that the data TLB's reach does not pass for a cache level.

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
            .map(|_| page_grouped_order(lines, &mut self.rng))
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
        // SAFETY: `start` begins a walk `build` just wrote.
        let samples = unsafe { time_walk(timer, start, lines, (loads, repeats)) };
        Ok(point_from_samples(size_bytes as u64, samples))
    }

    /// Nanoseconds per dependent load through one line in each of `pages` 4 KiB pages, the
    /// pages in a free random order: the data TLB's curve. The line's offset in its page
    /// turns with the page number, so the lines spread over every cache set and stay in the
    /// L2 while the pages outgrow the TLB.
    pub fn measure_pages(
        &mut self,
        timer: &Timer,
        pages: usize,
        (loads, repeats): (usize, u32),
    ) -> Result<Point, ProbeError> {
        let pages = pages.max(1);
        let span_bytes = pages.saturating_mul(TLB_PAGE_BYTES);
        if span_bytes > self.capacity() {
            return Err(ProbeError::Invalid(format!(
                "{pages} pages exceed the chase buffer ({} bytes)",
                self.capacity()
            )));
        }
        let mut order: Vec<usize> = (0..pages).collect();
        order.shuffle(&mut self.rng);
        let base = self.mapping.as_ptr();
        let lines_per_page = TLB_PAGE_BYTES / CHASE_STRIDE_BYTES;
        let slot = |page: usize| {
            base.wrapping_add(page * TLB_PAGE_BYTES + page % lines_per_page * CHASE_STRIDE_BYTES)
        };
        for (i, &page) in order.iter().enumerate() {
            let next = slot(order[(i + 1) % pages]);
            // SAFETY: page < pages and span_bytes <= capacity, so the slot lies inside the
            // writable mapping, at a multiple of 64: the store is aligned.
            unsafe { slot(page).cast::<usize>().write(next as usize) };
        }
        let start = slot(order[0]).cast::<usize>().cast_const();
        // SAFETY: `start` begins the cycle just written.
        let samples = unsafe { time_walk(timer, start, pages, (loads, repeats)) };
        Ok(point_from_samples(span_bytes as u64, samples))
    }
}

/// Bytes of a page as the data TLB caches it in a guest: the host's base page, whatever the
/// guest's own page size.
pub const TLB_PAGE_BYTES: usize = 4096;

/// Per-load times of `repeats` walks of `loads` loads from `start`, after a warming walk.
///
/// # Safety
/// `start` must begin a cycle of `cycle_len` pointers that stays inside readable memory.
unsafe fn time_walk(
    timer: &Timer,
    start: *const usize,
    cycle_len: usize,
    (loads, repeats): (usize, u32),
) -> Vec<f64> {
    let loads = loads.max(64);
    // SAFETY: the caller guarantees the cycle. Building it touched every line already; a
    // short walk settles the replacement state without paying a full pass of misses over
    // footprints far beyond the caches.
    let mut p = unsafe { chase(start, cycle_len.min(1 << 16)) };
    let samples = undisturbed_samples(repeats, &mut || {
        let t0 = timer.start();
        // SAFETY: as above; `p` is an element of the same cycle.
        p = unsafe { chase(p, loads) };
        let t1 = timer.stop();
        timer.elapsed_ns(t0, t1) / loads as f64
    });
    std::hint::black_box(p);
    samples
}

/// Lines of a 4 KiB page visited together in one round of a walk (see [`page_grouped_order`]).
pub(crate) const LINES_PER_VISIT: usize = 8;

/// Visits of different pages mixed together: at most this many pages are live at once.
pub(crate) const PAGES_PER_GROUP: usize = 32;

/// A random order of `lines` cache lines that keeps the data TLB out of the curve.
///
/// A free shuffle touches a new page on nearly every load. Past the TLB's reach every load
/// then pays a page walk, and a guest's nested translation is cached at the host's 4 KiB
/// pages whatever the guest's own page size: 2048 entries reach 8 MiB, which a free shuffle
/// shows as a sharp step that looks like the last-level cache ending. So each page's lines are
/// shuffled and cut into visits of [`LINES_PER_VISIT`]; the visits are shuffled, and every
/// [`PAGES_PER_GROUP`] consecutive visits are shuffled together. At most 32 pages are live at
/// once (within the first-level data TLB of current x86 cores, 64 to 96 entries) and a page
/// is entered once per 8 loads, so past the TLB's reach a load pays an eighth of a walk. A
/// visit is 8 random lines of 64, so a prefetcher that fetches a page's other lines mostly
/// fetches lines the walk reaches much later. Every line still appears exactly once: the
/// reuse distance of every line is the whole footprint, as in a free shuffle.
pub(crate) fn page_grouped_order(lines: usize, rng: &mut impl rand::Rng) -> Vec<usize> {
    const LINES_PER_PAGE: usize = TLB_PAGE_BYTES / CHASE_STRIDE_BYTES;
    let mut by_page: Vec<usize> = (0..lines).collect();
    for page in by_page.chunks_mut(LINES_PER_PAGE) {
        page.shuffle(rng);
    }
    // LINES_PER_PAGE is a multiple of LINES_PER_VISIT, so no visit spans two pages.
    let mut visits: Vec<&[usize]> = by_page.chunks(LINES_PER_VISIT).collect();
    visits.shuffle(rng);
    let mut order = Vec::with_capacity(lines);
    for group in visits.chunks(PAGES_PER_GROUP) {
        let start = order.len();
        group
            .iter()
            .for_each(|visit| order.extend_from_slice(visit));
        order[start..].shuffle(rng);
    }
    order
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
    fn page_grouped_orders_hold_every_line_once_and_few_pages_at_a_time() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for lines in [1, 7, 64, 100, 4096, 64 * 1000 + 13] {
            let order = page_grouped_order(lines, &mut rng);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..lines).collect::<Vec<_>>(), "{lines} lines");
            if lines % LINES_PER_VISIT != 0 {
                // A short visit shifts the groups' boundaries in the order.
                continue;
            }
            for group in order.chunks(LINES_PER_VISIT * PAGES_PER_GROUP) {
                let mut pages: Vec<usize> = group.iter().map(|line| line / 64).collect();
                pages.sort_unstable();
                pages.dedup();
                assert!(pages.len() <= PAGES_PER_GROUP, "{} pages", pages.len());
            }
        }
        let order = page_grouped_order(64 * 1000, &mut rng);
        let page_changes = order.windows(2).filter(|w| w[0] / 64 != w[1] / 64).count();
        assert!(
            page_changes > order.len() / 2,
            "lines of one page are not walked in a run: {page_changes} page changes"
        );
        assert_ne!(order, page_grouped_order(64 * 1000, &mut rng));
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
    fn page_walks_time_one_line_a_page_and_refuse_more_pages_than_the_buffer() {
        let timer = Timer::calibrate(Duration::from_millis(5));
        let mut buffer = ChaseBuffer::new(1 << 21, 2).unwrap();
        let point = buffer.measure_pages(&timer, 300, (10_000, 3)).unwrap();
        assert_eq!(point.size_bytes, 300 * 4096);
        assert!(point.value > 0.0 && point.value <= point.median);
        let err = buffer.measure_pages(&timer, 513, (10, 1)).unwrap_err();
        assert!(err.is_bad_input(), "{err}");
    }

    #[test]
    fn points_keep_the_minimum_and_the_median() {
        let p = point_from_samples(64, vec![3.0, 1.0, 2.0]);
        assert_eq!((p.value, p.median), (1.0, 2.0));
    }
}
