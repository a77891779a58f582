//! Presburger sets and maps: a thin, safe, value-semantics layer over isl (through `isl-rs`).
//!
//! Every operation copies its operands, so callers keep their sets; the sets are small (their
//! size depends on the loop nest's structure, not on trip counts), so the copies are cheap.

use std::cell::OnceCell;
use std::fmt;
use std::marker::PhantomData;

use isl_rs as isl;

use crate::PolyError;
use crate::count::{Prepared, count_isl_set, prepare};
use crate::polytope::MAX_SLICES;

/// isl's `on_error` option value that makes it record errors without printing them.
const ISL_ON_ERROR_CONTINUE: i32 = 1;

pub(crate) fn isl_err(op: &'static str) -> impl FnOnce(isl::LibISLError) -> PolyError {
    move |e| PolyError::from_isl(op, e.to_string())
}

/// A fresh isl context that records errors instead of printing them.
pub(crate) fn quiet_context() -> isl::Context {
    let raw = isl::Context::alloc();
    // The return value only says whether the option exists; it does in every isl version.
    let _ = isl::Options::set_on_error(&raw, ISL_ON_ERROR_CONTINUE);
    raw
}

/// An isl context. Sets and maps borrow it, so it outlives them.
pub struct Ctx {
    raw: isl::Context,
}

impl Default for Ctx {
    fn default() -> Self {
        Self::new()
    }
}

impl Ctx {
    /// A fresh context that records errors instead of printing them (library rule: no output).
    pub fn new() -> Ctx {
        Ctx {
            raw: quiet_context(),
        }
    }

    /// A fresh context whose operations fail with [`PolyError::OperationLimit`] once isl has
    /// spent `max_operations` elementary steps (isl's own count) in it: the bound that keeps an
    /// analysis whose sets grow too complex from running for hours.
    pub fn with_max_operations(max_operations: u64) -> Ctx {
        let ctx = Ctx::new();
        ctx.raw.set_max_operations(max_operations);
        ctx
    }

    /// Starts the operation count of [`Ctx::with_max_operations`] again from zero, and
    /// forgets the last error.
    pub fn reset_operations(&self) {
        self.raw.reset_operations();
        self.raw.reset_error();
    }

    /// Whether isl's last error was its operation limit (an operation that answers yes or no
    /// reports it as an error of no kind).
    pub fn over_operation_limit(&self) -> bool {
        self.raw.last_error() == isl::Error::Quota
    }

    /// A read that failed: isl reports a context that has hit its operation limit as a syntax
    /// error, so the context's own error state decides.
    fn read_error(&self, text: &str, e: isl::LibISLError) -> PolyError {
        if self.raw.last_error() == isl::Error::Quota {
            return PolyError::OperationLimit { op: "read" };
        }
        PolyError::Parse {
            text: text.to_string(),
            message: e.to_string(),
        }
    }

    /// Reads a set in isl notation, e.g. `[N] -> { [i] : 0 <= i < N }`.
    pub fn set(&self, text: &str) -> Result<Set<'_>, PolyError> {
        isl::Set::read_from_str(&self.raw, text)
            .map(|raw| Set {
                raw,
                ctx: PhantomData,
                prepared: OnceCell::new(),
            })
            .map_err(|e| self.read_error(text, e))
    }

    /// Reads a map in isl notation, e.g. `[N] -> { [i] -> [j] : 0 <= j < i < N }`.
    pub fn map(&self, text: &str) -> Result<Map<'_>, PolyError> {
        isl::Map::read_from_str(&self.raw, text)
            .map(|raw| Map {
                raw,
                ctx: PhantomData,
            })
            .map_err(|e| self.read_error(text, e))
    }
}

/// A union of convex integer polyhedra with existentially quantified (floor-division)
/// variables, over named parameters.
pub struct Set<'c> {
    raw: isl::Set,
    ctx: PhantomData<&'c Ctx>,
    /// The set read once for counting at many parameter values (see [`Set::count`]).
    prepared: OnceCell<Option<Prepared>>,
}

/// A relation between integer tuples, a union of basic relations.
pub struct Map<'c> {
    raw: isl::Map,
    ctx: PhantomData<&'c Ctx>,
}

