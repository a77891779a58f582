//! How many outputs each input of a one-dimensional map has, compared with small numbers,
//! without enumerating the outputs and without a chain of lexmins.
//!
//! The map is split into disjoint basic maps, and each one's number of outputs per input is
//! written as a quasi-affine function of the input where its shape allows: an interval cut by a
//! window of residues (a column walk's lines in one cache set, [`crate::window`]), an interval
//! (`max − min + 1`), every `m`-th point of one (`(max − min)/m + 1`, `m` the output's stride),
//! or an interval less holes of those shapes. The sizes are added, either per region of the
//! inputs where each part's size is one function (regions whose pieces' largest values cannot
//! add up to `d` are dropped unseen) or as one piecewise function, and compared with `d`. A lexmin
//! and a lexmax per basic map replace `d − 1` lexmins of the whole union, whose pieces multiply
//! with every step (each lexmin of a union compares every pair of basic maps' minima). Parts of other shapes (two residue conditions, an existential isl has no
//! expression for, a window whose classes depend on the input) leave the answer unknown, and the
//! caller peels.

use isl_rs as isl;

use crate::PolyError;
use crate::sets::{Map, Set, coalesced, isl_err};
use crate::window::{WindowPart, overlap, window_part};

/// Past this many disjoint basic maps the split is not tried (the caller's own method is then
/// cheaper than the sum's pieces: at 32, the 3D stencil 20 × 40 at L1, whose three largest tag
/// maps have 27–28 parts, took 3.1 s on one core instead of 1.6 s).
const MOST_BASIC_MAPS: i32 = 16;

impl<'c> Map<'c> {
    /// For a map with one output dimension: for each `d` of `counts`, the inputs with at least
    /// `d` outputs; `None` when some disjoint part is none of the shapes whose size is known (or
    /// the map has too many parts, or its parts' sizes cut the inputs into too many regions).
    pub fn inputs_with_at_least(&self, counts: &[u32]) -> Result<Option<Vec<Set<'c>>>, PolyError> {
        // Coalesced first: overlapping parts of one array's sweep merge before they are cut
        // apart, so there are fewer disjoint parts to size and add (matrix multiply at N = 1300
        // in L1: 4.4 → 1.1 s; the 3D stencil at 80 × 300 in L2: 24 parts, over the bound and
        // peeled, became 12, sized: 3.4 → 2.3 s).
        let disjoint = coalesced(&self.raw_copy()?)?
            .make_disjoint()
            .map_err(isl_err("make_disjoint"))?;
        let list = disjoint
            .get_basic_map_list()
            .map_err(isl_err("basic_map_list"))?;
        let parts = list.size().map_err(isl_err("basic_map_list"))?;
        if parts > MOST_BASIC_MAPS {
            return Ok(None);
        }
        if parts == 0 {
            // No pair at all: no input has any output.
            let empty = self.domain()?;
            return counts
                .iter()
                .map(|_| empty.copy())
                .collect::<Result<Vec<_>, _>>()
                .map(Some);
        }
        let mut shapes = Vec::with_capacity(parts as usize);
        for i in 0..parts {
            let part = list.get_at(i).map_err(isl_err("get_at"))?;
            let Some(shape) = part_shape(part, HOLE_DEPTH)? else {
                return Ok(None);
            };
            shapes.push(shape);
        }
        if below_every_count(&shapes, counts)? {
            let empty = self.domain()?.subtract(&self.domain()?)?;
            return counts
                .iter()
                .map(|_| empty.copy())
                .collect::<Result<Vec<_>, _>>()
                .map(Some);
        }
        let mut sizes = Vec::with_capacity(shapes.len());
        for shape in shapes {
            let Some(size) = shape.size()? else {
                return Ok(None);
            };
            sizes.push(size);
        }
        at_least_per_region(&sizes, counts)
    }
}

/// Past this many regions the sizes are not compared (the caller peels the tags instead).
const MOST_REGIONS: usize = 256;

/// A region of the inputs where every part's size is one quasi-affine function, and their sum
/// (`None`: no part has outputs there).
struct Region {
    inputs: isl::Set,
    sum: Option<isl::Aff>,
    /// The sum of the pieces' largest values (`i64::MAX`: unbounded), so that a region whose
    /// sum cannot reach `d` is left out without an integer emptiness test on the sum's
    /// divisions (seconds each for a column walk's windows).
    most: i64,
}

