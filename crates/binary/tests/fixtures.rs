//! Loop forests of fixture C programs compiled at test time with `cc -g` at -O0, -O2 and -O3:
//! loop shapes (`loops.c`) and a switch-dispatch bytecode interpreter (`interp.c`); and the
//! names of template class members in a C++ fixture (`templates.cpp`, built with `c++ -O1 -g`).

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Command;

use loopscope_binary::{
    EdgeKind, Exit, Function, FunctionFilter, Image, Loop, LoopKind, Options, Program, SplitMode,
};

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/loops.c");
const INTERP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/interp.c");

/// Compiles the loop-shapes fixture; `None` (after saying so) when there is no C compiler.
fn compile(dir: &Path, opt: &str) -> Option<PathBuf> {
    build(dir, "cc", SOURCE, &[opt])
}

/// Compiles `source` with `compiler`, `flags` and `-g`; `None` (after saying so) when that
/// compiler is not there.
fn build(dir: &Path, compiler: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    let stem = Path::new(source)
        .file_stem()?
        .to_string_lossy()
        .into_owned();
    let out = dir.join(format!("{stem}-{compiler}{}", flags.concat()));
    let status = Command::new(compiler)
        .args(flags)
        .args(["-g", "-o"])
        .arg(&out)
        .arg(source)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        _ => {
            let flags = flags.join(" ");
            eprintln!("skipped: no working `{compiler}` to build {stem}.c with {flags}");
            None
        }
    }
}

fn analyse(path: &Path, split: SplitMode) -> Program {
    let image = Image::open(path).unwrap();
    let options = Options {
        split,
        lines: true,
        ..Options::default()
    };
    Program::analyze(&image, &options)
}

/// The line of the `LOOP name` marker in the fixture.
fn marker(name: &str) -> u32 {
    marker_in(SOURCE, &format!("LOOP {name} "))
}

/// The line of a marker comment in a fixture.
fn marker_in(source: &str, tag: &str) -> u32 {
    let text = std::fs::read_to_string(source).unwrap();
    let index = text.lines().position(|l| l.contains(tag));
    index.unwrap_or_else(|| panic!("no `{tag}` in {source}")) as u32 + 1
}

fn function<'p>(program: &'p Program, name: &str) -> &'p Function {
    program
        .function(name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

fn depths(f: &Function) -> Vec<u32> {
    f.loops.iter().map(|l| l.depth).collect()
}

/// Some loop of `f` spans the marker's line (or the next one, for `do {`).
fn covers(f: &Function, name: &str) -> bool {
    let line = marker(name);
    f.loops.iter().any(|l| match (l.line_min, l.line_max) {
        (Some(a), Some(b)) => (a..=b).contains(&line) || (a..=b).contains(&(line + 1)),
        _ => false,
    })
}

#[test]
fn loop_forest_at_o0() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O0") else {
        return;
    };
    let p = analyse(&path, SplitMode::Leaders);
    let perfect = function(&p, "perfect_nest");
    assert_eq!(depths(perfect), vec![3, 2, 1]); // ordered by header address: innermost first
    let by_depth = |f: &Function, d: u32| f.loops.iter().find(|l| l.depth == d).unwrap().clone();
    assert_eq!(by_depth(perfect, 1).line, Some(marker("perfect_i")));
    assert_eq!(by_depth(perfect, 2).line, Some(marker("perfect_j")));
    assert_eq!(by_depth(perfect, 3).line, Some(marker("perfect_k")));
    assert_eq!(by_depth(perfect, 3).parent, Some(by_depth(perfect, 2).id));

    let imperfect = function(&p, "imperfect_nest");
    assert_eq!(imperfect.loops.len(), 3);
    let outer = by_depth(imperfect, 1);
    assert_eq!(outer.line, Some(marker("imperfect_i")));
    let inner: Vec<Option<u32>> = imperfect
        .loops
        .iter()
        .filter(|l| l.depth == 2)
        .map(|l| l.line)
        .collect();
    assert_eq!(
        inner,
        vec![Some(marker("imperfect_j1")), Some(marker("imperfect_j2"))]
    );
    assert!(
        imperfect
            .loops
            .iter()
            .filter(|l| l.depth == 2)
            .all(|l| l.parent == Some(outer.id))
    );

    for (f, m) in [
        ("while_loop", "while"),
        ("break_continue", "break_continue"),
        ("switch_loop", "switch"),
        ("inlined_sum", "inlined"),
        ("main", "main"),
    ] {
        let f = function(&p, f);
        assert_eq!(f.loops.len(), 1, "{}", f.name);
        assert_eq!(f.loops[0].line, Some(marker(m)), "{}", f.name);
    }
    let do_while = function(&p, "do_while_loop");
    assert_eq!(do_while.loops.len(), 1);
    assert!(covers(do_while, "do_while"));

    let irreducible = function(&p, "irreducible");
    assert_eq!(irreducible.loops.len(), 1);
    assert_eq!(irreducible.loops[0].kind, LoopKind::Irreducible);
    assert_eq!(irreducible.loops[0].entry_edges.len(), 2);
    assert!(covers(irreducible, "irreducible"));

    let switch = function(&p, "switch_loop");
    assert_eq!(switch.jump_tables, 1);
    assert_eq!(switch.unknown_jumps, 0);
    assert!(switch.loops[0].blocks >= 9, "cases are inside the loop");

    assert!(function(&p, "recursion").loops.is_empty());
    let fail_if = function(&p, "fail_if");
    assert!(fail_if.loops.is_empty());
    assert!(
        fail_if
            .blocks
            .iter()
            .any(|b| b.exit == loopscope_binary::Exit::NoReturnCall),
        "exit() does not return"
    );
}

