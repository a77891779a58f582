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
    let mut pending: Vec<Instruction> = Vec::new();
    let mut bases: Vec<u64> = Vec::new();
    loop {
        while let Some(start) = work.pop() {
            if !out.insns.contains(start) {
                decode_run(cx, ranges, start, info, &mut out, &mut work, &mut pending);
            }
        }
        // Jump tables are read once the code that reaches them is decoded: the instructions
        // that bound or locate a table may come from blocks decoded after its jump, and each
        // table found this way may lead to more code and more tables.
        let found = resolve_tables(cx, ranges, &mut out, &mut pending, &mut bases);
        if found.is_empty() {
            break;
        }
        work.extend(found);
    }
    if !pending.is_empty() {
        out.may_return = true; // an unknown jump may leave the function
    }
    out.insns.finish();
    out
}

/// Reads the tables of the pending indirect jumps that can be read now; returns their new
/// targets. `bases` collects every table address seen, so that a table whose bound is only a
/// mask or a byte's range stops where the next table starts.
fn resolve_tables(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    out: &mut Decoded,
    pending: &mut Vec<Instruction>,
    bases: &mut Vec<u64>,
) -> Vec<u64> {
    if pending.is_empty() {
        return Vec::new();
    }
    let below = SortedAddresses::of(&out.insns);
    let accesses: Vec<Option<(Vec<Instruction>, TableAccess)>> = pending
        .iter()
        .map(|jmp| {
            let before = preceding(cx.image, &out.insns, jmp.ip());
            let access = table_access(cx.image, &below, &before, jmp)?;
            Some((before, access))
        })
        .collect();
    bases.extend(accesses.iter().flatten().map(|(_, a)| a.form.address()));
    bases.sort_unstable();
    bases.dedup();
    let mut found = Vec::new();
    let mut still = Vec::new();
    for (jmp, access) in pending.drain(..).zip(accesses) {
        let targets = access.and_then(|(before, access)| {
            let next_base = bases.get(bases.partition_point(|&b| b <= access.form.address()));
            let code = Code {
                cx,
                ranges,
                insns: &out.insns,
            };
            read_table(&code, &before, &access, next_base.copied())
        });
        match targets {
            Some(targets) => {
                found.extend(&targets);
                out.tables.insert(jmp.ip(), targets);
            }
            None => still.push(jmp),
        }
    }
    *pending = still;
    found
}

/// Decodes straight-line code from `start` until control cannot fall through.
fn decode_run(
    cx: &DecodeContext<'_>,
    ranges: &Ranges,
    start: u64,
    info: &mut InstructionInfoFactory,
    out: &mut Decoded,
    work: &mut Vec<u64>,
    pending: &mut Vec<Instruction>,
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
            Flow::IndirectJump => pending.push(instr),
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

/// The instructions straight before `ip` (nearest first), as far as they run contiguously and
/// fall through into each other.
fn preceding(image: &Image, insns: &Insns, ip: u64) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut end = ip;
    while out.len() < 16 {
        let Some((start, insn)) = insns.ending_at(end) else {
            break;
        };
        if !matches!(
            insn.flow,
            Flow::Next | Flow::Cond | Flow::Call | Flow::IndirectCall
        ) {
            break; // a jump, return or stop: control does not come from there
        }
        // Undecodable bytes stay in the run, as an invalid instruction nothing matches.
        out.push(decode_at(image, start, insn.len).unwrap_or_default());
        end = start;
    }
    out
}

const MAX_TABLE_ENTRIES: u64 = 1 << 14;

/// Where a jump table is and how its entries read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableForm {
    /// 8-byte target addresses at this address.
    Absolute(u64),
    /// 4-byte signed offsets from this address, which is also where they are.
    Relative(u64),
}

impl TableForm {
    fn address(self) -> u64 {
        match self {
            TableForm::Absolute(a) | TableForm::Relative(a) => a,
        }
    }

    fn entry_bytes(self) -> u64 {
        match self {
            TableForm::Absolute(_) => 8,
            TableForm::Relative(_) => 4,
        }
    }
}

