//! Reading an x86-64 ELF file: code sections, load segments, function symbols (demangled), PLT
//! stubs and `.eh_frame` function starts. Everything is copied out of the file once, so the
//! rest of the analysis works on plain values.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use iced_x86::{Code, Decoder, DecoderOptions};
use object::read::elf::{ElfFile64, ProgramHeader as _};
use object::{
    LittleEndian, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
    SectionKind,
};
use serde::{Deserialize, Serialize};

use crate::error::BinaryError;

/// The largest binary read (the file is held in memory while it is analysed).
pub const BINARY_CAP_BYTES: u64 = 4 << 30;

/// What kind of ELF object the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryKind {
    /// `ET_EXEC`: runs at its link addresses.
    Executable,
    /// `ET_DYN` with an interpreter: a position-independent executable.
    Pie,
    /// `ET_DYN` without an interpreter: a shared library.
    SharedLibrary,
    /// Anything else (relocatable objects, core files).
    Other,
}

impl BinaryKind {
    /// Whether run-time addresses differ from link addresses by a load bias.
    pub fn is_relocated(self) -> bool {
        matches!(self, BinaryKind::Pie | BinaryKind::SharedLibrary)
    }
}

/// One `PT_LOAD` segment, for translating run-time addresses (vaddr = offset - p_offset + p_vaddr).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSegment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_memsz`.
    pub mem_bytes: u64,
    /// `p_offset`.
    pub file_offset: u64,
    /// `p_filesz`.
    pub file_bytes: u64,
    /// `PF_X` is set.
    pub executable: bool,
}

/// A PLT section's address range (`.plt`, `.plt.sec`, `.plt.got`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PltRange {
    /// Section name.
    pub section: String,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
}

/// An executable section with its bytes' place in the file.
#[derive(Debug, Clone)]
pub(crate) struct CodeSection {
    pub name: String,
    pub address: u64,
    pub data_offset: usize,
    pub len: usize,
}

/// A function symbol (`STT_FUNC` or `.eh_frame`-derived).
#[derive(Debug, Clone)]
pub(crate) struct FunctionSymbol {
    pub raw_name: String,
    pub address: u64,
    pub size: u64,
}

/// The parts of an ELF file the analysis needs.
#[derive(Debug)]
pub struct Image {
    /// The file.
    pub path: PathBuf,
    data: Vec<u8>,
    /// Executable, PIE or shared library.
    pub kind: BinaryKind,
    /// The GNU build-id in hex, when the file has one.
    pub build_id: Option<String>,
    /// `e_entry`.
    pub entry: u64,
    /// The `PT_LOAD` segments.
    pub segments: Vec<LoadSegment>,
    /// PLT section ranges.
    pub plt: Vec<PltRange>,
    /// Local damage that was skipped (one line each).
    pub warnings: Vec<String>,
    pub(crate) code: Vec<CodeSection>,
    pub(crate) symbols: Vec<FunctionSymbol>,
    pub(crate) plt_names: HashMap<u64, String>,
    pub(crate) fde_ranges: Vec<(u64, u64)>,
}

impl Image {
    /// Reads and checks an ELF file.
    pub fn open(path: &Path) -> Result<Image, BinaryError> {
        let io = |source| BinaryError::Io {
            path: path.to_owned(),
            action: "read",
            source,
        };
        // The magic first, so that a device or a large file of another kind is not read whole.
        let mut magic = Vec::with_capacity(4);
        loopscope_machine::refuse_pipe(path).map_err(io)?;
        std::fs::File::open(path)
            .and_then(|file| file.take(4).read_to_end(&mut magic))
            .map_err(io)?;
        if magic.as_slice() != b"\x7fELF" {
            return Err(BinaryError::NotElf {
                path: path.to_owned(),
            });
        }
        let data =
            loopscope_machine::read_bounded(path, BINARY_CAP_BYTES, "binaries").map_err(io)?;
        Image::parse(path, data)
    }

