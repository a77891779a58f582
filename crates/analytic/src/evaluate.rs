//! S13–S14, S23, S33, S34 and S101–S102: counting the sets at concrete parameter values and
//! combining the counts into compulsory and conflict misses.

use std::time::{Duration, Instant};

use loopscope_polyhedral::{Ctx, PolyError, Set};
use serde::{Deserialize, Serialize};

use crate::AnalyticError;
use crate::pipeline::{LineSets, Piece, TargetSets, build, build_lines};
use crate::pressure::most_lines_in_a_set;
use crate::program::{Cache, Position, Program};

/// What [`Model::evaluate_with`] counts beyond each reference's misses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    /// Attribute the conflict misses to the references competing for their sets
    /// ([`ReferenceMisses::sources`]).
    pub sources: bool,
    /// Count every piece's third counts ([`PieceCounts::evicted_by`]) even above four ways,
    /// where the conflict misses do not need them.
    pub third_counts: bool,
}

impl Detail {
    /// Every piece's counts, no sources: what [`Model::evaluate`] gives.
    pub fn all_counts() -> Detail {
        Detail {
            sources: false,
            third_counts: true,
        }
    }
}

/// The counts of one hit-source piece `C_n`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceCounts {
    /// The hit-source candidates covering the piece (`P0.2` = second lexmax piece of `P0`).
    pub sources: Vec<String>,
    /// Second count `V_Cn`: executions whose block was accessed before, with these sources.
    pub executions: i128,
    /// Third count per evicting position: executions with at least one other block of the set
    /// brought in since the hit source, attributed to the first position (in position order).
    /// Empty at a level where no set receives more than `ways` distinct lines in the whole run:
    /// there nothing is evicted, and the conflict sets are not built. Above four ways also empty
    /// unless asked for ([`Detail::third_counts`]): the conflict misses do not need them.
    pub evicted_by: Vec<(String, i128)>,
    /// Fourth count per combination (distinct evicting blocks per position, summing below the
    /// ways): executions that still hit. Empty above four ways, where the combinations are not
    /// built (the conflict count does not need them).
    pub still_cached: Vec<(Vec<(String, u32)>, i128)>,
    /// Conflict misses of this piece: executions with at least `ways` distinct other blocks of
    /// their set since the hit source (equal to `Σ third − Σ fourth`).
    pub conflict: i128,
}

/// One reference whose accesses compete with another's for a cache set: how many of the other's
/// conflict misses it took part in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictSource {
    /// Position number of the competing (evicting) reference, `P0`, `P1`, …
    pub position: String,
    /// Its index in position order (the kernel's reference order).
    pub index: usize,
    /// Its statement name.
    pub statement: String,
    /// Conflict misses of the analysed reference for which this reference brought at least one
    /// other block into the set between the hit source and the access. One miss usually has
    /// several such references, so these counts overlap: their sum can exceed the conflict
    /// misses.
    pub misses: i128,
}

/// The misses of one reference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceMisses {
    /// Position number, `P0`, `P1`, … in textual order.
    pub position: String,
    /// Statement name.
    pub statement: String,
    /// Array name.
    pub array: String,
    /// Whether the reference writes.
    pub is_write: bool,
    /// First count `V_G`: executions of the reference.
    pub accesses: i128,
    /// Compulsory (initial-reference) misses, `V_G − Σ V_Cn`.
    pub compulsory: i128,
    /// Conflict misses (including capacity ones, LRU), `Σ_n (third − fourth)`.
    pub conflict: i128,
    /// Per-piece detail.
    pub pieces: Vec<PieceCounts>,
    /// Where the conflict misses come from, per competing reference in position order (those
    /// with no share left out); `None` unless asked for ([`Model::evaluate_with_sources`]).
    pub sources: Option<Vec<ConflictSource>>,
}

impl ReferenceMisses {
    /// Compulsory plus conflict misses.
    pub fn misses(&self) -> i128 {
        self.compulsory + self.conflict
    }
}

/// Counts a set of target instances `[t…, tag, set]`. The block's tag and set are functions of
/// the instance, so the set has exactly as many points as its projection on `t`; it is counted
/// as it is, because projecting them out would turn them into existential variables that isl
/// must first rewrite as explicit floor divisions (`compute_divs`, often the costliest step),
/// only for the counter to lift those divisions back into dimensions.
fn count_instances(set: &Set<'_>, values: &[(&str, i64)]) -> Result<i128, AnalyticError> {
    Ok(set.count(values)?)
}

