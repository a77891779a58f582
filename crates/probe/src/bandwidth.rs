//! Bandwidth kernels (load, store, copy, triad) over working sets sized for each cache level,
//! on one core and on all cores, with AVX2 or AVX-512 chosen at run time.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::ProbeError;
use crate::mem::Mapping;
use crate::simd::Simd;
use crate::threads::on_each_cpu;

/// A streaming kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// `s += a[i]`.
    Load,
    /// `a[i] = s`.
    Store,
    /// `a[i] = b[i]`.
    Copy,
    /// `a[i] = b[i] + s * c[i]`.
    Triad,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 4] = [Kernel::Load, Kernel::Store, Kernel::Copy, Kernel::Triad];

    /// Name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Load => "load",
            Kernel::Store => "store",
            Kernel::Copy => "copy",
            Kernel::Triad => "triad",
        }
    }

    /// Arrays the kernel streams through.
    pub fn arrays(self) -> usize {
        match self {
            Kernel::Load | Kernel::Store => 1,
            Kernel::Copy => 2,
            Kernel::Triad => 3,
        }
    }

    /// Bytes moved per element as the kernel counts them, and with write-allocate (every
    /// stored line is read before it is written).
    pub fn bytes_per_element(self) -> (u64, u64) {
        match self {
            Kernel::Load => (8, 8),
            Kernel::Store => (8, 16),
            Kernel::Copy => (16, 24),
            Kernel::Triad => (24, 32),
        }
    }
}

/// Elements per array are a multiple of this, so every vector loop needs no remainder.
const ELEMENT_GRANULE: usize = 64;

/// Arrays of one thread's working set inside one mapping, offset from each other so that
/// equal indices do not collide in the same cache sets.
struct Arrays {
    mapping: Mapping,
    elements: usize,
    offsets: [usize; 3],
}

impl Arrays {
    fn new(kernel: Kernel, working_set_bytes: u64) -> Result<Arrays, ProbeError> {
        let per_array = working_set_bytes as usize / kernel.arrays() / 8;
        let elements = (per_array / ELEMENT_GRANULE).max(1) * ELEMENT_GRANULE;
        let stride = elements * 8;
        let offsets = [0, stride + 320, 2 * stride + 640];
        let mapping = Mapping::new(offsets[kernel.arrays() - 1] + stride)?;
        let arrays = Arrays {
            mapping,
            elements,
            offsets,
        };
        for k in 0..kernel.arrays() {
            arrays.array(k).fill(1.0 + k as f64);
        }
        Ok(arrays)
    }

    #[allow(clippy::mut_from_ref)]
    fn array(&self, k: usize) -> &mut [f64] {
        // SAFETY: offsets[k] + elements * 8 lies inside the mapping (see `new`), offsets are
        // multiples of 64 so f64 alignment holds, and the arrays do not overlap. The slices
        // are only used by the one thread that owns these Arrays, one kernel call at a time.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.mapping.as_ptr().add(self.offsets[k]).cast::<f64>(),
                self.elements,
            )
        }
    }

    fn run(&self, kernel: Kernel, simd: Simd) -> f64 {
        let a = self.array(0);
        match kernel {
            Kernel::Load => kernels::load(simd, a),
            Kernel::Store => {
                kernels::store(simd, a, 2.0);
                a[0]
            }
            Kernel::Copy => {
                kernels::copy(simd, a, self.array(1));
                a[0]
            }
            Kernel::Triad => {
                kernels::triad(simd, a, self.array(1), self.array(2), 0.5);
                a[0]
            }
        }
    }
}

/// One bandwidth measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BandwidthSample {
    /// The kernel.
    pub kernel: Kernel,
    /// Threads that ran it at once.
    pub threads: u32,
    /// Working set over all threads.
    pub working_set_bytes: u64,
    /// 10^9 bytes per second as the kernel counts them.
    pub gb_per_s: f64,
    /// Including write-allocate reads.
    pub gb_per_s_with_write_allocate: f64,
    /// The median trial's rate as the kernel counts it, to show the noise.
    pub median_gb_per_s: f64,
}

