//! The whole probe: every measurement in order, with a time budget, progress reports and an
//! interrupt flag, assembled into the `measured` section of a machine description.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loopscope_machine::{Bandwidth, CacheKind, Machine, Measured, MeasuredCache, PeakGflops};
use serde::Serialize;

use crate::ProbeError;
use crate::bandwidth::{Kernel, measure_bandwidth};
use crate::chase::{ChaseBuffer, MAX_ROUNDS, TLB_PAGE_BYTES};
use crate::clock::{CoreClock, measure_core_clock};
use crate::code::CodeKind;
use crate::flops::{FlopsSample, Precision, measure_flops};
use crate::icache::CodeProbe;
use crate::knee::{
    Knee, KneeOptions, Point, adaptive_sweep_until, find_code_knees, find_knees, geometric_sizes,
    out_of_order, span_indices,
};
use crate::levels::{
    MIN_L1I_RATIO, SHUFFLED_CURVE, assign_levels, cache_knees, level_caches, shuffled_walk_sizes,
};
use crate::plateau::memory_plateau_reached;
use crate::plausible::{implausible_bandwidths, implausible_note};
use crate::simd::Simd;
use crate::streaming::{
    STREAMING_CURVE, STREAMING_UNIT, ns_per_line, streaming_knee, streaming_note, streaming_spans,
    streaming_sweep_done,
};
use crate::timer::{Timer, add_latency_ns, allowed_cpus, pin_current_thread};
use crate::tlb::{PAGE_WALK_CURVE, page_walk_note, page_walk_spans, tlb_knees};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// How long and how finely to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeOptions {
    /// About 10 s instead of about 60 s: coarser grids, fewer repeats, shorter kernels.
    pub quick: bool,
    /// Seed of the random permutations (chase cycles, random jump chains).
    pub seed: u64,
}

/// One measured curve with its knees.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// `jump_chain`, `nop_body` or `pointer_chase`.
    pub name: String,
    /// What `value` measures, for example `ns per load`.
    pub unit: String,
    /// Points sorted by size.
    pub points: Vec<Point>,
    /// Knees found on the curve.
    pub knees: Vec<Knee>,
}

/// Everything one probe run found; `measured` goes into the machine file.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// The machine-file section (caches, bandwidth, peak, duration, partial, notes).
    #[serde(flatten)]
    pub measured: Measured,
    /// The clock used.
    pub timer: Timer,
    /// The core clock latencies in cycles and the peak fraction use, with its evidence.
    pub core_clock: CoreClock,
    /// The logical CPU the serial measurements ran on, when pinning worked.
    pub pinned_cpu: Option<usize>,
    /// Vector extension of the kernels.
    pub simd: Simd,
    /// Raw curves, for plots and for checking the knees by eye.
    pub curves: Vec<Curve>,
    /// Every FLOP-rate measurement (one thread and all threads).
    pub flops: Vec<FlopsSample>,
}

/// Settings that follow from `quick`.
struct Budget {
    coarse_per_octave: u32,
    fine_per_octave: u32,
    rounds: u32,
    code_repeats: u32,
    chase_repeats: u32,
    chase_min_loads: usize,
    chase_max_loads: usize,
    /// Loads per sample far beyond the caches, where every load misses and each costs ~100 ns.
    /// Samples stay within a few ms, below a scheduler time slice: under load, one that
    /// straddles a context switch is thrown away, and long ones nearly all would be.
    chase_far_loads: usize,
    /// Repeats far beyond the caches: the steps there (last level to memory, ~10x) stand far
    /// out of the noise, and under load these longest samples are the ones most often thrown
    /// away and taken again, so they are most of a loaded run's time.
    chase_far_repeats: u32,
    kernel_time: Duration,
    kernel_trials: u32,
    /// Points per octave of the last level's streaming sweep.
    streaming_per_octave: u32,
    flops_time: Duration,
    calibration: Duration,
}

impl Budget {
    fn new(quick: bool) -> Budget {
        if quick {
            Budget {
                coarse_per_octave: 4,
                fine_per_octave: 16,
                rounds: 1,
                code_repeats: 15,
                chase_repeats: 11,
                chase_min_loads: 80_000,
                chase_max_loads: 150_000,
                chase_far_loads: 15_000,
                chase_far_repeats: 11,
                kernel_time: Duration::from_millis(15),
                kernel_trials: 1,
                streaming_per_octave: 2,
                flops_time: Duration::from_millis(60),
                calibration: Duration::from_millis(30),
            }
        } else {
            Budget {
                coarse_per_octave: 6,
                fine_per_octave: 24,
                rounds: 2,
                code_repeats: 21,
                chase_repeats: 21,
                chase_min_loads: 150_000,
                chase_max_loads: 400_000,
                chase_far_loads: 20_000,
                chase_far_repeats: 11,
                kernel_time: Duration::from_millis(120),
                kernel_trials: 3,
                streaming_per_octave: 4,
                flops_time: Duration::from_millis(300),
                calibration: Duration::from_millis(100),
            }
        }
    }
}

/// Reports progress: the phase's name and the fraction of the whole run done.
pub type ProgressFn<'a> = dyn FnMut(&str, f64) + Send + 'a;

