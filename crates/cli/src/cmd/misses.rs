//! `loopscope misses`: compulsory and conflict misses of every reference of a kernel, per cache
//! level, from the analytic model of spec 000 (no simulation), with `--check` against the exact
//! simulator, `--sources` for which references compete for the sets of the conflict misses,
//! `--symbolic` for formulas in one parameter and `--scan` for its conflict spikes.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use loopscope_analytic::program_from_kernel;
use loopscope_cache::{Hierarchy, Inclusion, LevelConfig, Replacement};
use loopscope_kernel::{Kernel, Program as Stream};
use loopscope_report::{Align, format_bytes};
use serde::Serialize;

use crate::cmd::model_level::{LevelOutcome, ModelRequest, model_levels};
use crate::failure::bad_input;
use crate::inputs::cache_levels as cache_levels_from;
use crate::ui::Ui;
use loopscope_kernel::{LoadedKernel, RefLabel};
use loopscope_report::Table;

/// Arguments of `misses`.
#[derive(Debug, Args)]
pub struct MissesArgs {
    /// Kernel file in the kerncraft C subset.
    #[arg(value_name = "KERNEL.c")]
    pub kernel: PathBuf,
    /// Value of a kernel symbol, e.g. `-D N=1000` (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Machine file whose data caches to model (default: this machine, detected).
    #[arg(
        short = 'm',
        long = "machine",
        value_name = "FILE",
        conflicts_with = "cache"
    )]
    pub machine: Option<PathBuf>,
    /// Cache levels, innermost first: `NAME=SIZE:WAYS:LINE`, comma-separated (LRU,
    /// write-allocate: the model's cache).
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
    /// Array base addresses, e.g. `A=0,B=800,C=0x640` (others follow, 64-byte aligned).
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Also run the exact simulator on each level alone and print both, with the difference.
    #[arg(long)]
    pub check: bool,
    /// Print the intermediate integer sets of spec 000 (hit sources, pieces, conflict factors).
    #[arg(long)]
    pub explain: bool,
    /// Also say where the conflict misses come from: for each reference with conflict misses,
    /// which references brought other lines into the same set since the line's last use, and
    /// in how many of its misses (a "conflict sources" table per level; `sources` in JSON).
    #[arg(long)]
    pub sources: bool,
    /// Bound on isl's elementary operations for each reference of a level, building its sets
    /// and again for each count of them (formulas count thousands of times); a level that
    /// needs more is reported as not modelled instead of running for hours.
    #[arg(long, value_name = "N", default_value_t = 200_000_000)]
    pub max_operations: u64,
    /// Seconds each level's sets may take to build before the level is reported as not
    /// modelled.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub time_limit: f64,
    /// Give every count as a formula in these parameters, NAME[=LO..HI][,NAME...] (a
    /// quasi-polynomial fitted from exact counts, with the range where it was verified; in
    /// several parameters, one per chamber of the parameter space). A range LO..HI fits the
    /// formulas to those values and checks every one. The other parameters need -D values.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["check", "sources", "explain"])]
    pub symbolic: Option<String>,
    /// With --symbolic: evaluate the formulas at a point, NAME=VALUE[,NAME=VALUE...] giving
    /// every symbolic parameter (repeatable; prefix differences of two values are the misses of
    /// a range, spec §4.4).
    // Parsed in `misses_symbolic` rather than by clap, so that every error is one line.
    #[arg(long, value_name = "NAME=VALUE,...")]
    pub at: Vec<String>,
    /// Model every value of one parameter, NAME=LO..HI[:STEP] (STEP 1 by default, at most 4096
    /// values; the parameter may size arrays), and report the values where conflict misses
    /// spike. A value is a spike at a level when its conflict misses as a fraction of its
    /// accesses are at least twice the median fraction of the other values within ±8
    /// positions, and at least one percentage point above it: fractions, not counts, so that
    /// misses growing with the size are no spike; a median, so that one spike does not hide
    /// its neighbour.
    // Parsed in `misses_scan` rather than by clap, so that every error is one line.
    #[arg(long, value_name = "NAME=LO..HI[:STEP]")]
    pub scan: Option<String>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The result of `misses`, as printed with `--json`.
