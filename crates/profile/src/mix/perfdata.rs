//! `perf record` files (perf.data) as sample sources for the mix: the sampling event, the
//! samples of its first attribute, the executable mappings, `exec`s and forks of the processes,
//! lost and throttle records, and the build-ids perf wrote, read with the `linux-perf-data`
//! crate. A group leader's READ values (`perf record -e '{cycles,instructions}:S'`) are read
//! from the record's bytes here.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::Path;

use linux_perf_data::linux_perf_event_reader::{
    EventRecord, HardwareEventId, PerfEventType, RawData, ReadFormat, SampleFormat,
    SoftwareCounterType, constants,
};
use linux_perf_data::{Endianness, Feature, PerfFileReader, PerfFileRecord};

use super::estimate::{MixOptions, MixReport, SampleSource, mix_of_samples};
use super::perfcheck::check_perf_file;
use crate::sample::{Exec, SampledEvent};
use crate::{Mapping, ObjectRef, ProfileError, Sample};

/// What a perf.data file holds that the mix uses.
#[derive(Debug, Default)]
pub(crate) struct PerfData {
    pub event: Option<SampledEvent>,
    pub event_name: String,
    pub frequency_hz: u64,
    pub precise_ip: u8,
    pub samples: Vec<Sample>,
    pub mappings: Vec<Mapping>,
    pub execs: Vec<Exec>,
    pub objects: Vec<ObjectRef>,
    pub lost: u64,
    pub throttled: u64,
    pub command: Vec<String>,
    pub cpu_vendor: Option<String>,
}

/// The instruction mix of a perf.data file.
pub fn mix_of_perf_data(path: &Path, options: &MixOptions) -> Result<MixReport, ProfileError> {
    let data = read_perf_data(path)?;
    let event = data.event.ok_or_else(|| ProfileError::BadProfile {
        path: path.to_owned(),
        what: format!(
            "event `{}`: mix reads cpu-clock, task-clock, cycles, instructions, or a \
             {{cycles,instructions}} or {{cache-misses,instructions}} group with :S",
            data.event_name
        ),
    })?;
    let source = SampleSource {
        event,
        event_name: data.event_name.clone(),
        precise_ip: data.precise_ip,
        frequency_hz: data.frequency_hz,
        samples: &data.samples,
        mappings: &data.mappings,
        execs: &data.execs,
        objects: &data.objects,
        lost: data.lost,
        throttled: data.throttled,
        core_cycles_per_ns: None,
        cpu_vendor: data.cpu_vendor.clone(),
    };
    let mut report = mix_of_samples(&source, options)?;
    report.command = data.command;
    Ok(report)
}

/// What a compressed perf.data file is told.
const COMPRESSED: &str = "compressed (`perf record -z`), which loopscope does not read: \
                          record again without -z";

