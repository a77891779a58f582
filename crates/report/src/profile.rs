//! Views of a loop profile (`loopscope report`): the loop-call-context tree as text (spec 004
//! §8.7), the same summed per loop, and Graphviz DOT with the paper's conventions (§3.8).

use std::collections::{HashMap, HashSet};

use loopscope_binary::Frame;
use loopscope_profile::{ProfileReport, TreeNode};

use crate::roofline_text::format_seconds;
use crate::shell::shell_words;
use crate::table::{Align, Table, TextLayout, fit_name};

/// Which nodes a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFilter {
    /// Every node.
    All,
    /// Hot nodes only (the report's threshold).
    Hot,
}

fn shown(node: &TreeNode, filter: NodeFilter) -> bool {
    filter == NodeFilter::All || node.hot
}

fn percent(share: f64) -> String {
    format!("{:.1}", share * 100.0)
}

fn source(node: &TreeNode) -> String {
    source_text(node.file.as_deref(), node.line, &node.inlined).unwrap_or_default()
}

/// The source position of a loop header as every output labels it: `file:line` in the
/// function's own code, followed by where the header's code comes from when it is inlined
/// (`inlined`, innermost first, as [`TreeNode::inlined`] holds it). File names without their
/// directories; `None` without a file and a line.
///
/// ```
/// use loopscope_binary::Frame;
/// use loopscope_report::source_text;
///
/// let getchar = Frame {
///     function: Some("getchar".into()),
///     file: Some("/usr/include/x86_64-linux-gnu/bits/stdio.h".into()),
///     line: Some(49),
/// };
/// assert_eq!(
///     source_text(Some("/src/stdin.c"), Some(4), &[getchar]).as_deref(),
///     Some("stdin.c:4 (inlined stdio.h:49)")
/// );
/// assert_eq!(source_text(Some("/src/nest.c"), Some(28), &[]).as_deref(), Some("nest.c:28"));
/// assert_eq!(source_text(None, Some(28), &[]), None);
/// ```
pub fn source_text(file: Option<&str>, line: Option<u32>, inlined: &[Frame]) -> Option<String> {
    let short = |f: &str| f.rsplit('/').next().unwrap_or(f).to_owned();
    let (Some(file), Some(line)) = (file, line) else {
        return None;
    };
    let mut text = format!("{}:{line}", short(file));
    if let Some(Frame {
        file: Some(from),
        line: Some(from_line),
        ..
    }) = inlined.first()
    {
        text.push_str(&format!(" (inlined {}:{from_line})", short(from)));
    }
    Some(text)
}

/// How a view names functions: shortened as `layout` says, except that two functions the
/// shortening would make look alike are told apart. Names that shorten alike (two
/// instantiations of one template) are shown whole, and a name met in more than one object (a
/// function in two libraries) is followed by its object's file name.
struct Naming {
    whole: HashSet<String>,
    in_several_objects: HashSet<String>,
}

impl Naming {
    fn of(tree: &TreeNode, layout: &TextLayout) -> Naming {
        let mut shortened: HashMap<String, HashSet<&str>> = HashMap::new();
        let mut objects: HashMap<&str, HashSet<Option<&str>>> = HashMap::new();
        let mut stack = vec![tree];
        while let Some(node) = stack.pop() {
            stack.extend(&node.children);
            if node.kind == "loop" || node.kind == "root" {
                continue;
            }
            shortened
                .entry(fit_name(&node.name, layout, None))
                .or_default()
                .insert(&node.name);
            objects
                .entry(&node.name)
                .or_default()
                .insert(node.object.as_deref());
        }
        Naming {
            whole: shortened
                .into_values()
                .filter(|names| names.len() > 1)
                .flatten()
                .map(str::to_owned)
                .collect(),
            in_several_objects: objects
                .into_iter()
                .filter(|(_, objects)| objects.len() > 1)
                .map(|(name, _)| name.to_owned())
                .collect(),
        }
    }

    fn name(&self, name: &str, object: Option<&str>, layout: &TextLayout) -> String {
        let shown = if self.whole.contains(name) {
            name.to_owned()
        } else {
            fit_name(name, layout, None)
        };
        match object.filter(|_| self.in_several_objects.contains(name)) {
            Some(object) => format!("{shown} ({})", object.rsplit('/').next().unwrap_or(object)),
            None => with_library(&shown, object),
        }
    }
}

