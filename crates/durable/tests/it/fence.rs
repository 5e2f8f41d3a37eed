//! Fencing: a lock is checked against its path, and a holder whose lock was
//! taken from under it cannot save over a newer holder's checkpoint.

use std::fs;
use std::path::Path;

use crashpoint::{record, Outcome};
use durable::dir::FileKind;
use durable::{Error, Options};

use crate::{fast, open, run_id, Checkpoint, Phase, State};

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn stale_holder_is_fenced(opts: Options) {
    let t = tempfile::tempdir().unwrap();
    let run = run_id("r");
    let mut stale = Checkpoint::open_path(t.path(), &run, opts).unwrap();
    stale.state.turns = 1;
    stale.checkpoint.save(&stale.state).unwrap();
    let stale_epoch = stale.checkpoint.epoch();

    // Someone deletes the lock file under the first holder; a second process
    // takes a new lock on a new file and runs the run to its end.
    fs::remove_file(t.path().join("r.lock")).unwrap();
    let mut newer = Checkpoint::open_path(t.path(), &run, opts).unwrap();
    assert!(newer.checkpoint.epoch() > stale_epoch);
    newer.state.turns = 5;
    newer.state.phase = Phase::Done;
    newer.checkpoint.save(&newer.state).unwrap();
    let newer_epoch = newer.checkpoint.epoch();
    drop(newer);

    let before = fs::read(t.path().join("r.json")).unwrap();
    let names = files(t.path());
    stale.state.turns = 2;
    let e = stale.checkpoint.save(&stale.state).unwrap_err();
    match &e {
        Error::Fenced {
            path,
            ours,
            on_disk,
        } => {
            assert_eq!(path, &t.path().join("r.json"));
            assert_eq!((*ours, *on_disk), (stale_epoch, newer_epoch));
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(e.to_string().contains("newer holder"), "{e}");
    assert_eq!(
        fs::read(t.path().join("r.json")).unwrap(),
        before,
        "file unchanged"
    );
    assert_eq!(files(t.path()), names, "no temp file left behind");
    let saved = Checkpoint::load(&durable::DiskDir::new(t.path()).unwrap(), &run)
        .unwrap()
        .unwrap();
    assert_eq!((saved.turns, saved.phase), (5, Phase::Done));
}

#[test]
fn a_stale_holder_whose_lock_was_deleted_cannot_save_over_a_newer_one() {
    stale_holder_is_fenced(fast());
}

#[test]
fn a_stale_holder_is_fenced_without_a_restart_limit_too() {
    stale_holder_is_fenced(Options {
        max_resumes: None,
        ..fast()
    });
}

#[test]
fn each_open_of_an_unfinished_run_saves_a_higher_epoch_first() {
    for max_resumes in [Some(10), None] {
        let world = durable::testing::MemDir::new();
        let run = run_id("r");
        let opts = Options {
            max_resumes,
            ..fast()
        };
        for expected in 1..4u64 {
            let mut opened = open(&world, &run, opts).unwrap();
            assert_eq!(opened.checkpoint.epoch(), expected);
            let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
            assert_eq!(saved.epoch, expected, "saved before open returns");
            // A holder's own saves are never fenced, and keep its epoch.
            opened.state.turns += 1;
            opened.checkpoint.save(&opened.state).unwrap();
            opened.checkpoint.save(&opened.state).unwrap();
            assert_eq!(
                Checkpoint::load(&world, &run).unwrap().unwrap().epoch,
                expected
            );
        }
    }
}

#[test]
fn a_finished_run_keeps_its_epoch_and_saves_nothing() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    opened.state.phase = Phase::Done;
    opened.checkpoint.save(&opened.state).unwrap();
    drop(opened);
    let before = crate::snapshot(&world);
    let again = open(&world, &run, fast()).unwrap();
    assert_eq!(again.checkpoint.epoch(), 1);
    assert_eq!(crate::snapshot(&world), before);
}

#[test]
fn a_file_from_before_epochs_reads_as_epoch_zero() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    durable::Dir::write(
        &world,
        "r.json",
        br#"{"version":2,"run":"r","state":{"phase":"model"}}"#,
    )
    .unwrap();
    assert_eq!(Checkpoint::load(&world, &run).unwrap().unwrap().epoch, 0);
    let opened = open(&world, &run, fast()).unwrap();
    assert_eq!(opened.checkpoint.epoch(), 1);
}

#[test]
fn the_fencing_read_passes_no_crash_point() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    let state = State::default();
    let life = record(|| opened.checkpoint.save(&state).unwrap());
    assert!(matches!(life.outcome, Outcome::Finished(())));
    let hits: Vec<String> = life.hits.iter().map(|h| h.to_string()).collect();
    assert_eq!(hits, ["mid-save#1", "after rename#1"]);
}

#[test]
fn a_lock_path_that_is_a_symlink_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("elsewhere.lock");
    std::os::unix::fs::symlink(&target, t.path().join("r.lock")).unwrap();
    let e = Checkpoint::open_path(t.path(), &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(&e, Error::NotRegularFile { path, found: FileKind::Symlink } if path == &t.path().join("r.lock")),
        "{e:?}"
    );
    assert!(
        !target.exists(),
        "the lock file was created outside the directory"
    );
    assert!(!t.path().join("r.json").exists(), "nothing was started");
    assert!(e.to_string().contains("r.lock"), "{e}");
}

#[test]
fn a_lock_path_that_is_a_directory_or_fifo_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("a.lock")).unwrap();
    crate::not_a_file::mkfifo(&t.path().join("b.lock"));
    for (run, kind) in [("a", FileKind::Directory), ("b", FileKind::Fifo)] {
        let e = Checkpoint::open_path(t.path(), &run_id(run), fast()).unwrap_err();
        assert!(
            matches!(&e, Error::NotRegularFile { found, .. } if *found == kind),
            "{run}: {e:?}"
        );
        assert!(!t.path().join(format!("{run}.json")).exists());
    }
}

/// A state that takes both of `Durable`'s defaults.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Plain {
    n: u32,
}

impl durable::Durable for Plain {}

#[test]
fn a_state_with_the_defaults_is_never_finished_and_always_valid() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    let mut first =
        durable::Checkpoint::<Plain>::open(std::sync::Arc::new(world.clone()), &run, fast())
            .unwrap();
    first.state.n = u32::MAX;
    first.checkpoint.save(&first.state).unwrap();
    drop(first);
    let again =
        durable::Checkpoint::<Plain>::open(std::sync::Arc::new(world), &run, fast()).unwrap();
    // Not finished: the restart is counted and a new epoch saved.
    assert_eq!((again.resumes, again.checkpoint.epoch()), (1, 2));
    assert_eq!(again.state.n, u32::MAX);
}

#[test]
fn a_checkpoint_debugs_as_its_path_restarts_and_epoch() {
    let world = durable::testing::MemDir::new();
    let opened = open(&world, &run_id("r"), fast()).unwrap();
    let shown = format!("{:?}", opened.checkpoint);
    for part in ["Checkpoint", "mem:/r.json", "resumes: 0", "epoch: 1"] {
        assert!(shown.contains(part), "{part} missing from {shown}");
    }
}
