//! Hostile but fair input, run through the real binary: memory bombs and unbounded files, the
//! files loopscope writes (links, FIFOs, modes, interrupted probes), a damaged analysis cache
//! and relocatable objects. Each refusal is exit 2 with one `loopscope: error:` line, and
//! nothing is left behind.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{assert_bad_input, build_c, loopscope, stderr, stdout};

/// Runs `loopscope` with its analysis cache in `cache`.
fn loopscope_cached(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("the loopscope binary runs")
}

/// Names in `dir` that look like a writer's temporary file.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

/// A kerncraft file of `levels` nested anchors, nine aliases each, under a key the import
/// ignores.
fn laughs(levels: usize) -> String {
    let mut text = String::from("model name: X\nignored:\n  a0: &a0 [\"lol\", \"lol\"]\n");
    for i in 1..=levels {
        let aliases = vec![format!("*a{}", i - 1); 9].join(", ");
        text.push_str(&format!("  a{i}: &a{i} [{aliases}]\n"));
    }
    text
}

#[test]
fn billion_laughs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for levels in [9, 10] {
        let path = dir.path().join(format!("laughs{levels}.yml"));
        std::fs::write(&path, laughs(levels)).unwrap();
        let out = loopscope(["machine", "--import", path.to_str().unwrap()]);
        assert_bad_input(&out, "expands past 64 MiB in memory");
        assert!(stderr(&out).contains(&format!("laughs{levels}.yml:")));
    }
}

#[test]
fn unbounded_inputs_are_refused_naming_the_file_and_the_cap() {
    let cache = ["--cache", "L1=32K:8:64"];
    let out = loopscope([&["simulate", "/dev/zero"][..], &cache].concat());
    assert_bad_input(
        &out,
        "/dev/zero: cannot read: larger than 1 MiB, the cap on kernel sources",
    );
    let out = loopscope([&["simulate", "--trace", "/dev/zero"][..], &cache].concat());
    assert_bad_input(
        &out,
        "/dev/zero:1: longer than 4096 bytes, the cap on a trace line",
    );
    let out = loopscope(["machine", "-m", "/dev/zero"]);
    assert_bad_input(
        &out,
        "/dev/zero: cannot read: larger than 1 MiB, the cap on machine files",
    );
    let out = loopscope(["machine", "--import", "/dev/zero"]);
    assert_bad_input(&out, "the cap on machine files");
    let out = loopscope(["report", "/dev/zero"]);
    assert_bad_input(&out, "/dev/zero: line 1: not a loopscope profile");
    let out = loopscope(["loops", "/dev/zero"]);
    assert_bad_input(&out, "/dev/zero: offset 0: not an ELF file");
}

#[test]
fn huge_caches_are_simulated_sparsely_or_refused_with_the_memory_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("update.c");
    std::fs::write(
        &kernel,
        "double a[N];\nfor (int i = 0; i < N; ++i)\n  a[i] = a[i] + 1.0;\n",
    )
    .unwrap();
    // Ten 64 GiB levels under a 2 GiB address-space limit: stored whole, one would need 8 GiB.
    let levels: Vec<String> = (1..=10).map(|i| format!("L{i}=64G:1:64")).collect();
    let script = format!(
        "ulimit -v 2000000 && exec \"$0\" simulate {} -D N=4000 --cache {} --json",
        kernel.display(),
        levels.join(",")
    );
    let out = Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_loopscope")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let l1 = &json["levels"][0];
    // 4000 doubles: 500 lines, each missed once; the other 7500 accesses hit.
    assert_eq!(
        (l1["accesses"].as_u64(), l1["misses"].as_u64()),
        (Some(8000), Some(500))
    );
    let out = loopscope([
        "simulate",
        kernel.to_str().unwrap(),
        "-D",
        "N=10",
        "--cache",
        "L1=1G:16777216:64",
    ]);
    assert_bad_input(&out, "one set of 16777216 ways needs 128 MiB to simulate");
    // 4 * 10^9 accesses, each of which could store a set: refused before any is simulated.
    let out = loopscope([
        "simulate",
        kernel.to_str().unwrap(),
        "-D",
        "N=2000000000",
        "--cache",
        "L1=64G:1:64",
    ]);
    assert_bad_input(
        &out,
        "cache L1: 4000000000 accesses could touch as many sets",
    );
    assert_bad_input(&out, "more than the 8 GiB cap");
}

