//! From a recording to the instruction mix: the objects analysed into block maps, each sample
//! (or each counted block) turned into a first count, then the second and third counts per
//! block, function, loop and type, with their error bars.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use iced_x86::{Decoder, DecoderOptions, Instruction};
use loopscope_binary::{EdgeKind, Frame, Image, Options, Program};
use serde::Serialize;

use super::cost::{BlockCost, Core, block_cost};
use super::method::{BlockMap, InstrType, MapBlock, TYPE_COUNT, TypeCounts, second_counts};
use crate::file::{Profile, Recording};
use crate::sample::{Exec, SampledEvent, mapping_at};
use crate::{ExactRun, Mapping, ObjectRef, ProfileError, Sample};

/// The relative standard error given to each block's modelled cost in the time-based
/// estimate: the spread of estimated over exact executions of the hot blocks of the
/// compute-bound programs of `bench/mix.py` was 9 to 38 % (docs/mix.md gives the figures).
/// Cache misses and mispredicted branches make it far larger; the error bars do not cover them.
pub const MODEL_RELATIVE_ERROR: f64 = 0.3;

/// How the rows of the mix are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MixBy {
    /// One row per block.
    Block,
    /// One row per function.
    Function,
    /// One row per function, each followed by its loops (the loop forest), loops counting
    /// their nested loops' instructions too.
    Loop,
}

/// What `mix` computes and from which input.
#[derive(Debug, Clone)]
pub struct MixOptions {
    /// The types to show, in order. Exclusive types not listed are summed as `other`.
    pub types: Vec<InstrType>,
    /// How rows are grouped.
    pub by: MixBy,
    /// Analyse this file for the object of the same build-id (or else the same file name)
    /// instead of the recorded path; samples elsewhere are unattributed. The file is trusted:
    /// another build-id than the recorded one gives a note, not a refusal.
    pub binary: Option<PathBuf>,
}

impl Default for MixOptions {
    fn default() -> MixOptions {
        MixOptions {
            types: vec![
                InstrType::Fp,
                InstrType::Simd,
                InstrType::Fma,
                InstrType::Ls,
                InstrType::Br,
                InstrType::Int,
            ],
            by: MixBy::Loop,
            binary: None,
        }
    }
}

/// How the first counts were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MixEstimate {
    /// Every block execution was counted.
    Exact,
    /// Instruction-period samples (embodiment 3).
    InstructionPeriod,
    /// Per-sample instruction counter deltas (embodiments 1 and 2).
    InstructionDeltas,
    /// Time samples weighted by the static cost model.
    TimeModel,
}

impl MixEstimate {
    /// The name the output's first line and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            MixEstimate::Exact => "exact",
            MixEstimate::InstructionPeriod => "instruction-period",
            MixEstimate::InstructionDeltas => "instruction-deltas",
            MixEstimate::TimeModel => "time-model",
        }
    }
}

/// One type's total.
#[derive(Debug, Clone, Serialize)]
pub struct TypeCount {
    /// `fp`, `ls`, …, or `other` (the exclusive types not selected).
    #[serde(rename = "type")]
    pub name: &'static str,
    /// N3: instructions of the type executed.
    pub count: u64,
    /// One standard error of `count`.
    pub error: f64,
    /// `count` over all instructions attributed.
    pub share: f64,
    /// One standard error of `share`.
    pub share_error: f64,
}

/// One row: a function, a loop or a block.
#[derive(Debug, Clone, Serialize)]
pub struct MixRow {
    /// `function`, `loop` or `block`.
    pub kind: &'static str,
    /// The function's name, `loop N`, or the block's address.
    pub name: String,
    /// The function the row belongs to.
    pub function: String,
    /// The object file.
    pub object: String,
    /// Static address: the function's entry, the loop's header, the block's start.
    pub address: u64,
    /// Static loop id (loops; for blocks, the innermost loop holding it).
    pub loop_id: Option<u32>,
    /// The enclosing loop (loops).
    pub parent_loop: Option<u32>,
    /// Loop depth (1 outermost; 0 for functions and for blocks outside loops).
    pub depth: u32,
    /// Source file (a loop's header; a function's entry is not looked up).
    pub file: Option<String>,
    /// Source line (the user's line a loop's header was inlined at, when it is inlined code).
    pub line: Option<u32>,
    /// A loop header's inlined call chain, innermost first (empty when it is the function's
    /// own code), as `loops` and `report` give it.
    pub inlined: Vec<Frame>,
    /// Samples that fell in the row's blocks.
    pub samples: u64,
    /// Σ N1 over the row's blocks.
    pub instructions: u64,
    /// One standard error of `instructions`.
    pub instructions_error: f64,
    /// N3 per selected type (and `other`), summed over the row's blocks.
    pub types: BTreeMap<&'static str, u64>,
    /// One standard error per type.
    pub errors: BTreeMap<&'static str, f64>,
    /// Block executions (blocks: N1 / instructions in the block).
    pub executions: Option<u64>,
    /// Modelled cycles per execution and what bounds them (blocks, time-based estimate).
    pub cost: Option<BlockCost>,
}