macro_rules! copy_of {
    ($v:expr, $op:literal) => {
        $v.raw.copy().map_err(isl_err($op))?
    };
}

impl<'c> Set<'c> {
    pub(crate) fn wrap(raw: isl::Set) -> Set<'c> {
        Set {
            raw,
            ctx: PhantomData,
            prepared: OnceCell::new(),
        }
    }

    /// Another handle on the same points.
    pub fn copy(&self) -> Result<Set<'c>, PolyError> {
        Ok(Set::wrap(copy_of!(self, "copy")))
    }

    /// Points in both sets.
    pub fn intersect(&self, other: &Set<'c>) -> Result<Set<'c>, PolyError> {
        let r = copy_of!(self, "copy").intersect(copy_of!(other, "copy"));
        r.map(Set::wrap).map_err(isl_err("intersect"))
    }

    /// Points in either set.
    pub fn union(&self, other: &Set<'c>) -> Result<Set<'c>, PolyError> {
        let r = copy_of!(self, "copy").union(copy_of!(other, "copy"));
        r.map(Set::wrap).map_err(isl_err("union"))
    }

    /// Points of `self` not in `other`.
    pub fn subtract(&self, other: &Set<'c>) -> Result<Set<'c>, PolyError> {
        let r = copy_of!(self, "copy").subtract(copy_of!(other, "copy"));
        r.map(Set::wrap).map_err(isl_err("subtract"))
    }

    /// Existentially quantifies `n` set dimensions starting at `first` (integer projection).
    pub fn project_out(&self, first: u32, n: u32) -> Result<Set<'c>, PolyError> {
        let r = copy_of!(self, "copy").project_out(isl::DimType::Set, first, n);
        r.map(Set::wrap).map_err(isl_err("project_out"))
    }

    /// Whether the set has no point for any parameter value.
    pub fn is_empty(&self) -> Result<bool, PolyError> {
        self.raw.is_empty().map_err(isl_err("is_empty"))
    }

    /// Whether both sets hold the same points for every parameter value.
    pub fn is_equal(&self, other: &Set<'c>) -> Result<bool, PolyError> {
        self.raw.is_equal(&other.raw).map_err(isl_err("is_equal"))
    }

    /// The set restricted to the given parameter values (unnamed ones stay free).
    pub fn fix_params(&self, values: &[(&str, i64)]) -> Result<Set<'c>, PolyError> {
        let mut raw = copy_of!(self, "copy");
        for (name, value) in values {
            let pos = raw
                .find_dim_by_name(isl::DimType::Param, name)
                .map_err(isl_err("find_dim"))?;
            if pos >= 0 {
                let v = isl::Val::int_from_si(&raw.get_ctx(), *value).map_err(isl_err("value"))?;
                raw = raw
                    .fix_val(isl::DimType::Param, pos as u32, v)
                    .map_err(isl_err("fix_val"))?;
            }
        }
        Ok(Set::wrap(raw))
    }

    /// The number of points at the given parameter values, computed without enumerating them:
    /// the work depends on the set's constraints, not on the parameter values. A set with
    /// parameters is read and split once, at its first count, and each count substitutes the
    /// values (formulas count the same sets at thousands of values).
    pub fn count(&self, values: &[(&str, i64)]) -> Result<i128, PolyError> {
        self.count_within(values, MAX_SLICES)
    }

    /// [`Set::count`] with at most `slice_limit` polytope slices per basic set instead of the
    /// counter's million: a first try that gives up early where another way to the same number
    /// may be cheaper ([`PolyError::TooComplex`] when over it).
    pub fn count_within(
        &self,
        values: &[(&str, i64)],
        slice_limit: u64,
    ) -> Result<i128, PolyError> {
        // A set that cannot be prepared is counted through isl at each value. A failure to
        // prepare (isl's operation limit, say) is not kept: it belongs to this count.
        let prepared = match self.prepared.get() {
            Some(p) => p.as_ref(),
            None => match prepare(&self.raw) {
                Ok(p) => self.prepared.get_or_init(|| p).as_ref(),
                Err(_) => None,
            },
        };
        match prepared.map(|p| p.count(values, slice_limit)) {
            // isl's simplification at the values may leave a set the counter can take.
            Some(Err(PolyError::TooComplex { .. } | PolyError::Overflow { .. })) | None => {
                count_isl_set(&self.raw, values, slice_limit)
            }
            Some(counted) => counted,
        }
    }

    /// The smallest and largest values of set dimension `pos` over all points (and parameter
    /// values), or `None` when the set is empty or unbounded in it. Two integer programs over
    /// the set as it is: unlike [`Set::count`], existential variables are not first rewritten
    /// as explicit divisions, which for a projection can cost far more than the answer.
    pub fn dim_range(&self, pos: u32) -> Result<Option<(i64, i64)>, PolyError> {
        let lo = copy_of!(self, "copy")
            .dim_min_val(pos as i32)
            .map_err(isl_err("dim_min_val"))?;
        let hi = copy_of!(self, "copy")
            .dim_max_val(pos as i32)
            .map_err(isl_err("dim_max_val"))?;
        let finite = |v: &isl::Val| v.is_int().map_err(isl_err("is_int"));
        if !finite(&lo)? || !finite(&hi)? {
            return Ok(None);
        }
        let lo = lo.get_num_si().map_err(isl_err("get_num_si"))?;
        let hi = hi.get_num_si().map_err(isl_err("get_num_si"))?;
        Ok(Some((lo, hi)))
    }

    /// Bounds on the values of set dimension `pos` from the set's rational relaxation
    /// (`relaxed_range`): an interval that holds [`Set::dim_range`]'s, from linear programs
    /// instead of integer programs. `None` when the set is empty or unbounded in it.
    pub fn dim_range_bound(&self, pos: u32) -> Result<Option<(i64, i64)>, PolyError> {
        relaxed_range(&self.raw, pos)
    }

    /// The number of set dimensions.
    pub fn dims(&self) -> Result<usize, PolyError> {
        Ok(self.raw.dim(isl::DimType::Set).map_err(isl_err("dim"))? as usize)
    }
}