#[test]
fn loop_forest_at_o2() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O2") else {
        return;
    };
    let p = analyse(&path, SplitMode::Leaders);
    let perfect = function(&p, "perfect_nest");
    assert_eq!(perfect.loops.iter().map(|l| l.depth).max(), Some(3));
    for m in ["perfect_i", "perfect_j", "perfect_k"] {
        assert!(covers(perfect, m), "{m}");
    }
    let imperfect = function(&p, "imperfect_nest");
    let outer = imperfect.loops.iter().find(|l| l.depth == 1).unwrap();
    let children = imperfect
        .loops
        .iter()
        .filter(|l| l.parent == Some(outer.id))
        .count();
    assert!(children >= 2, "two inner loops, found {children}");
    for (f, m) in [
        ("while_loop", "while"),
        ("do_while_loop", "do_while"),
        ("break_continue", "break_continue"),
        ("switch_loop", "switch"),
        ("irreducible", "irreducible"),
        ("main", "main"),
    ] {
        let f = function(&p, f);
        assert!(!f.loops.is_empty(), "{}", f.name);
        assert!(covers(f, m), "{} {:?}", f.name, f.loops);
    }
    let switch = function(&p, "switch_loop");
    assert_eq!((switch.jump_tables, switch.unknown_jumps), (1, 0));

    // The inlined loop is reported in its caller, with the inlined frames.
    let caller = function(&p, "calls_inlined");
    assert_eq!(caller.loops.len(), 1);
    let l = &caller.loops[0];
    assert!(covers(caller, "inlined"));
    assert_eq!(
        l.inlined.first().and_then(|f| f.function.as_deref()),
        Some("inlined_sum")
    );
    assert_eq!(
        l.inlined.get(1).and_then(|f| f.function.as_deref()),
        Some("calls_inlined")
    );
}

#[test]
fn ids_are_deterministic_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O2") else {
        return;
    };
    let first = analyse(&path, SplitMode::Leaders);
    let second = analyse(&path, SplitMode::Leaders);
    assert_eq!(first, second);
    let keys: Vec<(u64, u64, u32)> = first
        .functions
        .iter()
        .flat_map(|f| f.loops.iter().map(move |l| (f.address, l.header, l.id)))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(keys.iter().enumerate().all(|(i, k)| k.2 == i as u32));
}

#[test]
fn after_branch_split_ignores_branch_targets() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O0") else {
        return;
    };
    let leaders = analyse(&path, SplitMode::Leaders);
    let literal = analyse(&path, SplitMode::AfterBranch);
    for (a, b) in leaders.functions.iter().zip(&literal.functions) {
        assert_eq!(a.instructions, b.instructions);
        assert!(b.blocks.len() <= a.blocks.len());
        // Every literal block ends after a control transfer or where decoding stops.
        for pair in b.blocks.windows(2) {
            let contiguous = pair[0].end == pair[1].start;
            assert!(!contiguous || pair[0].exit != loopscope_binary::Exit::FallThrough);
        }
    }
    let main = |p: &Program| function(p, "perfect_nest").blocks.len();
    assert!(main(&literal) < main(&leaders));
}

#[test]
fn stripped_binary_has_the_same_loops() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O2") else {
        return;
    };
    let stripped = dir.path().join("stripped");
    let ok = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&path)
        .status();
    if !ok.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no working `strip`");
        return;
    }
    let full = analyse(&path, SplitMode::Leaders);
    let bare = analyse(&stripped, SplitMode::Leaders);
    assert!(bare.stripped && !full.stripped);
    assert_eq!(bare.loop_count(), full.loop_count());
    let headers = |p: &Program| -> Vec<u64> {
        p.functions
            .iter()
            .flat_map(|f| f.loops.iter().map(|l| l.header))
            .collect()
    };
    assert_eq!(headers(&bare), headers(&full));
}

