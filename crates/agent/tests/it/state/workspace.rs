//! Files the run wrote must still hold what it wrote.

use std::path::Path;

use agent::state::State;
use durable::Error;

fn setup() -> (tempfile::TempDir, State) {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("src")).unwrap();
    std::fs::write(t.path().join("src/lib.rs"), b"fn a() {}\n").unwrap();
    std::fs::write(t.path().join("README"), b"hi\n").unwrap();
    let mut s = State::default();
    s.record_file("src/lib.rs", b"fn a() {}\n");
    s.record_file("README", b"hi\n");
    (t, s)
}

fn changed(root: &Path, s: &State) -> (std::path::PathBuf, String, Option<String>) {
    match s.check_workspace(root) {
        Err(Error::WorkspaceChanged {
            file,
            expected,
            found,
        }) => (file, expected, found),
        other => panic!("expected WorkspaceChanged, got {other:?}"),
    }
}

#[test]
fn an_unchanged_workspace_passes() {
    let (t, s) = setup();
    s.check_workspace(t.path()).unwrap();
    // The hash is SHA-256 hex (python3: hashlib.sha256(b"hi\n").hexdigest()).
    assert_eq!(
        s.files["README"],
        "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"
    );
    State::default()
        .check_workspace(Path::new("/nonexistent"))
        .unwrap();
}

#[test]
fn a_changed_file_is_named() {
    let (t, s) = setup();
    std::fs::write(t.path().join("src/lib.rs"), b"fn b() {}\n").unwrap();
    let (file, expected, found) = changed(t.path(), &s);
    assert_eq!(file, t.path().join("src/lib.rs"));
    assert_eq!(expected, s.files["src/lib.rs"]);
    assert_eq!(found.unwrap().len(), 64);
    let msg = s.check_workspace(t.path()).unwrap_err().to_string();
    assert!(msg.contains("src/lib.rs"), "{msg}");
}

#[test]
fn a_deleted_file_is_named() {
    let (t, s) = setup();
    std::fs::remove_file(t.path().join("README")).unwrap();
    let (file, _, found) = changed(t.path(), &s);
    assert_eq!(file, t.path().join("README"));
    assert_eq!(found, None);
    let msg = s.check_workspace(t.path()).unwrap_err().to_string();
    assert!(msg.contains("README") && msg.contains("no file"), "{msg}");
}

#[test]
fn a_later_write_by_the_run_updates_the_record() {
    let (t, mut s) = setup();
    std::fs::write(t.path().join("README"), b"v2\n").unwrap();
    s.record_file("README", b"v2\n");
    s.check_workspace(t.path()).unwrap();
}

#[test]
fn recorded_paths_outside_the_workspace_are_refused_unread() {
    for rel in ["../secret", "/etc/passwd", "a/../../b", ""] {
        let mut s = State::default();
        s.files.insert(rel.into(), "00".repeat(32));
        let e = s.check_workspace(Path::new("/tmp")).unwrap_err();
        assert!(matches!(e, Error::InvalidState { .. }), "{rel:?}: {e:?}");
    }
}

/// A recorded file that exists but cannot be read is an I/O error naming
/// it, not a change: only a missing file reads as "no file".
#[test]
fn an_unreadable_file_is_an_io_error_not_a_change() {
    let (t, mut s) = setup();
    // A directory where the run wrote a file: opening it works, reading it
    // fails (EISDIR).
    std::fs::create_dir(t.path().join("build")).unwrap();
    s.record_file("build", b"made\n");
    match s.check_workspace(t.path()) {
        Err(Error::Io { path, op, .. }) => {
            assert_eq!(path, t.path().join("build"));
            assert_eq!(op, "read workspace file");
        }
        other => panic!("expected Io, got {other:?}"),
    }
}
