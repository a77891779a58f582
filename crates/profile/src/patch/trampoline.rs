//! The code the patch back-end puts in the target: one trampoline per patched site, one shared
//! slow path that calls the runtime's handler, and the stub `main` returns through.
//!
//! Pure code generation (iced-x86's block encoder): every function here returns bytes for a
//! given address, so it is tested by decoding what it made.
//!
//! A trampoline is entered by the `jmp rel32` written over the site, with the program's
//! registers and stack exactly as they were at the site. It first moves the stack pointer past
//! the red zone (the 128 bytes below `rsp` a leaf function may use without moving `rsp`), so
//! nothing it pushes lands on the program's data, and it uses only instructions that leave the
//! flags alone (`lea`, `mov`, `push`, `pop`, `jrcxz`) until it has saved them. Then:
//! - a counted block adds one to its thread's counter (`counters[i]`, an array whose address is
//!   in a thread word);
//! - the header of the loop the thread is repeating (its site id in the thread's `hot` word)
//!   adds one to the thread's `pending` word: a back edge changes nothing else in the thread's
//!   tree, so the handler applies the pending ones at its next call
//!   ([`crate::exact`]'s `ThreadState::repeat_back_edges`);
//! - anything else calls the slow path, which saves every register the handler may change
//!   (flags, the caller-saved integer registers and the whole x87/SSE/AVX state with
//!   `xsavec`), reads the TSC into the `entry_tsc` word, aligns the stack and calls the
//!   handler with the site id and the program's stack pointer, then restores everything and
//!   stores the TSC into the `exit_tsc` word (the paper's timing rule, spec 004 §3.2: both
//!   readings bracket the whole analysis routine).
//!
//! Then the displaced instructions run, relocated (RIP-relative operands and branches fixed by
//! the block encoder); a call among them is emulated by pushing the original return address and
//! jumping to the callee, so every return address the program and its unwinder see is the
//! program's own. Last, a jump back to the first byte after the displaced instructions.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, FlowControl, Instruction, InstructionBlock,
    MemoryOperand, OpKind, Register,
};

/// The bytes below the stack pointer a leaf function may use (System V x86-64 ABI).
const RED_ZONE_BYTES: i64 = 128;
/// Set in the site word pushed for the slow path when the trampoline could not count the block
/// itself (its thread had no counters yet): the handler counts it.
pub const UNCOUNTED_FLAG: u32 = 1 << 30;
/// The largest site id a trampoline can carry.
pub const MAX_SITE_ID: u32 = UNCOUNTED_FLAG - 1;

/// Offsets from the thread pointer (`fs`) of the per-thread words the trampolines use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadWords {
    /// Site id of the header that would only repeat the current loop (`u64::MAX`: none).
    pub hot: i32,
    /// Header executions of the hot loop not yet handed to the tree.
    pub pending: i32,
    /// Address of the thread's block counters (0 before the thread has any).
    pub counters: i32,
    /// TSC when the slow path was entered.
    pub entry_tsc: i32,
    /// TSC when the slow path was left.
    pub exit_tsc: i32,
}

/// How the slow path saves the extended register state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSave {
    /// `xsavec` / `xrstor` of the components in `mask`, in an area of `bytes`.
    Compacted {
        /// Requested-feature bitmap.
        mask: u64,
        /// Area size (64-byte aligned on the stack).
        bytes: u32,
    },
    /// `xsave` / `xrstor` (no compacted form on this CPU).
    Standard {
        /// Requested-feature bitmap.
        mask: u64,
        /// Area size.
        bytes: u32,
    },
    /// `fxsave` / `fxrstor` (x87 and SSE only; for CPUs without XSAVE).
    Legacy,
    /// `xmm0`-`xmm15` only: for programs with no VEX or EVEX instruction, whose sites never
    /// have live upper halves of vector registers (the C library's vector routines, which the
    /// handler may call, clear those with `vzeroupper` before they return), and which keep no
    /// x87 state the handler could touch (it never does).
    Sse,
}