/// The lines of an interpreter loop statement, from its `LOOP name` to its `END name`.
fn statement_lines(name: &str) -> RangeInclusive<u32> {
    marker_in(INTERP, &format!("LOOP {name} "))..=marker_in(INTERP, &format!("END {name} "))
}

/// The loop of that id.
fn loop_by_id(f: &Function, id: u32) -> &Loop {
    f.loops.iter().find(|l| l.id == id).unwrap()
}

/// Checks that the switch dispatch of `function` is a resolved jump table whose targets all
/// lie in the dispatch loop, that the dispatch loop and the loop enclosing it are found with
/// headers on their statements' lines and the right depths, and that the loop inside one
/// opcode nests in the dispatch loop.
fn check_interpreter(p: &Program, name: &str, loops: [&str; 3], build: &str) {
    let [outer, dispatch, inner] = loops;
    let f = function(p, name);
    let context = format!("{name} built with {build}");
    assert!(f.jump_tables >= 1, "{context}: no jump table recovered");
    assert_eq!(f.unknown_jumps, 0, "{context}: indirect jumps left unknown");
    let tables: Vec<u32> = (0..f.blocks.len() as u32)
        .filter(|&b| f.blocks[b as usize].exit == Exit::Table)
        .collect();
    assert!(
        !tables.is_empty(),
        "{context}: no block ends in a table jump"
    );
    for &table in &tables {
        let targets: Vec<u32> = f.blocks[table as usize]
            .succs
            .iter()
            .filter(|s| s.kind == EdgeKind::Table)
            .map(|s| s.block)
            .collect();
        assert!(
            targets.len() >= 10,
            "{context}: {} table targets",
            targets.len()
        );
        // The innermost loop holding the jump and every target: the dispatch loop.
        let holds_all = |l: &&Loop| {
            std::iter::once(&table)
                .chain(&targets)
                .all(|b| l.block_ids.binary_search(b).is_ok())
        };
        let found = f.loops.iter().filter(holds_all).max_by_key(|l| l.depth);
        let d = found.unwrap_or_else(|| panic!("{context}: no loop holds the dispatch"));
        let d_line = d
            .line
            .unwrap_or_else(|| panic!("{context}: dispatch loop has no line"));
        assert!(
            statement_lines(dispatch).contains(&d_line),
            "{context}: dispatch loop header at line {d_line}, expected {:?}",
            statement_lines(dispatch)
        );
        assert_eq!(d.depth, 2, "{context}: dispatch loop depth");
        let o = loop_by_id(f, d.parent.unwrap());
        assert_eq!(o.depth, 1, "{context}: enclosing loop depth");
        let o_line = o
            .line
            .unwrap_or_else(|| panic!("{context}: outer loop has no line"));
        assert!(
            statement_lines(outer).contains(&o_line),
            "{context}: enclosing loop header at line {o_line}, expected {:?}",
            statement_lines(outer)
        );
        let inner_line = marker_in(INTERP, &format!("LOOP {inner} "));
        let nested_in_dispatch = |l: &Loop| {
            let mut up = l.parent;
            while let Some(id) = up {
                if id == d.id {
                    return true;
                }
                up = loop_by_id(f, id).parent;
            }
            false
        };
        assert!(
            f.loops.iter().any(|l| {
                let spans = match (l.line_min, l.line_max) {
                    (Some(a), Some(b)) => (a..=b).contains(&inner_line),
                    _ => false,
                };
                spans && nested_in_dispatch(l)
            }),
            "{context}: no loop at line {inner_line} inside the dispatch loop: {:?}",
            f.loops
                .iter()
                .map(|l| (l.id, l.parent, l.line_min, l.line_max))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn interpreter_dispatch_loops_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    // -fno-pic: absolute tables; -fcf-protection: `notrack jmp` and `endbr64` at the targets.
    let builds: [&[&str]; 5] = [
        &["-O0"],
        &["-O2"],
        &["-O3"],
        &["-O2", "-fno-pic", "-no-pie"],
        &["-O3", "-fcf-protection=full"],
    ];
    for compiler in ["cc", "clang"] {
        for flags in builds {
            let Some(path) = build(dir.path(), compiler, INTERP, flags) else {
                continue;
            };
            let p = analyse(&path, SplitMode::Leaders);
            let name = format!("{compiler} {}", flags.join(" "));
            check_interpreter(&p, "interpret", ["repeat", "dispatch", "sum"], &name);
            check_interpreter(
                &p,
                "interpret_masked",
                ["masked_repeat", "masked_dispatch", "masked_inner"],
                &name,
            );
        }
    }
}

/// What a loop is, apart from its id (ids are numbered over the functions analysed).
fn loop_shape(f: &Function, l: &Loop) -> String {
    let parent_header = l.parent.map(|p| loop_by_id(f, p).header);
    format!(
        "{:#x} {parent_header:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        l.header,
        l.depth,
        l.kind,
        l.block_ids,
        l.line,
        l.line_min,
        l.line_max,
        l.classes,
        l.back_edges,
        l.entry_edges,
        l.exit_edges
    )
}

#[test]
fn analysing_some_functions_finds_their_loops_as_the_whole_analysis_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = compile(dir.path(), "-O2") else {
        return;
    };
    let image = Image::open(&path).unwrap();
    let options = Options {
        lines: true,
        ..Options::default()
    };
    let whole = Program::analyze(&image, &options);
    let nest = function(&whole, "perfect_nest");
    let filter = FunctionFilter {
        addresses: vec![nest.address + nest.size / 2, 0x10],
        names: vec!["switch_loop".into(), "imperfect_nest".into()],
    };
    let some = Program::analyze_functions(&image, &options, &filter);
    let mut names: Vec<&str> = some.functions.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["imperfect_nest", "perfect_nest", "switch_loop"]);
    for f in &some.functions {
        let w = function(&whole, &f.name);
        assert_eq!(f.blocks, w.blocks, "{}", f.name);
        assert_eq!(
            (f.jump_tables, f.unknown_jumps),
            (w.jump_tables, w.unknown_jumps)
        );
        let shapes = |g: &Function| g.loops.iter().map(|l| loop_shape(g, l)).collect::<Vec<_>>();
        assert_eq!(shapes(f), shapes(w), "{}", f.name);
        assert!(!f.loops.is_empty(), "{}", f.name);
    }
    let ids: Vec<u32> = some
        .functions
        .iter()
        .flat_map(|f| f.loops.iter().map(|l| l.id))
        .collect();
    assert_eq!(ids, (0..ids.len() as u32).collect::<Vec<_>>());
    let none = FunctionFilter {
        addresses: vec![0x10],
        names: vec!["no_such_function".into()],
    };
    assert!(
        Program::analyze_functions(&image, &options, &none)
            .functions
            .is_empty()
    );
}

