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

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};
use serde::{Deserialize, Serialize};

use loopscope_binary::{EdgeKind, Exit, Program};

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
        /// The status flags are written before they are read from the site on (or a call or
        /// return comes first, after which the ABI keeps none), so the trampoline's fast paths
        /// may change them.
        #[serde(default)]
        flags_dead: bool,
    },
    /// A 2-byte `jmp rel8` over the first `bytes` bytes (a block too short for 5), to a 5-byte
    /// jump to the trampoline placed at `springboard`, within 128 bytes, in bytes no control
    /// reaches (padding after a jump or return, or under another site's jump).
    ShortJump {
        /// Bytes displaced (at least 2).
        bytes: u32,
        /// Instructions displaced.
        instructions: u32,
        /// Static address of the 5 bytes holding the jump to the trampoline.
        springboard: u64,
        /// As for `Jump`.
        #[serde(default)]
        flags_dead: bool,
    },
    /// A block too short for a jump, reached only by falling out of the block before it (whose
    /// last instruction is a conditional branch): the jump of site `by`, which covers that
    /// whole block, runs this site's events on its fall-through path, then jumps here, to the
    /// block left as it is.
    FallThrough {
        /// Index of the site whose jump covers the block before.
        by: u32,
        /// The status flags are dead at this block's start.
        #[serde(default)]
        flags_dead: bool,
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
    /// Every block's `[start, end)`, sorted.
    blocks: Vec<(u64, u64)>,
    /// Ends of blocks control does not fall out of (a jump, a return, a call that never
    /// returns), outside functions with unknown jump targets.
    closed_ends: HashSet<u64>,
    /// Addresses some branch, call, table, unwinder or entry names: control arrives there
    /// other than by falling out of the block before.
    named: HashSet<u64>,
    /// Block end → (its start, its exit), for the blocks of functions with known jump targets
    /// (an end shared by two blocks is left out).
    ending_at: HashMap<u64, (u64, Exit)>,
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
        let mut named: HashSet<u64> = reached_from(&landings.pads, code, &starts);
        let mut blocks = Vec::new();
        let mut closed_ends = HashSet::new();
        let mut ending_at: HashMap<u64, (u64, Exit)> = HashMap::new();
        let mut shared_ends = HashSet::new();
        for f in &program.functions {
            named.insert(f.address);
            let unsure = extent.get(&f.address).is_none_or(|e| e.1);
            for b in &f.blocks {
                blocks.push((b.start, b.end));
                let closed = !matches!(b.exit, Exit::FallThrough | Exit::Branch | Exit::Call);
                if closed && !unsure {
                    closed_ends.insert(b.end);
                }
                for succ in b.succs.iter().filter(|s| s.kind != EdgeKind::FallThrough) {
                    if let Some(target) = f.blocks.get(succ.block as usize) {
                        named.insert(target.start);
                    }
                }
                // A jump out of the function may land inside another one's block.
                if matches!(b.exit, Exit::TailCall | Exit::Jump | Exit::Branch)
                    && let Some(target) = decode_one(code, b.last)
                        .filter(|i| i.is_jmp_short_or_near() || i.is_jcc_short_or_near())
                        .map(|i| i.near_branch_target())
                {
                    named.insert(target);
                }
                if unsure || ending_at.insert(b.end, (b.start, b.exit)).is_some() {
                    shared_ends.insert(b.end);
                }
            }
        }
        for end in shared_ends {
            ending_at.remove(&end);
        }
        starts.extend(named.iter().copied());
        blocks.sort_unstable();
        Graph {
            starts,
            extent,
            blocks,
            closed_ends,
            named,
            ending_at,
        }
    }
}

/// Decodes one instruction at `address` from `code`.
pub fn decode_one(code: &dyn CodeBytes, address: u64) -> Option<Instruction> {
    let bytes = code.bytes_at(address)?;
    let bytes = &bytes[..bytes.len().min(15)];
    let instr = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE).decode();
    (!instr.is_invalid()).then_some(instr)
}

