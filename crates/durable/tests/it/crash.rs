//! Crashes at the save's points, restarts, and the restart limit.

use std::sync::Arc;

use crashpoint::{crash_at, record, Hit, Outcome};
use durable::testing::MemDir;
use durable::{Dir, DiskDir, Error, Options, RunId};

use crate::{fast, open, run_id, temp_files, Checkpoint, Phase, State};

/// One life: open the run, then save once with `turns` = 1.
fn life(dir: Arc<dyn Dir>, run: &RunId) {
    let mut opened = Checkpoint::open(dir, run, fast()).unwrap();
    opened.state.turns += 1;
    opened.state.phase = Phase::Tools;
    opened.checkpoint.save(&opened.state).unwrap();
}

fn names(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(Hit::to_string).collect()
}

#[test]
fn a_clean_first_life_passes_two_saves() {
    let world = MemDir::new();
    let run = run_id("r");
    let l = record(|| life(Arc::new(world.clone()), &run));
    assert!(matches!(l.outcome, Outcome::Finished(())));
    assert_eq!(
        names(&l.hits),
        [
            "mid-save#1",
            "after rename#1",
            "mid-save#2",
            "after rename#2"
        ]
    );
}

fn crash_mid_save_keeps_the_old_checkpoint(dir: Arc<dyn Dir>) {
    let run = run_id("r");
    let l = crash_at(Hit::new("mid-save", 2), || life(dir.clone(), &run));
    assert_eq!(l.outcome, Outcome::Crashed(Hit::new("mid-save", 2)));

    // The start save survived; the second save's data sits in a temp file.
    let state = Checkpoint::load(dir.as_ref(), &run).unwrap().unwrap();
    assert_eq!((state.turns, state.phase), (0, Phase::Model));
    let temps = temp_files(dir.as_ref());
    assert_eq!(temps.len(), 1, "{temps:?}");
    assert!(temps[0].starts_with(".r.json-"));

    // The next open removes it, ignores it, and counts the restart.
    let opened = Checkpoint::open(dir.clone(), &run, fast()).unwrap();
    assert!(opened.resumed);
    assert_eq!((opened.state.turns, opened.resumes), (0, 1));
    assert!(temp_files(dir.as_ref()).is_empty());
}

fn crash_after_rename_keeps_the_new_checkpoint(dir: Arc<dyn Dir>) {
    let run = run_id("r");
    let l = crash_at(Hit::new("after rename", 2), || life(dir.clone(), &run));
    assert_eq!(l.outcome, Outcome::Crashed(Hit::new("after rename", 2)));
    let state = Checkpoint::load(dir.as_ref(), &run).unwrap().unwrap();
    assert_eq!((state.turns, state.phase), (1, Phase::Tools));
    assert!(temp_files(dir.as_ref()).is_empty());

    let opened = Checkpoint::open(dir, &run, fast()).unwrap();
    assert_eq!((opened.state.turns, opened.resumes), (1, 1));
}

#[test]
fn mid_save_crash_keeps_old_checkpoint_mem() {
    crash_mid_save_keeps_the_old_checkpoint(Arc::new(MemDir::new()));
}

#[test]
fn mid_save_crash_keeps_old_checkpoint_disk() {
    let t = tempfile::tempdir().unwrap();
    crash_mid_save_keeps_the_old_checkpoint(Arc::new(DiskDir::new(t.path()).unwrap()));
}

#[test]
fn after_rename_crash_keeps_new_checkpoint_mem() {
    crash_after_rename_keeps_the_new_checkpoint(Arc::new(MemDir::new()));
}

#[test]
fn after_rename_crash_keeps_new_checkpoint_disk() {
    let t = tempfile::tempdir().unwrap();
    crash_after_rename_keeps_the_new_checkpoint(Arc::new(DiskDir::new(t.path()).unwrap()));
}

#[test]
fn a_crash_in_the_start_save_starts_fresh_next_time() {
    // Nothing was published: the next open sees no checkpoint at all.
    let world = MemDir::new();
    let run = run_id("r");
    let l = crash_at(Hit::new("mid-save", 1), || {
        life(Arc::new(world.clone()), &run)
    });
    assert!(l.outcome.crashed().is_some());
    assert_eq!(Checkpoint::load(&world, &run).unwrap(), None);
    let opened = open(&world, &run, fast()).unwrap();
    assert!(!opened.resumed);
    assert_eq!(opened.resumes, 0);
    assert_eq!(world.list().unwrap(), ["r.json", "r.lock"]);
}

