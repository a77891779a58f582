//! Run-time code generation for the instruction-cache probe: the paper's dummy function (a
//! prologue, a NOP body, an epilogue), a jump chain that fetches one new cache line per
//! instruction, and lines of indirect jumps that follow a table of targets, all written in
//! place into one executable mapping.

use std::time::Instant;

use crate::ProbeError;
use crate::mem::Mapping;

/// `push rbp; mov rbp, rsp`: the x86-64 analogue of SPARC `save`.
pub const PROLOGUE: [u8; 4] = [0x55, 0x48, 0x89, 0xE5];
/// `pop rbp; ret`: the analogue of SPARC `ret; restore`.
pub const EPILOGUE: [u8; 2] = [0x5D, 0xC3];
/// `nop dword [rax+0]`: a 4-byte NOP, so that 100 NOPs are the paper's 400 bytes.
pub const NOP4: [u8; 4] = [0x0F, 0x1F, 0x40, 0x00];
/// Cache-line size the jump chain is laid out for.
pub const LINE_BYTES: usize = 64;
const INT3: u8 = 0xCC;
const JMP_REL32: u8 = 0xE9;
const RET: u8 = 0xC3;
/// `mov rax, [rdi]; lea rdi, [rdi + 8]; jmp rax`: jump to the next address of the table at
/// `rdi`, the one argument of the C ABI.
const INDIRECT_STEP: [u8; 9] = [0x48, 0x8B, 0x07, 0x48, 0x8D, 0x7F, 0x08, 0xFF, 0xE0];

/// Which code the instruction-cache probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeKind {
    /// The paper's probe: prologue, `size / 4` four-byte NOPs, epilogue.
    NopBody,
    /// One `jmp` at the start of each 64-byte line to the next line, the rest `int3`.
    JumpChain,
    /// The same chain visiting the lines in a random order (defeats next-line prefetch).
    RandomJumpChain,
    /// Lines of indirect jumps through a table refilled before every call, so that no
    /// predictor knows the next line before the jump executes ([`indirect_jump_lines`]).
    IndirectJumpChain,
}

/// Code made by this module's generators, and only by them: [`CodeRegion::call`] trusts it to
/// return without touching memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    bytes: Vec<u8>,
    entry: usize,
    /// Lines of table-driven indirect jumps, for code that takes a [`TargetTable`].
    table_lines: Option<usize>,
}

impl Generated {
    /// The machine code.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Offset of the first instruction executed.
    pub fn entry(&self) -> usize {
        self.entry
    }
}

/// The paper's dummy function with `body_bytes` (rounded down to 4) of NOPs.
pub fn nop_function(body_bytes: usize) -> Generated {
    let nops = body_bytes / NOP4.len();
    let mut code = Vec::with_capacity(PROLOGUE.len() + nops * NOP4.len() + EPILOGUE.len());
    code.extend_from_slice(&PROLOGUE);
    for _ in 0..nops {
        code.extend_from_slice(&NOP4);
    }
    code.extend_from_slice(&EPILOGUE);
    Generated {
        bytes: code,
        entry: 0,
        table_lines: None,
    }
}

/// A jump chain over `order.len()` lines visited in `order` (a permutation of line indices);
/// execution enters at line `order[0]` and returns from the last line visited.
///
/// Every line starts with a 5-byte `jmp rel32` (or `ret`) and is padded with `int3`, so code
/// that strays traps instead of running on.
/// An empty `order` gives a lone `ret`. An `order` that is not a permutation of
/// `0..order.len()` is refused: a line visited twice could loop forever, one never visited
/// would leave a hole of `int3`.
pub fn jump_chain(order: &[u32]) -> Result<Generated, ProbeError> {
    if order.is_empty() {
        return Ok(Generated {
            bytes: vec![RET],
            entry: 0,
            table_lines: None,
        });
    }
    let mut seen = vec![false; order.len()];
    for &line in order {
        match seen.get_mut(line as usize) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(ProbeError::Invalid(format!(
                    "jump-chain order is not a permutation of 0..{} (line {line})",
                    order.len()
                )));
            }
        }
    }
    let mut code = vec![INT3; order.len() * LINE_BYTES];
    for (i, &line) in order.iter().enumerate() {
        let at = line as usize * LINE_BYTES;
        match order.get(i + 1) {
            Some(&next) => {
                let target = next as i64 * LINE_BYTES as i64;
                let rel = (target - (at as i64 + 5)) as i32;
                code[at] = JMP_REL32;
                code[at + 1..at + 5].copy_from_slice(&rel.to_le_bytes());
            }
            None => code[at] = RET,
        }
    }
    Ok(Generated {
        bytes: code,
        entry: order[0] as usize * LINE_BYTES,
        table_lines: None,
    })
}

