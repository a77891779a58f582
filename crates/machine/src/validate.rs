//! What a machine description must hold to be used: checked when a file is read or imported,
//! so that a zero, a NaN or a contradiction is refused naming the file and the key, instead of
//! surfacing later as a division by zero, an endless simulation or a misleading message.

use std::path::Path;

use crate::{Bandwidth, Cache, Machine, MachineError};

/// Checks `machine`, read from `path`: counts at least 1, clocks above 0, every cache's
/// geometry whole (size, ways and line above 0, the line a power of two, sets × ways × line =
/// size), no cache level described twice, a peak of 1 FLOP per cycle or more, every measured
/// figure finite (rates, bandwidths and latencies above 0) and every bandwidth run's level,
/// kernel, threads and cores usable.
pub fn validate(machine: &Machine, path: &Path) -> Result<(), MachineError> {
    let bad = |key: &str, message: String| MachineError::Invalid {
        path: path.to_owned(),
        message: format!("`{key}` {message}"),
    };
    for (key, value) in [
        ("sockets", machine.sockets),
        ("cores", machine.cores),
        ("threads_per_core", machine.threads_per_core),
    ] {
        if value == 0 {
            return Err(bad(key, "is 0: expected 1 or more".into()));
        }
    }
    for (key, value) in [
        ("peak_flops_per_cycle.dp", machine.peak_flops_per_cycle.dp),
        ("peak_flops_per_cycle.sp", machine.peak_flops_per_cycle.sp),
    ] {
        if value == 0 {
            return Err(bad(
                key,
                "is 0: expected the theoretical FLOPs per cycle and core, 1 or more".into(),
            ));
        }
    }
    for (key, value) in [
        ("nominal_hz", machine.nominal_hz),
        ("tsc_hz", machine.tsc_hz),
    ] {
        if value == Some(0) {
            return Err(bad(key, "is 0: expected a clock in Hz, or no key".into()));
        }
    }
    for (i, cache) in machine.caches.iter().enumerate() {
        check_cache(cache, &format!("caches[{i}]"), &bad)?;
        if let Some(first) = machine.caches[..i]
            .iter()
            .position(|c| c.level == cache.level && c.kind == cache.kind)
        {
            return Err(bad(
                &format!("caches[{i}]"),
                format!("describes {} again (as caches[{first}] does)", cache.name()),
            ));
        }
    }
    check_measured(machine, &bad)
}

fn check_cache(
    cache: &Cache,
    key: &str,
    bad: &dyn Fn(&str, String) -> MachineError,
) -> Result<(), MachineError> {
    let name = cache.name();
    for (field, value) in [
        ("size_bytes", cache.size_bytes),
        ("line_bytes", cache.line_bytes),
        ("ways", cache.ways),
        ("sets", cache.sets),
        ("shared_by", u64::from(cache.shared_by)),
    ] {
        if value == 0 {
            return Err(bad(
                &format!("{key}.{field}"),
                format!("({name}) is 0: expected 1 or more"),
            ));
        }
    }
    if cache.size_bytes > MAX_CACHE_BYTES {
        return Err(bad(
            &format!("{key}.size_bytes"),
            format!("({name}) is {}: {SIZE_RANGE}", cache.size_bytes),
        ));
    }
    if !cache.line_bytes.is_power_of_two() {
        return Err(bad(
            &format!("{key}.line_bytes"),
            format!("({name}) is {}: expected a power of two", cache.line_bytes),
        ));
    }
    let (size, sets, ways, line) = (
        u128::from(cache.size_bytes),
        u128::from(cache.sets),
        u128::from(cache.ways),
        u128::from(cache.line_bytes),
    );
    let set_bytes = ways * line;
    let made = sets
        .checked_mul(set_bytes)
        .map_or_else(|| "more than 2^128".to_owned(), |b| b.to_string());
    // A size that no whole number of sets makes is the figure in error; otherwise the sets
    // are, as they follow from the other three.
    if size % set_bytes != 0 {
        return Err(bad(
            &format!("{key}.size_bytes"),
            format!(
                "({name}) is {size}: expected a whole number of sets of {ways} ways × {line} B \
                 lines, a multiple of {set_bytes} B (the file's {sets} sets make {made})"
            ),
        ));
    }
    if sets.checked_mul(set_bytes) != Some(size) {
        return Err(bad(
            &format!("{key}.sets"),
            format!(
                "({name}) is {sets}: expected size_bytes / (ways × line_bytes) = {size} / \
                 ({ways} × {line}) = {}",
                size / set_bytes
            ),
        ));
    }
    Ok(())
}

