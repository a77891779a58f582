//! Where an address is in an analysed object: its function and the loops around it.

use std::collections::HashMap;

use loopscope_binary::{Function, Loop, Program};

/// One contiguous range of code with its function and innermost loop.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    function: u32,
    block: u32,
    innermost: Option<u32>,
}

/// An address index over one analysed object (static addresses).
#[derive(Debug)]
pub struct CodeIndex<'a> {
    program: &'a Program,
    spans: Vec<Span>,
    loops: HashMap<u32, (u32, u32)>,
}

/// What an address is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Index of the function in `Program::functions`.
    pub function: u32,
    /// Static id of the innermost loop holding the address.
    pub innermost_loop: Option<u32>,
    /// Index of the block in its function.
    pub block: u32,
}

impl<'a> CodeIndex<'a> {
    /// Indexes every block of every function.
    pub fn new(program: &'a Program) -> CodeIndex<'a> {
        let mut spans = Vec::new();
        let mut loops = HashMap::new();
        for (fi, f) in program.functions.iter().enumerate() {
            let innermost = innermost_loops(f);
            for (li, l) in f.loops.iter().enumerate() {
                loops.insert(l.id, (fi as u32, li as u32));
            }
            for (bi, b) in f.blocks.iter().enumerate() {
                spans.push(Span {
                    start: b.start,
                    end: b.end,
                    function: fi as u32,
                    block: bi as u32,
                    innermost: innermost[bi].map(|li| f.loops[li as usize].id),
                });
            }
        }
        spans.sort_by_key(|s| (s.start, s.end));
        CodeIndex {
            program,
            spans,
            loops,
        }
    }

    /// The function, block and innermost loop holding `address`.
    pub fn locate(&self, address: u64) -> Option<Place> {
        let i = self.spans.partition_point(|s| s.start <= address);
        let span = self.spans[..i].last()?;
        if address >= span.end {
            return None;
        }
        Some(Place {
            function: span.function,
            innermost_loop: span.innermost,
            block: span.block,
        })
    }

    /// The loop of that static id.
    pub fn loop_by_id(&self, id: u32) -> Option<&'a Loop> {
        let &(f, l) = self.loops.get(&id)?;
        Some(&self.program.functions[f as usize].loops[l as usize])
    }

    /// The static ids of the loops around `innermost`, outermost first.
    pub fn loop_chain(&self, innermost: Option<u32>) -> Vec<u32> {
        let mut chain = Vec::new();
        let mut at = innermost;
        while let Some(id) = at {
            chain.push(id);
            at = self.loop_by_id(id).and_then(|l| l.parent);
        }
        chain.reverse();
        chain
    }

    /// The analysed program.
    pub fn program(&self) -> &'a Program {
        self.program
    }
}

/// For each block of `f`, the index of the deepest loop whose region holds it.
pub(crate) fn innermost_loops(f: &Function) -> Vec<Option<u32>> {
    let mut best: Vec<Option<(u32, u32)>> = vec![None; f.blocks.len()];
    for (li, l) in f.loops.iter().enumerate() {
        for &b in &l.block_ids {
            if let Some(slot) = best.get_mut(b as usize)
                && slot.is_none_or(|(depth, _)| l.depth > depth)
            {
                *slot = Some((l.depth, li as u32));
            }
        }
    }
    best.into_iter().map(|b| b.map(|(_, li)| li)).collect()
}
