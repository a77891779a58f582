//! The static cost model of the time-based estimate: how many core cycles one execution of a
//! block takes, from its instructions alone.
//!
//! A block's cost is the largest of these bounds (cycles per execution):
//! - **issue**: instructions / 4 (a 4-wide front end and rename);
//! - **ports**, each a sum of per-instruction reciprocal throughputs: loads (2 per cycle),
//!   stores (1 per cycle), integer ALU (4 per cycle), integer multiply (1 per cycle), vector
//!   integer (3 per cycle), shuffles (1 per cycle), floating-point add, multiply, FMA, compare
//!   and convert (2 per cycle up to 256 bits, 1 per cycle at 512), branches (2 per cycle; calls,
//!   returns and jumps 1);
//! - **dividers** (not pipelined): floating-point divide 4 cycles per 128 bits, square root 6 per
//!   128 bits, integer divide 15, x87 divide and square root 15, x87 transcendental 50, a
//!   `rep`-prefixed string instruction 30 (its repeat count is not known statically);
//! - **recurrence**, for a block that branches back to itself: the growth per iteration of the
//!   longest dependency chain, found by running the block's data flow three times with these
//!   latencies: integer ALU 1, register move 0, integer multiply 3, integer divide 25, load 5
//!   (from its address registers), store-to-load through an address the block does not change
//!   5, floating-point add, multiply and FMA 4 (on AMD cores: add and multiply 3), convert 5,
//!   divide 13, square root 18, x87 4.
//!
//! The figures are those of Skylake-to-Sapphire-Rapids and Zen 2-to-4 cores, the machines
//! loopscope runs on; the vendor comes from the recording (CPUID, or perf's header). Cache misses, branch mispredictions and the real core clock are not
//! modelled: they are what the error bars of the time-based estimate stand for.

use std::collections::HashMap;

use iced_x86::{
    CpuidFeature, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register,
};

/// What limits a block in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// Instructions issued per cycle.
    Issue,
    /// Load ports.
    Loads,
    /// The store port.
    Stores,
    /// Integer ALUs.
    IntAlu,
    /// The integer multiplier.
    IntMul,
    /// Vector integer units.
    VecAlu,
    /// The shuffle unit.
    Shuffle,
    /// Floating-point units.
    Fp,
    /// Branch units.
    Branch,
    /// Dividers, square roots, microcoded instructions.
    Divider,
    /// A loop-carried dependency chain.
    Recurrence,
}

/// Which core family's latencies the model uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Core {
    /// Intel (and any core not known to be AMD's).
    #[default]
    Intel,
    /// AMD Zen.
    Amd,
}

impl Core {
    /// From a CPUID vendor string (`GenuineIntel`, `AuthenticAMD`) or a string starting with
    /// one (perf's `cpuid` header, `AuthenticAMD-25-1-1`).
    pub fn from_vendor(vendor: &str) -> Core {
        if vendor.starts_with("AuthenticAMD") || vendor.starts_with("HygonGenuine") {
            Core::Amd
        } else {
            Core::Intel
        }
    }

    fn fp_latency(self, fma: bool) -> f64 {
        match (self, fma) {
            (Core::Amd, false) => 3.0,
            _ => 4.0,
        }
    }
}

/// The modelled cost of one block execution.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BlockCost {
    /// Core cycles per execution.
    pub cycles: f64,
    /// The bound that gave them.
    pub bound: Bound,
}

/// The port usage of one instruction, in cycles of each resource.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    loads: f64,
    stores: f64,
    int_alu: f64,
    int_mul: f64,
    vec_alu: f64,
    shuffle: f64,
    fp: f64,
    branch: f64,
    divider: f64,
    /// Latency from its sources to its results.
    latency: f64,
}

