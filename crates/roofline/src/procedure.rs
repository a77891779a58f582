//! The §6.2 procedure around the model: the region boundary between adjacent levels
//! (eqs. 12–13), the L1 applicability conditions (§2.4), the compute cap, and the comparison
//! with a measured rate. [`analyse`] runs all of it.

use serde::Serialize;

use crate::model::{bandwidth_at, store_split, untouched_share};
use crate::{
    Ceilings, Classic, Level, Limit, Prediction, RooflineError, Traffic, classic, predict, round2,
};

/// Where one level takes over from the next one out (eqs. 12–13): the inner level limits when
/// its own references exceed `k` times the references served from beyond it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Boundary {
    /// The inner level (the paper's L2).
    pub inner: Level,
    /// The next timed level out (the paper's memory).
    pub outer: Level,
    /// k = B_inner / B_outer − 1 (2.17 on K), rounded to two decimals in paper-rounding mode.
    pub k: f64,
    /// Words per iteration served from beyond `inner` (the paper's m).
    pub outer_words: f64,
    /// Words per iteration served by `inner` itself (the paper's n).
    pub own_words: f64,
    /// k × outer_words: the paper's n* (6.52 for m = 3).
    pub threshold_words: f64,
    /// `own_words > threshold_words` (ties stay with the outer level, as §6.2 puts them).
    pub inner_limits: bool,
}

/// The thresholds of the L1 conditions; [`L1Thresholds::SECTION_6_2`] is the default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct L1Thresholds {
    /// Memory-bound: nL1s < short_mem × nM.
    pub short_mem: f64,
    /// Memory-bound: nL1l < long_mem × (words beyond L1).
    pub long_mem: f64,
    /// Cache-bound at level L: nL1l < long_cache × (words through L).
    pub long_cache: f64,
}

impl L1Thresholds {
    /// §6.2 step (3), which the paper's worked examples apply.
    pub const SECTION_6_2: L1Thresholds = L1Thresholds {
        short_mem: 10.0,
        long_mem: 8.0,
        long_cache: 1.0,
    };
}

/// One inequality of the L1 conditions, in words per iteration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct L1Check {
    /// The inequality as the paper writes it (`nL1s < 10 × nM`).
    pub rule: String,
    /// Its left side.
    pub left_words: f64,
    /// Its right side.
    pub right_words: f64,
    /// Whether it holds.
    pub ok: bool,
}

/// Whether L1 can be ignored for this kernel (§6.2 step 3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct L1Verdict {
    /// The level whose region decides which conditions apply.
    pub region: Level,
    /// The §6.2 inequalities (or the configured thresholds).
    pub checks: Vec<L1Check>,
    /// All of them hold: L1 is ignored. Otherwise the kernel is outside the model's scope.
    pub ok: bool,
    /// Whether §6.1's looser prose variant (10× and 8× memory, 2× cache) holds.
    pub section_6_1_ok: bool,
    /// Whether the loads were declared SIMD loads, which the thresholds assume.
    pub simd_loads: bool,
}

/// A measured rate beside the prediction (the paper's tuning verdict).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Measured 10^9 FLOP/s.
    pub gflops: f64,
    /// Measured rate over the theoretical peak.
    pub fraction_of_peak: f64,
    /// (measured − predicted) / predicted.
    pub error: f64,
    /// measured / predicted.
    pub ratio: f64,
    /// ratio ≥ 0.85: within the paper's 15 %, tuning can stop.
    pub at_limit: bool,
    /// For a kernel without floating-point work, compared by time: the measured seconds per
    /// run of the kernel (`ratio` is then the predicted time over this one, the share of the
    /// predicted rate reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_per_run: Option<f64>,
    /// The predicted seconds per run beside `seconds_per_run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_seconds_per_run: Option<f64>,
}

