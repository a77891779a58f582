//! The machine description: everything loopscope knows about the machine a kernel runs on.
//!
//! This room owns one type, [`Machine`]: the processor model, core counts, clock rates, every
//! cache level as the operating system describes it, the ISA features that set the peak
//! floating-point rate, and a [`Measured`] section that `loopscope probe` fills. It detects a
//! machine from Linux's sysfs, `/proc/cpuinfo` and CPUID ([`detect`]), reads and writes
//! loopscope's TOML machine files ([`read_machine_file`], [`write_machine_file`]) and imports
//! kerncraft's YAML machine files ([`import_kerncraft`]).
//!
//! It must not measure anything (that is `loopscope-probe`), print, or decide policy: it returns
//! values and [`MachineError`]s, and the command line decides what to show.
//!
//! # Peak FLOP rule
//!
//! [`PeakFlops::from_isa`] derives the theoretical peak per core and cycle from the widest vector
//! ISA: `lanes = vector_bits / element_bits`; with FMA, two FMA pipes each doing two operations
//! per lane (`4 * lanes`); without FMA, one add pipe and one multiply pipe (`2 * lanes`). So
//! AVX-512 + FMA gives 32 double-precision FLOPs per cycle, AVX2 + FMA 16, AVX 8 and SSE2 4;
//! single precision doubles each. Parts with a single 512-bit FMA pipe (some Xeon Silver/Bronze)
//! reach half of that; `probe` measures the truth.
//!
//! # Example
//!
//! ```
//! use loopscope_machine::{Cache, CacheKind, IsaFeature, Machine, PeakFlops};
//!
//! let mut machine = Machine::unknown();
//! machine.caches.push(Cache::new(1, CacheKind::Data, 32 * 1024, 64, 8, 1));
//! machine.peak_flops_per_cycle = PeakFlops::from_isa(&[IsaFeature::Sse2]);
//! let text = loopscope_machine::to_toml(&machine).unwrap();
//! let back = loopscope_machine::from_toml(&text, "inline".as_ref()).unwrap();
//! assert_eq!(back, machine);
//! assert_eq!(back.caches[0].sets, 64);
//! ```
#![deny(missing_docs)]

mod bounded;
mod detect;
mod error;
mod file;
mod kerncraft;
mod keys;
mod model;
mod units;
mod validate;
mod writing;
mod yaml_budget;
mod yaml_positions;

pub use bounded::{MACHINE_FILE_CAP_BYTES, read_bounded, read_bounded_from, refuse_pipe};
pub use detect::{CPUINFO_CAP_BYTES, CpuInfo, SysRoot, detect, detect_from, parse_cpuinfo};
pub use error::MachineError;
pub use file::{
    FORMAT_VERSION, from_toml, machine_to_update, read_machine_file, to_toml, write_machine_file,
};
pub use kerncraft::{KerncraftImport, import_kerncraft, import_kerncraft_str};
pub use model::{
    Bandwidth, Cache, CacheKind, Implausible, IsaFeature, Machine, Measured, MeasuredCache,
    PeakFlops, PeakGflops,
};
pub use units::{format_bytes, parse_frequency_hz, parse_size_bytes};
pub use validate::{BANDWIDTH_KERNELS, validate};
pub use writing::{
    check_write_target, partial_path, write_atomically, write_atomically_with,
    write_measured_machine_file,
};
pub use yaml_budget::{YAML_DEPTH_CAP, YAML_EXPANSION_CAP_BYTES};
