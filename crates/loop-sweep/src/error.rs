//! Why a loop subject cannot be built.

use std::path::PathBuf;

use agent::model::TranscriptError;
use durable::testing::DiskState;

use crate::variant::VARIANTS;

/// Why a loop subject cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SubjectError {
    /// No variant has this slug.
    #[error("unknown loop variant {slug:?}; known: {}, and loop-keyed-power-STATE, loop-keyless-power-STATE (STATE: {}; add -no-file-fsync or -no-dir-fsync for a mutated writer)", VARIANTS.iter().map(|v| v.slug()).collect::<Vec<_>>().join(", "), DiskState::ALL.iter().map(|s| s.slug()).collect::<Vec<_>>().join(", "))]
    UnknownVariant {
        /// The slug asked for.
        slug: String,
    },
    /// The transcript cannot be used.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The transcript is a valid transcript but not a job the judge can
    /// check (arguments it cannot read, a patch that cannot apply).
    #[error("{}: {reason}", path.display())]
    Job {
        /// The transcript file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
