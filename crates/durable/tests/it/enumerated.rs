//! The enumerated crash states of `PowerDir`: every disk the persistence
//! model allows, the real writer surviving all of them at every step of a
//! save, and each broken writer losing a returned save in some of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use durable::testing::{DiskState, MutantDir, Mutation, PersistenceModel, PowerDir};
use durable::write::{write_atomic, WriteOptions};
use durable::Dir;

const SYNCED: WriteOptions = WriteOptions {
    sync: true,
    points: false,
};

/// The steps of a save of `new` over a synced `old`, for a writer
/// (`mutation`), cut after `steps` of them: returns the file after a cut in
/// each enumerated state, and whether the save had returned.
fn cut_after(mutation: Option<Mutation>, steps: usize) -> (Vec<Option<Vec<u8>>>, bool) {
    let model = PersistenceModel::default();
    let (count, returned) = run(&PowerDir::enumerated(model, vec![]), mutation, steps);
    let mut seen = Vec::new();
    for i in 0..count {
        let d = PowerDir::enumerated(model, vec![i]);
        run(&d, mutation, steps);
        d.power_cut();
        assert_eq!(d.cut_log()[0].chosen, i);
        seen.push(d.read("f").unwrap());
    }
    (seen, returned)
}

/// Write "old" (whole save), then the first `steps` calls of the save of
/// "new"; the number of crash states at that moment, and whether the save
/// of "new" returned.
fn run(d: &PowerDir, mutation: Option<Mutation>, steps: usize) -> (usize, bool) {
    // The save's calls on the disk, one by one, as the writer (and the
    // mutation inside it) makes them.
    let counter = Counting {
        inner: d.clone(),
        left: Arc::new(AtomicUsize::new(usize::MAX)),
    };
    let dir: Box<dyn Dir> = match mutation {
        None => Box::new(counter.clone()),
        Some(m) => Box::new(MutantDir::new(counter.clone(), m)),
    };
    write_atomic(dir.as_ref(), "f", b"old", SYNCED).unwrap();
    counter.left.store(steps, Ordering::Relaxed);
    let done = write_atomic(dir.as_ref(), "f", b"new", SYNCED).is_ok();
    (d.crash_states().states, done)
}

/// A directory that passes `left` mutating calls through, then fails: the
/// power goes after that many steps.
#[derive(Clone)]
struct Counting {
    inner: PowerDir,
    left: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counting")
    }
}

impl Counting {
    fn step(&self) -> std::io::Result<()> {
        match self.left.load(Ordering::Relaxed) {
            0 => Err(std::io::Error::other("cut here")),
            n => {
                self.left.store(n - 1, Ordering::Relaxed);
                Ok(())
            }
        }
    }
}

