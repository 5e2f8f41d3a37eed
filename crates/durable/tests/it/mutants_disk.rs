//! Behaviours of the real directory and the lock guard that mutation
//! testing (`cargo xtask mutants durable`) found no test for.

use std::io::ErrorKind;

use durable::dir::LockGuard;
use durable::{Dir, DiskDir};

/// A `DiskDir` whose directory was removed after it was opened.
fn vanished() -> (tempfile::TempDir, DiskDir) {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("state");
    let dir = DiskDir::new(&path).unwrap();
    std::fs::remove_dir(&path).unwrap();
    (t, dir)
}

#[test]
fn syncing_a_directory_that_is_gone_is_an_error() {
    // The directory fsync is the step that makes a rename durable: a
    // failure of it must reach the saver, not be taken for success.
    let (_t, dir) = vanished();
    let e = dir.sync_dir().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

#[test]
fn create_temp_in_a_directory_that_is_gone_reports_why() {
    // Not "no free temp name": the real error, after one try.
    let (_t, dir) = vanished();
    let e = dir.create_temp(".r.json-").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

#[test]
fn a_lock_guard_shows_no_contents() {
    assert_eq!(format!("{:?}", LockGuard::new(42u8)), "LockGuard { .. }");
}
