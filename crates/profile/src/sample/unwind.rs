//! DWARF CFI unwinding of copied user stacks with framehop: the unwind sections of each mapped
//! object are read once, then every process gets framehop modules placed where it mapped them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder as _};
use object::{Object, ObjectSection, ObjectSegment, SegmentFlags};

use super::maps;
use super::records::{FileId, UserRegs};

/// A process's unwinder: its modules share the objects' section bytes.
pub(super) type Unwinder = UnwinderX86_64<Arc<[u8]>>;

/// framehop's cache of unwind rules by address, shared by every process.
pub(super) type RuleCache = CacheX86_64;

/// Deepest stack kept: deeper ones are cut and marked truncated.
pub(crate) const MAX_FRAMES: usize = 1024;

/// The path perf gives the vDSO's mapping.
const VDSO_PATH: &str = "[vdso]";

/// One section of an object: where it is linked and its bytes.
#[derive(Debug, Clone)]
struct Section {
    svma: Range<u64>,
    data: Arc<[u8]>,
}

/// A loadable segment: file bytes `file_offset..+file_size` at link-time address `svma`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    svma: u64,
    file_offset: u64,
    file_size: u64,
    executable: bool,
}

/// What framehop needs of one object file, read once.
#[derive(Debug, Clone, Default)]
pub(super) struct ObjectUnwind {
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Arc<[u8]>>,
    segments: Vec<Segment>,
}

impl ObjectUnwind {
    /// Reads the unwind sections and program headers of an x86-64 ELF object.
    pub(super) fn parse<'data, R: object::ReadRef<'data>>(data: R) -> Option<ObjectUnwind> {
        let file = object::File::parse(data).ok()?;
        if file.format() != object::BinaryFormat::Elf
            || file.architecture() != object::Architecture::X86_64
        {
            return None;
        }
        let section = |name: &str| {
            let section = file.section_by_name(name)?;
            let data = section.data().ok()?;
            Some(Section {
                svma: section.address()..section.address() + section.size(),
                data: Arc::from(data),
            })
        };
        let segments = file
            .segments()
            .map(|segment| {
                let (file_offset, file_size) = segment.file_range();
                let executable = match segment.flags() {
                    SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                Segment {
                    svma: segment.address(),
                    file_offset,
                    file_size,
                    executable,
                }
            })
            .collect();
        Some(ObjectUnwind {
            text: section(".text").map(|s| s.svma),
            got: section(".got").map(|s| s.svma),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|s| s.data),
            segments,
        })
    }

    /// The load bias of the object mapped at `start` from file offset `file_offset`: what
    /// is added to a link-time address to get the run-time one.
    fn bias(&self, start: u64, file_offset: u64) -> Option<u64> {
        let holds = |segment: &&Segment| {
            let first_page = segment.file_offset & !0xfff;
            first_page <= file_offset
                && file_offset < segment.file_offset + segment.file_size.max(1)
        };
        let segment = self
            .segments
            .iter()
            .filter(holds)
            .max_by_key(|segment| segment.executable)?;
        // `start` holds file offset `file_offset`; link-time `svma` holds `segment.file_offset`.
        Some(
            start
                .wrapping_add(segment.file_offset)
                .wrapping_sub(file_offset)
                .wrapping_sub(segment.svma),
        )
    }

    /// A framehop module for the object mapped at `avma` from `file_offset`.
    fn module(&self, name: &str, avma: Range<u64>, file_offset: u64) -> Option<Module<Arc<[u8]>>> {
        let bias = self.bias(avma.start, file_offset)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|s| s.svma.clone()),
            eh_frame: self.eh_frame.as_ref().map(|s| s.data.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
            debug_frame: self.debug_frame.clone(),
            ..ExplicitModuleSectionInfo::default()
        };
        Some(Module::new(name.to_string(), avma, bias, info))
    }
}

/// Objects read so far, by file identity; `None` for files that could not be read.
#[derive(Debug, Default)]
pub(super) struct Objects {
    by_file: HashMap<FileId, Option<Arc<ObjectUnwind>>>,
}

impl Objects {
    /// The unwind data of `file`, read on first use.
    fn get(&mut self, file: &FileId) -> Option<Arc<ObjectUnwind>> {
        self.by_file
            .entry(file.clone())
            .or_insert_with(|| load(file).map(Arc::new))
            .clone()
    }