/// One step of a trampoline.
#[derive(Debug, Clone)]
pub enum Step {
    /// The events of a site: its counter, its repeat check, or a call of the slow path.
    Event {
        /// Site id.
        site: u32,
        /// Index of its block counter.
        counter: Option<u32>,
        /// The site is a loop header whose repeat the trampoline may count itself.
        repeats: bool,
        /// The site has events for the handler (not only a block counter).
        handled: bool,
        /// No instruction reads the status flags before writing them all, from the site on:
        /// the fast paths may use instructions that change them.
        flags_dead: bool,
    },
    /// One of the program's instructions, relocated.
    Copy(Instruction),
}

/// A list of instructions being assembled; labels are fake instruction addresses far above
/// user space, so no relocated branch can point at one by accident.
struct Asm {
    instructions: Vec<Instruction>,
    next_ip: u64,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            instructions: Vec::new(),
            next_ip: 0xffff_f000_0000_0000,
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next_ip += 1;
        self.next_ip
    }

    fn label(&mut self) -> u64 {
        self.fresh()
    }

    fn bind(&mut self, label: u64) {
        let mut i = Instruction::with(Code::Zero_bytes);
        i.set_ip(label);
        self.instructions.push(i);
    }

    fn add(&mut self, made: Result<Instruction, iced_x86::IcedError>) -> Result<(), String> {
        let mut i = made.map_err(|e| e.to_string())?;
        i.set_ip(self.fresh());
        self.instructions.push(i);
        Ok(())
    }

    fn encode(&self, at: u64) -> Result<Vec<u8>, String> {
        let block = InstructionBlock::new(&self.instructions, at);
        BlockEncoder::encode(64, block, BlockEncoderOptions::NONE)
            .map(|r| r.code_buffer)
            .map_err(|e| e.to_string())
    }

    // The few instruction forms used, each a line where it is used.
    fn lea(&mut self, to: Register, base: Register, displacement: i64) -> Result<(), String> {
        self.add(Instruction::with2(
            Code::Lea_r64_m,
            to,
            MemoryOperand::with_base_displ(base, displacement),
        ))
    }

    fn push(&mut self, r: Register) -> Result<(), String> {
        self.add(Instruction::with1(Code::Push_r64, r))
    }

    fn pop(&mut self, r: Register) -> Result<(), String> {
        self.add(Instruction::with1(Code::Pop_r64, r))
    }

    fn load_thread_word(&mut self, to: Register, offset: i32) -> Result<(), String> {
        self.add(Instruction::with2(
            Code::Mov_r64_rm64,
            to,
            thread_word(offset),
        ))
    }

    fn store_thread_word(&mut self, offset: i32, from: Register) -> Result<(), String> {
        self.add(Instruction::with2(
            Code::Mov_rm64_r64,
            thread_word(offset),
            from,
        ))
    }

    fn jump(&mut self, target: u64) -> Result<(), String> {
        self.add(Instruction::with_branch(Code::Jmp_rel32_64, target))
    }

    fn jrcxz(&mut self, target: u64) -> Result<(), String> {
        self.add(Instruction::with_branch(Code::Jrcxz_rel8_64, target))
    }

    /// `rax = rdx:rax` after `rdtsc` (changes the flags: only where they are saved).
    fn tsc_into_rax(&mut self) -> Result<(), String> {
        self.add(Ok(Instruction::with(Code::Rdtsc)))?;
        self.add(Instruction::with2(
            Code::Shl_rm64_imm8,
            Register::RDX,
            32u32,
        ))?;
        self.add(Instruction::with2(
            Code::Or_r64_rm64,
            Register::RAX,
            Register::RDX,
        ))
    }
}

/// `fs:[offset]`: a sign-extended 32-bit displacement with no base register (64-bit address
/// size: iced encodes a displacement size of 4 with the 32-bit address-size prefix) and the
/// `fs` segment, the thread pointer.
fn thread_word(offset: i32) -> MemoryOperand {
    MemoryOperand::new(
        Register::None,
        Register::None,
        1,
        i64::from(offset),
        8,
        false,
        Register::FS,
    )
}

