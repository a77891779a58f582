//! The arithmetic of spec 001 §3.8–§3.10, free of any operating-system dependency: the block
//! map, the first count per block (N1), the second count per block and type (N2) and the third
//! count per type (N3). Counts are integers; a product is formed before it is divided.

use serde::{Deserialize, Serialize};

use loopscope_binary::{ClassCounts, TagCounts};

/// An instruction type `mix` counts. The first four are spec 001's exclusive types (every
/// instruction is exactly one of them); the others are non-exclusive tags (§6.4, ¶0126).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstrType {
    /// Floating-point arithmetic, comparisons and conversions, x87 included.
    Fp,
    /// Instructions that access memory (and are not `fp` or `br`).
    Ls,
    /// Control transfers.
    Br,
    /// Everything else.
    Int,
    /// Instructions on vector registers of any width (128, 256 or 512 bits), scalar
    /// floating-point arithmetic (`addsd`) excepted: scalar moves (`movsd`) and shuffles count.
    Simd,
    /// 128-bit vector instructions.
    Simd128,
    /// 256-bit vector instructions.
    Simd256,
    /// 512-bit vector instructions.
    Simd512,
    /// Fused multiply-adds.
    Fma,
    /// Packed floating-point arithmetic (`addpd`, `vmulps`, `vfmadd231pd ymm`): the
    /// vectorised share, which `simd` does not tell apart from scalar moves into vector
    /// registers.
    #[serde(rename = "vector_fp")]
    VectorFp,
}

/// Number of [`InstrType`]s.
pub const TYPE_COUNT: usize = 10;

impl InstrType {
    /// Every type, exclusive ones first.
    pub const ALL: [InstrType; TYPE_COUNT] = [
        InstrType::Fp,
        InstrType::Ls,
        InstrType::Br,
        InstrType::Int,
        InstrType::Simd,
        InstrType::Simd128,
        InstrType::Simd256,
        InstrType::Simd512,
        InstrType::Fma,
        InstrType::VectorFp,
    ];

    /// The exclusive types, which partition every block.
    pub const EXCLUSIVE: [InstrType; 4] =
        [InstrType::Fp, InstrType::Ls, InstrType::Br, InstrType::Int];

    /// Whether every instruction is of exactly one such type.
    pub fn is_exclusive(self) -> bool {
        (self as usize) < 4
    }

    /// The name `--types` and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            InstrType::Fp => "fp",
            InstrType::Ls => "ls",
            InstrType::Br => "br",
            InstrType::Int => "int",
            InstrType::Simd => "simd",
            InstrType::Simd128 => "simd128",
            InstrType::Simd256 => "simd256",
            InstrType::Simd512 => "simd512",
            InstrType::Fma => "fma",
            InstrType::VectorFp => "vector_fp",
        }
    }

    /// The type of that name.
    pub fn parse(name: &str) -> Option<InstrType> {
        InstrType::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Static instruction counts of one block per type (`n(b,t)` of spec 001 §3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeCounts(pub [u64; TYPE_COUNT]);

impl TypeCounts {
    /// From the exclusive classes and the tags `loopscope-binary` keeps per block.
    pub fn from_binary(classes: &ClassCounts, tags: &TagCounts) -> TypeCounts {
        let mut counts = [0; TYPE_COUNT];
        counts[InstrType::Fp as usize] = classes.fp;
        counts[InstrType::Ls as usize] = classes.ls;
        counts[InstrType::Br as usize] = classes.br;
        counts[InstrType::Int as usize] = classes.int;
        // Each vector instruction carries its widest width only, so the widths add up.
        counts[InstrType::Simd as usize] = tags.simd128 + tags.simd256 + tags.simd512;
        counts[InstrType::Simd128 as usize] = tags.simd128;
        counts[InstrType::Simd256 as usize] = tags.simd256;
        counts[InstrType::Simd512 as usize] = tags.simd512;
        counts[InstrType::Fma as usize] = tags.fma;
        counts[InstrType::VectorFp as usize] = tags.vector_fp;
        TypeCounts(counts)
    }

    /// From exclusive counts only (int, fp, br, ls as the patent's tables list them).
    pub fn exclusive(int: u64, fp: u64, br: u64, ls: u64) -> TypeCounts {
        let mut counts = [0; TYPE_COUNT];
        counts[InstrType::Fp as usize] = fp;
        counts[InstrType::Ls as usize] = ls;
        counts[InstrType::Br as usize] = br;
        counts[InstrType::Int as usize] = int;
        TypeCounts(counts)
    }

    /// The count of one type.
    pub fn get(&self, t: InstrType) -> u64 {
        self.0[t as usize]
    }

    /// The instructions of the block (the exclusive types add up to them).
    pub fn total(&self) -> u64 {
        InstrType::EXCLUSIVE.iter().map(|&t| self.get(t)).sum()
    }
}

/// One block of the map (spec 001 T2 with the type counts of T4 kept as integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapBlock {
    /// Address of the first instruction.
    pub start: u64,
    /// One past the last byte (the patent's inclusive end plus one).
    pub end: u64,
    /// Instructions per type; their exclusive total is `n(b)`.
    pub types: TypeCounts,
}

/// The block map: blocks sorted by start address, looked up by binary search (§6.6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockMap {
    blocks: Vec<MapBlock>,
}

