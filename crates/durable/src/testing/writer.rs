//! Who writes the checkpoint in a power-loss sweep — the real writer or a
//! mutation of it a sweep must catch ([`Writer`]) — and a power-loss world,
//! a writer and a crash state ([`Power`]): one pair of types for every
//! crate that sweeps power cuts.

use std::sync::Arc;

use crashpoint::scope::CrashState;

use super::{DiskState, MutantDir, Mutation, PowerDir};
use crate::Dir;

/// The crash state in which each power cut leaves, in a scenario of its
/// own, every disk the [persistence model](crate::testing::enumerate)
/// allows (a power-loss world only): the scenario names the disk of each
/// crash (`enumerated: mid-save#3 (disk 2)`), so it reruns by name alone.
pub const ENUMERATED: CrashState = CrashState::named("enumerated");

/// A power-loss world: who writes the checkpoint, and what each crash keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Power {
    /// How the checkpoint reaches the disk.
    pub writer: Writer,
    /// What each crash keeps of the operations not yet synced.
    pub state: DiskState,
}

impl Power {
    /// The crash states a sweep of a world with `power` runs in: a
    /// power-loss world in every disk state and in [`ENUMERATED`], any
    /// other world in the process state alone.
    pub fn crash_states(power: Option<Power>) -> Vec<CrashState> {
        match power {
            Some(_) => DiskState::ALL
                .into_iter()
                .map(CrashState::from)
                .chain([ENUMERATED])
                .collect(),
            None => vec![CrashState::PROCESS],
        }
    }

    /// The crash states a sweep of a world with `power` runs in when none
    /// are asked for: a power-loss world's own state, or the process state.
    pub fn default_crash_states(power: Option<Power>) -> Vec<CrashState> {
        match power {
            Some(p) => vec![p.state.into()],
            None => vec![CrashState::PROCESS],
        }
    }

    /// Whether a world with `power` enumerates its disks in `state`: only
    /// a power-loss world, only in [`ENUMERATED`].
    pub fn enumerates(power: Option<Power>, state: &CrashState) -> bool {
        *state == ENUMERATED && power.is_some()
    }
}

/// How the checkpoint reaches the disk. [`Writer::Real`] is
/// [`write_atomic`](crate::write::write_atomic) as shipped (with
/// `sync: true`); the others are mutations of it that a power-loss sweep
/// must catch. Each sweep picks the writers its tables show (a list of its
/// own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Writer {
    /// Temp file, write, fsync, rename, fsync the directory.
    Real,
    /// Both fsyncs turned off (`Options { sync: false }`), as the book
    /// chapter's sweep runs, so a sweep finishes in seconds.
    SyncsOff,
    /// The real writer without the file fsync before the rename.
    NoFileSync,
    /// The real writer without the directory fsync after the rename.
    NoDirSync,
    /// The new bytes written over the live file in place, then synced
    /// ([`Mutation::InPlace`]); a crash between the write and its fsync
    /// lands at the point [`MID_OVERWRITE`](super::MID_OVERWRITE).
    InPlace,
    /// The old file removed before the temp file is renamed over its name
    /// ([`Mutation::RemoveFirst`]): only a power cut that keeps the remove
    /// and loses the rename catches it, a state none of the six named ones
    /// leaves; the enumerated state does.
    RemoveFirst,
}

impl Writer {
    /// The command-line name (the value of `--mutation`).
    pub fn slug(self) -> &'static str {
        match self {
            Writer::Real => "real",
            Writer::SyncsOff => "syncs-off",
            Writer::NoFileSync => "no-file-fsync",
            Writer::NoDirSync => "no-dir-fsync",
            Writer::InPlace => "in-place",
            Writer::RemoveFirst => "remove-first",
        }
    }

    /// A short description for row titles.
    pub fn title(self) -> &'static str {
        match self {
            Writer::Real => "real writer",
            Writer::SyncsOff => "syncs off (book)",
            Writer::NoFileSync => "no file fsync",
            Writer::NoDirSync => "no dir fsync",
            Writer::InPlace => "overwrite in place",
            Writer::RemoveFirst => "remove first",
        }
    }

    /// Whether the checkpoint store is asked to sync at all (all but
    /// [`Writer::SyncsOff`]).
    pub fn syncs(self) -> bool {
        self != Writer::SyncsOff
    }

    /// The directory the checkpoint store writes through: `dir` itself for
    /// the real writer and for syncs off, a [`MutantDir`] over it otherwise.
    pub fn wrap(self, dir: PowerDir) -> Arc<dyn Dir> {
        match self {
            Writer::Real | Writer::SyncsOff => Arc::new(dir),
            Writer::NoFileSync => Arc::new(MutantDir::new(dir, Mutation::NoFileSync)),
            Writer::NoDirSync => Arc::new(MutantDir::new(dir, Mutation::NoDirSync)),
            Writer::InPlace => Arc::new(MutantDir::new(dir, Mutation::InPlace)),
            Writer::RemoveFirst => Arc::new(MutantDir::new(dir, Mutation::RemoveFirst)),
        }
    }
}
