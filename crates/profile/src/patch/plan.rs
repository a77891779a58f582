//! How each marker site is instrumented, decided against the control-flow graph before the
//! program runs (the parent does this; the runtime only checks the bytes are as planned).
//!
//! A 5-byte `jmp rel32` at a site overwrites the instructions that start in those 5 bytes.
//! That is safe only when control can reach none of them but the first, so the jump must end
//! inside the site's own block, before any other block start of any function (every branch
//! target, return site and function entry the analysis knows is a block start), and before
//! exception landing pad (see [`super::landing`]) or instruction reached from one: the code
//! only the unwinder enters is not in the analysis, so it is decoded here from each pad, and
//! every instruction start it reaches, by falling through or by a branch back into its
//! function, counts as a branch target. A function with an indirect
//! jump whose targets were not recovered may be entered anywhere, so there a site is jumped
//! over only when its first instruction alone is 5 bytes long. Every covered instruction must
//! also be movable (see [`super::trampoline`]).
//!
//! A site that fails these checks gets the fallback: an `int3` on its first byte (one byte
//! covers nothing else), which the runtime's `SIGTRAP` handler turns into the same events and a
//! resume at a displaced copy of the instruction (about a microsecond per execution, so only
//! where a jump cannot go). A site whose first instruction cannot be displaced at all is
//! skipped, with the reason kept in the profile. Nothing is guessed: an address whose bytes
//! do not decode, or that is in no block, is skipped too.

use std::collections::{HashMap, HashSet};

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use serde::{Deserialize, Serialize};

use loopscope_binary::Program;

use super::landing::Landings;
use super::trampoline::movable;
use crate::exact::markers::Site;

/// Bytes of the jump written over a site.
pub const JUMP_BYTES: u64 = 5;

/// How one marker site is instrumented.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SitePatch {
    /// A jump to a trampoline over the first `bytes` bytes, `instructions` whole instructions.
    Jump {
        /// Bytes displaced (at least 5).
        bytes: u32,
        /// Instructions displaced.
        instructions: u32,
    },
    /// The site's instruction lies under the jump of site `by`, whose trampoline runs this
    /// site's events just before its copy of the instruction.
    Covered {
        /// Index of the covering site.
        by: u32,
    },
    /// An `int3` on the first byte, handled in the target; `why` says why no jump fits.
    Trap {
        /// Why no jump.
        why: String,
    },
    /// Not instrumented.
    Skip {
        /// Why.
        reason: String,
    },
}

/// The code bytes at a static address (to the end of its segment).
pub trait CodeBytes {
    /// Bytes from `address` on, or `None` outside the file's code.
    fn bytes_at(&self, address: u64) -> Option<&[u8]>;
}

/// A program's file and its loadable segments.
pub struct FileCode<'a> {
    /// The whole file.
    pub data: &'a [u8],
    /// (static address, file offset, bytes in the file) per segment.
    pub segments: Vec<(u64, u64, u64)>,
}

impl<'a> FileCode<'a> {
    /// The segments of `program` over the bytes of its file.
    pub fn new(program: &Program, data: &'a [u8]) -> FileCode<'a> {
        FileCode {
            data,
            segments: program
                .segments
                .iter()
                .map(|s| (s.vaddr, s.file_offset, s.file_bytes))
                .collect(),
        }
    }
}

impl CodeBytes for FileCode<'_> {
    fn bytes_at(&self, address: u64) -> Option<&[u8]> {
        let &(vaddr, offset, bytes) = self
            .segments
            .iter()
            .find(|&&(v, _, n)| address >= v && address - v < n)?;
        let start = usize::try_from(offset + (address - vaddr)).ok()?;
        let end = usize::try_from(offset + bytes).ok()?.min(self.data.len());
        self.data.get(start..end)
    }
}

/// What the checks need to know of the whole program.
struct Graph {
    /// Every block start of every function, and the extra targets.
    starts: HashSet<u64>,
    /// Block start or last instruction → (end of the shortest such block, its function has
    /// unrecovered indirect jumps).
    extent: HashMap<u64, (u64, bool)>,
}

