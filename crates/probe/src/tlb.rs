//! The data TLB's curve: one line in each of more and more 4 KiB pages, in a free random
//! order, so that past a TLB's reach every load pays a translation from the next level or a
//! page walk. It explains why the pointer chase walks pages in groups (see
//! `chase::page_grouped_order`) and tells users how far random access reaches before page
//! walks.

use crate::chase::{LINES_PER_VISIT, PAGES_PER_GROUP, TLB_PAGE_BYTES};
use crate::knee::{Knee, Point, Segment, geometric_sizes, log_noise, segment};

/// Name of the curve.
pub const PAGE_WALK_CURVE: &str = "page_walk";

/// Fewest pages measured: well inside every first-level data TLB.
const FIRST_PAGES: u64 = 8;

/// Spans (pages times 4 KiB) from 8 pages to the most whose lines, one a page, fill the L2
/// (so the lines stay in the caches next to the core while the pages outgrow the TLBs, whose
/// last level holds 1536 to 3072 entries on current x86 cores), within `capacity`.
pub fn page_walk_spans(l2_bytes: u64, capacity_bytes: u64, per_octave: u32) -> Vec<u64> {
    let page = TLB_PAGE_BYTES as u64;
    let line = crate::CHASE_STRIDE_BYTES as u64;
    let most_pages = (l2_bytes / line).max(4 * FIRST_PAGES);
    let hi = (most_pages * page).min(capacity_bytes / page * page);
    if hi < FIRST_PAGES * page {
        return Vec::new();
    }
    geometric_sizes(FIRST_PAGES * page, hi, per_octave, page)
}

/// Smallest step between two levels of the curve counted as a TLB level.
const MIN_STEP: f64 = 1.5;

/// The curve's TLB levels: each step of at least 1.5x from a level held for half an octave,
/// except a step whose rise (widened by a quarter of an octave) holds the point where the
/// lines, one a page, outgrow one of `data_cache_bytes`.
///
/// The steps are read from the curve's constant pieces rather than between plateaus: past the
/// last TLB the page walks' own loads outgrow the caches and the lines outgrow the L2, so the
/// curve keeps climbing and has no upper plateau.
pub fn tlb_knees(points: &[Point], data_cache_bytes: &[u64]) -> Vec<Knee> {
    let lines_bytes =
        |span: u64| span as f64 / TLB_PAGE_BYTES as f64 * crate::CHASE_STRIDE_BYTES as f64;
    let slack = 2f64.powf(0.25);
    let noise = log_noise(points);
    let segments = segment(points);
    let wide = |s: &Segment| {
        let octaves = |i: usize| (points[i].size_bytes.max(1) as f64).log2();
        octaves(s.last) - octaves(s.first) >= 0.5
    };
    let mut knees = Vec::new();
    let mut current = segments.iter().position(wide);
    while let Some(c) = current {
        let Some(step) = (c + 1..segments.len())
            .find(|&i| segments[i].log_level - segments[c].log_level >= MIN_STEP.ln())
        else {
            break;
        };
        let knee = step_knee(
            points,
            segments[c].log_level.exp(),
            segments[step].first,
            noise,
        );
        let lo = lines_bytes(knee.rise_start_bytes) / slack;
        let hi = lines_bytes(knee.end_bytes) * slack;
        if data_cache_bytes
            .iter()
            .all(|&cache| !(lo..=hi).contains(&(cache as f64)))
        {
            knees.push(knee);
        }
        current = (step..segments.len()).find(|&i| wide(&segments[i]));
    }
    knees
}

/// The step whose first high point is `points[high]`, from the level `before`: the TLB's
/// entries are the cache-like page count (`2^k` or `3 * 2^k`) from the last low point up to
/// the first high one nearest the low one (a TLB under a random walk misses from one entry
/// past its size on), and the level after it is the time an octave past that.
fn step_knee(points: &[Point], before: f64, high: usize, noise: f64) -> Knee {
    let page = TLB_PAGE_BYTES as u64;
    let low = points[high.saturating_sub(1)].size_bytes;
    let first_high = points[high].size_bytes;
    let entries = (2..40u32)
        .flat_map(|k| [1u64 << k, 3u64 << (k - 1)])
        .filter(|&n| (low..=first_high).contains(&(n * page)))
        .min()
        .map_or(low, |n| n * page);
    let after = points
        .iter()
        .find(|p| p.size_bytes >= 2 * low)
        .or(points.last())
        .map_or(before, |p| p.value);
    let ratio = after / before;
    Knee {
        size_bytes: entries,
        cliff_lo_bytes: low,
        cliff_hi_bytes: first_high,
        rise_start_bytes: low,
        rise_mid_bytes: low,
        end_bytes: first_high,
        before,
        after,
        ratio,
        confidence: (1.0 - noise / ratio.ln().max(f64::MIN_POSITIVE)).clamp(0.0, 1.0),
    }
}

