//! `loopscope simulate`: exact cache-hierarchy simulation of a kernel or an address trace.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use loopscope_cache::{
    CacheError, Hierarchy, LevelConfig, MissCurve, RefStats, levels_from_machine, parse_cache_spec,
    parse_trace_line,
};
use loopscope_kernel::{LoadedKernel, Program, RefLabel};
use loopscope_report::{Align, Table, format_bytes};
use serde::Serialize;

use crate::failure::bad_input;
use crate::ui::Ui;

/// Arguments of `simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Kernel file in the kerncraft C subset.
    #[arg(
        value_name = "KERNEL.c",
        required_unless_present = "trace",
        conflicts_with = "trace"
    )]
    pub kernel: Option<PathBuf>,
    /// Value of a kernel symbol, e.g. `-D N=1000` (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = loopscope_kernel::parse_definition)]
    pub define: Vec<(String, i64)>,
    /// Machine file whose data caches to simulate (default: this machine, detected).
    #[arg(
        short = 'm',
        long = "machine",
        value_name = "FILE",
        conflicts_with = "cache"
    )]
    pub machine: Option<PathBuf>,
    /// Cache levels, innermost first: `NAME=SIZE:WAYS:LINE[:OPTION...]`, comma-separated.
    /// Options: lru fifo plru random, wb wt, wa nwa, nincl incl excl.
    #[arg(long, value_name = "SPEC")]
    pub cache: Option<String>,
    /// Array base addresses, e.g. `A=0,B=800,C=0x640` (others follow, 64-byte aligned).
    #[arg(long, value_name = "NAME=ADDR,...")]
    pub base: Option<String>,
    /// Also print counters per reference and level.
    #[arg(long)]
    pub per_ref: bool,
    /// Split misses into compulsory, capacity and conflict (slower: O(log n) per access).
    #[arg(long = "3c")]
    pub three_c: bool,
    /// Also compute misses of a fully associative LRU cache for every size (stack distances).
    #[arg(long)]
    pub curve: bool,
    /// Write dirty lines back at the end, so write-backs count all stored data.
    #[arg(long)]
    pub flush: bool,
    /// Seed of random replacement.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Simulate an address trace instead of a kernel: one `R|W HEX-ADDRESS SIZE` per line.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The result of `simulate`, as printed with `--json`.
#[derive(Debug, Serialize)]
pub struct Simulation {
    kernel: Option<String>,
    trace: Option<String>,
    params: BTreeMap<String, i64>,
    levels: Vec<LevelReport>,
    memory: MemoryReport,
    references: Vec<RefReport>,
    accesses: u64,
    flops: u64,
    curve: Option<Vec<CurvePoint>>,
    duration_s: f64,
    accesses_per_s: f64,
}

#[derive(Debug, Serialize)]
struct LevelReport {
    name: String,
    size_bytes: u64,
    line_bytes: u64,
    ways: u64,
    sets: u64,
    replacement: &'static str,
    write_back: bool,
    write_allocate: bool,
    inclusion: &'static str,
    accesses: u64,
    hits: u64,
    misses: u64,
    compulsory: Option<u64>,
    capacity: Option<u64>,
    conflict: Option<u64>,
    evictions: u64,
    writebacks: u64,
    writebacks_received: u64,
    back_invalidations: u64,
    fill_bytes: u64,
    write_bytes: u64,
}

#[derive(Debug, Serialize)]
struct MemoryReport {
    read_bytes: u64,
    write_bytes: u64,
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
    compulsory: Option<u64>,
    capacity: Option<u64>,
    conflict: Option<u64>,
}

#[derive(Debug, Serialize)]
struct CurvePoint {
    size_bytes: u64,
    misses: u64,
}