impl BlockMap {
    /// Sorts the blocks; of several starting at one address the first given is kept, and a
    /// block with no instructions is dropped (it can hold no sample).
    pub fn new(mut blocks: Vec<MapBlock>) -> BlockMap {
        blocks.retain(|b| b.end > b.start && b.types.total() > 0);
        blocks.sort_by_key(|b| b.start);
        blocks.dedup_by_key(|b| b.start);
        BlockMap { blocks }
    }

    /// The blocks in address order.
    pub fn blocks(&self) -> &[MapBlock] {
        &self.blocks
    }

    /// The index of the block holding `address` (S2003): the last block starting at or before
    /// it, if it ends after it.
    pub fn lookup(&self, address: u64) -> Option<usize> {
        let i = self
            .blocks
            .partition_point(|b| b.start <= address)
            .checked_sub(1)?;
        (address < self.blocks[i].end).then_some(i)
    }
}

/// The first counts (T6) and how the samples fell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirstCounts {
    /// N1 per block of the map, in map order.
    pub n1: Vec<u128>,
    /// Samples per block.
    pub samples: Vec<u64>,
    /// Instructions of samples whose address no block holds (§3.14(3)).
    pub unattributed: u128,
    /// Samples whose address no block holds.
    pub unattributed_samples: u64,
}

impl FirstCounts {
    /// Σ_b N1(b): the instructions attributed to blocks.
    pub fn attributed(&self) -> u128 {
        self.n1.iter().sum()
    }
}

/// The second calculation (Fig. 20): adds each sample's instruction count to the block holding
/// its address, or to the unattributed bucket.
pub fn first_counts(map: &BlockMap, samples: impl IntoIterator<Item = (u64, u128)>) -> FirstCounts {
    let mut counts = FirstCounts {
        n1: vec![0; map.blocks.len()],
        samples: vec![0; map.blocks.len()],
        ..FirstCounts::default()
    };
    for (address, count) in samples {
        match map.lookup(address) {
            Some(b) => {
                counts.n1[b] += count;
                counts.samples[b] += 1;
            }
            None => {
                counts.unattributed += count;
                counts.unattributed_samples += 1;
            }
        }
    }
    counts
}

/// N2 = N1 · n(b,t) / n(b) exactly: the quotient and the remainder over `n(b)`.
pub fn second_count_exact(n1: u128, n_bt: u64, n_b: u64) -> (u128, u64) {
    if n_b == 0 {
        return (0, 0);
    }
    let product = n1 * u128::from(n_bt);
    let n_b = u128::from(n_b);
    (product / n_b, (product % n_b) as u64)
}

/// The second counts of one block (Fig. 21) in integers: the exclusive types are apportioned
/// so that they add up to N1 exactly (each is N1·n(b,t)/n(b) rounded down or up, the leftover
/// units going to the largest remainders); a tag is N1·n(b,t)/n(b) rounded to the nearest.
pub fn second_counts(n1: u128, block: &MapBlock) -> [u128; TYPE_COUNT] {
    let n_b = block.types.total();
    let mut out = [0u128; TYPE_COUNT];
    if n_b == 0 {
        return out;
    }
    let mut remainders: Vec<(u64, usize)> = Vec::with_capacity(4);
    let mut given = 0u128;
    for t in InstrType::EXCLUSIVE {
        let (q, r) = second_count_exact(n1, block.types.get(t), n_b);
        out[t as usize] = q;
        given += q;
        remainders.push((r, t as usize));
    }
    // Largest remainders first; ties to the earlier type, so the result is deterministic.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let leftover = (n1 - given) as usize;
    for &(_, t) in remainders.iter().take(leftover) {
        out[t] += 1;
    }
    for t in InstrType::ALL.into_iter().filter(|t| !t.is_exclusive()) {
        let (q, r) = second_count_exact(n1, block.types.get(t), n_b);
        out[t as usize] = q + u128::from(2 * u128::from(r) >= u128::from(n_b));
    }
    out
}

/// The third counts (Fig. 22): N3(t) = Σ_b N2(b,t) over the blocks of the map.
pub fn third_counts(map: &BlockMap, n1: &[u128]) -> [u128; TYPE_COUNT] {
    let mut totals = [0u128; TYPE_COUNT];
    for (block, &n) in map.blocks.iter().zip(n1) {
        for (total, n2) in totals.iter_mut().zip(second_counts(n, block)) {
            *total += n2;
        }
    }
    totals
}

/// Embodiment 4 (§3.13): one type of interest and "other", N3(other) = Σ_b N1(b) − N3(t).
pub fn type_and_other(map: &BlockMap, n1: &[u128], t: InstrType) -> (u128, u128) {
    let n3 = third_counts(map, n1)[t as usize];
    let total: u128 = n1.iter().sum();
    (n3, total - n3.min(total))
}

#[cfg(test)]
mod tests;
