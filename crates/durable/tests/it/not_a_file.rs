//! Never a silent fresh start: a checkpoint path that is not a regular file,
//! a file too large, a field unknown, or a read that fails is an error.

use std::ffi::CString;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use durable::dir::FileKind;
use durable::testing::{Call, FaultDir, MemDir};
use durable::{Dir, DiskDir, Error, Options};

use crate::{fast, open, populated, run_id, Checkpoint};

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

pub fn mkfifo(path: &Path) {
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path(path).as_ptr(), 0o600) }, 0);
}

/// A valid checkpoint of run `r`, as bytes.
fn valid_checkpoint() -> Vec<u8> {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    opened.state = populated(&run);
    opened.checkpoint.save(&opened.state).unwrap();
    world.read("r.json").unwrap().unwrap()
}

fn assert_refused(dir: &Path, kind: FileKind) {
    let run = run_id("r");
    let path = dir.join("r.json");
    let e = Checkpoint::open_path(dir, &run, fast()).unwrap_err();
    assert!(
        matches!(&e, Error::NotRegularFile { path: p, found } if p == &path && *found == kind),
        "{kind}: {e:?}"
    );
    assert!(e.to_string().contains("r.json"), "{e}");
    assert!(e.to_string().contains(&kind.to_string()), "{e}");
    let loaded = Checkpoint::load(&DiskDir::new(dir).unwrap(), &run);
    assert!(
        matches!(loaded, Err(Error::NotRegularFile { .. })),
        "{kind}: {loaded:?}"
    );
    // Nothing was started: no temp file, the entry still what it was.
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "r.lock" && n != "target.json")
        .collect();
    assert_eq!(names, ["r.json"], "{kind}");
}

#[test]
fn a_symlink_even_to_a_valid_checkpoint_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("target.json"), valid_checkpoint()).unwrap();
    std::os::unix::fs::symlink("target.json", t.path().join("r.json")).unwrap();
    assert_refused(t.path(), FileKind::Symlink);
    let dangling = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("nowhere.json", dangling.path().join("r.json")).unwrap();
    assert_refused(dangling.path(), FileKind::Symlink);
}

#[test]
fn a_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("r.json")).unwrap();
    assert_refused(t.path(), FileKind::Directory);
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    // No writer ever opens the FIFO: an open that blocked would hang here.
    let t = tempfile::tempdir().unwrap();
    mkfifo(&t.path().join("r.json"));
    assert_refused(t.path(), FileKind::Fifo);
}

#[test]
fn a_socket_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(t.path().join("r.json")).unwrap();
    assert_refused(t.path(), FileKind::Socket);
}

#[test]
fn a_device_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("r.json");
    // /dev/null's numbers: 1, 3. Needs CAP_MKNOD.
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe {
        libc::mknod(
            c_path(&path).as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(1, 3),
        )
    };
    if rc != 0 {
        eprintln!(
            "skipped: cannot create a device node here ({}); the kind is covered by disk.rs's unit test",
            std::io::Error::last_os_error()
        );
        return;
    }
    assert_refused(t.path(), FileKind::CharDevice);
}

#[test]
fn a_checkpoint_over_the_read_limit_is_refused_on_disk_and_in_memory() {
    let bytes = valid_checkpoint();
    let len = bytes.len() as u64;
    let exact = Options {
        max_read_bytes: len,
        ..fast()
    };
    let under = Options {
        max_read_bytes: len - 1,
        ..fast()
    };
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("r.json"), &bytes).unwrap();
    let e = Checkpoint::open_path(t.path(), &run_id("r"), under).unwrap_err();
    assert!(
        matches!(&e, Error::TooLarge { size, limit, path } if *size == len && *limit == len - 1 && path.ends_with("r.json")),
        "{e:?}"
    );
    assert!(e.to_string().contains("r.json"), "{e}");
    assert_eq!(
        fs::read(t.path().join("r.json")).unwrap(),
        bytes,
        "untouched"
    );
    assert!(Checkpoint::open_path(t.path(), &run_id("r"), exact).is_ok());

    let world = MemDir::new();
    world.write("r.json", &bytes).unwrap();
    assert!(matches!(
        open(&world, &run_id("r"), under),
        Err(Error::TooLarge { .. })
    ));
    assert!(open(&world, &run_id("r"), exact).is_ok());
    assert_eq!(Options::default().max_read_bytes, 64 << 20);
    assert_eq!(durable::checkpoint::DEFAULT_MAX_READ_BYTES, 64 << 20);
}

