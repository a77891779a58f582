//! Import of kerncraft's YAML machine files.
//!
//! kerncraft describes a machine by `clock`, `sockets`, `cores per socket`, `threads per core`,
//! `FLOPs per cycle`, a `memory hierarchy` list (one entry per level, with `cache per group`
//! geometry and `cores per group` / `threads per group` sharing) and `benchmarks` with measured
//! bandwidths per level, kernel and core count. Sizes use binary prefixes (`32.00 kB` is 32768
//! bytes), bandwidths decimal ones (`GB/s` is 10^9 bytes per second), as kerncraft prints them.
//! Every key the import does not carry over is reported in [`KerncraftImport::unmapped`], so a
//! user sees what was left behind rather than trusting a silent partial copy.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use crate::file::read_text;
use crate::units::{format_bytes, parse_frequency_hz, parse_size_bytes};
use crate::validate::{BANDWIDTH_KERNELS, validate};
use crate::yaml_budget::check_expansion;
use crate::yaml_positions::Positions;
use crate::{Bandwidth, Cache, CacheKind, Machine, MachineError, Measured, PeakFlops};

/// The result of importing a kerncraft machine file.
#[derive(Debug, Clone, PartialEq)]
pub struct KerncraftImport {
    /// The machine, as far as the file describes it.
    pub machine: Machine,
    /// Dotted paths of every key that was not mapped (`in-core model`,
    /// `memory hierarchy[L2].upstream throughput`, ...), in file order.
    pub unmapped: Vec<String>,
}

/// How an imported machine's `source` begins, before the kerncraft file's path.
pub(crate) const IMPORTED_FROM: &str = "imported from kerncraft file ";

/// Reads and imports a kerncraft machine file.
pub fn import_kerncraft(path: &Path) -> Result<KerncraftImport, MachineError> {
    import_kerncraft_str(&read_text(path)?, path)
}

/// Imports a kerncraft machine file's text; `path` names it in errors and in `source`.
pub fn import_kerncraft_str(text: &str, path: &Path) -> Result<KerncraftImport, MachineError> {
    if is_loopscope_file(text, path) {
        return Err(MachineError::Invalid {
            path: path.to_owned(),
            message: format!(
                "a loopscope machine file (TOML), not a kerncraft YAML file: give it with \
                 `-m {}` (`loopscope machine -m {}` shows it)",
                path.display(),
                path.display()
            ),
        });
    }
    check_expansion(text, path)?;
    let docs = YamlLoader::load_from_str(text).map_err(|e| MachineError::Syntax {
        path: path.to_owned(),
        line: e.marker().line().max(1),
        column: e.marker().col() + 1,
        message: e.info().to_owned(),
    })?;
    let root = match docs.as_slice() {
        [root @ Yaml::Hash(_)] => root,
        _ => {
            return Err(invalid(
                path,
                "",
                "expected one YAML document holding a mapping",
            ));
        }
    };
    Importer {
        path,
        unmapped: Vec::new(),
        positions: Positions::of(text, root),
    }
    .import(root)
}

/// Whether `text` is one of loopscope's own machine files, which is TOML: its arrays of tables
/// are no YAML, so the YAML parser's complaint would name a line but not the mix-up. A file
/// named `.toml` counts only when it parses as TOML, so that a misnamed kerncraft file still
/// imports.
fn is_loopscope_file(text: &str, path: &Path) -> bool {
    let named_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    match toml::from_str::<toml::Table>(text) {
        Ok(table) => table.contains_key("format_version") || named_toml && !table.is_empty(),
        Err(_) => false,
    }
}

fn invalid(path: &Path, key: &str, message: &str) -> MachineError {
    let message = if key.is_empty() {
        message.to_owned()
    } else {
        format!("key `{key}`: {message}")
    };
    MachineError::Invalid {
        path: path.to_owned(),
        message,
    }
}

struct Importer<'a> {
    path: &'a Path,
    unmapped: Vec<String>,
    positions: Positions,
}

