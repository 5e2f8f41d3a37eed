//! The model seam, and a scripted model that replays a transcript.

use std::path::PathBuf;
use std::sync::Arc;

use crate::{Message, Role, ToolCall, Usage};

use crate::transcript::Transcript;

/// One reply of the model: its text, the tool calls it asks for (each with
/// the model's call ID and its arguments as the raw string the model wrote),
/// and what the call cost.
///
/// The loop saves the reply, call IDs included, before any call runs: the
/// call ID is what the idempotency key is made from, so it must be fixed
/// before the first attempt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The reply's text; the run's answer when there are no calls.
    pub text: String,
    /// The tool calls, in the order they are to run.
    pub calls: Vec<ToolCall>,
    /// Tokens and dollars this call cost.
    pub usage: Usage,
}

/// Why the model gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A scripted model was asked for more replies than its transcript has.
    #[error("{path}: the transcript has {len} replies, the model was asked for reply {wanted}")]
    Exhausted {
        /// The transcript file.
        path: PathBuf,
        /// How many replies it has.
        len: usize,
        /// Which reply (1-based) was asked for.
        wanted: usize,
    },
    /// Any other failure (a provider's error, a network error).
    #[error("{0}")]
    Failed(String),
}

/// A model: takes the conversation, returns a reply.
///
/// The loop may ask again for a turn whose reply was lost in a crash before
/// its save; a real model may then answer differently, which is why the
/// reply is saved before any of its calls runs.
pub trait Model: Send {
    /// The next reply to `conversation`.
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError>;
}

impl<M: Model + ?Sized> Model for Box<M> {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        (**self).reply(conversation)
    }
}

impl<M: Model + Sync + ?Sized> Model for Arc<M> {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        (**self).reply(conversation)
    }
}

/// A model that replays a recorded [`Transcript`].
///
/// It picks the reply by how many assistant replies the conversation already
/// holds, so asking again for a turn whose reply was never saved gives the
/// same reply with the same call IDs, exactly as a recorded run did, and a
/// resumed conversation continues where it stopped.
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    transcript: Arc<Transcript>,
}

impl ScriptedModel {
    /// Replay `transcript`.
    pub fn new(transcript: impl Into<Arc<Transcript>>) -> ScriptedModel {
        ScriptedModel {
            transcript: transcript.into(),
        }
    }

    /// The transcript being replayed.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }
}

impl Model for ScriptedModel {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let n = conversation
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let t = &*self.transcript;
        t.replies.get(n).cloned().ok_or(ModelError::Exhausted {
            path: t.path.clone(),
            len: t.replies.len(),
            wanted: n + 1,
        })
    }
}
