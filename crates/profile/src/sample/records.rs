//! Kernel records turned into owned events, and the queue that hands them out in time order
//! across the per-CPU buffers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use perf_event::data::endian::Native;
use perf_event::data::parse::{ParseConfig, Parser};
use perf_event::data::{
    Comm, Exit, Lost, Mmap2, RecordMetadata, Sample, SampleRegsAbi, Throttle, Visitor,
};

use super::events::REGS_USER_MASK;

/// Records younger than this are kept for the next pass: another CPU's buffer may still be
/// publishing an older one (a record is stamped before its stack copy is written).
pub(super) const HORIZON_NS: u64 = 10_000_000;

/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an `execve`.
const MISC_COMM_EXEC: u16 = 1 << 13;

/// The registers the unwinder starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct UserRegs {
    pub(super) ip: u64,
    pub(super) sp: u64,
    pub(super) bp: u64,
}

/// Identity of a mapped file, to load each object once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct FileId {
    pub(super) path: String,
    pub(super) device: u64,
    pub(super) inode: u64,
}

/// A sample as the kernel wrote it, before unwinding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawSample {
    pub(super) pid: u32,
    pub(super) tid: u32,
    pub(super) ip: u64,
    pub(super) period: u64,
    /// The group's instruction counter (cumulative), when the event reads one.
    pub(super) instructions: Option<u64>,
    /// The CPU the sample was taken on (group events: each CPU's counter is its own).
    pub(super) cpu: Option<u32>,
    /// `None` when the kernel had no user registers (the sample cannot be unwound).
    pub(super) regs: Option<UserRegs>,
    /// The stack from `regs.sp` upwards.
    pub(super) stack: Vec<u8>,
}

/// What a record says, reduced to what the tracker uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EventKind {
    Sample(RawSample),
    Mmap {
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        file_offset: u64,
        executable: bool,
        file: FileId,
    },
    Exec {
        pid: u32,
        tid: u32,
        command: String,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
    },
    Exit {
        pid: u32,
        tid: u32,
    },
    Lost {
        count: u64,
    },
    /// The kernel stopped sampling for a while (too many samples per second).
    Throttle,
}

/// A record with its kernel timestamp (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) time_ns: u64,
    pub(super) kind: EventKind,
}

/// Parses one record (`data` is what follows its 8-byte header). Records that are damaged
/// or of no use here give `None`.
pub(super) fn convert(
    ty: u32,
    misc: u16,
    data: &[u8],
    config: &ParseConfig<Native>,
) -> Option<Event> {
    let size = u16::try_from(data.len() + 8).ok()?;
    let mut header_bytes = [0u8; 8];
    header_bytes[..4].copy_from_slice(&ty.to_ne_bytes());
    header_bytes[4..6].copy_from_slice(&misc.to_ne_bytes());
    header_bytes[6..].copy_from_slice(&size.to_ne_bytes());
    let header = Parser::new(&header_bytes[..], config.clone())
        .parse()
        .ok()?;
    Parser::new(data, config.clone())
        .parse_record_with_header(Convert, header)
        .ok()?
}

struct Convert;

impl<'a> Visitor<'a> for Convert {
    type Output = Option<Event>;

    fn visit_unimplemented(self, _: RecordMetadata) -> Option<Event> {
        None
    }

    fn visit_sample(self, sample: Sample<'a>, _: RecordMetadata) -> Option<Event> {
        let regs = sample
            .regs_user()
            .filter(|regs| regs.abi == SampleRegsAbi::ABI_64 && regs.mask == REGS_USER_MASK)
            .and_then(|regs| match regs.regs[..] {
                [bp, sp, ip] => Some(UserRegs { ip, sp, bp }),
                _ => None,
            });
        let kind = EventKind::Sample(RawSample {
            pid: sample.pid()?,
            tid: sample.tid()?,
            ip: sample.ip()?,
            period: sample.period().unwrap_or(0),
            // A group's second counter is the instruction counter (see `events::builder`).
            instructions: sample
                .values()
                .and_then(|group| group.get(1))
                .map(|e| e.value()),
            cpu: sample.cpu(),
            regs,
            stack: sample.stack_user().map(<[u8]>::to_vec).unwrap_or_default(),
        });
        Some(Event {
            time_ns: sample.time()?,
            kind,
        })
    }

    fn visit_mmap2(self, record: Mmap2<'a>, metadata: RecordMetadata) -> Option<Event> {
        let device =
            (u64::from(record.maj().unwrap_or(0)) << 32) | u64::from(record.min().unwrap_or(0));
        let kind = EventKind::Mmap {
            pid: record.pid,
            tid: record.tid,
            start: record.addr,
            len: record.len,
            file_offset: record.pgoff,
            executable: record.prot & libc::PROT_EXEC as u32 != 0,
            file: FileId {
                path: String::from_utf8_lossy(&record.filename).into_owned(),
                device,
                inode: record.ino().unwrap_or(0),
            },
        };
        timed(kind, &metadata)
    }

