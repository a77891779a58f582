//! The number of outputs per input of a *window* part: a basic map `t → q` whose outputs are
//! the `q` of an interval `[L(t), U(t)]` whose residue `(a·q + c(t)) mod D` falls in a window
//! `[lo, hi]`. A column walk's lines in one cache set have this shape: row `k` of a matrix with
//! `R`-byte rows lands in the set when `(R·k + c) mod (line × sets)` is below the line size.
//!
//! Why a closed form: isl's parametric minimum of such a part needs the modular inverse of `a`,
//! which it reaches through chains of cuts (22 s for one part of matrix multiply at N = 150 in a
//! 32 KiB L1, whose size is two such minima). The inverse is a constant here, so the count is
//! written down directly. With `g = gcd(a, D)`, `a = g·a′`, `D = g·D′` and `a′·inv ≡ 1 (mod D′)`,
//! the residues in the window that `a·q + c` can take are `lo + g·u + (c − lo) mod g` for
//! `u = 0 … W/g − 1` (`W = hi − lo + 1`, when `g` divides `W`), and the residue of `u` is taken
//! exactly by `q ≡ ρᵤ = inv·(u − ⌊(c − lo)/g⌋) (mod D′)`; the `q` of one class in `[L, U]` number
//! `⌊(U − ρᵤ)/D′⌋ − ⌊(L − 1 − ρᵤ)/D′⌋`. A window wider than half of `D` is counted as the
//! interval's length less its complement's classes (a column walk's set less the target's own
//! line is one class, not `D − 1`). When `g` does not divide the counted width `W = k·g + r`,
//! the residues `a·q + c` can take are those `≡ c (mod g)`, `k + 1` of them where
//! `(c − lo) mod g < r` and `k` elsewhere: the size is written on those two pieces of the inputs
//! (matrix multiply at N = 4000 in a 48 KiB 12-way L1: a window of 8 residues modulo 4000 with
//! `g = 32`, whose parametric minimum isl did not find in minutes). Past 16 classes the size
//! would carry too many divisions, and is left to the caller.

use isl_rs as isl;

use crate::PolyError;
use crate::count::{DivForm, read_constraints, read_divs};
use crate::images::{function_of, graph_parts, int_or_max, output_bounds};
use crate::rational::{Res, ceil_div, floor_div, gcd};
use crate::sets::isl_err;

/// Past this many residue classes the closed form is not written: each class adds two
/// divisions to every set built from the size, which the counter then lifts. A column walk's
/// window has one class per element of a line or fewer.
const MOST_CLASSES: i128 = 16;

/// The residue condition found in a part: `(a·q + c) mod modulus ∈ [lo, hi]`, `c` the
/// numerator of division `div` without its `q` term.
struct Window {
    div: usize,
    a: i128,
    modulus: i128,
    lo: i128,
    hi: i128,
}

/// A window part, read: its residue classes, its interval's ends and the residue's part without
/// `q`, from which its size is written ([`WindowPart::size`]) or bounded ([`WindowPart::most`]).
pub(crate) struct WindowPart {
    classes: Classes,
    names: Names,
    /// The residue's numerator without its `q` term, as isl text.
    c: String,
    lo: isl::PwAff,
    hi: isl::PwAff,
}

/// `part` (one output dimension) read as an interval cut by one residue window; `None` for any
/// other shape.
pub(crate) fn window_part(part: &isl::BasicMap) -> Result<Option<WindowPart>, PolyError> {
    let n_in = part.dim(isl::DimType::In).map_err(isl_err("dim"))? as usize;
    let wrapped = part
        .copy()
        .map_err(isl_err("copy"))?
        .wrap()
        .map_err(isl_err("wrap"))?;
    let Some(divisions) = read_divs(&wrapped)? else {
        return Ok(None);
    };
    let Some(window) = find_window(&wrapped, &divisions, n_in)? else {
        return Ok(None);
    };
    let Some(classes) = Classes::of(&window) else {
        return Ok(None);
    };
    let hull = isl::Map::from_basic_map(
        part.copy()
            .map_err(isl_err("copy"))?
            .drop_constraints_involving_dims(isl::DimType::Div, window.div as u32, 1)
            .map_err(isl_err("drop_constraints"))?,
    )
    .map_err(isl_err("from_basic_map"))?;
    let Some((lo, hi)) = output_bounds(&hull)? else {
        return Ok(None);
    };
    let Some(names) = Names::of(part)? else {
        return Ok(None);
    };
    let c = names.expression(&divisions, window.div, n_in)?;
    Ok(Some(WindowPart {
        classes,
        names,
        c,
        lo,
        hi,
    }))
}