impl Importer<'_> {
    fn import(mut self, root: &Yaml) -> Result<KerncraftImport, MachineError> {
        let mut machine = Machine::unknown();
        machine.source = format!("{IMPORTED_FROM}{}", self.path.display());
        let mut cores_per_socket = None;
        let mut line_bytes = None;
        for (key, value) in self.entries(root, "")? {
            match key.as_str() {
                // ARM files leave the name empty (`model name: null`).
                "model name" if value.is_null() => {}
                "model name" => machine.model = self.text(value, &key)?,
                "model type" => machine.microarchitecture = Some(self.text(value, &key)?),
                "clock" => machine.nominal_hz = Some(self.frequency(value, &key)?),
                "sockets" => machine.sockets = self.count(value, &key)?,
                "cores per socket" => cores_per_socket = Some(self.count(value, &key)?),
                "threads per core" => machine.threads_per_core = self.count(value, &key)?,
                "cacheline size" => line_bytes = Some(self.size(value, &key)?),
                "FLOPs per cycle" => machine.peak_flops_per_cycle = self.flops(value, &key)?,
                _ => {}
            }
        }
        machine.cores = cores_per_socket
            .unwrap_or(1)
            .saturating_mul(machine.sockets);
        for (key, value) in self.entries(root, "")? {
            match key.as_str() {
                "memory hierarchy" => {
                    machine.caches = self.hierarchy(value, &key, line_bytes, &machine)?
                }
                "benchmarks" => {
                    let bandwidth = self.benchmarks(value, &key)?;
                    if !bandwidth.is_empty() {
                        machine.measured = Some(Measured {
                            bandwidth,
                            notes: vec![format!(
                                "bandwidths imported from {}",
                                self.path.display()
                            )],
                            ..Measured::default()
                        });
                    }
                }
                "model name" | "model type" | "clock" | "sockets" | "cores per socket"
                | "threads per core" | "cacheline size" | "FLOPs per cycle" => {}
                _ => self.unmapped.push(key),
            }
        }
        if machine.caches.is_empty() {
            return Err(invalid(
                self.path,
                "memory hierarchy",
                "no cache level (expected a list of levels with `cache per group`)",
            ));
        }
        let peak = machine.peak_flops_per_cycle;
        if peak.dp == 0 || peak.sp == 0 {
            return Err(invalid(
                self.path,
                "FLOPs per cycle",
                &format!(
                    "DP total {} and SP total {}: expected both, 1 or more \
                     (`FLOPs per cycle: {{DP: {{total: 16}}, SP: {{total: 32}}}}`)",
                    peak.dp, peak.sp
                ),
            ));
        }
        machine.sort_caches();
        validate(&machine, self.path)?;
        Ok(KerncraftImport {
            machine,
            unmapped: self.unmapped,
        })
    }

    fn flops(&mut self, value: &Yaml, key: &str) -> Result<PeakFlops, MachineError> {
        let mut peak = PeakFlops { dp: 0, sp: 0 };
        for (precision, per_kind) in self.entries(value, key)? {
            let path = format!("{key}.{precision}");
            let slot = match precision.as_str() {
                "DP" => &mut peak.dp,
                "SP" => &mut peak.sp,
                _ => {
                    self.unmapped.push(path);
                    continue;
                }
            };
            for (op, count) in self.entries(per_kind, &path)? {
                let op_path = format!("{path}.{op}");
                if op == "total" {
                    *slot = self.count(count, &op_path)?;
                } else {
                    self.unmapped.push(op_path);
                }
            }
        }
        Ok(peak)
    }

    fn hierarchy(
        &mut self,
        value: &Yaml,
        key: &str,
        default_line_bytes: Option<u64>,
        machine: &Machine,
    ) -> Result<Vec<Cache>, MachineError> {
        let Yaml::Array(levels) = value else {
            return Err(invalid(self.path, key, "expected a list of levels"));
        };
        let mut caches = Vec::new();
        for (index, level) in levels.iter().enumerate() {
            let name = match level["level"].as_str() {
                Some(name) => name.to_owned(),
                None => index.to_string(),
            };
            let path = format!("{key}[{name}]");
            if let Some(cache) = self.level(level, &path, &name, default_line_bytes, machine)? {
                if caches.iter().any(|c: &Cache| c.level == cache.level) {
                    return Err(invalid(self.path, &path, "the level is listed twice"));
                }
                caches.push(cache);
            }
        }
        Ok(caches)
    }

    fn level(
        &mut self,
        level: &Yaml,
        path: &str,
        name: &str,
        default_line_bytes: Option<u64>,
        machine: &Machine,
    ) -> Result<Option<Cache>, MachineError> {
        let entries = self.entries(level, path)?;
        let Some(geometry) = entries.iter().find(|(k, _)| k == "cache per group") else {
            // Main memory (or any level without a cache): nothing of it maps to a cache.
            for (key, _) in &entries {
                if key != "level" {
                    self.unmapped.push(format!("{path}.{key}"));
                }
            }
            return Ok(None);
        };
        let number: u8 = name
            .trim_start_matches(['L', 'l'])
            .parse()
            .map_err(|_| invalid(self.path, &format!("{path}.level"), "expected L1, L2, ..."))?;
        let kind = if number == 1 {
            CacheKind::Data
        } else {
            CacheKind::Unified
        };
        let geometry_path = format!("{path}.cache per group");
        let mut cache = self.cache_per_group(geometry.1, &geometry_path)?;
        check_geometry(&cache, &geometry_path, self.path)?;
        cache.level = number;
        cache.kind = kind;
        if cache.line_bytes == 0 {
            cache.line_bytes = default_line_bytes.unwrap_or(64);
        }
        cache.size_bytes = cache.sets * cache.ways * cache.line_bytes;
        let mut threads = None;
        let mut cores = None;
        for (key, value) in &entries {
            let key_path = format!("{path}.{key}");
            match key.as_str() {
                "level" | "cache per group" => {}
                "threads per group" => threads = Some(self.count(value, &key_path)?),
                "cores per group" => cores = Some(self.count(value, &key_path)?),
                "size per group" => {
                    let stated = self.size(value, &key_path)?;
                    check_stated_size(&cache, stated, &key_path, self.path)?;
                }
                _ => self.unmapped.push(key_path),
            }
        }
        cache.shared_by = threads
            .or(cores.map(|c| c * machine.threads_per_core))
            .unwrap_or(1);
        Ok(Some(cache))
    }

    fn cache_per_group(&mut self, value: &Yaml, path: &str) -> Result<Cache, MachineError> {
        let mut cache = Cache::new(0, CacheKind::Unified, 0, 0, 0, 1);
        for (key, value) in self.entries(value, path)? {
            let key_path = format!("{path}.{key}");
            match key.as_str() {
                "sets" => cache.sets = u64::from(self.count(value, &key_path)?),
                "ways" => cache.ways = u64::from(self.count(value, &key_path)?),
                "cl_size" => cache.line_bytes = u64::from(self.count(value, &key_path)?),
                "replacement_policy" => cache.replacement = Some(self.text(value, &key_path)?),
                "write_allocate" => cache.write_allocate = Some(self.boolean(value, &key_path)?),
                "write_back" => cache.write_back = Some(self.boolean(value, &key_path)?),
                _ => self.unmapped.push(key_path),
            }
        }
        Ok(cache)
    }

    /// The benchmarked runs. kerncraft measures each level with one or more threads per
    /// core (`measurements.L1.1`, `measurements.L1.2`); two groups can hold runs of the same
    /// thread count on different cores (20 cores × 1 thread, 10 cores × 2). Each run keeps its
    /// cores, and of runs with the same level, kernel and threads only the one with the
    /// fewest threads per core is kept, as kerncraft's own model reads its benchmarks.
    fn benchmarks(&mut self, value: &Yaml, key: &str) -> Result<Vec<Bandwidth>, MachineError> {
        let mut bandwidth = Vec::new();
        for (section, content) in self.entries(value, key)? {
            let path = format!("{key}.{section}");
            if section != "measurements" {
                self.unmapped.push(path);
                continue;
            }
            for (level, per_threads) in self.entries(content, &path)? {
                let level_path = format!("{path}.{level}");
                for (threads_per_core, run) in self.entries(per_threads, &level_path)? {
                    let run_path = format!("{level_path}.{threads_per_core}");
                    let smt: u32 = threads_per_core.parse().map_err(|_| {
                        invalid(
                            self.path,
                            &run_path,
                            "expected threads per core as a number",
                        )
                    })?;
                    if smt == 0 {
                        return Err(invalid(
                            self.path,
                            &run_path,
                            "0 threads per core: expected 1 or more",
                        ));
                    }
                    self.run(run, &run_path, &level, smt, &mut bandwidth)?;
                }
            }
        }
        Ok(fewest_threads_per_core(bandwidth))
    }

    /// One measurement series: bandwidth per kernel for each core count.
    fn run(
        &mut self,
        run: &Yaml,
        path: &str,
        level: &str,
        smt: u32,
        out: &mut Vec<Bandwidth>,
    ) -> Result<(), MachineError> {
        let cores = self.list(&run["cores"], &format!("{path}.cores"), Self::count)?;
        let total_key = format!("{path}.total size");
        let per_core_key = format!("{path}.size per core");
        let total = match &run["total size"] {
            Yaml::BadValue => None,
            v => Some(self.list(v, &total_key, Self::size)?),
        };
        let per_core = match &run["size per core"] {
            Yaml::BadValue => None,
            v => Some(self.list(v, &per_core_key, Self::size)?),
        };
        for (key, _) in self.entries(run, path)? {
            if !matches!(
                key.as_str(),
                "cores" | "results" | "total size" | "size per core"
            ) {
                self.unmapped.push(format!("{path}.{key}"));
            }
        }
        for (key, list) in [(&total_key, &total), (&per_core_key, &per_core)] {
            if let Some(list) = list {
                self.same_length(list.len(), cores.len(), key)?;
            }
        }
        if let Some(i) = cores.iter().position(|&c| c == 0) {
            return Err(invalid(
                self.path,
                &format!("{path}.cores"),
                &format!("entry {} is 0: expected 1 or more", i + 1),
            ));
        }
        let results_path = format!("{path}.results");
        for (kernel, values) in self.entries(&run["results"], &results_path)? {
            let kernel_path = format!("{results_path}.{kernel}");
            if !BANDWIDTH_KERNELS.contains(&kernel.as_str()) {
                self.unmapped.push(kernel_path);
                continue;
            }
            let rates = self.list(values, &kernel_path, Self::rate)?;
            self.same_length(rates.len(), cores.len(), &kernel_path)?;
            for (i, gb_per_s) in rates.into_iter().enumerate() {
                let core_count = cores[i];
                let working_set_bytes = match (&total, &per_core) {
                    (Some(t), _) => t[i],
                    (_, Some(p)) => p[i] * u64::from(core_count),
                    _ => 0,
                };
                out.push(Bandwidth {
                    level: level.to_owned(),
                    kernel: kernel.clone(),
                    threads: core_count.saturating_mul(smt),
                    cores: Some(core_count),
                    working_set_bytes,
                    gb_per_s,
                    gb_per_s_with_write_allocate: None,
                    method: "kerncraft benchmarks (likwid-bench)".to_owned(),
                    vector_bytes: None,
                });
            }
        }
        Ok(())
    }

    /// A list beside `cores` has one entry per core count.
    fn same_length(&self, found: usize, cores: usize, key: &str) -> Result<(), MachineError> {
        if found == cores {
            return Ok(());
        }
        Err(invalid(
            self.path,
            key,
            &format!(
                "{} for the {cores} core counts of `cores`: expected one per core count",
                match found {
                    1 => "1 entry".to_owned(),
                    n => format!("{n} entries"),
                }
            ),
        ))
    }

    fn entries<'y>(
        &self,
        value: &'y Yaml,
        path: &str,
    ) -> Result<Vec<(String, &'y Yaml)>, MachineError> {
        let Yaml::Hash(hash) = value else {
            return Err(self.bad_value(value, path, "expected a mapping"));
        };
        hash.iter()
            .map(|(k, v)| match k {
                Yaml::String(s) => Ok((s.clone(), v)),
                Yaml::Integer(i) => Ok((i.to_string(), v)),
                Yaml::Real(r) => Ok((r.clone(), v)),
                _ => Err(invalid(self.path, path, "expected text or numbers as keys")),
            })
            .collect()
    }

    fn list<T>(
        &mut self,
        value: &Yaml,
        path: &str,
        item: fn(&mut Self, &Yaml, &str) -> Result<T, MachineError>,
    ) -> Result<Vec<T>, MachineError> {
        let Yaml::Array(items) = value else {
            return Err(self.bad_value(value, path, "expected a list"));
        };
        items.iter().map(|v| item(self, v, path)).collect()
    }

    /// A bad value, named by its line and column when the document has them.
    fn bad_value(&self, value: &Yaml, path: &str, message: &str) -> MachineError {
        match self.positions.get(value) {
            Some((line, column)) => MachineError::Syntax {
                path: self.path.to_owned(),
                line,
                column,
                message: format!("key `{path}`: {message}"),
            },
            None => invalid(self.path, path, message),
        }
    }

    fn text(&mut self, value: &Yaml, path: &str) -> Result<String, MachineError> {
        match value {
            Yaml::String(s) | Yaml::Real(s) => Ok(s.clone()),
            Yaml::Integer(i) => Ok(i.to_string()),
            _ => Err(self.bad_value(value, path, "expected text")),
        }
    }

    /// A count: a whole number, also written as an integral float (kerncraft's own files have
    /// `cores per group: 1.0`).
    fn count(&mut self, value: &Yaml, path: &str) -> Result<u32, MachineError> {
        let whole = match value {
            Yaml::Integer(i) => u32::try_from(*i).ok(),
            Yaml::Real(r) => r
                .parse::<f64>()
                .ok()
                .filter(|v| v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(v))
                .map(|v| v as u32),
            _ => None,
        };
        whole.ok_or_else(|| {
            let message = match value {
                Yaml::Real(r) | Yaml::String(r) => {
                    format!("expected a whole number, found `{r}`")
                }
                Yaml::Integer(i) => {
                    format!("expected a whole number from 0 to 2^32 - 1, found {i}")
                }
                _ => "expected a whole number".to_owned(),
            };
            self.bad_value(value, path, &message)
        })
    }

    fn boolean(&mut self, value: &Yaml, path: &str) -> Result<bool, MachineError> {
        value
            .as_bool()
            .ok_or_else(|| self.bad_value(value, path, "expected true or false"))
    }

    fn size(&mut self, value: &Yaml, path: &str) -> Result<u64, MachineError> {
        let parsed = match value {
            Yaml::Integer(i) => u64::try_from(*i).ok(),
            Yaml::String(s) => parse_size_bytes(s),
            _ => None,
        };
        parsed.ok_or_else(|| self.bad_value(value, path, "expected a size such as `32.00 kB`"))
    }

    fn frequency(&mut self, value: &Yaml, path: &str) -> Result<u64, MachineError> {
        let parsed = match value {
            Yaml::String(s) => parse_frequency_hz(s),
            Yaml::Real(r) => r.parse::<f64>().ok().map(|ghz| (ghz * 1e9) as u64),
            _ => None,
        };
        parsed.ok_or_else(|| self.bad_value(value, path, "expected a frequency such as `2.4 GHz`"))
    }

    fn rate(&mut self, value: &Yaml, path: &str) -> Result<f64, MachineError> {
        let parsed = match value {
            Yaml::String(s) => s
                .trim()
                .strip_suffix("GB/s")
                .and_then(|n| n.trim().parse::<f64>().ok()),
            Yaml::Real(r) => r.parse().ok(),
            _ => None,
        };
        parsed
            .filter(|r| r.is_finite() && *r >= 0.0)
            .ok_or_else(|| {
                self.bad_value(value, path, "expected a bandwidth such as `270.23 GB/s`")
            })
    }
}

