//! Recursive-descent disassembly of one function: decode only what control flow reaches from
//! the entry, inside the function's ranges (its body and its `.cold` parts), recovering the
//! usual gcc/clang jump tables and stopping after calls that never return.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpKind,
    Register,
};

use crate::classes::{Class, Classifier};
use crate::elf::Image;

/// The address ranges `[start, end)` a function's code may occupy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ranges(pub Vec<(u64, u64)>);

impl Ranges {
    pub fn contains(&self, address: u64) -> bool {
        self.0.iter().any(|&(s, e)| (s..e).contains(&address))
    }

    fn end_of(&self, address: u64) -> Option<u64> {
        self.0
            .iter()
            .find(|&&(s, e)| (s..e).contains(&address))
            .map(|r| r.1)
    }
}

/// How an instruction passes control on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Next,
    Cond,
    Jump,
    IndirectJump,
    Call,
    IndirectCall,
    NoReturnCall,
    Return,
    /// `ud2`, `int3`, `hlt`, undecodable bytes: nothing follows.
    Stop,
}

/// A hasher for code addresses: one multiplication, where SipHash was a noticeable part of
/// the analysis of a large library. Not for keys an adversary chooses freely (addresses of
/// decoded instructions are bounded by the function's size).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(29) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A set of addresses.
pub(crate) type AddressSet = HashSet<u64, BuildHasherDefault<AddressHasher>>;
/// A map keyed by address.
pub(crate) type AddressMap<V> = HashMap<u64, V, BuildHasherDefault<AddressHasher>>;

/// One decoded instruction (its iced form is decoded again where needed: keeping it would
/// triple the memory of decoding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Insn {
    pub target: Option<u64>,
    pub tags: u16,
    pub len: u8,
    pub flow: Flow,
    pub class: Class,
}

/// Decoded instructions: in decoding order while decoding, then sorted by address.
#[derive(Debug, Default)]
pub(crate) struct Insns {
    list: Vec<(u64, Insn)>,
    /// Index into `list` of the instruction at each address.
    at: AddressMap<u32>,
}

impl Insns {
    /// Room for the instructions of `bytes` bytes of code (about four bytes each).
    fn for_code_bytes(bytes: u64) -> Insns {
        let count = (bytes / 4).min(1 << 16) as usize;
        let mut at = AddressMap::default();
        at.reserve(count);
        Insns {
            list: Vec::with_capacity(count),
            at,
        }
    }

    fn insert(&mut self, ip: u64, insn: Insn) {
        self.at.insert(ip, self.list.len() as u32);
        self.list.push((ip, insn));
    }

    fn contains(&self, ip: u64) -> bool {
        self.at.contains_key(&ip)
    }

    fn get(&self, ip: u64) -> Option<&Insn> {
        self.at.get(&ip).map(|&i| &self.list[i as usize].1)
    }

    /// Sorts by address, once decoding is done.
    fn finish(&mut self) {
        self.list.sort_unstable_by_key(|e| e.0);
        self.at = AddressMap::default();
    }

    /// The instructions in address order, once decoding is done.
    pub fn sorted(&self) -> &[(u64, Insn)] {
        &self.list
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The nearest decoded instruction below `end`, if it ends exactly there.
    fn ending_at(&self, end: u64) -> Option<(u64, &Insn)> {
        let (ip, insn) = (1..=15u64).find_map(|distance| {
            let ip = end.checked_sub(distance)?;
            self.get(ip).map(|insn| (ip, insn))
        })?;
        (ip + u64::from(insn.len) == end).then_some((ip, insn))
    }
}

/// What decoding one function found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub insns: Insns,
    /// Jump-table targets per indirect `jmp` address.
    pub tables: BTreeMap<u64, Vec<u64>>,
    /// Direct call targets.
    pub calls: Vec<u64>,
    pub undecodable: u32,
    /// Some path leaves the function other than by a call that never returns.
    pub may_return: bool,
}

/// Everything decoding needs besides the function itself.
pub(crate) struct DecodeContext<'a> {
    pub image: &'a Image,
    pub classifier: &'a Classifier,
    /// Addresses of functions and PLT stubs that never return.
    pub noreturn: &'a AddressSet,
}

