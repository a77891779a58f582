//! Where functions start and what code belongs to them: symbols (with their `.cold` parts),
//! `.eh_frame` FDEs, the entry point and, for stripped code, direct call targets.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::elf::Image;
use crate::program::demangle_all;

/// How a function was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeedSource {
    /// A `.symtab` or `.dynsym` function symbol.
    Symbol,
    /// An `.eh_frame` FDE without a symbol.
    EhFrame,
    /// The ELF entry point.
    Entry,
    /// The target of a direct call.
    CallTarget,
}

/// A function to analyse.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    pub symbol: String,
    pub name: String,
    pub address: u64,
    /// The body first, then `.cold` parts.
    pub ranges: Vec<(u64, u64)>,
    pub source: SeedSource,
}

struct Start {
    symbol: String,
    address: u64,
    size: u64,
    source: SeedSource,
}

/// Every function start the file tells of, with its extent.
pub(crate) fn function_seeds(image: &Image) -> Vec<Seed> {
    let usable = |a: u64| image.section_of(a).is_some() && !image.is_plt(a);
    let mut starts: Vec<Start> = Vec::new();
    let mut colds: Vec<(String, u64, u64)> = Vec::new();
    for s in image.symbols.iter().filter(|s| usable(s.address)) {
        if let Some(i) = s.raw_name.find(".cold") {
            colds.push((s.raw_name[..i].to_owned(), s.address, s.size));
        } else if starts.last().is_none_or(|l| l.address != s.address) {
            starts.push(Start {
                symbol: s.raw_name.clone(),
                address: s.address,
                size: s.size,
                source: SeedSource::Symbol,
            });
        }
    }
    let fde_len: HashMap<u64, u64> = image.fde_ranges.iter().map(|&(s, e)| (s, e - s)).collect();
    let cold_starts: HashSet<u64> = colds.iter().map(|c| c.1).collect();
    let by_symbols = Coverage::of(&starts);
    let extra: Vec<Start> = image
        .fde_ranges
        .iter()
        .filter(|&&(s, _)| usable(s) && !cold_starts.contains(&s) && !by_symbols.covers(s))
        .map(|&(s, e)| Start {
            symbol: format!("func_{s:#x}"),
            address: s,
            size: e - s,
            source: SeedSource::EhFrame,
        })
        .collect();
    starts.extend(extra);
    if usable(image.entry) && !Coverage::of(&starts).covers(image.entry) {
        starts.push(Start {
            symbol: "_start".into(),
            address: image.entry,
            size: 0,
            source: SeedSource::Entry,
        });
    }
    starts.sort_by_key(|s| s.address);
    starts.dedup_by_key(|s| s.address);
    let boundaries: Vec<u64> = starts.iter().map(|s| s.address).collect();
    let extent = |address: u64, size: u64| -> (u64, u64) {
        let size = if size > 0 {
            size
        } else {
            fde_len.get(&address).copied().unwrap_or(0)
        };
        if size > 0 {
            return (address, address.saturating_add(size));
        }
        let next = boundaries
            .get(boundaries.partition_point(|&b| b <= address))
            .copied();
        let section_end = image
            .section_of(address)
            .map_or(address, |s| s.address + s.len as u64);
        (address, next.map_or(section_end, |n| n.min(section_end)))
    };
    let names = demangle_all(&starts.iter().map(|s| s.symbol.clone()).collect::<Vec<_>>());
    let mut seeds: Vec<Seed> = starts
        .iter()
        .zip(names)
        .map(|(s, name)| Seed {
            symbol: s.symbol.clone(),
            name,
            address: s.address,
            ranges: vec![extent(s.address, s.size)],
            source: s.source,
        })
        .collect();
    let by_symbol: HashMap<String, usize> = seeds
        .iter()
        .enumerate()
        .map(|(i, s)| (s.symbol.clone(), i))
        .collect();
    for (parent, address, size) in colds {
        let range = extent(address, size);
        match by_symbol.get(&parent) {
            Some(&i) => seeds[i].ranges.push(range),
            None => seeds.push(Seed {
                name: format!("{parent}.cold"),
                symbol: format!("{parent}.cold"),
                address,
                ranges: vec![range],
                source: SeedSource::Symbol,
            }),
        }
    }
    seeds
}

