//! The peak floating-point kernel: independent FMA chains, enough of them to cover the FMA
//! latency on every pipe, so throughput (not latency) limits the rate.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::simd::Simd;
use crate::threads::on_each_cpu;

/// Independent accumulators: FMA latency (4-5 cycles) times two pipes, with margin.
pub const ACCUMULATORS: usize = 12;

/// Floating-point precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 64-bit.
    Dp,
    /// 32-bit.
    Sp,
}

/// One achieved FLOP rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlopsSample {
    /// Precision.
    pub precision: Precision,
    /// Threads that ran the kernel at once.
    pub threads: u32,
    /// 10^9 floating-point operations per second over all threads.
    pub gflops: f64,
    /// Vector extension used.
    pub simd: Simd,
    /// Whether FMA instructions were used (else separate multiply and add).
    pub fma: bool,
}

/// FLOPs one call of `kernel(iterations)` performs.
/// An FMA and a multiply-plus-add are both two operations per lane.
pub fn flops_per_call(simd: Simd, precision: Precision, iterations: u64) -> u64 {
    let bits = u64::from(simd.vector_bytes()) * 8;
    let element_bits = if precision == Precision::Dp { 64 } else { 32 };
    // The FLOP kernel has no SSE2 form: it runs the scalar loop there.
    let lanes = if matches!(simd, Simd::Scalar | Simd::Sse2) {
        1
    } else {
        bits / element_bits
    };
    iterations * ACCUMULATORS as u64 * lanes * 2
}

/// Runs the kernel on one thread per CPU for about `duration` and sums their rates.
pub fn measure_flops(
    simd: Simd,
    precision: Precision,
    cpus: &[usize],
    duration: Duration,
) -> FlopsSample {
    let fma = simd.has_fma();
    let rates = on_each_cpu(cpus, || (), |()| best_rate(simd, precision, fma, duration));
    let rates: Vec<f64> = rates.into_iter().map(|r| r.unwrap_or(0.0)).collect();
    FlopsSample {
        precision,
        threads: cpus.len() as u32,
        gflops: rates.iter().sum::<f64>() / 1e9,
        simd,
        fma,
    }
}

fn best_rate(simd: Simd, precision: Precision, fma: bool, duration: Duration) -> f64 {
    const ITERATIONS: u64 = 100_000;
    let start = Instant::now();
    let mut best = 0.0f64;
    while start.elapsed() < duration || best == 0.0 {
        let t = Instant::now();
        std::hint::black_box(run(simd, precision, fma, ITERATIONS));
        let s = t.elapsed().as_secs_f64();
        best = best.max(flops_per_call(simd, precision, ITERATIONS) as f64 / s);
    }
    best
}

/// One call of the kernel; returns a value derived from every accumulator.
pub fn run(simd: Simd, precision: Precision, fma: bool, iterations: u64) -> f64 {
    match (simd, fma) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `simd` and `fma` come from run-time feature detection.
        (Simd::Avx2, true) => unsafe {
            match precision {
                Precision::Dp => avx2::dp(iterations),
                Precision::Sp => avx2::sp(iterations),
            }
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (Simd::Avx512, true) => unsafe {
            match precision {
                Precision::Dp => avx512::dp(iterations),
                Precision::Sp => avx512::sp(iterations),
            }
        },
        _ => scalar(precision, iterations),
    }
}

fn scalar(precision: Precision, iterations: u64) -> f64 {
    let mut acc = [1.0f64; ACCUMULATORS];
    let (m, a) = (std::hint::black_box(0.999_999), std::hint::black_box(1e-6));
    for _ in 0..iterations {
        for x in &mut acc {
            *x = *x * m + a;
        }
    }
    let _ = precision; // the scalar fallback computes in f64 either way
    acc.iter().sum()
}

macro_rules! fma_kernel {
    ($module:ident, $feature:literal, $pd:ty, $ps:ty, $dlanes:literal, $slanes:literal,
     $fmapd:ident, $fmaps:ident, $setpd:ident, $setps:ident) => {
        #[cfg(target_arch = "x86_64")]
        mod $module {
            use std::arch::x86_64::*;

            use super::ACCUMULATORS;

            /// # Safety
            /// The CPU must support the features.
            #[target_feature(enable = $feature)]
            pub unsafe fn dp(iterations: u64) -> f64 {
                let m = $setpd(std::hint::black_box(0.999_999));
                let a = $setpd(std::hint::black_box(1e-6));
                let mut acc = [$setpd(1.0); ACCUMULATORS];
                for _ in 0..iterations {
                    for x in &mut acc {
                        *x = $fmapd(*x, m, a);
                    }
                }
                // SAFETY: a vector of f64 lanes has the layout of an f64 array.
                acc.iter()
                    .map(|v| unsafe { std::mem::transmute::<$pd, [f64; $dlanes]>(*v) }[0])
                    .sum()
            }

            /// # Safety
            /// The CPU must support the features.
            #[target_feature(enable = $feature)]
            pub unsafe fn sp(iterations: u64) -> f64 {
                let m = $setps(std::hint::black_box(0.999_99));
                let a = $setps(std::hint::black_box(1e-5));
                let mut acc = [$setps(1.0); ACCUMULATORS];
                for _ in 0..iterations {
                    for x in &mut acc {
                        *x = $fmaps(*x, m, a);
                    }
                }
                // SAFETY: a vector of f32 lanes has the layout of an f32 array.
                acc.iter()
                    .map(|v| {
                        f64::from(unsafe { std::mem::transmute::<$ps, [f32; $slanes]>(*v) }[0])
                    })
                    .sum()
            }
        }
    };
}

fma_kernel!(
    avx2,
    "avx2,fma",
    __m256d,
    __m256,
    4,
    8,
    _mm256_fmadd_pd,
    _mm256_fmadd_ps,
    _mm256_set1_pd,
    _mm256_set1_ps
);
fma_kernel!(
    avx512,
    "avx512f",
    __m512d,
    __m512,
    8,
    16,
    _mm512_fmadd_pd,
    _mm512_fmadd_ps,
    _mm512_set1_pd,
    _mm512_set1_ps
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_width_converges_to_the_same_fixed_point() {
        // x <- x * m + a converges to a / (1 - m) = 1 (DP) from 1: every kernel stays at 1.
        for simd in Simd::detect().up_to() {
            let fma = simd.has_fma();
            let dp = run(simd, Precision::Dp, fma, 1000);
            assert!((dp - ACCUMULATORS as f64).abs() < 1e-6, "{simd:?}: {dp}");
            let sp = run(simd, Precision::Sp, fma, 1000);
            assert!((sp - ACCUMULATORS as f64).abs() < 1e-2, "{simd:?}: {sp}");
        }
    }

    #[test]
    fn flop_counts_follow_the_vector_width() {
        assert_eq!(flops_per_call(Simd::Avx2, Precision::Dp, 1), 12 * 4 * 2);
        assert_eq!(flops_per_call(Simd::Avx512, Precision::Sp, 1), 12 * 16 * 2);
        assert_eq!(flops_per_call(Simd::Scalar, Precision::Sp, 10), 10 * 12 * 2);
    }

    #[test]
    fn a_short_run_gives_a_positive_rate() {
        let sample = measure_flops(
            Simd::detect(),
            Precision::Dp,
            &[crate::allowed_cpus()[0]],
            Duration::from_millis(2),
        );
        assert!(sample.gflops > 0.0);
        assert_eq!(sample.threads, 1);
    }
}