/// The instances of `conflicted`, a subset of `piece` (which has `executions`). Counted first
/// with a tenth of the counter's slices; over that, as the piece's executions minus the rest,
/// which can be the simpler set: the regions where the competing blocks stay under the ways and
/// those where they reach them are cut by the same rows, but not in the same pieces. Only if
/// that is over the bound too is the direct count given the full budget. Matrix multiply at
/// N = 1300 in L1 has a piece whose conflicts are over the million slices (5 s to find out)
/// and whose hits count in a second.
fn conflicts_in(
    piece: &Set<'_>,
    conflicted: &Set<'_>,
    executions: i128,
    values: &[(&str, i64)],
) -> Result<i128, AnalyticError> {
    conflicts_trying(piece, conflicted, executions, values, FIRST_TRY_SLICES)
}

/// [`conflicts_in`] with `first_try` slices for the first count.
fn conflicts_trying(
    piece: &Set<'_>,
    conflicted: &Set<'_>,
    executions: i128,
    values: &[(&str, i64)],
    first_try: u64,
) -> Result<i128, AnalyticError> {
    let too_complex = |r: &Result<i128, AnalyticError>| {
        matches!(r, Err(AnalyticError::Sets(PolyError::TooComplex { .. })))
    };
    let first = conflicted
        .count_within(values, first_try)
        .map_err(AnalyticError::from);
    if !too_complex(&first) {
        return first;
    }
    // Any failure of the complement (over the bound, an overflow) leaves the direct count.
    let complement = conflicts_by_complement(piece, conflicted, executions, values);
    if complement.is_ok() {
        return complement;
    }
    Ok(conflicted.count(values)?)
}

/// The slices a conflict set's first count may take (the counter allows a million).
const FIRST_TRY_SLICES: u64 = 100_000;

/// `|conflicted|` as the piece's executions minus the instances of the piece that are not in
/// `conflicted` (matrix multiply at N = 1300 in L1: the conflicts of one piece were over the
/// counter's million slices, the hits counted in a second).
fn conflicts_by_complement(
    piece: &Set<'_>,
    conflicted: &Set<'_>,
    executions: i128,
    values: &[(&str, i64)],
) -> Result<i128, AnalyticError> {
    let hits = count_instances(&piece.subtract(conflicted)?, values)?;
    Ok(executions - hits)
}

/// The conflict misses of a piece built with the patent's combinations (at most
/// [`crate::pipeline::COMBINATION_WAYS`] ways): the executions with at least one other block in
/// their set since the hit source (`∪_m J′_{n,m}`) and not in any common expression `Z_{n,c}`
/// (1 … ways − 1 distinct blocks, still hits). Its count is `Σ third − Σ fourth`.
fn conflicted_from_combinations<'c>(piece: &Piece<'c>) -> Result<Set<'c>, AnalyticError> {
    let mut out = piece.set.subtract(&piece.set)?;
    for j1 in &piece.rows()?.evictors {
        out = out.union(j1)?;
    }
    for z in &piece.still_cached {
        out = out.subtract(&z.set)?;
    }
    Ok(out)
}

/// The sets of a whole program (or of chosen references), built once with symbolic parameters
/// and counted at any parameter values.
pub struct Model<'c> {
    /// The context the sets live in: each evaluation gets its full operation budget.
    ctx: &'c Ctx,
    positions: Vec<Position>,
    targets: Vec<TargetSets<'c>>,
    /// The most distinct lines one set receives, where known (concrete parameters).
    most_lines_in_a_set: Option<i128>,
    ways: u32,
}

impl<'c> Model<'c> {
    /// Builds the sets of every reference of `program` for one cache level.
    pub fn new(ctx: &'c Ctx, program: &Program, cache: Cache) -> Result<Model<'c>, AnalyticError> {
        let n = program.positions()?.len();
        Model::for_positions(ctx, program, cache, &(0..n).collect::<Vec<_>>())
    }

    /// Like [`Model::new`], but gives up with [`AnalyticError::TimeLimit`] once building the
    /// sets has taken `limit` (checked between set operations).
    pub fn new_within(
        ctx: &'c Ctx,
        program: &Program,
        cache: Cache,
        limit: Duration,
    ) -> Result<Model<'c>, AnalyticError> {
        let n = program.positions()?.len();
        let which: Vec<usize> = (0..n).collect();
        Model::build(
            ctx,
            program,
            cache,
            &which,
            Some((Instant::now() + limit, limit)),
        )
    }

