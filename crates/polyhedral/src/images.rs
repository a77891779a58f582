//! How many outputs each input of a one-dimensional map has, compared with small numbers,
//! without enumerating the outputs and without a chain of lexmins.
//!
//! The map is split into disjoint basic maps. Where every basic map sends each input to an
//! interval of outputs (no existential variable ties the output to a residue), the number of
//! outputs of an input is the sum of the intervals' lengths, `max − min + 1` per basic map: a
//! piecewise quasi-affine function, compared with `d` by one set operation per `d`. One lexmin
//! and one lexmax per basic map replace `d − 1` lexmins of the whole union, whose pieces multiply
//! with every step (each lexmin of a union compares every pair of basic maps' minima).

use isl_rs as isl;

use crate::PolyError;
use crate::sets::{Map, Set, isl_err};

/// Past this many disjoint basic maps the split is not tried (the caller's own method is then
/// cheaper than the sum's pieces).
const MOST_BASIC_MAPS: i32 = 16;

impl<'c> Map<'c> {
    /// For a map with one output dimension: the inputs with at least `d` outputs, for `d` in
    /// `1..=up_to`, or `None` when some disjoint part does not send its inputs to intervals (or
    /// the map has too many parts), in which case nothing is known.
    pub fn inputs_with_at_least(&self, up_to: u32) -> Result<Option<Vec<Set<'c>>>, PolyError> {
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
        let mut total: Option<isl::PwAff> = None;
        for i in 0..parts {
            let part = isl::Map::from_basic_map(list.get_at(i).map_err(isl_err("get_at"))?)
                .map_err(isl_err("from_basic_map"))?;
            let Some(length) = interval_length(part)? else {
                return Ok(None);
            };
            total = Some(match total {
                None => length,
                Some(t) => t.union_add(length).map_err(isl_err("union_add"))?,
            });
        }
        let Some(total) = total else {
            // No pair at all: no input has any output.
            let empty = self.domain()?;
            return (1..=up_to)
                .map(|_| empty.copy())
                .collect::<Result<Vec<_>, _>>()
                .map(Some);
        };
        let ctx = total.get_ctx();
        (1..=up_to)
            .map(|d| {
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

/// `max − min + 1` of a basic map's outputs, on its domain, when every input's outputs are the
/// whole interval between them; `None` otherwise.
fn interval_length(part: isl::Map) -> Result<Option<isl::PwAff>, PolyError> {
    let lo = part
        .copy()
        .map_err(isl_err("copy"))?
        .dim_min(0)
        .map_err(isl_err("dim_min"))?;
    let hi = part
        .copy()
        .map_err(isl_err("copy"))?
        .dim_max(0)
        .map_err(isl_err("dim_max"))?;
    if lo.involves_nan().map_err(isl_err("involves_nan"))?
        || hi.involves_nan().map_err(isl_err("involves_nan"))?
    {
        return Ok(None);
    }
    let ctx = part.get_ctx();
    let between = |bound: &isl::PwAff, text: &str| -> Result<isl::Map, PolyError> {
        let order = isl::Map::read_from_str(&ctx, text).map_err(isl_err("read"))?;
        isl::Map::from_pw_aff(bound.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("from_pw_aff"))?
            .apply_range(order)
            .map_err(isl_err("apply_range"))
    };
    let interval = between(&lo, "{ [b] -> [o] : o >= b }")?
        .intersect(between(&hi, "{ [b] -> [o] : o <= b }")?)
        .map_err(isl_err("intersect"))?;
    if !interval.is_subset(&part).map_err(isl_err("is_subset"))? {
        return Ok(None);
    }
    let ctx = part.get_ctx();
    hi.sub(lo)
        .map_err(isl_err("sub"))?
        .add_constant_val(isl::Val::int_from_si(&ctx, 1).map_err(isl_err("val"))?)
        .map(Some)
        .map_err(isl_err("add_constant_val"))
}
