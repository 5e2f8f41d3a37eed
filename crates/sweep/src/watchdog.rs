//! The watchdog: the lives running now, each with its scenario's deadline,
//! and one thread that stops those past it at their next point.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crashpoint::scope::Handle;

use crate::scenario::Scenario;

/// Stops a [`Watchdog`] when dropped, unwinding included.
pub(crate) struct StopOnDrop<'w>(pub(crate) &'w Watchdog);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The lives running now, each with its scenario's deadline; one thread
/// stops those past it at their next point.
pub(crate) struct Watchdog {
    pub(crate) limit: Option<Duration>,
    running: Mutex<Vec<Watched>>,
    next: AtomicU64,
    done: Mutex<bool>,
    wake: Condvar,
    warned: AtomicBool,
}

struct Watched {
    id: u64,
    deadline: Instant,
    handle: Handle,
    scenario: String,
    cancelled_at: Option<Instant>,
}

impl Watchdog {
    pub(crate) fn new(limit: Option<Duration>) -> Self {
        Watchdog {
            limit,
            running: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            done: Mutex::new(false),
            wake: Condvar::new(),
            warned: AtomicBool::new(false),
        }
    }

    fn running(&self) -> MutexGuard<'_, Vec<Watched>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch `handle` until [`Watchdog::forget`] with the id returned.
    pub(crate) fn register(
        &self,
        handle: &Handle,
        deadline: Instant,
        scenario: &Scenario,
    ) -> Option<u64> {
        self.limit?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.running().push(Watched {
            id,
            deadline,
            handle: handle.clone(),
            scenario: scenario.to_string(),
            cancelled_at: None,
        });
        Some(id)
    }

    pub(crate) fn forget(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.running().retain(|w| w.id != id);
        }
    }

    pub(crate) fn stop(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    pub(crate) fn watch(&self) {
        let Some(limit) = self.limit else { return };
        let tick = (limit / 10).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self
                .wake
                .wait_timeout(done, tick)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
            let now = Instant::now();
            for w in self.running().iter_mut() {
                if now < w.deadline {
                    continue;
                }
                match w.cancelled_at {
                    None => {
                        w.handle.cancel();
                        w.cancelled_at = Some(now);
                    }
                    // Told once per sweep (only this thread sets the flag).
                    Some(at)
                        if now.duration_since(at) > limit
                            && !self.warned.load(Ordering::Relaxed) =>
                    {
                        self.warned.store(true, Ordering::Relaxed);
                        eprintln!(
                            "sweep: scenario {} is past its time limit and passes no point, so it cannot be stopped; the sweep waits for it (last hit passed: {})",
                            w.scenario,
                            w.handle.last_hit().map_or_else(|| "none".to_owned(), |h| h.to_string())
                        );
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The watchdog, one piece at a time (the sweeps in `tests/it/nets.rs`
    //! see only its effect on a hanging scenario).
    use std::sync::{mpsc, Arc};

    use crashpoint::{Hit, Outcome};

    use super::*;
    use crate::crash_state::CrashState;

    fn scenario() -> Scenario {
        Scenario::in_state(CrashState::PROCESS, vec![Hit::new("a", 1)])
    }

    #[test]
    fn a_watchdog_without_a_limit_watches_nothing() {
        let w = Watchdog::new(None);
        assert_eq!(
            w.register(&Handle::new(None), Instant::now(), &scenario()),
            None
        );
        assert!(w.running().is_empty());
        // With nothing to watch, watching returns at once.
        w.watch();
    }

    #[test]
    fn each_registration_has_its_own_id_and_forgetting_drops_only_it() {
        let w = Watchdog::new(Some(Duration::from_secs(60)));
        let h = Handle::new(None);
        let a = w.register(&h, Instant::now(), &scenario());
        let b = w.register(&h, Instant::now(), &scenario());
        assert_eq!((a, b), (Some(0), Some(1)));
        let ids = |w: &Watchdog| w.running().iter().map(|x| x.id).collect::<Vec<_>>();
        w.forget(a);
        assert_eq!(ids(&w), [1]);
        w.forget(None);
        assert_eq!(ids(&w), [1]);
        w.forget(b);
        assert!(ids(&w).is_empty());
    }

    /// A life that passes no point cannot be stopped: once it is still
    /// running a whole limit after it was cancelled, the sweep says so, once.
    #[test]
    fn a_life_that_cannot_be_stopped_is_told_of_after_another_limit() {
        let limit = Duration::from_secs(2);
        let w = Arc::new(Watchdog::new(Some(limit)));
        let watcher = Arc::clone(&w);
        let watching = std::thread::spawn(move || watcher.watch());
        let start = Instant::now();
        // Never runs, so never passes a point: cancelling it changes nothing.
        let _id = w.register(&Handle::new(None), start, &scenario());
        std::thread::sleep(limit / 4);
        assert!(!w.warned.load(Ordering::Relaxed), "told before its limit");
        while !w.warned.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(w.warned.load(Ordering::Relaxed), "never told");
        assert!(start.elapsed() >= limit);
        w.stop();
        watching.join().unwrap();
    }

    /// A life past its deadline is cancelled at its next point, and the
    /// watching thread ends once stopped.
    #[test]
    fn the_watchdog_cancels_a_life_past_its_deadline_and_ends_when_stopped() {
        let w = Arc::new(Watchdog::new(Some(Duration::from_millis(10))));
        let (ended, watch_ended) = mpsc::channel();
        let watcher = Arc::clone(&w);
        std::thread::spawn(move || {
            watcher.watch();
            let _ = ended.send(());
        });
        let h = Handle::new(None);
        let id = w.register(&h, Instant::now(), &scenario());
        // Ten seconds at most, if nothing cancels it.
        let life = h.run(|| {
            for _ in 0..10_000 {
                crashpoint::point!("spin");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        w.forget(id);
        assert!(!matches!(life.outcome, Outcome::Finished(())));
        assert_eq!(
            h.cancelled().map(|hit| hit.point.into_owned()),
            Some("spin".to_owned())
        );
        w.stop();
        assert!(
            watch_ended.recv_timeout(Duration::from_secs(10)).is_ok(),
            "the watchdog went on watching after stop"
        );
    }
}
