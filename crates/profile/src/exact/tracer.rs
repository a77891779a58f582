//! The ptrace loop: start the target, instrument each program it executes, and turn every stop
//! at a marker into events on the stopped thread's tree.

use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use loopscope_binary::{Image, Options, Program};
use serde::{Deserialize, Serialize};

use super::calibrate::TrapCost;
use super::markers::{
    COPY_BYTES, Resume, Site, counted_blocks, decode_at, direct_call_target, marker_sites,
    plan_resume,
};
use super::sys::{self, Memory, Stop};
use super::thread::{ThreadState, ThreadTree};
use crate::lcct::NodeKey;
use crate::{ObjectRef, ProfileError, TargetExit};

/// How to run the exact back-end.
#[derive(Debug, Clone, Default)]
pub struct ExactOptions {
    /// The `PATH` used to find the command.
    pub search_path: Option<OsString>,
    /// The measured cost of one marker, subtracted from the times (kept raw as well).
    pub trap_cost: Option<TrapCost>,
    /// Also put a marker at every block start of the executable and count each block's
    /// executions (much slower: one stop per block executed).
    pub count_blocks: bool,
}

/// How often each block of one instrumented program ran (block-counting mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockCounts {
    /// Index of the program in [`ExactRun::objects`].
    pub object: u32,
    /// Static start address of each counted block, ascending.
    pub starts: Vec<u64>,
    /// Executions of each block, summed over every thread and process running the program.
    pub executions: Vec<u64>,
}

/// What the exact back-end measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactRun {
    /// The programs instrumented, in the order they were executed.
    pub objects: Vec<ObjectRef>,
    /// One tree per thread, in the order the threads ended.
    pub threads: Vec<ThreadTree>,
    /// TSC ticks per second: tree times are in TSC cycles.
    pub tsc_hz: f64,
    /// Cycles spent in the analysis routines (the tracer's handling of stops, §3.2).
    pub analysis_cycles: u64,
    /// Marker addresses armed over all programs.
    pub sites: u64,
    /// Of those, sites whose instruction is single-stepped in place rather than displaced.
    pub stepped_sites: u64,
    /// The per-marker cost measured before the run, if it was.
    pub trap_cost: Option<TrapCost>,
    /// How the target ended.
    pub exit: TargetExit,
    /// Wall time from start to the end of the target, in nanoseconds.
    pub wall_ns: u64,
    /// Time spent analysing the programs before they ran, in nanoseconds (inside `wall_ns`).
    pub static_analysis_ns: u64,
    /// Executions per block, when blocks were counted (from `main`'s entry to its return).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockCounts>,
    /// How the patch back-end patched the sites (patch back-end only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<crate::PatchSummary>,
}

/// A program's analysis, done once however many processes execute it.
struct Analysed {
    object: u32,
    program: Rc<Program>,
}

/// A program armed in one address space (one `exec`; shared by the processes forked from it,
/// which map it at the same addresses with the same scratch page): the markers at their
/// runtime addresses, with their displaced copies.
struct Instrumented {
    object: u32,
    program: Rc<Program>,
    sites: HashMap<u64, Armed>,
    main_entry: Option<u64>,
}

/// One marker as armed in the target: its roles, the byte under it and how to resume.
struct Armed {
    site: Site,
    original: u8,
    resume: Resume,
}

struct Process {
    memory: Memory,
    program: Option<Rc<Instrumented>>,
    /// A process that just executed a program is instrumented at its first instruction, where
    /// it can run the `mmap` that maps its scratch page (at the `exec` stop it is still inside
    /// the system call, which would overwrite the result): the address with an `int3` on it
    /// and the byte that was there.
    entry_trap: Option<(u64, u8)>,
    armed: bool,
    /// Where `main` returns to, with the byte under the marker put there: analysis ends
    /// when `main` does (spec §3.5).
    main_return: Option<(u64, u8)>,
    /// `main` returned and the markers were taken out.
    finished: bool,
}

