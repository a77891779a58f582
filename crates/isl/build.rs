//! Builds isl without autotools: the C sources bundled in the isl-rs crate, compiled with the cc
//! crate into a static library, with the few files `configure` would write generated here.
//!
//! isl-rs's own build script runs `autoreconf`, `configure` and `make`, so depending on isl-rs
//! directly needs autoconf, automake, libtool and make on every machine. Instead this script asks
//! cargo for the isl-rs crate's sources (a throwaway manifest in OUT_DIR that depends on exactly
//! the version Cargo.lock pins, so cargo downloads, checksums and unpacks it but never builds
//! it), compiles the library sources `Makefile.am` lists, and writes a module that compiles
//! isl-rs's generated bindings as part of this crate.
//!
//! isl is configured as `--with-int=imath-32` would: imath with integers that fit in 32 bits held
//! inline (`USE_SMALL_INT_OPT`), which isl's authors call the fastest choice; the analytic cache
//! model runs 3-5x faster with it than with plain imath. loopscope-polyhedral's
//! `tests/isl_backend.rs` fails to link if the library lacks it.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The isl-rs release whose isl sources and bindings are compiled; Cargo.toml pins the same one.
const ISL_RS_VERSION: &str = "0.3.1";

/// The multi-precision sources `Makefile.am` adds for `--with-int=imath-32` (its `MP_SRC` with
/// `IMATH_FOR_MP` and `SMALL_INT_OPT`): imath itself, wrapped, and the small-integer layer.
const IMATH_32_SOURCES: [&str; 6] = [
    "isl_imath.c",
    "imath_wrap/gmp_compat.c",
    "imath_wrap/imath.c",
    "imath_wrap/imrat.c",
    "isl_int_sioimath.c",
    "isl_val_sioimath.c",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    check_target();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let isl_rs = isl_rs_sources(&out_dir);
    let isl = isl_rs.join("isl");
    let generated = out_dir.join("generated");
    write_generated_headers(&generated, &isl_version(&isl));
    compile_isl(&isl, &generated);
    write_bindings_module(
        &out_dir,
        &isl_rs.join("src").join("bindings").join("mod.rs"),
    );
}

/// Stops the build with one line saying what went wrong.
fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("error: building isl (crates/isl/build.rs): {message}");
    std::process::exit(1);
}

/// The generated `isl_config.h` states what `configure` finds on a Unix C library with a
/// GCC-compatible compiler; elsewhere it would be wrong, so say so rather than miscompile.
fn check_target() {
    if env::var("CARGO_CFG_TARGET_FAMILY").ok().as_deref() != Some("unix") {
        fail("isl's configuration here assumes a Unix target (strings.h, ffs, strcasecmp)");
    }
    let compiler = cc::Build::new().get_compiler();
    if !(compiler.is_like_gnu() || compiler.is_like_clang()) {
        fail(format!(
            "isl's configuration here assumes GCC or Clang, found {}",
            compiler.path().display()
        ));
    }
}

/// The unpacked isl-rs crate: cargo resolves a manifest whose only dependency is that crate,
/// with the workspace's Cargo.lock so its pinned checksum applies; first from what is already
/// downloaded, then from the registry.
fn isl_rs_sources(out_dir: &Path) -> PathBuf {
    let fetch_dir = out_dir.join("isl-rs-sources");
    let write = |name: &str, text: &str| {
        fs::write(fetch_dir.join(name), text).unwrap_or_else(|e| {
            fail(format!(
                "cannot write {}: {e}",
                fetch_dir.join(name).display()
            ))
        })
    };
    fs::create_dir_all(&fetch_dir)
        .unwrap_or_else(|e| fail(format!("cannot create {}: {e}", fetch_dir.display())));
    write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"isl-rs-sources\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[lib]\npath = \"lib.rs\"\n\n\
             [dependencies]\nisl-rs = \"={ISL_RS_VERSION}\"\n\n[workspace]\n"
        ),
    );
    write("lib.rs", "");
    if let Some(lock) = workspace_lockfile() {
        fs::copy(&lock, fetch_dir.join("Cargo.lock"))
            .unwrap_or_else(|e| fail(format!("cannot copy {}: {e}", lock.display())));
    }
    let manifest = fetch_dir.join("Cargo.toml");
    let output = cargo_metadata(&manifest, true);
    let output = if output.status.success() {
        output
    } else {
        cargo_metadata(&manifest, false)
    };
    if !output.status.success() {
        fail(format!(
            "`cargo metadata` could not fetch isl-rs {ISL_RS_VERSION} from crates.io: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    isl_rs_dir_in(&output.stdout)
}

/// The Cargo.lock of the workspace this crate is built in, if any.
fn workspace_lockfile() -> Option<PathBuf> {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    manifest_dir
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|lock| lock.is_file())
}

fn cargo_metadata(manifest: &Path, offline: bool) -> Output {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest);
    if offline {
        command.arg("--offline");
    }
    command
        .output()
        .unwrap_or_else(|e| fail(format!("cannot run cargo metadata: {e}")))
}

