//! The instruction-cache probe: code of growing size rewritten in place in one executable
//! mapping, called a few times back to back, timed per unit of code.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::chase::point_from_samples;
use crate::code::{
    CodeKind, CodeRegion, Generated, LINE_BYTES, RewriteTimes, jump_chain, nop_function,
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
    })
}

/// Rewrites, warms and times code of one size.
#[derive(Debug)]
pub struct CodeProbe {
    region: CodeRegion,
    rng: rand::rngs::SmallRng,
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
        })
    }

    /// The code mapping, for huge-page reports.
    pub fn region(&self) -> &CodeRegion {
        &self.region
    }

    /// Rewrites the mapping with `kind` code of `size_bytes`, calls it once to warm it, then
    /// takes `repeats` samples of [`CALLS_PER_SAMPLE`] calls.
    pub fn measure(
        &mut self,
        timer: &Timer,
        kind: CodeKind,
        size_bytes: usize,
        repeats: u32,
    ) -> Result<CodeSample, ProbeError> {
        let (code, units) = generate(kind, size_bytes, &mut self.rng)?;
        let rewrite = self.region.rewrite(&code)?;
        self.region.call();
        let mut exec_ns = 0.0;
        let region = &self.region;
        let samples = undisturbed_samples(repeats, &mut || {
            let ns = timer.time_ns(|| {
                for _ in 0..CALLS_PER_SAMPLE {
                    region.call();
                }
            });
            exec_ns += ns;
            ns / f64::from(CALLS_PER_SAMPLE) / units as f64
        });
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
}
