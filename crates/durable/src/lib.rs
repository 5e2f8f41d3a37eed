//! Crash-safe checkpoints for durable agent runs (work in progress).

pub mod dir;
pub mod error;
pub mod key;

pub use dir::{write_atomic, Dir, DiskDir, LockGuard, MemDir, WriteOptions};
pub use error::{Error, Result};
pub use key::key;

/// The version of the state format this build writes and reads.
pub const STATE_VERSION: u32 = 1;
