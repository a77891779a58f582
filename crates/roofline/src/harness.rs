//! The measured side of `--measure`: a C harness around a kernel's loop nest (allocation with
//! the declared sizes, initialisation, repetitions until the timing is stable, a guard against
//! dead-code elimination), compiled with the system C compiler and run.
//!
//! The kernel enters through [`HarnessKernel`], so any front end (the kernel-file parser) can
//! plug in. This is the one place this crate runs anything: it measures the user's kernel, not
//! the machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::RooflineError;

/// One array of the kernel, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessArray {
    /// Its name in the loop source.
    pub name: String,
    /// C element type: `double` or `float`.
    pub element: String,
    /// Extents, outermost first (`double a[M][N]` has `[M, N]`).
    pub extents: Vec<u64>,
}

/// What the harness needs from a kernel, whatever parsed it.
pub trait HarnessKernel {
    /// The arrays the loop nest uses.
    fn arrays(&self) -> Vec<HarnessArray>;
    /// Scalars the loop nest reads, as `(C type, name, initial value)`.
    fn scalars(&self) -> Vec<(String, String, f64)>;
    /// Loop-index variables the loop nest uses without declaring them.
    fn indices(&self) -> Vec<String>;
    /// The loop nest as C statements.
    fn loop_source(&self) -> String;
    /// Floating-point operations of one execution of the loop nest.
    fn flops(&self) -> u64;
}

/// A timed run of the harness.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessRun {
    /// Seconds of thread CPU time of one execution of the loop nest, in the fastest sample.
    pub seconds_per_run: f64,
    /// Executions per timed sample.
    pub repetitions: u64,
    /// Rate: FLOPs of one execution / `seconds_per_run`, 10^9 FLOP/s.
    pub gflops: f64,
}

/// Generates the harness's C source.
pub fn harness_source(kernel: &dyn HarnessKernel) -> String {
    let arrays = kernel.arrays();
    let params: Vec<String> = arrays.iter().map(pointer_declaration).collect();
    let scalars: Vec<String> = kernel
        .scalars()
        .iter()
        // External linkage: the compiler cannot know that nothing else writes them, so it
        // cannot fold a scalar the kernel reads as a run-time value into a constant (or two
        // scalars with the same start value into one).
        .map(|(ty, name, value)| format!("{ty} {name} = {value:?};"))
        .collect();
    let indices = kernel.indices();
    let index_decl = if indices.is_empty() {
        String::new()
    } else {
        format!("    long {};\n", indices.join(", "))
    };
    let allocations: String = arrays.iter().map(allocation).collect();
    let args: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
    let guard: String = arrays
        .iter()
        .map(|a| {
            format!(
                "        sink += ((double *){})[{}];\n",
                a.name,
                element_count(a) / 2
            )
        })
        .collect();
    format!(
        r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>

{scalars}
static volatile double sink;

/* The thread's CPU time: on a shared machine, time the kernel spends descheduled is not its own. */
static double now(void) {{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}}

__attribute__((noinline)) static void kernel({params}) {{
{index_decl}{body}
}}

static int cmp(const void *x, const void *y) {{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}}

/* Seconds for `reps` executions; the empty asm keeps the compiler from merging them. */
#define TIMED(reps, seconds)                            \
    do {{                                                \
        double t0_ = now();                             \
        for (long r_ = 0; r_ < (reps); r_++) {{          \
            kernel({args});                             \
            __asm__ volatile("" ::: "memory");          \
        }}                                               \
        (seconds) = now() - t0_;                        \
    }} while (0)

int main(void) {{
{allocations}    long reps = 1;
    double t;
    kernel({args});
    for (;;) {{
        TIMED(reps, t);
        if (t >= 0.05 || reps >= (1L << 40)) break;
        reps *= 2;
    }}
    double samples[5];
    for (int s = 0; s < 5; s++) {{
        TIMED(reps, t);
        samples[s] = t / reps;
{guard}    }}
    /* The fastest sample: other work on the machine only ever slows a sample down. */
    qsort(samples, 5, sizeof(double), cmp);
    printf("%.9e %ld\n", samples[0], reps);
    return 0;
}}
"#,
        scalars = scalars.join("\n"),
        params = params.join(", "),
        body = kernel.loop_source(),
        args = args.join(", "),
    )
}

fn element_count(array: &HarnessArray) -> u64 {
    array.extents.iter().product::<u64>().max(1)
}

/// The declarator suffix of a row of `array`: `[N]` for `double a[M][N]`.
fn inner_extents(array: &HarnessArray) -> String {
    array
        .extents
        .iter()
        .skip(1)
        .map(|e| format!("[{e}]"))
        .collect()
}

/// `double (*restrict a)[N]` for `double a[M][N]`, so the loop source indexes it unchanged.
fn pointer_declaration(array: &HarnessArray) -> String {
    let inner = inner_extents(array);
    format!("{} (*restrict {}){inner}", array.element, array.name)
}

fn allocation(array: &HarnessArray) -> String {
    let count = element_count(array);
    let inner = inner_extents(array);
    let name = &array.name;
    let ty = &array.element;
    let declared: String = array.extents.iter().map(|e| format!("[{e}]")).collect();
    format!(
        "    {ty} (*{name}){inner} = aligned_alloc(64, (({count}UL * sizeof({ty})) + 63) / 64 * 64);\n    \
         if (!{name}) {{ fprintf(stderr, \"cannot allocate array `{name}` ({ty} {name}{declared}, \
         %lu bytes)\\n\", (unsigned long)({count}UL * sizeof({ty}))); return 1; }}\n    \
         for (unsigned long k = 0; k < {count}UL; k++) (({ty} *){name})[k] = ({ty})(1.0 + (k % 7) * 1e-3);\n"
    )
}