/// Runs `kernel` on one thread per CPU in `cpus`, each over its own `per_thread_bytes`,
/// for about `duration`, and returns the summed rate of the best of `trials`.
pub fn measure_bandwidth(
    kernel: Kernel,
    simd: Simd,
    cpus: &[usize],
    per_thread_bytes: u64,
    duration: Duration,
    trials: u32,
) -> Result<BandwidthSample, ProbeError> {
    let rates = on_each_cpu(
        cpus,
        || Arrays::new(kernel, per_thread_bytes),
        |arrays| arrays.map(|a| trial_rates(&a, kernel, simd, duration, trials)),
    );
    let mut elements_per_s = 0.0;
    let mut median_elements_per_s = 0.0;
    let mut elements = 0;
    for rate in rates {
        let rates =
            rate.unwrap_or_else(|| Err(ProbeError::Invalid("kernel thread panicked".into())))?;
        elements_per_s += rates.best;
        median_elements_per_s += rates.median;
        elements = rates.elements;
    }
    let (bytes, with_wa) = kernel.bytes_per_element();
    Ok(BandwidthSample {
        kernel,
        threads: cpus.len() as u32,
        working_set_bytes: elements * 8 * kernel.arrays() as u64 * cpus.len() as u64,
        gb_per_s: elements_per_s * bytes as f64 / 1e9,
        gb_per_s_with_write_allocate: elements_per_s * with_wa as f64 / 1e9,
        median_gb_per_s: median_elements_per_s * bytes as f64 / 1e9,
    })
}

/// One thread's trials: elements per second of the best and the median trial.
struct TrialRates {
    best: f64,
    median: f64,
    elements: u64,
}