/// Runs every measurement. `machine` supplies the advertised caches (to size the sweeps and
/// name the knees); `stop` interrupts between points and the result is then marked partial.
pub fn run_probe(
    machine: &Machine,
    options: &ProbeOptions,
    stop: &AtomicBool,
    progress: &mut ProgressFn<'_>,
) -> Result<ProbeReport, ProbeError> {
    let started = Instant::now();
    let budget = Budget::new(options.quick);
    let cpus = allowed_cpus();
    let serial = std::thread::scope(|scope| {
        scope
            .spawn(|| serial_part(machine, options, &budget, cpus[0], stop, progress))
            .join()
            .unwrap_or_else(|_| Err(ProbeError::Invalid("a measuring thread panicked".into())))
    })?;
    let Serial {
        timer,
        core_clock,
        add_latency_ns,
        pinned,
        mut curves,
        mut notes,
        mut caches,
        memory_latency_ns,
    } = serial;
    let simd = Simd::detect();
    notes.push(format!(
        "kernels: {}{}",
        simd.name(),
        if simd.has_fma() { " + FMA" } else { "" }
    ));
    let mut bandwidth = Vec::new();
    let mut implausible = Vec::new();
    let kernels_started = Instant::now();
    if !stop.load(Ordering::Relaxed) {
        progress("bandwidth", 0.8);
        bandwidth = bandwidths(machine, &caches, &cpus, simd, &budget, stop)?;
        implausible = implausible_bandwidths(&bandwidth);
        notes.extend(implausible.iter().map(implausible_note));
        notes.push(format!(
            "phase times: bandwidth {:.1} s",
            kernels_started.elapsed().as_secs_f64()
        ));
    }
    if !stop.load(Ordering::Relaxed) {
        progress("streaming sweep", 0.9);
        let sweep_started = Instant::now();
        let sweep = StreamingSweep {
            machine,
            bandwidth: &bandwidth,
            cpu: cpus[0],
            simd,
            budget: &budget,
        };
        curves.extend(sweep.run(&mut caches, stop, &mut notes)?);
        notes.push(format!(
            "phase times: streaming sweep {:.1} s",
            sweep_started.elapsed().as_secs_f64()
        ));
    }
    let mut flops = Vec::new();
    if !stop.load(Ordering::Relaxed) {
        progress("peak FLOPs", 0.95);
        let mut sets = vec![vec![cpus[0]]];
        if cpus.len() > 1 {
            sets.push(cpus.clone());
        }
        for set in &sets {
            for precision in [Precision::Dp, Precision::Sp] {
                flops.push(measure_flops(simd, precision, set, budget.flops_time));
            }
        }
    }
    let peak_gflops = peak(&flops, machine, core_clock.hz, &mut notes);
    progress("done", 1.0);
    let partial = stop.load(Ordering::Relaxed);
    caches.sort_by_key(|c| (c.level, c.kind));
    Ok(ProbeReport {
        measured: Measured {
            caches,
            bandwidth,
            peak_gflops,
            duration_s: started.elapsed().as_secs_f64(),
            partial,
            notes,
            core_hz: Some(core_clock.hz),
            memory_latency_ns,
            add_latency_ns: Some(add_latency_ns),
            implausible,
        },
        timer,
        core_clock,
        pinned_cpu: pinned.then_some(cpus[0]),
        simd,
        curves,
        flops,
    })
}

struct Serial {
    timer: Timer,
    core_clock: CoreClock,
    pinned: bool,
    curves: Vec<Curve>,
    notes: Vec<String>,
    caches: Vec<MeasuredCache>,
    memory_latency_ns: Option<f64>,
    add_latency_ns: f64,
}