/// Compiles `source` with `cc` and `flags` (a tuned build: `-O3 -march=native`) in `dir`,
/// runs it and returns the timing. A compiler failure is bad input and carries the compiler's
/// first error line.
pub fn run_harness(
    source: &str,
    flops: u64,
    cc: &Path,
    flags: &[&str],
    dir: &Path,
) -> Result<HarnessRun, RooflineError> {
    let c_file = dir.join("loopscope_harness.c");
    let binary: PathBuf = dir.join("loopscope_harness");
    std::fs::write(&c_file, source)
        .map_err(|e| RooflineError::Harness(format!("{}: cannot write: {e}", c_file.display())))?;
    let compiled = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&binary)
        .arg(&c_file)
        .output()
        // A compiler that cannot be started is the user's choice (`--cc`), like one that fails.
        .map_err(|e| RooflineError::Compile(format!("cannot run {}: {e}", cc.display())))?;
    if !compiled.status.success() {
        let message = String::from_utf8_lossy(&compiled.stderr);
        let first = message.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(RooflineError::Compile(format!(
            "{} failed on the generated harness: {}",
            cc.display(),
            first.trim()
        )));
    }
    let ran = Command::new(&binary)
        .output()
        .map_err(|e| RooflineError::Harness(format!("cannot run the harness: {e}")))?;
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let mut fields = stdout.split_whitespace();
    let seconds: Option<f64> = fields.next().and_then(|s| s.parse().ok());
    let repetitions: Option<u64> = fields.next().and_then(|s| s.parse().ok());
    match (ran.status.success(), seconds, repetitions) {
        (true, Some(seconds_per_run), Some(repetitions)) if seconds_per_run > 0.0 => {
            Ok(HarnessRun {
                seconds_per_run,
                repetitions,
                gflops: flops as f64 / seconds_per_run / 1e9,
            })
        }
        _ => Err(RooflineError::Harness(format!(
            "the harness failed ({}): {}",
            ran.status,
            String::from_utf8_lossy(&ran.stderr).trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A triad over 4096 doubles, as a kernel parser would describe it.
    struct Triad {
        body: &'static str,
    }

    impl HarnessKernel for Triad {
        fn arrays(&self) -> Vec<HarnessArray> {
            ["a", "b", "c"]
                .iter()
                .map(|n| HarnessArray {
                    name: (*n).to_owned(),
                    element: "double".into(),
                    extents: vec![2, 2048],
                })
                .collect()
        }
        fn scalars(&self) -> Vec<(String, String, f64)> {
            vec![("double".into(), "s".into(), 0.5)]
        }
        fn indices(&self) -> Vec<String> {
            vec!["j".into(), "i".into()]
        }
        fn loop_source(&self) -> String {
            self.body.to_owned()
        }
        fn flops(&self) -> u64 {
            2 * 4096
        }
    }

    const TRIAD: &str = "    for (j = 0; j < 2; j++)\n        for (i = 0; i < 2048; i++)\n            a[j][i] = b[j][i] + s * c[j][i];";

    const FLAGS: &[&str] = &["-O2"];

    fn cc() -> Option<PathBuf> {
        let found = Command::new("cc").arg("--version").output().is_ok();
        if !found {
            eprintln!("skipped: no `cc` on this machine");
        }
        found.then(|| PathBuf::from("cc"))
    }

    #[test]
    fn harness_declares_indexes_and_guards() {
        let source = harness_source(&Triad { body: TRIAD });
        assert!(source.contains("double (*restrict a)[2048]"), "{source}");
        assert!(source.contains("\ndouble s = 0.5;"), "{source}");
        assert!(source.contains("sink += ((double *)c)[2048];"), "{source}");
        assert!(source.contains("long j, i;"), "{source}");
    }

    /// One array too large for any machine: 2^60 doubles.
    struct Huge;

    impl HarnessKernel for Huge {
        fn arrays(&self) -> Vec<HarnessArray> {
            vec![HarnessArray {
                name: "big".into(),
                element: "double".into(),
                extents: vec![1 << 42, 1 << 18],
            }]
        }
        fn scalars(&self) -> Vec<(String, String, f64)> {
            Vec::new()
        }
        fn indices(&self) -> Vec<String> {
            vec!["i".into()]
        }
        fn loop_source(&self) -> String {
            "    for (i = 0; i < 4; i++) big[0][i] = 1.0;".into()
        }
        fn flops(&self) -> u64 {
            0
        }
    }

    #[test]
    fn an_allocation_failure_names_the_array_and_its_size() {
        let Some(cc) = cc() else { return };
        let dir = std::env::temp_dir().join(format!("loopscope-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = run_harness(&harness_source(&Huge), 1, &cc, FLAGS, &dir).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            err.to_string().contains(
                "cannot allocate array `big` (double big[4398046511104][262144], \
                 9223372036854775808 bytes)"
            ),
            "{err}"
        );
    }

    #[test]
    fn harness_compiles_runs_and_reports_a_rate() {
        let Some(cc) = cc() else { return };
        let dir = std::env::temp_dir().join(format!("loopscope-harness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kernel = Triad { body: TRIAD };
        let run = run_harness(&harness_source(&kernel), kernel.flops(), &cc, FLAGS, &dir).unwrap();
        assert!(run.gflops > 0.0 && run.repetitions >= 1, "{run:?}");
        let broken = Triad {
            body: "    a[j][i] = undeclared;",
        };
        let err = run_harness(&harness_source(&broken), 1, &cc, FLAGS, &dir).unwrap_err();
        assert!(matches!(err, RooflineError::Compile(_)), "{err}");
        assert!(err.to_string().contains("undeclared"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
