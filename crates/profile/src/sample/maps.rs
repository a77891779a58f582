//! Facts read from `/proc` and `/sys`: a process's mappings, the online CPUs, and the vDSO
//! image (the same in every process, so ours is read to unwind through the target's).

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MapsEntry {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) executable: bool,
    pub(super) file_offset: u64,
    pub(super) device: u64,
    pub(super) inode: u64,
    /// The file, or a label such as `[vdso]`; empty for anonymous memory.
    pub(super) path: String,
}

/// The entries of a `/proc/<pid>/maps` text; malformed lines are skipped.
pub(super) fn parse_maps(text: &str) -> Vec<MapsEntry> {
    text.lines().filter_map(parse_maps_line).collect()
}

fn parse_maps_line(line: &str) -> Option<MapsEntry> {
    let mut rest = line;
    let mut field = || {
        let trimmed = rest.trim_start();
        let end = trimmed.find(' ').unwrap_or(trimmed.len());
        let (word, tail) = trimmed.split_at(end);
        rest = tail;
        Some(word).filter(|w| !w.is_empty())
    };
    let (start, end) = field()?.split_once('-')?;
    let perms = field()?;
    let offset = field()?;
    let (major, minor) = field()?.split_once(':')?;
    let inode = field()?;
    let hex = |text: &str| u64::from_str_radix(text, 16).ok();
    let entry = MapsEntry {
        start: hex(start)?,
        end: hex(end)?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        file_offset: hex(offset)?,
        device: (hex(major)? << 32) | hex(minor)?,
        inode: inode.parse().ok()?,
        path: rest.trim_start().to_string(),
    };
    (entry.start < entry.end).then_some(entry)
}

/// Most CPUs a list is read for: bounds the work on a damaged list.
const MAX_CPUS: usize = 1 << 16;

/// The CPUs of a sysfs CPU list such as `0-3,8,10-11`; malformed parts are skipped.
pub(super) fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (first.parse::<usize>(), last.parse::<usize>()),
            None => (part.parse(), part.parse()),
        };
        if let (Ok(first), Ok(last)) = (first, last)
            && first <= last
            && last < MAX_CPUS
        {
            cpus.extend(first..=last);
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// A copy of this process's vDSO, the ELF image the kernel maps into every process.
pub(super) fn own_vdso() -> Option<Vec<u8>> {
    // SAFETY: getauxval only reads this process's auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let entry = parse_maps(&maps)
        .into_iter()
        .find(|entry| entry.path == "[vdso]" && entry.start == base)?;
    let len = usize::try_from(entry.end - entry.start).ok()?;
    // SAFETY: the kernel maps the vDSO readable at `base` for `len` bytes (as
    // /proc/self/maps and the auxiliary vector agree) for the whole life of the process.
    let image = unsafe { std::slice::from_raw_parts(base as *const u8, len) };
    Some(image.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn maps_lines_give_ranges_offsets_files_and_labels() {
        let text = "\
55d0c6a00000-55d0c6a02000 r-xp 00002000 fd:01 1234                       /usr/bin/my prog
7ffc1c1f0000-7ffc1c1f2000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
garbage line
";
        let entries = parse_maps(text);
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            MapsEntry {
                start: 0x55d0c6a00000,
                end: 0x55d0c6a02000,
                executable: true,
                file_offset: 0x2000,
                device: (0xfd << 32) | 1,
                inode: 1234,
                path: "/usr/bin/my prog".to_string(),
            }
        );
        assert_eq!(entries[1].path, "[vdso]");
        assert!(!entries[2].executable);
        assert_eq!(entries[2].path, "");
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        assert_eq!(parse_cpu_list("0-1\n"), [0, 1]);
        assert_eq!(parse_cpu_list("0-2,5,7-8"), [0, 1, 2, 5, 7, 8]);
        assert_eq!(parse_cpu_list("3-1,x,0-99999999"), Vec::<usize>::new());
    }

    #[test]
    fn our_vdso_is_an_elf_image() {
        let Some(image) = own_vdso() else {
            eprintln!("skipped: this process has no vDSO");
            return;
        };
        assert_eq!(&image[..4], b"\x7fELF");
    }

    #[test]
    fn the_maps_of_this_process_hold_its_executable() {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let entries = parse_maps(&text);
        assert!(
            entries
                .iter()
                .any(|e| e.executable && e.path == exe.to_string_lossy())
        );
    }

    proptest! {
        #[test]
        fn any_maps_text_parses_without_panic(text in "\\PC{0,300}") {
            for entry in parse_maps(&text) {
                prop_assert!(entry.start < entry.end);
            }
        }

        #[test]
        fn any_cpu_list_parses_within_bounds(text in "[0-9,\\- ]{0,40}") {
            let cpus = parse_cpu_list(&text);
            prop_assert!(cpus.iter().all(|&cpu| cpu < MAX_CPUS));
            prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]));
        }

        #[test]
        fn well_formed_maps_lines_round_trip(
            start in 0u64..1 << 47, len in 1u64..1 << 20, offset in any::<u32>(),
            inode in any::<u32>(), exec in any::<bool>(), path in "[a-z/ ]{0,20}",
        ) {
            let line = format!(
                "{start:x}-{:x} r{}p {offset:08x} 08:02 {inode}   {path}",
                start + len,
                if exec { "-x" } else { "w-" },
            );
            let entry = parse_maps_line(&line).unwrap();
            prop_assert_eq!(entry.start, start);
            prop_assert_eq!(entry.end, start + len);
            prop_assert_eq!(entry.executable, exec);
            prop_assert_eq!(entry.file_offset, u64::from(offset));
            prop_assert_eq!(entry.inode, u64::from(inode));
            prop_assert_eq!(entry.path, path.trim_start());
        }
    }
}
