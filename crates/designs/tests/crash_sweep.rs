//! The five-design crash sweep of the book chapter, every scenario actually
//! run, compared with the reviewed table in `snapshots/sweep.txt`.
//!
//! A test target of its own, so `cargo test --test crash_sweep` from the
//! workspace root runs it (the other tests of this crate are in `it`).

use std::path::PathBuf;

use designs::{Design, Script, Storage};
use sweep::{Config, Report};

fn script() -> Script {
    Script::load(designs::default_script_path()).expect("the triage job loads")
}

fn sweep(design: Design) -> Report {
    sweep::run(
        &design.subject(&script(), Storage::Memory),
        &Config::default(),
    )
    .expect("sweep runs")
}

fn snapshot() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/sweep.txt")
}

fn cell(row: &sweep::report::Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title}"))
}

#[test]
fn five_designs_match_the_reviewed_table_and_the_book_chapter() {
    let reports: Vec<Report> = Design::ALL.iter().map(|d| sweep(*d)).collect();
    let rows: Vec<sweep::report::Row> = reports.iter().map(Report::row).collect();
    let table = sweep::table(&rows);
    print!("{table}");

    // The book chapter's table, every cell: variant, once, twice, with dups, dups,
    // missing, asks, calls+.
    let chapter: [(&str, [u64; 7]); 5] = [
        ("save once per turn", [18, 225, 164, 294, 0, 0, 338]),
        ("save after the reply", [34, 654, 306, 360, 0, 0, 234]),
        ("+ idempotency keys", [34, 654, 0, 0, 0, 0, 234]),
        ("+ attempt markers, no keys", [43, 996, 0, 0, 0, 669, 288]),
        ("keys and markers", [43, 1014, 0, 0, 0, 0, 288]),
    ];
    for (row, (name, want)) in rows.iter().zip(chapter) {
        let got = [
            row.depth_counts[0],
            row.depth_counts[1],
            cell(row, "with dups"),
            cell(row, "dups"),
            cell(row, "missing"),
            cell(row, "asks"),
            cell(row, "calls+"),
        ];
        assert_eq!((row.variant.as_str(), got), (name, want));
    }
    if let Err(diff) = sweep::report::snapshot::check(&snapshot(), &table) {
        panic!("{diff}");
    }
}
