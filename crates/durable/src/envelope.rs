//! The file's layout: durable's envelope around the user's state, and the
//! version of that layout.

use serde::{Deserialize, Serialize};

/// The version of the checkpoint file format (durable's envelope) this build
/// writes and reads. A file of another version is refused with
/// [`Error::UnsupportedVersion`](crate::Error::UnsupportedVersion) instead of being misread.
///
/// Version 1 was the agent's state written flat, with no envelope; version 2
/// wraps any state type: `{"version": 2, "run": …, "resumes": …, "state": …,
/// "epoch": …}` (`epoch` came later within version 2: a file without it reads
/// as epoch 0).
/// A state type that changes meaning keeps its own version inside `S`.
pub const FORMAT_VERSION: u32 = 2;

/// The file's layout: durable's envelope, with the user's state inside.
#[derive(Serialize)]
pub(crate) struct EnvelopeRef<'a, S> {
    pub(crate) version: u32,
    pub(crate) run: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) resumes: u32,
    pub(crate) state: &'a S,
    pub(crate) epoch: u64,
}

#[derive(Deserialize)]
pub(crate) struct EnvelopeOwned<S> {
    /// Checked before, from the raw JSON; named so it is not "unknown".
    #[allow(dead_code)]
    pub(crate) version: u64,
    pub(crate) run: String,
    #[serde(default)]
    pub(crate) resumes: u32,
    pub(crate) state: S,
    #[serde(default)]
    pub(crate) epoch: u64,
}

/// The one field the fencing check before each rename reads.
#[derive(Deserialize)]
pub(crate) struct EpochOnly {
    #[serde(default)]
    pub(crate) epoch: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