#[derive(Debug, Serialize)]
struct Report {
    kernel: String,
    params: std::collections::BTreeMap<String, i64>,
    model: &'static str,
    levels: Vec<LevelReport>,
    references: Vec<RefReport>,
    arrays: Vec<ArrayReport>,
    /// `null` without `--sources`.
    sources: Option<Vec<SourceReport>>,
    check: Option<Check>,
    duration_s: f64,
}

/// Where one reference's conflict misses at one level come from.
#[derive(Debug, Serialize)]
struct SourceReport {
    level: String,
    id: usize,
    #[serde(flatten)]
    label: RefLabel,
    conflict: u64,
    /// Competing references, most misses first. A miss counts under each of them, so their
    /// `misses` overlap.
    evictors: Vec<EvictorReport>,
}

#[derive(Debug, Serialize)]
struct EvictorReport {
    id: usize,
    #[serde(flatten)]
    label: RefLabel,
    /// Loop variables around the reference, outermost first.
    loops: Vec<String>,
    /// Conflict misses of the reference above whose set this one touched (with another line)
    /// between the line's previous access and the miss.
    misses: u64,
}

#[derive(Debug, Serialize)]
struct LevelReport {
    name: String,
    size_bytes: u64,
    line_bytes: u64,
    ways: u64,
    sets: u64,
    /// `null` when the level could not be modelled (see `error`).
    accesses: Option<u64>,
    hits: Option<u64>,
    misses: Option<u64>,
    compulsory: Option<u64>,
    /// Always `null`: under LRU spec 000 counts capacity misses among the conflict ones.
    capacity: Option<u64>,
    conflict: Option<u64>,
    /// Lines brought in (misses × line size).
    fill_bytes: Option<u64>,
    duration_s: f64,
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explain: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
struct RefReport {
    id: usize,
    #[serde(flatten)]
    label: RefLabel,
    level: String,
    accesses: u64,
    hits: u64,
    misses: u64,
    compulsory: u64,
    capacity: Option<u64>,
    conflict: u64,
    /// Per hit-source piece: sources, executions, conflicts (the explanation of the counts).
    pieces: Vec<loopscope_analytic::PieceCounts>,
}

#[derive(Debug, Serialize)]
struct ArrayReport {
    array: String,
    level: String,
    accesses: u64,
    misses: u64,
    compulsory: u64,
    conflict: u64,
}

#[derive(Debug, Serialize)]
struct Check {
    /// True when every modelled count equals the simulator's.
    equal: bool,
    levels: Vec<CheckLevel>,
    references: Vec<CheckRef>,
}

#[derive(Debug, Serialize)]
struct CheckLevel {
    name: String,
    misses: u64,
    compulsory: u64,
    conflict: u64,
    duration_s: f64,
}

#[derive(Debug, Serialize)]
struct CheckRef {
    id: usize,
    level: String,
    model_misses: Option<u64>,
    simulated_misses: u64,
    simulated_compulsory: u64,
    /// Capacity and conflict misses of the simulator together (the model's `conflict`).
    simulated_conflict: u64,
    difference: Option<i64>,
}

/// Runs `misses`.
pub fn run(args: &MissesArgs, ui: &Ui) -> anyhow::Result<()> {
    let start = Instant::now();
    let scan = args
        .scan
        .as_deref()
        .map(|text| crate::cmd::misses_scan::parse_request(args, text))
        .transpose()?;
    if !args.at.is_empty() && args.symbolic.is_none() {
        return Err(bad_input(
            "--at evaluates formulas: it needs --symbolic NAME",
        ));
    }
    let levels = cache_levels_from(args.cache.as_deref(), args.machine.as_deref(), ui)?;
    check_model_caches(&levels)?;
    if let Some(range) = scan {
        return crate::cmd::misses_scan::run(args, &range, &levels, ui);
    }
    if let Some(list) = &args.symbolic {
        let parameters = crate::cmd::model_level::symbolic_parameters(list)
            .map_err(|e| bad_input(format!("--symbolic {e}")))?;
        return match parameters.as_slice() {
            [] => Err(bad_input("--symbolic: name a parameter, e.g. --symbolic N")),
            [one] => crate::cmd::misses_symbolic::run(args, *one, &levels, ui),
            _ => crate::cmd::misses_nested::run(args, &parameters, &levels, ui),
        };
    }
    let loaded = LoadedKernel::load(&args.kernel, &args.define, args.base.as_deref(), ui)?;
    // Checked here so a kernel the model cannot take is bad input (exit 2), not a level error.
    program_from_kernel(&loaded.kernel, &loaded.params, &loaded.layout)
        .map_err(|e| bad_input(format!("{}: {e}", loaded.origin)))?;
    let request = ModelRequest {
        explain: args.explain,
        sources: args.sources,
        ..model_request(args, &args.define)
    };
    let modelled = model_levels(&request, &levels);
    let labels = loaded.kernel.reference_labels();
    let mut report = build_report(&loaded, &levels, &modelled, &labels);
    if args.sources {
        report.sources = Some(sources(&loaded.kernel, &levels, &modelled, &labels));
    }
    if args.check {
        report.check = Some(check(&loaded, &levels, &report)?);
    }
    report.duration_s = start.elapsed().as_secs_f64();
    for l in &report.levels {
        if let Some(e) = &l.error {
            let hint = if e.contains("simulate") {
                ""
            } else {
                "; `loopscope simulate` counts it exactly"
            };
            ui.warn(format!(
                "{}: {} not modelled: {e}{hint}",
                loaded.origin, l.name
            ));
        }
    }
    if report.levels.iter().all(|l| l.error.is_some()) && report.check.is_none() {
        anyhow::bail!("{}: no cache level could be modelled", loaded.origin);
    }
    if args.json {
        crate::cmd::print_json(&report)
    } else {
        crate::cmd::print_text(&render(&report, args))
    }
}

/// The model's request for `args` with the kernel's values `define`: counts only (no
/// explanation, sources or formulas), which the caller adds.
pub(crate) fn model_request<'a>(
    args: &'a MissesArgs,
    define: &'a [(String, i64)],
) -> ModelRequest<'a> {
    ModelRequest::counts(
        &args.kernel,
        define,
        args.base.as_deref(),
        args.max_operations,
        args.time_limit,
    )
}

