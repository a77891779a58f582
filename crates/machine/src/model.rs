//! The types of a machine description.

use serde::{Deserialize, Serialize};

use crate::file::FORMAT_VERSION;

/// What loopscope knows about one machine: detected, read from a machine file or imported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Version of the machine-file format this value was written with.
    pub format_version: u32,
    /// Processor model name, as the vendor spells it.
    pub model: String,
    /// Vendor identification (`GenuineIntel`, `AuthenticAMD`, ...), empty when unknown.
    #[serde(default)]
    pub vendor: String,
    /// Micro-architecture or family description, when known.
    #[serde(default)]
    pub microarchitecture: Option<String>,
    /// Sockets (packages).
    pub sockets: u32,
    /// Physical cores over all sockets.
    pub cores: u32,
    /// Hardware threads per core.
    pub threads_per_core: u32,
    /// Nominal core clock in Hz, when known.
    #[serde(default)]
    pub nominal_hz: Option<u64>,
    /// Frequency of the time-stamp counter in Hz, when the hardware or hypervisor states it.
    #[serde(default)]
    pub tsc_hz: Option<u64>,
    /// Every cache level, ordered by level, then data before instruction before unified.
    pub caches: Vec<Cache>,
    /// ISA features that matter for the peak floating-point rate.
    pub isa: Vec<IsaFeature>,
    /// Theoretical peak floating-point operations per cycle and core.
    pub peak_flops_per_cycle: PeakFlops,
    /// Where this description came from (detection sources, or the imported file).
    #[serde(default)]
    pub source: String,
    /// What `loopscope probe` measured; `None` until it runs.
    #[serde(default)]
    pub measured: Option<Measured>,
}

impl Machine {
    /// An empty description of an unknown machine, to be filled field by field. Its peak is
    /// 0 FLOPs per cycle, which a machine file may not hold: set it before writing one.
    pub fn unknown() -> Machine {
        Machine {
            format_version: FORMAT_VERSION,
            model: "unknown".to_owned(),
            vendor: String::new(),
            microarchitecture: None,
            sockets: 1,
            cores: 1,
            threads_per_core: 1,
            nominal_hz: None,
            tsc_hz: None,
            caches: Vec::new(),
            isa: Vec::new(),
            peak_flops_per_cycle: PeakFlops { dp: 0, sp: 0 },
            source: String::new(),
            measured: None,
        }
    }

    /// The data-side cache of `level` (a data or unified cache), if the machine has one.
    pub fn data_cache(&self, level: u8) -> Option<&Cache> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.kind != CacheKind::Instruction)
    }

    /// The data-side caches (data and unified), innermost first.
    pub fn data_caches(&self) -> impl Iterator<Item = &Cache> {
        self.caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
    }

    /// The kerncraft file this description was imported from, as its `source` names it: its
    /// bandwidths are that file's benchmarks, so `probe` on this machine cannot supply the
    /// ones it lacks.
    pub fn kerncraft_file(&self) -> Option<&str> {
        self.source.strip_prefix(crate::kerncraft::IMPORTED_FROM)
    }

    /// Sorts caches by level and kind so that output and files are stable.
    pub fn sort_caches(&mut self) {
        self.caches.sort_by_key(|c| (c.level, c.kind));
    }
}

/// Which accesses a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
    /// Data and instructions.
    Unified,
}

impl CacheKind {
    /// The lower-case name used in files and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CacheKind::Data => "data",
            CacheKind::Instruction => "instruction",
            CacheKind::Unified => "unified",
        }
    }

    /// The short suffix of conventional level names: `d`, `i` or nothing (`L1d`, `L1i`, `L2`).
    pub fn suffix(self) -> &'static str {
        match self {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        }
    }
}

/// One cache level as the hardware describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cache {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Capacity of one instance in bytes.
    pub size_bytes: u64,
    /// Line (block) size in bytes.
    pub line_bytes: u64,
    /// Associativity; equal to `size_bytes / line_bytes` for a fully associative cache.
    pub ways: u64,
    /// Number of sets (`size_bytes / (line_bytes * ways)`).
    pub sets: u64,
    /// Hardware threads (logical CPUs) that share one instance.
    pub shared_by: u32,
    /// Replacement policy when the source states it (`LRU`, ...).
    #[serde(default)]
    pub replacement: Option<String>,
    /// Whether a write miss allocates the line, when the source states it.
    #[serde(default)]
    pub write_allocate: Option<bool>,
    /// Whether writes are written back (not through), when the source states it.
    #[serde(default)]
    pub write_back: Option<bool>,
}

impl Cache {
    /// A cache with sets derived from the other figures and no stated policies.
    pub fn new(
        level: u8,
        kind: CacheKind,
        size_bytes: u64,
        line_bytes: u64,
        ways: u64,
        shared_by: u32,
    ) -> Cache {
        let sets = size_bytes
            .checked_div(line_bytes.saturating_mul(ways))
            .unwrap_or(0);
        Cache {
            level,
            kind,
            size_bytes,
            line_bytes,
            ways,
            sets,
            shared_by,
            replacement: None,
            write_allocate: None,
            write_back: None,
        }
    }

