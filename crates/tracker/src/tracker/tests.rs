use super::*;
use crate::Comment;
use crashpoint::Hit;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io;

fn issue(title: &str, body: &str) -> Request {
    Request::FileIssue {
        title: title.to_owned(),
        body: body.to_owned(),
    }
}

fn comment(issue: u64, body: &str) -> Request {
    Request::Comment {
        issue,
        body: body.to_owned(),
    }
}

fn accepted_hits<R>(life: &crashpoint::Life<R>) -> usize {
    life.hits.iter().filter(|h| h.point == ACCEPTED).count()
}

#[test]
fn numbers_and_ids_count_from_one() {
    let t = Tracker::new(Mode::Keyless);
    assert_eq!(t.file_issue("a", "x", None).unwrap(), 1);
    assert_eq!(t.file_issue("b", "y", None).unwrap(), 2);
    assert_eq!(t.comment(2, "c1", None).unwrap(), 1);
    assert_eq!(t.comment(1, "c2", None).unwrap(), 2);
    let issues = t.issues();
    assert_eq!(issues.len(), 2);
    assert_eq!(issues[0].number, 1);
    assert_eq!(
        issues[0].comments,
        [Comment {
            id: 2,
            body: "c2".into()
        }]
    );
    assert_eq!(
        issues[1].comments,
        [Comment {
            id: 1,
            body: "c1".into()
        }]
    );
}

#[test]
fn keyed_repeat_returns_first_answer_changes_nothing_and_passes_the_point() {
    let t = Tracker::new(Mode::Keyed);
    let first = crashpoint::record(|| t.file_issue("bug", "body", Some("k1")).unwrap());
    assert_eq!(first.outcome, crashpoint::Outcome::Finished(1));
    assert_eq!(accepted_hits(&first), 1);
    let before = t.issues();

    let again = crashpoint::record(|| t.file_issue("bug", "body", Some("k1")).unwrap());
    assert_eq!(again.outcome, crashpoint::Outcome::Finished(1));
    assert_eq!(accepted_hits(&again), 1, "a repeat still passes the point");
    assert_eq!(t.issues(), before);
    assert_eq!(t.count(&issue("bug", "body")), 1);

    // The same for comments.
    assert_eq!(t.comment(1, "hi", Some("k2")).unwrap(), 1);
    assert_eq!(t.comment(1, "hi", Some("k2")).unwrap(), 1);
    assert_eq!(t.count(&comment(1, "hi")), 1);
}

#[test]
fn same_key_different_arguments_is_refused() {
    let t = Tracker::new(Mode::Keyed);
    t.file_issue("bug", "body", Some("k")).unwrap();
    let life = crashpoint::record(|| t.file_issue("other", "body", Some("k")));
    match &life.outcome {
        crashpoint::Outcome::Finished(Err(TrackerError::KeyReused { key })) => assert_eq!(key, "k"),
        other => panic!("expected KeyReused, got {other:?}"),
    }
    assert_eq!(accepted_hits(&life), 0, "a refusal is not an acceptance");
    assert!(matches!(
        t.comment(1, "x", Some("k")),
        Err(TrackerError::KeyReused { .. })
    ));
    assert_eq!(t.issues().len(), 1);
}

#[test]
fn keyless_ignores_keys() {
    let t = Tracker::new(Mode::Keyless);
    assert_eq!(t.file_issue("bug", "body", Some("k")).unwrap(), 1);
    assert_eq!(t.file_issue("bug", "body", Some("k")).unwrap(), 2);
    assert_eq!(t.file_issue("other", "body", Some("k")).unwrap(), 3);
    assert_eq!(t.count(&issue("bug", "body")), 2);
    assert!(!t.holds_key("k"));
    assert_eq!(t.mode(), Mode::Keyless);
}

#[test]
fn comment_on_unknown_issue_records_nothing() {
    let t = Tracker::new(Mode::Keyed);
    for n in [0, 1, u64::MAX] {
        assert!(matches!(
            t.comment(n, "x", Some("k")),
            Err(TrackerError::NoSuchIssue { issue }) if issue == n
        ));
    }
    assert!(!t.holds_key("k"), "a refused request takes no key");
    assert!(t.issues().is_empty());
}

