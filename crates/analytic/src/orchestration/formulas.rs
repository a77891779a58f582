//! `loopscope misses --symbolic NAME`: every count as a formula in one parameter (the others
//! fixed with `-D`), from the fitting of exact counts, with the range where each formula was
//! verified, and `--at NAME=VALUE` to evaluate them.

use std::collections::BTreeMap;
use std::time::Instant;

use loopscope_cache::LevelConfig;
use loopscope_kernel::{
    Kernel, KernelError, Listener, LoadedKernel, RefLabel, read_kernel_file_with_values,
};
use serde::Serialize;

use super::MissesRequest;
use super::level_job::{SymbolicParameter, symbolic_indices};
use super::process::{LevelOutcome, LevelsRequest, model_levels};
use crate::{AnalyticError, Formula, ReferenceFormulas, program_with_symbols};

/// The result of `misses --symbolic NAME`, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct FormulasReport {
    /// The kernel file.
    pub kernel: String,
    /// The fixed parameters.
    pub params: BTreeMap<String, i64>,
    /// The parameter the formulas are in.
    pub parameter: String,
    /// With `--symbolic NAME=LO..HI`: the range the formulas were fitted to.
    pub range: Option<(i64, i64)>,
    /// What was modelled, in words.
    pub model: &'static str,
    /// Per level, innermost first.
    pub levels: Vec<FormulasLevel>,
    /// Seconds the command took.
    pub duration_s: f64,
}

/// One level's formulas.
#[derive(Debug, Serialize)]
pub struct FormulasLevel {
    /// The level.
    #[serde(flatten)]
    pub geometry: Geometry,
    /// The level's misses; `null` when the level could not be modelled (see `error`).
    pub misses: Option<Formula>,
    /// Per reference.
    pub references: Vec<FormulasReference>,
    /// With `--at`: the level's misses at each value.
    pub at: Vec<AtValue>,
    /// Seconds the level took.
    pub duration_s: f64,
    /// Why the level could not be modelled.
    pub error: Option<String>,
}

/// One reference's formulas.
#[derive(Debug, Serialize)]
pub struct FormulasReference {
    /// The reference.
    #[serde(flatten)]
    pub label: RefLabel,
    /// Its counts as formulas.
    #[serde(flatten)]
    pub formulas: ReferenceFormulas,
}

/// A cache level as the formulas' reports name it.
#[derive(Debug, Serialize)]
pub struct Geometry {
    /// `L1`, `L2`, …
    pub name: String,
    /// Capacity.
    pub size_bytes: u64,
    /// Line size.
    pub line_bytes: u64,
    /// Associativity.
    pub ways: u64,
    /// Number of sets.
    pub sets: u64,
}

impl Geometry {
    /// The level's geometry.
    pub fn of(l: &LevelConfig) -> Geometry {
        Geometry {
            name: l.name.clone(),
            size_bytes: l.size_bytes,
            line_bytes: l.line_bytes,
            ways: l.ways,
            sets: l.sets(),
        }
    }
}

/// Warns of each level not modelled; an error when none was.
pub(super) fn warn_unmodelled<'a>(
    listener: &dyn Listener,
    origin: &str,
    levels: impl Iterator<Item = (&'a Geometry, Option<&'a str>)>,
) -> Result<(), AnalyticError> {
    let mut modelled = false;
    for (geometry, error) in levels {
        match error {
            Some(e) => listener.warn(&format!("{origin}: {} not modelled: {e}", geometry.name)),
            None => modelled = true,
        }
    }
    if !modelled {
        return Err(AnalyticError::NotModelled(format!(
            "{origin}: no cache level could be modelled"
        )));
    }
    Ok(())
}

/// The formulas (or chambers) a model process gave, or why it gave none.
pub(super) fn given<R, T>(refs: Result<R, String>, given: Option<T>) -> Result<T, String> {
    refs?;
    given.ok_or_else(|| "the model process gave no formulas".into())
}

/// A level's misses at one `--at` value.
#[derive(Debug, Serialize)]
pub struct AtValue {
    /// The parameter's value.
    pub value: i64,
    /// The misses there.
    #[serde(flatten)]
    pub counts: AtCounts,
}

/// A level's misses at one `--at` point, or why its formulas give none there (a point below
/// the checked values, say): the point's error, not the level's.
#[derive(Debug, Serialize)]
pub struct AtCounts {
    /// Misses.
    pub misses: Option<i128>,
    /// Compulsory misses.
    pub compulsory: Option<i128>,
    /// Conflict misses.
    pub conflict: Option<i128>,
    /// Why the formulas give no count at the point.
    pub error: Option<String>,
}