impl fmt::Display for Set<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw.to_str().unwrap_or("<unprintable set>"))
    }
}

impl fmt::Debug for Set<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Set({self})")
    }
}

impl fmt::Debug for Map<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Map({self})")
    }
}

impl<'c> Map<'c> {
    fn wrap(raw: isl::Map) -> Map<'c> {
        Map {
            raw,
            ctx: PhantomData,
        }
    }

    /// A new handle on the isl map, for this crate's own operations.
    pub(crate) fn raw_copy(&self) -> Result<isl::Map, PolyError> {
        Ok(copy_of!(self, "copy"))
    }

    /// Another handle on the same pairs.
    pub fn copy(&self) -> Result<Map<'c>, PolyError> {
        Ok(Map::wrap(copy_of!(self, "copy")))
    }

    /// Pairs in both maps.
    pub fn intersect(&self, other: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").intersect(copy_of!(other, "copy"));
        r.map(Map::wrap).map_err(isl_err("intersect"))
    }

    /// Pairs in both maps, like [`Map::intersect`], with each pair of basic maps kept unless
    /// its rational relaxation is empty. isl's `intersect` tests every pair for integer points
    /// (a search over the pair's lattice); where both maps are disjunctions of the execution
    /// order, most pairs are contradictory already as rational polyhedra (`x₀ < t₀` against
    /// `x₀ = t₀`), and a linear program says so in a fraction of the time: the 3D stencil at
    /// 80 × 300 in L1 spent 0.48 s of its 1.4 s in the integer tests of the eviction maps'
    /// intersections, 0.05 s with these. A pair with rational but no integer points is kept as
    /// a basic map without points, which every later operation and count treats as empty (isl's
    /// coalesce needs help with them: [`Map::coalesce`]).
    pub fn intersect_relaxed(&self, other: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let space = copy_of!(self, "copy")
            .get_space()
            .map_err(isl_err("get_space"))?;
        let mut out = isl::Map::empty(space).map_err(isl_err("empty"))?;
        let left = basic_maps(&self.raw)?;
        let right = basic_maps(&other.raw)?;
        for a in &left {
            for b in &right {
                let both = a
                    .copy()
                    .and_then(|a| b.copy().and_then(|b| a.intersect(b)))
                    .map_err(isl_err("intersect"))?;
                let wrapped = both
                    .copy()
                    .and_then(|b| b.wrap())
                    .map_err(isl_err("wrap"))?;
                if rationally_empty(&wrapped)? {
                    continue;
                }
                out = isl::Map::from_basic_map(both)
                    .and_then(|part| out.union(part))
                    .map_err(isl_err("union"))?;
            }
        }
        Ok(Map::wrap(out))
    }

    /// Pairs in either map.
    pub fn union(&self, other: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").union(copy_of!(other, "copy"));
        r.map(Map::wrap).map_err(isl_err("union"))
    }

    /// Pairs of `self` not in `other`.
    pub fn subtract(&self, other: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").subtract(copy_of!(other, "copy"));
        r.map(Map::wrap).map_err(isl_err("subtract"))
    }

    /// The pairs whose input lies in `dom`.
    pub fn intersect_domain(&self, dom: &Set<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").intersect_domain(copy_of!(dom, "copy"));
        r.map(Map::wrap).map_err(isl_err("intersect_domain"))
    }

    /// The pairs whose output lies in `range`.
    pub fn intersect_range(&self, range: &Set<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").intersect_range(copy_of!(range, "copy"));
        r.map(Map::wrap).map_err(isl_err("intersect_range"))
    }

    /// The composition `x → z` for `x → y ∈ self`, `y → z ∈ next`.
    pub fn apply_range(&self, next: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").apply_range(copy_of!(next, "copy"));
        r.map(Map::wrap).map_err(isl_err("apply_range"))
    }

    /// `x → (y, z)` for `x → y ∈ self`, `x → z ∈ other`.
    pub fn flat_range_product(&self, other: &Map<'c>) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").flat_range_product(copy_of!(other, "copy"));
        r.map(Map::wrap).map_err(isl_err("flat_range_product"))
    }

    /// Existentially quantifies `n` output dimensions starting at `first`.
    pub fn project_out_outputs(&self, first: u32, n: u32) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").project_out(isl::DimType::Out, first, n);
        r.map(Map::wrap).map_err(isl_err("project_out"))
    }

    /// The inputs that have at least one output.
    pub fn domain(&self) -> Result<Set<'c>, PolyError> {
        copy_of!(self, "copy")
            .domain()
            .map(Set::wrap)
            .map_err(isl_err("domain"))
    }

    /// The outputs that have at least one input.
    pub fn range(&self) -> Result<Set<'c>, PolyError> {
        copy_of!(self, "copy")
            .range()
            .map(Set::wrap)
            .map_err(isl_err("range"))
    }

    /// The parametric lexicographic maximum of the outputs for each input (isl's PIP), as the
    /// list of its pieces: each piece maps the inputs of its domain to one quasi-affine output.
    pub fn lexmax_pieces(&self) -> Result<Vec<Map<'c>>, PolyError> {
        let pma = copy_of!(self, "copy")
            .lexmax_pw_multi_aff()
            .map_err(isl_err("lexmax"))?;
        let as_map = pma.as_map().map_err(isl_err("lexmax"))?;
        let list = as_map.get_basic_map_list().map_err(isl_err("lexmax"))?;
        let n = list.size().map_err(isl_err("lexmax"))?;
        (0..n)
            .map(|i| {
                let bm = list.get_at(i).map_err(isl_err("lexmax"))?;
                isl::Map::from_basic_map(bm)
                    .map(Map::wrap)
                    .map_err(isl_err("lexmax"))
            })
            .collect()
    }

    /// The same pairs in fewer, merged basic maps where isl can (isl's coalesce; where isl stops
    /// with an internal error on parts without integer points, those are dropped and it tries
    /// again).
    pub fn coalesce(&self) -> Result<Map<'c>, PolyError> {
        coalesced(&self.raw).map(Map::wrap)
    }

    /// The parametric lexicographic minimum of the outputs for each input, as a map.
    pub fn lexmin(&self) -> Result<Map<'c>, PolyError> {
        let r = copy_of!(self, "copy").lexmin();
        r.map(Map::wrap).map_err(isl_err("lexmin"))
    }

    /// Whether the map has no pair for any parameter value.
    pub fn is_empty(&self) -> Result<bool, PolyError> {
        self.raw.is_empty().map_err(isl_err("is_empty"))
    }

    /// For a map with one output dimension, the largest difference between two outputs of the
    /// same input (`max o₂ − o₁` over `x → o₁`, `x → o₂`; 0 when every input has one output),
    /// or `None` when the map is empty or the difference unbounded. One integer program over
    /// the pairs of outputs, whatever the map's shape: no input's outputs are enumerated.
    pub fn output_spread(&self) -> Result<Option<i64>, PolyError> {
        // The differences come in opposite pairs, so their minimum is the maximum negated: one
        // integer program, not two (the two were 43 % of the 3D stencil's L1 at 80 × 300).
        // Maximising `o₂ − o₁` over the flat `x → (o₁, o₂)` instead, without the projection,
        // measured slower (8.7-9.7 s against 7.0 s for that level).
        let hi = self
            .output_differences()?
            .dim_max_val(0)
            .map_err(isl_err("dim_max_val"))?;
        if !hi.is_int().map_err(isl_err("is_int"))? {
            return Ok(None);
        }
        Ok(Some(hi.get_num_si().map_err(isl_err("get_num_si"))?))
    }

    /// A bound from above on [`Map::output_spread`], from the rational relaxation of the pairs
    /// (`relaxed_range`): ten to a hundred times faster than the integer program, and mostly
    /// as tight (`None`: unbounded or empty).
    pub fn output_spread_bound(&self) -> Result<Option<i64>, PolyError> {
        Ok(relaxed_range(&self.output_differences()?, 0)?.map(|(_, hi)| hi))
    }

    /// The differences `o₂ − o₁` of two outputs of one input.
    fn output_differences(&self) -> Result<isl::Set, PolyError> {
        let again = copy_of!(self, "copy");
        copy_of!(self, "copy")
            .reverse()
            .and_then(|r| r.apply_range(again))
            .and_then(|p| p.deltas())
            .map_err(isl_err("deltas"))
    }

    /// One input of the map (a single point), or `None` when the map is empty: isl's sample of
    /// the pairs, whose input part is taken, so no projection is made.
    pub fn sample_input(&self) -> Result<Option<Set<'c>>, PolyError> {
        if self.is_empty()? {
            return Ok(None);
        }
        let pair = copy_of!(self, "copy")
            .wrap()
            .and_then(|pairs| pairs.sample_point())
            .and_then(isl::Set::from_point)
            .and_then(|point| point.unwrap())
            .and_then(|pair| pair.domain())
            .map_err(isl_err("sample_point"))?;
        Ok(Some(Set::wrap(pair)))
    }

    /// For a map with one output dimension, the strides above 1 that its basic maps' outputs
    /// keep (isl's stride of the output per basic map: a column walk's blocks in one set are
    /// every `m`-th tag), without repeats, smallest first.
    pub fn output_strides(&self) -> Result<Vec<i64>, PolyError> {
        let list = copy_of!(self, "copy")
            .get_basic_map_list()
            .map_err(isl_err("basic_map_list"))?;
        let mut strides = Vec::new();
        for i in 0..list.size().map_err(isl_err("basic_map_list"))? {
            let stride = list
                .get_at(i)
                .and_then(isl::Map::from_basic_map)
                .and_then(|m| m.get_range_stride_info(0))
                .and_then(|info| info.get_stride())
                .map_err(isl_err("stride_info"))?;
            if stride.is_int().map_err(isl_err("is_int"))? {
                let stride = stride.get_num_si().map_err(isl_err("get_num_si"))?;
                if stride > 1 && !strides.contains(&stride) {
                    strides.push(stride);
                }
            }
        }
        strides.sort_unstable();
        Ok(strides)
    }
}

