//! Where the exact back-end stops a program (spec 004 §3.6 step 7, §3.7) and how the
//! instruction under each stop is run afterwards.
//!
//! Marker sites, in static addresses of the analysed object:
//! - every function's entry (the return address is read from the stack there, so calls from
//!   library code and tail calls are seen as well as direct calls);
//! - every return site (the instruction after a call that returns), which closes the activations
//!   that return there;
//! - every loop header, every target of an entry edge (irreducible loops) and every target of an
//!   exit edge, where the thread's active loops are compared with the loops holding the block;
//! - every direct call to a PLT stub, which opens a `name@plt` node for the library's time;
//! - with block counting (`record --exact`), every block start, where a counter per block
//!   counts its executions (the exact reference of `mix`, spec 001 §6.8).
//!
//! A stopped thread never has the original byte put back under it (which would let other
//! threads run past the marker unseen): it resumes at a displaced copy of the instruction,
//! relocated into a scratch page of the target and followed by a jump back (displaced
//! stepping); a direct call is emulated instead, and only an instruction that cannot be
//! relocated is single-stepped in place.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use loopscope_binary::{Exit, Program};

use crate::sites::{CodeIndex, innermost_loops};

/// The roles of one marker address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// Static address.
    pub address: u64,
    /// Index of the function this is the entry of.
    pub function_entry: Option<u32>,
    /// The instruction after a call that returns.
    pub return_site: bool,
    /// A loop block: (function index, loops holding it outermost first, loop it heads).
    pub block: Option<LoopBlock>,
    /// A direct call to a PLT stub.
    pub plt_call: bool,
    /// The start of a counted block: its index in [`counted_blocks`]' order.
    pub counted_block: Option<u32>,
}

impl Site {
    /// Whether the site has no role at all (only its address).
    pub fn address_only(&self) -> bool {
        *self
            == Site {
                address: self.address,
                ..Site::default()
            }
    }
}

/// A block where loop entries, iterations and exits are decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopBlock {
    /// Function index.
    pub function: u32,
    /// Static ids of the loops holding the block, outermost first.
    pub chain: Vec<u32>,
    /// The loop whose header the block is.
    pub header_of: Option<u32>,
}

/// The start addresses of the blocks counted in block-counting mode, in the order of their
/// counters: every block of every function, functions and blocks in address order, each
/// address once.
pub fn counted_blocks(program: &Program) -> Vec<u64> {
    let mut starts: Vec<u64> = program
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().map(|b| b.start))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// Every marker site of a program, sorted by address; with `count_blocks`, every block start
/// too. PLT call sites are found from the call instructions themselves, so the caller passes
/// `call_target(address)` to decode one.
pub fn marker_sites(
    program: &Program,
    call_target: impl Fn(u64) -> Option<u64>,
    count_blocks: bool,
) -> Vec<Site> {
    let index = CodeIndex::new(program);
    let mut sites: BTreeMap<u64, Site> = BTreeMap::new();
    let is_plt = |t: u64| program.plt.iter().any(|p| (p.start..p.end).contains(&t));
    for (fi, f) in program.functions.iter().enumerate() {
        site(&mut sites, f.address).function_entry = Some(fi as u32);
        let innermost = innermost_loops(f);
        let mut loop_blocks: Vec<u32> = Vec::new();
        for l in &f.loops {
            loop_blocks.push(l.header_block);
            loop_blocks.extend(l.entry_edges.iter().map(|e| e.to));
            loop_blocks.extend(l.exit_edges.iter().map(|e| e.to));
        }
        loop_blocks.sort_unstable();
        loop_blocks.dedup();
        for &b in &loop_blocks {
            let Some(block) = f.blocks.get(b as usize) else {
                continue;
            };
            let innermost_id = innermost[b as usize].map(|li| f.loops[li as usize].id);
            site(&mut sites, block.start).block = Some(LoopBlock {
                function: fi as u32,
                chain: index.loop_chain(innermost_id),
                header_of: f.loops.iter().find(|l| l.header_block == b).map(|l| l.id),
            });
        }
        for block in f.blocks.iter().filter(|b| b.exit == Exit::Call) {
            // A call with no block after it in its function is one the compiler knew never
            // returns (the function ends at it: padding or the next function follows), to a
            // callee not known by name; its return address is never executed.
            if !block.succs.is_empty() {
                site(&mut sites, block.end).return_site = true;
            }
            if call_target(block.last).is_some_and(is_plt) {
                site(&mut sites, block.last).plt_call = true;
            }
        }
    }
    if count_blocks {
        for (i, start) in counted_blocks(program).into_iter().enumerate() {
            site(&mut sites, start).counted_block = Some(i as u32);
        }
    }
    sites.into_values().collect()
}

fn site(sites: &mut BTreeMap<u64, Site>, address: u64) -> &mut Site {
    sites.entry(address).or_insert_with(|| Site {
        address,
        ..Site::default()
    })
}

/// How a thread stopped at a marker goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Jump to a relocated copy of the instruction (followed by a jump back).
    Displaced {
        /// Where the copy is in the target.
        copy: u64,
    },
    /// Emulate a direct call: push `return_address`, jump to `target`.
    Call {
        /// The callee.
        target: u64,
        /// The address after the call.
        return_address: u64,
    },
    /// Put the original byte back, step once, put the breakpoint back.
    Step,
}

