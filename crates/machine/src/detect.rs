//! Detection of the running machine from sysfs, `/proc/cpuinfo` and CPUID.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::file::read_text_within;
use crate::units::{parse_frequency_hz, parse_size_bytes};
use crate::{Cache, CacheKind, IsaFeature, Machine, MachineError, PeakFlops};

/// Where detection reads from; tests point it at a fake tree.
#[derive(Debug, Clone)]
pub struct SysRoot {
    /// The directory holding `cpu0/cache/index*` (normally `/sys/devices/system/cpu`).
    pub cpu_dir: PathBuf,
    /// The `cpuinfo` file (normally `/proc/cpuinfo`).
    pub cpuinfo: PathBuf,
}

impl SysRoot {
    /// The running system's own files.
    pub fn system() -> SysRoot {
        SysRoot {
            cpu_dir: PathBuf::from("/sys/devices/system/cpu"),
            cpuinfo: PathBuf::from("/proc/cpuinfo"),
        }
    }
}

/// What detection takes from `/proc/cpuinfo`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuInfo {
    /// `model name` of the first processor.
    pub model: Option<String>,
    /// `vendor_id`.
    pub vendor: Option<String>,
    /// `cpu family` and `model`, as numbers.
    pub family_model: Option<(u32, u32)>,
    /// Number of `processor` entries (logical CPUs).
    pub logical_cpus: u32,
    /// Distinct `physical id` values (at least 1).
    pub sockets: u32,
    /// `cpu cores` (cores per socket), when stated.
    pub cores_per_socket: Option<u32>,
    /// `siblings` (logical CPUs per socket), when stated.
    pub siblings: Option<u32>,
    /// `cpu MHz` of the first processor, in Hz.
    pub mhz_hz: Option<u64>,
    /// Feature flags of the first processor.
    pub flags: BTreeSet<String>,
}

/// Parses `/proc/cpuinfo` text. Unknown or malformed lines are skipped: the file's format varies
/// between kernels and architectures.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    let mut sockets = BTreeSet::new();
    let mut family = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let first = info.logical_cpus <= 1;
        match key {
            "processor" => info.logical_cpus += 1,
            "physical id" => {
                sockets.insert(value.to_owned());
            }
            "model name" if first && info.model.is_none() => info.model = Some(value.to_owned()),
            "vendor_id" if first && info.vendor.is_none() => info.vendor = Some(value.to_owned()),
            "cpu family" if first => family = value.parse().ok(),
            "model" if first => {
                if let (Some(f), Ok(m)) = (family, value.parse()) {
                    info.family_model = Some((f, m));
                }
            }
            "cpu cores" if first => info.cores_per_socket = value.parse().ok(),
            "siblings" if first => info.siblings = value.parse().ok(),
            "cpu MHz" if first && info.mhz_hz.is_none() => {
                info.mhz_hz = value
                    .parse::<f64>()
                    .ok()
                    .map(|mhz| (mhz * 1e6).round() as u64)
            }
            "flags" if first && info.flags.is_empty() => {
                info.flags = value.split_whitespace().map(str::to_owned).collect()
            }
            _ => {}
        }
    }
    info.sockets = (sockets.len() as u32).max(1);
    info
}

/// Detects the running machine: sysfs and `/proc/cpuinfo` first, CPUID for what they lack.
pub fn detect() -> Result<Machine, MachineError> {
    let mut machine = detect_from(&SysRoot::system())?;
    cpuid::complete(&mut machine);
    Ok(machine)
}

/// The most of `/proc/cpuinfo` read: one block of a few KiB per logical processor, so room
/// for tens of thousands.
pub const CPUINFO_CAP_BYTES: u64 = 64 << 20;

/// Detects a machine from the files under `root` only (no CPUID), so tests can use a fake tree.
pub fn detect_from(root: &SysRoot) -> Result<Machine, MachineError> {
    let mut machine = Machine::unknown();
    let mut sources = Vec::new();
    if root.cpuinfo.exists() {
        let text = read_text_within(&root.cpuinfo, CPUINFO_CAP_BYTES, "/proc/cpuinfo")?;
        let info = parse_cpuinfo(&text);
        apply_cpuinfo(&mut machine, &info);
        sources.push(root.cpuinfo.display().to_string());
    }
    machine.caches = read_sysfs_caches(&root.cpu_dir)?;
    if !machine.caches.is_empty() {
        sources.push(root.cpu_dir.join("cpu0/cache").display().to_string());
    }
    machine.sort_caches();
    machine.source = format!("detected from {}", sources.join(", "));
    Ok(machine)
}