/// A level's `size per group` agrees with its `cache per group` (sets × ways × cl_size) within
/// the rounding of kerncraft's two decimals; a contradiction is refused rather than one of the
/// two trusted silently.
fn check_stated_size(
    cache: &Cache,
    stated: u64,
    key: &str,
    file: &Path,
) -> Result<(), MachineError> {
    let computed = cache.size_bytes;
    if computed.abs_diff(stated) <= computed / 100 {
        return Ok(());
    }
    Err(invalid(
        file,
        key,
        &format!(
            "{} contradicts `cache per group`: {} sets × {} ways × {} B lines = {}",
            format_bytes(stated),
            cache.sets,
            cache.ways,
            cache.line_bytes,
            format_bytes(computed)
        ),
    ))
}

/// `runs` without those that another run of the same level, kernel and thread count made
/// with fewer threads per core; each run's threads per core is `threads / cores`.
fn fewest_threads_per_core(runs: Vec<Bandwidth>) -> Vec<Bandwidth> {
    let per_core = |b: &Bandwidth| b.threads / b.cores.unwrap_or(1).max(1);
    runs.iter()
        .filter(|run| {
            !runs.iter().any(|other| {
                other.level == run.level
                    && other.kernel == run.kernel
                    && other.threads == run.threads
                    && per_core(other) < per_core(run)
            })
        })
        .cloned()
        .collect()
}