impl AtCounts {
    /// The sums of the references' compulsory and conflict misses at the point.
    pub fn of(
        compulsory: Result<i128, AnalyticError>,
        conflict: Result<i128, AnalyticError>,
    ) -> AtCounts {
        match (compulsory, conflict) {
            (Ok(compulsory), Ok(conflict)) => AtCounts {
                misses: Some(compulsory + conflict),
                compulsory: Some(compulsory),
                conflict: Some(conflict),
                error: None,
            },
            (Err(e), _) | (_, Err(e)) => AtCounts {
                misses: None,
                compulsory: None,
                conflict: None,
                error: Some(e.to_string()),
            },
        }
    }
}

/// Runs `misses --symbolic`.
pub(super) fn run(
    request: &MissesRequest<'_>,
    parameter: SymbolicParameter<'_>,
    levels: &[LevelConfig],
    listener: &dyn Listener,
) -> Result<FormulasReport, AnalyticError> {
    let start = Instant::now();
    let (name, given_range) = parameter;
    let (loaded, define) = load(request, &[name], listener)?;
    let range = given_range.or_else(|| inside_the_arrays(&loaded, name, listener));
    let parameter = (name, range);
    let at = at_points(request, &[parameter])?;
    let symbolic = range.map(|(lo, hi)| format!("{name}={lo}..{hi}"));
    let levels_request = LevelsRequest {
        // The parameter with its range: the level process fits within it.
        symbolic: symbolic.as_deref().or(request.symbolic),
        ..request.levels_request(&define)
    };
    let outcomes = model_levels(&levels_request, levels);
    let labels = loaded.kernel.reference_labels();
    let report_levels = levels
        .iter()
        .zip(outcomes)
        .map(|(l, o)| formulas_level(l, o, &labels, &at))
        .collect::<Vec<_>>();
    let errors = report_levels
        .iter()
        .map(|l| (&l.geometry, l.error.as_deref()));
    warn_unmodelled(listener, &loaded.origin, errors)?;
    let mut params = loaded.param_map();
    params.remove(name);
    Ok(FormulasReport {
        kernel: loaded.origin.clone(),
        params,
        parameter: name.to_owned(),
        range,
        model: "spec 000 (LRU, write-allocate), counts fitted to quasi-polynomials",
        levels: report_levels,
        duration_s: start.elapsed().as_secs_f64(),
    })
}

/// Largest value tried for a symbolic parameter's extent bound: past it the arrays are taken to
/// bound nothing.
const EXTENT_SEARCH_LIMIT: i64 = 1 << 40;

/// The values of `name` from 0 up to the largest at which every subscript stays inside its
/// array's extent, the other parameters at their `-D` values, when the extents bound it: the
/// counts of a loop that runs past its array are another array's, so the formulas are fitted
/// there (as with `--symbolic NAME=0..HI`) and not past it. `None` when 0 already overruns or
/// nothing overruns below [`EXTENT_SEARCH_LIMIT`]. Assumes the valid values form one range
/// from 0, which holds when subscripts grow with the loop bounds.
fn inside_the_arrays(
    loaded: &LoadedKernel,
    name: &str,
    listener: &dyn Listener,
) -> Option<(i64, i64)> {
    let index = loaded.kernel.params.iter().position(|p| p == name)?;
    let fits = |value: i64| {
        let mut params = loaded.params.clone();
        params[index] = value;
        loaded.kernel.check_subscripts(&params).is_ok()
    };
    if !fits(0) {
        return None;
    }
    let mut below = 0;
    let mut above = 1;
    while fits(above) {
        if above >= EXTENT_SEARCH_LIMIT {
            return None;
        }
        below = above;
        above *= 2;
    }
    while above - below > 1 {
        let middle = below + (above - below) / 2;
        if fits(middle) {
            below = middle;
        } else {
            above = middle;
        }
    }
    listener.note(&format!(
        "--symbolic {name}: fitted for {name} = 0..{below}, where every subscript stays inside \
         its array (give --symbolic {name}=LO..HI for another range)"
    ));
    Some((0, below))
}