    /// Parses bytes already in memory; `path` is only used in messages.
    pub fn parse(path: &Path, data: Vec<u8>) -> Result<Image, BinaryError> {
        check_header(path, &data)?;
        let malformed = |what: String| BinaryError::Malformed {
            path: path.to_owned(),
            what,
        };
        let file = ElfFile64::<LittleEndian>::parse(&*data)
            .map_err(|e| malformed(format!("bad ELF structure: {e}")))?;
        check_linked(path, file.elf_header().e_type.get(LittleEndian))?;
        let mut warnings = Vec::new();
        let (segments, has_interp) = load_segments(&file);
        let kind = match file.elf_header().e_type.get(LittleEndian) {
            object::elf::ET_EXEC => BinaryKind::Executable,
            object::elf::ET_DYN if has_interp => BinaryKind::Pie,
            object::elf::ET_DYN => BinaryKind::SharedLibrary,
            _ => BinaryKind::Other,
        };
        let build_id = match file.build_id() {
            Ok(id) => id.map(hex),
            Err(e) => {
                warnings.push(format!("build-id note unreadable: {e}"));
                None
            }
        };
        let code = code_sections(&file, data.len(), &mut warnings);
        let plt = code
            .iter()
            .filter(|s| s.name.starts_with(".plt"))
            .map(|s| PltRange {
                section: s.name.clone(),
                start: s.address,
                end: s.address + s.len as u64,
            })
            .collect();
        let symbols = function_symbols(&file);
        let got_names = got_names(&file);
        let fde_ranges = fde_ranges(&file, &mut warnings);
        let entry = file.entry();
        drop(file);
        let mut image = Image {
            path: path.to_owned(),
            data,
            kind,
            build_id,
            entry,
            segments,
            plt,
            warnings,
            code,
            symbols,
            plt_names: HashMap::new(),
            fde_ranges,
        };
        image.plt_names = image.name_plt_stubs(&got_names);
        Ok(image)
    }

    /// The code bytes from `address` to the end of its section.
    pub(crate) fn bytes_from(&self, address: u64) -> Option<&[u8]> {
        let section = self.section_of(address)?;
        let start = section.data_offset + (address - section.address) as usize;
        self.data.get(start..section.data_offset + section.len)
    }

    /// The executable section holding `address`.
    pub(crate) fn section_of(&self, address: u64) -> Option<&CodeSection> {
        self.code
            .iter()
            .find(|s| address >= s.address && address - s.address < s.len as u64)
    }

    /// The name of the function a PLT stub at `address` calls (`printf@plt`'s `printf`).
    pub fn plt_name(&self, address: u64) -> Option<&str> {
        self.plt_names.get(&address).map(String::as_str)
    }

    /// Whether `address` is inside a PLT section.
    pub fn is_plt(&self, address: u64) -> bool {
        self.plt.iter().any(|p| (p.start..p.end).contains(&address))
    }

    /// Reads a little-endian value of `N` bytes at a virtual address in any loaded segment.
    pub(crate) fn read_at<const N: usize>(&self, address: u64) -> Option<[u8; N]> {
        let end = address.checked_add(N as u64)?;
        let seg = self
            .segments
            .iter()
            .find(|s| address >= s.vaddr && end <= s.vaddr.saturating_add(s.file_bytes))?;
        let offset = usize::try_from(seg.file_offset + (address - seg.vaddr)).ok()?;
        self.data
            .get(offset..offset.checked_add(N)?)?
            .try_into()
            .ok()
    }

    /// Names PLT stubs by the GOT slot their `jmp [rip+slot]` reads.
    fn name_plt_stubs(&self, got_names: &HashMap<u64, String>) -> HashMap<u64, String> {
        let mut names = HashMap::new();
        for section in self.code.iter().filter(|s| s.name.starts_with(".plt")) {
            let Some(bytes) = self.bytes_from(section.address) else {
                continue;
            };
            let mut decoder = Decoder::with_ip(64, bytes, section.address, DecoderOptions::NONE);
            let mut previous: Option<(u64, Code)> = None;
            for instr in &mut decoder {
                if instr.code().is_jmp_near_indirect() && instr.is_ip_rel_memory_operand() {
                    if let Some(name) = got_names.get(&instr.ip_rel_memory_address()) {
                        names.insert(instr.ip(), name.clone());
                        if let Some((ip, Code::Endbr64)) = previous {
                            names.insert(ip, name.clone());
                        }
                    }
                }
                previous = Some((instr.ip(), instr.code()));
            }
        }
        names
    }
}

