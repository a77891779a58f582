//! Random access streams and cache geometries shared by the property tests.

use proptest::prelude::*;

/// One access: (addr, size_bytes, write, reference).
pub type Access = (u64, u32, bool, u32);

/// Up to `most` accesses below `addresses`, of the sizes compiled code uses (8 bytes most
/// often, and a 40-byte one that spans lines), by `references` references.
pub fn stream(addresses: u64, references: u32, most: usize) -> impl Strategy<Value = Vec<Access>> {
    prop::collection::vec(
        (
            0..addresses,
            prop::sample::select(vec![1u32, 4, 8, 8, 8, 16, 40]),
            any::<bool>(),
            0..references,
        ),
        1..most,
    )
}

/// Up to three levels, line sizes not shrinking downwards: (sets, ways, line_bytes) each, the
/// sets and ways drawn from the lists given.
pub fn geometry(sets: Vec<u64>, ways: Vec<u64>) -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    prop::collection::vec(
        (
            prop::sample::select(sets),
            prop::sample::select(ways),
            prop::sample::select(vec![16u64, 32, 64]),
        ),
        1..4,
    )
    .prop_map(|mut levels| {
        let mut line = 0;
        for l in &mut levels {
            l.2 = l.2.max(line);
            line = l.2;
        }
        levels
    })
}
