//! The loop: five save moments, resume by phase, and the resolution ladder.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{Attempt, Checkpoint, Message, Phase, Role, State, ToolCall, ToolResult};
use durable::{Dir, Options, RunId};
use serde_json::Value;

use crate::approver::{Approval, Approver, Decision, Question, Resolution, Unattended};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::limits::Limits;
use crate::model::{Model, ModelError, ScriptedModel};
use crate::observer::{Event, Observer, Quiet, Returned, Rung};
use crate::result::RunResult;
use crate::tool::{CallContext, Effect, Lookup, Tool, ToolError, ToolOutput, Tools};
use crate::transcript::{Transcript, TranscriptError};

/// How often one life sends a call whose outcome stays unknown before it
/// gives up with [`Error::OutcomeUnknown`] (the marker stays, so a restart
/// tries again). Every loop is bounded.
pub const UNKNOWN_TRIES: u32 = 3;

/// A durable agent run: a model, tools, a person, and a checkpoint.
///
/// [`Agent::run`] is one *life*: it opens (and locks) the run's checkpoint,
/// starts or resumes it from its saved phase, and runs until the answer, a
/// pause, a limit, a cancel or an error. Call it again, in this process or a
/// new one, to resume; a finished run returns its saved answer and calls
/// nothing.
///
/// The state is saved at five moments, each with the store's crash-safe
/// write: at start (the restart count, before anything else, done by
/// [`Checkpoint::open`]); after each model reply, before any of its calls
/// runs; as an attempt marker before each call that can change something
/// (for a gated call, after the yes); after each call's result; and when the
/// phase becomes paused or done. The loop's own crash points sit right after
/// the moments a crash matters most: `reply arrived` (the reply is in memory
/// only), `marker saved`, `tool returned` (the window no checkpoint can
/// close) and `result saved`.
pub struct Agent {
    run: RunId,
    checkpoints: Arc<dyn Dir>,
    options: Options,
    task: String,
    model: Box<dyn Model>,
    tools: Tools,
    approver: Box<dyn Approver>,
    observer: Box<dyn Observer>,
    limits: Limits,
    clock: Box<dyn Clock>,
    cancel: Arc<AtomicBool>,
    workspace: Option<Arc<dyn Dir>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("run", &self.run)
            .field("checkpoints", &self.checkpoints)
            .field("options", &self.options)
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent for run `run`, checkpointed in `checkpoints`, that gives a
    /// fresh run `task` as its first message.
    ///
    /// Defaults: synced saves and ten restarts ([`Options::default`]),
    /// [`Limits::default`], nobody to approve ([`Unattended`]: gated calls
    /// and ladder questions pause the run), no observer, the system clock,
    /// no workspace check.
    pub fn new(
        run: RunId,
        checkpoints: Arc<dyn Dir>,
        task: impl Into<String>,
        model: impl Model + 'static,
        tools: Tools,
    ) -> Agent {
        Agent {
            run,
            checkpoints,
            options: Options::default(),
            task: task.into(),
            model: Box::new(model),
            tools,
            approver: Box::new(Unattended),
            observer: Box::new(Quiet),
            limits: Limits::default(),
            clock: Box::new(SystemClock),
            cancel: Arc::default(),
            workspace: None,
        }
    }

    /// An agent that replays `transcript` (its task, a [`ScriptedModel`]),
    /// after checking that every call names one of `tools`.
    pub fn scripted(
        run: RunId,
        checkpoints: Arc<dyn Dir>,
        transcript: impl Into<Arc<Transcript>>,
        tools: Tools,
    ) -> Result<Agent, TranscriptError> {
        let transcript = transcript.into();
        transcript.check_tools(&tools)?;
        let task = transcript.task.clone();
        Ok(Agent::new(
            run,
            checkpoints,
            task,
            ScriptedModel::new(transcript),
            tools,
        ))
    }

    /// Save and restart options of the checkpoint store.
    pub fn with_options(mut self, options: Options) -> Agent {
        self.options = options;
        self
    }

    /// The person who approves gated calls and answers ladder questions.
    pub fn with_approver(mut self, approver: impl Approver + 'static) -> Agent {
        self.approver = Box::new(approver);
        self
    }

    /// Receive one [`Event`] per step.
    pub fn with_observer(mut self, observer: impl Observer + 'static) -> Agent {
        self.observer = Box::new(observer);
        self
    }

    /// Turn, token and dollar limits over the run's whole life.
    pub fn with_limits(mut self, limits: Limits) -> Agent {
        self.limits = limits;
        self
    }