impl Usage {
    fn add(&mut self, o: &Usage) {
        self.loads += o.loads;
        self.stores += o.stores;
        self.int_alu += o.int_alu;
        self.int_mul += o.int_mul;
        self.vec_alu += o.vec_alu;
        self.shuffle += o.shuffle;
        self.fp += o.fp;
        self.branch += o.branch;
        self.divider += o.divider;
    }
}

/// Load latency from the address registers to the loaded value.
const LOAD_LATENCY: f64 = 5.0;
/// Latency of a value stored and loaded again (store forwarding).
const FORWARD_LATENCY: f64 = 5.0;

/// The cost of one execution of the block made of `instrs` on a `core`; `self_loop` when its
/// last instruction branches back to its first.
pub fn block_cost(instrs: &[Instruction], self_loop: bool, core: Core) -> BlockCost {
    let mut info = InstructionInfoFactory::new();
    let mut total = Usage::default();
    let usages: Vec<Usage> = instrs.iter().map(|i| usage(i, &mut info, core)).collect();
    for u in &usages {
        total.add(u);
    }
    let bounds = [
        (Bound::Issue, instrs.len() as f64 / 4.0),
        (Bound::Loads, total.loads),
        (Bound::Stores, total.stores),
        (Bound::IntAlu, total.int_alu),
        (Bound::IntMul, total.int_mul),
        (Bound::VecAlu, total.vec_alu),
        (Bound::Shuffle, total.shuffle),
        (Bound::Fp, total.fp),
        (Bound::Branch, total.branch),
        (Bound::Divider, total.divider),
        (
            Bound::Recurrence,
            if self_loop {
                recurrence(instrs, &usages, &mut info)
            } else {
                0.0
            },
        ),
    ];
    let (bound, cycles) =
        bounds.into_iter().fold(
            (Bound::Issue, 0.0),
            |best, (b, c)| if c > best.1 { (b, c) } else { best },
        );
    BlockCost {
        cycles: cycles.max(0.25),
        bound,
    }
}

/// The widest vector register an instruction names, in bits (0 for none).
fn vector_bits(instr: &Instruction) -> u32 {
    (0..instr.op_count())
        .filter(|&i| instr.op_kind(i) == OpKind::Register)
        .map(|i| {
            let r = instr.op_register(i);
            if r.is_zmm() {
                512
            } else if r.is_ymm() {
                256
            } else if r.is_xmm() {
                128
            } else {
                0
            }
        })
        .max()
        .unwrap_or(0)
}

fn is_x87(instr: &Instruction) -> bool {
    instr.cpuid_features().iter().any(|f| {
        matches!(
            f,
            CpuidFeature::FPU
                | CpuidFeature::FPU287
                | CpuidFeature::FPU387
                | CpuidFeature::FPU287XL_ONLY
        )
    })
}

/// The mnemonic's name without a VEX/EVEX `v` prefix, lower case.
fn stem(instr: &Instruction) -> String {
    let name = format!("{:?}", instr.mnemonic()).to_ascii_lowercase();
    match name.strip_prefix('v') {
        Some(rest)
            if vector_bits(instr) > 0 || instr.encoding() != iced_x86::EncodingKind::Legacy =>
        {
            rest.to_owned()
        }
        _ => name,
    }
}

const FP_SUFFIXES: [&str; 6] = ["ps", "pd", "ss", "sd", "ph", "sh"];

fn fp_core(stem: &str) -> Option<&str> {
    FP_SUFFIXES.iter().find_map(|s| stem.strip_suffix(s))
}