fn name_cell(node: &TreeNode, depth: usize, naming: &Naming, layout: &TextLayout) -> String {
    let tag = match node.kind {
        "loop" => "[L]",
        "root" => "",
        _ => "[F]",
    };
    let name = if node.kind == "loop" {
        format!(
            "loop {}#{}{}",
            node.loop_id.unwrap_or(0),
            node.node_id,
            if node.irreducible { " irr" } else { "" }
        )
    } else {
        naming.name(&node.name, node.object.as_deref(), layout)
    };
    format!("{}{tag} {name}", "  ".repeat(depth))
        .trim_end()
        .to_owned()
}

/// A function named by its address (`func_0x1f780`, an object without symbols) followed by its
/// shared library's file name, which alone tells where the code is: `func_0x1f780
/// (libgomp.so.1)`.
pub(crate) fn with_library(name: &str, object: Option<&str>) -> String {
    let library = object
        .map(|o| o.rsplit('/').next().unwrap_or(o))
        .filter(|file| file.contains(".so"));
    match library {
        Some(file) if name.starts_with("func_0x") => format!("{name} ({file})"),
        _ => name.to_owned(),
    }
}

/// The header lines: what was run, how it was measured, the overhead.
/// `filter` is what the view below shows, which the events line says.
pub fn render_profile_header(report: &ProfileReport, filter: NodeFilter) -> String {
    let exit = report.exit;
    let threshold = report.hot_threshold * 100.0;
    let shown = match filter {
        NodeFilter::Hot => format!("hot nodes reach {threshold:.2} % inclusive"),
        NodeFilter::All => {
            format!("every node shown, hot or not (hot: {threshold:.2} % inclusive or more)")
        }
    };
    let mut out = format!(
        "profile   {} ({} back-end, {exit})\nmeasure   {}\nevents    {} {}; {shown}\n",
        shell_words(&report.command),
        report.backend,
        report.measure,
        report.events,
        if report.backend == "sample" {
            "samples"
        } else {
            "markers"
        },
    );
    let o = &report.overhead;
    let mut overhead = format!("profiled {:.3} s", o.profiled_s);
    if let Some(native) = o.native_s {
        overhead = format!("native {native:.3} s, {overhead}");
    }
    if let Some(ratio) = o.time_ratio {
        overhead.push_str(&format!(", time ratio {ratio:.2}"));
    }
    if let Some(app) = o.app_ratio {
        overhead.push_str(&format!(", App. ratio {:.1} %", app * 100.0));
    }
    if let Some(est) = o.est_app_overhead {
        overhead.push_str(&format!(", est. app. overhead {est:.2}"));
    }
    out.push_str(&format!("overhead  {overhead}\n"));
    for note in &report.notes {
        out.push_str(&format!("note      {note}\n"));
    }
    out
}

/// The tree as an indented table: self % (incl %), times, and for exact profiles the entries
/// and trips of every loop. Function names are shortened (`std::sort<…>(…)`) unless `layout`
/// asks for them whole.
pub fn render_profile_tree(
    report: &ProfileReport,
    filter: NodeFilter,
    layout: &TextLayout,
) -> String {
    let sampled = report.backend == "sample";
    let mut header = vec!["node", "self %", "incl %"];
    if sampled {
        header.push("± %");
    }
    header.extend(["self", "incl"]);
    if !sampled {
        header.extend(["entries", "iters", "trips min/mean/max"]);
    }
    header.push("source");
    let columns = header.len();
    let mut table = Table::new(header);
    for c in 1..columns - 1 {
        table = table.align(c, Align::Right);
    }
    let naming = Naming::of(&report.tree, layout);
    let mut rows = Vec::new();
    walk(&report.tree, 0, filter, &mut |node, depth| {
        rows.push(tree_row(node, depth, sampled, &naming, layout))
    });
    for row in rows {
        table.row(row);
    }
    table.render()
}

fn walk(
    node: &TreeNode,
    depth: usize,
    filter: NodeFilter,
    visit: &mut impl FnMut(&TreeNode, usize),
) {
    if !shown(node, filter) {
        return;
    }
    visit(node, depth);
    for child in &node.children {
        walk(child, depth + 1, filter, visit);
    }
}

