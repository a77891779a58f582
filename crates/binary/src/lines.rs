//! Source positions of loops from DWARF line tables and inlining information (addr2line).
//!
//! A loop's line is that of its own condition where the code shows one, not of its header's
//! first instruction: at -O1 and above compilers rotate loops (the test moves to the bottom)
//! and schedule an inner loop's set-up or the function's hoisted address arithmetic at the
//! top of the header, so the first instruction of an outer loop's header often carries the
//! inner loop's line and an inner loop's the function's opening line.

use std::cell::OnceCell;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::blocks::{Block, Exit};
use crate::program::{Function, Loop};

/// One frame of an inlined call chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The function (demangled), when DWARF names it.
    pub function: Option<String>,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

/// The DWARF of one file (and its split or separate debug files, which the loader finds).
pub(crate) struct SourceLines {
    loader: addr2line::Loader,
}

/// The line-table rows of each block of one function, read on first use.
struct RowCache {
    rows: Vec<Option<Vec<Row>>>,
}

impl RowCache {
    fn new(blocks: usize) -> RowCache {
        RowCache {
            rows: (0..blocks).map(|_| None).collect(),
        }
    }
}

/// One line-table row of a block.
struct Row {
    /// Where the row starts.
    address: u64,
    /// The row's (innermost) file.
    file: Option<String>,
    /// The row's (innermost) line.
    line: Option<u32>,
    /// The function's own file and line the row belongs to (the call site when it is inlined
    /// code), looked up only for the rows that need it: walking the inlined frames of every row
    /// of a large binary is slow.
    own: OnceCell<(Option<String>, Option<u32>)>,
}

impl Row {
    fn line_in(&self, file: &str) -> Option<u32> {
        line_in(&self.file, self.line, file)
    }
}

fn line_in(f: &Option<String>, n: Option<u32>, file: &str) -> Option<u32> {
    n.filter(|&n| n > 0 && f.as_deref() == Some(file))
}

fn widen(range: Option<(u32, u32)>, n: u32) -> Option<(u32, u32)> {
    Some(range.map_or((n, n), |(a, b)| (a.min(n), b.max(n))))
}

/// Where a loop's line came from, for its line range.
struct Placed {
    /// The instruction the line was read at is inlined code.
    inlined: bool,
}

impl SourceLines {
    pub fn open(path: &Path) -> Result<SourceLines, String> {
        addr2line::Loader::new(path)
            .map(|loader| SourceLines { loader })
            .map_err(|e| e.to_string())
    }

    /// Fills in the source positions of a function's loops.
    pub fn annotate(&self, function: &mut Function) {
        let blocks = &function.blocks;
        let loops = &mut function.loops;
        let anchors: Vec<Vec<u64>> = loops
            .iter()
            .map(|l| line_anchors(l, loops, blocks))
            .collect();
        let placed: Vec<Placed> = loops
            .iter_mut()
            .zip(&anchors)
            .map(|(l, anchors)| self.place(l, anchors))
            .collect();
        let lines: Vec<(u32, Option<u32>, bool)> = loops
            .iter()
            .zip(&placed)
            .map(|(l, p)| (l.id, l.line, p.inlined))
            .collect();
        let mut rows = RowCache::new(blocks.len());
        for (l, p) in loops.iter_mut().zip(&placed) {
            let Some(file) = l.file.clone() else {
                continue;
            };
            let parent = l
                .parent
                .and_then(|id| lines.iter().find(|(i, _, _)| *i == id));
            // Code scheduled into a loop from before it (the function's opening line, the
            // enclosing loop's statement) is not the loop's; lines above its own statement are
            // kept when they are not that early, as the body of a `do … while` is.
            let before = if p.inlined {
                None
            } else {
                match parent {
                    Some(&(_, line, inlined)) => line.filter(|_| !inlined),
                    None => {
                        let mut min: Option<u32> = None;
                        for e in &l.entry_edges {
                            for r in self.rows(&mut rows, blocks, e.from) {
                                if let Some(n) = self.own_line_below(r, &file, l.line) {
                                    min = Some(min.map_or(n, |m| m.min(n)));
                                }
                            }
                        }
                        min
                    }
                }
            };
            let mut all: Option<(u32, u32)> = None;
            let mut kept: Option<(u32, u32)> = None;
            for &b in &l.block_ids {
                for r in self.rows(&mut rows, blocks, b) {
                    // An inlined loop spans the inlined function's lines; a loop of the
                    // function's own code spans its own lines.
                    let n = if p.inlined {
                        r.line_in(&file)
                    } else {
                        self.own_line_below(r, &file, l.line)
                    };
                    let Some(n) = n else {
                        continue;
                    };
                    all = widen(all, n);
                    let early = match (before, l.line) {
                        (Some(before), Some(line)) => n < line && n <= before,
                        _ => false,
                    };
                    if !early {
                        kept = widen(kept, n);
                    }
                }
            }
            if let Some((min, max)) = kept.or(all).or(l.line.map(|n| (n, n))) {
                l.line_min = Some(min);
                l.line_max = Some(max);
            }
        }
    }

