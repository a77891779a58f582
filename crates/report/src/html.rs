//! One self-contained HTML report (`report --html`, `demo`): inline CSS, a few lines of inline
//! script, inline SVG, nothing fetched from the network. Each section appears when it is given
//! data: the machine, the probe's curves with their knees, the roofline of each kernel, the
//! miss table per reference, the loop-call-context tree (collapsible, hot regions marked), the
//! per-rank imbalance of merged profiles, and the instruction-mix charts. Every figure carries
//! the command that reproduces it and the inputs it came from.
//!
//! The pictures are the same SVG documents `probe --plot` and `roofline --plot` write
//! ([`probe_plots`], [`render_roofline_svg`]); this module only places them.

use std::fmt::Write;

use loopscope_analytic::{Misses, MissesReport};
use loopscope_machine::Machine;
use loopscope_probe::ProbeReport;
use loopscope_profile::{MixReport, ProfileReport, RankMerge, TreeNode};
use loopscope_roofline::Roofline;

use crate::PlotError;
use crate::machine::render_machine;
use crate::misses::render_misses;
use crate::mix::{format_compact, render_mix_summary};
use crate::mix_plot::mix_plots;
use crate::probe::{probe_plots, render_probe};
use crate::profile::{NodeFilter, render_profile_header, source_text};
use crate::ranks::render_ranks;
use crate::roofline::{RooflineAxis, render_roofline_svg};
use crate::roofline_text::{format_seconds, render_roofline_report};
use crate::units::format_bytes;

/// A figure's data, what to call it and the command that reproduces it.
#[derive(Debug)]
pub struct Figure<'a, T> {
    /// The figure's heading.
    pub title: &'a str,
    /// The command line that produces the same data again.
    pub command: &'a str,
    /// The data.
    pub data: &'a T,
}

impl<T> Clone for Figure<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Figure<'_, T> {}

/// What an HTML report shows; empty parts are left out.
#[derive(Debug, Default)]
pub struct HtmlReport<'a> {
    /// The page's title.
    pub title: String,
    /// One line under the title (what ran, where, when).
    pub subtitle: String,
    /// The machine the figures were measured on.
    pub machine: Option<&'a Machine>,
    /// A probe run: its curves and knees.
    pub probe: Option<Figure<'a, ProbeReport>>,
    /// Roofline predictions (and measured runs) of kernels.
    pub rooflines: Vec<Figure<'a, Roofline>>,
    /// Analytic miss counts of kernels.
    pub misses: Vec<Figure<'a, Misses>>,
    /// Loop profiles.
    pub profiles: Vec<Figure<'a, ProfileReport>>,
    /// Several ranks' profiles merged.
    pub ranks: Option<Figure<'a, RankMerge>>,
    /// Instruction mixes.
    pub mixes: Vec<Figure<'a, MixReport>>,
    /// Things the reader should know about the report as a whole.
    pub notes: Vec<String>,
}

/// At most this many tree rows; beyond, the smallest nodes are left out (and counted).
const MAX_TREE_ROWS: usize = 4000;
/// Trees of at most this many nodes are shown fully open; larger ones open their hot nodes.
const OPEN_TREE_ROWS: usize = 60;

