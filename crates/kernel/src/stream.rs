//! The access stream: every memory access of a kernel for concrete parameters, in execution
//! order, produced on the fly (no trace is materialised).

use crate::KernelError;
use crate::affine::{Affine, Sym};
use crate::ir::{AccessKind, Kernel, Node};
use crate::layout::Layout;

/// One memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The reference (index into [`Kernel::references`] order).
    pub reference: u32,
    /// Byte address.
    pub addr: u64,
    /// Bytes accessed.
    pub size_bytes: u32,
    /// True for a store.
    pub write: bool,
}

/// An affine function of loop variables with parameters already substituted.
#[derive(Debug, Clone)]
pub(crate) struct Lin {
    constant: i64,
    terms: Vec<(usize, i64)>,
}

impl Lin {
    pub(crate) fn from_affine(a: &Affine, params: &[i64]) -> Option<Lin> {
        let bound = a.bind_params(params)?;
        Some(Lin {
            constant: bound.constant,
            terms: bound
                .terms
                .iter()
                .filter_map(|&(s, c)| match s {
                    Sym::Loop(l) => Some((l, c)),
                    Sym::Param(_) => None,
                })
                .collect(),
        })
    }

    fn coefficient(&self, loop_id: usize) -> i64 {
        self.terms
            .iter()
            .filter(|(l, _)| *l == loop_id)
            .fold(0i64, |sum, (_, c)| sum.wrapping_add(*c))
    }

    /// The value in wrapping arithmetic: exact when [`Program::safe`] proved it cannot overflow.
    #[inline]
    fn eval_wrapping(&self, vars: &[i64]) -> i64 {
        let mut v = self.constant;
        for &(l, c) in &self.terms {
            v = v.wrapping_add(c.wrapping_mul(vars[l]));
        }
        v
    }

    /// The smallest and largest value over boxes of loop-variable `ranges`, in floating point
    /// (no overflow; for estimates).
    pub(crate) fn interval_f64(&self, ranges: &[(f64, f64)]) -> (f64, f64) {
        let (mut lo, mut hi) = (self.constant as f64, self.constant as f64);
        for &(l, c) in &self.terms {
            let (a, b) = (c as f64 * ranges[l].0, c as f64 * ranges[l].1);
            lo += a.min(b);
            hi += a.max(b);
        }
        (lo, hi)
    }

    /// The smallest and largest value over boxes of loop-variable `ranges`.
    pub(crate) fn interval(&self, ranges: &[(i128, i128)]) -> (i128, i128) {
        let (mut lo, mut hi) = (i128::from(self.constant), i128::from(self.constant));
        for &(l, c) in &self.terms {
            let (a, b) = (i128::from(c) * ranges[l].0, i128::from(c) * ranges[l].1);
            lo += a.min(b);
            hi += a.max(b);
        }
        (lo, hi)
    }

