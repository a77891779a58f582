//! `loopscope demo` end to end (about a minute), and its page in a browser: headless Chromium
//! loads the report from disk, the page's script runs without a console message, the DOM holds
//! the roofline, the loop tree and the mix, and a screenshot is not blank. Chromium is Debian's
//! `chromium` (`.ci/run` installs it); without it the browser part says it skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{loopscope, stderr, stdout};
use serde_json::Value;

fn perf_events_allowed() -> bool {
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let allowed = level.trim().parse::<i32>().is_ok_and(|l| l <= 2);
    if !allowed {
        eprintln!(
            "skipped: perf_event_paranoid is {} (the demo's record step needs 2 or less)",
            level.trim()
        );
    }
    allowed
}

fn have_cc() -> bool {
    let found = Command::new("cc").arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: no C compiler `cc`");
    }
    found
}

#[test]
fn the_demo_writes_one_report_with_every_section_and_a_browser_shows_it() {
    if !perf_events_allowed() || !have_cc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let run = loopscope(["demo", "--out", &out.display().to_string(), "--json"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let summary: Value = serde_json::from_str(&stdout(&run)).unwrap();
    check_summary(&summary);
    let report = PathBuf::from(summary["report"].as_str().unwrap());
    assert_eq!(report, out.canonicalize().unwrap().join("report.html"));
    let html = std::fs::read_to_string(&report).unwrap();
    check_page(&html);
    for file in [
        "machine.toml",
        "stencil.profile",
        "stencil-exact.profile",
        "stencil.firefox.json",
    ] {
        assert!(out.join(file).is_file(), "{file} written");
    }
    match chromium() {
        Some(browser) => check_in_browser(&browser, &report, dir.path()),
        None => eprintln!("skipped: the browser check (no chromium; apt-get install chromium)"),
    }
}

fn check_summary(s: &Value) {
    assert_eq!(s["failures"], serde_json::json!([]), "{s:#}");
    assert!(
        !s["caches"].as_array().unwrap().is_empty(),
        "caches measured"
    );
    let kernels = s["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 2, "{s:#}");
    for k in kernels {
        assert!(k["predicted_gflops"].as_f64().unwrap() > 0.0, "{k:#}");
        assert!(k["measured_gflops"].as_f64().unwrap() > 0.0, "{k:#}");
    }
    let misses = s["misses"].as_array().unwrap();
    let conflict = misses
        .iter()
        .find(|m| m["kernel"].as_str().unwrap().starts_with("stride-conflict"))
        .expect("the conflict kernel");
    assert!(conflict["conflict"].as_u64().unwrap() > 0, "{conflict:#}");
    // The stencil's hottest loop is its 19-point update, and the exact run counted its trips:
    // 129 - 2 interior points along k.
    let hot = &s["hot_loops"][0];
    assert!(
        hot["name"].as_str().unwrap().ends_with("in jacobi"),
        "{hot:#}"
    );
    assert!(hot["share"].as_f64().unwrap() > 0.5, "{hot:#}");
    assert_eq!(
        hot["trips"],
        serde_json::json!([127.0, 127.0, 127.0]),
        "{hot:#}"
    );
    assert!(!s["mix"].as_array().unwrap().is_empty());
}

fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no {id} section"));
    let end = html[start..].find("</section>").unwrap() + start;
    &html[start..end]
}

fn check_page(html: &str) {
    assert!(section(html, "roofline").contains("<svg"), "roofline plot");
    assert!(section(html, "probe").contains("<svg"), "probe curves");
    assert!(section(html, "probe").contains("knee"), "knees marked");
    assert!(section(html, "misses").contains("<td><code>a[i][j]</code></td>"));
    let profile = section(html, "profile");
    assert!(
        profile.contains("<details class=\"node function"),
        "collapsible tree"
    );
    assert!(profile.contains("stencil.c:"), "loops with their lines");
    assert!(profile.contains(" hot"), "hot nodes marked");
    assert!(section(html, "mix").contains("<svg"), "mix charts");
    assert!(section(html, "inputs").contains("loopscope roofline"));
    for external in [
        "<script src",
        "<link",
        "href=\"http",
        "src=",
        "@import",
        "url(",
    ] {
        assert!(!html.contains(external), "the page fetches {external}");
    }
}

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// Headless Chromium as root in a container: no sandbox, no GPU, nothing fetched in the
/// background, a fresh profile directory.
fn browse(browser: &str, scratch: &Path, args: &[String], page: &Path) -> Output {
    let profile = tempfile::tempdir_in(scratch).unwrap();
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

fn check_in_browser(browser: &str, report: &Path, scratch: &Path) {
    let dom = browse(browser, scratch, &["--dump-dom".into()], report);
    let log = stderr(&dom);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    assert!(!log.contains("Uncaught"), "{log}");
    let dom = stdout(&dom);
    assert!(dom.contains("data-ready=\"1\""), "the page's script ran");
    assert!(
        section(&dom, "roofline").contains("<svg"),
        "roofline in the DOM"
    );
    assert!(
        section(&dom, "profile").contains("<details class=\"node"),
        "loop tree in the DOM"
    );
    assert!(section(&dom, "mix").contains("<svg"), "mix in the DOM");
    let shot = scratch.join("report.png");
    let run = browse(
        browser,
        scratch,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,1600".into(),
        ],
        report,
    );
    assert!(shot.is_file(), "no screenshot: {}", stderr(&run));
    let (colours, dark) = pixel_census(&shot);
    assert!(colours > 50, "a near-blank screenshot: {colours} colours");
    assert!(dark > 1000, "no text or lines drawn: {dark} dark pixels");
}

/// Distinct colours and dark pixels (text, lines) of a PNG.
fn pixel_census(path: &Path) -> (usize, usize) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let mut colours = std::collections::HashSet::new();
    let mut dark = 0;
    for px in buf[..info.buffer_size()].chunks(channels) {
        let rgb = [px[0], px[1], px.get(2).copied().unwrap_or(px[0])];
        if rgb.iter().all(|&c| c < 100) {
            dark += 1;
        }
        colours.insert(rgb);
    }
    (colours.len(), dark)
}