/// A table access found before an indirect jump: its form, the register indexing it, and how
/// many of the preceding instructions (nearest first) come after the bound check (the table
/// load and what follows it).
struct TableAccess {
    form: TableForm,
    index: Option<Register>,
    after_load: usize,
}

/// Reads the targets of a switch's indirect jump, for the usual shapes:
/// `jmp [table + index*8]` or `mov r,[table + index*8]; jmp r` (absolute entries) and
/// `lea base,[rip+table]; movsxd r,[base+index*4]; add r,base; jmp r` (relative entries), with
/// or without `notrack`; bounded by a `cmp index, N` and `ja` before them (on the index
/// register or on the memory it was loaded from), by an `and index, 2^k - 1` mask, or by a
/// byte-wide index. A mask or a byte only bounds the index from above: the table then also ends
/// where the next one starts.
fn read_table(
    code: &Code<'_, '_>,
    before: &[Instruction],
    access: &TableAccess,
    next_base: Option<u64>,
) -> Option<Vec<u64>> {
    let (bound, exact) = table_bound(before, access)?;
    let form = access.form;
    let room = next_base.map_or(u64::MAX, |next| {
        (next - form.address()) / form.entry_bytes()
    });
    // Tables do not overlap: a compare that bounds a table past the next one was misread.
    let entries = match exact {
        true if bound > room => return None,
        true => bound,
        false => bound.min(room),
    };
    let image = code.cx.image;
    let targets: Vec<u64> = match form {
        TableForm::Absolute(table) => (0..entries)
            .map_while(|i| {
                let entry = image.read_at::<8>(table.checked_add(8 * i)?)?;
                Some(u64::from_le_bytes(entry))
            })
            .collect(),
        TableForm::Relative(table) => (0..entries)
            .map_while(|i| {
                let entry = image.read_at::<4>(table.checked_add(4 * i)?)?;
                Some(table.wrapping_add_signed(i64::from(i32::from_le_bytes(entry))))
            })
            .collect(),
    };
    let mut targets = targets;
    if !exact {
        // Only an upper bound: the table ends before the first entry that is not code.
        let real = targets
            .iter()
            .position(|&t| !code.plausible_target(t))
            .unwrap_or(targets.len());
        targets.truncate(real);
        if targets.len() < 2 {
            return None;
        }
    } else if targets.len() as u64 != entries || !targets.iter().all(|t| code.ranges.contains(*t)) {
        // A table whose entries leave the function was misread: keep the successors unknown.
        return None;
    }
    targets.sort_unstable();
    targets.dedup();
    Some(targets)
}

/// A function's code as far as it is decoded.
struct Code<'c, 'a> {
    cx: &'c DecodeContext<'a>,
    ranges: &'c Ranges,
    insns: &'c Insns,
}

impl Code<'_, '_> {
    /// Whether `target` looks like the start of code: inside the function, not inside an
    /// instruction already decoded, and the start of a few valid instructions that fall in
    /// line with those already decoded.
    fn plausible_target(&self, target: u64) -> bool {
        if !self.ranges.contains(target) {
            return false;
        }
        if self.insns.contains(target) {
            return true;
        }
        let Some(bytes) = self.cx.image.bytes_from(target) else {
            return false;
        };
        let mut decoder = Decoder::with_ip(64, bytes, target, DecoderOptions::NONE);
        for _ in 0..4 {
            let ip = decoder.ip();
            if self.insns.contains(ip) {
                return true; // joins decoded code at an instruction boundary
            }
            if self.inside_decoded(ip) || !decoder.can_decode() {
                return false;
            }
            let instr = decoder.decode();
            if instr.is_invalid() {
                return false;
            }
            if !matches!(flow_of(&instr), Flow::Next | Flow::Cond | Flow::Call) {
                return true;
            }
        }
        true
    }

    /// Whether `ip` lies strictly inside a decoded instruction.
    fn inside_decoded(&self, ip: u64) -> bool {
        (1..15u64).any(|back| {
            ip.checked_sub(back)
                .and_then(|start| self.insns.get(start))
                .is_some_and(|insn| u64::from(insn.len) > back)
        })
    }
}

