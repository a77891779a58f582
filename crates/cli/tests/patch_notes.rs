//! Notes `report` adds to a patch recording: an OpenMP region body whose runtime was not
//! patched is pointed to `--libraries`.

mod common;

use std::process::Command;

use common::{compile_fixture_with, loopscope, stderr, stdout};

fn notes_of(profile: &std::path::Path) -> Vec<String> {
    let out = loopscope(["report", "--json", &profile.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_openmp_region_without_its_runtime_patched_suggests_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile_fixture_with("omp_axpy.c", dir.path(), &["-fopenmp"]) else {
        return;
    };
    let record = |profile: &std::path::Path, extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_loopscope"))
            .args(["record", "-q", "--backend", "patch", "-o"])
            .arg(profile)
            .args(extra)
            .arg("--")
            .arg(&binary)
            .arg("3")
            .env("OMP_NUM_THREADS", "2")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let plain = dir.path().join("plain.prof");
    record(&plain, &[]);
    let notes = notes_of(&plain);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("main._omp_fn.0: an OpenMP region body")
                && n.contains("--libraries")),
        "{notes:?}"
    );
    let with_libraries = dir.path().join("libraries.prof");
    record(&with_libraries, &["--libraries"]);
    let notes = notes_of(&with_libraries);
    assert!(
        !notes.iter().any(|n| n.contains("OpenMP region")),
        "{notes:?}"
    );
}
