//! Patching the executable (and the libraries asked for) in this process: for each object,
//! trampolines generated into an area mapped within a 32-bit displacement of its code, then
//! every planned site rewritten, each text page writable (and not executable) only while its
//! sites are written.

use std::collections::HashMap;
use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, Instruction};

use super::super::handover::{FileIdentity, Handover, ObjectPlan, Refusal};
use super::super::plan::{JUMP_BYTES, SitePatch};
use super::super::trampoline::{
    self, MAX_SITE_ID, SlowPaths, StateSave, Step, ThreadWords, falls_through,
};
use super::threads::{thread_words, words_offset};
use super::{Runtime, RuntimeSite, TrapSite};

const PAGE: u64 = 4096;
/// Generous room per trampoline; a site that finds the area full is refused, not squeezed.
const TRAMPOLINE_BYTES: u64 = 256;
const COVERED_EVENT_BYTES: u64 = 96;

/// Patches the objects as `handover` plans; `None` when this process runs another program.
pub(super) fn install(handover: &Handover) -> Result<Option<Runtime>, String> {
    let me = FileIdentity::of(Path::new("/proc/self/exe"))
        .map_err(|e| format!("cannot stat /proc/self/exe: {e}"))?;
    if !handover.objects[0].file.same_file(&me) {
        return Ok(None);
    }
    let total = handover.site_count();
    if total as u64 >= u64::from(MAX_SITE_ID) {
        return Err(format!("{total} sites: more than a trampoline can name"));
    }
    let loaded = loaded_objects();
    let executable = loaded
        .first()
        .ok_or("the executable is not among the loaded objects")?;
    let words = thread_words(words_offset())
        .ok_or("the runtime's thread-local words are out of the trampolines' reach")?;
    let save = if handover.vector_extensions {
        state_save()
    } else {
        StateSave::Sse
    };
    let mut runtime = Runtime {
        sites: Vec::with_capacity(total),
        functions: handover
            .objects
            .iter()
            .map(|o| o.functions.clone())
            .collect(),
        main_entry_site: None,
        main_return_site: total as u32,
        main_return_stub: 0,
        main_return_slot: std::ptr::null_mut(),
        traps: HashMap::new(),
        counted_blocks: handover.counted_blocks(),
        results: handover.results.clone(),
        jump_sites: 0,
        trap_sites: 0,
        refused: Vec::new(),
        unloaded: Vec::new(),
        words,
    };
    let mut out = Writes::default();
    let mut counters = 0u32;
    for (index, object) in handover.objects.iter().enumerate() {
        let image = if index == 0 {
            Some(executable)
        } else {
            loaded[1..].iter().find(|l| {
                FileIdentity::of(Path::new(&l.path)).is_ok_and(|id| id.same_file(&object.file))
            })
        };
        let first_site = runtime.sites.len() as u32;
        match image {
            Some(image) => install_object(
                &mut runtime,
                &mut out,
                Placing {
                    index: index as u32,
                    object,
                    image,
                    first_site,
                    first_counter: counters,
                    words,
                    save,
                },
            )?,
            None => {
                runtime.unloaded.push(index as u32);
                runtime
                    .sites
                    .extend(object.sites.iter().map(|p| RuntimeSite {
                        site: p.site.clone(),
                        object: index as u32,
                        address: 0,
                        counter: None,
                        plt: None,
                        repeats: None,
                    }));
            }
        }
        counters += object.counted_blocks;
    }
    out.writes.extend(out.springboards);
    write_code(&out.writes)?;
    Ok(Some(runtime))
}

/// The bytes to write over the code: the sites' jumps and traps, then the springboards (which
/// may lie in bytes another site's jump covers, so written after).
#[derive(Default)]
struct Writes {
    writes: Vec<(u64, Vec<u8>)>,
    springboards: Vec<(u64, Vec<u8>)>,
}

/// One object to patch and where its sites and counters start in the global numbering.
struct Placing<'a> {
    index: u32,
    object: &'a ObjectPlan,
    image: &'a LoadedImage,
    first_site: u32,
    first_counter: u32,
    words: ThreadWords,
    save: StateSave,
}

