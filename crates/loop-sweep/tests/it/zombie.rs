//! The zombie table (`loop_sweep::zombie`), every scenario run, compared
//! byte for byte with the reviewed snapshot `snapshots/zombie.txt`
//! (`CRASHSWEEP_BLESS=1` rewrites it).

use std::path::PathBuf;

use loop_sweep::zombie::{sweep_case, ZombieCase};

/// What the table must show, whatever the snapshot says: without the
/// epoch a keyless zombie duplicates; with it nothing does, in either
/// tracker; nothing is ever missing and every scenario ends a known way.
#[test]
fn the_epoch_stops_the_keyless_zombie_and_nothing_else_duplicates() {
    let keyless_blind = sweep_case(ZombieCase {
        keyed: false,
        epoch: false,
    })
    .unwrap();
    assert!(keyless_blind.dups > 0, "{keyless_blind:?}");
    for keyed in [false, true] {
        let r = sweep_case(ZombieCase { keyed, epoch: true }).unwrap();
        assert_eq!(r.dups, 0, "keyed {keyed}: {r:?}");
        assert!(
            r.stale > 0,
            "keyed {keyed}: a stale call was refused: {r:?}"
        );
    }
    let keyed_blind = sweep_case(ZombieCase {
        keyed: true,
        epoch: false,
    })
    .unwrap();
    assert_eq!(keyed_blind.dups, 0, "{keyed_blind:?}");
    for r in [&keyless_blind, &keyed_blind] {
        assert_eq!((r.missing, r.other), (0, 0), "{r:?}");
        assert_eq!(
            r.fenced + r.stale + r.finished + r.blocked + r.other,
            r.scenarios,
            "{r:?}"
        );
    }
}

#[test]
fn the_zombie_table_matches_its_reviewed_snapshot() {
    let table = loop_sweep::zombie::render().expect("the zombie table runs");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/zombie.txt");
    sweep::report::snapshot::check(&path, &table).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn our_sweeps_page_quotes_the_zombie_table_as_it_is() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let page = std::fs::read_to_string(root.join("docs/our-sweeps.md")).unwrap();
    let snapshot = std::fs::read_to_string(root.join("snapshots/zombie.txt")).unwrap();
    for row in snapshot.lines().filter(|l| l.starts_with('|')) {
        assert!(
            page.contains(row),
            "docs/our-sweeps.md does not quote snapshots/zombie.txt's row:\n{row}"
        );
    }
}
