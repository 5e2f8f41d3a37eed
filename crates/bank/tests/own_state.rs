//! A crate outside `durable` checkpoints its own struct with
//! `durable::Checkpoint<S>`: the promises hold for any state type.
//!
//! A binary of its own, apart from `bank_sweep.rs`: its saves pass the
//! store's points on plain test threads, which would be counted for a
//! sweep of `bank_sweep.rs` whose clean run alone had lives running at the
//! time, and refused there (`Config::refuse_unscoped`).

use std::sync::Arc;

use bank::{JobState, Receipt};
use durable::testing::MemDir;
use durable::{Checkpoint, Dir, Error, Options, RunId};

const OPTS: Options = Options {
    sync: false,
    max_resumes: Some(3),
    max_read_bytes: durable::checkpoint::DEFAULT_MAX_READ_BYTES,
    compact: false,
};

fn open(world: &MemDir) -> durable::Result<durable::Opened<JobState>> {
    let run = RunId::parse("payday").unwrap();
    Checkpoint::open_with(Arc::new(world.clone()), &run, OPTS, || JobState {
        run: "payday-1".into(),
        ..JobState::default()
    })
}

fn files(world: &MemDir) -> Vec<(String, Vec<u8>)> {
    let names = world.list().unwrap();
    names
        .into_iter()
        .map(|n| {
            let data = world.read(&n).unwrap().unwrap_or_default();
            (n, data)
        })
        .collect()
}

#[test]
fn a_job_state_is_started_saved_resumed_and_finished() {
    let world = MemDir::new();

    // Fresh start: the given state, saved at once.
    let mut first = open(&world).unwrap();
    assert!(!first.resumed);
    assert_eq!(first.resumes, 0);
    assert!(
        world.read("payday.json").unwrap().is_some(),
        "saved at once"
    );

    // Locked while open.
    assert!(matches!(open(&world), Err(Error::Locked { .. })));

    first.state.done.insert("t1".into(), Receipt(1));
    first.checkpoint.save(&first.state).unwrap();
    drop(first);

    // Reopening counts the restart and gives back what was saved.
    let mut second = open(&world).unwrap();
    assert!(second.resumed);
    assert_eq!(second.resumes, 1);
    assert_eq!(
        second.state.run, "payday-1",
        "the fresh start is not used again"
    );
    assert_eq!(second.state.done.get("t1"), Some(&Receipt(1)));

    // Finished (every transfer has its receipt): handed back untouched.
    for (i, t) in bank::BATCH.iter().enumerate() {
        second.state.done.insert(t.id.into(), Receipt(i + 1));
    }
    second.checkpoint.save(&second.state).unwrap();
    drop(second);
    let before = files(&world);
    for _ in 0..5 {
        // More than the limit of 3: a finished run is never counted.
        let done = open(&world).unwrap();
        assert!(done.resumed);
        assert_eq!(done.resumes, 1);
        assert_eq!(done.state.done.len(), bank::BATCH.len());
    }
    assert_eq!(files(&world), before, "nothing written");
}

#[test]
fn a_corrupt_job_file_is_refused_and_left_alone() {
    let world = MemDir::new();
    world
        .write("payday.json", b"{\"version\": 2, \"run\": \"pay")
        .unwrap();
    let e = open(&world).unwrap_err();
    assert!(matches!(e, Error::Truncated { .. }), "{e:?}");
    assert!(e.to_string().contains("mem:/payday.json"), "{e}");

    world
        .write(
            "payday.json",
            br#"{"version": 2, "run": "payday", "state": {"done": 7}}"#,
        )
        .unwrap();
    let e = open(&world).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("mem:/payday.json"), "{e}");
    assert_eq!(
        world.read("payday.json").unwrap().as_deref(),
        Some(&br#"{"version": 2, "run": "payday", "state": {"done": 7}}"#[..]),
        "never replaced by a fresh start"
    );
}