/// Choices that change the model's arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Options {
    /// Use the paper's rounded coefficients (0.36, 1.14, 0.88, 2.17), to reproduce Table 6.
    pub paper_rounding: bool,
    /// L1 condition thresholds.
    pub l1_thresholds: L1Thresholds,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            paper_rounding: false,
            l1_thresholds: L1Thresholds::SECTION_6_2,
        }
    }
}

/// Everything `loopscope roofline` reports: the inputs used, both models, the boundaries, the
/// L1 verdict, warnings and notes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// The kernel's traffic as used.
    pub traffic: Traffic,
    /// The ceilings as used (rounded in paper-rounding mode).
    pub ceilings: Ceilings,
    /// The options used.
    pub options: Options,
    /// The extended model.
    pub prediction: Prediction,
    /// The classic roofline.
    pub classic: Classic,
    /// Region boundaries between adjacent timed levels.
    pub boundaries: Vec<Boundary>,
    /// L1 applicability, when L1 references were given.
    pub l1: Option<L1Verdict>,
    /// A measured rate beside the prediction, when given.
    pub measured: Option<Comparison>,
    /// Things that make the prediction doubtful.
    pub warnings: Vec<String>,
    /// Things worth knowing that do not put it in doubt.
    pub notes: Vec<String>,
}

/// Runs the §6.2 procedure with the extended model: counts (in `traffic`), region, L1 check,
/// Cp with the compute cap, and the classic model beside it.
pub fn analyse(
    traffic: &Traffic,
    ceilings: &Ceilings,
    options: Options,
) -> Result<Analysis, RooflineError> {
    let ceilings = if options.paper_rounding {
        ceilings.paper_rounded()
    } else {
        ceilings.clone()
    };
    let prediction = predict(traffic, &ceilings)?;
    let classic = classic(traffic, &ceilings)?;
    let boundaries = boundaries(traffic, &ceilings, options.paper_rounding)?;
    let l1 = l1_verdict(traffic, prediction.bandwidth_limit, options.l1_thresholds);
    let mut analysis = Analysis {
        traffic: traffic.clone(),
        ceilings,
        options,
        prediction,
        classic,
        boundaries,
        l1,
        measured: None,
        warnings: Vec::new(),
        notes: Vec::new(),
    };
    explain(&mut analysis);
    Ok(analysis)
}

impl Analysis {
    /// Adds a measured rate (10^9 FLOP/s) and the verdict of §7.
    pub fn with_measured(mut self, gflops: f64) -> Result<Analysis, RooflineError> {
        if !(gflops.is_finite() && gflops >= 0.0) {
            return Err(RooflineError::NotPositive {
                what: "the measured rate (GFLOP/s)".into(),
                value: gflops,
            });
        }
        let predicted = self.prediction.gflops;
        if predicted <= 0.0 {
            return Err(RooflineError::Invalid(
                "the kernel does no floating-point work, so a measured GFLOP/s cannot be compared"
                    .into(),
            ));
        }
        let ratio = gflops / predicted;
        self.measured = Some(Comparison {
            gflops,
            fraction_of_peak: gflops / self.ceilings.peak_gflops,
            error: ratio - 1.0,
            ratio,
            at_limit: ratio >= 0.85,
            seconds_per_run: None,
            predicted_seconds_per_run: None,
        });
        Ok(self)
    }

    /// Adds a measured time per run of the kernel, compared with the predicted time: how a
    /// kernel without floating-point work (a copy, a transpose), whose prediction is a
    /// bytes-bound time, is compared. The ratio is predicted over measured time, the share of
    /// the predicted rate reached, so the verdict reads as for a rate.
    pub fn with_measured_time(mut self, seconds_per_run: f64) -> Result<Analysis, RooflineError> {
        if !(seconds_per_run.is_finite() && seconds_per_run > 0.0) {
            return Err(RooflineError::NotPositive {
                what: "the measured time per run (s)".into(),
                value: seconds_per_run,
            });
        }
        let predicted = self.prediction.time_s;
        if !(predicted.is_finite() && predicted > 0.0) {
            return Err(RooflineError::Invalid(
                "the kernel moves no bytes and does no floating-point work: no time to compare"
                    .into(),
            ));
        }
        let ratio = predicted / seconds_per_run;
        let gflops = self.traffic.flops as f64 / seconds_per_run / 1e9;
        self.measured = Some(Comparison {
            gflops,
            fraction_of_peak: gflops / self.ceilings.peak_gflops,
            error: ratio - 1.0,
            ratio,
            at_limit: ratio >= 0.85,
            seconds_per_run: Some(seconds_per_run),
            predicted_seconds_per_run: Some(predicted),
        });
        Ok(self)
    }
}