fn trial_rates(
    arrays: &Arrays,
    kernel: Kernel,
    simd: Simd,
    duration: Duration,
    trials: u32,
) -> TrialRates {
    std::hint::black_box(arrays.run(kernel, simd));
    let per_trial = duration / trials.max(1);
    let mut rates: Vec<f64> = (0..trials.max(1))
        .map(|_| {
            let start = Instant::now();
            let mut passes = 0u64;
            while passes == 0 || start.elapsed() < per_trial {
                std::hint::black_box(arrays.run(kernel, simd));
                passes += 1;
            }
            (passes * arrays.elements as u64) as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    TrialRates {
        best: rates[rates.len() - 1],
        median: rates[rates.len() / 2],
        elements: arrays.elements as u64,
    }
}

/// The kernels themselves, one vector width per module, dispatched on [`Simd`].
mod kernels {
    use crate::simd::Simd;

    pub fn load(simd: Simd, a: &[f64]) -> f64 {
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `simd` came from run-time detection (or a narrower choice), so the CPU
            // supports the instructions; slices have lengths that are multiples of 64.
            Simd::Sse2 => unsafe { sse2::load(a) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { avx2::load(a) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx512 => unsafe { avx512::load(a) },
            _ => {
                let mut s = [0.0f64; 4];
                for chunk in a.chunks_exact(4) {
                    for k in 0..4 {
                        s[k] += chunk[k];
                    }
                }
                s.iter().sum()
            }
        }
    }

    pub fn store(simd: Simd, a: &mut [f64], value: f64) {
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`.
            Simd::Sse2 => unsafe { sse2::store(a, value) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { avx2::store(a, value) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`.
            Simd::Avx512 => unsafe { avx512::store(a, value) },
            _ => a.fill(value),
        }
    }

    pub fn copy(simd: Simd, a: &mut [f64], b: &[f64]) {
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`; a and b have equal lengths.
            Simd::Sse2 => unsafe { sse2::copy(a, b) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { avx2::copy(a, b) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`.
            Simd::Avx512 => unsafe { avx512::copy(a, b) },
            _ => a.copy_from_slice(b),
        }
    }

    pub fn triad(simd: Simd, a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`; a, b and c have equal lengths.
            Simd::Sse2 => unsafe { sse2::triad(a, b, c, s) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Simd::Avx2 => unsafe { avx2::triad(a, b, c, s) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: see `load`.
            Simd::Avx512 => unsafe { avx512::triad(a, b, c, s) },
            _ => {
                for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                    *x = y + s * z;
                }
            }
        }
    }

    /// One module of kernels per vector width: the same loops, different intrinsics.
    macro_rules! vector_kernels {
        ($module:ident, $feature:literal, $vector:ty, $lanes:literal,
         $loadv:ident, $storev:ident, $add:ident, $mul:ident, $splat:ident, $zero:ident) => {
            #[cfg(target_arch = "x86_64")]
            mod $module {
                use std::arch::x86_64::*;

                // Eight accumulators cover the add latency (3-4 cycles) at two loads per cycle.
                const UNROLL: usize = 8 * $lanes;

                /// # Safety
                /// The CPU must support the feature; `a.len()` a multiple of 8 vectors.
                #[target_feature(enable = $feature)]
                pub unsafe fn load(a: &[f64]) -> f64 {
                    let p = a.as_ptr();
                    let mut acc = [$zero(); 8];
                    for i in (0..a.len() - a.len() % UNROLL).step_by(UNROLL) {
                        for (k, slot) in acc.iter_mut().enumerate() {
                            // SAFETY: i + (k + 1) * lanes <= a.len(); unaligned loads are
                            // allowed by loadu.
                            *slot = $add(*slot, unsafe { $loadv(p.add(i + k * $lanes)) });
                        }
                    }
                    let sum = acc.iter().fold($zero(), |s, v| $add(s, *v));
                    // SAFETY: a vector of f64 lanes has the layout of an f64 array.
                    let lanes: [f64; $lanes] =
                        unsafe { std::mem::transmute::<$vector, [f64; $lanes]>(sum) };
                    lanes.iter().sum()
                }

                /// # Safety
                /// As for `load`.
                #[target_feature(enable = $feature)]
                pub unsafe fn store(a: &mut [f64], value: f64) {
                    let p = a.as_mut_ptr();
                    let v = $splat(value);
                    for i in (0..a.len() - a.len() % $lanes).step_by($lanes) {
                        // SAFETY: i + lanes <= a.len().
                        unsafe { $storev(p.add(i), v) };
                    }
                }

                /// # Safety
                /// As for `load`, and `b.len() >= a.len()`.
                #[target_feature(enable = $feature)]
                pub unsafe fn copy(a: &mut [f64], b: &[f64]) {
                    let (p, q) = (a.as_mut_ptr(), b.as_ptr());
                    for i in (0..a.len().min(b.len()) / $lanes * $lanes).step_by($lanes) {
                        // SAFETY: i + lanes is within both slices.
                        unsafe { $storev(p.add(i), $loadv(q.add(i))) };
                    }
                }

                /// # Safety
                /// As for `copy`, and `c.len() >= a.len()`.
                #[target_feature(enable = $feature)]
                pub unsafe fn triad(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
                    let (p, q, r) = (a.as_mut_ptr(), b.as_ptr(), c.as_ptr());
                    let sv = $splat(s);
                    let n = a.len().min(b.len()).min(c.len()) / $lanes * $lanes;
                    for i in (0..n).step_by($lanes) {
                        // SAFETY: i + lanes is within all three slices.
                        unsafe {
                            $storev(p.add(i), $add($loadv(q.add(i)), $mul(sv, $loadv(r.add(i)))))
                        };
                    }
                }
            }
        };
    }

    vector_kernels!(
        sse2,
        "sse2",
        __m128d,
        2,
        _mm_loadu_pd,
        _mm_storeu_pd,
        _mm_add_pd,
        _mm_mul_pd,
        _mm_set1_pd,
        _mm_setzero_pd
    );
    vector_kernels!(
        avx2,
        "avx2",
        __m256d,
        4,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_add_pd,
        _mm256_mul_pd,
        _mm256_set1_pd,
        _mm256_setzero_pd
    );
    vector_kernels!(
        avx512,
        "avx512f",
        __m512d,
        8,
        _mm512_loadu_pd,
        _mm512_storeu_pd,
        _mm512_add_pd,
        _mm512_mul_pd,
        _mm512_set1_pd,
        _mm512_setzero_pd
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_compute_the_same_results_at_every_available_width() {
        for simd in Simd::detect().up_to() {
            let arrays = Arrays::new(Kernel::Triad, 3 * 8 * 256).unwrap();
            assert_eq!(arrays.elements, 256);
            assert_eq!(arrays.run(Kernel::Load, simd), 256.0, "{simd:?}");
            arrays.run(Kernel::Triad, simd); // a = b + 0.5 * c = 2 + 1.5
            assert!(arrays.array(0).iter().all(|&x| x == 3.5), "{simd:?}");
            arrays.run(Kernel::Copy, simd);
            assert!(arrays.array(0).iter().all(|&x| x == 2.0), "{simd:?}");
            arrays.run(Kernel::Store, simd);
            assert!(arrays.array(0).iter().all(|&x| x == 2.0), "{simd:?}");
        }
        println!(
            "kernels checked: {:?} (AVX-512 only where the CPU has it)",
            Simd::detect().up_to()
        );
    }

    #[test]
    fn write_allocate_counts_the_extra_read() {
        assert_eq!(Kernel::Store.bytes_per_element(), (8, 16));
        assert_eq!(Kernel::Triad.bytes_per_element(), (24, 32));
        assert_eq!(
            Kernel::Load.bytes_per_element().0,
            Kernel::Load.bytes_per_element().1
        );
    }

    #[test]
    fn a_short_measurement_reports_the_whole_working_set() {
        let cpus = crate::allowed_cpus();
        let sample = measure_bandwidth(
            Kernel::Copy,
            Simd::detect(),
            &cpus,
            64 * 1024,
            Duration::from_millis(2),
            1,
        )
        .unwrap();
        assert_eq!(sample.threads as usize, cpus.len());
        assert_eq!(sample.working_set_bytes, 64 * 1024 * cpus.len() as u64);
        assert!(sample.gb_per_s > 0.0 && sample.gb_per_s_with_write_allocate > sample.gb_per_s);
    }
}