#[test]
fn relocatable_objects_are_refused_naming_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let object = dir.path().join("loops.o");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-c", "-o"])
        .arg(&object)
        .arg(SOURCE)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no working `cc` to build loops.o");
        return;
    }
    let e = Image::open(&object).unwrap_err();
    assert!(e.is_bad_input());
    let message = e.to_string();
    assert!(
        message.ends_with(
            "loops.o: a relocatable object (ET_REL): link it first (`cc loops.o -o program`, \
             or `-shared` for a library), then analyse the result"
        ),
        "{message}"
    );
    assert!(!message.contains("stripped") && !message.contains("_start"));
}

#[test]
fn a_static_build_has_no_interpreter_and_a_dynamic_one_has() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, expected) in [(&["-O1", "-static"][..], false), (&["-O1"][..], true)] {
        let Some(binary) = build(dir.path(), "cc", SOURCE, flags) else {
            return;
        };
        let bytes = std::fs::read(&binary).unwrap();
        assert_eq!(
            loopscope_binary::has_interpreter(&bytes),
            Some(expected),
            "{flags:?}"
        );
        assert_eq!(
            loopscope_binary::has_interpreter(&bytes[..4096]),
            Some(expected),
            "the first page holds the program headers"
        );
    }
}

#[test]
fn template_class_members_are_named_in_full() {
    const TEMPLATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/templates.cpp");
    let dir = tempfile::tempdir().unwrap();
    let Some(binary) = build(dir.path(), "c++", TEMPLATES, &["-O1"]) else {
        return;
    };
    let program = analyse(&binary, SplitMode::Leaders);
    let names: Vec<&str> = program.functions.iter().map(|f| f.name.as_str()).collect();
    for name in [
        "ns::Matrix<double, 3>::apply(int)",
        "std::vector<int, std::allocator<int> >::push_back(int const&)",
        // The demangler refuses its enable_if: the name is read alone, its parameters elided.
        "ns::Matrix<double, 3>::at<int>(…)",
    ] {
        assert!(names.contains(&name), "no {name} among {names:#?}");
    }
}
