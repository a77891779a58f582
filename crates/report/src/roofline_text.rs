//! The human-readable view of a roofline analysis: the inputs it used, every level's term,
//! the prediction beside the classic roofline, the boundaries, the L1 verdict and a measurement.

use std::fmt::Write;

use loopscope_roofline::{
    Analysis, BandwidthFn, Counts, KernelInput, Limit, MixBandwidth, Roofline, Traffic,
};

use crate::{Align, Table};

/// `loopscope roofline`'s result as text: the kernel file and where its traffic came from, when
/// there is one, then the analysis.
pub fn render_roofline_report(roofline: &Roofline) -> String {
    let mut text = String::new();
    if let Some(input) = &roofline.kernel {
        text.push_str(&render_kernel_input(input));
    }
    text.push_str(&render_roofline(
        &roofline.analysis,
        roofline.counts.as_ref(),
    ));
    text
}

fn render_kernel_input(input: &KernelInput) -> String {
    let params: Vec<String> = input
        .params
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    let mut out = format!(
        "kernel       {} ({}), traffic from the {} of {}, steady state of repeated runs\n\
         caches       {}\n",
        input.file,
        params.join(", "),
        input.traffic_source,
        input.caches.join(", "),
        input.cache_sizes
    );
    if let Some(h) = &input.harness {
        out.push_str(&format!(
            "measured     {}: {:.3e} s per run, fastest of 5 samples of {} runs (thread CPU time)\n",
            h.compiler, h.seconds_per_run, h.repetitions
        ));
    }
    out.push('\n');
    out
}

/// Renders an analysis as text, echoing the per-iteration counts it came from when given;
/// warnings are left to the caller (they go to stderr).
pub fn render_roofline(analysis: &Analysis, counts: Option<&Counts>) -> String {
    let mut out = String::new();
    render_inputs(&mut out, analysis, counts);
    out.push('\n');
    out.push_str(&level_table(analysis).render());
    out.push('\n');
    render_verdicts(&mut out, analysis);
    out
}