/// `lines` lines that each jump to the next address of a table (`INDIRECT_STEP`, padded
/// with `int3`), then one line holding `ret`. Entered at line 0 with a [`TargetTable`] whose
/// addresses are lines of this code, the last being the `ret` line.
///
/// Every line's jump goes where the table says, so a table in a new order every call leaves
/// the branch predictors nothing to learn: the front end cannot fetch the next line before
/// the jump executes, and an L1i miss costs its full latency on any core.
pub fn indirect_jump_lines(lines: usize) -> Generated {
    let mut code = vec![INT3; (lines + 1) * LINE_BYTES];
    for line in code.chunks_exact_mut(LINE_BYTES).take(lines) {
        line[..INDIRECT_STEP.len()].copy_from_slice(&INDIRECT_STEP);
    }
    code[lines * LINE_BYTES] = RET;
    Generated {
        bytes: code,
        entry: 0,
        table_lines: Some(lines),
    }
}

/// The addresses an [`indirect_jump_lines`] call jumps through, built by
/// [`CodeRegion::fill_targets`] for the code the region holds then.
#[derive(Debug, Default)]
pub struct TargetTable {
    addresses: Vec<u64>,
    generation: u64,
}

/// Time spent in the phases of one rewrite, in seconds (the paper's Table 4 columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RewriteTimes {
    /// Writing the new code into the mapping ("program-size change").
    pub change_s: f64,
    /// The `mprotect` pair around the write (the analogue of the paper's cache flush).
    pub flush_s: f64,
}

/// One executable mapping whose code is rewritten in place between calls.
#[derive(Debug)]
pub struct CodeRegion {
    mapping: Mapping,
    entry: Option<usize>,
    /// Lines of the current code when it jumps through a table.
    table_lines: Option<usize>,
    /// Counts rewrites, so a table built for older code is never used.
    generation: u64,
}

impl CodeRegion {
    /// Reserves room for `capacity_bytes` of code.
    pub fn new(capacity_bytes: usize) -> Result<CodeRegion, ProbeError> {
        Ok(CodeRegion {
            mapping: Mapping::new(capacity_bytes)?,
            entry: None,
            table_lines: None,
            generation: 0,
        })
    }

    /// Bytes of code the region can hold.
    pub fn capacity(&self) -> usize {
        self.mapping.len()
    }

    /// Whether huge pages were requested for the code.
    pub fn huge_pages_requested(&self) -> bool {
        self.mapping.huge_pages_requested
    }

    /// KiB of the code mapping that sit on huge pages.
    pub fn huge_page_kib(&self) -> Option<u64> {
        self.mapping.huge_page_kib()
    }

    /// Replaces the code: makes the mapping writable, copies `code`, makes it executable
    /// again (W^X), and records its entry as the address [`call`](Self::call) jumps to.
    pub fn rewrite(&mut self, generated: &Generated) -> Result<RewriteTimes, ProbeError> {
        let (code, entry) = (generated.bytes(), generated.entry());
        if code.len() > self.capacity() {
            return Err(ProbeError::Invalid(format!(
                "{} bytes of code (entry {entry}) do not fit a {}-byte region",
                code.len(),
                self.capacity()
            )));
        }
        self.entry = None;
        self.generation += 1;
        let t0 = Instant::now();
        self.mapping.make_writable()?;
        let t1 = Instant::now();
        // SAFETY: the mapping is writable now and at least code.len() bytes long; the source
        // is a distinct Rust allocation, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), self.mapping.as_ptr(), code.len()) };
        let t2 = Instant::now();
        self.mapping.make_executable()?;
        // x86 keeps instruction fetch coherent with the same core's stores; the writer and the
        // caller are the same (pinned) thread, so no explicit flush is needed here.
        let t3 = Instant::now();
        self.entry = Some(entry);
        self.table_lines = generated.table_lines;
        Ok(RewriteTimes {
            change_s: (t2 - t1).as_secs_f64(),
            flush_s: (t1 - t0 + (t3 - t2)).as_secs_f64(),
        })
    }

