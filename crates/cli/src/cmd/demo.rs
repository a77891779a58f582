//! `loopscope demo`: both pipelines on the bundled examples, in about a minute. It measures
//! this machine (`probe --quick`), models and times example kernels (`misses`, `roofline
//! --measure`), profiles an example program (`record` sampled and patched, `report`, `mix`)
//! and writes everything into one self-contained HTML page, with the command that reproduces
//! each figure. Every step calls the library, as the commands do; a step that fails is named
//! in the page and the summary, and the others still run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::ProgressBar;
use loopscope_analytic::{Misses, MissesRequest, misses};
use loopscope_cache::levels_from_machine;
use loopscope_kernel::Listener;
use loopscope_machine::{Machine, write_atomically, write_machine_file};
use loopscope_probe::{ProbeOptions, ProbeReport, Simd, run_probe};
use loopscope_profile::{
    HotRule, MixOptions, MixReport, PatchOptions, Profile, ProfileReport, SampleOptions, TreeNode,
    build_mix, build_report, record_patch, record_sampled,
};
use loopscope_report::{
    Figure, FirefoxInput, HtmlReport, format_bytes, render_firefox_profile, render_html,
    shell_word, shell_words,
};
use loopscope_roofline::{
    CacheSizes, KernelInputRequest, MachineInput, Roofline, RooflineInput, RooflineRequest,
    run_roofline,
};
use serde::Serialize;

use crate::inputs::level_command;
use crate::ui::Ui;

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for the report, the example sources, their builds, profiles and the machine
    /// file (created if missing; files of an earlier demo are replaced).
    #[arg(long, value_name = "DIR", default_value = "loopscope-demo")]
    pub out: PathBuf,
    /// Print the summary as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// A bundled kernel file and the values the demo gives its parameters.
struct BundledKernel {
    name: &'static str,
    source: &'static str,
    define: &'static [(&'static str, i64)],
}

const KERNELS: [BundledKernel; 3] = [
    BundledKernel {
        name: "triad",
        source: include_str!("../../../../examples/kernels/triad.c"),
        define: &[("N", 2_000_000)],
    },
    BundledKernel {
        name: "2d-5pt",
        source: include_str!("../../../../examples/kernels/2d-5pt.c"),
        define: &[("M", 700), ("N", 700)],
    },
    BundledKernel {
        name: "stride-conflict",
        source: include_str!("../../../../examples/kernels/stride-conflict.c"),
        define: &[("N", 512), ("M", 512)],
    },
];

/// Which kernels go through `roofline --measure` and which through `misses`.
const ROOFLINE_KERNELS: [&str; 2] = ["triad", "2d-5pt"];
const MISSES_KERNELS: [(&str, &[(&str, i64)]); 2] = [
    ("2d-5pt", &[("M", 64), ("N", 1024)]),
    ("stride-conflict", &[("N", 512), ("M", 512)]),
];

/// The example program and its arguments, the same for both back-ends.
const PROGRAM: &str = include_str!("../../../../examples/programs/stencil.c");
const PROGRAM_NAME: &str = "stencil";
/// A grid of 65 x 65 x 129 points, swept 120 times: about a second, a thousand samples (`-q`:
/// the program prints nothing, so its output does not mix with the demo's).
const PROGRAM_ARGS: [&str; 5] = ["65", "65", "129", "120", "-q"];

/// What the demo found, as `--json` prints it.
#[derive(Debug, Default, Serialize)]
pub struct DemoSummary {
    /// The HTML report.
    pub report: String,
    /// The processor measured.
    pub machine: String,
    /// Seconds the demo took.
    pub duration_s: f64,
    /// Each step and its seconds.
    pub steps: Vec<StepTime>,
    /// Caches the probe found: level, size, latency.
    pub caches: Vec<CacheLine>,
    /// Measured peak DP GFLOP/s.
    pub peak_gflops_dp: Option<f64>,
    /// Each kernel's prediction and measured rate.
    pub kernels: Vec<KernelLine>,
    /// Each misses kernel's innermost level.
    pub misses: Vec<MissLine>,
    /// The hottest loops of the sampled profile.
    pub hot_loops: Vec<LoopLine>,
    /// Instruction shares by type (exact: the patched run's block counts).
    pub mix: Vec<(String, f64)>,
    /// Steps that failed, with why.
    pub failures: Vec<String>,
}

