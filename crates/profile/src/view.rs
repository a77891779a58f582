//! From a profile to what `report` shows: the objects analysed again (refused when rebuilt),
//! one loop-call-context tree with names, source lines, times and shares.

use std::collections::HashMap;
use std::path::Path;

use loopscope_binary::{Frame, Image, LoopKind, Options, Program};
use serde::Serialize;

use crate::file::{Profile, Recording};
use crate::lcct::{Lcct, NodeKey, hot_threshold};
use crate::sample::SampledRun;
use crate::sites::CodeIndex;
use crate::threads::{ThreadActivity, exact_threads, sampled_threads};
use crate::{ExactRun, ObjectRef, ProfileError};

/// One node of the report tree, with everything a row shows.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    /// `root`, `function`, `plt`, `loop` or `unknown`.
    pub kind: &'static str,
    /// Function name, `name@plt`, `loop N` or `[object]`.
    pub name: String,
    /// Static loop id (loops).
    pub loop_id: Option<u32>,
    /// Context-unique node id (the paper's loop ID managed by call sequence).
    pub node_id: u32,
    /// The loop is irreducible (several entry blocks).
    pub irreducible: bool,
    /// Source file of a loop's header.
    pub file: Option<String>,
    /// Source line of a loop's header (the user's line it was inlined at, when it is inlined
    /// code).
    pub line: Option<u32>,
    /// A loop header's inlined call chain, innermost first (empty when it is the function's
    /// own code): the first frame's `file` and `line` are where the header's code comes from.
    pub inlined: Vec<Frame>,
    /// The object the code belongs to.
    pub object: Option<String>,
    /// The function a loop is in.
    pub function: Option<String>,
    /// Time in this node alone, in seconds (trap cost subtracted for exact profiles).
    pub self_s: f64,
    /// Time in this node and below, in seconds.
    pub inclusive_s: f64,
    /// Self time as a share of the whole run's.
    pub self_share: f64,
    /// Inclusive time as a share of the whole run's.
    pub inclusive_share: f64,
    /// Standard error of `inclusive_share` (sampling: binomial over the samples).
    pub share_error: Option<f64>,
    /// Self TSC cycles as measured, before the trap cost is subtracted (exact profiles).
    pub self_cycles: Option<u64>,
    /// Inclusive TSC cycles as measured (exact profiles).
    pub inclusive_cycles: Option<u64>,
    /// Samples in this node alone (sampled profiles).
    pub self_samples: Option<u64>,
    /// Calls or loop entries (exact profiles).
    pub entries: Option<u64>,
    /// Header executions (exact profiles, loops).
    pub iterations: Option<u64>,
    /// Fewest, mean and most header executions per entry (exact profiles, loops).
    pub trips: Option<[f64; 3]>,
    /// Whether the node is hot under the report's rule.
    pub hot: bool,
    /// Child nodes.
    pub children: Vec<TreeNode>,
}

/// The paper's overhead line (Tables 1–2).
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    /// The command alone, in seconds, when it was run for comparison.
    pub native_s: Option<f64>,
    /// The command under the back-end, in seconds.
    pub profiled_s: f64,
    /// `profiled_s / native_s`.
    pub time_ratio: Option<f64>,
    /// Share of the profiled run that was the application's (exact profiles, §3.2).
    pub app_ratio: Option<f64>,
    /// `time_ratio × app_ratio`.
    pub est_app_overhead: Option<f64>,
}

/// What `report` shows.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileReport {
    /// `sample` or `ptrace`.
    pub backend: &'static str,
    /// The command recorded.
    pub command: Vec<String>,
    /// What the times are made of ("cpu-clock samples", "TSC cycles between markers").
    pub measure: String,
    /// The program the command ran (its first `exec`), with the build-id recorded, when known:
    /// what makes profiles ranks of one program.
    pub program: Option<ObjectRef>,
    /// How the target ended.
    pub exit: crate::TargetExit,
    /// Samples or marker events the tree is made of.
    pub events: u64,
    /// The threshold a node's inclusive share must reach to be hot.
    pub hot_threshold: f64,
    /// Cost and overhead of the recording.
    pub overhead: Overhead,
    /// The tree, from its root.
    pub tree: TreeNode,
    /// Things the reader should know (missing debug info, lost samples).
    pub notes: Vec<String>,
    /// Where each thread's time went, by node (for timeline exports; not in the JSON).
    #[serde(skip)]
    pub threads: Vec<ThreadActivity>,
}

