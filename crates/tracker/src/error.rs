//! Why the tracker refused or failed a request, or could not open its file:
//! [`TrackerError`].

use std::io;
use std::path::PathBuf;

/// Why the tracker refused or failed a request, or could not open its file.
#[derive(thiserror::Error, Debug)]
pub enum TrackerError {
    /// The key is held for a request with different arguments. A loop that
    /// sees this has given two calls one key: a bug in its key derivation.
    #[error("idempotency key {key:?} was already used for a different request")]
    KeyReused {
        /// The reused key.
        key: String,
    },
    /// The request's [`Fence`](crate::Fence) is older than one the tracker
    /// already recorded for the run: another process has taken the run
    /// over, and the sender must stop. Nothing was recorded.
    #[error("run {run:?} at epoch {epoch} is stale: the tracker has recorded epoch {highest} of it; this process no longer holds the run")]
    StaleEpoch {
        /// The run.
        run: String,
        /// The sender's epoch.
        epoch: u64,
        /// The highest epoch the tracker recorded for the run.
        highest: u64,
    },
    /// A comment on an issue that does not exist. Nothing was recorded.
    #[error("no issue #{issue}")]
    NoSuchIssue {
        /// The missing issue's number.
        issue: u64,
    },
    /// The connection dropped after the tracker recorded the request (an
    /// injected [`Fault`]): the caller cannot know it took effect.
    ///
    /// [`Fault`]: crate::Fault
    #[error("the connection dropped after the tracker accepted the request")]
    Dropped,
    /// The tracker's file cannot be read as a tracker; it was left untouched.
    #[error("tracker file {} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// [`Tracker::open_existing`] found no tracker file where one must be.
    /// Nothing was created.
    ///
    /// [`Tracker::open_existing`]: crate::Tracker::open_existing
    #[error("tracker file {} is missing; it is never replaced by an empty tracker", path.display())]
    Missing {
        /// The missing file.
        path: PathBuf,
    },
    /// Saving an accepted request to the tracker's file failed (a full
    /// disk, a failed fsync): the request may or may not be recorded — a
    /// failed directory fsync comes after the new file replaced the old
    /// one, and a failed fsync says nothing about what reached the disk.
    /// A caller must treat it as an unknown outcome (look it up, or retry
    /// with the same key), never as "did not happen".
    #[error("tracker file {}: saving the accepted request failed, so it may or may not be recorded: {source}", path.display())]
    Unknown {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Reading or writing the tracker's file failed, or another tracker
    /// changed the file since this one read it (see [`Tracker::open_dir`]).
    /// A failed read, or a refusal before anything was written, records
    /// nothing; a failed save of an accepted request is
    /// [`TrackerError::Unknown`] instead.
    ///
    /// [`Tracker::open_dir`]: crate::Tracker::open_dir
    #[error("tracker file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
