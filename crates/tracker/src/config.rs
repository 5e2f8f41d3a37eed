//! How a tracker is told to behave: whether it honours idempotency keys
//! ([`Mode`]), and the faults injected into it ([`Fault`]).

use serde::{Deserialize, Serialize};

/// Whether the tracker honours idempotency keys. The book chapter's table compares a
/// loop against both kinds of service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// A repeat with a held key gets the first answer and changes nothing.
    Keyed,
    /// Keys are ignored: every request is new.
    Keyless,
}

/// A fault injected into the tracker, to test how a loop handles a call that
/// failed although the service acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// The `nth` NEW mutating request the tracker records (1-based, counted
    /// over the tracker's whole life, across every crash of its clients) is
    /// recorded and then answered with [`TrackerError::Dropped`], like an MCP
    /// server dying mid-call after the service acted. A keyed repeat is not
    /// new and does not count; the fault fires once.
    ///
    /// [`TrackerError::Dropped`]: crate::TrackerError::Dropped
    FailAfterAccept {
        /// Which new record fails its call (1 = the first).
        nth: u64,
    },
}
