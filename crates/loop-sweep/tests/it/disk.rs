//! The disk table (`loop_sweep::disk`), every scenario run, compared
//! byte for byte with the reviewed snapshot `snapshots/disk.txt`
//! (`CRASHSWEEP_BLESS=1` rewrites it). Also runnable as
//! `cargo xtask sweep --disk`.

use std::path::PathBuf;

#[test]
fn the_disk_table_matches_its_reviewed_snapshot() {
    let table = loop_sweep::disk::render().expect("the disk table runs");
    // What the table must show, whatever the snapshot says: the real writer
    // never fails, each mutant does, and no fault scenario breaks.
    for line in table.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() == 12 && cells[2] != "writer" {
            let failing: u64 = cells[9].parse().expect("a count");
            if cells[2] == "real writer" {
                assert_eq!(failing, 0, "{line}");
            } else {
                assert!(failing > 0, "{line}");
                assert!(cells[10].starts_with("enumerated: "), "{line}");
            }
        }
        if cells.len() == 11 && cells[2] != "calls" {
            // Every fault stops a life with an error naming the file; at
            // depth 2 some restarts stop again; nothing breaks.
            assert_eq!(cells[5], cells[2], "{line}");
            if cells[3] == "2" {
                assert_ne!(cells[6], "0", "{line}");
            }
            assert_eq!(cells[8], "0", "{line}");
        }
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/disk.txt");
    sweep::report::snapshot::check(&path, &table).unwrap_or_else(|e| panic!("{e}"));
}