/// Generates an object's trampolines in an area near it and plans its writes.
fn install_object(runtime: &mut Runtime, out: &mut Writes, p: Placing) -> Result<(), String> {
    let Placing {
        index,
        object,
        image,
        first_site,
        first_counter,
        words,
        save,
    } = p;
    let plans = decode_plans(object, image.bias);
    let area_bytes = area_bytes(&plans);
    let area = map_area(image, area_bytes)?;
    let mut patcher = Patcher::new(area, area_bytes, words);
    let handler = super::on_event as *const () as u64;
    let slow = SlowPaths {
        flags: patcher.place(|at| trampoline::slow_path(at, handler, &words, save, true))?,
        no_flags: patcher.place(|at| trampoline::slow_path(at, handler, &words, save, false))?,
    };
    if index == 0 {
        let slot = area + area_bytes - PAGE;
        let site = runtime.main_return_site;
        runtime.main_return_stub =
            patcher.place(|at| trampoline::main_return(at, site, slot, slow, &words))?;
        runtime.main_return_slot = slot as *mut u64;
    }
    let id_of = |local: usize| first_site + local as u32;
    for (local, planned) in object.sites.iter().enumerate() {
        if index == 0 && Some(planned.site.address) == object.main_entry {
            runtime.main_entry_site = Some(id_of(local));
        }
        let repeats = match (&planned.patch, &planned.site.block) {
            (SitePatch::Jump { .. } | SitePatch::ShortJump { .. }, Some(b))
                if b.header_of.is_some()
                    && b.chain.last() == b.header_of.as_ref()
                    && !planned.site.return_site
                    && planned.site.function_entry.is_none()
                    && !planned.site.plt_call =>
            {
                Some((b.function, b.header_of.unwrap_or_default()))
            }
            _ => None,
        };
        runtime.sites.push(RuntimeSite {
            site: planned.site.clone(),
            object: index,
            address: planned.site.address.wrapping_add(image.bias),
            counter: planned.site.counted_block.map(|c| first_counter + c),
            plt: plans[local].plt,
            repeats,
        });
    }
    let mut covered: HashMap<u64, u32> = HashMap::new();
    let mut carries: HashMap<u32, u64> = HashMap::new();
    let mut fall_through: HashMap<u32, (u32, bool)> = HashMap::new();
    for (local, planned) in object.sites.iter().enumerate() {
        let id = id_of(local);
        match planned.patch {
            SitePatch::Covered { by } => {
                covered.insert(runtime.sites[id as usize].address, id);
                *carries.entry(id_of(by as usize)).or_default() += 1;
            }
            SitePatch::FallThrough { by, flags_dead } => {
                fall_through.insert(id_of(by as usize), (id, flags_dead));
                *carries.entry(id_of(by as usize)).or_default() += 1;
            }
            _ => {}
        }
    }
    let carried = Carried {
        covered: &covered,
        fall_through: &fall_through,
    };
    let mut refused = std::collections::HashSet::new();
    for (local, planned) in object.sites.iter().enumerate() {
        let id = id_of(local);
        let address = runtime.sites[id as usize].address;
        let outcome = match (&planned.patch, &plans[local].instructions) {
            (SitePatch::Jump { flags_dead, .. }, Ok(instrs)) => jump_site(
                &mut patcher,
                runtime,
                &carried,
                id,
                instrs,
                *flags_dead,
                slow,
            )
            .map(|code_at| {
                runtime.jump_sites += 1 + carries.get(&id).unwrap_or(&0);
                out.writes
                    .push((address, jump_bytes(address, code_at, instrs)));
            }),
            (
                SitePatch::ShortJump {
                    flags_dead,
                    springboard,
                    ..
                },
                Ok(instrs),
            ) => jump_site(
                &mut patcher,
                runtime,
                &carried,
                id,
                instrs,
                *flags_dead,
                slow,
            )
            .and_then(|code_at| {
                let board = springboard.wrapping_add(image.bias);
                let (short, board_bytes) = short_jump_bytes(address, board, code_at, instrs)?;
                runtime.jump_sites += 1;
                out.writes.push((address, short));
                out.springboards.push((board, board_bytes));
                Ok(())
            }),
            (SitePatch::Trap { .. }, Ok(instrs)) => {
                let first = instrs[0];
                patcher
                    .place(|at| {
                        let resume = falls_through(&first).then(|| first.next_ip());
                        trampoline::trampoline(at, &[Step::Copy(first)], resume, slow, &words)
                    })
                    .map(|resume| {
                        runtime.traps.insert(address, TrapSite { site: id, resume });
                        runtime.trap_sites += 1;
                        out.writes.push((address, vec![0xcc]));
                    })
            }
            (
                SitePatch::Jump { .. } | SitePatch::ShortJump { .. } | SitePatch::Trap { .. },
                Err(why),
            ) => Err(why.clone()),
            (
                SitePatch::Covered { .. } | SitePatch::FallThrough { .. } | SitePatch::Skip { .. },
                _,
            ) => Ok(()),
        };
        if let Err(reason) = outcome {
            refused.insert(local as u32);
            runtime.refused.push(Refusal { site: id, reason });
        }
    }
    for (local, planned) in object.sites.iter().enumerate() {
        if let SitePatch::Covered { by } | SitePatch::FallThrough { by, .. } = planned.patch
            && refused.contains(&by)
        {
            runtime.refused.push(Refusal {
                site: id_of(local),
                reason: "under the jump of a site that was not patched".into(),
            });
        }
    }
    patcher.seal()
}