#[test]
fn writes_refuse_fifos_go_through_links_and_keep_modes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let out = loopscope(["machine", "--out", fifo.to_str().unwrap()]);
        assert_bad_input(
            &out,
            "fifo.toml: is a FIFO: loopscope writes results only to regular files",
        );
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    } else {
        eprintln!("skipped the FIFO case: mkfifo is not available");
    }
    let out = loopscope(["machine", "--out", dir.path().to_str().unwrap()]);
    assert_bad_input(&out, "is a directory");

    // Through a link: the target is written, the link stays.
    let real = dir.path().join("real.toml");
    std::fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.toml");
    std::os::unix::fs::symlink("real.toml", &link).unwrap();
    let out = loopscope(["machine", "--out", link.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("format_version")
    );

    // A name near NAME_MAX still gets a temporary name that fits.
    let long = dir.path().join(format!("{}.toml", "m".repeat(245)));
    let out = loopscope(["machine", "--out", long.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&long)
            .unwrap()
            .contains("format_version")
    );

    // A private file stays private.
    let private = dir.path().join("private.toml");
    std::fs::write(&private, "old").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = loopscope(["machine", "--out", private.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

/// Runs `loopscope` as user and group `nobody` (65534); `None` (after saying so) unless this
/// process is root and has setpriv.
fn loopscope_as_nobody(args: &[&str]) -> Option<Output> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let out = root
        .then(|| {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_loopscope"))
                .args(args)
                .output()
                .ok()
        })
        .flatten();
    if out.is_none() {
        eprintln!("skipped: running as another user needs root and setpriv");
    }
    out
}

#[test]
fn another_users_file_is_refused_not_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = dir.path().join("theirs.toml");
    std::fs::write(&theirs, "old").unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
    let Some(out) = loopscope_as_nobody(&["machine", "--out", theirs.to_str().unwrap()]) else {
        return;
    };
    // The directory lets nobody rename over the file, which would make it nobody's.
    assert_bad_input(&out, "theirs.toml: cannot write: Permission denied");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "old");
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&theirs).unwrap()),
        0
    );
    // A file of the writer's own, in a group it is not in: rewritten, its mode kept, its group
    // left as the writer may set it (the non-root branch of keeping the owner).
    let own = dir.path().join("own.toml");
    std::fs::write(&own, "old").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(0)).unwrap();
    let out = loopscope_as_nobody(&["machine", "--out", own.to_str().unwrap()]).unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = std::fs::metadata(&own).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534);
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert!(
        std::fs::read_to_string(&own)
            .unwrap()
            .contains("format_version")
    );
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

/// Starts `probe --quick --out out --progress`, interrupts it once its progress shows a
/// measurement under way (a count past 0) and waits for it.
fn interrupted_probe(out: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["probe", "--quick", "--progress", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    let measuring = |line: &str| {
        line.split_whitespace()
            .filter_map(|w| w.split_once('/'))
            .any(|(done, _)| done.parse::<u64>().is_ok_and(|d| d > 0))
    };
    while !measuring(&line) {
        line.clear();
        let read = stderr.read_line(&mut line).unwrap();
        assert!(read > 0, "probe ended before measuring: {seen}");
        seen += &line;
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut rest = Vec::new();
    stderr.read_to_end(&mut rest).unwrap();
    let mut output = child.wait_with_output().unwrap();
    output.stderr = [seen.into_bytes(), rest].concat();
    output
}

#[test]
fn an_interrupted_probe_never_replaces_a_complete_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.toml");
    // A first, interrupted run gives a partial result; marked complete, it stands for a
    // complete earlier run (a full probe takes a minute).
    let first = interrupted_probe(&out);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("partial = true"), "{text}");
    let complete = text.replace("partial = true", "partial = false");
    std::fs::write(&out, &complete).unwrap();

    let second = interrupted_probe(&out);
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    let beside = PathBuf::from(format!("{}.partial", out.display()));
    assert!(
        stderr(&second).contains(&format!("the partial one went to {}", beside.display())),
        "{}",
        stderr(&second)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), complete);
    assert!(
        std::fs::read_to_string(&beside)
            .unwrap()
            .contains("partial = true")
    );
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

