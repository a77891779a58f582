//! The per-rank imbalance table of merged profiles (`report prof.*`): the hottest loops'
//! inclusive time in each rank, and how far the slowest rank is above the mean.

use loopscope_profile::RankMerge;

use crate::profile::source_text;
use crate::roofline_text::format_seconds;
use crate::table::{Align, Table};

/// Ranks shown one column each; with more, only the spread is shown.
const RANK_COLUMNS: usize = 8;

/// The imbalance table as text.
pub fn render_ranks(merge: &RankMerge) -> String {
    let each_rank = merge.ranks.len() <= RANK_COLUMNS;
    let mut header: Vec<String> = vec!["loop".into(), "source".into()];
    if each_rank {
        header.extend(merge.ranks.iter().cloned());
    }
    header.extend(
        ["min", "mean", "max", "max/mean", "slowest"]
            .iter()
            .map(|s| s.to_string()),
    );
    let columns = header.len();
    let mut table = Table::new(header);
    for c in 2..columns - 1 {
        table = table.align(c, Align::Right);
    }
    for l in &merge.imbalance {
        let source = source_text(l.file.as_deref(), l.line, &l.inlined).unwrap_or_default();
        let name = match &l.function {
            Some(f) => format!("{} in {f}", l.name),
            None => l.name.clone(),
        };
        let mut row = vec![name, source];
        if each_rank {
            row.extend(l.per_rank_s.iter().map(|&s| format_seconds(s)));
        }
        row.extend([
            format_seconds(l.min_s),
            format_seconds(l.mean_s),
            format_seconds(l.max_s),
            format!("{:.2}", 1.0 + l.imbalance),
            merge.ranks.get(l.slowest).cloned().unwrap_or_default(),
        ]);
        table.row(row);
    }
    format!(
        "ranks     {} ({} profiles merged)\n\n{}",
        merge.ranks.join(", "),
        merge.ranks.len(),
        table.render()
    )
}