/// Runs `simulate`.
pub fn run(args: &SimulateArgs, ui: &Ui) -> anyhow::Result<()> {
    let levels = cache_levels(args, ui)?;
    let mut curve = args.curve.then(MissCurve::new);
    let start = Instant::now();
    let (sim, labels, kernel, params, flops) = match (&args.kernel, &args.trace) {
        (Some(path), _) => simulate_kernel(args, path, &levels, curve.as_mut(), ui)?,
        (None, Some(path)) => simulate_trace(args, path, &levels, curve.as_mut(), ui)?,
        (None, None) => return Err(bad_input("give a kernel file or --trace FILE")),
    };
    let duration_s = start.elapsed().as_secs_f64();
    let report = build_report(
        &sim,
        &labels,
        kernel,
        params,
        flops,
        curve.as_ref(),
        duration_s,
        args,
    );
    if args.json {
        crate::cmd::print_json(&report)
    } else {
        crate::cmd::print_text(&render(&report, args))
    }
}

fn cache_levels(args: &SimulateArgs, ui: &Ui) -> anyhow::Result<Vec<LevelConfig>> {
    cache_levels_from(args.cache.as_deref(), args.machine.as_deref(), ui)
}

/// The levels of `--cache SPEC`, else of the machine file, else of this machine.
pub(crate) fn cache_levels_from(
    spec: Option<&str>,
    machine: Option<&Path>,
    ui: &Ui,
) -> anyhow::Result<Vec<LevelConfig>> {
    if let Some(spec) = spec {
        return Ok(parse_cache_spec(spec)?);
    }
    let described = crate::cmd::machine::load_machine(machine, ui)?;
    let levels = levels_from_machine(&described).with_context(|| match machine {
        Some(p) => format!("{}: cannot model its caches", p.display()),
        None => "cannot model this machine's caches (give --cache)".to_owned(),
    })?;
    Ok(levels)
}

type Outcome = (
    Hierarchy,
    Vec<RefLabel>,
    Option<String>,
    BTreeMap<String, i64>,
    u64,
);

fn simulate_kernel(
    args: &SimulateArgs,
    path: &Path,
    levels: &[LevelConfig],
    mut curve: Option<&mut MissCurve>,
    ui: &Ui,
) -> anyhow::Result<Outcome> {
    let loaded = LoadedKernel::load(path, &args.define, args.base.as_deref(), ui)?;
    let (kernel, params, layout) = (&loaded.kernel, &loaded.params, &loaded.layout);
    let program = Program::new(kernel, params, layout)?;
    let labels = kernel.reference_labels();
    let mut sim = Hierarchy::new(levels, labels.len(), args.three_c, args.seed);
    let total = program.total_accesses(kernel);
    let bar = ui.progress_bar(total, "simulating");
    let line_shift = levels[0].line_bytes.trailing_zeros();
    let mut stream = program.accesses();
    // The bar is redrawn every few million accesses, not per batch.
    const BAR_STEP: u64 = 1 << 22;
    let mut since_bar = 0u64;
    loop {
        let batch = stream.next_batch();
        if batch.is_empty() {
            break;
        }
        sim.access_kernel_batch(batch);
        if let Some(c) = curve.as_deref_mut() {
            for a in batch {
                c.access(a.addr >> line_shift);
            }
        }
        since_bar += batch.len() as u64;
        if since_bar >= BAR_STEP {
            bar.inc(since_bar);
            since_bar = 0;
        }
    }
    bar.inc(since_bar);
    bar.finish_and_clear();
    if let Some(e) = stream.error() {
        return Err(e.clone().into());
    }
    if args.flush {
        sim.flush();
    }
    let flops = kernel
        .statements
        .iter()
        .zip(program.executions())
        .map(|(s, n)| s.flops.total().saturating_mul(*n))
        .fold(0u64, u64::saturating_add);
    Ok((
        sim,
        labels,
        Some(loaded.origin.clone()),
        loaded.param_map(),
        flops,
    ))
}