/// The kernel with `names` kept symbolic, after every check that makes a bad request exit 2,
/// and the `-D` values the level processes get (with a placeholder for each name).
pub(super) fn load(
    request: &MissesRequest<'_>,
    names: &[&str],
    listener: &dyn Listener,
) -> Result<(LoadedKernel, Vec<(String, i64)>), AnalyticError> {
    let kernel = read_keeping_symbolic(request, names)?;
    let mut define = request.define.to_vec();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(AnalyticError::Request(format!(
                "--symbolic {name}: named twice"
            )));
        }
        if request.define.iter().any(|(n, _)| n == name) {
            return Err(AnalyticError::Request(format!(
                "--symbolic {name}: give {name} either a value (-D) or --symbolic, not both"
            )));
        }
        if !kernel.params.iter().any(|p| p == name) {
            return Err(AnalyticError::Request(format!(
                "--symbolic {name}: {} has no parameter `{name}` (it has: {})",
                kernel.origin,
                kernel.params.join(", ")
            )));
        }
        // The symbolic parameter's value is a placeholder: no extent or address depends on it.
        define.push(((*name).to_owned(), 1));
    }
    let loaded = LoadedKernel::load(request.kernel, &define, request.base, listener)?;
    let symbolic = symbolic_indices(&loaded, names)?;
    program_with_symbols(&loaded.kernel, &loaded.params, &symbolic, &loaded.layout).map_err(|e| {
        let hint = match &e {
            AnalyticError::SymbolSizesArray { parameter, .. } => format!(
                " (`--scan {parameter}=LO..HI` counts each value exactly and finds conflict spikes)"
            ),
            _ => String::new(),
        };
        AnalyticError::Request(format!(
            "{}: --symbolic {}: {e}{hint}",
            loaded.origin,
            names.join(",")
        ))
    })?;
    Ok((loaded, define))
}

/// The kernel read with the `-D` values folded into products and divisions (`a[j*N+i]` with
/// `-D N`), `names` left free. A product or division that needs a value for one of `names` is
/// refused saying so: the `-D` the reader suggests would take the name out of `--symbolic`.
fn read_keeping_symbolic(
    request: &MissesRequest<'_>,
    names: &[&str],
) -> Result<Kernel, AnalyticError> {
    let error = match read_kernel_file_with_values(request.kernel, request.define) {
        Ok((_, kernel)) => return refuse_folded(request, names).map(|()| kernel),
        Err(e) => e,
    };
    let about_names = || is_about_names(request, names, &error);
    Err(match &error {
        KernelError::StepNeedsValue {
            origin,
            line,
            column,
            var,
            step,
            names: unvalued,
        } if unvalued.iter().any(|n| names.contains(&n.as_str())) => {
            let free: Vec<&str> = unvalued
                .iter()
                .map(String::as_str)
                .filter(|n| names.contains(n))
                .collect();
            AnalyticError::Request(format!(
                "{origin}:{line}:{column}: --symbolic {}: the step of `{var}` is `{step}`, and \
                 the model takes a loop's step as a fixed integer, so --symbolic cannot leave \
                 it free (`--scan {}=LO..HI` counts each value exactly)",
                free.join(","),
                free[0]
            ))
        }
        KernelError::NotAffine {
            origin,
            line,
            column,
            expression,
            ..
        } if about_names() => needs_a_value(
            &format!("{origin}:{line}:{column}"),
            Some(expression),
            names,
        ),
        // Another error that a value for `names` would take away: the reader does not say
        // which expression, but a value is what it misses.
        KernelError::Syntax {
            origin,
            line,
            column,
            ..
        } if about_names() => needs_a_value(&format!("{origin}:{line}:{column}"), None, names),
        _ => error.into(),
    })
}

/// Whether reading the kernel failed with `error` for want of values for `names`: with
/// placeholder values for them the error goes away or moves.
fn is_about_names(request: &MissesRequest<'_>, names: &[&str], error: &KernelError) -> bool {
    let mut placeholders = request.define.to_vec();
    placeholders.extend(names.iter().map(|n| ((*n).to_owned(), 1)));
    match read_kernel_file_with_values(request.kernel, &placeholders) {
        Ok(_) => true,
        Err(other) => other != *error,
    }
}

/// The refusal of a product or division at `place` (`expression`, when the reader names it)
/// that is affine only once some of `names` (those it holds, else all) have a value.
fn needs_a_value(place: &str, expression: Option<&str>, names: &[&str]) -> AnalyticError {
    let words: Vec<&str> = expression
        .unwrap_or_default()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let mut free: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| words.contains(n))
        .collect();
    if free.is_empty() {
        free = names.to_vec();
    }
    let what = expression.map_or_else(
        || "a product or division here".to_owned(),
        |text| format!("`{text}`"),
    );
    AnalyticError::Request(format!(
        "{place}: {what} is affine only once {} has a value, and --symbolic leaves it free, so \
         the kernel cannot be counted as a formula in it (`--scan {}=LO..HI` counts each value \
         exactly)",
        free.join(", "),
        free.first().copied().unwrap_or_default()
    ))
}

