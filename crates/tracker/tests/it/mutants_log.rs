//! The log-backed tracker's file handling, for the survivors mutation
//! testing (`cargo xtask mutants tracker`) found: which names in its
//! directory it treats as its own, and the path its I/O errors name.

use std::io;
use std::sync::Arc;

use durable::testing::{Call, FaultDir, MemDir};
use durable::Dir;
use tracker::{Mode, Tracker, TrackerError};

fn open(dir: &MemDir) -> Tracker {
    Tracker::open_log(Arc::new(dir.clone()), Mode::Keyed).unwrap()
}

#[test]
fn only_twelve_digit_log_entries_are_replayed() {
    let dir = MemDir::new();
    let t = open(&dir);
    assert_eq!(t.file_issue("a", "b", Some("k")).unwrap(), 1);
    drop(t);
    let names = dir.list().unwrap();
    assert!(
        names.contains(&"tracker-log-000000000001.json".to_owned()),
        "{names:?}"
    );
    // Not entries: a short number, a non-digit, another suffix. A log that
    // took `tracker-log-3.json` for entry 3 would refuse to open (entry 2
    // missing).
    for stray in [
        "tracker-log-3.json",
        "tracker-log-00000000000x.json",
        "tracker-log-000000000002.txt",
    ] {
        dir.write(stray, b"not an entry").unwrap();
    }
    let t = open(&dir);
    assert_eq!(t.issues().len(), 1);
    assert_eq!(t.file_issue("c", "d", None).unwrap(), 2);
    assert!(dir.read("tracker-log-3.json").unwrap().is_some());
}

#[test]
fn only_the_trackers_own_temp_files_are_removed_on_open() {
    let dir = MemDir::new();
    drop(open(&dir));
    let ours = ".tracker-index.json-abc123.tmp";
    let theirs = ["notes.tmp", ".tracker-notes", ".r.json-abc.tmp"];
    for name in std::iter::once(ours).chain(theirs) {
        dir.write(name, b"x").unwrap();
    }
    drop(open(&dir));
    let names = dir.list().unwrap();
    assert!(!names.contains(&ours.to_owned()), "{names:?}");
    for name in theirs {
        assert!(
            names.contains(&name.to_owned()),
            "{name} removed: {names:?}"
        );
    }
}

#[test]
fn an_io_error_of_the_log_names_its_index_file() {
    let dir = FaultDir::new(MemDir::new());
    dir.fail_every(Call::List, io::ErrorKind::PermissionDenied);
    match Tracker::open_log(Arc::new(dir.clone()), Mode::Keyed) {
        Err(TrackerError::Io { path, source }) => {
            assert_eq!(source.kind(), io::ErrorKind::PermissionDenied);
            assert_eq!(path, dir.path_of("tracker-index.json"));
            assert!(path.ends_with("tracker-index.json"), "{}", path.display());
        }
        other => panic!("expected an Io error, got {:?}", other.map(|t| t.issues())),
    }
}
