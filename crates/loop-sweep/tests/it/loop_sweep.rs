//! The loop's own crash sweep: the real loop, every crash
//! point, single and double, six variants, compared with the reviewed table
//! in `snapshots/loop.txt`.

use std::path::PathBuf;

use sweep::{report::Row, Config, Report};

fn snapshot() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/loop.txt")
}

fn cell(row: &Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title} in {row:?}"))
}

#[test]
fn every_variant_keeps_its_shape_and_matches_the_reviewed_table() {
    let subjects = loop_sweep::subjects(None).expect("the loop's sweep job loads");
    let reports: Vec<Report> = subjects
        .iter()
        .map(|s| sweep::run(s, &Config::default()).expect("sweep runs"))
        .collect();
    let rows: Vec<Row> = reports.iter().map(Report::row).collect();
    let table = sweep::table(&rows);
    print!("{table}");

    for (subject, report) in subjects.iter().zip(&reports) {
        let v = subject.variant();
        let failed: Vec<String> = report
            .failures()
            .take(5)
            .map(|s| {
                format!(
                    "{}: {}",
                    s.scenario,
                    s.failure
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                )
            })
            .collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", v.title());
        assert!(!report.scenarios.is_empty());
        for s in &report.scenarios {
            for counter in ["dups", "missing", "gate"] {
                assert_eq!(
                    report.value(s, counter),
                    0,
                    "{}: {} {counter}",
                    v.title(),
                    s.scenario
                );
            }
            if v.keyed {
                assert_eq!(
                    report.value(s, "asks"),
                    0,
                    "{}: {} asks",
                    v.title(),
                    s.scenario
                );
            }
        }
        let row = report.row();
        if !v.keyed {
            assert!(
                cell(&row, "asks") > 0,
                "{}: a keyless loop must ask",
                v.title()
            );
        }
        assert_eq!(cell(&row, "with dups"), 0);
    }

    if let Err(diff) = sweep::report::snapshot::check(&snapshot(), &table) {
        panic!("{diff}");
    }
}