/// The model is spec 000's cache: LRU, write-allocate. Anything else would be silently wrong.
fn check_model_caches(levels: &[LevelConfig]) -> anyhow::Result<()> {
    for l in levels {
        if l.replacement != Replacement::Lru || !l.write_allocate {
            return Err(bad_input(format!(
                "level {}: the analytic model covers LRU write-allocate caches only (use `loopscope simulate` for {}{})",
                l.name,
                l.replacement.name(),
                if l.write_allocate {
                    ""
                } else {
                    ", no-write-allocate"
                }
            )));
        }
    }
    Ok(())
}

/// A model count as a `u64` (negative counts, which the model never gives, as 0).
pub(crate) fn to_u64(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

fn build_report(
    loaded: &LoadedKernel,
    levels: &[LevelConfig],
    modelled: &[LevelOutcome],
    labels: &[RefLabel],
) -> Report {
    let mut out_levels = Vec::new();
    let mut references = Vec::new();
    let mut arrays: Vec<ArrayReport> = Vec::new();
    for (l, m) in levels.iter().zip(modelled) {
        let mut level = LevelReport {
            name: l.name.clone(),
            size_bytes: l.size_bytes,
            line_bytes: l.line_bytes,
            ways: l.ways,
            sets: l.sets(),
            accesses: None,
            hits: None,
            misses: None,
            compulsory: None,
            capacity: None,
            conflict: None,
            fill_bytes: None,
            duration_s: m.duration_s,
            error: None,
            explain: m.explain.clone(),
        };
        match &m.refs {
            Err(e) => level.error = Some(e.clone()),
            Ok(refs) => {
                let (mut acc, mut comp, mut conf) = (0u64, 0u64, 0u64);
                for (id, (r, label)) in refs.iter().zip(labels).enumerate() {
                    let (a, c, k) = (to_u64(r.accesses), to_u64(r.compulsory), to_u64(r.conflict));
                    acc += a;
                    comp += c;
                    conf += k;
                    references.push(RefReport {
                        id,
                        label: label.clone(),
                        level: l.name.clone(),
                        accesses: a,
                        hits: a.saturating_sub(c + k),
                        misses: c + k,
                        compulsory: c,
                        capacity: None,
                        conflict: k,
                        pieces: r.pieces.clone(),
                    });
                    add_to_array(&mut arrays, &r.array, &l.name, a, c, k);
                }
                level.accesses = Some(acc);
                level.hits = Some(acc.saturating_sub(comp + conf));
                level.misses = Some(comp + conf);
                level.compulsory = Some(comp);
                level.conflict = Some(conf);
                level.fill_bytes = Some((comp + conf).saturating_mul(l.line_bytes));
            }
        }
        out_levels.push(level);
    }
    Report {
        kernel: loaded.origin.clone(),
        params: loaded.param_map(),
        model: "spec 000 (LRU, write-allocate); each level modelled alone, seeing every access",
        levels: out_levels,
        references,
        arrays,
        sources: None,
        check: None,
        duration_s: 0.0,
    }
}

/// The conflict sources of every modelled level, references with conflict misses only.
fn sources(
    kernel: &Kernel,
    levels: &[LevelConfig],
    modelled: &[LevelOutcome],
    labels: &[RefLabel],
) -> Vec<SourceReport> {
    let mut out = Vec::new();
    for (l, m) in levels.iter().zip(modelled) {
        let Ok(refs) = &m.refs else { continue };
        for (id, r) in refs.iter().enumerate() {
            let (Some(label), Some(sources)) = (labels.get(id), &r.sources) else {
                continue;
            };
            if r.conflict <= 0 {
                continue;
            }
            let mut evictors: Vec<EvictorReport> = sources
                .iter()
                .filter_map(|s| {
                    Some(EvictorReport {
                        id: s.index,
                        label: labels.get(s.index)?.clone(),
                        loops: enclosing_loops(kernel, s.index),
                        misses: to_u64(s.misses),
                    })
                })
                .collect();
            // Most misses first; position order among equals (the sort is stable).
            evictors.sort_by_key(|e| std::cmp::Reverse(e.misses));
            out.push(SourceReport {
                level: l.name.clone(),
                id,
                label: label.clone(),
                conflict: to_u64(r.conflict),
                evictors,
            });
        }
    }
    out
}

/// The loop variables around the kernel's `index`-th reference, outermost first.
fn enclosing_loops(kernel: &Kernel, index: usize) -> Vec<String> {
    kernel
        .references()
        .nth(index)
        .and_then(|(s, _)| kernel.statements.get(s))
        .map(|s| {
            s.loops
                .iter()
                .filter_map(|&l| kernel.loops.get(l).map(|l| l.var.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn add_to_array(
    arrays: &mut Vec<ArrayReport>,
    array: &str,
    level: &str,
    accesses: u64,
    compulsory: u64,
    conflict: u64,
) {
    let i = match arrays
        .iter()
        .position(|a| a.array == array && a.level == level)
    {
        Some(i) => i,
        None => {
            arrays.push(ArrayReport {
                array: array.to_owned(),
                level: level.to_owned(),
                accesses: 0,
                misses: 0,
                compulsory: 0,
                conflict: 0,
            });
            arrays.len() - 1
        }
    };
    let a = &mut arrays[i];
    a.accesses += accesses;
    a.compulsory += compulsory;
    a.conflict += conflict;
    a.misses += compulsory + conflict;
}

/// Simulates each level alone (the model's assumption), with the 3C split, and compares.
fn check(loaded: &LoadedKernel, levels: &[LevelConfig], report: &Report) -> anyhow::Result<Check> {
    let stream = Stream::new(&loaded.kernel, &loaded.params, &loaded.layout)?;
    let refs = loaded.kernel.references().count();
    // One thread per level, as the model runs: the levels are independent simulations.
    let simulated: Vec<anyhow::Result<(Hierarchy, f64)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = levels
            .iter()
            .map(|l| scope.spawn(|| simulate_alone(&stream, l, refs)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the simulator thread panicked")))
            })
            .collect()
    });
    let mut out = Check {
        equal: true,
        levels: Vec::new(),
        references: Vec::new(),
    };
    for ((l, modelled), sim) in levels.iter().zip(&report.levels).zip(simulated) {
        let (sim, duration_s) = sim?;
        let s = &sim.stats()[0];
        out.levels.push(CheckLevel {
            name: l.name.clone(),
            misses: s.misses,
            compulsory: s.compulsory,
            conflict: s.capacity + s.conflict,
            duration_s,
        });
        for id in 0..refs {
            let r = sim.ref_stats(id, 0);
            let model = report
                .references
                .iter()
                .find(|m| m.id == id && m.level == l.name);
            if modelled.error.is_none() {
                out.equal &= model.is_some_and(|m| {
                    m.compulsory == r.compulsory && m.conflict == r.capacity + r.conflict
                });
            }
            out.references.push(CheckRef {
                id,
                level: l.name.clone(),
                model_misses: model.map(|m| m.misses),
                simulated_misses: r.misses,
                simulated_compulsory: r.compulsory,
                simulated_conflict: r.capacity + r.conflict,
                difference: model.map(|m| m.misses as i64 - r.misses as i64),
            });
        }
    }
    Ok(out)
}

/// The kernel's whole stream through level `l` alone, and the seconds it took.
fn simulate_alone(
    stream: &Stream,
    l: &LevelConfig,
    refs: usize,
) -> anyhow::Result<(Hierarchy, f64)> {
    let start = Instant::now();
    let mut alone = l.clone();
    alone.inclusion = Inclusion::NonInclusive;
    let mut sim = Hierarchy::new(&[alone], refs, true, 0);
    let mut accesses = stream.accesses();
    loop {
        let batch = accesses.next_batch();
        if batch.is_empty() {
            break;
        }
        sim.access_kernel_batch(batch);
    }
    if let Some(e) = accesses.error() {
        return Err(e.clone().into());
    }
    Ok((sim, start.elapsed().as_secs_f64()))
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn render(r: &Report, args: &MissesArgs) -> String {
    let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = format!(
        "kernel    {}  ({})\nmodel     {}\ntime      {:.3} s\n\n",
        r.kernel,
        params.join(", "),
        r.model,
        r.duration_s
    );
    let mut header = vec![
        "level",
        "size",
        "ways",
        "line",
        "accesses",
        "hits",
        "misses",
        "miss %",
        "compulsory",
        "conflict",
        "model time",
    ];
    if args.check {
        header.extend(["sim misses", "sim time", "diff"]);
    }
    let mut table = right_aligned(&header, 1);
    for (k, l) in r.levels.iter().enumerate() {
        let mut row = vec![
            l.name.clone(),
            format_bytes(l.size_bytes),
            l.ways.to_string(),
            format_bytes(l.line_bytes),
            opt(l.accesses),
            opt(l.hits),
            opt(l.misses),
            l.misses
                .zip(l.accesses)
                .map_or_else(|| "-".to_owned(), |(m, a)| percent(m, a)),
            opt(l.compulsory),
            opt(l.conflict),
            format!("{:.3} s", l.duration_s),
        ];
        if let Some(c) = r.check.as_ref().and_then(|c| c.levels.get(k)) {
            row.extend([
                c.misses.to_string(),
                format!("{:.3} s", c.duration_s),
                l.misses
                    .map_or_else(|| "-".to_owned(), |m| signed(m as i64 - c.misses as i64)),
            ]);
        }
        table.row(row);
    }
    out.push_str(&table.render());
    out.push('\n');
    out.push_str(&render_refs(r));
    if let Some(sources) = &r.sources {
        out.push_str(&render_sources(r, sources));
    }
    if let Some(c) = &r.check {
        let unmodelled: Vec<&str> = r
            .levels
            .iter()
            .filter(|l| l.error.is_some())
            .map(|l| l.name.as_str())
            .collect();
        let scope = if unmodelled.is_empty() {
            String::new()
        } else {
            format!(" ({} not modelled)", unmodelled.join(", "))
        };
        out.push_str(&format!(
            "\ncheck     {}{scope}\n",
            if c.equal {
                "the model equals the exact simulator (each level alone) on every reference"
            } else {
                "the model differs from the simulator (see diff)"
            }
        ));
    }
    for l in r.levels.iter().filter(|l| l.explain.is_some()) {
        out.push_str(&format!(
            "\n{} sets (spec 000):\n{}",
            l.name,
            l.explain.as_deref().unwrap_or_default()
        ));
    }
    out
}

fn signed(v: i64) -> String {
    if v > 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

/// One table per level with conflict misses: each reference's misses against the references
/// that competed for their sets.
fn render_sources(r: &Report, sources: &[SourceReport]) -> String {
    let mut out = String::new();
    for level in &r.levels {
        let rows: Vec<&SourceReport> = sources.iter().filter(|s| s.level == level.name).collect();
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n{} conflict sources: a miss counts under every reference that brought another line \
             into its set\nsince the line's last use, so one miss can appear on several rows\n",
            level.name
        ));
        let mut table = right_aligned(
            &[
                "reference",
                "where",
                "conflict",
                "competing",
                "kind",
                "where",
                "in loop",
                "misses",
                "% of conflict",
            ],
            7,
        )
        .align(2, Align::Right);
        for s in rows {
            for (k, e) in s.evictors.iter().enumerate() {
                let first = k == 0;
                table.row([
                    if first {
                        s.label.text.clone()
                    } else {
                        String::new()
                    },
                    if first {
                        s.label.place()
                    } else {
                        String::new()
                    },
                    if first {
                        s.conflict.to_string()
                    } else {
                        String::new()
                    },
                    e.label.text.clone(),
                    e.label.kind.to_owned(),
                    e.label.place(),
                    e.loops.join(" > "),
                    e.misses.to_string(),
                    percent(e.misses, s.conflict),
                ]);
            }
        }
        out.push_str(&table.render());
    }
    out
}

fn render_refs(r: &Report) -> String {
    let mut header = vec![
        "reference",
        "kind",
        "where",
        "level",
        "accesses",
        "hits",
        "misses",
        "miss %",
        "compulsory",
        "conflict",
    ];
    if r.check.is_some() {
        header.extend(["sim comp", "sim conf", "diff"]);
    }
    let mut table = right_aligned(&header, 4);
    for x in &r.references {
        let mut row = vec![
            x.label.text.clone(),
            x.label.kind.to_owned(),
            x.label.place(),
            x.level.clone(),
            x.accesses.to_string(),
            x.hits.to_string(),
            x.misses.to_string(),
            percent(x.misses, x.accesses),
            x.compulsory.to_string(),
            x.conflict.to_string(),
        ];
        if let Some(c) = r.check.as_ref().and_then(|c| {
            c.references
                .iter()
                .find(|c| c.id == x.id && c.level == x.level)
        }) {
            row.extend([
                c.simulated_compulsory.to_string(),
                c.simulated_conflict.to_string(),
                c.difference.map_or_else(|| "-".to_owned(), signed),
            ]);
        }
        table.row(row);
    }
    table.render()
}

/// A table whose columns from `first_numeric` on are flush right.
pub(crate) fn right_aligned(header: &[&str], first_numeric: usize) -> Table {
    let mut table = Table::new(header.iter().copied());
    for c in first_numeric..header.len() {
        table = table.align(c, Align::Right);
    }
    table
}

pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", 100.0 * part as f64 / whole as f64)
    }
}