    /// Calls the current code once. Does nothing before the first successful rewrite, or when
    /// the code jumps through a table (see [`call_with`](Self::call_with)).
    #[inline(always)]
    pub fn call(&self) {
        if let (Some(entry), None) = (self.entry, self.table_lines) {
            // SAFETY: `rewrite` only sets `entry` after copying a complete `Generated`
            // function (which only `nop_function` and `jump_chain` construct for code without
            // a table) and making the mapping executable; such code follows the C ABI,
            // touches no memory beyond its own stack frame and returns. Jump-chain
            // permutations are checked when built.
            unsafe {
                let f: extern "C" fn() = std::mem::transmute(self.mapping.as_ptr().add(entry));
                f();
            }
        }
    }

    /// Fills `table` with the addresses of the current code's lines in `order`, then the
    /// `ret` line. Refused unless the code jumps through a table and every line of `order`
    /// is one of its lines.
    pub fn fill_targets(&self, order: &[u32], table: &mut TargetTable) -> Result<(), ProbeError> {
        let lines = self.table_lines.ok_or_else(|| {
            ProbeError::Invalid("the code in the region takes no jump table".into())
        })?;
        if let Some(&bad) = order.iter().find(|&&line| line as usize >= lines) {
            return Err(ProbeError::Invalid(format!(
                "jump-table line {bad} is past the code's {lines} lines"
            )));
        }
        let base = self.mapping.as_ptr() as u64;
        let address = |line: usize| base + (line * LINE_BYTES) as u64;
        table.addresses.clear();
        table
            .addresses
            .extend(order.iter().map(|&line| address(line as usize)));
        table.addresses.push(address(lines));
        table.generation = self.generation;
        Ok(())
    }