/// The patch of every site, checked against the blocks of `program` and the exception
/// tables' landing pads: `sites` (by address) with, in the same order, how each is patched.
/// Sites with no role may be added: jumps that only move a block's first instructions away to
/// make room for a springboard.
pub fn plan_sites(
    program: &Program,
    code: &dyn CodeBytes,
    sites: Vec<Site>,
    landings: &Landings,
) -> (Vec<Site>, Vec<SitePatch>) {
    let graph = Graph::new(program, landings, code);
    let mut plans: Vec<SitePatch> = sites
        .iter()
        .map(|site| plan_one(&graph, code, site.address))
        .collect();
    let carriers = fall_through_carriers(&sites, &mut plans, &graph, code);
    cover_sites(&sites, &mut plans, &graph);
    let mut added = place_springboards(&sites, &mut plans, &graph, code);
    added.extend(carriers);
    let (sites, mut plans) = merged(sites, plans, added);
    cover_sites(&sites, &mut plans, &graph);
    resolve_fall_throughs(&sites, &mut plans);
    (sites, plans)
}

/// Trapped sites whose block is reached only by falling out of the block before it, ending in
/// a conditional branch, get their events on the fall-through path of that block's
/// trampoline: its site's jump is made to cover the whole block (or, with no site there, a
/// jump with no events is added). The plan's `by` is set by [`resolve_fall_throughs`].
fn fall_through_carriers(
    sites: &[Site],
    plans: &mut [SitePatch],
    graph: &Graph,
    code: &dyn CodeBytes,
) -> Vec<(Site, SitePatch)> {
    let index: HashMap<u64, usize> = sites
        .iter()
        .enumerate()
        .map(|(i, s)| (s.address, i))
        .collect();
    let mut added = Vec::new();
    for i in 0..sites.len() {
        let address = sites[i].address;
        if !matches!(plans[i], SitePatch::Trap { .. }) || graph.named.contains(&address) {
            continue;
        }
        let Some(&(end, false)) = graph.extent.get(&address) else {
            continue;
        };
        let Some(&(before, Exit::Branch)) = graph.ending_at.get(&address) else {
            continue;
        };
        let Ok((bytes, instructions)) = cover(graph, code, before, address, address - before)
        else {
            continue;
        };
        if u64::from(bytes) != address - before || u64::from(bytes) < JUMP_BYTES {
            continue;
        }
        let carrier = SitePatch::Jump {
            bytes,
            instructions,
            flags_dead: flags_dead_from(code, before, address),
        };
        match index.get(&before) {
            Some(&j) if matches!(plans[j], SitePatch::Jump { .. }) => plans[j] = carrier,
            Some(_) => continue,
            None => added.push((
                Site {
                    address: before,
                    ..Site::default()
                },
                carrier,
            )),
        }
        plans[i] = SitePatch::FallThrough {
            by: 0,
            flags_dead: flags_dead_from(code, address, end),
        };
    }
    added
}

/// `FallThrough` plans get their carrier's index once the sites are final: the site just
/// before, whose jump ends where this block starts.
fn resolve_fall_throughs(sites: &[Site], plans: &mut [SitePatch]) {
    for i in 0..plans.len() {
        if let SitePatch::FallThrough { by, flags_dead } = plans[i] {
            let carrier = i
                .checked_sub(1)
                .filter(|&j| {
                    matches!(plans[j], SitePatch::Jump { bytes, .. }
                        if sites[j].address + u64::from(bytes) == sites[i].address)
                })
                .map(|j| j as u32);
            plans[i] = match carrier {
                Some(j) => SitePatch::FallThrough { by: j, flags_dead },
                None => SitePatch::Skip {
                    reason: "the block before it is not under one jump".into(),
                },
            };
            let _ = by;
        }
    }
}

/// `sites` with `more` added, both kept in address order with their plans.
fn merged(
    sites: Vec<Site>,
    plans: Vec<SitePatch>,
    more: Vec<(Site, SitePatch)>,
) -> (Vec<Site>, Vec<SitePatch>) {
    if more.is_empty() {
        return (sites, plans);
    }
    let mut all: Vec<(Site, SitePatch)> = sites.into_iter().zip(plans).chain(more).collect();
    all.sort_by_key(|(s, _)| s.address);
    all.into_iter().unzip()
}

/// Sites under another site's jump (PLT calls in its block) become `Covered` by it.
fn cover_sites(sites: &[Site], plans: &mut [SitePatch], graph: &Graph) {
    let mut covering: Option<(u32, u64)> = None;
    for (i, site) in sites.iter().enumerate() {
        if let Some((by, until)) = covering
            && site.address < until
        {
            plans[i] = if graph.starts.contains(&site.address) {
                // Cannot happen (a jump stops before every block start); never patch blindly.
                SitePatch::Skip {
                    reason: "a block start under another site's jump".into(),
                }
            } else {
                SitePatch::Covered { by }
            };
            continue;
        }
        if let SitePatch::Jump { bytes, .. } = plans[i] {
            covering = Some((i as u32, site.address + u64::from(bytes)));
        }
    }
}