/// The parts of a level's `cache per group` the simulator needs: ways and sets 1 or more, a
/// line size (when given) that is a power of two.
fn check_geometry(cache: &Cache, path: &str, file: &Path) -> Result<(), MachineError> {
    for (key, value) in [("ways", cache.ways), ("sets", cache.sets)] {
        if value == 0 {
            return Err(invalid(
                file,
                &format!("{path}.{key}"),
                "is 0 (or missing): expected 1 or more",
            ));
        }
    }
    if cache.line_bytes != 0 && !cache.line_bytes.is_power_of_two() {
        return Err(invalid(
            file,
            &format!("{path}.cl_size"),
            &format!("is {}: expected a power of two", cache.line_bytes),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKYLAKE: &str = include_str!("../../../examples/machines/skylake-sp.yml");
    const HASWELL: &str = include_str!("../../../examples/machines/haswell-ep.yml");
    const BROKEN: &str = include_str!("../../../examples/machines/broken.yml");

    const FLOPS: &str = "FLOPs per cycle: {DP: {total: 16}, SP: {total: 32}}\n";

    fn import(text: &str) -> Result<KerncraftImport, MachineError> {
        import_kerncraft_str(text, Path::new("m.yml"))
    }

    #[test]
    fn skylake_sp_maps_machine_caches_and_bandwidths() {
        let KerncraftImport { machine, unmapped } = import(SKYLAKE).unwrap();
        assert_eq!(machine.model, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz");
        assert_eq!(machine.nominal_hz, Some(2_400_000_000));
        assert_eq!(
            (machine.sockets, machine.cores, machine.threads_per_core),
            (2, 40, 2)
        );
        assert_eq!(machine.peak_flops_per_cycle, PeakFlops { dp: 32, sp: 64 });
        let geometry: Vec<_> = machine
            .caches
            .iter()
            .map(|c| (c.name(), c.size_bytes, c.ways, c.sets, c.shared_by))
            .collect();
        assert_eq!(
            geometry,
            [
                ("L1d".to_owned(), 32768, 8, 64, 2),
                ("L2".to_owned(), 1 << 20, 16, 1024, 2),
                ("L3".to_owned(), 28_835_840, 11, 40960, 40),
            ]
        );
        assert_eq!(machine.caches[2].write_allocate, Some(false));
        let bw = &machine.measured.as_ref().unwrap().bandwidth;
        assert_eq!(bw.len(), 12);
        let mem_triad_2 = bw
            .iter()
            .find(|b| b.level == "MEM" && b.kernel == "triad" && b.threads == 2)
            .unwrap();
        assert_eq!(mem_triad_2.gb_per_s, 25.3);
        assert_eq!(mem_triad_2.working_set_bytes, 200 << 20);
        for key in [
            "kerncraft version",
            "in-core model",
            "FLOPs per cycle.DP.FMA",
            "memory hierarchy[L1].cache per group.load_from",
            "memory hierarchy[L2].upstream throughput",
            "memory hierarchy[MEM].threads per group",
            "benchmarks.kernels",
            "benchmarks.measurements.MEM.1.stats",
        ] {
            assert!(
                unmapped.iter().any(|k| k == key),
                "{key} not in {unmapped:?}"
            );
        }
        assert!(
            !unmapped
                .iter()
                .any(|k| k == "clock" || k.ends_with(".sets"))
        );
    }

    #[test]
    fn haswell_ep_derives_working_sets_from_size_per_core() {
        let KerncraftImport { machine, .. } = import(HASWELL).unwrap();
        assert_eq!(machine.cores, 28);
        assert_eq!(machine.caches[1].size_bytes, 256 * 1024);
        assert_eq!(machine.caches[2].size_bytes, 35 << 20);
        let bw = &machine.measured.as_ref().unwrap().bandwidth;
        let mem_load_7 = bw
            .iter()
            .find(|b| b.level == "MEM" && b.kernel == "load" && b.threads == 7)
            .unwrap();
        // 71.43 MB per core is rounded by kerncraft; 7 cores hold about 500 MB.
        let expected = 71.43 * 1024.0 * 1024.0 * 7.0;
        assert!((mem_load_7.working_set_bytes as f64 - expected).abs() < 8.0);
    }

    #[test]
    fn errors_name_the_position_or_the_key() {
        let err = import(BROKEN).unwrap_err().to_string();
        assert!(err.starts_with("m.yml:"), "{err}");
        assert!(err.chars().filter(|&c| c == ':').count() >= 3, "{err}");
        let err = import("clock: fast\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "m.yml:1:8: key `clock`: expected a frequency such as `2.4 GHz`"
        );
        let err = import("- a list\n").unwrap_err().to_string();
        assert!(
            err.contains("expected one YAML document holding a mapping"),
            "{err}"
        );
        let text = "memory hierarchy:\n  - level: Lx\n    cache per group: {sets: 1}\n";
        let err = import(text).unwrap_err().to_string();
        assert!(err.contains("memory hierarchy[Lx].level"), "{err}");
    }

    #[test]
    fn a_loopscope_machine_file_is_named_as_such() {
        let mut machine = crate::Machine::unknown();
        machine.peak_flops_per_cycle = crate::PeakFlops { dp: 4, sp: 8 };
        machine.caches.push(crate::Cache::new(
            1,
            crate::CacheKind::Data,
            32768,
            64,
            8,
            1,
        ));
        let text = crate::to_toml(&machine).unwrap();
        for name in ["m.toml", "m.yml"] {
            let err = import_kerncraft_str(&text, Path::new(name))
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!(
                    "{name}: a loopscope machine file (TOML), not a kerncraft YAML file: give it \
                     with `-m {name}` (`loopscope machine -m {name}` shows it)"
                )
            );
        }
        // A kerncraft file keeps importing whatever its name, and names itself as the source.
        let imported = import_kerncraft_str(SKYLAKE, Path::new("skx.toml")).unwrap();
        assert_eq!(imported.machine.kerncraft_file(), Some("skx.toml"));
        assert_eq!(machine.kerncraft_file(), None);
    }

    #[test]
    fn impossible_hierarchies_are_refused() {
        let level = |name: &str, geometry: &str| {
            format!("  - level: {name}\n    cache per group: {{{geometry}}}\n")
        };
        let good = "sets: 64, ways: 8, cl_size: 64";
        let cases = [
            (
                level("L1", "sets: 64, ways: 0, cl_size: 64"),
                "key `memory hierarchy[L1].cache per group.ways`: is 0",
            ),
            (
                level("L1", "sets: 64, ways: 8, cl_size: 63"),
                "key `memory hierarchy[L1].cache per group.cl_size`: is 63: expected a power of two",
            ),
            (
                level("L1", good) + &level("L1", good),
                "key `memory hierarchy[L1]`: the level is listed twice",
            ),
            (
                "  - level: MEM\n    cores per group: 4\n".to_owned(),
                "key `memory hierarchy`: no cache level",
            ),
        ];
        for (levels, want) in cases {
            let text = format!("clock: 2 GHz\nmemory hierarchy:\n{levels}");
            let err = import(&text).unwrap_err().to_string();
            assert!(
                err.starts_with("m.yml: ") && err.contains(want),
                "{text}: {err}"
            );
        }
        let err = import("clock: 2 GHz\n").unwrap_err().to_string();
        assert!(err.contains("`memory hierarchy`: no cache level"), "{err}");
        let text = format!("{FLOPS}memory hierarchy:\n{}", level("L1", good));
        assert_eq!(import(&text).unwrap().machine.caches[0].size_bytes, 32768);
    }

    #[test]
    fn integral_float_counts_are_whole_numbers_and_others_are_refused_by_position() {
        let file = |cores: &str| {
            format!(
                "{FLOPS}model name: null\nthreads per core: 2\nmemory hierarchy:\n  - level: L1\n    \
                 cache per group: {{sets: 64, ways: 8, cl_size: 64}}\n    cores per group: {cores}\n"
            )
        };
        let machine = import(&file("1.0")).unwrap().machine;
        assert_eq!(machine.caches[0].shared_by, 2);
        assert_eq!(machine.model, "unknown");
        for (cores, found) in [("1.5", "`1.5`"), ("-1.0", "`-1.0`"), ("-3", "-3")] {
            let err = import(&file(cores)).unwrap_err().to_string();
            assert!(
                err.starts_with("m.yml:7:22: key `memory hierarchy[L1].cores per group`: expected a whole number")
                    && err.ends_with(found),
                "{cores}: {err}"
            );
        }
        let err = import("sockets: 2.5\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "m.yml:1:10: key `sockets`: expected a whole number, found `2.5`"
        );
    }

    /// A file of one L1 and the given benchmarks.
    fn with_benchmarks(measurements: &str) -> String {
        format!(
            "{FLOPS}threads per core: 2\nsockets: 1\ncores per socket: 4\nmemory hierarchy:\n  \
             - level: L1\n    cache per group: {{sets: 64, ways: 8, cl_size: 64}}\n\
             benchmarks:\n  measurements:\n    L1:\n{measurements}"
        )
    }

    #[test]
    fn runs_keep_their_cores_and_the_fewest_threads_per_core() {
        let text = with_benchmarks(
            "      1:\n        cores: [1, 2]\n        results: {load: [10 GB/s, 20 GB/s]}\n\
             \x20       size per core: [16 kB, 16 kB]\n\
             \x20     2:\n        cores: [1, 2]\n        results: {load: [11 GB/s, 22 GB/s]}\n\
             \x20       size per core: [16 kB, 16 kB]\n",
        );
        let machine = import(&text).unwrap().machine;
        let runs: Vec<_> = machine
            .measured
            .unwrap()
            .bandwidth
            .iter()
            .map(|b| (b.threads, b.cores, b.gb_per_s))
            .collect();
        // Two threads on two cores (the one-per-core group) beat two threads on one core.
        assert_eq!(
            runs,
            [(1, Some(1), 10.0), (2, Some(2), 20.0), (4, Some(2), 22.0)]
        );
    }

    #[test]
    fn short_lists_contradicting_sizes_and_missing_peaks_are_refused() {
        let short = with_benchmarks(
            "      1:\n        cores: [1, 2]\n        results: {load: [10 GB/s]}\n",
        );
        let err = import(&short).unwrap_err().to_string();
        assert_eq!(
            err,
            "m.yml: key `benchmarks.measurements.L1.1.results.load`: 1 entry for the 2 core \
             counts of `cores`: expected one per core count"
        );
        let sizes = with_benchmarks(
            "      1:\n        cores: [1, 2]\n        results: {load: [1 GB/s, 2 GB/s]}\n\
             \x20       total size: [16 kB]\n",
        );
        let err = import(&sizes).unwrap_err().to_string();
        assert!(
            err.contains("`benchmarks.measurements.L1.1.total size`: 1 entry for the 2"),
            "{err}"
        );
        let odd = with_benchmarks(
            "      1:\n        cores: [1]\n        results: {load: [1 GB/s], stream: [2 GB/s]}\n",
        );
        let imported = import(&odd).unwrap();
        assert!(
            imported
                .unmapped
                .iter()
                .any(|k| k.ends_with("results.stream"))
        );
        let text = format!(
            "{FLOPS}memory hierarchy:\n  - level: L1\n    cache per group: {{sets: 64, ways: 8, \
             cl_size: 64}}\n    size per group: 48.00 kB\n"
        );
        let err = import(&text).unwrap_err().to_string();
        assert_eq!(
            err,
            "m.yml: key `memory hierarchy[L1].size per group`: 48 KiB contradicts `cache per \
             group`: 64 sets × 8 ways × 64 B lines = 32 KiB"
        );
        let agreeing = text.replace("48.00 kB", "32.00 kB");
        assert!(import(&agreeing).is_ok());
        let no_peak = agreeing.replace(FLOPS, "");
        let err = import(&no_peak).unwrap_err().to_string();
        assert!(
            err.starts_with("m.yml: key `FLOPs per cycle`: DP total 0 and SP total 0"),
            "{err}"
        );
    }

    proptest::proptest! {
        #[test]
        fn truncated_and_mutated_files_never_panic(cut in 0usize..4000, at in 0usize..4000,
                                                   byte in proptest::char::range(' ', '~')) {
            let text = SKYLAKE;
            let cut = cut.min(text.len());
            let _ = import(&text[..cut]);
            let at = at.min(text.len() - 1);
            let mut mutated: Vec<char> = text.chars().collect();
            mutated[at] = byte;
            let _ = import(&mutated.into_iter().collect::<String>());
        }
    }
}
