//! Rendering of loopscope's results for people: aligned text tables, quantities with units, SVG
//! plots (the roofline, the probe's curves, the instruction mix), one self-contained HTML report
//! ([`render_html`]) and the Firefox Profiler's format ([`render_firefox_profile`]).
//!
//! Every subcommand's human-readable output is built here, so that tables look the same across
//! the tool. A table fits the width it is given ([`TextLayout`]: a terminal's, which the caller
//! finds) by cutting its text columns, never its numbers, and shortens the function names in
//! its name columns as profilers do ([`short_name`]: `std::sort<…>(…)`) unless asked for whole
//! names. This room only turns values into text: it never measures, reads files or the
//! environment, prints or exits. JSON is not rendered here; the CLI serialises the result types
//! directly, so their field names are the contract. The HTML page places the same SVG
//! documents the `--plot` flags write; it never draws a second version of them.
//!
//! # Example
//!
//! ```
//! use loopscope_report::{format_bytes, Align, Table, TextLayout};
//!
//! let mut table = Table::new(["level", "size"]).align(1, Align::Right);
//! table.row(["L1d", &format_bytes(32 * 1024)]);
//! table.row(["L3", &format_bytes(37_486_592)]);
//! assert_eq!(table.render(), "level       size\nL1d       32 KiB\nL3     35.75 MiB\n");
//!
//! let mut loops = Table::new(["loop", "function"]).names(1);
//! loops.row(["1", "void std::sort<int*>(int*, int*)"]);
//! let piped = TextLayout { width: None, full_names: false };
//! assert_eq!(loops.render_with(&piped), "loop  function\n1     std::sort<…>(…)\n");
//! let narrow = TextLayout { width: Some(16), full_names: false };
//! assert_eq!(loops.render_with(&narrow), "loop  function\n1     std::sort\n");
//! ```
#![deny(missing_docs)]

mod firefox;
mod html;
mod loops;
mod machine;
mod misses;
mod mix;
mod mix_plot;
mod names;
mod probe;
mod profile;
mod ranks;
mod roofline;
mod roofline_text;
mod shell;
mod simulation;
mod table;
mod units;

pub use firefox::{FirefoxInput, frame_label, render_firefox_profile};
pub use html::{Figure, HtmlReport, escape_html, render_html, render_tree};
pub use loops::{innermost_loop, render_blocks, render_loops};
pub use machine::render_machine;
pub use misses::render_misses;
pub use mix::{format_compact, format_count, render_mix, render_mix_rows, render_mix_summary};
pub use mix_plot::mix_plots;
pub use names::short_name;
pub use probe::{probe_plots, render_baseline, render_probe};
pub use profile::{
    NodeFilter, render_profile_by_loop, render_profile_dot, render_profile_header,
    render_profile_tree, source_text,
};
pub use ranks::render_ranks;
pub use roofline::{RooflineAxis, render_roofline_svg};
pub use roofline_text::{format_seconds, render_roofline, render_roofline_report};
pub use shell::{shell_word, shell_words};
pub use simulation::{SimulationView, render_simulation};

/// A plot could not be drawn (a plotting-library failure, not bad input).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {plot}: {message}")]
pub struct PlotError {
    /// File name of the plot.
    pub plot: String,
    /// What plotters said.
    pub message: String,
}
pub use table::{Align, Table, TextLayout};
pub use units::{format_bytes, format_hz};
