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
    /// [`Process::crash_states`](super::Process::crash_states) named a
    /// state no process subject has, or none.
    #[error("{subject}: {reason}")]
    CrashStates {
        /// The subject.
        subject: String,
        /// Which name, and the known ones.
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
    /// The program's clean run (no crash) failed: the one that discovers
    /// the judge's counters, or one that lists or checks the points.
    #[error("{subject}: its clean run (no crash) failed: {reason}")]
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
    /// I/O points are on, and the program cannot be traced here.
    #[error("{subject}: {reason}")]
    Untraceable {
        /// The subject.
        subject: String,
        /// Why (the setting that forbids ptrace, or the platform).
        reason: String,
    },
    /// I/O points are on, and the clean run made no selected call on the
    /// world or a peer, and reported no named point.
    #[error("{subject}: with I/O points on, the program ran to its end without a selected call on its world directory or a peer, and without a named point: check that it writes inside the world (its working directory), and --io-ops and --io-paths")]
    NoIoPoints {
        /// The subject.
        subject: String,
    },
    /// Two clean runs made different I/O points (compared as sets, so
    /// threads may make them in any order): a path with a random part.
    #[error("{subject}: two clean runs made different I/O points: hit {step} was {first} in one and {second} in the other; a name with a part that differs from run to run (a random temporary name) cannot be crashed at by name: mask that part with --io-mask REGEX (Process::io_points with IoPoints::mask), e.g. --io-mask '{suggestion}'")]
    IoNamesDiffer {
        /// The subject.
        subject: String,
        /// The position (1-based) of `first` in its run (of `second` when
        /// the first run passed every hit of the second).
        step: usize,
        /// The first hit of the first run that the second did not make.
        first: String,
        /// The first hit of the second run that the first did not make.
        second: String,
        /// A mask that would cover the difference.
        suggestion: String,
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
