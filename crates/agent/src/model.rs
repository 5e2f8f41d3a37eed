//! The model seam: what the loop asks of a model ([`Model`]), what comes
//! back ([`Reply`], [`ModelError`]), and the models the crate brings:
//! [`ScriptedModel`] replays a recorded [`Transcript`] (tests, sweeps, and
//! the `triage` command's replay mode), [`Recording`] wraps any model and
//! writes its replies as a transcript. The clients of real providers are in
//! [`crate::provider`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::state::{Message, ToolCall, Usage};

mod record;
mod replay;
mod transcript;

pub use record::{RecordError, Recording};
pub use replay::ScriptedModel;
pub use transcript::{Transcript, TranscriptError};

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
    /// A provider's client gave up (see [`crate::provider`]).
    #[error(transparent)]
    Provider(#[from] crate::provider::ProviderError),
    /// Any other failure.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose reply tells which conversation it was given.
    struct Echo;

    impl Model for Echo {
        fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
            match conversation.last() {
                Some(m) => Ok(Reply {
                    text: format!("{} messages, last {:?}", conversation.len(), m.text),
                    calls: vec![ToolCall {
                        id: "c1".into(),
                        tool: "t".into(),
                        args: "{}".into(),
                    }],
                    usage: Usage {
                        input_tokens: 7,
                        ..Usage::default()
                    },
                }),
                None => Err(ModelError::Failed("an empty conversation".into())),
            }
        }
    }

    /// A boxed or shared model is the model it holds: the same reply to the
    /// same conversation, and the same error.
    #[test]
    fn a_boxed_or_shared_model_answers_as_the_model_it_holds() {
        let conversation = [Message {
            text: "hello".into(),
            ..Message::default()
        }];
        let direct = Echo.reply(&conversation).unwrap();
        assert_eq!(direct.text, "1 messages, last \"hello\"");
        let boxed: Box<dyn Model> = Box::new(Echo);
        let shared: Arc<dyn Model + Sync> = Arc::new(Echo);
        for (name, m) in [("box", &boxed as &dyn Model), ("arc", &shared)] {
            assert_eq!(m.reply(&conversation).unwrap(), direct, "{name}");
            let e = m.reply(&[]).unwrap_err();
            assert_eq!(e.to_string(), "an empty conversation", "{name}");
        }
    }
}