    /// Sets the loop's file, line and inlined frames from its anchors: of its tests (all but
    /// the last anchor), the one on the smallest line, the first of those on the same line;
    /// without a test on a line, its header.
    fn place(&self, l: &mut Loop, anchors: &[u64]) -> Placed {
        let header = self.frames(l.header);
        let (tests, _) = anchors.split_at(anchors.len().saturating_sub(1));
        let mut best: Option<(u32, Vec<Frame>)> = None;
        for &address in tests {
            let frames = self.frames(address);
            let line = own_code(&frames).and_then(|f| f.line).filter(|&n| n > 0);
            // An early exit (`break`, `return`) is a statement of the body, below the loop's
            // own `for` or `while`.
            if let Some(n) = line.filter(|&n| best.as_ref().is_none_or(|(b, _)| n < *b)) {
                best = Some((n, frames));
            }
        }
        let frames = match best {
            Some((_, frames)) => frames,
            None => header.clone(),
        };
        if let Some(own) = own_code(&frames) {
            l.file = own.file.clone();
            l.line = own.line;
        }
        let inlined = frames.len() > 1;
        // A loop of the function's own code whose header is inlined code called on the loop's
        // line (`while ((c = getchar()) != EOF)`) keeps that call in its label; inlined code
        // called from another line of the body is not the loop's.
        if inlined {
            l.inlined = frames;
        } else if header.len() > 1 && own_code(&header) == own_code(&frames) {
            l.inlined = header;
        }
        Placed { inlined }
    }

    /// The line rows of a block, read once per function.
    fn rows<'c>(&self, cache: &'c mut RowCache, blocks: &[Block], b: u32) -> &'c [Row] {
        let slot = &mut cache.rows[b as usize];
        if slot.is_none() {
            *slot = Some(
                blocks
                    .get(b as usize)
                    .map_or_else(Vec::new, |block| self.block_rows(block)),
            );
        }
        slot.as_deref().unwrap_or_default()
    }

    /// The line-table rows of a block.
    fn block_rows(&self, block: &Block) -> Vec<Row> {
        let Ok(rows) = self.loader.find_location_range(block.start, block.end) else {
            return Vec::new();
        };
        rows.map(|(address, _, location)| Row {
            address,
            file: location.file.map(str::to_owned),
            line: location.line,
            own: OnceCell::new(),
        })
        .collect()
    }

    /// The line of the function's own code a row belongs to, when it is in `file`; rows at or
    /// after `line` are taken as the function's own code, since a function of the same file
    /// inlined into it is defined above it.
    fn own_line_below(&self, row: &Row, file: &str, line: Option<u32>) -> Option<u32> {
        match (row.line_in(file), line) {
            (Some(n), Some(line)) if n < line => self.own_line(row, file),
            (n, _) => n,
        }
    }

    /// The line of the function's own code a row belongs to, when it is in `file`.
    fn own_line(&self, row: &Row, file: &str) -> Option<u32> {
        let (f, n) = row.own.get_or_init(|| {
            let mut own = (row.file.clone(), row.line);
            if let Ok(mut frames) = self.loader.find_frames(row.address) {
                let mut depth = 0;
                while let Ok(Some(frame)) = frames.next() {
                    if let Some(l) = frame.location.filter(|l| l.file.is_some()) {
                        own = (l.file.map(str::to_owned), l.line);
                    }
                    depth += 1;
                    if depth > 64 {
                        break;
                    }
                }
            }
            own
        });
        line_in(f, *n, file)
    }

    /// The call chain at an address, innermost first; empty without DWARF.
    fn frames(&self, address: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let Ok(mut frames) = self.loader.find_frames(address) else {
            return out;
        };
        while let Ok(Some(frame)) = frames.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok().map(|n| crate::demangle(&n)));
            let (file, line) = frame
                .location
                .map_or((None, None), |l| (l.file.map(str::to_owned), l.line));
            out.push(Frame {
                function,
                file,
                line,
            });
            if out.len() > 64 {
                break;
            }
        }
        if out.iter().all(|f| f.file.is_none()) {
            if let Ok(Some(location)) = self.loader.find_location(address) {
                out = vec![Frame {
                    function: None,
                    file: location.file.map(str::to_owned),
                    line: location.line,
                }];
            }
        }
        out
    }
}