    /// Conventional name: `L1d`, `L1i`, `L2`, `L3`.
    pub fn name(&self) -> String {
        format!("L{}{}", self.level, self.kind.suffix())
    }
}

/// ISA features that set the peak floating-point rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IsaFeature {
    /// 128-bit SIMD with double precision.
    Sse2,
    /// 256-bit floating-point SIMD.
    Avx,
    /// 256-bit integer SIMD (and gathers).
    Avx2,
    /// Fused multiply-add (FMA3).
    Fma,
    /// 512-bit SIMD (foundation).
    Avx512f,
}

impl IsaFeature {
    /// Every feature, narrowest first.
    pub const ALL: [IsaFeature; 5] = [
        IsaFeature::Sse2,
        IsaFeature::Avx,
        IsaFeature::Avx2,
        IsaFeature::Fma,
        IsaFeature::Avx512f,
    ];

    /// The name `/proc/cpuinfo` uses for the feature flag.
    pub fn cpuinfo_flag(self) -> &'static str {
        match self {
            IsaFeature::Sse2 => "sse2",
            IsaFeature::Avx => "avx",
            IsaFeature::Avx2 => "avx2",
            IsaFeature::Fma => "fma",
            IsaFeature::Avx512f => "avx512f",
        }
    }
}

/// Theoretical peak floating-point operations per cycle and core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeakFlops {
    /// Double precision.
    pub dp: u32,
    /// Single precision.
    pub sp: u32,
}

impl PeakFlops {
    /// The peak the crate-level rule derives from these ISA features.
    pub fn from_isa(isa: &[IsaFeature]) -> PeakFlops {
        PeakFlops::with_vector_limit(isa, 512)
    }

    /// [`PeakFlops::from_isa`] for a known core: AMD family 0x19 (Zen 3, Zen 4) decodes
    /// AVX-512 but executes it as two halves on its two 256-bit FMA pipes, so its peak is the
    /// AVX2 one. `microarchitecture` is as detection writes it, `family 0x19 model 0x11`.
    pub fn for_core(
        isa: &[IsaFeature],
        vendor: &str,
        microarchitecture: Option<&str>,
    ) -> PeakFlops {
        let family = microarchitecture.and_then(|m| {
            let mut words = m.split_whitespace();
            words.find(|w| *w == "family")?;
            u32::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()
        });
        let halves_avx512 = vendor == "AuthenticAMD" && family == Some(0x19);
        PeakFlops::with_vector_limit(isa, if halves_avx512 { 256 } else { 512 })
    }

    fn with_vector_limit(isa: &[IsaFeature], datapath_bits: u32) -> PeakFlops {
        let has = |f| isa.contains(&f);
        let vector_bits = if has(IsaFeature::Avx512f) && datapath_bits >= 512 {
            512
        } else if has(IsaFeature::Avx) {
            256
        } else if has(IsaFeature::Sse2) {
            128
        } else {
            64
        };
        let dp_lanes = vector_bits / 64;
        let ops_per_lane = if has(IsaFeature::Fma) { 4 } else { 2 };
        PeakFlops {
            dp: dp_lanes * ops_per_lane,
            sp: 2 * dp_lanes * ops_per_lane,
        }
    }
}

/// What `loopscope probe` measured on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// Cache sizes and latencies found from timing curves.
    #[serde(default)]
    pub caches: Vec<MeasuredCache>,
    /// Bandwidths per level, kernel and thread count.
    #[serde(default)]
    pub bandwidth: Vec<Bandwidth>,
    /// Achieved peak floating-point rate over all cores.
    #[serde(default)]
    pub peak_gflops: Option<PeakGflops>,
    /// Wall-clock time the measurement took.
    #[serde(default)]
    pub duration_s: f64,
    /// True when the measurement was interrupted and holds only part of its points.
    #[serde(default)]
    pub partial: bool,
    /// How and when it was measured (tool version, timer, pinning, huge pages, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Core clock measured while probing, in Hz (latencies in cycles use it).
    #[serde(default)]
    pub core_hz: Option<f64>,
    /// Load-to-use latency of main memory (beyond the last cache level), in nanoseconds.
    #[serde(default)]
    pub memory_latency_ns: Option<f64>,
    /// Latency of a double-precision floating-point addition that needs the result of the one
    /// before, in nanoseconds (what an in-order sum waits per element).
    #[serde(default)]
    pub add_latency_ns: Option<f64>,
    /// Bandwidth runs whose figure no quiet machine gives: slower than the same kernel one level
    /// further out, or on all threads slower than on one. Other work on the machine slowed
    /// them; whatever uses one says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implausible: Vec<Implausible>,
}

impl Measured {
    /// Why the run `run` is implausible, when it is one of [`Measured::implausible`].
    pub fn implausible_reason(&self, run: &Bandwidth) -> Option<&str> {
        self.implausible
            .iter()
            .find(|i| {
                i.level == run.level
                    && i.kernel == run.kernel
                    && i.threads == run.threads
                    && i.vector_bytes == run.vector_bytes
            })
            .map(|i| i.reason.as_str())
    }
}