fn check_header(path: &Path, data: &[u8]) -> Result<(), BinaryError> {
    if data.len() < 4 || &data[..4] != b"\x7fELF" {
        return Err(BinaryError::NotElf {
            path: path.to_owned(),
        });
    }
    let unsupported = |what: &str| BinaryError::Unsupported {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    match data.get(4) {
        Some(2) => {}
        Some(1) => return Err(unsupported("a 32-bit ELF (ELFCLASS32)")),
        _ => {
            return Err(BinaryError::Malformed {
                path: path.to_owned(),
                what: "offset 4: bad ELF class byte (expected 2, ELFCLASS64)".into(),
            });
        }
    }
    if data.get(5) != Some(&1) {
        return Err(unsupported("a big-endian ELF"));
    }
    let machine = data.get(18..20).map(|b| u16::from_le_bytes([b[0], b[1]]));
    match machine {
        Some(object::elf::EM_X86_64) => Ok(()),
        Some(other) => Err(unsupported(&format!(
            "an ELF for machine {other} (e_machine)"
        ))),
        None => Err(BinaryError::Malformed {
            path: path.to_owned(),
            what: "offset 18: file ends inside the ELF header".into(),
        }),
    }
}

/// Refuses what is not an executable or a shared object: a relocatable object has every
/// section at address 0 and calls the linker has yet to fill in, so its functions and loops
/// would get wrong addresses and targets.
fn check_linked(path: &Path, e_type: u16) -> Result<(), BinaryError> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let what = match e_type {
        object::elf::ET_EXEC | object::elf::ET_DYN => return Ok(()),
        object::elf::ET_REL => format!(
            "a relocatable object (ET_REL): link it first (`cc {name} -o program`, or `-shared` \
             for a library), then analyse the result"
        ),
        object::elf::ET_CORE => {
            "a core file (ET_CORE): analyse the executable that dumped it".to_owned()
        }
        other => {
            format!("an ELF of type {other} (e_type): expected an executable or a shared library")
        }
    };
    Err(BinaryError::NotLinked {
        path: path.to_owned(),
        what,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn load_segments(file: &ElfFile64<LittleEndian>) -> (Vec<LoadSegment>, bool) {
    let e = LittleEndian;
    let mut interp = false;
    let mut segments = Vec::new();
    for ph in file.elf_program_headers() {
        match ph.p_type(e) {
            object::elf::PT_LOAD => segments.push(LoadSegment {
                vaddr: ph.p_vaddr(e),
                mem_bytes: ph.p_memsz(e),
                file_offset: ph.p_offset(e),
                file_bytes: ph.p_filesz(e),
                executable: ph.p_flags(e) & object::elf::PF_X != 0,
            }),
            object::elf::PT_INTERP => interp = true,
            _ => {}
        }
    }
    (segments, interp)
}

/// Whether a 64-bit little-endian ELF executable or shared object names a program interpreter
/// (`PT_INTERP`, the dynamic loader that would honour `LD_PRELOAD`): `Some(false)` for a
/// statically linked executable. `data` may be the whole file or only its first bytes, as long
/// as they hold the program headers.
///
/// `None` when `data` is not such an ELF file (a script, a relocatable object, a 32-bit or
/// big-endian file) or its program headers do not lie within `data`; [`Image::open`] says what
/// is wrong with such a file.
///
/// ```
/// let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
/// assert_eq!(loopscope_binary::has_interpreter(&me), Some(true));
/// assert_eq!(loopscope_binary::has_interpreter(b"#!/bin/sh\n"), None);
/// ```
pub fn has_interpreter(data: &[u8]) -> Option<bool> {
    use object::read::elf::FileHeader as _;
    let header = object::elf::FileHeader64::<LittleEndian>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let e_type = header.e_type(endian);
    if e_type != object::elf::ET_EXEC && e_type != object::elf::ET_DYN {
        return None;
    }
    let headers = header.program_headers(endian, data).ok()?;
    Some(
        headers
            .iter()
            .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP),
    )
}

fn code_sections(
    file: &ElfFile64<LittleEndian>,
    file_len: usize,
    warnings: &mut Vec<String>,
) -> Vec<CodeSection> {
    let mut code = Vec::new();
    for section in file.sections() {
        if section.kind() != SectionKind::Text {
            continue;
        }
        let name = section.name().unwrap_or("?").to_owned();
        let Some((offset, size)) = section.file_range() else {
            continue;
        };
        let end = offset.checked_add(size);
        let inside = end.is_some_and(|end| end <= file_len as u64);
        if !inside || section.address().checked_add(size).is_none() {
            warnings.push(format!(
                "section {name} at offset {offset:#x} (+{size:#x}) lies outside the file; skipped"
            ));
            continue;
        }
        code.push(CodeSection {
            name,
            address: section.address(),
            data_offset: offset as usize,
            len: size as usize,
        });
    }
    code
}

fn function_symbols(file: &ElfFile64<LittleEndian>) -> Vec<FunctionSymbol> {
    let mut symbols: Vec<FunctionSymbol> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            Some(FunctionSymbol {
                raw_name: s.name().ok()?.to_owned(),
                address: s.address(),
                size: s.size(),
            })
        })
        .collect();
    symbols.sort_by(|a, b| (a.address, &a.raw_name).cmp(&(b.address, &b.raw_name)));
    symbols.dedup_by(|b, a| a.address == b.address && a.raw_name == b.raw_name);
    symbols
}

