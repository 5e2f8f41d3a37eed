//! Test doubles for crash sweeps and tests, behind the `testing` feature
//! (the convention of tokio's `test-util`): production builds of `durable`
//! carry none of this.
//!
//! * [`MemDir`]: an in-memory directory whose clones share files, so a world
//!   outlives a crashed life; it also records what a power cut would keep.
//! * [`PowerDir`] and [`CrashState`]: a directory that loses, when the power
//!   goes, what was not synced, in one of a bounded list of ways.
//! * [`MutantDir`] and [`Mutation`]: deliberately broken writers, to prove a
//!   power-loss sweep catches them ([`MID_OVERWRITE`] is the point of one).
//! * [`SaveWatch`]: a wrapper over any of these that counts lost saves (a
//!   save that returned, not found by the restart after a crash), for a
//!   sweep's judge.
//! * [`FaultDir`] and [`Op`]: any `Dir` whose operations fail on demand
//!   with a chosen error, to prove that every error but "not found" stops a
//!   run (a test as root cannot make a file unreadable with its mode bits).
//!
//! Enable it where it is used: in `[dev-dependencies]` for tests
//! (`durable = { workspace = true, features = ["testing"] }`), and in normal
//! dependencies only for crates that exist to sweep or test.

mod crash_state;
mod fault;
mod lock_table;
mod mem;
mod mutant;
mod power;
mod save_watch;

pub use crash_state::CrashState;
pub use fault::{FaultDir, Op};
pub use mem::MemDir;
pub use mutant::{MutantDir, Mutation, MID_OVERWRITE};
pub use power::PowerDir;
pub use save_watch::SaveWatch;