    /// Calls the current table-driven code once with `table`. Does nothing unless the table
    /// was filled for the code the region holds now.
    #[inline(always)]
    pub fn call_with(&self, table: &TargetTable) {
        if let (Some(entry), Some(_)) = (self.entry, self.table_lines)
            && table.generation == self.generation
        {
            // SAFETY: the region holds `indirect_jump_lines` code, executable (as in `call`),
            // and `fill_targets` built this table for it since the last rewrite: every
            // address is the start of one of its lines and the last is its `ret` line, so
            // each jump lands on a line that reads the next address and the chain returns.
            // The code reads only the table, through `rdi`, and touches no other memory.
            unsafe {
                let f: extern "C" fn(*const u64) =
                    std::mem::transmute(self.mapping.as_ptr().add(entry));
                f(table.addresses.as_ptr());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};

    fn decode(code: &[u8], ip: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    #[test]
    fn nop_function_decodes_to_prologue_nops_epilogue() {
        for size in [0usize, 4, 400, 4000, 402] {
            let generated = nop_function(size);
            let code = generated.bytes();
            assert_eq!(code.len(), 4 + size / 4 * 4 + 2);
            let ins = decode(code, 0);
            assert_eq!(ins.len(), 2 + size / 4 + 2);
            assert_eq!(ins[0].mnemonic(), Mnemonic::Push);
            assert_eq!(ins[1].mnemonic(), Mnemonic::Mov);
            for nop in &ins[2..ins.len() - 2] {
                assert_eq!(nop.mnemonic(), Mnemonic::Nop);
                assert_eq!(nop.len(), 4);
            }
            assert_eq!(ins[ins.len() - 2].mnemonic(), Mnemonic::Pop);
            assert_eq!(ins[ins.len() - 1].mnemonic(), Mnemonic::Ret);
        }
    }

    #[test]
    fn jump_chain_visits_every_line_once_in_order() {
        let order = [2u32, 0, 3, 1];
        let generated = jump_chain(&order).unwrap();
        let code = generated.bytes();
        assert_eq!(code.len(), 4 * LINE_BYTES);
        let mut at = generated.entry();
        let mut visited = Vec::new();
        loop {
            visited.push((at / LINE_BYTES) as u32);
            let ins = decode(&code[at..at + 5.min(code.len() - at)], at as u64);
            match ins[0].mnemonic() {
                Mnemonic::Jmp => at = ins[0].near_branch_target() as usize,
                Mnemonic::Ret => break,
                other => panic!("unexpected {other:?} at {at}"),
            }
            assert_eq!(at % LINE_BYTES, 0);
        }
        assert_eq!(visited, order);
        // Everything but the first instruction of each line is int3.
        for line in code.chunks(LINE_BYTES) {
            let tail = if line[0] == RET {
                &line[1..]
            } else {
                &line[5..]
            };
            assert!(tail.iter().all(|&b| b == INT3));
        }
    }

    #[test]
    fn generated_code_runs_and_returns_at_small_sizes() {
        let mut region = CodeRegion::new(64 * 1024).unwrap();
        region.call(); // before any rewrite: nothing to run, must not crash
        for size in [0usize, 400, 4000] {
            let times = region.rewrite(&nop_function(size)).unwrap();
            assert!(times.change_s >= 0.0 && times.flush_s >= 0.0);
            region.call();
        }
        for lines in [0u32, 1, 2, 64] {
            let order: Vec<u32> = (0..lines).rev().collect();
            region.rewrite(&jump_chain(&order).unwrap()).unwrap();
            region.call();
        }
    }

    #[test]
    fn orders_that_are_not_permutations_are_refused() {
        assert!(jump_chain(&[0, 0]).unwrap_err().is_bad_input());
        assert!(jump_chain(&[0, 2]).is_err());
        assert!(jump_chain(&[1, 0]).is_ok());
    }

    #[test]
    fn oversized_code_is_refused() {
        let mut region = CodeRegion::new(1).unwrap();
        let too_big = nop_function(region.capacity() + 4);
        assert!(region.rewrite(&too_big).unwrap_err().is_bad_input());
    }

    #[test]
    fn indirect_lines_follow_their_table_and_refuse_foreign_ones() {
        let generated = indirect_jump_lines(3);
        let code = generated.bytes();
        assert_eq!(code.len(), 4 * LINE_BYTES);
        for line in code.chunks(LINE_BYTES).take(3) {
            let ins = decode(&line[..INDIRECT_STEP.len()], 0);
            let mnemonics: Vec<Mnemonic> = ins.iter().map(|i| i.mnemonic()).collect();
            assert_eq!(mnemonics, [Mnemonic::Mov, Mnemonic::Lea, Mnemonic::Jmp]);
            assert!(line[INDIRECT_STEP.len()..].iter().all(|&b| b == INT3));
        }
        assert_eq!(code[3 * LINE_BYTES], RET);

        let mut region = CodeRegion::new(64 * 1024).unwrap();
        let mut table = TargetTable::default();
        // No table-driven code yet, and a line past the code: refused.
        assert!(region.fill_targets(&[0], &mut table).is_err());
        region.rewrite(&generated).unwrap();
        assert!(
            region
                .fill_targets(&[3], &mut table)
                .unwrap_err()
                .is_bad_input()
        );
        region.call_with(&table); // never filled: must not run
        region.call(); // the code needs a table: must not run
        for order in [&[2u32, 0, 1][..], &[1, 1, 1], &[]] {
            region.fill_targets(order, &mut table).unwrap();
            region.call_with(&table);
        }
        // A table of older code is not used after a rewrite.
        region.rewrite(&indirect_jump_lines(1)).unwrap();
        region.call_with(&table);
    }
}
