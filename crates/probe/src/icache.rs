//! The instruction-cache probe: code of growing size rewritten in place in one executable
//! mapping, called a few times back to back, timed per unit of code.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::chase::point_from_samples;
use crate::code::{
    CodeKind, CodeRegion, Generated, LINE_BYTES, RewriteTimes, TargetTable, indirect_jump_lines,
    jump_chain, nop_function,
};
use crate::knee::Point;
use crate::timer::undisturbed_samples;
use crate::{ProbeError, Timer};

/// Back-to-back calls per timed sample (the paper's 5).
pub const CALLS_PER_SAMPLE: u32 = 5;

/// The code of `size_bytes` for `kind`, and the number of units (bytes or lines) one call runs.
pub fn generate(
    kind: CodeKind,
    size_bytes: usize,
    rng: &mut rand::rngs::SmallRng,
) -> Result<(Generated, usize), ProbeError> {
    Ok(match kind {
        CodeKind::NopBody => (nop_function(size_bytes), (size_bytes / 4 * 4).max(1)),
        CodeKind::JumpChain | CodeKind::RandomJumpChain => {
            let lines = (size_bytes / LINE_BYTES).max(1);
            let mut order: Vec<u32> = (0..lines as u32).collect();
            if kind == CodeKind::RandomJumpChain {
                order.shuffle(rng);
            }
            (jump_chain(&order)?, lines)
        }
        CodeKind::IndirectJumpChain => {
            let lines = (size_bytes / LINE_BYTES).max(1);
            (indirect_jump_lines(lines), lines)
        }
    })
}

/// Lines that share an L1i set on every current x86-64 core: an L1 indexed by virtual
/// address bits inside a 4 KiB page (VIPT, the rule that keeps it free of aliases) has at
/// most 64 sets of 64-byte lines, so lines a multiple of 4 KiB apart always share a set.
const LINES_PER_PAGE: usize = 4096 / LINE_BYTES;

/// A new visiting order of `lines` lines for an indirect jump chain: the lines at one offset
/// within the 4 KiB pages (one set's, or part of one) always in ascending address order,
/// the offsets interleaved at random.
///
/// Each set then sees the same cyclic order every call, so a cache of `C` bytes keeps every
/// line up to `C` and misses past it by its replacement policy alone (all misses under LRU),
/// while each line's successor is a random line of about the same page: no predictor can
/// know it, and the pages advance together, so neither the page walks of a growing code
/// size nor crossings of pages change the time per line below the capacity.
pub fn interleaved_order(lines: usize, rng: &mut rand::rngs::SmallRng, order: &mut Vec<u32>) {
    order.clear();
    order.extend((0..lines).map(|line| (line % LINES_PER_PAGE) as u32));
    order.shuffle(rng);
    let mut next: [u32; LINES_PER_PAGE] = std::array::from_fn(|offset| offset as u32);
    for slot in order.iter_mut() {
        let offset = *slot as usize;
        *slot = next[offset];
        next[offset] += LINES_PER_PAGE as u32;
    }
}

/// Rewrites, warms and times code of one size.
#[derive(Debug)]
pub struct CodeProbe {
    region: CodeRegion,
    rng: rand::rngs::SmallRng,
    /// One table per call of a sample, refilled in a new order before every sample.
    tables: Vec<TargetTable>,
    order: Vec<u32>,
}

/// One measured code size with the time its rewrite took.
#[derive(Debug, Clone, Copy)]
pub struct CodeSample {
    /// Nanoseconds per unit (per byte of NOP body, per line of jump chain).
    pub point: Point,
    /// Time of the in-place rewrite.
    pub rewrite: RewriteTimes,
    /// Time of all timed calls, in seconds.
    pub exec_s: f64,
}

impl CodeProbe {
    /// A probe whose mapping holds code up to `max_bytes`.
    pub fn new(max_bytes: usize, seed: u64) -> Result<CodeProbe, ProbeError> {
        Ok(CodeProbe {
            region: CodeRegion::new(max_bytes + 4 * LINE_BYTES)?,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
            tables: (0..CALLS_PER_SAMPLE)
                .map(|_| TargetTable::default())
                .collect(),
            order: Vec::new(),
        })
    }

    /// The code mapping, for huge-page reports.
    pub fn region(&self) -> &CodeRegion {
        &self.region
    }