/// A tiny static program with one loop, its cache entry a few hundred bytes; `None` (after
/// saying so) without a compiler.
fn tiny_program(dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let source = dir.join("tiny.c");
    std::fs::write(
        &source,
        "static volatile long sink;\n\
         void _start(void) {\n\
         \x20   for (long i = 0; i < 1000; ++i)\n\
         \x20       sink += i;\n\
         \x20   __asm__ volatile(\"mov $60, %eax\\n xor %edi, %edi\\n syscall\");\n\
         }\n",
    )
    .unwrap();
    let out = dir.join(if extra.contains(&"-c") {
        "tiny.o"
    } else {
        "tiny"
    });
    let flags = [&["-O1", "-g", "-nostdlib", "-static"][..], extra].concat();
    build_c(&source, &flags, out)
}

#[test]
fn damaged_bytes_of_the_analysis_cache_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = tiny_program(dir.path(), &[]) else {
        return;
    };
    let cache = dir.path().join("cache");
    let binary = binary.to_str().unwrap();
    let uncached = loopscope_cached(&cache, &["loops", binary, "--no-cache"]);
    assert!(uncached.status.success(), "{}", stderr(&uncached));
    let first = loopscope_cached(&cache, &["loops", binary]);
    assert_eq!(stdout(&first), stdout(&uncached));
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.join("loopscope"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let [entry] = entries.as_slice() else {
        panic!("expected one cache entry, found {entries:?}");
    };
    let original = std::fs::read(entry).unwrap();
    assert!(original.len() < 4096, "{} bytes", original.len());
    // Sixteen bytes spread over the entry, the first and last among them (the unit test in
    // crates/binary/src/cache.rs flips every byte).
    let offsets = (0..16).map(|k| k * (original.len() - 1) / 15);
    for at in offsets {
        let mut damaged = original.clone();
        damaged[at] ^= 0x55;
        std::fs::write(entry, &damaged).unwrap();
        let out = loopscope_cached(&cache, &["loops", binary]);
        assert!(out.status.success(), "byte {at}: {}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&uncached), "byte {at}");
        // The damaged entry was rebuilt.
        assert_eq!(std::fs::read(entry).unwrap(), original, "byte {at}");
    }
    for cut in [0, 10, 24, original.len() / 2, original.len() - 1] {
        std::fs::write(entry, &original[..cut]).unwrap();
        let out = loopscope_cached(&cache, &["loops", binary]);
        assert_eq!(stdout(&out), stdout(&uncached), "cut at {cut}");
    }
}

#[test]
fn a_fifo_in_place_of_a_cache_entry_is_analysed_around() {
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = tiny_program(dir.path(), &[]) else {
        return;
    };
    let cache = dir.path().join("cache");
    let binary = binary.to_str().unwrap();
    let first = loopscope_cached(&cache, &["loops", binary]);
    assert!(first.status.success(), "{}", stderr(&first));
    let entry = std::fs::read_dir(cache.join("loopscope"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&entry).unwrap();
    if !Command::new("mkfifo")
        .arg(&entry)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopscope"))
        .args(["loops", binary])
        .env("XDG_CACHE_HOME", &cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Only a guard against a hang (opening the FIFO blocked forever), not a timing test.
    let mut waited_s = 0;
    while child.try_wait().unwrap().is_none() {
        if waited_s == 120 {
            child.kill().unwrap();
            panic!("loops blocked on a FIFO cache entry");
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        waited_s += 1;
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&first));
}

#[test]
fn relocatable_objects_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let Some(object) = tiny_program(dir.path(), &["-c"]) else {
        return;
    };
    let cache = dir.path().join("cache");
    let object = object.to_str().unwrap();
    let needle = "tiny.o: a relocatable object (ET_REL): link it first";
    for args in [
        vec!["loops", object],
        vec!["blocks", "-f", "_start", object],
        vec!["loops", object, "--json"],
    ] {
        let out = loopscope_cached(&cache, &args);
        assert_bad_input(&out, needle);
        let err = stderr(&out);
        assert!(!err.contains("stripped") && !err.contains("0x0"), "{err}");
        assert!(stdout(&out).is_empty());
    }
}