/// A site's instructions as found in memory, and the PLT call's stub and return address.
struct Decoded {
    instructions: Result<Vec<Instruction>, String>,
    plt: Option<(u64, u64)>,
}

fn decode_plans(object: &ObjectPlan, bias: u64) -> Vec<Decoded> {
    object
        .sites
        .iter()
        .map(|planned| {
            let address = planned.site.address.wrapping_add(bias);
            let count = match planned.patch {
                SitePatch::Jump { instructions, .. }
                | SitePatch::ShortJump { instructions, .. } => instructions as usize,
                SitePatch::Trap { .. } => 1,
                _ => usize::from(planned.site.plt_call),
            };
            let instructions = read_instructions(address, count);
            let plt = match (&instructions, planned.site.plt_call) {
                (Ok(i), true) if !i.is_empty() && i[0].is_call_near() => {
                    Some((i[0].near_branch_target().wrapping_sub(bias), i[0].next_ip()))
                }
                _ => None,
            };
            let instructions = instructions.and_then(|i| match planned.patch {
                SitePatch::Jump { bytes, .. } | SitePatch::ShortJump { bytes, .. }
                    if i.iter().map(|x| x.len() as u64).sum::<u64>() != u64::from(bytes) =>
                {
                    Err("the code in memory differs from the file".into())
                }
                _ => Ok(i),
            });
            Decoded { instructions, plt }
        })
        .collect()
}

/// Decodes `count` instructions at `address` of this process's code.
fn read_instructions(address: u64, count: usize) -> Result<Vec<Instruction>, String> {
    let mut out = Vec::with_capacity(count);
    let mut at = address;
    for _ in 0..count {
        // SAFETY: the address is in the executable's mapped text (a site of its analysed
        // code); 15 bytes may run past a site near the end of the text, so they are read only
        // up to the end of its page when the next page is not mapped.
        let bytes = unsafe { readable_bytes(at, 15) };
        let instr = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE).decode();
        if instr.is_invalid() {
            return Err("the bytes in memory do not decode".into());
        }
        at = instr.next_ip();
        out.push(instr);
    }
    Ok(out)
}

/// Up to `n` bytes at `address`, stopping at the end of the mapping.
///
/// # Safety
/// `address` must be in a readable mapping.
unsafe fn readable_bytes<'a>(address: u64, n: u64) -> &'a [u8] {
    let page_end = (address / PAGE + 1) * PAGE;
    let mut len = n;
    if address + n > page_end && !is_mapped(page_end) {
        len = page_end - address;
    }
    // SAFETY: the caller vouches for the first page; the next one is checked above.
    unsafe { std::slice::from_raw_parts(address as *const u8, len as usize) }
}

fn is_mapped(page: u64) -> bool {
    let mut vec = 0u8;
    // SAFETY: mincore only reports on the page; it fails with ENOMEM when it is not mapped.
    unsafe { libc::mincore(page as *mut libc::c_void, PAGE as usize, &mut vec) == 0 }
}

/// The sites whose events a jump site's trampoline runs besides its own.
struct Carried<'a> {
    /// Runtime address of an instruction under a jump → the site there (a PLT call).
    covered: &'a HashMap<u64, u32>,
    /// Carrier site → the site it falls through to, and whether its flags are dead.
    fall_through: &'a HashMap<u32, (u32, bool)>,
}