/// Whether every way on from block `b` soon ends in a call that does not return or a trap.
fn ends_the_program(blocks: &[Block], mut b: u32) -> bool {
    for _ in 0..8 {
        let Some(block) = blocks.get(b as usize) else {
            return false;
        };
        match (block.exit, block.succs.as_slice()) {
            (Exit::NoReturnCall | Exit::Stop, _) => return true,
            (Exit::Call | Exit::FallThrough | Exit::Jump, [next]) => b = next.block,
            _ => return false,
        }
    }
    false
}

/// The outermost frame with a file: the function's own code, which for inlined code
/// (`getchar` from stdio.h) is the user's line that called it.
fn own_code(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().rev().find(|f| f.file.is_some())
}

/// The addresses whose source line may name the loop: its tests, the conditional branches of
/// its own blocks (not of nested loops) that leave it, best first (the branch that closes a
/// rotated loop, the header's test when the condition is at the top, a test that leads into
/// the back edge, then the others from the bottom up); last, the header's first instruction.
/// A branch to code that ends the program (`exit`, `abort`) is an error check, not a test.
pub(crate) fn line_anchors(l: &Loop, loops: &[Loop], blocks: &[Block]) -> Vec<u64> {
    let inside = |b: u32| l.block_ids.binary_search(&b).is_ok();
    let nested = |b: u32| {
        loops
            .iter()
            .any(|c| c.parent == Some(l.id) && c.block_ids.binary_search(&b).is_ok())
    };
    let back_sources: Vec<u32> = l.back_edges.iter().map(|e| e.from).collect();
    // Own blocks ending in a conditional branch with one way out of the loop and one in it.
    let mut tests: Vec<u32> = l
        .block_ids
        .iter()
        .copied()
        .filter(|&b| {
            blocks.get(b as usize).is_some_and(|block| {
                block.exit == Exit::Branch
                    && !nested(b)
                    && l.exit_edges
                        .iter()
                        .any(|e| e.from == b && !ends_the_program(blocks, e.to))
                    && block.succs.iter().any(|s| inside(s.block))
            })
        })
        .collect();
    // Bottom-most first: a rotated loop's own test is its last.
    tests.sort_by_key(|&b| std::cmp::Reverse(blocks[b as usize].start));
    let closing = tests.iter().filter(|b| back_sources.contains(b));
    let top = tests.iter().filter(|&&b| b == l.header_block);
    let into_latch = tests.iter().filter(|&&b| {
        blocks[b as usize]
            .succs
            .iter()
            .any(|s| back_sources.contains(&s.block))
    });
    let mut out: Vec<u64> = Vec::new();
    for b in closing.chain(top).chain(into_latch).chain(&tests) {
        let last = blocks[*b as usize].last;
        if !out.contains(&last) {
            out.push(last);
        }
    }
    out.push(l.header);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::{EdgeKind, Succ};
    use crate::classes::{ClassCounts, TagCounts};
    use crate::loops::LoopKind;
    use crate::program::Edge;

    /// Blocks 16 bytes apart from 0x1000, block `i` ending as `shape[i]`; the first successor
    /// of a branch is its taken edge, the second its fall-through.
    fn blocks(shape: &[(Exit, &[u32])]) -> Vec<Block> {
        shape
            .iter()
            .enumerate()
            .map(|(i, &(exit, succs))| {
                let start = 0x1000 + 16 * i as u64;
                Block {
                    start,
                    end: start + 16,
                    last: start + 12,
                    instructions: 4,
                    classes: ClassCounts::default(),
                    tags: TagCounts::default(),
                    exit,
                    succs: succs
                        .iter()
                        .enumerate()
                        .map(|(k, &block)| Succ {
                            block,
                            kind: if exit == Exit::Branch && k == 0 {
                                EdgeKind::Taken
                            } else {
                                EdgeKind::FallThrough
                            },
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The loops of the blocks' graph from block 0, ids in forest order.
    fn loops(blocks: &[Block]) -> Vec<Loop> {
        let succs: Vec<Vec<u32>> = blocks
            .iter()
            .map(|b| b.succs.iter().map(|s| s.block).collect())
            .collect();
        let edge = |&(from, to): &(u32, u32)| Edge {
            from,
            to,
            kind: EdgeKind::FallThrough,
        };
        crate::havlak_forest(&succs, 0)
            .into_iter()
            .enumerate()
            .map(|(i, r)| Loop {
                id: i as u32,
                parent: r.parent.map(|p| p as u32),
                depth: 1,
                kind: r.kind,
                header: blocks[r.header as usize].start,
                header_block: r.header,
                file: None,
                line: None,
                line_min: None,
                line_max: None,
                inlined: Vec::new(),
                blocks: r.blocks.len() as u64,
                block_ids: r.blocks.clone(),
                instructions: 0,
                classes: ClassCounts::default(),
                tags: TagCounts::default(),
                back_edges: r.back_edges.iter().map(edge).collect(),
                entry_edges: r.entry_edges.iter().map(edge).collect(),
                exit_edges: r.exit_edges.iter().map(edge).collect(),
            })
            .collect()
    }

    fn anchors(shape: &[(Exit, &[u32])]) -> Vec<Vec<u64>> {
        let blocks = blocks(shape);
        let loops = loops(&blocks);
        loops
            .iter()
            .map(|l| line_anchors(l, &loops, &blocks))
            .collect()
    }

    /// The branch ending block `b`.
    fn branch(b: u64) -> u64 {
        0x1000 + 16 * b + 12
    }

    /// The first instruction of block `b`.
    fn start(b: u64) -> u64 {
        0x1000 + 16 * b
    }

    #[test]
    fn a_rotated_loop_is_placed_at_its_closing_test() {
        // 0 → 1 (header, body) → 2 (test: back to 1 or out to 3).
        let a = anchors(&[
            (Exit::FallThrough, &[1]),
            (Exit::FallThrough, &[2]),
            (Exit::Branch, &[1, 3]),
            (Exit::Return, &[]),
        ]);
        assert_eq!(a, vec![vec![branch(2), start(1)]]);
    }

    #[test]
    fn a_loop_tested_at_the_top_is_placed_at_its_header_test() {
        // 0 → 1 (header, test: into 2 or out to 3); 2 jumps back.
        let a = anchors(&[
            (Exit::FallThrough, &[1]),
            (Exit::Branch, &[3, 2]),
            (Exit::Jump, &[1]),
            (Exit::Return, &[]),
        ]);
        assert_eq!(a, vec![vec![branch(1), start(1)]]);
    }

    #[test]
    fn a_loop_entered_at_a_call_is_placed_at_the_test_before_its_latch() {
        // 0 jumps to 2 (header, a call), 3 tests (into the latch 1 or out to 4), 1 falls
        // into the header: `while ((c = getchar()) != EOF)` at -O1.
        let a = anchors(&[
            (Exit::Jump, &[2]),
            (Exit::FallThrough, &[2]),
            (Exit::Call, &[3]),
            (Exit::Branch, &[1, 4]),
            (Exit::Return, &[]),
        ]);
        assert_eq!(a, vec![vec![branch(3), start(2)]]);
    }

    #[test]
    fn each_loop_of_a_nest_is_placed_at_its_own_test() {
        // i: 1 (header) → j: 2 (header) → k: 3 (self loop) → 4 (j's test) → 5 (i's test).
        let shape: &[(Exit, &[u32])] = &[
            (Exit::FallThrough, &[1]),
            (Exit::FallThrough, &[2]),
            (Exit::FallThrough, &[3]),
            (Exit::Branch, &[3, 4]),
            (Exit::Branch, &[2, 5]),
            (Exit::Branch, &[1, 6]),
            (Exit::Return, &[]),
        ];
        let blocks = blocks(shape);
        let loops = loops(&blocks);
        let first = |header: u32| {
            let l = loops.iter().find(|l| l.header_block == header).unwrap();
            line_anchors(l, &loops, &blocks)[0]
        };
        assert_eq!(
            (first(1), first(2), first(3)),
            (branch(5), branch(4), branch(3))
        );
        let k = loops.iter().find(|l| l.header_block == 3).unwrap();
        assert_eq!(k.kind, LoopKind::SelfLoop);
    }

    #[test]
    fn a_nested_loops_exit_is_not_the_outer_loops_test() {
        // Outer 1 → inner 2 (leaves both loops to 5, or goes on to 3) → 3 (inner test: back
        // to 2 or on to 4) → 4 jumps back to 1.
        let a = anchors(&[
            (Exit::FallThrough, &[1]),
            (Exit::FallThrough, &[2]),
            (Exit::Branch, &[5, 3]),
            (Exit::Branch, &[2, 4]),
            (Exit::Jump, &[1]),
            (Exit::Return, &[]),
        ]);
        assert_eq!(a.len(), 2);
        assert!(a.contains(&vec![start(1)]), "{a:x?}");
    }
}