#[test]
fn expired_key_counts_as_no_key() {
    let t = Tracker::new(Mode::Keyed).with_key_ttl(10);
    t.file_issue("bug", "body", Some("k")).unwrap();
    t.advance(9);
    assert!(t.holds_key("k"));
    assert_eq!(t.file_issue("bug", "body", Some("k")).unwrap(), 1);
    t.advance(1);
    assert!(!t.holds_key("k"));
    assert_eq!(
        t.lookup(&issue("bug", "body"), Some("k")),
        LookupAnswer::Found(Response::Issue { number: 1 }),
        "found by arguments instead"
    );
    // A new request: a second record, and the key now belongs to it.
    assert_eq!(t.file_issue("bug", "body", Some("k")).unwrap(), 2);
    assert!(t.holds_key("k"));
    assert_eq!(t.file_issue("bug", "body", Some("k")).unwrap(), 2);
    // An expired key may even come back with other arguments.
    t.advance(10);
    assert_eq!(t.file_issue("other", "x", Some("k")).unwrap(), 3);
}

#[test]
fn lookup_by_key_and_by_arguments() {
    let t = Tracker::new(Mode::Keyed);
    t.file_issue("bug", "body", Some("k")).unwrap();
    t.comment(1, "hi", None).unwrap();
    let found = LookupAnswer::Found(Response::Issue { number: 1 });
    assert_eq!(t.lookup(&issue("bug", "body"), Some("k")), found);
    assert_eq!(t.lookup(&issue("bug", "body"), None), found);
    assert_eq!(
        t.lookup(&issue("bug", "other"), None),
        LookupAnswer::NotFound
    );
    assert_eq!(
        t.lookup(&issue("bug", "other"), Some("unknown")),
        LookupAnswer::NotFound
    );
    // A key held for another request says nothing about this one.
    assert_eq!(
        t.lookup(&issue("bug", "other"), Some("k")),
        LookupAnswer::NotFound
    );
    assert_eq!(
        t.lookup(&comment(1, "hi"), None),
        LookupAnswer::Found(Response::Comment { issue: 1, id: 1 })
    );
    assert_eq!(t.lookup(&comment(1, "bye"), None), LookupAnswer::NotFound);
    assert_eq!(t.lookup(&comment(7, "hi"), None), LookupAnswer::NotFound);
}

#[test]
fn uncertain_lookup_cant_tell_by_arguments_but_trusts_keys() {
    let t = Tracker::new(Mode::Keyed).with_uncertain_lookup();
    t.file_issue("bug", "body", Some("k")).unwrap();
    assert_eq!(
        t.lookup(&issue("bug", "body"), Some("k")),
        LookupAnswer::Found(Response::Issue { number: 1 })
    );
    assert_eq!(
        t.lookup(&issue("bug", "body"), None),
        LookupAnswer::CantTell
    );
    assert_eq!(
        t.lookup(&issue("nope", "body"), None),
        LookupAnswer::CantTell
    );

    let keyless = Tracker::new(Mode::Keyless).with_uncertain_lookup();
    keyless.file_issue("bug", "body", Some("k")).unwrap();
    assert_eq!(
        keyless.lookup(&issue("bug", "body"), Some("k")),
        LookupAnswer::CantTell
    );
}

#[test]
fn fault_records_then_drops_and_a_keyed_retry_gets_the_first_answer() {
    let t = Tracker::new(Mode::Keyed).with_fault(Fault::FailAfterAccept { nth: 2 });
    assert_eq!(t.file_issue("a", "x", Some("k1")).unwrap(), 1);
    // A keyed repeat is not new: it does not count towards nth.
    assert_eq!(t.file_issue("a", "x", Some("k1")).unwrap(), 1);
    let life = crashpoint::record(|| t.file_issue("b", "y", Some("k2")));
    assert!(matches!(
        life.outcome,
        crashpoint::Outcome::Finished(Err(TrackerError::Dropped))
    ));
    assert_eq!(accepted_hits(&life), 1, "the fault fires after the point");
    assert_eq!(
        t.count(&issue("b", "y")),
        1,
        "the dropped request was recorded"
    );
    assert_eq!(t.file_issue("b", "y", Some("k2")).unwrap(), 2);
    // It fires once.
    assert_eq!(t.file_issue("c", "z", Some("k3")).unwrap(), 3);
    assert_eq!(t.issues().len(), 3);
}

#[test]
fn fault_counts_over_clones_and_across_crashed_lives() {
    let world = Tracker::new(Mode::Keyless).with_fault(Fault::FailAfterAccept { nth: 2 });
    let life = world.clone();
    let crashed = crashpoint::crash_at(Hit::new(ACCEPTED, 1), || life.file_issue("a", "x", None));
    assert!(crashed.outcome.crashed().is_some());
    let life = world.clone();
    assert!(matches!(
        life.comment(1, "c", None),
        Err(TrackerError::Dropped)
    ));
    assert_eq!(world.comment(1, "c", None).unwrap(), 2);
}