fn serial_part(
    machine: &Machine,
    options: &ProbeOptions,
    budget: &Budget,
    cpu: usize,
    stop: &AtomicBool,
    progress: &mut ProgressFn<'_>,
) -> Result<Serial, ProbeError> {
    let started = Instant::now();
    let mut notes = Vec::new();
    progress("timer", 0.0);
    let pinned = match pin_current_thread(cpu) {
        Ok(()) => true,
        Err(e) => {
            notes.push(format!("not pinned ({e}): timings may move between cores"));
            false
        }
    };
    let timer = Timer::calibrate(budget.calibration);
    notes.push(format!("timer: {}", timer.describe()));
    // The invariant TSC ticks at the nominal clock where the machine description has none.
    let nominal_hz = machine
        .nominal_hz
        .map(|hz| hz as f64)
        .or((timer.source == crate::timer::TimerSource::Tsc).then_some(timer.ticks_per_s));
    let core_clock = measure_core_clock(&timer, 30, nominal_hz);
    let core_hz = core_clock.hz;
    notes.push(core_clock.describe());
    let add_latency_ns = add_latency_ns(&timer, 30);
    notes.push(format!(
        "floating-point add latency {add_latency_ns:.3} ns, {:.2} cycles (dependent-add chain)",
        add_latency_ns * core_hz / 1e9
    ));
    let advertised = |level: u8, kind: CacheKind| {
        machine
            .caches
            .iter()
            .find(|c| {
                c.level == level
                    && (c.kind == kind
                        || kind == CacheKind::Unified && c.kind != CacheKind::Instruction)
            })
            .map(|c| c.size_bytes)
    };
    let l2 = advertised(2, CacheKind::Unified).unwrap_or(MIB);
    let llc = machine
        .data_caches()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(32 * MIB);

    let mut curves = Vec::new();
    let mut code = CodeProbe::new((4 * l2).max(4 * MIB) as usize, options.seed)?;
    // Below 2 KiB the call itself dominates the time per unit (spec 003, section 9.6).
    let sweeps = [
        (
            CodeKind::RandomJumpChain,
            "random_jump_chain",
            "ns per line",
            2 * KIB,
            (4 * l2).min(4 * MIB),
            64,
            0.0,
        ),
        (
            CodeKind::JumpChain,
            "jump_chain",
            "ns per line",
            2 * KIB,
            (4 * l2).min(4 * MIB),
            64,
            0.1,
        ),
        (
            CodeKind::NopBody,
            "nop_body",
            "ns per byte",
            4 * KIB,
            (4 * l2).max(4 * MIB),
            4,
            0.2,
        ),
    ];
    for (kind, name, unit, lo, hi, granule, at) in sweeps {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if options.quick && kind == CodeKind::JumpChain {
            continue;
        }
        let grid = geometric_sizes(lo, hi, budget.coarse_per_octave, granule);
        let mut tick = |f: f64| progress(&format!("code {name}"), at + 0.1 * f);
        let mut measure_one = |size: u64| {
            code.measure(&timer, kind, size as usize, budget.code_repeats)
                .map(|sample| sample.point)
        };
        let never = |_: &[Point]| false;
        let (points, _) = sweep(
            &grid,
            granule,
            budget,
            stop,
            (&mut tick, &never),
            &mut measure_one,
        )?;
        curves.push(Curve {
            name: name.into(),
            unit: unit.into(),
            knees: find_code_knees(&points),
            points,
        });
    }
    if !stop.load(Ordering::Relaxed) {
        let l1i = advertised(1, CacheKind::Instruction).unwrap_or(32 * KIB);
        let hi = (4 * l1i).min(l2 / 2).max(8 * KIB);
        let mut tick = |f: f64| progress("code indirect_jump_chain", 0.28 + 0.02 * f);
        curves.push(indirect_chain_curve(
            &mut code, &timer, budget, hi, stop, &mut tick,
        )?);
    }
    notes.push(huge_note(
        "code",
        code.region().huge_page_kib(),
        code.region().capacity(),
    ));
    let code_s = started.elapsed().as_secs_f64();

    let mut passes = PassValues::new();
    let mut chase = ChaseBuffer::new((4 * llc) as usize, options.seed)?;
    if !stop.load(Ordering::Relaxed) {
        let grid = geometric_sizes(KIB, 4 * llc, budget.coarse_per_octave, 64);
        let mut tick = |f: f64| progress("pointer chase", 0.3 + 0.5 * f);
        // The code curves' L1i candidates are measured again every few chase points, spread
        // over the chase's seconds: each pass is another draw of whatever shares the front
        // end (see `remeasure_l1i_candidates`).
        let mut chase_points = 0u32;
        let mut measure_one = |size: u64| {
            chase_points += 1;
            if chase_points.is_multiple_of(CODE_RECHECK_EVERY_POINTS) {
                remeasure_indirect_chain(&mut code, &timer, budget.code_repeats, &mut curves)?;
                remeasure_l1i_candidates(
                    &mut code,
                    &timer,
                    (budget.code_repeats, l2 / 4),
                    &mut curves,
                    &mut passes,
                )?;
            }
            let (loads, repeats) = if size > llc / 8 {
                (budget.chase_far_loads, budget.chase_far_repeats)
            } else {
                (
                    ((size / 64) as usize).clamp(budget.chase_min_loads, budget.chase_max_loads),
                    budget.chase_repeats,
                )
            };
            chase.measure(&timer, size as usize, loads, repeats)
        };
        // The grid runs to 4x the advertised last-level cache, but the sweep ends once the
        // memory plateau is established (see `plateau`): a guest may see a few MiB of
        // hundreds advertised.
        let enough =
            |points: &[Point]| memory_plateau_reached(points, llc, &KneeOptions::default());
        let (points, knees) = sweep(
            &grid,
            64,
            budget,
            stop,
            (&mut tick, &enough),
            &mut measure_one,
        )?;
        if let Some(last) = points.last().filter(|_| !stop.load(Ordering::Relaxed)) {
            let why = if last.size_bytes < grid.last().copied().unwrap_or(0) {
                "the memory plateau established"
            } else {
                "4x the advertised last-level cache, no memory plateau found before it"
            };
            notes.push(format!(
                "pointer chase ended at {} KiB: {why}",
                last.size_bytes / KIB
            ));
        }
        notes.push(huge_note("data", chase.huge_page_kib(), chase.capacity()));
        curves.push(Curve {
            name: "pointer_chase".into(),
            unit: "ns per load".into(),
            points,
            knees,
        });
    }
    notes.push(format!(
        "phase times: timer and code {code_s:.1} s, pointer chase {:.1} s",
        started.elapsed().as_secs_f64() - code_s
    ));
    let rechecks_started = Instant::now();
    if !stop.load(Ordering::Relaxed) {
        recheck_code_curves(
            &mut code,
            &timer,
            (budget.code_repeats, l2 / 4),
            &mut curves,
            &mut passes,
        )?;
    }
    if !stop.load(Ordering::Relaxed)
        && !options.quick
        && let Some(curve) = curves.iter_mut().find(|c| c.name == "pointer_chase")
    {
        // The private levels' knees, measured with the full load counts (the last level's
        // are far samples, and it is shared: its effective size is what it is).
        let again = private_level_span(curve, llc);
        let repeats = (budget.chase_repeats / 3).max(3);
        let mut measure_one = |size: u64| {
            let loads =
                ((size / 64) as usize).clamp(budget.chase_min_loads, budget.chase_max_loads);
            chase.measure(&timer, size as usize, loads, repeats)
        };
        recheck_spans(curve, &again, &mut measure_one)?;
    }
    if !stop.load(Ordering::Relaxed)
        && let Some(curve) = curves.iter().find(|c| c.name == "pointer_chase")
    {
        // Walks in new orders every round beside the cyclic one, in the private levels'
        // rises: the replacement policy for sizing a rise smeared by page placement.
        let sizes = shuffled_walk_sizes(curve, llc);
        let repeats = (budget.chase_repeats / 3).max(3);
        let mut points = Vec::with_capacity(sizes.len());
        for size in sizes {
            let loads = (size as usize / 64 * MAX_ROUNDS).max(budget.chase_min_loads);
            points.push(chase.measure_rounds(
                &timer,
                size as usize,
                (loads, repeats),
                MAX_ROUNDS,
            )?);
        }
        curves.push(Curve {
            name: SHUFFLED_CURVE.into(),
            unit: format!("ns per load, {MAX_ROUNDS} rounds in new random orders"),
            points,
            knees: Vec::new(),
        });
    }
    notes.push(format!(
        "phase times: rechecks {:.1} s",
        rechecks_started.elapsed().as_secs_f64()
    ));
    let levels = assign_levels(machine, &curves);
    // The indirect chain's one knee is the fitted L1i: its rise is read as a whole, not
    // stepped.
    if let Some(l1i) = levels.knees.iter().find(|l| l.code_fit.is_some())
        && let Some(curve) = curves.iter_mut().find(|c| c.name == INDIRECT_CURVE)
    {
        curve.knees = vec![l1i.knee];
    }
    let caches = level_caches(&levels.knees, core_hz);
    if !stop.load(Ordering::Relaxed) {
        let data_caches: Vec<u64> = caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .map(|c| c.size_bytes)
            .collect();
        let started = Instant::now();
        let (curve, note) = page_walk_curve(&mut chase, &timer, budget, l2, &data_caches)?;
        curves.push(curve);
        notes.push(note);
        notes.push(format!(
            "phase times: page walk {:.1} s",
            started.elapsed().as_secs_f64()
        ));
    }
    let memory_latency_ns = levels.memory_latency_ns;
    for level in &levels.knees {
        if let Some(note) = size_note(level) {
            notes.push(note);
        }
        if let Some(note) = crate::levels::written_size(level).1 {
            notes.push(note);
        }
    }
    Ok(Serial {
        timer,
        core_clock,
        add_latency_ns,
        pinned,
        curves,
        notes,
        caches,
        memory_latency_ns,
    })
}

/// The data TLB's curve over the spans of [`page_walk_spans`] and its note; knees where the
/// lines, one a page, outgrow one of `data_caches` are not TLBs.
fn page_walk_curve(
    chase: &mut ChaseBuffer,
    timer: &Timer,
    budget: &Budget,
    l2_bytes: u64,
    data_caches: &[u64],
) -> Result<(Curve, String), ProbeError> {
    let repeats = (budget.chase_repeats / 3).max(3);
    let spans = page_walk_spans(l2_bytes, chase.capacity() as u64, budget.coarse_per_octave);
    let mut points = Vec::with_capacity(spans.len());
    for span in spans {
        let pages = (span / TLB_PAGE_BYTES as u64) as usize;
        let loads = (4 * pages).clamp(budget.chase_min_loads / 4, budget.chase_max_loads / 4);
        points.push(chase.measure_pages(timer, pages, (loads, repeats))?);
    }
    let knees = tlb_knees(&points, data_caches);
    let note = page_walk_note(&knees);
    let curve = Curve {
        name: PAGE_WALK_CURVE.into(),
        unit: "ns per load, one line in each 4 KiB page".into(),
        points,
        knees,
    };
    Ok((curve, note))
}