/// The directory of the isl-rs package in `cargo metadata` output: of the few packages the
/// throwaway manifest pulls in, the one that bundles isl. The output is read as text (the
/// `manifest_path` strings) because a JSON library among this script's dependencies would be
/// built with whatever features the rest of the build asks for, so a different set of packages
/// on the command line would make cargo rebuild isl.
fn isl_rs_dir_in(metadata_json: &[u8]) -> PathBuf {
    let text = String::from_utf8_lossy(metadata_json);
    let key = "\"manifest_path\":\"";
    let manifests = text
        .match_indices(key)
        .map(|(at, _)| json_string_at(&text[at + key.len()..]));
    manifests
        .filter_map(|manifest| Path::new(&manifest).parent().map(Path::to_path_buf))
        .find(|dir| dir.join("isl").join("Makefile.am").is_file())
        .unwrap_or_else(|| {
            fail(format!(
                "cargo metadata lists no isl-rs {ISL_RS_VERSION} with isl/"
            ))
        })
}

/// The JSON string whose contents start `text` (after the opening quote), unescaped.
fn json_string_at(text: &str) -> String {
    let mut value = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
                }
                Some(other) => value.push(other),
                None => break,
            },
            _ => value.push(c),
        }
    }
    value
}

/// isl's version, from `AC_INIT([isl], [VERSION], ...)` in configure.ac.
fn isl_version(isl: &Path) -> String {
    let configure_ac = read(&isl.join("configure.ac"));
    configure_ac
        .lines()
        .find_map(|line| line.strip_prefix("AC_INIT([isl], ["))
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| fail("configure.ac has no AC_INIT([isl], [VERSION], ...) line"))
        .to_string()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|e| fail(format!("cannot read {}: {e}", path.display())))
}

/// The headers `configure` and `make` would write: `isl_config.h` (what configure.ac's checks
/// find on a Unix C library with GCC or Clang, and imath-32), `isl/stdint.h` (autoconf's
/// `AX_CREATE_STDINT_H`, which on a C99 system only includes `<stdint.h>`) and `gitversion.h`.
fn write_generated_headers(dir: &Path, version: &str) {
    let isl_config_h = format!(
        "/* Written by loopscope-isl's build.rs in place of configure. */\n\
         #define GCC_WARN_UNUSED_RESULT __attribute__((__warn_unused_result__))\n\
         #define HAVE___ATTRIBUTE__ 1\n\
         #define HAVE_DECL_FFS 1\n\
         #define HAVE_DECL___BUILTIN_FFS 1\n\
         #define HAVE_DECL__BITSCANFORWARD 0\n\
         #define HAVE_DECL_STRCASECMP 1\n\
         #define HAVE_DECL_STRNCASECMP 1\n\
         #define HAVE_DECL__STRICMP 0\n\
         #define HAVE_DECL__STRNICMP 0\n\
         #define HAVE_DECL_SNPRINTF 1\n\
         #define HAVE_DECL__SNPRINTF 0\n\
         #define PACKAGE \"isl\"\n\
         #define PACKAGE_NAME \"isl\"\n\
         #define PACKAGE_VERSION \"{version}\"\n\
         #define PACKAGE_STRING \"isl {version}\"\n\
         #define VERSION \"{version}\"\n\
         #define USE_IMATH_FOR_MP /**/\n\
         #define USE_SMALL_INT_OPT /**/\n\
         #include <isl_config_post.h>\n"
    );
    let stdint_h = "#ifndef _ISL_INCLUDE_ISL_STDINT_H\n#define _ISL_INCLUDE_ISL_STDINT_H 1\n\
                    #include <stdint.h>\n#endif\n";
    let gitversion_h =
        format!("#define GIT_HEAD_ID \"isl-{version} (from isl-rs {ISL_RS_VERSION})\"\n");
    let files = [
        (dir.join("isl_config.h"), isl_config_h),
        (dir.join("isl").join("stdint.h"), stdint_h.to_string()),
        (dir.join("gitversion.h"), gitversion_h),
    ];
    for (path, text) in files {
        fs::create_dir_all(path.parent().expect("a header path has a directory"))
            .and_then(|()| fs::write(&path, text))
            .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", path.display())));
    }
}

