//! Cache level descriptions: geometry and policies, from `--cache` specs or machine files.

use loopscope_machine::{Machine, format_bytes, parse_size_bytes};

use crate::CacheError;
use crate::level::DENSE_LEVEL_CAP_BYTES;

/// Which line a full set gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// Least recently used (exact).
    Lru,
    /// First in, first out: hits do not change the order.
    Fifo,
    /// Tree pseudo-LRU (ways must be a power of two, at most 64).
    TreePlru,
    /// Uniformly random, from a seeded generator (reproducible).
    Random,
}

impl Replacement {
    /// The name used in specs and output.
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::Fifo => "fifo",
            Replacement::TreePlru => "plru",
            Replacement::Random => "random",
        }
    }

    /// Parses `lru`, `fifo`, `plru` (or `tree-plru`) and `random` (or `rr`), in any case.
    pub fn parse(text: &str) -> Option<Replacement> {
        match text.to_ascii_lowercase().as_str() {
            "lru" => Some(Replacement::Lru),
            "fifo" => Some(Replacement::Fifo),
            "plru" | "tree-plru" | "treeplru" => Some(Replacement::TreePlru),
            "random" | "rand" | "rr" => Some(Replacement::Random),
            _ => None,
        }
    }
}

/// How a level relates to the levels above it (closer to the core).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inclusion {
    /// Filled on every miss that passes through; evicts independently (NINE).
    NonInclusive,
    /// As non-inclusive, and an eviction here removes the line from the levels above.
    Inclusive,
    /// A victim cache: filled only with lines evicted from the level above; a hit moves the line up.
    Exclusive,
}

impl Inclusion {
    /// The name used in specs and output.
    pub fn name(self) -> &'static str {
        match self {
            Inclusion::NonInclusive => "non-inclusive",
            Inclusion::Inclusive => "inclusive",
            Inclusion::Exclusive => "exclusive",
        }
    }
}

/// One cache level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelConfig {
    /// Its name (`L1`, `L2`, ...).
    pub name: String,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Line size in bytes (a power of two).
    pub line_bytes: u64,
    /// Associativity.
    pub ways: u64,
    /// Replacement policy.
    pub replacement: Replacement,
    /// True for write-back, false for write-through.
    pub write_back: bool,
    /// Whether a write miss allocates the line.
    pub write_allocate: bool,
    /// Relation to the level above.
    pub inclusion: Inclusion,
}

/// Largest line accepted, to keep line numbers clear of the simulator's flag bits.
const MAX_LINE_BYTES: u64 = 1 << 20;

