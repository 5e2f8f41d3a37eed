//! The agent loop's own crash sweep: the real [`agent::Agent`], resuming
//! from a real checkpoint, crashed at every point it has.
//!
//! Six variants, one table row each: the triage job against a tracker that
//! honours keys and one that ignores them, each plain, with a tool that fails
//! after the tracker accepted its request (`FailAfterAccept` on the first
//! record), and with `issue_file` behind an approval gate (the scripted
//! person passes the point `person deciding` while it decides).
//!
//! The world of a scenario is a checkpoint [`MemDir`](durable::testing::MemDir), a workspace
//! [`MemDir`](durable::testing::MemDir) and an in-memory [`Tracker`](tracker::Tracker) whose lookups by arguments cannot
//! tell (a search index that lags), so a keyless marked call passes the
//! question up to the person, while `code_patch`'s lookup decides from the
//! workspace. The judge counts:
//!
//! * `dups`: tracker records made more than once, plus `code_patch` calls
//!   that ended in an error (a patch applied twice fails);
//! * `missing`: records the job makes that the tracker never got, and
//!   workspace files that do not hold what the job wrote;
//! * `asks`: ladder questions put to the person;
//! * `calls+`: model calls beyond the clean run's;
//! * `gate`: a gated call that ran without a saved yes, or a yes asked for
//!   again although it was already saved.
//!
//! `dups`, `missing` and `gate` must be zero in every scenario; for keyed
//! variants `asks` too.
//!
//! **Power loss** ([`power_variants`], on the real loop): the
//! plain job, keyed and keyless, with the checkpoint directory and the
//! workspace in [`PowerDir`](durable::testing::PowerDir)s of one [`DiskState`](durable::testing::DiskState). Each life boots them
//! and shuts them down when it ends without a crash, so the boot after a
//! crash cuts the power first; saves and patches are fsynced. The checkpoint
//! is written by the real writer or through a directory that drops one
//! fsync ([`Writer`]). The judge adds `lost saves` (a restart that resumed
//! from an older checkpoint than the last save that returned, seen by a
//! watch on the checkpoint file) and `stopped` (a run that ended on an
//! error, such as an unreadable checkpoint), both required to be zero; the
//! real writer's rows pass, the mutations' fail (`tests/it/loop_power.rs`,
//! `snapshots/loop-power.txt`).
//!
//! The job is `sweeps/loop-triage.json` of this workspace, built into the
//! crate ([`JOB`]); `cargo xtask sweep` passes the file a sweep definition
//! names instead. The tools are the triage job's (`triage-tools`), the
//! person and the clock `agent`'s test doubles (its `testing` feature).
//!
//! ```
//! use loop_sweep::{plain, Situation};
//!
//! let subject = loop_sweep::subject(plain(true, Situation::Plain), None).unwrap();
//! let config = sweep::Config { depth: 1, ..sweep::Config::default() };
//! let report = sweep::run(&subject, &config).unwrap();
//! assert_eq!(report.failures().count(), 0);
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod expected;
mod person;
mod power;
mod share;
mod subject;
mod variant;
mod world;

use std::path::Path;
use std::sync::Arc;

use agent::model::Transcript;

pub mod zombie;

pub use error::SubjectError;
pub use power::{Power, Writer, WRITERS};
pub use subject::{LoopSubject, ModelFactory, ENUMERATED};
pub use variant::{plain, power_variants, variants, LoopVariant, Situation, VARIANTS};
pub use world::LoopWorld;

/// The run ID every scenario uses (each scenario has its own world).
pub const RUN: &str = "loop-triage-run";

/// The sweep's job, `sweeps/loop-triage.json` of this workspace, as built
/// into the crate; [`JOB_NAME`] names it in errors.
pub const JOB: &str = include_str!("../../../sweeps/loop-triage.json");

/// The name [`JOB`] goes by in error messages.
pub const JOB_NAME: &str = "sweeps/loop-triage.json";

/// The transcript at `path`, or the built-in [`JOB`] when `None`.
pub fn transcript(path: Option<&Path>) -> Result<Transcript, SubjectError> {
    Ok(match path {
        Some(p) => Transcript::load(p)?,
        None => Transcript::parse(JOB, JOB_NAME)?,
    })
}

/// The subject of `variant`, running the transcript at `transcript`
/// (default: the built-in [`JOB`]).
pub fn subject(
    variant: LoopVariant,
    transcript: Option<&Path>,
) -> Result<LoopSubject, SubjectError> {
    LoopSubject::new(variant, Arc::new(crate::transcript(transcript)?))
}

/// Every variant of the loop's table ([`VARIANTS`]), in table order,
/// sharing one transcript.
pub fn subjects(transcript: Option<&Path>) -> Result<Vec<LoopSubject>, SubjectError> {
    let t = Arc::new(crate::transcript(transcript)?);
    VARIANTS
        .iter()
        .map(|v| LoopSubject::new(*v, Arc::clone(&t)))
        .collect()
}

/// The power-loss subjects whose writer is `writer`, keyed then keyless,
/// each in [`DiskState::ALL`](durable::testing::DiskState::ALL) order, sharing one
/// transcript.
pub fn power_subjects(
    writer: Writer,
    transcript: Option<&Path>,
) -> Result<Vec<LoopSubject>, SubjectError> {
    let t = Arc::new(crate::transcript(transcript)?);
    power_variants()
        .into_iter()
        .filter(|v| v.power.is_some_and(|p| p.writer == writer))
        .map(|v| LoopSubject::new(v, Arc::clone(&t)))
        .collect()
}