/// The shared slow path, entered by `call` from a trampoline with the stack holding, from
/// `rsp` up: the return address, the site word, the saved `rcx`, then the 128 bytes skipped
/// for the red zone, then the program's stack.
/// The two slow paths: one restores every flag, the other (for sites where the status flags
/// are dead) only the direction flag, sparing the costly `popfq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowPaths {
    /// Restores the flags.
    pub flags: u64,
    /// Leaves the status flags changed.
    pub no_flags: u64,
}

/// The shared slow path (`keep_flags`: restore all flags with `popfq`, else only the
/// direction flag, for sites whose status flags are dead).
pub fn slow_path(
    at: u64,
    handler: u64,
    words: &ThreadWords,
    save: StateSave,
    keep_flags: bool,
) -> Result<Vec<u8>, String> {
    use Register::*;
    const SAVED: [Register; 9] = [RAX, RDX, RSI, RDI, R8, R9, R10, R11, RBX];
    let mut a = Asm::new();
    a.add(Ok(Instruction::with(Code::Pushfq)))?;
    for r in SAVED {
        a.push(r)?;
    }
    a.add(Ok(Instruction::with(Code::Cld)))?;
    a.tsc_into_rax()?;
    a.store_thread_word(words.entry_tsc, RAX)?;
    // rbx (callee-saved, so kept by the handler) holds the stack pointer of the saves.
    a.add(Instruction::with2(Code::Mov_r64_rm64, RBX, RSP))?;
    let area_bytes = match save {
        StateSave::Compacted { bytes, .. } | StateSave::Standard { bytes, .. } => bytes,
        StateSave::Legacy => 512,
        StateSave::Sse => 256,
    };
    a.add(Instruction::with2(
        Code::Sub_rm64_imm32,
        RSP,
        area_bytes.next_multiple_of(64) as i32,
    ))?;
    a.add(Instruction::with2(Code::And_rm64_imm8, RSP, -64i32))?;
    save_state(&mut a, save, true)?;
    // Above rbx: 9 saved registers, the flags, the return address, the site word, rcx, the
    // red zone, then the program's stack pointer.
    let saved_bytes = (SAVED.len() as i64 + 1) * 8;
    a.add(Instruction::with2(
        Code::Mov_r32_rm32,
        EDI,
        MemoryOperand::with_base_displ(RBX, saved_bytes + 8),
    ))?;
    a.lea(RSI, RBX, saved_bytes + 8 + 8 + 8 + RED_ZONE_BYTES)?;
    // The thread's words: the thread pointer (at fs:0) plus their offset.
    a.load_thread_word(RDX, 0)?;
    a.lea(RDX, RDX, i64::from(words.hot))?;
    a.add(Instruction::with2(Code::Mov_r64_imm64, RAX, handler))?;
    a.add(Instruction::with1(Code::Call_rm64, RAX))?;
    save_state(&mut a, save, false)?;
    a.tsc_into_rax()?;
    a.store_thread_word(words.exit_tsc, RAX)?;
    a.add(Instruction::with2(Code::Mov_r64_rm64, RSP, RBX))?;
    for r in SAVED.iter().rev() {
        a.pop(*r)?;
    }
    if keep_flags {
        a.add(Ok(Instruction::with(Code::Popfq)))?;
    } else {
        // DF is bit 10 of the saved flags: set it again if it was (the handler needs it clear).
        let clear = a.label();
        a.add(Instruction::with2(
            Code::Test_rm8_imm8,
            MemoryOperand::with_base_displ(RSP, 1),
            4u32,
        ))?;
        a.add(Instruction::with_branch(Code::Je_rel32_64, clear))?;
        a.add(Ok(Instruction::with(Code::Std)))?;
        a.bind(clear);
        a.lea(RSP, RSP, 8)?;
    }
    a.add(Ok(Instruction::with(Code::Retnq)))?;
    a.encode(at)
}

