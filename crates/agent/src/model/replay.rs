//! Replay of a recorded run: the model a `triage` command runs in
//! production, and the one tests and sweeps script.

use std::sync::Arc;

use crate::state::{Message, Role};

use super::transcript::Transcript;
use crate::model::{Model, ModelError, Reply};

/// A model that replays a recorded [`Transcript`].
///
/// It picks the reply by how many assistant replies the conversation already
/// holds, so asking again for a turn whose reply was never saved gives the
/// same reply with the same call IDs, exactly as a recorded run did, and a
/// resumed conversation continues where it stopped.
///
/// Not a test double: replaying a recorded job is what the `triage` command
/// runs in production ([`Agent::scripted`](crate::Agent::scripted)), so it
/// is always built, unlike the test doubles (see the crate docs, "Testing").
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked past the transcript's end, the model names the file, how many
    /// replies it has and which (1-based) was asked for.
    #[test]
    fn a_conversation_past_the_transcript_names_the_reply_asked_for() {
        let t = Transcript::parse(r#"{"replies": [{"text": "done"}]}"#, "job.json").unwrap();
        let m = ScriptedModel::new(t);
        let answered = [
            Message::default(),
            Message {
                role: Role::Assistant,
                text: "done".into(),
                ..Message::default()
            },
        ];
        assert_eq!(m.reply(&answered[..1]).unwrap().text, "done");
        match m.reply(&answered) {
            Err(ModelError::Exhausted { path, len, wanted }) => {
                assert_eq!((path.to_str(), len, wanted), (Some("job.json"), 1, 2));
            }
            other => panic!("{other:?}"),
        }
    }
}
