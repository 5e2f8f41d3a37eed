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
//! silently replaced by a fresh run. Nor is a checkpoint path that is not a
//! regular file — a symbolic link (even to a valid checkpoint), a
//! directory, a FIFO, a socket, a device ([`Error::NotRegularFile`]; a FIFO
//! never blocks the open) —, a file larger than
//! [`Options::max_read_bytes`] ([`Error::TooLarge`]), or a file that cannot
//! be read for any reason but "not found" (permission denied, `EIO`:
//! [`Error::Io`]). A field this build does not know, in the envelope or in
//! the state, is refused with [`Error::UnknownField`] rather than dropped by
//! the next save: a newer build (or a person) wrote it, and a save by this
//! one would erase it without a word.
//!
//! # What the disk may do: the persistence model, and a failed fsync
//!
//! A power cut keeps what was synced: a file's contents as of its last
//! fsync, the names as of the directory's last fsync. Of what was not
//! synced, the `testing` feature's enumerated crash states (the
//! `durable::testing::enumerate` module) assume only this: directory
//! operations (create, rename, remove) persist as a prefix in program order,
//! a rename is atomic, the writes of one file persist in order, the last
//! kept write may be torn at a 512-byte block boundary (at most two torn
//! prefixes per write), and data and names are not ordered against each
//! other. Every disk this allows is a crash state of its own, up to a bound
//! (64 per crash by default; above it a documented sample that keeps the
//! extremes). [`write_atomic`] is correct under all of them, since it
//! never relies on an unsynced operation.
//!
//! **After a failed fsync** [`write_atomic`] does not retry it (on Linux a
//! retry after a writeback error "succeeds" and syncs nothing) and does not
//! rename: it removes the temp file and returns the error, naming the file,
//! and the old checkpoint stays in place. The next save writes a fresh temp
//! file and fsyncs that. A failed directory fsync after the rename is
//! returned too: the new file is visible but not known to be durable, so a
//! caller treats the outcome as unknown, never as "not saved".
//!
//! # One holder per run: the lock and the fencing epoch
//!
//! [`Checkpoint::open`] takes an `flock` on `<run>.lock`, which is never
//! followed if it is a symbolic link, and then checks that the file it
//! locked is still the file at the path (same device and inode): `flock`
//! locks an inode, not a path, so a lock on a file deleted or replaced in
//! between would exclude nobody ([`Error::LockReplaced`]).
//!
//! That still leaves a holder whose lock file is deleted *after* it took the
//! lock: a second process then creates a new lock file, locks it, and runs
//! the run too. So the envelope carries a **fencing epoch**, and the store
//! promises:
//!
//! * every open of an unfinished run makes a new holder whose epoch is one
//!   more than the epoch on disk, and saves it before `open` returns (in the
//!   save that counts the restart, or the start save of a fresh run; with
//!   `max_resumes: None`, in a save that passes no crash point). Opening a
//!   finished run saves nothing and keeps its epoch;
//! * every save reads the epoch on disk, under the lock, after the point
//!   `mid-save` and just before the rename, and if it is higher than the
//!   holder's, refuses with [`Error::Fenced`] and writes nothing (its temp
//!   file is removed). The read passes no crash point, so a save passes the
//!   same points, in the same order, as without fencing.
//!
//! So once a newer holder has opened a run, nothing an older holder saves
//! reaches the file, and the older holder learns it at its next save.
//!
//! The limits: the check and the rename are two steps. A newer holder whose
//! save lands in the instant between an older holder's check and its rename
//! is overwritten by the older holder's file, and until the newer holder
//! saves again (its check reads a lower epoch than its own, so it goes
//! through) the older holder is not fenced. What an older holder
//! does *outside* the store (a tool call between two saves) is not fenced:
//! keep idempotency keys ([`key`]) for that. The epoch is a number in a
//! local file, guarded by a local `flock`: a run shared across machines
//! needs a lease in a database, where the same epoch becomes the lease's
//! fencing token and the check-and-write one conditional update
//! (`UPDATE … WHERE epoch <= ours`), which closes the window above. A build
//! older than the epoch ignores it.
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
//! The store is Unix-only: it relies on `flock`, `O_NOFOLLOW`, file modes
//! and syncing a directory. `flock` holds on one machine's local disk; a run
//! shared across machines needs a lease in a database instead (see the
//! fencing epoch above).

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

pub use checkpoint::{Checkpoint, Durable, Opened, Options, Saved, DEFAULT_MAX_READ_BYTES};
pub use dir::{Dir, EntryError, FileKind, LockGuard};
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
/// wraps any state type: `{"version": 2, "run": …, "resumes": …, "state": …,
/// "epoch": …}` (`epoch` came later within version 2: a file without it reads
/// as epoch 0).
/// A state type that changes meaning keeps its own version inside `S`.
pub const FORMAT_VERSION: u32 = 2;