/// How to build the report.
#[derive(Debug, Clone, Copy)]
pub enum HotRule {
    /// The paper's rule: the inclusive share of the node with the N-th largest self share.
    Rank(usize),
    /// A fixed inclusive share (0–1).
    Share(f64),
}

/// An analysed object: its program (when the file could be read) and its name.
struct Object {
    path: String,
    program: Option<Program>,
    image: Option<Image>,
}

/// Reads every object the profile refers to, refusing one whose build-id changed.
fn open_objects(
    profile: &Profile,
    used: &[bool],
    notes: &mut Vec<String>,
) -> Result<Vec<Object>, ProfileError> {
    let mut objects = Vec::new();
    for (i, o) in profile.objects.iter().enumerate() {
        let path = Path::new(&o.path);
        if !used.get(i).copied().unwrap_or(false) || !path.is_file() {
            if used.get(i).copied().unwrap_or(false) && !o.path.starts_with('[') {
                notes.push(format!(
                    "{}: not found; its code is shown by object only",
                    o.path
                ));
            }
            objects.push(Object {
                path: o.path.clone(),
                program: None,
                image: None,
            });
            continue;
        }
        let image = Image::open(path)?;
        if let Some(refusal) = o.identity_mismatch(path, image.build_id.as_deref()) {
            return Err(refusal);
        }
        if o.unverifiable() {
            notes.push(format!(
                "{}: no build-id, and the profile predates identifying such files by their \
                 code: it cannot be verified to be the build that was recorded",
                o.path
            ));
        }
        let program = Program::analyze(
            &image,
            &Options {
                lines: true,
                ..Options::default()
            },
        );
        let mut loops = program.functions.iter().flat_map(|f| &f.loops).peekable();
        if loops.peek().is_some() && loops.all(|l| l.file.is_none()) {
            notes.push(format!(
                "{}: no debug line information; loops have no file:line",
                o.path
            ));
        }
        if program.stripped {
            notes.push(format!(
                "{}: no symbols; functions are named by address",
                o.path
            ));
        }
        objects.push(Object {
            path: o.path.clone(),
            program: Some(program),
            image: Some(image),
        });
    }
    Ok(objects)
}

/// Builds the report of a profile.
pub fn build_report(profile: &Profile, rule: HotRule) -> Result<ProfileReport, ProfileError> {
    let mut notes = Vec::new();
    match &profile.recording {
        Recording::Sample(run) => {
            let used = vec![true; profile.objects.len()];
            let objects = open_objects(profile, &used, &mut notes)?;
            let (tree, leaves) = sampled_tree(profile, run, &objects);
            if let Some(depth) = crate::check::too_deep(&tree) {
                return Err(ProfileError::TreeTooDeep { depth });
            }
            let threads = sampled_threads(run, &leaves);
            notes.extend(run.few_samples_note());
            if let Some(note) = truncated_note(run) {
                notes.push(note);
            }
            notes.extend(run.lost_samples_note());
            let measure = format!(
                "{} samples at {} Hz ({} {} each)",
                run.event.name(),
                run.frequency_hz,
                run.period,
                run.event.unit()
            );
            let seconds_per_unit = if run.event.unit() == "ns" { 1e-9 } else { 0.0 };
            let overhead = Overhead::new(profile.native_wall_ns, run.wall_ns, None);
            let report = finish(
                profile,
                tree,
                &objects,
                rule,
                measure,
                run.exit,
                seconds_per_unit,
                overhead,
                notes,
                true,
            );
            Ok(ProfileReport { threads, ..report })
        }
        Recording::Ptrace(run) | Recording::Patch(run) => {
            let used = vec![true; profile.objects.len()];
            let objects = open_objects(profile, &used, &mut notes)?;
            let (tree, app_cycles) = exact_tree(run);
            let threads = exact_threads(run, &tree);
            // No tree measured anything (every process was replaced by an exec or killed before
            // writing): there is no ratio to give, rather than one of 0 %.
            let app_ratio = (app_cycles + run.analysis_cycles > 0)
                .then(|| app_cycles as f64 / (app_cycles + run.analysis_cycles) as f64);
            let overhead = Overhead::new(profile.native_wall_ns, run.wall_ns, app_ratio);
            let measure = match run.trap_cost {
                Some(c) => format!(
                    "TSC cycles between markers, {} cycles per marker subtracted",
                    c.cycles_per_event
                ),
                None if run.patch.is_some() => "TSC cycles between markers (in-process)".into(),
                None => "TSC cycles between markers (trap cost not subtracted)".into(),
            };
            let programs: Vec<_> = objects.iter().map(|o| o.program.as_ref()).collect();
            let analysed: Vec<_> = objects
                .iter()
                .map(|o| (o.path.as_str(), o.program.as_ref()))
                .collect();
            crate::check::check_loop_ids(run, &analysed)
                .map_err(|what| ProfileError::Damaged { what })?;
            if let Some(summary) = &run.patch {
                notes.extend(crate::patch::patch_notes(summary, &programs));
            }
            notes.extend(crate::exact::exact_notes(run, &overhead, &programs));
            if run.stepped_sites > 0 {
                notes.push(format!(
                    "{} of {} markers single-stepped in place (their instruction could not be relocated)",
                    run.stepped_sites, run.sites
                ));
            }
            let report = finish(
                profile,
                tree,
                &objects,
                rule,
                measure,
                run.exit,
                1.0 / run.tsc_hz,
                overhead,
                notes,
                false,
            );
            Ok(ProfileReport { threads, ..report })
        }
    }
}

