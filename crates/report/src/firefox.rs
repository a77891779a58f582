//! A loop profile in the Firefox Profiler's processed format (`report --firefox`), written with
//! the fxprof-processed-profile crate: one process per recorded process (and per profile when
//! several ranks are exported together), one thread per recorded thread, and loops as frames
//! of their own nested under their function, so the call tree, flame graph and stack chart show
//! the loop-call-context tree.
//!
//! Sampled profiles keep every sample at its time. Exact (ptrace) profiles have no samples:
//! each node with self time becomes one synthesized sample whose weight is that self time in
//! microseconds (the profile's interval is 1 µs, so counts read as microseconds). Those
//! samples are laid out one after another in tree order, so the call tree and the flame graph
//! are exact but the timeline's order is the tree's, not the run's.

use std::collections::HashMap;
use std::time::SystemTime;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, ProcessHandle, Profile,
    SamplingInterval, StackHandle, ThreadHandle, Timestamp,
};
use loopscope_profile::{ProfileReport, ThreadActivity, ThreadSample, ThreadTime, TreeNode};

use crate::PlotError;

/// One profile to export, under a name (a rank, a file name); the name prefixes its processes
/// when several profiles are exported together.
#[derive(Debug, Clone, Copy)]
pub struct FirefoxInput<'a> {
    /// What to call the profile's processes (empty: the command's name alone).
    pub label: &'a str,
    /// The report, with its threads.
    pub report: &'a ProfileReport,
}

/// A frame's label: a function's name, or `loop 5 (nest.c:28)` (`loop 5 (nest.c:28 (inlined
/// stdio.h:49))` when the header is inlined code).
pub fn frame_label(node: &TreeNode) -> String {
    if node.kind != "loop" {
        return node.name.clone();
    }
    let id = node.loop_id.unwrap_or(0);
    match crate::profile::source_text(node.file.as_deref(), node.line, &node.inlined) {
        Some(source) => format!("loop {id} ({source})"),
        None => match &node.function {
            Some(f) => format!("loop {id} (in {f})"),
            None => format!("loop {id}"),
        },
    }
}

/// The profiles as one Firefox Profiler document (JSON text). `start` is when the recording
/// began (sample times count from it).
pub fn render_firefox_profile(
    inputs: &[FirefoxInput<'_>],
    start: SystemTime,
) -> Result<String, PlotError> {
    let product = inputs
        .first()
        .map(|i| format!("loopscope: {}", i.report.command.join(" ")))
        .unwrap_or_else(|| "loopscope".into());
    let interval = inputs
        .iter()
        .find_map(|i| sampling_interval(i.report))
        .unwrap_or_else(|| SamplingInterval::from_nanos(1000));
    let mut profile = Profile::new(&product, start.into(), interval);
    let categories = Categories {
        function: profile.add_category("Function", CategoryColor::Blue),
        loop_: profile.add_category("Loop", CategoryColor::Orange),
        other: CategoryHandle::OTHER,
    };
    for input in inputs {
        add_report(&mut profile, &categories, input);
    }
    serde_json::to_string(&profile).map_err(|e| PlotError {
        plot: "the Firefox profile".into(),
        message: e.to_string(),
    })
}

struct Categories {
    function: CategoryHandle,
    loop_: CategoryHandle,
    other: CategoryHandle,
}

/// The median gap between a thread's consecutive samples, when the report has samples.
fn sampling_interval(report: &ProfileReport) -> Option<SamplingInterval> {
    let mut gaps: Vec<u64> = Vec::new();
    for t in &report.threads {
        if let ThreadTime::Samples(samples) = &t.time {
            gaps.extend(
                samples
                    .windows(2)
                    .map(|w| w[1].time_ns.saturating_sub(w[0].time_ns))
                    .filter(|&g| g > 0),
            );
        }
    }
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2)
        .map(|&g| SamplingInterval::from_nanos(g))
}

/// Each node by id, with its parent's id.
fn index_nodes<'a>(
    node: &'a TreeNode,
    parent: Option<u32>,
    out: &mut HashMap<u32, (&'a TreeNode, Option<u32>)>,
) {
    out.insert(node.node_id, (node, parent));
    for c in &node.children {
        index_nodes(c, Some(node.node_id), out);
    }
}

