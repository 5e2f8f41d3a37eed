//! Why a loop subject cannot be built.

use std::path::PathBuf;

use agent::model::TranscriptError;

/// Why a loop subject cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SubjectError {
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