/// The share of samples whose stack the unwinder could not follow to its outermost frame, and
/// what to do about it: their callers are missing from the tree.
fn truncated_note(run: &SampledRun) -> Option<String> {
    let truncated = run.samples.iter().filter(|s| s.truncated).count();
    if truncated == 0 {
        return None;
    }
    let more = if run.stack_bytes < crate::MAX_STACK_BYTES {
        format!(
            "; record with --stack-bytes {} to copy more",
            crate::MAX_STACK_BYTES
        )
    } else {
        String::new()
    };
    Some(format!(
        "{truncated} of {} samples ({:.1} %) have their stacks cut short (deeper than the {} \
         bytes of stack copied per sample, or code without unwind information): their callers \
         are missing, and those samples sit under the outermost frame found{more}",
        run.samples.len(),
        100.0 * truncated as f64 / run.samples.len() as f64,
        run.stack_bytes
    ))
}

impl Overhead {
    fn new(native_ns: Option<u64>, profiled_ns: u64, app_ratio: Option<f64>) -> Overhead {
        let time_ratio = native_ns
            .filter(|&n| n > 0)
            .map(|n| profiled_ns as f64 / n as f64);
        Overhead {
            native_s: native_ns.map(|n| n as f64 * 1e-9),
            profiled_s: profiled_ns as f64 * 1e-9,
            time_ratio,
            app_ratio,
            est_app_overhead: time_ratio.zip(app_ratio).map(|(t, a)| t * a),
        }
    }
}

/// All threads' trees merged; self times with the trap cost subtracted.
fn exact_tree(run: &ExactRun) -> (Lcct, u64) {
    let mut tree = Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    let app_cycles = tree.nodes.iter().map(|n| n.self_time).sum();
    // The window is `main` (spec §3.5): what runs before it and after it returns is not shown.
    tree.nodes[Lcct::ROOT as usize].self_time = 0;
    (tree, app_cycles)
}

