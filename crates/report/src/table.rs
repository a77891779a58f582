//! Aligned text tables.

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
        Table {
            header,
            align,
            rows: Vec::new(),
        }
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
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = widths[c] - cell.chars().count();
                match self.align[c] {
                    Align::Left => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
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
}