/// One report's processes and threads.
fn add_report(profile: &mut Profile, categories: &Categories, input: &FirefoxInput<'_>) {
    let report = input.report;
    let mut nodes = HashMap::new();
    index_nodes(&report.tree, None, &mut nodes);
    let program = report
        .command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).to_owned())
        .unwrap_or_else(|| "target".into());
    let process_name = if input.label.is_empty() {
        program
    } else {
        format!("{} {program}", input.label)
    };
    let mut processes: HashMap<u32, ProcessHandle> = HashMap::new();
    for thread in &report.threads {
        let process = *processes.entry(thread.pid).or_insert_with(|| {
            profile.add_process(
                &process_name,
                thread.pid,
                Timestamp::from_nanos_since_reference(0),
            )
        });
        let handle = profile.add_thread(
            process,
            thread.tid,
            Timestamp::from_nanos_since_reference(0),
            thread.pid == thread.tid,
        );
        profile.set_thread_name(handle, &format!("{process_name} tid {}", thread.tid));
        let mut stacks = Stacks {
            thread: handle,
            nodes: &nodes,
            categories,
            known: HashMap::new(),
        };
        add_thread_samples(profile, &mut stacks, thread);
    }
}

/// The interned stacks of one thread, by report node.
struct Stacks<'a> {
    thread: ThreadHandle,
    nodes: &'a HashMap<u32, (&'a TreeNode, Option<u32>)>,
    categories: &'a Categories,
    known: HashMap<u32, StackHandle>,
}

impl Stacks<'_> {
    /// The stack from the first node under the root down to `node_id` (`None` for the root).
    fn stack(&mut self, profile: &mut Profile, node_id: u32) -> Option<StackHandle> {
        if let Some(&s) = self.known.get(&node_id) {
            return Some(s);
        }
        let &(node, parent) = self.nodes.get(&node_id)?;
        if node.kind == "root" {
            return None;
        }
        let prefix = parent.and_then(|p| self.stack(profile, p));
        let category = match node.kind {
            "loop" => self.categories.loop_,
            "function" | "plt" => self.categories.function,
            _ => self.categories.other,
        };
        let label = profile.intern_string(&frame_label(node));
        let frame = profile.intern_frame(
            self.thread,
            FrameInfo {
                frame: Frame::Label(label),
                category_pair: category.into(),
                flags: FrameFlags::empty(),
            },
        );
        let stack = profile.intern_stack(self.thread, prefix, frame);
        self.known.insert(node_id, stack);
        Some(stack)
    }
}