/// The declared extents `[address, address + max(size, 1))` of function starts, for asking
/// whether an address lies inside one (a large library has a hundred thousand of each, so not
/// by comparing every pair).
struct Coverage {
    /// Start addresses, sorted.
    starts: Vec<u64>,
    /// The largest end among the extents starting at or before each start.
    reach: Vec<u64>,
}

impl Coverage {
    fn of(starts: &[Start]) -> Coverage {
        let mut extents: Vec<(u64, u64)> = starts
            .iter()
            .map(|s| (s.address, s.address.saturating_add(s.size.max(1))))
            .collect();
        extents.sort_unstable();
        let mut reach = Vec::with_capacity(extents.len());
        let mut furthest = 0;
        for &(_, end) in &extents {
            furthest = furthest.max(end);
            reach.push(furthest);
        }
        Coverage {
            starts: extents.iter().map(|e| e.0).collect(),
            reach,
        }
    }

    /// Whether `address` lies inside some extent.
    fn covers(&self, address: u64) -> bool {
        let i = self.starts.partition_point(|&s| s <= address);
        i > 0 && address < self.reach[i - 1]
    }
}

/// New functions at direct call targets that no known function covers.
pub(crate) fn call_target_seeds<'a>(
    image: &Image,
    seeds: &[Seed],
    calls: impl Iterator<Item = &'a u64>,
) -> Vec<Seed> {
    let mut known: Vec<(u64, u64)> = seeds
        .iter()
        .flat_map(|s| s.ranges.iter().copied())
        .collect();
    known.sort_unstable();
    let inside = |a: u64| {
        let i = known.partition_point(|r| r.0 <= a);
        known[..i].iter().rev().take(64).any(|r| a < r.1)
    };
    let mut targets: Vec<u64> = calls
        .copied()
        .filter(|&t| image.section_of(t).is_some() && !image.is_plt(t) && !inside(t))
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let mut starts: Vec<u64> = known
        .iter()
        .map(|r| r.0)
        .chain(targets.iter().copied())
        .collect();
    starts.sort_unstable();
    targets
        .iter()
        .filter_map(|&t| {
            let section = image.section_of(t)?;
            let section_end = section.address + section.len as u64;
            let end = starts
                .get(starts.partition_point(|&s| s <= t))
                .copied()
                .unwrap_or(section_end);
            let symbol = format!("func_{t:#x}");
            Some(Seed {
                name: symbol.clone(),
                symbol,
                address: t,
                ranges: vec![(t, end.min(section_end))],
                source: SeedSource::CallTarget,
            })
        })
        .collect()
}

const NORETURN: [&str; 24] = [
    "exit",
    "_exit",
    "_Exit",
    "abort",
    "quick_exit",
    "__stack_chk_fail",
    "__assert_fail",
    "__assert_perror_fail",
    "__fortify_fail",
    "__chk_fail",
    "_Unwind_Resume",
    "__cxa_throw",
    "__cxa_rethrow",
    "__cxa_bad_cast",
    "__cxa_bad_typeid",
    "__cxa_call_unexpected",
    "longjmp",
    "siglongjmp",
    "__longjmp_chk",
    "pthread_exit",
    "err",
    "errx",
    "__libc_start_main",
    "_ZSt9terminatev",
];

/// Whether a function of that name never returns (C library, C++ runtime and Rust panics).
pub(crate) fn is_noreturn_name(raw: &str, demangled: &str) -> bool {
    let raw = raw.split('@').next().unwrap_or(raw);
    NORETURN.contains(&raw)
        || demangled.starts_with("std::__throw_")
        || demangled.starts_with("core::panicking::panic")
        || demangled.starts_with("core::option::unwrap_failed")
        || demangled.starts_with("core::option::expect_failed")
        || demangled.starts_with("core::result::unwrap_failed")
        || demangled.starts_with("std::process::exit")
        || demangled.starts_with("std::panicking::begin_panic")
        || raw == "rust_panic"
}