/// A note for a level whose effective size is more than 12.5 % from the advertised one, with
/// the evidence: where its rise starts and ends, and how many times its lower level the upper
/// is. A rise that starts well before the size found is misses creeping in (another task
/// sharing the cache); a sharp one at a smaller size is a smaller cache.
fn size_note(level: &crate::levels::LevelKnee) -> Option<String> {
    if let Some(r) = &level.ramp_fit {
        return Some(ramp_note(level, r));
    }
    if let Some(f) = &level.code_fit {
        return Some(code_fit_note(level, f));
    }
    let adv = level.advertised_bytes?;
    let knee = &level.knee;
    let ratio = knee.size_bytes as f64 / adv as f64;
    if (0.875..=1.125).contains(&ratio) {
        return None;
    }
    let kib = |b: u64| b / KIB;
    let creeping = (knee.rise_start_bytes as f64) < 0.75 * knee.size_bytes as f64;
    Some(format!(
        "L{}{}: effective size {} B is {ratio:.2}x the advertised {adv} B ({}: its rise runs \
         from {} to {} KiB, {:.1}x, {})",
        level.level,
        level.kind.suffix(),
        knee.size_bytes,
        level.method,
        kib(knee.rise_start_bytes),
        kib(knee.end_bytes),
        knee.ratio,
        if creeping {
            "misses creep in well before it: something else shares the cache, its size is \
             where half the loads miss"
        } else {
            "a sharp step"
        }
    ))
}

/// `, 0.92x the advertised 512 KiB`, or nothing without an advertised size.
fn advertised_share(level: &crate::levels::LevelKnee) -> String {
    level
        .advertised_bytes
        .map(|a| {
            format!(
                ", {:.2}x the advertised {} KiB",
                level.knee.size_bytes as f64 / a as f64,
                a / KIB
            )
        })
        .unwrap_or_default()
}

/// The evidence of an L1i sized by the model fitted to the indirect jump chain: the fit, the
/// policy it chose and how clearly, and the times behind it.
fn code_fit_note(level: &crate::levels::LevelKnee, f: &crate::levels::CodeFit) -> String {
    let advertised = advertised_share(level);
    let (chosen, other) = match f.fit.replacement {
        crate::placement::Replacement::Lru => ("LRU-like", "random replacement"),
        crate::placement::Replacement::Random => ("random", "LRU"),
    };
    // Two decimals at most, none for a whole number of KiB.
    let size_kib = (level.knee.size_bytes as f64 / KIB as f64 * 100.0).round() / 100.0;
    format!(
        "L1i: {size_kib} KiB{advertised}, from a cache model fitted to the indirect jump \
         chain (fit {:.1} KiB, {chosen} replacement: residual {:.2} ns of a {:.1} ns miss on a \
         {:.1} ns mispredicted jump per line; {other} leaves {:.2} ns)",
        f.fit.capacity_bytes as f64 / KIB as f64,
        f.fit.rms_ns,
        f.fit.miss_penalty_ns,
        f.fit.hit_ns,
        f.other_rms_ns,
    )
}

/// The evidence of a level sized by a fit of random page placement: where misses start, the
/// replacement policy and its measure, the fit's residual, and the knee's own estimate.
fn ramp_note(level: &crate::levels::LevelKnee, r: &crate::levels::RampFit) -> String {
    let kib = |b: u64| b / KIB;
    let advertised = advertised_share(level);
    format!(
        "L{}{}: {} KiB{advertised}, from a model of 4 KiB pages placed at random in physical \
         memory (misses creep in from {} KiB, a tenth by {} KiB, as random placement \
         predicts; {} replacement: walks in new orders keep {:.2} of the cyclic walk's extra \
         time; fit {:.0} KiB, residual {:.2} ns of a {:.1} ns miss; the knee alone gave {} KiB)",
        level.level,
        level.kind.suffix(),
        kib(level.knee.size_bytes),
        kib(level.knee.rise_start_bytes),
        kib(r.fit.tenth_miss_bytes),
        match r.fit.replacement {
            crate::placement::Replacement::Lru => "LRU-like",
            crate::placement::Replacement::Random => "random",
        },
        r.shuffled_share,
        r.fit.capacity_bytes as f64 / KIB as f64,
        r.fit.rms_ns,
        r.fit.miss_penalty_ns,
        kib(r.knee_bytes),
    )
}

/// Pointer-chase points between two passes over the code curves' L1i candidates (a chase
/// point takes tens of milliseconds, a pass over a code span about as long).
const CODE_RECHECK_EVERY_POINTS: u32 = 8;

/// How far past its step (octaves) a code curve's L1i candidate is measured again: another
/// task's code sharing the L1i moves the step earlier by its footprint, so the points above
/// the step, not only those around it, are suspect.
const L1I_RECHECK_OCTAVES: f64 = 0.5;

/// Indices of the points of a code curve to measure again: the span of its first step of at
/// least [`MIN_L1I_RATIO`] (the L1i candidate of `levels::l1i_knee`), extended to
/// [`L1I_RECHECK_OCTAVES`] past it; none when that step lies past `max_step_bytes` (a quarter
/// of the L2: then it is the L2's, as on Intel, where the NOP body's first step is).
fn l1i_candidate_span(curve: &Curve, max_step_bytes: u64) -> Vec<usize> {
    let Some(knee) = curve
        .knees
        .iter()
        .find(|k| k.ratio >= MIN_L1I_RATIO)
        .filter(|k| k.size_bytes <= max_step_bytes)
    else {
        return Vec::new();
    };
    span_indices(&curve.points, &[widened(*knee, L1I_RECHECK_OCTAVES)])
}

/// How far past its step (octaves) a private data level's knee is measured again after the
/// chase: up to a sharer holding half the cache.
const DATA_RECHECK_OCTAVES: f64 = 1.0;

/// Indices of the pointer chase's points to measure again after the sweep: the spans of the
/// private levels' knees (those ending below an eighth of the last-level cache `llc_bytes`,
/// measured with the full load counts; the last level is shared, its effective size is what
/// it is), each extended to [`DATA_RECHECK_OCTAVES`] past its step, since a sharer moves a
/// step earlier by its footprint (to 640 KiB for a Zen 4 guest's 1 MiB L2 in one run).
fn private_level_span(chase: &Curve, llc_bytes: u64) -> Vec<usize> {
    let knees: Vec<Knee> = cache_knees(chase)
        .into_iter()
        .filter(|k| k.end_bytes <= llc_bytes / 8)
        .map(|k| widened(k, DATA_RECHECK_OCTAVES))
        .collect();
    span_indices(&chase.points, &knees)
}