fn tree_row(
    node: &TreeNode,
    depth: usize,
    sampled: bool,
    naming: &Naming,
    layout: &TextLayout,
) -> Vec<String> {
    let mut row = vec![
        name_cell(node, depth, naming, layout),
        percent(node.self_share),
        percent(node.inclusive_share),
    ];
    if sampled {
        row.push(
            node.share_error
                .map_or(String::new(), |e| format!("{:.1}", e * 100.0)),
        );
    }
    row.push(format_seconds(node.self_s));
    row.push(format_seconds(node.inclusive_s));
    if !sampled {
        row.push(node.entries.map_or(String::new(), |e| e.to_string()));
        row.push(node.iterations.map_or(String::new(), |i| i.to_string()));
        row.push(node.trips.map_or(String::new(), |[lo, mean, hi]| {
            format!("{lo:.0}/{mean:.1}/{hi:.0}")
        }));
    }
    row.push(source(node));
    row
}

/// One row per function and loop, summed over the contexts it was reached in; names as in
/// [`render_profile_tree`].
pub fn render_profile_by_loop(
    report: &ProfileReport,
    filter: NodeFilter,
    layout: &TextLayout,
) -> String {
    #[derive(Default)]
    struct Sum {
        kind: &'static str,
        self_share: f64,
        inclusive_share: f64,
        self_s: f64,
        inclusive_s: f64,
        contexts: u64,
        function: Option<String>,
        entries: Option<u64>,
        iterations: Option<u64>,
        source: String,
    }
    let mut sums: Vec<(String, Sum)> = Vec::new();
    fn add(node: &TreeNode, open: &mut Vec<String>, sums: &mut Vec<(String, Sum)>) {
        let key = format!("{}\u{0}{}", node.name, node.object.as_deref().unwrap_or(""));
        // Inclusive time counts once per path: a node under one of the same key is inside it.
        let nested = open.contains(&key);
        let at = match sums.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                sums.push((
                    key.clone(),
                    Sum {
                        kind: node.kind,
                        source: source(node),
                        function: node.function.clone(),
                        ..Sum::default()
                    },
                ));
                sums.len() - 1
            }
        };
        let s = &mut sums[at].1;
        s.self_share += node.self_share;
        s.self_s += node.self_s;
        if !nested {
            s.inclusive_share += node.inclusive_share;
            s.inclusive_s += node.inclusive_s;
        }
        s.contexts += 1;
        // A count no context has (a function's iterations) does not apply: `-`, not 0.
        let sum = |total: Option<u64>, one: Option<u64>| match (total, one) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
        s.entries = sum(s.entries, node.entries);
        s.iterations = sum(s.iterations, node.iterations);
        open.push(key);
        for child in &node.children {
            add(child, open, sums);
        }
        open.pop();
    }
    for child in &report.tree.children {
        add(child, &mut Vec::new(), &mut sums);
    }
    sums.sort_by(|a, b| b.1.self_share.total_cmp(&a.1.self_share));
    let sampled = report.backend == "sample";
    let mut header = vec![
        "function or loop",
        "self %",
        "incl %",
        "self",
        "incl",
        "contexts",
    ];
    if !sampled {
        header.extend(["entries", "iters"]);
    }
    header.push("source");
    let columns = header.len();
    let mut table = Table::new(header);
    for c in 1..columns - 1 {
        table = table.align(c, Align::Right);
    }
    let naming = Naming::of(&report.tree, layout);
    for (key, s) in sums {
        if filter == NodeFilter::Hot && s.inclusive_share < report.hot_threshold {
            continue;
        }
        let mut parts = key.split('\u{0}');
        let name = parts.next().unwrap_or("").to_owned();
        let object = parts.next().filter(|o| !o.is_empty());
        let name = match &s.function {
            Some(f) if s.kind == "loop" => format!("{name} in {}", naming.name(f, object, layout)),
            _ => naming.name(&name, object, layout),
        };
        let mut row = vec![
            format!("{} {name}", if s.kind == "loop" { "[L]" } else { "[F]" }),
            percent(s.self_share),
            percent(s.inclusive_share),
            format_seconds(s.self_s),
            format_seconds(s.inclusive_s),
            s.contexts.to_string(),
        ];
        if !sampled {
            let count = |c: Option<u64>| c.map_or("-".to_owned(), |c| c.to_string());
            row.push(count(s.entries));
            row.push(count(s.iterations));
        }
        row.push(s.source);
        table.row(row);
    }
    table.render()
}

