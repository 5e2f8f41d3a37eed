//! What a finished run returns.

use std::collections::BTreeMap;

use crate::{Checkpoint, Message, State, Usage};
use serde::Serialize;

/// A finished run: its answer and what it took to get there.
///
/// Every field is a field of [`crate::State`], or of the checkpoint around
/// it (`run`, `resumes`), with the same name and meaning (a test checks it):
/// a result that held anything the checkpoint does not would come back
/// different from a restarted finished run, which returns the saved state
/// without calling anything.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// The run ID.
    pub run: String,
    /// The final answer.
    pub answer: String,
    /// The whole conversation.
    pub messages: Vec<Message>,
    /// Tokens and dollars spent by every life of the run.
    pub usage: Usage,
    /// Model turns over every life.
    pub turns: u32,
    /// The context policy's summary, if it made one.
    pub summary: Option<String>,
    /// How many times the run was restarted.
    pub resumes: u32,
    /// Workspace files the run wrote, path → SHA-256.
    pub files: BTreeMap<String, String>,
}

impl RunResult {
    /// The result a finished state holds, in its open checkpoint.
    pub fn from_state(checkpoint: &Checkpoint, state: &State) -> RunResult {
        RunResult {
            run: checkpoint.run().to_string(),
            answer: state.answer.clone().unwrap_or_default(),
            messages: state.messages.clone(),
            usage: state.usage.clone(),
            turns: state.turns,
            summary: state.summary.clone(),
            resumes: checkpoint.resumes(),
            files: state.files.clone(),
        }
    }
}