/// Refuses a name of `names` multiplied or divided by a parameter with a value (`M*N` with
/// `-D N`): the level processes read the kernel with a placeholder value for it, which such a
/// product would fold into a constant. Found as a kernel that reads differently at two
/// placeholder values.
fn refuse_folded(request: &MissesRequest<'_>, names: &[&str]) -> Result<(), AnalyticError> {
    let read_at = |name: &str, value: i64| {
        let mut define = request.define.to_vec();
        define.extend(names.iter().map(|n| ((*n).to_owned(), 1)));
        define.push((name.to_owned(), value));
        define.retain(|(n, v)| n != name || *v == value);
        read_kernel_file_with_values(request.kernel, &define).map(|(_, kernel)| kernel)
    };
    for name in names {
        let (one, two) = (read_at(name, 1)?, read_at(name, 2)?);
        if one != two {
            return Err(AnalyticError::Request(format!(
                "{}: --symbolic {name}: `{name}` is multiplied or divided by a parameter with a \
                 value, which is affine only once `{name}` has one too, and --symbolic leaves it \
                 free (`--scan {name}=LO..HI` counts each value exactly)",
                one.origin
            )));
        }
    }
    Ok(())
}

/// The points of `--at NAME=VALUE[,NAME=VALUE...]`, each giving every parameter once, in the
/// order of `parameters`, and inside its range of interest if it has one.
pub(super) fn at_points(
    request: &MissesRequest<'_>,
    parameters: &[SymbolicParameter<'_>],
) -> Result<Vec<Vec<i64>>, AnalyticError> {
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let wanted = names.join("=…,") + "=…";
    request
        .at
        .iter()
        .map(|text| {
            let mut values = vec![None; names.len()];
            for part in text.split(',') {
                let (name, value) = loopscope_kernel::parse_definition(part.trim())
                    .map_err(|e| AnalyticError::Request(format!("--at {text}: {e}")))?;
                let Some(i) = names.iter().position(|n| *n == name) else {
                    return Err(AnalyticError::Request(format!(
                        "--at {text}: the formulas are in {}, give --at {wanted}",
                        names.join(", ")
                    )));
                };
                if values[i].replace(value).is_some() {
                    return Err(AnalyticError::Request(format!(
                        "--at {text}: {name} given twice"
                    )));
                }
            }
            let point = values
                .into_iter()
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| {
                    AnalyticError::Request(format!(
                        "--at {text}: give every parameter, --at {wanted}"
                    ))
                })?;
            // A range of interest is all the formulas were fitted to.
            for ((name, range), v) in parameters.iter().zip(&point) {
                if let Some((lo, hi)) = range.filter(|(lo, hi)| !(lo..=hi).contains(&v)) {
                    return Err(AnalyticError::Request(format!(
                        "--at {text}: {name} = {v} is outside the range {lo}..{hi} the formulas \
                         are fitted to"
                    )));
                }
            }
            Ok(point)
        })
        .collect()
}

fn formulas_level(
    l: &LevelConfig,
    outcome: LevelOutcome,
    labels: &[RefLabel],
    at: &[Vec<i64>],
) -> FormulasLevel {
    let mut level = FormulasLevel {
        geometry: Geometry::of(l),
        misses: None,
        references: Vec::new(),
        at: Vec::new(),
        duration_s: outcome.duration_s,
        error: None,
    };
    let formulas = match given(outcome.refs, outcome.formulas) {
        Ok(formulas) => formulas,
        Err(e) => {
            level.error = Some(e);
            return level;
        }
    };
    let total = formulas
        .iter()
        .skip(1)
        .try_fold(formulas.first().map(|f| f.misses.clone()), |sum, f| {
            sum.map(|s| s.plus(&f.misses)).transpose()
        });
    match total {
        Ok(total) => level.misses = total,
        Err(e) => level.error = Some(e.to_string()),
    }
    for value in at.iter().map(|point| point[0]) {
        let sum = |pick: fn(&ReferenceFormulas) -> &Formula| {
            formulas
                .iter()
                .map(|f| pick(f).at(value))
                .sum::<Result<i128, _>>()
        };
        level.at.push(AtValue {
            value,
            counts: AtCounts::of(sum(|f| &f.compulsory), sum(|f| &f.conflict)),
        });
    }
    level.references = formulas
        .into_iter()
        .zip(labels)
        .map(|(formulas, label)| FormulasReference {
            label: label.clone(),
            formulas,
        })
        .collect();
    level
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_symbolic_parameters_its_expression_holds() {
        let named = needs_a_value("k.c:7:12", Some("j*N"), &["M", "N"]).to_string();
        assert_eq!(
            named,
            "k.c:7:12: `j*N` is affine only once N has a value, and --symbolic leaves it free, so \
             the kernel cannot be counted as a formula in it (`--scan N=LO..HI` counts each value \
             exactly)"
        );
        // Without the expression, every symbolic parameter may be the one it needs.
        let unnamed = needs_a_value("k.c:7:12", None, &["M", "N"]).to_string();
        assert!(
            unnamed.starts_with("k.c:7:12: a product or division here is affine only once M, N"),
            "{unnamed}"
        );
    }
}