/// Reads a perf.data file; damage anywhere is one error naming the file.
pub(crate) fn read_perf_data(path: &Path) -> Result<PerfData, ProfileError> {
    let bad = |what: String| ProfileError::BadProfile {
        path: path.to_owned(),
        what,
    };
    let io = |source| ProfileError::Io {
        path: path.to_owned(),
        action: "read",
        source,
    };
    loopscope_machine::refuse_pipe(path).map_err(io)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(bad(
            "not a regular file (perf.data is read from a file, by offsets)".into(),
        ));
    }
    check_perf_file(&file, meta.len()).map_err(bad)?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(BufReader::new(file))
        .map_err(|e| bad(format!("not a readable perf.data file: {e}")))?;
    // Its records are zstd frames, which this build does not decompress (nor does `perf
    // inject`, which copies them as they are).
    if perf_file.features().has_feature(Feature::COMPRESSED) {
        return Err(bad(COMPRESSED.into()));
    }
    let mut data = PerfData::default();
    let attributes = perf_file.event_attributes().to_vec();
    let Some(first) = attributes.first() else {
        return Err(bad(
            "no event attributes (an empty or damaged perf.data header)".into(),
        ));
    };
    data.event_name = first.name.clone().unwrap_or_else(|| "unnamed event".into());
    data.event = sampled_event(
        &first.attr.type_,
        first.attr.read_format,
        attributes.get(1).map(|a| &a.attr.type_),
    );
    data.precise_ip =
        ((first.attr.flags.bits() & constants::ATTR_FLAG_BITMASK_PRECISE_IP) >> 15) as u8;
    data.frequency_hz = match first.attr.sampling_policy {
        linux_perf_data::linux_perf_event_reader::SamplingPolicy::Frequency(f) => f,
        _ => 0,
    };
    let sample_format = first.attr.sample_format;
    let read_format = first.attr.read_format;
    let group_read = data.event.is_some_and(SampledEvent::reads_instructions);
    let build_ids = perf_file.build_ids().unwrap_or_default();
    let ids: HashMap<String, String> = build_ids
        .values()
        .map(|d| {
            let path = String::from_utf8_lossy(&d.path).into_owned();
            (
                path,
                d.build_id.iter().map(|b| format!("{b:02x}")).collect(),
            )
        })
        .collect();
    if let Ok(Some(cpuid)) = perf_file.cpu_id() {
        data.cpu_vendor = Some(cpuid.to_owned());
    }
    if let Ok(Some(cmdline)) = perf_file.cmdline() {
        data.command = cmdline.iter().map(|s| s.to_string()).collect();
    }
    let endian = perf_file.endian();
    let mut last_instructions: HashMap<(i32, u32), u64> = HashMap::new();
    let mut current: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut records = 0u64;
    loop {
        let record = match record_iter.next_record(&mut perf_file) {
            Ok(Some(record)) => record,
            Ok(None) => break,
            // A compressed record in a file whose header does not say it is compressed.
            Err(e) if e.to_string().contains("Compression support is not enabled") => {
                return Err(bad(COMPRESSED.into()));
            }
            Err(e) => {
                return Err(bad(format!(
                    "damaged or truncated after {records} records: {e}"
                )));
            }
        };
        records += 1;
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let time_ns = record.timestamp().unwrap_or(0);
        let raw_data = record.data;
        let parsed = record
            .parse()
            .map_err(|e| bad(format!("record {records} cannot be parsed: {e}")))?;
        match parsed {
            EventRecord::Sample(s) if attr_index == 0 => {
                let (Some(ip), Some(pid), Some(tid)) = (s.ip, s.pid, s.tid) else {
                    continue;
                };
                let instructions = if group_read {
                    group_instructions(raw_data, sample_format, read_format, endian).map(|value| {
                        let key = (tid, s.cpu.unwrap_or(0));
                        let before = last_instructions.insert(key, value).unwrap_or(0);
                        value.saturating_sub(before)
                    })
                } else {
                    None
                };
                data.samples.push(Sample {
                    pid: pid as u32,
                    tid: tid as u32,
                    time_ns,
                    stack: vec![ip],
                    truncated: true,
                    period: s.period.unwrap_or(0),
                    instructions,
                });
            }
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                map(
                    &mut data,
                    &mut current,
                    m.pid as u32,
                    m.address,
                    m.length,
                    m.page_offset,
                    path,
                );
            }
            EventRecord::Mmap2(m) if m.protection & libc::PROT_EXEC as u32 != 0 => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                map(
                    &mut data,
                    &mut current,
                    m.pid as u32,
                    m.address,
                    m.length,
                    m.page_offset,
                    path,
                );
            }
            EventRecord::Comm(c) if c.is_execve => {
                let pid = c.pid as u32;
                current.insert(pid, Vec::new());
                data.execs.push(Exec {
                    pid,
                    time_ns,
                    command: String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                    first_mapping: data.mappings.len(),
                });
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                let inherited = current.get(&(f.ppid as u32)).cloned().unwrap_or_default();
                let mut mine = Vec::with_capacity(inherited.len());
                for i in inherited {
                    let mut copy = data.mappings[i].clone();
                    copy.pid = f.pid as u32;
                    mine.push(data.mappings.len());
                    data.mappings.push(copy);
                }
                current.insert(f.pid as u32, mine);
            }
            EventRecord::Lost(l) => data.lost += l.count,
            EventRecord::Throttle(_) => data.throttled += 1,
            _ => {}
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for m in &data.mappings {
        if !seen.contains(&m.path.as_str()) {
            seen.push(&m.path);
        }
    }
    data.objects = seen
        .into_iter()
        .map(|path| ObjectRef {
            path: path.to_owned(),
            build_id: ids.get(path).cloned(),
            content_id: None,
        })
        .collect();
    Ok(data)
}

fn map(
    data: &mut PerfData,
    current: &mut HashMap<u32, Vec<usize>>,
    pid: u32,
    start: u64,
    len: u64,
    file_offset: u64,
    path: String,
) {
    current.entry(pid).or_default().push(data.mappings.len());
    data.mappings.push(Mapping {
        pid,
        start,
        end: start.saturating_add(len),
        file_offset,
        path,
    });
}

/// Which of our events a perf.data attribute is; a group leader with READ and GROUP counts as
/// a group with an instruction counter when the file's next attribute is `instructions`.
fn sampled_event(
    event: &PerfEventType,
    read_format: ReadFormat,
    next: Option<&PerfEventType>,
) -> Option<SampledEvent> {
    let next_is_instructions = matches!(
        next,
        Some(PerfEventType::Hardware(HardwareEventId::Instructions, _))
    );
    let group = read_format.contains(ReadFormat::GROUP) && next_is_instructions;
    match event {
        PerfEventType::Hardware(HardwareEventId::Instructions, _) => {
            Some(SampledEvent::Instructions)
        }
        PerfEventType::Hardware(HardwareEventId::CpuCycles, _) if group => {
            Some(SampledEvent::CyclesWithInstructions)
        }
        PerfEventType::Hardware(HardwareEventId::CpuCycles, _) => Some(SampledEvent::Cycles),
        PerfEventType::Hardware(HardwareEventId::CacheMisses, _) if group => {
            Some(SampledEvent::CacheMissesWithInstructions)
        }
        PerfEventType::Software(SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock) => {
            Some(SampledEvent::CpuClock)
        }
        _ => None,
    }
}