impl LevelConfig {
    /// A write-back, write-allocate, non-inclusive LRU level, checked for a possible geometry.
    pub fn new(
        name: &str,
        size_bytes: u64,
        ways: u64,
        line_bytes: u64,
    ) -> Result<LevelConfig, CacheError> {
        let cfg = LevelConfig {
            name: name.to_owned(),
            size_bytes,
            line_bytes,
            ways,
            replacement: Replacement::Lru,
            write_back: true,
            write_allocate: true,
            inclusion: Inclusion::NonInclusive,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size_bytes / (self.line_bytes * self.ways)
    }

    /// Number of lines the level holds.
    pub fn lines(&self) -> u64 {
        self.size_bytes / self.line_bytes
    }

    /// Checks that the simulator can hold the level: its sparse storage keeps whole sets, so
    /// one set must fit the dense bound by itself. Every simulation checks it before it starts
    /// ([`crate::simulate`], [`crate::simulate_each_level_alone`]); [`LevelConfig::validate`]
    /// does not, since the analytic model keeps no sets and counts such a level.
    pub fn check_simulable(&self) -> Result<(), CacheError> {
        let set_memory_bytes = self.ways.saturating_mul(8);
        if set_memory_bytes > DENSE_LEVEL_CAP_BYTES {
            return Err(CacheError::Geometry {
                name: self.name.clone(),
                message: format!(
                    "one set of {} ways needs {} to simulate, more than the {} a set may take \
                     (see docs/limits.md)",
                    self.ways,
                    format_bytes(set_memory_bytes),
                    format_bytes(DENSE_LEVEL_CAP_BYTES)
                ),
            });
        }
        Ok(())
    }

    /// Checks the geometry and that the policy fits it (not whether the simulator can hold
    /// the level: [`LevelConfig::check_simulable`]).
    pub fn validate(&self) -> Result<(), CacheError> {
        let bad = |message: String| CacheError::Geometry {
            name: self.name.clone(),
            message,
        };
        if self.size_bytes == 0 || self.ways == 0 || self.line_bytes == 0 {
            return Err(bad("size, ways and line size must all be positive".into()));
        }
        if !self.line_bytes.is_power_of_two()
            || self.line_bytes < 4
            || self.line_bytes > MAX_LINE_BYTES
        {
            return Err(bad(format!(
                "line size {} B is not a power of two between 4 B and 1 MiB",
                self.line_bytes
            )));
        }
        let set_bytes = self
            .line_bytes
            .checked_mul(self.ways)
            .ok_or_else(|| bad("ways × line size overflows".into()))?;
        if self.size_bytes % set_bytes != 0 {
            return Err(bad(format!(
                "size {} B is not a whole number of sets of {} ways × {} B (sets × ways × line must equal the size)",
                self.size_bytes, self.ways, self.line_bytes
            )));
        }
        let sets = self.sets();
        if sets.checked_mul(self.ways).is_none_or(|n| n > 1 << 30) {
            return Err(bad("more than 2^30 lines".into()));
        }
        if self.replacement == Replacement::TreePlru
            && (!self.ways.is_power_of_two() || self.ways > 64)
        {
            return Err(bad(format!(
                "tree-PLRU needs a power-of-two number of ways up to 64, not {}",
                self.ways
            )));
        }
        Ok(())
    }
}

/// Refuses two options of one kind in a level's spec (`lru:fifo`, `wb:wt`): the last would
/// silently win. The same option twice is harmless.
fn check_one_option_per_kind(options: &[&str]) -> Result<(), String> {
    let kind = |option: &str| match option.to_ascii_lowercase().as_str() {
        "wb" | "wt" => "write policies",
        "wa" | "nwa" => "write-miss policies",
        "nincl" | "nine" | "incl" | "excl" | "victim" => "inclusion policies",
        _ => "replacement policies",
    };
    for (i, first) in options.iter().enumerate() {
        for second in &options[i + 1..] {
            if kind(first) == kind(second) && !first.eq_ignore_ascii_case(second) {
                return Err(format!(
                    "two {} given, `{first}` and `{second}`: give one",
                    kind(first)
                ));
            }
        }
    }
    Ok(())
}

/// Parses `L1=32K:8:64,L2=1M:16:64`: per level `NAME=SIZE:WAYS:LINE`, optionally followed by
/// `:OPTION`s: a replacement (`lru`, `fifo`, `plru`, `random`), `wb`/`wt`, `wa`/`nwa`,
/// `nincl`/`incl`/`excl`. Levels are listed innermost first.
pub fn parse_cache_spec(spec: &str) -> Result<Vec<LevelConfig>, CacheError> {
    let mut levels = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let bad = |message: String| CacheError::Spec {
            spec: part.to_owned(),
            message,
        };
        let (name, rest) = part
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=SIZE:WAYS:LINE, e.g. L1=32K:8:64".into()))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("the level needs a name before `=`".into()));
        }
        let fields: Vec<&str> = rest.split(':').map(str::trim).collect();
        if fields.len() < 3 {
            return Err(bad("expected SIZE:WAYS:LINE after `=`".into()));
        }
        let size = parse_size_bytes(fields[0]).ok_or_else(|| {
            bad(format!(
                "size `{}` is not a byte count such as 32K or 1M",
                fields[0]
            ))
        })?;
        let ways: u64 = fields[1]
            .parse()
            .map_err(|_| bad(format!("ways `{}` is not a positive integer", fields[1])))?;
        let line = parse_size_bytes(fields[2])
            .ok_or_else(|| bad(format!("line size `{}` is not a byte count", fields[2])))?;
        let mut cfg = LevelConfig {
            name: name.to_owned(),
            size_bytes: size,
            line_bytes: line,
            ways,
            replacement: Replacement::Lru,
            write_back: true,
            write_allocate: true,
            inclusion: Inclusion::NonInclusive,
        };
        for option in &fields[3..] {
            match option.to_ascii_lowercase().as_str() {
                "wb" => cfg.write_back = true,
                "wt" => cfg.write_back = false,
                "wa" => cfg.write_allocate = true,
                "nwa" => cfg.write_allocate = false,
                "nincl" | "nine" => cfg.inclusion = Inclusion::NonInclusive,
                "incl" => cfg.inclusion = Inclusion::Inclusive,
                "excl" | "victim" => cfg.inclusion = Inclusion::Exclusive,
                other => {
                    cfg.replacement = Replacement::parse(other).ok_or_else(|| {
                        bad(format!("unknown option `{other}` (expected lru, fifo, plru, random, wb, wt, wa, nwa, nincl, incl or excl)"))
                    })?;
                }
            }
        }
        check_one_option_per_kind(&fields[3..]).map_err(bad)?;
        levels.push(cfg);
    }
    check_hierarchy(&levels)?;
    Ok(levels)
}

/// The data-side caches of a machine description (data and unified), innermost first, with
/// their stated policies where the machine file has them.
pub fn levels_from_machine(machine: &Machine) -> Result<Vec<LevelConfig>, CacheError> {
    let mut levels = Vec::new();
    for cache in machine.data_caches() {
        let name = format!("L{}{}", cache.level, cache.kind.suffix());
        let mut cfg = LevelConfig::new(&name, cache.size_bytes, cache.ways, cache.line_bytes)?;
        if let Some(r) = cache.replacement.as_deref().and_then(Replacement::parse) {
            cfg.replacement = r;
        }
        cfg.write_allocate = cache.write_allocate.unwrap_or(true);
        cfg.write_back = cache.write_back.unwrap_or(true);
        levels.push(cfg);
    }
    if levels.is_empty() {
        return Err(CacheError::Geometry {
            name: "machine".into(),
            message: "the machine description has no data cache".into(),
        });
    }
    check_hierarchy(&levels)?;
    Ok(levels)
}

