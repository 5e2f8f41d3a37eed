//! The front page's and the docs' figures are the snapshots' figures.
//! Every table README.md (outside the first sweep, whose tables the sweep
//! crate's own test runs) and the pages of `docs/` it sends readers to print
//! is a reviewed table in `snapshots/`. The scenario counts their prose
//! quotes are sums over those tables, and every other count of 100 or more
//! in `docs/our-sweeps.md` is a number of a snapshot. A re-blessed snapshot
//! with a moved number fails here until the page says the same.

use std::path::{Path, PathBuf};

/// The pages whose tables are checked: README.md from its second section on,
/// and these whole, each of which must print at least one table.
const PAGES: [&str; 2] = ["docs/our-sweeps.md", "docs/sweep-command.md"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README from its second `## ` heading on: the first sweep's section
/// comes first and is checked by `crates/sweep/tests/it/first_sweep.rs`.
fn readme_after_first_sweep() -> String {
    let text = read("README.md");
    let first = text
        .find("\n## A first sweep")
        .expect("README has `## A first sweep`");
    let next = text[first + 1..]
        .find("\n## ")
        .expect("a section after the first sweep");
    text[first + 1 + next..].to_string()
}

/// The tables (fenced blocks whose first line is a `+---` border).
fn tables(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("```") {
            match cur.take() {
                Some(block) if block.starts_with("+-") => out.push(block),
                Some(_) => {}
                None => cur = Some(String::new()),
            }
        } else if let Some(block) = &mut cur {
            block.push_str(line);
            block.push('\n');
        }
    }
    out
}

fn snapshots() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(root().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Each data row of a table as (variant, numbers).
fn rows(table: &str) -> Vec<(String, Vec<u64>)> {
    table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains("variant"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split("  ").map(str::trim).collect();
            let cells: Vec<&str> = cells.into_iter().filter(|c| !c.is_empty()).collect();
            let numbers = cells[1..].iter().map(|c| c.parse().unwrap()).collect();
            (cells[0].to_string(), numbers)
        })
        .collect()
}

/// `n` with thousands separated by commas, as the README writes it.
fn commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn assert_tables_are_snapshots(page: &str, text: &str, snaps: &[(String, String)]) -> usize {
    let found = tables(text);
    for table in &found {
        assert!(
            snaps.iter().any(|(_, s)| s.contains(table.trim_end())),
            "{page} prints a table no file in snapshots/ holds (re-blessed? copy the new one):\n{table}"
        );
    }
    found.len()
}

#[test]
fn every_readme_and_docs_table_is_a_reviewed_snapshot() {
    let snaps = snapshots();
    let n = assert_tables_are_snapshots("README.md", &readme_after_first_sweep(), &snaps);
    assert!(n >= 1, "no table found in README.md after its first sweep");
    for page in PAGES {
        let n = assert_tables_are_snapshots(page, &read(page), &snaps);
        assert!(n >= 1, "no table found in {page}");
    }
}

/// The five-design sweep's scenarios (every one but the clean runs: once +
/// twice) and the real loop's keyed scenarios, from their snapshots.
fn sums() -> (u64, u64) {
    let five: u64 = rows(&read("snapshots/sweep.txt"))
        .iter()
        .map(|(_, n)| n[0] + n[1])
        .sum();
    let keyed: u64 = rows(&read("snapshots/loop.txt"))
        .iter()
        .filter(|(v, _)| v.starts_with("loop keyed"))
        .map(|(_, n)| n[0] + n[1])
        .sum();
    assert!(keyed > 0, "no keyed rows in snapshots/loop.txt");
    (five, keyed)
}

#[test]
fn the_scenario_counts_are_sums_over_the_snapshots() {
    let (five, keyed) = sums();
    let phrase = format!("from {} scenarios actually run", commas(five));
    for page in ["README.md", "docs/our-sweeps.md"] {
        assert!(read(page).contains(&phrase), "{page} should say {phrase:?}");
    }
    let phrase = format!("in every one of its {} keyed scenarios", commas(keyed));
    assert!(
        read("docs/our-sweeps.md").contains(&phrase),
        "docs/our-sweeps.md should say {phrase:?}"
    );
}

/// The prose of a Markdown page: outside fenced blocks, tables and code
/// spans (a code span names a point, a flag or a file, not a count).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with('|') {
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                out.push_str(part);
            }
        }
        out.push('\n');
    }
    out
}

/// The counts in `text` of 100 or more, commas removed: digit runs (with
/// commas between groups of three) not touching a letter, `.`, `#` or `_`,
/// nor following a comma.
fn counts(text: &str) -> Vec<u64> {
    let chars: Vec<char> = text.chars().collect();
    let glued =
        |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '#' | '_'));
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && (glued(chars.get(i - 1)) || chars[i - 1] == ','))
        {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut digits = String::new();
        while j < chars.len() {
            if chars[j].is_ascii_digit() {
                digits.push(chars[j]);
                j += 1;
            } else if chars[j] == ','
                && chars
                    .get(j + 1..j + 4)
                    .is_some_and(|g| g.iter().all(char::is_ascii_digit))
                && !chars.get(j + 4).is_some_and(char::is_ascii_digit)
            {
                j += 1;
            } else {
                break;
            }
        }
        let decimal =
            chars.get(j) == Some(&'.') && chars.get(j + 1).is_some_and(char::is_ascii_digit);
        if !glued(chars.get(j)) || (chars.get(j) == Some(&'.') && !decimal) {
            let n: u64 = digits.parse().unwrap();
            if n >= 100 {
                out.push(n);
            }
        }
        i = j.max(i + 1);
    }
    out
}

#[test]
fn every_count_in_our_sweeps_is_a_snapshots_number() {
    let (five, keyed) = sums();
    let snaps: String = snapshots().into_iter().map(|(_, s)| s).collect();
    let numbers: Vec<u64> = counts(&snaps);
    let page = prose(&read("docs/our-sweeps.md"));
    let found = counts(&page);
    assert!(
        found.len() >= 5,
        "too few counts found in docs/our-sweeps.md: {found:?}"
    );
    for n in found {
        assert!(
            n == five || n == keyed || numbers.contains(&n),
            "docs/our-sweeps.md says {n}, which no snapshot holds (a moved count? say the new one)"
        );
    }
}

#[test]
fn counts_are_read_as_the_pages_write_them() {
    assert_eq!(
        counts("fails 1,862 of 1,892; 0/1057 and 655 wrong"),
        vec![1862, 1892, 1057, 655]
    );
    assert_eq!(counts("v4 2.5 s mid-save#300 a100 99 100."), vec![100]);
    assert_eq!(counts("1,00 and 12,3456"), Vec::<u64>::new());
    assert_eq!(
        prose("a `123` b\n```\n456\n```\n| 789 |\n321\n"),
        "a  b\n321\n"
    );
}

#[test]
fn commas_group_thousands() {
    assert_eq!(commas(7), "7");
    assert_eq!(commas(3715), "3,715");
    assert_eq!(commas(1_000_000), "1,000,000");
}
