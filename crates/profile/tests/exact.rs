//! The exact back-end on fixture programs with known loop counts.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use loopscope_binary::{Image, Options, Program};
use loopscope_profile::{ExactOptions, ExactRun, Lcct, NodeKey, TargetExit, record_exact};

fn compile(source: &str, flags: &[&str], dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(source);
    let out = dir.join(source.trim_end_matches(".c"));
    let status = Command::new("cc")
        .args(flags)
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        _ => {
            eprintln!("skipped: cc could not build {source}");
            None
        }
    }
}

fn ptrace_allowed() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope.trim() == "3" {
        eprintln!("skipped: ptrace disabled (kernel.yama.ptrace_scope = 3)");
        return false;
    }
    true
}

/// Static loop id → the tag in the comment on the loop's first source line.
fn loop_tags(binary: &Path, source: &str) -> HashMap<u32, String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(source),
    )
    .unwrap();
    let tag_of_line: HashMap<u32, String> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            Some((
                i as u32 + 1,
                l.split("/* LOOP ").nth(1)?.split(' ').next()?.to_owned(),
            ))
        })
        .collect();
    let image = Image::open(binary).unwrap();
    let program = Program::analyze(
        &image,
        &Options {
            lines: true,
            ..Options::default()
        },
    );
    let mut tags = HashMap::new();
    for f in &program.functions {
        for l in &f.loops {
            // The loop's tag is on the last tagged line at or before the loop's first line (a
            // do-while's code starts on the line after its `do`).
            let first = l.line_min.unwrap_or(0);
            if let Some((_, tag)) = tag_of_line
                .iter()
                .filter(|(line, _)| **line <= first)
                .max_by_key(|(line, _)| **line)
            {
                tags.insert(l.id, tag.clone());
            }
        }
    }
    tags
}

fn run(binary: &Path, args: &[&str]) -> ExactRun {
    let mut command = vec![OsString::from(binary)];
    command.extend(args.iter().map(OsString::from));
    record_exact(&command, &ExactOptions::default(), &AtomicBool::new(false)).unwrap()
}

fn merged(run: &ExactRun) -> Lcct {
    let mut tree = Lcct::new();
    for t in &run.threads {
        tree.merge(&t.tree);
    }
    tree
}

fn print(tree: &Lcct, tags: &HashMap<u32, String>) -> String {
    let mut out = String::new();
    fn walk(tree: &Lcct, tags: &HashMap<u32, String>, node: u32, depth: usize, out: &mut String) {
        let n = &tree.nodes[node as usize];
        let name = match n.key {
            NodeKey::Loop { id, .. } => format!("loop {}", tags.get(&id).map_or("?", |s| s)),
            NodeKey::Function { address, .. } => format!("fn {address:#x}"),
            NodeKey::Plt { address, .. } => format!("plt {address:#x}"),
            other => format!("{other:?}"),
        };
        out.push_str(&format!(
            "{}{} entries={} headers={} back={} exits={} min={:?} max={:?}\n",
            "  ".repeat(depth),
            name,
            n.entries,
            n.header_executions,
            n.back_edges,
            n.exits,
            n.trips_min,
            n.trips_max
        ));
        for &c in &n.children {
            walk(tree, tags, c, depth + 1, out);
        }
    }
    walk(tree, tags, 0, 0, &mut out);
    out
}

/// A loop node's (entries, header executions, exits, fewest trips, most trips).
type LoopCounts = (u64, u64, u64, Option<u64>, Option<u64>);

/// The loop nodes with this tag: (entries, header executions, exits, min, max).
fn loops_tagged(tree: &Lcct, tags: &HashMap<u32, String>, tag: &str) -> Vec<LoopCounts> {
    tree.nodes
        .iter()
        .filter(|n| matches!(n.key, NodeKey::Loop { id, .. } if tags.get(&id).map(String::as_str) == Some(tag)))
        .map(|n| (n.entries, n.header_executions, n.exits, n.trips_min, n.trips_max))
        .collect()
}