    /// Builds the sets of the references with the given position numbers only.
    pub fn for_positions(
        ctx: &'c Ctx,
        program: &Program,
        cache: Cache,
        which: &[usize],
    ) -> Result<Model<'c>, AnalyticError> {
        Model::build(ctx, program, cache, which, None)
    }

    pub(crate) fn build(
        ctx: &'c Ctx,
        program: &Program,
        cache: Cache,
        which: &[usize],
        deadline: Option<(Instant, Duration)>,
    ) -> Result<Model<'c>, AnalyticError> {
        cache.check()?;
        let positions = program.positions()?;
        let most_lines_in_a_set = most_lines_in_a_set(ctx, program, &positions, cache)?;
        Model::build_knowing(
            ctx,
            program,
            positions,
            cache,
            which,
            deadline,
            most_lines_in_a_set,
        )
    }

    /// [`Model::build`] with the cache checked, the program's positions and the most lines one
    /// set receives (`None`: unknown) already known.
    fn build_knowing(
        ctx: &'c Ctx,
        program: &Program,
        positions: Vec<Position>,
        cache: Cache,
        which: &[usize],
        deadline: Option<(Instant, Duration)>,
        most_lines_in_a_set: Option<i128>,
    ) -> Result<Model<'c>, AnalyticError> {
        let conflicts_possible = evicts(most_lines_in_a_set, cache);
        let mut targets = Vec::with_capacity(which.len());
        for &t in which {
            if t >= positions.len() {
                return Err(AnalyticError::Program(format!(
                    "no position P{t}: the program has {}",
                    positions.len()
                )));
            }
            let lines = build_lines(ctx, program, &positions, cache.line_bytes, t, deadline)?;
            targets.push(build(
                ctx,
                program,
                &positions,
                cache,
                &lines,
                conflicts_possible,
                deadline,
            )?);
        }
        Ok(Model {
            ctx,
            positions,
            targets,
            most_lines_in_a_set,
            ways: cache.ways,
        })
    }

    /// The model of the one reference `lines` are of, at `cache` (whose line size they have),
    /// for callers that build one model per reference and level from the hit sources the
    /// levels of one line size share ([`crate::each_reference_at_levels`]).
    pub(crate) fn from_lines(
        ctx: &'c Ctx,
        program: &Program,
        positions: Vec<Position>,
        cache: Cache,
        lines: &LineSets<'c>,
        deadline: Option<(Instant, Duration)>,
        most_lines_in_a_set: Option<i128>,
    ) -> Result<Model<'c>, AnalyticError> {
        let target = build(
            ctx,
            program,
            &positions,
            cache,
            lines,
            evicts(most_lines_in_a_set, cache),
            deadline,
        )?;
        Ok(Model {
            ctx,
            positions,
            targets: vec![target],
            most_lines_in_a_set,
            ways: cache.ways,
        })
    }

    /// The misses of each analysed reference at the given parameter values (S101–S102), with
    /// every piece's third and fourth counts.
    pub fn evaluate(&self, values: &[(&str, i64)]) -> Result<Vec<ReferenceMisses>, AnalyticError> {
        self.evaluate_with(values, Detail::all_counts())
    }

    /// Like [`Model::evaluate`], and also attributes each reference's conflict misses to the
    /// references competing for their sets ([`ReferenceMisses::sources`]). This costs a few set
    /// operations per hit-source piece that has conflict misses at these values.
    pub fn evaluate_with_sources(
        &self,
        values: &[(&str, i64)],
    ) -> Result<Vec<ReferenceMisses>, AnalyticError> {
        let detail = Detail {
            sources: true,
            ..Detail::all_counts()
        };
        self.evaluate_with(values, detail)
    }

    /// The misses at the given parameter values with the detail asked for.
    pub fn evaluate_with(
        &self,
        values: &[(&str, i64)],
        detail: Detail,
    ) -> Result<Vec<ReferenceMisses>, AnalyticError> {
        // The operation bound is per evaluation: formulas take thousands of them.
        self.ctx.reset_operations();
        self.targets
            .iter()
            .map(|t| self.evaluate_target(t, values, detail))
            .collect::<Result<_, _>>()
            .map_err(|e| match e {
                // isl answers a yes/no question over its quota with an error of no kind.
                AnalyticError::Sets(_) if self.ctx.over_operation_limit() => {
                    AnalyticError::Sets(PolyError::OperationLimit { op: "count" })
                }
                e => e,
            })
    }

    fn evaluate_target(
        &self,
        t: &TargetSets<'c>,
        values: &[(&str, i64)],
        detail: Detail,
    ) -> Result<ReferenceMisses, AnalyticError> {
        let pos = &self.positions[t.target];
        let accesses = t.executions.count(values)?;
        let mut pieces = Vec::with_capacity(t.pieces.len());
        for piece in &t.pieces {
            let executions = count_instances(&piece.set, values)?;
            let mut evicted_by = Vec::new();
            // Up to four ways the conflict misses are Σ third − Σ fourth; above, they come from
            // their own set and the third counts are detail (one of transpose's at N = 1600 in
            // L2 takes 6 s to count: half the level).
            let third_needed = piece.conflicted.is_none() || detail.third_counts;
            let evicted = match third_needed {
                true => piece.rows()?.evicted.as_slice(),
                false => &[],
            };
            for (m, set) in evicted.iter().enumerate() {
                evicted_by.push((
                    self.positions[m].label.clone(),
                    count_instances(set, values)?,
                ));
            }
            let mut still_cached = Vec::new();
            for c in &piece.still_cached {
                let combo = c
                    .per_position
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| **d > 0)
                    .map(|(m, d)| (self.positions[m].label.clone(), *d))
                    .collect();
                still_cached.push((combo, count_instances(&c.set, values)?));
            }
            let conflict = match &piece.conflicted {
                Some(set) => conflicts_in(&piece.set, set, executions, values)?,
                None => {
                    evicted_by.iter().map(|(_, v)| v).sum::<i128>()
                        - still_cached.iter().map(|(_, v)| v).sum::<i128>()
                }
            };
            pieces.push(PieceCounts {
                sources: piece
                    .candidates
                    .iter()
                    .map(|&c| t.candidates[c].label.clone())
                    .collect(),
                executions,
                evicted_by,
                still_cached,
                conflict,
            });
        }
        Ok(ReferenceMisses {
            position: pos.label.clone(),
            statement: pos.statement.clone(),
            array: pos.reference.array.clone(),
            is_write: pos.reference.is_write,
            accesses,
            compulsory: accesses - pieces.iter().map(|p| p.executions).sum::<i128>(),
            conflict: pieces.iter().map(|p| p.conflict).sum(),
            sources: if detail.sources {
                Some(self.sources(t, &pieces, values)?)
            } else {
                None
            },
            pieces,
        })
    }

    /// Per competing position `m`: the conflict misses of target `t` whose set received a block
    /// from `m` since their hit source, i.e. `|conflicted_n ∩ dom H′_{n,m}|` summed over the
    /// pieces `n`. `H′` is taken before S42's ordered subtraction, so a block brought in by two
    /// positions counts for both: the question is "did `m` compete", not "who came first".
    fn sources(
        &self,
        t: &TargetSets<'c>,
        counts: &[PieceCounts],
        values: &[(&str, i64)],
    ) -> Result<Vec<ConflictSource>, AnalyticError> {
        let mut per_position = vec![0i128; self.positions.len()];
        for (piece, c) in t.pieces.iter().zip(counts) {
            if c.conflict == 0 {
                continue;
            }
            let conflicted = match &piece.conflicted {
                Some(set) => set.copy()?,
                None => conflicted_from_combinations(piece)?,
            };
            for (m, tags) in piece.competing.iter().enumerate() {
                let rows = tags.domain()?.intersect(&conflicted)?;
                per_position[m] += count_instances(&rows, values)?;
            }
        }
        Ok(per_position
            .into_iter()
            .enumerate()
            .filter(|(_, n)| *n > 0)
            .map(|(m, misses)| ConflictSource {
                position: self.positions[m].label.clone(),
                index: m,
                statement: self.positions[m].statement.clone(),
                misses,
            })
            .collect())
    }

    /// The hit-source candidates (S5) of the `n`-th analysed reference: label and lexmax piece in
    /// isl notation.
    pub fn hit_sources(&self, n: usize) -> Vec<(String, String)> {
        self.targets
            .get(n)
            .map(|t| {
                t.candidates
                    .iter()
                    .map(|c| (c.label.clone(), c.map.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The intermediate sets, one block per analysed reference, in isl notation (`--explain`),
    /// after [`Model::explain_level`]'s line.
    pub fn explain(&self) -> String {
        let mut out = self.explain_level().unwrap_or_default();
        out.push_str(&self.explain_references());
        out
    }

    /// What holds for the whole level, where it changes the sets: that no set can receive more
    /// lines than it has ways, so no conflict set was built. The same for every reference's
    /// model of a level, so it is printed once.
    pub fn explain_level(&self) -> Option<String> {
        self.most_lines_in_a_set
            .filter(|&n| n <= i128::from(self.ways))
            .map(|n| {
                format!(
                    "no set receives more than {n} distinct lines ({} ways): no conflict sets \
                     built\n",
                    self.ways
                )
            })
    }

    /// [`Model::explain`] without the level's line: one block per analysed reference.
    pub fn explain_references(&self) -> String {
        let mut out = String::new();
        for t in &self.targets {
            let pos = &self.positions[t.target];
            out.push_str(&format!(
                "{} ({} {}):\n  G = {}\n",
                pos.label, pos.statement, pos.reference.array, t.executions
            ));
            for c in &t.candidates {
                out.push_str(&format!("  hit source {} = {}\n", c.label, c.map));
            }
            for (n, piece) in t.pieces.iter().enumerate() {
                let labels: Vec<&str> = piece
                    .candidates
                    .iter()
                    .map(|&c| t.candidates[c].label.as_str())
                    .collect();
                out.push_str(&format!(
                    "  C{} [{}] = {}\n",
                    n + 1,
                    labels.join(", "),
                    piece.set
                ));
                // Above the combinations' ways (`conflicted` built) the evictors are dom H′.
                let evictors = if piece.conflicted.is_some() {
                    "dom H'"
                } else {
                    "J'"
                };
                let rows = match piece.rows() {
                    Ok(rows) => Some(rows),
                    Err(e) => {
                        out.push_str(&format!("    (evicting rows not built: {e})\n"));
                        None
                    }
                };
                let pairs = rows.iter().flat_map(|r| r.evictors.iter().zip(&r.evicted));
                for (m, (j1, j2)) in pairs.enumerate() {
                    if !j1.is_empty().unwrap_or(false) {
                        let label = &self.positions[m].label;
                        out.push_str(&format!(
                            "    {evictors}{label} = {j1}\n    J''{label} = {j2}\n"
                        ));
                    }
                }
                for z in &piece.still_cached {
                    out.push_str(&format!("    Z{:?} = {}\n", z.per_position, z.set));
                }
            }
        }
        out
    }
}

/// Whether a cache whose sets receive at most `most_lines_in_a_set` distinct lines (`None`:
/// unknown) can evict at all.
pub(crate) fn evicts(most_lines_in_a_set: Option<i128>, cache: Cache) -> bool {
    most_lines_in_a_set.is_none_or(|n| n > i128::from(cache.ways))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_by_complement_equal_the_direct_count() {
        let ctx = Ctx::new();
        let piece = ctx
            .set("[N] -> { [i, j] : 0 <= i < N and 0 <= j <= i }")
            .unwrap();
        let conflicted = ctx
            .set("[N] -> { [i, j] : 0 <= i < N and 0 <= j <= i and (i + 3j) mod 7 >= 2 }")
            .unwrap();
        for n in [1, 5, 40, 1000] {
            let values = [("N", n)];
            let executions = piece.count(&values).unwrap();
            let direct = conflicted.count(&values).unwrap();
            let complement =
                conflicts_by_complement(&piece, &conflicted, executions, &values).unwrap();
            assert_eq!(complement, direct, "N = {n}");
            // However few slices the first try gets, the number is the same.
            for first_try in [0, 1, 3, FIRST_TRY_SLICES] {
                let tried =
                    conflicts_trying(&piece, &conflicted, executions, &values, first_try).unwrap();
                assert_eq!(tried, direct, "N = {n}, first try {first_try}");
            }
        }
    }
}