    #[inline]
    pub(crate) fn eval(&self, vars: &[i64]) -> Option<i64> {
        let mut v = self.constant;
        for &(l, c) in &self.terms {
            v = v.checked_add(c.checked_mul(vars[l])?)?;
        }
        Some(v)
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Start loop `id`; jump to `exit` when it runs zero times.
    Enter { id: usize, exit: usize },
    /// Execute statement `stmt`, whose references are `refs[first..first + count]`.
    Stmt { first: usize, count: usize },
    /// Next iteration of loop `id`, jumping back to `body`, or fall through.
    Back { id: usize, body: usize },
}

#[derive(Debug, Clone)]
struct RefCode {
    /// Byte address as an affine function of the loop variables.
    addr: Lin,
    size_bytes: u32,
    write: bool,
}

/// A kernel compiled for concrete parameters and a layout: the source of access streams.
#[derive(Debug, Clone)]
pub struct Program {
    origin: String,
    var_names: Vec<String>,
    ops: Vec<Op>,
    refs: Vec<RefCode>,
    starts: Vec<Lin>,
    ends: Vec<Lin>,
    steps: Vec<i64>,
    /// For each statement: how many times it executes.
    executions: Vec<u64>,
    /// For each loop: how many times it starts with at least one iteration.
    loop_entries: Vec<u64>,
    /// Interval analysis proved every address in `[0, 2^63)` and every loop variable far from
    /// overflow, so the stream may use unchecked (wrapping) arithmetic.
    safe: bool,
    /// Per loop: the references of statements directly in its body, evaluated when it starts
    /// and moved by their `step_delta` on each of its iterations.
    direct_refs: Vec<Vec<usize>>,
    /// Per loop: `Some(range)` when its body is statements only, whose references are
    /// `range` in execution order, so whole iterations can be produced in one tight loop.
    tight: Vec<Option<(usize, usize)>>,
    /// Per reference: how far its address moves per iteration of its innermost loop.
    step_delta: Vec<i64>,
    /// Per reference: its access with the address left to fill in.
    templates: Vec<Access>,
    /// The most references one statement has (a statement is emitted whole).
    max_statement_refs: usize,
    /// Every subscript mentions only enclosing loops, so addresses can be kept up to date
    /// incrementally (each loop moves only its own references).
    enclosed: bool,
}

impl Program {
    /// Compiles `kernel` for parameter values `params` (in [`Kernel::params`] order) and `layout`.
    pub fn new(kernel: &Kernel, params: &[i64], layout: &Layout) -> Result<Program, KernelError> {
        let overflow = || KernelError::Binding {
            origin: kernel.origin.clone(),
            message:
                "an address, loop bound or trip count overflows 64 bits with these parameter values"
                    .into(),
        };
        let mut refs = Vec::new();
        for ((_, r), addr) in kernel
            .references()
            .zip(reference_addresses(kernel, params, layout)?)
        {
            let array = &kernel.arrays[r.array];
            refs.push(RefCode {
                addr,
                size_bytes: array.elem.bytes() as u32,
                write: r.kind == AccessKind::Write,
            });
        }
        let mut program = Program {
            origin: kernel.origin.clone(),
            var_names: kernel.loops.iter().map(|l| l.var.clone()).collect(),
            ops: Vec::new(),
            refs,
            starts: Vec::new(),
            ends: Vec::new(),
            steps: kernel.loops.iter().map(|l| l.step).collect(),
            executions: vec![0; kernel.statements.len()],
            loop_entries: vec![0; kernel.loops.len()],
            safe: false,
            direct_refs: vec![Vec::new(); kernel.loops.len()],
            tight: vec![None; kernel.loops.len()],
            step_delta: Vec::new(),
            templates: Vec::new(),
            max_statement_refs: kernel
                .statements
                .iter()
                .map(|s| s.refs.len())
                .max()
                .unwrap_or(0),
            enclosed: true,
        };
        for l in &kernel.loops {
            program
                .starts
                .push(Lin::from_affine(&l.start, params).ok_or_else(overflow)?);
            program
                .ends
                .push(Lin::from_affine(&l.end_inclusive, params).ok_or_else(overflow)?);
        }
        let first_refs = first_refs(kernel);
        program.emit(&kernel.body, kernel, &first_refs);
        program.step_delta = vec![0; program.refs.len()];
        program.templates = program
            .refs
            .iter()
            .enumerate()
            .map(|(i, r)| Access {
                reference: i as u32,
                addr: 0,
                size_bytes: r.size_bytes,
                write: r.write,
            })
            .collect();
        program.plan_increments(&kernel.body, kernel, &first_refs, &mut Vec::new());
        let mut vars = vec![0i64; kernel.loops.len()];
        let mut counts = Counts {
            executions: vec![0u64; kernel.statements.len()],
            loop_entries: vec![0u64; kernel.loops.len()],
        };
        count(&kernel.body, kernel, &program, 1, &mut vars, &mut counts).ok_or_else(overflow)?;
        program.executions = counts.executions;
        program.loop_entries = counts.loop_entries;
        program.safe = program.proved_safe();
        Ok(program)
    }

    /// Conservative interval analysis: loop ids are in textual order, so the loops a bound
    /// refers to (enclosing ones) have their ranges computed first.
    fn proved_safe(&self) -> bool {
        const LIMIT: i128 = 1 << 62;
        let mut ranges = vec![(0i128, 0i128); self.steps.len()];
        for id in 0..self.steps.len() {
            let (start, end) = (
                self.starts[id].interval(&ranges),
                self.ends[id].interval(&ranges),
            );
            ranges[id] = if self.steps[id] > 0 {
                (start.0, end.1)
            } else {
                (end.0, start.1)
            };
            let (lo, hi) = ranges[id];
            if lo < -LIMIT || hi > LIMIT || i128::from(self.steps[id]).abs() > LIMIT {
                return false;
            }
        }
        self.refs.iter().all(|r| {
            let (lo, hi) = r.addr.interval(&ranges);
            lo >= 0 && hi <= i128::from(i64::MAX)
        })
    }

