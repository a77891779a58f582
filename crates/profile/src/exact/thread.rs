//! One traced thread's position in its loop-call-context tree, moved by marker events
//! (spec 004 §3.7). Pure bookkeeping: the tracer decides which events a stop means.

use serde::{Deserialize, Serialize};

use crate::lcct::{Lcct, NodeId, NodeKey};

/// A procedure activation on the thread's shadow stack.
#[derive(Debug, Clone)]
struct Frame {
    /// Where the call returns to.
    return_address: u64,
    /// The stack pointer after that return (the entry's `rsp + 8`), so that recursive
    /// activations returning to the same address are told apart.
    return_stack_pointer: u64,
    /// The node current when the call was made.
    caller: NodeId,
    /// The procedure's node.
    node: NodeId,
    /// Function index in its program (`None` for PLT frames, which have no loops).
    function: Option<u32>,
    /// Where this activation's active loops start in the thread's loop stack (its loops are
    /// from there to the next frame's start, outermost first).
    first_loop: usize,
}

/// A loop entered and not yet left, with the header executions of this entry.
#[derive(Debug, Clone, Copy)]
struct ActiveLoop {
    id: u32,
    node: NodeId,
    trips: u64,
    /// Entered by this process, not inherited through a fork: only such an entry's exit has
    /// a trip count (the entry and its count are the parent's).
    entered_here: bool,
}

impl ActiveLoop {
    fn exit(self, tree: &mut Lcct) {
        if self.entered_here {
            tree.exit(self.node, self.trips);
        }
    }
}

/// A thread's tree and where it is in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadTree {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The tree.
    pub tree: Lcct,
    /// Marker events seen by this thread.
    pub events: u64,
    /// Loop markers met in a function other than the one on top of the shadow stack (code
    /// reached without its entry being seen); they change no count.
    pub unmatched_events: u64,
}

/// How far below a call's stack pointer a frame's return address may lie and still be taken
/// as returned (see [`ThreadState::call`]): more than any thread's stack, far less than the
/// distance between two stacks.
pub const REAP_BYTES: u64 = 256 << 20;

/// The live state of one thread.
#[derive(Debug, Clone)]
pub struct ThreadState {
    /// What is kept at the end.
    pub result: ThreadTree,
    frames: Vec<Frame>,
    /// The active loops of every activation, each frame's above the previous frame's (one
    /// vector for all, so a call allocates nothing).
    loops: Vec<ActiveLoop>,
    cur: NodeId,
    /// TSC at the end of the last analysis routine.
    pub last_tsc: u64,
}

impl ThreadState {
    /// A thread with an empty tree, its clock starting at `now_tsc`.
    pub fn new(pid: u32, tid: u32, now_tsc: u64) -> ThreadState {
        ThreadState {
            result: ThreadTree {
                pid,
                tid,
                tree: Lcct::new(),
                events: 0,
                unmatched_events: 0,
            },
            frames: Vec::new(),
            loops: Vec::new(),
            cur: Lcct::ROOT,
            last_tsc: now_tsc,
        }
    }

    /// The first thread of a forked process: the same shadow stack and tree shape as the
    /// forking thread, every count zero.
    pub fn forked(&self, pid: u32, tid: u32, now_tsc: u64) -> ThreadState {
        let mut tree = Lcct::new();
        tree.nodes = self
            .result
            .tree
            .nodes
            .iter()
            .map(|n| crate::lcct::Node {
                children: n.children.clone(),
                ..crate::lcct::Node::new(n.key, n.parent)
            })
            .collect();
        ThreadState {
            result: ThreadTree {
                pid,
                tid,
                tree,
                events: 0,
                unmatched_events: 0,
            },
            frames: self.frames.clone(),
            loops: self
                .loops
                .iter()
                .map(|active| ActiveLoop {
                    entered_here: false,
                    ..*active
                })
                .collect(),
            cur: self.cur,
            last_tsc: now_tsc,
        }
    }

    /// The node time is charged to now.
    #[cfg(test)]
    pub fn current(&self) -> NodeId {
        self.cur
    }

    /// Charges the application time since the last routine to the current node (§3.2).
    pub fn charge(&mut self, now_tsc: u64) {
        let n = &mut self.result.tree.nodes[self.cur as usize];
        n.self_time += now_tsc.saturating_sub(self.last_tsc);
        n.events_charged += 1;
        self.result.events += 1;
    }

