//! Steps S2–S55 of spec 000 for one target reference: the sets whose point counts give the
//! compulsory and conflict misses. The sets are built once, with the parameters symbolic; the
//! counts are taken later at concrete parameter values ([`crate::evaluate`]).

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use loopscope_polyhedral::{Ctx, Map, Set};

use crate::AnalyticError;
use crate::program::{Cache, Position, Program};
use crate::text::{L, Q, S, W, before, domain, in_block, in_line, params, tuple};

/// Up to this associativity the fourth counts are built as the patent does (S31–S33, one
/// common expression per combination of split expressions). Above it the combinations grow as
/// C(M + K − 1, K − 1) and are skipped: the conflict misses come from [`Piece::conflicted`],
/// which equals Σ third − Σ fourth (spec 000 §3.7: under LRU an execution misses exactly when at
/// least K distinct other blocks of its set came in since its hit source, and S42's ordered
/// subtraction makes Σ_m d_m that distinct count).
pub(crate) const COMBINATION_WAYS: u32 = 4;

/// The tag strides tried for runs of sure misses ([`Builder::all_surely_miss`]) besides 1: the
/// smallest few the tag map's parts keep.
const MOST_STRIDES: usize = 2;

/// One lexmax piece of one earlier position's hit condition (a hit-source candidate, S5).
pub(crate) struct Candidate<'c> {
    pub label: String,
    pub position: usize,
    pub map: Map<'c>,
    pub domain: Set<'c>,
}

/// A fourth-count term: the executions where the distinct evicting blocks per position are
/// exactly `per_position` (one entry per position, in position order) and sum below the ways.
pub(crate) struct Combination<'c> {
    pub per_position: Vec<u32>,
    pub set: Set<'c>,
}

/// Per evicting position, the rows it evicts from (`J′_{n,m}`; above [`COMBINATION_WAYS`],
/// where S42's subtraction of tag maps is skipped, `dom H′_{n,m}`) and the third-count sets
/// `J″_{n,m}`.
pub(crate) struct Rows<'c> {
    pub evictors: Vec<Set<'c>>,
    pub evicted: Vec<Set<'c>>,
}

/// A hit-source expression `C_n` and its conflict sets.
pub(crate) struct Piece<'c> {
    pub candidates: Vec<usize>,
    pub set: Set<'c>,
    /// `Z_{n,c}`, computed when the associativity is at most [`COMBINATION_WAYS`].
    pub still_cached: Vec<Combination<'c>>,
    /// Above [`COMBINATION_WAYS`], the executions with at least `ways` distinct other blocks of
    /// their set accessed since the hit source: the conflict misses of the piece (at most four
    /// ways they are `Σ third − Σ fourth`).
    pub conflicted: Option<Set<'c>>,
    /// [`Piece::rows`], filled when the piece is built up to [`COMBINATION_WAYS`] (the
    /// combinations need them) and on first use above.
    rows: OnceCell<Rows<'c>>,
    /// `H′_{n,m}` per position (S41, before S42 gives each tag to one position): target
    /// instance → tags of the other blocks position `m` brings into the set between the hit
    /// source and the target. Its domain is where `m` competes with the target, whether or not
    /// an earlier position brought the same block too; kept for the conflict sources.
    pub competing: Vec<Map<'c>>,
}

impl<'c> Piece<'c> {
    /// The piece's [`Rows`]. Above the combinations' ways they are detail (third counts,
    /// `--explain`), derived here on first use: `J″_{n,m} = dom H′_{n,m} − ∪_{m′<m} dom H′_{n,m′}`
    /// equals S42's `dom J_{n,m} − ∪_{m′<m} dom J_{n,m′}` (both unions are the rows with a tag
    /// from a position up to `m`, and a row of dom H′_{n,m} outside dom J_{n,m} has its tag from
    /// an earlier one).
    pub fn rows(&self) -> Result<&Rows<'c>, AnalyticError> {
        if let Some(rows) = self.rows.get() {
            return Ok(rows);
        }
        let (mut evictors, mut evicted) = (Vec::new(), Vec::new());
        let mut seen = None;
        for h in &self.competing {
            let rows = h.domain()?;
            evicted.push(first_seen_here(&rows, &mut seen)?);
            evictors.push(rows);
        }
        Ok(self.rows.get_or_init(|| Rows { evictors, evicted }))
    }

    /// A piece at a level where nothing is evicted: no conflict sets, no conflict misses.
    fn without_conflicts(set: Set<'c>, candidates: Vec<usize>) -> Result<Piece<'c>, AnalyticError> {
        Ok(Piece {
            candidates,
            conflicted: Some(set.subtract(&set)?),
            set,
            still_cached: Vec::new(),
            rows: OnceCell::new(),
            competing: Vec::new(),
        })
    }
}

/// Everything the counts of one target need.
pub(crate) struct TargetSets<'c> {
    pub target: usize,
    pub executions: Set<'c>,
    pub candidates: Vec<Candidate<'c>>,
    pub pieces: Vec<Piece<'c>>,
}