#[test]
fn the_point_comes_after_the_record_exists() {
    let world = Tracker::new(Mode::Keyed);
    let life = world.clone();
    let crashed = crashpoint::crash_at(Hit::new(ACCEPTED, 1), || {
        life.file_issue("bug", "body", Some("k")).unwrap();
        unreachable!("the crash lands at the point");
    });
    assert_eq!(crashed.outcome.crashed(), Some(&Hit::new(ACCEPTED, 1)));
    assert_eq!(world.count(&issue("bug", "body")), 1);
    assert!(world.holds_key("k"));
    // The world is usable after the crash (the lock was not poisoned).
    assert_eq!(world.comment(1, "after", None).unwrap(), 1);
}

#[test]
fn search_reads_only_and_passes_no_point() {
    let t = Tracker::new(Mode::Keyless);
    t.file_issue("Parser CRASH", "in lexer", None).unwrap();
    t.file_issue("slow build", "nothing to see", None).unwrap();
    t.file_issue("typo", "the parser says 'teh'", None).unwrap();
    let life = crashpoint::record(|| t.search("parser"));
    assert!(life.hits.is_empty());
    assert_eq!(
        life.outcome,
        crashpoint::Outcome::Finished(vec![(1, "Parser CRASH".to_owned()), (3, "typo".to_owned())])
    );
    assert_eq!(t.search("CRASH in"), []);
    assert_eq!(t.search("crash").len(), 1);
    assert_eq!(t.search("").len(), 3);
}

#[test]
fn clones_share_records_and_configuration() {
    let a = Tracker::new(Mode::Keyed);
    let b = a.clone().with_key_ttl(1);
    a.file_issue("x", "y", Some("k")).unwrap();
    assert_eq!(b.issues(), a.issues());
    assert!(b.holds_key("k"));
    b.advance(1);
    assert!(!a.holds_key("k"));
    let text = format!("{a:?}");
    assert!(text.contains("issues: 1"), "{text}");
}

#[test]
fn records_outlive_a_crashed_closure_on_another_thread() {
    let world = Tracker::new(Mode::Keyed);
    let life = world.clone();
    let crashed = crashpoint::crash_at(Hit::new(ACCEPTED, 2), move || {
        let t = life.clone();
        crashpoint::join(crashpoint::spawn(move || {
            t.file_issue("a", "x", Some("k1")).unwrap();
            t.file_issue("b", "x", Some("k2")).unwrap();
        }));
    });
    assert!(crashed.outcome.crashed().is_some());
    assert_eq!(world.issues().len(), 2);
    assert_eq!(world.file_issue("b", "x", Some("k2")).unwrap(), 2);
}

#[test]
fn a_poisoned_lock_does_not_panic() {
    let t = Tracker::new(Mode::Keyed);
    t.file_issue("a", "x", None).unwrap();
    let state = t.state.clone();
    let _ = std::thread::spawn(move || {
        let _guard = state.lock().unwrap_or_else(|e| e.into_inner());
        panic!("poison the lock (expected in this test)");
    })
    .join();
    assert!(t.state.is_poisoned());
    assert_eq!(t.file_issue("b", "y", None).unwrap(), 2);
    assert_eq!(t.issues().len(), 2);
}

#[derive(Clone, Debug)]
struct Step {
    key: u8,
    comment: bool,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (0u8..12, any::<bool>()).prop_map(|(key, comment)| Step { key, comment }),
        0..60,
    )
}

proptest! {
    /// Keyed requests with repeats: one record per distinct key, and every
    /// repeat gets the first answer back.
    #[test]
    fn records_equal_distinct_keys(steps in steps()) {
        let t = Tracker::new(Mode::Keyed);
        // Issue 1 exists up front without a key, so comments can land on it.
        t.file_issue("root", "", None).unwrap();
        let mut first: BTreeMap<u8, Response> = BTreeMap::new();
        for step in &steps {
            let key = format!("key-{}", step.key);
            // The request a key stands for never changes (the key is derived
            // from the call), whatever `step.comment` says on a repeat.
            let is_comment = first.get(&step.key).map_or(step.comment, |r| matches!(r, Response::Comment { .. }));
            let req = if is_comment {
                comment(1, &format!("comment for {key}"))
            } else {
                issue(&format!("issue for {key}"), "body")
            };
            let response = t.apply(&req, Some(&key)).unwrap();
            let expected = first.entry(step.key).or_insert_with(|| response.clone());
            prop_assert_eq!(&response, expected);
        }
        let issues = t.issues();
        let records = issues.len() + issues.iter().map(|i| i.comments.len()).sum::<usize>();
        prop_assert_eq!(records, 1 + first.len());
    }
}

