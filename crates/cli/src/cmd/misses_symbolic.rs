//! `loopscope misses --symbolic NAME`: every count as a formula in one parameter (the others
//! fixed with `-D`), from `loopscope_analytic`'s fitting of exact counts, with the range where
//! each formula was verified, and `--at NAME=VALUE` to evaluate them.

use std::time::Instant;

use loopscope_analytic::{
    AnalyticError, Formula, QuasiPolynomial, ReferenceFormulas, program_with_symbols,
};
use loopscope_cache::LevelConfig;
use serde::Serialize;

use crate::cmd::misses::{MissesArgs, model_request};
use crate::cmd::model_level::{
    LevelOutcome, ModelRequest, SymbolicParameter, model_levels, symbolic_indices,
};
use crate::failure::bad_input;
use crate::ui::Ui;
use loopscope_kernel::{LoadedKernel, RefLabel};

/// The result of `misses --symbolic`, as printed with `--json`.
#[derive(Serialize)]
struct SymbolicReport {
    kernel: String,
    /// The fixed parameters.
    params: std::collections::BTreeMap<String, i64>,
    /// The parameter the formulas are in.
    parameter: String,
    /// With `--symbolic NAME=LO..HI`: the range the formulas were fitted to.
    range: Option<(i64, i64)>,
    model: &'static str,
    levels: Vec<SymbolicLevel>,
    duration_s: f64,
}

#[derive(Serialize)]
struct SymbolicLevel {
    #[serde(flatten)]
    geometry: Geometry,
    /// `null` when the level could not be modelled (see `error`).
    misses: Option<Formula>,
    references: Vec<SymbolicRef>,
    /// With `--at`: the level's misses at each value.
    at: Vec<AtValue>,
    duration_s: f64,
    error: Option<String>,
}

#[derive(Serialize)]
struct SymbolicRef {
    #[serde(flatten)]
    label: RefLabel,
    #[serde(flatten)]
    formulas: ReferenceFormulas,
}

/// A cache level as the formulas' reports name it.
#[derive(Serialize)]
pub struct Geometry {
    /// `L1`, `L2`, …
    pub name: String,
    size_bytes: u64,
    line_bytes: u64,
    ways: u64,
    sets: u64,
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

    /// `L1 (2 ways, 32 B lines, 4 sets)`.
    pub fn label(&self) -> String {
        format!(
            "{} ({} ways, {} B lines, {} sets)",
            self.name, self.ways, self.line_bytes, self.sets
        )
    }

    /// The line for a level that could not be modelled.
    pub fn not_modelled(&self, error: Option<&str>) -> String {
        format!("{}: not modelled: {}\n", self.name, error.unwrap_or("?"))
    }
}

/// Warns of each level not modelled; an error when none was.
pub fn warn_unmodelled<'a>(
    ui: &Ui,
    origin: &str,
    levels: impl Iterator<Item = (&'a Geometry, Option<&'a str>)>,
) -> anyhow::Result<()> {
    let mut modelled = false;
    for (geometry, error) in levels {
        match error {
            Some(e) => ui.warn(format!("{origin}: {} not modelled: {e}", geometry.name)),
            None => modelled = true,
        }
    }
    if !modelled {
        anyhow::bail!("{origin}: no cache level could be modelled");
    }
    Ok(())
}

/// The formulas (or chambers) a model process gave, or why it gave none.
pub fn given<R, T>(refs: Result<R, String>, given: Option<T>) -> Result<T, String> {
    refs?;
    given.ok_or_else(|| "the model process gave no formulas".into())
}

/// `  A[k] (read 8:40)`: a reference's line above its formulas.
pub fn reference_heading(label: &RefLabel) -> String {
    let place = match (label.line, label.column) {
        (Some(line), Some(column)) => format!(" {line}:{column}"),
        _ => String::new(),
    };
    format!("  {} ({}{place})\n", label.text, label.kind)
}

/// The report's first lines: the kernel and its fixed parameters, the model, the time.
pub fn header(
    kernel: &str,
    params: &std::collections::BTreeMap<String, i64>,
    names: &str,
    fitted_to: &str,
    duration_s: f64,
) -> String {
    let fixed: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let fixed = match fixed.is_empty() {
        true => String::new(),
        false => format!("{}; ", fixed.join(", ")),
    };
    format!(
        "kernel    {kernel}  ({fixed}{names} symbolic)\nmodel     spec 000 (LRU, write-allocate), \
         each level alone; exact counts fitted to {fitted_to} in {names}\ntime      \
         {duration_s:.3} s\n"
    )
}

#[derive(Serialize)]
struct AtValue {
    value: i64,
    #[serde(flatten)]
    counts: AtCounts,
}

/// A level's misses at one `--at` point, or why its formulas give none there (a point below
/// the checked values, say): the point's error, not the level's.
#[derive(Serialize)]
pub struct AtCounts {
    misses: Option<i128>,
    compulsory: Option<i128>,
    conflict: Option<i128>,
    error: Option<String>,
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