/// Largest cache size a file may give: far above any cache built (about 1 GiB per socket),
/// and small enough that every model's set and line counts stay within their integers.
const MAX_CACHE_BYTES: u64 = 1 << 40;

const SIZE_RANGE: &str = "expected a size in bytes from 1 to 2^40 (1 TiB)";

/// A cache size, when given, is from 1 byte to [`MAX_CACHE_BYTES`].
fn check_size(
    key: &str,
    size_bytes: Option<u64>,
    bad: &dyn Fn(&str, String) -> MachineError,
) -> Result<(), MachineError> {
    match size_bytes {
        Some(size) if size == 0 || size > MAX_CACHE_BYTES => {
            Err(bad(key, format!("is {size}: {SIZE_RANGE}")))
        }
        _ => Ok(()),
    }
}

fn check_measured(
    machine: &Machine,
    bad: &dyn Fn(&str, String) -> MachineError,
) -> Result<(), MachineError> {
    let Some(measured) = &machine.measured else {
        return Ok(());
    };
    let positive = |key: String, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(bad(&key, format!("is {value}: expected a number above 0")))
        }
    };
    for (i, b) in measured.bandwidth.iter().enumerate() {
        let key = format!("measured.bandwidth[{i}]");
        check_run(machine, b, &key, bad)?;
        positive(format!("{key}.gb_per_s"), b.gb_per_s).map_err(|e| with_level(e, &b.level))?;
        if let Some(v) = b.gb_per_s_with_write_allocate {
            positive(format!("{key}.gb_per_s_with_write_allocate"), v)
                .map_err(|e| with_level(e, &b.level))?;
        }
    }
    for (i, c) in measured.caches.iter().enumerate() {
        let key = format!("measured.caches[{i}]");
        for (field, value) in [
            ("latency_cycles", c.latency_cycles),
            ("latency_ns", c.latency_ns),
            ("confidence", c.confidence),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(bad(
                    &format!("{key}.{field}"),
                    format!("is {value}: expected a finite number, 0 or more"),
                ));
            }
        }
        check_size(&format!("{key}.size_bytes"), Some(c.size_bytes), bad)?;
        check_size(
            &format!("{key}.streaming_size_bytes"),
            c.streaming_size_bytes,
            bad,
        )?;
    }
    if let Some(p) = &measured.peak_gflops {
        positive("measured.peak_gflops.dp".into(), p.dp)?;
        positive("measured.peak_gflops.sp".into(), p.sp)?;
    }
    for (key, value) in [
        ("measured.core_hz", measured.core_hz),
        ("measured.memory_latency_ns", measured.memory_latency_ns),
        ("measured.add_latency_ns", measured.add_latency_ns),
    ] {
        if let Some(v) = value {
            positive(key.into(), v)?;
        }
    }
    if !measured.duration_s.is_finite() || measured.duration_s < 0.0 {
        return Err(bad(
            "measured.duration_s",
            format!("is {}: expected seconds, 0 or more", measured.duration_s),
        ));
    }
    Ok(())
}

/// The kernels a bandwidth run may name: `probe`'s (`load`, `store`, `copy`, `triad`) and
/// those of kerncraft's benchmarks the import carries over (`update`, `daxpy`).
pub const BANDWIDTH_KERNELS: [&str; 6] = ["load", "store", "copy", "triad", "update", "daxpy"];

/// A run's level is one of the machine's data-cache levels (`L1`, `L2`, ...; any numbered
/// level when the file lists no cache) or `MEM`, its
/// kernel a known one, its threads and cores 1 or more, and its cores no more than its
/// threads.
fn check_run(
    machine: &Machine,
    run: &Bandwidth,
    key: &str,
    bad: &dyn Fn(&str, String) -> MachineError,
) -> Result<(), MachineError> {
    let levels: Vec<String> = machine
        .data_caches()
        .map(|c| format!("L{}", c.level))
        .chain(["MEM".to_owned()])
        .collect();
    // A file that lists no cache (`caches = []`, the hierarchy left unknown) may still give
    // bandwidths of numbered levels.
    let numbered = |level: &str| {
        level
            .strip_prefix('L')
            .and_then(|n| n.parse::<u8>().ok())
            .is_some_and(|n| n >= 1 && n.to_string().len() == level.len() - 1)
    };
    let unknown_hierarchy = levels.len() == 1 && numbered(&run.level);
    if !levels.contains(&run.level) && !unknown_hierarchy {
        return Err(bad(
            &format!("{key}.level"),
            format!(
                "is `{}`: expected one of {} (the data-cache levels of `caches`, or memory)",
                run.level,
                levels.join(", ")
            ),
        ));
    }
    if !BANDWIDTH_KERNELS.contains(&run.kernel.as_str()) {
        return Err(bad(
            &format!("{key}.kernel"),
            format!(
                "is `{}`: expected one of {}",
                run.kernel,
                BANDWIDTH_KERNELS.join(", ")
            ),
        ));
    }
    if run.threads == 0 {
        return Err(bad(
            &format!("{key}.threads"),
            "is 0: expected 1 or more".into(),
        ));
    }
    match run.cores {
        Some(0) => Err(bad(
            &format!("{key}.cores"),
            "is 0: expected 1 or more".into(),
        )),
        Some(cores) if cores > run.threads => Err(bad(
            &format!("{key}.cores"),
            format!("is {cores}: more than the run's {} threads", run.threads),
        )),
        _ => Ok(()),
    }
}

