//! Spec 001 §4's worked examples with their exact integers, and §4.9's invariants.

use super::*;
use proptest::prelude::*;

const INT: usize = InstrType::Int as usize;
const FP: usize = InstrType::Fp as usize;
const BR: usize = InstrType::Br as usize;
const LS: usize = InstrType::Ls as usize;

/// Fig. 5's blocks (inclusive ends plus one) with §4.3's derived counts (int, fp, br, ls), and
/// §4.7's synthetic block 5 standing for every unlisted block up to 0xFFFF.
fn patent_map() -> BlockMap {
    let block = |start, end_inclusive: u64, (int, fp, br, ls)| MapBlock {
        start,
        end: end_inclusive + 1,
        types: TypeCounts::exclusive(int, fp, br, ls),
    };
    BlockMap::new(vec![
        block(0x0400, 0x041F, (2, 0, 1, 5)),
        block(0x0420, 0x044F, (5, 12, 1, 2)),
        block(0x0450, 0x04FF, (1, 20, 1, 8)),
        block(0x0500, 0x057F, (1, 0, 1, 3)),
        block(0x0580, 0xFFFF, (826, 3360, 1931, 2663)),
    ])
}

/// Fig. 5 alone (blocks 1–4), for the lookups that must miss beyond block 4.
fn fig5_map() -> BlockMap {
    let mut blocks = patent_map().blocks().to_vec();
    blocks.pop();
    BlockMap::new(blocks)
}

#[test]
fn fig6_and_fig7_ratios_from_the_counts() {
    let map = patent_map();
    let percent = |b: usize, t: InstrType| {
        let block = &map.blocks()[b];
        format!(
            "{:.1}",
            100.0 * block.types.get(t) as f64 / block.types.total() as f64
        )
    };
    let rows: Vec<[String; 4]> = (0..4)
        .map(|b| {
            [InstrType::Int, InstrType::Fp, InstrType::Br, InstrType::Ls].map(|t| percent(b, t))
        })
        .collect();
    assert_eq!(rows[0], ["25.0", "0.0", "12.5", "62.5"]);
    assert_eq!(rows[1], ["25.0", "60.0", "5.0", "10.0"]);
    assert_eq!(rows[2], ["3.3", "66.7", "3.3", "26.7"]);
    assert_eq!(rows[3], ["20.0", "0.0", "20.0", "60.0"]);
    assert_eq!(
        map.blocks()[0].types.total(),
        8,
        "block 1 has 8 instructions (Fig. 6)"
    );
}

#[test]
fn block_map_lookups_of_section_4_2() {
    let map = fig5_map();
    let block_no = |address| map.lookup(address).map(|i| i + 1);
    for (address, expected) in [
        (0x0400, Some(1)),
        (0x041F, Some(1)),
        (0x0420, Some(2)),
        (0x0405, Some(1)),
        (0x04C8, Some(3)),
        (0x057F, Some(4)),
        (0x0C13, None),
        (0x03FF, None),
    ] {
        assert_eq!(block_no(address), expected, "{address:#x}");
    }
    // Fig. 9: each block ends where the next begins.
    for pair in map.blocks().windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
}

