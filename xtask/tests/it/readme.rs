//! The README's figures are the snapshots' figures: every table it prints
//! (outside the first sweep, whose tables the sweep crate's own test runs)
//! is a reviewed table in `snapshots/`, and the scenario counts its prose
//! quotes are sums over those tables. A re-blessed snapshot with a moved
//! number fails here until the README says the same.

use std::path::{Path, PathBuf};

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

#[test]
fn every_readme_table_is_a_reviewed_snapshot() {
    let snaps = snapshots();
    let readme = readme_after_first_sweep();
    let found = tables(&readme);
    assert!(
        found.len() >= 3,
        "too few tables found in README.md: {found:?}"
    );
    for table in found {
        assert!(
            snaps.iter().any(|(_, s)| s.contains(table.trim_end())),
            "README.md prints a table no file in snapshots/ holds (re-blessed? copy the new one):\n{table}"
        );
    }
}

#[test]
fn the_readme_scenario_counts_are_sums_over_the_snapshots() {
    let readme = read("README.md");
    // Five designs: every scenario but the clean runs (once + twice).
    let five: u64 = rows(&read("snapshots/sweep.txt"))
        .iter()
        .map(|(_, n)| n[0] + n[1])
        .sum();
    let phrase = format!("from {} scenarios actually run", commas(five));
    assert!(readme.contains(&phrase), "README.md should say {phrase:?}");
    // The real loop: its keyed rows.
    let loop_table = read("snapshots/loop.txt");
    let keyed: u64 = rows(&loop_table)
        .iter()
        .filter(|(v, _)| v.starts_with("loop keyed"))
        .map(|(_, n)| n[0] + n[1])
        .sum();
    assert!(keyed > 0, "no keyed rows in snapshots/loop.txt");
    let phrase = format!("in every one of its {} keyed scenarios", commas(keyed));
    assert!(readme.contains(&phrase), "README.md should say {phrase:?}");
}

#[test]
fn commas_group_thousands() {
    assert_eq!(commas(7), "7");
    assert_eq!(commas(3715), "3,715");
    assert_eq!(commas(1_000_000), "1,000,000");
}