/// S3–S11 of one target, which depend on the line size alone: the hit-source candidates and
/// the Venn regions of their domains, over `[t…, l__]` (a target instance and its line).
/// [`build`] lifts them to a level's `[t…, w__, s__]`, so the levels that share a line size
/// build them once. Over the line they also cost less than over tag and set, which isl must
/// relate to the address through two divisions instead of one (each level alone, the 3D
/// stencil at 80 × 300: L1 0.90 → 0.67 s, L2 1.10 → 0.83 s, L3 0.58 → 0.38 s, on 32 KiB 8-way,
/// 1 MiB 8-way and 32 MiB 16-way caches).
pub(crate) struct LineSets<'c> {
    target: usize,
    line_bytes: i64,
    candidates: Vec<Candidate<'c>>,
    regions: Vec<(Set<'c>, Vec<usize>)>,
}

/// Builds the [`LineSets`] of `target` for lines of `line_bytes`.
pub(crate) fn build_lines<'c>(
    ctx: &'c Ctx,
    program: &Program,
    positions: &[Position],
    line_bytes: i64,
    target: usize,
    deadline: Option<(Instant, Duration)>,
) -> Result<LineSets<'c>, AnalyticError> {
    let t = &positions[target];
    let mut target_tuple = tuple("t", t);
    target_tuple.push(L.into());
    let target_constraints = format!(
        "{} and {}",
        domain(t, "t"),
        in_line(t, &program.arrays[t.array], "t", line_bytes, L)
    );
    // S3–S5: hit conditions of every position that can touch the target's lines, and their
    // lexmax pieces. The patent takes the same array only; an array sharing a line with the
    // target's (unaligned placement) can load it too, so those positions are sources as well
    // (spec 000 §6.3 item 5): with line-aligned arrays both rules take the same positions.
    let mut candidates = Vec::new();
    for (p, pos) in positions
        .iter()
        .enumerate()
        .filter(|(_, q)| program.may_share_lines(q.array, t.array, line_bytes))
    {
        check_time(deadline)?;
        // Γ_p (S4): earlier instances of `p` that touch the target instance's line.
        let hit_condition = ctx.map(&format!(
            "{} -> {{ [{}] -> [{}] : {target_constraints} and {} and {} and {} }}",
            params(program),
            target_tuple.join(", "),
            tuple("u", pos).join(", "),
            domain(pos, "u"),
            in_line(pos, &program.arrays[pos.array], "u", line_bytes, L),
            before((pos, "u"), (t, "t"), Program::depth(positions))
        ))?;
        for (r, map) in latest_pieces(ctx, program, pos, &hit_condition)?
            .into_iter()
            .enumerate()
        {
            let domain = map.domain()?;
            if !domain.is_empty()? {
                candidates.push(Candidate {
                    label: format!("{}.{}", pos.label, r + 1),
                    position: p,
                    map,
                    domain,
                });
            }
        }
    }
    let regions = venn(&candidates, deadline)?;
    Ok(LineSets {
        target,
        line_bytes,
        candidates,
        regions,
    })
}

/// S5: the hit condition's latest instance per target instance, in pieces. The latest is the
/// lexicographic maximum in execution order, not in the loop variables' values: a loop counting
/// down runs its largest value first. Its dimensions are negated for the maximum and back after
/// (a bijection, so each piece stays a function), which makes "latest" hold for any sign of
/// step at any depth.
fn latest_pieces<'c>(
    ctx: &'c Ctx,
    program: &Program,
    pos: &Position,
    hit_condition: &Map<'c>,
) -> Result<Vec<Map<'c>>, AnalyticError> {
    if pos.loops.iter().all(|l| l.step > 0) {
        return Ok(hit_condition.lexmax_pieces()?);
    }
    let u = tuple("u", pos);
    let ordered: Vec<String> = pos
        .loops
        .iter()
        .zip(&u)
        .map(|(l, x)| {
            if l.step < 0 {
                format!("-{x}")
            } else {
                x.clone()
            }
        })
        .collect();
    // Negation is its own inverse: the same map takes execution order back to the values.
    let flip = ctx.map(&format!(
        "{} -> {{ [{}] -> [{}] }}",
        params(program),
        u.join(", "),
        ordered.join(", ")
    ))?;
    let mut pieces = Vec::new();
    for piece in hit_condition.apply_range(&flip)?.lexmax_pieces()? {
        pieces.push(piece.apply_range(&flip)?);
    }
    Ok(pieces)
}

/// S11: the disjoint pieces (Venn regions) of the candidates' domains, each with the
/// candidates that cover it.
fn venn<'c>(
    candidates: &[Candidate<'c>],
    deadline: Option<(Instant, Duration)>,
) -> Result<Vec<(Set<'c>, Vec<usize>)>, AnalyticError> {
    let mut regions: Vec<(Set<'c>, Vec<usize>)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        check_time(deadline)?;
        let mut next = Vec::with_capacity(regions.len() * 2 + 1);
        let mut rest = c.domain.copy()?;
        for (set, members) in regions {
            let inside = set.intersect(&c.domain)?;
            let outside = set.subtract(&c.domain)?;
            rest = rest.subtract(&set)?;
            if !inside.is_empty()? {
                let mut m = members.clone();
                m.push(i);
                next.push((inside, m));
            }
            if !outside.is_empty()? {
                next.push((outside, members));
            }
        }
        if !rest.is_empty()? {
            next.push((rest, vec![i]));
        }
        regions = next;
    }
    Ok(regions)
}