/// `xsavec`/`xsave`/`fxsave`/`movaps` into `[rsp]` (`store`), or the matching restore.
fn save_state(a: &mut Asm, save: StateSave, store: bool) -> Result<(), String> {
    use Register::*;
    let area = MemoryOperand::with_base(RSP);
    let (mask, code) = match (save, store) {
        (StateSave::Compacted { mask, .. }, true) => (mask, Code::Xsavec64_mem),
        (StateSave::Standard { mask, .. }, true) => (mask, Code::Xsave64_mem),
        (StateSave::Compacted { mask, .. } | StateSave::Standard { mask, .. }, false) => {
            (mask, Code::Xrstor64_mem)
        }
        (StateSave::Legacy, true) => {
            return a.add(Instruction::with1(Code::Fxsave64_m512byte, area));
        }
        (StateSave::Legacy, false) => {
            return a.add(Instruction::with1(Code::Fxrstor64_m512byte, area));
        }
        (StateSave::Sse, _) => {
            for i in 0..16u32 {
                let xmm = XMM0 + i;
                let slot = MemoryOperand::with_base_displ(RSP, i64::from(i) * 16);
                a.add(if store {
                    Instruction::with2(Code::Movaps_xmmm128_xmm, slot, xmm)
                } else {
                    Instruction::with2(Code::Movaps_xmm_xmmm128, xmm, slot)
                })?;
            }
            return Ok(());
        }
    };
    if store {
        // The XSAVE header (bytes 512..576) must hold zeros where the instruction does not
        // write, or xrstor faults; the stack there holds anything.
        for word in 0..8 {
            a.add(Instruction::with2(
                Code::Mov_rm64_imm32,
                MemoryOperand::with_base_displ(RSP, 512 + word * 8),
                0i32,
            ))?;
        }
    }
    a.add(Instruction::with2(Code::Mov_r32_imm32, EAX, mask as u32))?;
    a.add(Instruction::with2(
        Code::Mov_r32_imm32,
        EDX,
        (mask >> 32) as u32,
    ))?;
    a.add(Instruction::with1(code, area))
}

/// A site's trampoline at `at`: its steps, then a jump to `resume` (the first byte after the
/// displaced instructions; `None` when the last one never falls through).
pub fn trampoline(
    at: u64,
    steps: &[Step],
    resume: Option<u64>,
    slow: SlowPaths,
    words: &ThreadWords,
) -> Result<Vec<u8>, String> {
    let mut a = Asm::new();
    for step in steps {
        match step {
            Step::Event {
                site,
                counter,
                repeats,
                handled,
                flags_dead,
            } => {
                let kind = EventKind {
                    site: *site,
                    counter: *counter,
                    repeats: *repeats,
                    handled: *handled,
                };
                if *flags_dead {
                    event_flags_dead(&mut a, &kind, slow.no_flags, words)?
                } else {
                    event(&mut a, &kind, slow.flags, words)?
                }
            }
            Step::Copy(instr) => copy(&mut a, instr)?,
        }
    }
    if let Some(back) = resume {
        a.jump(back)?;
    }
    a.encode(at)
}

/// What one site's event part must do.
#[derive(Clone, Copy)]
struct EventKind {
    site: u32,
    counter: Option<u32>,
    repeats: bool,
    handled: bool,
}

impl EventKind {
    fn check(&self) -> Result<(), String> {
        if self.site > MAX_SITE_ID || self.counter.is_some_and(|c| c > (i32::MAX as u32) / 8) {
            return Err(format!(
                "site {} or its counter is beyond the trampoline's range",
                self.site
            ));
        }
        Ok(())
    }
}

