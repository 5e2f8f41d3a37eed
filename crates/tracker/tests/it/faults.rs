//! The tracker's file store on a disk that answers with errors: every call
//! through its `Dir` fails once, in turn (and, at depth 2, the retry's call
//! fails again); a client that treats a failed save as an unknown outcome
//! (and retries with the same key) files each issue exactly once, and the
//! file a restart reads after a power cut holds each issue once.

use std::sync::Arc;

use durable::testing::{Call, DiskState, Fault, FaultDir, PowerDir};
use tracker::{Mode, Tracker, TrackerError};

const ISSUES: [&str; 3] = ["crash in parser", "leak in cache", "typo in docs"];

/// File every issue, retrying an unknown outcome with the same key (at most
/// `tries` times); returns the unknown outcomes seen, as messages.
fn file_all(t: &Tracker, tries: usize) -> Result<Vec<String>, TrackerError> {
    let mut seen = Vec::new();
    for title in ISSUES {
        let key = format!("key-{title}");
        let mut n = 0;
        loop {
            match t.file_issue(title, "trace", Some(&key)) {
                Ok(_) => break,
                Err(e @ TrackerError::Unknown { .. }) if n + 1 < tries => {
                    seen.push(e.to_string());
                    n += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(seen)
}

/// One world: open, file (failing where `faults` say), then — space freed,
/// power cut — reopen from the disk, file again on a healthy disk, and
/// return the errors of the first life and the titles a last reader sees.
fn scenario(faults: &[Fault]) -> (Vec<String>, Vec<String>) {
    let power = PowerDir::new(DiskState::LoseUnsynced);
    let disk = FaultDir::new(power.clone());
    disk.fail_all(faults);
    let mut errors = Vec::new();
    match Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed) {
        Ok(t) => match file_all(&t, 3) {
            Ok(e) => errors.extend(e),
            Err(e) => errors.push(e.to_string()),
        },
        Err(e) => errors.push(e.to_string()),
    }
    disk.heal();
    power.power_cut();
    let t = Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    file_all(&t, 1).unwrap();
    let reopened = Tracker::open_dir(Arc::new(power.clone()), Mode::Keyed).unwrap();
    let titles = reopened.issues().into_iter().map(|i| i.title).collect();
    (errors, titles)
}

/// Every call the store makes on a healthy disk, as the fault that fails it.
fn sites() -> Vec<Fault> {
    let disk = FaultDir::new(PowerDir::default());
    let t = Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    file_all(&t, 1).unwrap();
    disk.sites()
}

#[test]
fn every_single_io_error_of_the_store_files_each_issue_exactly_once() {
    let sites = sites();
    assert!(sites.len() > 10, "{sites:?}");
    let mut surfaced = 0;
    for fault in &sites {
        let (errors, titles) = scenario(&[*fault]);
        assert_eq!(titles, ISSUES, "{fault}: each issue exactly once");
        for e in &errors {
            assert!(
                e.contains("tracker.json"),
                "{fault}: the error names the file: {e}"
            );
        }
        surfaced += usize::from(!errors.is_empty());
    }
    assert!(surfaced > 0);
}

#[test]
fn two_io_errors_the_second_in_the_retry_still_file_each_issue_once() {
    for first in sites() {
        // The retry's call of the same kind is the next hit.
        let second = Fault {
            call: first.call,
            hit: first.hit + 1,
        };
        let (_, titles) = scenario(&[first, second]);
        assert_eq!(titles, ISSUES, "{first} then {second}");
    }
}

#[test]
fn a_failed_directory_fsync_after_the_rename_is_unknown_and_keeps_the_record() {
    let power = PowerDir::new(DiskState::LoseUnsynced);
    let disk = FaultDir::new(power.clone());
    let t = Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    disk.fail(Call::SyncDir, disk.hits(Call::SyncDir) + 1);
    let e = t.file_issue("a", "b", Some("k")).unwrap_err();
    assert!(matches!(e, TrackerError::Unknown { .. }), "{e}");
    assert!(e.to_string().contains("tracker.json"), "{e}");
    // The file holds the record: it is kept, so the retry with the key gets
    // the first answer — not a second issue, and not a refusal to write
    // over "another tracker's" file.
    assert_eq!(t.file_issue("a", "b", Some("k")).unwrap(), 1);
    assert_eq!(t.issues().len(), 1);
    power.power_cut();
    let again = Tracker::open_dir(Arc::new(power), Mode::Keyed).unwrap();
    assert_eq!(again.issues().len(), 1);
}

#[test]
fn a_failed_save_before_the_rename_is_unknown_and_rolls_back() {
    let disk = FaultDir::new(PowerDir::default());
    let t = Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    disk.fail(Call::Write, disk.hits(Call::Write) + 1);
    let e = t.file_issue("a", "b", Some("k")).unwrap_err();
    assert!(matches!(e, TrackerError::Unknown { .. }), "{e}");
    assert!(
        t.issues().is_empty(),
        "nothing reached the file: rolled back"
    );
    assert!(!t.holds_key("k"));
    assert_eq!(t.file_issue("a", "b", Some("k")).unwrap(), 1);
}
