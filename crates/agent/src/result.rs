//! What a finished run returns.

use std::collections::BTreeMap;

use crate::state::{Checkpoint, Message, Phase, State, Usage};
use durable::{Dir, RunId};
use serde::Serialize;

/// A finished run: its answer and what it took to get there.
///
/// Every field is a field of [`crate::state::State`], or of the checkpoint around
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
        RunResult::of(checkpoint.run(), checkpoint.resumes(), state)
    }

    fn of(run: &RunId, resumes: u32, state: &State) -> RunResult {
        RunResult {
            run: run.to_string(),
            answer: state.answer.clone().unwrap_or_default(),
            messages: state.messages.clone(),
            usage: state.usage.clone(),
            turns: state.turns,
            summary: state.summary.clone(),
            resumes,
            files: state.files.clone(),
        }
    }

    /// The result of run `run` if it is finished, read from its checkpoint
    /// in `checkpoints` — with no [`Model`](crate::model::Model), no tools
    /// and no API key, so a program can print a saved answer anywhere.
    ///
    /// It only reads: it takes no lock (a run another process is driving
    /// is read as last saved), counts no restart, and writes nothing.
    /// `Ok(None)` if the run has no checkpoint, or has one that is not
    /// finished (read its phase with
    /// [`Checkpoint::load`](durable::Checkpoint::load)); an error if the
    /// checkpoint cannot be read or is not a run's.
    ///
    /// It is the same result [`Agent::run`](crate::Agent::run) returns
    /// for the finished run (which also counts nothing and calls nothing).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let checkpoints = durable::DiskDir::new("/var/lib/my-agent/runs")?;
    /// let run = durable::RunId::parse("ticket-4711")?;
    /// match agent::RunResult::load(&checkpoints, &run)? {
    ///     Some(result) => println!("{}", result.answer),
    ///     None => eprintln!("run {run} has no answer yet"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn load(checkpoints: &dyn Dir, run: &RunId) -> durable::Result<Option<RunResult>> {
        Ok(Checkpoint::load(checkpoints, run)?
            .filter(|saved| saved.state.phase == Phase::Done)
            .map(|saved| RunResult::of(run, saved.resumes, &saved.state)))
    }
}