mod file {
    use super::*;
    use durable::dir::LockGuard;
    use durable::testing::MemDir;
    use durable::{Dir, DiskDir};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn mem() -> (MemDir, Arc<dyn Dir>) {
        let dir = MemDir::new();
        (dir.clone(), Arc::new(dir))
    }

    fn read(dir: &dyn Dir) -> Vec<u8> {
        dir.read(store::FILE).unwrap().expect("tracker.json exists")
    }

    #[test]
    fn reopened_from_disk_keeps_records_keys_and_clock() {
        let tmp = tempfile::tempdir().unwrap();
        let open = || {
            let dir: Arc<dyn Dir> = Arc::new(DiskDir::new(tmp.path()).unwrap());
            Tracker::open_dir(dir, Mode::Keyed)
                .unwrap()
                .with_key_ttl(10)
        };
        {
            let t = open();
            assert!(t.issues().is_empty(), "a missing file is a new tracker");
            assert_eq!(t.file_issue("bug", "body", Some("k1")).unwrap(), 1);
            assert_eq!(t.comment(1, "hi", Some("k2")).unwrap(), 1);
            t.advance(4);
        }
        assert!(tmp.path().join("tracker.json").is_file());
        let t = open();
        assert_eq!(t.issues().len(), 1);
        assert_eq!(t.issues()[0].comments.len(), 1);
        assert!(t.holds_key("k1") && t.holds_key("k2"));
        assert_eq!(t.file_issue("bug", "body", Some("k1")).unwrap(), 1);
        assert_eq!(t.comment(1, "hi", Some("k2")).unwrap(), 1);
        assert!(matches!(
            t.file_issue("other", "body", Some("k1")),
            Err(TrackerError::KeyReused { .. })
        ));
        // Numbering goes on where it stopped.
        assert_eq!(t.file_issue("next", "body", Some("k3")).unwrap(), 2);
        assert_eq!(t.comment(2, "x", None).unwrap(), 2);
        // The clock was kept: 4 + 6 = 10 ticks expire k1.
        t.advance(6);
        drop(t);
        let t = open();
        assert!(!t.holds_key("k1"));
        assert!(t.holds_key("k3"));
    }

    #[test]
    fn the_file_is_written_before_the_point() {
        let (world, dir) = mem();
        let t = Tracker::open_dir(dir, Mode::Keyed).unwrap();
        let life = crashpoint::crash_at(Hit::new(ACCEPTED, 1), || {
            t.file_issue("bug", "body", Some("k")).unwrap();
        });
        assert!(life.outcome.crashed().is_some());
        assert!(life.hits.is_empty(), "the save passes no points of its own");
        let reopened = Tracker::open_dir(Arc::new(world), Mode::Keyed).unwrap();
        assert_eq!(reopened.count(&issue("bug", "body")), 1);
        assert!(reopened.holds_key("k"));
    }