/// Decodes a function from `entry`, following control flow within `ranges`.
pub(crate) fn decode_function(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    entry: u64,
    info: &mut InstructionInfoFactory,
) -> Decoded {
    let mut out = Decoded {
        insns: Insns::for_code_bytes(ranges.0.iter().map(|r| r.1.saturating_sub(r.0)).sum()),
        ..Decoded::default()
    };
    let mut work = vec![entry];
    while let Some(start) = work.pop() {
        if !out.insns.contains(start) {
            decode_run(cx, ranges, start, info, &mut out, &mut work);
        }
    }
    out.insns.finish();
    out
}

/// Decodes straight-line code from `start` until control cannot fall through.
fn decode_run(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    start: u64,
    info: &mut InstructionInfoFactory,
    out: &mut Decoded,
    work: &mut Vec<u64>,
) {
    let (Some(end), Some(bytes)) = (ranges.end_of(start), cx.image.bytes_from(start)) else {
        return;
    };
    let bytes = &bytes[..bytes.len().min((end - start) as usize)];
    let mut decoder = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
    let mut instr = Instruction::default();
    loop {
        let ip = decoder.ip();
        if ip != start && out.insns.contains(ip) {
            return;
        }
        if !decoder.can_decode() {
            out.may_return = true; // falls off the end of its range
            return;
        }
        decoder.decode_out(&mut instr);
        if instr.is_invalid() {
            out.undecodable += 1;
            out.insns.insert(ip, STOP_INSN);
            return;
        }
        let (class, tags) = cx.classifier.classify(&instr, info);
        let target = direct_target(&instr);
        let mut flow = flow_of(&instr);
        match flow {
            Flow::Cond | Flow::Jump => {
                let t = target.unwrap_or(0);
                if ranges.contains(t) {
                    work.push(t);
                } else {
                    out.may_return = true; // a tail call
                }
            }
            Flow::IndirectJump => match jump_table(cx, ranges, &out.insns, &instr) {
                Some(targets) => {
                    work.extend(&targets);
                    out.tables.insert(ip, targets);
                }
                None => out.may_return = true,
            },
            Flow::Call => {
                let t = target.unwrap_or(0);
                out.calls.push(t);
                if cx.noreturn.contains(&t) {
                    flow = Flow::NoReturnCall;
                }
            }
            Flow::Return => out.may_return = true,
            _ => {}
        }
        let len = instr.len() as u8;
        out.insns.insert(
            ip,
            Insn {
                target,
                tags,
                len,
                flow,
                class,
            },
        );
        if !matches!(
            flow,
            Flow::Next | Flow::Cond | Flow::Call | Flow::IndirectCall
        ) {
            return;
        }
    }
}

const STOP_INSN: Insn = Insn {
    target: None,
    tags: 0,
    len: 1,
    flow: Flow::Stop,
    class: Class::Int,
};

fn direct_target(instr: &Instruction) -> Option<u64> {
    match instr.op0_kind() {
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
            Some(instr.near_branch_target())
        }
        _ => None,
    }
}

fn flow_of(instr: &Instruction) -> Flow {
    match instr.flow_control() {
        FlowControl::Next | FlowControl::XbeginXabortXend => match instr.mnemonic() {
            Mnemonic::Hlt => Flow::Stop,
            _ => Flow::Next,
        },
        FlowControl::ConditionalBranch => Flow::Cond,
        FlowControl::UnconditionalBranch if direct_target(instr).is_some() => Flow::Jump,
        FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::Call if direct_target(instr).is_some() => Flow::Call,
        FlowControl::Call | FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Return => Flow::Return,
        FlowControl::Interrupt => match instr.mnemonic() {
            Mnemonic::Int3 | Mnemonic::Int1 => Flow::Stop,
            _ => Flow::Next,
        },
        FlowControl::Exception => Flow::Stop,
    }
}

/// Decodes the one instruction at `ip` again.
fn decode_at(image: &Image, ip: u64, len: u8) -> Option<Instruction> {
    let bytes = image.bytes_from(ip)?;
    let bytes = bytes.get(..usize::from(len))?;
    let instr = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode();
    (!instr.is_invalid()).then_some(instr)
}

/// The instructions straight before `ip` (nearest first), as far as they run contiguously.
fn preceding(image: &Image, insns: &Insns, ip: u64) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut end = ip;
    while out.len() < 16 {
        let Some((start, insn)) = insns.ending_at(end) else {
            break;
        };
        // Undecodable bytes stay in the run, as an invalid instruction nothing matches.
        out.push(decode_at(image, start, insn.len).unwrap_or_default());
        end = start;
    }
    out
}

const MAX_TABLE_ENTRIES: u64 = 1 << 14;