    /// A procedure was entered with `return_address` on top of the stack at `stack_pointer`.
    ///
    /// Activations whose return address lay below `stack_pointer` have returned without their
    /// return being seen (a callback returning into library code, a `longjmp`), since the
    /// stack has been popped past their return address: they are closed first. Only those
    /// within [`REAP_BYTES`] below are, so that a call on another stack (a signal handler's,
    /// a coroutine's) closes nothing; one whose return address is exactly at `stack_pointer`
    /// stays (a tail call replaces its caller's frame there, and is shown as its callee).
    pub fn call(
        &mut self,
        key: NodeKey,
        function: Option<u32>,
        return_address: u64,
        stack_pointer: u64,
    ) {
        let returned = self.live_frames(stack_pointer);
        if returned < self.frames.len() {
            self.close_frames_from(returned);
        }
        let node = self.result.tree.procedure_node(self.cur, key);
        self.result.tree.enter(node);
        self.frames.push(Frame {
            return_address,
            return_stack_pointer: stack_pointer.wrapping_add(8),
            caller: self.cur,
            node,
            function,
            first_loop: self.loops.len(),
        });
        self.cur = node;
    }

    /// How many frames, from the outermost, may still be live with the stack pointer at
    /// `stack_pointer`: those above have their return address below it, within
    /// [`REAP_BYTES`], so the stack was popped past it.
    fn live_frames(&self, stack_pointer: u64) -> usize {
        self.frames
            .iter()
            .rposition(|f| {
                let slot = f.return_stack_pointer.wrapping_sub(8);
                !(slot < stack_pointer && stack_pointer - slot < REAP_BYTES)
            })
            .map_or(0, |live| live + 1)
    }

    /// A block of `function` runs at `stack_pointer` above the return address of the top
    /// activations: they were left without their return being seen (a C++ exception caught in
    /// a caller, a `longjmp` whose target is no return site). They are closed when that leaves
    /// on top an activation of `function`, the one the block belongs to; otherwise the event
    /// stays unexplained and nothing is closed.
    fn close_unwound(&mut self, function: u32, stack_pointer: u64) {
        let live = self.live_frames(stack_pointer);
        if live < self.frames.len() && live > 0 && self.frames[live - 1].function == Some(function)
        {
            self.close_frames_from(live);
        }
    }

    /// Closes the frames from index `depth` up, innermost first, with their loops.
    fn close_frames_from(&mut self, depth: usize) {
        while self.frames.len() > depth {
            let frame = self.frames.pop().expect("depth < len");
            while self.loops.len() > frame.first_loop {
                let active = self.loops.pop().expect("len > first");
                active.exit(&mut self.result.tree);
            }
            self.cur = frame.caller;
        }
    }

    /// Control reached `address` with the stack pointer at `stack_pointer`: every activation
    /// that returns there, and any above it (longjmp, tail calls), is closed. Returns whether
    /// one was.
    pub fn returned_to(&mut self, address: u64, stack_pointer: u64) -> bool {
        // The deepest match: a tail-called activation shares its caller's return address and
        // stack pointer, and both end at that return.
        let Some(depth) = self
            .frames
            .iter()
            .position(|f| f.return_address == address && f.return_stack_pointer == stack_pointer)
        else {
            return false;
        };
        self.close_frames_from(depth);
        true
    }

    /// Control reached block `block` of function `function` with the stack pointer at
    /// `stack_pointer`; the block lies in the loops `chain` (static ids, outermost first) and
    /// `header_of` is the loop whose header the block is. Activations the stack was unwound
    /// past are closed first; then loops left are exited, loops entered are entered, and a
    /// header counts an iteration.
    pub fn block(
        &mut self,
        function: u32,
        chain: &[u32],
        header_of: Option<u32>,
        stack_pointer: u64,
    ) {
        self.close_unwound(function, stack_pointer);
        let Some(frame) = self.frames.last() else {
            self.result.unmatched_events += 1;
            return;
        };
        if frame.function != Some(function) {
            self.result.unmatched_events += 1;
            return;
        }
        let (first, frame_node) = (frame.first_loop, frame.node);
        let tree = &mut self.result.tree;
        let common = self.loops[first..]
            .iter()
            .zip(chain)
            .take_while(|(active, c)| active.id == **c)
            .count();
        let back_edge = common == chain.len() && header_of == chain.last().copied();
        while self.loops.len() > first + common {
            let active = self.loops.pop().expect("len > common");
            active.exit(tree);
        }
        let mut at = self.loops[first..].last().map_or(frame_node, |a| a.node);
        for &id in &chain[common..] {
            at = tree.child(
                at,
                NodeKey::Loop {
                    object: key_object(tree, frame_node),
                    id,
                },
            );
            tree.enter(at);
            self.loops.push(ActiveLoop {
                id,
                node: at,
                trips: 0,
                entered_here: true,
            });
        }
        if let Some(h) = header_of
            && chain.last() == Some(&h)
            && let Some(active) = self.loops[first..].last_mut()
        {
            active.trips += 1;
            tree.header(at, back_edge);
        }
        self.cur = at;
    }

