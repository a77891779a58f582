//! perf.data files as `mix` reads them: a real one from `perf record`, then damaged copies of it
//! (truncated, bytes changed), which must give errors or results, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use loopscope_profile::{MixOptions, mix_of_perf_data};
use proptest::prelude::*;

/// A perf.data of a small C loop, recorded once for every test; `None` (with the reason printed)
/// when cc or perf is missing or perf events are refused.
fn recorded() -> Option<&'static (tempfile::TempDir, PathBuf)> {
    static RECORDED: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    RECORDED
        .get_or_init(|| {
            let dir = tempfile::tempdir().ok()?;
            let source = dir.path().join("spin.c");
            std::fs::write(
                &source,
                "int main(void) { volatile unsigned long s = 0; for (unsigned long i = 0; i < 200000000ul; i++) s += i; return (int)(s & 1); }\n",
            )
            .ok()?;
            let binary = dir.path().join("spin");
            let built = Command::new("cc").args(["-O1", "-g"]).arg(&source).arg("-o").arg(&binary).status();
            if !built.is_ok_and(|s| s.success()) {
                eprintln!("skipped: cc could not build the fixture");
                return None;
            }
            let data = dir.path().join("perf.data");
            match Command::new("perf")
                .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-o"])
                .arg(&data)
                .arg("--")
                .arg(&binary)
                .output()
            {
                Ok(out) if out.status.success() => Some((dir, data)),
                Ok(out) => {
                    eprintln!("skipped: perf record failed: {}", String::from_utf8_lossy(&out.stderr).trim());
                    None
                }
                Err(e) => {
                    eprintln!("skipped: perf is not installed ({e})");
                    None
                }
            }
        })
        .as_ref()
}

fn mix(path: &Path) -> Result<loopscope_profile::MixReport, loopscope_profile::ProfileError> {
    mix_of_perf_data(path, &MixOptions::default())
}

#[test]
fn a_perf_record_file_gives_its_samples_and_the_loops_mix() {
    let Some((_, data)) = recorded() else { return };
    let report = mix(data).unwrap();
    assert_eq!(report.event, "cpu-clock");
    assert_eq!(report.estimate, "time-model");
    assert!(report.samples > 50, "{} samples", report.samples);
    assert!(
        report.unattributed_samples * 5 < report.samples,
        "{report:?}"
    );
    // The loop is a load, an add, a store, the counter's add, a compare and a branch.
    let main = report
        .by
        .iter()
        .find(|r| r.kind == "function" && r.name == "main")
        .expect("main has samples");
    assert!(main.types["br"] > 0 && main.types["int"] > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_perf_data_is_an_error_or_a_result_never_a_panic(
        cut in 0.0f64..1.0,
        flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..4),
    ) {
        let Some((dir, data)) = recorded() else { return Ok(()) };
        let mut bytes = std::fs::read(data).unwrap();
        for (at, byte) in flips {
            let i = (at * bytes.len() as f64) as usize % bytes.len();
            bytes[i] ^= byte;
        }
        let keep = ((cut * bytes.len() as f64) as usize).max(1);
        bytes.truncate(keep);
        let damaged = dir.path().join(format!("damaged-{keep}.data"));
        std::fs::write(&damaged, &bytes).unwrap();
        if let Err(e) = mix(&damaged) {
            let text = e.to_string();
            prop_assert!(!text.contains('\n'), "{}", text);
            prop_assert!(e.is_bad_input() || matches!(e, loopscope_profile::ProfileError::Io { .. }), "{}", text);
        }
        std::fs::remove_file(&damaged).unwrap();
    }
}