#[test]
fn fig13_three_samples() {
    let map = patent_map();
    let samples = [(0x0405, 312_007u128), (0x04C8, 313_390), (0x0C13, 307_356)];
    let first = first_counts(&map, samples);
    assert_eq!(first.n1, vec![312_007, 0, 313_390, 0, 307_356]);
    assert_eq!(first.attributed(), 932_753);
    assert_eq!(first.unattributed_samples, 0);
    // Block 1: 78,001.75 / 0 / 39,000.875 / 195,004.375 as quotient and remainder over 8.
    let exact = |b: usize, t: InstrType| {
        let block = &map.blocks()[b];
        second_count_exact(first.n1[b], block.types.get(t), block.types.total())
    };
    assert_eq!(exact(0, InstrType::Int), (78_001, 6));
    assert_eq!(exact(0, InstrType::Fp), (0, 0));
    assert_eq!(exact(0, InstrType::Br), (39_000, 7));
    assert_eq!(exact(0, InstrType::Ls), (195_004, 3));
    // Block 3: 31339/3, 626780/3, 31339/3, 250712/3 as quotient and remainder over 30.
    assert_eq!(exact(2, InstrType::Int), (10_446, 10));
    assert_eq!(exact(2, InstrType::Fp), (208_926, 20));
    assert_eq!(exact(2, InstrType::Br), (10_446, 10));
    assert_eq!(exact(2, InstrType::Ls), (83_570, 20));
    // The integer second counts of each block add up to its N1.
    for b in [0, 2] {
        let n2 = second_counts(first.n1[b], &map.blocks()[b]);
        assert_eq!(n2[INT] + n2[FP] + n2[BR] + n2[LS], first.n1[b]);
    }
    // N3 over blocks 1 and 3 (multiply first, divide last, in f64).
    let n3 = |t: InstrType| -> f64 {
        [0, 2]
            .iter()
            .map(|&b| {
                let block = &map.blocks()[b];
                (first.n1[b] * u128::from(block.types.get(t))) as f64 / block.types.total() as f64
            })
            .sum()
    };
    assert!((n3(InstrType::Int) - 88_448.083).abs() < 1e-3);
    assert!((n3(InstrType::Fp) - 208_926.667).abs() < 1e-3);
    assert!((n3(InstrType::Br) - 49_447.208).abs() < 1e-3);
    assert!((n3(InstrType::Ls) - 278_575.042).abs() < 1e-3);
}

/// Fig. 16's first data, with block 5's N1 making the total 50,000,000,000.
fn fig16_n1() -> Vec<u128> {
    vec![
        1_000_000_000,
        2_000_000_000,
        3_000_000_000,
        100_000_000,
        43_900_000_000,
    ]
}

#[test]
fn fig16_to_fig17_second_data() {
    let map = patent_map();
    let n1 = fig16_n1();
    assert_eq!(n1.iter().sum::<u128>(), 50_000_000_000);
    let row = |b: usize| {
        let n2 = second_counts(n1[b], &map.blocks()[b]);
        [n2[INT], n2[FP], n2[BR], n2[LS]]
    };
    assert_eq!(row(0), [250_000_000, 0, 125_000_000, 625_000_000]);
    assert_eq!(
        row(1),
        [500_000_000, 1_200_000_000, 100_000_000, 200_000_000]
    );
    assert_eq!(
        row(2),
        [100_000_000, 2_000_000_000, 100_000_000, 800_000_000]
    );
    assert_eq!(row(3), [20_000_000, 0, 20_000_000, 60_000_000]);
    assert_eq!(
        row(4),
        [4_130_000_000, 16_800_000_000, 9_655_000_000, 13_315_000_000]
    );
}

#[test]
fn fig18_result_data() {
    let map = patent_map();
    let n3 = third_counts(&map, &fig16_n1());
    assert_eq!(
        [n3[INT], n3[FP], n3[BR], n3[LS]],
        [
            5_000_000_000,
            20_000_000_000,
            10_000_000_000,
            15_000_000_000
        ]
    );
    assert_eq!(n3[INT] + n3[FP] + n3[BR] + n3[LS], 50_000_000_000);
}

#[test]
fn embodiment_4_fp_and_other() {
    let map = patent_map();
    let n1 = fig16_n1();
    let rows: Vec<(u128, u128)> = (0..4)
        .map(|b| {
            let n2 = second_counts(n1[b], &map.blocks()[b]);
            (n2[FP], n1[b] - n2[FP])
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, 1_000_000_000),
            (1_200_000_000, 800_000_000),
            (2_000_000_000, 1_000_000_000),
            (0, 100_000_000)
        ]
    );
    assert_eq!(
        type_and_other(&map, &n1, InstrType::Fp),
        (20_000_000_000, 30_000_000_000)
    );
}

#[test]
fn embodiment_3_n1_is_a_multiple_of_the_period() {
    let map = patent_map();
    let period = 1_000_003u128;
    let samples = [0x0405u64, 0x0406, 0x04C8, 0x0501, 0x0C13, 0x10_0000];
    let first = first_counts(&map, samples.iter().map(|&a| (a, period)));
    assert_eq!(first.n1, vec![2 * period, 0, period, period, period]);
    assert_eq!(
        (first.unattributed, first.unattributed_samples),
        (period, 1)
    );
    assert_eq!(first.samples, vec![2, 0, 1, 1, 1]);
}