    /// The loop whose header, met next with no other event in between, would only be a back
    /// edge: the innermost active loop of the top activation when that activation runs
    /// `function` and the current node is that loop's. The patch back-end counts such header
    /// executions without this bookkeeping and hands them over with
    /// [`ThreadState::repeat_back_edges`].
    pub fn repeating_loop(&self, function: u32) -> Option<u32> {
        let frame = self.frames.last()?;
        let active = self.loops[frame.first_loop..].last()?;
        (frame.function == Some(function) && active.node == self.cur).then_some(active.id)
    }

    /// `n` more executions of the header of the innermost active loop of the top activation,
    /// each a back edge and each an event charged to it: exactly what `n` calls of
    /// [`ThreadState::charge`] and [`ThreadState::block`] with that loop's chain do when nothing
    /// happens in between, except that no time is added (the section goes on in the same node,
    /// so the next charge adds all of it there).
    pub fn repeat_back_edges(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        let Some(first) = self.frames.last().map(|f| f.first_loop) else {
            return;
        };
        let Some(active) = self.loops[first..].last_mut() else {
            return;
        };
        active.trips += n;
        let node = &mut self.result.tree.nodes[active.node as usize];
        node.header_executions += n;
        node.back_edges += n;
        node.events_charged += n;
        self.result.events += n;
    }

    /// The thread's run ended at `now_tsc` (it exited, was killed, or its process ended under
    /// it): the section since its last event is charged to the node current then, the loop or
    /// call it was in, with no event counted (no analysis routine closed it). Then every open
    /// activation is closed and the tree returned.
    pub fn finish_at(mut self, now_tsc: u64) -> ThreadTree {
        let n = &mut self.result.tree.nodes[self.cur as usize];
        n.self_time += now_tsc.saturating_sub(self.last_tsc);
        self.last_tsc = self.last_tsc.max(now_tsc);
        self.finish()
    }

    /// Closes every open activation (the thread ended) and returns its tree.
    pub fn finish(mut self) -> ThreadTree {
        self.close_frames_from(0);
        self.result
    }
}