/// The message with the bandwidth's level named after its key.
fn with_level(error: MachineError, level: &str) -> MachineError {
    match error {
        MachineError::Invalid { path, message } => MachineError::Invalid {
            path,
            message: format!("{message} (the {level} bandwidth)"),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bandwidth, CacheKind, Measured, PeakGflops};

    #[test]
    fn cache_sizes_beyond_a_tebibyte_or_zero_are_refused() {
        let mut m = good();
        m.caches[1] = Cache::new(2, CacheKind::Unified, 1 << 41, 64, 16, 1);
        assert!(
            message(&m).starts_with("m.toml: `caches[1].size_bytes` (L2) is 2199023255552: expected a size in bytes from 1 to 2^40"),
            "{}",
            message(&m)
        );
        let measured = |size_bytes, streaming_size_bytes| {
            let mut m = good();
            m.measured.as_mut().unwrap().caches = vec![crate::MeasuredCache {
                level: 2,
                kind: CacheKind::Unified,
                size_bytes,
                latency_cycles: 12.0,
                latency_ns: 4.0,
                advertised_size_bytes: None,
                confidence: 0.5,
                method: String::new(),
                streaming_size_bytes,
            }];
            m
        };
        assert!(validate(&measured(1 << 20, Some(1 << 24)), Path::new("m.toml")).is_ok());
        assert!(
            message(&measured(1 << 20, Some(0)))
                .starts_with("m.toml: `measured.caches[0].streaming_size_bytes` is 0: expected")
        );
        assert!(
            message(&measured(1 << 20, Some(1 << 62)))
                .contains("`measured.caches[0].streaming_size_bytes` is 4611686018427387904")
        );
        assert!(message(&measured(1 << 62, None)).contains("`measured.caches[0].size_bytes`"));
    }

    fn good() -> Machine {
        let mut m = Machine::unknown();
        m.nominal_hz = Some(2_000_000_000);
        m.peak_flops_per_cycle = crate::PeakFlops { dp: 16, sp: 32 };
        m.caches = vec![
            Cache::new(1, CacheKind::Data, 32768, 64, 8, 1),
            Cache::new(2, CacheKind::Unified, 1 << 20, 64, 16, 1),
            Cache::new(3, CacheKind::Unified, 1 << 24, 64, 16, 2),
        ];
        m.measured = Some(Measured {
            bandwidth: vec![Bandwidth {
                level: "L3".into(),
                kernel: "load".into(),
                threads: 1,
                cores: None,
                working_set_bytes: 1 << 22,
                gb_per_s: 50.0,
                gb_per_s_with_write_allocate: None,
                method: String::new(),
                vector_bytes: None,
            }],
            peak_gflops: Some(PeakGflops {
                dp: 32.0,
                sp: 64.0,
                threads: 1,
                method: String::new(),
            }),
            ..Measured::default()
        });
        m
    }

    fn message(m: &Machine) -> String {
        validate(m, Path::new("m.toml")).unwrap_err().to_string()
    }

    #[test]
    fn a_sound_description_passes() {
        validate(&good(), Path::new("m.toml")).unwrap();
    }

    #[test]
    fn zeros_and_contradictions_name_the_file_and_key() {
        let mut m = good();
        m.cores = 0;
        assert_eq!(message(&m), "m.toml: `cores` is 0: expected 1 or more");
        let mut m = good();
        m.nominal_hz = Some(0);
        assert!(message(&m).starts_with("m.toml: `nominal_hz` is 0"));
        let mut m = good();
        m.caches[0].ways = 0;
        assert_eq!(
            message(&m),
            "m.toml: `caches[0].ways` (L1d) is 0: expected 1 or more"
        );
        let mut m = good();
        m.caches[1].size_bytes = 0;
        assert!(message(&m).starts_with("m.toml: `caches[1].size_bytes` (L2) is 0"));
        let mut m = good();
        m.caches[1].sets = 1000;
        assert_eq!(
            message(&m),
            "m.toml: `caches[1].sets` (L2) is 1000: expected size_bytes / (ways × line_bytes) = \
             1048576 / (16 × 64) = 1024"
        );
        // A hand-edited size that no whole number of sets makes is named as the figure in
        // error, not the sets that disagree with it.
        let mut m = good();
        m.caches[0].size_bytes = 32000;
        assert_eq!(
            message(&m),
            "m.toml: `caches[0].size_bytes` (L1d) is 32000: expected a whole number of sets of \
             8 ways × 64 B lines, a multiple of 512 B (the file's 64 sets make 32768)"
        );
        let mut m = good();
        m.caches[0].line_bytes = 63;
        m.caches[0].sets = 1;
        assert!(message(&m).contains("is 63: expected a power of two"));
        let mut m = good();
        m.caches[2].sets = u64::MAX;
        m.caches[2].ways = u64::MAX;
        m.caches[2].line_bytes = 1 << 63;
        assert!(
            message(&m).contains("make more than 2^128"),
            "{}",
            message(&m)
        );
        let mut m = good();
        m.caches.push(m.caches[0].clone());
        assert!(message(&m).contains("`caches[3]` describes L1d again"));
    }

    #[test]
    fn bad_measurements_name_the_value() {
        for (value, shown) in [
            (f64::NAN, "NaN"),
            (0.0, "0"),
            (-3.0, "-3"),
            (f64::INFINITY, "inf"),
        ] {
            let mut m = good();
            m.measured.as_mut().unwrap().bandwidth[0].gb_per_s = value;
            assert_eq!(
                message(&m),
                format!(
                    "m.toml: `measured.bandwidth[0].gb_per_s` is {shown}: expected a number \
                     above 0 (the L3 bandwidth)"
                )
            );
        }
        let mut m = good();
        m.measured
            .as_mut()
            .unwrap()
            .peak_gflops
            .as_mut()
            .unwrap()
            .dp = f64::NAN;
        assert!(message(&m).contains("`measured.peak_gflops.dp` is NaN"));
    }

    #[test]
    fn a_zero_peak_is_refused() {
        let mut m = good();
        m.peak_flops_per_cycle.dp = 0;
        assert!(
            message(&m).starts_with("m.toml: `peak_flops_per_cycle.dp` is 0: expected"),
            "{}",
            message(&m)
        );
        assert!(validate(&Machine::unknown(), Path::new("m.toml")).is_err());
    }

    #[test]
    fn bandwidth_runs_name_a_level_kernel_and_threads_the_file_has() {
        let run = |edit: fn(&mut Bandwidth)| {
            let mut m = good();
            edit(&mut m.measured.as_mut().unwrap().bandwidth[0]);
            validate(&m, Path::new("m.toml")).map_err(|e| e.to_string())
        };
        assert!(run(|b| b.level = "MEM".into()).is_ok());
        let mut bare = good();
        bare.caches.clear();
        bare.measured.as_mut().unwrap().bandwidth[0].level = "L2".into();
        assert!(validate(&bare, Path::new("m.toml")).is_ok());
        bare.measured.as_mut().unwrap().bandwidth[0].level = "L02".into();
        assert!(validate(&bare, Path::new("m.toml")).is_err());
        assert!(run(|b| b.kernel = "daxpy".into()).is_ok());
        assert!(run(|b| (b.threads, b.cores) = (2, Some(1))).is_ok());
        type Edit = fn(&mut Bandwidth);
        let cases: [(Edit, &str); 6] = [
            (
                |b| b.threads = 0,
                "`measured.bandwidth[0].threads` is 0: expected 1 or more",
            ),
            (
                |b| b.level = "L9".into(),
                "`measured.bandwidth[0].level` is `L9`: expected one of L1, L2, L3, MEM",
            ),
            (
                |b| b.level = "l1".into(),
                "`measured.bandwidth[0].level` is `l1`",
            ),
            (
                |b| b.kernel = "fma".into(),
                "`measured.bandwidth[0].kernel` is `fma`: expected one of load, store",
            ),
            (|b| b.cores = Some(0), "`measured.bandwidth[0].cores` is 0"),
            (
                |b| b.cores = Some(2),
                "`measured.bandwidth[0].cores` is 2: more than the run's 1 threads",
            ),
        ];
        for (edit, want) in cases {
            let err = run(edit).unwrap_err();
            assert!(err.starts_with("m.toml: ") && err.contains(want), "{err}");
        }
    }
}
