//! Rendering of loopscope's results for people: aligned text tables, quantities with units and
//! SVG plots (the roofline).
//!
//! Every subcommand's human-readable output is built here, so that tables look the same across
//! the tool. This room only turns values into text: it never measures, reads files, prints or
//! exits. JSON is not rendered here; the CLI serialises the result types directly, so their field
//! names are the contract.
//!
//! # Example
//!
//! ```
//! use loopscope_report::{format_bytes, Align, Table};
//!
//! let mut table = Table::new(["level", "size"]).align(1, Align::Right);
//! table.row(["L1d", &format_bytes(32 * 1024)]);
//! table.row(["L3", &format_bytes(37_486_592)]);
//! assert_eq!(table.render(), "level       size\nL1d       32 KiB\nL3     35.75 MiB\n");
//! ```
#![deny(missing_docs)]

mod firefox;
mod loops;
mod machine;
mod misses;
mod names;
mod mix;
mod probe;
mod roofline;
mod roofline_text;
mod simulation;
mod table;
mod units;

pub use firefox::{FirefoxInput, frame_label, render_firefox_profile};
pub use loops::{innermost_loop, render_blocks, render_loops};
pub use machine::render_machine;
pub use misses::render_misses;
pub use names::short_name;
pub use mix::{format_compact, format_count, render_mix, render_mix_rows, render_mix_summary};
pub use probe::{probe_plots, render_baseline, render_probe};
pub use roofline::{RooflineAxis, render_roofline_svg};
pub use roofline_text::{format_seconds, render_roofline, render_roofline_report};
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
