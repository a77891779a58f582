//! The whole analysis of a binary: functions, blocks, loops, classes and source lines.

use iced_x86::InstructionInfoFactory;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::blocks::{Block, EdgeKind, SplitMode, build_blocks};
use crate::classes::{ClassCounts, Classifier, TagCounts};
use crate::decode::{AddressSet, DecodeContext, Ranges, decode_function};
use crate::demangle::demangle;
use crate::elf::{BinaryKind, Image, LoadSegment, PltRange};
use crate::lines::{Frame, SourceLines};
use crate::loops::{Graph, LoopKind, RawLoop, havlak};
use crate::seeds::{Seed, SeedSource, call_target_seeds, function_seeds, is_noreturn_name};

/// How to analyse.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Block splitting rule.
    pub split: SplitMode,
    /// Instruction classes (default, or with a user table).
    pub classifier: Classifier,
    /// Map loops to source lines (needs DWARF line tables).
    pub lines: bool,
}

/// An edge between two blocks of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// Source block index.
    pub from: u32,
    /// Target block index.
    pub to: u32,
    /// Taken, fall-through or jump-table edge of the source's last instruction.
    pub kind: EdgeKind,
}

/// One loop of the forest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loop {
    /// Static loop id, sequential in (function address, header address) order.
    pub id: u32,
    /// Id of the enclosing loop.
    pub parent: Option<u32>,
    /// 1 for outermost loops.
    pub depth: u32,
    /// Reducible, irreducible or a self loop.
    pub kind: LoopKind,
    /// Address of the header block's first instruction.
    pub header: u64,
    /// Index of the header block.
    pub header_block: u32,
    /// Source file of the loop's line in the function's own code: for inlined code, the file of
    /// the outermost call site (the user's source, not the inlined header file, which is the
    /// first frame of `inlined`).
    pub file: Option<String>,
    /// Source line of the loop's own test (of the branches that leave it, the one on the
    /// smallest line), else of its header; of the outermost call site for inlined code.
    pub line: Option<u32>,
    /// Smallest line of the loop's code in `file`, less code scheduled into it from before the
    /// loop; `line` when none of the loop's code is in `file` itself (all of it inlined).
    pub line_min: Option<u32>,
    /// Largest line of the loop's code in `file`.
    pub line_max: Option<u32>,
    /// The inlined call chain at the loop's line, innermost first, when that is inlined code
    /// (or its header is, called from the loop's line).
    pub inlined: Vec<Frame>,
    /// Number of blocks, nested loops included.
    pub blocks: u64,
    /// The blocks (indices into the function's blocks).
    pub block_ids: Vec<u32>,
    /// Static instruction count of the region.
    pub instructions: u64,
    /// Static class mix of the region.
    pub classes: ClassCounts,
    /// Static tag counts of the region.
    pub tags: TagCounts,
    /// Edges back to the header from inside.
    pub back_edges: Vec<Edge>,
    /// Edges from outside into the region.
    pub entry_edges: Vec<Edge>,
    /// Edges from the region to outside.
    pub exit_edges: Vec<Edge>,
}

/// One function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Function {
    /// Demangled name (or `func_0x…` when found without a symbol).
    pub name: String,
    /// The symbol as written in the file.
    pub symbol: String,
    /// Entry address (link-time).
    pub address: u64,
    /// Bytes of the main body.
    pub size: u64,
    /// Code ranges `[start, end)`: the body and any `.cold` parts.
    pub ranges: Vec<[u64; 2]>,
    /// How the function was found.
    pub source: SeedSource,
    /// Index of the entry block.
    pub entry_block: u32,
    /// Blocks in address order.
    pub blocks: Vec<Block>,
    /// Loops in header-address order.
    pub loops: Vec<Loop>,
    /// Instructions decoded.
    pub instructions: u64,
    /// Static class mix.
    pub classes: ClassCounts,
    /// Undecodable byte sequences met.
    pub undecodable: u32,
    /// Indirect jumps whose targets stay unknown.
    pub unknown_jumps: u32,
    /// Jump tables recovered.
    pub jump_tables: u32,
    /// No path returns.
    pub noreturn: bool,
}