    /// The clock markers record, to expire keys (see
    /// [`Keys`](crate::Keys)).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Agent {
        self.clock = Box::new(clock);
        self
    }

    /// A cancel flag: once set (by a signal handler, another thread), the
    /// loop stops at the next step, still making the save that records where
    /// it stopped, and returns [`Error::Cancelled`].
    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> Agent {
        self.cancel = cancel;
        self
    }

    /// The run's workspace: checked on every resume against the SHA-256s
    /// the state recorded for the files the run wrote
    /// ([`durable::Error::WorkspaceChanged`]).
    pub fn with_workspace(mut self, workspace: Arc<dyn Dir>) -> Agent {
        self.workspace = Some(workspace);
        self
    }

    /// The run's ID.
    pub fn run_id(&self) -> &RunId {
        &self.run
    }

    /// The cancel flag (set it to stop the run at its next step).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// The run's tools.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// Run one life: start or resume the run and go on until it has its
    /// answer.
    ///
    /// Resume is by the saved phase: `done` returns the saved answer without
    /// calling anything; `model` makes the model call it was about to make;
    /// `tools` and `paused` run the last reply's unanswered calls in order,
    /// sending a call that has a marker but no result up the ladder. Errors
    /// are typed; whatever the error, the checkpoint holds where the run
    /// stopped.
    pub fn run(&self) -> Result<RunResult, Error> {
        let opened = Checkpoint::open(Arc::clone(&self.checkpoints), &self.run, self.options)?;
        let mut life = Life {
            agent: self,
            checkpoint: opened.checkpoint,
            st: opened.state,
        };
        if opened.resumed {
            self.emit(Event::Resumed {
                run: self.run.to_string(),
                phase: life.st.phase,
                resumes: life.checkpoint.resumes(),
                turns: life.st.turns,
            });
        } else {
            self.emit(Event::Started {
                run: self.run.to_string(),
            });
        }
        if life.st.phase == Phase::Done {
            self.emit(Event::Done {
                answer: life.st.answer.clone().unwrap_or_default(),
            });
            return Ok(RunResult::from_state(&life.checkpoint, &life.st));
        }
        if opened.resumed {
            self.check_workspace(&life.st)?;
        }
        if life.st.messages.is_empty() {
            life.st.messages.push(Message {
                role: Role::User,
                text: self.task.clone(),
                ..Message::default()
            });
        }
        life.drive()
    }

    fn emit(&self, event: Event) {
        self.observer.event(&event);
    }

    fn key_for(&self, tool: &dyn Tool, call: &ToolCall) -> Option<String> {
        tool.keys()
            .sends()
            .then(|| durable::key(self.run.as_str(), &call.id))
    }

    /// Every file the state recorded must still hold what the run wrote,
    /// except files an unanswered marked call may have written since: those
    /// are the ladder's to settle (the lookup records their new hash).
    fn check_workspace(&self, st: &State) -> Result<(), Error> {
        let Some(ws) = &self.workspace else {
            return Ok(());
        };
        let pending: BTreeSet<String> = st
            .calls
            .iter()
            .filter(|c| st.attempts.contains_key(&c.id) && !st.results.contains_key(&c.id))
            .filter_map(|c| {
                let tool = self.tools.get(&c.tool)?;
                let args: Value = serde_json::from_str(&c.args).ok()?;
                Some(tool.touches(&args))
            })
            .flatten()
            .collect();
        for (rel, expected) in &st.files {
            if pending.contains(rel) {
                continue;
            }
            let found = ws
                .read(rel)
                .map_err(|source| durable::Error::Io {
                    path: ws.path_of(rel),
                    op: "read workspace file",
                    source,
                })?
                .map(|bytes| durable::sha256_hex(&bytes));
            if found.as_deref() != Some(expected.as_str()) {
                return Err(durable::Error::WorkspaceChanged {
                    file: ws.path_of(rel),
                    expected: expected.clone(),
                    found,
                }
                .into());
            }
        }
        Ok(())
    }
}

/// What the ladder decided for a marked call.
enum Step {
    /// Run it (again).
    Rerun,
    /// It is settled with this result.
    Settled(ToolOutput),
}

/// One life of a run: the open checkpoint and the state in memory.
struct Life<'a> {
    agent: &'a Agent,
    checkpoint: Checkpoint,
    st: State,
}

impl<'a> Life<'a> {
    fn drive(&mut self) -> Result<RunResult, Error> {
        loop {
            match self.st.phase {
                Phase::Done => return Ok(RunResult::from_state(&self.checkpoint, &self.st)),
                Phase::Model => self.model_turn()?,
                Phase::Tools | Phase::Paused => self.tool_turn()?,
            }
        }
    }

    fn emit(&self, event: Event) {
        self.agent.emit(event);
    }

    fn save(&mut self) -> Result<(), Error> {
        self.checkpoint.save(&self.st)?;
        Ok(())
    }