impl Dir for Counting {
    fn create_temp(&self, prefix: &str) -> std::io::Result<String> {
        self.step()?;
        self.inner.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> std::io::Result<()> {
        self.step()?;
        self.inner.write(name, data)
    }
    fn sync(&self, name: &str) -> std::io::Result<()> {
        self.step()?;
        self.inner.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        self.step()?;
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> std::io::Result<()> {
        self.step()?;
        self.inner.sync_dir()
    }
    fn read(&self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.inner.read(name)
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        // After the cut nothing reaches the disk (the writer's cleanup).
        if self.left.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.step()?;
        self.inner.remove(name)
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn lock(&self, name: &str) -> std::io::Result<durable::dir::LockGuard> {
        self.inner.lock(name)
    }
    fn path_of(&self, name: &str) -> std::path::PathBuf {
        self.inner.path_of(name)
    }
}

#[test]
fn the_real_writer_holds_old_or_new_in_every_state_at_every_step() {
    let mut total = 0;
    for steps in 0..=5 {
        let (seen, returned) = cut_after(None, steps);
        total += seen.len();
        for got in &seen {
            let got = got.as_deref();
            assert!(
                got == Some(b"old") || got == Some(b"new"),
                "after {steps} steps: {got:?}"
            );
            if returned {
                assert_eq!(got, Some(&b"new"[..]), "a returned save is kept");
            }
        }
    }
    assert!(total > 6, "more states than steps: {total}");
}

/// Does some state lose a returned save, or leave neither old nor new?
fn caught(m: Mutation) -> bool {
    (0..=8).any(|steps| {
        let (seen, returned) = cut_after(Some(m), steps);
        seen.iter().any(|got| {
            let got = got.as_deref();
            (returned && got != Some(b"new")) || (got != Some(b"old") && got != Some(b"new"))
        })
    })
}

#[test]
fn every_mutation_is_caught_by_the_enumerated_states() {
    for m in Mutation::ALL {
        assert!(caught(m), "{m:?} survives every enumerated state");
    }
}

#[test]
fn remove_first_is_missed_by_the_six_named_states_and_caught_by_enumeration() {
    // Cut the mutant's save right after its rename (before the directory
    // sync): the window where the remove and the rename are both unsynced.
    for state in DiskState::ALL {
        let d = PowerDir::new(state);
        let counter = Counting {
            inner: d.clone(),
            left: Arc::new(AtomicUsize::new(usize::MAX)),
        };
        let dir = MutantDir::new(counter.clone(), Mutation::RemoveFirst);
        write_atomic(&dir, "f", b"old", SYNCED).unwrap();
        counter.left.store(5, Ordering::Relaxed); // create, write, sync, remove, rename
        assert!(write_atomic(&dir, "f", b"new", SYNCED).is_err());
        d.power_cut();
        let got = d.read("f").unwrap();
        assert!(
            got.as_deref() == Some(b"old") || got.as_deref() == Some(b"new"),
            "{state:?} catches it: {got:?}"
        );
    }
    let (seen, _) = cut_after(Some(Mutation::RemoveFirst), 5);
    assert!(
        seen.contains(&None),
        "some enumerated state has no file: {seen:?}"
    );
}

#[test]
fn enumeration_is_deterministic_and_bounded_and_samples_with_the_extremes() {
    // Many unsynced operations on many files: far more combinations than
    // the bound.
    let build = |plan: Vec<usize>, bound: usize| {
        let model = PersistenceModel {
            bound,
            ..PersistenceModel::default()
        };
        let d = PowerDir::enumerated(model, plan);
        for i in 0..8 {
            d.write(&format!("f{i}"), &vec![b'a' + i as u8; 1500])
                .unwrap();
            d.write(&format!("f{i}"), b"second").unwrap();
        }
        d.rename("f0", "g0").unwrap();
        d
    };
    let r = build(vec![], 64).crash_states();
    assert!(r.sampled && r.combinations > 64, "{r:?}");
    assert!(r.states <= 64 && r.states > 4, "{r:?}");
    assert_eq!(build(vec![], 64).crash_states(), r, "deterministic");
    // State 0 keeps nothing unsynced; state 1 everything (the extremes).
    let d = build(vec![0], 64);
    d.power_cut();
    assert_eq!(d.list().unwrap(), Vec::<String>::new());
    let d = build(vec![1], 64);
    d.power_cut();
    assert_eq!(d.list().unwrap().len(), 8);
    assert_eq!(d.read("g0").unwrap().as_deref(), Some(&b"second"[..]));
    // Under the bound nothing is sampled.
    let d = PowerDir::enumerated(PersistenceModel::default(), vec![]);
    d.write("a", b"1").unwrap();
    let r = d.crash_states();
    assert!(!r.sampled);
    assert_eq!(r.combinations, 2 * 3);
}

#[test]
fn a_plan_past_its_end_applies_state_zero_and_logs_each_cut() {
    let d = PowerDir::enumerated(PersistenceModel::default(), vec![99]);
    d.boot();
    d.write("a", b"1").unwrap();
    assert!(d.boot());
    d.write("b", b"2").unwrap();
    assert!(d.boot());
    let log = d.cut_log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].chosen, log[0].states - 1, "clamped to the last");
    assert_eq!(log[1].chosen, 0);
    assert_eq!(d.list().unwrap(), ["a"]);
}