    /// Rewrites the mapping with `kind` code of `size_bytes`, calls it once to warm it, then
    /// takes `repeats` samples of [`CALLS_PER_SAMPLE`] calls. Table-driven code gets new
    /// orders (`interleaved_order`) before every sample, outside the timed calls.
    pub fn measure(
        &mut self,
        timer: &Timer,
        kind: CodeKind,
        size_bytes: usize,
        repeats: u32,
    ) -> Result<CodeSample, ProbeError> {
        let (code, units) = generate(kind, size_bytes, &mut self.rng)?;
        let rewrite = self.region.rewrite(&code)?;
        let with_tables = kind == CodeKind::IndirectJumpChain;
        let mut exec_ns = 0.0;
        let mut failed = None;
        let CodeProbe {
            region,
            rng,
            tables,
            order,
        } = self;
        let mut refill = |tables: &mut [TargetTable]| -> Result<(), ProbeError> {
            for table in tables.iter_mut() {
                interleaved_order(units, rng, order);
                region.fill_targets(order, table)?;
            }
            Ok(())
        };
        let run = |tables: &[TargetTable]| {
            if with_tables {
                tables.iter().for_each(|t| region.call_with(t));
            } else {
                (0..CALLS_PER_SAMPLE).for_each(|_| region.call());
            }
        };
        if with_tables {
            refill(tables)?;
        }
        run(&tables[..1]);
        let samples = undisturbed_samples(repeats, &mut || {
            if with_tables && let Err(e) = refill(tables) {
                failed = Some(e);
            }
            let ns = timer.time_ns(|| run(tables));
            exec_ns += ns;
            ns / f64::from(CALLS_PER_SAMPLE) / units as f64
        });
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(CodeSample {
            point: point_from_samples(size_bytes as u64, samples),
            rewrite,
            exec_s: exec_ns * 1e-9,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_kind_runs_and_is_timed_per_unit() {
        let timer = Timer::calibrate(Duration::from_millis(5));
        let mut probe = CodeProbe::new(64 * 1024, 9).unwrap();
        for kind in [
            CodeKind::NopBody,
            CodeKind::JumpChain,
            CodeKind::RandomJumpChain,
            CodeKind::IndirectJumpChain,
        ] {
            for size in [0usize, 400, 4000, 16 * 1024] {
                let sample = probe.measure(&timer, kind, size, 3).unwrap();
                assert!(sample.point.value >= 0.0, "{kind:?} {size}: {sample:?}");
                assert!(sample.exec_s >= 0.0);
            }
        }
        assert!(
            probe
                .measure(&timer, CodeKind::NopBody, 1 << 30, 1)
                .is_err()
        );
    }

    #[test]
    fn random_chains_are_permutations_and_nop_units_are_bytes() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let (code, units) = generate(CodeKind::RandomJumpChain, 4096, &mut rng).unwrap();
        assert_eq!((code.bytes().len(), units), (4096, 64));
        let (code, units) = generate(CodeKind::NopBody, 402, &mut rng).unwrap();
        assert_eq!((code.bytes().len(), units), (406, 400));
    }

    #[test]
    fn interleaved_orders_keep_each_page_offset_in_address_order() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for lines in [0usize, 1, 63, 64, 65, 1000] {
            interleaved_order(lines, &mut rng, &mut first);
            let mut sorted = first.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..lines as u32).collect::<Vec<_>>(), "{lines}");
            for offset in 0..LINES_PER_PAGE as u32 {
                let same: Vec<u32> = first
                    .iter()
                    .copied()
                    .filter(|l| l % LINES_PER_PAGE as u32 == offset)
                    .collect();
                assert!(same.windows(2).all(|w| w[0] < w[1]), "{lines}: {same:?}");
            }
        }
        // A new interleaving every time: successors change, so jumps cannot be predicted.
        interleaved_order(1000, &mut rng, &mut first);
        interleaved_order(1000, &mut rng, &mut second);
        let successor = |order: &[u32]| {
            let mut next = vec![u32::MAX; order.len()];
            for w in order.windows(2) {
                next[w[0] as usize] = w[1];
            }
            next
        };
        let (a, b) = (successor(&first), successor(&second));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 50, "{same} of 1000 lines kept their successor");
    }
}