fn key_object(tree: &Lcct, node: NodeId) -> u32 {
    match tree.nodes[node as usize].key {
        NodeKey::Function { object, .. }
        | NodeKey::Plt { object, .. }
        | NodeKey::Loop { object, .. } => object,
        NodeKey::Unknown { object } => object,
        NodeKey::Root => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: NodeKey = NodeKey::Function {
        object: 0,
        address: 0x1000,
    };
    /// A stack pointer below every frame: the block unwinds nothing.
    const DEEP: u64 = 0;
    const INNER: NodeKey = NodeKey::Function {
        object: 0,
        address: 0x2000,
    };

    fn loop_node(t: &ThreadState, id: u32) -> Vec<&crate::lcct::Node> {
        t.result
            .tree
            .nodes
            .iter()
            .filter(|n| n.key == NodeKey::Loop { object: 0, id })
            .collect()
    }

    /// for i in 0..10 { for j in 0..20 {} } with bottom-tested loops: loop 0 (blocks 1..) holds
    /// loop 1; each header runs once per trip.
    #[test]
    fn nested_loops_count_entries_and_trips() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        for _ in 0..10 {
            t.block(0, &[0], Some(0), DEEP);
            for _ in 0..20 {
                t.block(0, &[0, 1], Some(1), DEEP);
            }
        }
        t.block(0, &[], None, DEEP); // the exit target
        let t = ThreadState::finish(t);
        let outer = &t.tree.nodes[2];
        let inner = &t.tree.nodes[3];
        assert_eq!(
            (outer.entries, outer.header_executions, outer.back_edges),
            (1, 10, 9)
        );
        assert_eq!(
            (inner.entries, inner.header_executions, inner.exits),
            (10, 200, 10)
        );
        assert_eq!((inner.trips_min, inner.trips_max), (Some(20), Some(20)));
    }

    #[test]
    fn a_return_exits_the_callees_loops_and_recursion_folds() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.block(0, &[0], Some(0), DEEP);
        t.call(INNER, Some(1), 0x1010, 0x6000);
        t.call(INNER, Some(1), 0x2020, 0x5000);
        t.block(1, &[5], Some(5), DEEP);
        assert!(t.returned_to(0x2020, 0x5008));
        assert!(
            !t.returned_to(0x1010, 0x1234),
            "another stack pointer is another frame"
        );
        assert!(t.returned_to(0x1010, 0x6008));
        assert_eq!(loop_node(&t, 5)[0].exits, 1);
        assert_eq!(
            t.result.tree.nodes.len(),
            5,
            "root, main, loop 0, inner, loop 5"
        );
        // Back in main's loop: its next header is a back edge.
        t.block(0, &[0], Some(0), DEEP);
        assert_eq!(loop_node(&t, 0)[0].back_edges, 1);
    }

    #[test]
    fn a_tail_call_returns_with_its_caller() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.call(INNER, Some(1), 0x1010, 0x6000);
        // INNER jumps to 0x3000: same return address, same stack pointer.
        t.call(
            NodeKey::Function {
                object: 0,
                address: 0x3000,
            },
            Some(2),
            0x1010,
            0x6000,
        );
        assert!(t.returned_to(0x1010, 0x6008));
        assert_eq!(t.current(), 1);
    }

    #[test]
    fn a_callback_that_returned_unseen_is_closed_by_the_next_call() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        let plt = NodeKey::Plt {
            object: 0,
            address: 0x500,
        };
        t.call(plt, None, 0x1010, 0x6ff8);
        // The library calls back twice, the second time from higher up its stack; the first
        // return goes into the library, unseen.
        t.call(INNER, Some(1), 0x7777_0000, 0x6000);
        t.block(1, &[5], Some(5), DEEP);
        t.call(INNER, Some(1), 0x7777_0000, 0x6100);
        assert_eq!(t.frames.len(), 3, "main, plt, one callback");
        assert_eq!(
            loop_node(&t, 5)[0].exits,
            1,
            "the first callback's loop closed"
        );
        // A call on a stack far away (a signal handler's) closes nothing.
        t.call(MAIN, Some(0), 0x1234, 0x7000 + (1 << 32));
        assert_eq!(t.frames.len(), 4);
        assert!(t.returned_to(0x1010, 0x7000));
        assert_eq!(t.current(), 1);
    }

    #[test]
    fn longjmp_closes_every_frame_above() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.call(INNER, Some(1), 0x1010, 0x6000);
        t.block(1, &[3], Some(3), DEEP);
        t.call(
            NodeKey::Function {
                object: 0,
                address: 0x3000,
            },
            Some(2),
            0x2010,
            0x5000,
        );
        assert!(t.returned_to(0x1010, 0x6008));
        assert_eq!(t.current(), 1);
        assert_eq!(loop_node(&t, 3)[0].exits, 1);
    }

    /// main's loop calls inner, whose loop calls a throwing library function; the exception is
    /// caught in main, whose next header runs at main's stack pointer: inner's frame, its loop
    /// and the library call are closed, and main's loop goes on counting.
    #[test]
    fn a_block_above_unwound_frames_closes_them() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        let main_sp = 0x6f00;
        for round in 0..3 {
            t.block(0, &[0], Some(0), main_sp);
            t.call(INNER, Some(1), 0x1010, main_sp - 8);
            t.block(1, &[5], Some(5), main_sp - 0x40);
            if round == 1 {
                let throw = NodeKey::Plt {
                    object: 0,
                    address: 0x500,
                };
                t.call(throw, None, 0x2020, main_sp - 0x48);
                // The unwinder lands in main; the next event is main's header.
                continue;
            }
            assert!(t.returned_to(0x1010, main_sp));
        }
        t.block(0, &[], None, main_sp);
        assert_eq!(t.result.unmatched_events, 0);
        let tree = t.finish().tree;
        let main_loop = &tree.nodes[2];
        assert_eq!(main_loop.key, NodeKey::Loop { object: 0, id: 0 });
        assert_eq!(
            (
                main_loop.entries,
                main_loop.header_executions,
                main_loop.trips_max
            ),
            (1, 3, Some(3))
        );
        let inner_loop = tree
            .nodes
            .iter()
            .find(|n| n.key == NodeKey::Loop { object: 0, id: 5 })
            .unwrap();
        assert_eq!((inner_loop.entries, inner_loop.exits), (3, 3));
    }

    #[test]
    fn a_block_of_another_function_unwinds_nothing() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.call(INNER, Some(1), 0x1010, 0x6000);
        // Above inner's return address, but main's block is not what runs there.
        t.block(4, &[9], Some(9), 0x6100);
        assert_eq!(t.frames.len(), 2);
        assert_eq!(t.result.unmatched_events, 1);
    }

    #[test]
    fn time_goes_to_the_node_current_before_the_event() {
        let mut t = ThreadState::new(1, 1, 100);
        t.charge(150);
        t.last_tsc = 160;
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.charge(200);
        assert_eq!(t.result.tree.nodes[0].self_time, 50);
        assert_eq!(t.result.tree.nodes[1].self_time, 40);
        assert_eq!(t.result.events, 2);
    }

    #[test]
    fn the_end_charges_the_section_since_the_last_event_to_the_open_loop() {
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.charge(10);
        t.block(0, &[0], Some(0), DEEP);
        t.last_tsc = 20;
        // Repeated headers read no clock: the loop's whole run is the section to the end.
        t.repeat_back_edges(1000);
        let tree = t.finish_at(5020).tree;
        let l = loop_node_of(&tree, 0);
        assert_eq!(l.self_time, 5000);
        assert_eq!(l.events_charged, 1000, "the end is no event");
        assert_eq!((l.exits, l.trips_max), (1, Some(1001)));
    }

    fn loop_node_of(tree: &Lcct, id: u32) -> &crate::lcct::Node {
        tree.nodes
            .iter()
            .find(|n| n.key == NodeKey::Loop { object: 0, id })
            .expect("the loop has a node")
    }

    #[test]
    fn a_marker_in_another_function_changes_nothing() {
        let mut t = ThreadState::new(1, 1, 0);
        t.block(0, &[0], Some(0), DEEP);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.block(4, &[9], Some(9), DEEP);
        assert_eq!(t.result.unmatched_events, 2);
        assert_eq!(t.result.tree.nodes.len(), 2);
    }

    #[test]
    fn repeated_back_edges_equal_the_events_they_stand_for() {
        let drive = |t: &mut ThreadState| {
            t.call(MAIN, Some(0), 0xdead, 0x7000);
            t.block(0, &[0], Some(0), DEEP);
            t.block(0, &[0, 1], Some(1), DEEP);
        };
        let mut slow = ThreadState::new(1, 1, 0);
        drive(&mut slow);
        let mut fast = slow.clone();
        assert_eq!(slow.repeating_loop(0), Some(1));
        assert_eq!(slow.repeating_loop(4), None, "another function's marker");
        for _ in 0..5 {
            slow.charge(0);
            slow.block(0, &[0, 1], Some(1), DEEP);
        }
        fast.repeat_back_edges(5);
        slow.block(0, &[0], Some(0), DEEP);
        fast.block(0, &[0], Some(0), DEEP);
        assert_eq!(fast.repeating_loop(0), Some(0));
        let (slow, fast) = (slow.finish(), fast.finish());
        assert_eq!(slow.tree, fast.tree);
        assert_eq!(slow.events, fast.events);
        let mut idle = ThreadState::new(1, 1, 0);
        assert_eq!(idle.repeating_loop(0), None, "no activation");
        idle.repeat_back_edges(3);
        assert_eq!(idle.result.events, 0);
    }

    #[test]
    fn a_fork_keeps_the_shape_and_zeroes_the_counts() {
        // The loop was entered once, by the parent: the child's end of it is no exit.
        let mut t = ThreadState::new(1, 1, 0);
        t.call(MAIN, Some(0), 0xdead, 0x7000);
        t.block(0, &[0], Some(0), DEEP);
        t.block(0, &[0], Some(0), DEEP);
        let child = t.forked(2, 2, 0);
        assert_eq!(child.current(), t.current());
        assert_eq!(child.result.tree.nodes.len(), 3);
        assert_eq!(child.result.tree.nodes[2].header_executions, 0);
        let tree = child.finish().tree;
        assert_eq!((tree.nodes[2].exits, tree.nodes[2].trips_min), (0, None));
        let tree = t.finish().tree;
        assert_eq!((tree.nodes[2].exits, tree.nodes[2].trips_min), (1, Some(2)));
    }
}