impl Graph {
    fn new(program: &Program, landings: &Landings, code: &dyn CodeBytes) -> Graph {
        let mut starts: HashSet<u64> = HashSet::new();
        let mut extent: HashMap<u64, (u64, bool)> = HashMap::new();
        for f in &program.functions {
            starts.insert(f.address);
            let unsure = f.unknown_jumps > 0
                || landings
                    .unsure
                    .iter()
                    .any(|&(s, e)| f.ranges.iter().any(|r| r[0] < e && s < r[1]));
            for b in &f.blocks {
                starts.insert(b.start);
                for at in [b.start, b.last] {
                    let e = extent.entry(at).or_insert((b.end, unsure));
                    *e = (e.0.min(b.end), e.1 || unsure);
                }
            }
        }
        let unwound = reached_from(&landings.pads, code, &starts);
        starts.extend(unwound);
        Graph { starts, extent }
    }
}

/// Decodes one instruction at `address` from `code`.
pub fn decode_one(code: &dyn CodeBytes, address: u64) -> Option<Instruction> {
    let bytes = code.bytes_at(address)?;
    let bytes = &bytes[..bytes.len().min(15)];
    let instr = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE).decode();
    (!instr.is_invalid()).then_some(instr)
}

/// The patch of every site (in `sites`' order, which is by address), checked against the
/// blocks of `program` and the exception tables' landing pads.
pub fn plan_sites(
    program: &Program,
    code: &dyn CodeBytes,
    sites: &[Site],
    landings: &Landings,
) -> Vec<SitePatch> {
    let graph = Graph::new(program, landings, code);
    let mut plans = Vec::with_capacity(sites.len());
    let mut covering: Option<(u32, u64)> = None;
    for (i, site) in sites.iter().enumerate() {
        if let Some((by, until)) = covering
            && site.address < until
        {
            plans.push(if graph.starts.contains(&site.address) {
                // Cannot happen (a jump stops before every block start); never patch blindly.
                SitePatch::Skip {
                    reason: "a block start under another site's jump".into(),
                }
            } else {
                SitePatch::Covered { by }
            });
            continue;
        }
        let plan = plan_one(&graph, code, site.address);
        if let SitePatch::Jump { bytes, .. } = plan {
            covering = Some((i as u32, site.address + u64::from(bytes)));
        }
        plans.push(plan);
    }
    plans
}

/// Every instruction start reachable from `pads` (code only the unwinder enters, which the
/// analysis never decoded) by falling through or by direct branches, up to the first known
/// block start on each path: control can arrive at any of them from outside any block.
/// Bounded; anything decoded in excess only makes the plan more careful.
fn reached_from(pads: &[u64], code: &dyn CodeBytes, known: &HashSet<u64>) -> HashSet<u64> {
    const MOST: usize = 1 << 20;
    let mut seen: HashSet<u64> = HashSet::new();
    let mut todo: Vec<u64> = pads.to_vec();
    while let Some(at) = todo.pop() {
        if seen.len() >= MOST || !seen.insert(at) || (known.contains(&at) && !pads.contains(&at)) {
            continue;
        }
        let Some(instr) = decode_one(code, at) else {
            continue;
        };
        match instr.flow_control() {
            FlowControl::UnconditionalBranch => todo.push(instr.near_branch_target()),
            FlowControl::ConditionalBranch => {
                todo.push(instr.near_branch_target());
                todo.push(instr.next_ip());
            }
            FlowControl::Return | FlowControl::IndirectBranch => {}
            _ => todo.push(instr.next_ip()),
        }
    }
    seen
}