    /// A module for a mapping of `file`, when it is an object with unwind data.
    pub(super) fn module(
        &mut self,
        file: &FileId,
        avma: Range<u64>,
        file_offset: u64,
    ) -> Option<Module<Arc<[u8]>>> {
        self.get(file)?.module(&file.path, avma, file_offset)
    }
}

/// Reads `file` from disk (or our own vDSO for the target's), unless the file at that path
/// is no longer the one mapped: a rebuilt binary's unwind tables would mislead.
fn load(file: &FileId) -> Option<ObjectUnwind> {
    if file.path == VDSO_PATH {
        return ObjectUnwind::parse(&maps::own_vdso()?[..]);
    }
    if !file.path.starts_with('/') {
        return None;
    }
    let file_now = std::fs::File::open(&file.path).ok()?;
    let inode_now = std::os::unix::fs::MetadataExt::ino(&file_now.metadata().ok()?);
    if file.inode != 0 && inode_now != file.inode {
        return None;
    }
    let cache = object::ReadCache::new(file_now);
    ObjectUnwind::parse(&cache)
}

/// Unwinds one sample: `ip` first, then the return addresses found, outwards. The flag says
/// the walk stopped before the outermost frame.
pub(super) fn unwind(
    unwinder: &Unwinder,
    cache: &mut RuleCache,
    ip: u64,
    regs: Option<UserRegs>,
    stack: &[u8],
) -> (Vec<u64>, bool) {
    let Some(regs) = regs else {
        return (vec![ip], true);
    };
    let mut read_stack = |address: u64| {
        let offset = usize::try_from(address.checked_sub(regs.sp).ok_or(())?).map_err(|_| ())?;
        let bytes = stack
            .get(offset..offset.checked_add(8).ok_or(())?)
            .ok_or(())?;
        <[u8; 8]>::try_from(bytes)
            .map(u64::from_le_bytes)
            .map_err(|_| ())
    };
    let mut frames = unwinder.iter_frames(
        ip,
        UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
        cache,
        &mut read_stack,
    );
    let mut stack_out = Vec::new();
    loop {
        match frames.next() {
            Ok(Some(frame)) if stack_out.len() < MAX_FRAMES => stack_out.push(frame.address()),
            Ok(None) => return (stack_out, false),
            Ok(Some(_)) | Err(_) => return (stack_out, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(svma: u64, file_offset: u64, file_size: u64, executable: bool) -> Segment {
        Segment {
            svma,
            file_offset,
            file_size,
            executable,
        }
    }

    #[test]
    fn the_bias_maps_the_mapped_offset_to_its_link_address() {
        // A PIE: text at file offset 0x1000 linked at 0x1000, mapped at 0x5555_5555_5000.
        let pie = ObjectUnwind {
            segments: vec![
                segment(0, 0, 0x800, false),
                segment(0x1000, 0x1000, 0x2345, true),
            ],
            ..ObjectUnwind::default()
        };
        assert_eq!(pie.bias(0x5555_5555_5000, 0x1000), Some(0x5555_5555_4000));
        // A non-PIE executable maps at its link address: no bias.
        let fixed = ObjectUnwind {
            segments: vec![segment(0x401000, 0x1000, 0x500, true)],
            ..ObjectUnwind::default()
        };
        assert_eq!(fixed.bias(0x401000, 0x1000), Some(0));
        // A segment whose offset is not page aligned is mapped from the page below it.
        let unaligned = ObjectUnwind {
            segments: vec![segment(0x2a40, 0x1a40, 0x100, true)],
            ..ObjectUnwind::default()
        };
        let bias = unaligned.bias(0x7f00_0000_1000, 0x1000).unwrap();
        assert_eq!(0x2a40 + bias, 0x7f00_0000_1a40);
        assert_eq!(unaligned.bias(0x7f00_0000_1000, 0x9000), None);
    }

    #[test]
    fn this_test_binary_has_unwind_sections() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let file = std::fs::File::open(exe).unwrap();
        let object = ObjectUnwind::parse(&object::ReadCache::new(file)).expect("an x86-64 ELF");
        assert!(object.eh_frame.is_some());
        assert!(object.segments.iter().any(|s| s.executable));
    }

    #[test]
    fn a_sample_without_registers_is_its_ip_alone_and_truncated() {
        let (stack, truncated) = unwind(&Unwinder::new(), &mut RuleCache::new(), 0x1234, None, &[]);
        assert_eq!((stack, truncated), (vec![0x1234], true));
    }
}
