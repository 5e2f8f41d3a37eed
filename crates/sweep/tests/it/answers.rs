//! Answers that must be true whatever else the process runs: a failure
//! that repeats is not flaky, a thread left running is the program's
//! fault, a world that cannot be compared is said so, and a judge's points
//! are counted.

use std::sync::atomic::{AtomicU64, Ordering};

use sweep::{report::Failure, Config, Counter, Error, Subject, Verdict};

fn cfg(depth: u32) -> Config {
    Config {
        depth,
        ..Config::default()
    }
}

/// Its world is a temporary directory; every restart fails, naming it.
struct FailsNamingItsDir;
impl Subject for FailsNamingItsDir {
    type World = (tempfile::TempDir, u64);
    fn name(&self) -> String {
        "fails naming its directory".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok((tempfile::tempdir()?, 0))
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        w.1 += 1;
        if w.1 > 1 {
            let path = w.0.path().join("r.lock");
            return Err(format!("run is locked by another process: {}", path.display()).into());
        }
        crashpoint::point!("saved");
        Ok(())
    }
    fn judge(&self, _: &Self::World) -> Verdict {
        Verdict::new()
    }
}

/// Two failures that differ only in the world's temporary path are one
/// repeatable failure, not a flaky one. (Before: flaky.)
#[test]
fn a_failure_naming_the_worlds_temporary_path_is_not_flaky() {
    let r = sweep::run(&FailsNamingItsDir, &cfg(1)).unwrap();
    assert_eq!(r.flaky().count(), 0, "{:?}", r.scenarios);
    let failed: Vec<_> = r.failures().collect();
    assert_eq!(failed.len(), 1, "{:?}", r.scenarios);
    assert!(
        matches!(&failed[0].failure, Some(Failure::Stopped { error, .. }) if error.contains("locked")),
        "{:?}",
        failed[0].failure
    );
}

/// Its life starts a plain `std::thread` that passes a point: no crash can
/// land there, so the sweep must refuse it, alone or not.
struct PlainThread;
impl Subject for PlainThread {
    type World = u64;
    fn name(&self) -> String {
        "plain thread".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<u64, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, w: &mut u64) -> Result<(), sweep::LifeError> {
        crashpoint::point!("answers-before");
        std::thread::spawn(|| crashpoint::point!("answers-on-a-plain-thread"))
            .join()
            .map_err(|_| "join")?;
        *w += 1;
        crashpoint::point!("answers-after");
        Ok(())
    }
    fn judge(&self, _: &u64) -> Verdict {
        Verdict::new()
    }
}

/// A correct program: one thread, its points all in its life.
struct OneThread;
impl Subject for OneThread {
    type World = u64;
    fn name(&self) -> String {
        "one thread".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<u64, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, w: &mut u64) -> Result<(), sweep::LifeError> {
        for _ in 0..3 {
            crashpoint::point!("answers-step");
            *w += 1;
        }
        Ok(())
    }
    fn judge(&self, _: &u64) -> Verdict {
        Verdict::new()
    }
    fn describe(&self, w: &u64) -> String {
        w.to_string()
    }
}

/// Another program of the binary: its own plain threads pass other points,
/// again and again, with its sweep's refusal turned off.
struct Neighbour;
impl Subject for Neighbour {
    type World = ();
    fn name(&self) -> String {
        "neighbour".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        for _ in 0..4 {
            crashpoint::point!("neighbour-step");
            std::thread::spawn(|| crashpoint::point!("neighbour-worker"))
                .join()
                .map_err(|_| "join")?;
        }
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// Runs `f` while other sweeps (with plain threads of their own) and a
/// plain thread passing points since before it began run in the process,
/// as in a test binary at `--test-threads=8`.
fn beside_others<R>(f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::AtomicBool;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // No sweep's: it started before any of them and belongs to none.
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                crashpoint::point!("outside-every-sweep");
                std::thread::yield_now();
            }
        });
        for _ in 0..3 {
            s.spawn(|| {
                let config = Config {
                    refuse_unscoped: false,
                    threads: Some(2),
                    ..cfg(2)
                };
                while !stop.load(Ordering::Relaxed) {
                    let r = sweep::run(&Neighbour, &config).unwrap();
                    assert!(r.stray.iter().any(|(n, _)| n == "neighbour-worker"));
                }
            });
        }
        // Stopped on the way out, a failed assertion's too.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        // Let them get going.
        std::thread::sleep(std::time::Duration::from_millis(50));
        f()
    })
}

/// The names in `points` that are not `mine`.
fn foreign(points: &[(String, u64)], mine: &[&str]) -> Vec<String> {
    points
        .iter()
        .filter(|(n, _)| !mine.contains(&n.as_str()))
        .map(|(n, _)| n.clone())
        .collect()
}

fn refused_naming_its_point_alone() {
    let e = sweep::run(&PlainThread, &cfg(1)).unwrap_err();
    let Error::Unscoped { points, .. } = &e else {
        panic!("expected Unscoped, got {e}");
    };
    assert_eq!(
        foreign(points, &["answers-on-a-plain-thread"]),
        Vec::<String>::new()
    );
    assert!(!points.is_empty());
}

/// A life's plain thread refuses the sweep when it runs alone…
#[test]
fn a_lifes_plain_thread_refuses_the_sweep_alone() {
    if !crate::alone("answers::a_lifes_plain_thread_refuses_the_sweep_alone") {
        return;
    }
    refused_naming_its_point_alone();
}