    #[test]
    fn corrupt_file_is_refused_and_left_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("tracker.json");
        std::fs::write(&path, b"{\"version\": 1, \"issues\": [").unwrap();
        let dir: Arc<dyn Dir> = Arc::new(DiskDir::new(tmp.path()).unwrap());
        match Tracker::open_dir(dir, Mode::Keyed) {
            Err(TrackerError::Corrupt { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(!reason.is_empty());
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"{\"version\": 1, \"issues\": ["
        );
    }

    /// A valid file, edited by `edit`, must be refused.
    fn refused_after(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let (world, dir) = mem();
        let t = Tracker::open_dir(dir, Mode::Keyed).unwrap();
        t.file_issue("a", "x", Some("k1")).unwrap();
        t.file_issue("b", "y", Some("k2")).unwrap();
        t.comment(1, "c", Some("k3")).unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&read(&world)).unwrap();
        edit(&mut json);
        let bytes = serde_json::to_vec(&json).unwrap();
        world.write(store::FILE, &bytes).unwrap();
        match Tracker::open_dir(Arc::new(world.clone()), Mode::Keyed) {
            Err(TrackerError::Corrupt { reason, .. }) => {
                assert_eq!(read(&world), bytes, "left unchanged");
                reason
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn inconsistent_files_are_corrupt() {
        let reasons = [
            refused_after(|j| j["version"] = 2.into()),
            refused_after(|j| j["issues"][1]["number"] = 7.into()),
            refused_after(|j| j["next_issue"] = 9.into()),
            refused_after(|j| j["next_comment"] = 0.into()),
            refused_after(|j| j["next_comment"] = 5.into()),
            refused_after(|j| j["issues"][0]["comments"][0]["id"] = 3.into()),
            refused_after(|j| j["keys"]["k1"]["response"]["Issue"]["number"] = 2.into()),
            refused_after(|j| j["keys"]["k2"]["response"]["Issue"]["number"] = 3.into()),
            refused_after(|j| j["keys"]["k3"]["request"]["Comment"]["issue"] = 2.into()),
            refused_after(|j| j["keys"]["k1"]["at_tick"] = 1.into()),
            refused_after(|j| j["extra"] = true.into()),
            refused_after(|j| j["generation"] = u64::MAX.into()),
        ];
        for reason in reasons {
            assert!(!reason.is_empty());
        }
        // And the unedited file opens.
        let (world, dir) = mem();
        Tracker::open_dir(dir, Mode::Keyed)
            .unwrap()
            .file_issue("a", "x", None)
            .unwrap();
        Tracker::open_dir(Arc::new(world), Mode::Keyed).unwrap();
    }

    #[test]
    fn leftover_temp_files_are_removed_on_open() {
        let (world, dir) = mem();
        Tracker::open_dir(dir, Mode::Keyless)
            .unwrap()
            .file_issue("a", "x", None)
            .unwrap();
        world.write(".tracker.json-99.tmp", b"half").unwrap();
        world.write("unrelated.tmp", b"keep").unwrap();
        let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyless).unwrap();
        assert_eq!(t.issues().len(), 1);
        assert_eq!(world.list().unwrap(), ["tracker.json", "unrelated.tmp"]);
    }

    #[test]
    fn a_stale_tracker_does_not_erase_another_ones_records() {
        let (world, dir) = mem();
        let a = Tracker::open_dir(dir.clone(), Mode::Keyed).unwrap();
        let b = Tracker::open_dir(dir, Mode::Keyed).unwrap();
        a.file_issue("from a", "x", Some("ka")).unwrap();
        assert!(matches!(
            b.file_issue("from b", "x", Some("kb")),
            Err(TrackerError::Io { .. })
        ));
        assert!(b.issues().is_empty(), "b rolled back its record");
        assert!(!b.holds_key("kb"));
        let fresh = Tracker::open_dir(Arc::new(world), Mode::Keyed).unwrap();
        assert_eq!(fresh.search("from"), [(1, "from a".to_owned())]);
    }

    /// A [`MemDir`] whose renames fail on demand, like a full disk.
    #[derive(Debug, Clone, Default)]
    struct FlakyDir {
        inner: MemDir,
        fail: Arc<AtomicBool>,
    }

    impl Dir for FlakyDir {
        fn create_temp(&self, prefix: &str) -> io::Result<String> {
            self.inner.create_temp(prefix)
        }
        fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
            self.inner.write(name, data)
        }
        fn sync(&self, name: &str) -> io::Result<()> {
            self.inner.sync(name)
        }
        fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(io::Error::other("disk full"));
            }
            self.inner.rename(from, to)
        }
        fn sync_dir(&self) -> io::Result<()> {
            self.inner.sync_dir()
        }
        fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
            self.inner.read(name)
        }
        fn remove(&self, name: &str) -> io::Result<()> {
            self.inner.remove(name)
        }
        fn list(&self) -> io::Result<Vec<String>> {
            self.inner.list()
        }
        fn lock(&self, name: &str) -> io::Result<LockGuard> {
            self.inner.lock(name)
        }
        fn path_of(&self, name: &str) -> PathBuf {
            self.inner.path_of(name)
        }
    }

    #[test]
    fn a_failed_write_records_nothing_and_is_an_unknown_outcome() {
        let flaky = FlakyDir::default();
        let t = Tracker::open_dir(Arc::new(flaky.clone()), Mode::Keyed)
            .unwrap()
            .with_fault(Fault::FailAfterAccept { nth: 3 });
        assert_eq!(t.file_issue("a", "x", Some("k1")).unwrap(), 1);
        let on_disk = read(&flaky);

        flaky.fail.store(true, Ordering::SeqCst);
        let life = crashpoint::record(|| t.comment(1, "c", Some("k2")));
        match life.outcome {
            crashpoint::Outcome::Finished(Err(TrackerError::Unknown { path, .. })) => {
                assert_eq!(path, PathBuf::from("mem:/tracker.json"))
            }
            other => panic!("expected Unknown, got {other:?}"),
        }
        assert!(life.hits.is_empty(), "nothing was accepted");
        assert!(matches!(
            t.file_issue("b", "y", Some("k1")),
            Err(TrackerError::KeyReused { .. })
        ));
        assert!(matches!(
            t.file_issue("b", "y", Some("k3")),
            Err(TrackerError::Unknown { .. })
        ));
        assert!(!t.holds_key("k2") && !t.holds_key("k3"));
        assert_eq!(t.issues().len(), 1);
        assert!(t.issues()[0].comments.is_empty());
        assert_eq!(read(&flaky), on_disk);
        assert!(flaky.list().unwrap().iter().all(|n| !n.ends_with(".tmp")));

        // Healed: numbering and the fault's count carry on as if the failed
        // requests never came.
        flaky.fail.store(false, Ordering::SeqCst);
        assert_eq!(t.comment(1, "c", Some("k2")).unwrap(), 1);
        assert!(matches!(
            t.file_issue("b", "y", Some("k3")),
            Err(TrackerError::Dropped)
        ));
        assert_eq!(t.file_issue("b", "y", Some("k3")).unwrap(), 2);
        let reopened = Tracker::open_dir(Arc::new(flaky), Mode::Keyed).unwrap();
        assert_eq!(reopened.issues(), t.issues());
    }
}

