//! Basic blocks of a decoded function and the edges between them.

use serde::{Deserialize, Serialize};

use crate::classes::{ClassCounts, TagCounts};
use crate::decode::{Decoded, Flow, Insn, Ranges};

/// Where blocks start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitMode {
    /// True basic blocks: leaders at the entry, at every known branch target and after every
    /// control transfer (calls included).
    #[default]
    Leaders,
    /// The patent's literal rule (spec 001 Fig. 9): a block ends only after a control
    /// transfer; branch targets do not start blocks.
    AfterBranch,
}

/// How control leaves a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    /// Falls into the next block (which is a leader).
    FallThrough,
    /// A conditional branch.
    Branch,
    /// A direct jump inside the function.
    Jump,
    /// A jump to another function.
    TailCall,
    /// An indirect jump through a recovered jump table.
    Table,
    /// An indirect jump with unknown targets.
    UnknownJump,
    /// A call that returns.
    Call,
    /// A call to a function that never returns.
    NoReturnCall,
    /// A return.
    Return,
    /// Nothing follows (`ud2`, `hlt`, `int3`, undecodable bytes).
    Stop,
}

impl Exit {
    /// The name `--json` and serde spell it with: `fall-through`, `no-return-call`, ...
    pub fn name(self) -> &'static str {
        match self {
            Exit::FallThrough => "fall-through",
            Exit::Branch => "branch",
            Exit::Jump => "jump",
            Exit::TailCall => "tail-call",
            Exit::Table => "table",
            Exit::UnknownJump => "unknown-jump",
            Exit::Call => "call",
            Exit::NoReturnCall => "no-return-call",
            Exit::Return => "return",
            Exit::Stop => "stop",
        }
    }
}

/// Which way an edge leaves its source block's last instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    /// The branch is taken.
    Taken,
    /// Control falls through (also after a call returns).
    FallThrough,
    /// One target of a jump table.
    Table,
}

/// An edge to another block of the same function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Succ {
    /// Index of the target block.
    pub block: u32,
    /// Which way.
    pub kind: EdgeKind,
}

/// A block: a contiguous run of instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Address of the first instruction.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Address of the last instruction (where exit markers go).
    pub last: u64,
    /// Number of instructions.
    pub instructions: u64,
    /// Instructions per exclusive class.
    pub classes: ClassCounts,
    /// Instructions per tag.
    pub tags: TagCounts,
    /// How control leaves.
    pub exit: Exit,
    /// Edges to blocks of the same function.
    pub succs: Vec<Succ>,
}

/// Splits decoded instructions into blocks and links them; returns the blocks and the
/// entry block's index.
pub(crate) fn build_blocks(
    decoded: &Decoded,
    ranges: &Ranges,
    entry: u64,
    mode: SplitMode,
) -> (Vec<Block>, u32) {
    let insns = decoded.insns.sorted();
    let leaders = leaders(decoded, entry, mode);
    let mut is_leader = leaders.iter().peekable();
    let mut blocks: Vec<Block> = Vec::new();
    // The last instruction of each block.
    let mut lasts: Vec<&Insn> = Vec::new();
    let mut next_ip = 0;
    let mut open = false;
    for (ip, insn) in insns {
        let ip = *ip;
        if ip < next_ip && open {
            continue; // overlaps the previous instruction (misaligned decoding)
        }
        while is_leader.next_if(|&&l| l < ip).is_some() {}
        let leader = is_leader.peek() == Some(&&ip);
        if !open || ip != next_ip || leader {
            blocks.push(Block {
                start: ip,
                end: ip,
                last: ip,
                instructions: 0,
                classes: ClassCounts::default(),
                tags: TagCounts::default(),
                exit: Exit::FallThrough,
                succs: Vec::new(),
            });
            lasts.push(insn);
        }
        let (Some(block), Some(last)) = (blocks.last_mut(), lasts.last_mut()) else {
            continue;
        };
        next_ip = ip + u64::from(insn.len);
        block.end = next_ip;
        block.last = ip;
        *last = insn;
        block.instructions += 1;
        block.classes.add(insn.class);
        block.tags.add(insn.tags);
        open = insn.flow == Flow::Next;
        if !open {
            next_ip = 0;
        }
    }
    let starts: Vec<u64> = blocks.iter().map(|b| b.start).collect();
    let ends: Vec<u64> = blocks.iter().map(|b| b.end).collect();
    let block_of = |address: u64| -> Option<u32> {
        let i = starts.partition_point(|&s| s <= address).checked_sub(1)?;
        (address < ends[i]).then_some(i as u32)
    };
    for (block, last) in blocks.iter_mut().zip(lasts) {
        link(block, last, decoded, ranges, &block_of);
    }
    let entry_block = block_of(entry).unwrap_or(0);
    blocks.shrink_to_fit(); // a large library has millions of blocks to keep
    (blocks, entry_block)
}

