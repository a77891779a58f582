//! The state built from the records in time order: the processes and their mappings, one
//! unwinder each, and the unwound samples.

use std::collections::{BTreeMap, HashMap, HashSet};

use framehop::Unwinder as _;

use super::records::{Event, EventKind, FileId, RawSample};
use super::unwind::{self, Objects, RuleCache, Unwinder};
use super::{Exec, SampledEvent, SampledRun, maps};
use crate::{Mapping, Sample, TargetExit};

/// One process: its unwinder, the address ranges of its modules, its current mappings.
#[derive(Clone, Default)]
struct Process {
    unwinder: Unwinder,
    /// Start → end of every module in `unwinder`.
    modules: BTreeMap<u64, u64>,
    /// Indices in the run's mappings of what the process has mapped now.
    mappings: Vec<usize>,
}

/// What the caller knows at the end of a run.
pub(super) struct Finish {
    pub(super) event: SampledEvent,
    pub(super) precise_ip: u8,
    pub(super) frequency_hz: u64,
    pub(super) period_nominal: u64,
    pub(super) exit: TargetExit,
    /// When the target was let go to `exec` (monotonic ns).
    pub(super) released_ns: u64,
    /// When the watch ended (monotonic ns).
    pub(super) ended_ns: u64,
    pub(super) stack_bytes: u32,
    pub(super) buffer_bytes: u64,
    pub(super) tsc_hz: Option<f64>,
    pub(super) core_cycles_per_ns: Option<f64>,
    pub(super) cpu_vendor: Option<String>,
}

/// Builds a [`SampledRun`] from events handed in time order.
pub(super) struct Tracker {
    /// Monotonic time the run's times count from.
    origin_ns: u64,
    root: u32,
    processes: HashMap<u32, Process>,
    objects: Objects,
    rules: RuleCache,
    samples: Vec<Sample>,
    mappings: Vec<Mapping>,
    execs: Vec<Exec>,
    lost: u64,
    throttled: u64,
    /// Per thread and CPU, the instruction counter's value at its last sample (group
    /// sampling: an inherited per-CPU event is one counter per thread and CPU).
    last_instructions: HashMap<(u32, u32), u64>,
    pids: HashSet<u32>,
    tids: HashSet<u32>,
    /// Per process started during the run (the first one aside), its threads not yet exited.
    running: HashMap<u32, HashSet<u32>>,
    period_sum: u64,
    root_exec_ns: Option<u64>,
    root_exit_ns: Option<u64>,
}

impl Tracker {
    pub(super) fn new(origin_ns: u64, root: u32) -> Tracker {
        Tracker {
            origin_ns,
            root,
            processes: HashMap::new(),
            objects: Objects::default(),
            rules: RuleCache::new(),
            samples: Vec::new(),
            mappings: Vec::new(),
            execs: Vec::new(),
            lost: 0,
            throttled: 0,
            last_instructions: HashMap::new(),
            pids: HashSet::from([root]),
            tids: HashSet::from([root]),
            running: HashMap::new(),
            period_sum: 0,
            root_exec_ns: None,
            root_exit_ns: None,
        }
    }

    fn since_origin(&self, time_ns: u64) -> u64 {
        time_ns.saturating_sub(self.origin_ns)
    }

    pub(super) fn handle(&mut self, event: Event) {
        let time_ns = event.time_ns;
        match event.kind {
            EventKind::Sample(sample) => self.sample(time_ns, &sample),
            EventKind::Mmap {
                pid,
                tid,
                start,
                len,
                file_offset,
                executable,
                file,
            } => {
                self.seen(pid, tid);
                if executable {
                    self.map(pid, start..start.saturating_add(len), file_offset, file);
                }
            }
            EventKind::Exec { pid, tid, command } => {
                self.seen(pid, tid);
                self.exec(time_ns, pid, command);
            }
            EventKind::Fork { pid, ppid, tid } => {
                self.seen(pid, tid);
                if pid != ppid {
                    self.fork(ppid, pid);
                }
                if pid != self.root {
                    self.running.entry(pid).or_default().insert(tid);
                }
            }
            EventKind::Exit { pid, tid } => {
                self.seen(pid, tid);
                if let Some(threads) = self.running.get_mut(&pid) {
                    threads.remove(&tid);
                    if threads.is_empty() {
                        self.running.remove(&pid);
                    }
                }
                if pid == self.root && tid == self.root {
                    self.root_exit_ns = Some(time_ns);
                }
            }
            EventKind::Lost { count } => self.lost += count,
            EventKind::Throttle => self.throttled += 1,
        }
    }

