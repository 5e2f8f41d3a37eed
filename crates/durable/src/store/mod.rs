//! Run stores: where a run's checkpoint lives, and who may write it — a
//! lease with an expiry and a fencing epoch that rises on every claim.
//!
//! A [`Checkpoint`](crate::Checkpoint) opened with
//! [`Checkpoint::open`](crate::Checkpoint::open) keeps one process per run
//! with an `flock` on one machine's disk. On a network file system `flock`
//! means different things on different clients, and a service spread over
//! several machines needs a lease in a database instead. A [`RunStore`] is
//! that seam, and [`Checkpoint::open_store`](crate::Checkpoint::open_store)
//! opens a checkpoint on any of them:
//!
//! | store | for | lease clock | claim-next |
//! | --- | --- | --- | --- |
//! | [`FileStore`] | one host, a directory (any [`Dir`](crate::Dir)) | this host's | tries each run's `flock`, skipping held ones |
//! | `SqliteStore` (feature `sqlite`) | one host, no file tree to share | SQLite's (this host's) | one writer at a time (`BEGIN IMMEDIATE`) |
//! | `PostgresStore` (feature `postgres`) | many hosts | the database server's | `FOR UPDATE SKIP LOCKED` |
//!
//! # The promises every store keeps
//!
//! The conformance suite (`tests/it/store_conformance.rs`) holds every
//! store to these:
//!
//! * [`RunStore::claim`] wins only when nobody holds the run (no owner, or
//!   an expired lease) and the run is not done; each win raises the run's
//!   epoch by one. Two workers claiming one run at once: exactly one wins.
//! * [`RunStore::save`], [`RunStore::renew`] and [`RunStore::release`] act
//!   only where the run's epoch is still the caller's: the check and the
//!   write are one conditional update (`… WHERE run_id = $1 AND epoch =
//!   $2`), so there is no window between them. Zero rows changed is
//!   [`Error::Fenced`](crate::Error::Fenced), and nothing is written. A
//!   holder paused past its lease while another claimed the run learns it
//!   at its next save.
//! * A save with `done = true` finishes the run for good: no claim (a
//!   rescue of an expired lease included) wins it again, and no save, not
//!   even its own holder's, writes over it
//!   ([`Error::Finished`](crate::Error::Finished)). Engines that complete
//!   on the row's state alone, not on the attempt, let a rescue overwrite a
//!   run that completed meanwhile; here a completion and a rescue are
//!   ordered by the one row: whichever commits second sees the first.
//!
//! What a stale holder does *outside* the store between two saves is not
//! fenced: keep idempotency keys ([`key`](crate::key)) for that, or carry
//! [`Lease::epoch`] into the other system's own conditional writes.
//!
//! # Clocks
//!
//! A lease's expiry is computed and compared by one clock: the database
//! server's (`now()`) for Postgres, so the workers' clocks may disagree
//! with each other without a lease ending early or late; this host's for
//! SQLite and for files, which only one host uses. A lease is a promise
//! about time only: a holder that outlives it is fenced by the epoch, not
//! by the clock.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use durable::store::{FileStore, RunStore};
//! use durable::{Checkpoint, Durable, Options, RunId};
//! # #[derive(Default, serde::Serialize, serde::Deserialize)]
//! # struct Job { step: u32 }
//! # impl Durable for Job {}
//! # let tmp = tempfile::tempdir().unwrap();
//! let store: Arc<dyn RunStore> = Arc::new(FileStore::open(tmp.path()).unwrap());
//! let run = RunId::parse("job-1").unwrap();
//! let lease = Duration::from_secs(30);
//! let mut opened = Checkpoint::<Job>::open_store(
//!     store.clone(), &run, "worker-a", lease, Options::default(), Job::default,
//! ).unwrap();
//! opened.state.step += 1;
//! opened.checkpoint.save(&opened.state).unwrap();
//! // A second worker finds the run held until the lease expires.
//! let second = Checkpoint::<Job>::open_store(
//!     store.clone(), &run, "worker-b", lease, Options::default(), Job::default,
//! );
//! assert!(matches!(second, Err(durable::Error::Leased { .. })));
//! opened.checkpoint.release().unwrap();
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::Result;
use crate::run_id::RunId;

mod file;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use file::FileStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SQLITE_BUSY};

/// A held claim on a run: who holds it, and the epoch that fences every
/// older holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run: RunId,
    /// Who holds it (a worker's name; any string).
    pub owner: String,
    /// The fencing epoch: one more than the run's epoch before this claim.
    /// Saves, renewals and the release act only while the run's epoch is
    /// still this.
    pub epoch: u64,
}

/// What [`RunStore::claim`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the run now.
    Won {
        /// The new lease.
        lease: Lease,
        /// The run's last saved checkpoint, if it has one.
        checkpoint: Option<Vec<u8>>,
    },
    /// Another holder's lease has not expired.
    Held {
        /// Who holds it.
        owner: String,
    },
    /// The run is done: nobody may claim it again.
    Done {
        /// The run's epoch (its last holder's).
        epoch: u64,
        /// The run's final checkpoint.
        checkpoint: Option<Vec<u8>>,
    },
}