/// The event part with no instruction that changes the flags before the slow path saves them.
fn event(a: &mut Asm, kind: &EventKind, slow: u64, words: &ThreadWords) -> Result<(), String> {
    use Register::*;
    kind.check()?;
    let EventKind {
        site,
        counter,
        repeats,
        handled,
    } = *kind;
    let done = a.label();
    let uncounted = a.label();
    a.lea(RSP, RSP, -RED_ZONE_BYTES)?;
    a.push(RCX)?;
    if let Some(c) = counter {
        a.load_thread_word(RCX, words.counters)?;
        a.jrcxz(uncounted)?;
        let slot = MemoryOperand::with_base_displ(RCX, i64::from(c) * 8);
        a.push(RAX)?;
        a.add(Instruction::with2(Code::Mov_r64_rm64, RAX, slot))?;
        a.lea(RAX, RAX, 1)?;
        a.add(Instruction::with2(Code::Mov_rm64_r64, slot, RAX))?;
        a.pop(RAX)?;
        if !handled {
            a.jump(done)?;
        }
    }
    let repeat = a.label();
    if handled {
        if repeats {
            a.load_thread_word(RCX, words.hot)?;
            a.lea(RCX, RCX, -i64::from(site))?;
            a.jrcxz(repeat)?;
        }
        slow_call(a, site, slow)?;
        a.jump(done)?;
    }
    if counter.is_some() {
        a.bind(uncounted);
        slow_call(a, site | UNCOUNTED_FLAG, slow)?;
        a.jump(done)?;
    }
    if handled && repeats {
        a.bind(repeat);
        a.load_thread_word(RCX, words.pending)?;
        a.lea(RCX, RCX, 1)?;
        a.store_thread_word(words.pending, RCX)?;
    }
    a.bind(done);
    a.pop(RCX)?;
    a.lea(RSP, RSP, RED_ZONE_BYTES)
}

fn slow_call(a: &mut Asm, word: u32, slow: u64) -> Result<(), String> {
    a.add(Instruction::with1(Code::Pushq_imm32, word as i32))?;
    a.add(Instruction::with_branch(Code::Call_rel32_64, slow))?;
    a.lea(Register::RSP, Register::RSP, 8)
}

/// The event part where the flags are dead: `cmp`, `test`, `inc` allowed, and no register or
/// stack is needed to count a repeat.
fn event_flags_dead(
    a: &mut Asm,
    kind: &EventKind,
    slow: u64,
    words: &ThreadWords,
) -> Result<(), String> {
    use Register::*;
    kind.check()?;
    let done = a.label();
    if let Some(c) = kind.counter {
        let counted = a.label();
        a.lea(RSP, RSP, -RED_ZONE_BYTES)?;
        a.push(RCX)?;
        a.load_thread_word(RCX, words.counters)?;
        a.add(Instruction::with2(Code::Test_rm64_r64, RCX, RCX))?;
        a.add(Instruction::with_branch(Code::Jne_rel32_64, counted))?;
        // No counters yet: the slow path counts the block and handles the events.
        slow_call(a, kind.site | UNCOUNTED_FLAG, slow)?;
        a.pop(RCX)?;
        a.lea(RSP, RSP, RED_ZONE_BYTES)?;
        a.jump(done)?;
        a.bind(counted);
        a.add(Instruction::with1(
            Code::Inc_rm64,
            MemoryOperand::with_base_displ(RCX, i64::from(c) * 8),
        ))?;
        a.pop(RCX)?;
        a.lea(RSP, RSP, RED_ZONE_BYTES)?;
    }
    if kind.handled {
        let call = a.label();
        if kind.repeats {
            a.add(Instruction::with2(
                Code::Cmp_rm64_imm32,
                thread_word(words.hot),
                kind.site as i32,
            ))?;
            a.add(Instruction::with_branch(Code::Jne_rel32_64, call))?;
            a.add(Instruction::with1(
                Code::Inc_rm64,
                thread_word(words.pending),
            ))?;
            a.jump(done)?;
        }
        a.bind(call);
        a.lea(RSP, RSP, -RED_ZONE_BYTES)?;
        a.push(RCX)?;
        slow_call(a, kind.site, slow)?;
        a.pop(RCX)?;
        a.lea(RSP, RSP, RED_ZONE_BYTES)?;
    }
    a.bind(done);
    Ok(())
}

