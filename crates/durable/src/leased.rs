//! [`Checkpoint`] on a [`RunStore`]: open under a lease, renew it, release
//! it.

use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::{At, Checkpoint, Durable, Opened, Options, Saved};
use crate::error::{Error, Result};
use crate::read::parse;
use crate::run_id::RunId;
use crate::store::{Claim, Lease, Record, RunStore};

impl<S: Durable> Checkpoint<S> {
    /// Open `run`'s checkpoint in `store` for `owner`, under a lease of
    /// `lease` from now: the store's counterpart of
    /// [`Checkpoint::open_with`], with the same start, restart count and
    /// limit, and the same typed errors for a checkpoint that cannot be
    /// read.
    ///
    /// * Claims the run ([`RunStore::claim`]): another holder's unexpired
    ///   lease is [`Error::Leased`]. The claim raises the run's epoch; this
    ///   holder's saves go through only while it is still the run's
    ///   ([`Error::Fenced`] once another worker claimed it after the lease
    ///   expired, nothing written).
    /// * A done run is handed back as it is, with nothing claimed or saved;
    ///   a save on it is refused ([`Error::Finished`]).
    /// * A save of a state that [`Durable::is_finished`] finishes the run in
    ///   the store for good, in the same step as the checkpoint.
    ///
    /// The lease does not renew itself: call [`Checkpoint::renew`] more
    /// often than it lasts, and [`Checkpoint::release`] when stopping
    /// without finishing. A crashed holder's lease simply expires.
    pub fn open_store(
        store: Arc<dyn RunStore>,
        run: &RunId,
        owner: &str,
        lease: Duration,
        opts: Options,
        fresh: impl FnOnce() -> S,
    ) -> Result<Opened<S>> {
        let claim = store.claim(run, owner, lease)?;
        Self::open_claimed(store, run, owner, claim, opts, fresh)
    }

    /// [`Checkpoint::open_store`] on the next runnable run nobody holds
    /// ([`RunStore::claim_next`]), for a pool of workers; `None` when there
    /// is none.
    pub fn open_next(
        store: Arc<dyn RunStore>,
        owner: &str,
        lease: Duration,
        opts: Options,
        fresh: impl FnOnce() -> S,
    ) -> Result<Option<Opened<S>>> {
        let Some((lease, checkpoint)) = store.claim_next(owner, lease)? else {
            return Ok(None);
        };
        let run = lease.run.clone();
        let claim = Claim::Won { lease, checkpoint };
        Self::open_claimed(store, &run, owner, claim, opts, fresh).map(Some)
    }

    fn open_claimed(
        store: Arc<dyn RunStore>,
        run: &RunId,
        owner: &str,
        claim: Claim,
        opts: Options,
        fresh: impl FnOnce() -> S,
    ) -> Result<Opened<S>> {
        let path = store.path_of(run);
        let read = |bytes: Option<Vec<u8>>| -> Result<Option<Saved<S>>> {
            let Some(bytes) = bytes else {
                return Ok(None);
            };
            if bytes.len() as u64 > opts.max_read_bytes {
                return Err(Error::TooLarge {
                    path: path.clone(),
                    size: bytes.len() as u64,
                    limit: opts.max_read_bytes,
                });
            }
            let e = parse::<S>(&bytes, run, &path)?;
            Ok(Some(Saved {
                state: e.state,
                resumes: e.resumes,
                epoch: e.epoch,
            }))
        };
        match claim {
            Claim::Held { owner } => Err(Error::Leased { path, owner }),
            Claim::Done { epoch, checkpoint } => {
                let Some(saved) = read(checkpoint)? else {
                    return Err(Error::Finished { path });
                };
                let lease = Lease {
                    run: run.clone(),
                    owner: owner.to_owned(),
                    epoch,
                };
                let mut checkpoint =
                    Checkpoint::new(At::Store { store, lease }, run, opts, saved.epoch);
                checkpoint.resumes = saved.resumes;
                Ok(Opened {
                    checkpoint,
                    state: saved.state,
                    resumed: true,
                    resumes: saved.resumes,
                })
            }
            Claim::Won { lease, checkpoint } => {
                let loaded = read(checkpoint)?;
                let epoch = lease.epoch;
                let at = At::Store { store, lease };
                Checkpoint::new(at, run, opts, epoch).start_or_resume(loaded, fresh)
            }
        }
    }
}

impl<S: Durable> Checkpoint<S> {
    /// Read `run` from `store` without claiming it: its [`Record`] (epoch,
    /// holder, whether it is done) and its checkpoint parsed, with the same
    /// typed errors as [`Checkpoint::load`] for one that cannot be read.
    /// `None` when the store has no such run.
    pub fn load_store(
        store: &dyn RunStore,
        run: &RunId,
    ) -> Result<Option<(Record, Option<Saved<S>>)>> {
        let Some(record) = store.load(run)? else {
            return Ok(None);
        };
        let saved = match &record.checkpoint {
            None => None,
            Some(bytes) => {
                let e = parse::<S>(bytes, run, &store.path_of(run))?;
                Some(Saved {
                    state: e.state,
                    resumes: e.resumes,
                    epoch: e.epoch,
                })
            }
        };
        Ok(Some((record, saved)))
    }
}

impl<S> Checkpoint<S> {
    /// The lease this checkpoint saves under, when it was opened on a
    /// [`RunStore`]; `None` for one opened in a directory (its `flock`
    /// needs no lease).
    pub fn lease(&self) -> Option<&Lease> {
        match &self.at {
            At::Store { lease, .. } => Some(lease),
            At::Files { .. } => None,
        }
    }

    /// Extend the lease to `lease_for` from now ([`RunStore::renew`]):
    /// [`Error::Fenced`] when another worker claimed the run since. A
    /// checkpoint opened in a directory holds its `flock` until dropped, so
    /// there it does nothing.
    pub fn renew(&self, lease_for: Duration) -> Result<()> {
        match &self.at {
            At::Store { store, lease } => store.renew(lease, lease_for),
            At::Files { .. } => Ok(()),
        }
    }

    /// Give the run up so another worker may claim it at once
    /// ([`RunStore::release`]; dropping the checkpoint does not release a
    /// lease: it expires). In a directory, dropping the `flock`.
    pub fn release(self) -> Result<()> {
        match &self.at {
            At::Store { store, lease } => store.release(lease),
            At::Files { .. } => Ok(()),
        }
    }
}
