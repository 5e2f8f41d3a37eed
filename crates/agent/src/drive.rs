//! One life of a run, phase by phase: the model turn, the tool turn, the
//! pause and each call's result, with the saves between them.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use crate::state::{Checkpoint, Message, Phase, Role, State, ToolCall, ToolResult};

use crate::agent::Agent;
use crate::error::Error;
use crate::model::ModelError;
use crate::observe::Event;
use crate::result::RunResult;
use crate::tool::ToolOutput;

/// Drives a run through one life (one process lifetime): the open checkpoint
/// and the state in memory.
pub(crate) struct Driver<'a> {
    pub(crate) agent: &'a Agent,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) st: State,
}

impl Driver<'_> {
    pub(crate) fn drive(&mut self) -> Result<RunResult, Error> {
        loop {
            match self.st.phase {
                Phase::Done => return Ok(RunResult::from_state(&self.checkpoint, &self.st)),
                Phase::Model => self.model_turn()?,
                Phase::Tools | Phase::Paused => self.tool_turn()?,
            }
        }
    }

    pub(crate) fn emit(&self, event: Event) {
        self.agent.emit(event);
    }

    pub(crate) fn save(&mut self) -> Result<(), Error> {
        self.checkpoint.save(&self.st)?;
        Ok(())
    }

    /// A set cancel flag stops the run here, after the save that records
    /// where it stopped: a shutdown must not skip the one save that matters.
    pub(crate) fn check_cancel(&mut self) -> Result<(), Error> {
        if !self.agent.cancel.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.save()?;
        let phase = self.st.phase;
        self.emit(Event::Cancelled { phase });
        Err(Error::Cancelled { phase })
    }

    /// Call IDs make keys: refuse a reply whose IDs are empty or not unique
    /// over the run, before it is saved.
    fn check_call_ids(&self, turn: u32, calls: &[ToolCall]) -> Result<(), Error> {
        let mut seen: BTreeSet<&str> = self
            .st
            .messages
            .iter()
            .flat_map(|m| &m.calls)
            .map(|c| c.id.as_str())
            .collect();
        for c in calls {
            let reason = if c.id.is_empty() {
                "it is empty"
            } else if !seen.insert(&c.id) {
                "another call of the run has it"
            } else {
                continue;
            };
            return Err(Error::BadCallId {
                turn,
                call: c.id.clone(),
                reason,
            });
        }
        Ok(())
    }

    /// Phase model: call the model and save its reply before any call runs
    /// (save moment 2; for the final answer, save moment 5).
    fn model_turn(&mut self) -> Result<(), Error> {
        self.check_cancel()?;
        self.agent.limits.check(self.st.turns, &self.st.usage)?;
        let turn = self.st.turns.saturating_add(1);
        self.emit(Event::ModelCall { turn });
        let reply = self
            .agent
            .model
            .reply(&self.st.messages)
            .map_err(|source| Error::Model { turn, source })?;
        crashpoint::point!("reply arrived");
        self.check_call_ids(turn, &reply.calls)?;
        if !reply.usage.dollars.is_finite() || reply.usage.dollars < 0.0 {
            return Err(Error::Model {
                turn,
                source: ModelError::Failed(format!(
                    "the reply reports a cost of {} dollars",
                    reply.usage.dollars
                )),
            });
        }
        let u = &mut self.st.usage;
        u.input_tokens = u.input_tokens.saturating_add(reply.usage.input_tokens);
        u.output_tokens = u.output_tokens.saturating_add(reply.usage.output_tokens);
        u.dollars += reply.usage.dollars;
        self.st.turns = turn;
        self.st.messages.push(Message {
            role: Role::Assistant,
            text: reply.text.clone(),
            calls: reply.calls.clone(),
            call_id: None,
        });
        self.st.results.clear();
        self.st.attempts.clear();
        self.st.waiting.clear();
        self.st.calls = reply.calls.clone();
        let done = reply.calls.is_empty();
        if done {
            self.st.phase = Phase::Done;
            self.st.answer = Some(reply.text.clone());
        } else {
            self.st.phase = Phase::Tools;
        }
        self.save()?;
        self.emit(Event::ReplySaved {
            turn,
            calls: reply.calls,
            usage: reply.usage,
        });
        if done {
            self.emit(Event::Done { answer: reply.text });
        }
        Ok(())
    }

    /// Phases tools and paused: run the saved reply's unanswered calls in
    /// order, then go back to the model. Moving to phase model is not saved
    /// on its own: every result is in the conversation already, and a
    /// restart that finds all calls answered moves on the same way.
    fn tool_turn(&mut self) -> Result<(), Error> {
        if self.st.phase == Phase::Paused {
            self.st.phase = Phase::Tools;
            self.st.waiting.clear();
        }
        let calls = self.st.calls.clone();
        for call in &calls {
            if self.st.results.contains_key(&call.id) {
                continue;
            }
            self.check_cancel()?;
            let output = self.settle(call)?;
            self.record(call, output)?;
        }
        self.st.phase = Phase::Model;
        self.st.calls.clear();
        self.st.results.clear();
        self.st.attempts.clear();
        Ok(())
    }

    /// Save moment 5 (paused): the run waits on a person for `call`.
    pub(crate) fn pause(&mut self, call: &ToolCall) -> Error {
        self.st.phase = Phase::Paused;
        self.st.waiting = vec![call.id.clone()];
        if let Err(e) = self.save() {
            return e;
        }
        let waiting = self.st.waiting.clone();
        self.emit(Event::Paused {
            waiting: waiting.clone(),
        });
        Error::Paused { waiting }
    }

    /// Save moment 4: the call's result, with the files it wrote.
    fn record(&mut self, call: &ToolCall, out: ToolOutput) -> Result<(), Error> {
        self.st.results.insert(
            call.id.clone(),
            ToolResult {
                output: out.output.clone(),
                is_error: out.is_error,
            },
        );
        self.st.messages.push(Message {
            role: Role::Tool,
            text: out.output.clone(),
            calls: Vec::new(),
            call_id: Some(call.id.clone()),
        });
        self.st.files.extend(out.files);
        self.save()?;
        crashpoint::point!("result saved");
        self.emit(Event::ResultSaved {
            call: call.id.clone(),
            tool: call.tool.clone(),
            output: out.output,
            is_error: out.is_error,
        });
        Ok(())
    }
}