/// Longest relocated copy of one instruction plus its jump back, with room to spare.
pub const COPY_BYTES: u64 = 32;

/// Decodes the instruction at `address` from `bytes` (read from the target there).
pub fn decode_at(address: u64, bytes: &[u8]) -> Option<Instruction> {
    let mut decoder = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE);
    let instr = decoder.decode();
    (!instr.is_invalid()).then_some(instr)
}

/// The target of a direct near call, if `instr` is one.
pub fn direct_call_target(instr: &Instruction) -> Option<u64> {
    (instr.flow_control() == FlowControl::Call && instr.code() == Code::Call_rel32_64)
        .then(|| instr.near_branch_target())
}

/// How to resume after the marker on `instr`, and the bytes of its relocated copy at `copy`.
pub fn plan_resume(instr: &Instruction, copy: u64) -> (Resume, Option<Vec<u8>>) {
    if let Some(target) = direct_call_target(instr) {
        return (
            Resume::Call {
                target,
                return_address: instr.next_ip(),
            },
            None,
        );
    }
    if matches!(
        instr.flow_control(),
        FlowControl::Call
            | FlowControl::IndirectCall
            | FlowControl::Interrupt
            | FlowControl::XbeginXabortXend
    ) {
        return (Resume::Step, None);
    }
    let Ok(back) = Instruction::with_branch(Code::Jmp_rel32_64, instr.next_ip()) else {
        return (Resume::Step, None);
    };
    let block = [*instr, back];
    match BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, copy),
        BlockEncoderOptions::NONE,
    ) {
        Ok(result) if result.code_buffer.len() as u64 <= COPY_BYTES => {
            (Resume::Displaced { copy }, Some(result.code_buffer))
        }
        _ => (Resume::Step, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_binary::{Block, EdgeKind, Function, SeedSource, Succ};

    fn call_block(start: u64, end: u64, succs: Vec<Succ>) -> Block {
        Block {
            start,
            end,
            last: start,
            instructions: 1,
            classes: Default::default(),
            tags: Default::default(),
            exit: Exit::Call,
            succs,
        }
    }

    #[test]
    fn a_call_the_function_ends_at_gets_no_return_site() {
        // 0x1000: call (returns to 0x1005) | 0x1005: call, then padding the analysis never
        // decoded: a callee that does not return, though its name does not say so.
        let blocks = vec![
            call_block(
                0x1000,
                0x1005,
                vec![Succ {
                    block: 1,
                    kind: EdgeKind::FallThrough,
                }],
            ),
            call_block(0x1005, 0x100a, Vec::new()),
        ];
        let program = Program {
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
                address: 0x1000,
                size: 0x0a,
                ranges: Vec::new(),
                source: SeedSource::Symbol,
                entry_block: 0,
                blocks,
                loops: Vec::new(),
                instructions: 2,
                classes: Default::default(),
                undecodable: 0,
                unknown_jumps: 0,
                jump_tables: 0,
                noreturn: false,
            }],
            warnings: Vec::new(),
        };
        let sites = marker_sites(&program, |_| None, false);
        let returns: Vec<u64> = sites
            .iter()
            .filter(|s| s.return_site)
            .map(|s| s.address)
            .collect();
        assert_eq!(returns, [0x1005]);
        assert!(sites.iter().all(|s| s.address != 0x100a));
    }

    #[test]
    fn a_rip_relative_load_is_relocated_with_its_displacement_fixed() {
        // mov eax, [rip + 0x100] at 0x1000, copied to 0x2000.
        let instr = decode_at(0x1000, &[0x8b, 0x05, 0x00, 0x01, 0x00, 0x00]).unwrap();
        let (resume, bytes) = plan_resume(&instr, 0x2000);
        assert_eq!(resume, Resume::Displaced { copy: 0x2000 });
        let bytes = bytes.unwrap();
        let copied = decode_at(0x2000, &bytes).unwrap();
        assert_eq!(copied.memory_displacement64(), 0x1106);
        let back = decode_at(copied.next_ip(), &bytes[copied.len()..]).unwrap();
        assert_eq!(back.near_branch_target(), 0x1006);
    }

    #[test]
    fn a_short_conditional_branch_keeps_both_targets() {
        // jne +0x10 at 0x1000 (2 bytes): taken to 0x1012, else 0x1002.
        let instr = decode_at(0x1000, &[0x75, 0x10]).unwrap();
        let (_, bytes) = plan_resume(&instr, 0x8000_0000);
        let bytes = bytes.unwrap();
        let jcc = decode_at(0x8000_0000, &bytes).unwrap();
        assert_eq!(jcc.near_branch_target(), 0x1012);
        let back = decode_at(jcc.next_ip(), &bytes[jcc.len()..]).unwrap();
        assert_eq!(back.near_branch_target(), 0x1002);
    }

    #[test]
    fn direct_calls_are_emulated_and_indirect_ones_stepped() {
        let call = decode_at(0x1000, &[0xe8, 0x10, 0x00, 0x00, 0x00]).unwrap();
        assert_eq!(
            plan_resume(&call, 0x2000).0,
            Resume::Call {
                target: 0x1015,
                return_address: 0x1005
            }
        );
        let indirect = decode_at(0x1000, &[0xff, 0xd0]).unwrap(); // call rax
        assert_eq!(plan_resume(&indirect, 0x2000).0, Resume::Step);
    }
}