/// Checks each level and the hierarchy: at least one level, each named once (ignoring case),
/// line sizes not shrinking downwards,
/// the first level not exclusive.
pub fn check_hierarchy(levels: &[LevelConfig]) -> Result<(), CacheError> {
    let Some(first) = levels.first() else {
        return Err(CacheError::Spec {
            spec: String::new(),
            message: "no cache level given".into(),
        });
    };
    for (i, l) in levels.iter().enumerate() {
        l.validate()?;
        if levels[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&l.name))
        {
            return Err(CacheError::Geometry {
                name: l.name.clone(),
                message: "the level is named twice (each level once, innermost first)".into(),
            });
        }
    }
    if first.inclusion == Inclusion::Exclusive {
        return Err(CacheError::Geometry {
            name: first.name.clone(),
            message: "the first level cannot be exclusive (it has no level above it)".into(),
        });
    }
    for pair in levels.windows(2) {
        if pair[1].line_bytes < pair[0].line_bytes {
            return Err(CacheError::Geometry {
                name: pair[1].name.clone(),
                message: format!(
                    "line size {} B is smaller than {}'s {} B",
                    pair[1].line_bytes, pair[0].name, pair[0].line_bytes
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_options() {
        let levels = parse_cache_spec("L1=32K:8:64, L2=1M:16:64:plru:excl:wt:nwa").unwrap();
        assert_eq!(levels[0].sets(), 64);
        assert_eq!(levels[1].sets(), 1024);
        assert_eq!(levels[1].replacement, Replacement::TreePlru);
        assert_eq!(levels[1].inclusion, Inclusion::Exclusive);
        assert!(!levels[1].write_back && !levels[1].write_allocate);
        assert_eq!(parse_cache_spec("L1=256:2:32").unwrap()[0].sets(), 4);
    }

    #[test]
    fn bad_geometries_are_refused() {
        for spec in [
            "L1=0:8:64",
            "L1=32K:0:64",
            "L1=32K:8:48",
            "L1=48K:8:64x",
            "L1=32K:8",
            "32K:8:64",
            "L1=32K:8:64:mru",
            "L1=32K:8:64:excl",
            "L1=32K:8:128,L2=1M:8:64",
            "L1=24K:3:64:plru",
            "L1=32K:8:64,L1=64K:8:64",
            "L1=32K:8:64,L2=1M:16:64,l1=2M:16:64",
        ] {
            assert!(parse_cache_spec(spec).is_err(), "{spec} accepted");
        }
        let e = parse_cache_spec("L1=1000:8:64").unwrap_err();
        assert!(e.to_string().contains("sets × ways × line"), "{e}");
        // 192 sets: indexed by remainder, as some L3s need.
        assert_eq!(parse_cache_spec("L1=96K:8:64").unwrap()[0].sets(), 192);
    }

    #[test]
    fn two_options_of_one_kind_are_refused() {
        for (spec, kind) in [
            (
                "L1=32K:8:64:lru:fifo",
                "two replacement policies given, `lru` and `fifo`",
            ),
            (
                "L1=32K:8:64:wb:WT",
                "two write policies given, `wb` and `WT`",
            ),
            (
                "L1=32K:8:64:wa:lru:nwa",
                "two write-miss policies given, `wa` and `nwa`",
            ),
            (
                "L1=32K:8:64:incl:excl",
                "two inclusion policies given, `incl` and `excl`",
            ),
        ] {
            let e = parse_cache_spec(spec).unwrap_err().to_string();
            assert!(e.contains(kind), "{spec}: {e}");
        }
        let l = parse_cache_spec("L1=32K:8:64:fifo:FIFO:wt:nwa:incl").unwrap();
        assert_eq!(l[0].replacement, Replacement::Fifo);
        assert!(!l[0].write_back && !l[0].write_allocate);
    }

    #[test]
    fn a_set_too_large_to_simulate_is_refused_with_its_memory() {
        // The geometry is fine (the analytic model counts it); the simulator refuses it.
        let levels = parse_cache_spec("L1=1G:16777216:64").unwrap();
        let e = levels[0].check_simulable().unwrap_err();
        assert_eq!(
            e.to_string(),
            "cache L1: one set of 16777216 ways needs 128 MiB to simulate, more than the \
             64 MiB a set may take (see docs/limits.md)"
        );
        // As many sets as wanted: only touched ones are stored.
        assert!(
            parse_cache_spec("L1=64G:1:64").unwrap()[0]
                .check_simulable()
                .is_ok()
        );
        let level = &parse_cache_spec("L1=512M:8388608:64").unwrap()[0];
        assert!(level.check_simulable().is_ok());
    }
}