/// A run as [`RunStore::load`] reads it, without claiming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The run's epoch: its last claim's.
    pub epoch: u64,
    /// Who holds the run, if anyone does (an expired lease still names its
    /// owner until someone else claims the run).
    pub owner: Option<String>,
    /// Whether the run is done.
    pub done: bool,
    /// The last saved checkpoint, if any.
    pub checkpoint: Option<Vec<u8>>,
}

/// Where runs' checkpoints live, with a lease per run.
///
/// Every method is one atomic step in the store: a crash before it commits
/// leaves the store as it was, a crash after it leaves the whole step. See
/// [the module docs](self) for what every store promises.
pub trait RunStore: Send + Sync + fmt::Debug {
    /// Add `run` as runnable, with no checkpoint and nobody holding it, if
    /// the store has no such run yet (a run it has is left alone). Returns
    /// whether it was added.
    fn add(&self, run: &RunId) -> Result<bool>;

    /// Claim `run` for `owner` for `lease` from now (the store's clock),
    /// adding it first if the store has no such run. Wins only when nobody
    /// holds it (no owner, or an expired lease) and it is not done; a win
    /// raises the run's epoch by one.
    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim>;

    /// Claim the first runnable run (by run ID) that nobody holds, for a
    /// pool of workers: a run another worker is claiming at this instant is
    /// skipped, not waited for. `None` when there is none.
    fn claim_next(&self, owner: &str, lease: Duration) -> Result<Option<(Lease, Option<Vec<u8>>)>>;

    /// Extend `lease` to `lease_for` from now. [`Error::Fenced`](crate::Error::Fenced)
    /// when someone claimed the run since, [`Error::Finished`](crate::Error::Finished)
    /// when it is done.
    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()>;

    /// Replace the run's checkpoint with `checkpoint`, and with `done`
    /// finish the run for good, only while its epoch is `lease.epoch`:
    /// otherwise [`Error::Fenced`](crate::Error::Fenced) (or
    /// [`Error::Finished`](crate::Error::Finished) for a done run) and
    /// nothing is written.
    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()>;

    /// The run as it stands, or `None` if the store has no such run.
    fn load(&self, run: &RunId) -> Result<Option<Record>>;

    /// Give the run up, so another worker may claim it at once; only while
    /// its epoch is `lease.epoch` ([`Error::Fenced`](crate::Error::Fenced)
    /// otherwise, nothing changed). Releasing a done run is allowed.
    fn release(&self, lease: &Lease) -> Result<()>;

    /// Where `run` lives, for messages: a file's path, or
    /// `sqlite:<path>#<run>`, `postgres://<user>@<host>/<database> (run
    /// <run>)` (never a password; a Unix socket as
    /// `postgresql:///<database>?host=<dir>&user=<user>`, as libpq takes it).
    fn path_of(&self, run: &RunId) -> PathBuf;

    /// End `owner`'s lease on `run` now, because the caller knows that
    /// holder is gone (a process on this host that no longer exists), so
    /// the next claim may take the run without waiting for the lease to
    /// expire. The epoch is not changed: the claim raises it. `Ok(false)`
    /// if `owner` does not hold the run (any more), the run is done, or the
    /// store cannot do this (the default).
    fn end_lease_of(&self, run: &RunId, owner: &str) -> Result<bool> {
        let _ = (run, owner);
        Ok(false)
    }

    /// How long the lease on `run` still lasts by the store's clock, for
    /// messages ("leased by … until …"): `None` if nobody holds it, it has
    /// expired, or the store cannot say (the default).
    fn lease_left(&self, run: &RunId) -> Result<Option<Duration>> {
        let _ = run;
        Ok(None)
    }
}

impl<T: RunStore + ?Sized> RunStore for std::sync::Arc<T> {
    fn add(&self, run: &RunId) -> Result<bool> {
        (**self).add(run)
    }
    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        (**self).claim(run, owner, lease)
    }
    fn claim_next(&self, owner: &str, lease: Duration) -> Result<Option<(Lease, Option<Vec<u8>>)>> {
        (**self).claim_next(owner, lease)
    }
    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()> {
        (**self).renew(lease, lease_for)
    }
    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()> {
        (**self).save(lease, checkpoint, done)
    }
    fn load(&self, run: &RunId) -> Result<Option<Record>> {
        (**self).load(run)
    }
    fn release(&self, lease: &Lease) -> Result<()> {
        (**self).release(lease)
    }
    fn path_of(&self, run: &RunId) -> PathBuf {
        (**self).path_of(run)
    }
    fn end_lease_of(&self, run: &RunId, owner: &str) -> Result<bool> {
        (**self).end_lease_of(run, owner)
    }
    fn lease_left(&self, run: &RunId) -> Result<Option<Duration>> {
        (**self).lease_left(run)
    }
}

/// A lease's length in whole milliseconds, as the stores record it
/// (saturating: a lease of centuries is a lease for ever).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The error for a write refused by its `WHERE`: the run was claimed by a
/// newer holder ([`Error::Fenced`](crate::Error::Fenced)), or it is done
/// ([`Error::Finished`](crate::Error::Finished)).
pub(crate) fn refused(path: PathBuf, ours: u64, now: Option<(u64, bool)>) -> crate::error::Error {
    use crate::error::Error;
    match now {
        Some((epoch, true)) if epoch == ours => Error::Finished { path },
        Some((on_disk, _)) => Error::Fenced {
            path,
            ours,
            on_disk,
        },
        None => Error::Fenced {
            path,
            ours,
            on_disk: 0,
        },
    }
}
