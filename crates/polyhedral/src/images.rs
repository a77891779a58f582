//! How many outputs each input of a one-dimensional map has, compared with small numbers,
//! without enumerating the outputs and without a chain of lexmins.
//!
//! The map is split into disjoint basic maps, and each one's number of outputs per input is
//! written as a quasi-affine function of the input where its shape allows: an interval cut by a
//! window of residues (a column walk's lines in one cache set, [`crate::window`]), an interval
//! (`max − min + 1`), every `m`-th point of one (`(max − min)/m + 1`, `m` the output's stride),
//! or an interval less holes of those shapes. The sum over the parts is compared with `d` by one set
//! operation per `d`. A lexmin and a lexmax per basic map replace `d − 1` lexmins of the whole
//! union, whose pieces multiply with every step (each lexmin of a union compares every pair of
//! basic maps' minima). Parts of other shapes (two residue conditions, an existential isl has no
//! expression for, a window whose classes depend on the input) leave the answer unknown, and the
//! caller peels.

use isl_rs as isl;

use crate::PolyError;
use crate::sets::{Map, Set, isl_err};
use crate::window::window_size;

/// Past this many disjoint basic maps the split is not tried (the caller's own method is then
/// cheaper than the sum's pieces: at 32, the 3D stencil 20 × 40 at L1, whose three largest tag
/// maps have 27–28 parts, took 3.1 s on one core instead of 1.6 s).
const MOST_BASIC_MAPS: i32 = 16;

