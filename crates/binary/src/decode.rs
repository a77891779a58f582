//! Recursive-descent disassembly of one function: decode only what control flow reaches from
//! the entry, inside the function's ranges (its body and its `.cold` parts), recovering the
//! usual gcc/clang jump tables and stopping after calls that never return.

use std::collections::{BTreeMap, HashSet};

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

/// One decoded instruction.
#[derive(Debug, Clone)]
pub(crate) struct Insn {
    pub len: u8,
    pub flow: Flow,
    /// The direct near target of a branch or call.
    pub target: Option<u64>,
    pub class: Class,
    pub tags: u16,
    instr: Instruction,
}

/// What decoding one function found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub insns: BTreeMap<u64, Insn>,
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
    pub noreturn: &'a HashSet<u64>,
}

/// Decodes a function from `entry`, following control flow within `ranges`.
pub(crate) fn decode_function(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    entry: u64,
    info: &mut InstructionInfoFactory,
) -> Decoded {
    let mut out = Decoded::default();
    let mut work = vec![entry];
    while let Some(start) = work.pop() {
        if !out.insns.contains_key(&start) {
            decode_run(cx, ranges, start, info, &mut out, &mut work);
        }
    }
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
        if ip != start && out.insns.contains_key(&ip) {
            return;
        }
        if !decoder.can_decode() {
            out.may_return = true; // falls off the end of its range
            return;
        }
        decoder.decode_out(&mut instr);
        if instr.is_invalid() {
            out.undecodable += 1;
            out.insns.insert(ip, stop_insn(instr));
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
                len,
                flow,
                target,
                class,
                tags,
                instr,
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

fn stop_insn(instr: Instruction) -> Insn {
    Insn {
        len: 1,
        flow: Flow::Stop,
        target: None,
        class: Class::Int,
        tags: 0,
        instr,
    }
}

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

/// The instructions straight before `ip` (nearest first), as far as they run contiguously.
fn preceding<'m>(
    insns: &'m BTreeMap<u64, Insn>,
    ip: u64,
) -> impl Iterator<Item = &'m Instruction> + 'm {
    let mut expected = ip;
    insns
        .range(..ip)
        .rev()
        .take(16)
        .take_while(move |&(&a, insn)| {
            let contiguous = a + u64::from(insn.len) == expected;
            expected = a;
            contiguous
        })
        .map(|(_, insn)| &insn.instr)
}

const MAX_TABLE_ENTRIES: u64 = 1 << 14;

/// Recovers the targets of a switch's indirect jump, for the two usual shapes:
/// `jmp [table + index*8]` (absolute entries) and
/// `lea base,[rip+table]; movsxd r,[base+index*4]; add r,base; jmp r` (relative entries);
/// both bounded by a preceding `cmp index, N` and `ja`.
fn jump_table(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    insns: &BTreeMap<u64, Insn>,
    jmp: &Instruction,
) -> Option<Vec<u64>> {
    let entries = table_bound(insns, jmp.ip())?;
    let targets: Vec<u64> = if jmp.op0_kind() == OpKind::Memory {
        if jmp.memory_base() != Register::None || jmp.memory_index_scale() != 8 {
            return None;
        }
        let table = jmp.memory_displacement64();
        (0..entries)
            .map_while(|i| cx.image.read_at::<8>(table + 8 * i).map(u64::from_le_bytes))
            .collect()
    } else {
        let table = relative_table(insns, jmp.ip())?;
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
fn relative_table(insns: &BTreeMap<u64, Insn>, jmp_ip: u64) -> Option<u64> {
    let mut base = None;
    let mut nearest_lea = None;
    for instr in preceding(insns, jmp_ip) {
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
        insns
            .range(..jmp_ip)
            .rev()
            .take(4096)
            .find_map(|(_, insn)| {
                let i = &insn.instr;
                let is_base =
                    i.mnemonic() == Mnemonic::Lea && i.op0_register().full_register() == b;
                (is_base && i.is_ip_rel_memory_operand()).then(|| i.ip_rel_memory_address())
            })
    });
    hoisted.or(nearest_lea)
}

/// The number of table entries, from the nearest `cmp reg, imm` and the `ja`/`jae` after it.
fn table_bound(insns: &BTreeMap<u64, Insn>, jmp_ip: u64) -> Option<u64> {
    let mut inclusive = true;
    for instr in preceding(insns, jmp_ip) {
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
