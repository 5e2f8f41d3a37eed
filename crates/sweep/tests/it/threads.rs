//! The threads a life starts in its scope (`crashpoint::spawn`) end with
//! it: a life that returns while one still runs fails, naming it, and a
//! crashed life's threads are done before the next life starts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sweep::{report::Failure, Config, Counter, Error, Subject, Verdict};

/// Leaves a thread of its scope running when it returns.
struct LeavesAThread;
impl Subject for LeavesAThread {
    type World = ();
    fn name(&self) -> String {
        "leaves a thread".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("started");
        // Never joined: it passes its point after the life returned.
        let _flusher = crashpoint::spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            crashpoint::point!("flushed");
        });
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// A life that returns with a thread of its scope still running fails,
/// naming the thread. (Before, it passed: the thread's effects would land
/// after the judge.)
#[test]
fn a_life_that_returns_while_its_thread_runs_fails_naming_it() {
    let e = sweep::run(&LeavesAThread, &Config::default()).unwrap_err();
    let Error::CleanRunFailed { reason, .. } = &e else {
        panic!("expected CleanRunFailed, got {e}");
    };
    let Failure::Outlived { threads, .. } = reason.as_ref() else {
        panic!("expected Outlived, got {reason}");
    };
    // Named by where it was started.
    let [thread] = threads.as_slice() else {
        panic!("expected one thread, got {threads:?}");
    };
    assert!(
        thread.starts_with("the thread started at ") && thread.contains("threads.rs:"),
        "{thread}"
    );
    assert!(
        reason
            .to_string()
            .contains("join every thread a life starts"),
        "{reason}"
    );
}

/// What a world holds: each life's number as it started, and the lives
/// started when the worker of a life wrote.
#[derive(Default)]
struct Log {
    lives: u64,
    /// (the worker's life, lives started when it wrote)
    writes: Vec<(u64, u64)>,
}

/// How long [`SlowWorker`]'s worker waits before it writes.
const WORKER_PAUSE: Duration = Duration::from_millis(100);

/// A life whose worker thread writes to the world a while after the life's
/// own crash point; a restart is slow.
struct SlowWorker;
impl Subject for SlowWorker {
    type World = Arc<Mutex<Log>>;
    fn name(&self) -> String {
        "slow worker".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("overlaps").required()]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok(Arc::default())
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        let me = {
            let mut log = w.lock().unwrap();
            log.lives += 1;
            log.lives
        };
        if me > 1 {
            // A restart takes its time: twice the worker's pause, long
            // enough for a worker of the crashed life to act meanwhile, if
            // it could.
            std::thread::sleep(WORKER_PAUSE * 2);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::clone(w);
        let worker = crashpoint::spawn(move || {
            crashpoint::point!("worker started");
            let _ = tx.send(());
            std::thread::sleep(WORKER_PAUSE);
            let mut l = log.lock().unwrap();
            let now = l.lives;
            l.writes.push((me, now));
            drop(l);
            crashpoint::point!("worker wrote");
        });
        let _ = rx.recv();
        crashpoint::point!("main");
        crashpoint::join(worker);
        Ok(())
    }
    fn judge(&self, w: &Self::World) -> Verdict {
        let log = w.lock().unwrap();
        let overlaps = log.writes.iter().filter(|(me, now)| now > me).count();
        Verdict::new().count("overlaps", overlaps as u64)
    }
}

/// A crashed life's worker never acts while the next life runs: the
/// restart waits until the crashed life's threads are gone. (Before, a
/// crash at `main#1` left the worker running into the restart, and the
/// scenario failed, blaming the program for what a real crash cannot do.)
#[test]
fn a_crashed_lifes_threads_are_gone_before_the_restart() {
    let config = Config {
        depth: 1,
        ..Config::default()
    };
    let report = sweep::run(&SlowWorker, &config).unwrap();
    let names: Vec<String> = report
        .scenarios
        .iter()
        .map(|s| s.scenario.to_string())
        .collect();
    assert!(names.contains(&"main#1".to_owned()), "{names:?}");
    let failed: Vec<String> = report
        .failures()
        .map(|s| format!("{}: {:?}", s.scenario, s.failure))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
}