/// The trampoline of a jump site: its event, the events of the sites under its jump each
/// before its instruction, the instructions, the events of a block it falls into (when it
/// carries one), the jump back.
fn jump_site(
    patcher: &mut Patcher,
    runtime: &Runtime,
    carried: &Carried,
    id: u32,
    instrs: &[Instruction],
    flags_dead: bool,
    slow: SlowPaths,
) -> Result<u64, String> {
    let event = |i: u32, flags_dead: bool| {
        let site = &runtime.sites[i as usize];
        Step::Event {
            site: i,
            counter: site.counter,
            repeats: site.repeats.is_some(),
            handled: site.handled(),
            flags_dead,
        }
    };
    let site = &runtime.sites[id as usize];
    let mut steps = Vec::new();
    if site.handled() || site.counter.is_some() {
        steps.push(event(id, flags_dead));
    }
    for (k, instr) in instrs.iter().enumerate() {
        if k > 0
            && let Some(&c) = carried.covered.get(&instr.ip())
        {
            // A covered site is a call, after which no flag survives.
            steps.push(event(c, true));
        }
        steps.push(Step::Copy(*instr));
    }
    let last = instrs.last().ok_or("no instruction")?;
    if let Some(&(next, next_flags_dead)) = carried.fall_through.get(&id) {
        steps.push(event(next, next_flags_dead));
    }
    let resume = falls_through(last).then(|| last.next_ip());
    let words = patcher.words;
    patcher.place(|at| trampoline::trampoline(at, &steps, resume, slow, &words))
}

/// `jmp code_at` over the displaced instructions, the rest of their bytes `int3`.
fn jump_bytes(address: u64, code_at: u64, instrs: &[Instruction]) -> Vec<u8> {
    let covered: u64 = instrs.iter().map(|i| i.len() as u64).sum();
    let rel = code_at.wrapping_sub(address + JUMP_BYTES) as i64 as i32;
    let mut bytes = vec![0xe9];
    bytes.extend(rel.to_le_bytes());
    bytes.resize(covered as usize, 0xcc);
    bytes
}

/// `jmp rel8` to the springboard over the displaced instructions (the rest `int3`), and the
/// springboard's `jmp rel32` to the trampoline.
fn short_jump_bytes(
    address: u64,
    board: u64,
    code_at: u64,
    instrs: &[Instruction],
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let covered: u64 = instrs.iter().map(|i| i.len() as u64).sum();
    let rel8 = i8::try_from(board.wrapping_sub(address + 2) as i64)
        .map_err(|_| "its springboard is out of a short jump's reach".to_owned())?;
    let mut short = vec![0xeb, rel8 as u8];
    short.resize(covered as usize, 0xcc);
    let rel32 = code_at.wrapping_sub(board + JUMP_BYTES) as i64 as i32;
    let mut board_bytes = vec![0xe9];
    board_bytes.extend(rel32.to_le_bytes());
    Ok((short, board_bytes))
}

/// Trampoline space needed by the planned sites, plus the two stubs and the data page.
fn area_bytes(plans: &[Decoded]) -> u64 {
    let code: u64 = plans
        .iter()
        .map(|d| match &d.instructions {
            Ok(i) => TRAMPOLINE_BYTES + COVERED_EVENT_BYTES * i.len() as u64,
            Err(_) => 0,
        })
        .sum();
    (code + 2048).div_ceil(PAGE) * PAGE + PAGE
}

/// Places generated code in the area, one piece after another.
struct Patcher {
    area: u64,
    code_end: u64,
    cursor: u64,
    words: ThreadWords,
}

impl Patcher {
    fn new(area: u64, bytes: u64, words: ThreadWords) -> Patcher {
        Patcher {
            area,
            code_end: area + bytes - PAGE,
            cursor: area,
            words,
        }
    }

    /// Generates code for the cursor's address and copies it there; returns its address.
    fn place(
        &mut self,
        generate: impl FnOnce(u64) -> Result<Vec<u8>, String>,
    ) -> Result<u64, String> {
        let at = self.cursor;
        let code = generate(at)?;
        if at + code.len() as u64 > self.code_end {
            return Err("no room left for its trampoline".into());
        }
        // SAFETY: [at, at + len) is inside the area, mapped writable until `seal`.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, code.len()) };
        self.cursor = (at + code.len() as u64).next_multiple_of(16);
        Ok(at)
    }