/// The analysis of one binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The file as given.
    pub binary: String,
    /// Executable, PIE or shared library.
    pub kind: BinaryKind,
    /// GNU build-id (hex).
    pub build_id: Option<String>,
    /// Entry point.
    pub entry: u64,
    /// `PT_LOAD` segments.
    pub segments: Vec<LoadSegment>,
    /// PLT sections.
    pub plt: Vec<PltRange>,
    /// The block splitting rule used.
    pub split: SplitMode,
    /// No function symbols: functions come from `.eh_frame` and call targets.
    pub stripped: bool,
    /// Functions in address order.
    pub functions: Vec<Function>,
    /// Local damage skipped during the analysis.
    pub warnings: Vec<String>,
}

struct Analysed {
    function: Function,
    calls: Vec<u64>,
    may_return: bool,
}

/// The functions [`Program::analyze_functions`] analyses: those whose code contains one of
/// `addresses` (link-time addresses, e.g. samples minus the load bias), and those named in
/// `names` (demangled, the raw symbol, or the demangled name without its parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionFilter {
    /// Addresses inside the wanted functions (their body or a `.cold` part).
    pub addresses: Vec<u64>,
    /// Names of the wanted functions.
    pub names: Vec<String>,
}

impl FunctionFilter {
    /// The indices of the seeds the filter picks, in seed order.
    fn pick(&self, seeds: &[Seed]) -> Vec<usize> {
        let mut picked = vec![false; seeds.len()];
        let mut ranges: Vec<(u64, u64, usize)> = seeds
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.ranges.iter().map(move |r| (r.0, r.1, i)))
            .collect();
        ranges.sort_unstable();
        for &address in &self.addresses {
            let below = ranges.partition_point(|r| r.0 <= address);
            for r in ranges[..below].iter().rev().take(64) {
                if address < r.1 {
                    picked[r.2] = true;
                }
            }
        }
        for (i, seed) in seeds.iter().enumerate() {
            let named = self.names.iter().any(|n| {
                *n == seed.name || *n == seed.symbol || seed.name.split('(').next() == Some(n)
            });
            picked[i] |= named;
        }
        (0..seeds.len()).filter(|&i| picked[i]).collect()
    }
}

impl Program {
    /// Analyses every function of an image.
    pub fn analyze(image: &Image, options: &Options) -> Program {
        let mut seeds = function_seeds(image);
        let stripped = !seeds.iter().any(|s| s.source == SeedSource::Symbol);
        let mut noreturn = named_noreturn(image, &seeds);
        let mut done = analyse_all(image, options, &seeds, &noreturn);
        for _ in 0..3 {
            let new_seeds = call_target_seeds(image, &seeds, done.iter().flat_map(|a| &a.calls));
            if new_seeds.is_empty() {
                break;
            }
            done.extend(analyse_all(image, options, &new_seeds, &noreturn));
            seeds.extend(new_seeds);
        }
        refine_noreturn(image, options, &seeds, &mut done, &mut noreturn);
        let functions = done.into_iter().map(|a| a.function).collect();
        Program::assemble(image, options, stripped, functions)
    }

    /// Analyses only the functions `filter` picks, for a profiler that needs the functions its
    /// samples touch: in a large library this is a small part of the whole analysis. Their
    /// direct callees are decoded too, to learn which never return, so the picked functions'
    /// blocks and loops are those [`Program::analyze`] finds (unless a callee's not returning
    /// is only seen further down the call graph). Functions that only stripped code's call
    /// targets reveal are not found. Loop ids are sequential over the picked functions, so
    /// they differ from the whole analysis's: match loops by function and header address.
    pub fn analyze_functions(image: &Image, options: &Options, filter: &FunctionFilter) -> Program {
        let all = function_seeds(image);
        let stripped = !all.iter().any(|s| s.source == SeedSource::Symbol);
        let mut noreturn = named_noreturn(image, &all);
        let picked = filter.pick(&all);
        let mut seeds: Vec<Seed> = picked.iter().map(|&i| all[i].clone()).collect();
        let mut done = analyse_all(image, options, &seeds, &noreturn);
        let callees = FunctionFilter {
            addresses: done.iter().flat_map(|a| a.calls.iter().copied()).collect(),
            names: Vec::new(),
        };
        let callee_seeds: Vec<Seed> = callees
            .pick(&all)
            .into_iter()
            .filter(|i| picked.binary_search(i).is_err())
            .map(|i| all[i].clone())
            .collect();
        done.extend(analyse_all(image, options, &callee_seeds, &noreturn));
        seeds.extend(callee_seeds);
        refine_noreturn(image, options, &seeds, &mut done, &mut noreturn);
        done.truncate(picked.len());
        let functions = done.into_iter().map(|a| a.function).collect();
        Program::assemble(image, options, stripped, functions)
    }