struct Tracer {
    root_pid: i32,
    processes: HashMap<i32, Process>,
    threads: HashMap<i32, ThreadState>,
    thread_process: HashMap<i32, i32>,
    fresh_threads: std::collections::HashSet<i32>,
    /// Stops of threads and processes reported before the event of the thread that made them.
    early_stops: HashMap<i32, Stop>,
    objects: Vec<ObjectRef>,
    /// Every program analysed, by path.
    analysed: HashMap<String, Analysed>,
    /// Static start address of each counted block, by object (empty unless blocks are counted).
    counted: HashMap<u32, Vec<u64>>,
    finished: Vec<ThreadTree>,
    exit: Option<TargetExit>,
    analysis_cycles: u64,
    sites: u64,
    stepped_sites: u64,
    static_analysis: Duration,
    count_blocks: bool,
    /// Per instrumented object, the executions of each counted block.
    block_counts: HashMap<u32, Vec<u64>>,
}

/// Runs `command` under the exact back-end until it ends or `stop` is set (then the target is
/// detached, its code restored, and the trees so far returned).
pub fn record_exact(
    command: &[OsString],
    options: &ExactOptions,
    stop: &AtomicBool,
) -> Result<ExactRun, ProfileError> {
    let started = Instant::now();
    let program = crate::command::resolve_program(command, options.search_path.as_deref())?;
    let to_c = |s: &[u8]| {
        CString::new(s).map_err(|_| ProfileError::Command {
            command: String::from_utf8_lossy(s).into_owned(),
            what: "contains a NUL byte".into(),
        })
    };
    let path = to_c(program.as_os_str().as_bytes())?;
    let argv = command
        .iter()
        .map(|a| to_c(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let tsc_hz = crate::tsc::tsc_hz();
    let pid = sys::spawn_traced(&path, &argv).map_err(system("fork"))?;
    let mut tracer = Tracer::new(pid, options.count_blocks);
    let watched = Arc::new(AtomicI32::new(pid));
    let outcome = std::thread::scope(|scope| {
        let watcher = watched.clone();
        scope.spawn(move || wake_on_stop(stop, &watcher));
        // Cleared on the way out of a panic too: the scope waits for the watcher to end.
        let _watching = Watching(&watched);
        tracer.start(pid).and_then(|()| tracer.run(stop))
    });
    outcome?;
    let blocks = tracer.block_counts();
    Ok(ExactRun {
        objects: tracer.objects,
        threads: tracer.finished,
        tsc_hz,
        analysis_cycles: tracer.analysis_cycles,
        sites: tracer.sites,
        stepped_sites: tracer.stepped_sites,
        trap_cost: options.trap_cost,
        exit: tracer.exit.unwrap_or(TargetExit::Detached),
        wall_ns: started.elapsed().as_nanos() as u64,
        static_analysis_ns: tracer.static_analysis.as_nanos() as u64,
        blocks,
        patch: None,
    })
}

/// Writes `process`'s original bytes over its markers and entry trap into `memory` (its own, or
/// a forked copy's).
fn restore_code(process: &Process, memory: &Memory) {
    if let Some((entry, original)) = process.entry_trap {
        let _ = memory.write(entry, &[original]);
    }
    if let Some(program) = &process.program {
        for (&address, marker) in &program.sites {
            let _ = memory.write(address, &[marker.original]);
        }
    }
}

/// The parent process of `pid`, from `/proc/PID/status`.
fn parent_pid(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("PPid:"))?;
    line.trim().parse().ok()
}

/// Tells [`wake_on_stop`] the run is over when dropped.
struct Watching<'a>(&'a AtomicI32);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::SeqCst);
    }
}