/// The C files of `libisl_la_SOURCES` in isl's Makefile.am (its multi-precision part,
/// `$(MP_SRC)`, is [`IMATH_32_SOURCES`]).
fn library_sources(isl: &Path) -> Vec<String> {
    let makefile_am = read(&isl.join("Makefile.am"));
    let variable = makefile_am
        .lines()
        .skip_while(|l| !l.starts_with("libisl_la_SOURCES ="));
    let mut sources = Vec::new();
    for line in variable {
        let continued = line.trim_end().ends_with('\\');
        sources.extend(
            line.split_whitespace()
                .filter(|w| w.ends_with(".c"))
                .map(String::from),
        );
        if !continued {
            break;
        }
    }
    if sources.len() < 50 || !makefile_am.contains("$(MP_SRC)") {
        fail("Makefile.am's libisl_la_SOURCES is not the list this build script expects");
    }
    sources
}

/// Compiles isl into `libisl.a`, spreading the files over the `NUM_JOBS` jobs cargo allows (as
/// isl-rs's `make -j` did): cc's own parallel mode would add a build dependency on libc, whose
/// features change with the packages built, and each change would rebuild isl.
fn compile_isl(isl: &Path, generated: &Path) {
    let mut build = cc::Build::new();
    build
        .include(generated)
        .include(isl)
        .include(isl.join("include"))
        .include(isl.join("imath_wrap"))
        .define("HAVE_CONFIG_H", None)
        // configure adds -std=gnu99 for imath-32 with GCC: isl_int_sioimath.h needs C99 and
        // GNU extensions.
        .flag("-std=gnu99")
        // isl is the analytic model's inner loop: optimise it in every profile, as configure
        // would, instead of following the dev profile's opt-level 0.
        .opt_level(3)
        // isl's sources are not ours to fix; configure builds them without warning flags too.
        .warnings(false)
        .extra_warnings(false);
    let sources: Vec<PathBuf> = library_sources(isl)
        .iter()
        .map(String::as_str)
        .chain(IMATH_32_SOURCES)
        .map(|source| {
            let path = isl.join(source);
            if !path.is_file() {
                fail(format!("{} is missing", path.display()));
            }
            path
        })
        .collect();
    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let objects = compile_objects(&build, &sources, jobs);
    build.objects(objects).compile("isl");
}

/// The object files of `sources`, compiled by `jobs` threads, each taking every `jobs`-th file.
fn compile_objects(build: &cc::Build, sources: &[PathBuf], jobs: usize) -> Vec<PathBuf> {
    let jobs = jobs.clamp(1, sources.len());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|job| {
                let mut part = build.clone();
                part.files(sources.iter().skip(job).step_by(jobs));
                scope.spawn(move || part.try_compile_intermediates())
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| fail("a compiler thread panicked"))
                    .unwrap_or_else(|e| fail(e))
            })
            .collect()
    })
}

/// `bindings.rs` in OUT_DIR: isl-rs's generated bindings (`src/bindings/mod.rs` and the files
/// beside it) as a module of this crate. Generated code with its own style, so lints are off.
fn write_bindings_module(out_dir: &Path, bindings_mod_rs: &Path) {
    let path = bindings_mod_rs
        .to_str()
        .unwrap_or_else(|| fail(format!("{} is not valid UTF-8", bindings_mod_rs.display())));
    let module = format!(
        "#[allow(missing_docs, warnings, clippy::all, clippy::pedantic, clippy::nursery)]\n\
         #[path = {path:?}]\nmod bindings;\n"
    );
    let target = out_dir.join("bindings.rs");
    fs::write(&target, module)
        .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", target.display())));
}