/// A bandwidth run that contradicts another: which run, and the figures that contradict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Implausible {
    /// The run's level (`L2`, `MEM`).
    pub level: String,
    /// The run's kernel.
    pub kernel: String,
    /// The run's thread count.
    pub threads: u32,
    /// The run's vector width in bytes, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_bytes: Option<u32>,
    /// The figures that contradict (`L2 triad on 1 thread, 6.59 GB/s, is below the L3's
    /// 12.75 GB/s`).
    pub reason: String,
}

/// One cache level as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredCache {
    /// Level (1, 2, ...).
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Effective capacity found from the timing curve.
    pub size_bytes: u64,
    /// Load-to-use latency in core cycles (TSC cycles when the core clock is unknown).
    pub latency_cycles: f64,
    /// Load-to-use latency in nanoseconds.
    pub latency_ns: f64,
    /// What sysfs or CPUID states for this level, for comparison.
    #[serde(default)]
    pub advertised_size_bytes: Option<u64>,
    /// Confidence in the size, from 0 (a guess) to 1 (a sharp, clean knee).
    pub confidence: f64,
    /// How it was measured (for example `pointer chase, random cyclic permutation`).
    #[serde(default)]
    pub method: String,
    /// For the last level: the working set up to which a sequential stream (the triad, one
    /// thread) still runs at this level's bandwidth rather than memory's. It can differ from
    /// `size_bytes`, which is where random loads start to miss; the models of loop kernels
    /// (`roofline`, `misses`) simulate the level at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming_size_bytes: Option<u64>,
}

/// One bandwidth measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bandwidth {
    /// Level the working set lives in: `L1`, `L2`, `L3` or `MEM`.
    pub level: String,
    /// Kernel name: `load`, `store`, `copy`, `triad`, ...
    pub kernel: String,
    /// Threads running the kernel at once.
    pub threads: u32,
    /// Cores those threads ran on, when the source states it (kerncraft's benchmarks run
    /// one or more threads per core); `None` when the threads fill each core's hardware
    /// threads in turn, as `probe` runs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// Total working set over all threads.
    pub working_set_bytes: u64,
    /// Bandwidth as the kernel's own loads and stores count it, in 10^9 bytes per second.
    pub gb_per_s: f64,
    /// Bandwidth including write-allocate traffic (stored lines read first), when it differs.
    #[serde(default)]
    pub gb_per_s_with_write_allocate: Option<f64>,
    /// How it was measured.
    #[serde(default)]
    pub method: String,
    /// Bytes of one vector of the kernel's loads and stores (16 for SSE2, 64 for AVX-512):
    /// the L1 bandwidth a loop reaches depends on it. `None` when not recorded.
    #[serde(default)]
    pub vector_bytes: Option<u32>,
}

/// Achieved peak floating-point rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeakGflops {
    /// Double precision, 10^9 operations per second.
    pub dp: f64,
    /// Single precision, 10^9 operations per second.
    pub sp: f64,
    /// Threads that ran the kernel.
    #[serde(default)]
    pub threads: u32,
    /// How it was measured.
    #[serde(default)]
    pub method: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rule_matches_known_parts() {
        use IsaFeature::*;
        let skx = PeakFlops::from_isa(&[Sse2, Avx, Avx2, Fma, Avx512f]);
        assert_eq!((skx.dp, skx.sp), (32, 64));
        let hsw = PeakFlops::from_isa(&[Sse2, Avx, Avx2, Fma]);
        assert_eq!((hsw.dp, hsw.sp), (16, 32));
        let snb = PeakFlops::from_isa(&[Sse2, Avx]);
        assert_eq!((snb.dp, snb.sp), (8, 16));
        assert_eq!(PeakFlops::from_isa(&[Sse2]).dp, 4);
    }

    #[test]
    fn zen4_runs_avx512_on_256_bit_pipes() {
        use IsaFeature::*;
        let isa = [Sse2, Avx, Avx2, Fma, Avx512f];
        let zen4 = PeakFlops::for_core(&isa, "AuthenticAMD", Some("family 0x19 model 0x11"));
        assert_eq!((zen4.dp, zen4.sp), (16, 32));
        let zen5 = PeakFlops::for_core(&isa, "AuthenticAMD", Some("family 0x1a model 0x2"));
        assert_eq!(zen5.dp, 32);
        let skx = PeakFlops::for_core(&isa, "GenuineIntel", Some("family 0x6 model 0x55"));
        assert_eq!(skx.dp, 32);
        assert_eq!(PeakFlops::for_core(&isa, "AuthenticAMD", None).dp, 32);
    }

    #[test]
    fn sets_are_derived_and_zero_geometry_does_not_panic() {
        assert_eq!(
            Cache::new(2, CacheKind::Unified, 1 << 20, 64, 16, 1).sets,
            1024
        );
        assert_eq!(Cache::new(2, CacheKind::Unified, 1 << 20, 0, 16, 1).sets, 0);
        assert_eq!(Cache::new(1, CacheKind::Data, 1, 1, 1, 1).name(), "L1d");
    }
}
