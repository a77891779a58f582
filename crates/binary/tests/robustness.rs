//! Bad input never panics: truncated and mutated binaries (ELF headers, sections, code, DWARF),
//! and a sweep over binaries installed on the system.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use loopscope_binary::{Image, Options, Program};
use proptest::prelude::*;

/// The fixture compiled once with `-O1 -g`, or `None` without a C compiler.
fn fixture() -> Option<&'static [u8]> {
    static BYTES: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    BYTES
        .get_or_init(|| {
            let dir = tempfile::tempdir().ok()?;
            let out = dir.path().join("fx");
            let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/loops.c");
            let ok = Command::new("cc")
                .args(["-O1", "-g", "-o"])
                .arg(&out)
                .arg(src)
                .status();
            if !ok.is_ok_and(|s| s.success()) {
                eprintln!("skipped: no working `cc` to build the fixture");
                return None;
            }
            std::fs::read(out).ok()
        })
        .as_deref()
}

/// Parses and, when the file is accepted, analyses it with source lines (DWARF included).
fn analyse_bytes(bytes: Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutant");
    std::fs::write(&path, &bytes).unwrap();
    match Image::open(&path) {
        Ok(image) => {
            let options = Options {
                lines: true,
                ..Options::default()
            };
            let program = Program::analyze(&image, &options);
            let _ = program.loop_count();
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.starts_with(&path.display().to_string()), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn truncated_binaries(cut in 0.0f64..1.0) {
        let Some(bytes) = fixture() else { return Ok(()) };
        let len = (bytes.len() as f64 * cut) as usize;
        analyse_bytes(bytes[..len].to_vec());
    }

    #[test]
    fn mutated_binaries(edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..24),
                        header_edits in proptest::collection::vec((0usize..64, any::<u8>()), 0..3)) {
        let Some(bytes) = fixture() else { return Ok(()) };
        let mut bytes = bytes.to_vec();
        let n = bytes.len();
        for (at, value) in edits {
            bytes[((n as f64 * at) as usize).min(n - 1)] = value;
        }
        for (at, value) in header_edits {
            bytes[at] = value;
        }
        analyse_bytes(bytes);
    }
}

#[test]
fn not_elf_and_empty_files_are_bad_input() {
    for bytes in [Vec::new(), b"hello".to_vec(), b"\x7fELF".to_vec()] {
        let err = Image::parse(Path::new("f"), bytes).unwrap_err();
        assert!(err.is_bad_input(), "{err}");
    }
}

/// A sample of installed executables and libraries analyses without error.
#[test]
fn sweep_of_system_binaries() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["/usr/bin", "/usr/lib/x86_64-linux-gnu"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let meta = std::fs::metadata(p);
                meta.is_ok_and(|m| m.is_file() && m.len() > 4096 && m.len() < 3_000_000)
            })
            .filter(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF\x02")))
            .collect();
        found.sort();
        // Every 7th file: a spread-out, deterministic sample.
        files.extend(found.into_iter().step_by(7).take(12));
    }
    if files.is_empty() {
        eprintln!("skipped: no ELF files in /usr/bin or /usr/lib/x86_64-linux-gnu");
        return;
    }
    for path in &files {
        let image = Image::open(path).unwrap_or_else(|e| panic!("{e}"));
        let program = Program::analyze(&image, &Options::default());
        assert!(!program.functions.is_empty(), "{}", path.display());
        let decoded: u64 = program.functions.iter().map(|f| f.instructions).sum();
        assert!(decoded > 0, "{}", path.display());
    }
    eprintln!("sweep: {} binaries analysed", files.len());
}