/// `knee` with its span's end moved to at least `octaves` past its capacity estimate.
fn widened(knee: Knee, octaves: f64) -> Knee {
    Knee {
        end_bytes: knee
            .end_bytes
            .max((knee.cliff_hi_bytes as f64 * octaves.exp2()) as u64),
        ..knee
    }
}

/// Every pass's value of the points of the code curves' L1i candidates, by curve name and
/// size.
type PassValues = HashMap<(String, u64), Vec<f64>>;

/// The lower median: the middle value, or the lower of the middle two (the minimum of two).
fn lower_median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len().max(1) - 1) / 2]
}

/// Measures the L1i candidates of the code curves again ([`l1i_candidate_span`], from their
/// knees as they stand) and finds their knees again. Each point takes the lower median of
/// its passes (each the minimum of its repeats), not their minimum: over some twenty passes
/// the minimum picks the one where a step past the L1i ran at hit speed (38 KiB for a 32 KiB
/// L1i in one run: a sequential prefetcher, or a lucky replacement state), where the median
/// leaves out both that and the passes a sharer slowed.
fn remeasure_l1i_candidates(
    code: &mut CodeProbe,
    timer: &Timer,
    (repeats, max_step_bytes): (u32, u64),
    curves: &mut [Curve],
    passes: &mut PassValues,
) -> Result<(), ProbeError> {
    for curve in curves.iter_mut().filter(|c| c.name != INDIRECT_CURVE) {
        let Some(kind) = code_kind(&curve.name) else {
            continue;
        };
        let span = l1i_candidate_span(curve, max_step_bytes);
        if span.is_empty() {
            continue;
        }
        for i in span {
            let old = curve.points[i];
            let point = code
                .measure(timer, kind, old.size_bytes as usize, repeats)?
                .point;
            let values = passes
                .entry((curve.name.clone(), old.size_bytes))
                .or_insert_with(|| vec![old.value]);
            values.push(point.value);
            curve.points[i].value = lower_median(values);
        }
        curve.knees = find_code_knees(&curve.points);
    }
    Ok(())
}

/// Measures every point of the indirect jump chain again and keeps the lower. Its model fit
/// reads the whole curve, so a sharer's burst that slowed a run of sizes for a fraction of a
/// second (a bump that reads as misses) must be outvoted; passes spread over the chase's
/// seconds are independent draws of it, and a pass takes about a tenth of a second.
fn remeasure_indirect_chain(
    code: &mut CodeProbe,
    timer: &Timer,
    repeats: u32,
    curves: &mut [Curve],
) -> Result<(), ProbeError> {
    let Some(curve) = curves.iter_mut().find(|c| c.name == INDIRECT_CURVE) else {
        return Ok(());
    };
    for point in curve.points.iter_mut() {
        let again = code
            .measure(
                timer,
                CodeKind::IndirectJumpChain,
                point.size_bytes as usize,
                repeats,
            )?
            .point;
        if again.value < point.value {
            *point = again;
        }
    }
    Ok(())
}

/// The knees of the curve `name`: none for the indirect jump chain (the L1i's model fit
/// reads it whole), [`find_code_knees`] for the other code curves, [`find_knees`] for the
/// others.
pub fn curve_knees(name: &str, points: &[Point]) -> Vec<Knee> {
    if name == INDIRECT_CURVE {
        Vec::new()
    } else if code_kind(name).is_some() {
        find_code_knees(points)
    } else {
        find_knees(points, &KneeOptions::default())
    }
}

/// The code kind a curve name stands for.
fn code_kind(name: &str) -> Option<CodeKind> {
    match name {
        "nop_body" => Some(CodeKind::NopBody),
        "jump_chain" => Some(CodeKind::JumpChain),
        "random_jump_chain" => Some(CodeKind::RandomJumpChain),
        INDIRECT_CURVE => Some(CodeKind::IndirectJumpChain),
        _ => None,
    }
}

/// Measures again, after the pointer chase, the points of the code curves' L1i candidates
/// (one more pass of [`remeasure_l1i_candidates`]), then the points of a rise that stand
/// above a larger size's, keeping the lower, and finds the knees again. A code sample
/// lasts microseconds, so what keeps such points high is interference lasting through the
/// sweep's own repeats (another task's code in the shared front end, which can move the
/// whole step earlier); seconds later it is often gone.
fn recheck_code_curves(
    code: &mut CodeProbe,
    timer: &Timer,
    (repeats, max_step_bytes): (u32, u64),
    curves: &mut [Curve],
    passes: &mut PassValues,
) -> Result<(), ProbeError> {
    remeasure_indirect_chain(code, timer, repeats, curves)?;
    remeasure_l1i_candidates(code, timer, (repeats, max_step_bytes), curves, passes)?;
    for curve in curves.iter_mut().filter(|c| c.name != INDIRECT_CURVE) {
        let Some(kind) = code_kind(&curve.name) else {
            continue;
        };
        let odd = out_of_order(&curve.points, &curve.knees);
        if odd.is_empty() {
            continue;
        }
        for i in odd {
            let size = curve.points[i].size_bytes as usize;
            let point = code.measure(timer, kind, size, repeats)?.point;
            if point.value < curve.points[i].value {
                curve.points[i] = point;
            }
        }
        curve.knees = find_code_knees(&curve.points);
    }
    Ok(())
}

/// Measures again the points at indices `again` (the spans of some of the curve's knees) and
/// keeps the lower, then finds the curve's knees again. Interference only adds
/// time: another task sharing a cache (a sibling hardware thread, the host) shrinks the
/// capacity the sweep sees for as long as it runs, which the repeats of one point, a few
/// milliseconds apart, cannot undo. A pass seconds later is another draw of it.
fn recheck_spans(
    curve: &mut Curve,
    again: &[usize],
    measure_one: &mut dyn FnMut(u64) -> Result<Point, ProbeError>,
) -> Result<(), ProbeError> {
    if again.is_empty() {
        return Ok(());
    }
    for &i in again {
        let point = measure_one(curve.points[i].size_bytes)?;
        if point.value < curve.points[i].value {
            curve.points[i] = point;
        }
    }
    curve.knees = find_knees(&curve.points, &KneeOptions::default());
    Ok(())
}

/// Name of the curve of [`CodeKind::IndirectJumpChain`], the L1i's first evidence.
pub const INDIRECT_CURVE: &str = "indirect_jump_chain";

