//! The table: the one renderer of every table the workspace prints — a
//! report's [`Row`]s, or any header and rows of cells ([`Table`]) — as
//! plain text or Markdown, the same byte for byte on every terminal.

use comfy_table::{presets, CellAlignment, ContentArrangement};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// One row of a sweep table: the scenario counts per depth, then each
/// counter's columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The subject's name.
    pub variant: String,
    /// Scenarios with 1, 2, … crashes (`once`, `twice`, …).
    pub depth_counts: Vec<u64>,
    /// (column title, value), in table order.
    pub cells: Vec<(String, u64)>,
    /// Scenarios that failed (not shown in the table).
    pub failed: u64,
    /// Scenarios that were flaky: failed, then gave another result when run
    /// again. A table shows a `flaky` column only when a row has one.
    pub flaky: u64,
    /// Scenarios whose crash never fired: the program did not reach their
    /// hit (a program whose hits vary from run to run). A table shows a
    /// `not fired` column only when a row has one.
    pub unfired: u64,
}

/// The title of the column counting scenarios with `depth` crashes.
pub fn depth_title(depth: usize) -> String {
    match depth {
        1 => "once".into(),
        2 => "twice".into(),
        3 => "thrice".into(),
        k => format!("{k} times"),
    }
}

fn json_key(title: &str) -> String {
    title
        .replace('+', "_plus")
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
}

impl Row {
    /// The value of the column titled `title` (a counter's total or its
    /// "scenarios with" column).
    pub fn cell(&self, title: &str) -> Option<u64> {
        self.cells.iter().find(|(t, _)| t == title).map(|(_, n)| *n)
    }

    fn headers(&self, (flaky, unfired): (bool, bool)) -> Vec<String> {
        let mut h = vec!["variant".to_owned()];
        h.extend((1..=self.depth_counts.len()).map(depth_title));
        h.extend(self.cells.iter().map(|(t, _)| t.clone()));
        if flaky {
            h.push("flaky".to_owned());
        }
        if unfired {
            h.push("not fired".to_owned());
        }
        h
    }
    fn values(&self, (flaky, unfired): (bool, bool)) -> Vec<String> {
        let mut v = vec![self.variant.clone()];
        v.extend(self.depth_counts.iter().map(u64::to_string));
        v.extend(self.cells.iter().map(|(_, n)| n.to_string()));
        if flaky {
            v.push(self.flaky.to_string());
        }
        if unfired {
            v.push(self.unfired.to_string());
        }
        v
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("variant", &self.variant)?;
        for (i, n) in self.depth_counts.iter().enumerate() {
            m.serialize_entry(&depth_title(i + 1), n)?;
        }
        for (t, n) in &self.cells {
            m.serialize_entry(&json_key(t), n)?;
        }
        if self.flaky > 0 {
            m.serialize_entry("flaky", &self.flaky)?;
        }
        if self.unfired > 0 {
            m.serialize_entry("not_fired", &self.unfired)?;
        }
        m.end()
    }
}

/// A table of any cells, drawn as a sweep's table is: a header, then rows;
/// names and text left-aligned (the first column, or the columns given to
/// [`left`](Table::left)), counts right-aligned; as plain text
/// ([`Table::text`], as [`table`](crate::table) draws a report's rows) or
/// Markdown ([`Table::markdown`]), the same whatever the terminal's width.
///
/// ```
/// use sweep::report::Table;
///
/// let mut t = Table::new(["tracker", "scenarios", "dups"]);
/// t.row(["keyed", "41", "0"]).row(["keyless", "41", "3"]);
/// assert_eq!(
///     t.markdown(),
///     "| tracker | scenarios | dups |\n\
///      |---------|-----------|------|\n\
///      | keyed   |        41 |    0 |\n\
///      | keyless |        41 |    3 |\n"
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl Table {
    /// A table with these column titles and no rows; its first column is
    /// left-aligned, the others right-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            left: vec![0],
        }
    }

    /// Left-align these columns (0-based: names and text), right-align the
    /// others (counts).
    pub fn left(mut self, columns: impl IntoIterator<Item = usize>) -> Table {
        self.left = columns.into_iter().collect();
        self
    }

    /// Add a row: a row shorter than the header gets empty cells, one
    /// longer is cut to the header's width.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
        self
    }

    /// As plain text, bordered like a sweep's table.
    pub fn text(&self) -> String {
        self.render(presets::ASCII_BORDERS_ONLY_CONDENSED)
    }

    /// As a Markdown table.
    pub fn markdown(&self) -> String {
        self.render(presets::ASCII_MARKDOWN)
    }

    fn render(&self, preset: &str) -> String {
        let mut t = comfy_table::Table::new();
        t.load_preset(preset)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_width(200);
        if !self.header.is_empty() {
            t.set_header(&self.header);
        }
        for r in &self.rows {
            t.add_row(r);
        }
        for i in (0..self.header.len()).filter(|i| !self.left.contains(i)) {
            if let Some(col) = t.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        let mut s = t.to_string();
        s.push('\n');
        s
    }
}

