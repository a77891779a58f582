//! loopscope's machine files: TOML with a `format_version`, written atomically.

use std::path::Path;

use crate::bounded::{MACHINE_FILE_CAP_BYTES, read_bounded};
use crate::keys::check_known_keys;
use crate::validate::validate;
use crate::writing::{check_write_target, write_atomically};
use crate::{Machine, MachineError};

/// The machine-file format this version reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Serialises a machine description as a TOML machine file.
pub fn to_toml(machine: &Machine) -> Result<String, MachineError> {
    toml::to_string_pretty(machine).map_err(|e| MachineError::Serialise(e.to_string()))
}

/// Parses a TOML machine file's text and checks what it describes (no unknown key, counts,
/// clocks, cache geometries, measured figures); `path` names it in errors.
pub fn from_toml(text: &str, path: &Path) -> Result<Machine, MachineError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(text, path, &e))?;
    match table.get("format_version") {
        None => {
            return Err(MachineError::Invalid {
                path: path.to_owned(),
                message: "missing `format_version`: not a loopscope machine file \
                          (a kerncraft YAML file is read with --import)"
                    .to_owned(),
            });
        }
        Some(toml::Value::Integer(v)) if *v == i64::from(FORMAT_VERSION) => {}
        Some(toml::Value::Integer(v)) => {
            return Err(MachineError::FormatVersion {
                path: path.to_owned(),
                found: *v,
                expected: FORMAT_VERSION,
            });
        }
        Some(other) => {
            return Err(MachineError::Invalid {
                path: path.to_owned(),
                message: format!(
                    "`format_version` must be an integer, found {}",
                    other.type_str()
                ),
            });
        }
    }
    check_known_keys(text, path, line_column)?;
    let machine: Machine = toml::from_str(text).map_err(|e| syntax_error(text, path, &e))?;
    validate(&machine, path)?;
    Ok(machine)
}

fn syntax_error(text: &str, path: &Path, error: &toml::de::Error) -> MachineError {
    let (line, column) = error
        .span()
        .map(|span| line_column(text, span.start))
        .unwrap_or((1, 1));
    MachineError::Syntax {
        path: path.to_owned(),
        line,
        column,
        message: error.message().replace('\n', " "),
    }
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    (line, offset.min(text.len()) - line_start + 1)
}

/// Reads a loopscope machine file.
pub fn read_machine_file(path: &Path) -> Result<Machine, MachineError> {
    let text = read_text(path)?;
    from_toml(&text, path)
}

/// Reads a whole text file within [`MACHINE_FILE_CAP_BYTES`], refusing directories, devices
/// that never end and huge files with a clear message.
pub(crate) fn read_text(path: &Path) -> Result<String, MachineError> {
    read_text_within(path, MACHINE_FILE_CAP_BYTES, "machine files")
}

