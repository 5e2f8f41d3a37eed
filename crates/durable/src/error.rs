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

    /// A file the run wrote no longer has the content the run recorded (by
    /// SHA-256, [`sha256_hex`](crate::hash::sha256_hex)). The run stops rather than
    /// act on files its saved state does not describe.
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

    /// The checkpoint is not a valid checkpoint of this run: not JSON, JSON
    /// of the wrong shape for the state type, or another run's file. It is
    /// left untouched for a person to inspect.
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

    /// The checkpoint was written in a format version this build does not
    /// read (an older or newer `durable`); it is refused, not misread.
    #[error(
        "checkpoint {path} has format version {version}, this build reads version {}",
        crate::envelope::FORMAT_VERSION
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
    /// produce could not be loaded again ([`Durable::check`](crate::Durable::check)
    /// refused it, or it cannot be serialised), or a recorded workspace path
    /// that escapes its root. Nothing was written.
    #[error("invalid state for {path}: {reason}")]
    InvalidState {
        /// The file that was not written (or the workspace path).
        path: PathBuf,
        /// What is wrong with the state.
        reason: String,
    },

    /// A newer holder of the run opened it since this one did: the
    /// checkpoint on disk carries a higher fencing epoch than this holder's
    /// (see [the `checkpoint`
    /// module](crate::checkpoint#one-holder-per-run-the-lock-and-the-fencing-epoch)).
    /// Nothing was written; this holder must stop.
    #[error(
        "run was opened by a newer holder (epoch {on_disk} on disk, {ours} here); \
         this process must stop: {path}"
    )]
    Fenced {
        /// The checkpoint file.
        path: PathBuf,
        /// This holder's epoch.
        ours: u64,
        /// The epoch of the checkpoint on disk.
        on_disk: u64,
    },

    /// Another worker holds the run's lease in a
    /// [`RunStore`](crate::store::RunStore), and it has not expired. The
    /// second worker stops at once, as with [`Error::Locked`].
    #[error("run is leased by {owner:?} until its lease expires: {path}")]
    Leased {
        /// Where the run lives.
        path: PathBuf,
        /// Who holds it.
        owner: String,
    },

    /// The run is done in its [`RunStore`](crate::store::RunStore): a save
    /// after the run's final save is refused and nothing is written, so a
    /// completed run is never overwritten.
    #[error("run is done; its final checkpoint is not written over: {path}")]
    Finished {
        /// Where the run lives.
        path: PathBuf,
    },

    /// A database store failed (connection, query, schema); the store's
    /// own message is inside.
    #[error("{op} {path}: {source}")]
    Store {
        /// The database and run (`sqlite:<file>#<run>`, `postgres:…`).
        path: PathBuf,
        /// The operation, e.g. `"claim"` or `"save"`.
        op: &'static str,
        /// The database client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The synchronous Postgres store was called on a thread that runs a
    /// tokio runtime, where its client would panic. Call it from
    /// `tokio::task::spawn_blocking` or a plain thread.
    #[error(
        "{op} {path}: called inside a tokio runtime, where the synchronous \
         Postgres client cannot run; call it from spawn_blocking or a plain thread"
    )]
    InsideAsyncRuntime {
        /// The database.
        path: PathBuf,
        /// The operation.
        op: &'static str,
    },

    /// The run's lock file was deleted or replaced while this process
    /// locked it, so the lock it holds excludes nobody; nothing was read.
    #[error("lock file {path} was deleted or replaced while it was being locked; try again")]
    LockReplaced {
        /// The lock file.
        path: PathBuf,
    },

    /// A checkpoint or lock path names something that is not a regular file
    /// (a symbolic link, even to a valid checkpoint, a directory, a FIFO, a
    /// socket, a device). It is refused, never read through, followed or
    /// replaced by a fresh run.
    #[error("{path} is {found}, not a regular file; move it away to go on")]
    NotRegularFile {
        /// The entry.
        path: PathBuf,
        /// What it is.
        found: crate::dir::FileKind,
    },

    /// The checkpoint is larger than [`Options::max_read_bytes`](crate::Options::max_read_bytes);
    /// it was not read whole.
    #[error("checkpoint {path} is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The checkpoint file.
        path: PathBuf,
        /// Its size (or as much of it as was read).
        size: u64,
        /// The limit.
        limit: u64,
    },

    /// The checkpoint holds a field this build does not know, in the
    /// envelope or in the state. It is refused rather than silently dropped
    /// by the next save (a newer build wrote it, or a person did).
    #[error("checkpoint {path} has a field this build does not know: {field}")]
    UnknownField {
        /// The checkpoint file.
        path: PathBuf,
        /// Where the field is, e.g. `state.later`.
        field: String,
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

impl Error {
    /// The error for `source`, from operation `op` on `path`: the typed
    /// variant for a refusal a [`Dir`](crate::Dir) carries
    /// ([`EntryError`](crate::dir::EntryError)), [`Error::Io`] otherwise.
    pub fn from_io(path: PathBuf, op: &'static str, source: io::Error) -> Error {
        match crate::dir::EntryError::of(&source) {
            Some(crate::dir::EntryError::NotRegularFile(found)) => Error::NotRegularFile {
                path,
                found: *found,
            },
            Some(crate::dir::EntryError::TooLarge { size, limit }) => Error::TooLarge {
                path,
                size: *size,
                limit: *limit,
            },
            Some(crate::dir::EntryError::LockReplaced) => Error::LockReplaced { path },
            None => Error::Io { path, op, source },
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