#[test]
fn leftovers_of_other_runs_are_not_touched() {
    let world = MemDir::new();
    // A run whose ID extends "a" into something that looks like a's temp
    // prefix, and a file that is not a temp file of "a" at all.
    for name in [
        ".a.json-b.json-123.tmp",
        ".a.json-.tmp",
        ".b.json-1.tmp",
        "a.json-1.tmp",
    ] {
        world.write(name, b"x").unwrap();
    }
    world.write(".a.json-7.tmp", b"x").unwrap();
    let _opened = open(&world, &run_id("a"), fast()).unwrap();
    let left = temp_files(&world);
    assert_eq!(
        left,
        [
            ".a.json-.tmp",
            ".a.json-b.json-123.tmp",
            ".b.json-1.tmp",
            "a.json-1.tmp"
        ]
    );
}

/// Every restart dies at the first `after rename` of its life (the restart
/// count has just been saved). The run must still reach its limit, and then
/// stay refused without writing anything.
#[test]
fn restart_limit_is_reached_when_every_life_dies_after_opening() {
    let world = MemDir::new();
    let run = run_id("crashy");
    let limit = Options::default().max_resumes.unwrap();
    let mut lives = 0;
    let refused = loop {
        lives += 1;
        assert!(lives <= 2 * limit + 5, "no MaxResumes after {lives} lives");
        let l = crash_at(Hit::new("after rename", 1), || {
            Checkpoint::open(Arc::new(world.clone()), &run, fast()).map(|_| ())
        });
        match l.outcome {
            Outcome::Crashed(_) => {
                let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
                assert_eq!(saved.resumes, lives - 1, "the count is saved first");
            }
            Outcome::Finished(Err(e)) => break (e, l.hits),
            other => panic!("life {lives}: {other:?}"),
        }
    };
    // Lives 1..=limit+2 crashed (fresh start, then restarts 1..=limit+1).
    assert_eq!(lives, limit + 3);
    let (err, hits) = refused;
    match &err {
        Error::MaxResumes {
            path,
            resumes,
            limit: l,
        } => {
            assert_eq!((*resumes, *l), (limit + 1, limit));
            assert_eq!(path.to_str(), Some("mem:/crashy.json"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("mem:/crashy.json"), "{err}");
    // The refusal reached no point: it wrote nothing.
    assert!(hits.is_empty(), "{hits:?}");
}

#[test]
fn a_custom_limit_counts_clean_restarts() {
    let world = MemDir::new();
    let run = run_id("r");
    let opts = Options {
        sync: false,
        max_resumes: Some(2),
        ..Options::default()
    };
    assert_eq!(open(&world, &run, opts).unwrap().resumes, 0);
    assert_eq!(open(&world, &run, opts).unwrap().resumes, 1);
    assert_eq!(open(&world, &run, opts).unwrap().resumes, 2);
    // The third restart is counted (saved), then refused.
    let e = open(&world, &run, opts).unwrap_err();
    assert!(
        matches!(
            e,
            Error::MaxResumes {
                resumes: 3,
                limit: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(Checkpoint::load(&world, &run).unwrap().unwrap().resumes, 3);
    // Later attempts are refused the same way, without writing.
    let before = crate::snapshot(&world);
    let e = open(&world, &run, opts).unwrap_err();
    assert!(
        matches!(
            e,
            Error::MaxResumes {
                resumes: 3,
                limit: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(crate::snapshot(&world), before);
    // The lock was released with each refusal.
    let _g = world.lock("r.lock").unwrap();
}

#[test]
fn a_limit_of_zero_refuses_the_first_restart() {
    let world = MemDir::new();
    let run = run_id("r");
    let opts = Options {
        sync: false,
        max_resumes: Some(0),
        ..Options::default()
    };
    open(&world, &run, opts).unwrap();
    assert!(matches!(
        open(&world, &run, opts),
        Err(Error::MaxResumes {
            resumes: 1,
            limit: 0,
            ..
        })
    ));
}

#[test]
fn a_done_run_is_returned_without_saving_or_counting() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    opened.state.phase = Phase::Done;
    opened.state.answer = Some("filed #12".into());
    opened.checkpoint.save(&opened.state).unwrap();
    let done = opened.state.clone();
    drop(opened);

    let before = crate::snapshot(&world);
    for _ in 0..3 {
        let l = record(|| open(&world, &run, fast()).unwrap());
        assert!(
            l.hits.is_empty(),
            "restarting a done run reached {:?}",
            l.hits
        );
        let Outcome::Finished(again) = l.outcome else {
            panic!("{:?}", l.outcome)
        };
        assert!(again.resumed);
        assert_eq!(again.state, done);
    }
    assert_eq!(crate::snapshot(&world), before);
    // Even a zero limit does not refuse a finished run.
    let opts = Options {
        sync: false,
        max_resumes: Some(0),
        ..Options::default()
    };
    assert_eq!(
        open(&world, &run, opts).unwrap().state.answer.as_deref(),
        Some("filed #12")
    );
}

#[test]
fn save_refuses_states_that_could_not_be_loaded_back() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    let before = crate::snapshot(&world);

    let mut nan = opened.state.clone();
    nan.dollars = f64::NAN;
    let mut inf = opened.state.clone();
    inf.dollars = f64::INFINITY;
    for bad in [nan, inf] {
        let e = opened.checkpoint.save(&bad).unwrap_err();
        assert!(matches!(e, Error::InvalidState { .. }), "{e:?}");
        assert!(e.to_string().contains("mem:/r.json"), "{e}");
    }
    assert_eq!(crate::snapshot(&world), before);
}

#[test]
fn a_fresh_run_is_saved_at_once() {
    let world = MemDir::new();
    let run = run_id("r");
    let opened = open(&world, &run, fast()).unwrap();
    assert!(!opened.resumed);
    assert_eq!(opened.state, State::default());
    assert_eq!(opened.checkpoint.run(), &run);
    assert_eq!(opened.checkpoint.path().to_str(), Some("mem:/r.json"));
    assert_eq!(
        Checkpoint::load(&world, &run).unwrap().map(|s| s.state),
        Some(State::default())
    );
}

#[test]
fn synced_saves_work_on_disk() {
    let t = tempfile::tempdir().unwrap();
    let run = run_id("synced");
    let mut opened = Checkpoint::open_path(t.path().join("new"), &run, Options::default()).unwrap();
    opened.state.turns = 5;
    opened.checkpoint.save(&opened.state).unwrap();
    drop(opened);
    let again = Checkpoint::open_path(t.path().join("new"), &run, Options::default()).unwrap();
    assert_eq!((again.state.turns, again.resumes), (5, 1));
}

#[test]
fn restarts_are_not_counted_without_a_limit() {
    let world = MemDir::new();
    let run = run_id("r");
    let opts = Options {
        sync: false,
        max_resumes: None,
        ..Options::default()
    };
    open(&world, &run, opts).unwrap();
    for _ in 0..3 {
        let l = record(|| open(&world, &run, opts).unwrap());
        assert!(
            l.hits.is_empty(),
            "an uncounted restart saved: {:?}",
            l.hits
        );
        let Outcome::Finished(again) = l.outcome else {
            panic!("{:?}", l.outcome)
        };
        assert!(again.resumed);
        assert_eq!(again.resumes, 0);
    }
}

#[test]
fn open_with_saves_the_given_fresh_start() {
    let world = MemDir::new();
    let run = run_id("r");
    let fresh = State {
        turns: 7,
        ..State::default()
    };
    let l = record(|| {
        drop(
            Checkpoint::open_with(Arc::new(world.clone()), &run, fast(), || fresh.clone()).unwrap(),
        )
    });
    assert_eq!(l.hits.len(), 2, "the start save: {:?}", l.hits);
    let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
    assert_eq!(saved.state, fresh);
    // A restart ignores the fresh start it is given.
    let again =
        Checkpoint::open_with(Arc::new(world.clone()), &run, fast(), State::default).unwrap();
    assert_eq!((again.state.turns, again.resumes), (7, 1));
}