/// Text safe inside HTML elements and attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The whole page.
pub fn render_html(report: &HtmlReport<'_>) -> Result<String, PlotError> {
    let mut sections: Vec<(&str, &str, String)> = Vec::new();
    if let Some(machine) = report.machine {
        sections.push(("machine", "Machine", machine_section(machine)));
    }
    if let Some(probe) = &report.probe {
        let unknown = Machine::unknown();
        let machine = report.machine.unwrap_or(&unknown);
        sections.push((
            "probe",
            "Measured caches and bandwidths",
            probe_section(probe, machine)?,
        ));
    }
    if !report.rooflines.is_empty() {
        sections.push(("roofline", "Roofline", roofline_section(&report.rooflines)?));
    }
    if !report.misses.is_empty() {
        sections.push((
            "misses",
            "Cache misses per reference",
            misses_section(&report.misses),
        ));
    }
    if !report.profiles.is_empty() {
        sections.push(("profile", "Loop profile", profile_section(&report.profiles)));
    }
    if let Some(ranks) = &report.ranks {
        sections.push(("ranks", "Ranks", ranks_section(ranks)));
    }
    if !report.mixes.is_empty() {
        sections.push(("mix", "Instruction mix", mix_section(&report.mixes)?));
    }
    sections.push(("inputs", "Reproduce", inputs_section(report)));
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n\
         <p class=\"subtitle\">{}</p>\n<nav>",
        escape_html(&report.title),
        escape_html(&report.title),
        escape_html(&report.subtitle)
    );
    for (id, title, _) in &sections {
        let _ = write!(page, "<a href=\"#{id}\">{}</a>", escape_html(title));
    }
    page.push_str("</nav>\n</header>\n<main>\n");
    for note in &report.notes {
        let _ = writeln!(page, "<p class=\"note\">{}</p>", escape_html(note));
    }
    for (id, title, body) in &sections {
        let _ = write!(
            page,
            "<section id=\"{id}\">\n<h2>{}</h2>\n{body}</section>\n",
            escape_html(title)
        );
    }
    let _ = write!(
        page,
        "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    );
    Ok(page)
}

fn inputs_block(command: &str, text: &str) -> String {
    format!(
        "<details class=\"inputs\"><summary>Inputs and the command that reproduces this</summary>\
         <p><code>{}</code></p><pre>{}</pre></details>\n",
        escape_html(command),
        escape_html(text)
    )
}

fn figure_svg(svg: &str, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>\n",
        escape_html(caption)
    )
}

fn machine_section(machine: &Machine) -> String {
    let caches: Vec<String> = machine
        .caches
        .iter()
        .map(|c| format!("{} {}", c.name(), format_bytes(c.size_bytes)))
        .collect();
    format!(
        "<p>{}: {} cores, {} thread(s) per core; caches {}.</p>\n\
         <details class=\"inputs\"><summary>The whole description</summary><pre>{}</pre>\
         </details>\n",
        escape_html(&machine.model),
        machine.cores,
        machine.threads_per_core,
        escape_html(&caches.join(", ")),
        escape_html(&render_machine(machine))
    )
}