/// Block start addresses, sorted.
fn leaders(decoded: &Decoded, entry: u64, mode: SplitMode) -> Vec<u64> {
    let mut leaders = vec![entry];
    for &(ip, ref insn) in decoded.insns.sorted() {
        if insn.flow != Flow::Next {
            leaders.push(ip + u64::from(insn.len));
        }
        if mode == SplitMode::Leaders {
            if let (Flow::Cond | Flow::Jump, Some(t)) = (insn.flow, insn.target) {
                leaders.push(t);
            }
        }
    }
    if mode == SplitMode::Leaders {
        leaders.extend(decoded.tables.values().flatten());
    }
    leaders.sort_unstable();
    leaders.dedup();
    leaders
}

fn link(
    block: &mut Block,
    insn: &Insn,
    decoded: &Decoded,
    ranges: &Ranges,
    block_of: &dyn Fn(u64) -> Option<u32>,
) {
    block.succs.reserve_exact(match insn.flow {
        Flow::Cond => 2,
        Flow::Next | Flow::Jump | Flow::Call | Flow::IndirectCall => 1,
        Flow::IndirectJump => decoded.tables.get(&block.last).map_or(0, Vec::len),
        Flow::NoReturnCall | Flow::Return | Flow::Stop => 0,
    });
    let mut add = |address: u64, kind: EdgeKind| {
        if let Some(b) = block_of(address) {
            block.succs.push(Succ { block: b, kind });
        }
    };
    let target = insn.target.filter(|t| ranges.contains(*t));
    block.exit = match insn.flow {
        Flow::Next => {
            add(block.end, EdgeKind::FallThrough);
            Exit::FallThrough
        }
        Flow::Cond => {
            if let Some(t) = target {
                add(t, EdgeKind::Taken);
            }
            add(block.end, EdgeKind::FallThrough);
            Exit::Branch
        }
        Flow::Jump => match target {
            Some(t) => {
                add(t, EdgeKind::Taken);
                Exit::Jump
            }
            None => Exit::TailCall,
        },
        Flow::IndirectJump => match decoded.tables.get(&block.last) {
            Some(targets) => {
                targets.iter().for_each(|&t| add(t, EdgeKind::Table));
                Exit::Table
            }
            None => Exit::UnknownJump,
        },
        Flow::Call | Flow::IndirectCall => {
            add(block.end, EdgeKind::FallThrough);
            Exit::Call
        }
        Flow::NoReturnCall => Exit::NoReturnCall,
        Flow::Return => Exit::Return,
        Flow::Stop => Exit::Stop,
    };
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn exit_names_are_the_json_names() {
        let every = [
            Exit::FallThrough,
            Exit::Branch,
            Exit::Jump,
            Exit::TailCall,
            Exit::Table,
            Exit::UnknownJump,
            Exit::Call,
            Exit::NoReturnCall,
            Exit::Return,
            Exit::Stop,
        ];
        for exit in every {
            let json = serde_json::to_string(&exit).unwrap();
            assert_eq!(json, format!("\"{}\"", exit.name()));
        }
    }
}