/// The indirect jump chain from 2 KiB to `hi_bytes` on the fine grid: the L1i is sized by a
/// model fitted to the whole curve (`levels::l1i_knee`), so no point is skipped.
fn indirect_chain_curve(
    code: &mut CodeProbe,
    timer: &Timer,
    budget: &Budget,
    hi_bytes: u64,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(f64),
) -> Result<Curve, ProbeError> {
    let grid = geometric_sizes(2 * KIB, hi_bytes, budget.fine_per_octave, 64);
    let mut points = Vec::with_capacity(grid.len());
    for (i, &size) in grid.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        tick(i as f64 / grid.len() as f64);
        let sample = code.measure(
            timer,
            CodeKind::IndirectJumpChain,
            size as usize,
            budget.code_repeats,
        )?;
        points.push(sample.point);
    }
    Ok(Curve {
        name: INDIRECT_CURVE.into(),
        unit: "ns per line, indirect jumps in a new order every call".into(),
        points,
        knees: Vec::new(),
    })
}

/// A test of the points so far that ends a sweep's coarse grid.
type Enough<'a> = &'a dyn Fn(&[Point]) -> bool;

/// An adaptive sweep of `measure_one` over `grid` that stops, keeping its points, when
/// `stop` is set, and fails on the first measurement error; `tick` gets the fraction done;
/// the coarse grid ends early once `enough` holds of the points so far.
fn sweep(
    grid: &[u64],
    granule: u64,
    budget: &Budget,
    stop: &AtomicBool,
    (tick, enough): (&mut dyn FnMut(f64), Enough<'_>),
    measure_one: &mut dyn FnMut(u64) -> Result<Point, ProbeError>,
) -> Result<(Vec<Point>, Vec<Knee>), ProbeError> {
    let total = grid.len() as f64 * 1.3;
    let mut done = 0.0;
    let mut failure = None;
    let mut measure = |size: u64| {
        if stop.load(Ordering::Relaxed) || failure.is_some() {
            return None;
        }
        done += 1.0;
        tick((done / total).min(1.0));
        measure_one(size).map_err(|e| failure = Some(e)).ok()
    };
    let (points, knees, _) = adaptive_sweep_until(
        grid,
        (budget.fine_per_octave, granule, budget.rounds),
        &KneeOptions::default(),
        enough,
        &mut measure,
    );
    match failure {
        Some(e) => Err(e),
        None => Ok((points, knees)),
    }
}

fn huge_note(what: &str, kib: Option<u64>, capacity: usize) -> String {
    match kib {
        Some(k) if k > 0 => format!(
            "huge pages: {k} KiB of the {} KiB {what} mapping",
            capacity / 1024
        ),
        Some(_) => {
            format!("huge pages: none obtained for the {what} mapping (THP off or fragmented)")
        }
        None => format!("huge pages: unknown for the {what} mapping (/proc/self/smaps unreadable)"),
    }
}

/// Bandwidth of every kernel at a working set inside each level, on one and on all CPUs.
/// One bandwidth kernel at one width on `set`, as the machine file records it.
fn bandwidth_run(
    level: &str,
    kernel: Kernel,
    simd: Simd,
    set: &[usize],
    per_thread: u64,
    budget: &Budget,
) -> Result<Bandwidth, ProbeError> {
    let s = measure_bandwidth(
        kernel,
        simd,
        set,
        per_thread,
        budget.kernel_time,
        budget.kernel_trials,
    )?;
    Ok(Bandwidth {
        level: level.to_owned(),
        kernel: kernel.name().into(),
        threads: s.threads,
        cores: None,
        working_set_bytes: s.working_set_bytes,
        gb_per_s: s.gb_per_s,
        gb_per_s_with_write_allocate: (s.gb_per_s_with_write_allocate != s.gb_per_s)
            .then_some(s.gb_per_s_with_write_allocate),
        method: format!(
            "{} {}, {} per thread",
            simd.name(),
            kernel.name(),
            per_thread
        ),
        vector_bytes: Some(simd.vector_bytes()),
    })
}

fn bandwidths(
    machine: &Machine,
    caches: &[MeasuredCache],
    cpus: &[usize],
    simd: Simd,
    budget: &Budget,
    stop: &AtomicBool,
) -> Result<Vec<Bandwidth>, ProbeError> {
    let size_of = |level: u8| {
        caches
            .iter()
            .find(|c| c.level == level && c.kind != CacheKind::Instruction)
            .map(|c| c.size_bytes)
            .or_else(|| machine.data_cache(level).map(|c| c.size_bytes))
    };
    let shared = |level: u8| machine.data_cache(level).is_some_and(|c| c.shared_by > 1);
    // (name, working set of all threads, shared between threads, smallest per-thread set)
    let mut levels: Vec<(String, u64, bool, u64)> = Vec::new();
    let mut below = 0;
    for level in 1..=3u8 {
        if let Some(size) = size_of(level) {
            let floor = (2 * below).max(4 * KIB);
            levels.push((
                format!("L{level}"),
                (size / 2).max(floor),
                shared(level),
                floor,
            ));
            below = size;
        }
    }
    // Memory's working set is well past the effective last level (`below`, measured where
    // the chase found it), and past the advertised one up to 256 MiB: beyond that, page
    // faults of gigabyte arrays cost more than a guest's few MiB of L3 are worth.
    let advertised_llc = machine
        .data_caches()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(32 * MIB);
    let mem_bytes = (4 * below)
        .max(64 * MIB)
        .max((4 * advertised_llc).min(256 * MIB));
    levels.push(("MEM".into(), mem_bytes, true, 4 * below));
    let mut out = Vec::new();
    let mut sets = vec![vec![cpus[0]]];
    if cpus.len() > 1 {
        sets.push(cpus.to_vec());
    }
    for (level, size, is_shared, floor) in &levels {
        for set in &sets {
            let per_thread = if *is_shared {
                (size / set.len() as u64).max(*floor)
            } else {
                *size
            };
            for kernel in Kernel::ALL {
                if stop.load(Ordering::Relaxed) {
                    return Ok(out);
                }
                out.push(bandwidth_run(level, kernel, simd, set, per_thread, budget)?);
            }
        }
        // Code built for the x86-64 baseline (no -march) loads and stores 16 bytes at a time
        // and does not reach the wide kernels' L1 bandwidth: L1's ports at that width too.
        if level == "L1" && simd > Simd::Sse2 && !stop.load(Ordering::Relaxed) {
            for kernel in [Kernel::Load, Kernel::Store] {
                let one = [cpus[0]];
                out.push(bandwidth_run(
                    level,
                    kernel,
                    Simd::Sse2,
                    &one,
                    *size,
                    budget,
                )?);
            }
        }
    }
    Ok(out)
}

/// Fewest trials of each streaming-sweep point: one slowed trial must not end the level.
const SWEEP_TRIALS: u32 = 3;

/// The last level's streaming sweep (see `streaming`), between the single-thread triad
/// measurements at the level's and at memory's working sets.
struct StreamingSweep<'a> {
    machine: &'a Machine,
    bandwidth: &'a [Bandwidth],
    cpu: usize,
    simd: Simd,
    budget: &'a Budget,
}