fn apply_cpuinfo(machine: &mut Machine, info: &CpuInfo) {
    if let Some(model) = &info.model {
        machine.model = model.clone();
    }
    machine.vendor = info.vendor.clone().unwrap_or_default();
    machine.microarchitecture = info
        .family_model
        .map(|(f, m)| format!("family {f:#x} model {m:#x}"));
    machine.sockets = info.sockets;
    let logical = info.logical_cpus.max(1);
    machine.cores = info
        .cores_per_socket
        .map_or(logical, |c| c.saturating_mul(info.sockets).max(1));
    machine.threads_per_core = match (info.siblings, info.cores_per_socket) {
        (Some(s), Some(c)) if c > 0 && s >= c => s / c,
        _ => (logical / machine.cores).max(1),
    };
    // `cpu MHz` is the current clock; the model name's "@ 2.40GHz" is the nominal one.
    machine.nominal_hz = info
        .model
        .as_deref()
        .and_then(|m| m.rsplit_once('@'))
        .and_then(|(_, f)| parse_frequency_hz(&f.trim().replace("GHz", " GHz")))
        .or(info.mhz_hz);
    machine.isa = IsaFeature::ALL
        .into_iter()
        .filter(|f| info.flags.contains(f.cpuinfo_flag()))
        .collect();
    machine.peak_flops_per_cycle = PeakFlops::for_core(
        &machine.isa,
        &machine.vendor,
        machine.microarchitecture.as_deref(),
    );
}

/// Reads `cpu0/cache/index*`: the caches one core sees (the machine is taken as homogeneous).
fn read_sysfs_caches(cpu_dir: &Path) -> Result<Vec<Cache>, MachineError> {
    let cache_dir = cpu_dir.join("cpu0/cache");
    let Ok(entries) = std::fs::read_dir(&cache_dir) else {
        return Ok(Vec::new());
    };
    let mut caches = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("index") {
            caches.push(read_sysfs_cache(&entry.path())?);
        }
    }
    Ok(caches)
}

fn read_sysfs_cache(dir: &Path) -> Result<Cache, MachineError> {
    let field = |name: &str| -> Result<String, MachineError> {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_owned())
            .map_err(|source| MachineError::Io {
                path,
                action: "cannot read",
                source,
            })
    };
    let invalid = |name: &str, value: &str, expected: &str| MachineError::Invalid {
        path: dir.join(name),
        message: format!("found {value:?}, expected {expected}"),
    };
    let number = |name: &str| -> Result<u64, MachineError> {
        let value = field(name)?;
        value
            .parse()
            .map_err(|_| invalid(name, &value, "a whole number"))
    };
    let level_text = field("level")?;
    let level: u8 = level_text
        .parse()
        .map_err(|_| invalid("level", &level_text, "a cache level from 1 to 255"))?;
    let kind_text = field("type")?;
    let kind = match kind_text.as_str() {
        "Data" => CacheKind::Data,
        "Instruction" => CacheKind::Instruction,
        "Unified" => CacheKind::Unified,
        _ => return Err(invalid("type", &kind_text, "Data, Instruction or Unified")),
    };
    let size_text = field("size")?;
    let size_bytes = parse_size_bytes(&size_text)
        .ok_or_else(|| invalid("size", &size_text, "a size like 32K"))?;
    let line_bytes = number("coherency_line_size")?;
    let sets = number("number_of_sets").ok();
    // Some hypervisors report 0 ways; derive them from the sets when the kernel gives those.
    let ways = match (number("ways_of_associativity")?, sets) {
        (0, Some(s)) if s > 0 && line_bytes > 0 => size_bytes / (s * line_bytes),
        (0, _) => size_bytes.checked_div(line_bytes).unwrap_or(0),
        (w, _) => w,
    };
    let shared_by = field("shared_cpu_list")
        .map(|list| count_cpu_list(&list))
        .unwrap_or(1);
    let mut cache = Cache::new(level, kind, size_bytes, line_bytes, ways, shared_by.max(1));
    // A sets count that contradicts the size (partitioned caches, odd hypervisors) is left
    // derived, so that the description stays whole when read back.
    if let Some(s) = sets.filter(|&s| {
        ways.checked_mul(line_bytes)
            .and_then(|wl| wl.checked_mul(s))
            == Some(size_bytes)
    }) {
        cache.sets = s;
    }
    Ok(cache)
}