/// What the TLB knees say, for the notes: the pages each level reaches and what a load
/// pays past it, and why the cache sizes do not see them.
pub fn page_walk_note(knees: &[Knee]) -> String {
    if knees.is_empty() {
        return "data TLB: loads to random 4 KiB pages show no step up to the curve's last \
                page count (the TLBs reach further, or their misses cost too little to see)"
            .into();
    }
    let steps: Vec<String> = knees
        .iter()
        .map(|k| {
            let pages = k.size_bytes / TLB_PAGE_BYTES as u64;
            format!(
                "{:.1} to {:.1} ns a load past about {pages} pages ({})",
                k.before,
                k.after,
                reach(k.size_bytes)
            )
        })
        .collect();
    format!(
        "data TLB: loads to random 4 KiB pages step from {}; the pointer chase enters a page \
         once every {LINES_PER_VISIT} loads with at most {PAGES_PER_GROUP} pages live, so \
         these steps are not taken for caches",
        steps.join(", and from ")
    )
}

fn reach(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(pages: u64, value: f64) -> Point {
        Point {
            size_bytes: pages * 4096,
            value,
            median: value,
        }
    }

    /// A curve as measured on a Zen 3 guest: an L1 DTLB of 64 entries, the lines filling a
    /// 32 KiB L1d at 512 pages, and 2048 entries of the host's 4 KiB pages.
    fn modelled_curve() -> Vec<Point> {
        let mut pages = 8.0_f64;
        let mut out = Vec::new();
        while pages <= 8192.0 {
            let p = pages as u64;
            // The lines outgrow the L1d in a ramp from 300 pages, as random replacement
            // and the code around the walk make them.
            let value = if p <= 64 {
                1.3
            } else if p <= 300 {
                3.8
            } else if p <= 512 {
                3.8 + 2.7 * (p - 300) as f64 / 212.0
            } else if p <= 2048 {
                6.5
            } else {
                28.0
            };
            out.push(point(p, value));
            pages *= 2f64.powf(1.0 / 6.0);
        }
        out
    }

    #[test]
    fn spans_keep_the_lines_inside_the_l2_and_the_buffer() {
        let spans = page_walk_spans(512 << 10, 128 << 20, 6);
        assert_eq!(spans.first(), Some(&(8 * 4096)));
        assert_eq!(spans.last(), Some(&(8192 * 4096)));
        assert!(spans.iter().all(|s| s % 4096 == 0));
        let small_buffer = page_walk_spans(512 << 10, 16 << 20, 6);
        assert_eq!(small_buffer.last(), Some(&(16 << 20)));
        assert!(page_walk_spans(512 << 10, 16 << 10, 6).is_empty());
    }

    #[test]
    fn the_knee_of_the_lines_filling_the_l1d_is_not_a_tlb() {
        let knees = tlb_knees(&modelled_curve(), &[32 << 10, 512 << 10]);
        let pages: Vec<u64> = knees.iter().map(|k| k.size_bytes / 4096).collect();
        assert_eq!(pages, vec![64, 2048], "{knees:?}");
        let note = page_walk_note(&knees);
        assert!(note.contains("past about 2048 pages (8 MiB)"), "{note}");
        assert!(note.contains("past about 64 pages (256 KiB)"), "{note}");
        let all = tlb_knees(&modelled_curve(), &[]);
        assert_eq!(all.len(), 3, "{all:?}");
    }

    #[test]
    fn a_recorded_zen3_guest_shows_its_two_tlb_levels() {
        let curves =
            crate::fixtures::fixture_curves(include_str!("../testdata/zen3_page_walk.json"));
        let knees = tlb_knees(&curves[0].points, &[32 << 10, 512 << 10]);
        let pages: Vec<u64> = knees.iter().map(|k| k.size_bytes / 4096).collect();
        assert_eq!(pages, vec![64, 2048], "{knees:?}");
        assert!(knees[1].after > 2.0 * knees[1].before, "{knees:?}");
    }

    #[test]
    fn a_flat_curve_says_no_step() {
        let flat: Vec<Point> = (3..12).map(|k| point(1 << k, 4.0)).collect();
        assert!(tlb_knees(&flat, &[32 << 10]).is_empty());
        assert!(page_walk_note(&[]).contains("no step"));
    }

    #[test]
    fn a_modelled_intel_guest_shows_its_dtlb_and_stlb() {
        // An Emerald Rapids guest (crate::fixtures::intel): a 64-entry DTLB, a 2048-entry
        // STLB, the lines filling the 48 KiB L1d at 768 pages and the 2 MiB L2 over random
        // pages from about 16384; the data caches are those the modelled chase gives.
        use crate::fixtures::intel;
        use crate::placement::Replacement;
        for quick in [true, false] {
            let curves = intel::chase_curves(quick, Replacement::Lru, 0);
            let levels = crate::levels::assign_levels(&intel::machine(), &curves);
            let data_caches: Vec<u64> = levels.knees.iter().map(|l| l.knee.size_bytes).collect();
            for seed in 0..4 {
                let points = intel::page_walk(quick, seed);
                let knees = tlb_knees(&points, &data_caches);
                let pages: Vec<u64> = knees.iter().map(|k| k.size_bytes / 4096).collect();
                assert_eq!(
                    pages,
                    vec![intel::DTLB.0, intel::STLB.0],
                    "quick {quick}, seed {seed}: {data_caches:?} {knees:?}"
                );
            }
        }
    }
}