/// One displaced instruction: calls emulated (the original return address pushed), the rest
/// re-encoded where they are.
fn copy(a: &mut Asm, instr: &Instruction) -> Result<(), String> {
    use Register::{RAX, RIP, RSP};
    let emulated_jump = match instr.flow_control() {
        FlowControl::Call if instr.code() == Code::Call_rel32_64 => Some(Instruction::with_branch(
            Code::Jmp_rel32_64,
            instr.near_branch_target(),
        )),
        FlowControl::IndirectCall if instr.code() == Code::Call_rm64 => {
            if uses_stack_pointer(instr) {
                return Err("an indirect call through the stack pointer".into());
            }
            let mut jmp = *instr;
            jmp.set_code(Code::Jmp_rm64);
            Some(Ok::<Instruction, iced_x86::IcedError>(jmp))
        }
        FlowControl::Call | FlowControl::IndirectCall => {
            return Err(format!(
                "a call that cannot be emulated ({:?})",
                instr.code()
            ));
        }
        FlowControl::Interrupt | FlowControl::XbeginXabortXend => {
            return Err(format!(
                "an instruction that cannot move ({:?})",
                instr.code()
            ));
        }
        _ => None,
    };
    let Some(jump) = emulated_jump else {
        return a.add(Ok(*instr));
    };
    // Room for the return address, then rax saved below it while it is written.
    a.lea(RSP, RSP, -8)?;
    a.push(RAX)?;
    a.add(Instruction::with2(
        Code::Lea_r64_m,
        RAX,
        MemoryOperand::new(
            RIP,
            Register::None,
            1,
            instr.next_ip() as i64,
            8,
            false,
            Register::None,
        ),
    ))?;
    a.add(Instruction::with2(
        Code::Mov_rm64_r64,
        MemoryOperand::with_base_displ(RSP, 8),
        RAX,
    ))?;
    a.pop(RAX)?;
    a.add(jump)
}

/// Whether an operand of `instr` reads the stack pointer (which the emulation moves first).
pub fn uses_stack_pointer(instr: &Instruction) -> bool {
    (0..instr.op_count()).any(|i| match instr.op_kind(i) {
        OpKind::Register => instr.op_register(i).full_register() == Register::RSP,
        OpKind::Memory => {
            instr.memory_base().full_register() == Register::RSP
                || instr.memory_index().full_register() == Register::RSP
        }
        _ => false,
    })
}

/// Whether a displaced copy of `instr` can be made (what [`copy`] accepts).
pub fn movable(instr: &Instruction) -> Result<(), String> {
    let mut a = Asm::new();
    copy(&mut a, instr)
}

/// Whether control can go on after the displaced copy of `instr` (a trampoline ends with a
/// jump back unless not; an emulated call is a jump, and its callee returns to the program).
pub fn falls_through(instr: &Instruction) -> bool {
    !matches!(
        instr.flow_control(),
        FlowControl::UnconditionalBranch
            | FlowControl::IndirectBranch
            | FlowControl::Return
            | FlowControl::Call
            | FlowControl::IndirectCall
    )
}