impl Region {
    /// The non-empty parts of the region inside each piece of a size (whose pieces cover
    /// `domain`), with the piece's function added, and the part outside `domain`, into `out`;
    /// only those whose largest sum so far is at least `needed` (what the sizes still to come
    /// cannot make up for).
    fn split(
        self,
        pieces: &[SizePiece],
        domain: &isl::Set,
        needed: i128,
        out: &mut Vec<Region>,
    ) -> Result<(), PolyError> {
        for piece in pieces {
            if i128::from(self.most) + i128::from(piece.most) < needed {
                continue;
            }
            let Some(inputs) = overlap(&self.inputs, &piece.inputs)? else {
                continue;
            };
            let aff = piece.size.copy().map_err(isl_err("copy"))?;
            let sum = match &self.sum {
                Some(sum) => sum.copy().and_then(|s| s.add(aff)),
                None => Ok(aff),
            }
            .map_err(isl_err("add"))?;
            out.push(Region {
                inputs,
                sum: Some(sum),
                most: self.most.saturating_add(piece.most),
            });
        }
        if i128::from(self.most) < needed {
            return Ok(());
        }
        let outside = self
            .inputs
            .subtract(domain.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("subtract"))?;
        if !outside.is_empty().map_err(isl_err("is_empty"))? {
            out.push(Region {
                inputs: outside,
                sum: self.sum,
                most: self.most,
            });
        }
        Ok(())
    }
}

/// One piece of a part's size: where it holds, the function, and its largest value there (or a
/// bound on it from above: the regions use it only to leave out sums that cannot reach `d`).
struct SizePiece {
    inputs: isl::Set,
    size: isl::Aff,
    most: i64,
}

impl SizePiece {
    /// The piece, with its largest value found by isl.
    fn new(inputs: isl::Set, size: isl::Aff) -> Result<SizePiece, PolyError> {
        let most = int_or_max(inputs.max_val(&size))?;
        Ok(SizePiece { inputs, size, most })
    }

    fn copy(&self) -> Result<SizePiece, PolyError> {
        Ok(SizePiece {
            inputs: self.inputs.copy().map_err(isl_err("copy"))?,
            size: self.size.copy().map_err(isl_err("copy"))?,
            most: self.most,
        })
    }
}

/// For each `d` of `counts`, the inputs where the parts' sizes (each 0 outside its domain) add
/// up to at least `d`; `None` past [`MOST_REGIONS`] or where a size piece has no quasi-affine
/// form. The inputs are split into regions by each size's pieces and its outside, keeping
/// the non-empty ones, and the sums are added per region. isl's `union_add` does the same split
/// but simplifies every piece's function against its domain's affine hull, which for windows'
/// sizes with a dozen divisions each took a minute (matrix multiply at N = 150 in L1: five
/// parts, 62 s added by `union_add`, 0.1 s split here). Since tag maps are coalesced before
/// they are cut into parts, the regions are few for every kernel measured: against sizes
/// added by `union_add` where there were more than four parts, triangular at N = 2300 in L1
/// (five parts) went 1.16 → 0.88 s and the 3D stencil at 80 × 300 in L2 2.2 → 1.8 s, and
/// `union_add` is no longer used here.
fn at_least_per_region<'c>(
    sizes: &[Count],
    counts: &[u32],
) -> Result<Option<Vec<Set<'c>>>, PolyError> {
    let Some(first) = sizes.first() else {
        return Ok(None);
    };
    let space = first.domain_space()?;
    let mut regions = vec![Region {
        inputs: isl::Set::universe(space.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("universe"))?,
        sum: None,
        most: 0,
    }];
    let mut all_pieces = Vec::with_capacity(sizes.len());
    for size in sizes {
        let Some(pieces) = size.pieces()? else {
            return Ok(None);
        };
        all_pieces.push(pieces);
    }
    // A region is kept only while its largest sum, with the largest values of the sizes still
    // to come, can reach the smallest `d`; the sizes go largest first, so hopeless regions go
    // early, before isl intersects and tests them.
    let largest: Vec<i128> = all_pieces
        .iter()
        .map(|pieces| {
            let most = pieces.iter().map(|p| p.most.max(0)).max().unwrap_or(0);
            i128::from(most)
        })
        .collect();
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(largest[i]));
    let smallest_d = i128::from(counts.iter().copied().min().unwrap_or(0));
    let mut to_come: i128 = largest.iter().sum();
    for i in order {
        let (size, pieces) = (&sizes[i], &all_pieces[i]);
        to_come -= largest[i];
        let needed = smallest_d - to_come;
        let domain = size.domain()?;
        let mut next = Vec::with_capacity(regions.len() * (pieces.len() + 1));
        for region in regions {
            region.split(pieces, &domain, needed, &mut next)?;
            if next.len() > MOST_REGIONS {
                return Ok(None);
            }
        }
        regions = next;
    }
    counts
        .iter()
        .map(|&d| at_least_in_regions(&regions, &space, d))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The inputs (of `space`) of `regions` whose sum is at least `d`. Each part is a basic set of
