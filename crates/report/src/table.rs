//! Aligned text tables, fitted to a width when one is given: columns of names shortened
//! ([`short_name`]) and text columns cut at the front (`…insertion_sort<…>(…)`, `…algo.h:1786`:
//! a name's last part and a line number say most) until the rows fit.

use crate::names::short_name;

/// How text output is laid out: the width to fit (a terminal's; `None` for no limit, as when
/// writing to a pipe) and whether names are shown whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextLayout {
    /// Columns of the terminal, when output goes to one.
    pub width: Option<usize>,
    /// Function names as the binary has them, not shortened.
    pub full_names: bool,
}

/// What a column holds, for fitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// Kept whole (numbers, short codes).
    Fixed,
    /// Text that may be cut at the front to fit.
    Shrink,
    /// Function names: shortened unless full names are asked for, then cut like text.
    Name,
}

/// Text columns are not cut narrower than this (or their header).
const MIN_SHRUNK_WIDTH: usize = 4;
/// When the rows cannot fit however text is cut, text columns are cut to this, which still
/// reads, and the rows run over.
const READABLE_WIDTH: usize = 16;

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Flush left (text).
    Left,
    /// Flush right (numbers).
    Right,
}

/// A text table: a header row, then rows, columns separated by at least two spaces.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    fit: Vec<Fit>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers, every column flush left.
    pub fn new<I, S>(header: I) -> Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let align = vec![Align::Left; header.len()];
        let fit = vec![Fit::Fixed; header.len()];
        Table {
            header,
            align,
            fit,
            rows: Vec::new(),
        }
    }

    /// Marks column `column` as text that may be cut at the front to fit a width.
    pub fn shrinkable(mut self, column: usize) -> Table {
        if let Some(slot) = self.fit.get_mut(column) {
            *slot = Fit::Shrink;
        }
        self
    }

    /// Marks column `column` as function names: shortened ([`short_name`]) unless the layout
    /// asks for full names, and cut at the front to fit a width.
    pub fn names(mut self, column: usize) -> Table {
        if let Some(slot) = self.fit.get_mut(column) {
            *slot = Fit::Name;
        }
        self
    }

    /// Sets the alignment of column `column` (0-based); other columns keep theirs.
    pub fn align(mut self, column: usize, align: Align) -> Table {
        if let Some(slot) = self.align.get_mut(column) {
            *slot = align;
        }
        self
    }

    /// Appends a row; missing cells are blank and extra cells are dropped.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut row: Vec<String> = cells
            .into_iter()
            .take(self.header.len())
            .map(|c| c.as_ref().to_owned())
            .collect();
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, each ending in a newline, no trailing blanks.
    pub fn render(&self) -> String {
        self.render_with(&TextLayout {
            width: None,
            full_names: true,
        })
    }

    /// The table as text laid out as `layout` says: names shortened unless full names are asked
    /// for, and with a width, text columns cut at the front until the rows fit (numbers are
    /// never cut; a table whose fixed columns alone are too wide stays too wide).
    pub fn render_with(&self, layout: &TextLayout) -> String {
        let rows: Vec<Vec<String>> = std::iter::once(&self.header)
            .chain(&self.rows)
            .enumerate()
            .map(|(r, row)| {
                row.iter()
                    .zip(&self.fit)
                    .map(|(cell, fit)| match fit {
                        Fit::Name if r > 0 && !layout.full_names => short_name(cell),
                        _ => cell.clone(),
                    })
                    .collect()
            })
            .collect();
        let natural: Vec<usize> = (0..self.header.len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let widths = match layout.width {
            Some(width) => self.fitted_widths(&natural, width),
            None => natural,
        };
        let mut out = String::new();
        for row in &rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                let cell = match self.fit[c] {
                    Fit::Name => cut_name(cell, widths[c]),
                    _ => cut_front(cell, widths[c]),
                };
                let pad = widths[c].saturating_sub(cell.chars().count());
                match self.align[c] {
                    Align::Left => {
                        line.push_str(&cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(&cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Column widths that fit `width`: the widest text columns narrowed to one cap, the
    /// largest that fits, and what is left over shared among them.
    fn fitted_widths(&self, natural: &[usize], width: usize) -> Vec<usize> {
        let gaps = 2 * natural.len().saturating_sub(1);
        if natural.iter().sum::<usize>() + gaps <= width {
            return natural.to_vec();
        }
        let least: Vec<usize> = (0..natural.len())
            .map(|c| match self.fit[c] {
                Fit::Fixed => natural[c],
                _ => natural[c].min(self.header[c].chars().count().max(MIN_SHRUNK_WIDTH)),
            })
            .collect();
        let capped = |cap: usize| -> Vec<usize> {
            (0..natural.len())
                .map(|c| match self.fit[c] {
                    Fit::Fixed => natural[c],
                    _ => natural[c].min(cap.max(least[c])),
                })
                .collect()
        };
        let total = |w: &[usize]| w.iter().sum::<usize>() + gaps;
        if total(&capped(0)) > width {
            return capped(READABLE_WIDTH);
        }
        // The largest cap whose widths fit.
        let (mut lo, mut hi) = (0, natural.iter().copied().max().unwrap_or(0));
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if total(&capped(mid)) <= width {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut widths = capped(lo);
        let mut spare = width.saturating_sub(total(&widths));
        for c in 0..widths.len() {
            if spare == 0 {
                break;
            }
            if self.fit[c] != Fit::Fixed && widths[c] < natural[c] {
                widths[c] += 1;
                spare -= 1;
            }
        }
        widths
    }
}

/// A function's name as `layout` shows it: shortened unless full names are asked for, and cut
/// at the front to `room` characters when given.
pub(crate) fn fit_name(name: &str, layout: &TextLayout, room: Option<usize>) -> String {
    let name = if layout.full_names {
        name.to_owned()
    } else {
        short_name(name)
    };
    match room {
        Some(room) => cut_front(&name, room.max(MIN_SHRUNK_WIDTH)),
        None => name,
    }
}

/// A name cut to `width` characters: first its trailing parts that say least (a clone suffix,
/// ` const`, elided parameters, elided template arguments), then its front.
fn cut_name(name: &str, width: usize) -> String {
    let mut name = name;
    while name.chars().count() > width {
        let shorter = if let Some(i) = name.rfind(" [clone ").filter(|_| name.ends_with(']')) {
            &name[..i]
        } else if let Some(rest) = [" const", "(…)", "()", "<…>"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            // `operator()` and `operator<` are the name itself.
            .filter(|rest| !rest.ends_with("operator"))
        {
            rest
        } else {
            break;
        };
        if shorter.is_empty() {
            break;
        }
        name = shorter;
    }
    cut_front(name, width)
}

/// `text` cut to `width` characters by replacing its front with `…`.
fn cut_front(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let kept = &chars[chars.len() - (width - 1)..];
    // A cut inside an elision (`<…>`) needs no second ellipsis.
    let kept = kept.strip_prefix(&['…']).unwrap_or(kept);
    let mut out = String::from('…');
    out.extend(kept);
    out
}

/// A table whose columns from `first_numeric` on are flush right.
pub(crate) fn right_aligned(header: &[&str], first_numeric: usize) -> Table {
    let mut table = Table::new(header.iter().copied());
    for c in first_numeric..header.len() {
        table = table.align(c, Align::Right);
    }
    table
}

/// `part` as a percentage of `whole` with two decimals, `-` when `whole` is 0.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", 100.0 * part as f64 / whole as f64)
    }
}

/// A count, or `missing` when there is none.
pub(crate) fn optional(v: Option<u64>, missing: &str) -> String {
    v.map_or_else(|| missing.to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_rows_are_padded_and_clipped() {
        let mut t = Table::new(["a", "b"]);
        t.row(["1"]);
        t.row(["22", "3", "dropped"]);
        assert_eq!(t.render(), "a   b\n1\n22  3\n");
    }

    fn wide_table() -> Table {
        let mut t = Table::new(["id", "name", "source", "count"])
            .names(1)
            .shrinkable(2)
            .align(3, Align::Right);
        t.row([
            "1",
            "void std::sort<__gnu_cxx::__normal_iterator<double*, std::vector<double> > >(double*, double*)",
            "/usr/include/c++/12/bits/stl_algo.h:1950",
            "12345",
        ]);
        t.row(["2", "main", "prog.cpp:7", "3"]);
        t
    }

    #[test]
    fn names_are_shortened_unless_asked_whole() {
        let t = wide_table();
        let short = t.render_with(&TextLayout::default());
        assert!(short.contains("std::sort<…>(…)"), "{short}");
        assert!(!short.contains("void "), "{short}");
        let full = t.render_with(&TextLayout {
            full_names: true,
            ..TextLayout::default()
        });
        assert!(full.contains("void std::sort<__gnu_cxx::"), "{full}");
        // Without a layout the table is as given, as before names were shortened.
        assert_eq!(t.render(), full);
    }

    #[test]
    fn rows_fit_the_width_by_cutting_text_at_the_front() {
        let t = wide_table();
        for width in [40, 50, 60] {
            let text = t.render_with(&TextLayout {
                width: Some(width),
                full_names: true,
            });
            for line in text.lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}\n{text}");
            }
            // Numbers are never cut; cut text keeps its end.
            assert!(text.contains("12345"), "{text}");
            assert!(text.contains('…'), "{text}");
            assert!(text.lines().nth(1).unwrap().contains(":1950"), "{text}");
        }
        // Wide enough: nothing is cut.
        let roomy = t.render_with(&TextLayout {
            width: Some(500),
            full_names: true,
        });
        assert_eq!(roomy, t.render());
    }

    #[test]
    fn fixed_columns_too_wide_stay_whole() {
        let mut t = Table::new(["a", "b"]).shrinkable(1);
        t.row(["x".repeat(30), "y".repeat(30)]);
        let text = t.render_with(&TextLayout {
            width: Some(20),
            full_names: false,
        });
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with(&"x".repeat(30)), "{text}");
        // Cut to a width that still reads, and the row runs over.
        assert_eq!(
            row,
            format!("{}  …{}", "x".repeat(30), "y".repeat(READABLE_WIDTH - 1))
        );
    }

    #[test]
    fn cutting_keeps_the_end() {
        assert_eq!(cut_front("abcdefghij", 5), "…ghij");
        assert_eq!(cut_front("abc", 5), "abc");
        assert_eq!(cut_front("abcdef", 1), "…");
        assert_eq!(cut_front("abcdef", 0), "");
        let name = "std::__unguarded_linear_insert<…>(…) const [clone .isra.0]";
        assert_eq!(cut_name(name, 60), name);
        assert_eq!(cut_name(name, 40), "std::__unguarded_linear_insert<…>(…)");
        assert_eq!(cut_name(name, 32), "std::__unguarded_linear_insert");
        assert_eq!(cut_name(name, 20), "…arded_linear_insert");
        assert_eq!(cut_name("<…>", 2), "…>");
        assert_eq!(cut_name("A::operator()(…) const", 13), "A::operator()");
        assert_eq!(cut_name("Accumulator<…>::scale(…)", 10), "…>::scale");
    }
}