/// An absolute table `[disp + index*8]` without a base register.
fn absolute_operand(instr: &Instruction) -> Option<(TableForm, Register)> {
    let absolute = instr.memory_base() == Register::None
        && instr.memory_index_scale() == 8
        && instr.memory_index() != Register::None;
    absolute.then(|| {
        (
            TableForm::Absolute(instr.memory_displacement64()),
            instr.memory_index().full_register(),
        )
    })
}

/// The table an indirect jump reads, from the instructions before it.
fn table_access(
    image: &Image,
    below: &SortedAddresses,
    before: &[Instruction],
    jmp: &Instruction,
) -> Option<TableAccess> {
    if jmp.op0_kind() == OpKind::Memory {
        let (form, index) = absolute_operand(jmp)?;
        return Some(TableAccess {
            form,
            index: Some(index),
            after_load: 0,
        });
    }
    let target = jmp.op0_register().full_register();
    // `mov r,[table + index*8]; jmp r`
    let loaded = before.iter().position(|i| {
        i.op0_kind() == OpKind::Register && i.op0_register().full_register() == target
    });
    if let Some(at) = loaded {
        let instr = &before[at];
        if instr.mnemonic() == Mnemonic::Mov && instr.op1_kind() == OpKind::Memory {
            if let Some((form, index)) = absolute_operand(instr) {
                return Some(TableAccess {
                    form,
                    index: Some(index),
                    after_load: at + 1,
                });
            }
        }
    }
    relative_table(image, below, before, jmp.ip())
}

/// The relative (PIC) shape: the `lea` feeding the `movsxd`'s base, or (gcc -O0:
/// `mov eax,[rdx+rax]; cdqe`) the nearest RIP-relative `lea`.
fn relative_table(
    image: &Image,
    below: &SortedAddresses,
    before: &[Instruction],
    jmp_ip: u64,
) -> Option<TableAccess> {
    let mut load: Option<(Register, Register, usize)> = None; // (base, index, position)
    let mut nearest_lea = None;
    let access = |table: u64, load: Option<(Register, Register, usize)>| TableAccess {
        form: TableForm::Relative(table),
        index: load.map(|l| l.1).filter(|&r| r != Register::None),
        after_load: load.map_or(0, |l| l.2 + 1),
    };
    for (at, instr) in before.iter().enumerate() {
        if instr.mnemonic() == Mnemonic::Lea && instr.is_ip_rel_memory_operand() {
            nearest_lea = nearest_lea.or(Some(instr.ip_rel_memory_address()));
        }
        match (instr.mnemonic(), load) {
            (Mnemonic::Movsxd, None)
                if instr.op1_kind() == OpKind::Memory && instr.memory_index_scale() == 4 =>
            {
                let base = instr.memory_base().full_register();
                load = Some((base, instr.memory_index().full_register(), at));
            }
            (Mnemonic::Lea, Some((base, _, _)))
                if instr.op0_register().full_register() == base
                    && instr.is_ip_rel_memory_operand() =>
            {
                return Some(access(instr.ip_rel_memory_address(), load));
            }
            _ => {}
        }
    }
    // The `lea` of the base is often hoisted out of the loop that holds the switch.
    let hoisted = load.and_then(|(base, _, _)| {
        below
            .nearest_below(jmp_ip, 4096)
            .filter_map(|&(ip, len)| decode_at(image, ip, len))
            .find_map(|i| {
                let is_base =
                    i.mnemonic() == Mnemonic::Lea && i.op0_register().full_register() == base;
                (is_base && i.is_ip_rel_memory_operand()).then(|| i.ip_rel_memory_address())
            })
    });
    hoisted.or(nearest_lea).map(|table| access(table, load))
}

/// The decoded instructions' addresses and lengths, sorted, for looking back in address order.
struct SortedAddresses(Vec<(u64, u8)>);

impl SortedAddresses {
    fn of(insns: &Insns) -> SortedAddresses {
        let mut list: Vec<(u64, u8)> = insns.list.iter().map(|e| (e.0, e.1.len)).collect();
        list.sort_unstable();
        SortedAddresses(list)
    }