    fn visit_comm(self, record: Comm<'a>, metadata: RecordMetadata) -> Option<Event> {
        if metadata.misc() & MISC_COMM_EXEC == 0 {
            return None;
        }
        let kind = EventKind::Exec {
            pid: record.pid,
            tid: record.tid,
            command: String::from_utf8_lossy(&record.comm).into_owned(),
        };
        timed(kind, &metadata)
    }

    fn visit_fork(self, record: Exit, metadata: RecordMetadata) -> Option<Event> {
        let kind = EventKind::Fork {
            pid: record.pid,
            ppid: record.ppid,
            tid: record.tid,
        };
        Some(Event {
            time_ns: metadata.sample_id().time().unwrap_or(record.time),
            kind,
        })
    }

    fn visit_exit(self, record: Exit, metadata: RecordMetadata) -> Option<Event> {
        let kind = EventKind::Exit {
            pid: record.pid,
            tid: record.tid,
        };
        Some(Event {
            time_ns: metadata.sample_id().time().unwrap_or(record.time),
            kind,
        })
    }

    fn visit_throttle(self, _: Throttle, metadata: RecordMetadata) -> Option<Event> {
        Some(Event {
            time_ns: metadata.sample_id().time().unwrap_or(0),
            kind: EventKind::Throttle,
        })
    }

    fn visit_lost(self, record: Lost, metadata: RecordMetadata) -> Option<Event> {
        // Counted whenever it comes: its time orders nothing.
        Some(Event {
            time_ns: metadata.sample_id().time().unwrap_or(0),
            kind: EventKind::Lost { count: record.lost },
        })
    }
}

fn timed(kind: EventKind, metadata: &RecordMetadata) -> Option<Event> {
    Some(Event {
        time_ns: metadata.sample_id().time()?,
        kind,
    })
}

/// Events read but not yet handed out, oldest first (ties in the order they were read).
#[derive(Debug, Default)]
pub(super) struct Queue {
    pending: BinaryHeap<Reverse<Pending>>,
    arrivals: u64,
}