impl StreamingSweep<'_> {
    /// Sets the last data level's `streaming_size_bytes` when the sweep finds it, notes what
    /// it found or why it did not sweep, and returns the curve when it swept.
    fn run(
        &self,
        caches: &mut [MeasuredCache],
        stop: &AtomicBool,
        notes: &mut Vec<String>,
    ) -> Result<Option<Curve>, ProbeError> {
        let last_advertised = self.machine.data_caches().map(|c| c.level).max();
        let Some(last) = caches
            .iter_mut()
            .filter(|c| c.kind != CacheKind::Instruction)
            .max_by_key(|c| c.level)
            .filter(|c| last_advertised.is_none_or(|l| l == c.level))
        else {
            notes.push(
                "streaming size not measured: the pointer chase did not find the last cache level"
                    .into(),
            );
            return Ok(None);
        };
        let level = format!("L{}", last.level);
        let (Some(at_level), Some(at_memory)) = (self.triad(&level), self.triad("MEM")) else {
            notes.push(format!(
                "{level} streaming size not measured: no one-thread triad was measured in the \
                 {level} and in memory to sweep between"
            ));
            return Ok(None);
        };
        let level_ns = ns_per_line(at_level.gb_per_s);
        let memory_ns = ns_per_line(at_memory.gb_per_s);
        let points = self.sweep(at_level, at_memory, stop)?;
        if stop.load(Ordering::Relaxed) {
            notes.push(format!(
                "{level} streaming size not measured: the sweep was interrupted"
            ));
            return Ok(None);
        }
        let found = streaming_knee(&points, level_ns, memory_ns);
        notes.push(streaming_note(
            &level,
            found.as_ref().map_err(|why| *why),
            &points,
            last.size_bytes,
            level_ns,
            memory_ns,
        ));
        last.streaming_size_bytes = found.as_ref().ok().map(|k| k.size_bytes);
        Ok(Some(Curve {
            name: STREAMING_CURVE.into(),
            unit: STREAMING_UNIT.into(),
            points,
            knees: found.into_iter().collect(),
        }))
    }

    /// The triad's points from the level's working set ×√2 to half of memory's, until two
    /// points past the crossing or `stop`.
    fn sweep(
        &self,
        at_level: &Bandwidth,
        at_memory: &Bandwidth,
        stop: &AtomicBool,
    ) -> Result<Vec<Point>, ProbeError> {
        let level_ns = ns_per_line(at_level.gb_per_s);
        let memory_ns = ns_per_line(at_memory.gb_per_s);
        let spans = streaming_spans(
            (at_level.working_set_bytes as f64 * std::f64::consts::SQRT_2) as u64,
            at_memory.working_set_bytes / 2,
            self.budget.streaming_per_octave,
        );
        let mut points = Vec::new();
        for span in spans {
            if stop.load(Ordering::Relaxed) || streaming_sweep_done(&points, level_ns, memory_ns) {
                break;
            }
            let s = measure_bandwidth(
                Kernel::Triad,
                self.simd,
                &[self.cpu],
                span,
                self.budget.kernel_time,
                self.budget.kernel_trials.max(SWEEP_TRIALS),
            )?;
            points.push(Point {
                size_bytes: s.working_set_bytes,
                value: ns_per_line(s.gb_per_s),
                median: ns_per_line(s.median_gb_per_s),
            });
        }
        Ok(points)
    }

    /// The single-thread triad at `level`'s working set.
    fn triad(&self, level: &str) -> Option<&Bandwidth> {
        self.bandwidth
            .iter()
            .find(|b| b.level == level && b.kernel == "triad" && b.threads == 1)
    }
}