/// Graphviz DOT: loops as circles (double border when irreducible), functions as boxes, each
/// labelled `self% (incl%)`, loops with their id and `file:line` (spec 004 §3.8).
pub fn render_profile_dot(report: &ProfileReport, filter: NodeFilter) -> String {
    let mut out = String::from("digraph lcct {\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    fn emit(node: &TreeNode, filter: NodeFilter, out: &mut String) {
        let shares = format!(
            "{:.1}% ({:.1}%)",
            node.self_share * 100.0,
            node.inclusive_share * 100.0
        );
        let (shape, label) = match node.kind {
            "loop" => {
                let mut label = format!("loop {}", node.loop_id.unwrap_or(0));
                let src = source(node);
                if !src.is_empty() {
                    label.push_str(&format!("\\n{src}"));
                }
                if let Some([_, mean, _]) = node.trips {
                    label.push_str(&format!(
                        "\\n#appear: {}  avg. itr: {mean:.1}",
                        node.entries.unwrap_or(0)
                    ));
                }
                (
                    if node.irreducible {
                        "doublecircle"
                    } else {
                        "circle"
                    },
                    label,
                )
            }
            "root" => ("box", "all".to_owned()),
            _ => ("box", escape(&node.name)),
        };
        out.push_str(&format!(
            "  n{} [shape={shape}, label=\"{label}\\n{shares}\"];\n",
            node.node_id
        ));
        for child in node.children.iter().filter(|c| shown(c, filter)) {
            out.push_str(&format!("  n{} -> n{};\n", node.node_id, child.node_id));
            emit(child, filter, out);
        }
    }
    emit(&report.tree, filter, &mut out);
    out.push_str("}\n");
    out
}

fn escape(text: &str) -> String {
    let short: String = if text.chars().count() > 60 {
        text.chars().take(57).chain("...".chars()).collect()
    } else {
        text.to_owned()
    };
    short.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unnamed_library_function_says_its_library() {
        let lib = Some("/usr/lib/x86_64-linux-gnu/libgomp.so.1");
        assert_eq!(
            with_library("func_0x1f780", lib),
            "func_0x1f780 (libgomp.so.1)"
        );
        assert_eq!(with_library("GOMP_barrier", lib), "GOMP_barrier");
        assert_eq!(
            with_library("func_0x1060", Some("/tmp/app")),
            "func_0x1060",
            "the program's own functions need no object"
        );
    }

    fn function(name: &str, object: &str, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            object: Some(object.into()),
            ..crate::firefox::tests::node(0, "function", name, children)
        }
    }

    #[test]
    fn functions_that_would_look_alike_are_told_apart() {
        let int = "int pow_sum<int, 5>(std::vector<int> const&)";
        let double = "double pow_sum<double, 3>(std::vector<double> const&)";
        let tree = function(
            "main",
            "/tmp/app",
            vec![
                function(int, "/tmp/app", Vec::new()),
                function(double, "/tmp/app", Vec::new()),
                function("std::sort<int*>(int*, int*)", "/tmp/app", Vec::new()),
                function("hot_kernel", "/tmp/libhot.so", Vec::new()),
                function("hot_kernel", "/tmp/libhot2.so", Vec::new()),
            ],
        );
        let layout = TextLayout {
            width: None,
            full_names: false,
        };
        let naming = Naming::of(&tree, &layout);
        // Both shorten to `pow_sum<…>(…)`: shown whole.
        assert_eq!(naming.name(int, Some("/tmp/app"), &layout), int);
        assert_eq!(
            naming.name("std::sort<int*>(int*, int*)", Some("/tmp/app"), &layout),
            "std::sort<…>(…)"
        );
        assert_eq!(
            naming.name("hot_kernel", Some("/tmp/libhot2.so"), &layout),
            "hot_kernel (libhot2.so)"
        );
        assert_eq!(naming.name("main", Some("/tmp/app"), &layout), "main");
    }
}