/// GOT slot address → imported symbol name, from the dynamic relocations.
fn got_names(file: &ElfFile64<LittleEndian>) -> HashMap<u64, String> {
    let mut names = HashMap::new();
    let (Some(relocations), Some(table)) =
        (file.dynamic_relocations(), file.dynamic_symbol_table())
    else {
        return names;
    };
    for (offset, relocation) in relocations {
        if let RelocationTarget::Symbol(index) = relocation.target() {
            if let Ok(name) = table.symbol_by_index(index).and_then(|s| s.name()) {
                names.insert(offset, name.to_owned());
            }
        }
    }
    names
}

/// `[start, end)` of every FDE in `.eh_frame`; a damaged entry ends the walk with a warning.
fn fde_ranges(file: &ElfFile64<LittleEndian>, warnings: &mut Vec<String>) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        warnings.push(".eh_frame lies outside the file; skipped".into());
        return Vec::new();
    };
    let eh_frame = gimli::EhFrame::new(data, gimli::LittleEndian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut ranges = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    loop {
        match entries.next() {
            Ok(None) => break,
            Ok(Some(gimli::CieOrFde::Cie(_))) => {}
            Ok(Some(gimli::CieOrFde::Fde(partial))) => {
                match partial.parse(gimli::EhFrame::cie_from_offset) {
                    Ok(fde) if fde.len() > 0 => {
                        let start = fde.initial_address();
                        ranges.push((start, start.saturating_add(fde.len())));
                    }
                    Ok(_) => {}
                    Err(e) => warnings.push(format!(".eh_frame: bad FDE skipped: {e}")),
                }
            }
            Err(e) => {
                warnings.push(format!(".eh_frame: walk stopped: {e}"));
                break;
            }
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_linked_64_bit_little_endian_elf_has_an_interpreter_or_not() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(has_interpreter(&me), Some(true));
        assert_eq!(has_interpreter(&me[..64]), None, "program headers cut off");
        assert_eq!(has_interpreter(&me[..40]), None, "ELF header cut off");
        let mut relocatable = me.clone();
        relocatable[16..18].copy_from_slice(&object::elf::ET_REL.to_le_bytes());
        assert_eq!(has_interpreter(&relocatable), None);
        let mut big_endian = me.clone();
        big_endian[5] = object::elf::ELFDATA2MSB;
        assert_eq!(has_interpreter(&big_endian), None);
        assert_eq!(has_interpreter(b"#!/bin/sh\nexec ./app\n"), None);
        assert_eq!(has_interpreter(&[]), None);
    }

    proptest::proptest! {
        /// A real header damaged here and there, and cut anywhere, so that the program header
        /// table is reached with hostile offsets and counts.
        #[test]
        fn a_damaged_header_is_read_for_an_interpreter_without_panicking(
            damage in proptest::collection::vec((0..512usize, proptest::prelude::any::<u8>()), 0..12),
            kept_bytes in 0..4096usize,
        ) {
            let mut head = Vec::new();
            std::fs::File::open(std::env::current_exe().unwrap())
                .and_then(|file| file.take(kept_bytes as u64).read_to_end(&mut head))
                .unwrap();
            for (at, byte) in damage {
                if let Some(b) = head.get_mut(at) {
                    *b = byte;
                }
            }
            let _ = has_interpreter(&head);
        }
    }

    #[test]
    fn rejects_non_elf_and_32_bit() {
        let p = Path::new("x");
        assert!(matches!(
            Image::parse(p, b"#!/bin/sh\n".to_vec()),
            Err(BinaryError::NotElf { .. })
        ));
        let mut elf32 = b"\x7fELF\x01\x01\x01".to_vec();
        elf32.resize(64, 0);
        let err = Image::parse(p, elf32).unwrap_err();
        assert!(err.to_string().contains("32-bit"), "{err}");
        let mut arm = b"\x7fELF\x02\x01\x01".to_vec();
        arm.resize(64, 0);
        arm[18] = 183;
        assert!(
            Image::parse(p, arm)
                .unwrap_err()
                .to_string()
                .contains("machine 183")
        );
        let short = b"\x7fELF\x02\x01".to_vec();
        assert!(Image::parse(p, short).unwrap_err().is_bad_input());
    }
}