/// Eqs. (12)–(13) for every pair of adjacent timed levels that both have a bandwidth (one
/// bandwidth each: a level whose loads and stores are timed apart has none).
pub fn boundaries(
    traffic: &Traffic,
    ceilings: &Ceilings,
    paper_rounding: bool,
) -> Result<Vec<Boundary>, RooflineError> {
    let per_iteration = (traffic.word_bytes * traffic.iterations) as f64;
    let mut out = Vec::new();
    for pair in traffic.levels.windows(2) {
        let (inner, outer) = (&pair[0], &pair[1]);
        // A level timed by separate load and store ports has no single bandwidth to compare.
        if store_split(ceilings, inner).is_some() || store_split(ceilings, outer).is_some() {
            continue;
        }
        let b_inner = bandwidth_at(ceilings, traffic, inner)?;
        let b_outer = bandwidth_at(ceilings, traffic, outer)?;
        let (Some((b_inner, _)), Some((b_outer, _))) = (b_inner, b_outer) else {
            continue;
        };
        let exact_k = b_inner / b_outer - 1.0;
        let k = if paper_rounding {
            round2(exact_k)
        } else {
            exact_k
        };
        let outer_words = outer.bytes as f64 / per_iteration;
        let own_words = inner.bytes.saturating_sub(outer.bytes) as f64 / per_iteration;
        let threshold_words = k * outer_words;
        out.push(Boundary {
            inner: inner.level,
            outer: outer.level,
            k,
            outer_words,
            own_words,
            threshold_words,
            inner_limits: own_words > threshold_words,
        });
    }
    Ok(out)
}

/// §6.2 step (3), generalised: in the memory region nL1s < 10·nM and nL1l < 8·(words beyond
/// L1); in a cache level's region nL1l < 1·(words through that level). `None` when no L1
/// references were given, or when L1 itself is timed (then it needs no condition).
pub fn l1_verdict(traffic: &Traffic, region: Level, thresholds: L1Thresholds) -> Option<L1Verdict> {
    let refs = traffic.l1?;
    if region == Level::Cache(1) {
        return None;
    }
    let per_iteration = (traffic.word_bytes * traffic.iterations) as f64;
    let words = |level: Level| {
        traffic
            .level(level)
            .map_or(0.0, |l| l.bytes as f64 / per_iteration)
    };
    let beyond_l1 = traffic
        .levels
        .iter()
        .find(|l| l.level != Level::Cache(1))
        .map_or(0.0, |l| l.bytes as f64 / per_iteration);
    let short = refs.short_bytes as f64 / per_iteration;
    let long = refs.long_bytes as f64 / per_iteration;
    let check = |rule: String, left: f64, right: f64| L1Check {
        rule,
        left_words: left,
        right_words: right,
        ok: left < right,
    };
    let (checks, section_6_1_ok) = if region.is_memory() {
        let m = words(Level::Memory);
        let t = thresholds;
        (
            vec![
                check(
                    format!("nL1s < {} × nM", t.short_mem),
                    short,
                    t.short_mem * m,
                ),
                check(
                    format!("nL1l < {} × (words beyond L1)", t.long_mem),
                    long,
                    t.long_mem * beyond_l1,
                ),
            ],
            short < 10.0 * m && long < 8.0 * m,
        )
    } else {
        let through = words(region);
        (
            vec![check(
                format!(
                    "nL1l < {} × (words through {region})",
                    thresholds.long_cache
                ),
                long,
                thresholds.long_cache * through,
            )],
            long < 2.0 * through,
        )
    };
    Some(L1Verdict {
        region,
        ok: checks.iter().all(|c| c.ok),
        checks,
        section_6_1_ok,
        simd_loads: refs.simd_loads,
    })
}