mod log_backed {
    use super::*;
    use crate::{LogLayout, INDEX_UPDATED, LOG_APPENDED, RECEIVED};
    use durable::testing::MemDir;
    use durable::Dir;

    fn open(disk: &MemDir, layout: LogLayout) -> Tracker {
        Tracker::open_log_with(Arc::new(disk.clone()), Mode::Keyed, layout).unwrap()
    }

    /// File one issue with a key, crashing the tracker at `point`; reopen it
    /// from its files and retry with the same key.
    fn crash_then_retry(point: &'static str, layout: LogLayout) -> (Tracker, bool) {
        let disk = MemDir::new();
        let t = open(&disk, layout);
        t.file_issue("first", "x", Some("k0")).unwrap();
        // The first filing happened outside the scope: this one's hits are #1.
        let life = crashpoint::crash_at(Hit::new(point, 1), || {
            t.file_issue("bug", "trace", Some("k1"))
        });
        assert_eq!(life.outcome.crashed(), Some(&Hit::new(point, 1)));
        drop(t);
        let t = open(&disk, layout);
        let held = t.holds_key("k1");
        let number = t.file_issue("bug", "trace", Some("k1")).unwrap();
        assert!(number >= 2, "issue #{number}");
        (t, held)
    }

    #[test]
    fn every_point_of_a_write_passes_in_order() {
        let disk = MemDir::new();
        let t = open(&disk, LogLayout::KeysInLog);
        let life = crashpoint::record(|| t.file_issue("a", "b", Some("k")).unwrap());
        let names: Vec<String> = life.hits.iter().map(|h| h.to_string()).collect();
        assert_eq!(
            names,
            [
                "tracker received#1",
                "tracker log appended#1",
                "tracker index updated#1",
                "tracker accepted#1"
            ]
        );
        // A keyed repeat is not new: no write, only the answer.
        let life = crashpoint::record(|| t.file_issue("a", "b", Some("k")).unwrap());
        assert_eq!(life.hits, [Hit::new(ACCEPTED, 1)]);
    }

    #[test]
    fn a_crash_before_anything_is_durable_loses_the_request_and_its_key() {
        let (t, held) = crash_then_retry(RECEIVED, LogLayout::KeysInLog);
        assert!(!held, "nothing was durable");
        assert_eq!(
            t.count(&issue("bug", "trace")),
            1,
            "the retry made it, once"
        );
    }

    #[test]
    fn the_key_table_survives_with_the_records_it_protects() {
        for point in [LOG_APPENDED, INDEX_UPDATED, ACCEPTED] {
            let (t, held) = crash_then_retry(point, LogLayout::KeysInLog);
            assert!(held, "{point}: the record survived, so must its key");
            assert_eq!(t.count(&issue("bug", "trace")), 1, "{point}");
            assert_eq!(t.issues().len(), 2, "{point}");
        }
    }

    #[test]
    fn keys_kept_only_in_the_index_are_lost_between_log_and_index() {
        let (t, held) = crash_then_retry(LOG_APPENDED, LogLayout::KeysInIndexOnly);
        assert!(!held);
        assert_eq!(
            t.count(&issue("bug", "trace")),
            2,
            "the keyed retry filed again"
        );
        // After the index update the wrong layout holds the key too.
        let (t, held) = crash_then_retry(INDEX_UPDATED, LogLayout::KeysInIndexOnly);
        assert!(held);
        assert_eq!(t.count(&issue("bug", "trace")), 1);
    }