/// One step's time.
#[derive(Debug, Serialize)]
pub struct StepTime {
    /// The step.
    pub step: String,
    /// Seconds.
    pub seconds: f64,
}

/// One cache the probe found.
#[derive(Debug, Serialize)]
pub struct CacheLine {
    /// `L1d`, `L2`.
    pub name: String,
    /// Effective size.
    pub size_bytes: u64,
    /// Load-to-use latency.
    pub latency_ns: f64,
    /// The last level's streaming size, which the models simulate, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming_size_bytes: Option<u64>,
}

/// One kernel's roofline.
#[derive(Debug, Serialize)]
pub struct KernelLine {
    /// Kernel and parameters.
    pub kernel: String,
    /// Predicted GFLOP/s.
    pub predicted_gflops: f64,
    /// The limiting level.
    pub limit: String,
    /// Measured GFLOP/s.
    pub measured_gflops: Option<f64>,
}

/// One kernel's misses at the innermost level.
#[derive(Debug, Serialize)]
pub struct MissLine {
    /// Kernel and parameters.
    pub kernel: String,
    /// The level.
    pub level: String,
    /// Accesses.
    pub accesses: u64,
    /// Compulsory misses.
    pub compulsory: u64,
    /// Conflict misses.
    pub conflict: u64,
}

/// One hot loop.
#[derive(Debug, Serialize)]
pub struct LoopLine {
    /// `loop 9 in jacobi`.
    pub name: String,
    /// `stencil.c:68`.
    pub source: String,
    /// Inclusive share of the run.
    pub share: f64,
    /// Fewest, mean and most trips per entry (the patched run: exact).
    pub trips: Option<[f64; 3]>,
}

/// Collects what the library calls say, for the page, instead of printing over the bars.
#[derive(Debug, Default)]
struct Collected {
    warnings: Mutex<Vec<String>>,
}

impl Listener for Collected {
    fn warn(&self, message: &str) {
        if let Ok(mut w) = self.warnings.lock()
            && !w.iter().any(|m| m == message)
        {
            w.push(message.to_owned());
        }
    }
}

/// Everything measured, kept for the page.
#[derive(Default)]
struct Results {
    machine: Option<Machine>,
    probe: Option<ProbeReport>,
    rooflines: Vec<(String, String, Roofline)>,
    misses: Vec<(String, String, Misses)>,
    sampled: Option<(String, String, ProfileReport)>,
    exact: Option<(String, String, ProfileReport)>,
    mix: Option<(String, String, MixReport)>,
}

/// Runs `demo`.
pub fn run(args: &DemoArgs, ui: &Ui) -> anyhow::Result<()> {
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        ui.warn(format!("Ctrl-C will end the demo without its report: {e}"));
    }
    let dir = prepare_dir(&args.out)?;
    let listener = Collected::default();
    let mut demo = Demo {
        dir: &dir,
        ui,
        stop: &stop,
        listener: &listener,
        summary: DemoSummary::default(),
        results: Results::default(),
    };
    demo.run_steps();
    let report = dir.join("report.html");
    demo.step("write the report", 1, |d, _| d.write_html(&report));
    demo.summary.report = report.display().to_string();
    demo.summary.duration_s = started.elapsed().as_secs_f64();
    if args.json {
        crate::cmd::print_json(&demo.summary)?;
    } else {
        crate::cmd::print_text(&render_summary(&demo.summary))?;
    }
    if stop.load(Ordering::SeqCst) {
        anyhow::bail!("interrupted: the report above is partial");
    }
    if !demo.summary.failures.is_empty() {
        anyhow::bail!(
            "{} step(s) failed: {}",
            demo.summary.failures.len(),
            demo.summary.failures.join("; ")
        );
    }
    Ok(())
}

/// The output directory, made if missing, as an absolute path (the page names files in it).
fn prepare_dir(out: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out.join("kernels")).map_err(|e| {
        crate::failure::bad_input(format!(
            "{}: cannot create the directory: {e}",
            out.display()
        ))
    })?;
    std::fs::canonicalize(out).with_context(|| format!("{}: cannot resolve", out.display()))
}

struct Demo<'a> {
    dir: &'a Path,
    ui: &'a Ui,
    stop: &'a AtomicBool,
    listener: &'a Collected,
    summary: DemoSummary,
    results: Results,
}