/// The note of an exact mix saying what was counted: what the result is, not a caveat about it.
pub const EXACT_COVERAGE_NOTE: &str =
    "exact: every block execution from main's entry to its return was counted";

/// The instruction mix of one recording.
#[derive(Debug, Clone, Serialize)]
pub struct MixReport {
    /// The sampling event (`cpu-clock`, `instructions`, `{cycles,instructions}`, …) or
    /// `exact` for counted blocks.
    pub event: String,
    /// How N1 was obtained.
    pub estimate: &'static str,
    /// The event and the estimate in words (the output's first line).
    pub method: String,
    /// The command recorded, when known.
    pub command: Vec<String>,
    /// Σ N1: instructions attributed to blocks.
    pub total_instructions: u64,
    /// One standard error of `total_instructions`.
    pub total_error: f64,
    /// N3 per selected type, and `other` when only some exclusive types are selected.
    pub types: BTreeMap<&'static str, u64>,
    /// The same with errors and shares, in the selection's order.
    pub type_details: Vec<TypeCount>,
    /// Samples read (0 for exact profiles).
    pub samples: u64,
    /// Samples that no block holds (the kernel, the vDSO, JIT code, objects not analysed).
    pub unattributed_samples: u64,
    /// Instructions of the unattributed samples (instruction-counting events only).
    pub unattributed_instructions: Option<u64>,
    /// Samples the kernel dropped (ring buffer full).
    pub lost_samples: u64,
    /// Times the kernel throttled the sampling.
    pub throttled: u64,
    /// `precise_ip` of the sampling event (0 arbitrary skid … 3 zero skid).
    pub precise_ip: u8,
    /// The clock that turned sampled nanoseconds into cycles (time-based estimate).
    pub cycles_per_ns: Option<f64>,
    /// The relative error given to each block's modelled cost (time-based estimate).
    pub model_relative_error: Option<f64>,
    /// How `by` is grouped.
    pub by_kind: MixBy,
    /// Rows, most instructions first (loops under their function with `by_kind` loop).
    pub by: Vec<MixRow>,
    /// Things the reader should know.
    pub notes: Vec<String>,
}

/// Samples as `mix` reads them, from a profile or a `perf record` file.
pub(crate) struct SampleSource<'a> {
    /// What drove the sampling.
    pub event: SampledEvent,
    /// The event's name as the recording spelled it.
    pub event_name: String,
    pub precise_ip: u8,
    pub frequency_hz: u64,
    pub samples: &'a [Sample],
    pub mappings: &'a [Mapping],
    pub execs: &'a [Exec],
    pub objects: &'a [ObjectRef],
    pub lost: u64,
    pub throttled: u64,
    /// The core clock of the recording machine, when it was measured.
    pub core_cycles_per_ns: Option<f64>,
    /// The CPU vendor of the recording machine, when known.
    pub cpu_vendor: Option<String>,
}

/// The mix of a profile written by `record`.
pub fn build_mix(
    profile: &Profile,
    options: &MixOptions,
    path: &Path,
) -> Result<MixReport, ProfileError> {
    match &profile.recording {
        Recording::Sample(run) => {
            let source = SampleSource {
                event: run.event,
                event_name: run.event.name().to_owned(),
                precise_ip: run.precise_ip,
                frequency_hz: run.frequency_hz,
                samples: &run.samples,
                mappings: &run.mappings,
                execs: &run.execs,
                objects: &profile.objects,
                lost: run.lost_samples,
                throttled: run.throttled,
                core_cycles_per_ns: run.core_cycles_per_ns,
                cpu_vendor: run.cpu_vendor.clone(),
            };
            let mut report = mix_of_samples(&source, options)?;
            report.command = profile.command.clone();
            Ok(report)
        }
        Recording::Ptrace(run) | Recording::Patch(run) => {
            if run.blocks.is_empty() {
                return Err(ProfileError::BadProfile {
                    path: path.to_owned(),
                    what: "an exact profile without block counts; record one with `loopscope record --exact` or `--backend patch --blocks`"
                        .into(),
                });
            }
            let mut report = mix_of_counts(run, options)?;
            report.command = profile.command.clone();
            Ok(report)
        }
    }
}