fn usage(instr: &Instruction, info: &mut InstructionInfoFactory, family: Core) -> Usage {
    let mut u = Usage::default();
    let (mut reads_memory, mut writes_memory) = (false, false);
    for m in info.info(instr).used_memory() {
        reads_memory |= reads(m.access());
        writes_memory |= writes(m.access());
    }
    let push_pop = matches!(instr.mnemonic(), Mnemonic::Push | Mnemonic::Pop);
    if reads_memory {
        u.loads += 0.5;
    }
    if writes_memory {
        u.stores += 1.0;
    }
    let bits = vector_bits(instr);
    let wide = if bits >= 512 { 2.0 } else { 1.0 };
    let lanes128 = f64::from(bits.max(128) / 128);
    if instr.flow_control() != FlowControl::Next {
        u.branch = match instr.flow_control() {
            FlowControl::ConditionalBranch => 0.5,
            _ => 1.0,
        };
        u.latency = 1.0;
        return u;
    }
    if instr.is_string_instruction() {
        if instr.has_rep_prefix() || instr.has_repe_prefix() || instr.has_repne_prefix() {
            u.divider = 30.0;
        } else {
            u.int_alu = 0.25;
        }
        u.latency = 1.0;
        return u;
    }
    if is_x87(instr) {
        let name = format!("{:?}", instr.mnemonic()).to_ascii_lowercase();
        if name.starts_with("fdiv") || name.starts_with("fsqrt") {
            u.divider = 15.0;
            u.latency = 18.0;
        } else if [
            "fsin", "fcos", "fsincos", "fptan", "fpatan", "f2xm1", "fyl2x", "fyl2xp1", "fprem",
            "fscale",
        ]
        .contains(&name.as_str())
        {
            u.divider = 50.0;
            u.latency = 60.0;
        } else {
            u.fp = 1.0;
            u.latency = 4.0;
        }
        return u;
    }
    let stem = stem(instr);
    if stem.starts_with("cvt") {
        u.fp = 0.5 * wide;
        u.latency = 5.0;
        return u;
    }
    if let Some(core) = fp_core(&stem) {
        match core {
            "div" => {
                u.divider = 4.0 * lanes128;
                u.latency = 13.0;
                return u;
            }
            "sqrt" => {
                u.divider = 6.0 * lanes128;
                u.latency = 18.0;
                return u;
            }
            c if c.starts_with("fmadd")
                || c.starts_with("fmsub")
                || c.starts_with("fnmadd")
                || c.starts_with("fnmsub") =>
            {
                u.fp = 0.5 * wide;
                u.latency = family.fp_latency(true);
                return u;
            }
            c if [
                "add", "sub", "mul", "min", "max", "cmp", "comi", "ucomi", "rcp", "rsqrt", "round",
                "addsub",
            ]
            .contains(&c) =>
            {
                u.fp = 0.5 * wide;
                u.latency = family.fp_latency(false);
                return u;
            }
            "hadd" | "hsub" | "dp" => {
                u.fp = 1.0 * wide;
                u.shuffle = 1.0;
                u.latency = 6.0;
                return u;
            }
            _ => {}
        }
    }
    match instr.mnemonic() {
        Mnemonic::Imul | Mnemonic::Mul | Mnemonic::Mulx => {
            u.int_mul = 1.0;
            u.latency = 3.0;
        }
        Mnemonic::Div | Mnemonic::Idiv => {
            u.divider = 15.0;
            u.latency = 25.0;
        }
        Mnemonic::Nop | Mnemonic::Endbr64 => {}
        Mnemonic::Pause => u.divider = 40.0,
        _ if bits > 0 => {
            let shuffle = [
                "shuf",
                "perm",
                "unpck",
                "pack",
                "insert",
                "extract",
                "broadcast",
                "palignr",
                "movhl",
                "movlh",
            ]
            .iter()
            .any(|s| stem.contains(s));
            if shuffle {
                u.shuffle = wide;
                u.latency = 1.0;
            } else if is_plain_move(instr) {
                u.latency = if reads_memory || writes_memory {
                    0.0
                } else {
                    0.5
                };
                u.vec_alu = if reads_memory || writes_memory {
                    0.0
                } else {
                    0.25
                };
            } else {
                u.vec_alu = wide / 3.0;
                u.latency = 1.0;
            }
        }
        _ if is_plain_move(instr) => {
            u.latency = 0.0;
            if !(reads_memory || writes_memory || push_pop) {
                u.int_alu = 0.25;
            }
        }
        _ => {
            u.int_alu = 0.25;
            u.latency = 1.0;
        }
    }
    u
}