/// What the in-order sums of the kernel mean for the prediction, or why they are not in it.
fn explain_chain(analysis: &mut Analysis) {
    let adds = analysis.traffic.chained_adds;
    if adds == 0 {
        return;
    }
    let per_iteration = adds as f64 / analysis.traffic.iterations as f64;
    let Some(latency) = &analysis.ceilings.add_latency else {
        analysis.warnings.push(format!(
            "the kernel has a dependency chain through its innermost loop ({per_iteration:.3} \
             dependent operations per iteration) and no add latency is known: the prediction \
             ignores that chain (give --add-latency-ns, or a machine file from `loopscope probe`)"
        ));
        return;
    };
    let prediction = &analysis.prediction;
    let recurrence = analysis.traffic.recurrence_adds;
    let each = match analysis.ceilings.chain_threads {
        0 | 1 => format!("{:.3} ns each", latency.ns),
        threads => format!("{:.3} ns each, {threads} threads side by side", latency.ns),
    };
    if prediction.limit == Limit::Chain && analysis.traffic.chain_is_recurrence() {
        analysis.notes.push(format!(
            "chain-bound: each iteration reads back what an earlier one stored (a recurrence \
             through memory): {:.3} dependent operations per iteration at {:.3} ns each outlast \
             every bandwidth and Peff; only an update order without that dependence lifts \
             this limit (for Gauss-Seidel: red-black ordering or a wavefront)",
            recurrence as f64 / analysis.traffic.iterations as f64,
            latency.ns
        ));
    } else if prediction.limit == Limit::Chain {
        analysis.notes.push(format!(
            "chain-bound: {per_iteration:.3} dependent additions per iteration at {each} \
             outlast every bandwidth and Peff; several partial sums written in the source would \
             lift this limit (-ffast-math lets gcc keep one vector of them)",
        ));
    }
}

fn explain(analysis: &mut Analysis) {
    let prediction = &analysis.prediction;
    if prediction.limit == Limit::Compute && analysis.traffic.flops > 0 {
        analysis.notes.push(format!(
            "compute-capped: Peff binds; without the cap (§6.2) the {} roof gives {:.4} of peak",
            prediction.bandwidth_limit, prediction.uncapped_fraction_of_peak
        ));
    }
    explain_chain(analysis);
    if analysis.traffic.flops == 0 {
        analysis.notes.push(
            "the kernel does no floating-point work: the prediction is a bytes-bound time, \
             with 0 GFLOP/s"
                .into(),
        );
    }
    if let Some(l1) = &analysis.l1 {
        for failed in l1.checks.iter().filter(|c| !c.ok) {
            analysis.warnings.push(format!(
                "outside the model's scope: {} fails ({:.4} ≥ {:.4}): L1 may limit this kernel \
                 (§6.2 step 3)",
                failed.rule, failed.left_words, failed.right_words
            ));
        }
        if l1.ok != l1.section_6_1_ok {
            analysis.notes.push(format!(
                "§6.1's prose thresholds give the opposite L1 verdict ({})",
                if l1.section_6_1_ok {
                    "within scope"
                } else {
                    "outside scope"
                }
            ));
        }
        if !l1.simd_loads {
            analysis.warnings.push(
                "the L1 conditions assume SIMD loads; with scalar loads L1 may limit earlier"
                    .into(),
            );
        }
    }
    explain_untouched(analysis);
    if analysis
        .prediction
        .levels
        .iter()
        .any(|l| l.name == Level::Cache(1))
    {
        analysis.notes.push(
            "L1 is timed with its bandwidth; the paper does not model t_L1 (§5.1) and its \
             accuracy is untested"
                .into(),
        );
    }
}