#[test]
fn a_read_limit_holds_for_a_file_that_grows_after_its_size_was_seen() {
    let t = tempfile::tempdir().unwrap();
    let dir = DiskDir::new(t.path()).unwrap();
    fs::write(t.path().join("f"), b"12345").unwrap();
    assert_eq!(
        dir.read_limited("f", 5).unwrap().as_deref(),
        Some(&b"12345"[..])
    );
    let e = dir.read_limited("f", 4).unwrap_err();
    assert_eq!(
        durable::dir::EntryError::of(&e),
        Some(&durable::dir::EntryError::TooLarge { size: 5, limit: 4 })
    );
    assert_eq!(dir.read_limited("missing", 4).unwrap(), None);
}

#[test]
fn unknown_fields_are_refused_naming_them() {
    for (file, field) in [
        (
            r#"{"version":2,"run":"r","state":{"phase":"model"},"lease":7}"#,
            "lease",
        ),
        (
            r#"{"version":2,"run":"r","state":{"phase":"model","later":1}}"#,
            "state.later",
        ),
    ] {
        let world = MemDir::new();
        world.write("r.json", file.as_bytes()).unwrap();
        let e = open(&world, &run_id("r"), fast()).unwrap_err();
        assert!(
            matches!(&e, Error::UnknownField { field: f, .. } if f == field),
            "{file}: {e:?}"
        );
        assert!(e.to_string().contains(field), "{e}");
        assert_eq!(
            world.read("r.json").unwrap().unwrap(),
            file.as_bytes(),
            "untouched"
        );
        assert!(matches!(
            Checkpoint::load(&world, &run_id("r")),
            Err(Error::UnknownField { .. })
        ));
    }
}

#[test]
fn every_read_error_but_not_found_stops_the_open() {
    for kind in [
        ErrorKind::PermissionDenied,
        ErrorKind::Other,
        ErrorKind::Interrupted,
    ] {
        let world = MemDir::new();
        let dir = FaultDir::new(world.clone());
        dir.fail_every(Call::Read, kind);
        let e = Checkpoint::open(Arc::new(dir.clone()), &run_id("r"), fast()).unwrap_err();
        assert!(
            matches!(&e, Error::Io { op: "read", path, source } if path.to_str() == Some("mem:/r.json") && source.kind() == kind),
            "{kind:?}: {e:?}"
        );
        assert!(e.to_string().contains("mem:/r.json"), "{e}");
        assert_eq!(
            world.read("r.json").unwrap(),
            None,
            "no fresh run was started"
        );
        dir.heal();
        assert!(
            !Checkpoint::open(Arc::new(dir), &run_id("r"), fast())
                .unwrap()
                .resumed
        );
    }
}

#[test]
fn a_failing_cleanup_or_lock_is_an_error_not_a_pass() {
    let world = MemDir::new();
    // A leftover temp file that cannot be removed.
    world.write(".r.json-abc.tmp", b"half").unwrap();
    let dir = FaultDir::new(world.clone());
    dir.fail_every(Call::Remove, ErrorKind::PermissionDenied);
    let e = Checkpoint::open(Arc::new(dir.clone()), &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Io {
                op: "remove leftover temp files",
                ..
            }
        ),
        "{e:?}"
    );
    dir.heal();
    dir.fail_every(Call::List, ErrorKind::Other);
    assert!(matches!(
        Checkpoint::open(Arc::new(dir.clone()), &run_id("r"), fast()),
        Err(Error::Io {
            op: "remove leftover temp files",
            ..
        })
    ));
    dir.heal();
    dir.fail_every(Call::Lock, ErrorKind::PermissionDenied);
    let e = Checkpoint::open(Arc::new(dir.clone()), &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(&e, Error::Io { op: "lock", path, .. } if path.to_str() == Some("mem:/r.lock")),
        "a lock that fails is not 'locked': {e:?}"
    );
    assert_eq!(world.read("r.json").unwrap(), None);
}