    fn emit(&mut self, nodes: &[Node], kernel: &Kernel, first_refs: &[usize]) {
        for node in nodes {
            match node {
                Node::Statement(s) => self.ops.push(Op::Stmt {
                    first: first_refs[*s],
                    count: kernel.statements[*s].refs.len(),
                }),
                Node::Loop { id, body } => {
                    let enter = self.ops.len();
                    self.ops.push(Op::Enter { id: *id, exit: 0 });
                    self.emit(body, kernel, first_refs);
                    self.ops.push(Op::Back {
                        id: *id,
                        body: enter + 1,
                    });
                    let exit = self.ops.len();
                    self.ops[enter] = Op::Enter { id: *id, exit };
                }
            }
        }
    }

    /// Fills `direct_refs`, `tight`, `step_delta` and `enclosed` for `nodes`, which sit inside
    /// the loops `enclosing` (outermost first).
    fn plan_increments(
        &mut self,
        nodes: &[Node],
        kernel: &Kernel,
        first_refs: &[usize],
        enclosing: &mut Vec<usize>,
    ) {
        for node in nodes {
            match node {
                Node::Statement(s) => {
                    let first = first_refs[*s];
                    for r in first..first + kernel.statements[*s].refs.len() {
                        self.plan_reference(r, enclosing);
                    }
                }
                Node::Loop { id, body } => {
                    enclosing.push(*id);
                    self.plan_increments(body, kernel, first_refs, enclosing);
                    enclosing.pop();
                    let direct = &self.direct_refs[*id];
                    let statements_only = body.iter().all(|n| matches!(n, Node::Statement(_)));
                    let in_order = direct.windows(2).all(|w| w[1] == w[0] + 1);
                    if let (true, true, Some(first), Some(last)) =
                        (statements_only, in_order, direct.first(), direct.last())
                    {
                        self.tight[*id] = Some((*first, *last + 1));
                    }
                }
            }
        }
    }

    fn plan_reference(&mut self, r: usize, enclosing: &[usize]) {
        let addr = &self.refs[r].addr;
        self.enclosed &= addr.terms.iter().all(|(l, _)| enclosing.contains(l));
        if let Some(&inner) = enclosing.last() {
            self.step_delta[r] = addr.coefficient(inner).wrapping_mul(self.steps[inner]);
            self.direct_refs[inner].push(r);
        }
    }

    /// How many times each statement executes.
    pub fn executions(&self) -> &[u64] {
        &self.executions
    }

    /// How many times each loop starts with at least one iteration (by [`Kernel::loops`]
    /// index).
    pub fn loop_entries(&self) -> &[u64] {
        &self.loop_entries
    }

    /// The total number of accesses the stream will produce.
    pub fn total_accesses(&self, kernel: &Kernel) -> u64 {
        kernel
            .statements
            .iter()
            .zip(&self.executions)
            .map(|(s, n)| n.saturating_mul(s.refs.len() as u64))
            .fold(0u64, u64::saturating_add)
    }

    /// A fresh stream of every access, in execution order.
    pub fn accesses(&self) -> AccessStream<'_> {
        let vars = vec![0; self.steps.len()];
        let addrs = self
            .refs
            .iter()
            .map(|r| r.addr.eval_wrapping(&vars) as u64)
            .collect();
        AccessStream {
            program: self,
            vars,
            ends: vec![0; self.steps.len()],
            pc: 0,
            next_ref: 0,
            end_ref: 0,
            error: None,
            trips_left: vec![0; self.steps.len()],
            addrs,
            buffer: vec![UNUSED; BATCH + self.max_statement_refs],
            filled: 0,
            consumed: 0,
        }
    }
}