/// Counts the CPUs in a list such as `0-3,8,10-11`; malformed parts count as nothing.
fn count_cpu_list(list: &str) -> u32 {
    list.split(',')
        .filter_map(|part| match part.trim().split_once('-') {
            Some((a, b)) => Some(b.parse::<u32>().ok()?.checked_sub(a.parse().ok()?)? + 1),
            None => part.trim().parse::<u32>().ok().map(|_| 1),
        })
        .sum()
}

#[cfg(target_arch = "x86_64")]
mod cpuid {
    use raw_cpuid::CpuId;

    use crate::{Cache, CacheKind, IsaFeature, Machine, PeakFlops};

    /// Fills what the files did not give: TSC frequency, ISA features, caches, model name.
    pub(super) fn complete(machine: &mut Machine) {
        let cpuid = CpuId::new();
        if machine.model == "unknown" {
            if let Some(brand) = cpuid.get_processor_brand_string() {
                machine.model = brand.as_str().trim().to_owned();
            }
        }
        machine.tsc_hz = tsc_hz(&cpuid);
        if machine.isa.is_empty() {
            machine.isa = isa(&cpuid);
            machine.peak_flops_per_cycle = PeakFlops::for_core(
                &machine.isa,
                &machine.vendor,
                machine.microarchitecture.as_deref(),
            );
        }
        if machine.caches.is_empty() {
            machine.caches = caches(&cpuid);
            machine.sort_caches();
        }
        machine.source.push_str(", CPUID");
    }

    fn tsc_hz(cpuid: &CpuId<raw_cpuid::CpuIdReaderNative>) -> Option<u64> {
        let from_leaf_15 = cpuid
            .get_tsc_info()
            .and_then(|t| t.tsc_frequency())
            .filter(|&hz| hz > 0);
        let from_hypervisor = || {
            cpuid
                .get_hypervisor_info()
                .and_then(|h| h.tsc_frequency())
                .filter(|&khz| khz > 0)
                .map(|khz| u64::from(khz) * 1000)
        };
        from_leaf_15.or_else(from_hypervisor)
    }

    fn isa(cpuid: &CpuId<raw_cpuid::CpuIdReaderNative>) -> Vec<IsaFeature> {
        let features = cpuid.get_feature_info();
        let extended = cpuid.get_extended_feature_info();
        let has = |f: IsaFeature| match f {
            IsaFeature::Sse2 => features.as_ref().is_some_and(|x| x.has_sse2()),
            IsaFeature::Avx => features.as_ref().is_some_and(|x| x.has_avx()),
            IsaFeature::Fma => features.as_ref().is_some_and(|x| x.has_fma()),
            IsaFeature::Avx2 => extended.as_ref().is_some_and(|x| x.has_avx2()),
            IsaFeature::Avx512f => extended.as_ref().is_some_and(|x| x.has_avx512f()),
        };
        IsaFeature::ALL.into_iter().filter(|&f| has(f)).collect()
    }