fn add_thread_samples(profile: &mut Profile, stacks: &mut Stacks<'_>, thread: &ThreadActivity) {
    match &thread.time {
        ThreadTime::Samples(samples) => {
            for &ThreadSample {
                time_ns,
                node_id,
                cpu_ns,
            } in samples
            {
                let stack = stacks.stack(profile, node_id);
                let cpu = cpu_ns.map_or(CpuDelta::ZERO, CpuDelta::from_nanos);
                let at = Timestamp::from_nanos_since_reference(time_ns);
                profile.add_sample(stacks.thread, at, stack, cpu, 1);
            }
        }
        ThreadTime::SelfSeconds(nodes) => {
            let mut at_ns: u64 = 0;
            for &(node_id, seconds) in nodes {
                let micros = (seconds * 1e6).round().clamp(1.0, f64::from(i32::MAX));
                let stack = stacks.stack(profile, node_id);
                let at = Timestamp::from_nanos_since_reference(at_ns);
                let cpu = CpuDelta::from_micros(micros as u64);
                profile.add_sample(stacks.thread, at, stack, cpu, micros as i32);
                at_ns += micros as u64 * 1000;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use loopscope_profile::{Overhead, TargetExit};
    use serde_json::Value;

    /// A tree node with no counts; a loop is `loop 5` of `main` at `/src/nest.c:28`.
    pub(crate) fn node(
        id: u32,
        kind: &'static str,
        name: &str,
        children: Vec<TreeNode>,
    ) -> TreeNode {
        TreeNode {
            kind,
            name: name.into(),
            loop_id: (kind == "loop").then_some(5),
            node_id: id,
            irreducible: false,
            file: (kind == "loop").then(|| "/src/nest.c".into()),
            line: (kind == "loop").then_some(28),
            inlined: Vec::new(),
            object: None,
            function: (kind == "loop").then(|| "main".into()),
            self_s: 0.0,
            inclusive_s: 0.0,
            self_share: 0.0,
            inclusive_share: 0.0,
            share_error: None,
            self_cycles: None,
            inclusive_cycles: None,
            self_samples: None,
            entries: None,
            iterations: None,
            trips: None,
            hot: true,
            children,
        }
    }

    fn report(time: ThreadTime) -> ProfileReport {
        let tree = node(
            0,
            "root",
            "all",
            vec![node(
                1,
                "function",
                "main",
                vec![node(2, "loop", "loop 5", vec![])],
            )],
        );
        ProfileReport {
            backend: "sample",
            command: vec!["/bin/nest".into()],
            measure: String::new(),
            program: None,
            exit: TargetExit::Exited(0),
            events: 3,
            hot_threshold: 0.01,
            overhead: Overhead {
                native_s: None,
                profiled_s: 0.003,
                time_ratio: None,
                app_ratio: None,
                est_app_overhead: None,
            },
            tree,
            notes: Vec::new(),
            threads: vec![ThreadActivity {
                pid: 7,
                tid: 7,
                time,
            }],
        }
    }

    fn export(report: &ProfileReport) -> Value {
        let input = FirefoxInput { label: "", report };
        let text = render_firefox_profile(&[input], SystemTime::UNIX_EPOCH).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let again: Value = serde_json::from_str(&serde_json::to_string(&value).unwrap()).unwrap();
        assert_eq!(value, again);
        value
    }

    /// The frame names of a stack, outermost first.
    fn stack_names(thread: &Value, stack: usize) -> Vec<String> {
        let strings = thread["stringArray"].as_array().unwrap();
        let mut names = Vec::new();
        let mut at = Some(stack);
        while let Some(s) = at {
            let frame = thread["stackTable"]["frame"][s].as_u64().unwrap() as usize;
            let func = thread["frameTable"]["func"][frame].as_u64().unwrap() as usize;
            let name = thread["funcTable"]["name"][func].as_u64().unwrap() as usize;
            names.push(strings[name].as_str().unwrap().to_owned());
            at = thread["stackTable"]["prefix"][s]
                .as_u64()
                .map(|p| p as usize);
        }
        names.reverse();
        names
    }

    #[test]
    fn samples_keep_their_times_and_loops_nest_under_their_function() {
        let samples = [(1_000_000, 2), (2_000_000, 2), (3_000_000, 1)]
            .map(|(time_ns, node_id)| ThreadSample {
                time_ns,
                node_id,
                cpu_ns: Some(1_000_000),
            })
            .to_vec();
        let value = export(&report(ThreadTime::Samples(samples)));
        assert!(value["meta"]["version"].is_number());
        assert_eq!(value["meta"]["interval"].as_f64(), Some(1.0));
        let threads = value["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 1);
        let thread = &threads[0];
        for table in [
            "stringArray",
            "funcTable",
            "frameTable",
            "stackTable",
            "samples",
        ] {
            assert!(thread.get(table).is_some(), "no {table}");
        }
        let samples = &thread["samples"];
        assert_eq!(samples["length"].as_u64(), Some(3));
        let deltas: Vec<f64> = samples["timeDeltas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_f64().unwrap())
            .collect();
        assert_eq!(deltas, [1.0, 1.0, 1.0]);
        let first = samples["stack"][0].as_u64().unwrap() as usize;
        assert_eq!(stack_names(thread, first), ["main", "loop 5 (nest.c:28)"]);
        let last = samples["stack"][2].as_u64().unwrap() as usize;
        assert_eq!(stack_names(thread, last), ["main"]);
    }

    #[test]
    fn exact_self_times_become_weighted_samples_in_microseconds() {
        let value = export(&report(ThreadTime::SelfSeconds(vec![
            (1, 0.000_25),
            (2, 0.0125),
        ])));
        let thread = &value["threads"][0];
        let weights: Vec<u64> = thread["samples"]["weight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .collect();
        assert_eq!(weights, [250, 12_500]);
        assert_eq!(value["meta"]["interval"].as_f64(), Some(0.001));
        let loop_stack = thread["samples"]["stack"][1].as_u64().unwrap() as usize;
        assert_eq!(
            stack_names(thread, loop_stack),
            ["main", "loop 5 (nest.c:28)"]
        );
    }

    #[test]
    fn a_loop_without_a_line_is_named_by_its_function() {
        let mut n = node(3, "loop", "loop 2", vec![]);
        n.file = None;
        n.loop_id = Some(2);
        assert_eq!(frame_label(&n), "loop 2 (in main)");
    }

    #[test]
    fn an_inlined_loop_header_is_labelled_with_its_inlined_source() {
        let mut n = node(3, "loop", "loop 5", vec![]);
        n.inlined = vec![loopscope_binary::Frame {
            function: Some("getchar".into()),
            file: Some("/usr/include/x86_64-linux-gnu/bits/stdio.h".into()),
            line: Some(49),
        }];
        assert_eq!(frame_label(&n), "loop 5 (nest.c:28 (inlined stdio.h:49))");
    }
}