impl WindowPart {
    /// The part's number of outputs per input, as quasi-affine functions on disjoint pieces of
    /// the inputs (none: no input has an output); `None` where an end of the interval has a
    /// piece with no single quasi-affine form. Written per pair of the ends' pieces with
    /// functions alone: isl's sums of piecewise functions intersect their pieces' domains at
    /// every step (1.4 s of the 2 s of writing two column walks' windows at matrix multiply
    /// N = 150 in L1). Left as pieces: joining them into one piecewise function (isl's
    /// `union_add`) simplifies each against its domain's affine hull, which took 8 s for one
    /// window of a random test, and the regions take the pieces apart again anyway.
    pub(crate) fn size(&self) -> Result<Option<Vec<(isl::Set, isl::Aff)>>, PolyError> {
        let (Some(lo_pieces), Some(hi_pieces)) = (pieces(&self.lo)?, pieces(&self.hi)?) else {
            return Ok(None);
        };
        let ctx = self.hi.get_ctx();
        let residues = self.classes.residues(&ctx, &self.names, &self.c)?;
        let gate = self.classes.gate(&ctx, &self.names, &self.c)?;
        let mut size = Vec::new();
        for (lo_inputs, lo) in &lo_pieces {
            for (hi_inputs, hi) in &hi_pieces {
                let Some(inputs) = overlap(lo_inputs, hi_inputs)? else {
                    continue;
                };
                let Some([with, without]) = &gate else {
                    size.push((inputs, self.classes.count(lo, hi, &residues)?));
                    continue;
                };
                if let Some(part) = overlap(&inputs, with)? {
                    size.push((part, self.classes.count(lo, hi, &residues)?));
                }
                if let Some(part) = overlap(&inputs, without)? {
                    let whole = &residues[..residues.len() - 1];
                    size.push((part, self.classes.count(lo, hi, whole)?));
                }
            }
        }
        Ok(Some(size))
    }

    /// The space of the part's size (inputs to one count).
    pub(crate) fn size_space(&self) -> Result<isl::Space, PolyError> {
        self.hi.get_space().map_err(isl_err("space"))
    }

    /// A bound on the part's number of outputs at any input (`i64::MAX`: unbounded), from the
    /// interval's longest span alone, so without the size's divisions (writing the size of a
    /// column walk's window and its largest value took 0.6 s each at matrix multiply N = 150 in
    /// L1). A counted class has at most `⌊span / D′⌋ + 1` points in an interval; a complement's
    /// count is at most the interval's length.
    pub(crate) fn most(&self) -> Result<i64, PolyError> {
        let span = self
            .hi
            .copy()
            .and_then(|hi| hi.sub(self.lo.copy()?))
            .and_then(|span| span.floor())
            .map_err(isl_err("floor"))?;
        let span = match int_or_max(span.max_val())? {
            i64::MAX => return Ok(i64::MAX),
            span => i128::from(span),
        };
        let c = &self.classes;
        let most = match c.complement {
            true => span + 1,
            false => (c.counted + c.g - 1) / c.g * (span.div_euclid(c.period) + 1),
        };
        Ok(i64::try_from(most.max(0)).unwrap_or(i64::MAX))
    }
}

/// The points two sets share; `None` when they share none.
pub(crate) fn overlap(a: &isl::Set, b: &isl::Set) -> Result<Option<isl::Set>, PolyError> {
    let both = a
        .copy()
        .and_then(|a| a.intersect(b.copy()?))
        .map_err(isl_err("intersect"))?;
    Ok((!both.is_empty().map_err(isl_err("is_empty"))?).then_some(both))
}