    /// Makes the code part of the area executable and read-only (the data page stays
    /// writable, not executable).
    fn seal(&self) -> Result<(), String> {
        // SAFETY: the range is the area's code part, mapped by `map_area`.
        let r = unsafe {
            libc::mprotect(
                self.area as *mut libc::c_void,
                (self.code_end - self.area) as usize,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        };
        if r != 0 {
            return Err(format!(
                "cannot make the trampolines executable: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

/// Writes the jumps and traps over the sites, page by page: each page writable (and not
/// executable: no code of the executable runs before its constructors) only while written,
/// then given back its protection.
fn write_code(writes: &[(u64, Vec<u8>)]) -> Result<(), String> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    let mut by_page: std::collections::BTreeMap<u64, Vec<&(u64, Vec<u8>)>> = Default::default();
    for w in writes {
        let first = w.0 / PAGE * PAGE;
        let last = (w.0 + w.1.len() as u64 - 1) / PAGE * PAGE;
        by_page.entry(first).or_default().push(w);
        if last != first {
            by_page.entry(last).or_default();
        }
    }
    let pages: Vec<u64> = by_page.keys().copied().collect();
    for &page in &pages {
        let protection = protection_of(&maps, page).ok_or("a site outside the mapped code")?;
        protect(page, libc::PROT_READ | libc::PROT_WRITE)?;
        // A write may run onto the next page, which is made writable with this one.
        let next_writable = by_page
            .get(&page)
            .is_some_and(|ws| ws.iter().any(|w| w.0 + w.1.len() as u64 > page + PAGE));
        if next_writable {
            protect(page + PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
        }
        for w in &by_page[&page] {
            // SAFETY: the bytes are inside pages made writable above, over the executable's
            // code, which no thread runs yet.
            unsafe { std::ptr::copy_nonoverlapping(w.1.as_ptr(), w.0 as *mut u8, w.1.len()) };
        }
        protect(page, protection)?;
        if next_writable {
            let next = protection_of(&maps, page + PAGE).unwrap_or(protection);
            protect(page + PAGE, next)?;
        }
    }
    Ok(())
}

fn protect(page: u64, protection: libc::c_int) -> Result<(), String> {
    // SAFETY: the page is part of the executable's mapped text.
    let r = unsafe { libc::mprotect(page as *mut libc::c_void, PAGE as usize, protection) };
    if r != 0 {
        return Err(format!(
            "mprotect of the code at {page:#x}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The protection of the mapping holding `page`, from `/proc/self/maps`.
fn protection_of(maps: &str, page: u64) -> Option<libc::c_int> {
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        if !(start..end).contains(&page) {
            return None;
        }
        let perms = fields.next()?.as_bytes();
        let mut p = 0;
        if perms.first() == Some(&b'r') {
            p |= libc::PROT_READ;
        }
        if perms.get(1) == Some(&b'w') {
            p |= libc::PROT_WRITE;
        }
        if perms.get(2) == Some(&b'x') {
            p |= libc::PROT_EXEC;
        }
        Some(p)
    })
}

/// Where an object is loaded: its path, bias and the span of its segments.
struct LoadedImage {
    path: String,
    bias: u64,
    low: u64,
    high: u64,
}

/// The loaded objects, the executable first (as `dl_iterate_phdr` lists them).
fn loaded_objects() -> Vec<LoadedImage> {
    let mut found: Vec<LoadedImage> = Vec::new();
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info; `data` is the `found` below.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut Vec<LoadedImage>)) };
        let mut low = u64::MAX;
        let mut high = 0;
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr has dlpi_phnum entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                low = low.min(ph.p_vaddr);
                high = high.max(ph.p_vaddr + ph.p_memsz);
            }
        }
        let path = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null dlpi_name is a NUL-terminated string owned by the loader.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        if low < high {
            found.push(LoadedImage {
                path,
                bias: info.dlpi_addr,
                low: low.wrapping_add(info.dlpi_addr),
                high: high.wrapping_add(info.dlpi_addr),
            });
        }
        0
    }
    // SAFETY: the callback matches the expected signature and only writes `found`.
    unsafe {
        libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut libc::c_void);
    }
    found
}

/// Maps `bytes` read-write where every byte is within a 32-bit displacement of the whole image:
/// the free gap closest below it, else as high above it as reaches (leaving the heap room).
fn map_area(image: &LoadedImage, bytes: u64) -> Result<u64, String> {
    const REACH: u64 = (1 << 31) - PAGE;
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    let mut used: Vec<(u64, u64)> = maps
        .lines()
        .filter_map(|l| {
            let (s, e) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect();
    used.sort_unstable();
    let lowest_allowed = (image.high.saturating_sub(REACH)).max(1 << 16);
    let highest_allowed = image.low.saturating_add(REACH);
    let mut gaps = Vec::new();
    let mut previous_end = 1u64 << 16;
    for &(start, end) in &used {
        if start > previous_end {
            gaps.push((previous_end, start));
        }
        previous_end = previous_end.max(end);
    }
    gaps.push((previous_end, 1 << 47));
    let below = gaps
        .iter()
        .filter_map(|&(g0, g1)| {
            let top = g1.min(image.low) / PAGE * PAGE;
            let at = top.checked_sub(bytes)?;
            (at >= g0.max(lowest_allowed)).then_some(at)
        })
        .max();
    let above = gaps
        .iter()
        .filter_map(|&(g0, g1)| {
            let top = g1.min(highest_allowed) / PAGE * PAGE;
            let at = top.checked_sub(bytes)?;
            (at >= g0.max(image.high)).then_some(at)
        })
        .max();
    let at = below
        .or(above)
        .ok_or("no free address range near the executable")?;
    // SAFETY: an anonymous private mapping at an address checked free; MAP_FIXED_NOREPLACE
    // refuses rather than replace anything mapped there since the check.
    let got = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            bytes as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if got == libc::MAP_FAILED || got as u64 != at {
        if got != libc::MAP_FAILED {
            // SAFETY: unmapping what this call mapped elsewhere.
            unsafe { libc::munmap(got, bytes as usize) };
        }
        return Err(format!(
            "cannot map trampolines at {at:#x}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(at)
}

/// How the slow path saves the extended state on this CPU: `xsavec` of x87, SSE, AVX and
/// AVX-512 state where available (the handler, like any compiled code and the C library it
/// calls, may use any of them), else `xsave`, else `fxsave`.
fn state_save() -> StateSave {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    let leaf1 = __cpuid(1);
    let os_xsave = leaf1.ecx & (1 << 27) != 0;
    if !os_xsave {
        return StateSave::Legacy;
    }
    let xcr0 = xgetbv0();
    // x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM; not MPX, PKRU or AMX tiles, which the handler
    // never changes.
    let mask = xcr0 & 0xe7;
    let mut bytes: u32 = 576;
    for component in 2..8 {
        if mask & (1 << component) != 0 {
            let leaf = __cpuid_count(0xd, component);
            bytes = bytes.max(leaf.ebx + leaf.eax);
        }
    }
    let compacted = __cpuid_count(0xd, 1).eax & (1 << 1) != 0;
    if compacted {
        StateSave::Compacted { mask, bytes }
    } else {
        StateSave::Standard { mask, bytes }
    }
}

fn xgetbv0() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: xgetbv with ecx = 0 reads XCR0; callers check OSXSAVE first.
    unsafe {
        core::arch::asm!("xgetbv", in("ecx") 0, out("eax") low, out("edx") high,
            options(nomem, nostack, preserves_flags));
    }
    (u64::from(high) << 32) | u64::from(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protections_come_from_the_maps_line_holding_the_page() {
        let maps = "00400000-00401000 r--p 0 08:01 1 /x\n00401000-00403000 r-xp 0 08:01 1 /x\n";
        assert_eq!(
            protection_of(maps, 0x402000),
            Some(libc::PROT_READ | libc::PROT_EXEC)
        );
        assert_eq!(protection_of(maps, 0x400000), Some(libc::PROT_READ));
        assert_eq!(protection_of(maps, 0x500000), None);
    }

    #[test]
    fn a_jump_is_followed_by_traps_over_the_rest() {
        let instrs: Vec<Instruction> = Decoder::with_ip(
            64,
            &[0x89, 0xf8, 0x83, 0xc0, 0x01, 0x75, 0xf9],
            0x1000,
            DecoderOptions::NONE,
        )
        .into_iter()
        .take(3)
        .collect();
        let bytes = jump_bytes(0x1000, 0x2000, &instrs);
        assert_eq!(bytes, vec![0xe9, 0xfb, 0x0f, 0, 0, 0xcc, 0xcc]);
    }

    #[test]
    fn this_cpu_has_a_save_area_that_holds_the_sse_state() {
        match state_save() {
            StateSave::Compacted { mask, bytes } | StateSave::Standard { mask, bytes } => {
                assert_eq!(mask & 3, 3);
                assert!(bytes >= 576);
            }
            StateSave::Legacy | StateSave::Sse => {}
        }
    }
}