fn check_time(deadline: Option<(Instant, Duration)>) -> Result<(), AnalyticError> {
    match deadline {
        Some((at, limit)) if Instant::now() > at => Err(AnalyticError::TimeLimit {
            seconds: limit.as_secs_f64(),
        }),
        _ => Ok(()),
    }
}

/// S21's eviction maps of one target, built as pieces ask for them ([`Builder::evictions`]).
struct Evictions<'c> {
    /// Per evicting position, its instances before the target in the target's set.
    bases: Vec<Map<'c>>,
    /// Per source position, per evicting position: the instances after a source instance.
    after: Vec<OnceCell<Vec<Map<'c>>>>,
    /// Per candidate, per evicting position: the bases after the candidate's hit source.
    per_candidate: Vec<OnceCell<Vec<Map<'c>>>>,
}

struct Builder<'a, 'c> {
    ctx: &'c Ctx,
    program: &'a Program,
    cache: Cache,
    positions: &'a [Position],
    depth: usize,
    params: String,
    target: usize,
    /// False when no set can receive more than `ways` distinct lines: then nothing is evicted
    /// and the conflict sets (S21–S55) are not built.
    conflicts_possible: bool,
    /// When to give up (checked between set operations; one operation can still run past it).
    deadline: Option<(Instant, Duration)>,
    /// The execution order from each position's instances to each other's, `[from][to]`, read
    /// once: [`Builder::later_sources`] asks for a few of them hundreds of times.
    orders: Vec<Vec<OnceCell<Map<'c>>>>,
    /// Per pair of candidates `(a, b)`, the target instances where `a`'s hit source comes after
    /// `b`'s, on both domains: a pair is asked about in several pieces.
    later: RefCell<HashMap<(usize, usize), Set<'c>>>,
}

/// The sets of the target of `lines` at one cache level (whose line size `lines` has).
pub(crate) fn build<'c>(
    ctx: &'c Ctx,
    program: &Program,
    positions: &[Position],
    cache: Cache,
    lines: &LineSets<'c>,
    conflicts_possible: bool,
    deadline: Option<(Instant, Duration)>,
) -> Result<TargetSets<'c>, AnalyticError> {
    let b = Builder {
        deadline,
        conflicts_possible,
        ctx,
        program,
        cache,
        positions,
        depth: Program::depth(positions),
        params: params(program),
        target: lines.target,
        orders: positions
            .iter()
            .map(|_| positions.iter().map(|_| OnceCell::new()).collect())
            .collect(),
        later: RefCell::new(HashMap::new()),
    };
    b.build(lines)
}