/// The pieces of a quasi-affine function as (domain, function) pairs; `None` where a piece has
/// no single quasi-affine form.
pub(crate) fn pieces(f: &isl::PwAff) -> Result<Option<Vec<(isl::Set, isl::Aff)>>, PolyError> {
    let parts = graph_parts(f)?;
    let mut pieces = Vec::with_capacity(parts.len());
    for (part, inputs) in parts {
        // The function read from the graph, else `f` simplified on the piece's domain (where
        // it has one piece with the universe for domain). The first keeps the graph's own
        // divisions, whose sets counted faster than the simplified ones' (1.2 s against 2.5 s
        // for matrix multiply at N = 150 in L1).
        let function = match function_of(part, &inputs)? {
            Some(function) => function,
            None => {
                let on_inputs = f
                    .copy()
                    .and_then(|f| f.intersect_domain(inputs.copy()?))
                    .and_then(|f| f.gist(inputs.copy()?))
                    .map_err(isl_err("gist"))?;
                if !on_inputs.isa_aff().map_err(isl_err("isa_aff"))? {
                    return Ok(None);
                }
                on_inputs.as_aff().map_err(isl_err("as_aff"))?
            }
        };
        pieces.push((inputs, function));
    }
    Ok(Some(pieces))
}

/// The residue classes of `q` a window's residues come from.
struct Classes {
    /// The first residue counted; the counted ones are `start, start + 1, …` cyclically.
    start: i128,
    /// How many residues are counted.
    counted: i128,
    /// Whether the counted residues are the window's complement: of a window wider than half
    /// the modulus (a column walk's set less the target's own line) the complement has fewer
    /// classes, so fewer terms, and the size is the interval's length less theirs.
    complement: bool,
    /// `gcd(a, modulus)`.
    g: i128,
    /// `counted mod g`: when not 0, one class more is counted where `(c − start) mod g` is
    /// below it.
    partial: i128,
    /// `modulus / g`, the classes' period `D′`.
    period: i128,
    /// The inverse of `a / g` modulo `D′`.
    inverse: i128,
}

impl Classes {
    fn of(window: &Window) -> Option<Classes> {
        let g = gcd(window.a, window.modulus);
        let width = window.hi - window.lo + 1;
        let (start, counted, complement) = if 2 * width > window.modulus {
            (window.hi + 1, window.modulus - width, true)
        } else {
            (window.lo, width, false)
        };
        if (counted + g - 1) / g > MOST_CLASSES {
            return None;
        }
        let period = window.modulus / g;
        Some(Classes {
            start,
            counted,
            complement,
            g,
            partial: counted % g,
            period,
            inverse: inverse_mod(window.a / g, period)?,
        })
    }

    /// The class `ρᵤ` of each counted residue, as a function of the inputs: residue
    /// `start + g·u + (c − start) mod g` is taken by the class `q ≡ inv·(u − ⌊(c − start)/g⌋)
    /// (mod D′)`, `c` being the residue's part without `q`. With a partial class, the last one
    /// is counted only where [`Classes::gate`] holds.
    fn residues(
        &self,
        ctx: &isl::Context,
        names: &Names,
        c: &str,
    ) -> Result<Vec<isl::Aff>, PolyError> {
        let Classes {
            start,
            g,
            period,
            inverse,
            ..
        } = self;
        (0..(self.counted + g - 1) / g)
            .map(|u| {
                names
                    .function(
                        ctx,
                        &format!("({inverse}*({u} - floor(({c} - ({start}))/{g}))) mod {period}"),
                    )?
                    .as_aff()
                    .map_err(isl_err("as_aff"))
            })
            .collect()
    }

    /// The inputs where the partial class is counted, and those where it is not: `None` when
    /// every class is whole.
    fn gate(
        &self,
        ctx: &isl::Context,
        names: &Names,
        c: &str,
    ) -> Result<Option<[isl::Set; 2]>, PolyError> {
        if self.partial == 0 {
            return Ok(None);
        }
        let (start, g, r) = (self.start, self.g, self.partial);
        let residue = format!("({c} - ({start})) mod {g}");
        Ok(Some([
            names.set(ctx, &format!("{residue} < {r}"))?,
            names.set(ctx, &format!("{residue} >= {r}"))?,
        ]))
    }