/// … and just the same beside other sweeps, with their plain threads and
/// a thread outside every sweep passing points. (Before, it passed green
/// when other sweeps' lives ran at the same moments.)
#[test]
fn a_lifes_plain_thread_refuses_the_sweep_beside_other_sweeps() {
    beside_others(|| {
        for _ in 0..5 {
            refused_naming_its_point_alone();
        }
    });
}

/// A thread that is no part of the sweep, passing points since before it
/// began, never refuses a correct program, and neither it nor the other
/// sweeps' plain threads are listed under it. (Before, the default config
/// refused it in about 8 runs of 20.)
#[test]
fn a_correct_program_beside_other_threads_and_sweeps_is_never_refused() {
    beside_others(|| {
        for _ in 0..5 {
            let r = sweep::run(&OneThread, &cfg(2)).unwrap();
            assert_eq!(r.failures().count(), 0);
            let listed = foreign(&r.stray, &["outside-every-sweep"]);
            assert!(listed.is_empty(), "{listed:?}");
        }
    });
}

/// Leaves a thread of its scope at work when it returns: a moment later
/// the thread passes a point and writes to the world.
struct LateWrite {
    /// The judge counts the late write (a required counter).
    counted: bool,
}
impl Subject for LateWrite {
    type World = std::sync::Arc<AtomicU64>;
    fn name(&self) -> String {
        "late write".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("late").required()]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok(Default::default())
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        crashpoint::point!("started");
        let w = std::sync::Arc::clone(w);
        // Never joined.
        let _flusher = crashpoint::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            crashpoint::point!("flushing");
            w.fetch_add(1, Ordering::SeqCst);
        });
        Ok(())
    }
    fn judge(&self, w: &Self::World) -> Verdict {
        let late = if self.counted {
            w.load(Ordering::SeqCst)
        } else {
            0
        };
        Verdict::new().count("late", late)
    }
}

/// A thread still at work when its life returns fails the life at once
/// (`Outlived`), whether the judge counts its write or not, and the write
/// never reaches the world the judge sees. (Before, it was waited for: the
/// write landed, and the clean run was refused as "the judge is wrong",
/// or passed when the judge did not count it.)
#[test]
fn a_thread_at_work_when_its_life_returns_fails_the_life() {
    for counted in [true, false] {
        let e = sweep::run(&LateWrite { counted }, &cfg(1)).unwrap_err();
        let Error::CleanRunFailed { reason, .. } = &e else {
            panic!("expected CleanRunFailed, got {e}");
        };
        let Failure::Outlived { threads, .. } = reason.as_ref() else {
            panic!("expected Outlived, got {reason}");
        };
        assert!(
            threads.iter().any(|t| t.contains("answers.rs:")),
            "{threads:?}"
        );
        assert!(!e.to_string().contains("the judge is wrong"), "{e}");
    }
}

/// Builds its world's list from a `HashSet`, with no `describe` and no
/// fingerprint: the same hits and verdict every time.
struct SetOrderUndescribed;
impl Subject for SetOrderUndescribed {
    type World = Vec<u32>;
    fn name(&self) -> String {
        "set order, undescribed".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("items")]
    }
    fn world(&self) -> Result<Vec<u32>, sweep::LifeError> {
        Ok(Vec::new())
    }
    fn life(&self, w: &mut Vec<u32>) -> Result<(), sweep::LifeError> {
        let set: std::collections::HashSet<u32> = (0..32).collect();
        crashpoint::point!("collected");
        w.extend(set);
        Ok(())
    }
    fn judge(&self, w: &Vec<u32>) -> Verdict {
        Verdict::new().count("items", w.len() as u64)
    }
}

/// A sweep that cannot compare its clean runs' worlds says so, once, with
/// how to make it. (Before, it passed with nothing said.)
#[test]
fn clean_runs_whose_worlds_cannot_be_compared_are_said_so() {
    let r = sweep::run(&SetOrderUndescribed, &cfg(1)).unwrap();
    let said: Vec<&String> = r
        .notices
        .iter()
        .filter(|n| n.contains("worlds were not compared"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", r.notices);
    assert!(said[0].contains("Subject::describe"), "{}", said[0]);
    // Described, it is compared: no such notice (another test's thread
    // may bring one of its own meanwhile).
    let r = sweep::run(&OneThread, &cfg(1)).unwrap();
    assert!(
        !r.notices
            .iter()
            .any(|n| n.contains("worlds were not compared")),
        "{:?}",
        r.notices
    );
}

/// Its judge passes a point (through code of the program it calls).
struct PointInJudge;
impl Subject for PointInJudge {
    type World = ();
    fn name(&self) -> String {
        "point in the judge".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("lived");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        crashpoint::point!("answers-judged");
        Verdict::new()
    }
    fn describe(&self, _: &()) -> String {
        "nothing".into()
    }
}

/// A point passed inside the judge is counted with the sweep's passes
/// outside any life (`Report::unscoped`). (Before, it was in no tally.)
#[test]
fn a_point_passed_in_the_judge_is_counted() {
    let r = sweep::run(&PointInJudge, &cfg(1)).unwrap();
    let judged = r.unscoped.iter().find(|(n, _)| n == "answers-judged");
    // Two clean runs and one scenario, each judged once.
    assert_eq!(
        judged,
        Some(&("answers-judged".to_owned(), 3)),
        "{:?}",
        r.unscoped
    );
}
