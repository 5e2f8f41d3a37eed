//! Crash-safe checkpoints for durable runs of any state type.
//!
//! A long run that dies part-way (a deploy, an OOM kill, a power cut) should
//! neither redo the expensive steps it made nor repeat the actions it took.
//! This crate is the storage half of that promise, for a state type of your
//! own:
//!
//! * [`Checkpoint<S>`](Checkpoint) stores one state per run as `<run>.json`,
//!   written with a crash-safe [`write_atomic`] (temp file, 0600, write,
//!   fsync, rename, fsync the directory), so after a crash at any moment the
//!   file holds the old state or the new one, never half of one.
//!   [`Checkpoint::open`] takes an `flock` on `<run>.lock` first (one process
//!   per run, [`Error::Locked`]), removes the temp files a crashed save left,
//!   saves a fresh start at once, and counts each restart before anything
//!   else ([`Error::MaxResumes`]).
//! * Your state `S` is any `Serialize + DeserializeOwned` type that
//!   implements [`Durable`]; the store wraps it in an envelope of its own
//!   (format version [`FORMAT_VERSION`], run ID, restart count), so `S` needs
//!   no field for any of them. A run is *finished* when
//!   [`Durable::is_finished`] says so: reopening it then hands the state back
//!   untouched, without a save.
//! * [`key`] makes the idempotency key of one step from the run and step
//!   IDs, the same in every process that retries the step.
//! * [`Dir`] is the file-system seam: [`DiskDir`] for a real directory. The
//!   `testing` feature adds `durable::testing` — an in-memory `MemDir` for
//!   crash sweeps that run thousands of scenarios, a `PowerDir` that loses
//!   what was not synced when the power goes, and deliberately broken
//!   writers — so production builds carry none of them.
//!
//! Every save passes two crash points of the [`crashpoint`] crate, `mid-save`
//! (before the rename) and `after rename`, so a sweep can crash a run on
//! either side of the step that makes a save count.
//!
//! Errors are values: a corrupt, truncated, foreign or other-version
//! checkpoint comes back as a typed [`Error`] naming its file, and is never
//! silently replaced by a fresh run.
//!
//! ```
//! use std::sync::Arc;
//! use durable::testing::MemDir; // needs the `testing` feature
//! use durable::{Checkpoint, Durable, Options, RunId};
//! use serde::{Deserialize, Serialize};
//!
//! /// Your own state: here, which invoices were sent.
//! #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
//! struct Invoices {
//!     sent: Vec<String>,
//!     done: bool,
//! }
//!
//! impl Durable for Invoices {
//!     fn is_finished(&self) -> bool {
//!         self.done
//!     }
//! }
//!
//! # fn main() -> durable::Result<()> {
//! let world = MemDir::new(); // clones share files: the world outlives a life
//! let run = RunId::parse("invoices-1700000000-ab12cd34")?;
//! let opts = Options { sync: false, ..Options::default() };
//!
//! // First life: a fresh run, saved at once, then saved as it goes.
//! let mut opened = Checkpoint::<Invoices>::open(Arc::new(world.clone()), &run, opts)?;
//! assert!(!opened.resumed);
//! opened.state.sent.push("inv-1".into());
//! opened.checkpoint.save(&opened.state)?;
//! drop(opened); // the process ends (or dies): the lock goes with it
//!
//! // Second life: the state comes back, and the restart is counted.
//! let mut opened = Checkpoint::<Invoices>::open(Arc::new(world.clone()), &run, opts)?;
//! assert!(opened.resumed);
//! assert_eq!(opened.resumes, 1);
//! assert_eq!(opened.state.sent, ["inv-1"]);
//!
//! // While it is open, a second opener is refused.
//! let again = Checkpoint::<Invoices>::open(Arc::new(world.clone()), &run, opts);
//! assert!(matches!(again, Err(durable::Error::Locked { .. })));
//!
//! // Once finished, reopening hands the state back and counts nothing.
//! opened.state.done = true;
//! opened.checkpoint.save(&opened.state)?;
//! drop(opened);
//! let finished = Checkpoint::<Invoices>::open(Arc::new(world.clone()), &run, opts)?;
//! assert_eq!((finished.resumes, finished.state.done), (1, true));
//! # Ok(())
//! # }
//! ```
//!
//! The store is Unix-only: it relies on `flock`, file modes and syncing a
//! directory. `flock` holds on one machine's local disk; a run shared across
//! machines needs a lease in a database instead.

#![deny(missing_docs)]

mod checkpoint;
mod dir;
mod disk;
mod error;
mod key;
mod run_id;
mod write;

#[cfg(feature = "testing")]
pub mod testing;

pub use checkpoint::{Checkpoint, Durable, Opened, Options, Saved};
pub use dir::{Dir, LockGuard};
pub use disk::DiskDir;
pub use error::{Error, Result};
pub use key::{key, sha256_hex};
pub use run_id::RunId;
pub use write::{remove_leftover_temps, write_atomic, WriteOptions};

/// The version of the checkpoint file format (durable's envelope) this build
/// writes and reads. A file of another version is refused with
/// [`Error::UnsupportedVersion`] instead of being misread.
///
/// Version 1 was the agent's state written flat, with no envelope; version 2
/// wraps any state type: `{"version": 2, "run": …, "resumes": …, "state": …}`.
/// A state type that changes meaning keeps its own version inside `S`.
pub const FORMAT_VERSION: u32 = 2;
