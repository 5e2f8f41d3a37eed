//! The crash states a power-loss directory can leave its disk in.

use crashpoint::scope::CrashState;

/// The crash states a [`PowerDir`](super::PowerDir) can leave its disk in:
/// which of the unsynced operations a crash keeps. Synced contents and
/// synced names always survive; these states differ only in the rest. Each
/// converts into the one crash state of every crate
/// ([`crashpoint::scope::CrashState`], by its name) and back.
///
/// The list is bounded and deterministic: one world, one state, so a sweep
/// runs every scenario once per state and each failing scenario can be rerun
/// by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiskState {
    /// A process crash, not a power cut: every write survives, synced or not
    /// (the page cache outlives the process). What a panic-only sweep tests.
    Process,
    /// Nothing unsynced survives: names revert to the last directory sync,
    /// contents to each file's last sync (empty if never synced). The
    /// pessimistic reading of POSIX.
    LoseUnsynced,
    /// Unsynced directory operations (create, rename, remove) survive, and
    /// unsynced contents are lost: the zero-length file after a rename that
    /// delayed allocation is known for.
    KeepEntries,
    /// Unsynced directory operations survive, and each file with unsynced
    /// contents keeps the first half of its latest contents: a torn write.
    TornContents,
    /// Unsynced contents survive and unsynced directory operations are lost:
    /// the data blocks reached the disk, the journal commit did not.
    KeepContents,
    /// The older half of the unsynced operations survive, in program order
    /// (rounded down), and the rest are lost: a file system that persists
    /// operations in order and was cut part-way.
    InOrderHalf,
}

impl DiskState {
    /// Every state, [`DiskState::Process`] first.
    pub const ALL: [DiskState; 6] = [
        DiskState::Process,
        DiskState::LoseUnsynced,
        DiskState::KeepEntries,
        DiskState::TornContents,
        DiskState::KeepContents,
        DiskState::InOrderHalf,
    ];

    /// The states of a real power cut (all but [`DiskState::Process`]).
    pub const POWER_CUTS: [DiskState; 5] = [
        DiskState::LoseUnsynced,
        DiskState::KeepEntries,
        DiskState::TornContents,
        DiskState::KeepContents,
        DiskState::InOrderHalf,
    ];

    /// A short command-line name.
    pub fn slug(self) -> &'static str {
        match self {
            DiskState::Process => "process",
            DiskState::LoseUnsynced => "lose",
            DiskState::KeepEntries => "entries",
            DiskState::TornContents => "torn",
            DiskState::KeepContents => "contents",
            DiskState::InOrderHalf => "in-order",
        }
    }

    /// The state named by `slug`.
    pub fn from_slug(slug: &str) -> Option<DiskState> {
        DiskState::ALL.into_iter().find(|s| s.slug() == slug)
    }

    /// What survives, in a few words.
    pub fn title(self) -> &'static str {
        match self {
            DiskState::Process => "process crash: every write survives",
            DiskState::LoseUnsynced => "nothing unsynced survives",
            DiskState::KeepEntries => "unsynced names survive, unsynced contents lost",
            DiskState::TornContents => "unsynced names survive, unsynced contents torn in half",
            DiskState::KeepContents => "unsynced contents survive, unsynced names lost",
            DiskState::InOrderHalf => "the older half of unsynced operations survive, in order",
        }
    }
}

/// The crash state of every crate (`crashpoint::scope::CrashState`, a
/// sweep's dimension) named after this one: a subject lists
/// `DiskState::ALL.map(Into::into)` and names no state twice.
impl From<DiskState> for CrashState {
    fn from(s: DiskState) -> Self {
        CrashState::named(s.slug())
    }
}

/// The state a power-loss directory knows by the name of `s`: in a
/// subject's `boot`, `dir.boot_in(ctx.state().try_into()?)`.
impl TryFrom<&CrashState> for DiskState {
    type Error = UnknownDiskState;

    fn try_from(s: &CrashState) -> Result<Self, Self::Error> {
        DiskState::from_slug(s.name()).ok_or_else(|| UnknownDiskState(s.name().to_owned()))
    }
}

/// A crash state no power-loss directory knows (a subject's own label, an
/// enumerated state): [`DiskState`]'s `TryFrom` refuses it by name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no power-cut state is called {0:?}; known: process, lose, entries, torn, contents, in-order"
)]
pub struct UnknownDiskState(pub String);

#[cfg(test)]
mod conversion_tests {
    use super::*;

    #[test]
    fn every_state_goes_to_the_common_name_and_back() {
        for s in DiskState::ALL {
            let common: CrashState = s.into();
            assert_eq!(common.name(), s.slug());
            assert_eq!(DiskState::try_from(&common), Ok(s));
        }
        let label = CrashState::named("enumerated");
        let e = DiskState::try_from(&label).unwrap_err();
        let known: Vec<&str> = DiskState::ALL.iter().map(|s| s.slug()).collect();
        assert!(e.to_string().ends_with(&known.join(", ")), "{e}");
    }
}