fn render_inputs(out: &mut String, analysis: &Analysis, counts: Option<&Counts>) {
    let traffic = &analysis.traffic;
    let ceilings = &analysis.ceilings;
    let iterations = traffic.iterations as f64;
    let _ = writeln!(out, "inputs");
    if let Some(counts) = counts {
        let served: Vec<String> = counts
            .served_words
            .iter()
            .map(|(level, words)| format!("{level} {words}"))
            .collect();
        let _ = writeln!(
            out,
            "  counts     {} words served per iteration (each level also passes on the words \
             of the levels beyond it)",
            served.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  kernel     {} FLOPs per iteration, {} iteration{}, {}-byte words",
        number(traffic.flops as f64 / iterations),
        traffic.iterations,
        if traffic.iterations == 1 { "" } else { "s" },
        traffic.word_bytes
    );
    if let Some(l1) = traffic.l1 {
        let words = |bytes: u64| number(bytes as f64 / iterations / traffic.word_bytes as f64);
        let _ = writeln!(
            out,
            "  L1 refs    {} short-spacing, {} long-spacing words per iteration ({} loads)",
            words(l1.short_bytes),
            words(l1.long_bytes),
            if l1.simd_loads { "SIMD" } else { "scalar" }
        );
    }
    let _ = writeln!(
        out,
        "  peak       {} GFLOP/s, Peff {} GFLOP/s ({})",
        number(ceilings.peak_gflops),
        number(ceilings.effective_gflops),
        ceilings.peak_source
    );
    for (index, ceiling) in ceilings.levels.iter().enumerate() {
        let bandwidth = match ceiling.bandwidth {
            _ if !ceiling.mixes.is_empty() => mixes_text(&ceiling.mixes),
            BandwidthFn::Constant { gb_per_s } => format!("{} GB/s", number(gb_per_s)),
            BandwidthFn::Linear {
                slope_per_s,
                intercept_gb_per_s,
            } => format!(
                "{} GB/s + {slope_per_s}/s × access volume",
                number(intercept_gb_per_s)
            ),
        };
        let label = if index == 0 { "bandwidth" } else { "" };
        let _ = match &ceiling.store {
            Some(store) => writeln!(
                out,
                "  {label:<9}  {} {bandwidth} loads ({}), {} GB/s stores ({})",
                ceiling.level,
                ceiling.source,
                number(store.gb_per_s),
                store.source
            ),
            None => writeln!(
                out,
                "  {label:<9}  {} {bandwidth} ({})",
                ceiling.level, ceiling.source
            ),
        };
    }
    if let Some(latency) = &ceilings.add_latency {
        let _ = writeln!(
            out,
            "  add        {} ns per dependent addition ({})",
            number(latency.ns),
            latency.source
        );
    }
    if analysis.options.paper_rounding {
        let _ = writeln!(
            out,
            "  rounding   paper: B/Ppeak and Peff/Ppeak to 2 decimals, k to 2"
        );
    }
}

/// `76.7 GB/s at 0 % written … 138.2 GB/s at 50 %`: the range a level's bandwidth spans by
/// the share of written bytes (the level table shows the one each kernel gets).
fn mixes_text(mixes: &[MixBandwidth]) -> String {
    let point = |m: &MixBandwidth| (number(m.gb_per_s), (m.write_share * 100.0).round());
    match (mixes.first().map(point), mixes.last().map(point)) {
        (Some((low, low_share)), Some((high, high_share))) => {
            format!("{low} GB/s at {low_share} % written … {high} GB/s at {high_share} %")
        }
        _ => String::new(),
    }
}

fn level_table(analysis: &Analysis) -> Table {
    let prediction = &analysis.prediction;
    let iterations = analysis.traffic.iterations as f64;
    let mut table = Table::new(["term", "per iteration", "b/f", "rate", "time/iter", "roof"]);
    for column in 1..6 {
        table = table.align(column, Align::Right);
    }
    for level in &prediction.levels {
        table.row([
            level.name.to_string(),
            format!("{} B", number(level.bytes_per_iteration)),
            level
                .bytes_per_flop
                .map_or("-".into(), |bf| format!("{bf:.3}")),
            match (level.bandwidth_gb_per_s, level.store_bandwidth_gb_per_s) {
                (Some(b), Some(st)) => format!("{}+{} GB/s", number(b), number(st)),
                (Some(b), None) => format!("{} GB/s", number(b)),
                (None, _) => "-".into(),
            },
            format_seconds(level.time_s / iterations),
            level
                .roof_fraction_of_peak
                .map_or("-".into(), |r| format!("{r:.4}")),
        ]);
    }
    table.row([
        "compute".to_owned(),
        format!(
            "{} FLOP",
            number(analysis.traffic.flops as f64 / iterations)
        ),
        String::new(),
        format!("{} GFLOP/s", number(analysis.ceilings.effective_gflops)),
        format_seconds(prediction.compute_time_s / iterations),
        format!(
            "{:.4}",
            analysis.ceilings.effective_gflops / analysis.ceilings.peak_gflops
        ),
    ]);
    if let (Some(latency), Some(time_s)) = (
        &analysis.ceilings.add_latency,
        analysis.prediction.chain_time_s,
    ) {
        table.row([
            "chain".to_owned(),
            format!(
                "{} adds",
                number(analysis.traffic.chained_adds as f64 / iterations)
            ),
            String::new(),
            match analysis.ceilings.chain_threads {
                threads if threads > 1 && !analysis.traffic.chain_is_recurrence() => {
                    format!("{} ns/add, {threads} threads", number(latency.ns))
                }
                _ => format!("{} ns/add", number(latency.ns)),
            },
            format_seconds(time_s / iterations),
            String::new(),
        ]);
    }
    table
}

fn render_verdicts(out: &mut String, analysis: &Analysis) {
    let p = &analysis.prediction;
    let total = if analysis.traffic.iterations > 1 {
        format!(", {} in total", format_seconds(p.time_s))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "prediction  {} GFLOP/s, {:.4} of peak, limited by {} ({} per iteration{total})",
        number(p.gflops),
        p.fraction_of_peak,
        limit_name(p.limit, &analysis.traffic),
        format_seconds(p.time_per_iteration_s)
    );
    let _ = writeln!(out, "classic     {}", classic_text(analysis));
    for b in &analysis.boundaries {
        let _ = writeln!(
            out,
            "boundary    {} limits over {} when its own words exceed k × {} = {:.4} \
             (k = {:.4}); it has {}: {} side",
            b.inner,
            b.outer,
            number(b.outer_words),
            b.threshold_words,
            b.k,
            number(b.own_words),
            if b.inner_limits { b.inner } else { b.outer }
        );
    }
    if let Some(l1) = &analysis.l1 {
        let checks: Vec<String> = l1
            .checks
            .iter()
            .map(|c| {
                let verdict = if c.ok { "ok" } else { "FAILS" };
                format!(
                    "{} ({} vs {}) {verdict}",
                    c.rule,
                    number(c.left_words),
                    number(c.right_words)
                )
            })
            .collect();
        let scope = if l1.ok {
            "within scope"
        } else {
            "outside scope"
        };
        let _ = writeln!(
            out,
            "L1          {scope} ({} region): {}",
            l1.region,
            checks.join("; ")
        );
    }
    if let Some(m) = &analysis.measured {
        let compared = match (m.seconds_per_run, m.predicted_seconds_per_run) {
            // A kernel without floating-point work: its prediction is a time.
            (Some(measured), Some(predicted)) => format!(
                "{} per run against {} predicted, {:.1} % of the predicted rate (error {:+.1} \
                 %; {:+.1} % in time)",
                format_seconds(measured),
                format_seconds(predicted),
                100.0 * m.ratio,
                100.0 * m.error,
                100.0 * (measured / predicted - 1.0),
            ),
            _ => format!(
                "{} GFLOP/s, {:.4} of peak, {:.1} % of the prediction (error {:+.1} %)",
                number(m.gflops),
                m.fraction_of_peak,
                100.0 * m.ratio,
                100.0 * m.error,
            ),
        };
        let _ = writeln!(
            out,
            "measured    {compared}: {}",
            if m.ratio > 1.15 {
                // A limit the kernel beats is not a limit: a ceiling does not fit this build.
                "above the prediction by more than 15 %: a ceiling is too low for this build \
                 (bandwidths or peak measured with other code?)"
            } else if m.at_limit && analysis.prediction.limit == Limit::Chain {
                // The chain is the code's limit, not the machine's: the code can lift it.
                if analysis.traffic.chain_is_recurrence() {
                    "at the recurrence's limit (≥ 85 %): another update order would lift it"
                } else {
                    "at the in-order sum's limit (≥ 85 %): partial sums would lift it"
                }
            } else if m.at_limit {
                "at the limit (≥ 85 %), tuning can stop"
            } else {
                "below 85 % of the limit, worth tuning"
            }
        );
    }
    for note in &analysis.notes {
        let _ = writeln!(out, "note        {note}");
    }
}

/// The classic roofline's line: its rate and limit, or for a kernel without FLOPs the time the
/// level's traffic alone takes, as the prediction gives a time for it. It names the level whose
/// traffic it used, and says so when that is not memory or memory moves nothing.
fn classic_text(analysis: &Analysis) -> String {
    let c = &analysis.classic;
    let iterations = analysis.traffic.iterations;
    let moves_bytes = analysis.traffic.level(c.level).is_some_and(|l| l.bytes > 0);
    let mut used = format!("{} traffic only", c.level);
    if !c.level.is_memory() {
        used.push_str(", the outermost timed level: MEM is not timed");
    } else if !moves_bytes {
        used.push_str(": none");
    }
    match c.limit {
        Some(limit) if analysis.traffic.flops > 0 => format!(
            "{} GFLOP/s, {:.4} of peak, limited by {} ({used})",
            number(c.gflops),
            c.fraction_of_peak,
            limit_name(limit, &analysis.traffic),
        ),
        Some(limit) => {
            let total = if iterations > 1 {
                format!(", {} in total", format_seconds(c.time_s))
            } else {
                String::new()
            };
            format!(
                "no floating-point work: {} per iteration{total}, limited by {} ({used})",
                format_seconds(c.time_s / iterations as f64),
                limit_name(limit, &analysis.traffic),
            )
        }
        None => format!("no floating-point work, and no bytes to time ({used})"),
    }
}

fn limit_name(limit: Limit, traffic: &Traffic) -> String {
    match limit {
        Limit::Level(level) => format!("{level} bandwidth"),
        Limit::Compute => "compute".to_owned(),
        Limit::Chain if traffic.chain_is_recurrence() => {
            "the latency of a recurrence through memory".to_owned()
        }
        Limit::Chain => "the in-order sum's add latency".to_owned(),
    }
}

/// A number with at most four decimals and no trailing zeros: `146`, `112.64`, `0.3077`.
pub(crate) fn number(x: f64) -> String {
    let text = format!("{x:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.to_owned()
    }
}

/// A duration with a unit that keeps four significant digits readable: `0.5217 ns`, `3.2 ms`.
pub fn format_seconds(seconds: f64) -> String {
    let (value, unit) = if seconds == 0.0 {
        (0.0, "s")
    } else if seconds < 1e-6 {
        (seconds * 1e9, "ns")
    } else if seconds < 1e-3 {
        (seconds * 1e6, "µs")
    } else if seconds < 1.0 {
        (seconds * 1e3, "ms")
    } else {
        (seconds, "s")
    };
    format!("{} {unit}", number(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopscope_roofline::{Options, analyse, paper_profile, parse_counts};

    #[test]
    fn text_shows_inputs_terms_and_both_models() {
        let k = paper_profile("k-computer").unwrap();
        let counts = parse_counts("mem=3,l2=6,flops=78").unwrap();
        let analysis = analyse(&counts.traffic(), &k, Options::default()).unwrap();
        let text = render_roofline(&analysis, Some(&counts));
        for line in [
            "  counts     L2 6, MEM 3 words served per iteration",
            "  peak       128 GFLOP/s, Peff 112.64 GFLOP/s (paper profile k-computer)",
            "  bandwidth  L2 146 GB/s (paper profile k-computer)",
            "prediction  112.64 GFLOP/s, 0.8800 of peak, limited by compute (0.6925 ns per iteration)",
            "classic     128 GFLOP/s, 1.0000 of peak, limited by compute (MEM traffic only)",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        assert!(
            text.contains("MEM               24 B  0.308         46 GB/s  0.5217 ns  1.1680"),
            "{text}"
        );
        assert!(text.contains("it has 6: MEM side"), "{text}");
    }

    #[test]
    fn the_classic_line_says_which_traffic_it_used() {
        let k = paper_profile("k-computer").unwrap();
        let classic = |counts: &str| {
            let traffic = parse_counts(counts).unwrap().traffic();
            let analysis = analyse(&traffic, &k, Options::default()).unwrap();
            let text = render_roofline(&analysis, None);
            let line = text.lines().find(|l| l.starts_with("classic")).unwrap();
            line.trim_start_matches("classic").trim().to_owned()
        };
        // A copy in cache: no FLOPs and no memory bytes, so no memory bandwidth limits it.
        assert_eq!(
            classic("mem=0,l2=2,flops=0,iterations=10"),
            "no floating-point work, and no bytes to time (MEM traffic only: none)"
        );
        // A copy from memory: memory's time, as the prediction gives one.
        assert_eq!(
            classic("mem=2,flops=0,iterations=1000"),
            "no floating-point work: 0.3478 ns per iteration, 347.8261 ns in total, limited by \
             MEM bandwidth (MEM traffic only)"
        );
        assert_eq!(
            classic("mem=0,l2=2,flops=8"),
            "128 GFLOP/s, 1.0000 of peak, limited by compute (MEM traffic only: none)"
        );
        // Without memory in the traffic, the outermost level stands in, and the line says so.
        assert_eq!(
            classic("l2=3,flops=8"),
            "48.6667 GFLOP/s, 0.3802 of peak, limited by L2 bandwidth (L2 traffic only, the \
             outermost timed level: MEM is not timed)"
        );
    }

    #[test]
    fn seconds_pick_a_unit() {
        assert_eq!(format_seconds(0.5217e-9), "0.5217 ns");
        assert_eq!(format_seconds(3.2e-3), "3.2 ms");
        assert_eq!(format_seconds(2.0), "2 s");
        assert_eq!(format_seconds(0.0), "0 s");
    }
}
