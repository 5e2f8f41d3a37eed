//! The typed errors of the checkpoint store.
//!
//! Every error that concerns a file names that file, because the person who
//! reads the message has to go and look at it: a locked run, a corrupt
//! checkpoint, a workspace file someone else edited.

use std::io;
use std::path::PathBuf;

/// What went wrong, as a value the caller can match on.
///
/// The store never answers a bad checkpoint by starting the run over: every
/// variant below stops the run and leaves the files as they were, so a person
/// can look at them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another process (or another [`Checkpoint`](crate::Checkpoint) in this
    /// one) holds the run's lock. Two processes resuming one run would each
    /// run its unanswered calls, so the second one stops at once.
    #[error("run is locked by another process: {path}")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },

    /// The run was restarted more often than its limit allows. The count is
    /// saved before anything else happens, so a run that dies during every
    /// restart still reaches the limit instead of looping for ever.
    #[error("run was restarted {resumes} times, more than its limit of {limit}: {path}")]
    MaxResumes {
        /// The checkpoint file.
        path: PathBuf,
        /// How many restarts the checkpoint records, this one included.
        resumes: u32,
        /// The limit from [`Options::max_resumes`](crate::Options::max_resumes).
        limit: u32,
    },

    /// A file the run wrote no longer has the content the run recorded. The
    /// run stops rather than let the model reason about code its conversation
    /// does not describe.
    #[error(
        "workspace changed since the run wrote {file}: expected sha256 {expected}, found {}",
        found.as_deref().unwrap_or("no file")
    )]
    WorkspaceChanged {
        /// The workspace file (root joined with the recorded relative path).
        file: PathBuf,
        /// The SHA-256 (hex) the run recorded when it wrote the file.
        expected: String,
        /// The SHA-256 (hex) of the file now, or `None` if it is gone.
        found: Option<String>,
    },

    /// The checkpoint is not a valid state: not JSON, or JSON of the wrong
    /// shape. It is left untouched for a person to inspect.
    #[error("corrupt checkpoint {path}: {reason}")]
    Corrupt {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The checkpoint ends in the middle of its JSON. Atomic saves never
    /// produce one, so something else wrote or cut the file.
    #[error("truncated checkpoint {path}: the JSON ends early")]
    Truncated {
        /// The checkpoint file.
        path: PathBuf,
    },

    /// The checkpoint's phase is not one this version knows; resuming would
    /// have to guess the loop's next move.
    #[error(
        "checkpoint {path} has unknown phase {phase:?} (expected model, tools, paused or done)"
    )]
    UnknownPhase {
        /// The checkpoint file.
        path: PathBuf,
        /// The phase as written in the file.
        phase: String,
    },

    /// The checkpoint was written by a version of the state this code does
    /// not read.
    #[error(
        "checkpoint {path} has state version {version}, this build reads version {}",
        crate::STATE_VERSION
    )]
    UnsupportedVersion {
        /// The checkpoint file.
        path: PathBuf,
        /// The version written in the file.
        version: u64,
    },

    /// A run ID that could name a file outside the checkpoint directory, or
    /// none at all.
    #[error("invalid run ID {id:?}: {reason}")]
    InvalidRunId {
        /// The rejected ID, as given.
        id: String,
        /// Why it was rejected.
        reason: String,
    },

    /// A state that must not be saved, because the checkpoint it would
    /// produce could not be loaded again (wrong run, wrong version, a
    /// non-finite dollar amount) or a workspace path that escapes its root.
    /// Nothing was written.
    #[error("invalid state for {path}: {reason}")]
    InvalidState {
        /// The file that was not written (or the workspace path).
        path: PathBuf,
        /// What is wrong with the state.
        reason: String,
    },

    /// An I/O operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operation, e.g. `"read"` or `"rename"`.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