/// a region cut by one half-space, kept without isl's integer emptiness test (which `intersect`
/// does for every pair): a cut that leaves nothing is a basic set the counter finds empty. The
/// test cost more than the count on the divisions of a column walk's window sizes (matrix
/// multiply at N = 150 in L1: two regions, 0.54 s to intersect, 0.16 s to count what came out).
fn at_least_in_regions<'c>(
    regions: &[Region],
    space: &isl::Space,
    d: u32,
) -> Result<Set<'c>, PolyError> {
    let mut out = space
        .copy()
        .and_then(isl::Set::empty)
        .map_err(isl_err("empty"))?;
    for region in regions {
        let Some(sum) = &region.sum else { continue };
        if region.most < i64::from(d) {
            continue;
        }
        let bound = isl::Aff::val_on_domain_space(
            sum.get_domain_space().map_err(isl_err("domain_space"))?,
            isl::Val::int_from_si(&sum.get_ctx(), i64::from(d)).map_err(isl_err("val"))?,
        )
        .map_err(isl_err("val_on_domain"))?;
        let half = sum
            .copy()
            .and_then(|s| s.ge_basic_set(bound))
            .map_err(isl_err("ge_set"))?;
        let list = region
            .inputs
            .get_basic_set_list()
            .map_err(isl_err("basic_set_list"))?;
        for i in 0..list.size().map_err(isl_err("basic_set_list"))? {
            let part = list
                .get_at(i)
                .and_then(|b| b.intersect(half.copy()?))
                .and_then(isl::Set::from_basic_set)
                .map_err(isl_err("intersect"))?;
            out = out.union(part).map_err(isl_err("union"))?;
        }
    }
    Ok(Set::wrap(out))
}

/// The basic maps of a quasi-affine function's graph, each with its domain.
pub(crate) fn graph_parts(f: &isl::PwAff) -> Result<Vec<(isl::BasicMap, isl::Set)>, PolyError> {
    let graph = f
        .copy()
        .and_then(|f| f.as_map())
        .and_then(|g| g.get_basic_map_list())
        .map_err(isl_err("as_map"))?;
    let n = graph.size().map_err(isl_err("basic_map_list"))?;
    let mut parts = Vec::with_capacity(n as usize);
    for i in 0..n {
        let part = graph.get_at(i).map_err(isl_err("get_at"))?;
        // Explicit divisions: the regions intersect the same domains many times, and isl
        // merges equal divisions but not equal existentials (ten copies of one made an
        // intersection take seconds).
        let inputs = part
            .copy()
            .and_then(|p| p.domain())
            .and_then(isl::Set::from_basic_set)
            .and_then(|s| s.compute_divs())
            .map_err(isl_err("domain"))?;
        parts.push((part, inputs));
    }
    Ok(parts)
}

/// A largest value as an integer, `i64::MAX` where it is unbounded.
/// A largest value as a bound: `i64::MAX` where it is not an integer, or where isl could not
/// take it (isl maximises integer expressions only, and a window's size with divisions of
/// symbolic parameters need not be one).
pub(crate) fn int_or_max(most: Result<isl::Val, isl::LibISLError>) -> Result<i64, PolyError> {
    let Ok(most) = most else {
        return Ok(i64::MAX);
    };
    match most.is_int().map_err(isl_err("is_int"))? {
        true => most.get_num_si().map_err(isl_err("get_num_si")),
        false => Ok(i64::MAX),
    }
}