    /// `10 misses (9 compulsory, 1 conflict)`, or the error.
    pub fn text(&self) -> String {
        match (self.misses, self.compulsory, self.conflict, &self.error) {
            (Some(m), Some(c), Some(k), _) => {
                format!("{m} misses ({c} compulsory, {k} conflict)")
            }
            (_, _, _, e) => e.clone().unwrap_or_default(),
        }
    }
}

/// Runs `misses --symbolic`.
pub fn run(
    args: &MissesArgs,
    parameter: SymbolicParameter<'_>,
    levels: &[LevelConfig],
    ui: &Ui,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let (name, range) = parameter;
    let (loaded, define) = load(args, &[name], ui)?;
    let at = at_points(args, &[parameter])?;
    let request = ModelRequest {
        // The whole list, range included: the level process fits within it.
        symbolic: args.symbolic.as_deref(),
        ..model_request(args, &define)
    };
    let outcomes = model_levels(&request, levels);
    let labels = loaded.kernel.reference_labels();
    let report_levels = levels
        .iter()
        .zip(outcomes)
        .map(|(l, o)| symbolic_level(l, o, &labels, &at))
        .collect::<Vec<_>>();
    let errors = report_levels
        .iter()
        .map(|l| (&l.geometry, l.error.as_deref()));
    warn_unmodelled(ui, &loaded.origin, errors)?;
    let mut params = loaded.param_map();
    params.remove(name);
    let report = SymbolicReport {
        kernel: loaded.origin.clone(),
        params,
        parameter: name.to_owned(),
        range,
        model: "spec 000 (LRU, write-allocate), counts fitted to quasi-polynomials",
        levels: report_levels,
        duration_s: start.elapsed().as_secs_f64(),
    };
    if args.json {
        crate::cmd::print_json(&report)
    } else {
        crate::cmd::print_text(&render(&report))
    }
}

/// The kernel with `names` kept symbolic, after every check that makes a bad request exit 2,
/// and the `-D` values the level processes get (with a placeholder for each name).
pub fn load(
    args: &MissesArgs,
    names: &[&str],
    ui: &Ui,
) -> anyhow::Result<(LoadedKernel, Vec<(String, i64)>)> {
    let text = std::fs::read_to_string(&args.kernel)
        .map_err(|e| bad_input(format!("{}: cannot read: {e}", args.kernel.display())))?;
    let kernel = loopscope_kernel::parse_kernel(&text, &args.kernel.display().to_string())?;
    let mut define = args.define.clone();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(bad_input(format!("--symbolic {name}: named twice")));
        }
        if args.define.iter().any(|(n, _)| n == name) {
            return Err(bad_input(format!(
                "--symbolic {name}: give {name} either a value (-D) or --symbolic, not both"
            )));
        }
        if !kernel.params.iter().any(|p| p == name) {
            return Err(bad_input(format!(
                "--symbolic {name}: {} has no parameter `{name}` (it has: {})",
                args.kernel.display(),
                kernel.params.join(", ")
            )));
        }
        // The symbolic parameter's value is a placeholder: no extent or address depends on it.
        define.push(((*name).to_owned(), 1));
    }
    let loaded = LoadedKernel::load(&args.kernel, &define, args.base.as_deref(), ui)?;
    let symbolic = symbolic_indices(&loaded, names)?;
    program_with_symbols(&loaded.kernel, &loaded.params, &symbolic, &loaded.layout).map_err(|e| {
        let hint = match &e {
            AnalyticError::SymbolSizesArray { parameter, .. } => format!(
                " (`--scan {parameter}=LO..HI` counts each value exactly and finds conflict spikes)"
            ),
            _ => String::new(),
        };
        bad_input(format!("{}: --symbolic {}: {e}{hint}", loaded.origin, names.join(",")))
    })?;
    Ok((loaded, define))
}

/// The points of `--at NAME=VALUE[,NAME=VALUE...]`, each giving every parameter once, in the
/// order of `parameters`, and inside its range of interest if it has one.
pub fn at_points(
    args: &MissesArgs,
    parameters: &[SymbolicParameter<'_>],
) -> anyhow::Result<Vec<Vec<i64>>> {
    let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
    let wanted = names.join("=…,") + "=…";
    args.at
        .iter()
        .map(|text| {
            let mut values = vec![None; names.len()];
            for part in text.split(',') {
                let (name, value) = loopscope_kernel::parse_definition(part.trim())
                    .map_err(|e| bad_input(format!("--at {text}: {e}")))?;
                let Some(i) = names.iter().position(|n| *n == name) else {
                    return Err(bad_input(format!(
                        "--at {text}: the formulas are in {}, give --at {wanted}",
                        names.join(", ")
                    )));
                };
                if values[i].replace(value).is_some() {
                    return Err(bad_input(format!("--at {text}: {name} given twice")));
                }
            }
            let point = values
                .into_iter()
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| {
                    bad_input(format!("--at {text}: give every parameter, --at {wanted}"))
                })?;
            // A range of interest is all the formulas were fitted to.
            for ((name, range), v) in parameters.iter().zip(&point) {
                if let Some((lo, hi)) = range.filter(|(lo, hi)| !(lo..=hi).contains(&v)) {
                    return Err(bad_input(format!(
                        "--at {text}: {name} = {v} is outside the range {lo}..{hi} the formulas \
                         are fitted to"
                    )));
                }
            }
            Ok(point)
        })
        .collect()
}