impl<'c> Map<'c> {
    /// For a map with one output dimension: for each `d` of `counts`, the inputs with at least
    /// `d` outputs; `None` when some disjoint part is none of the shapes whose size is known (or
    /// the map has too many parts).
    pub fn inputs_with_at_least(&self, counts: &[u32]) -> Result<Option<Vec<Set<'c>>>, PolyError> {
        let disjoint = self
            .raw_copy()?
            .make_disjoint()
            .map_err(isl_err("make_disjoint"))?;
        let list = disjoint
            .get_basic_map_list()
            .map_err(isl_err("basic_map_list"))?;
        let parts = list.size().map_err(isl_err("basic_map_list"))?;
        if parts > MOST_BASIC_MAPS {
            return Ok(None);
        }
        let mut sizes = Vec::with_capacity(parts as usize);
        for i in 0..parts {
            let part = list.get_at(i).map_err(isl_err("get_at"))?;
            let Some(size) = part_size(part, HOLE_DEPTH)? else {
                return Ok(None);
            };
            sizes.push(size);
        }
        let total = sum_pairwise(sizes)?;
        let Some(total) = total else {
            // No pair at all: no input has any output.
            let empty = self.domain()?;
            return counts
                .iter()
                .map(|_| empty.copy())
                .collect::<Result<Vec<_>, _>>()
                .map(Some);
        };
        let ctx = total.get_ctx();
        counts
            .iter()
            .map(|&d| {
                let shifted = total
                    .copy()
                    .map_err(isl_err("copy"))?
                    .add_constant_val(
                        isl::Val::int_from_si(&ctx, -i64::from(d)).map_err(isl_err("val"))?,
                    )
                    .map_err(isl_err("add_constant_val"))?;
                shifted
                    .nonneg_set()
                    .map(Set::wrap)
                    .map_err(isl_err("nonneg_set"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// The sum of the parts' sizes (each 0 outside its domain), added in pairs, then pairs of
/// pairs: every `union_add` simplifies each piece's function against its domain's affine hull,
/// so adding each size to one growing sum repeats that work on ever more pieces (transpose at
/// N = 180 in L1: 3.0 s added one by one, 1.8 s in pairs; at N = 1600 7.4 s → 5.2 s).
fn sum_pairwise(mut sizes: Vec<isl::PwAff>) -> Result<Option<isl::PwAff>, PolyError> {
    while sizes.len() > 1 {
        let mut next = Vec::with_capacity(sizes.len().div_ceil(2));
        let mut it = sizes.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => a.union_add(b).map_err(isl_err("union_add"))?,
                None => a,
            });
        }
        sizes = next;
    }
    Ok(sizes.pop())
}

/// How many times a part is split into its interval minus the holes in it: once covers a row of
/// lines less one residue class (a column walk's lines in a set, the target's own line taken
/// out); the holes themselves must then be intervals or lattices.
const HOLE_DEPTH: u32 = 1;

/// The number of outputs of each input of a basic map, as a quasi-affine function on its
/// domain, when it has one of four shapes: an interval cut by a residue window (tried first: a
/// window's minimum is what isl is slow at), an interval `[min, max]` (`max − min + 1`), every
/// `m`-th point of one (`(max − min) / m + 1`, `m` isl's stride of the output), or an interval
/// less holes of those shapes. `None` otherwise.
fn part_size(part: isl::BasicMap, depth: u32) -> Result<Option<isl::PwAff>, PolyError> {
    if let Some(size) = window_size(&part)? {
        return Ok(Some(size));
    }
    let part = isl::Map::from_basic_map(part).map_err(isl_err("from_basic_map"))?;
    let Some((lo, hi)) = output_bounds(&part)? else {
        return Ok(None);
    };
    let ctx = part.get_ctx();
    let int = |v: i64| isl::Val::int_from_si(&ctx, v).map_err(isl_err("val"));
    let interval = between(&lo, &hi)?;
    let span = hi.sub(lo).map_err(isl_err("sub"))?;
    if interval.is_subset(&part).map_err(isl_err("is_subset"))? {
        return span
            .add_constant_val(int(1)?)
            .map(Some)
            .map_err(isl_err("add_constant_val"));
    }
    let stride_info = part
        .get_range_stride_info(0)
        .map_err(isl_err("stride_info"))?;
    let stride = stride_info.get_stride().map_err(isl_err("stride"))?;
    if stride.gt_si(1).map_err(isl_err("stride"))? {
        let offset = stride_info.get_offset().map_err(isl_err("stride"))?;
        let lattice = isl::Map::from_aff(offset)
            .map_err(isl_err("from_aff"))?
            .apply_range(
                isl::Map::read_from_str(
                    &ctx,
                    &format!(
                        "{{ [b] -> [o] : (o - b) mod {} = 0 }}",
                        stride.to_str().map_err(isl_err("stride"))?
                    ),
                )
                .map_err(isl_err("read"))?,
            )
            .map_err(isl_err("apply_range"))?
            .intersect(interval.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("intersect"))?;
        if lattice.is_subset(&part).map_err(isl_err("is_subset"))? {
            // Both ends are outputs, so the span is a multiple of the stride.
            let one = int(1)?;
            return span
                .scale_down_val(stride)
                .and_then(|a| a.floor())
                .and_then(|a| a.add_constant_val(one))
                .map(Some)
                .map_err(isl_err("scale_down_val"));
        }
    }
    if depth == 0 {
        return Ok(None);
    }
    let holes = interval
        .subtract(part)
        .and_then(|h| h.make_disjoint())
        .and_then(|h| h.get_basic_map_list())
        .map_err(isl_err("subtract"))?;
    let n = holes.size().map_err(isl_err("basic_map_list"))?;
    if n > MOST_BASIC_MAPS {
        return Ok(None);
    }
    let mut size = span
        .add_constant_val(int(1)?)
        .map_err(isl_err("add_constant_val"))?;
    for i in 0..n {
        let hole = holes.get_at(i).map_err(isl_err("get_at"))?;
        let Some(hole_size) = part_size(hole, depth - 1)? else {
            return Ok(None);
        };
        size = size
            .union_add(hole_size.neg().map_err(isl_err("neg"))?)
            .map_err(isl_err("union_add"))?;
    }
    Ok(Some(size))
}

/// The smallest and largest output of each input of a one-output map, as quasi-affine
/// functions on its domain; `None` where isl has no such form (NaN).
pub(crate) fn output_bounds(map: &isl::Map) -> Result<Option<(isl::PwAff, isl::PwAff)>, PolyError> {
    let lo = map
        .copy()
        .and_then(|m| m.dim_min(0))
        .map_err(isl_err("dim_min"))?;
    let hi = map
        .copy()
        .and_then(|m| m.dim_max(0))
        .map_err(isl_err("dim_max"))?;
    if lo.involves_nan().map_err(isl_err("involves_nan"))?
        || hi.involves_nan().map_err(isl_err("involves_nan"))?
    {
        return Ok(None);
    }
    Ok(Some((lo, hi)))
}

/// `{ x → o : lo(x) ≤ o ≤ hi(x) }`.
fn between(lo: &isl::PwAff, hi: &isl::PwAff) -> Result<isl::Map, PolyError> {
    let ctx = lo.get_ctx();
    let bounded = |bound: &isl::PwAff, text: &str| -> Result<isl::Map, PolyError> {
        let order = isl::Map::read_from_str(&ctx, text).map_err(isl_err("read"))?;
        isl::Map::from_pw_aff(bound.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("from_pw_aff"))?
            .apply_range(order)
            .map_err(isl_err("apply_range"))
    };
    bounded(lo, "{ [b] -> [o] : o >= b }")?
        .intersect(bounded(hi, "{ [b] -> [o] : o <= b }")?)
        .map_err(isl_err("intersect"))
}