    fn caches(cpuid: &CpuId<raw_cpuid::CpuIdReaderNative>) -> Vec<Cache> {
        let Some(params) = cpuid.get_cache_parameters() else {
            return Vec::new();
        };
        params
            .filter_map(|p| {
                let kind = match p.cache_type() {
                    raw_cpuid::CacheType::Data => CacheKind::Data,
                    raw_cpuid::CacheType::Instruction => CacheKind::Instruction,
                    raw_cpuid::CacheType::Unified => CacheKind::Unified,
                    _ => return None,
                };
                let line = p.coherency_line_size() as u64;
                let ways = p.associativity() as u64;
                let sets = p.sets() as u64;
                let mut cache = Cache::new(
                    p.level(),
                    kind,
                    line * ways * sets * p.physical_line_partitions() as u64,
                    line,
                    ways,
                    p.max_cores_for_cache() as u32,
                );
                if sets * ways * line == cache.size_bytes {
                    cache.sets = sets;
                }
                Some(cache)
            })
            .collect()
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod cpuid {
    pub(super) fn complete(_machine: &mut crate::Machine) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 2494.140\n\
physical id\t: 0\nsiblings\t: 4\ncpu cores\t: 2\n\
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq\n\n\
processor\t: 1\nphysical id\t: 0\nmodel name\t: ignored\n\n\
processor\t: 2\nphysical id\t: 0\n\nprocessor\t: 3\nphysical id\t: 0\n";

    fn write_cache(root: &Path, index: u32, fields: &[(&str, &str)]) {
        let dir = root.join(format!("cpu0/cache/index{index}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, value) in fields {
            std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
    }

    fn fake_tree() -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("cpu");
        let geometry = |level, kind, size, ways, sets, shared| {
            [
                ("level", level),
                ("type", kind),
                ("size", size),
                ("coherency_line_size", "64"),
                ("ways_of_associativity", ways),
                ("number_of_sets", sets),
                ("shared_cpu_list", shared),
            ]
        };
        write_cache(&cpu, 0, &geometry("1", "Data", "32K", "8", "64", "0,2"));
        write_cache(
            &cpu,
            1,
            &geometry("1", "Instruction", "32K", "8", "64", "0,2"),
        );
        write_cache(
            &cpu,
            2,
            &geometry("2", "Unified", "1024K", "16", "1024", "0,2"),
        );
        write_cache(
            &cpu,
            3,
            &geometry("3", "Unified", "36608K", "11", "53248", "0-3"),
        );
        let cpuinfo = dir.path().join("cpuinfo");
        std::fs::write(&cpuinfo, CPUINFO).unwrap();
        (
            dir,
            SysRoot {
                cpu_dir: cpu,
                cpuinfo,
            },
        )
    }

    #[test]
    fn detects_a_fake_cascade_lake() {
        let (_dir, root) = fake_tree();
        let m = detect_from(&root).unwrap();
        assert_eq!(m.model, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
        assert_eq!((m.sockets, m.cores, m.threads_per_core), (1, 2, 2));
        assert_eq!(m.nominal_hz, Some(2_500_000_000));
        assert_eq!(
            m.microarchitecture.as_deref(),
            Some("family 0x6 model 0x55")
        );
        let names: Vec<_> = m.caches.iter().map(Cache::name).collect();
        assert_eq!(names, ["L1d", "L1i", "L2", "L3"]);
        let l3 = &m.caches[3];
        assert_eq!(
            (l3.size_bytes, l3.ways, l3.sets, l3.shared_by),
            (36608 * 1024, 11, 53248, 4)
        );
        assert_eq!(m.caches[0].shared_by, 2);
        assert_eq!(m.peak_flops_per_cycle, PeakFlops { dp: 32, sp: 64 });
        assert_eq!(m.isa.len(), 5);
    }

    #[test]
    fn a_malformed_sysfs_value_names_the_file() {
        let (_dir, root) = fake_tree();
        let file = root.cpu_dir.join("cpu0/cache/index2/size");
        std::fs::write(&file, "huge\n").unwrap();
        let err = detect_from(&root).unwrap_err().to_string();
        assert!(
            err.contains("index2/size") && err.contains("\"huge\""),
            "{err}"
        );
    }

    #[test]
    fn an_empty_tree_gives_an_unknown_machine() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot {
            cpu_dir: dir.path().join("none"),
            cpuinfo: dir.path().join("none"),
        };
        let m = detect_from(&root).unwrap();
        assert_eq!(m.model, "unknown");
        assert!(m.caches.is_empty());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list("3-1,x"), 0);
    }

    proptest::proptest! {
        #[test]
        fn cpuinfo_parser_never_panics(text in "[a-z :\t\n0-9@.]{0,300}") {
            let _ = parse_cpuinfo(&text);
        }
    }
}