fn is_plain_move(instr: &Instruction) -> bool {
    let stem = format!("{:?}", instr.mnemonic()).to_ascii_lowercase();
    let stem = stem.strip_prefix('v').unwrap_or(&stem);
    stem.starts_with("mov") && !stem.starts_with("movs")
        || stem.starts_with("movs") && vector_bits(instr) > 0
}

/// A data-flow key: a full register, the flags, or a loop-invariant memory location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Reg(Register),
    Flags,
    Memory(Register, Register, u32, u64),
}

/// The growth per iteration of the longest dependency chain through the block, run three
/// times: the difference between the readiness of its values after the third pass and after
/// the second.
fn recurrence(instrs: &[Instruction], usages: &[Usage], info: &mut InstructionInfoFactory) -> f64 {
    let written: Vec<Register> = instrs
        .iter()
        .flat_map(|i| {
            info.info(i)
                .used_registers()
                .iter()
                .filter(|r| writes(r.access()))
                .map(|r| r.register().full_register())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut ready: HashMap<Key, f64> = HashMap::new();
    let mut after_second = HashMap::new();
    for pass in 0..3 {
        for (instr, u) in instrs.iter().zip(usages) {
            step(instr, u, info, &written, &mut ready);
        }
        if pass == 1 {
            after_second = ready.clone();
        }
    }
    ready
        .iter()
        .filter_map(|(k, &t)| after_second.get(k).map(|&t2| t - t2))
        .fold(0.0, f64::max)
}

fn writes(access: OpAccess) -> bool {
    matches!(
        access,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

fn reads(access: OpAccess) -> bool {
    matches!(
        access,
        OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

/// Moves one instruction through the data flow: its results are ready `latency` after its
/// last source.
fn step(
    instr: &Instruction,
    u: &Usage,
    info: &mut InstructionInfoFactory,
    written_in_block: &[Register],
    ready: &mut HashMap<Key, f64>,
) {
    let info = info.info(instr);
    let zero_idiom = is_zero_idiom(instr);
    let mut address_regs: Vec<Register> = Vec::new();
    let mut start: f64 = 0.0;
    let mut memory_key = None;
    for m in info.used_memory() {
        let regs = [m.base(), m.index()].map(Register::full_register);
        address_regs.extend(regs.iter().filter(|&&r| r != Register::None));
        let address_ready = regs
            .iter()
            .filter(|&&r| r != Register::None)
            .map(|&r| ready.get(&Key::Reg(r)).copied().unwrap_or(0.0))
            .fold(0.0, f64::max);
        let invariant = !regs
            .iter()
            .any(|r| *r != Register::None && written_in_block.contains(r))
            && m.base() != Register::RIP;
        let key = Key::Memory(regs[0], regs[1], m.scale(), m.displacement());
        if reads(m.access()) {
            let mut value = address_ready + LOAD_LATENCY;
            if invariant && let Some(&stored) = ready.get(&key) {
                value = value.max(stored + FORWARD_LATENCY);
            }
            start = start.max(value);
        }
        if writes(m.access()) && invariant {
            memory_key = Some(key);
        }
    }
    for r in info.used_registers() {
        let reg = r.register().full_register();
        if reads(r.access()) && !zero_idiom && !address_regs.contains(&reg) {
            start = start.max(ready.get(&Key::Reg(reg)).copied().unwrap_or(0.0));
        }
    }
    if instr.rflags_read() != 0 {
        start = start.max(ready.get(&Key::Flags).copied().unwrap_or(0.0));
    }
    let done = start + u.latency;
    for r in info.used_registers() {
        if writes(r.access()) {
            ready.insert(Key::Reg(r.register().full_register()), done);
        }
    }
    if instr.rflags_written() | instr.rflags_modified() != 0 {
        ready.insert(Key::Flags, done);
    }
    if let Some(key) = memory_key {
        ready.insert(key, done);
    }
}

/// `xor eax, eax` and its kin: no dependency on the register's old value.
fn is_zero_idiom(instr: &Instruction) -> bool {
    instr.op_count() >= 2
        && instr.op0_kind() == OpKind::Register
        && (1..instr.op_count()).all(|i| {
            instr.op_kind(i) == OpKind::Register && instr.op_register(i) == instr.op0_register()
        })
        && matches!(
            instr.mnemonic(),
            Mnemonic::Xor
                | Mnemonic::Sub
                | Mnemonic::Pxor
                | Mnemonic::Vpxor
                | Mnemonic::Xorps
                | Mnemonic::Xorpd
                | Mnemonic::Vxorps
                | Mnemonic::Vxorpd
                | Mnemonic::Psubd
                | Mnemonic::Psubq
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn decode(bytes: &[u8]) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    #[test]
    fn an_fp_sum_is_bound_by_the_add_latency() {
        // 1000: addsd xmm0, [rdi+rax*8]; add rax, 1; cmp rax, rsi; jne 1000
        let block = decode(&[
            0xf2, 0x0f, 0x58, 0x04, 0xc7, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf0, 0x75, 0xf1,
        ]);
        assert_eq!(block.len(), 4);
        let cost = block_cost(&block, true, Core::Intel);
        assert_eq!(cost.bound, Bound::Recurrence);
        assert!((cost.cycles - 4.0).abs() < 1e-9, "{cost:?}");
        // The same instructions not in a loop: the issue width bounds them.
        let straight = block_cost(&block, false, Core::Intel);
        assert_eq!((straight.bound, straight.cycles), (Bound::Issue, 1.0));
        // AMD's adder is a cycle faster.
        assert!((block_cost(&block, true, Core::Amd).cycles - 3.0).abs() < 1e-9);
        assert_eq!(Core::from_vendor("AuthenticAMD-25-1-1"), Core::Amd);
        assert_eq!(Core::from_vendor("GenuineIntel"), Core::Intel);
    }

    #[test]
    fn a_pointer_chase_is_bound_by_the_load_latency() {
        // 1000: mov rdi, [rdi]; test rdi, rdi; jne 1000
        let block = decode(&[0x48, 0x8b, 0x3f, 0x48, 0x85, 0xff, 0x75, 0xf8]);
        let cost = block_cost(&block, true, Core::Intel);
        assert_eq!(cost.bound, Bound::Recurrence);
        assert!((cost.cycles - LOAD_LATENCY).abs() < 1e-9, "{cost:?}");
    }

    #[test]
    fn a_zeroing_xor_breaks_the_chain_and_divides_are_not_pipelined() {
        // xor eax, eax; add eax, 1 (no chain across iterations: the xor zeroes it)
        let block = decode(&[0x31, 0xc0, 0x83, 0xc0, 0x01]);
        assert!(block_cost(&block, true, Core::Intel).cycles <= 1.0);
        // divsd xmm0, xmm1 twice
        let block = decode(&[0xf2, 0x0f, 0x5e, 0xc1, 0xf2, 0x0f, 0x5e, 0xd1]);
        let cost = block_cost(&block, false, Core::Intel);
        assert_eq!((cost.bound, cost.cycles), (Bound::Divider, 8.0));
    }

    #[test]
    fn loads_and_stores_use_their_ports() {
        // mov rax, [rdi]; mov [rsi], rax; mov rbx, [rdi+8]; mov [rsi+8], rbx
        let block = decode(&[
            0x48, 0x8b, 0x07, 0x48, 0x89, 0x06, 0x48, 0x8b, 0x5f, 0x08, 0x48, 0x89, 0x5e, 0x08,
        ]);
        let cost = block_cost(&block, false, Core::Intel);
        assert_eq!((cost.bound, cost.cycles), (Bound::Stores, 2.0));
    }
}
