//! The sizes a perf.data file declares, checked against the file before `linux-perf-data`
//! reads it. That reader allocates what a header, a feature section or a count inside one says
//! (`vec![0; size]`, `Vec::with_capacity(nr)`), so one flipped byte could ask for exabytes and
//! abort the process. Here every section must lie inside the file, and the counts of the
//! feature sections the reader parses (event descriptions, the command line) and the sizes of
//! AUX trace records must fit the bytes that hold them; then no allocation exceeds the file's
//! size, itself capped at [`PERF_DATA_CAP_BYTES`].

use std::fs::File;
use std::os::unix::fs::FileExt;

/// The largest perf.data file `mix` reads: the samples it keeps take about twice the file's
/// size in memory.
pub const PERF_DATA_CAP_BYTES: u64 = 2 << 30;

/// Bytes of `perf_file_header`: magic, size, attr_size, three sections, the feature bitmap.
const HEADER_BYTES: u64 = 104;
/// Feature bits of the sections parsed whole: the command line and the event descriptions.
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;
/// Simpleperf's meta information: with it (and no event descriptions or event types) the
/// reader takes the ids of each attribute from the attribute section.
const FEATURE_SIMPLEPERF_META_INFO: usize = 129;
/// `PERF_ATTR_SIZE_VER0`, the smallest `perf_event_attr`; the reader divides by the size.
const ATTR_BYTES_MIN: u64 = 64;
/// A generous bound on `perf_event_attr` (128 bytes in Linux 6) plus its id section.
const ATTR_BYTES_MAX: u64 = 4096;
/// Bytes of a `perf_file_section`: offset and size.
const SECTION_BYTES: u64 = 16;
/// `PERF_RECORD_AUXTRACE`, whose body is followed by as many bytes as it says.
const RECORD_AUXTRACE: u32 = 71;

/// Reads numbers of the file's byte order at absolute offsets, every read inside `len`.
struct Bytes<'f> {
    file: &'f File,
    len: u64,
    big_endian: bool,
}