    /// The processes started during the run, the first one aside, whose exit has not been
    /// handled yet.
    pub(super) fn running_descendants(&self) -> impl Iterator<Item = u32> + '_ {
        self.running.keys().copied()
    }

    fn seen(&mut self, pid: u32, tid: u32) {
        self.pids.insert(pid);
        self.tids.insert(tid);
    }

    fn sample(&mut self, time_ns: u64, sample: &RawSample) {
        let RawSample { pid, tid, ip, .. } = *sample;
        self.seen(pid, tid);
        if !self.processes.contains_key(&pid) {
            self.adopt(pid);
        }
        let (frames, truncated) = match self.processes.get(&pid) {
            Some(process) => unwind::unwind(
                &process.unwinder,
                &mut self.rules,
                ip,
                sample.regs,
                &sample.stack,
            ),
            None => (vec![ip], true),
        };
        self.period_sum = self.period_sum.saturating_add(sample.period);
        // The counter is cumulative per thread and CPU (inherited counters start at 0 with
        // the thread): a sample stands for what the thread retired on that CPU since its
        // previous sample there.
        let instructions = sample.instructions.map(|value| {
            let key = (tid, sample.cpu.unwrap_or(0));
            let before = self.last_instructions.insert(key, value).unwrap_or(0);
            value.saturating_sub(before)
        });
        self.samples.push(Sample {
            pid,
            tid,
            time_ns: self.since_origin(time_ns),
            stack: frames,
            truncated,
            period: sample.period,
            instructions,
        });
    }

    /// A process whose creation was not seen (its records were lost): its executable
    /// mappings as `/proc` shows them now, if it is still there.
    fn adopt(&mut self, pid: u32) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        for entry in maps::parse_maps(&text).into_iter().filter(|e| e.executable) {
            let file = FileId {
                path: entry.path,
                device: entry.device,
                inode: entry.inode,
            };
            self.map(pid, entry.start..entry.end, entry.file_offset, file);
        }
    }

    fn map(&mut self, pid: u32, range: std::ops::Range<u64>, file_offset: u64, file: FileId) {
        let module = self.objects.module(&file, range.clone(), file_offset);
        let index = self.mappings.len();
        self.mappings.push(Mapping {
            pid,
            start: range.start,
            end: range.end,
            file_offset,
            path: file.path,
        });
        let process = self.processes.entry(pid).or_default();
        process.mappings.push(index);
        // A new mapping replaces whatever it overlaps.
        let overlapped: Vec<u64> = process
            .modules
            .range(..range.end)
            .filter(|&(_, &end)| end > range.start)
            .map(|(&start, _)| start)
            .collect();
        for start in overlapped {
            process.unwinder.remove_module(start);
            process.modules.remove(&start);
        }
        if let Some(module) = module {
            process.modules.insert(range.start, range.end);
            process.unwinder.add_module(module);
        }
    }

    fn exec(&mut self, time_ns: u64, pid: u32, command: String) {
        self.processes.insert(pid, Process::default());
        self.execs.push(Exec {
            pid,
            time_ns: self.since_origin(time_ns),
            command,
            first_mapping: self.mappings.len(),
        });
        if pid == self.root && self.root_exec_ns.is_none() {
            self.root_exec_ns = Some(time_ns);
        }
    }

    /// A new process starts with its parent's address space: the same unwinder, and copies
    /// of the parent's mappings under its own pid.
    fn fork(&mut self, parent: u32, child: u32) {
        let Some(mut process) = self.processes.get(&parent).cloned() else {
            self.processes.insert(child, Process::default());
            return;
        };
        for index in &mut process.mappings {
            let mut copy = self.mappings[*index].clone();
            copy.pid = child;
            *index = self.mappings.len();
            self.mappings.push(copy);
        }
        self.processes.insert(child, process);
    }

    pub(super) fn finish(self, finish: Finish) -> SampledRun {
        let exec_ns = self.root_exec_ns.unwrap_or(finish.released_ns);
        let end_ns = self.root_exit_ns.unwrap_or(finish.ended_ns);
        let period = match self.samples.len() as u64 {
            0 => finish.period_nominal,
            count => self.period_sum / count,
        };
        SampledRun {
            event: finish.event,
            precise_ip: finish.precise_ip,
            frequency_hz: finish.frequency_hz,
            period,
            sampled_total: self.period_sum,
            samples: self.samples,
            mappings: self.mappings,
            execs: self.execs,
            lost_samples: self.lost,
            throttled: self.throttled,
            tsc_hz: finish.tsc_hz,
            core_cycles_per_ns: finish.core_cycles_per_ns,
            cpu_vendor: finish.cpu_vendor,
            exit: finish.exit,
            wall_ns: end_ns.saturating_sub(exec_ns),
            startup_ns: exec_ns.saturating_sub(self.origin_ns),
            processes: self.pids.len() as u32,
            threads: self.tids.len() as u32,
            stack_bytes: finish.stack_bytes,
            buffer_bytes: finish.buffer_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> FileId {
        FileId {
            path: path.to_string(),
            device: 0,
            inode: 0,
        }
    }

    fn mmap(time_ns: u64, pid: u32, start: u64, path: &str) -> Event {
        Event {
            time_ns,
            kind: EventKind::Mmap {
                pid,
                tid: pid,
                start,
                len: 0x1000,
                file_offset: 0,
                executable: true,
                file: file(path),
            },
        }
    }

    fn exec(time_ns: u64, pid: u32) -> Event {
        Event {
            time_ns,
            kind: EventKind::Exec {
                pid,
                tid: pid,
                command: "prog".to_string(),
            },
        }
    }

    #[test]
    fn a_forked_child_gets_its_parents_mappings_and_an_exec_starts_afresh() {
        let mut tracker = Tracker::new(100, 10);
        tracker.handle(exec(110, 10));
        tracker.handle(mmap(120, 10, 0x1000, "/no/such/a"));
        tracker.handle(Event {
            time_ns: 130,
            kind: EventKind::Fork {
                pid: 11,
                ppid: 10,
                tid: 11,
            },
        });
        tracker.handle(exec(140, 11));
        tracker.handle(mmap(150, 11, 0x1000, "/no/such/b"));
        tracker.handle(Event {
            time_ns: 160,
            kind: EventKind::Exit { pid: 10, tid: 10 },
        });
        let run = tracker.finish(Finish {
            event: SampledEvent::CpuClock,
            precise_ip: 0,
            frequency_hz: 1000,
            period_nominal: 1_000_000,
            exit: TargetExit::Exited(0),
            released_ns: 105,
            ended_ns: 999,
            stack_bytes: 64,
            buffer_bytes: 4096,
            tsc_hz: None,
            core_cycles_per_ns: None,
            cpu_vendor: None,
        });
        let paths: Vec<(u32, &str)> = run
            .mappings
            .iter()
            .map(|m| (m.pid, m.path.as_str()))
            .collect();
        assert_eq!(
            paths,
            [(10, "/no/such/a"), (11, "/no/such/a"), (11, "/no/such/b")]
        );
        assert_eq!(run.execs.len(), 2);
        assert_eq!(
            (
                run.execs[1].pid,
                run.execs[1].time_ns,
                run.execs[1].first_mapping
            ),
            (11, 40, 2)
        );
        // Before its exec the child resolves through the copy; after, through its own.
        assert_eq!(run.mapping_at(11, 35, 0x1800).unwrap().path, "/no/such/a");
        assert_eq!(run.mapping_at(11, 45, 0x1800).unwrap().path, "/no/such/b");
        assert_eq!(run.mapping_at(10, 45, 0x1800).unwrap().path, "/no/such/a");
        assert_eq!(run.mapping_at(10, 45, 0x2800), None);
        assert_eq!((run.startup_ns, run.wall_ns), (10, 50));
        assert_eq!((run.processes, run.threads), (2, 2));
        assert_eq!(run.period, 1_000_000);
    }

    /// Group sampling (spec 001 §6.5, embodiment 1): the instruction counter is cumulative
    /// per thread, so each sample stands for the difference from the thread's previous one.
    #[test]
    fn group_samples_carry_per_thread_instruction_deltas() {
        let mut tracker = Tracker::new(0, 1);
        let sample = |time_ns, tid, instructions| Event {
            time_ns,
            kind: EventKind::Sample(RawSample {
                pid: 1,
                tid,
                ip: 0x42,
                period: 1_000_000,
                instructions: Some(instructions),
                cpu: Some(0),
                regs: None,
                stack: Vec::new(),
            }),
        };
        for event in [
            sample(1, 1, 1_000),
            sample(2, 2, 700),
            sample(3, 1, 2_500),
            sample(4, 2, 1_900),
            sample(5, 1, 2_600),
        ] {
            tracker.handle(event);
        }
        let deltas: Vec<(u32, Option<u64>)> = tracker
            .samples
            .iter()
            .map(|s| (s.tid, s.instructions))
            .collect();
        assert_eq!(
            deltas,
            [
                (1, Some(1_000)),
                (2, Some(700)),
                (1, Some(1_500)),
                (2, Some(1_200)),
                (1, Some(100))
            ]
        );
        tracker.handle(Event {
            time_ns: 6,
            kind: EventKind::Throttle,
        });
        assert_eq!(tracker.throttled, 1);
    }

    #[test]
    fn a_sample_of_an_unknown_process_is_kept_with_its_ip() {
        let mut tracker = Tracker::new(0, 1);
        tracker.handle(Event {
            time_ns: 5,
            kind: EventKind::Sample(RawSample {
                pid: u32::MAX,
                tid: u32::MAX,
                ip: 0x42,
                period: 7,
                instructions: None,
                cpu: None,
                regs: None,
                stack: Vec::new(),
            }),
        });
        assert_eq!(tracker.samples.len(), 1);
        assert_eq!(tracker.samples[0].stack, [0x42]);
        assert!(tracker.samples[0].truncated);
        assert_eq!(tracker.period_sum, 7);
    }
}