impl<'c> Builder<'_, 'c> {
    fn check_time(&self) -> Result<(), AnalyticError> {
        check_time(self.deadline)
    }

    fn t(&self) -> &Position {
        &self.positions[self.target]
    }

    /// `[t__0, …, w__, s__]`: a target instance and its block (tag, set).
    fn target_tuple(&self) -> String {
        let mut d = tuple("t", self.t());
        d.push(W.into());
        d.push(S.into());
        format!("[{}]", d.join(", "))
    }

    fn build(&self, lines: &LineSets<'c>) -> Result<TargetSets<'c>, AnalyticError> {
        if lines.line_bytes != self.cache.line_bytes {
            return Err(AnalyticError::Program(format!(
                "internal: lines of {} B lifted to a cache of {} B lines",
                lines.line_bytes, self.cache.line_bytes
            )));
        }
        let t = self.t();
        // S12: the variable-range expression G.
        let executions = self.ctx.set(&format!(
            "{} -> {{ [{}] : {} }}",
            self.params,
            tuple("t", t).join(", "),
            domain(t, "t")
        ))?;
        let lift = self.lift()?;
        let mut candidates = Vec::with_capacity(lines.candidates.len());
        for c in &lines.candidates {
            candidates.push(Candidate {
                label: c.label.clone(),
                position: c.position,
                map: lift.apply_range(&c.map)?,
                domain: lift.intersect_range(&c.domain)?.domain()?,
            });
        }
        let mut regions = Vec::with_capacity(lines.regions.len());
        for (set, members) in &lines.regions {
            regions.push((lift.intersect_range(set)?.domain()?, members.clone()));
        }
        let mut pieces = Vec::with_capacity(regions.len());
        if self.conflicts_possible {
            let evictions = self.evictions(&candidates)?;
            for (set, members) in regions {
                pieces.push(self.conflict_sets(set, members, &candidates, &evictions)?);
            }
        } else {
            for (set, members) in regions {
                pieces.push(Piece::without_conflicts(set, members)?);
            }
        }
        Ok(TargetSets {
            target: self.target,
            executions,
            candidates,
            pieces,
        })
    }

    /// Target instance and block → the same instance and its line: `l = sets·w + s`.
    fn lift(&self) -> Result<Map<'c>, AnalyticError> {
        let mut line = tuple("t", self.t());
        line.push(format!("{}*{W} + {S}", self.cache.sets));
        Ok(self.ctx.map(&format!(
            "{} -> {{ {} -> [{}] : 0 <= {S} < {} }}",
            self.params,
            self.target_tuple(),
            line.join(", "),
            self.cache.sets
        ))?)
    }

    /// `[x…, q__]`: an instance of `m` and the tag of its block.
    fn evictor_tuple(m: &Position) -> String {
        let mut out = tuple("x", m);
        out.push(Q.into());
        format!("[{}]", out.join(", "))
    }

    /// The maps of [`Evictions`] that do not depend on the candidate, one per position `m`:
    /// target instance → instances `x` of `m` (and their tags `q`) before the target that
    /// bring another block of the target's set in. The target's own constraints are left out:
    /// every candidate's domain has them. The conjunctive constraints, the order's disjunction
    /// and `q ≠ w` are read apart and intersected with rational emptiness tests
    /// ([`Map::intersect_relaxed`]): read as one text, isl intersects them with an integer test
    /// per pair of disjuncts (the 3D stencil at 80 × 300 in L1: 0.19 → 0.06 s for its 49 maps).
    fn evictions(&self, candidates: &[Candidate<'c>]) -> Result<Evictions<'c>, AnalyticError> {
        let mut bases = Vec::with_capacity(self.positions.len());
        for m in self.positions {
            let head = format!(
                "{} -> {{ {} -> {} :",
                self.params,
                self.target_tuple(),
                Self::evictor_tuple(m)
            );
            let block = self.ctx.map(&format!(
                "{head} {} and {} }}",
                domain(m, "x"),
                in_block(m, &self.program.arrays[m.array], "x", &self.cache, Q),
            ))?;
            let earlier = self.ctx.map(&format!(
                "{head} {} }}",
                before((m, "x"), (self.t(), "t"), self.depth)
            ))?;
            let other = self.ctx.map(&format!("{head} {Q} != {W} }}"))?;
            bases.push(
                block
                    .intersect_relaxed(&earlier)?
                    .intersect_relaxed(&other)?,
            );
        }
        Ok(Evictions {
            bases,
            after: (0..self.positions.len()).map(|_| OnceCell::new()).collect(),
            per_candidate: candidates.iter().map(|_| OnceCell::new()).collect(),
        })
    }

    /// H_{n,m} (S21) before the piece and the projection for candidate `c`, one map per position
    /// `m`: the evictions of [`Self::evictions`] after that candidate's hit source. A piece's
    /// `H_{n,m}` is the intersection over its candidates, so these are built once per candidate
    /// instead of once per piece (the text of a map with the order's disjunctions costs
    /// milliseconds to parse and simplify, and a candidate lies in many pieces), and only for a
    /// candidate some piece asks for ([`Self::latest_sources`] leaves most out). Both sides are
    /// disjunctions of the execution order, so they are intersected with rational emptiness
    /// tests ([`Map::intersect_relaxed`]; the 3D stencil at 80 × 300 in L1: 0.48 → 0.05 s).
    fn evictions_after<'e>(
        &self,
        evictions: &'e Evictions<'c>,
        candidates: &[Candidate<'c>],
        c: usize,
    ) -> Result<&'e [Map<'c>], AnalyticError> {
        if let Some(maps) = evictions.per_candidate[c].get() {
            return Ok(maps);
        }
        self.check_time()?;
        let cand = &candidates[c];
        let row = self.sources_before(evictions, cand.position)?;
        let mut per_m = Vec::with_capacity(self.positions.len());
        for (base, a) in evictions.bases.iter().zip(row) {
            per_m.push(cand.map.apply_range(a)?.intersect_relaxed(base)?);
        }
        Ok(evictions.per_candidate[c].get_or_init(|| per_m))
    }

    /// Per position `m`, instances of `m` after an instance of source position `p`.
    fn sources_before<'e>(
        &self,
        evictions: &'e Evictions<'c>,
        p: usize,
    ) -> Result<&'e [Map<'c>], AnalyticError> {
        if let Some(row) = evictions.after[p].get() {
            return Ok(row);
        }
        let src = &self.positions[p];
        let mut row = Vec::with_capacity(self.positions.len());
        for m in self.positions {
            row.push(self.ctx.map(&format!(
                "{} -> {{ [{}] -> {} : {} }}",
                self.params,
                tuple("u", src).join(", "),
                Self::evictor_tuple(m),
                before((src, "u"), (m, "x"), self.depth)
            ))?);
        }
        Ok(evictions.after[p].get_or_init(|| row))
    }

    /// H_{n,m} (S21) with x projected out (S41): target instance → tags `q` of blocks that
    /// position `m` brings into the same set after every hit source and before the target.
    fn evicting_tags(
        &self,
        piece: &Set<'c>,
        members: &[usize],
        candidates: &[Candidate<'c>],
        evictions: &Evictions<'c>,
        m: usize,
    ) -> Result<Map<'c>, AnalyticError> {
        let x = self.positions[m].loops.len() as u32;
        let mut h: Option<Map<'c>> = None;
        for &c in members {
            let next = &self.evictions_after(evictions, candidates, c)?[m];
            h = Some(match h {
                None => next.intersect_domain(piece)?,
                Some(h) => h.intersect(next)?,
            });
        }
        match h {
            Some(h) => Ok(h.project_out_outputs(0, x)?),
            None => Err(AnalyticError::Program(
                "internal: a hit-source piece without candidates".into(),
            )),
        }
    }

    /// The members whose evictions a piece's `H_{n,m}` must follow: all of them, or the one
    /// whose hit source comes after every other's at every instance of the piece. An eviction
    /// after that source is after all of them, so its map alone is the intersection over the
    /// members, the same set without intersecting maps whose order disjunctions multiply (the
    /// 3D stencil's pieces at 80 × 300 in L1 have four members).
    fn latest_sources(
        &self,
        piece: &Set<'c>,
        members: &[usize],
        candidates: &[Candidate<'c>],
    ) -> Result<Vec<usize>, AnalyticError> {
        let Some((&first, rest)) = members.split_first() else {
            return Ok(members.to_vec());
        };
        let mut latest = first;
        for &c in rest {
            self.check_time()?;
            if self.comes_after(piece, candidates, c, latest)? {
                latest = c;
            } else if !self.comes_after(piece, candidates, latest, c)? {
                return Ok(members.to_vec());
            }
        }
        Ok(vec![latest])
    }

    /// Whether candidate `a`'s hit source comes after `b`'s at every target instance of
    /// `piece`.
    fn comes_after(
        &self,
        piece: &Set<'c>,
        candidates: &[Candidate<'c>],
        a: usize,
        b: usize,
    ) -> Result<bool, AnalyticError> {
        let later = self.later_sources(candidates, a, b)?;
        Ok(piece.subtract(&later)?.is_empty()?)
    }

    /// The target instances where candidate `a`'s hit source comes after `b`'s, built once per
    /// pair: the 3D stencil at 80 × 300 asks 547 times about 171 pairs in L1 (the level 1.58 →
    /// 1.53 s, L3 0.82 → 0.75 s, against building it on each piece alone). The order's
    /// disjuncts meet the candidate's pieces with rational emptiness tests
    /// ([`Map::intersect_relaxed`]: 0.08 → 0.05 s per level there).
    fn later_sources(
        &self,
        candidates: &[Candidate<'c>],
        a: usize,
        b: usize,
    ) -> Result<Set<'c>, AnalyticError> {
        if let Some(later) = self.later.borrow().get(&(a, b)) {
            return Ok(later.copy()?);
        }
        let (ca, cb) = (&candidates[a], &candidates[b]);
        let later = cb
            .map
            .apply_range(self.order(cb.position, ca.position)?)?
            .intersect_relaxed(&ca.map)?
            .domain()?;
        self.later.borrow_mut().insert((a, b), later.copy()?);
        Ok(later)
    }

    /// The instances of position `to` after each instance of position `from`.
    fn order(&self, from: usize, to: usize) -> Result<&Map<'c>, AnalyticError> {
        let cell = &self.orders[from][to];
        if let Some(order) = cell.get() {
            return Ok(order);
        }
        let (pf, pt) = (&self.positions[from], &self.positions[to]);
        let order = self.ctx.map(&format!(
            "{} -> {{ [{}] -> [{}] : {} }}",
            self.params,
            tuple("u", pf).join(", "),
            tuple("x", pt).join(", "),
            before((pf, "u"), (pt, "x"), self.depth)
        ))?;
        Ok(cell.get_or_init(|| order))
    }

    fn conflict_sets(
        &self,
        set: Set<'c>,
        members: Vec<usize>,
        candidates: &[Candidate<'c>],
        evictions: &Evictions<'c>,
    ) -> Result<Piece<'c>, AnalyticError> {
        // S41–S44. Above the combinations' ways the tag maps J_{n,m} (S42's ordered
        // subtraction) are not needed: the conflicts come from Ψ≥ways of the union of the H′,
        // and the third counts come from the H′ alone ([`Piece::rows`]).
        let combine = self.cache.ways <= COMBINATION_WAYS;
        let mut tags_seen: Option<Map<'c>> = None;
        let mut rows_seen: Option<Set<'c>> = None;
        let (mut j, mut j1, mut j2) = (Vec::new(), Vec::new(), Vec::new());
        let mut competing = Vec::with_capacity(self.positions.len());
        let latest = self.latest_sources(&set, &members, candidates)?;
        for m in 0..self.positions.len() {
            self.check_time()?;
            let h = self.evicting_tags(&set, &latest, candidates, evictions, m)?;
            // A reference-counted handle: keeping it costs no set operation.
            competing.push(h.copy()?);
            // Above the combinations' ways only the union of the tag maps is needed now; the
            // rows per position (third counts, `--explain`) come from `competing` when asked
            // for. A column walk's dom H′ needs the modular inverse that made matrix multiply
            // at N = 150 in L1 run for minutes.
            let jm = match &tags_seen {
                _ if !combine => None,
                Some(seen) => Some(h.subtract(seen)?),
                None => Some(h.copy()?),
            };
            tags_seen = Some(match tags_seen {
                Some(seen) => seen.union(&h)?,
                None => h,
            });
            if let Some(jm) = jm {
                let j1m = jm.domain()?;
                j2.push(first_seen_here(&j1m, &mut rows_seen)?);
                j1.push(j1m);
                j.push(jm);
            }
        }
        let (still_cached, conflicted) = match &tags_seen {
            _ if combine => (self.combinations(&set, &j, &j1)?, None),
            Some(_) if self.fewer_tags_than_ways(&competing)? => {
                (Vec::new(), Some(set.subtract(&set)?))
            }
            Some(all) => (Vec::new(), Some(self.conflicted(&set, all)?)),
            // No position at all: nothing can evict.
            None => (Vec::new(), Some(set.subtract(&set)?)),
        };
        // Up to the combinations' ways the rows are built already; above, on first use.
        let rows = OnceCell::new();
        if combine {
            let _ = rows.set(Rows {
                evictors: j1,
                evicted: j2,
            });
        }
        Ok(Piece {
            candidates: members,
            set,
            still_cached,
            conflicted,
            rows,
            competing,
        })
    }

    /// Ψ≥d (S51–S54) for d = 0 … ways: target instances with at least `d` distinct evicting tags
    /// in `j`. The patent renames `d` copies of the tag and orders them `Q1 < … < Qd`; a product
    /// of `d` copies grows too complex for isl at the associativities of real caches (8 ways,
    /// 16 ways). The same sets come from peeling one tag at a time: with `Hₑ` the tags left after
    /// removing the `e − 1` smallest, `Ψ≥e = dom Hₑ` and `Hₑ₊₁ = Hₑ − lexmin Hₑ`, so every step
    /// is one parametric lexmin over a single tag dimension. (Subtracting the lexmin, a function
    /// of the instance, gives the same pairs as intersecting with "above the lexmin" and costs
    /// isl about a third: 3D stencil at L1, 20 × 40.)
    ///
    /// Peeling per piece is cheaper than once over the union of a target's pieces (their
    /// domains are disjoint, so it would give the same sets): that measured 2.5 times slower on
    /// the 3D stencil at L1, as isl's lexmin of a union combines the basic maps' minima pairwise.
    fn at_least_all(
        &self,
        piece: &Set<'c>,
        j: &Map<'c>,
        j1: &Set<'c>,
    ) -> Result<Vec<Set<'c>>, AnalyticError> {
        let ways = self.cache.ways;
        let mut ge = vec![piece.copy()?, j1.copy()?];
        // Where every disjoint part of the tag map sends a target instance to an interval of
        // tags (a row sweep's lines in one set), the distinct tags are the sum of the
        // intervals' lengths, and Ψ≥d follows without the peel: triangular N = 2300 at L1 went
        // from 7.4 s to 2.0 s, where each lexmin of the union compared every pair of its parts.
        // Parts of other shapes (see `inputs_with_at_least`) take the peel.
        let counts: Vec<u32> = (2..=ways).collect();
        match j.inputs_with_at_least(&counts)? {
            Some(at_least) => ge.extend(at_least),
            None => ge.extend(self.peel(piece, j, self.tag_span(j)?)?),
        }
        Ok(ge)
    }

    /// Ψ≥2 … Ψ≥ways by peeling the smallest tag `ways − 1` times; `tags` bounds the distinct
    /// tags (no Ψ≥d above it can have a point).
    fn peel(
        &self,
        piece: &Set<'c>,
        j: &Map<'c>,
        tags: i128,
    ) -> Result<Vec<Set<'c>>, AnalyticError> {
        let mut ge = Vec::with_capacity(self.cache.ways as usize);
        let mut left = j.copy()?;
        for d in 2..=self.cache.ways {
            self.check_time()?;
            if i128::from(d) > tags || left.is_empty()? {
                // No tag left to peel: every larger d is empty too.
                ge.push(piece.subtract(piece)?);
                continue;
            }
            let smallest = left.lexmin()?;
            left = left.subtract(&smallest)?.coalesce()?;
            ge.push(left.domain()?);
        }
        Ok(ge)
    }

    /// Ψ≥ways of a piece above the combinations' ways: the whole piece when every instance
    /// surely sees `ways` other blocks of its set next to its own ([`Builder::all_surely_miss`]),
    /// else from the tag map. (Where only some instances are sure, the union of the sure ones
    /// and Ψ≥ways of the rest was slower to count than Ψ≥ways of the whole: triangular at
    /// N = 2300 in L1 went over the counter's bound.)
    fn conflicted(&self, piece: &Set<'c>, j: &Map<'c>) -> Result<Set<'c>, AnalyticError> {
        // Coalesced once for both: the runs' subtractions split every basic map of `j`, and
        // overlapping sweeps of one array merge (matrix multiply at N = 1300 in L1, 1.02 →
        // 0.92 s; the sizes coalesce it again, which is then nearly free).
        let j = &j.coalesce()?;
        if self.all_surely_miss(piece, j)? {
            return Ok(piece.copy()?);
        }
        self.at_least_ways(piece, j)
    }

    /// Whether every instance of the piece has in its tag map every tag of a run of `ways` on
    /// one side of its own, `w ± m, w ± 2m, …, w ± ways·m` for `m` = 1 or a stride the tag
    /// map's parts keep: each such tag is another block of the set, so the instance misses, and
    /// no size or peel is needed to say so. An array swept whole between the hit source and the
    /// target puts a run of its blocks in every set (matrix multiply at N = 1300 in L2, where
    /// `b` is swept between two rows `i`: 104 blocks per set), and a column walk puts every
    /// `m`-th tag in the target's set (transpose at N = 1600 in L1: 200 blocks of `b`'s column
    /// in each set it uses, every 25th tag). Two subtractions per stride, stopping at the first
    /// stride after which no instance is left without a run.
    fn all_surely_miss(&self, piece: &Set<'c>, j: &Map<'c>) -> Result<bool, AnalyticError> {
        let mut lacking = piece.copy()?;
        if self.lack_runs(&mut lacking, j, 1)? {
            return Ok(true);
        }
        for m in j.output_strides()?.into_iter().take(MOST_STRIDES) {
            if self.lack_runs(&mut lacking, j, m)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Narrows `lacking` to its instances whose tag map lacks a tag of both runs of stride `m`
    /// (above and below their own tag); true when none is left.
    fn lack_runs(&self, lacking: &mut Set<'c>, j: &Map<'c>, m: i64) -> Result<bool, AnalyticError> {
        let ways = i64::from(self.cache.ways);
        for (lo, hi) in [(m, m * ways), (-m * ways, -m)] {
            self.check_time()?;
            let run = self.ctx.map(&format!(
                "{} -> {{ {} -> [{Q}] : {W} + {lo} <= {Q} <= {W} + {hi} and ({Q} - {W}) mod {m} = 0 }}",
                self.params,
                self.target_tuple(),
            ))?;
            *lacking = run.intersect_domain(lacking)?.subtract(j)?.domain()?;
            if lacking.is_empty()? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Ψ≥ways alone, the conflict misses above the combinations' ways: from the sizes of the
    /// tag map's parts where they are known (one set operation, not `ways − 1`: 2.1 s of the
    /// 6 s of transpose's tag map at N = 1600 in L2), else from the peel.
    fn at_least_ways(&self, piece: &Set<'c>, j: &Map<'c>) -> Result<Set<'c>, AnalyticError> {
        let tags = self.tag_span(j)?;
        if i128::from(self.cache.ways) > tags {
            return Ok(piece.subtract(piece)?);
        }
        if let Some(set) = j
            .inputs_with_at_least(&[self.cache.ways])?
            .and_then(|mut sets| sets.pop())
        {
            return Ok(set);
        }
        self.peel(piece, j, tags)?
            .pop()
            .ok_or_else(|| AnalyticError::Program("internal: the peel gave no set".into()))
    }

    /// Whether no target instance of the piece can see `ways` distinct other blocks in its set,
    /// judged per array: the blocks of one array that one instance sees in its set lie within
    /// the spread of that array's tags for the instance, so they number at most the spread
    /// plus one, and the arrays' bounds add up. The spreads are bounded by linear programs, one
    /// per array and basic set of its pairs, so a level whose pieces mostly cannot conflict
    /// skips the sizes and the peel: matrix multiply at N = 1300 in the 32 MiB L3, where a
    /// target's set holds 6–7 blocks of `b` and one or two of `a` and `c`, but the tags of the
    /// whole piece span 24 values. (Integer programs for the exact spreads, where the linear
    /// bounds reach the ways, no longer paid for themselves once those bounds came first: on
    /// every benchmark kernel the levels took as long or longer with them, matrix multiply at
    /// N = 1300 in L2 0.52 s against 0.62 s, where a column walk's tags spread over 63 values
    /// but only a few of them fall in one set, and the sizes must decide anyway.)
    fn fewer_tags_than_ways(&self, competing: &[Map<'c>]) -> Result<bool, AnalyticError> {
        let mut arrays: Vec<usize> = self.positions.iter().map(|p| p.array).collect();
        arrays.sort_unstable();
        arrays.dedup();
        let mut per_array: Vec<Map<'c>> = Vec::with_capacity(arrays.len());
        for array in arrays {
            self.check_time()?;
            let mut tags: Option<Map<'c>> = None;
            for (m, h) in competing.iter().enumerate() {
                if self.positions[m].array == array {
                    tags = Some(match tags {
                        Some(t) => t.union(h)?,
                        None => h.copy()?,
                    });
                }
            }
            match tags {
                Some(tags) if !tags.is_empty()? => per_array.push(tags),
                _ => {}
            }
        }
        if self.one_instance_sees_ways(&per_array)? {
            return Ok(false);
        }
        let ways = i128::from(self.cache.ways);
        let mut most = 0i128;
        for tags in &per_array {
            self.check_time()?;
            match tags.output_spread_bound()? {
                Some(s) if most + i128::from(s) + 1 < ways => most += i128::from(s) + 1,
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Whether one sampled target instance already has tags spanning `ways` or more, counted
    /// per array as [`Builder::fewer_tags_than_ways`] bounds them: then that bound cannot stay
    /// under the ways, and its linear programs over pairs of tags are not needed (without the
    /// sample, the 3D stencil at 80 × 300 in L1 took 1.57 s against 1.37 s). Two small integer
    /// programs per array on one instance's tags.
    fn one_instance_sees_ways(&self, per_array: &[Map<'c>]) -> Result<bool, AnalyticError> {
        // With symbolic parameters the sample fixes them too, at values whose tags need not
        // fit in 64 bits.
        if !self.program.params.is_empty() {
            return Ok(false);
        }
        let mut all: Option<Map<'c>> = None;
        for tags in per_array {
            all = Some(match all {
                Some(a) => a.union(tags)?,
                None => tags.copy()?,
            });
        }
        let Some(instance) = all.map(|a| a.sample_input()).transpose()?.flatten() else {
            return Ok(false);
        };
        let mut spans = 0i128;
        for tags in per_array {
            let seen = tags.intersect_domain(&instance)?.range()?;
            if let Some((lo, hi)) = seen.dim_range(0)? {
                spans += i128::from(hi) - i128::from(lo) + 1;
            }
        }
        Ok(spans >= i128::from(self.cache.ways))
    }

    /// A bound on the span of the tag map's tags (largest − smallest + 1), unbounded with
    /// symbolic parameters: no target instance can see more distinct tags than the whole map
    /// has, so past that many Ψ≥d is empty without a parametric lexmin. From the range's
    /// rational relaxation: a bound is all the callers need, and its linear programs cost a
    /// fraction of the integer programs (matrix multiply at N = 1300 in L1, 1.13 → 1.03 s).
    fn tag_span(&self, j: &Map<'c>) -> Result<i128, AnalyticError> {
        // The common case at a level that holds the kernel's data, where the peel would
        // otherwise run on many pieces only to find nothing. The span, not the number: counting
        // the range first rewrites its projected instances as explicit divisions, which took 22 s
        // and 68 s for two pieces of transpose at N = 180 in L1 (4 and 6 existential variables)
        // and never finished on the 3D stencil at 80 × 300, more than the peel it guards. A
        // kernel's arrays are contiguous, so the span is the number of tags where it matters.
        if !self.program.params.is_empty() {
            return Ok(i128::MAX);
        }
        let range = j.range()?;
        Ok(match range.dim_range_bound(0)? {
            Some((lo, hi)) => i128::from(hi) - i128::from(lo) + 1,
            None if range.is_empty()? => 0,
            None => i128::MAX,
        })
    }

    /// S55, S31, S32: the common expressions Z for every combination with 1 ≤ Σd ≤ ways − 1.
    fn combinations(
        &self,
        piece: &Set<'c>,
        j: &[Map<'c>],
        j1: &[Set<'c>],
    ) -> Result<Vec<Combination<'c>>, AnalyticError> {
        let ways = self.cache.ways;
        let active: Vec<usize> = (0..j.len())
            .filter(|&m| j1[m].is_empty().map(|e| !e).unwrap_or(true))
            .collect();
        // Ψ=d for d < ways on active positions (inactive ones are Ψ=0 everywhere on the piece).
        let mut exactly: Vec<Vec<Set<'c>>> = Vec::with_capacity(active.len());
        for &m in &active {
            let ge = self.at_least_all(piece, &j[m], &j1[m])?;
            exactly.push(
                (0..ways as usize)
                    .map(|d| ge[d].subtract(&ge[d + 1]))
                    .collect::<Result<_, _>>()?,
            );
        }
        let mut out = Vec::new();
        let mut combo = vec![0u32; active.len()];
        loop {
            self.check_time()?;
            let sum: u32 = combo.iter().sum();
            if sum >= 1 && sum < ways {
                let mut z = piece.intersect(piece)?;
                for (a, &d) in combo.iter().enumerate() {
                    z = z.intersect(&exactly[a][d as usize])?;
                }
                if !z.is_empty()? {
                    let mut per_position = vec![0u32; j.len()];
                    for (a, &m) in active.iter().enumerate() {
                        per_position[m] = combo[a];
                    }
                    out.push(Combination {
                        per_position,
                        set: z,
                    });
                }
            }
            if !next_combination(&mut combo, ways) {
                return Ok(out);
            }
        }
    }
}

/// The rows of `rows` not in `seen` (S44's `J″`: attributed to the first position that has
/// them), and `seen` grown by `rows`.
fn first_seen_here<'c>(
    rows: &Set<'c>,
    seen: &mut Option<Set<'c>>,
) -> Result<Set<'c>, AnalyticError> {
    let (new, all) = match seen.take() {
        Some(before) => (rows.subtract(&before)?, before.union(rows)?),
        None => (rows.copy()?, rows.copy()?),
    };
    *seen = Some(all);
    Ok(new)
}

/// The next vector with entries below `ways` and sum below `ways` (odometer order).
fn next_combination(combo: &mut [u32], ways: u32) -> bool {
    for i in 0..combo.len() {
        combo[i] += 1;
        if combo.iter().sum::<u32>() < ways {
            return true;
        }
        combo[i] = 0;
    }
    false
}