/// The stub `main` returns through: the event of site `site` (its handler closes `main`), then
/// a jump to the return address kept at `slot`.
pub fn main_return(
    at: u64,
    site: u32,
    slot: u64,
    slow: SlowPaths,
    words: &ThreadWords,
) -> Result<Vec<u8>, String> {
    let mut a = Asm::new();
    let kind = EventKind {
        site,
        counter: None,
        repeats: false,
        handled: true,
    };
    event(&mut a, &kind, slow.flags, words)?;
    a.add(Instruction::with1(
        Code::Jmp_rm64,
        MemoryOperand::new(
            Register::RIP,
            Register::None,
            1,
            slot as i64,
            8,
            false,
            Register::None,
        ),
    ))?;
    a.encode(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    const WORDS: ThreadWords = ThreadWords {
        hot: -0x100,
        pending: -0xf8,
        counters: -0xf0,
        entry_tsc: -0xe8,
        exit_tsc: -0xe0,
    };

    const SLOW: SlowPaths = SlowPaths {
        flags: 0x1000_8000,
        no_flags: 0x1000_9000,
    };

    fn decode(at: u64, bytes: &[u8]) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, at, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    fn one(at: u64, bytes: &[u8]) -> Instruction {
        decode(at, bytes)[0]
    }

    #[test]
    fn a_counted_repeating_header_counts_checks_and_calls_in_that_order() {
        let steps = [Step::Event {
            site: 7,
            counter: Some(3),
            repeats: true,
            handled: true,
            flags_dead: false,
        }];
        let code = trampoline(0x1000_0000, &steps, Some(0x2000_0005), SLOW, &WORDS).unwrap();
        let instrs = decode(0x1000_0000, &code);
        let text: Vec<Mnemonic> = instrs.iter().map(|i| i.mnemonic()).collect();
        assert_eq!(&text[..2], &[Mnemonic::Lea, Mnemonic::Push]);
        // Nothing before the slow call changes the flags.
        let before_call = instrs.iter().take_while(|i| i.mnemonic() != Mnemonic::Call);
        for i in before_call {
            assert!(
                i.rflags_modified() == 0,
                "{:?} changes flags before they are saved",
                i.mnemonic()
            );
        }
        // The counter: fs:[counters], then [rcx + 8*3].
        let counters = instrs
            .iter()
            .find(|i| i.segment_prefix() == Register::FS)
            .unwrap();
        assert_eq!(counters.memory_displacement64() as i64, -0xf0);
        assert_eq!(
            counters.memory_displ_size(),
            8,
            "64-bit addressing, no 0x67 prefix"
        );
        assert!(
            instrs
                .iter()
                .any(|i| i.memory_base() == Register::RCX && i.memory_displacement64() == 24)
        );
        // The site word pushed, and the uncounted variant.
        let pushed: Vec<u64> = instrs
            .iter()
            .filter(|i| i.code() == Code::Pushq_imm32)
            .map(|i| i.immediate32() as u64)
            .collect();
        assert_eq!(pushed, vec![7, 7 | u64::from(UNCOUNTED_FLAG)]);
        let calls: Vec<u64> = instrs
            .iter()
            .filter(|i| i.mnemonic() == Mnemonic::Call)
            .map(|i| i.near_branch_target())
            .collect();
        assert_eq!(calls, vec![SLOW.flags; 2]);
        let last = instrs.last().unwrap();
        assert_eq!(
            (last.mnemonic(), last.near_branch_target()),
            (Mnemonic::Jmp, 0x2000_0005)
        );
    }

    #[test]
    fn with_dead_flags_a_repeat_is_a_compare_and_an_increment() {
        let steps = [Step::Event {
            site: 9,
            counter: None,
            repeats: true,
            handled: true,
            flags_dead: true,
        }];
        let code = trampoline(0x1000_0000, &steps, Some(0x2000_0005), SLOW, &WORDS).unwrap();
        let instrs = decode(0x1000_0000, &code);
        let m: Vec<Mnemonic> = instrs.iter().map(|i| i.mnemonic()).collect();
        assert_eq!(&m[..3], &[Mnemonic::Cmp, Mnemonic::Jne, Mnemonic::Inc]);
        assert_eq!(instrs[0].memory_displacement64() as i64, -0x100);
        assert_eq!(instrs[0].immediate32(), 9);
        assert_eq!(instrs[2].memory_displacement64() as i64, -0xf8);
        // The slow call below keeps the red zone and rcx as the other form does.
        let push = instrs
            .iter()
            .position(|i| i.code() == Code::Pushq_imm32)
            .unwrap();
        assert_eq!(m[push - 2..push], [Mnemonic::Lea, Mnemonic::Push]);
    }

    #[test]
    fn a_displaced_call_pushes_the_original_return_address() {
        // call +0x100 at 0x40_1000 (5 bytes): returns to 0x40_1005, calls 0x40_1105.
        let call = one(0x40_1000, &[0xe8, 0x00, 0x01, 0x00, 0x00]);
        let at = 0x3000_0000;
        let code = trampoline(at, &[Step::Copy(call)], None, SLOW, &WORDS).unwrap();
        let instrs = decode(at, &code);
        let lea = instrs
            .iter()
            .find(|i| i.is_ip_rel_memory_operand())
            .unwrap();
        assert_eq!(lea.ip_rel_memory_address(), 0x40_1005);
        let last = instrs.last().unwrap();
        assert_eq!(
            (last.mnemonic(), last.near_branch_target()),
            (Mnemonic::Jmp, 0x40_1105)
        );
        assert!(!instrs.iter().any(|i| i.mnemonic() == Mnemonic::Call));
    }

    #[test]
    fn indirect_calls_through_rsp_are_refused_and_others_become_jumps() {
        let through_rsp = one(0x1000, &[0xff, 0x54, 0x24, 0x08]); // call [rsp+8]
        assert!(movable(&through_rsp).is_err());
        let through_rax = one(0x1000, &[0xff, 0xd0]); // call rax
        let code = trampoline(0x9000, &[Step::Copy(through_rax)], None, SLOW, &WORDS).unwrap();
        let last = *decode(0x9000, &code).last().unwrap();
        assert_eq!(
            (last.mnemonic(), last.op0_register()),
            (Mnemonic::Jmp, Register::RAX)
        );
        assert!(movable(&one(0x1000, &[0xcc])).is_err(), "int3");
    }

    #[test]
    fn the_slow_path_brackets_the_handler_with_the_clock_and_restores_everything() {
        let save = StateSave::Compacted {
            mask: 0x7,
            bytes: 832,
        };
        let code = slow_path(0x5000_0000, 0x7fff_1234_5678, &WORDS, save, true).unwrap();
        let instrs = decode(0x5000_0000, &code);
        let m: Vec<Mnemonic> = instrs.iter().map(|i| i.mnemonic()).collect();
        let position = |x| m.iter().position(|&y| y == x).unwrap();
        let tsc: Vec<usize> = (0..m.len()).filter(|&i| m[i] == Mnemonic::Rdtsc).collect();
        assert_eq!(tsc.len(), 2);
        assert!(position(Mnemonic::Pushfq) < tsc[0]);
        assert!(tsc[0] < position(Mnemonic::Xsavec64));
        assert!(position(Mnemonic::Xrstor64) < tsc[1]);
        assert!(tsc[1] < position(Mnemonic::Popfq));
        assert_eq!(*m.last().unwrap(), Mnemonic::Ret);
        let pushes = m.iter().filter(|&&x| x == Mnemonic::Push).count();
        let pops = m.iter().filter(|&&x| x == Mnemonic::Pop).count();
        assert_eq!(pushes, pops);
        let handler = instrs
            .iter()
            .find(|i| i.code() == Code::Mov_r64_imm64)
            .unwrap();
        assert_eq!(handler.immediate64(), 0x7fff_1234_5678);
        // The program's stack pointer: 9 registers, flags, return address, site, rcx, red zone.
        let rsi = instrs
            .iter()
            .find(|i| i.mnemonic() == Mnemonic::Lea && i.op0_register() == Register::RSI)
            .unwrap();
        assert_eq!(rsi.memory_displacement64(), 80 + 8 + 8 + 8 + 128);
    }

    #[test]
    fn without_vector_instructions_the_slow_path_saves_the_sixteen_xmm_registers() {
        let code = slow_path(0x5000_0000, 0x7fff_1234_5678, &WORDS, StateSave::Sse, false).unwrap();
        let instrs = decode(0x5000_0000, &code);
        let stores = instrs
            .iter()
            .filter(|i| i.code() == Code::Movaps_xmmm128_xmm)
            .count();
        let loads = instrs
            .iter()
            .filter(|i| i.code() == Code::Movaps_xmm_xmmm128)
            .count();
        assert_eq!((stores, loads), (16, 16));
        assert!(!instrs.iter().any(|i| i.mnemonic() == Mnemonic::Xsavec64));
        assert!(
            !instrs.iter().any(|i| i.mnemonic() == Mnemonic::Popfq),
            "flags left as they are"
        );
        assert!(
            instrs.iter().any(|i| i.mnemonic() == Mnemonic::Std),
            "but DF restored"
        );
    }

    #[test]
    fn main_returns_through_the_kept_address() {
        let code = main_return(0x6000_0000, 9, 0x6000_1000, SLOW, &WORDS).unwrap();
        let last = *decode(0x6000_0000, &code).last().unwrap();
        assert_eq!(last.mnemonic(), Mnemonic::Jmp);
        assert_eq!(last.ip_rel_memory_address(), 0x6000_1000);
    }
}
