//! A run store that waits out a busy or restarting database within the
//! lease, instead of failing the run at its first refusal.
//!
//! On SQLite a process stopped inside a write holds the database's write
//! lock, and every other writer waits the busy timeout and then fails
//! (`database is locked`). A Postgres server restarting for a few seconds
//! refuses connections, or cuts the one in use. Both pass: a step that
//! failed so is tried again, with a growing pause, for as long as the
//! lease lasts (past that, the run is another holder's to take anyway).
//!
//! A step whose commit may have landed before the connection broke is
//! tried again safely: a save writes the same checkpoint under the same
//! epoch, and the answers that only a landed first try explains (the run
//! done by our own final save, our own claim found holding the run) are
//! read as that try's success.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use durable::store::{Claim, Lease, Record, RunStore};
use durable::{Error, Result, RunId};

/// A store whose steps are retried while the database is busy or away.
#[derive(Debug)]
pub struct Patient {
    inner: Arc<dyn RunStore>,
    /// How long one step is tried.
    patience: Duration,
}

impl Patient {
    /// `inner`, each step tried for up to `patience` (the lease).
    pub fn wrap(inner: Arc<dyn RunStore>, patience: Duration) -> Arc<dyn RunStore> {
        Arc::new(Patient { inner, patience })
    }

    /// Run `step` until it succeeds, fails for good, or the patience is
    /// spent; `again` reads an error of a second or later try (whose first
    /// may have landed) as a success where it can.
    fn retry<T>(
        &self,
        mut step: impl FnMut() -> Result<T>,
        again: impl Fn(&Error) -> Option<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        let mut tried_before = false;
        loop {
            match step() {
                Ok(v) => return Ok(v),
                Err(e) if tried_before && again(&e).is_some() => {
                    return again(&e).ok_or(e);
                }
                Err(e) if transient(&e) && started.elapsed() + pause < self.patience => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                    tried_before = true;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether the store failed because the database was busy or away for a
/// moment (locked by another writer, restarting, the connection cut).
pub fn transient(e: &Error) -> bool {
    let Error::Store { source, .. } = e else {
        return false;
    };
    let text = source.to_string().to_lowercase();
    [
        "database is locked",
        "database table is locked",
        "connection refused",
        "connection reset",
        "connection closed",
        "error connecting to server",
        "server closed the connection",
        "terminating connection",
        "shutting down",
        "starting up",
        // SQLSTATE 57P03 while a restarted server replays its log.
        "not yet accepting connections",
        "in recovery mode",
        "broken pipe",
        "no such file or directory",
    ]
    .iter()
    .any(|t| text.contains(t))
}

impl RunStore for Patient {
    fn add(&self, run: &RunId) -> Result<bool> {
        self.retry(|| self.inner.add(run), |_| None)
    }

    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        let claim = self.retry(|| self.inner.claim(run, owner, lease), |_| None)?;
        // Our own name holding the run: a first try's claim landed.
        if let Claim::Held { owner: held } = &claim {
            if held == owner {
                if let Some(record) = self.load(run)? {
                    return Ok(Claim::Won {
                        lease: Lease {
                            run: run.clone(),
                            owner: owner.to_owned(),
                            epoch: record.epoch,
                        },
                        checkpoint: record.checkpoint,
                    });
                }
            }
        }
        Ok(claim)
    }

    fn claim_next(&self, owner: &str, lease: Duration) -> Result<Option<(Lease, Option<Vec<u8>>)>> {
        self.retry(|| self.inner.claim_next(owner, lease), |_| None)
    }

    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()> {
        self.retry(|| self.inner.renew(lease, lease_for), |_| None)
    }

    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()> {
        // The final save landed before its answer was lost: the run is done
        // under our epoch.
        let landed = |e: &Error| (done && matches!(e, Error::Finished { .. })).then_some(());
        self.retry(|| self.inner.save(lease, checkpoint, done), landed)
    }

    fn load(&self, run: &RunId) -> Result<Option<Record>> {
        self.retry(|| self.inner.load(run), |_| None)
    }

    fn release(&self, lease: &Lease) -> Result<()> {
        // A refused release after a lost answer: it landed (or another
        // holder has the run), nothing of ours is left to release.
        let landed =
            |e: &Error| matches!(e, Error::Fenced { .. } | Error::Finished { .. }).then_some(());
        self.retry(|| self.inner.release(lease), landed)
    }

    fn path_of(&self, run: &RunId) -> PathBuf {
        self.inner.path_of(run)
    }

    fn end_lease_of(&self, run: &RunId, owner: &str) -> Result<bool> {
        self.retry(|| self.inner.end_lease_of(run, owner), |_| None)
    }

    fn lease_left(&self, run: &RunId) -> Result<Option<Duration>> {
        self.inner.lease_left(run)
    }
}