impl fmt::Display for Map<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw.to_str().unwrap_or("<unprintable map>"))
    }
}

/// The smallest and largest values of dimension `pos` of `set`'s rational relaxation (its
/// existential variables and divisions relaxed too), rounded inwards: an interval holding every
/// integer point's value. One linear program per basic set and side, where an integer program
/// on a projection with large moduli takes milliseconds to tens of them. `None` when the set is
/// empty or unbounded in `pos`.
fn relaxed_range(set: &isl::Set, pos: u32) -> Result<Option<(i64, i64)>, PolyError> {
    let list = set
        .get_basic_set_list()
        .map_err(isl_err("basic_set_list"))?;
    let mut range: Option<(i64, i64)> = None;
    for i in 0..list.size().map_err(isl_err("basic_set_list"))? {
        let part = list.get_at(i).map_err(isl_err("basic_set_list"))?;
        let coordinate = coordinate_of(&part, pos)?;
        let Some(lo) = lp_minimum(&part, &coordinate)? else {
            continue;
        };
        let hi = part
            .max_lp_val(&coordinate)
            .map_err(isl_err("max_lp_val"))?;
        let lo = lo.ceil().map_err(isl_err("ceil"))?;
        let hi = hi.floor().map_err(isl_err("floor"))?;
        let finite = |v: &isl::Val| v.is_int().map_err(isl_err("is_int"));
        if !finite(&lo)? || !finite(&hi)? {
            return Ok(None);
        }
        let lo = lo.get_num_si().map_err(isl_err("get_num_si"))?;
        let hi = hi.get_num_si().map_err(isl_err("get_num_si"))?;
        range = Some(range.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
    }
    Ok(range)
}

/// Dimension `pos` of `part`'s space, as a function on it.
fn coordinate_of(part: &isl::BasicSet, pos: u32) -> Result<isl::Aff, PolyError> {
    part.get_space()
        .and_then(isl::LocalSpace::from_space)
        .and_then(|space| isl::Aff::var_on_domain(space, isl::DimType::Set, pos))
        .map_err(isl_err("var_on_domain"))
}

/// The smallest value of `f` over `part`'s rational relaxation (possibly infinite), `None`
/// where the relaxation is empty.
fn lp_minimum(part: &isl::BasicSet, f: &isl::Aff) -> Result<Option<isl::Val>, PolyError> {
    let lo = part.min_lp_val(f).map_err(isl_err("min_lp_val"))?;
    // NaN: an empty part.
    Ok((!lo.is_nan().map_err(isl_err("is_nan"))?).then_some(lo))
}

/// Whether `part` has no rational point: one linear program (isl's own test where the space
/// has no dimension to minimise).
fn rationally_empty(part: &isl::BasicSet) -> Result<bool, PolyError> {
    if part.plain_is_empty().map_err(isl_err("plain_is_empty"))? {
        return Ok(true);
    }
    if part.dim(isl::DimType::Set).map_err(isl_err("dim"))? == 0 {
        return part.is_empty().map_err(isl_err("is_empty"));
    }
    Ok(lp_minimum(part, &coordinate_of(part, 0)?)?.is_none())
}

/// The basic maps of `map`.
fn basic_maps(map: &isl::Map) -> Result<Vec<isl::BasicMap>, PolyError> {
    let list = map
        .copy()
        .and_then(|m| m.get_basic_map_list())
        .map_err(isl_err("basic_map_list"))?;
    (0..list.size().map_err(isl_err("basic_map_list"))?)
        .map(|i| list.get_at(i).map_err(isl_err("get_at")))
        .collect()
}

/// isl's coalesce of `map`: the same pairs in fewer, merged basic maps. isl can stop it with an
/// internal error ("total dimensionality changed unexpectedly", in its `reduce_coefficients`)
/// on a basic map with rational but no integer points, when tightening the constraints shows
/// the emptiness and takes the divisions away mid-way. [`Map::intersect_relaxed`] keeps such
/// parts, and so do isl's own operations that test no integer emptiness. Then the parts without
/// integer points are dropped (an integer emptiness test each) and isl tries again; where it
/// still fails the map is kept as it is, since coalescing only merges.
pub(crate) fn coalesced(map: &isl::Map) -> Result<isl::Map, PolyError> {
    let first = map
        .copy()
        .and_then(|m| m.coalesce())
        .map_err(isl_err("coalesce"));
    if !matches!(first, Err(PolyError::Isl { .. })) {
        return first;
    }
    let mut kept = map
        .get_space()
        .and_then(isl::Map::empty)
        .map_err(isl_err("empty"))?;
    for part in basic_maps(map)? {
        if !part.is_empty().map_err(isl_err("is_empty"))? {
            kept = isl::Map::from_basic_map(part)
                .and_then(|part| kept.union(part))
                .map_err(isl_err("union"))?;
        }
    }
    match kept
        .copy()
        .and_then(|m| m.coalesce())
        .map_err(isl_err("coalesce"))
    {
        Err(PolyError::Isl { .. }) => Ok(kept),
        again => again,
    }
}