fn plan_one(graph: &Graph, code: &dyn CodeBytes, address: u64) -> SitePatch {
    let skip = |reason: String| SitePatch::Skip { reason };
    let Some(&(end, unsure)) = graph.extent.get(&address) else {
        return skip("not the start or end of a block of the analysed code".into());
    };
    let Some(first) = decode_one(code, address) else {
        return skip("the bytes do not decode".into());
    };
    if let Err(why) = movable(&first) {
        return skip(format!("{why} cannot run displaced"));
    }
    let trap = |why: String| SitePatch::Trap { why };
    if unsure && (first.len() as u64) < JUMP_BYTES {
        return trap("its function has an indirect jump with unknown targets".into());
    }
    let mut covered = first.len() as u64;
    let mut instructions = 1;
    while covered < JUMP_BYTES {
        let next = address + covered;
        if next >= end {
            return trap(format!(
                "its block is {} bytes, short of a jump",
                end - address
            ));
        }
        if graph.starts.contains(&next) {
            return trap(format!("a branch target {} bytes in", next - address));
        }
        let Some(instr) = decode_one(code, next) else {
            return trap("an undecodable instruction under the jump".into());
        };
        if next + instr.len() as u64 > end {
            return trap("an instruction under the jump runs past its block".into());
        }
        if let Err(why) = movable(&instr) {
            return trap(format!("{why} under the jump"));
        }
        covered += instr.len() as u64;
        instructions += 1;
    }
    SitePatch::Jump {
        bytes: covered as u32,
        instructions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_binary::{Block, Exit, Function, SeedSource};

    struct Bytes(u64, Vec<u8>);

    impl CodeBytes for Bytes {
        fn bytes_at(&self, address: u64) -> Option<&[u8]> {
            let start = usize::try_from(address.checked_sub(self.0)?).ok()?;
            self.1.get(start..)
        }
    }

    fn block(start: u64, end: u64, last: u64, exit: Exit) -> Block {
        Block {
            start,
            end,
            last,
            instructions: 0,
            classes: Default::default(),
            tags: Default::default(),
            exit,
            succs: Vec::new(),
        }
    }

    fn program(blocks: Vec<Block>, unknown_jumps: u32) -> Program {
        Program {
            binary: String::new(),
            kind: loopscope_binary::BinaryKind::Executable,
            build_id: None,
            entry: 0,
            segments: Vec::new(),
            plt: Vec::new(),
            split: Default::default(),
            stripped: false,
            functions: vec![Function {
                name: "f".into(),
                symbol: "f".into(),
                address: blocks[0].start,
                size: 0,
                ranges: Vec::new(),
                source: SeedSource::Symbol,
                entry_block: 0,
                blocks,
                loops: Vec::new(),
                instructions: 0,
                classes: Default::default(),
                undecodable: 0,
                unknown_jumps,
                jump_tables: 0,
                noreturn: false,
            }],
            warnings: Vec::new(),
        }
    }

    fn none() -> Landings {
        Landings::default()
    }

    fn site(address: u64) -> Site {
        Site {
            address,
            ..Site::default()
        }
    }

    /// 0x1000: mov eax, edi (2); add eax, 1 (3); jne 0x1000 (2) | 0x1007: call 0x2000 (5) |
    /// 0x100c: ret.
    fn code() -> Bytes {
        let mut b = vec![0x89, 0xf8, 0x83, 0xc0, 0x01, 0x75, 0xf9];
        b.extend([0xe8, 0xf4, 0x0f, 0x00, 0x00, 0xc3]);
        Bytes(0x1000, b)
    }

    #[test]
    fn a_jump_covers_whole_instructions_inside_the_block() {
        let p = program(
            vec![
                block(0x1000, 0x1007, 0x1005, Exit::Branch),
                block(0x1007, 0x100c, 0x1007, Exit::Call),
                block(0x100c, 0x100d, 0x100c, Exit::Return),
            ],
            0,
        );
        let plans = plan_sites(
            &p,
            &code(),
            &[site(0x1000), site(0x1007), site(0x100c)],
            &none(),
        );
        assert_eq!(
            plans[0],
            SitePatch::Jump {
                bytes: 5,
                instructions: 2
            }
        );
        assert_eq!(
            plans[1],
            SitePatch::Jump {
                bytes: 5,
                instructions: 1
            },
            "a call is emulated"
        );
        assert!(
            matches!(&plans[2], SitePatch::Trap { why } if why.contains("1 bytes")),
            "{plans:?}"
        );
    }

    #[test]
    fn a_branch_target_under_the_jump_means_a_trap() {
        let p = program(
            vec![
                block(0x1000, 0x1002, 0x1000, Exit::FallThrough),
                block(0x1002, 0x1007, 0x1005, Exit::Branch),
            ],
            0,
        );
        let plans = plan_sites(&p, &code(), &[site(0x1000)], &none());
        assert!(matches!(&plans[0], SitePatch::Trap { .. }), "{plans:?}");
        // A landing pad the CFG does not know is a target as well.
        let p = program(vec![block(0x1000, 0x1007, 0x1005, Exit::Branch)], 0);
        let plans = plan_sites(
            &p,
            &code(),
            &[site(0x1000)],
            &Landings {
                pads: vec![0x1002],
                unsure: Vec::new(),
            },
        );
        assert!(matches!(&plans[0], SitePatch::Trap { why } if why.contains("2 bytes in")));
    }

    #[test]
    fn code_reached_from_a_landing_pad_is_a_branch_target() {
        // 0x1000: mov eax, edi; add eax, 1; jne 0x1000 | 0x1007: call | 0x100c: ret, and at
        // 0x1010 a pad the CFG does not know: `jmp 0x1002` (into the first block's middle).
        let mut bytes = code().1;
        bytes.extend([0x90, 0x90, 0x90, 0xeb, 0xf0]);
        let bytes = Bytes(0x1000, bytes);
        let p = program(
            vec![
                block(0x1000, 0x1007, 0x1005, Exit::Branch),
                block(0x1007, 0x100c, 0x1007, Exit::Call),
            ],
            0,
        );
        let landings = Landings {
            pads: vec![0x1010],
            unsure: Vec::new(),
        };
        let plans = plan_sites(&p, &bytes, &[site(0x1000)], &landings);
        assert!(
            matches!(&plans[0], SitePatch::Trap { why } if why.contains("2 bytes in")),
            "{plans:?}"
        );
    }

    #[test]
    fn unknown_jump_targets_allow_only_one_long_instruction() {
        let p = program(
            vec![
                block(0x1000, 0x1007, 0x1005, Exit::Branch),
                block(0x1007, 0x100c, 0x1007, Exit::Call),
            ],
            1,
        );
        let plans = plan_sites(&p, &code(), &[site(0x1000), site(0x1007)], &none());
        assert!(matches!(plans[0], SitePatch::Trap { .. }));
        assert!(matches!(plans[1], SitePatch::Jump { bytes: 5, .. }));
    }

    #[test]
    fn a_plt_call_under_a_jump_is_covered_and_unknown_places_are_skipped() {
        // 0x1000: mov eax, edi (2); call (5) — one block ending in the call.
        let bytes = Bytes(0x1000, vec![0x89, 0xf8, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3]);
        let p = program(vec![block(0x1000, 0x1007, 0x1002, Exit::Call)], 0);
        let plans = plan_sites(
            &p,
            &bytes,
            &[site(0x1000), site(0x1002), site(0x1007)],
            &none(),
        );
        assert_eq!(
            plans[0],
            SitePatch::Jump {
                bytes: 7,
                instructions: 2
            }
        );
        assert_eq!(plans[1], SitePatch::Covered { by: 0 });
        assert!(matches!(plans[2], SitePatch::Skip { .. }));
    }

    #[test]
    fn an_int3_site_is_skipped() {
        let bytes = Bytes(0x1000, vec![0xcc, 0x90, 0x90, 0x90, 0x90, 0x90]);
        let p = program(vec![block(0x1000, 0x1006, 0x1005, Exit::FallThrough)], 0);
        let plans = plan_sites(&p, &bytes, &[site(0x1000)], &none());
        assert!(matches!(&plans[0], SitePatch::Skip { reason } if reason.contains("cannot")));
    }
}