/// The all-core FLOP rate, with a note comparing it with the theoretical peak.
fn peak(
    flops: &[FlopsSample],
    machine: &Machine,
    core_hz: f64,
    notes: &mut Vec<String>,
) -> Option<PeakGflops> {
    let threads = flops.iter().map(|f| f.threads).max()?;
    let get = |p: Precision| {
        flops
            .iter()
            .find(|f| f.threads == threads && f.precision == p)
            .map_or(0.0, |f| f.gflops)
    };
    let (dp, sp) = (get(Precision::Dp), get(Precision::Sp));
    let theory = machine.peak_flops_per_cycle;
    if theory.dp > 0 {
        let dp_peak = f64::from(theory.dp) * core_hz * f64::from(threads) / 1e9;
        notes.push(format!(
            "peak DP {dp:.1} GFLOP/s of a theoretical {dp_peak:.1} ({:.0} %) at the {:.3} GHz core clock",
            100.0 * dp / dp_peak,
            core_hz / 1e9
        ));
    }
    let simd = flops.first().map(|f| f.simd.name()).unwrap_or("scalar");
    Some(PeakGflops {
        dp,
        sp,
        threads,
        method: format!(
            "{simd} FMA chains, {} accumulators per thread",
            crate::flops::ACCUMULATORS
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture_curves;
    use loopscope_machine::{MeasuredCache, from_toml, to_toml};

    #[test]
    fn the_measured_section_round_trips_through_a_machine_file() {
        let mut machine = Machine::unknown();
        machine.peak_flops_per_cycle = loopscope_machine::PeakFlops { dp: 16, sp: 32 };
        machine.measured = Some(Measured {
            caches: vec![MeasuredCache {
                level: 1,
                kind: CacheKind::Instruction,
                size_bytes: 32768,
                latency_cycles: 2.1,
                latency_ns: 0.65,
                advertised_size_bytes: Some(32768),
                confidence: 0.75,
                method: "random jump chain".into(),
                streaming_size_bytes: None,
            }],
            bandwidth: vec![Bandwidth {
                level: "MEM".into(),
                kernel: "store".into(),
                threads: 2,
                cores: None,
                working_set_bytes: 128 << 20,
                gb_per_s: 9.72,
                gb_per_s_with_write_allocate: Some(19.43),
                method: "AVX2 store".into(),
                vector_bytes: Some(32),
            }],
            peak_gflops: Some(PeakGflops {
                dp: 103.66,
                sp: 207.35,
                threads: 2,
                method: "AVX2 FMA chains".into(),
            }),
            duration_s: 53.7,
            partial: true,
            notes: vec!["interrupted".into()],
            core_hz: Some(3.244e9),
            memory_latency_ns: Some(128.2),
            add_latency_ns: Some(0.93),
            implausible: Vec::new(),
        });
        let text = to_toml(&machine).unwrap();
        assert!(
            text.contains("[measured]") && text.contains("partial = true"),
            "{text}"
        );
        assert_eq!(from_toml(&text, "m.toml".as_ref()).unwrap(), machine);
    }

    #[test]
    fn a_step_moved_early_by_a_sharer_moves_back_when_measured_again() {
        // A NOP body whose step came 6 KiB early while another task's code shared the L1i
        // (a Zen 4 guest's 26 KiB); seconds later the task is gone and the step is at 32 KiB.
        let step = |cap_kib: u64| {
            move |size: u64| Point {
                size_bytes: size,
                value: if size <= cap_kib * KIB { 0.006 } else { 0.018 },
                median: 0.0,
            }
        };
        let sizes = geometric_sizes(4 * KIB, 4 * MIB, 24, 4);
        let points: Vec<Point> = sizes.iter().map(|&s| step(26)(s)).collect();
        let knees = find_knees(&points, &KneeOptions::default());
        let mut curve = Curve {
            name: "nop_body".into(),
            unit: "ns per byte".into(),
            points,
            knees,
        };
        assert_eq!(curve.knees[0].cliff_lo_bytes / KIB, 25);
        let quiet = step(32);
        let span = l1i_candidate_span(&curve, 256 * KIB);
        recheck_spans(&mut curve, &span, &mut |s| Ok(quiet(s))).unwrap();
        assert_eq!(curve.knees[0].size_bytes, 32 * KIB, "{:?}", curve.knees);
        // Measuring again never raises a point.
        let span = l1i_candidate_span(&curve, 256 * KIB);
        recheck_spans(&mut curve, &span, &mut |s| Ok(step(8)(s))).unwrap();
        assert_eq!(curve.knees[0].size_bytes, 32 * KIB);
        // A first step past a quarter of the L2 is the L2's, not measured again.
        assert!(l1i_candidate_span(&curve, 16 * KIB).is_empty());
    }

    /// A measurement that returns `later`'s point nearest (in log) to the size asked for.
    fn from_later(later: &Curve) -> impl FnMut(u64) -> Result<Point, ProbeError> + '_ {
        move |size| {
            let d = |p: &Point| (p.size_bytes as f64 / size as f64).log2().abs();
            let p = later
                .points
                .iter()
                .min_by(|a, b| d(a).total_cmp(&d(b)))
                .unwrap();
            Ok(Point {
                size_bytes: size,
                ..*p
            })
        }
    }

    #[test]
    fn zen4_steps_moved_early_by_a_sharer_come_back_when_measured_again() {
        let curves = fixture_curves(include_str!("../testdata/zen4_shared_steps.json"));
        let (mut nop, quiet_nop) = (curves[0].clone(), &curves[1]);
        let (mut chase, quiet_chase) = (curves[2].clone(), &curves[3]);
        // The NOP body's step at 29 KiB, half an octave re-measured later: 32 KiB.
        assert!(nop.knees[0].size_bytes < 30 * KIB, "{:?}", nop.knees[0]);
        let span = l1i_candidate_span(&nop, 256 * KIB);
        recheck_spans(&mut nop, &span, &mut from_later(quiet_nop)).unwrap();
        assert_eq!(nop.knees[0].size_bytes, 32 * KIB, "{:?}", nop.knees[0]);
        // The chase's L2 step at 640 KiB (768 KiB snapped), an octave re-measured later: 1 MiB.
        let mut machine = Machine::unknown();
        for (level, kind, size) in [
            (1, CacheKind::Data, 32 * KIB),
            (2, CacheKind::Unified, MIB),
            (3, CacheKind::Unified, 32 * MIB),
        ] {
            machine
                .caches
                .push(loopscope_machine::Cache::new(level, kind, size, 64, 8, 1));
        }
        let l2 = |chase: &Curve| {
            let levels = assign_levels(&machine, std::slice::from_ref(chase));
            levels.knees.iter().find(|l| l.level == 2).unwrap().knee
        };
        assert_eq!(l2(&chase).size_bytes, 768 * KIB);
        let span = private_level_span(&chase, 32 * MIB);
        recheck_spans(&mut chase, &span, &mut from_later(quiet_chase)).unwrap();
        assert_eq!(l2(&chase).size_bytes, MIB, "{:?}", l2(&chase));
    }

    #[test]
    fn size_notes_give_the_rise_as_evidence() {
        let level = |size: u64, rise_start: u64, advertised: u64| crate::levels::LevelKnee {
            level: 2,
            kind: CacheKind::Unified,
            knee: Knee {
                size_bytes: size,
                cliff_lo_bytes: size,
                cliff_hi_bytes: size,
                rise_start_bytes: rise_start,
                rise_mid_bytes: size,
                end_bytes: 2 * size,
                before: 4.0,
                after: 16.0,
                ratio: 4.0,
                confidence: 0.5,
            },
            advertised_bytes: Some(advertised),
            method: "pointer chase",
            latency_ns: 4.0,
            ramp_fit: None,
            code_fit: None,
        };
        // A Zen 3 guest's 512 KiB L2 whose misses start at 280 KiB, half of them at 768 KiB.
        let note = size_note(&level(768 * KIB, 280 * KIB, 512 * KIB)).unwrap();
        assert!(note.contains("1.50x the advertised"), "{note}");
        assert!(note.contains("from 280 to 1536 KiB"), "{note}");
        assert!(note.contains("something else shares the cache"), "{note}");
        let note = size_note(&level(384 * KIB, 380 * KIB, 512 * KIB)).unwrap();
        assert!(note.contains("a sharp step"), "{note}");
        assert_eq!(size_note(&level(512 * KIB, 300 * KIB, 512 * KIB)), None);
    }

    #[test]
    fn passes_keep_their_lower_median() {
        // Two passes: the lower (the recheck after the chase); many: neither a pass at hit
        // speed past the capacity nor one a sharer slowed.
        assert_eq!(lower_median(&mut [0.018, 0.006]), 0.006);
        assert_eq!(
            lower_median(&mut [0.018, 0.006, 0.017, 0.018, 0.030, 0.018]),
            0.018
        );
        assert_eq!(lower_median(&mut [0.5]), 0.5);
    }

    #[test]
    fn code_curves_are_named_by_their_kind() {
        assert_eq!(code_kind("nop_body"), Some(CodeKind::NopBody));
        assert_eq!(code_kind("jump_chain"), Some(CodeKind::JumpChain));
        assert_eq!(
            code_kind("random_jump_chain"),
            Some(CodeKind::RandomJumpChain)
        );
        assert_eq!(code_kind("pointer_chase"), None);
    }

    #[test]
    fn quick_budgets_are_smaller_than_full_ones() {
        let (quick, full) = (Budget::new(true), Budget::new(false));
        assert!(quick.coarse_per_octave < full.coarse_per_octave);
        assert!(quick.chase_repeats < full.chase_repeats);
        assert!(quick.kernel_time < full.kernel_time);
    }
}