    /// Up to `count` decoded instructions below `ip`, nearest first.
    fn nearest_below(&self, ip: u64, count: usize) -> impl Iterator<Item = &(u64, u8)> {
        let end = self.0.partition_point(|e| e.0 < ip);
        self.0[end.saturating_sub(count)..end].iter().rev()
    }
}

/// A memory operand, to recognise a compare of the memory an index was loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemoryKey {
    segment: Register,
    base: Register,
    index: Register,
    scale: u32,
    displacement: u64,
}

impl MemoryKey {
    fn of(instr: &Instruction) -> MemoryKey {
        MemoryKey {
            segment: instr.memory_segment(),
            base: instr.memory_base(),
            index: instr.memory_index(),
            scale: instr.memory_index_scale(),
            displacement: instr.memory_displacement64(),
        }
    }
}

/// Entries of a table bounded by `limit` (`inclusive`: `index <= limit` passes the check).
fn entries_of(limit: u64, inclusive: bool) -> Option<u64> {
    let n = if inclusive {
        limit.checked_add(1)?
    } else {
        limit
    };
    (n > 0 && n <= MAX_TABLE_ENTRIES).then_some(n)
}

/// The number of table entries, and whether it is exact (a compare) or only an upper bound (a
/// mask, a byte). Walking back from the table load, the index register is followed through the
/// moves that made it (`movzx edx, byte [rdi+rdx]`, `mov rdx, r14`); the bound is the nearest
/// `cmp` of it (or of the memory it came from) with the `ja`/`jae` after it, or an `and` mask
/// on it, or the range of a zero-extended byte. Without a known index register (gcc
/// -O0 scales it apart), the nearest range-checking `cmp reg, imm` counts.
fn table_bound(before: &[Instruction], access: &TableAccess) -> Option<(u64, bool)> {
    let mut tracked: Vec<Register> = access.index.into_iter().collect();
    let mut tracked_memory: Option<MemoryKey> = None;
    // The conditional jump after the compare met next (walking back), if it checks a range.
    let mut range_check: Option<bool> = None; // Some(inclusive)
    let mut index_bytes: Option<usize> = None;
    for (at, instr) in before.iter().enumerate() {
        let after_load = at >= access.after_load;
        let dest = (instr.op0_kind() == OpKind::Register)
            .then(|| instr.op0_register().full_register())
            .filter(|r| after_load && tracked.contains(r));
        match instr.mnemonic() {
            Mnemonic::Jae | Mnemonic::Jb => range_check = Some(false),
            Mnemonic::Ja | Mnemonic::Jbe => range_check = Some(true),
            _ if instr.flow_control() == FlowControl::ConditionalBranch => range_check = None,
            Mnemonic::Cmp => {
                let check = range_check.take();
                let Some(n) = check.and_then(|inclusive| {
                    let limit = instr.try_immediate(1).ok()?;
                    entries_of(limit, inclusive)
                }) else {
                    continue; // `cmp` then `je`: a special case, not the range check
                };
                let names_index = dest.is_some()
                    || (instr.op0_kind() == OpKind::Memory
                        && tracked_memory == Some(MemoryKey::of(instr)));
                if names_index || tracked.is_empty() {
                    return Some((n, true));
                }
            }
            Mnemonic::And if dest.is_some() => {
                if let Some(n) = instr
                    .try_immediate(1)
                    .ok()
                    .and_then(|mask| entries_of(mask, true))
                {
                    return Some((n, false));
                }
            }
            Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsxd | Mnemonic::Movsx
                if dest.is_some() =>
            {
                let zero_extends = instr.mnemonic() == Mnemonic::Movzx;
                match instr.op1_kind() {
                    OpKind::Register => {
                        let source = instr.op1_register();
                        if zero_extends {
                            index_bytes = index_bytes.or(Some(source.size()));
                        }
                        tracked.push(source.full_register());
                    }
                    OpKind::Memory => {
                        if zero_extends {
                            index_bytes = index_bytes.or(Some(instr.memory_size().size()));
                        }
                        tracked_memory = Some(MemoryKey::of(instr));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // A zero-extended byte: at most 256 entries, cut where the code ends. (A word's 65536 are
    // too many to cut reliably: LLVM's 16-bit kind switches then read into the next table.)
    (index_bytes == Some(1)).then_some((256, false))
}
