//! Why a [`Process`](super::Process) cannot be swept: what its discovery
//! run ([`Process::discover`](super::Process::discover)) refuses.

use std::path::PathBuf;

/// Why a [`Process`](super::Process) cannot be swept.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The argv is empty.
    #[error("{subject}: the program's command line is empty")]
    NoProgram {
        /// The subject.
        subject: String,
    },
    /// The world template is not a readable directory.
    #[error("{subject}: the world template {path} is not a directory: {reason}")]
    BadTemplate {
        /// The subject.
        subject: String,
        /// The template.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A scratch directory for a world could not be made.
    #[error("{subject}: cannot make a world directory: {reason}")]
    World {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
    /// The program's clean run (to discover the judge's counters) failed.
    #[error("{subject}: the clean run to discover the judge's counters failed: {reason}")]
    Discovery {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
    /// The program ran to its end without reporting a point.
    #[error("{subject}: the program ran to its end without reporting a crash point over the point protocol: mark its crash points with a client (crashpoint::point! in Rust with crashpoint's `enabled` feature, crashsweep.point in Python, crashsweep.Point in Go, point in Node); see docs/point-protocol.md")]
    NoPoints {
        /// The subject.
        subject: String,
    },
    /// The judge gave no counter at all.
    #[error("{subject}: the judge printed no counter (an empty JSON object): nothing could fail; print e.g. {{\"duplicates\": 0}}")]
    NoCounters {
        /// The subject.
        subject: String,
    },
    /// The fork server was asked for and refused: threads at `ready()`,
    /// a forked life that differs from an exec'd one, a program that
    /// cannot be forked.
    #[error("{subject}: the fork server is refused: {reason}")]
    ForkServer {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
}