impl Demo<'_> {
    fn run_steps(&mut self) {
        self.step("compile", 1 + KERNELS.len() as u64, |d, bar| d.compile(bar));
        self.step("probe --quick", 1000, |d, bar| d.probe(bar));
        self.step("misses", MISSES_KERNELS.len() as u64, |d, bar| {
            d.misses(bar)
        });
        self.step(
            "roofline --measure",
            ROOFLINE_KERNELS.len() as u64,
            |d, bar| d.rooflines(bar),
        );
        self.step("record", 2, |d, bar| d.record(bar));
        self.step("report + mix", 1, |d, _| d.mix());
    }

    /// Runs one step under its own progress bar; a failure is noted and the demo goes on.
    fn step(
        &mut self,
        name: &str,
        total: u64,
        work: impl FnOnce(&mut Self, &ProgressBar) -> anyhow::Result<()>,
    ) {
        if self.stop.load(Ordering::SeqCst) {
            return;
        }
        let bar = self.ui.progress_bar(total, name);
        let started = Instant::now();
        let result = work(self, &bar);
        let seconds = started.elapsed().as_secs_f64();
        // The finished step stays on screen as one line; the next step's bar goes below it.
        let outcome = if result.is_ok() { "done" } else { "failed" };
        bar.println(format!("{name:>18}  {outcome} in {seconds:.1} s"));
        bar.finish_and_clear();
        self.ui.note(format!("{name}: {seconds:.1} s"));
        self.summary.steps.push(StepTime {
            step: name.to_owned(),
            seconds,
        });
        if let Err(e) = result {
            let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
            self.summary
                .failures
                .push(format!("{name}: {}", chain.join(": ")));
        }
    }

    fn program(&self) -> PathBuf {
        self.dir.join(PROGRAM_NAME)
    }

    fn kernel_path(&self, name: &str) -> PathBuf {
        self.dir.join("kernels").join(format!("{name}.c"))
    }

    /// Writes the bundled sources and builds the program with `cc -O2 -g`.
    fn compile(&mut self, bar: &ProgressBar) -> anyhow::Result<()> {
        for k in &KERNELS {
            write_atomically(&self.kernel_path(k.name), k.source.as_bytes())?;
            bar.inc(1);
        }
        let source = self.dir.join(format!("{PROGRAM_NAME}.c"));
        write_atomically(&source, PROGRAM.as_bytes())?;
        let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let output = std::process::Command::new(&compiler)
            .args(["-O2", "-g"])
            .arg(&source)
            .arg("-o")
            .arg(self.program())
            .output()
            .with_context(|| {
                format!(
                    "cannot run the C compiler `{}` (set CC to another)",
                    compiler.to_string_lossy()
                )
            })?;
        if !output.status.success() {
            anyhow::bail!(
                "{} -O2 -g {}: {}",
                compiler.to_string_lossy(),
                source.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        bar.inc(1);
        Ok(())
    }

    /// `probe --quick`, its measurements kept in `machine.toml` for the roofline.
    fn probe(&mut self, bar: &ProgressBar) -> anyhow::Result<()> {
        let mut machine = loopscope_machine::detect().context("cannot detect this machine")?;
        self.summary.machine = machine.model.clone();
        self.results.machine = Some(machine.clone());
        let mut progress = |_phase: &str, fraction: f64| {
            bar.set_position((fraction * 1000.0) as u64);
        };
        let options = ProbeOptions {
            quick: true,
            seed: 1,
        };
        let report = run_probe(&machine, &options, self.stop, &mut progress)?;
        machine.measured = Some(report.measured.clone());
        write_machine_file(&self.dir.join("machine.toml"), &machine)?;
        for c in &report.measured.caches {
            self.summary.caches.push(CacheLine {
                name: format!("L{}{}", c.level, c.kind.suffix()),
                size_bytes: c.size_bytes,
                latency_ns: c.latency_ns,
                streaming_size_bytes: c.streaming_size_bytes,
            });
        }
        self.summary.peak_gflops_dp = report.measured.peak_gflops.as_ref().map(|p| p.dp);
        self.results.machine = Some(machine);
        self.results.probe = Some(report);
        Ok(())
    }

    fn machine(&self) -> anyhow::Result<&Machine> {
        self.results
            .machine
            .as_ref()
            .context("no machine description (the probe step failed)")
    }

    fn misses(&mut self, bar: &ProgressBar) -> anyhow::Result<()> {
        let levels = levels_from_machine(self.machine()?)?;
        let command = level_command()?;
        for (name, define) in MISSES_KERNELS {
            let path = self.kernel_path(name);
            let define = owned(define);
            let request = MissesRequest {
                kernel: &path,
                define: &define,
                base: None,
                check: false,
                explain: false,
                sources: false,
                max_operations: 200_000_000,
                time_limit_s: 30.0,
                model_only: false,
                symbolic: None,
                at: &[],
                scan: None,
                command: &command,
            };
            let result = misses(&request, &levels, self.listener)?;
            let title = kernel_title(name, &define);
            let shown = format!(
                "loopscope misses {} {} -m {}",
                path.display(),
                defines(&define),
                self.dir.join("machine.toml").display()
            );
            if let Misses::Counts(counts) = &result
                && let Some(level) = counts.levels.first()
            {
                self.summary.misses.push(MissLine {
                    kernel: title.clone(),
                    level: level.name.clone(),
                    accesses: level.accesses.unwrap_or(0),
                    compulsory: level.compulsory.unwrap_or(0),
                    conflict: level.conflict.unwrap_or(0),
                });
            }
            self.results.misses.push((title, shown, result));
            bar.inc(1);
        }
        Ok(())
    }

    fn rooflines(&mut self, bar: &ProgressBar) -> anyhow::Result<()> {
        let machine = self.machine()?.clone();
        let levels = levels_from_machine(&machine)?;
        let machine_file = self.dir.join("machine.toml").display().to_string();
        let cc = PathBuf::from("cc");
        for name in ROOFLINE_KERNELS {
            let Some(kernel) = KERNELS.iter().find(|k| k.name == name) else {
                continue;
            };
            let path = self.kernel_path(name);
            let define = owned(kernel.define);
            let request = RooflineRequest {
                input: RooflineInput::Kernel(KernelInputRequest {
                    path: &path,
                    define: &define,
                    levels: levels.clone(),
                    cache_sizes: CacheSizes::Effective,
                    model: None,
                    cflags: None,
                    measure: Some(&cc),
                    native_vector_bytes: Simd::detect().vector_bytes(),
                }),
                machine: MachineInput::Machine {
                    machine: &machine,
                    name: &machine_file,
                    time_add_latency: None,
                },
                bandwidth: None,
                store_bandwidth: None,
                volume: None,
                threads: Some(1),
                peak_gflops: None,
                effective_gflops: None,
                add_latency_ns: None,
                measured_gflops: None,
                paper_rounding: false,
            };
            let roofline = run_roofline(&request, self.listener)?;
            let title = kernel_title(name, &define);
            let a = &roofline.analysis;
            self.summary.kernels.push(KernelLine {
                kernel: title.clone(),
                predicted_gflops: a.prediction.gflops,
                limit: a.prediction.limit.to_string(),
                measured_gflops: a.measured.as_ref().map(|m| m.gflops),
            });
            let shown = format!(
                "loopscope roofline {} {} -m {machine_file} --measure --plot roofline.svg",
                path.display(),
                defines(&define)
            );
            self.results.rooflines.push((title, shown, roofline));
            bar.inc(1);
        }
        Ok(())
    }

    /// The program under both back-ends: sampled for time, exact for entries and trips.
    fn record(&mut self, bar: &ProgressBar) -> anyhow::Result<()> {
        let program = self.program();
        let sampled_path = self.dir.join(format!("{PROGRAM_NAME}.profile"));
        let command = command_line(&program, &PROGRAM_ARGS);
        let run = record_sampled(&command, &SampleOptions::default(), self.stop)?;
        let profile = Profile::sampled(text_of(&command), run);
        profile.write(&sampled_path)?;
        let report = build_report(&profile, HotRule::Share(0.01))?;
        self.add_hot_loops(&report.tree, None);
        let firefox = self.dir.join(format!("{PROGRAM_NAME}.firefox.json"));
        // A profiled time that is not a finite, non-negative number dates the run at the epoch
        // instead of panicking.
        let started = Duration::try_from_secs_f64(report.overhead.profiled_s)
            .ok()
            .and_then(|d| std::time::SystemTime::now().checked_sub(d))
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        let json = render_firefox_profile(
            &[FirefoxInput {
                label: "",
                report: &report,
            }],
            started,
        )?;
        write_atomically(&firefox, json.as_bytes())?;
        self.results.sampled = Some((
            format!(
                "Time per loop and calling context: {PROGRAM_NAME} {} (sample back-end)",
                PROGRAM_ARGS.join(" ")
            ),
            format!(
                "loopscope record -o {} -- {} && loopscope report {} --firefox {}",
                shell_path(&sampled_path),
                shell_words(text_of(&command)),
                shell_path(&sampled_path),
                shell_path(&firefox)
            ),
            report,
        ));
        bar.inc(1);
        let exact_path = self.dir.join(format!("{PROGRAM_NAME}-exact.profile"));
        let options = PatchOptions {
            search_path: std::env::var_os("PATH"),
            runtime: crate::cmd::record::patch_runtime()?,
            preload: std::env::var_os("LD_PRELOAD"),
            count_blocks: true,
            libraries: false,
            scratch: None,
        };
        let run = record_patch(&command, &options, self.stop)?;
        let profile = Profile::patched(text_of(&command), run);
        profile.write(&exact_path)?;
        let report = build_report(&profile, HotRule::Share(0.01))?;
        self.add_trips(&report.tree);
        self.results.exact = Some((
            format!(
                "Entries and trips per loop: {PROGRAM_NAME} {} (patch back-end with block \
                 counters: exact counts; its times include the cost of every event, take times \
                 from the sampled tree)",
                PROGRAM_ARGS.join(" ")
            ),
            format!(
                "loopscope record --backend patch --blocks -o {} -- {} && loopscope report {}",
                shell_path(&exact_path),
                shell_words(text_of(&command)),
                shell_path(&exact_path)
            ),
            report,
        ));
        bar.inc(1);
        Ok(())
    }

    /// The exact instruction mix, from the patched run's block counters.
    fn mix(&mut self) -> anyhow::Result<()> {
        let path = self.dir.join(format!("{PROGRAM_NAME}-exact.profile"));
        let profile = Profile::read(&path)?;
        let mix = build_mix(&profile, &MixOptions::default(), &path)?;
        self.summary.mix = mix
            .type_details
            .iter()
            .map(|t| (t.name.to_owned(), t.share))
            .collect();
        self.results.mix = Some((
            format!(
                "Executed instructions: {PROGRAM_NAME} {} (every block counted)",
                PROGRAM_ARGS.join(" ")
            ),
            format!("loopscope mix {}", shell_path(&path)),
            mix,
        ));
        Ok(())
    }

    /// The three hottest innermost loops of the sampled tree.
    fn add_hot_loops(&mut self, node: &TreeNode, function: Option<&str>) {
        let mut loops = Vec::new();
        collect_loops(node, function, &mut loops);
        loops.sort_by(|a, b| b.share.total_cmp(&a.share));
        loops.truncate(3);
        self.summary.hot_loops = loops;
    }

    /// Trips of the exact tree's loops, matched to the sampled hot loops by source line.
    fn add_trips(&mut self, root: &TreeNode) {
        let mut exact = Vec::new();
        collect_loops(root, None, &mut exact);
        for line in &mut self.summary.hot_loops {
            line.trips = exact
                .iter()
                .find(|e| e.source == line.source && e.name == line.name)
                .and_then(|e| e.trips);
        }
    }

    fn write_html(&mut self, out: &Path) -> anyhow::Result<()> {
        let r = &self.results;
        let mut notes: Vec<String> = self
            .summary
            .failures
            .iter()
            .map(|f| format!("failed: {f}"))
            .collect();
        if let Ok(w) = self.listener.warnings.lock() {
            notes.extend(w.iter().cloned());
        }
        let probe_command = format!(
            "loopscope probe --quick --out {} --plot plots/",
            self.dir.join("machine.toml").display()
        );
        let mut page = HtmlReport {
            title: "loopscope demo".into(),
            subtitle: format!(
                "{}: the machine measured, example kernels modelled and timed, an example \
                 program profiled",
                r.machine
                    .as_ref()
                    .map_or("this machine", |m| m.model.as_str())
            ),
            machine: r.machine.as_ref(),
            notes,
            ..HtmlReport::default()
        };
        if let Some(p) = &r.probe {
            page.probe = Some(Figure {
                title: "probe --quick",
                command: &probe_command,
                data: p,
            });
        }
        page.rooflines = r.rooflines.iter().map(figure).collect();
        page.misses = r.misses.iter().map(figure).collect();
        page.profiles = [&r.sampled, &r.exact]
            .into_iter()
            .flatten()
            .map(figure)
            .collect();
        page.mixes = r.mix.iter().map(figure).collect();
        write_atomically(out, render_html(&page)?.as_bytes())?;
        Ok(())
    }
}

fn figure<T>((title, command, data): &(String, String, T)) -> Figure<'_, T> {
    Figure {
        title,
        command,
        data,
    }
}

