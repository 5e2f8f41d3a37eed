//! Events: one per step of the loop, for a command to print, log or act on.

use crate::{Phase, ToolCall, Usage};

use crate::approver::Decision;

/// A rung of the resolution ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rung {
    /// 1: run it again, because a repeat is harmless.
    Rerun,
    /// 2: ask the service through the tool's lookup.
    Lookup,
    /// 3: ask a person.
    Person,
}

/// How a tool call came back, before its result is saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returned {
    /// With a result (which may report a failure the model sees).
    Result {
        /// The result text.
        output: String,
        /// Whether it reports a failure.
        is_error: bool,
    },
    /// With an unknown outcome: the call goes up the ladder.
    Unknown(String),
}

/// One step of the loop. Events arrive in the order the steps happen; a
/// save's event comes after the save.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A fresh run started; its start save is done.
    Started {
        /// The run ID.
        run: String,
    },
    /// A run was resumed from its checkpoint; the restart is counted and
    /// saved.
    Resumed {
        /// The run ID.
        run: String,
        /// The phase it resumes in.
        phase: Phase,
        /// Restarts so far, this one included.
        resumes: u32,
        /// Turns taken so far.
        turns: u32,
    },
    /// The model is being called for this turn (1-based).
    ModelCall {
        /// The turn.
        turn: u32,
    },
    /// The model's reply is saved, its calls fixed before any of them runs.
    ReplySaved {
        /// The turn it answers.
        turn: u32,
        /// Its calls (none: it is the final answer).
        calls: Vec<ToolCall>,
        /// What it cost.
        usage: Usage,
    },
    /// A person decided on a gated call.
    Decided {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The decision.
        decision: Decision,
    },
    /// An attempt marker is saved; the call goes out next.
    MarkerSaved {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The idempotency key sent with it, if any.
        key: Option<String>,
        /// Whether a person approved it.
        approved: bool,
    },
    /// A tool is being called.
    ToolCall {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The idempotency key, in the harness's channel.
        key: Option<String>,
        /// The model's arguments.
        args: String,
        /// Whether this is a rerun (a retry after an unknown outcome, or
        /// the ladder's decision).
        rerun: bool,
    },
    /// A tool returned; its result is not saved yet. A command that wants to
    /// die in the window no checkpoint can close dies here.
    ToolReturned {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// What came back.
        returned: Returned,
    },
    /// A call's result is saved.
    ResultSaved {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The result text.
        output: String,
        /// Whether it reports a failure.
        is_error: bool,
    },
    /// A rung of the ladder was tried for a marked call without a result.
    Ladder {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The rung.
        rung: Rung,
        /// Whether this rung settled it (else the question went up).
        settled: bool,
        /// What the rung found, in words.
        why: String,
    },
    /// The run paused, waiting on a person; the pause is saved.
    Paused {
        /// The call IDs waited on.
        waiting: Vec<String>,
    },
    /// The run was cancelled; where it stopped is saved.
    Cancelled {
        /// The saved phase.
        phase: Phase,
    },
    /// The run is done; the answer is saved.
    Done {
        /// The answer.
        answer: String,
    },
}

/// Receives the loop's [`Event`]s. Any `Fn(&Event) + Send` is one.
pub trait Observer: Send {
    /// One step happened.
    fn event(&self, event: &Event);
}

impl<F: Fn(&Event) + Send> Observer for F {
    fn event(&self, event: &Event) {
        self(event)
    }
}

/// Ignores every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn event(&self, _: &Event) {}
}