/// An analysed object: its block map, which function and block each map entry is, its bytes.
struct Analysed {
    path: String,
    program: Program,
    map: BlockMap,
    /// Per map block: (function index, block index in the function).
    owners: Vec<(u32, u32)>,
    /// The file's bytes, to decode a block for its cost.
    bytes: Vec<u8>,
}

impl Analysed {
    fn open(path: &Path, shown: &str) -> Result<Analysed, ProfileError> {
        let image = Image::open(path)?;
        let program = Program::analyze(
            &image,
            &Options {
                lines: true,
                ..Options::default()
            },
        );
        let mut entries: Vec<(MapBlock, (u32, u32))> = Vec::new();
        for (fi, f) in program.functions.iter().enumerate() {
            for (bi, b) in f.blocks.iter().enumerate() {
                entries.push((
                    MapBlock {
                        start: b.start,
                        end: b.end,
                        types: TypeCounts::from_binary(&b.classes, &b.tags),
                    },
                    (fi as u32, bi as u32),
                ));
            }
        }
        entries.retain(|(b, _)| b.end > b.start && b.types.total() > 0);
        entries.sort_by_key(|(b, _)| b.start);
        entries.dedup_by_key(|(b, _)| b.start);
        let (blocks, owners): (Vec<MapBlock>, Vec<(u32, u32)>) = entries.into_iter().unzip();
        let map = BlockMap::new(blocks);
        debug_assert_eq!(map.blocks().len(), owners.len());
        let bytes = crate::file::read_binary(path)?;
        Ok(Analysed {
            path: shown.to_owned(),
            program,
            map,
            owners,
            bytes,
        })
    }

    /// The static address of a file offset, through the `PT_LOAD` segment holding it.
    fn static_address(&self, file_offset: u64) -> Option<u64> {
        self.program
            .segments
            .iter()
            .find(|s| {
                file_offset >= s.file_offset
                    && file_offset - s.file_offset < s.file_bytes.max(s.mem_bytes)
            })
            .map(|s| s.vaddr + (file_offset - s.file_offset))
    }