    /// A set cancel flag stops the run here, after the save that records
    /// where it stopped: a shutdown must not skip the one save that matters.
    fn check_cancel(&mut self) -> Result<(), Error> {
        if !self.agent.cancel.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.save()?;
        let phase = self.st.phase;
        self.emit(Event::Cancelled { phase });
        Err(Error::Cancelled { phase })
    }

    /// Limits come from the saved state, so they cover every life.
    fn check_limits(&self) -> Result<(), Error> {
        let limits = &self.agent.limits;
        let u = &self.st.usage;
        if let Some(limit) = limits.max_turns {
            if self.st.turns >= limit {
                return Err(Error::TurnLimit {
                    turns: self.st.turns,
                    limit,
                });
            }
        }
        let tokens = u.input_tokens.saturating_add(u.output_tokens);
        if let Some(limit) = limits.max_tokens {
            if tokens >= limit {
                return Err(Error::TokenLimit { tokens, limit });
            }
        }
        if let Some(limit) = limits.max_dollars {
            if u.dollars >= limit {
                return Err(Error::DollarLimit {
                    dollars: u.dollars,
                    limit,
                });
            }
        }
        Ok(())
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
        self.check_limits()?;
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

    /// Get one unanswered call's result: run it, or, if it has a marker
    /// (an earlier life may have sent it), settle it on the ladder.
    fn settle(&mut self, call: &ToolCall) -> Result<ToolOutput, Error> {
        let agent = self.agent;
        let marker = self.st.attempts.get(&call.id).cloned();
        let Some(tool) = agent.tools.get(&call.tool) else {
            if marker.is_some() {
                return Err(Error::UnknownTool {
                    call: call.id.clone(),
                    tool: call.tool.clone(),
                });
            }
            let known: Vec<&str> = agent.tools.names().collect();
            return Ok(ToolOutput::error(format!(
                "unknown tool {:?}; the tools are: {}",
                call.tool,
                known.join(", ")
            )));
        };
        let args: Value = match serde_json::from_str(&call.args) {
            Ok(v) => v,
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "the arguments of call {} are not valid JSON ({e}); nothing was run",
                    call.id
                )))
            }
        };
        if let Some(marker) = marker {
            let why = "the run stopped after the call's marker was saved and before its result was";
            return self.ladder(call, tool, &args, &marker, why.to_owned());
        }

        let mut approved = false;
        if tool.needs_approval() {
            let decision = agent.approver.approve(&Approval {
                run: &agent.run,
                call,
            });
            self.emit(Event::Decided {
                call: call.id.clone(),
                tool: call.tool.clone(),
                decision: decision.clone(),
            });
            match decision {
                Decision::Approve => approved = true,
                Decision::Deny(reason) => {
                    return Ok(ToolOutput::error(format!(
                        "a person denied call {}: {reason}",
                        call.id
                    )))
                }
                Decision::Later => return Err(self.pause(call)),
            }
        }

        let key = agent.key_for(tool, call);
        if tool.effect() == Effect::ReadsOnly && !approved {
            // Nothing to mark: a repeat is harmless, so an unknown outcome
            // is simply retried.
            let mut reason = String::new();
            for n in 0..UNKNOWN_TRIES {
                match self.invoke(call, tool, &args, key.as_deref(), n > 0) {
                    Ok(out) => return Ok(out),
                    Err(r) => reason = r,
                }
            }
            return Err(Error::OutcomeUnknown {
                call: call.id.clone(),
                tool: call.tool.clone(),
                tries: UNKNOWN_TRIES,
                reason,
            });
        }

        // Save moment 3: the marker, after the yes, before the call.
        let marker = Attempt {
            key: key.clone(),
            approved,
            at: agent.clock.now(),
        };
        self.st.attempts.insert(call.id.clone(), marker.clone());
        self.save()?;
        crashpoint::point!("marker saved");
        self.emit(Event::MarkerSaved {
            call: call.id.clone(),
            tool: call.tool.clone(),
            key: key.clone(),
            approved,
        });
        match self.invoke(call, tool, &args, key.as_deref(), false) {
            Ok(out) => Ok(out),
            // The request may have acted: exactly a marker without a result.
            Err(reason) => self.ladder(call, tool, &args, &marker, reason),
        }
    }

    /// Run the tool once. `Err` carries the reason of an unknown outcome.
    fn invoke(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        key: Option<&str>,
        rerun: bool,
    ) -> Result<ToolOutput, String> {
        self.emit(Event::ToolCall {
            call: call.id.clone(),
            tool: call.tool.clone(),
            key: key.map(str::to_owned),
            args: call.args.clone(),
            rerun,
        });
        let ctx = CallContext {
            run: &self.agent.run,
            call_id: &call.id,
            key,
            messages: &self.st.messages,
        };
        let result = match tool.call(&ctx, args) {
            Ok(out) => Ok(out),
            Err(ToolError::Failed(message)) => Ok(ToolOutput::error(message)),
            Err(ToolError::Unknown(reason)) => Err(reason),
        };
        crashpoint::point!("tool returned");
        self.emit(Event::ToolReturned {
            call: call.id.clone(),
            tool: call.tool.clone(),
            returned: match &result {
                Ok(out) => Returned::Result {
                    output: out.output.clone(),
                    is_error: out.is_error,
                },
                Err(reason) => Returned::Unknown(reason.clone()),
            },
        });
        result
    }

    /// Settle a call that may have acted and has no result: climb the
    /// ladder, rerun when it says so, and climb again if the rerun's outcome
    /// is unknown too (bounded by [`UNKNOWN_TRIES`]).
    fn ladder(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        marker: &Attempt,
        mut reason: String,
    ) -> Result<ToolOutput, Error> {
        for _ in 0..UNKNOWN_TRIES {
            match self.ladder_step(call, tool, args, marker)? {
                Step::Settled(out) => return Ok(out),
                Step::Rerun => {
                    let key = self.agent.key_for(tool, call);
                    match self.invoke(call, tool, args, key.as_deref(), true) {
                        Ok(out) => return Ok(out),
                        Err(r) => reason = r,
                    }
                }
            }
        }
        Err(Error::OutcomeUnknown {
            call: call.id.clone(),
            tool: call.tool.clone(),
            tries: UNKNOWN_TRIES,
            reason,
        })
    }

    fn ladder_event(&self, call: &ToolCall, rung: Rung, settled: bool, why: String) {
        self.emit(Event::Ladder {
            call: call.id.clone(),
            tool: call.tool.clone(),
            rung,
            settled,
            why,
        });
    }

    /// One climb: each rung is tried only if the one below cannot decide.
    fn ladder_step(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        marker: &Attempt,
    ) -> Result<Step, Error> {
        let agent = self.agent;
        // Rung 1: run it again when a repeat is harmless.
        let harmless = match tool.effect() {
            Effect::ReadsOnly => Some("the tool only reads"),
            Effect::Idempotent => Some("the tool is idempotent"),
            Effect::Changes
                if marker.key.is_some() && tool.keys().held(marker.at, agent.clock.now()) =>
            {
                Some("the service still holds the call's key, so a repeat gets the first answer")
            }
            Effect::Changes => None,
        };
        if let Some(why) = harmless {
            self.ladder_event(call, Rung::Rerun, true, format!("rerun: {why}"));
            return Ok(Step::Rerun);
        }
        let not_harmless = if marker.key.is_some() {
            "the call changes something and its key has expired"
        } else {
            "the call changes something and sent no key its service honours"
        };
        self.ladder_event(call, Rung::Rerun, false, not_harmless.to_owned());

        // Rung 2: ask the service.
        let ctx = CallContext {
            run: &agent.run,
            call_id: &call.id,
            key: marker.key.as_deref(),
            messages: &self.st.messages,
        };
        let cant_tell = match tool.lookup(&ctx, args) {
            Lookup::Found(out) => {
                self.ladder_event(call, Rung::Lookup, true, "the lookup found it".into());
                return Ok(Step::Settled(out));
            }
            Lookup::NotFound => {
                self.ladder_event(
                    call,
                    Rung::Lookup,
                    true,
                    "the lookup is certain it did not happen: rerun".into(),
                );
                return Ok(Step::Rerun);
            }
            Lookup::CantTell(why) => why,
        };
        self.ladder_event(call, Rung::Lookup, false, cant_tell.clone());

        // Rung 3: ask a person.
        let why = format!("{not_harmless}, and {cant_tell}");
        let answer = agent.approver.resolve(&Question {
            run: &agent.run,
            call,
            marker,
            why: &why,
        });
        match answer {
            Resolution::Rerun => {
                self.ladder_event(
                    call,
                    Rung::Person,
                    true,
                    "a person says it did not happen: rerun".into(),
                );
                Ok(Step::Rerun)
            }
            Resolution::Done(ToolResult { output, is_error }) => {
                self.ladder_event(call, Rung::Person, true, "a person says it happened".into());
                Ok(Step::Settled(ToolOutput {
                    output,
                    is_error,
                    ..ToolOutput::default()
                }))
            }
            Resolution::Later => {
                self.ladder_event(
                    call,
                    Rung::Person,
                    false,
                    "a person will answer later".into(),
                );
                Err(self.pause(call))
            }
        }
    }

    /// Save moment 5 (paused): the run waits on a person for `call`.
    fn pause(&mut self, call: &ToolCall) -> Error {
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