    /// The program around analysed functions: sorted, loops numbered, source lines added.
    fn assemble(
        image: &Image,
        options: &Options,
        stripped: bool,
        mut functions: Vec<Function>,
    ) -> Program {
        functions.sort_by_key(|f| f.address);
        number_loops(&mut functions);
        let mut warnings = image.warnings.clone();
        if options.lines {
            match SourceLines::open(&image.path) {
                Ok(lines) => functions.iter_mut().for_each(|f| lines.annotate(f)),
                Err(e) => warnings.push(format!("no source lines: {e}")),
            }
        }
        Program {
            binary: image.path.display().to_string(),
            kind: image.kind,
            build_id: image.build_id.clone(),
            entry: image.entry,
            segments: image.segments.clone(),
            plt: image.plt.clone(),
            split: options.split,
            stripped,
            functions,
            warnings,
        }
    }

    /// The function of that name (demangled, or the raw symbol), or the one starting at that
    /// address when `name` is hexadecimal (`0x401126`).
    pub fn function(&self, name: &str) -> Option<&Function> {
        let address = name
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        self.functions.iter().find(|f| {
            f.name == name
                || f.symbol == name
                || Some(f.address) == address
                || f.name.split('(').next() == Some(name)
        })
    }

    /// Number of loops in all functions.
    pub fn loop_count(&self) -> usize {
        self.functions.iter().map(|f| f.loops.len()).sum()
    }
}

/// PLT stubs and functions that never return by their names.
fn named_noreturn(image: &Image, seeds: &[Seed]) -> AddressSet {
    let mut noreturn: AddressSet = image
        .plt_names
        .iter()
        // Stubs carry the raw symbol: C++'s `std::__throw_*` are only known demangled.
        .filter(|(_, name)| is_noreturn_name(name, &demangle(name)))
        .map(|(&a, _)| a)
        .collect();
    noreturn.extend(
        seeds
            .iter()
            .filter(|s| is_noreturn_name(&s.symbol, &s.name))
            .map(|s| s.address),
    );
    noreturn
}

/// Functions whose every path ends in a call that never returns are noreturn too; calls to
/// them must not fall through, so the callers are decoded again.
fn refine_noreturn(
    image: &Image,
    options: &Options,
    seeds: &[Seed],
    done: &mut [Analysed],
    noreturn: &mut AddressSet,
) {
    for _ in 0..3 {
        let found: AddressSet = done
            .iter()
            .filter(|a| !a.may_return && a.function.instructions > 0)
            .map(|a| a.function.address)
            .filter(|a| !noreturn.contains(a))
            .collect();
        if found.is_empty() {
            return;
        }
        noreturn.extend(&found);
        let redo: Vec<usize> = (0..done.len())
            .filter(|&i| done[i].calls.iter().any(|c| found.contains(c)))
            .collect();
        let redone: Vec<Analysed> = redo
            .par_iter()
            .map_init(InstructionInfoFactory::new, |info, &i| {
                let seed = &seeds[i];
                analyse_one(image, options, noreturn, seed, info)
            })
            .collect();
        for (i, a) in redo.into_iter().zip(redone) {
            done[i] = a;
        }
    }
}

fn analyse_all(
    image: &Image,
    options: &Options,
    seeds: &[Seed],
    noreturn: &AddressSet,
) -> Vec<Analysed> {
    seeds
        .par_iter()
        .map_init(InstructionInfoFactory::new, |info, seed| {
            analyse_one(image, options, noreturn, seed, info)
        })
        .collect()
}

