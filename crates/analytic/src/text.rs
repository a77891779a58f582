//! Rendering the model's pieces (domains, addresses, cache blocks, execution order) as isl
//! constraints. Each instance of a reference gets its own dimension names so that several
//! instances (target, source, evicting access) can share one formula.

use crate::program::{Affine, Array, Cache, Position, Program};

/// Dimension names that C identifiers in kernels will not collide with.
pub(crate) const W: &str = "w__";
pub(crate) const S: &str = "s__";
pub(crate) const Q: &str = "q__";
/// The line number `address / line size` of the target's instance.
pub(crate) const L: &str = "l__";

pub(crate) fn dim(prefix: &str, level: usize) -> String {
    format!("{prefix}__{level}")
}

pub(crate) fn tuple(prefix: &str, p: &Position) -> Vec<String> {
    (0..p.loops.len()).map(|l| dim(prefix, l)).collect()
}

pub(crate) fn params(program: &Program) -> String {
    format!("[{}]", program.params.join(", "))
}

/// The affine expression with the position's loop variables renamed to `prefix` dimensions.
fn affine(e: &Affine, p: &Position, prefix: &str) -> String {
    let mut s = format!("({}", e.constant);
    for (name, k) in &e.terms {
        let renamed = match p.loops.iter().position(|b| b.var == *name) {
            Some(l) => dim(prefix, l),
            None => name.clone(),
        };
        s.push_str(&format!(" + {k}*{renamed}"));
    }
    s.push(')');
    s
}

/// The iteration domain of the position's instances named `prefix`.
pub(crate) fn domain(p: &Position, prefix: &str) -> String {
    let mut parts = vec!["0 = 0".to_string()];
    for (l, b) in p.loops.iter().enumerate() {
        let (lo, hi) = (
            affine(&b.lower, p, prefix),
            affine(&b.upper_inclusive, p, prefix),
        );
        let x = dim(prefix, l);
        parts.push(format!("{lo} <= {x} <= {hi}"));
        if b.step.abs() > 1 {
            // The values keep the residue of the bound the loop starts from.
            let start = if b.step > 0 { &lo } else { &hi };
            parts.push(format!("({x} - {start}) mod {} = 0", b.step.abs()));
        }
    }
    parts.join(" and ")
}

/// The byte address of the instance.
pub(crate) fn address(p: &Position, array: &Array, prefix: &str) -> String {
    let mut stride = array.element_bytes;
    let mut terms = Vec::new();
    for (k, sub) in p.reference.subscripts.iter().enumerate().rev() {
        terms.push(format!("{stride}*{}", affine(sub, p, prefix)));
        if k > 0 {
            stride *= array.extents[k];
        }
    }
    format!("({} + {})", array.base_bytes, terms.join(" + "))
}

/// The instance's address lies in block `sets·tag + set`.
pub(crate) fn in_block(
    p: &Position,
    array: &Array,
    prefix: &str,
    cache: &Cache,
    tag: &str,
) -> String {
    let (b, s) = (cache.line_bytes, cache.sets);
    format!(
        "{}*{tag} + {b}*{S} <= {a} <= {}*{tag} + {b}*{S} + {} and 0 <= {S} <= {}",
        b * s,
        b * s,
        b - 1,
        s - 1,
        a = address(p, array, prefix)
    )
}

/// The instance's address lies in line `line` (of `line_bytes` bytes).
pub(crate) fn in_line(
    p: &Position,
    array: &Array,
    prefix: &str,
    line_bytes: i64,
    line: &str,
) -> String {
    format!(
        "{line_bytes}*{line} <= {a} <= {line_bytes}*{line} + {}",
        line_bytes - 1,
        a = address(p, array, prefix)
    )
}

/// The timestamp vector `[c₀, i₁, c₁, …, padding, ordinal]` of the instance.
fn timestamp(p: &Position, prefix: &str, depth: usize) -> Vec<String> {
    let mut t = vec![p.order[0].to_string()];
    for (l, b) in p.loops.iter().enumerate() {
        // A loop counting down runs its larger values first.
        let sign = if b.step < 0 { "-" } else { "" };
        t.push(format!("{sign}{}", dim(prefix, l)));
        t.push(p.order[l + 1].to_string());
    }
    while t.len() < 2 * depth + 1 {
        t.push("0".into());
    }
    t.push(p.ordinal.to_string());
    t
}

/// `time(a) ≺ time(b)` as a disjunction, with constant components decided here.
pub(crate) fn before(a: (&Position, &str), b: (&Position, &str), depth: usize) -> String {
    let (ta, tb) = (timestamp(a.0, a.1, depth), timestamp(b.0, b.1, depth));
    let mut clauses = Vec::new();
    let mut equal_prefix: Vec<String> = Vec::new();
    for (x, y) in ta.iter().zip(&tb) {
        match (x.parse::<i64>(), y.parse::<i64>()) {
            (Ok(u), Ok(v)) if u == v => continue,
            (Ok(u), Ok(v)) if u > v => break,
            (Ok(_), Ok(_)) => {
                clauses.push(conjunction(&equal_prefix));
                break;
            }
            _ => {
                let mut c = equal_prefix.clone();
                c.push(format!("{x} < {y}"));
                clauses.push(conjunction(&c));
                equal_prefix.push(format!("{x} = {y}"));
            }
        }
    }
    if clauses.is_empty() {
        "(1 = 0)".to_string()
    } else {
        format!("({})", clauses.join(" or "))
    }
}

fn conjunction(parts: &[String]) -> String {
    if parts.is_empty() {
        "(0 = 0)".to_string()
    } else {
        format!("({})", parts.join(" and "))
    }
}