    /// The number of `q` in `[lo, hi]` whose residue is counted (or, for a complement, not).
    fn count(
        &self,
        lo: &isl::Aff,
        hi: &isl::Aff,
        residues: &[isl::Aff],
    ) -> Result<isl::Aff, PolyError> {
        let ctx = lo.get_ctx();
        let copy = |f: &isl::Aff| f.copy().map_err(isl_err("copy"));
        // The interval's length for a complement, else zero.
        let mut total = match self.complement {
            true => copy(hi)?
                .sub(copy(lo)?)
                .and_then(|len| len.add_constant_val(isl::Val::one(&ctx)?)),
            false => copy(hi)?.sub(copy(hi)?),
        }
        .map_err(isl_err("sub"))?;
        for rho in residues {
            let term = class_count(lo, hi, rho, self.period, &ctx)?;
            total = match self.complement {
                true => total.sub(term),
                false => total.add(term),
            }
            .map_err(isl_err("add"))?;
        }
        Ok(total)
    }
}

/// `⌊(U − ρ)/m⌋ − ⌊(L − 1 − ρ)/m⌋`: the integers of `[L, U]` congruent to `ρ` modulo `m`.
fn class_count(
    lo: &isl::Aff,
    hi: &isl::Aff,
    rho: &isl::Aff,
    m: i128,
    ctx: &isl::Context,
) -> Result<isl::Aff, PolyError> {
    let val = |v: i128| -> Result<isl::Val, PolyError> {
        let v = i64::try_from(v).map_err(|_| PolyError::Overflow { context: "window" })?;
        isl::Val::int_from_si(ctx, v).map_err(isl_err("val"))
    };
    let (m_up, m_down, minus_one) = (val(m)?, val(m)?, val(-1)?);
    let rho = || rho.copy().map_err(isl_err("copy"));
    let upper = hi
        .copy()
        .map_err(isl_err("copy"))?
        .sub(rho()?)
        .and_then(|x| x.scale_down_val(m_up))
        .and_then(|x| x.floor())
        .map_err(isl_err("class_count"))?;
    let rho_again = rho()?;
    let lower = lo
        .copy()
        .map_err(isl_err("copy"))?
        .add_constant_val(minus_one)
        .and_then(|x| x.sub(rho_again))
        .and_then(|x| x.scale_down_val(m_down))
        .and_then(|x| x.floor())
        .map_err(isl_err("class_count"))?;
    upper.sub(lower).map_err(isl_err("class_count"))
}

/// `x` with `a·x ≡ 1 (mod m)`, for `a` prime to `m`.
fn inverse_mod(a: i128, m: i128) -> Option<i128> {
    if m == 1 {
        return Some(0);
    }
    let (mut r0, mut r1) = (a.rem_euclid(m), m);
    let (mut s0, mut s1) = (1i128, 0i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (s0, s1) = (s1, s0 - q * s1);
    }
    (r0 == 1).then(|| s0.rem_euclid(m))
}