/// The share of written bytes the levels the kernel moves no bytes through were given a rate
/// at ([`untouched_share`]): their rate in the table and their roof in the plot are not a rate
/// the kernel gets.
fn explain_untouched(analysis: &mut Analysis) {
    let untouched: Vec<String> = analysis
        .prediction
        .levels
        .iter()
        .filter(|l| l.bytes == 0 && l.write_share.is_some())
        .map(|l| l.name.to_string())
        .collect();
    let Some(share) = untouched_share(&analysis.traffic).filter(|_| !untouched.is_empty()) else {
        return;
    };
    let used = analysis
        .traffic
        .levels
        .iter()
        .rfind(|l| l.level > Level::Cache(1) && l.bytes > 0);
    let (subject, verb, rates) = match untouched.as_slice() {
        [one] => (one.clone(), "moves", "its rate is"),
        many => (many.join(", "), "move", "their rates are"),
    };
    analysis.notes.push(match used {
        Some(level) => format!(
            "{subject} {verb} no bytes: {rates} taken at {:.0} % written bytes, the kernel's \
             share through {}",
            share * 100.0,
            level.level
        ),
        None => format!(
            "{subject} {verb} no bytes: {rates} for loads alone (0 % written), as the kernel \
             moves nothing beyond L1"
        ),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BandwidthFn, LevelTraffic};
    use proptest::prelude::*;

    /// A copy's traffic: 1 600 bytes through memory per run, no FLOPs, at 16 GB/s (100 ns).
    fn copy_analysis() -> Analysis {
        let traffic = Traffic {
            levels: vec![LevelTraffic {
                level: Level::Memory,
                bytes: 1600,
                volume_bytes: None,
                store_bytes: None,
            }],
            flops: 0,
            iterations: 100,
            l1: None,
            word_bytes: 8,
            chained_adds: 0,
            recurrence_adds: 0,
        };
        let mut ceilings = Ceilings::new(10.0, 10.0, "p").unwrap();
        ceilings
            .set_bandwidth(Level::Memory, BandwidthFn::Constant { gb_per_s: 16.0 }, "p")
            .unwrap();
        analyse(&traffic, &ceilings, Options::default()).unwrap()
    }

    fn level(level: Level, bytes: u64, store_bytes: Option<u64>) -> LevelTraffic {
        LevelTraffic {
            level,
            bytes,
            volume_bytes: None,
            store_bytes,
        }
    }

    fn traffic(levels: Vec<LevelTraffic>, flops: u64) -> Traffic {
        Traffic {
            levels,
            flops,
            iterations: 100,
            l1: None,
            word_bytes: 8,
            chained_adds: 0,
            recurrence_adds: 0,
        }
    }

    /// L2 and L3 timed by probe's load (0 % written) and store (50 %) kernels, as on the AMD
    /// EPYC guest with two threads: L3's store rate is above L2's load rate.
    fn mixed_ceilings() -> Ceilings {
        let mut ceilings = Ceilings::new(100.0, 100.0, "p").unwrap();
        for (level, load, store) in [(2, 77.2, 169.1), (3, 55.6, 115.0)] {
            let level = Level::Cache(level);
            let bandwidth = BandwidthFn::Constant { gb_per_s: store };
            ceilings.set_bandwidth(level, bandwidth, "p").unwrap();
            let mix = |write_share, gb_per_s, kernel: &str| crate::MixBandwidth {
                write_share,
                gb_per_s,
                kernel: kernel.into(),
            };
            ceilings.levels.last_mut().unwrap().mixes =
                vec![mix(0.0, load, "load"), mix(0.5, store, "store")];
        }
        let memory = BandwidthFn::Constant { gb_per_s: 13.0 };
        ceilings.set_bandwidth(Level::Memory, memory, "p").unwrap();
        ceilings
    }

    #[test]
    fn an_untouched_level_is_timed_at_the_kernels_write_share() {
        let ceilings = mixed_ceilings();
        // A stencil in L2: a quarter of its L2 traffic written back, nothing beyond.
        let in_l2 = traffic(
            vec![
                level(Level::Cache(2), 2400, Some(600)),
                level(Level::Cache(3), 0, Some(0)),
                level(Level::Memory, 0, Some(0)),
            ],
            400,
        );
        let a = analyse(&in_l2, &ceilings, Options::default()).unwrap();
        let rate = |a: &Analysis, i: usize| a.prediction.levels[i].bandwidth_gb_per_s.unwrap();
        let at = |load: f64, store: f64, share: f64| {
            1.0 / ((1.0 - 2.0 * share) / load + 2.0 * share / store)
        };
        assert!((rate(&a, 0) - at(77.2, 169.1, 0.25)).abs() < 1e-9);
        // Not L3's store rate (115 GB/s, above L2's): its rate at the kernel's 25 %.
        assert!((rate(&a, 1) - at(55.6, 115.0, 0.25)).abs() < 1e-9);
        assert!(rate(&a, 1) < rate(&a, 0));
        assert_eq!(a.prediction.levels[1].write_share, Some(0.25));
        // Memory has one rate whatever the share.
        assert_eq!(rate(&a, 2), 13.0);
        assert_eq!(a.prediction.levels[2].write_share, None);
        assert!(a.boundaries[0].k > 0.0, "{:?}", a.boundaries);
        assert!(
            a.notes.iter().any(|n| n
                == "L3 moves no bytes: its rate is taken at 25 % written bytes, \
                              the kernel's share through L2"),
            "{:?}",
            a.notes
        );
        // Nothing beyond L1: loads alone.
        let in_l1 = traffic(
            vec![
                level(Level::Cache(2), 0, Some(0)),
                level(Level::Cache(3), 0, Some(0)),
            ],
            400,
        );
        let mut l1 = ceilings.clone();
        l1.levels.retain(|c| !c.level.is_memory());
        let b = analyse(&in_l1, &l1, Options::default()).unwrap();
        assert_eq!((rate(&b, 0), rate(&b, 1)), (77.2, 55.6));
        assert!(
            b.notes
                .iter()
                .any(|n| n.starts_with("L2, L3 move no bytes: their rates are for loads alone")),
            "{:?}",
            b.notes
        );
        // Counts, which do not know their write-backs: every level at its single rate.
        let counts = traffic(
            vec![
                level(Level::Cache(2), 2400, None),
                level(Level::Cache(3), 0, None),
            ],
            400,
        );
        let c = analyse(&counts, &l1, Options::default()).unwrap();
        assert_eq!((rate(&c, 0), rate(&c, 1)), (169.1, 115.0));
        assert!(
            !c.notes.iter().any(|n| n.contains("no bytes")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn the_classic_roofline_of_a_kernel_without_flops_is_a_time_or_nothing() {
        let ceilings = mixed_ceilings();
        // A copy in L2: no FLOPs, no memory traffic.
        let in_cache = traffic(
            vec![
                level(Level::Cache(2), 2400, Some(800)),
                level(Level::Memory, 0, Some(0)),
            ],
            0,
        );
        let a = analyse(&in_cache, &ceilings, Options::default()).unwrap();
        assert_eq!(a.classic.limit, None);
        assert_eq!((a.classic.gflops, a.classic.time_s), (0.0, 0.0));
        assert_eq!(a.classic.level, Level::Memory);
        // The same copy in memory: memory's time, as the prediction has.
        let in_memory = traffic(
            vec![
                level(Level::Cache(2), 2600, Some(800)),
                level(Level::Memory, 2600, Some(800)),
            ],
            0,
        );
        let b = analyse(&in_memory, &ceilings, Options::default()).unwrap();
        assert_eq!(b.classic.limit, Some(Limit::Level(Level::Memory)));
        assert!((b.classic.time_s - 2600.0 / 13e9).abs() < 1e-18);
        assert_eq!(b.classic.time_s, b.prediction.time_s);
        // With FLOPs and no memory traffic, the peak.
        let c = analyse(
            &traffic(in_cache.levels.clone(), 400),
            &ceilings,
            Options::default(),
        )
        .unwrap();
        assert_eq!(c.classic.limit, Some(Limit::Compute));
        assert_eq!(c.classic.gflops, 100.0);
    }

    #[test]
    fn a_kernel_without_flops_is_compared_by_time() {
        let analysis = copy_analysis();
        assert!(analysis.clone().with_measured(1.0).is_err());
        let m = analysis
            .with_measured_time(125e-9)
            .unwrap()
            .measured
            .unwrap();
        assert_eq!(m.predicted_seconds_per_run, Some(100e-9));
        assert_eq!(m.seconds_per_run, Some(125e-9));
        // 100 ns predicted, 125 measured: 80 % of the predicted rate, below the limit.
        assert!((m.ratio - 0.8).abs() < 1e-12 && (m.error + 0.2).abs() < 1e-12);
        assert!(!m.at_limit);
        assert_eq!(m.gflops, 0.0);
        assert!(copy_analysis().with_measured_time(0.0).is_err());
    }

    proptest! {
        /// Any valid traffic under any valid ceilings: no panic, the prediction never beats
        /// Peff or the classic roofline, and its time is the largest term.
        #[test]
        fn model_is_total_and_bounded(
            served in proptest::collection::vec(0u64..1_000_000, 1..4),
            flops in 0u64..1_000_000,
            bandwidths in proptest::collection::vec(0.01f64..1e4, 4),
            peak in 0.01f64..1e5,
            peff_fraction in 0.01f64..=1.0,
        ) {
            let levels: Vec<Level> = [Level::Cache(1), Level::Cache(2), Level::Cache(3), Level::Memory]
                [4 - served.len()..].to_vec();
            let traffic = Traffic {
                levels: levels.iter().enumerate().map(|(i, &level)| LevelTraffic {
                    level,
                    bytes: served[i..].iter().sum::<u64>() * 8,
                    volume_bytes: None,
                    store_bytes: None,
                }).collect(),
                flops,
                iterations: 1,
                l1: None,
                word_bytes: 8,
                chained_adds: 0,
                recurrence_adds: 0,
            };
            let mut ceilings = Ceilings::new(peak, peak * peff_fraction, "p").unwrap();
            for (&level, &gb_per_s) in levels.iter().zip(&bandwidths) {
                ceilings.set_bandwidth(level, BandwidthFn::Constant { gb_per_s }, "p").unwrap();
            }
            match analyse(&traffic, &ceilings, Options::default()) {
                Err(_) => prop_assert!(traffic.validate().is_err()),
                Ok(a) => {
                    let p = &a.prediction;
                    prop_assert!(p.fraction_of_peak <= peff_fraction * (1.0 + 1e-12));
                    prop_assert!(p.gflops <= a.classic.gflops * (1.0 + 1e-12));
                    let largest = p.levels.iter().map(|l| l.time_s).fold(p.compute_time_s, f64::max);
                    prop_assert_eq!(p.time_s, largest);
                    prop_assert!(p.time_s > 0.0);
                }
            }
        }
    }

    #[test]
    fn a_falling_bandwidth_function_is_refused_where_it_turns_negative() {
        let mut ceilings = Ceilings::new(100.0, 100.0, "t").unwrap();
        let falling = BandwidthFn::Linear {
            slope_per_s: -1.0,
            intercept_gb_per_s: 10.0,
        };
        ceilings.set_bandwidth(Level::Memory, falling, "t").unwrap();
        let traffic = Traffic {
            levels: vec![LevelTraffic {
                level: Level::Memory,
                bytes: 8,
                volume_bytes: Some(20_000_000_000),
                store_bytes: None,
            }],
            flops: 1,
            iterations: 1,
            l1: None,
            word_bytes: 8,
            chained_adds: 0,
            recurrence_adds: 0,
        };
        let err = analyse(&traffic, &ceilings, Options::default()).unwrap_err();
        assert!(matches!(err, RooflineError::NotPositive { .. }), "{err}");
    }
}