/// One tree over every sample: each frame's function, then the loops around its address; and
/// the node each sample landed in.
fn sampled_tree(profile: &Profile, run: &SampledRun, objects: &[Object]) -> (Lcct, Vec<u32>) {
    let index_of: HashMap<&str, u32> = profile
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o.path.as_str(), i as u32))
        .collect();
    let indexes: Vec<Option<CodeIndex>> = objects
        .iter()
        .map(|o| o.program.as_ref().map(CodeIndex::new))
        .collect();
    let mut tree = Lcct::new();
    let mut leaves = Vec::with_capacity(run.samples.len());
    for s in &run.samples {
        let mut at = Lcct::ROOT;
        let mapped = |pc: u64| run.mapping_at(s.pid, s.time_ns, pc).is_some();
        for (depth, &address) in real_frames(&s.stack, mapped).iter().enumerate().rev() {
            // A return address is the instruction after the call; the call is one byte back.
            let pc = if depth == 0 {
                address
            } else {
                address.wrapping_sub(1)
            };
            at = place_frame(&mut tree, at, run, s, pc, &index_of, objects, &indexes);
        }
        let n = &mut tree.nodes[at as usize];
        n.self_samples += 1;
        n.self_time += run.period;
        leaves.push(at);
    }
    // Stacks reach `main` through the C runtime's start-up frames; the tree starts at `main`,
    // as the exact back-end's does (spec §3.5). Stacks without it (threads, start-up and exit
    // code) keep their frames.
    let is_main = |key: NodeKey| match key {
        NodeKey::Function { object, address } => objects[object as usize]
            .program
            .as_ref()
            .and_then(|p| p.functions.iter().find(|f| f.address == address))
            .is_some_and(|f| f.name == "main"),
        _ => false,
    };
    let (tree, map) = tree.rerooted(is_main);
    let leaves = leaves.into_iter().map(|l| map[l as usize]).collect();
    (tree, leaves)
}

/// A sample's frames without the outer ones that lie in no mapped code: past code without
/// unwind information the unwinder follows the frame pointer register, which such code need
/// not keep, and reads return addresses that are not. The sample then hangs from the outermost
/// real frame, as a stack cut short does. The innermost frame stays whatever it is: the
/// sampled instruction was running.
fn real_frames(stack: &[u64], mapped: impl Fn(u64) -> bool) -> &[u64] {
    let outermost = (1..stack.len())
        .rev()
        .find(|&depth| mapped(stack[depth].wrapping_sub(1)))
        .unwrap_or(0);
    stack.get(..=outermost).unwrap_or(&[])
}

#[allow(clippy::too_many_arguments)]
fn place_frame(
    tree: &mut Lcct,
    at: u32,
    run: &SampledRun,
    s: &crate::Sample,
    pc: u64,
    index_of: &HashMap<&str, u32>,
    objects: &[Object],
    indexes: &[Option<CodeIndex>],
) -> u32 {
    let Some(mapping) = run.mapping_at(s.pid, s.time_ns, pc) else {
        return tree.procedure_or_child(at, NodeKey::Unknown { object: u32::MAX });
    };
    let Some(&object) = index_of.get(mapping.path.as_str()) else {
        return tree.procedure_or_child(at, NodeKey::Unknown { object: u32::MAX });
    };
    let file_offset = pc - mapping.start + mapping.file_offset;
    let (Some(program), Some(index)) =
        (&objects[object as usize].program, &indexes[object as usize])
    else {
        return tree.procedure_or_child(at, NodeKey::Unknown { object });
    };
    let Some(static_address) = program
        .segments
        .iter()
        .find(|seg| {
            file_offset >= seg.file_offset
                && file_offset - seg.file_offset < seg.file_bytes.max(seg.mem_bytes)
        })
        .map(|seg| seg.vaddr + (file_offset - seg.file_offset))
    else {
        return tree.procedure_or_child(at, NodeKey::Unknown { object });
    };
    let Some(place) = index.locate(static_address) else {
        return tree.procedure_or_child(at, NodeKey::Unknown { object });
    };
    let f = &program.functions[place.function as usize];
    let mut node = tree.procedure_node(
        at,
        NodeKey::Function {
            object,
            address: f.address,
        },
    );
    for id in index.loop_chain(place.innermost_loop) {
        node = tree.child(node, NodeKey::Loop { object, id });
    }
    node
}