    #[test]
    fn a_reopened_log_replays_numbers_comments_and_the_clock() {
        let disk = MemDir::new();
        {
            let t = open(&disk, LogLayout::KeysInLog);
            assert_eq!(t.file_issue("a", "x", Some("k1")).unwrap(), 1);
            assert_eq!(t.comment(1, "c1", Some("k2")).unwrap(), 1);
            t.advance(3);
            assert_eq!(t.file_issue("b", "y", None).unwrap(), 2);
            // The last entry is durable, its index write is lost.
            disk.remove(crate::state::log::INDEX).unwrap();
        }
        let t = open(&disk, LogLayout::KeysInLog);
        assert_eq!(t.issues().len(), 2);
        assert_eq!(t.issues()[0].comments.len(), 1);
        assert!(t.holds_key("k1") && t.holds_key("k2"));
        assert_eq!(t.comment(2, "c2", None).unwrap(), 2);
        assert_eq!(t.file_issue("c", "z", None).unwrap(), 3);
    }

    #[test]
    fn an_inconsistent_index_is_corrupt() {
        let edits: [fn(&mut serde_json::Value); 3] = [
            |j| j["issues"][0]["number"] = 2.into(),
            |j| j["comments_total"] = u64::MAX.into(),
            |j| j["applied"] = u64::MAX.into(),
        ];
        for edit in edits {
            let disk = MemDir::new();
            {
                let t = open(&disk, LogLayout::KeysInLog);
                t.file_issue("a", "x", None).unwrap();
                t.comment(1, "c", None).unwrap();
            }
            let bytes = disk.read(crate::state::log::INDEX).unwrap().unwrap();
            let mut json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            edit(&mut json);
            let bytes = serde_json::to_vec(&json).unwrap();
            disk.write(crate::state::log::INDEX, &bytes).unwrap();
            let err = Tracker::open_log(Arc::new(disk.clone()), Mode::Keyed).unwrap_err();
            assert!(matches!(err, TrackerError::Corrupt { .. }), "{err}");
            assert_eq!(disk.read(crate::state::log::INDEX).unwrap().unwrap(), bytes);
        }
    }

    #[test]
    fn an_entry_that_does_not_replay_is_corrupt() {
        let disk = MemDir::new();
        {
            let t = open(&disk, LogLayout::KeysInLog);
            t.file_issue("a", "x", None).unwrap();
            t.file_issue("b", "y", None).unwrap();
        }
        disk.remove(crate::state::log::INDEX).unwrap();
        // Entry 1 gone: entry 2 would replay as issue #1.
        disk.remove("tracker-log-000000000001.json").unwrap();
        let err = Tracker::open_log(Arc::new(disk.clone()), Mode::Keyed).unwrap_err();
        assert!(matches!(err, TrackerError::Corrupt { .. }), "{err}");
        disk.write("tracker-log-000000000001.json", b"{not json")
            .unwrap();
        let err = Tracker::open_log(Arc::new(disk), Mode::Keyed).unwrap_err();
        assert!(
            err.to_string().contains("tracker-log-000000000001.json"),
            "{err}"
        );
    }
}

mod existing {
    use super::*;
    use durable::testing::{Call, FaultDir, MemDir};
    use durable::Dir;