impl Bytes<'_> {
    fn array<const N: usize>(&self, at: u64) -> Result<[u8; N], String> {
        let end = at.checked_add(N as u64).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(format!(
                "a field at byte {at} lies past the end of the file"
            ));
        }
        let mut b = [0u8; N];
        self.file
            .read_exact_at(&mut b, at)
            .map_err(|e| format!("cannot read byte {at}: {e}"))?;
        Ok(b)
    }

    fn u64(&self, at: u64) -> Result<u64, String> {
        let b = self.array::<8>(at)?;
        Ok(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    fn u32(&self, at: u64) -> Result<u32, String> {
        let b = self.array::<4>(at)?;
        Ok(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    fn u16(&self, at: u64) -> Result<u16, String> {
        let b = self.array::<2>(at)?;
        Ok(if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }

    /// A section `{offset, size}` stored at `at`, checked to lie inside the file.
    fn section(&self, at: u64, what: &str) -> Result<(u64, u64), String> {
        let (offset, size) = (self.u64(at)?, self.u64(at + 8)?);
        match offset.checked_add(size) {
            Some(end) if end <= self.len => Ok((offset, size)),
            _ => Err(format!(
                "the {what} section ({size} bytes at byte {offset}) lies outside the file's {} bytes",
                self.len
            )),
        }
    }
}

/// Checks the sizes `file` (of `len` bytes) declares; `Err` says which one does not fit.
pub(crate) fn check_perf_file(file: &File, len: u64) -> Result<(), String> {
    if len > PERF_DATA_CAP_BYTES {
        return Err(format!(
            "{len} bytes, larger than the {} GiB cap on perf.data files (see docs/limits.md)",
            PERF_DATA_CAP_BYTES >> 30
        ));
    }
    let mut bytes = Bytes {
        file,
        len,
        big_endian: false,
    };
    match &bytes
        .array::<8>(0)
        .map_err(|_| "shorter than a perf.data header".to_owned())?
    {
        b"PERFILE2" => {}
        b"2ELIFREP" => bytes.big_endian = true,
        _ => return Ok(()), // Not perf.data at all: the reader says so.
    }
    if len < HEADER_BYTES {
        return Err("shorter than a perf.data header".into());
    }
    let attr_size = bytes.u64(16)?;
    if !(ATTR_BYTES_MIN..=ATTR_BYTES_MAX).contains(&attr_size) {
        return Err(format!(
            "the header says attributes of {attr_size} bytes, expected {ATTR_BYTES_MIN} to {ATTR_BYTES_MAX}"
        ));
    }
    let attributes = bytes.section(24, "attributes")?;
    let (data_offset, data_size) = bytes.section(40, "data")?;
    let event_types = bytes.section(56, "event types")?;
    let features = bytes.array::<32>(72)?;
    let word_of = |bit: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&features[bit / 64 * 8..bit / 64 * 8 + 8]);
        if bytes.big_endian {
            u64::from_be_bytes(word)
        } else {
            u64::from_le_bytes(word)
        }
    };
    let has = |bit: usize| word_of(bit) >> (bit % 64) & 1 == 1;
    let mut entry = data_offset + data_size;
    for bit in (0..256).filter(|&bit| has(bit)) {
        let (offset, size) = bytes.section(entry, &format!("feature {bit}"))?;
        match bit {
            FEATURE_EVENT_DESC => check_event_desc(&bytes, offset, size)?,
            FEATURE_CMDLINE => check_string_list(&bytes, offset, size)?,
            _ => {}
        }
        entry += SECTION_BYTES;
    }
    // Without event descriptions the reader follows each attribute's own id section.
    if !has(FEATURE_EVENT_DESC) {
        if event_types.1 != 0 {
            check_id_sections(&bytes, event_types, attr_size + SECTION_BYTES, attr_size)?;
        } else if has(FEATURE_SIMPLEPERF_META_INFO) {
            check_id_sections(&bytes, attributes, attr_size, attr_size - SECTION_BYTES)?;
        }
    }
    check_records(&bytes, data_offset, data_size)
}

/// Checks the id section `{offset, size}` found `ids_at` bytes into each `entry_bytes` entry
/// of `section`, as the reader reads them.
fn check_id_sections(
    bytes: &Bytes<'_>,
    (offset, size): (u64, u64),
    entry_bytes: u64,
    ids_at: u64,
) -> Result<(), String> {
    for index in 0..size / entry_bytes {
        let at = offset + index * entry_bytes + ids_at;
        bytes.section(at, &format!("event {index}'s id"))?;
    }
    Ok(())
}

/// Walks the event descriptions: `nr`, `attr_size`, then per event the attribute, `nr_ids`,
/// a string and the ids, each inside the section.
fn check_event_desc(bytes: &Bytes<'_>, offset: u64, size: u64) -> Result<(), String> {
    let end = offset + size;
    let outside = || "the event descriptions run past their section".to_owned();
    let nr = bytes.u32(offset)?;
    let attr_size = u64::from(bytes.u32(offset + 4)?);
    let mut at = offset + 8;
    for _ in 0..nr {
        at = at
            .checked_add(attr_size)
            .filter(|&a| a + 8 <= end)
            .ok_or_else(outside)?;
        let ids = u64::from(bytes.u32(at)?);
        let text = u64::from(bytes.u32(at + 4)?);
        at = (at + 8)
            .checked_add(text)
            .and_then(|a| a.checked_add(ids * 8))
            .filter(|&a| a <= end)
            .ok_or_else(outside)?;
    }
    Ok(())
}

/// A count of strings, each at least its 4-byte length, inside the section.
fn check_string_list(bytes: &Bytes<'_>, offset: u64, size: u64) -> Result<(), String> {
    let count = u64::from(bytes.u32(offset)?);
    if count.saturating_mul(4) > size.saturating_sub(4) {
        return Err(format!(
            "the command line says {count} strings in a section of {size} bytes"
        ));
    }
    Ok(())
}

/// Walks the record headers of the data section: each record inside it, and an AUX trace
/// record's trailing bytes too.
fn check_records(bytes: &Bytes<'_>, offset: u64, size: u64) -> Result<(), String> {
    let end = offset + size;
    let mut at = offset;
    while at + 8 <= end {
        let kind = bytes.u32(at)?;
        let record = u64::from(bytes.u16(at + 6)?);
        if record < 8 {
            return Ok(()); // The reader refuses it with its own words.
        }
        let mut next = at + record;
        if kind == RECORD_AUXTRACE && record >= 16 {
            let aux = bytes.u64(at + 8)?;
            next = next.checked_add(aux).filter(|&n| n <= end).ok_or_else(|| {
                format!("an AUX trace record at byte {at} says {aux} bytes follow, past the data")
            })?;
        }
        at = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    /// A little-endian header with one feature (the command line) whose section is given.
    fn header(cmdline: (u64, u64), strings: u32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(HEADER_BYTES as usize + 16 + 8)];
        b[..8].copy_from_slice(b"PERFILE2");
        b[8..16].copy_from_slice(&HEADER_BYTES.to_le_bytes());
        b[16..24].copy_from_slice(&136u64.to_le_bytes());
        // Empty attribute, data and event-type sections at the header's end.
        for at in [24, 40, 56] {
            b[at..at + 8].copy_from_slice(&HEADER_BYTES.to_le_bytes());
        }
        b[72 + 1] = 1 << (FEATURE_CMDLINE - 8);
        let entry = HEADER_BYTES as usize;
        b[entry..entry + 8].copy_from_slice(&cmdline.0.to_le_bytes());
        b[entry + 8..entry + 16].copy_from_slice(&cmdline.1.to_le_bytes());
        let at = cmdline.0 as usize;
        if at + 4 <= b.len() {
            b[at..at + 4].copy_from_slice(&strings.to_le_bytes());
        }
        b
    }

    fn check(bytes: &[u8]) -> Result<(), String> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        check_perf_file(&file, bytes.len() as u64)
    }

    #[test]
    fn sections_and_counts_must_fit_the_file() {
        let good = header((120, 8), 1, 128);
        assert_eq!(check(&good), Ok(()));
        let huge = header((120, u64::MAX - 64), 1, 128);
        assert!(check(&huge).unwrap_err().contains("feature 11"));
        let many = header((120, 8), u32::MAX, 128);
        assert!(check(&many).unwrap_err().contains("4294967295 strings"));
        assert!(check(b"PERFILE2\0\0").is_err());
        // Not perf.data: left to the reader's own message.
        assert_eq!(check(b"hello, this is no perf.data"), Ok(()));
    }

    /// A little-endian header of `attr_size` with one event-types entry whose id section is
    /// `ids`, and the feature bits `features` (no feature sections follow).
    fn event_types_file(attr_size: u64, ids: (u64, u64), features: u64) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES as usize];
        b[..8].copy_from_slice(b"PERFILE2");
        b[8..16].copy_from_slice(&HEADER_BYTES.to_le_bytes());
        b[16..24].copy_from_slice(&attr_size.to_le_bytes());
        let entry_bytes = 64 + SECTION_BYTES;
        for (at, size) in [(24, 0), (40, 0), (56, entry_bytes)] {
            b[at..at + 8].copy_from_slice(&HEADER_BYTES.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&size.to_le_bytes());
        }
        b[72..80].copy_from_slice(&features.to_le_bytes());
        let mut attr = [0u8; 64];
        attr[4..8].copy_from_slice(&64u32.to_le_bytes());
        b.extend_from_slice(&attr);
        b.extend_from_slice(&ids.0.to_le_bytes());
        b.extend_from_slice(&ids.1.to_le_bytes());
        b
    }

    #[test]
    fn the_attribute_size_must_be_one_the_reader_can_step_by() {
        // Zero made the reader divide by zero; 2^64 - 16 wrapped its entry size to zero.
        for attr_size in [0, 2, 63, 4097, u64::MAX - 15, u64::MAX] {
            let mut file = event_types_file(attr_size, (0, 0), 0);
            file.resize(120, 0);
            let err = check(&file).unwrap_err();
            assert!(
                err.contains(&format!("attributes of {attr_size} bytes")),
                "{err}"
            );
        }
        assert_eq!(check(&event_types_file(64, (0, 0), 0)), Ok(()));
    }

    #[test]
    fn each_event_types_id_section_must_lie_inside_the_file() {
        // The reader reserved size / 8 ids for an id section of 2^63 bytes.
        let err = check(&event_types_file(64, (0, 1 << 63), 0)).unwrap_err();
        assert!(err.contains("event 0's id section"), "{err}");
        let len = event_types_file(64, (0, 0), 0).len() as u64;
        assert_eq!(check(&event_types_file(64, (0, len), 0)), Ok(()));
        assert!(check(&event_types_file(64, (8, len), 0)).is_err());
    }

    /// Runs the real reader on `bytes`; it may refuse them but never panics.
    fn read(bytes: &[u8]) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.data");
        std::fs::write(&path, bytes).unwrap();
        super::super::perfdata::read_perf_data(&path)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_reader_refuses_the_bad_sizes_with_the_checks_words() {
        let err = read(&event_types_file(0, (0, 0), 0)).unwrap_err();
        assert!(err.contains("attributes of 0 bytes"), "{err}");
        let err = read(&event_types_file(64, (0, 1 << 63), 0)).unwrap_err();
        assert!(err.contains("event 0's id section"), "{err}");
    }

    /// Header fields worth trying: zero, small, the sizes the reader steps by, and ones that
    /// wrap when added to.
    fn field() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            0u64..300,
            Just(64),
            Just(HEADER_BYTES),
            Just(u64::MAX),
            Just(u64::MAX - 15),
            Just(1 << 63),
            any::<u64>(),
        ]
    }

    proptest! {
        #[test]
        fn the_reader_survives_any_header_fields(
            attr_size in field(),
            ids in (field(), field()),
            sections in proptest::collection::vec((0usize..5, field()), 0..4),
            features in prop_oneof![Just(0u64), Just(1 << FEATURE_EVENT_DESC), any::<u64>()],
        ) {
            let mut bytes = event_types_file(attr_size, ids, features);
            for (slot, value) in sections {
                let at = 24 + slot * 8;
                bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
            let _ = read(&bytes);
        }

        #[test]
        fn any_bytes_after_the_magic_are_checked_without_panicking(
            tail in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            let mut bytes = b"PERFILE2".to_vec();
            bytes.extend_from_slice(&tail);
            let _ = check(&bytes);
        }
    }
}
