//! Text views of a binary's loop forest (`loopscope loops`) and of one function's blocks
//! (`loopscope blocks`).

use loopscope_binary::{Block, ClassCounts, Function, Loop, Program};

use crate::table::{Align, Table, TextLayout, fit_name};

/// The loop forest of the given functions, one table per function with loops, laid out as
/// `layout` says (names shortened, rows fitted to a width).
pub fn render_loops(program: &Program, functions: &[&Function], layout: &TextLayout) -> String {
    let loops: usize = functions.iter().map(|f| f.loops.len()).sum();
    // Only the functions with loops are counted: the others are not listed.
    let looping = functions.iter().filter(|f| !f.loops.is_empty()).count();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut out = format!(
        "{}: {}{}, {} with loops, {}\n",
        program.binary,
        kind_name(program),
        if program.stripped { ", stripped" } else { "" },
        plural(looping, "function", "functions"),
        plural(loops, "loop", "loops")
    );
    for f in functions
        .iter()
        .filter(|f| !f.loops.is_empty() || functions.len() == 1)
    {
        out.push_str(&format!("\n{}\n", function_heading(f, layout)));
        if f.loops.is_empty() {
            out.push_str("  no loops\n");
            continue;
        }
        out.push_str(&loop_table(f).render_with(layout));
    }
    out
}

fn kind_name(program: &Program) -> &'static str {
    match program.kind {
        loopscope_binary::BinaryKind::Executable => "executable",
        loopscope_binary::BinaryKind::Pie => "PIE executable",
        loopscope_binary::BinaryKind::SharedLibrary => "shared library",
        loopscope_binary::BinaryKind::Other => "ELF object",
    }
}

/// `name @ 0x…`, the name shortened and the line cut to the width as `layout` says.
fn function_heading(f: &Function, layout: &TextLayout) -> String {
    let address = format!(" @ {:#x}", f.address);
    let room = layout
        .width
        .map(|w| w.saturating_sub(address.chars().count()));
    format!("{}{address}", fit_name(&f.name, layout, room))
}

fn loop_table(f: &Function) -> Table {
    let header = [
        "loop", "parent", "kind", "header", "source", "inlined", "lines", "blocks", "instrs", "fp",
        "ls", "br", "int",
    ];
    let mut table = Table::new(header).shrinkable(4).names(5);
    for column in 7..header.len() {
        table = table.align(column, Align::Right);
    }
    for l in tree_order(&f.loops) {
        let indent = "  ".repeat(l.depth.saturating_sub(1) as usize);
        let mut row = vec![
            format!("{indent}{}", l.id),
            l.parent.map_or("-".into(), |p| p.to_string()),
            l.kind.name().to_owned(),
            format!("{:#x}", l.header),
            source(l),
            inlined(l),
            lines(l),
            l.blocks.to_string(),
            l.instructions.to_string(),
        ];
        row.extend(class_cells(&l.classes));
        table.row(row);
    }
    table
}

/// The loops depth-first, each parent before its children, siblings by id: an inner loop
/// whose header lies below its parent's still appears under it.
fn tree_order(loops: &[Loop]) -> Vec<&Loop> {
    fn visit<'a>(loops: &'a [Loop], parent: Option<u32>, out: &mut Vec<&'a Loop>) {
        let mut children: Vec<&Loop> = loops.iter().filter(|l| l.parent == parent).collect();
        children.sort_by_key(|l| l.id);
        for child in children {
            out.push(child);
            visit(loops, Some(child.id), out);
        }
    }
    let mut out = Vec::with_capacity(loops.len());
    visit(loops, None, &mut out);
    // A loop whose parent is not in the list would be lost by the walk; it is shown last.
    for l in loops {
        if !out.iter().any(|o| std::ptr::eq(*o, l)) {
            out.push(l);
        }
    }
    out
}

fn source(l: &Loop) -> String {
    crate::profile::source_text(l.file.as_deref(), l.line, &l.inlined).unwrap_or_else(|| "?".into())
}

/// The function whose code the header is, when it was inlined: the innermost frame (the outer
/// ones are in `--json`).
fn inlined(l: &Loop) -> String {
    match l.inlined.first() {
        Some(frame) => frame.function.clone().unwrap_or_else(|| "?".into()),
        None => "-".into(),
    }
}

fn lines(l: &Loop) -> String {
    match (l.line_min, l.line_max) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "-".into(),
    }
}

fn class_cells(c: &ClassCounts) -> [String; 4] {
    [c.fp, c.ls, c.br, c.int].map(|n| n.to_string())
}

/// The blocks of one function with their classes, exits, successors and innermost loop, the
/// function's name laid out as `layout` says.
pub fn render_blocks(function: &Function, layout: &TextLayout) -> String {
    let header = [
        "block", "start", "end", "instrs", "fp", "ls", "br", "int", "simd", "exit", "succs", "loop",
    ];
    let mut table = Table::new(header);
    for column in 3..9 {
        table = table.align(column, Align::Right);
    }
    for (i, b) in function.blocks.iter().enumerate() {
        let mut row = vec![
            format!(
                "{}{i}",
                if i as u32 == function.entry_block {
                    ">"
                } else {
                    ""
                }
            ),
            format!("{:#x}", b.start),
            format!("{:#x}", b.end),
            b.instructions.to_string(),
        ];
        row.extend(class_cells(&b.classes));
        row.push((b.tags.simd128 + b.tags.simd256 + b.tags.simd512).to_string());
        row.push(b.exit.name().to_owned());
        row.push(succs(b));
        row.push(innermost_loop(function, i as u32).map_or("-".into(), |id| id.to_string()));
        table.row(row);
    }
    format!(
        "{}: {} blocks, {} instructions (> marks the entry)\n{}",
        function_heading(function, layout),
        function.blocks.len(),
        function.instructions,
        table.render_with(layout)
    )
}

fn succs(b: &Block) -> String {
    let list: Vec<String> = b.succs.iter().map(|s| s.block.to_string()).collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

/// The deepest loop containing a block.
pub fn innermost_loop(function: &Function, block: u32) -> Option<u32> {
    function
        .loops
        .iter()
        .filter(|l| l.block_ids.binary_search(&block).is_ok())
        .max_by_key(|l| l.depth)
        .map(|l| l.id)
}
