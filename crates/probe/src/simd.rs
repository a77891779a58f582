//! Which vector instructions the kernels use, chosen at run time.

use serde::Serialize;

/// The widest vector extension the bandwidth and FLOP kernels can use here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Simd {
    /// Plain Rust loops (whatever the compiler makes of them for the base target).
    Scalar,
    /// 128-bit SSE2, the x86-64 baseline: what code built without `-march` uses. Measured for
    /// L1 beside the widest extension, whose L1 bandwidth such code does not reach.
    Sse2,
    /// 256-bit AVX2 (with FMA for the FLOP kernel when present).
    Avx2,
    /// 512-bit AVX-512F.
    Avx512,
}

impl Simd {
    /// The widest extension this CPU supports.
    pub fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Simd::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Scalar
    }

    /// Whether FMA3 is available next to this extension.
    pub fn has_fma(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self != Simd::Scalar && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Bytes of one vector (8 for scalar code).
    pub fn vector_bytes(self) -> u32 {
        match self {
            Simd::Scalar => 8,
            Simd::Sse2 => 16,
            Simd::Avx2 => 32,
            Simd::Avx512 => 64,
        }
    }

    /// Lower-case name for notes and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Scalar => "scalar",
            Simd::Sse2 => "SSE2",
            Simd::Avx2 => "AVX2",
            Simd::Avx512 => "AVX-512",
        }
    }

    /// Every extension at most as wide as `self`, narrowest first (for tests).
    pub fn up_to(self) -> Vec<Simd> {
        [Simd::Scalar, Simd::Sse2, Simd::Avx2, Simd::Avx512]
            .into_iter()
            .filter(|s| *s <= self)
            .collect()
    }
}