#[derive(Debug)]
struct Pending {
    key: (u64, u64),
    event: Event,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        self.key == other.key
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Pending) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Pending) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl Queue {
    pub(super) fn push(&mut self, event: Event) {
        let key = (event.time_ns, self.arrivals);
        self.pending.push(Reverse(Pending { key, event }));
        self.arrivals += 1;
    }

    /// The oldest event, if it is stamped before `horizon_ns`.
    pub(super) fn pop_before(&mut self, horizon_ns: u64) -> Option<Event> {
        if self.pending.peek()?.0.key.0 >= horizon_ns {
            return None;
        }
        self.pending.pop().map(|Reverse(pending)| pending.event)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{SampleOptions, SampledEvent, events};
    use proptest::prelude::*;

    fn config() -> ParseConfig<Native> {
        let wanted = events::Wanted {
            event: SampledEvent::CpuClock,
            precise_ip: 0,
            stack_bytes: 64,
        };
        let builder = events::builder(&wanted, &SampleOptions::default());
        ParseConfig::from(*builder.attrs())
    }

    /// A sample record as the kernel lays it out for our attributes:
    /// ip, pid/tid, time, period, regs (abi + bp, sp, ip), stack (size, bytes, dyn_size).
    fn sample_record(stack: &[u8], dyn_size: u64) -> Vec<u8> {
        let mut data = Vec::new();
        let mut put = |v: u64| data.extend_from_slice(&v.to_ne_bytes());
        put(0x401234);
        put((7u64 << 32) | 5);
        put(1_000);
        put(250_000);
        put(2); // PERF_SAMPLE_REGS_ABI_64
        put(0x7ffd_0000_0100);
        put(0x7ffd_0000_0000);
        put(0x401234);
        put(stack.len() as u64);
        data.extend_from_slice(stack);
        data.extend_from_slice(&dyn_size.to_ne_bytes());
        data
    }

    #[test]
    fn a_sample_record_gives_its_registers_and_the_used_part_of_the_stack() {
        let stack: Vec<u8> = (0..64).collect();
        let data = sample_record(&stack, 24);
        let event = convert(9, 2, &data, &config()).expect("a sample");
        assert_eq!(event.time_ns, 1_000);
        assert_eq!(
            event.kind,
            EventKind::Sample(RawSample {
                pid: 5,
                tid: 7,
                ip: 0x401234,
                period: 250_000,
                instructions: None,
                cpu: None,
                regs: Some(UserRegs {
                    ip: 0x401234,
                    sp: 0x7ffd_0000_0000,
                    bp: 0x7ffd_0000_0100
                }),
                stack: stack[..24].to_vec(),
            })
        );
    }

    /// A leader-sampled group record (spec 001 embodiment 1): the READ part, after the
    /// period, holds the number of counters and (value, id) for the leader then the member.
    #[test]
    fn a_group_sample_gives_the_instruction_counter() {
        let wanted = events::Wanted {
            event: SampledEvent::CyclesWithInstructions,
            precise_ip: 0,
            stack_bytes: 64,
        };
        let config =
            ParseConfig::from(*events::builder(&wanted, &SampleOptions::default()).attrs());
        let mut data = Vec::new();
        let mut put = |v: u64| data.extend_from_slice(&v.to_ne_bytes());
        put(0x401234); // ip
        put((7u64 << 32) | 5); // pid, tid
        put(1_000); // time
        put(3); // cpu 3, reserved 0
        put(2_000_000); // period (cycles)
        put(2); // nr
        put(123_456_789); // cycles, cumulative
        put(41); // its id
        put(98_765_432); // instructions, cumulative
        put(42); // its id
        put(2); // PERF_SAMPLE_REGS_ABI_64
        put(0x7ffd_0000_0100);
        put(0x7ffd_0000_0000);
        put(0x401234);
        put(8); // the stack copy: 8 bytes, all used
        put(0x1122);
        put(8);
        let event = convert(9, 2, &data, &config).expect("a sample");
        let EventKind::Sample(sample) = event.kind else {
            panic!("{event:?}")
        };
        assert_eq!(
            (sample.period, sample.instructions, sample.cpu),
            (2_000_000, Some(98_765_432), Some(3))
        );
        // The same bytes under a configuration without READ are another layout: refused or
        // read without an instruction count, never a wrong count.
        if let Some(Event {
            kind: EventKind::Sample(s),
            ..
        }) = convert(9, 2, &data, &config_for(SampledEvent::Cycles))
        {
            assert_eq!(s.instructions, None);
        }
    }

    fn config_for(event: SampledEvent) -> ParseConfig<Native> {
        let wanted = events::Wanted {
            event,
            precise_ip: 0,
            stack_bytes: 64,
        };
        ParseConfig::from(*events::builder(&wanted, &SampleOptions::default()).attrs())
    }

    #[test]
    fn a_stack_longer_than_its_record_is_refused() {
        let data = sample_record(&[0; 64], 65);
        assert_eq!(convert(9, 2, &data, &config()), None);
    }

    #[test]
    fn an_exec_comm_record_is_an_exec_and_a_plain_one_is_dropped() {
        let mut data = Vec::new();
        data.extend_from_slice(&11u32.to_ne_bytes());
        data.extend_from_slice(&11u32.to_ne_bytes());
        data.extend_from_slice(b"prog\0\0\0\0");
        // sample_id_all: pid/tid, time.
        data.extend_from_slice(&((11u64 << 32) | 11).to_ne_bytes());
        data.extend_from_slice(&77u64.to_ne_bytes());
        let exec = convert(3, MISC_COMM_EXEC, &data, &config()).expect("an exec");
        assert_eq!(
            exec,
            Event {
                time_ns: 77,
                kind: EventKind::Exec {
                    pid: 11,
                    tid: 11,
                    command: "prog".to_string()
                }
            }
        );
        assert_eq!(convert(3, 0, &data, &config()), None);
    }

    #[test]
    fn the_queue_releases_in_time_order_and_keeps_what_is_too_young() {
        let mut queue = Queue::default();
        for time_ns in [30, 10, 20, 10] {
            queue.push(Event {
                time_ns,
                kind: EventKind::Lost { count: time_ns },
            });
        }
        let mut out = Vec::new();
        while let Some(event) = queue.pop_before(25) {
            out.push(event);
        }
        let lost = |e: &Event| match e.kind {
            EventKind::Lost { count } => (e.time_ns, count),
            _ => unreachable!(),
        };
        assert_eq!(
            out.iter().map(lost).collect::<Vec<_>>(),
            [(10, 10), (10, 10), (20, 20)]
        );
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.pop_before(u64::MAX).map(|e| e.time_ns), Some(30));
        assert_eq!(queue.pop_before(u64::MAX), None);
    }

    proptest! {
        #[test]
        fn any_bytes_of_any_record_type_parse_or_are_refused(
            ty in 0u32..24,
            misc in any::<u16>(),
            data in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            let _ = convert(ty, misc, &data, &config());
        }

        #[test]
        fn damaged_sample_records_never_panic(
            cut in 0usize..160,
            dyn_size in any::<u64>(),
            flip in any::<(usize, u8)>(),
        ) {
            let mut data = sample_record(&[1; 64], dyn_size);
            let at = flip.0 % data.len();
            data[at] ^= flip.1;
            data.truncate(cut);
            let _ = convert(9, 2, &data, &config());
        }
    }
}