fn symbolic_level(
    l: &LevelConfig,
    outcome: LevelOutcome,
    labels: &[RefLabel],
    at: &[Vec<i64>],
) -> SymbolicLevel {
    let mut level = SymbolicLevel {
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
        .map(|(formulas, label)| SymbolicRef {
            label: label.clone(),
            formulas,
        })
        .collect();
    level
}

fn render(r: &SymbolicReport) -> String {
    let p = &r.parameter;
    let mut out = header(&r.kernel, &r.params, p, "quasi-polynomials", r.duration_s);
    for l in &r.levels {
        out.push('\n');
        let Some(total) = &l.misses else {
            out.push_str(&l.geometry.not_modelled(l.error.as_deref()));
            continue;
        };
        let lowest = total
            .below
            .first()
            .map(|(n, _)| *n)
            .or(total.lower.last().map(|piece| piece.from))
            .unwrap_or(total.holds_from);
        let unchecked = if lowest > 0 {
            format!(" (values below {p} = {lowest} were not checked)")
        } else {
            String::new()
        };
        let level = l.geometry.label();
        match r.range {
            Some((lo, hi)) => out.push_str(&format!(
                "{level}: the formulas fitted to {lo} ≤ {p} ≤ {hi}, every value checked\n"
            )),
            None => out.push_str(&format!(
                "{level}: the formulas hold for {p} ≥ {}{unchecked}, every value checked up to \
                 {p} = {}; above, they are the counts' quasi-polynomials if no breakpoint lies \
                 higher\n",
                total.holds_from, total.verified_to
            )),
        }
        let highest = r.range.map(|(_, hi)| hi);
        out.push_str(&formula_lines("  ", "misses", total, p, highest));
        for reference in &l.references {
            let f = &reference.formulas;
            out.push_str(&reference_heading(&reference.label));
            for (what, formula) in [
                ("accesses", &f.accesses),
                ("compulsory", &f.compulsory),
                ("conflict", &f.conflict),
            ] {
                out.push_str(&formula_lines("    ", what, formula, p, highest));
            }
        }
        if !total.lower.is_empty() {
            let ranges: Vec<String> = total
                .lower
                .iter()
                .map(|piece| format!("{} ≤ {p} ≤ {}", piece.from, piece.to))
                .collect();
            out.push_str(&format!(
                "  below {p} = {}, other formulas hold, each checked at every value: {}\n",
                total.holds_from,
                ranges.join("; ")
            ));
        }
        if !total.below.is_empty() {
            let values: Vec<String> = total.below.iter().map(|(_, c)| c.to_string()).collect();
            let (first, last) = (total.below[0].0, total.below[total.below.len() - 1].0);
            let shown = if values.len() > 24 {
                format!("{}, … (all in --json)", values[..24].join(", "))
            } else {
                values.join(", ")
            };
            out.push_str(&format!(
                "  misses below the formulas' ranges, {p} = {first}..{last}: {shown}\n"
            ));
        }
        for at in &l.at {
            out.push_str(&format!("  at {p} = {}: {}\n", at.value, at.counts.text()));
        }
    }
    out
}

/// `what` and its formula; when lower ranges have other formulas, each range on its own line
/// (a range merged into the one above when that range's formula gives its values too).
fn formula_lines(
    indent: &str,
    what: &str,
    formula: &Formula,
    p: &str,
    highest: Option<i64>,
) -> String {
    // (formula, from, to): the top range is open above, unless the range of interest ends.
    let mut groups: Vec<(&QuasiPolynomial, i64, Option<i64>)> =
        vec![(&formula.quasi_polynomial, formula.holds_from, highest)];
    for piece in &formula.lower {
        let last = groups.len() - 1;
        // A formula that also gives the range's values covers it (the fit is shared by every
        // series, so one series' breakpoint cuts the others' ranges where nothing changes).
        let above = groups[last].0;
        let covers =
            (piece.from..=piece.to).all(|n| above.at(n).ok() == piece.quasi_polynomial.at(n).ok());
        if above.equivalent(&piece.quasi_polynomial) || covers {
            groups[last].1 = piece.from;
        } else {
            groups.push((&piece.quasi_polynomial, piece.from, Some(piece.to)));
        }
    }
    if groups.len() == 1 {
        return format!(
            "{indent}{what:<11} {}\n",
            formula.quasi_polynomial.render(p)
        );
    }
    let mut out = String::new();
    for (i, (qp, from, to)) in groups.iter().enumerate() {
        let range = match to {
            Some(to) => format!("{from} ≤ {p} ≤ {to}"),
            None => format!("{p} ≥ {from}"),
        };
        let label = if i == 0 { what } else { "" };
        out.push_str(&format!(
            "{indent}{label:<11} {}  (for {range})\n",
            qp.render(p)
        ));
    }
    out
}