fn simulate_trace(
    args: &SimulateArgs,
    path: &Path,
    levels: &[LevelConfig],
    mut curve: Option<&mut MissCurve>,
    ui: &Ui,
) -> anyhow::Result<Outcome> {
    let io = |source| CacheError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut sim = Hierarchy::new(levels, 2, args.three_c, args.seed);
    let bar = ui.progress_bar(total, "simulating");
    let line_shift = levels[0].line_bytes.trailing_zeros();
    let mut line = String::new();
    let mut number = 0u64;
    let mut read_bytes = 0u64;
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(io)?;
        if n == 0 {
            break;
        }
        number += 1;
        read_bytes += n as u64;
        if number % (1 << 16) == 0 {
            bar.set_position(read_bytes.min(total));
        }
        if let Some(a) = parse_trace_line(&line, path, number)? {
            sim.access(a.addr, a.size_bytes, a.write, u32::from(a.write));
            if let Some(c) = curve.as_deref_mut() {
                c.access(a.addr >> line_shift);
            }
        }
    }
    bar.finish_and_clear();
    if args.flush {
        sim.flush();
    }
    let labels = ["read", "write"]
        .into_iter()
        .map(|kind| RefLabel {
            array: None,
            subscripts: Vec::new(),
            text: format!("{kind}s"),
            kind,
            statement: None,
            line: None,
            column: None,
        })
        .collect();
    Ok((sim, labels, None, BTreeMap::new(), 0))
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    sim: &Hierarchy,
    labels: &[RefLabel],
    kernel: Option<String>,
    params: BTreeMap<String, i64>,
    flops: u64,
    curve: Option<&MissCurve>,
    duration_s: f64,
    args: &SimulateArgs,
) -> Simulation {
    let split = |v: u64| args.three_c.then_some(v);
    let levels: Vec<LevelReport> = sim
        .configs()
        .iter()
        .zip(sim.stats())
        .map(|(c, s)| LevelReport {
            name: c.name.clone(),
            size_bytes: c.size_bytes,
            line_bytes: c.line_bytes,
            ways: c.ways,
            sets: c.sets(),
            replacement: c.replacement.name(),
            write_back: c.write_back,
            write_allocate: c.write_allocate,
            inclusion: c.inclusion.name(),
            accesses: s.accesses,
            hits: s.hits,
            misses: s.misses,
            compulsory: split(s.compulsory),
            capacity: split(s.capacity),
            conflict: split(s.conflict),
            evictions: s.evictions,
            writebacks: s.writebacks,
            writebacks_received: s.writebacks_received,
            back_invalidations: s.back_invalidations,
            fill_bytes: s.fill_bytes,
            write_bytes: s.write_bytes,
        })
        .collect();
    let mut references = Vec::new();
    for (id, label) in labels.iter().enumerate() {
        for (k, c) in sim.configs().iter().enumerate() {
            let s: RefStats = sim.ref_stats(id, k);
            references.push(RefReport {
                id,
                label: label.clone(),
                level: c.name.clone(),
                accesses: s.accesses,
                hits: s.hits,
                misses: s.misses,
                compulsory: split(s.compulsory),
                capacity: split(s.capacity),
                conflict: split(s.conflict),
            });
        }
    }
    let accesses = sim.stats().first().map_or(0, |s| s.accesses);
    let line_bytes = sim.configs()[0].line_bytes;
    let curve = curve.map(|c| curve_points(c, line_bytes));
    Simulation {
        kernel,
        trace: args.trace.as_ref().map(|p| p.display().to_string()),
        params,
        levels,
        memory: MemoryReport {
            read_bytes: sim.memory().read_bytes,
            write_bytes: sim.memory().write_bytes,
        },
        references,
        accesses,
        flops,
        curve,
        duration_s,
        accesses_per_s: if duration_s > 0.0 {
            accesses as f64 / duration_s
        } else {
            0.0
        },
    }
}