impl Lcct {
    /// Unknown code is folded like a procedure, so a deep stack of unknown frames is one node.
    fn procedure_or_child(&mut self, from: u32, key: NodeKey) -> u32 {
        if self.nodes[from as usize].key == key {
            return from;
        }
        self.child(from, key)
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    profile: &Profile,
    tree: Lcct,
    objects: &[Object],
    rule: HotRule,
    measure: String,
    exit: crate::TargetExit,
    seconds_per_unit: f64,
    overhead: Overhead,
    notes: Vec<String>,
    sampled: bool,
) -> ProfileReport {
    let cost = match &profile.recording {
        Recording::Ptrace(run) | Recording::Patch(run) => {
            run.trap_cost.map_or(0, |c| c.cycles_per_event)
        }
        Recording::Sample(_) => 0,
    };
    let corrected: Vec<u64> = tree
        .nodes
        .iter()
        .map(|n| n.self_time.saturating_sub(n.events_charged * cost))
        .collect();
    let inclusive_corrected = tree.inclusive_of(corrected.clone());
    let raw_inclusive = tree.inclusive(|n| n.self_time);
    let samples_inclusive = tree.inclusive(|n| n.self_samples);
    let threshold = match rule {
        HotRule::Rank(rank) => hot_threshold(&corrected, &inclusive_corrected, rank),
        HotRule::Share(share) => share,
    };
    let total = inclusive_corrected[0].max(1) as f64;
    let total_samples = samples_inclusive[0];
    let events = if sampled {
        total_samples
    } else {
        tree.nodes.iter().map(|n| n.events_charged).sum()
    };
    let labeller = Labeller { objects };
    let build = |id: u32, children: Vec<TreeNode>| -> TreeNode {
        let n = &tree.nodes[id as usize];
        let label = labeller.label(n.key);
        let inclusive_share = inclusive_corrected[id as usize] as f64 / total;
        let share_error = (sampled && total_samples > 0).then(|| {
            let p = samples_inclusive[id as usize] as f64 / total_samples as f64;
            (p * (1.0 - p) / total_samples as f64).sqrt()
        });
        let is_loop = matches!(n.key, NodeKey::Loop { .. });
        TreeNode {
            kind: label.kind,
            name: label.name,
            loop_id: label.loop_id,
            node_id: id,
            irreducible: label.irreducible,
            file: label.file,
            line: label.line,
            inlined: label.inlined,
            object: label.object,
            function: label.function,
            self_s: corrected[id as usize] as f64 * seconds_per_unit,
            inclusive_s: inclusive_corrected[id as usize] as f64 * seconds_per_unit,
            self_share: corrected[id as usize] as f64 / total,
            inclusive_share,
            share_error,
            self_cycles: (!sampled).then_some(n.self_time),
            inclusive_cycles: (!sampled).then_some(raw_inclusive[id as usize]),
            self_samples: sampled.then_some(n.self_samples),
            entries: (!sampled).then_some(n.entries),
            iterations: (!sampled && is_loop).then_some(n.header_executions),
            trips: (!sampled && is_loop && n.entries > 0).then(|| {
                [
                    n.trips_min.unwrap_or(0) as f64,
                    n.trips_mean().unwrap_or(0.0),
                    n.trips_max.unwrap_or(0) as f64,
                ]
            }),
            hot: inclusive_share >= threshold,
            children,
        }
    };
    let root = nest(&tree, 0, &build);
    ProfileReport {
        backend: profile.recording.backend(),
        command: profile.command.clone(),
        measure,
        program: program_of(profile),
        exit,
        events,
        hot_threshold: threshold,
        overhead,
        tree: root,
        notes,
        threads: Vec::new(),
    }
}

/// The program the command ran: an exact back-end's first instrumented object, or the file
/// the target's first `exec` mapped first.
fn program_of(profile: &Profile) -> Option<ObjectRef> {
    match &profile.recording {
        Recording::Ptrace(run) | Recording::Patch(run) => run.objects.first().cloned(),
        Recording::Sample(run) => {
            let exec = run.execs.first()?;
            let path = &run
                .mappings
                .get(exec.first_mapping..)?
                .iter()
                .find(|m| m.pid == exec.pid)?
                .path;
            let recorded = profile.objects.iter().find(|o| &o.path == path);
            Some(ObjectRef {
                path: path.clone(),
                build_id: recorded.and_then(|o| o.build_id.clone()),
                content_id: recorded.and_then(|o| o.content_id.clone()),
            })
        }
    }
}

/// A symbol demangled, its version (`@GLIBCXX_3.4`) kept after it.
fn demangle_versioned(name: &str) -> String {
    match name.split_once('@') {
        Some((symbol, version)) => format!("{}@{version}", loopscope_binary::demangle(symbol)),
        None => loopscope_binary::demangle(name),
    }
}

/// The nested tree, children by decreasing inclusive share.
fn nest(tree: &Lcct, id: u32, build: &impl Fn(u32, Vec<TreeNode>) -> TreeNode) -> TreeNode {
    let mut children: Vec<TreeNode> = tree.nodes[id as usize]
        .children
        .iter()
        .map(|&c| nest(tree, c, build))
        .collect();
    children.sort_by(|a, b| {
        b.inclusive_share
            .total_cmp(&a.inclusive_share)
            .then(a.node_id.cmp(&b.node_id))
    });
    build(id, children)
}

struct Label {
    kind: &'static str,
    name: String,
    loop_id: Option<u32>,
    irreducible: bool,
    file: Option<String>,
    line: Option<u32>,
    inlined: Vec<Frame>,
    object: Option<String>,
    function: Option<String>,
}

struct Labeller<'a> {
    objects: &'a [Object],
}

