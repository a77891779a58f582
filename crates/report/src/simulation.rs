//! Text view of `loopscope simulate`: the source, per-level counters, per-reference counters
//! and the fully associative miss curve.

use loopscope_cache::Simulation;

use crate::table::{optional, percent, right_aligned};
use crate::units::format_bytes;

/// What `render_simulation` shows beyond the levels.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimulationView {
    /// A row per reference and level.
    pub per_reference: bool,
    /// Compulsory, capacity and conflict columns (the simulation split them).
    pub three_c: bool,
}

/// The simulation as text: a summary, the levels, and the references and curve as asked.
pub fn render_simulation(r: &Simulation, view: SimulationView) -> String {
    let mut out = String::new();
    let source = r.kernel.as_deref().or(r.trace.as_deref()).unwrap_or("-");
    let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.push_str(&format!(
        "source    {source}{}\n",
        if params.is_empty() {
            String::new()
        } else {
            format!("  ({})", params.join(", "))
        }
    ));
    out.push_str(&format!(
        "accesses  {} in {:.3} s ({:.1} M accesses/s)\n",
        r.accesses,
        r.duration_s,
        r.accesses_per_s / 1e6
    ));
    if r.kernel.is_some() {
        out.push_str(&format!("flops     {}\n", r.flops));
    }
    out.push_str(&format!(
        "memory    read {}, written {}\n\n",
        format_bytes(r.memory.read_bytes),
        format_bytes(r.memory.write_bytes)
    ));
    out.push_str(&render_levels(r, view));
    if view.per_reference {
        out.push('\n');
        out.push_str(&render_references(r, view));
    }
    if let Some(curve) = &r.curve {
        out.push_str("\nfully associative LRU (stack distances)\n");
        let mut t = right_aligned(&["size", "misses", "miss %"], 0);
        for p in curve {
            t.row([
                format_bytes(p.size_bytes),
                p.misses.to_string(),
                percent(p.misses, r.accesses),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

fn render_levels(r: &Simulation, view: SimulationView) -> String {
    let mut header = vec![
        "level", "size", "ways", "line", "policy", "accesses", "hits", "misses", "miss %",
    ];
    if view.three_c {
        header.extend(["compulsory", "capacity", "conflict"]);
    }
    header.extend(["evictions", "writebacks"]);
    let mut table = right_aligned(&header, 1);
    for l in &r.levels {
        let policy = format!(
            "{},{},{}{}",
            l.replacement,
            if l.write_back { "wb" } else { "wt" },
            if l.write_allocate { "wa" } else { "nwa" },
            match l.inclusion {
                "inclusive" => ",incl",
                "exclusive" => ",excl",
                _ => "",
            }
        );
        let mut row = vec![
            l.name.clone(),
            format_bytes(l.size_bytes),
            l.ways.to_string(),
            format_bytes(l.line_bytes),
            policy,
            l.accesses.to_string(),
            l.hits.to_string(),
            l.misses.to_string(),
            percent(l.misses, l.accesses),
        ];
        if view.three_c {
            row.extend([
                optional(l.compulsory, ""),
                optional(l.capacity, ""),
                optional(l.conflict, ""),
            ]);
        }
        row.extend([l.evictions.to_string(), l.writebacks.to_string()]);
        table.row(row);
    }
    table.render()
}

fn render_references(r: &Simulation, view: SimulationView) -> String {
    let mut header = vec![
        "reference",
        "kind",
        "where",
        "level",
        "accesses",
        "hits",
        "misses",
        "miss %",
    ];
    if view.three_c {
        header.extend(["compulsory", "capacity", "conflict"]);
    }
    let mut table = right_aligned(&header, 4);
    for x in &r.references {
        let mut row = vec![
            x.label.text.clone(),
            x.label.kind.to_owned(),
            x.label.place(),
            x.level.clone(),
            x.accesses.to_string(),
            x.hits.to_string(),
            x.misses.to_string(),
            percent(x.misses, x.accesses),
        ];
        if view.three_c {
            row.extend([
                optional(x.compulsory, ""),
                optional(x.capacity, ""),
                optional(x.conflict, ""),
            ]);
        }
        table.row(row);
    }
    table.render()
}
