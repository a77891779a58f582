//! The human-readable view of a machine description.

use std::fmt::Write;

use loopscope_machine::{Machine, Measured};

use crate::{Align, Table, format_bytes, format_hz};

/// Renders a machine description: identity, clocks, ISA, peak, the cache table and, when
/// present, what was measured.
pub fn render_machine(machine: &Machine) -> String {
    let mut out = String::new();
    let plural = |n: u32, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let identity = match (&machine.vendor, &machine.microarchitecture) {
        (v, Some(u)) if !v.is_empty() => format!("{} ({v}, {u})", machine.model),
        (v, None) if !v.is_empty() => format!("{} ({v})", machine.model),
        (_, Some(u)) => format!("{} ({u})", machine.model),
        _ => machine.model.clone(),
    };
    let clock = |hz: Option<u64>| hz.map_or_else(|| "unknown".to_owned(), format_hz);
    let isa: Vec<String> = machine
        .isa
        .iter()
        .map(|f| f.cpuinfo_flag().to_owned())
        .collect();
    let peak = machine.peak_flops_per_cycle;
    let _ = writeln!(out, "machine   {identity}");
    let _ = writeln!(
        out,
        "cores     {}, {} per core, {}",
        plural(machine.cores, "core"),
        plural(machine.threads_per_core, "thread"),
        plural(machine.sockets, "socket")
    );
    let _ = writeln!(
        out,
        "clock     nominal {}, TSC {}",
        clock(machine.nominal_hz),
        clock(machine.tsc_hz)
    );
    let _ = writeln!(
        out,
        "isa       {}",
        if isa.is_empty() {
            "unknown".to_owned()
        } else {
            isa.join(" ")
        }
    );
    let _ = writeln!(
        out,
        "peak      {} DP / {} SP FLOPs per cycle per core",
        peak.dp, peak.sp
    );
    let _ = writeln!(out, "source    {}", machine.source);
    out.push('\n');
    out.push_str(&cache_table(machine).render());
    match &machine.measured {
        None => out.push_str("\nmeasured  nothing yet (run `loopscope probe --out FILE`)\n"),
        Some(measured) => out.push_str(&render_measured(measured)),
    }
    out
}

fn cache_table(machine: &Machine) -> Table {
    let mut table = Table::new(["cache", "kind", "size", "line", "ways", "sets", "shared by"]);
    for c in 2..7 {
        table = table.align(c, Align::Right);
    }
    if machine.caches.is_empty() {
        table.row(["(none known)"]);
    }
    for cache in &machine.caches {
        table.row([
            cache.name(),
            cache.kind.name().to_owned(),
            format_bytes(cache.size_bytes),
            format!("{} B", cache.line_bytes),
            cache.ways.to_string(),
            cache.sets.to_string(),
            cache.shared_by.to_string(),
        ]);
    }
    table
}

/// Renders the measured section: cache sizes and latencies, bandwidths, peak.
pub(crate) fn render_measured(measured: &Measured) -> String {
    let mut out = String::new();
    let mut facts = Vec::new();
    if measured.duration_s > 0.0 {
        facts.push(format!("{:.1} s", measured.duration_s));
    }
    if measured.partial {
        facts.push("PARTIAL: interrupted".to_owned());
    }
    let facts = if facts.is_empty() {
        String::new()
    } else {
        format!(" ({})", facts.join(", "))
    };
    let _ = writeln!(out, "\nmeasured{facts}");
    if let Some(hz) = measured.core_hz {
        // Latencies in cycles use this clock (the probe's notes say how it was found).
        let _ = writeln!(out, "clock     core {:.3} GHz", hz / 1e9);
    }
    if !measured.caches.is_empty() {
        // The streaming column only when the probe measured one (the last level's).
        let streaming = measured
            .caches
            .iter()
            .any(|c| c.streaming_size_bytes.is_some());
        let mut header = vec!["cache", "size"];
        if streaming {
            header.push("streaming");
        }
        header.extend(["advertised", "latency", "", "confidence"]);
        let mut table = Table::new(header.iter().copied());
        for c in 1..header.len() {
            table = table.align(c, Align::Right);
        }
        for m in &measured.caches {
            let mut row = vec![
                format!("L{}{}", m.level, m.kind.suffix()),
                format_bytes(m.size_bytes),
            ];
            if streaming {
                row.push(m.streaming_size_bytes.map_or("-".into(), format_bytes));
            }
            row.extend([
                m.advertised_size_bytes.map_or("-".into(), format_bytes),
                format!("{:.1} cy", m.latency_cycles),
                format!("{:.2} ns", m.latency_ns),
                format!("{:.2}", m.confidence),
            ]);
            table.row(row);
        }
        out.push_str(&table.render());
    }
    if !measured.bandwidth.is_empty() {
        let mut table = Table::new([
            "level",
            "kernel",
            "threads",
            "working set",
            "GB/s",
            "GB/s+WA",
            "vector",
        ]);
        for c in 2..7 {
            table = table.align(c, Align::Right);
        }
        for b in &measured.bandwidth {
            table.row([
                b.level.clone(),
                b.kernel.clone(),
                b.threads.to_string(),
                format_bytes(b.working_set_bytes),
                format!("{:.2}", b.gb_per_s),
                b.gb_per_s_with_write_allocate
                    .map_or("-".into(), |v| format!("{v:.2}")),
                b.vector_bytes.map_or("-".into(), |v| format!("{v} B")),
            ]);
        }
        out.push('\n');
        out.push_str(&table.render());
    }
    if let Some(peak) = &measured.peak_gflops {
        let _ = writeln!(
            out,
            "\npeak      {:.2} GFLOP/s DP, {:.2} GFLOP/s SP ({} threads)",
            peak.dp, peak.sp, peak.threads
        );
    }
    for note in &measured.notes {
        let _ = writeln!(out, "note      {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_machine::{Cache, CacheKind};

    #[test]
    fn lists_every_cache_and_says_nothing_was_measured() {
        let mut m = Machine::unknown();
        m.caches
            .push(Cache::new(1, CacheKind::Data, 32768, 64, 8, 1));
        m.caches
            .push(Cache::new(2, CacheKind::Unified, 1 << 20, 64, 16, 1));
        let text = render_machine(&m);
        assert!(text.contains("L1d    data"), "{text}");
        assert!(text.contains("1 MiB"), "{text}");
        assert!(text.contains("measured  nothing yet"), "{text}");
    }
}
