//! Crash-safe checkpoints for durable agent runs.
//!
//! A long agent run that dies part-way (a deploy, an OOM kill, a power cut)
//! should neither pay again for the model calls it made nor repeat the
//! actions it took. This crate is the storage half of that promise:
//!
//! * [`State`] holds everything a later process needs to carry on: the
//!   messages, tokens and dollars spent, turns, the phase (the loop's next
//!   move), the last reply's tool calls, their results, attempt markers, the
//!   restart count and hashes of the workspace files the run wrote.
//! * [`Checkpoint`] stores one state per run as `<run>.json`, written with a
//!   crash-safe [`write_atomic`] (temp file, 0600, write, fsync, rename, fsync
//!   the directory), so after a crash at any moment the file holds the old
//!   state or the new one, never half of one. [`Checkpoint::open`] takes an
//!   `flock` on `<run>.lock` first (one process per run, [`Error::Locked`]),
//!   and counts the restart before anything else ([`Error::MaxResumes`]).
//! * [`key`] makes the idempotency key of one tool call from the run and call
//!   IDs, the same in every process that retries the call.
//! * [`Dir`] is the file-system seam: [`DiskDir`] for a real directory,
//!   [`MemDir`] for crash sweeps that run thousands of scenarios in memory.
//!
//! Every save passes two crash points of the [`crashpoint`] crate, `mid-save`
//! (before the rename) and `after rename`, so a sweep can crash a run on
//! either side of the step that makes a save count.
//!
//! Errors are values: a corrupt, truncated or foreign checkpoint comes back as
//! a typed [`Error`] naming its file, and is never silently replaced by a
//! fresh run.
//!
//! ```
//! use std::sync::Arc;
//! use durable::{Checkpoint, MemDir, Options, Phase, RunId};
//!
//! # fn main() -> durable::Result<()> {
//! let world = MemDir::new(); // clones share files: the world outlives a life
//! let run = RunId::parse("triage-1700000000-ab12cd34")?;
//! let opts = Options { sync: false, ..Options::default() };
//!
//! // First life: a fresh run, saved at once, then saved as it goes.
//! let mut opened = Checkpoint::open(Arc::new(world.clone()), &run, opts)?;
//! assert!(!opened.resumed);
//! opened.state.turns = 1;
//! opened.state.phase = Phase::Tools;
//! opened.checkpoint.save(&opened.state)?;
//! drop(opened); // the process ends (or dies): the lock goes with it
//!
//! // Second life: the state comes back, and the restart is counted.
//! let opened = Checkpoint::open(Arc::new(world.clone()), &run, opts)?;
//! assert!(opened.resumed);
//! assert_eq!(opened.state.resumes, 1);
//! assert_eq!(opened.state.turns, 1);
//! assert_eq!(opened.state.phase, Phase::Tools);
//!
//! // While it is open, a second opener is refused.
//! let again = Checkpoint::open(Arc::new(world.clone()), &run, opts);
//! assert!(matches!(again, Err(durable::Error::Locked { .. })));
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
mod error;
mod key;
mod mutant;
mod power;
mod run_id;
mod state;

pub use checkpoint::{Checkpoint, Opened, Options};
pub use dir::{remove_leftover_temps, write_atomic, Dir, DiskDir, LockGuard, MemDir, WriteOptions};
pub use error::{Error, Result};
pub use key::{key, sha256_hex};
pub use mutant::{MutantDir, Mutation, MID_OVERWRITE};
pub use power::{CrashState, PowerDir};
pub use run_id::RunId;
pub use state::{
    Attempt, Message, ParsePhaseError, Phase, Role, State, ToolCall, ToolResult, Usage,
};

/// The version of the checkpoint format this build writes and reads. Bump it
/// when a field changes meaning, so old binaries refuse new checkpoints (and
/// new ones old checkpoints) instead of misreading them.
pub const STATE_VERSION: u32 = 1;