#[test]
fn nest_counts_are_exact() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", &["-O1"], dir.path()) else {
        return;
    };
    let tags = loop_tags(&binary, "nest.c");
    let run = run(&binary, &["40"]);
    assert_eq!(run.exit, TargetExit::Exited(0));
    let tree = merged(&run);
    eprintln!("{}", print(&tree, &tags));
    let get = |tag| loops_tagged(&tree, &tags, tag);
    // A triangular nest: 40 entries of the inner loop, 40 * 41 / 2 header executions.
    assert_eq!(get("tri-outer"), vec![(1, 40, 1, Some(40), Some(40))]);
    assert_eq!(get("tri-inner"), vec![(40, 820, 40, Some(1), Some(40))]);
    // `work` from three contexts: its loop is three nodes (10 calls of 7 trips; 3 calls of 5,
    // whose calling loop may be unrolled away; 4 × 5 + 3 × 6 calls of 1 from the break nest).
    let mut work = get("work");
    work.sort();
    assert_eq!(
        work,
        vec![
            (3, 15, 3, Some(5), Some(5)),
            (10, 70, 10, Some(7), Some(7)),
            (38, 38, 38, Some(1), Some(1))
        ]
    );
    assert_eq!(get("ctx-a"), vec![(1, 10, 1, Some(10), Some(10))]);
    // fib(10) makes 177 calls, folded into one node.
    let fib = tree.nodes.iter().filter(|n| n.entries == 177).count();
    assert_eq!(fib, 1, "one folded node for fib");
    // Breaks: the inner loop is left 7 times by its break, the outer by its own at i = 6.
    assert_eq!(get("brk-outer"), vec![(1, 7, 1, Some(7), Some(7))]);
    let inner = get("brk-inner");
    assert_eq!(inner.len(), 1);
    assert_eq!((inner[0].0, inner[0].2), (7, 7));
    // A return out of a nest closes both loops.
    assert_eq!(get("find-outer"), vec![(1, 3, 1, Some(3), Some(3))]);
    assert_eq!(get("find-inner")[0].0, get("find-inner")[0].2);
    assert_eq!(get("do-while"), vec![(1, 9, 1, Some(9), Some(9))]);
}

#[test]
fn a_failing_target_keeps_its_tree() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("nest.c", &["-O1"], dir.path()) else {
        return;
    };
    let run = run(&binary, &["5", "x"]);
    assert_eq!(run.exit, TargetExit::Exited(3));
    let tags = loop_tags(&binary, "nest.c");
    assert_eq!(
        loops_tagged(&merged(&run), &tags, "tri-inner"),
        vec![(5, 15, 5, Some(1), Some(5))]
    );
}

#[test]
fn threads_and_forks_get_their_own_trees() {
    if !ptrace_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = compile("threads.c", &["-O1", "-pthread"], dir.path()) else {
        return;
    };
    let tags = loop_tags(&binary, "threads.c");
    let run = run(&binary, &["3"]);
    assert_eq!(run.exit, TargetExit::Exited(0));
    // The worker's loop in each thread: 100, 200 and 300 trips; 7 in the forked child.
    let mut trips: Vec<(u32, Option<u64>)> = run
        .threads
        .iter()
        .flat_map(|t| {
            loops_tagged(&t.tree, &tags, "worker")
                .into_iter()
                .map(move |(entries, headers, ..)| (t.pid, (entries == 1).then_some(headers)))
        })
        .collect();
    trips.sort_by_key(|&(_, h)| h);
    let counts: Vec<Option<u64>> = trips.iter().map(|&(_, h)| h).collect();
    assert_eq!(
        counts,
        vec![Some(7), Some(100), Some(200), Some(300)],
        "{trips:?}"
    );
    let root = run.threads.iter().map(|t| t.pid).min().unwrap();
    assert_eq!(
        trips.iter().filter(|&&(pid, _)| pid != root).count(),
        1,
        "one tree in the forked process"
    );
    assert_eq!(
        run.threads.len(),
        5,
        "main thread, three workers, the forked child"
    );
}