#[test]
fn a_failing_read_before_a_save_refuses_the_save() {
    let world = MemDir::new();
    let dir = FaultDir::new(world.clone());
    let mut opened = Checkpoint::open(Arc::new(dir.clone()), &run_id("r"), fast()).unwrap();
    let before = world.read("r.json").unwrap();
    dir.fail_every(Call::Read, ErrorKind::Other);
    opened.state.turns = 9;
    let e = opened.checkpoint.save(&opened.state).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Io {
                op: "read before saving",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(world.read("r.json").unwrap(), before);
    assert!(crate::temp_files(&world).is_empty());
    // A file that is not JSON under a holder is refused, not overwritten.
    dir.heal();
    world.write("r.json", b"garbage").unwrap();
    assert!(matches!(
        opened.checkpoint.save(&opened.state),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(world.read("r.json").unwrap().unwrap(), b"garbage");
}

#[test]
fn disk_read_errors_other_than_not_found_are_errors() {
    let t = tempfile::tempdir().unwrap();
    let dir = DiskDir::new(t.path()).unwrap();
    // A name too long for the file system: ENAMETOOLONG, even as root.
    let long = "x".repeat(300);
    assert!(dir.read(&long).is_err(), "ENAMETOOLONG is not 'no file'");
    assert!(dir.lock(&long).is_err());
    assert_eq!(dir.read("missing").unwrap(), None);
    // Removing something that is not a file fails; removing nothing is Ok.
    fs::create_dir(t.path().join("d")).unwrap();
    assert!(dir.remove("d").is_err(), "EISDIR is not 'already gone'");
    dir.remove("missing").unwrap();
    assert!(dir.remove(&long).is_err());
}

#[test]
fn a_checkpoint_without_read_permission_is_an_error() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!(
            "skipped: running as root, where mode 000 does not stop a read; \
             every_read_error_but_not_found_stops_the_open covers it with a FaultDir"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("r.json");
    fs::write(&path, valid_checkpoint()).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    let e = Checkpoint::open_path(t.path(), &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == ErrorKind::PermissionDenied),
        "{e:?}"
    );
}

#[test]
fn a_dir_refusal_travels_inside_an_io_error_and_maps_to_its_variant() {
    use durable::dir::EntryError;
    let not_a_file = EntryError::NotRegularFile(FileKind::Fifo).into_io();
    assert_eq!(not_a_file.kind(), ErrorKind::InvalidInput);
    assert_eq!(not_a_file.to_string(), "is a FIFO, not a regular file");
    let too_large = EntryError::TooLarge { size: 9, limit: 8 }.into_io();
    assert_eq!(too_large.kind(), ErrorKind::InvalidData);
    assert_eq!(
        EntryError::LockReplaced.into_io().kind(),
        ErrorKind::InvalidData
    );
    assert_eq!(EntryError::of(&std::io::Error::other("plain")), None);
    let path = std::path::PathBuf::from("/x/r.json");
    for (e, expected) in [
        (
            not_a_file,
            "/x/r.json is a FIFO, not a regular file; move it away to go on",
        ),
        (
            too_large,
            "checkpoint /x/r.json is 9 bytes, more than the limit of 8 bytes",
        ),
        (
            EntryError::LockReplaced.into_io(),
            "lock file /x/r.json was deleted or replaced while it was being locked; try again",
        ),
        (std::io::Error::other("plain"), "read /x/r.json: plain"),
    ] {
        assert_eq!(
            Error::from_io(path.clone(), "read", e).to_string(),
            expected
        );
    }
}
