//! The table: a report's [`Row`], rendered as plain text or Markdown, the
//! same byte for byte on every terminal.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
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

    fn headers(&self, flaky: bool) -> Vec<String> {
        let mut h = vec!["variant".to_owned()];
        h.extend((1..=self.depth_counts.len()).map(depth_title));
        h.extend(self.cells.iter().map(|(t, _)| t.clone()));
        if flaky {
            h.push("flaky".to_owned());
        }
        h
    }
    fn values(&self, flaky: bool) -> Vec<String> {
        let mut v = vec![self.variant.clone()];
        v.extend(self.depth_counts.iter().map(u64::to_string));
        v.extend(self.cells.iter().map(|(_, n)| n.to_string()));
        if flaky {
            v.push(self.flaky.to_string());
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
        m.end()
    }
}

fn build(rows: &[Row], preset: &str) -> Table {
    let mut t = Table::new();
    t.load_preset(preset)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_width(200);
    let flaky = rows.iter().any(|r| r.flaky > 0);
    if let Some(first) = rows.first() {
        t.set_header(first.headers(flaky));
    }
    for r in rows {
        t.add_row(r.values(flaky));
    }
    let ncols = rows.first().map_or(0, |r| r.headers(flaky).len());
    for i in 1..ncols {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// Rows as a plain-text table, independent of the terminal's width.
pub fn table(rows: &[Row]) -> String {
    let mut s = build(rows, presets::ASCII_BORDERS_ONLY_CONDENSED).to_string();
    s.push('\n');
    s
}

/// Rows as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = build(rows, presets::ASCII_MARKDOWN).to_string();
    s.push('\n');
    s
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
