//! Anonymous memory mappings aligned to 2 MiB, with transparent huge pages requested, and the
//! protection changes that keep generated code writable or executable, never both.

use crate::ProbeError;

/// Huge-page size on x86-64.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// An anonymous private mapping whose usable part starts on a 2 MiB boundary.
#[derive(Debug)]
pub struct Mapping {
    raw: *mut u8,
    raw_len: usize,
    base: *mut u8,
    len: usize,
    /// Whether `madvise(MADV_HUGEPAGE)` was accepted.
    pub huge_pages_requested: bool,
}

// SAFETY: the mapping is owned memory like a Vec; moving it to another thread is sound.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes (rounded up to 2 MiB), readable and writable, zero-filled.
    pub fn new(len: usize) -> Result<Mapping, ProbeError> {
        let len = len
            .max(1)
            .checked_next_multiple_of(HUGE_PAGE_BYTES)
            .ok_or_else(|| ProbeError::Invalid(format!("mapping of {len} bytes is too large")))?;
        let raw_len = len + HUGE_PAGE_BYTES;
        // SAFETY: an anonymous private mapping with no address hint has no preconditions.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                raw_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(ProbeError::last_os(format!("mmap({raw_len} bytes)")));
        }
        let raw = raw.cast::<u8>();
        let offset = (raw as usize).next_multiple_of(HUGE_PAGE_BYTES) - raw as usize;
        // SAFETY: offset < HUGE_PAGE_BYTES, so base..base+len lies inside the raw mapping.
        let base = unsafe { raw.add(offset) };
        // SAFETY: base..base+len is part of our own mapping; madvise only changes policy.
        let advised = unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) } == 0;
        Ok(Mapping {
            raw,
            raw_len,
            base,
            len,
            huge_pages_requested: advised,
        })
    }

    /// Start of the usable, 2 MiB-aligned part.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping (never: a mapping has at least one huge page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes the whole usable part read+write (and not executable).
    pub fn make_writable(&self) -> Result<(), ProbeError> {
        self.protect(libc::PROT_READ | libc::PROT_WRITE, "PROT_READ|PROT_WRITE")
    }

    /// Makes the whole usable part read+execute (and not writable).
    pub fn make_executable(&self) -> Result<(), ProbeError> {
        self.protect(libc::PROT_READ | libc::PROT_EXEC, "PROT_READ|PROT_EXEC")
    }

    fn protect(&self, prot: libc::c_int, name: &str) -> Result<(), ProbeError> {
        // Whole-range changes keep a huge page whole; a partial one would split it.
        // SAFETY: base..base+len is our own mapping; changing its protection cannot affect
        // memory Rust owns elsewhere.
        let rc = unsafe { libc::mprotect(self.base.cast(), self.len, prot) };
        if rc != 0 {
            return Err(ProbeError::last_os(format!("mprotect({name})")));
        }
        Ok(())
    }

    /// Kilobytes of this mapping backed by transparent huge pages, from `/proc/self/smaps`.
    pub fn huge_page_kib(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        anon_huge_kib(&smaps, self.base as usize)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: raw/raw_len is exactly the mapping mmap returned, unmapped once.
        unsafe { libc::munmap(self.raw.cast(), self.raw_len) };
    }
}

/// The `AnonHugePages` figure of the smaps entry that contains `address`.
pub fn anon_huge_kib(smaps: &str, address: usize) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            inside = (lo..hi).contains(&address);
            continue;
        }
        if inside && let Some(rest) = line.strip_prefix("AnonHugePages:") {
            return rest.trim().trim_end_matches("kB").trim().parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_aligned_and_zeroed() {
        let m = Mapping::new(5000).unwrap();
        assert_eq!(m.as_ptr() as usize % HUGE_PAGE_BYTES, 0);
        assert_eq!(m.len(), HUGE_PAGE_BYTES);
        // SAFETY: the mapping is readable for len bytes.
        let bytes = unsafe { std::slice::from_raw_parts(m.as_ptr(), m.len()) };
        assert!(bytes.iter().all(|&b| b == 0));
        m.make_executable().unwrap();
        m.make_writable().unwrap();
    }

    #[test]
    fn smaps_entries_are_found_by_address() {
        let smaps = "00400000-00600000 r-xp 00000000 00:00 0\nSize: 2048 kB\n\
                     AnonHugePages:      2048 kB\n7f00-7f10 rw-p 0 0 0\nAnonHugePages: 0 kB\n";
        assert_eq!(anon_huge_kib(smaps, 0x400100), Some(2048));
        assert_eq!(anon_huge_kib(smaps, 0x7f05), Some(0));
        assert_eq!(anon_huge_kib(smaps, 0x10), None);
        assert_eq!(anon_huge_kib("garbage\n-\nx-y\n", 0), None);
    }
}