/// The byte address of each reference ([`Kernel::references`] order) as an affine function of
/// the loop variables, in wrapping arithmetic after the array's base is added.
pub(crate) fn reference_addresses(
    kernel: &Kernel,
    params: &[i64],
    layout: &Layout,
) -> Result<Vec<Lin>, KernelError> {
    let overflow = || KernelError::Binding {
        origin: kernel.origin.clone(),
        message:
            "an address, loop bound or trip count overflows 64 bits with these parameter values"
                .into(),
    };
    let mut out = Vec::new();
    for (_, r) in kernel.references() {
        let elem = kernel.arrays[r.array].elem.bytes() as i64;
        let mut addr = Affine::constant(0);
        for (sub, stride) in r.subscripts.iter().zip(&layout.strides[r.array]) {
            addr = addr
                .checked_add(
                    &sub.checked_scale(stride.checked_mul(elem).ok_or_else(overflow)?)
                        .ok_or_else(overflow)?,
                )
                .ok_or_else(overflow)?;
        }
        let mut lin = Lin::from_affine(&addr, params).ok_or_else(overflow)?;
        lin.constant = lin.constant.wrapping_add(layout.base[r.array] as i64);
        out.push(lin);
    }
    Ok(out)
}

/// The message of an address outside `[0, 2^63)` at loop values `at` (`i=0, j=3`).
pub(crate) fn address_space_message(at: &str) -> String {
    format!(
        "an address leaves the 64-bit address space (below 0 or above 2^63) at {at}; check \
         the subscripts or place arrays with --base"
    )
}

/// Executions of each statement and entries of each loop.
struct Counts {
    executions: Vec<u64>,
    loop_entries: Vec<u64>,
}

/// Adds how many times each statement under `nodes` executes and each loop starts, with
/// `times` executions of the enclosing loops. Loops whose variable no inner bound uses are
/// counted by multiplication.
fn count(
    nodes: &[Node],
    kernel: &Kernel,
    p: &Program,
    times: u64,
    vars: &mut [i64],
    out: &mut Counts,
) -> Option<()> {
    for node in nodes {
        match node {
            Node::Statement(s) => {
                out.executions[*s] = out.executions[*s].checked_add(times)?;
            }
            Node::Loop { id, body } => {
                let (start, end, step) = (
                    p.starts[*id].eval(vars)?,
                    p.ends[*id].eval(vars)?,
                    p.steps[*id],
                );
                let trips = trip_count(start, end, step)?;
                if trips == 0 {
                    continue;
                }
                out.loop_entries[*id] = out.loop_entries[*id].checked_add(times)?;
                if inner_bounds_use(body, kernel, *id) {
                    let mut v = start;
                    for _ in 0..trips {
                        vars[*id] = v;
                        count(body, kernel, p, times, vars, out)?;
                        v = v.wrapping_add(step);
                    }
                } else {
                    vars[*id] = start;
                    count(body, kernel, p, times.checked_mul(trips)?, vars, out)?;
                }
            }
        }
    }
    Some(())
}

/// The index of each statement's first reference among all the kernel's references.
pub(crate) fn first_refs(kernel: &Kernel) -> Vec<usize> {
    kernel
        .statements
        .iter()
        .scan(0, |n, s| {
            let first = *n;
            *n += s.refs.len();
            Some(first)
        })
        .collect()
}

/// How many times a loop from `start` to `end` (inclusive) by `step` runs; `None` when that is
/// 2^64 (`i64::MIN..=i64::MAX` by 1), which no `u64` holds.
pub(crate) fn trip_count(start: i64, end: i64, step: i64) -> Option<u64> {
    let span = if step > 0 {
        i128::from(end) - i128::from(start)
    } else {
        i128::from(start) - i128::from(end)
    };
    if span < 0 {
        Some(0)
    } else {
        u64::try_from(span / i128::from(step).abs() + 1).ok()
    }
}

pub(crate) fn inner_bounds_use(body: &[Node], kernel: &Kernel, id: usize) -> bool {
    body.iter().any(|n| match n {
        Node::Statement(_) => false,
        Node::Loop { id: inner, body } => {
            let l = &kernel.loops[*inner];
            l.start.mentions(Sym::Loop(id))
                || l.end_inclusive.mentions(Sym::Loop(id))
                || inner_bounds_use(body, kernel, id)
        }
    })
}