/// The reach of a `jmp rel8`'s target from the jump at `at`: `[at + 2 - 128, at + 2 + 127]`.
fn short_reach(at: u64) -> (u64, u64) {
    (at.saturating_sub(126), at + 129)
}

/// Bytes that no control reaches, where 5-byte springboards can go.
struct Room {
    /// Free `[start, end)` spans.
    spans: Vec<(u64, u64)>,
}

impl Room {
    fn new(mut spans: Vec<(u64, u64)>) -> Room {
        spans.sort_unstable();
        Room { spans }
    }

    /// Adds a free span (disjoint from the others).
    fn add(&mut self, span: (u64, u64)) {
        let i = self.spans.partition_point(|s| s.0 < span.0);
        self.spans.insert(i, span);
    }

    /// 5 free bytes starting within `[low, high]`, taken.
    fn take(&mut self, low: u64, high: u64) -> Option<u64> {
        let first = self.spans.partition_point(|s| s.1 < low + JUMP_BYTES);
        let i = (first..self.spans.len())
            .take_while(|&i| self.spans[i].0 <= high)
            .find(|&i| {
                let (s, e) = self.spans[i];
                e.saturating_sub(s) >= JUMP_BYTES
                    && s.max(low) + JUMP_BYTES <= e
                    && s.max(low) <= high
            })?;
        let (s, e) = self.spans.remove(i);
        let at = s.max(low);
        if at + JUMP_BYTES < e {
            self.spans.insert(i, (at + JUMP_BYTES, e));
        }
        if at > s {
            self.spans.insert(i, (s, at));
        }
        Some(at)
    }
}

/// The padding after blocks that control does not fall out of: `nop`s and `int3`s up to the
/// next block.
fn padding(graph: &Graph, code: &dyn CodeBytes) -> Vec<(u64, u64)> {
    // The furthest end of the blocks up to each one (blocks may overlap).
    let furthest: Vec<u64> = graph
        .blocks
        .iter()
        .scan(0u64, |m, &(_, e)| {
            *m = (*m).max(e);
            Some(*m)
        })
        .collect();
    let mut spans = Vec::new();
    for &end in &graph.closed_ends {
        // No block may hold `end`, and the padding stops at the next block.
        let before = graph.blocks.partition_point(|b| b.0 <= end);
        if before > 0 && furthest[before - 1] > end {
            continue;
        }
        let next = graph.blocks.get(before).map_or(u64::MAX, |b| b.0);
        let mut at = end;
        while at < next {
            let Some(instr) = decode_one(code, at) else {
                break;
            };
            let padding = matches!(instr.mnemonic(), Mnemonic::Nop | Mnemonic::Int3);
            if !padding || instr.next_ip() > next || graph.starts.contains(&at) {
                break;
            }
            at = instr.next_ip();
        }
        if at > end {
            spans.push((end, at));
        }
    }
    spans.sort_unstable();
    spans
}

/// Gives each trapped site whose block is at least 2 bytes a `jmp rel8` to a springboard:
/// free padding or the tail of a jump first, else a nearby jump lengthened to 10 bytes (its
/// block allowing) to make the room.
fn place_springboards(
    sites: &[Site],
    plans: &mut [SitePatch],
    graph: &Graph,
    code: &dyn CodeBytes,
) -> Vec<(Site, SitePatch)> {
    let taken: HashSet<u64> = sites.iter().map(|s| s.address).collect();
    let mut room_makers: Vec<(Site, SitePatch)> = Vec::new();
    let mut spans = padding(graph, code);
    for (site, plan) in sites.iter().zip(plans.iter()) {
        if let SitePatch::Jump { bytes, .. } = *plan
            && u64::from(bytes) > JUMP_BYTES
        {
            spans.push((site.address + JUMP_BYTES, site.address + u64::from(bytes)));
        }
    }
    let mut room = Room::new(spans);
    for i in 0..sites.len() {
        if !matches!(plans[i], SitePatch::Trap { .. }) {
            continue;
        }
        let address = sites[i].address;
        let Some(&(end, false)) = graph.extent.get(&address) else {
            continue;
        };
        let Ok((bytes, instructions)) = cover(graph, code, address, end, 2) else {
            continue;
        };
        let (low, high) = short_reach(address);
        let springboard = room
            .take(low, high)
            .or_else(|| lengthen_a_jump(sites, plans, graph, code, &mut room, low, high))
            .or_else(|| {
                let (maker, plan) = make_room(graph, code, &taken, &room_makers, low, high)?;
                if let SitePatch::Jump { bytes, .. } = plan {
                    room.add((maker + JUMP_BYTES, maker + u64::from(bytes)));
                }
                let site = Site {
                    address: maker,
                    ..Site::default()
                };
                room_makers.push((site, plan));
                room.take(low, high)
            });
        if let Some(springboard) = springboard {
            plans[i] = SitePatch::ShortJump {
                bytes,
                instructions,
                springboard,
                flags_dead: flags_dead_from(code, address, end),
            };
        }
    }
    room_makers
}