fn build(rows: &[Row]) -> Table {
    let shown = (
        rows.iter().any(|r| r.flaky > 0),
        rows.iter().any(|r| r.unfired > 0),
    );
    let mut t = Table::new(rows.first().map(|r| r.headers(shown)).unwrap_or_default());
    for r in rows {
        t.row(r.values(shown));
    }
    t
}

/// Rows as a plain-text table, independent of the terminal's width.
pub fn table(rows: &[Row]) -> String {
    build(rows).text()
}

/// Rows as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    build(rows).markdown()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: &str, flaky: u64) -> Row {
        Row {
            variant: variant.into(),
            depth_counts: vec![3, 12],
            cells: vec![("with dups".into(), 1), ("dups+".into(), 2)],
            failed: 1,
            flaky,
            unfired: 0,
        }
    }

    #[test]
    fn a_cell_is_found_by_its_title() {
        let r = row("keys", 0);
        assert_eq!(r.cell("dups+"), Some(2));
        assert_eq!(r.cell("with dups"), Some(1));
        assert_eq!(r.cell("dups"), None);
    }

    #[test]
    fn depth_titles_read_as_words_then_numbers() {
        let titles: Vec<String> = (1..=4).map(depth_title).collect();
        assert_eq!(titles, ["once", "twice", "thrice", "4 times"]);
    }

    #[test]
    fn tables_have_a_header_and_a_row_each_right_aligned() {
        let rows = [row("keys", 0), row("no keys at all", 0)];
        assert_eq!(
            table(&rows),
            "+---------------------------------------------------+\n\
             | variant          once   twice   with dups   dups+ |\n\
             +===================================================+\n\
             | keys                3      12           1       2 |\n\
             | no keys at all      3      12           1       2 |\n\
             +---------------------------------------------------+\n"
        );
        assert_eq!(
            markdown(&rows),
            "| variant        | once | twice | with dups | dups+ |\n\
             |----------------|------|-------|-----------|-------|\n\
             | keys           |    3 |    12 |         1 |     2 |\n\
             | no keys at all |    3 |    12 |         1 |     2 |\n"
        );
    }

    #[test]
    fn a_flaky_column_appears_when_a_row_has_flaky_scenarios() {
        let rows = [row("keys", 0), row("markers", 2)];
        assert_eq!(
            table(&rows),
            "+----------------------------------------------------+\n\
             | variant   once   twice   with dups   dups+   flaky |\n\
             +====================================================+\n\
             | keys         3      12           1       2       0 |\n\
             | markers      3      12           1       2       2 |\n\
             +----------------------------------------------------+\n"
        );
    }

    #[test]
    fn a_not_fired_column_appears_when_a_row_has_crashes_that_never_fired() {
        let mut unfired = row("writer", 0);
        unfired.unfired = 1;
        let rows = [row("keys", 0), unfired];
        assert_eq!(
            table(&rows),
            "+--------------------------------------------------------+\n\
             | variant   once   twice   with dups   dups+   not fired |\n\
             +========================================================+\n\
             | keys         3      12           1       2           0 |\n\
             | writer       3      12           1       2           1 |\n\
             +--------------------------------------------------------+\n"
        );
        let j = serde_json::to_string(&rows[1]).unwrap();
        assert!(j.ends_with(r#""dups_plus":2,"not_fired":1}"#), "{j}");
    }

    /// Column widths come from the widest cell (in characters, not bytes);
    /// the first column is left-aligned, the rest right-aligned; a short
    /// row is padded with empty cells and a long one cut to the header.
    #[test]
    fn a_table_of_any_cells_aligns_its_columns() {
        let mut t = Table::new(["design", "n"]);
        t.row(["keys", "12"]).row(["é", "3", "dropped"]).row(["x"]);
        let want = "\
+-------------+
| design    n |
+=============+
| keys     12 |
| é         3 |
| x           |
+-------------+
";
        assert_eq!(t.text(), want, "\n{}", t.text());
        let mut named = Table::new(["who", "n", "what"]).left([0, 2]);
        named.row(["a", "1", "b"]).row(["cc", "22", "dddd"]);
        assert_eq!(
            named.markdown(),
            "| who |  n | what |\n\
             |-----|----|------|\n\
             | a   |  1 | b    |\n\
             | cc  | 22 | dddd |\n"
        );
    }

    #[test]
    fn a_row_in_json_has_word_keys() {
        let j = serde_json::to_string(&row("keys", 0)).unwrap();
        assert_eq!(
            j,
            r#"{"variant":"keys","once":3,"twice":12,"with_dups":1,"dups_plus":2}"#
        );
        let j = serde_json::to_string(&row("keys", 2)).unwrap();
        assert_eq!(
            j,
            r#"{"variant":"keys","once":3,"twice":12,"with_dups":1,"dups_plus":2,"flaky":2}"#
        );
    }
}
