//! Test doubles for crash sweeps and tests, behind the `testing` feature
//! (the convention of tokio's `test-util`): production builds of `durable`
//! carry none of this.
//!
//! * [`MemDir`]: an in-memory directory whose clones share files, so a world
//!   outlives a crashed life; it also records what a power cut would keep.
//! * [`PowerDir`] and [`DiskState`]: a directory that loses, when the power
//!   goes, what was not synced, in one of six named ways (the quick mode) or
//!   in every way the [persistence model](enumerate) allows
//!   ([`PowerDir::enumerated`], [`PersistenceModel`], [`CutRecord`]).
//! * [`MutantDir`] and [`Mutation`]: deliberately broken writers, to prove a
//!   power-loss sweep catches them ([`MID_OVERWRITE`] is the point of one).
//! * [`Writer`] and [`Power`]: who writes the checkpoint in a power-loss
//!   sweep (the real writer, or a mutation of it) and in which crash state.
//! * [`SaveWatch`]: a wrapper over any of these that counts lost saves (a
//!   save that returned, not found by the restart after a crash), for a
//!   sweep's judge.
//! * [`FaultDir`], [`Call`] and [`Fault`]: a directory whose calls fail on
//!   demand: the k-th call of a kind once (`ENOSPC` on a write, `EIO` on an
//!   fsync or a rename), for fault sweeps; or every call of a kind with a
//!   chosen error, to prove that every error but "not found" stops a run (a
//!   test as root cannot make a file unreadable with its mode bits).
//!
//! Enable it where it is used: in `[dev-dependencies]` for tests
//! (`durable = { workspace = true, features = ["testing"] }`), and in normal
//! dependencies only for crates that exist to sweep or test.

mod disk_state;
pub mod enumerate;
mod fault;
mod lock_table;
mod mem;
mod mutant;
mod power;
mod save_watch;
mod writer;

pub use disk_state::{DiskState, UnknownDiskState};
pub use enumerate::{CutRecord, PersistenceModel};
pub use fault::{Call, Fault, FaultDir};
pub use mem::MemDir;
pub use mutant::{MutantDir, Mutation, MID_OVERWRITE};
pub use power::PowerDir;
pub use save_watch::SaveWatch;
pub use writer::{Power, Writer, ENUMERATED};