/// A block with no site, starting where its jump's free tail would fall in `[low, high]`,
/// whose first 10 bytes can move to a trampoline of their own (no events: a jump there and a
/// jump back, for whoever runs that block) to make the room.
fn make_room(
    graph: &Graph,
    code: &dyn CodeBytes,
    taken: &HashSet<u64>,
    made: &[(Site, SitePatch)],
    low: u64,
    high: u64,
) -> Option<(u64, SitePatch)> {
    let first = graph.blocks.partition_point(|b| b.0 + JUMP_BYTES < low);
    graph.blocks[first..]
        .iter()
        .take_while(|b| b.0 + JUMP_BYTES <= high)
        .filter(|b| !taken.contains(&b.0) && !made.iter().any(|(s, _)| s.address == b.0))
        .find_map(|&(start, _)| {
            let &(end, unsure) = graph.extent.get(&start)?;
            if unsure {
                return None;
            }
            let (bytes, instructions) = cover(graph, code, start, end, 2 * JUMP_BYTES).ok()?;
            Some((
                start,
                SitePatch::Jump {
                    bytes,
                    instructions,
                    flags_dead: false,
                },
            ))
        })
}

/// Lengthens the jump of a site whose free tail would start within `[low, high]` to cover 10
/// bytes of its block, adds the tail to the room, and takes 5 bytes of it.
fn lengthen_a_jump(
    sites: &[Site],
    plans: &mut [SitePatch],
    graph: &Graph,
    code: &dyn CodeBytes,
    room: &mut Room,
    low: u64,
    high: u64,
) -> Option<u64> {
    let first = sites.partition_point(|s| s.address + JUMP_BYTES < low);
    for j in first..sites.len() {
        let address = sites[j].address;
        if address + JUMP_BYTES > high {
            break;
        }
        let SitePatch::Jump {
            bytes, flags_dead, ..
        } = plans[j]
        else {
            continue;
        };
        if u64::from(bytes) > JUMP_BYTES {
            continue; // its tail is in the room already, and too short
        }
        let Some(&(end, false)) = graph.extent.get(&address) else {
            continue;
        };
        if let Ok((longer, instructions)) = cover(graph, code, address, end, 2 * JUMP_BYTES) {
            plans[j] = SitePatch::Jump {
                bytes: longer,
                instructions,
                flags_dead,
            };
            room.add((address + JUMP_BYTES, address + u64::from(longer)));
            if let Some(at) = room.take(low, high) {
                return Some(at);
            }
        }
    }
    None
}

/// The whole instructions from `address` covering at least `at_least` bytes, all inside the
/// block ending at `end`, none a branch target but the first, each movable: (bytes,
/// instructions), or why not.
fn cover(
    graph: &Graph,
    code: &dyn CodeBytes,
    address: u64,
    end: u64,
    at_least: u64,
) -> Result<(u32, u32), String> {
    let mut covered = 0u64;
    let mut instructions = 0;
    while covered < at_least {
        let next = address + covered;
        if next >= end {
            return Err(format!(
                "its block is {} bytes, short of a jump",
                end - address
            ));
        }
        if covered > 0 && graph.starts.contains(&next) {
            return Err(format!("a branch target {} bytes in", next - address));
        }
        let Some(instr) = decode_one(code, next) else {
            return Err("an undecodable instruction under the jump".into());
        };
        if next + instr.len() as u64 > end {
            return Err("an instruction under the jump runs past its block".into());
        }
        if let Err(why) = movable(&instr) {
            return Err(format!("{why} under the jump"));
        }
        covered += instr.len() as u64;
        instructions += 1;
    }
    Ok((covered as u32, instructions))
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
    match cover(graph, code, address, end, JUMP_BYTES) {
        Ok((bytes, instructions)) => SitePatch::Jump {
            bytes,
            instructions,
            flags_dead: flags_dead_from(code, address, end),
        },
        Err(why) => trap(why),
    }
}

