//! One conformance suite over the `Dir` trait, run against every
//! implementation: what the checkpoint store relies on must hold for both.

use std::io::ErrorKind;

use durable::write::{write_atomic, WriteOptions};
use durable::Dir;

/// A directory under test, with whatever keeps it alive (a temp dir).
pub struct Fixture {
    pub dir: Box<dyn Dir>,
    _keep: Option<tempfile::TempDir>,
}

pub fn disk() -> Fixture {
    let t = tempfile::tempdir().unwrap();
    Fixture {
        dir: Box::new(durable::DiskDir::new(t.path().join("state")).unwrap()),
        _keep: Some(t),
    }
}

pub fn mem() -> Fixture {
    Fixture {
        dir: Box::new(durable::testing::MemDir::new()),
        _keep: None,
    }
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod disk_dir {
            $(#[test] fn $test() { super::$test(&*super::disk().dir) })*
        }
        mod mem_dir {
            $(#[test] fn $test() { super::$test(&*super::mem().dir) })*
        }
    };
}

conformance!(
    read_of_a_missing_file_is_none,
    write_replaces_contents,
    create_temp_makes_unique_empty_files,
    rename_replaces_the_target,
    rename_of_a_missing_file_fails,
    remove_is_idempotent,
    list_is_sorted,
    sync_needs_the_file,
    lock_is_exclusive_until_dropped,
    names_that_are_not_plain_are_rejected,
    path_of_names_the_file,
    write_atomic_replaces_and_leaves_no_temp,
    write_atomic_passes_its_points_only_when_asked,
    write_atomic_removes_its_temp_on_error,
    a_temp_file_written_twice_holds_the_second_write,
);

/// `DiskDir` keeps a temp file open between `create_temp`, `write`, `sync`
/// and `rename`; a second write must still replace the first.
fn a_temp_file_written_twice_holds_the_second_write(d: &dyn Dir) {
    let t = d.create_temp(".run.json-").unwrap();
    d.write(&t, b"a long first version").unwrap();
    d.write(&t, b"short").unwrap();
    d.sync(&t).unwrap();
    assert_eq!(d.read(&t).unwrap().as_deref(), Some(&b"short"[..]));
    d.rename(&t, "run.json").unwrap();
    assert_eq!(d.read("run.json").unwrap().as_deref(), Some(&b"short"[..]));
    // After the rename the handle is gone: writing the old name makes a new file.
    d.write(&t, b"again").unwrap();
    assert_eq!(d.read(&t).unwrap().as_deref(), Some(&b"again"[..]));
    d.remove(&t).unwrap();
    assert_eq!(d.read(&t).unwrap(), None);
}

fn read_of_a_missing_file_is_none(d: &dyn Dir) {
    assert_eq!(d.read("nothing").unwrap(), None);
    assert!(d.list().unwrap().is_empty());
}

fn write_replaces_contents(d: &dyn Dir) {
    d.write("f", b"a longer first version").unwrap();
    assert_eq!(d.read("f").unwrap().unwrap(), b"a longer first version");
    d.write("f", b"short").unwrap();
    assert_eq!(d.read("f").unwrap().unwrap(), b"short");
    d.write("f", b"").unwrap();
    assert_eq!(d.read("f").unwrap().unwrap(), b"");
}

fn create_temp_makes_unique_empty_files(d: &dyn Dir) {
    let a = d.create_temp(".run.json-").unwrap();
    let b = d.create_temp(".run.json-").unwrap();
    assert_ne!(a, b);
    for name in [&a, &b] {
        let unique = name
            .strip_prefix(".run.json-")
            .and_then(|r| r.strip_suffix(".tmp"))
            .unwrap_or_else(|| panic!("{name} has the wrong shape"));
        assert!(!unique.is_empty() && unique.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(d.read(name).unwrap().unwrap(), b"");
    }
    let mut both = vec![a, b];
    both.sort();
    assert_eq!(d.list().unwrap(), both);
}

fn rename_replaces_the_target(d: &dyn Dir) {
    d.write("old", b"old").unwrap();
    d.write("new", b"new").unwrap();
    d.rename("new", "old").unwrap();
    assert_eq!(d.read("old").unwrap().unwrap(), b"new");
    assert_eq!(d.read("new").unwrap(), None);
    assert_eq!(d.list().unwrap(), ["old"]);
}

fn rename_of_a_missing_file_fails(d: &dyn Dir) {
    let e = d.rename("ghost", "x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(d.read("x").unwrap(), None);
}

fn remove_is_idempotent(d: &dyn Dir) {
    d.write("f", b"x").unwrap();
    d.remove("f").unwrap();
    assert_eq!(d.read("f").unwrap(), None);
    d.remove("f").unwrap();
    d.remove("never-was").unwrap();
}

fn list_is_sorted(d: &dyn Dir) {
    for n in ["b", "a", ".c", "a.json"] {
        d.write(n, n.as_bytes()).unwrap();
    }
    assert_eq!(d.list().unwrap(), [".c", "a", "a.json", "b"]);
}

fn sync_needs_the_file(d: &dyn Dir) {
    d.write("f", b"x").unwrap();
    d.sync("f").unwrap();
    d.sync_dir().unwrap();
    assert_eq!(d.sync("ghost").unwrap_err().kind(), ErrorKind::NotFound);
}

fn lock_is_exclusive_until_dropped(d: &dyn Dir) {
    let g = d.lock("run.lock").unwrap();
    assert_eq!(
        d.lock("run.lock").unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // Another name is another lock.
    let other = d.lock("other.lock").unwrap();
    // The lock file exists, so it is listed (and never mistaken for state).
    assert_eq!(d.list().unwrap(), ["other.lock", "run.lock"]);
    drop(g);
    let again = d.lock("run.lock").unwrap();
    drop((again, other));
    // Locking does not change the file's contents.
    d.write("data.lock", b"keep").unwrap();
    let g = d.lock("data.lock").unwrap();
    assert_eq!(d.read("data.lock").unwrap().unwrap(), b"keep");
    drop(g);
}

fn names_that_are_not_plain_are_rejected(d: &dyn Dir) {
    for bad in ["", ".", "..", "a/b", "../x", "/etc/passwd", "a\0b"] {
        let invalid = |r: std::io::Result<()>| {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidInput, "{bad:?}")
        };
        invalid(d.write(bad, b"x"));
        invalid(d.read(bad).map(|_| ()));
        invalid(d.sync(bad));
        invalid(d.remove(bad));
        invalid(d.rename(bad, "ok"));
        invalid(d.rename("ok", bad));
        invalid(d.lock(bad).map(|_| ()));
    }
    assert_eq!(
        d.create_temp("../escape-").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        write_atomic(d, "a/b", b"x", WriteOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    assert!(d.list().unwrap().is_empty(), "{:?}", d.list());
}

fn path_of_names_the_file(d: &dyn Dir) {
    let p = d.path_of("run.json");
    assert!(p.ends_with("run.json"), "{}", p.display());
}

fn write_atomic_replaces_and_leaves_no_temp(d: &dyn Dir) {
    for sync in [true, false] {
        let opts = WriteOptions {
            sync,
            points: false,
        };
        write_atomic(d, "run.json", b"first, longer", opts).unwrap();
        write_atomic(d, "run.json", b"second", opts).unwrap();
        assert_eq!(d.read("run.json").unwrap().unwrap(), b"second");
        assert_eq!(d.list().unwrap(), ["run.json"]);
    }
}

fn write_atomic_passes_its_points_only_when_asked(d: &dyn Dir) {
    let on = WriteOptions {
        sync: false,
        points: true,
    };
    let life = crashpoint::record(|| write_atomic(d, "f", b"1", on).unwrap());
    let hits: Vec<String> = life.hits.iter().map(|h| h.to_string()).collect();
    assert_eq!(hits, ["mid-save#1", "after rename#1"]);

    let off = WriteOptions {
        sync: false,
        points: false,
    };
    let life = crashpoint::record(|| write_atomic(d, "f", b"2", off).unwrap());
    assert!(life.hits.is_empty());
}

fn write_atomic_removes_its_temp_on_error(d: &dyn Dir) {
    // Rename over a directory-like failure is hard to provoke portably, so
    // wrap the directory and fail the rename.
    #[derive(Debug)]
    struct FailRename<'a>(&'a dyn Dir);
    impl Dir for FailRename<'_> {
        fn create_temp(&self, p: &str) -> std::io::Result<String> {
            self.0.create_temp(p)
        }
        fn write(&self, n: &str, b: &[u8]) -> std::io::Result<()> {
            self.0.write(n, b)
        }
        fn sync(&self, n: &str) -> std::io::Result<()> {
            self.0.sync(n)
        }
        fn rename(&self, _: &str, _: &str) -> std::io::Result<()> {
            Err(std::io::Error::other("disk on fire"))
        }
        fn sync_dir(&self) -> std::io::Result<()> {
            self.0.sync_dir()
        }
        fn read(&self, n: &str) -> std::io::Result<Option<Vec<u8>>> {
            self.0.read(n)
        }
        fn remove(&self, n: &str) -> std::io::Result<()> {
            self.0.remove(n)
        }
        fn list(&self) -> std::io::Result<Vec<String>> {
            self.0.list()
        }
        fn lock(&self, n: &str) -> std::io::Result<durable::dir::LockGuard> {
            self.0.lock(n)
        }
        fn path_of(&self, n: &str) -> std::path::PathBuf {
            self.0.path_of(n)
        }
    }
    d.write("f", b"old").unwrap();
    let e = write_atomic(&FailRename(d), "f", b"new", WriteOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "disk on fire");
    assert_eq!(d.read("f").unwrap().unwrap(), b"old");
    assert_eq!(d.list().unwrap(), ["f"]);
}

// ---------------------------------------------------------------------------
// Implementation-specific behaviour.

#[cfg(unix)]
mod disk_only {
    use std::os::unix::fs::PermissionsExt;

    use crate::Checkpoint;
    use durable::{Dir, DiskDir, RunId};

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_0600_and_the_directory_0700() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("a").join("state");
        let d = DiskDir::new(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
        let tmp = d.create_temp(".x-").unwrap();
        assert_eq!(mode(&root.join(&tmp)), 0o600);
        d.write("plain", b"x").unwrap();
        assert_eq!(mode(&root.join("plain")), 0o600);
        let _g = d.lock("l").unwrap();
        assert_eq!(mode(&root.join("l")), 0o600);
    }

    #[test]
    fn the_checkpoint_file_is_0600() {
        let t = tempfile::tempdir().unwrap();
        let run = RunId::parse("mode-check").unwrap();
        let opened = Checkpoint::open_path(t.path(), &run, durable::Options::default()).unwrap();
        assert_eq!(opened.checkpoint.path(), t.path().join("mode-check.json"));
        assert_eq!(mode(&t.path().join("mode-check.json")), 0o600);
        assert_eq!(mode(&t.path().join("mode-check.lock")), 0o600);
    }

    #[test]
    fn new_refuses_a_file() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        assert!(DiskDir::new(&f).is_err());
    }

    #[test]
    fn two_opens_of_one_lock_file_conflict_within_a_process() {
        // flock belongs to the open file description, so even two handles in
        // one process exclude each other, like two processes would.
        let t = tempfile::tempdir().unwrap();
        let a = DiskDir::new(t.path()).unwrap();
        let b = DiskDir::new(t.path()).unwrap();
        let _g = a.lock("run.lock").unwrap();
        let e = b.lock("run.lock").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        assert!(e.to_string().contains("run.lock"), "{e}");
    }
}

mod mem_only {
    use durable::testing::MemDir;
    use durable::Dir;

    #[test]
    fn clones_share_files_and_locks() {
        let world = MemDir::new();
        let life = world.clone();
        life.write("f", b"x").unwrap();
        assert_eq!(world.read("f").unwrap().unwrap(), b"x");
        let g = life.lock("l").unwrap();
        assert!(world.lock("l").is_err());
        drop(g);
        assert!(world.lock("l").is_ok());
    }

    #[test]
    fn temp_names_are_deterministic() {
        let names = |d: &MemDir| (d.create_temp(".a-").unwrap(), d.create_temp(".a-").unwrap());
        assert_eq!(names(&MemDir::new()), names(&MemDir::new()));
        assert_eq!(names(&MemDir::new()).0, ".a-1.tmp");
    }

    #[test]
    fn debug_shows_names_not_contents() {
        let d = MemDir::new();
        d.write("big", &[b'z'; 4096]).unwrap();
        let s = format!("{d:?}");
        assert!(s.contains("big") && !s.contains("zzzz"), "{s}");
        assert_eq!(d.path_of("x").to_str(), Some("mem:/x"));
    }

    mod power_cut {
        use crate::Checkpoint;
        use crashpoint::{crash_at, Hit};
        use durable::testing::MemDir;
        use durable::write::{write_atomic, WriteOptions};
        use durable::{Dir, Options, RunId};

        const SYNC: WriteOptions = WriteOptions {
            sync: true,
            points: true,
        };
        const NO_SYNC: WriteOptions = WriteOptions {
            sync: false,
            points: true,
        };

        #[test]
        fn synced_atomic_writes_survive() {
            let d = MemDir::new();
            write_atomic(&d, "f", b"one", SYNC).unwrap();
            write_atomic(&d, "f", b"two", SYNC).unwrap();
            d.power_cut();
            assert_eq!(d.read("f").unwrap().unwrap(), b"two");
            assert_eq!(d.list().unwrap(), ["f"]);
        }

        #[test]
        fn unsynced_atomic_writes_are_lost() {
            let d = MemDir::new();
            write_atomic(&d, "f", b"one", SYNC).unwrap();
            write_atomic(&d, "f", b"two", NO_SYNC).unwrap();
            d.power_cut();
            assert_eq!(d.read("f").unwrap().unwrap(), b"one");
            write_atomic(&d, "g", b"new", NO_SYNC).unwrap();
            d.power_cut();
            assert_eq!(d.read("g").unwrap(), None);
        }

        #[test]
        fn a_rename_is_not_durable_until_the_directory_is_synced() {
            // Crash between the rename and the directory sync, then lose
            // power: the old file is back, whole.
            let d = MemDir::new();
            write_atomic(&d, "f", b"old", SYNC).unwrap();
            let life = crash_at(Hit::new("after rename", 1), || {
                write_atomic(&d, "f", b"new", SYNC).unwrap()
            });
            assert!(life.outcome.crashed().is_some());
            assert_eq!(d.read("f").unwrap().unwrap(), b"new");
            d.power_cut();
            assert_eq!(d.read("f").unwrap().unwrap(), b"old");
            assert_eq!(d.list().unwrap(), ["f"]);
        }

        #[test]
        fn file_contents_revert_to_the_last_sync() {
            let d = MemDir::new();
            d.write("f", b"synced").unwrap();
            d.sync("f").unwrap();
            d.sync_dir().unwrap();
            d.write("f", b"not synced").unwrap();
            d.write("never", b"x").unwrap();
            d.sync_dir().unwrap(); // the name is durable, its data is not
            d.power_cut();
            assert_eq!(d.read("f").unwrap().unwrap(), b"synced");
            assert_eq!(d.read("never").unwrap().unwrap(), b"");
        }

        #[test]
        fn removals_since_the_directory_sync_are_undone() {
            let d = MemDir::new();
            write_atomic(&d, "f", b"keep", SYNC).unwrap();
            d.remove("f").unwrap();
            assert_eq!(d.read("f").unwrap(), None);
            d.power_cut();
            assert_eq!(d.read("f").unwrap().unwrap(), b"keep");
        }

        #[test]
        fn locks_die_with_the_power() {
            let d = MemDir::new();
            let stale = d.lock("l").unwrap();
            d.power_cut();
            let fresh = d.lock("l").unwrap();
            // The dead holder's guard must not release the new holder's lock.
            drop(stale);
            assert!(d.lock("l").is_err());
            drop(fresh);
            assert!(d.lock("l").is_ok());
        }

        #[test]
        fn synced_checkpoints_survive_and_unsynced_ones_may_not() {
            let run = RunId::parse("r").unwrap();
            for sync in [true, false] {
                let d = MemDir::new();
                let opts = Options {
                    sync,
                    ..Options::default()
                };
                let mut opened =
                    Checkpoint::open(std::sync::Arc::new(d.clone()), &run, opts).unwrap();
                opened.state.turns = 4;
                opened.checkpoint.save(&opened.state).unwrap();
                drop(opened);
                d.power_cut();
                let after = Checkpoint::load(&d, &run).unwrap();
                if sync {
                    assert_eq!(after.map(|s| s.turns), Some(4));
                } else {
                    assert_eq!(after, None, "nothing was ever synced");
                }
            }
        }
    }
}