/// `PERF_FORMAT_LOST`, newer than the reader's `ReadFormat`.
const PERF_FORMAT_LOST: u64 = 1 << 4;

/// The second counter of a group read in a sample record's bytes: the fields before READ are
/// each one u64 (spec of `PERF_RECORD_SAMPLE`), then `nr`, the optional times, and `nr` entries
/// of the value with its optional id and lost count.
pub(crate) fn group_instructions(
    data: RawData,
    sample_format: SampleFormat,
    read_format: ReadFormat,
    endian: Endianness,
) -> Option<u64> {
    if !sample_format.contains(SampleFormat::READ) || !read_format.contains(ReadFormat::GROUP) {
        return None;
    }
    let bytes = data.as_slice();
    let word = |i: usize| -> Option<u64> {
        let b: [u8; 8] = bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?;
        Some(match endian {
            Endianness::LittleEndian => u64::from_le_bytes(b),
            Endianness::BigEndian => u64::from_be_bytes(b),
        })
    };
    let before = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ]
    .iter()
    .filter(|&&f| sample_format.contains(f))
    .count();
    let nr = word(before)?;
    if nr < 2 {
        return None;
    }
    let times = usize::from(read_format.contains(ReadFormat::TOTAL_TIME_ENABLED))
        + usize::from(read_format.contains(ReadFormat::TOTAL_TIME_RUNNING));
    let entry = 1
        + usize::from(read_format.contains(ReadFormat::ID))
        + usize::from(read_format.bits() & PERF_FORMAT_LOST != 0);
    word(before + 1 + times + entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_perf_data::linux_perf_event_reader::PmuTypeId;

    #[test]
    fn the_member_value_of_a_group_read_is_found_after_the_fixed_fields() {
        let words: [u64; 9] = [
            0x401000,
            (7 << 32) | 7,
            1_000,
            3,
            2_000_000,
            2,
            111,
            41,
            222,
        ];
        let mut bytes = Vec::new();
        for w in words {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(&42u64.to_le_bytes());
        let format = SampleFormat::IP
            | SampleFormat::TID
            | SampleFormat::TIME
            | SampleFormat::CPU
            | SampleFormat::PERIOD
            | SampleFormat::READ;
        let read = ReadFormat::GROUP | ReadFormat::ID;
        let got = group_instructions(
            RawData::Single(&bytes),
            format,
            read,
            Endianness::LittleEndian,
        );
        assert_eq!(got, Some(222));
        // A short record gives nothing rather than a wrong value.
        let cut = group_instructions(
            RawData::Single(&bytes[..60]),
            format,
            read,
            Endianness::LittleEndian,
        );
        assert_eq!(cut, None);
        // Without READ there is nothing to find.
        assert_eq!(
            group_instructions(
                RawData::Single(&bytes),
                format - SampleFormat::READ,
                read,
                Endianness::LittleEndian
            ),
            None
        );
    }

    #[test]
    fn events_are_recognised_with_their_groups() {
        let hw = |id| PerfEventType::Hardware(id, PmuTypeId(0));
        let instructions = hw(HardwareEventId::Instructions);
        let group = ReadFormat::GROUP | ReadFormat::ID;
        let cases = [
            (
                hw(HardwareEventId::Instructions),
                ReadFormat::empty(),
                None,
                Some(SampledEvent::Instructions),
            ),
            (
                hw(HardwareEventId::CpuCycles),
                group,
                Some(&instructions),
                Some(SampledEvent::CyclesWithInstructions),
            ),
            (
                hw(HardwareEventId::CpuCycles),
                ReadFormat::empty(),
                Some(&instructions),
                Some(SampledEvent::Cycles),
            ),
            (
                hw(HardwareEventId::CacheMisses),
                group,
                Some(&instructions),
                Some(SampledEvent::CacheMissesWithInstructions),
            ),
            (
                hw(HardwareEventId::CacheMisses),
                ReadFormat::empty(),
                None,
                None,
            ),
            (
                PerfEventType::Software(SoftwareCounterType::TaskClock),
                ReadFormat::empty(),
                None,
                Some(SampledEvent::CpuClock),
            ),
            (
                PerfEventType::Tracepoint(3),
                ReadFormat::empty(),
                None,
                None,
            ),
        ];
        for (event, read, next, expected) in cases {
            assert_eq!(sampled_event(&event, read, next), expected, "{event:?}");
        }
    }
}
