//! The loop's typed errors.

use crate::state::Phase;

use crate::model::ModelError;

/// Why a run stopped without an answer. Each is a value a command can map to
/// its own message and exit code; in every case the checkpoint holds where
/// the run stopped, and rerunning resumes it (or stops again for the same
/// reason, as a limit does).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The checkpoint store refused or failed: [`durable::Error::Locked`]
    /// (another process runs it), [`durable::Error::MaxResumes`],
    /// [`durable::Error::WorkspaceChanged`] (checked on every resume), a
    /// corrupt checkpoint, an I/O error.
    #[error(transparent)]
    Checkpoint(#[from] durable::Error),

    /// The model gave no reply for this turn.
    #[error("model call for turn {turn} failed: {source}")]
    Model {
        /// The turn (1-based).
        turn: u32,
        /// Why.
        #[source]
        source: ModelError,
    },

    /// A reply reused a call ID (within itself or from an earlier turn of
    /// the run), or gave an empty one. Keys are made from call IDs, so two
    /// calls sharing one would be taken for one call sent twice; the reply
    /// is refused before it is saved.
    #[error("the model's reply for turn {turn} has an unusable call ID {call:?}: {reason}")]
    BadCallId {
        /// The turn.
        turn: u32,
        /// The ID.
        call: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The run has taken its turn limit.
    #[error("turn limit reached: the run has taken {turns} turns, its limit is {limit}")]
    TurnLimit {
        /// Turns taken, over every life.
        turns: u32,
        /// The limit.
        limit: u32,
    },

    /// The run has spent its token limit.
    #[error("token limit reached: the run has spent {tokens} tokens, its limit is {limit}")]
    TokenLimit {
        /// Tokens spent (input plus output), over every life.
        tokens: u64,
        /// The limit.
        limit: u64,
    },

    /// The run has spent its dollar limit.
    #[error("dollar limit reached: the run has spent ${dollars:.4}, its limit is ${limit:.4}")]
    DollarLimit {
        /// Dollars spent, over every life.
        dollars: f64,
        /// The limit.
        limit: f64,
    },

    /// The run was cancelled; the save recording where it stopped was made.
    #[error("run cancelled; its state is saved in phase {phase}")]
    Cancelled {
        /// The saved phase.
        phase: Phase,
    },

    /// The run waits on a person (a gated call, or a ladder question nobody
    /// answered); the pause is saved and a restart asks again.
    #[error("run paused: waiting on a person for call {}", waiting.join(", "))]
    Paused {
        /// The call IDs waited on.
        waiting: Vec<String>,
    },

    /// A marked call kept coming back with an unknown outcome.
    #[error("call {call} ({tool}) still has an unknown outcome after {tries} tries: {reason}; its marker stays, so a restart sends it up the ladder again")]
    OutcomeUnknown {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// Tries in this life.
        tries: u32,
        /// The last reason.
        reason: String,
    },

    /// A tool's service refused a call for good ([`ToolError::Fatal`](crate::tool::ToolError::Fatal)):
    /// a bug such as a key reused for another request. Nothing was done;
    /// the marker stays.
    #[error(
        "call {call} ({tool}) was refused for good, which means a bug: {reason}; the run stops"
    )]
    ToolFatal {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The service's reason.
        reason: String,
    },

    /// A tool's receiver has seen a newer holder of this run
    /// ([`ToolError::Stale`](crate::tool::ToolError::Stale)): another
    /// process took the run over (this one was paused past its lease, say)
    /// and this one stopped at once. Nothing was done, nothing more was
    /// saved, and the model never saw it. Not an error to retry: the run
    /// belongs to the other process.
    #[error(
        "call {call} ({tool}): {reason}; this process stops and leaves the run to its new holder"
    )]
    Stale {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The receiver's words.
        reason: String,
    },

    /// A marked call names a tool this agent does not have, so nothing can
    /// tell whether it happened. (An unmarked call to an unknown tool only
    /// gets an error result the model sees.)
    #[error(
        "call {call} has an attempt marker but names tool {tool:?}, which this agent does not have"
    )]
    UnknownTool {
        /// The call ID.
        call: String,
        /// The tool it names.
        tool: String,
    },
}