/// The six status flags (iced's `RflagsBits` OF, SF, ZF, AF, CF, PF).
const STATUS_FLAGS: u32 = 0x3f;

/// Whether the status flags are dead at `address`: along the block up to `end`, each is
/// written before it is read, or a call or return comes first. Conservative: anything else
/// (the block ends, a branch, an undecodable byte) counts as live.
fn flags_dead_from(code: &dyn CodeBytes, address: u64, end: u64) -> bool {
    let mut written = 0;
    let mut at = address;
    while at < end {
        let Some(instr) = decode_one(code, at) else {
            return false;
        };
        if instr.rflags_read() & STATUS_FLAGS & !written != 0 {
            return false;
        }
        written |= instr.rflags_modified() & STATUS_FLAGS;
        if written == STATUS_FLAGS {
            return true;
        }
        match instr.flow_control() {
            FlowControl::Next => {}
            FlowControl::Call | FlowControl::IndirectCall | FlowControl::Return => return true,
            _ => return false,
        }
        at = instr.next_ip();
    }
    false
}

/// Whether any instruction of the program's blocks is VEX, EVEX or XOP encoded: then its sites
/// may have live upper halves of vector registers, which the slow path must save.
pub fn uses_vector_extensions(program: &Program, code: &dyn CodeBytes) -> bool {
    program.functions.iter().flat_map(|f| &f.blocks).any(|b| {
        let mut at = b.start;
        while at < b.end {
            let Some(instr) = decode_one(code, at) else {
                return false;
            };
            if !matches!(instr.encoding(), iced_x86::EncodingKind::Legacy) {
                return true;
            }
            at = instr.next_ip();
        }
        false
    })
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
            vec![site(0x1000), site(0x1007), site(0x100c)],
            &none(),
        )
        .1;
        // mov; add (writes every status flag): dead. The call: dead (nothing survives it).
        assert_eq!(
            plans[0],
            SitePatch::Jump {
                bytes: 5,
                instructions: 2,
                flags_dead: true,
            }
        );
        assert_eq!(
            plans[1],
            SitePatch::Jump {
                bytes: 5,
                instructions: 1,
                flags_dead: true,
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
        let plans = plan_sites(&p, &code(), vec![site(0x1000)], &none()).1;
        assert!(matches!(&plans[0], SitePatch::Trap { .. }), "{plans:?}");
        // A landing pad the CFG does not know is a target as well.
        let p = program(vec![block(0x1000, 0x1007, 0x1005, Exit::Branch)], 0);
        let plans = plan_sites(
            &p,
            &code(),
            vec![site(0x1000)],
            &Landings {
                pads: vec![0x1002],
                unsure: Vec::new(),
            },
        )
        .1;
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
        let plans = plan_sites(&p, &bytes, vec![site(0x1000)], &landings).1;
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
        let plans = plan_sites(&p, &code(), vec![site(0x1000), site(0x1007)], &none()).1;
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
            vec![site(0x1000), site(0x1002), site(0x1007)],
            &none(),
        )
        .1;
        assert_eq!(
            plans[0],
            SitePatch::Jump {
                bytes: 7,
                instructions: 2,
                flags_dead: true,
            }
        );
        assert_eq!(plans[1], SitePatch::Covered { by: 0 });
        assert!(matches!(plans[2], SitePatch::Skip { .. }));
    }

    #[test]
    fn a_short_block_jumps_to_a_springboard_in_padding_or_a_lengthened_jump() {
        // 0x1000: inc eax; jne 0x1000 (4 bytes, a loop) | 0x1004: ret | 0x1005: 7 bytes of nop
        // padding | 0x100c: a long block (mov eax, 1 ×4 then ret).
        let mut bytes = vec![0xff, 0xc0, 0x75, 0xfc, 0xc3];
        bytes.extend([0x0f, 0x1f, 0x80, 0, 0, 0, 0]);
        for _ in 0..4 {
            bytes.extend([0xb8, 1, 0, 0, 0]);
        }
        bytes.push(0xc3);
        let bytes = Bytes(0x1000, bytes);
        let blocks = vec![
            block(0x1000, 0x1004, 0x1002, Exit::Branch),
            block(0x1004, 0x1005, 0x1004, Exit::Return),
            block(0x100c, 0x1021, 0x1020, Exit::Return),
        ];
        let p = program(blocks.clone(), 0);
        let sites = [site(0x1000), site(0x100c)];
        let plans = plan_sites(&p, &bytes, sites.to_vec(), &none()).1;
        assert_eq!(
            plans[0],
            SitePatch::ShortJump {
                bytes: 2,
                instructions: 1,
                springboard: 0x1005,
                flags_dead: false,
            },
            "inc leaves CF, which jne does not read, but the block ends: {plans:?}"
        );
        // Without the padding (a fall-through block there), the long block's jump grows.
        let mut blocks = blocks;
        blocks[1] = block(0x1004, 0x100c, 0x1004, Exit::FallThrough);
        let p = program(blocks, 0);
        let plans = plan_sites(&p, &bytes, sites.to_vec(), &none()).1;
        assert!(
            matches!(
                plans[0],
                SitePatch::ShortJump {
                    springboard: 0x1011,
                    ..
                }
            ),
            "{plans:?}"
        );
        assert!(
            matches!(plans[1], SitePatch::Jump { bytes: 10, .. }),
            "{plans:?}"
        );
        // With no site there, the long block's first instructions move to make the room.
        let (all, plans) = plan_sites(&p, &bytes, vec![site(0x1000)], &none());
        assert_eq!(all.len(), 2, "a site added: {all:?}");
        assert_eq!((all[1].address, all[1].block.is_none()), (0x100c, true));
        assert!(
            matches!(plans[1], SitePatch::Jump { bytes: 10, .. }),
            "{plans:?}"
        );
        assert!(
            matches!(
                plans[0],
                SitePatch::ShortJump {
                    springboard: 0x1011,
                    ..
                }
            ),
            "{plans:?}"
        );
    }

    #[test]
    fn a_one_byte_block_after_a_branch_gets_its_events_on_the_fall_through_path() {
        // 0x1000: mov eax, 1 (5); jbe 0x1010 (2) | 0x1007: ret | padding | 0x1010: ret.
        let mut bytes = vec![0xb8, 1, 0, 0, 0, 0x76, 0x09, 0xc3];
        bytes.extend([0xcc; 8]);
        bytes.push(0xc3);
        let bytes = Bytes(0x1000, bytes);
        let mut a = block(0x1000, 0x1007, 0x1005, Exit::Branch);
        a.succs = vec![
            loopscope_binary::Succ {
                block: 2,
                kind: EdgeKind::Taken,
            },
            loopscope_binary::Succ {
                block: 1,
                kind: EdgeKind::FallThrough,
            },
        ];
        let blocks = vec![
            a,
            block(0x1007, 0x1008, 0x1007, Exit::Return),
            block(0x1010, 0x1011, 0x1010, Exit::Return),
        ];
        let p = program(blocks, 0);
        let (all, plans) = plan_sites(&p, &bytes, vec![site(0x1007), site(0x1010)], &none());
        assert_eq!(all[0].address, 0x1000, "a carrier added: {all:?}");
        assert_eq!(
            plans[0],
            SitePatch::Jump {
                bytes: 7,
                instructions: 2,
                flags_dead: false,
            }
        );
        assert!(
            matches!(plans[1], SitePatch::FallThrough { by: 0, .. }),
            "{plans:?}"
        );
        // 0x1010 is a branch target: no carrier can stand for it.
        assert!(matches!(plans[2], SitePatch::Trap { .. }), "{plans:?}");
    }

    #[test]
    fn flags_read_before_written_are_live() {
        // 0x1000: adc eax, 1 (reads CF) | 0x1003: inc eax (leaves CF); jb (reads CF).
        let bytes = Bytes(0x1000, vec![0x83, 0xd0, 0x01, 0xff, 0xc0, 0x72, 0xf9]);
        assert!(!flags_dead_from(&bytes, 0x1000, 0x1007));
        assert!(!flags_dead_from(&bytes, 0x1003, 0x1007));
        // add eax, 1 then jb: CF written first.
        let bytes = Bytes(0x1000, vec![0x83, 0xc0, 0x01, 0x72, 0xfb]);
        assert!(flags_dead_from(&bytes, 0x1000, 0x1005));
    }

    #[test]
    fn an_int3_site_is_skipped() {
        let bytes = Bytes(0x1000, vec![0xcc, 0x90, 0x90, 0x90, 0x90, 0x90]);
        let p = program(vec![block(0x1000, 0x1006, 0x1005, Exit::FallThrough)], 0);
        let plans = plan_sites(&p, &bytes, vec![site(0x1000)], &none()).1;
        assert!(matches!(&plans[0], SitePatch::Skip { reason } if reason.contains("cannot")));
    }
}