/// Misses at every power-of-two size from one line up to the size that holds every line.
fn curve_points(curve: &MissCurve, line_bytes: u64) -> Vec<CurvePoint> {
    let mut points = Vec::new();
    let mut lines = 1u64;
    loop {
        points.push(CurvePoint {
            size_bytes: lines.saturating_mul(line_bytes),
            misses: curve.misses(lines),
        });
        if lines >= curve.distinct_lines() || lines >= 1 << 40 {
            break;
        }
        lines *= 2;
    }
    points
}

pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", 100.0 * part as f64 / whole as f64)
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn render(r: &Simulation, args: &SimulateArgs) -> String {
    let mut out = String::new();
    let source = r.kernel.as_deref().or(r.trace.as_deref()).unwrap_or("-");
    let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.push_str(&format!(
        "source    {source}{}\n",
        if params.is_empty() {
            String::new()
        } else {
            format!("  ({})", params.join(", "))
        }
    ));
    out.push_str(&format!(
        "accesses  {} in {:.3} s ({:.1} M accesses/s)\n",
        r.accesses,
        r.duration_s,
        r.accesses_per_s / 1e6
    ));
    if r.kernel.is_some() {
        out.push_str(&format!("flops     {}\n", r.flops));
    }
    out.push_str(&format!(
        "memory    read {}, written {}\n\n",
        format_bytes(r.memory.read_bytes),
        format_bytes(r.memory.write_bytes)
    ));
    let mut header = vec![
        "level", "size", "ways", "line", "policy", "accesses", "hits", "misses", "miss %",
    ];
    if args.three_c {
        header.extend(["compulsory", "capacity", "conflict"]);
    }
    header.extend(["evictions", "writebacks"]);
    let mut table = right_aligned(&header, 1);
    for l in &r.levels {
        let policy = format!(
            "{},{},{}{}",
            l.replacement,
            if l.write_back { "wb" } else { "wt" },
            if l.write_allocate { "wa" } else { "nwa" },
            match l.inclusion {
                "inclusive" => ",incl",
                "exclusive" => ",excl",
                _ => "",
            }
        );
        let mut row = vec![
            l.name.clone(),
            format_bytes(l.size_bytes),
            l.ways.to_string(),
            format_bytes(l.line_bytes),
            policy,
            l.accesses.to_string(),
            l.hits.to_string(),
            l.misses.to_string(),
            percent(l.misses, l.accesses),
        ];
        if args.three_c {
            row.extend([opt(l.compulsory), opt(l.capacity), opt(l.conflict)]);
        }
        row.extend([l.evictions.to_string(), l.writebacks.to_string()]);
        table.row(row);
    }
    out.push_str(&table.render());
    if args.per_ref {
        out.push('\n');
        out.push_str(&render_refs(r, args));
    }
    if let Some(curve) = &r.curve {
        out.push_str("\nfully associative LRU (stack distances)\n");
        let mut t = right_aligned(&["size", "misses", "miss %"], 0);
        for p in curve {
            t.row([
                format_bytes(p.size_bytes),
                p.misses.to_string(),
                percent(p.misses, r.accesses),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

fn render_refs(r: &Simulation, args: &SimulateArgs) -> String {
    let mut header = vec![
        "reference",
        "kind",
        "where",
        "level",
        "accesses",
        "hits",
        "misses",
        "miss %",
    ];
    if args.three_c {
        header.extend(["compulsory", "capacity", "conflict"]);
    }
    let mut table = right_aligned(&header, 4);
    for x in &r.references {
        let place = x.label.place();
        let mut row = vec![
            x.label.text.clone(),
            x.label.kind.to_owned(),
            place,
            x.level.clone(),
            x.accesses.to_string(),
            x.hits.to_string(),
            x.misses.to_string(),
            percent(x.misses, x.accesses),
        ];
        if args.three_c {
            row.extend([opt(x.compulsory), opt(x.capacity), opt(x.conflict)]);
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