/// The function whose graph on `inputs` is `part`, as one integer quasi-affine expression;
/// `None` where isl finds none.
pub(crate) fn function_of(
    part: isl::BasicMap,
    inputs: &isl::Set,
) -> Result<Option<isl::Aff>, PolyError> {
    // Without the constraints on the inputs alone the graph is a total function, which isl
    // turns into one quasi-affine expression (it equals the piece's on `inputs`), unless a
    // division of the output was defined by the constraints dropped.
    let graph = part
        .drop_constraints_not_involving_dims(isl::DimType::Out, 0, 1)
        .and_then(isl::Map::from_basic_map)
        .map_err(isl_err("drop_constraints"))?;
    if !graph
        .is_single_valued()
        .map_err(isl_err("is_single_valued"))?
    {
        return Ok(None);
    }
    let function = graph
        .as_pw_multi_aff()
        .map_err(isl_err("as_pw_multi_aff"))?;
    // A stride's count keeps the condition that a multiple lies in the window; it holds on
    // `inputs`, where the function is used.
    let function = match function.isa_multi_aff().map_err(isl_err("isa_multi_aff"))? {
        true => function,
        false => function
            .gist(inputs.copy().map_err(isl_err("copy"))?)
            .map_err(isl_err("gist"))?,
    };
    if !function.isa_multi_aff().map_err(isl_err("isa_multi_aff"))? {
        return Ok(None);
    }
    // The gist may leave rational coefficients that are integral on `inputs` only; the floor
    // keeps those values and gives isl's integer programs an integer function.
    function
        .as_multi_aff()
        .and_then(|f| f.get_at(0))
        .and_then(|a| a.floor())
        .map(Some)
        .map_err(isl_err("as_multi_aff"))
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
fn part_size(part: isl::BasicMap, depth: u32) -> Result<Option<Count>, PolyError> {
    match part_shape(part, depth)? {
        Some(shape) => shape.size(),
        None => Ok(None),
    }
}

/// [`part_size`], with a window's size left unwritten until asked for.
fn part_shape(part: isl::BasicMap, depth: u32) -> Result<Option<Shape>, PolyError> {
    if let Some(window) = window_part(&part)? {
        return Ok(Some(Shape::Window(Box::new(window))));
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
            .map(Shape::plain)
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
                .map(Shape::plain)
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
    let mut count = Count::Function(
        span.add_constant_val(int(1)?)
            .map_err(isl_err("add_constant_val"))?,
    );
    for i in 0..n {
        let hole = holes.get_at(i).map_err(isl_err("get_at"))?;
        let Some(hole_size) = part_size(hole, depth - 1)? else {
            return Ok(None);
        };
        count = count.less(&hole_size)?;
    }
    Ok(Some(Shape::Sized(count)))
}

/// A part's number of outputs per input (0 outside its domain).
enum Count {
    /// One piecewise quasi-affine function.
    Function(isl::PwAff),
    /// A window's size as written: functions on disjoint pieces of the inputs
    /// ([`WindowPart::size`]), and the space of the function they make.
    Pieces {
        pieces: Vec<SizePiece>,
        space: isl::Space,
    },
}

impl Count {
    /// The size as one piecewise function (a window's pieces joined by isl's `union_add`).
    fn function(&self) -> Result<isl::PwAff, PolyError> {
        match self {
            Count::Function(f) => f.copy().map_err(isl_err("copy")),
            Count::Pieces { pieces, space } => {
                let empty = space.copy().and_then(isl::PwAff::empty);
                pieces
                    .iter()
                    .try_fold(empty.map_err(isl_err("empty"))?, |f, p| {
                        f.union_add(isl::PwAff::alloc(p.inputs.copy()?, p.size.copy()?)?)
                    })
                    .map_err(isl_err("union_add"))
            }
        }
    }

    /// The size less a hole's (0 outside the hole's domain). Two functions are subtracted by
    /// isl; where either is a window's pieces, the result is pieces too, written per pair of
    /// pieces: joining a window's pieces first (`union_add`) took 8 s for one hole of a random
    /// test.
    fn less(self, hole: &Count) -> Result<Count, PolyError> {
        let written = match (&self, hole) {
            (Count::Function(_), Count::Function(_)) => None,
            // A function without quasi-affine pieces is subtracted by isl as a whole.
            _ => self.pieces()?.zip(hole.pieces()?),
        };
        let Some((outer, inner)) = written else {
            let negated = hole.function()?.neg().map_err(isl_err("neg"))?;
            let f = self.function()?.union_add(negated);
            return f.map(Count::Function).map_err(isl_err("union_add"));
        };
        // A hole lies inside the interval it is cut from, so the interval's pieces cover it.
        let mut pieces = Vec::with_capacity(outer.len() * (inner.len() + 1));
        for piece in outer {
            let mut rest = piece.inputs.copy().map_err(isl_err("copy"))?;
            for hole in &inner {
                let Some(both) = overlap(&piece.inputs, &hole.inputs)? else {
                    continue;
                };
                rest = rest
                    .subtract(hole.inputs.copy().map_err(isl_err("copy"))?)
                    .map_err(isl_err("subtract"))?;
                let less = piece.size.copy().and_then(|s| s.sub(hole.size.copy()?));
                // A hole's size is not negative, so the piece's largest value bounds the
                // difference from above, which is all the regions ask of it (isl's maximum of
                // each difference was half of a random test's 6 s).
                pieces.push(SizePiece {
                    inputs: both,
                    size: less.map_err(isl_err("sub"))?,
                    most: piece.most,
                });
            }
            if !rest.is_empty().map_err(isl_err("is_empty"))? {
                pieces.push(SizePiece {
                    inputs: rest,
                    ..piece
                });
            }
        }
        Ok(Count::Pieces {
            pieces,
            space: self.space()?,
        })
    }

    fn space(&self) -> Result<isl::Space, PolyError> {
        match self {
            Count::Function(f) => f.get_space().map_err(isl_err("space")),
            Count::Pieces { space, .. } => space.copy().map_err(isl_err("copy")),
        }
    }

    /// The pieces with their largest values; `None` where a piece of a function has no single
    /// quasi-affine form.
    fn pieces(&self) -> Result<Option<Vec<SizePiece>>, PolyError> {
        match self {
            Count::Function(f) => match crate::window::pieces(f)? {
                Some(pieces) => pieces
                    .into_iter()
                    .map(|(inputs, size)| SizePiece::new(inputs, size))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                None => Ok(None),
            },
            Count::Pieces { pieces, .. } => pieces
                .iter()
                .map(SizePiece::copy)
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }

    /// The largest value (`i64::MAX`: unbounded), or for pieces a bound on it from above.
    fn most(&self) -> Result<i64, PolyError> {
        match self {
            Count::Function(f) => {
                int_or_max(f.copy().and_then(|f| f.floor()).and_then(|f| f.max_val()))
            }
            Count::Pieces { pieces, .. } => Ok(pieces.iter().map(|p| p.most).max().unwrap_or(0)),
        }
    }

    /// The inputs where the size is defined.
    fn domain(&self) -> Result<isl::Set, PolyError> {
        match self {
            Count::Function(f) => f.copy().and_then(|f| f.domain()),
            Count::Pieces { pieces, space } => {
                let none = space
                    .copy()
                    .and_then(|s| s.domain())
                    .and_then(isl::Set::empty);
                pieces
                    .iter()
                    .try_fold(none.map_err(isl_err("empty"))?, |domain, p| {
                        domain.union(p.inputs.copy()?)
                    })
            }
        }
        .map_err(isl_err("domain"))
    }

    fn domain_space(&self) -> Result<isl::Space, PolyError> {
        match self {
            Count::Function(f) => f.get_domain_space(),
            Count::Pieces { space, .. } => space.copy().and_then(|s| s.domain()),
        }
        .map_err(isl_err("domain_space"))
    }
}

/// A part's number of outputs per input, or the window it is read from.
enum Shape {
    Window(Box<WindowPart>),
    Sized(Count),
}

impl Shape {
    fn plain(count: isl::PwAff) -> Option<Shape> {
        Some(Shape::Sized(Count::Function(count)))
    }

    /// The size; `None` where a window's has no quasi-affine form.
    fn size(self) -> Result<Option<Count>, PolyError> {
        match self {
            Shape::Window(window) => {
                let Some(written) = window.size()? else {
                    return Ok(None);
                };
                let pieces = written
                    .into_iter()
                    .map(|(inputs, size)| SizePiece::new(inputs, size))
                    .collect::<Result<Vec<_>, _>>()?;
                let space = window.size_space()?;
                Ok(Some(Count::Pieces { pieces, space }))
            }
            Shape::Sized(size) => Ok(Some(size)),
        }
    }

    /// The largest number of outputs of one input (`i64::MAX`: unbounded), bounded from above
    /// for a window.
    fn most(&self) -> Result<i64, PolyError> {
        match self {
            Shape::Window(window) => window.most(),
            Shape::Sized(size) => size.most(),
        }
    }
}

/// Whether the parts' largest sizes add up to less than every count, so that no input has as
/// many outputs: the test of a level whose sets each receive fewer lines than it has ways
/// (matrix multiply at N = 150 in L1, where `a`'s misses have the column walk of `b` between
/// hit source and target, four lines of it per set), decided without writing any window's size.
fn below_every_count(shapes: &[Shape], counts: &[u32]) -> Result<bool, PolyError> {
    let Some(&smallest) = counts.iter().min() else {
        return Ok(false);
    };
    let mut most = 0i128;
    for shape in shapes {
        most += i128::from(shape.most()?.max(0));
        if most >= i128::from(smallest) {
            return Ok(false);
        }
    }
    Ok(true)
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