/// Reads a whole text file of at most `cap_bytes`; `what` names the kind of file.
pub(crate) fn read_text_within(
    path: &Path,
    cap_bytes: u64,
    what: &str,
) -> Result<String, MachineError> {
    let bytes = read_bounded(path, cap_bytes, what).map_err(|source| MachineError::Io {
        path: path.to_owned(),
        action: "cannot read",
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| MachineError::Invalid {
        path: path.to_owned(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Writes a machine file atomically: readers see the old file or the new one, never a part.
pub fn write_machine_file(path: &Path, machine: &Machine) -> Result<(), MachineError> {
    write_atomically(path, to_toml(machine)?.as_bytes())
}

/// The machine description a run that measures this machine will write into `path`: the
/// file's own when it exists and describes this processor (or `force`), otherwise `detected`.
/// Checked before measuring, so that a path that cannot be written fails at once, not after a
/// minute of measurements.
pub fn machine_to_update(
    path: &Path,
    detected: Machine,
    force: bool,
) -> Result<Machine, MachineError> {
    let invalid = |message: String| MachineError::Invalid {
        path: path.to_owned(),
        message,
    };
    if !check_write_target(path)?.exists() {
        return Ok(detected);
    }
    let existing = read_machine_file(path)?;
    if existing.model != detected.model && !force {
        return Err(invalid(format!(
            "describes `{}`, but this machine is `{}`; pass --force to update it anyway",
            existing.model, detected.model
        )));
    }
    Ok(existing)
}

/// A machine with every optional field set, for tests that cover the whole format.
#[cfg(test)]
pub(crate) fn full_sample() -> Machine {
    use crate::{
        Bandwidth, Cache, CacheKind, IsaFeature, Measured, MeasuredCache, PeakFlops, PeakGflops,
    };
    let mut m = Machine::unknown();
    m.model = "Test CPU @ 2.00GHz".into();
    m.vendor = "GenuineIntel".into();
    m.microarchitecture = Some("family 0x6 model 0x55".into());
    m.nominal_hz = Some(2_000_000_000);
    m.tsc_hz = Some(2_000_000_000);
    let mut l1 = Cache::new(1, CacheKind::Data, 32768, 64, 8, 2);
    l1.replacement = Some("LRU".into());
    l1.write_allocate = Some(true);
    l1.write_back = Some(true);
    m.caches.push(l1);
    m.isa = vec![IsaFeature::Sse2, IsaFeature::Avx, IsaFeature::Fma];
    m.peak_flops_per_cycle = PeakFlops::from_isa(&m.isa);
    m.source = "test".into();
    m.measured = Some(Measured {
        caches: vec![MeasuredCache {
            level: 1,
            kind: CacheKind::Data,
            size_bytes: 32768,
            latency_cycles: 4.25,
            latency_ns: 1.7,
            advertised_size_bytes: Some(32768),
            confidence: 0.93,
            method: "pointer chase".into(),
            streaming_size_bytes: Some(65536),
        }],
        bandwidth: vec![Bandwidth {
            level: "MEM".into(),
            kernel: "triad".into(),
            threads: 2,
            cores: Some(1),
            working_set_bytes: 1 << 30,
            gb_per_s: 17.5,
            gb_per_s_with_write_allocate: Some(22.8),
            method: "AVX2".into(),
            vector_bytes: Some(32),
        }],
        peak_gflops: Some(PeakGflops {
            dp: 32.0,
            sp: 64.0,
            threads: 1,
            method: "FMA chains".into(),
        }),
        duration_s: 9.5,
        partial: true,
        notes: vec!["quick".into()],
        core_hz: Some(2.1e9),
        memory_latency_ns: Some(90.0),
        add_latency_ns: Some(1.5),
        implausible: vec![crate::Implausible {
            level: "MEM".into(),
            kernel: "triad".into(),
            threads: 2,
            vector_bytes: Some(32),
            reason: "MEM triad on 2 threads, 17.50 GB/s, is below 1 thread's 18.00 GB/s".into(),
        }],
    });
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bandwidth, Cache, CacheKind, IsaFeature, Measured, MeasuredCache, PeakFlops};

    fn sample() -> Machine {
        let mut m = Machine::unknown();
        m.model = "Test CPU @ 2.00GHz".into();
        m.nominal_hz = Some(2_000_000_000);
        m.caches
            .push(Cache::new(1, CacheKind::Data, 32768, 64, 8, 2));
        m.caches
            .push(Cache::new(3, CacheKind::Unified, 37_486_592, 64, 11, 56));
        m.isa = vec![IsaFeature::Sse2, IsaFeature::Avx, IsaFeature::Fma];
        m.peak_flops_per_cycle = PeakFlops::from_isa(&m.isa);
        m.measured = Some(Measured {
            caches: vec![MeasuredCache {
                level: 1,
                kind: CacheKind::Data,
                size_bytes: 32768,
                latency_cycles: 4.25,
                latency_ns: 1.7,
                advertised_size_bytes: Some(32768),
                confidence: 0.93,
                method: "pointer chase".into(),
                streaming_size_bytes: Some(65536),
            }],
            bandwidth: vec![Bandwidth {
                level: "MEM".into(),
                kernel: "triad".into(),
                threads: 2,
                working_set_bytes: 1 << 30,
                cores: None,
                gb_per_s: 17.123456789,
                gb_per_s_with_write_allocate: Some(22.8),
                method: "AVX2".into(),
                vector_bytes: Some(32),
            }],
            peak_gflops: None,
            duration_s: 9.5,
            partial: false,
            notes: vec!["quick".into()],
            ..Measured::default()
        });
        m
    }

    #[test]
    fn toml_round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        let machine = sample();
        write_machine_file(&path, &machine).unwrap();
        assert_eq!(read_machine_file(&path).unwrap(), machine);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn bad_files_say_where_and_what() {
        let p = Path::new("m.toml");
        let err = from_toml("format_version = 1\nmodel = \n", p).unwrap_err();
        assert!(err.to_string().starts_with("m.toml:2:"), "{err}");
        let err = from_toml("model = \"x\"\n", p).unwrap_err();
        assert!(
            err.to_string().contains("missing `format_version`"),
            "{err}"
        );
        let err = from_toml("format_version = 99\n", p).unwrap_err();
        assert!(
            err.to_string()
                .contains("format_version 99 is not supported"),
            "{err}"
        );
        let err = from_toml("format_version = 1\nmodel = \"x\"\n", p).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
        let text = to_toml(&sample()).unwrap();
        let err = from_toml(&text[..text.len() / 2], p).unwrap_err();
        assert!(err.to_string().starts_with("m.toml:"), "{err}");
    }

    #[test]
    fn directories_and_missing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_machine_file(dir.path()).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let err = read_machine_file(&dir.path().join("absent.toml")).unwrap_err();
        assert!(err.to_string().contains("cannot read"), "{err}");
    }

    #[test]
    fn unknown_keys_are_refused_by_table_path_and_line() {
        let text = to_toml(&full_sample()).unwrap();
        let typo = text.replace("streaming_size_bytes", "streaming_size_byte");
        let line = typo
            .lines()
            .position(|l| l.starts_with("streaming_size_byte "))
            .unwrap()
            + 1;
        let err = from_toml(&typo, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "m.toml:{line}:1: unknown key `measured.caches[0].streaming_size_byte` (did \
                 you mean `streaming_size_bytes`?)"
            )
        );
        let err = from_toml(&format!("colour = 1\n{text}"), Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("m.toml:1:1: unknown key `colour` (expected one of `format_version`,"),
            "{err}"
        );
        let inline = text.replace(
            "[peak_flops_per_cycle]\n",
            "[peak_flops_per_cycle]\nqp = 3\n",
        );
        let err = from_toml(&inline, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown key `peak_flops_per_cycle.qp` (did you mean `dp`?)"),
            "{err}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_unknown_key_in_any_table_is_refused(key in "[a-z_]{1,12}", table in 0usize..4) {
            let known = ["dp", "sp", "threads", "method", "level", "kind", "size_bytes",
                         "latency_cycles", "latency_ns", "advertised_size_bytes", "confidence",
                         "streaming_size_bytes", "kernel", "cores", "working_set_bytes",
                         "gb_per_s", "gb_per_s_with_write_allocate", "vector_bytes"];
            proptest::prop_assume!(!known.contains(&key.as_str()));
            let header = ["[peak_flops_per_cycle]", "[[measured.caches]]",
                          "[[measured.bandwidth]]", "[measured.peak_gflops]"][table];
            let text = to_toml(&full_sample())
                .unwrap()
                .replacen(&format!("{header}\n"), &format!("{header}\n{key} = 1\n"), 1);
            let err = from_toml(&text, Path::new("m.toml")).unwrap_err().to_string();
            proptest::prop_assert!(err.contains(&format!("{key}` (")), "{}", err);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "(format_version = 1\n)?[ -~\n]{0,200}") {
            let _ = from_toml(&text, Path::new("fuzz.toml"));
        }

        #[test]
        fn truncations_never_panic(cut in 0usize..2000) {
            let text = to_toml(&sample()).unwrap();
            let cut = cut.min(text.len());
            let _ = from_toml(&text[..cut], Path::new("fuzz.toml"));
        }
    }

    #[test]
    fn the_machine_to_update_is_checked_before_measuring() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        let here = sample();
        // No file yet: the detected machine.
        assert_eq!(machine_to_update(&path, here.clone(), false).unwrap(), here);
        // The same processor's file is kept, with what it holds.
        let mut saved = here.clone();
        saved.cores = 99;
        write_machine_file(&path, &saved).unwrap();
        assert_eq!(
            machine_to_update(&path, here.clone(), false).unwrap().cores,
            99
        );
        // Another processor's only with force.
        let mut other = here.clone();
        other.model = "Other CPU".into();
        let e = machine_to_update(&path, other.clone(), false).unwrap_err();
        assert!(e.to_string().contains("pass --force"), "{e}");
        assert!(e.is_bad_input());
        assert_eq!(machine_to_update(&path, other, true).unwrap().cores, 99);
        let nowhere = dir.path().join("missing/m.toml");
        let e = machine_to_update(&nowhere, here, false).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
