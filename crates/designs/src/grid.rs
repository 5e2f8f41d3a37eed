//! A plain-text grid, for the tables that are not rows of a sweep.

/// A plain-text grid in the style of [`sweep::table`]: a header, then rows;
/// the first column left-aligned, the others right-aligned.
pub fn grid(header: &[String], rows: &[Vec<String>]) -> String {
    let ncols = header.len();
    let mut width = vec![0usize; ncols];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate().take(ncols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let cells: Vec<String> = (0..ncols)
            .map(|i| {
                let c = r.get(i).map_or("", String::as_str);
                let pad = " ".repeat(width[i] - c.chars().count());
                if i == 0 {
                    format!("{c}{pad}")
                } else {
                    format!("{pad}{c}")
                }
            })
            .collect();
        format!("| {} |\n", cells.join("   "))
    };
    let inner = width.iter().sum::<usize>() + 3 * ncols.saturating_sub(1) + 2;
    let mut out = format!("+{}+\n", "-".repeat(inner));
    out.push_str(&line(header));
    out.push_str(&format!("+{}+\n", "=".repeat(inner)));
    for r in rows {
        out.push_str(&line(r));
    }
    out.push_str(&format!("+{}+\n", "-".repeat(inner)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Column widths come from the widest cell (in characters, not bytes);
    /// the first column is left-aligned, the rest right-aligned; a short
    /// row is padded with empty cells and a long one cut to the header.
    #[test]
    fn a_grid_aligns_its_columns() {
        let g = grid(
            &strings(&["design", "n"]),
            &[
                strings(&["keys", "12"]),
                strings(&["é", "3", "dropped"]),
                strings(&["x"]),
            ],
        );
        let want = "\
+-------------+
| design    n |
+=============+
| keys     12 |
| é         3 |
| x           |
+-------------+
";
        assert_eq!(g, want, "\n{g}");
    }
}