/// Recovers the targets of a switch's indirect jump, for the two usual shapes:
/// `jmp [table + index*8]` (absolute entries) and
/// `lea base,[rip+table]; movsxd r,[base+index*4]; add r,base; jmp r` (relative entries);
/// both bounded by a preceding `cmp index, N` and `ja`.
fn jump_table(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    insns: &Insns,
    jmp: &Instruction,
) -> Option<Vec<u64>> {
    let before = preceding(cx.image, insns, jmp.ip());
    let entries = table_bound(&before)?;
    let targets: Vec<u64> = if jmp.op0_kind() == OpKind::Memory {
        if jmp.memory_base() != Register::None || jmp.memory_index_scale() != 8 {
            return None;
        }
        let table = jmp.memory_displacement64();
        (0..entries)
            .map_while(|i| cx.image.read_at::<8>(table + 8 * i).map(u64::from_le_bytes))
            .collect()
    } else {
        let table = relative_table(cx.image, insns, &before, jmp.ip())?;
        (0..entries)
            .map_while(|i| {
                let entry = cx.image.read_at::<4>(table.checked_add(4 * i)?)?;
                Some(table.wrapping_add_signed(i64::from(i32::from_le_bytes(entry))))
            })
            .collect()
    };
    // A table whose entries leave the function was misread: keep the successors unknown.
    if targets.len() as u64 != entries || !targets.iter().all(|t| ranges.contains(*t)) {
        return None;
    }
    let mut targets = targets;
    targets.sort_unstable();
    targets.dedup();
    Some(targets)
}

/// The table address of the relative (PIC) shape: the `lea` feeding the `movsxd`'s base, or
/// (gcc -O0: `mov eax,[rdx+rax]; cdqe`) the nearest RIP-relative `lea`.
fn relative_table(
    image: &Image,
    insns: &Insns,
    before: &[Instruction],
    jmp_ip: u64,
) -> Option<u64> {
    let mut base = None;
    let mut nearest_lea = None;
    for instr in before {
        if instr.mnemonic() == Mnemonic::Lea && instr.is_ip_rel_memory_operand() {
            nearest_lea = nearest_lea.or(Some(instr.ip_rel_memory_address()));
        }
        match (instr.mnemonic(), base) {
            (Mnemonic::Movsxd, None)
                if instr.op1_kind() == OpKind::Memory && instr.memory_index_scale() == 4 =>
            {
                base = Some(instr.memory_base().full_register());
            }
            (Mnemonic::Lea, Some(b))
                if instr.op0_register().full_register() == b
                    && instr.is_ip_rel_memory_operand() =>
            {
                return Some(instr.ip_rel_memory_address());
            }
            _ => {}
        }
    }
    // The `lea` of the base is often hoisted out of the loop that holds the switch.
    let hoisted = base.and_then(|b| {
        nearest_below(insns, jmp_ip, 4096)
            .into_iter()
            .filter_map(|(ip, len)| decode_at(image, ip, len))
            .find_map(|i| {
                let is_base =
                    i.mnemonic() == Mnemonic::Lea && i.op0_register().full_register() == b;
                (is_base && i.is_ip_rel_memory_operand()).then(|| i.ip_rel_memory_address())
            })
    });
    hoisted.or(nearest_lea)
}

/// Up to `count` decoded instructions below `ip`, nearest first, as (address, length).
fn nearest_below(insns: &Insns, ip: u64, count: usize) -> Vec<(u64, u8)> {
    let mut below: Vec<(u64, u8)> = insns
        .list
        .iter()
        .filter(|e| e.0 < ip)
        .map(|e| (e.0, e.1.len))
        .collect();
    if below.len() > count {
        below.select_nth_unstable_by(count, |a, b| b.0.cmp(&a.0));
        below.truncate(count);
    }
    below.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
    below
}

/// The number of table entries, from the nearest `cmp reg, imm` and the `ja`/`jae` after it.
fn table_bound(before: &[Instruction]) -> Option<u64> {
    let mut inclusive = true;
    for instr in before {
        match instr.mnemonic() {
            Mnemonic::Jae | Mnemonic::Jb => inclusive = false,
            Mnemonic::Ja | Mnemonic::Jbe => inclusive = true,
            Mnemonic::Cmp if instr.op0_kind() == OpKind::Register => {
                let limit = instr.try_immediate(1).ok()?;
                let n = if inclusive {
                    limit.checked_add(1)?
                } else {
                    limit
                };
                return (n > 0 && n <= MAX_TABLE_ENTRIES).then_some(n);
            }
            _ => {}
        }
    }
    None
}
