//! C++ exception landing pads: addresses the unwinder jumps to that no branch of the program
//! names, so the control-flow graph does not know them. They are read from each function's
//! language-specific data area (`.gcc_except_table`, found through its `.eh_frame` FDE) and
//! handed to the plan as branch targets. An FDE whose table cannot be read makes its whole
//! function "unsure" (like a function with unknown jump targets): nothing is guessed.

use gimli::UnwindSection;
use object::{Object, ObjectSection};

/// What the exception tables say about the code.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Landings {
    /// Landing pad addresses.
    pub pads: Vec<u64>,
    /// Code ranges `[start, end)` whose tables could not be read.
    pub unsure: Vec<(u64, u64)>,
}

/// The landing pads of the ELF file `data`.
pub fn landing_pads(data: &[u8]) -> Landings {
    let mut out = Landings::default();
    let Ok(file) = object::File::parse(data) else {
        return out;
    };
    let (Some(eh), Some(table)) = (
        file.section_by_name(".eh_frame"),
        file.section_by_name(".gcc_except_table"),
    ) else {
        return out;
    };
    let (Ok(eh_data), Ok(table_data)) = (eh.data(), table.data()) else {
        return out;
    };
    let table_address = table.address();
    let eh_frame = gimli::EhFrame::new(eh_data, gimli::LittleEndian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(eh.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut entries = eh_frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) else {
            continue;
        };
        let start = fde.initial_address();
        let range = (start, start.saturating_add(fde.len()));
        let Some(lsda) = fde.lsda() else {
            continue;
        };
        let pads = match lsda {
            gimli::Pointer::Direct(address) => address
                .checked_sub(table_address)
                .and_then(|offset| table_data.get(usize::try_from(offset).ok()?..))
                .and_then(|bytes| call_site_pads(bytes, start)),
            gimli::Pointer::Indirect(_) => None,
        };
        match pads {
            Some(pads) => out.pads.extend(pads),
            None => out.unsure.push(range),
        }
    }
    out.pads.sort_unstable();
    out.pads.dedup();
    out
}

/// The landing pads of one LSDA (`bytes` from its start); `function` is the default base.
fn call_site_pads(bytes: &[u8], function: u64) -> Option<Vec<u64>> {
    let mut r = Reader { bytes, at: 0 };
    let lp_encoding = r.u8()?;
    let base = if lp_encoding == OMIT {
        function
    } else {
        // Only absolute encodings can be read without knowing where the bytes are loaded.
        (lp_encoding & 0x70 == 0).then_some(())?;
        r.encoded(lp_encoding)?
    };
    let type_encoding = r.u8()?;
    if type_encoding != OMIT {
        r.uleb()?;
    }
    let site_encoding = r.u8()?;
    let table_bytes = usize::try_from(r.uleb()?).ok()?;
    let end = r.at.checked_add(table_bytes)?;
    let mut pads = Vec::new();
    while r.at < end {
        let _start = r.encoded(site_encoding)?;
        let _length = r.encoded(site_encoding)?;
        let pad = r.encoded(site_encoding)?;
        r.uleb()?;
        if pad != 0 {
            pads.push(base.checked_add(pad)?);
        }
    }
    (r.at == end).then_some(pads)
}

const OMIT: u8 = 0xff;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn uleb(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn sleb(&mut self) -> Option<u64> {
        let mut value = 0i64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift >= 64 {
                return None;
            }
            value |= i64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Some(value as u64);
            }
        }
    }

    /// A value in a DWARF EH encoding's format (its application part, `& 0x70`, is the
    /// caller's business: call-site fields are plain offsets).
    fn encoded(&mut self, encoding: u8) -> Option<u64> {
        let fixed = |r: &mut Self, n: usize, signed: bool| {
            let b = r.take(n)?;
            let mut le = [0u8; 8];
            le[..n].copy_from_slice(b);
            let raw = u64::from_le_bytes(le);
            Some(if signed && n < 8 && b[n - 1] & 0x80 != 0 {
                raw | (!0u64 << (n * 8))
            } else {
                raw
            })
        };
        match encoding & 0x0f {
            0x00 => fixed(self, 8, false),
            0x01 => self.uleb(),
            0x02 => fixed(self, 2, false),
            0x03 => fixed(self, 4, false),
            0x04 => fixed(self, 8, false),
            0x09 => self.sleb(),
            0x0a => fixed(self, 2, true),
            0x0b => fixed(self, 4, true),
            0x0c => fixed(self, 8, true),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn call_sites_give_pads_relative_to_the_function() {
        // lpstart omitted, no type table, call sites in uleb128: two sites, one with a pad.
        let lsda = [
            0xff, 0xff, 0x01, 8, // header; 8 bytes of call sites
            0x04, 0x05, 0x10, 0x00, // [4, +5) lands at +0x10, no action
            0x0a, 0x05, 0x00, 0x00, // [10, +5) no landing pad
        ];
        assert_eq!(call_site_pads(&lsda, 0x1000), Some(vec![0x1010]));
        assert_eq!(call_site_pads(&lsda[..7], 0x1000), None, "truncated");
    }

    #[test]
    fn a_cpp_program_has_landing_pads_inside_its_functions() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("throw.cc");
        std::fs::write(
            &source,
            "#include <stdexcept>\n#include <string>\n\
             __attribute__((noinline)) int f(int x) { if (x > 2) throw std::runtime_error(\"x\"); return x; }\n\
             int main(int argc, char**) { std::string s(\"abc\"); try { return f(argc) + (int)s.size(); } \
             catch (const std::exception &) { return 9; } }\n",
        )
        .unwrap();
        let binary = dir.path().join("throw");
        let built = std::process::Command::new("c++")
            .args(["-O1", "-o"])
            .arg(&binary)
            .arg(&source)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            eprintln!("skipped: no C++ compiler");
            return;
        }
        let data = std::fs::read(&binary).unwrap();
        let found = landing_pads(&data);
        assert!(!found.pads.is_empty(), "{found:?}");
        assert!(found.unsure.is_empty(), "{found:?}");
        let image = loopscope_binary::Image::open(&binary).unwrap();
        let program = loopscope_binary::Program::analyze(&image, &Default::default());
        let main = program.function("main").unwrap();
        assert!(
            found
                .pads
                .iter()
                .any(|&p| main.ranges.iter().any(|r| (r[0]..r[1]).contains(&p))),
            "a pad in main: {found:?}"
        );
    }

    proptest! {
        #[test]
        fn damaged_tables_give_none_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = call_site_pads(&bytes, 0x1000);
            let _ = landing_pads(&bytes);
        }
    }
}