/// The tracer waits in `waitpid`, which a signal to loopscope does not interrupt; stopping the
/// target with `SIGSTOP` gives it a stop to look at `stop` on.
fn wake_on_stop(stop: &AtomicBool, target: &AtomicI32) {
    loop {
        let pid = target.load(Ordering::SeqCst);
        if pid == 0 {
            return;
        }
        if stop.load(Ordering::SeqCst) {
            let _ = sys::signal_process(pid, libc::SIGSTOP);
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn system(what: &'static str) -> impl Fn(std::io::Error) -> ProfileError {
    move |source| ProfileError::System {
        what: what.to_owned(),
        source,
    }
}

impl Tracer {
    fn new(root_pid: i32, count_blocks: bool) -> Tracer {
        Tracer {
            root_pid,
            processes: HashMap::new(),
            threads: HashMap::new(),
            thread_process: HashMap::new(),
            fresh_threads: Default::default(),
            early_stops: HashMap::new(),
            objects: Vec::new(),
            analysed: HashMap::new(),
            counted: HashMap::new(),
            finished: Vec::new(),
            exit: None,
            analysis_cycles: 0,
            sites: 0,
            stepped_sites: 0,
            static_analysis: Duration::ZERO,
            count_blocks,
            block_counts: HashMap::new(),
        }
    }

    /// The block counters of every program, by object.
    fn block_counts(&mut self) -> Vec<BlockCounts> {
        let mut out: Vec<BlockCounts> = self
            .counted
            .iter()
            .filter(|(_, starts)| !starts.is_empty())
            .map(|(&object, starts)| BlockCounts {
                object,
                starts: starts.clone(),
                executions: self
                    .block_counts
                    .remove(&object)
                    .unwrap_or_else(|| vec![0; starts.len()]),
            })
            .collect();
        out.sort_by_key(|b| b.object);
        out
    }

    /// The first stop is the target's `exec`.
    fn start(&mut self, pid: i32) -> Result<(), ProfileError> {
        match sys::wait_for(pid).map_err(system("waitpid"))? {
            Stop::Signal(libc::SIGTRAP) => {}
            Stop::Exited(127) => {
                return Err(ProfileError::Command {
                    command: format!("pid {pid}"),
                    what: "could not be executed".into(),
                });
            }
            other => {
                return Err(ProfileError::System {
                    what: format!("starting the target: unexpected {other:?}"),
                    source: std::io::Error::other("target did not stop at exec"),
                });
            }
        }
        let options = libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_EXITKILL;
        sys::set_options(pid, options).map_err(system("ptrace(SETOPTIONS)"))?;
        self.threads
            .insert(pid, ThreadState::new(pid as u32, pid as u32, tsc_now()));
        self.thread_process.insert(pid, pid);
        self.instrument(pid)?;
        sys::resume(pid, 0).map_err(system("ptrace(CONT)"))
    }

    fn run(&mut self, stop: &AtomicBool) -> Result<(), ProfileError> {
        while !self.threads.is_empty() {
            let (tid, event) = sys::wait_any().map_err(system("waitpid"))?;
            let now = tsc_now();
            let known = self.threads.contains_key(&tid);
            if !known && !matches!(event, Stop::Exited(_) | Stop::Killed(_)) {
                // The kernel may report a new thread's or process's first stop before the
                // creating thread's clone or fork event: it waits, stopped, until adopted.
                self.early_stops.insert(tid, event);
                continue;
            }
            if stop.load(Ordering::SeqCst) {
                self.detach_all(tid, event);
                return Ok(());
            }
            self.handle(tid, event, now)?;
        }
        Ok(())
    }

    fn handle(&mut self, tid: i32, event: Stop, now: u64) -> Result<(), ProfileError> {
        match event {
            Stop::Exited(code) => self.thread_ended(tid, TargetExit::Exited(code), now),
            Stop::Killed(signal) => self.thread_ended(tid, TargetExit::Signaled(signal), now),
            Stop::Event(e) if e == libc::PTRACE_EVENT_CLONE => {
                let new = sys::event_message(tid).map_err(system("ptrace(GETEVENTMSG)"))? as i32;
                if !sys::is_thread(new) {
                    // `clone` without `CLONE_THREAD`: a process of its own, perhaps sharing
                    // its parent's memory, as a vfork child does.
                    self.forked(tid, new, now)?;
                    self.resume(tid, 0);
                    return self.adopt(new, now);
                }
                let pid = self.thread_process[&tid];
                self.threads
                    .insert(new, ThreadState::new(pid as u32, new as u32, now));
                self.thread_process.insert(new, pid);
                self.resume(tid, 0);
                self.adopt(new, now)?;
            }
            Stop::Event(e) if e == libc::PTRACE_EVENT_FORK || e == libc::PTRACE_EVENT_VFORK => {
                let new = sys::event_message(tid).map_err(system("ptrace(GETEVENTMSG)"))? as i32;
                self.forked(tid, new, now)?;
                self.resume(tid, 0);
                self.adopt(new, now)?;
            }
            Stop::Event(e) if e == libc::PTRACE_EVENT_EXEC => {
                self.executed(tid, now)?;
                self.resume(tid, 0);
            }
            Stop::Event(_) => self.resume(tid, 0),
            Stop::Signal(libc::SIGTRAP) => self.trap(tid, now)?,
            Stop::Signal(libc::SIGSTOP) if self.fresh_threads.remove(&tid) => self.resume(tid, 0),
            Stop::Signal(signal) => self.resume(tid, signal),
        }
        Ok(())
    }

    /// Thread or process `tid`, just registered, runs once its first stop (a `SIGSTOP`) is
    /// seen, which may have come already.
    fn adopt(&mut self, tid: i32, now: u64) -> Result<(), ProfileError> {
        match self.early_stops.remove(&tid) {
            None => {
                self.fresh_threads.insert(tid);
                Ok(())
            }
            Some(Stop::Signal(libc::SIGSTOP)) => {
                self.resume(tid, 0);
                Ok(())
            }
            Some(other) => self.handle(tid, other, now),
        }
    }

    fn resume(&mut self, tid: i32, signal: i32) {
        // A thread that vanished (killed by another thread's exit_group) reports its exit next.
        let _ = sys::resume(tid, signal);
    }

    /// A thread is gone at `now`: its time since its last marker goes to where it was (a call
    /// into a library or a loop-free function, when it crashed or was killed there).
    fn thread_ended(&mut self, tid: i32, how: TargetExit, now: u64) {
        if let Some(state) = self.threads.remove(&tid) {
            self.finished.push(state.finish_at(now));
        }
        if tid == self.root_pid {
            self.exit = Some(how);
        }
        if self.thread_process.remove(&tid) == Some(tid) {
            self.processes.remove(&tid);
        }
    }

    /// Process `pid` executed another program. The thread that did is now its only one, with
    /// the process's id (its former id in the event message); the other threads are gone
    /// without all of them reporting it. Their trees end here, the old program's; the thread
    /// starts a new tree in the new program, which is instrumented at its first instruction.
    fn executed(&mut self, pid: i32, now: u64) -> Result<(), ProfileError> {
        let former = sys::event_message(pid).map_err(system("ptrace(GETEVENTMSG)"))? as i32;
        let old_process = self
            .thread_process
            .get(&former)
            .or_else(|| self.thread_process.get(&pid))
            .copied()
            .unwrap_or(pid);
        let gone: Vec<i32> = self
            .thread_process
            .iter()
            .filter(|&(_, &p)| p == old_process || p == pid)
            .map(|(&t, _)| t)
            .collect();
        for tid in gone {
            self.thread_process.remove(&tid);
            self.fresh_threads.remove(&tid);
            if let Some(state) = self.threads.remove(&tid) {
                self.finished.push(state.finish_at(now));
            }
        }
        self.processes.remove(&old_process);
        self.processes.remove(&pid);
        self.threads
            .insert(pid, ThreadState::new(pid as u32, pid as u32, tsc_now()));
        self.thread_process.insert(pid, pid);
        let memory = Memory::open(pid).map_err(system("open /proc/PID/mem"))?;
        let entry = sys::registers(pid).map_err(system("ptrace(GETREGS)"))?.rip;
        let mut original = [0u8];
        memory
            .read(entry, &mut original)
            .map_err(system("reading code"))?;
        arm(&memory, [entry])?;
        self.processes.insert(
            pid,
            Process {
                memory,
                program: None,
                entry_trap: Some((entry, original[0])),
                armed: false,
                main_return: None,
                finished: false,
            },
        );
        Ok(())
    }

    /// The first instruction of a program just executed trapped: it runs as it was, and the
    /// program is instrumented before it does.
    fn entered(&mut self, pid: i32, mut regs: sys::Registers) -> Result<(), ProfileError> {
        let Some(process) = self.processes.get_mut(&pid) else {
            return Ok(());
        };
        let Some((entry, original)) = process.entry_trap.take() else {
            return Ok(());
        };
        process
            .memory
            .write(entry, &[original])
            .map_err(system("restoring code"))?;
        regs.rip = entry;
        sys::set_registers(pid, &regs).map_err(system("ptrace(SETREGS)"))?;
        self.instrument(pid)?;
        // Nothing ran since the exec: the time so far was the tracer's.
        if let Some(state) = self.threads.get_mut(&pid) {
            state.last_tsc = tsc_now();
        }
        self.resume(pid, 0);
        Ok(())
    }

    fn forked(&mut self, parent_tid: i32, child: i32, now: u64) -> Result<(), ProfileError> {
        let parent_pid = self.thread_process[&parent_tid];
        let (program, armed, main_return, finished) = match self.processes.get(&parent_pid) {
            Some(p) => (p.program.clone(), p.armed, p.main_return, p.finished),
            None => (None, false, None, false),
        };
        let memory = Memory::open(child).map_err(system("open /proc/PID/mem"))?;
        self.processes.insert(
            child,
            Process {
                memory,
                program,
                entry_trap: None,
                armed,
                main_return,
                finished,
            },
        );
        let state = self.threads[&parent_tid].forked(child as u32, child as u32, now);
        self.threads.insert(child, state);
        self.thread_process.insert(child, child);
        Ok(())
    }

    /// Analyses the program `pid` now runs, maps scratch space for displaced instructions and
    /// arms `main`'s entry (or every marker when there is no `main`).
    fn instrument(&mut self, pid: i32) -> Result<(), ProfileError> {
        let memory = Memory::open(pid).map_err(system("open /proc/PID/mem"))?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map_err(system("readlink /proc/PID/exe"))?;
        let bias = load_bias(pid, &exe)?;
        let path = exe.display().to_string();
        let first = !self.analysed.contains_key(&path);
        if first {
            let began = Instant::now();
            let image = Image::open(&exe)?;
            let program = Program::analyze(&image, &Options::default());
            self.static_analysis += began.elapsed();
            let object = self.objects.len() as u32;
            self.objects.push(ObjectRef {
                path: path.clone(),
                build_id: program.build_id.clone(),
                content_id: None,
            });
            let program = Rc::new(program);
            self.analysed
                .insert(path.clone(), Analysed { object, program });
        }
        let (object, program) = {
            let a = &self.analysed[&path];
            (a.object, a.program.clone())
        };
        // Each `exec` is a new address space (and, for a position-independent program, a new
        // bias): the markers are planned and the displaced copies written again.
        let analysed = Rc::new(self.prepare(pid, &memory, program, object, bias, first)?);
        let armed = analysed.main_entry.is_none();
        let process = Process {
            memory,
            program: Some(analysed.clone()),
            entry_trap: None,
            armed,
            main_return: None,
            finished: false,
        };
        match analysed.main_entry {
            Some(main) => arm(&process.memory, [main])?,
            None => arm(&process.memory, analysed.sites.keys().copied())?,
        }
        self.processes.insert(pid, process);
        Ok(())
    }

    /// Reads the original bytes, plans how each marker resumes and writes the displaced copies;
    /// the sites are counted the `first` time the program is.
    fn prepare(
        &mut self,
        pid: i32,
        memory: &Memory,
        program: Rc<Program>,
        object: u32,
        bias: u64,
        first: bool,
    ) -> Result<Instrumented, ProfileError> {
        let read_instr = |address: u64| {
            let mut bytes = [0u8; 15];
            memory.read(address + bias, &mut bytes).ok()?;
            decode_at(address + bias, &bytes)
        };
        let sites = marker_sites(
            &program,
            |a| {
                read_instr(a)
                    .and_then(|i| direct_call_target(&i))
                    .map(|t| t - bias)
            },
            self.count_blocks,
        );
        if first && self.count_blocks {
            let counted = counted_blocks(&program);
            self.block_counts.insert(object, vec![0; counted.len()]);
            self.counted.insert(object, counted);
        }
        let lowest = program.segments.iter().map(|s| s.vaddr).min().unwrap_or(0) + bias;
        let scratch_bytes = (sites.len() as u64 * COPY_BYTES).div_ceil(4096) * 4096;
        let scratch = super::calibrate::map_scratch(pid, lowest, scratch_bytes.max(4096))
            .map_err(system("mapping scratch code in the target"))?;
        let mut armed = HashMap::with_capacity(sites.len());
        for (i, site) in sites.into_iter().enumerate() {
            let runtime = site.address + bias;
            let Some(instr) = read_instr(site.address) else {
                continue;
            };
            let copy = scratch + i as u64 * COPY_BYTES;
            let (resume, bytes) = plan_resume(&instr, copy);
            if let Some(bytes) = bytes {
                memory
                    .write(copy, &bytes)
                    .map_err(system("writing displaced code"))?;
            }
            if resume == Resume::Step && first {
                self.stepped_sites += 1;
            }
            let mut original = [0u8];
            memory
                .read(runtime, &mut original)
                .map_err(system("reading code"))?;
            armed.insert(
                runtime,
                Armed {
                    site,
                    original: original[0],
                    resume,
                },
            );
        }
        if first {
            self.sites += armed.len() as u64;
        }
        let main_entry = program.function("main").map(|f| f.address + bias);
        Ok(Instrumented {
            object,
            program,
            sites: armed,
            main_entry,
        })
    }

    /// A thread stopped on an `int3`: ours (a marker) or the program's own.
    fn trap(&mut self, tid: i32, now: u64) -> Result<(), ProfileError> {
        let pid = self.thread_process[&tid];
        if let Some(process) = self.processes.get(&pid)
            && let Some((entry, _)) = process.entry_trap
        {
            let regs = sys::registers(tid).map_err(system("ptrace(GETREGS)"))?;
            if tid == pid && regs.rip.wrapping_sub(1) == entry {
                return self.entered(pid, regs);
            }
        }
        let Some(program) = self.processes.get(&pid).and_then(|p| p.program.clone()) else {
            self.resume(tid, libc::SIGTRAP);
            return Ok(());
        };
        let mut regs = sys::registers(tid).map_err(system("ptrace(GETREGS)"))?;
        let at = regs.rip.wrapping_sub(1);
        if let Some((main_return, original)) = self.processes[&pid].main_return
            && at == main_return
        {
            return self.main_returned(tid, pid, now, regs, original);
        }
        let Some(marker) = program.sites.get(&at) else {
            self.resume(tid, libc::SIGTRAP);
            return Ok(());
        };
        if self.processes[&pid].finished {
            // Trapped on a marker just before it was taken out: run the restored instruction.
            regs.rip = at;
            sys::set_registers(tid, &regs).map_err(system("ptrace(SETREGS)"))?;
            self.resume(tid, 0);
            return Ok(());
        }
        if Some(at) == program.main_entry && !self.processes[&pid].armed {
            self.arm_all(pid, &program, regs.rsp)?;
        }
        if let Some(i) = marker.site.counted_block
            && let Some(count) = self
                .block_counts
                .get_mut(&program.object)
                .and_then(|c| c.get_mut(i as usize))
        {
            *count += 1;
        }
        let memory = &self.processes[&pid].memory;
        let state = self
            .threads
            .get_mut(&tid)
            .expect("every traced thread has a state");
        state.charge(now);
        events(state, &program, marker, &regs, memory, at);
        regs.rip = at;
        match marker.resume {
            Resume::Displaced { copy } => regs.rip = copy,
            Resume::Call {
                target,
                return_address,
            } => {
                regs.rsp -= 8;
                memory
                    .write(regs.rsp, &return_address.to_le_bytes())
                    .map_err(system("pushing a return address"))?;
                regs.rip = target;
            }
            Resume::Step => step_in_place(tid, memory, at, marker.original, &regs)?,
        }
        if marker.resume != Resume::Step {
            sys::set_registers(tid, &regs).map_err(system("ptrace(SETREGS)"))?;
        }
        let done = tsc_now();
        self.analysis_cycles += done.saturating_sub(now);
        state.last_tsc = done;
        self.resume(tid, 0);
        Ok(())
    }

    /// `main` was entered: every marker is armed, and one more where `main` returns.
    fn arm_all(
        &mut self,
        pid: i32,
        program: &Instrumented,
        stack_pointer: u64,
    ) -> Result<(), ProfileError> {
        let process = self
            .processes
            .get_mut(&pid)
            .expect("a stopped thread's process");
        process.armed = true;
        arm(&process.memory, program.sites.keys().copied())?;
        let mut word = [0u8; 8];
        let mut original = [0u8];
        if process.memory.read(stack_pointer, &mut word).is_ok() {
            let return_address = u64::from_le_bytes(word);
            if !program.sites.contains_key(&return_address)
                && process.memory.read(return_address, &mut original).is_ok()
            {
                arm(&process.memory, [return_address])?;
                process.main_return = Some((return_address, original[0]));
            }
        }
        Ok(())
    }

    /// `main` returned: the process's markers are taken out and the thread goes on untraced
    /// by the tree (its frames closed).
    fn main_returned(
        &mut self,
        tid: i32,
        pid: i32,
        now: u64,
        mut regs: sys::Registers,
        original: u8,
    ) -> Result<(), ProfileError> {
        let process = self
            .processes
            .get_mut(&pid)
            .expect("a stopped thread's process");
        let at = regs.rip - 1;
        process
            .memory
            .write(at, &[original])
            .map_err(system("restoring code"))?;
        if let Some(program) = &process.program {
            for (&address, marker) in &program.sites {
                process
                    .memory
                    .write(address, &[marker.original])
                    .map_err(system("restoring code"))?;
            }
        }
        process.main_return = None;
        process.finished = true;
        let state = self
            .threads
            .get_mut(&tid)
            .expect("every traced thread has a state");
        state.charge(now);
        state.returned_to(at, regs.rsp);
        regs.rip = at;
        sys::set_registers(tid, &regs).map_err(system("ptrace(SETREGS)"))?;
        state.last_tsc = tsc_now();
        self.resume(tid, 0);
        Ok(())
    }

    /// Restores every program's code, stops and detaches every thread, and closes the trees.
    fn detach_all(&mut self, stopped: i32, event: Stop) {
        for process in self.processes.values() {
            restore_code(process, &process.memory);
        }
        // A process forked just now, held until its fork event comes, has a copy of its
        // parent's markers.
        for &held in self.early_stops.keys() {
            let parent = parent_pid(held).and_then(|p| self.processes.get(&p));
            if let (Some(parent), Ok(memory)) = (parent, Memory::open(held)) {
                restore_code(parent, &memory);
            }
        }
        let mut pending: Vec<i32> = self
            .threads
            .keys()
            .copied()
            .filter(|&t| t != stopped)
            .collect();
        self.rewind_if_trapped(stopped, event);
        for &tid in &pending {
            let _ = sys::stop_thread(self.thread_process[&tid], tid);
        }
        while let Some(tid) = pending.pop() {
            if let Ok(event) = sys::wait_for(tid) {
                self.rewind_if_trapped(tid, event);
            }
        }
        for &tid in self.threads.keys().chain(self.early_stops.keys()) {
            let _ = sys::detach(tid, 0);
        }
        for &pid in self.processes.keys() {
            let _ = sys::signal_process(pid, libc::SIGCONT);
        }
        let detached = tsc_now();
        for (_, state) in self.threads.drain() {
            self.finished.push(state.finish_at(detached));
        }
        self.exit = Some(TargetExit::Detached);
    }

    /// A thread that hit a marker just before the code was restored must run the restored
    /// instruction, not the byte after it.
    fn rewind_if_trapped(&self, tid: i32, event: Stop) {
        if event != Stop::Signal(libc::SIGTRAP) {
            return;
        }
        let pid = self.thread_process[&tid];
        let Some(process) = self.processes.get(&pid) else {
            return;
        };
        let ours = |at: u64| {
            process.entry_trap.is_some_and(|(entry, _)| entry == at)
                || process
                    .program
                    .as_ref()
                    .is_some_and(|p| p.sites.contains_key(&at))
        };
        if let Ok(mut regs) = sys::registers(tid)
            && ours(regs.rip.wrapping_sub(1))
        {
            regs.rip -= 1;
            let _ = sys::set_registers(tid, &regs);
        }
    }
}

/// The events one marker stands for, in the order control meets them.
fn events(
    state: &mut ThreadState,
    program: &Instrumented,
    marker: &Armed,
    regs: &sys::Registers,
    memory: &Memory,
    at: u64,
) {
    let site = &marker.site;
    let object = program.object;
    if site.return_site {
        state.returned_to(at, regs.rsp);
    }
    if let Some(fi) = site.function_entry {
        let mut word = [0u8; 8];
        let return_address = memory
            .read(regs.rsp, &mut word)
            .map_or(0, |()| u64::from_le_bytes(word));
        let address = program.program.functions[fi as usize].address;
        state.call(
            NodeKey::Function { object, address },
            Some(fi),
            return_address,
            regs.rsp,
        );
    }
    if let Some(block) = &site.block {
        state.block(block.function, &block.chain, block.header_of, regs.rsp);
    }
    if site.plt_call
        && let Resume::Call {
            target,
            return_address,
        } = marker.resume
    {
        let stub = target.wrapping_sub(at.wrapping_sub(site.address));
        state.call(
            NodeKey::Plt {
                object,
                address: stub,
            },
            None,
            return_address,
            regs.rsp - 8,
        );
    }
}

/// Runs the original instruction under the marker once, in place.
fn step_in_place(
    tid: i32,
    memory: &Memory,
    at: u64,
    original: u8,
    regs: &sys::Registers,
) -> Result<(), ProfileError> {
    memory
        .write(at, &[original])
        .map_err(system("restoring code"))?;
    sys::set_registers(tid, regs).map_err(system("ptrace(SETREGS)"))?;
    sys::single_step(tid).map_err(system("ptrace(SINGLESTEP)"))?;
    let _ = sys::wait_for(tid);
    memory
        .write(at, &[0xcc])
        .map_err(system("writing a marker"))
}

fn arm(memory: &Memory, addresses: impl IntoIterator<Item = u64>) -> Result<(), ProfileError> {
    for address in addresses {
        memory
            .write(address, &[0xcc])
            .map_err(system("writing a marker"))?;
    }
    Ok(())
}

/// Where the kernel mapped `exe` in `pid`: its first mapping's start less the file offset's
/// link-time address.
fn load_bias(pid: i32, exe: &Path) -> Result<u64, ProfileError> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(system("read /proc/PID/maps"))?;
    let image = Image::open(exe)?;
    if !image.kind.is_relocated() {
        return Ok(0);
    }
    let exe = exe.display().to_string();
    let lowest = image
        .segments
        .iter()
        .map(|s| s.vaddr & !0xfff)
        .min()
        .unwrap_or(0);
    maps.lines()
        .filter(|l| l.ends_with(&exe))
        .find_map(|l| {
            let mut fields = l.split_whitespace();
            let start = u64::from_str_radix(fields.next()?.split('-').next()?, 16).ok()?;
            let offset = u64::from_str_radix(fields.nth(1)?, 16).ok()?;
            (offset == 0).then(|| start - lowest)
        })
        .ok_or_else(|| ProfileError::System {
            what: format!("finding {exe} in /proc/{pid}/maps"),
            source: std::io::Error::other("not mapped"),
        })
}

fn tsc_now() -> u64 {
    crate::tsc::read()
}