/// Loops with an inclusive share, innermost ones (no loop below) only.
fn collect_loops(node: &TreeNode, function: Option<&str>, out: &mut Vec<LoopLine>) {
    let function = if node.kind == "function" {
        Some(node.name.as_str())
    } else {
        function
    };
    let inner_loops = node.children.iter().any(|c| c.kind == "loop");
    if node.kind == "loop" && !inner_loops {
        let source = loopscope_report::source_text(node.file.as_deref(), node.line, &node.inlined)
            .unwrap_or_default();
        out.push(LoopLine {
            name: match function {
                Some(f) => format!("{} in {f}", node.name),
                None => node.name.clone(),
            },
            source,
            share: node.inclusive_share,
            trips: node.trips,
        });
    }
    for c in &node.children {
        collect_loops(c, function, out);
    }
}

fn owned(define: &[(&str, i64)]) -> Vec<(String, i64)> {
    define.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
}

fn defines(define: &[(String, i64)]) -> String {
    define
        .iter()
        .map(|(n, v)| format!("-D {n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn kernel_title(name: &str, define: &[(String, i64)]) -> String {
    let values: Vec<String> = define.iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!("{name} ({})", values.join(", "))
}

fn command_line(program: &Path, args: &[&str]) -> Vec<OsString> {
    std::iter::once(program.as_os_str().to_owned())
        .chain(args.iter().map(OsString::from))
        .collect()
}

/// A path as a word of a command shown to be copied.
fn shell_path(path: &Path) -> String {
    shell_word(&path.display().to_string()).into_owned()
}

fn text_of(command: &[OsString]) -> Vec<String> {
    command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The summary printed at the end.
fn render_summary(s: &DemoSummary) -> String {
    let mut out = format!(
        "loopscope demo on {}, {:.0} s\n\n",
        if s.machine.is_empty() {
            "this machine"
        } else {
            &s.machine
        },
        s.duration_s
    );
    if !s.caches.is_empty() {
        let caches: Vec<String> = s
            .caches
            .iter()
            .map(|c| {
                let streaming = c
                    .streaming_size_bytes
                    .map(|b| format!(" (streaming {})", format_bytes(b)))
                    .unwrap_or_default();
                format!(
                    "{} {} {:.1} ns{streaming}",
                    c.name,
                    format_bytes(c.size_bytes),
                    c.latency_ns
                )
            })
            .collect();
        out.push_str(&format!("caches    {}\n", caches.join(", ")));
    }
    if let Some(peak) = s.peak_gflops_dp {
        out.push_str(&format!("peak      {peak:.1} GFLOP/s DP (all cores)\n"));
    }
    for k in &s.kernels {
        let measured = k
            .measured_gflops
            .map_or_else(String::new, |m| format!(", measured {m:.2}"));
        out.push_str(&format!(
            "roofline  {}: predicted {:.2} GFLOP/s ({}-bound){measured}\n",
            k.kernel, k.predicted_gflops, k.limit
        ));
    }
    for m in &s.misses {
        out.push_str(&format!(
            "misses    {}: {} {} compulsory, {} conflict of {} accesses\n",
            m.kernel, m.level, m.compulsory, m.conflict, m.accesses
        ));
    }
    for l in &s.hot_loops {
        let trips = l.trips.map_or_else(String::new, |[lo, mean, hi]| {
            format!(", {lo:.0}/{mean:.1}/{hi:.0} trips")
        });
        out.push_str(&format!(
            "hot loop  {} ({}): {:.1} % of the run{trips}\n",
            l.name,
            l.source,
            l.share * 100.0
        ));
    }
    if !s.mix.is_empty() {
        let shares: Vec<String> = s
            .mix
            .iter()
            .map(|(t, share)| format!("{t} {:.0} %", share * 100.0))
            .collect();
        out.push_str(&format!("mix       {}\n", shares.join(", ")));
    }
    for f in &s.failures {
        out.push_str(&format!("failed    {f}\n"));
    }
    out.push_str(&format!("\nreport    {}\n", s.report));
    out
}
