//! The run state: everything a later process needs to carry on, stored by
//! [`durable::Checkpoint<State>`](durable::Checkpoint).
//!
//! Serialised as JSON with every unset, zero or empty field left out, so a
//! field that was never set loads as unset rather than as an empty value the
//! client would then send back to the provider. Only `phase` is always
//! written. The run ID, the restart count and the format version live in
//! durable's envelope around the state, not in it.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use durable::hash::sha256_hex;
use durable::{Durable, Error, Result};

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

/// A run's saved state: the conversation, what it cost, where the loop stands,
/// and what it must not do twice.
///
/// Spending and turns live here, not in the process, so a run that crashes
/// every few turns cannot start each life with a fresh budget: its limits
/// cover its whole life across every process that ran it. The restart count
/// is kept by the checkpoint ([`durable::Opened::resumes`]).
///
/// The run is finished ([`Durable::is_finished`]) in phase [`Phase::Done`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The loop's next move; always written, so a state never loads in the
    /// wrong phase.
    pub phase: Phase,
    /// The conversation so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// Tokens and dollars spent by every life of the run.
    #[serde(default, skip_serializing_if = "is_default")]
    pub usage: Usage,
    /// Model turns taken by every life of the run.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub turns: u32,
    /// The context policy's summary of older messages, if it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Call IDs waiting on a person (phase [`Phase::Paused`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// The last reply's tool calls, saved before any of them runs, so a
    /// restart runs exactly these and never asks the model again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ToolCall>,
    /// Results of the last reply's calls, by call ID.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, ToolResult>,
    /// Attempt markers by call ID: saved just before a call that can change
    /// something, so a restart knows which unanswered calls may have acted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attempts: BTreeMap<String, Attempt>,
    /// Workspace-relative path → SHA-256 (hex) of what the run last wrote
    /// there; see [`State::check_workspace`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// The final answer, once the run is [`Phase::Done`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Where the replies come from (`replay`, or `live PROVIDER MODEL
    /// URL`), as the program running the loop names it; saved with the
    /// first reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

impl Durable for State {
    /// A run in phase [`Phase::Done`] has its answer: reopening it returns
    /// the answer and calls nothing.
    fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// JSON has no NaN or infinity, so a state whose dollars are not finite
    /// could not be loaded back.
    fn check(&self) -> std::result::Result<(), String> {
        if self.usage.dollars.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "usage.dollars is {}, which JSON cannot hold",
                self.usage.dollars
            ))
        }
    }
}

/// The agent's checkpoint: durable's store holding a [`State`].
pub type Checkpoint = durable::Checkpoint<State>;

/// What [`Checkpoint::open`] found for an agent run.
pub type Opened = durable::Opened<State>;

impl State {
    /// Record that the run wrote `bytes` to the workspace file `rel`
    /// (relative to the workspace root), so a later resume can tell whether
    /// someone else changed it since.
    pub fn record_file(&mut self, rel: &str, bytes: &[u8]) {
        self.files.insert(rel.to_owned(), sha256_hex(bytes));
    }

    /// Check that every file the run recorded still exists under `root` with
    /// the same SHA-256.
    ///
    /// Call it on resume: a file that no longer matches means the model would
    /// reason about code its conversation does not describe, so the run stops
    /// with [`Error::WorkspaceChanged`] naming the first such file (in path
    /// order). A recorded path that is absolute or climbs out of `root` with
    /// `..` is refused with [`Error::InvalidState`] without being read.
    pub fn check_workspace(&self, root: &Path) -> Result<()> {
        for (rel, expected) in &self.files {
            let rel_path = Path::new(rel);
            let file = root.join(rel_path);
            if rel.is_empty()
                || !rel_path
                    .components()
                    .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Err(Error::InvalidState {
                    path: file,
                    reason: format!("recorded workspace path {rel:?} is not inside the workspace"),
                });
            }
            let found = match std::fs::read(&file) {
                Ok(bytes) => Some(sha256_hex(&bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(source) => {
                    return Err(Error::Io {
                        path: file,
                        op: "read workspace file",
                        source,
                    })
                }
            };
            if found.as_deref() != Some(expected.as_str()) {
                return Err(Error::WorkspaceChanged {
                    file,
                    expected: expected.clone(),
                    found,
                });
            }
        }
        Ok(())
    }
}

/// The loop's next move, saved so a restart continues from it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// A model call comes next.
    #[default]
    Model,
    /// The last reply's calls are fixed but not all answered: run the rest.
    Tools,
    /// A person is deciding on a call; ask again on restart.
    Paused,
    /// The answer exists: restarting returns it and calls nothing.
    Done,
}

impl Phase {
    /// Every phase, in the loop's order.
    pub const ALL: [Phase; 4] = [Phase::Model, Phase::Tools, Phase::Paused, Phase::Done];

    /// The phase's name as written in a checkpoint.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Model => "model",
            Phase::Tools => "tools",
            Phase::Paused => "paused",
            Phase::Done => "done",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`Phase`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown phase {0:?} (expected model, tools, paused or done)")]
pub struct ParsePhaseError(pub String);

impl FromStr for Phase {
    type Err = ParsePhaseError;

    /// Parse a phase's checkpoint name (`model`, `tools`, `paused`, `done`).
    fn from_str(s: &str) -> Result<Phase, ParsePhaseError> {
        Phase::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ParsePhaseError(s.to_owned()))
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person or program that gave the task.
    #[default]
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one call.
    Tool,
}

/// One message of the conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it; always written, so a message never loads as the wrong
    /// speaker.
    pub role: Role,
    /// The text (may be empty for an assistant message that only calls).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ToolCall>,
    /// For a tool message, the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// One tool call from a model reply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's call ID; with the run ID it makes the call's
    /// idempotency [`key`](durable::key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The tool's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The model's raw JSON arguments, kept as a string: a model can write
    /// invalid JSON, and a checkpoint that embedded it would refuse to save
    /// the very run that needs saving.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub args: String,
}

/// A tool call's result, as the model will see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The output text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// Whether the output reports a failure.
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_error: bool,
}

/// An attempt marker, saved just before a call that can change something.
///
/// After a crash, an unanswered call without a marker certainly never started
/// and simply runs; one with a marker may have acted and goes to the
/// resolution ladder.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The idempotency key sent with the call, if the tool takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Whether a person approved the call (the marker is written after the
    /// yes, so a crash during the decision leaves nothing to resolve).
    #[serde(default, skip_serializing_if = "is_false")]
    pub approved: bool,
    /// When the call went out, on the run's clock (Unix seconds for real
    /// runs, logical ticks in sweeps), so a restart can tell whether the
    /// service still holds the key: keys expire.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub at: u64,
}

/// What the run has spent, across all its lives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub input_tokens: u64,
    /// Output tokens billed.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub output_tokens: u64,
    /// Dollars spent; must be finite (JSON has no NaN or infinity).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub dollars: f64,
}