    #[test]
    fn a_missing_tracker_is_refused_and_nothing_is_created() {
        let world = MemDir::new();
        let e = Tracker::open_existing(Arc::new(world.clone()), Mode::Keyed).unwrap_err();
        match &e {
            TrackerError::Missing { path } => assert_eq!(path.to_str(), Some("mem:/tracker.json")),
            other => panic!("expected Missing, got {other:?}"),
        }
        assert!(e.to_string().contains("mem:/tracker.json"), "{e}");
        assert!(e.to_string().contains("missing"), "{e}");
        assert!(world.list().unwrap().is_empty(), "nothing created");
        // open_dir still starts an empty tracker where none is expected.
        let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyed).unwrap();
        assert!(t.issues().is_empty());
    }

    #[test]
    fn an_existing_tracker_opens_with_its_records() {
        let world = MemDir::new();
        let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyed).unwrap();
        t.file_issue("bug", "trace", Some("k1")).unwrap();
        let t = Tracker::open_existing(Arc::new(world.clone()), Mode::Keyed).unwrap();
        assert_eq!(t.search("bug"), [(1, "bug".to_owned())]);
        assert!(t.holds_key("k1"));
        // It writes on as open_dir's tracker does.
        t.file_issue("other", "x", None).unwrap();
        let again = Tracker::open_existing(Arc::new(world), Mode::Keyed).unwrap();
        assert_eq!(again.issues().len(), 2);
    }

    #[test]
    fn a_leftover_temp_file_is_not_a_tracker() {
        let world = MemDir::new();
        world.write(".tracker.json-abc.tmp", b"{}").unwrap();
        assert!(matches!(
            Tracker::open_existing(Arc::new(world.clone()), Mode::Keyed),
            Err(TrackerError::Missing { .. })
        ));
        assert!(world.list().unwrap().is_empty(), "the leftover was removed");
    }

    #[test]
    fn a_read_error_is_an_error_not_an_empty_tracker() {
        for existing in [false, true] {
            let dir = FaultDir::new(MemDir::new());
            dir.fail_every(Call::Read, io::ErrorKind::PermissionDenied);
            let r = if existing {
                Tracker::open_existing(Arc::new(dir.clone()), Mode::Keyed)
            } else {
                Tracker::open_dir(Arc::new(dir.clone()), Mode::Keyed)
            };
            assert!(
                matches!(&r, Err(TrackerError::Io { source, .. }) if source.kind() == io::ErrorKind::PermissionDenied),
                "{:?}",
                r.map(|t| t.issues())
            );
        }
    }

    #[test]
    fn a_tracker_path_that_is_not_a_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("tracker.json")).unwrap();
        let dir = durable::DiskDir::new(t.path()).unwrap();
        for existing in [false, true] {
            let r = if existing {
                Tracker::open_existing(Arc::new(dir.clone()), Mode::Keyed)
            } else {
                Tracker::open_dir(Arc::new(dir.clone()), Mode::Keyed)
            };
            let Err(e) = r else {
                panic!("a directory is not a tracker");
            };
            assert!(e.to_string().contains("tracker.json"), "{e}");
            assert!(e.to_string().contains("a directory"), "{e}");
        }
    }

    #[test]
    fn a_tracker_over_the_read_limit_is_refused() {
        let world = MemDir::new();
        let big = vec![b' '; (durable::checkpoint::DEFAULT_MAX_READ_BYTES + 1) as usize];
        world.write("tracker.json", &big).unwrap();
        let Err(e) = Tracker::open_existing(Arc::new(world), Mode::Keyed) else {
            panic!("a tracker over the limit was read");
        };
        assert!(e.to_string().contains("more than the limit"), "{e}");
    }
}

/// A deep copy shares its records with the original until either changes
/// (copy on write): a change on one side — an issue, a comment, a key, a
/// fencing epoch — is never seen on the other, and equal contents hash
/// the same.
#[test]
fn deep_copies_share_records_until_one_side_changes() {
    use std::hash::{DefaultHasher, Hasher};
    let hash = |t: &Tracker| {
        let mut h = DefaultHasher::new();
        t.hash_contents(&mut h);
        h.finish()
    };
    let fence = |epoch| Fence {
        run: "r".to_owned(),
        epoch,
    };
    let a = Tracker::new(Mode::Keyed);
    let n = a.file_issue("x", "y", Some("k1")).unwrap();
    let req = Request::Comment {
        issue: n,
        body: "c".to_owned(),
    };
    a.apply_fenced(&req, Some("k2"), Some(&fence(2))).unwrap();
    let b = a.deep_clone().unwrap();
    assert_eq!(hash(&a), hash(&b));
    let before = a.issues();

    b.comment(n, "on b", Some("k3")).unwrap();
    b.file_issue("only b", "z", None).unwrap();
    assert_eq!(a.issues(), before, "a copy's change reached the original");
    assert!(!a.holds_key("k3"));
    assert_ne!(hash(&a), hash(&b));

    let c = a.deep_clone().unwrap();
    a.apply_fenced(&req, None, Some(&fence(5))).unwrap();
    assert_eq!(c.issues(), before, "the original's change reached a copy");
    // The copy still holds the original's epoch 2, not the 5 raised since:
    // a request at epoch 3 passes there.
    c.apply_fenced(&req, None, Some(&fence(3))).unwrap();
    assert!(a.apply_fenced(&req, None, Some(&fence(3))).is_err());
    assert_eq!(b.issues().len(), 2);
    assert_eq!(b.issues()[0].comments.len(), 2);
}