fn probe_section(probe: &Figure<'_, ProbeReport>, machine: &Machine) -> Result<String, PlotError> {
    let mut out = String::new();
    let caches = &probe.data.measured.caches;
    if !caches.is_empty() {
        out.push_str(
            "<table><thead><tr><th>level</th><th>kind</th><th>size</th><th>latency</th>\
             <th>advertised</th><th>confidence</th></tr></thead><tbody>",
        );
        for c in caches {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{:.2} ns ({:.1} cycles)</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{:.2}</td></tr>",
                escape_html(&format!("L{}", c.level)),
                escape_html(c.kind.name()),
                match c.streaming_size_bytes {
                    Some(b) => format!(
                        "{} (streaming {})",
                        format_bytes(c.size_bytes),
                        format_bytes(b)
                    ),
                    None => format_bytes(c.size_bytes),
                },
                c.latency_ns,
                c.latency_cycles,
                c.advertised_size_bytes
                    .map_or_else(|| "-".into(), format_bytes),
                c.confidence
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("<div class=\"plots\">\n");
    for (name, svg) in probe_plots(probe.data, machine)? {
        out.push_str(&figure_svg(&svg, &name));
    }
    out.push_str("</div>\n");
    out.push_str(&inputs_block(
        probe.command,
        &render_probe(probe.data, machine),
    ));
    Ok(out)
}

fn roofline_section(rooflines: &[Figure<'_, Roofline>]) -> Result<String, PlotError> {
    let mut out = String::from(
        "<table><thead><tr><th>kernel</th><th>predicted</th><th>limit</th><th>classic</th>\
         <th>measured</th><th>measured / predicted</th></tr></thead><tbody>",
    );
    for r in rooflines {
        let a = &r.data.analysis;
        let measured = a.measured.as_ref();
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{:.3} GFLOP/s</td><td>{}</td>\
             <td class=\"num\">{:.3} GFLOP/s ({})</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>",
            escape_html(r.title),
            a.prediction.gflops,
            escape_html(&a.prediction.limit.to_string()),
            a.classic.gflops,
            escape_html(&a.classic.limit.map_or("none".to_owned(), |l| l.to_string())),
            measured.map_or_else(
                || "-".into(),
                |m| match m.seconds_per_run {
                    Some(s) => format!("{s:.3e} s per run"),
                    None => format!("{:.3} GFLOP/s", m.gflops),
                }
            ),
            measured.map_or_else(|| "-".into(), |m| format!("{:.2}", m.ratio)),
        );
    }
    out.push_str("</tbody></table>\n<div class=\"plots\">\n");
    for r in rooflines {
        let svg = render_roofline_svg(&r.data.analysis, RooflineAxis::FlopPerByte)?;
        let _ = writeln!(
            out,
            "<div class=\"roofline\"><h3>{}</h3>{}{}</div>",
            escape_html(r.title),
            figure_svg(&svg, r.title),
            inputs_block(r.command, &render_roofline_report(r.data))
        );
    }
    out.push_str("</div>\n");
    Ok(out)
}

fn misses_section(misses: &[Figure<'_, Misses>]) -> String {
    let mut out = String::new();
    for m in misses {
        let _ = writeln!(out, "<h3>{}</h3>", escape_html(m.title));
        match m.data {
            Misses::Counts(counts) => out.push_str(&miss_tables(counts)),
            other => {
                let _ = writeln!(out, "<pre>{}</pre>", escape_html(&render_misses(other)));
            }
        }
        out.push_str(&inputs_block(m.command, &render_misses(m.data)));
    }
    out
}

fn opt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn miss_tables(r: &MissesReport) -> String {
    let mut out = String::from(
        "<table class=\"misses\"><thead><tr><th>level</th><th>size</th><th>ways</th>\
         <th>accesses</th><th>misses</th><th>miss %</th><th>compulsory</th><th>conflict</th>\
         </tr></thead><tbody>",
    );
    for l in &r.levels {
        let rate = match (l.misses, l.accesses) {
            (Some(m), Some(a)) if a > 0 => format!("{:.2}", 100.0 * m as f64 / a as f64),
            _ => "-".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{rate}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape_html(&l.name),
            format_bytes(l.size_bytes),
            l.ways,
            opt_count(l.accesses),
            opt_count(l.misses),
            opt_count(l.compulsory),
            opt_count(l.conflict),
        );
    }
    out.push_str(
        "</tbody></table>\n<table class=\"misses\"><thead><tr><th>reference</th>\
         <th>kind</th><th>where</th><th>level</th><th>accesses</th><th>misses</th><th>miss %</th>\
         <th>compulsory</th><th>conflict</th></tr></thead><tbody>",
    );
    for x in &r.references {
        let rate = if x.accesses > 0 {
            format!("{:.2}", 100.0 * x.misses as f64 / x.accesses as f64)
        } else {
            "-".into()
        };
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{rate}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape_html(&x.label.text),
            x.label.kind,
            escape_html(&x.label.place()),
            escape_html(&x.level),
            x.accesses,
            x.misses,
            x.compulsory,
            x.conflict,
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

fn profile_section(profiles: &[Figure<'_, ProfileReport>]) -> String {
    let mut out = String::from(
        "<p class=\"controls\"><button type=\"button\" data-tree=\"expand\">expand all</button>\
         <button type=\"button\" data-tree=\"collapse\">collapse all</button>\
         <button type=\"button\" data-tree=\"hot\">hot only</button></p>\n",
    );
    for p in profiles {
        let _ = writeln!(out, "<h3>{}</h3>", escape_html(p.title));
        out.push_str(&render_tree(p.data));
        out.push_str(&inputs_block(
            p.command,
            &render_profile_header(p.data, NodeFilter::Hot),
        ));
    }
    out
}

/// The loop-call-context tree as nested `<details>`, hot rows marked.
pub fn render_tree(report: &ProfileReport) -> String {
    let exact = report.backend != "sample";
    let mut out = format!(
        "<div class=\"tree{}\" data-backend=\"{}\"><div class=\"row head\"><span>node</span>\
         <span>self %</span><span>inclusive %</span><span>self</span><span>inclusive</span>",
        if exact { " exact" } else { "" },
        escape_html(report.backend)
    );
    if exact {
        out.push_str("<span>entries</span><span>trips min / mean / max</span>");
    }
    out.push_str("<span>source</span></div>\n");
    let mut shown = 0usize;
    let floor = min_share_shown(&report.tree);
    let rows = Rows {
        exact,
        floor,
        open_all: count_nodes(&report.tree) <= OPEN_TREE_ROWS,
    };
    tree_rows(&report.tree, 0, &rows, &mut shown, &mut out);
    out.push_str("</div>\n");
    let _ = writeln!(
        out,
        "<p class=\"legend\"><span class=\"hot-mark\"></span> hot: inclusive share at least \
         {:.2} %{}</p>",
        report.hot_threshold * 100.0,
        if floor > 0.0 {
            format!(
                "; nodes below {:.3} % inclusive are left out of this page",
                floor * 100.0
            )
        } else {
            String::new()
        }
    );
    out
}

/// The smallest inclusive share shown so that at most [`MAX_TREE_ROWS`] rows are drawn.
fn min_share_shown(root: &TreeNode) -> f64 {
    let mut shares = Vec::new();
    fn walk(n: &TreeNode, shares: &mut Vec<f64>) {
        shares.push(n.inclusive_share);
        n.children.iter().for_each(|c| walk(c, shares));
    }
    walk(root, &mut shares);
    if shares.len() <= MAX_TREE_ROWS {
        return 0.0;
    }
    shares.sort_by(|a, b| b.total_cmp(a));
    shares[MAX_TREE_ROWS - 1]
}

/// How the tree's rows are drawn.
struct Rows {
    exact: bool,
    /// Nodes below this inclusive share are left out.
    floor: f64,
    /// Every node open, not only the hot ones (small trees).
    open_all: bool,
}

fn count_nodes(n: &TreeNode) -> usize {
    1 + n.children.iter().map(count_nodes).sum::<usize>()
}

fn tree_rows(node: &TreeNode, depth: usize, rows: &Rows, shown: &mut usize, out: &mut String) {
    if node.inclusive_share < rows.floor || *shown >= MAX_TREE_ROWS {
        return;
    }
    *shown += 1;
    let hot = if node.hot { " hot" } else { "" };
    let row = tree_row(node, depth, rows.exact);
    let children: Vec<&TreeNode> = node
        .children
        .iter()
        .filter(|c| c.inclusive_share >= rows.floor)
        .collect();
    if children.is_empty() {
        let _ = writeln!(
            out,
            "<div class=\"node leaf {}{hot}\"><div class=\"row\">{row}</div></div>",
            node.kind
        );
        return;
    }
    let open = if node.hot || depth == 0 || rows.open_all {
        " open"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "<details class=\"node {}{hot}\"{open}><summary class=\"row\">{row}</summary>",
        node.kind
    );
    for c in children {
        tree_rows(c, depth + 1, rows, shown, out);
    }
    out.push_str("</details>\n");
}

fn tree_row(node: &TreeNode, depth: usize, exact: bool) -> String {
    let tag = match node.kind {
        "loop" => "<b class=\"tag loop\">L</b>",
        "root" => "",
        _ => "<b class=\"tag fn\">F</b>",
    };
    let name = if node.kind == "loop" {
        format!(
            "loop {}{}",
            node.loop_id.unwrap_or(0),
            if node.irreducible {
                " (irreducible)"
            } else {
                ""
            }
        )
    } else {
        node.name.clone()
    };
    let source = source_text(node.file.as_deref(), node.line, &node.inlined).unwrap_or_else(|| {
        node.function
            .clone()
            .map(|f| format!("in {f}"))
            .unwrap_or_default()
    });
    let incl = node.inclusive_share * 100.0;
    let mut row = format!(
        "<span class=\"name\" style=\"padding-left:{:.1}em\">{tag}{}</span>\
         <span class=\"num\">{:.1}</span>\
         <span class=\"num bar\"><i style=\"width:{:.1}%\"></i><span>{:.1}</span></span>\
         <span class=\"num\">{}</span><span class=\"num\">{}</span>",
        depth as f64 * 1.1,
        escape_html(&name),
        node.self_share * 100.0,
        incl.clamp(0.0, 100.0),
        incl,
        escape_html(&format_seconds(node.self_s)),
        escape_html(&format_seconds(node.inclusive_s)),
    );
    if exact {
        let trips = node.trips.map_or_else(String::new, |[lo, mean, hi]| {
            format!("{lo:.0} / {mean:.1} / {hi:.0}")
        });
        let _ = write!(
            row,
            "<span class=\"num\">{}</span><span class=\"num\">{trips}</span>",
            node.entries.map_or_else(String::new, |e| e.to_string())
        );
    }
    let _ = write!(row, "<span class=\"src\">{}</span>", escape_html(&source));
    row
}

fn ranks_section(ranks: &Figure<'_, RankMerge>) -> String {
    let mut out = format!(
        "<p>{} profiles merged: the tree above sums them; below, the hottest loops' inclusive \
         time per rank.</p>\n<pre>{}</pre>\n",
        ranks.data.ranks.len(),
        escape_html(&render_ranks(ranks.data))
    );
    out.push_str(&inputs_block(ranks.command, &ranks.data.ranks.join("\n")));
    out
}

fn mix_section(mixes: &[Figure<'_, MixReport>]) -> Result<String, PlotError> {
    let mut out = String::new();
    for m in mixes {
        let _ = writeln!(out, "<h3>{}</h3>", escape_html(m.title));
        let _ = writeln!(
            out,
            "<p>{} instructions attributed, {}.</p>",
            format_compact(m.data.total_instructions as f64),
            escape_html(&m.data.method)
        );
        out.push_str("<div class=\"plots\">\n");
        for (name, svg) in mix_plots(m.data)? {
            out.push_str(&figure_svg(&svg, &name));
        }
        out.push_str("</div>\n");
        out.push_str(&inputs_block(m.command, &render_mix_summary(m.data)));
    }
    Ok(out)
}

fn inputs_section(report: &HtmlReport<'_>) -> String {
    let mut commands: Vec<(&str, &str)> = Vec::new();
    if let Some(p) = &report.probe {
        commands.push((p.title, p.command));
    }
    commands.extend(report.rooflines.iter().map(|f| (f.title, f.command)));
    commands.extend(report.misses.iter().map(|f| (f.title, f.command)));
    commands.extend(report.profiles.iter().map(|f| (f.title, f.command)));
    if let Some(r) = &report.ranks {
        commands.push((r.title, r.command));
    }
    commands.extend(report.mixes.iter().map(|f| (f.title, f.command)));
    let mut out = String::from(
        "<p>Every figure above, and the command that produces its data again:</p>\n<ul>\n",
    );
    for (title, command) in commands {
        let _ = writeln!(
            out,
            "<li>{}: <code>{}</code></li>",
            escape_html(title),
            escape_html(command)
        );
    }
    out.push_str("</ul>\n");
    out
}

const STYLE: &str = r#"
:root { --hot: #c62828; --line: #ddd; --muted: #666; --bar: #cfe0f3; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #222; background: #fafafa; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 12px 24px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
.subtitle { margin: 0 0 8px; color: var(--muted); }
nav a { margin-right: 14px; color: #1565c0; text-decoration: none; }
main { padding: 8px 24px 40px; max-width: 1280px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 18px;
          margin: 16px 0; }
h2 { font-size: 18px; } h3 { font-size: 15px; margin-top: 18px; }
figure { margin: 8px 0; } figcaption { color: var(--muted); font-size: 12px; }
svg { max-width: 100%; height: auto; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; }
.plots > * { min-width: 0; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f5f5f5; padding: 8px; overflow-x: auto; font-size: 12px; }
details.inputs { margin: 6px 0 14px; } details.inputs > summary { color: #1565c0; cursor: pointer; }
.note { color: #8d6e00; }
.tree { font-size: 13px; border: 1px solid var(--line); overflow-x: auto; }
.tree .row { display: grid; grid-template-columns: minmax(260px, 3fr) 70px 120px 100px 100px 1.4fr;
             gap: 6px; padding: 2px 6px; align-items: center; }
.tree.exact .row { grid-template-columns: minmax(260px, 3fr) 70px 120px 100px 100px 80px 150px 1.4fr; }
.tree .row.head { font-weight: 600; background: #f0f0f0; }
.tree summary { cursor: pointer; list-style: none; }
.tree summary::-webkit-details-marker { display: none; }
.tree details > summary .name::before { content: "\25B8"; display: inline-block; width: 1em; color: var(--muted); }
.tree details[open] > summary .name::before { content: "\25BE"; }
.tree .leaf .name::before { content: ""; display: inline-block; width: 1em; }
.tree .num { text-align: right; font-variant-numeric: tabular-nums; }
.tree .bar { position: relative; }
.tree .bar i { position: absolute; left: 0; top: 2px; bottom: 2px; background: var(--bar); }
.tree .bar span { position: relative; }
.tree .src { color: var(--muted); }
.tree .hot > .row, .tree .hot > summary { border-left: 4px solid var(--hot); }
.tree .node:not(.hot) > .row, .tree .node:not(.hot) > summary { border-left: 4px solid transparent; }
.tree .hot > .row .name, .tree .hot > summary .name { font-weight: 600; }
.tree.hot-only .node:not(.hot) { display: none; }
.tag { display: inline-block; width: 1.3em; text-align: center; border-radius: 3px; margin-right: 4px;
       font-size: 11px; color: #fff; }
.tag.fn { background: #1565c0; } .tag.loop { background: #ef6c00; }
.legend { color: var(--muted); font-size: 12px; }
.hot-mark { display: inline-block; width: 4px; height: 12px; background: var(--hot); vertical-align: middle; }
button { margin-right: 6px; }
"#;

const SCRIPT: &str = r#"
document.querySelectorAll('button[data-tree]').forEach(function (b) {
  b.addEventListener('click', function () {
    var what = b.getAttribute('data-tree');
    document.querySelectorAll('.tree').forEach(function (t) {
      if (what === 'hot') { t.classList.toggle('hot-only'); return; }
      t.querySelectorAll('details').forEach(function (d) { d.open = (what === 'expand'); });
    });
  });
});
document.body.setAttribute('data-ready', '1');
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_profile::{Overhead, TargetExit};

    fn node(
        id: u32,
        kind: &'static str,
        name: &str,
        hot: bool,
        children: Vec<TreeNode>,
    ) -> TreeNode {
        TreeNode {
            kind,
            name: name.into(),
            loop_id: (kind == "loop").then_some(id),
            node_id: id,
            irreducible: false,
            file: (kind == "loop").then(|| "/src/a<b>.c".into()),
            line: (kind == "loop").then_some(28),
            inlined: Vec::new(),
            object: None,
            function: None,
            self_s: 0.5,
            inclusive_s: 1.0,
            self_share: 0.5,
            inclusive_share: if hot { 0.9 } else { 0.001 },
            share_error: None,
            self_cycles: None,
            inclusive_cycles: None,
            self_samples: None,
            entries: Some(3),
            iterations: Some(30),
            trips: (kind == "loop").then_some([5.0, 10.0, 15.0]),
            hot,
            children,
        }
    }

    fn profile() -> ProfileReport {
        let tree = node(
            0,
            "root",
            "all",
            true,
            vec![node(
                1,
                "function",
                "main<T>",
                true,
                vec![
                    node(2, "loop", "loop 2", true, vec![]),
                    node(3, "loop", "loop 3", false, vec![]),
                ],
            )],
        );
        ProfileReport {
            backend: "ptrace",
            command: vec!["./a.out".into()],
            measure: "TSC".into(),
            program: None,
            exit: TargetExit::Exited(0),
            events: 10,
            hot_threshold: 0.01,
            overhead: Overhead {
                native_s: None,
                profiled_s: 1.0,
                time_ratio: None,
                app_ratio: None,
                est_app_overhead: None,
            },
            tree,
            notes: Vec::new(),
            threads: Vec::new(),
        }
    }

    #[test]
    fn the_tree_is_collapsible_with_hot_rows_marked_and_text_escaped() {
        let p = profile();
        let html = render_html(&HtmlReport {
            title: "t & <b>".into(),
            profiles: vec![Figure {
                title: "a.out",
                command: "loopscope record -- ./a.out",
                data: &p,
            }],
            ..HtmlReport::default()
        })
        .unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>t &amp; &lt;b&gt;</title>"));
        assert!(html.contains("main&lt;T&gt;") && !html.contains("main<T>"));
        assert!(
            html.contains("<details class=\"node function hot\" open>"),
            "{html}"
        );
        assert!(html.contains("<div class=\"node leaf loop hot\">"));
        assert!(html.contains("<div class=\"node leaf loop\">"));
        assert!(html.contains("5 / 10.0 / 15"), "trips");
        assert!(html.contains("a&lt;b&gt;.c:28"));
        assert!(html.contains("loopscope record -- ./a.out"));
        assert!(html.contains("<section id=\"profile\">"));
        assert!(
            !html.contains("<section id=\"roofline\">"),
            "empty sections are left out"
        );
    }

    #[test]
    fn an_inlined_loop_header_shows_its_inlined_source() {
        let mut p = profile();
        p.tree.children[0].children[0].inlined = vec![loopscope_binary::Frame {
            function: Some("getchar".into()),
            file: Some("/usr/include/x86_64-linux-gnu/bits/stdio.h".into()),
            line: Some(49),
        }];
        let html = render_html(&HtmlReport {
            profiles: vec![Figure {
                title: "a",
                command: "c",
                data: &p,
            }],
            ..HtmlReport::default()
        })
        .unwrap();
        assert!(
            html.contains("a&lt;b&gt;.c:28 (inlined stdio.h:49)"),
            "{html}"
        );
    }

    #[test]
    fn the_page_fetches_nothing() {
        let p = profile();
        let html = render_html(&HtmlReport {
            profiles: vec![Figure {
                title: "a",
                command: "c",
                data: &p,
            }],
            ..HtmlReport::default()
        })
        .unwrap();
        for needle in ["src=", "href=\"http", "@import", "url(", "<link"] {
            assert!(!html.contains(needle), "{needle}");
        }
    }

    #[test]
    fn huge_trees_keep_their_largest_nodes() {
        let children: Vec<TreeNode> = (0..MAX_TREE_ROWS as u32 + 50)
            .map(|i| {
                let mut n = node(i + 1, "function", "f", false, vec![]);
                n.inclusive_share = 1.0 / f64::from(i + 2);
                n
            })
            .collect();
        let mut p = profile();
        p.tree = node(0, "root", "all", true, children);
        p.tree.inclusive_share = 1.0;
        let tree = render_tree(&p);
        assert_eq!(tree.matches("class=\"node ").count(), MAX_TREE_ROWS);
        assert!(tree.contains("are left out of this page"));
    }
}