/// The one division involving the output `q` (directly: one nested in another is not a
/// window) and the residue window its constraints cut, if every constraint on it is a bound
/// on its residue `numerator − denominator·div`.
fn find_window(
    wrapped: &isl::BasicSet,
    divisions: &[DivForm],
    n_in: usize,
) -> Result<Option<Window>, PolyError> {
    let on_q: Vec<usize> = (0..divisions.len())
        .filter(|&j| divisions[j].numerator.dims[n_in] != 0)
        .collect();
    let [div] = on_q[..] else {
        return Ok(None);
    };
    if divisions.iter().any(|d| d.numerator.divs[div] != 0) {
        return Ok(None);
    }
    let (n, den) = (&divisions[div].numerator, divisions[div].denominator);
    let (mut lo, mut hi) = (0, den - 1);
    for row in read_constraints(wrapped)?
        .iter()
        .filter(|r| r.form.divs[div] != 0)
    {
        // The row must be λ·σ·(numerator − D·div) + k with σ = ±1, λ > 0.
        let f = &row.form;
        let scaled = -f.divs[div];
        if scaled % den != 0 {
            return Ok(None);
        }
        let lambda_sigma = scaled / den;
        let multiple =
            |r: &[i128], n: &[i128]| r.iter().zip(n).all(|(r, n)| *r == lambda_sigma * n);
        let divs_multiple = f
            .divs
            .iter()
            .zip(&n.divs)
            .enumerate()
            .all(|(k, (r, n))| k == div || *r == lambda_sigma * n);
        if !(multiple(&f.dims, &n.dims) && multiple(&f.params, &n.params) && divs_multiple) {
            return Ok(None);
        }
        let k = f.constant - lambda_sigma * n.constant;
        let lambda = lambda_sigma.abs();
        if row.equality {
            // σλ·residue = −k.
            if k % lambda != 0 {
                return Ok(None);
            }
            let value = -k / lambda_sigma;
            lo = lo.max(value);
            hi = hi.min(value);
        } else if lambda_sigma > 0 {
            lo = lo.max(ceil_div(-k, lambda));
        } else {
            hi = hi.min(floor_div(k, lambda));
        }
    }
    if lo > hi || (lo == 0 && hi == den - 1) {
        return Ok(None);
    }
    Ok(Some(Window {
        div,
        a: n.dims[n_in],
        modulus: den,
        lo,
        hi,
    }))
}

/// The names a part's parameters and inputs are written with in isl text.
struct Names {
    params: Vec<String>,
    inputs: Vec<String>,
}

impl Names {
    /// The names, `None` when a dimension has none: isl text needs a name for each, and one
    /// made up here could give the size a space that differs from the bounds' (a part of the
    /// analysis always has its dimensions named; the window is then left to the caller).
    fn of(part: &isl::BasicMap) -> Result<Option<Names>, PolyError> {
        let named = |kind: isl::DimType| -> Result<Option<Vec<String>>, PolyError> {
            let n = part.dim(kind).map_err(isl_err("dim"))?;
            Ok((0..n as u32)
                .map(|i| part.get_dim_name(kind, i).ok().map(str::to_string))
                .collect())
        };
        Ok(named(isl::DimType::Param)?
            .zip(named(isl::DimType::In)?)
            .map(|(params, inputs)| Names { params, inputs }))
    }

    /// Numerator of division `j` without its `q` term, as isl text over the inputs.
    fn expression(&self, divisions: &[DivForm], j: usize, n_in: usize) -> Res<String> {
        let d = &divisions[j].numerator;
        let mut terms: Vec<String> = Vec::new();
        for (name, c) in self.inputs.iter().zip(&d.dims[..n_in]) {
            if *c != 0 {
                terms.push(format!("{c}*{name}"));
            }
        }
        for (name, c) in self.params.iter().zip(&d.params) {
            if *c != 0 {
                terms.push(format!("{c}*{name}"));
            }
        }
        for (k, c) in d.divs.iter().enumerate() {
            if *c != 0 {
                let inner = self.expression(divisions, k, n_in)?;
                let den = divisions[k].denominator;
                terms.push(format!("{c}*floor(({inner})/{den})"));
            }
        }
        terms.push(d.constant.to_string());
        Ok(terms.join(" + "))
    }

    /// isl text of the inputs (with the parameters) followed by `body`.
    fn over_inputs(&self, body: &str) -> String {
        format!(
            "[{}] -> {{ [{}]{body} }}",
            self.params.join(", "),
            self.inputs.join(", ")
        )
    }

    /// The inputs that satisfy `condition` (isl text over the inputs).
    fn set(&self, ctx: &isl::Context, condition: &str) -> Result<isl::Set, PolyError> {
        let text = self.over_inputs(&format!(" : {condition}"));
        isl::Set::read_from_str(ctx, &text).map_err(|e| PolyError::Parse {
            text,
            message: e.to_string(),
        })
    }

    /// A quasi-affine function of the inputs from its isl text.
    fn function(&self, ctx: &isl::Context, body: &str) -> Result<isl::PwAff, PolyError> {
        let text = self.over_inputs(&format!(" -> [({body})]"));
        isl::PwAff::read_from_str(ctx, &text).map_err(|e| PolyError::Parse {
            text,
            message: e.to_string(),
        })
    }
}
