//! The resolution ladder: how a call that may have acted, and has no
//! result, is settled — rerun if a repeat is harmless, else ask the service
//! (the tool's lookup), else ask a person.

use crate::state::{Attempt, ToolCall, ToolResult};
use serde_json::Value;

use crate::agent::Agent;
use crate::approve::{Answer, Question};
use crate::drive::Driver;
use crate::error::Error;
use crate::observe::{Event, Rung};
use crate::tool::{CallContext, Effect, Lookup, Tool, ToolOutput};

/// What the ladder decided for a marked call.
enum Step {
    /// Run it (again).
    Rerun,
    /// It is settled with this result.
    Settled(ToolOutput),
}

impl Driver<'_> {
    /// Settle a call that may have acted and has no result: climb the
    /// ladder, rerun when it says so, and climb again if the rerun's outcome
    /// is unknown too (bounded by [`Agent::UNKNOWN_TRIES`]).
    pub(crate) fn ladder(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        marker: &Attempt,
        mut reason: String,
    ) -> Result<ToolOutput, Error> {
        for _ in 0..Agent::UNKNOWN_TRIES {
            match self.ladder_step(call, tool, args, marker)? {
                Step::Settled(out) => return Ok(out),
                Step::Rerun => {
                    let key = self.agent.key_for(tool, call);
                    match self.invoke(call, tool, args, key.as_deref(), true)? {
                        Ok(out) => return Ok(out),
                        Err(r) => reason = r,
                    }
                }
            }
        }
        Err(Error::OutcomeUnknown {
            call: call.id.clone(),
            tool: call.tool.clone(),
            tries: Agent::UNKNOWN_TRIES,
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
        // Rung 1: run it again when a repeat is harmless.
        let not_harmless = match self.try_rerun(call, tool, marker) {
            Ok(step) => return Ok(step),
            Err(why) => why,
        };
        // Rung 2: ask the service.
        let cant_tell = match self.ask_service(call, tool, args, marker) {
            Ok(step) => return Ok(step),
            Err(why) => why,
        };
        // Rung 3: ask a person.
        self.ask_person(call, marker, &format!("{not_harmless}, and {cant_tell}"))
    }

    /// Rung 1: a rerun when a repeat is harmless, else why it is not.
    fn try_rerun(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        marker: &Attempt,
    ) -> Result<Step, &'static str> {
        let harmless = match tool.effect() {
            Effect::ReadsOnly => Some("the tool only reads"),
            Effect::Idempotent => Some("the tool is idempotent"),
            Effect::Changes
                if marker.key.is_some() && tool.keys().held(marker.at, self.agent.clock.now()) =>
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
        Err(not_harmless)
    }

    /// Rung 2: the service's answer when its lookup is certain, else why
    /// it cannot tell.
    fn ask_service(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        marker: &Attempt,
    ) -> Result<Step, String> {
        let ctx = CallContext {
            run: &self.agent.run,
            call_id: &call.id,
            key: marker.key.as_deref(),
            epoch: self.checkpoint.epoch(),
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
        Err(cant_tell)
    }

    /// Rung 3: a person's answer (`why` says why the lower rungs could not
    /// settle it), or the pause until they give one.
    fn ask_person(&mut self, call: &ToolCall, marker: &Attempt, why: &str) -> Result<Step, Error> {
        let agent = self.agent;
        let answer = agent.approver.answer(&Question {
            run: &agent.run,
            call,
            marker,
            why,
        });
        match answer {
            Answer::Rerun => {
                self.ladder_event(
                    call,
                    Rung::Person,
                    true,
                    "a person says it did not happen: rerun".into(),
                );
                Ok(Step::Rerun)
            }
            Answer::Done(ToolResult { output, is_error }) => {
                self.ladder_event(call, Rung::Person, true, "a person says it happened".into());
                Ok(Step::Settled(ToolOutput {
                    output,
                    is_error,
                    ..ToolOutput::default()
                }))
            }
            Answer::Later => {
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
}