impl Labeller<'_> {
    fn label(&self, key: NodeKey) -> Label {
        let object_of = |o: u32| self.objects.get(o as usize);
        let mut label = Label {
            kind: "root",
            name: "all".into(),
            loop_id: None,
            irreducible: false,
            file: None,
            line: None,
            inlined: Vec::new(),
            object: None,
            function: None,
        };
        match key {
            NodeKey::Root => {}
            NodeKey::Function { object, address } => {
                label.kind = "function";
                let o = object_of(object);
                label.object = o.map(|o| o.path.clone());
                label.name = o
                    .and_then(|o| o.program.as_ref())
                    .and_then(|p| p.functions.iter().find(|f| f.address == address))
                    .map_or_else(|| format!("{address:#x}"), |f| f.name.clone());
            }
            NodeKey::Plt { object, address } => {
                label.kind = "plt";
                let o = object_of(object);
                label.object = o.map(|o| o.path.clone());
                let name = o
                    .and_then(|o| o.image.as_ref())
                    .and_then(|i| i.plt_name(address));
                label.name = format!(
                    "{}@plt",
                    name.map_or_else(|| "?".into(), demangle_versioned)
                );
            }
            NodeKey::Unknown { object } => {
                label.kind = "unknown";
                let path = object_of(object).map_or("unmapped code", |o| o.path.as_str());
                label.name = format!("[{}]", path.rsplit('/').next().unwrap_or(path));
                label.object = object_of(object).map(|o| o.path.clone());
            }
            NodeKey::Loop { object, id } => {
                label.kind = "loop";
                label.loop_id = Some(id);
                label.name = format!("loop {id}");
                let o = object_of(object);
                label.object = o.map(|o| o.path.clone());
                let found = o.and_then(|o| o.program.as_ref()).and_then(|p| {
                    p.functions
                        .iter()
                        .find_map(|f| f.loops.iter().find(|l| l.id == id).map(|l| (f, l)))
                });
                if let Some((f, l)) = found {
                    label.function = Some(f.name.clone());
                    label.irreducible = l.kind == LoopKind::Irreducible;
                    label.file = l.file.clone();
                    label.line = l.line;
                    label.inlined = l.inlined.clone();
                }
            }
        }
        label
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_frames_in_no_mapped_code_are_dropped() {
        let mapped = |pc: u64| (0x1000..0x2000).contains(&pc);
        // main's caller read from a frame pointer that code without unwind information did
        // not keep: 0x7fff... is on the stack, not code.
        assert_eq!(
            real_frames(&[0x1100, 0x1200, 0x7fff_0000, 0x10], mapped),
            [0x1100, 0x1200]
        );
        // A sampled instruction outside every mapping (JIT code) stays, alone.
        assert_eq!(real_frames(&[0x9000, 0x7fff_0000], mapped), [0x9000]);
        // An unmapped frame between real ones stays: only the outer end is trimmed.
        assert_eq!(
            real_frames(&[0x1100, 0x9000, 0x1200], mapped),
            [0x1100, 0x9000, 0x1200]
        );
        assert!(real_frames(&[], mapped).is_empty());
    }

    #[test]
    fn plt_names_are_demangled_with_their_version() {
        assert_eq!(
            demangle_versioned("_ZNSt13runtime_errorC1EPKc"),
            "std::runtime_error::runtime_error(char const*)"
        );
        assert_eq!(
            demangle_versioned("_ZNSt13runtime_errorC1EPKc@GLIBCXX_3.4"),
            "std::runtime_error::runtime_error(char const*)@GLIBCXX_3.4"
        );
        assert_eq!(demangle_versioned("strtol"), "strtol");
    }
}