#[test]
fn tags_round_to_the_nearest_and_do_not_disturb_the_partition() {
    let mut types = TypeCounts::exclusive(1, 2, 0, 0);
    types.0[InstrType::Simd as usize] = 2;
    types.0[InstrType::Fma as usize] = 1;
    let block = MapBlock {
        start: 0,
        end: 4,
        types,
    };
    let n2 = second_counts(10, &block);
    assert_eq!(
        [n2[INT], n2[FP]],
        [3, 7],
        "3.33 and 6.67: the unit left goes to fp"
    );
    assert_eq!(n2[InstrType::Simd as usize], 7);
    assert_eq!(n2[InstrType::Fma as usize], 3);
}

#[test]
fn packed_floating_point_is_its_own_type_beside_simd() {
    // addsd, mulpd, vfmadd231pd ymm: every one is simd; only the packed two are vector_fp.
    let classes = ClassCounts {
        fp: 3,
        ..ClassCounts::default()
    };
    let tags = TagCounts {
        simd128: 2,
        simd256: 1,
        fma: 1,
        vector_fp: 2,
        ..TagCounts::default()
    };
    let types = TypeCounts::from_binary(&classes, &tags);
    assert_eq!(types.0[InstrType::Simd as usize], 3);
    assert_eq!(types.0[InstrType::VectorFp as usize], 2);
    assert_eq!(InstrType::parse("vector_fp"), Some(InstrType::VectorFp));
    assert_eq!(
        serde_json::to_string(&InstrType::VectorFp).unwrap(),
        "\"vector_fp\""
    );
}

fn arbitrary_map() -> impl Strategy<Value = BlockMap> {
    proptest::collection::vec(
        (1u64..64, 0u64..8, 0u64..30, 0u64..30, 0u64..30, 0u64..30),
        1..40,
    )
    .prop_map(|spec| {
        let mut at = 0x1000;
        let mut blocks = Vec::new();
        for (len, gap, int, fp, br, ls) in spec {
            at += gap;
            let mut types = TypeCounts::exclusive(int, fp, br, ls);
            types.0[InstrType::Simd as usize] = fp / 2;
            blocks.push(MapBlock {
                start: at,
                end: at + len,
                types,
            });
            at += len;
        }
        BlockMap::new(blocks)
    })
}

proptest! {
    #[test]
    fn n2_adds_up_to_n1_and_n3_to_the_attributed_total(
        map in arbitrary_map(),
        samples in proptest::collection::vec((0x1000u64..0x3000, 0u128..1u128 << 80), 0..200),
    ) {
        let first = first_counts(&map, samples.iter().copied());
        let total: u128 = samples.iter().map(|s| s.1).sum();
        prop_assert_eq!(first.attributed() + first.unattributed, total);
        prop_assert_eq!(first.samples.iter().sum::<u64>() + first.unattributed_samples, samples.len() as u64);
        for (block, &n1) in map.blocks().iter().zip(&first.n1) {
            let n2 = second_counts(n1, block);
            prop_assert_eq!(n2[INT] + n2[FP] + n2[BR] + n2[LS], n1);
            for t in InstrType::ALL {
                let (q, r) = second_count_exact(n1, block.types.get(t), block.types.total());
                prop_assert!(n2[t as usize] == q || (r > 0 && n2[t as usize] == q + 1));
            }
        }
        let n3 = third_counts(&map, &first.n1);
        prop_assert_eq!(n3[INT] + n3[FP] + n3[BR] + n3[LS], first.attributed());
        for t in InstrType::EXCLUSIVE {
            let (one, other) = type_and_other(&map, &first.n1, t);
            prop_assert_eq!(one + other, first.attributed());
        }
    }

    #[test]
    fn lookup_agrees_with_a_linear_scan(map in arbitrary_map(), address in 0xf00u64..0x3200) {
        let linear = map.blocks().iter().position(|b| b.start <= address && address < b.end);
        prop_assert_eq!(map.lookup(address), linear);
    }
}