fn analyse_one(
    image: &Image,
    options: &Options,
    noreturn: &AddressSet,
    seed: &Seed,
    info: &mut InstructionInfoFactory,
) -> Analysed {
    let cx = DecodeContext {
        image,
        classifier: &options.classifier,
        noreturn,
    };
    let ranges = Ranges(seed.ranges.clone());
    let decoded = decode_function(&cx, &ranges, seed.address, info);
    let (blocks, entry_block) = build_blocks(&decoded, &ranges, seed.address, options.split);
    let graph = Graph::from_iter(
        blocks.len(),
        blocks.iter().map(|b| b.succs.iter().map(|s| s.block)),
    );
    let raw = match graph {
        Some(graph) if !blocks.is_empty() => havlak(&graph, entry_block),
        _ => Vec::new(),
    };
    let loops = make_loops(&blocks, raw);
    let mut classes = ClassCounts::default();
    blocks.iter().for_each(|b| classes.merge(&b.classes));
    let unknown_jumps = blocks
        .iter()
        .filter(|b| b.exit == crate::Exit::UnknownJump)
        .count();
    let function = Function {
        name: seed.name.clone(),
        symbol: seed.symbol.clone(),
        address: seed.address,
        size: seed.ranges.first().map_or(0, |r| r.1 - r.0),
        ranges: seed.ranges.iter().map(|&(s, e)| [s, e]).collect(),
        source: seed.source,
        entry_block,
        instructions: classes.total(),
        classes,
        undecodable: decoded.undecodable,
        unknown_jumps: unknown_jumps as u32,
        jump_tables: decoded.tables.len() as u32,
        noreturn: !decoded.may_return && !decoded.insns.is_empty(),
        blocks,
        loops,
    };
    Analysed {
        function,
        calls: decoded.calls,
        may_return: decoded.may_return,
    }
}

/// Turns the forest into loops with their block-level facts; ids are set later.
fn make_loops(blocks: &[Block], raw: Vec<RawLoop>) -> Vec<Loop> {
    let edge = |&(from, to): &(u32, u32)| Edge {
        from,
        to,
        kind: blocks[from as usize]
            .succs
            .iter()
            .find(|s| s.block == to)
            .map_or(EdgeKind::FallThrough, |s| s.kind),
    };
    let mut loops: Vec<Loop> = Vec::with_capacity(raw.len());
    for r in &raw {
        let mut classes = ClassCounts::default();
        let mut tags = TagCounts::default();
        for &b in &r.blocks {
            classes.merge(&blocks[b as usize].classes);
            tags.merge(&blocks[b as usize].tags);
        }
        let depth = r.parent.map_or(1, |p| loops[p].depth + 1);
        loops.push(Loop {
            id: 0,
            parent: r.parent.map(|p| p as u32), // forest index until numbered
            depth,
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
            instructions: classes.total(),
            classes,
            tags,
            back_edges: r.back_edges.iter().map(edge).collect(),
            entry_edges: r.entry_edges.iter().map(edge).collect(),
            exit_edges: r.exit_edges.iter().map(edge).collect(),
        });
    }
    loops
}

/// Static loop ids: sequential in (function address, header address) order.
fn number_loops(functions: &mut [Function]) {
    let mut next = 0u32;
    for f in functions {
        let mut order: Vec<usize> = (0..f.loops.len()).collect();
        order.sort_by_key(|&i| f.loops[i].header);
        let mut id_of = vec![0u32; f.loops.len()];
        for &i in &order {
            id_of[i] = next;
            next += 1;
        }
        for l in &mut f.loops {
            l.parent = l.parent.map(|p| id_of[p as usize]);
        }
        for (i, l) in f.loops.iter_mut().enumerate() {
            l.id = id_of[i];
        }
        f.loops.sort_by_key(|l| l.id);
    }
}

/// Demangles in parallel: C++ demangling is the slow part of reading big symbol tables.
pub(crate) fn demangle_all(raw: &[String]) -> Vec<String> {
    raw.par_iter().map(|r| demangle(r)).collect()
}