/// How many accesses the stream produces at a time: small enough that the batch stays in the
/// first-level cache while a simulator consumes it.
const BATCH: usize = 1024;

/// Filler for buffer slots not written yet.
const UNUSED: Access = Access {
    reference: 0,
    addr: 0,
    size_bytes: 0,
    write: false,
};

/// The accesses of a [`Program`], produced in batches ([`AccessStream::next_batch`]) or one at
/// a time (as an iterator). When an address would leave the 64-bit address space the stream
/// ends early and [`AccessStream::error`] says why.
#[derive(Debug, Clone)]
pub struct AccessStream<'p> {
    program: &'p Program,
    vars: Vec<i64>,
    ends: Vec<i64>,
    pc: usize,
    next_ref: usize,
    end_ref: usize,
    error: Option<KernelError>,
    /// Per loop: iterations still to run, the current one included.
    trips_left: Vec<u64>,
    /// Per reference: its address at the current loop variables, kept up to date incrementally.
    addrs: Vec<u64>,
    /// `BATCH` slots plus room for one whole statement; `filled` of them hold accesses, of
    /// which `consumed` were handed out.
    buffer: Vec<Access>,
    filled: usize,
    consumed: usize,
}

impl AccessStream<'_> {
    /// Why the stream stopped early, if it did.
    pub fn error(&self) -> Option<&KernelError> {
        self.error.as_ref()
    }

    /// The next accesses in execution order (about a thousand at a time); empty at the end.
    pub fn next_batch(&mut self) -> &[Access] {
        if self.consumed == self.filled {
            self.refill();
        }
        let from = self.consumed;
        self.consumed = self.filled;
        &self.buffer[from..self.filled]
    }

    fn refill(&mut self) {
        let mut buffer = std::mem::take(&mut self.buffer);
        self.filled = if self.program.safe && self.program.enclosed {
            self.fill_incremental(&mut buffer)
        } else {
            self.fill_checked(&mut buffer)
        };
        self.buffer = buffer;
        self.consumed = 0;
    }

    fn fill_checked(&mut self, out: &mut [Access]) -> usize {
        let mut n = 0;
        while n < BATCH {
            match self.next_checked() {
                Some(a) => out[n] = a,
                None => break,
            }
            n += 1;
        }
        n
    }

    /// Runs the program until `out` holds a batch (returns how many accesses it wrote), with
    /// addresses moved by a constant per iteration instead of evaluated: exact, because
    /// [`Program::safe`] proved that no address or loop variable overflows.
    fn fill_incremental(&mut self, out: &mut [Access]) -> usize {
        let p = self.program;
        let mut n = 0;
        while n < BATCH {
            let Some(&op) = p.ops.get(self.pc) else {
                break;
            };
            match op {
                Op::Stmt { first, count } => {
                    let refs = first..first + count;
                    let slots = &mut out[n..n + count];
                    for ((slot, t), a) in slots
                        .iter_mut()
                        .zip(&p.templates[refs.clone()])
                        .zip(&self.addrs[refs])
                    {
                        *slot = Access { addr: *a, ..*t };
                    }
                    n += count;
                    self.pc += 1;
                }
                Op::Enter { id, exit } => {
                    let (Some(start), Some(end)) =
                        (p.starts[id].eval(&self.vars), p.ends[id].eval(&self.vars))
                    else {
                        self.fail();
                        break;
                    };
                    self.enter(id, start, end, exit);
                }
                Op::Back { id, body } => n += self.back(id, body, &mut out[n..BATCH]),
            }
        }
        n
    }

    fn enter(&mut self, id: usize, start: i64, end: i64, exit: usize) {
        let p = self.program;
        let Some(trips) = trip_count(start, end, p.steps[id]) else {
            // Program::new counted every loop, so this is only reached by a bug; stop.
            self.fail();
            return;
        };
        if trips == 0 {
            self.pc = exit;
            return;
        }
        self.vars[id] = start;
        self.trips_left[id] = trips;
        for &r in &p.direct_refs[id] {
            self.addrs[r] = p.refs[r].addr.eval_wrapping(&self.vars) as u64;
        }
        self.pc += 1;
    }

    /// The end of an iteration of loop `id`: when the body is statements only, runs as many
    /// further whole iterations as fit in `out` (returns how many accesses it wrote); else
    /// steps once back to `body`.
    fn back(&mut self, id: usize, body: usize, out: &mut [Access]) -> usize {
        let p = self.program;
        let left = self.trips_left[id];
        if left <= 1 {
            self.pc += 1;
            return 0;
        }
        let step = p.steps[id];
        if let Some((first, end)) = p.tight[id] {
            let width = end - first;
            let iterations = (left - 1).min((out.len() / width) as u64);
            if iterations > 0 {
                let written = iterations as usize * width;
                let addrs = &mut self.addrs[first..end];
                let deltas = &p.step_delta[first..end];
                let templates = &p.templates[first..end];
                // Reference by reference, so each address stays in a register across the
                // iterations instead of going through memory once per access.
                for (j, ((a, d), t)) in addrs.iter_mut().zip(deltas).zip(templates).enumerate() {
                    let mut addr = *a;
                    let mut i = j;
                    while let Some(slot) = out[..written].get_mut(i) {
                        addr = addr.wrapping_add_signed(*d);
                        *slot = Access { addr, ..*t };
                        i += width;
                    }
                    *a = addr;
                }
                self.trips_left[id] = left - iterations;
                self.vars[id] = self.vars[id].wrapping_add(step.wrapping_mul(iterations as i64));
                return written;
            }
        }
        self.trips_left[id] = left - 1;
        self.vars[id] = self.vars[id].wrapping_add(step);
        for &r in &p.direct_refs[id] {
            self.addrs[r] = self.addrs[r].wrapping_add_signed(p.step_delta[r]);
        }
        self.pc = body;
        0
    }

    fn fail(&mut self) -> Option<Access> {
        // Variables of loops not entered yet hold stale values; they are still a useful hint.
        let at: Vec<String> = self
            .program
            .var_names
            .iter()
            .zip(&self.vars)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        self.error = Some(KernelError::Binding {
            origin: self.program.origin.clone(),
            message: address_space_message(&at.join(", ")),
        });
        self.pc = self.program.ops.len();
        self.next_ref = self.end_ref;
        None
    }

    /// One access, every address evaluated with overflow checks: for programs the interval
    /// analysis could not prove safe.
    fn next_checked(&mut self) -> Option<Access> {
        loop {
            if self.next_ref < self.end_ref {
                let r = &self.program.refs[self.next_ref];
                let reference = self.next_ref as u32;
                self.next_ref += 1;
                let addr = match r.addr.eval(&self.vars).filter(|a| *a >= 0) {
                    Some(a) => a,
                    None => return self.fail(),
                };
                return Some(Access {
                    reference,
                    addr: addr as u64,
                    size_bytes: r.size_bytes,
                    write: r.write,
                });
            }
            let op = *self.program.ops.get(self.pc)?;
            match op {
                Op::Stmt { first, count } => {
                    self.next_ref = first;
                    self.end_ref = first + count;
                    self.pc += 1;
                }
                Op::Enter { id, exit } => {
                    let p = self.program;
                    let (Some(start), Some(end)) =
                        (p.starts[id].eval(&self.vars), p.ends[id].eval(&self.vars))
                    else {
                        return self.fail();
                    };
                    if (p.steps[id] > 0 && start <= end) || (p.steps[id] < 0 && start >= end) {
                        self.vars[id] = start;
                        self.ends[id] = end;
                        self.pc += 1;
                    } else {
                        self.pc = exit;
                    }
                }
                Op::Back { id, body } => {
                    let step = self.program.steps[id];
                    let next = self.vars[id].checked_add(step);
                    match next {
                        Some(v)
                            if (step > 0 && v <= self.ends[id])
                                || (step < 0 && v >= self.ends[id]) =>
                        {
                            self.vars[id] = v;
                            self.pc = body;
                        }
                        _ => self.pc += 1,
                    }
                }
            }
        }
    }
}

impl Iterator for AccessStream<'_> {
    type Item = Access;

    #[inline]
    fn next(&mut self) -> Option<Access> {
        if self.consumed == self.filled {
            self.refill();
        }
        let a = *self.buffer[..self.filled].get(self.consumed)?;
        self.consumed += 1;
        Some(a)
    }
}