    /// The instructions of map block `i`, decoded from the file.
    fn instructions(&self, i: usize) -> Vec<Instruction> {
        let block = &self.map.blocks()[i];
        let Some(segment) = self
            .program
            .segments
            .iter()
            .find(|s| block.start >= s.vaddr && block.end <= s.vaddr + s.file_bytes)
        else {
            return Vec::new();
        };
        let from = (segment.file_offset + (block.start - segment.vaddr)) as usize;
        let to = (segment.file_offset + (block.end - segment.vaddr)) as usize;
        let Some(bytes) = self.bytes.get(from..to) else {
            return Vec::new();
        };
        Decoder::with_ip(64, bytes, block.start, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    /// Whether map block `i` branches back to itself.
    fn loops_on_itself(&self, i: usize) -> bool {
        let (fi, bi) = self.owners[i];
        let block = &self.program.functions[fi as usize].blocks[bi as usize];
        block
            .succs
            .iter()
            .any(|s| s.block == bi && s.kind == EdgeKind::Taken)
    }
}

/// What was gathered for one block of one object.
#[derive(Debug, Clone, Copy, Default)]
struct Gathered {
    samples: u64,
    /// Σ of the samples' weights: instructions, or cycles for the time-based estimate.
    weight: f64,
    /// Σ of the squared weights.
    weight_squared: f64,
    /// Σ of the weights in integers (instruction-counting events and exact counts).
    instructions: u128,
}

/// The objects to analyse: index in the recording's object list → the file to read.
fn choose_files(
    objects: &[ObjectRef],
    used: &[bool],
    binary: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<HashMap<usize, PathBuf>, ProfileError> {
    let mut files = HashMap::new();
    if let Some(binary) = binary {
        let image = Image::open(binary)?;
        let name = binary.file_name().map(|n| n.to_string_lossy().into_owned());
        let same_id = |o: &ObjectRef| o.build_id.is_some() && o.build_id == image.build_id;
        let same_name = |o: &ObjectRef| {
            Path::new(&o.path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                == name
        };
        let found = objects
            .iter()
            .position(same_id)
            .or_else(|| {
                objects
                    .iter()
                    .position(|o| o.build_id.is_none() && same_name(o))
            })
            .or_else(|| objects.iter().position(same_name));
        match found {
            Some(i) => {
                files.insert(i, binary.to_owned());
            }
            None => {
                let recorded: Vec<&str> = objects.iter().map(|o| o.path.as_str()).collect();
                return Err(ProfileError::Options {
                    what: format!(
                        "--binary {}: not one of the recorded objects, by build-id or file name \
                         (recorded: {})",
                        binary.display(),
                        recorded.join(", ")
                    ),
                });
            }
        }
        return Ok(files);
    }
    for (i, o) in objects.iter().enumerate() {
        if !used.get(i).copied().unwrap_or(false) || o.path.starts_with('[') {
            continue;
        }
        if Path::new(&o.path).is_file() {
            files.insert(i, PathBuf::from(&o.path));
        } else {
            notes.push(format!(
                "{}: not found; its samples are unattributed (give it with --binary)",
                o.path
            ));
        }
    }
    Ok(files)
}

/// Opens the chosen files. A file whose build-id is not the recorded one is refused, as
/// `report` refuses it, unless it is `binary`, the file the user named: that one is analysed as
/// asked, with a note.
fn open_files(
    objects: &[ObjectRef],
    files: &HashMap<usize, PathBuf>,
    binary: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<HashMap<usize, Analysed>, ProfileError> {
    let mut opened = HashMap::new();
    let mut order: Vec<_> = files.iter().collect();
    order.sort_by_key(|(i, _)| **i);
    for (&i, file) in order {
        let analysed = Analysed::open(file, &objects[i].path)?;
        if let Some(refusal) =
            objects[i].identity_mismatch(file, analysed.program.build_id.as_deref())
        {
            if binary != Some(file.as_path()) {
                return Err(refusal);
            }
            notes.push(format!(
                "{refusal}; analysed for {} as --binary asks, though the recorded addresses may \
                 fall on other code",
                objects[i].path
            ));
        }
        opened.insert(i, analysed);
    }
    Ok(opened)
}

/// The mix from samples.
pub(crate) fn mix_of_samples(
    source: &SampleSource,
    options: &MixOptions,
) -> Result<MixReport, ProfileError> {
    let mut notes = Vec::new();
    let index_of: HashMap<&str, usize> = source
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o.path.as_str(), i))
        .collect();
    // Where each sample is: (object index, file offset), or nowhere known.
    let located: Vec<Option<(usize, u64)>> = source
        .samples
        .iter()
        .map(|s| {
            let ip = *s.stack.first()?;
            let m = mapping_at(source.mappings, source.execs, s.pid, s.time_ns, ip)?;
            Some((
                *index_of.get(m.path.as_str())?,
                ip - m.start + m.file_offset,
            ))
        })
        .collect();
    let mut used = vec![false; source.objects.len()];
    for &(object, _) in located.iter().flatten() {
        used[object] = true;
    }
    let files = choose_files(source.objects, &used, options.binary.as_deref(), &mut notes)?;
    let analysed = open_files(
        source.objects,
        &files,
        options.binary.as_deref(),
        &mut notes,
    )?;
    let estimate = if source.event.reads_instructions() {
        MixEstimate::InstructionDeltas
    } else if source.event == SampledEvent::Instructions {
        MixEstimate::InstructionPeriod
    } else {
        MixEstimate::TimeModel
    };
    let cycles_per_ns = match source.event {
        SampledEvent::CpuClock => Some(match source.core_cycles_per_ns {
            Some(f) => f,
            None => {
                notes.push(
                    "the recording has no core clock: the one measured now converts its time to cycles"
                        .into(),
                );
                crate::tsc::core_cycles_per_ns()
            }
        }),
        _ => None,
    };
    let mut gathered: HashMap<usize, Vec<Gathered>> = analysed
        .iter()
        .map(|(&i, a)| (i, vec![Gathered::default(); a.map.blocks().len()]))
        .collect();
    let mut unattributed_samples = 0;
    let mut unattributed_instructions = 0u128;
    let mut missing_counts = 0u64;
    for (s, place) in source.samples.iter().zip(&located) {
        let weight = match estimate {
            MixEstimate::InstructionDeltas => match s.instructions {
                Some(n) => n as f64,
                None => {
                    missing_counts += 1;
                    0.0
                }
            },
            MixEstimate::TimeModel => s.period as f64 * cycles_per_ns.unwrap_or(1.0),
            _ => s.period as f64,
        };
        let block = place.and_then(|(object, offset)| {
            let a = analysed.get(&object)?;
            let address = a.static_address(offset)?;
            Some((object, a.map.lookup(address)?))
        });
        match block {
            Some((object, b)) => {
                let g = &mut gathered.get_mut(&object).expect("an analysed object")[b];
                g.samples += 1;
                g.weight += weight;
                g.weight_squared += weight * weight;
                g.instructions += weight as u128;
            }
            None => {
                unattributed_samples += 1;
                unattributed_instructions += weight as u128;
            }
        }
    }
    if missing_counts > 0 {
        notes.push(format!(
            "{missing_counts} samples carried no instruction count and count for nothing"
        ));
    }
    if source.lost > 0 {
        notes.push(format!(
            "{} samples lost (ring buffer full): their time is missing from every count",
            source.lost
        ));
    }
    if source.throttled > 0 {
        notes.push(format!(
            "the kernel throttled the sampling {} times (perf_event_max_sample_rate)",
            source.throttled
        ));
    }
    if estimate == MixEstimate::TimeModel {
        notes.push(
            "no instruction counter: instructions are estimated from time, each block's samples \
             divided by its modelled cycles per execution (docs/mix.md)"
                .into(),
        );
    }
    let method = describe(source, estimate, cycles_per_ns);
    let model_error = (estimate == MixEstimate::TimeModel).then_some(MODEL_RELATIVE_ERROR);
    let core = match &source.cpu_vendor {
        Some(vendor) => Core::from_vendor(vendor),
        None => Core::from_vendor(&crate::tsc::cpu_vendor()),
    };
    let firsts = first_counts(&analysed, &gathered, estimate, model_error, core);
    let mut report = assemble(&analysed, &firsts, options, model_error);
    report.event = source.event_name.clone();
    report.estimate = estimate.name();
    report.method = method;
    report.samples = source.samples.len() as u64;
    report.unattributed_samples = unattributed_samples;
    report.unattributed_instructions = matches!(
        estimate,
        MixEstimate::InstructionDeltas | MixEstimate::InstructionPeriod
    )
    .then_some(unattributed_instructions as u64);
    report.lost_samples = source.lost;
    report.throttled = source.throttled;
    report.precise_ip = source.precise_ip;
    report.cycles_per_ns = cycles_per_ns;
    notes.append(&mut report.notes);
    report.notes = notes;
    Ok(report)
}

fn describe(source: &SampleSource, estimate: MixEstimate, cycles_per_ns: Option<f64>) -> String {
    let event = format!(
        "{} samples at {} Hz",
        source.event_name, source.frequency_hz
    );
    match estimate {
        MixEstimate::InstructionPeriod => format!(
            "{event} (precise_ip {}); estimate: instruction-period (spec 001 embodiment 3)",
            source.precise_ip
        ),
        MixEstimate::InstructionDeltas => {
            format!(
                "{event}; estimate: instruction-deltas, the group's instruction counter per sample (spec 001 embodiment 1/2)"
            )
        }
        MixEstimate::TimeModel => match cycles_per_ns {
            Some(f) => format!(
                "{event}; estimate: time-model, time at a {:.2} GHz core clock over modelled cycles per block (no instruction counter)",
                f
            ),
            None => format!(
                "{event}; estimate: time-model, cycles over modelled cycles per block (no instruction counter)"
            ),
        },
        MixEstimate::Exact => format!("{event}; estimate: exact"),
    }
}

/// The mix from counted blocks.
fn mix_of_counts(run: &ExactRun, options: &MixOptions) -> Result<MixReport, ProfileError> {
    let mut notes = Vec::new();
    let mut used = vec![false; run.objects.len()];
    for b in &run.blocks {
        if let Some(u) = used.get_mut(b.object as usize) {
            *u = true;
        }
    }
    let files = choose_files(&run.objects, &used, options.binary.as_deref(), &mut notes)?;
    let analysed = open_files(&run.objects, &files, options.binary.as_deref(), &mut notes)?;
    let mut gathered: HashMap<usize, Vec<Gathered>> = analysed
        .iter()
        .map(|(&i, a)| (i, vec![Gathered::default(); a.map.blocks().len()]))
        .collect();
    let mut uncovered = 0u64;
    for counts in &run.blocks {
        let object = counts.object as usize;
        let (Some(a), Some(g)) = (analysed.get(&object), gathered.get_mut(&object)) else {
            continue;
        };
        for (&start, &executions) in counts.starts.iter().zip(&counts.executions) {
            match a
                .map
                .lookup(start)
                .filter(|&b| a.map.blocks()[b].start == start)
            {
                Some(b) => {
                    let n = u128::from(executions) * u128::from(a.map.blocks()[b].types.total());
                    g[b].instructions += n;
                    g[b].weight += n as f64;
                }
                None => uncovered += executions,
            }
        }
    }
    if uncovered > 0 {
        notes.push(format!(
            "{uncovered} block executions at addresses the analysis has no block for"
        ));
    }
    notes.push(EXACT_COVERAGE_NOTE.into());
    let firsts = first_counts(&analysed, &gathered, MixEstimate::Exact, None, Core::Intel);
    let mut report = assemble(&analysed, &firsts, options, None);
    report.event = "exact".into();
    report.estimate = MixEstimate::Exact.name();
    report.method = match run.patch {
        Some(_) => "exact block counts (patched counters at every block); estimate: exact",
        None => "exact block counts (ptrace markers at every block); estimate: exact",
    }
    .into();
    notes.append(&mut report.notes);
    report.notes = notes;
    Ok(report)
}

/// N1 of one block with the relative variance of its estimate and its modelled cost.
#[derive(Debug, Clone, Copy, Default)]
struct First {
    n1: u128,
    relative_variance: f64,
    samples: u64,
    cost: Option<BlockCost>,
}

fn first_counts(
    analysed: &HashMap<usize, Analysed>,
    gathered: &HashMap<usize, Vec<Gathered>>,
    estimate: MixEstimate,
    model_error: Option<f64>,
    core: Core,
) -> HashMap<usize, Vec<First>> {
    analysed
        .iter()
        .map(|(&object, a)| {
            let firsts = gathered[&object]
                .iter()
                .enumerate()
                .map(|(b, g)| {
                    if g.weight <= 0.0 {
                        return First {
                            samples: g.samples,
                            ..First::default()
                        };
                    }
                    let sampling = if estimate == MixEstimate::Exact {
                        0.0
                    } else {
                        g.weight_squared / (g.weight * g.weight)
                    };
                    let relative_variance = sampling + model_error.map_or(0.0, |e| e * e);
                    if estimate != MixEstimate::TimeModel {
                        return First {
                            n1: g.instructions,
                            relative_variance,
                            samples: g.samples,
                            cost: None,
                        };
                    }
                    let cost = block_cost(&a.instructions(b), a.loops_on_itself(b), core);
                    let n_b = a.map.blocks()[b].types.total() as f64;
                    First {
                        n1: (g.weight / cost.cycles * n_b).round() as u128,
                        relative_variance,
                        samples: g.samples,
                        cost: Some(cost),
                    }
                })
                .collect();
            (object, firsts)
        })
        .collect()
}

/// Sums of second counts over some blocks, with their variances.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    samples: u64,
    n1: u128,
    n1_variance: f64,
    n3: [u128; TYPE_COUNT],
    variance: [f64; TYPE_COUNT],
}

impl Sums {
    fn add(&mut self, first: &First, block: &MapBlock) {
        let n2 = second_counts(first.n1, block);
        self.samples += first.samples;
        self.n1 += first.n1;
        self.n1_variance += (first.n1 as f64).powi(2) * first.relative_variance;
        for ((n3, variance), n2) in self.n3.iter_mut().zip(&mut self.variance).zip(n2) {
            *n3 += n2;
            *variance += (n2 as f64).powi(2) * first.relative_variance;
        }
    }

    /// The selected types' counts and errors, with `other` for the exclusive types left out.
    fn selected(&self, types: &[InstrType]) -> Vec<(&'static str, u128, f64)> {
        let mut out: Vec<(&'static str, u128, f64)> = types
            .iter()
            .map(|&t| {
                (
                    t.name(),
                    self.n3[t as usize],
                    self.variance[t as usize].sqrt(),
                )
            })
            .collect();
        let left_out: Vec<InstrType> = InstrType::EXCLUSIVE
            .into_iter()
            .filter(|t| !types.contains(t))
            .collect();
        if !left_out.is_empty() && left_out.len() < 4 {
            let count = left_out.iter().map(|&t| self.n3[t as usize]).sum();
            let variance: f64 = left_out.iter().map(|&t| self.variance[t as usize]).sum();
            out.push(("other", count, variance.sqrt()));
        }
        out
    }
}

fn assemble(
    analysed: &HashMap<usize, Analysed>,
    firsts: &HashMap<usize, Vec<First>>,
    options: &MixOptions,
    model_error: Option<f64>,
) -> MixReport {
    let mut objects: Vec<usize> = analysed.keys().copied().collect();
    objects.sort_unstable();
    let mut all = Sums::default();
    for &o in &objects {
        for (first, block) in firsts[&o].iter().zip(analysed[&o].map.blocks()) {
            all.add(first, block);
        }
    }
    let type_details = shares(analysed, firsts, &objects, &all, &options.types);
    let mut by = Vec::new();
    for &o in &objects {
        by.extend(rows(&analysed[&o], &firsts[&o], options));
    }
    if options.by != MixBy::Loop {
        by.sort_by(|a, b| {
            b.instructions
                .cmp(&a.instructions)
                .then(a.address.cmp(&b.address))
        });
    } else {
        sort_functions_with_their_loops(&mut by);
    }
    MixReport {
        event: String::new(),
        estimate: "",
        method: String::new(),
        command: Vec::new(),
        total_instructions: all.n1 as u64,
        total_error: all.n1_variance.sqrt(),
        types: type_details.iter().map(|t| (t.name, t.count)).collect(),
        type_details,
        samples: 0,
        unattributed_samples: 0,
        unattributed_instructions: None,
        lost_samples: 0,
        throttled: 0,
        precise_ip: 0,
        cycles_per_ns: None,
        model_relative_error: model_error,
        by_kind: options.by,
        by,
        notes: Vec::new(),
    }
}

/// Per type: the total, its error, its share of all instructions and the share's error
/// (first-order: a block's N1 moving by δ moves the share by δ·(r(b,t) − share)/N).
fn shares(
    analysed: &HashMap<usize, Analysed>,
    firsts: &HashMap<usize, Vec<First>>,
    objects: &[usize],
    all: &Sums,
    types: &[InstrType],
) -> Vec<TypeCount> {
    let total = all.n1 as f64;
    all.selected(types)
        .into_iter()
        .map(|(name, count, error)| {
            let share = if total > 0.0 {
                count as f64 / total
            } else {
                0.0
            };
            let is_type = |t: InstrType| t.name() == name;
            let mut variance = 0.0;
            for &o in objects {
                for (first, block) in firsts[&o].iter().zip(analysed[&o].map.blocks()) {
                    let n_b = block.types.total() as f64;
                    let n_bt: u64 = if name == "other" {
                        InstrType::EXCLUSIVE
                            .iter()
                            .filter(|t| !types.contains(t))
                            .map(|&t| block.types.get(t))
                            .sum()
                    } else {
                        InstrType::ALL
                            .into_iter()
                            .find(|&t| is_type(t))
                            .map_or(0, |t| block.types.get(t))
                    };
                    let ratio = n_bt as f64 / n_b;
                    variance +=
                        (first.n1 as f64 * (ratio - share)).powi(2) * first.relative_variance;
                }
            }
            TypeCount {
                name,
                count: count as u64,
                error,
                share,
                share_error: if total > 0.0 {
                    variance.sqrt() / total
                } else {
                    0.0
                },
            }
        })
        .collect()
}

fn rows(a: &Analysed, firsts: &[First], options: &MixOptions) -> Vec<MixRow> {
    let mut per_function: HashMap<u32, Sums> = HashMap::new();
    let mut per_block: HashMap<(u32, u32), usize> = HashMap::new();
    for (i, ((first, block), &(f, b))) in
        firsts.iter().zip(a.map.blocks()).zip(&a.owners).enumerate()
    {
        if first.n1 > 0 || first.samples > 0 {
            per_function.entry(f).or_default().add(first, block);
            per_block.insert((f, b), i);
        }
    }
    let innermost: HashMap<u32, Vec<Option<u32>>> = per_function
        .keys()
        .map(|&f| {
            (
                f,
                crate::sites::innermost_loops(&a.program.functions[f as usize]),
            )
        })
        .collect();
    let row = |kind: &'static str, f: u32, name: String, address: u64, sums: &Sums| {
        let function = &a.program.functions[f as usize];
        MixRow {
            kind,
            name,
            function: function.name.clone(),
            object: a.path.clone(),
            address,
            loop_id: None,
            parent_loop: None,
            depth: 0,
            file: None,
            line: None,
            inlined: Vec::new(),
            samples: sums.samples,
            instructions: sums.n1 as u64,
            instructions_error: sums.n1_variance.sqrt(),
            types: sums
                .selected(&options.types)
                .iter()
                .map(|&(n, c, _)| (n, c as u64))
                .collect(),
            errors: sums
                .selected(&options.types)
                .iter()
                .map(|&(n, _, e)| (n, e))
                .collect(),
            executions: None,
            cost: None,
        }
    };
    let mut out = Vec::new();
    for (&f, sums) in &per_function {
        let function = &a.program.functions[f as usize];
        match options.by {
            MixBy::Function | MixBy::Loop => {
                out.push(row(
                    "function",
                    f,
                    function.name.clone(),
                    function.address,
                    sums,
                ));
            }
            MixBy::Block => {}
        }
        match options.by {
            MixBy::Loop => {
                for l in &function.loops {
                    let mut loop_sums = Sums::default();
                    for &b in &l.block_ids {
                        if let Some(&i) = per_block.get(&(f, b)) {
                            loop_sums.add(&firsts[i], &a.map.blocks()[i]);
                        }
                    }
                    if loop_sums.n1 == 0 && loop_sums.samples == 0 {
                        continue;
                    }
                    let mut r = row("loop", f, format!("loop {}", l.id), l.header, &loop_sums);
                    r.loop_id = Some(l.id);
                    r.parent_loop = l.parent;
                    r.depth = l.depth;
                    r.file = l.file.clone();
                    r.line = l.line;
                    r.inlined = l.inlined.clone();
                    out.push(r);
                }
            }
            MixBy::Block => {
                for (bi, block) in function.blocks.iter().enumerate() {
                    let Some(&i) = per_block.get(&(f, bi as u32)) else {
                        continue;
                    };
                    let mut sums = Sums::default();
                    sums.add(&firsts[i], &a.map.blocks()[i]);
                    let mut r = row(
                        "block",
                        f,
                        format!("{:#x}", block.start),
                        block.start,
                        &sums,
                    );
                    let n_b = a.map.blocks()[i].types.total().max(1);
                    r.executions = Some((firsts[i].n1 / u128::from(n_b)) as u64);
                    r.cost = firsts[i].cost;
                    let li = innermost[&f][bi];
                    r.loop_id = li.map(|li| function.loops[li as usize].id);
                    r.depth = li.map_or(0, |li| function.loops[li as usize].depth);
                    out.push(r);
                }
            }
            MixBy::Function => {}
        }
    }
    out
}

/// Functions by decreasing instructions, each followed by its loops in forest order (a loop
/// before the loops it holds, siblings by decreasing instructions).
fn sort_functions_with_their_loops(rows: &mut Vec<MixRow>) {
    let mut functions: Vec<MixRow> = Vec::new();
    let mut loops: HashMap<(String, String), Vec<MixRow>> = HashMap::new();
    for r in rows.drain(..) {
        if r.kind == "function" {
            functions.push(r);
        } else {
            loops
                .entry((r.object.clone(), r.function.clone()))
                .or_default()
                .push(r);
        }
    }
    functions.sort_by(|a, b| {
        b.instructions
            .cmp(&a.instructions)
            .then(a.address.cmp(&b.address))
    });
    for f in functions {
        let mut mine = loops
            .remove(&(f.object.clone(), f.function.clone()))
            .unwrap_or_default();
        mine.sort_by(|a, b| {
            b.instructions
                .cmp(&a.instructions)
                .then(a.address.cmp(&b.address))
        });
        rows.push(f);
        // Depth-first from the outermost loops.
        fn emit(parent: Option<u32>, mine: &[MixRow], out: &mut Vec<MixRow>) {
            for l in mine.iter().filter(|l| l.parent_loop == parent) {
                out.push(l.clone());
                emit(l.loop_id, mine, out);
            }
        }
        let before = rows.len();
        emit(None, &mine, rows);
        // Loops whose parent had no samples of its own are still shown.
        let shown: Vec<Option<u32>> = rows[before..].iter().map(|r| r.loop_id).collect();
        for l in mine.iter().filter(|l| !shown.contains(&l.loop_id)) {
            rows.push(l.clone());
        }
    }
}
