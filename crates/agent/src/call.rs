//! One unanswered call: the approval gate, the attempt marker, and the
//! call itself; a marked call without a result goes to the ladder.

use crate::state::{Attempt, ToolCall};
use serde_json::Value;

use crate::agent::Agent;
use crate::approve::{Approval, Decision};
use crate::drive::Driver;
use crate::error::Error;
use crate::observe::{Event, Returned};
use crate::tool::{CallContext, Effect, Tool, ToolError, ToolOutput};

impl Driver<'_> {
    /// Get one unanswered call's result: run it, or, if it has a marker
    /// (an earlier life may have sent it), settle it on the ladder.
    pub(crate) fn settle(&mut self, call: &ToolCall) -> Result<ToolOutput, Error> {
        let agent = self.agent;
        let marker = self.st.attempts.get(&call.id).cloned();
        let Some(tool) = agent.tools.get(&call.tool) else {
            return self.unknown_tool(call, marker.is_some());
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

        // Past the gate, a call that needs approval has it.
        let approved = tool.needs_approval();
        if approved {
            if let Some(denied) = self.ask_approval(call)? {
                return Ok(denied);
            }
        }

        let key = agent.key_for(tool, call);
        if tool.effect() == Effect::ReadsOnly && !approved {
            return self.retried(call, tool, &args, key.as_deref());
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
        match self.invoke(call, tool, &args, key.as_deref(), false)? {
            Ok(out) => Ok(out),
            // The request may have acted: exactly a marker without a result.
            Err(reason) => self.ladder(call, tool, &args, &marker, reason),
        }
    }

    /// The answer to a call of a tool the agent does not have: an error
    /// result the model reads, or a typed error if the call has a marker
    /// (an earlier life sent it with a tool this one lacks).
    fn unknown_tool(&self, call: &ToolCall, marked: bool) -> Result<ToolOutput, Error> {
        if marked {
            return Err(Error::UnknownTool {
                call: call.id.clone(),
                tool: call.tool.clone(),
            });
        }
        let known: Vec<&str> = self.agent.tools.names().collect();
        Ok(ToolOutput::error(format!(
            "unknown tool {:?}; the tools are: {}",
            call.tool,
            known.join(", ")
        )))
    }

    /// Asks the approver about `call`: `None` when approved, the error
    /// result the model reads when denied, and the pause when left for
    /// later.
    fn ask_approval(&mut self, call: &ToolCall) -> Result<Option<ToolOutput>, Error> {
        let agent = self.agent;
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
            Decision::Approve => Ok(None),
            Decision::Deny(reason) => Ok(Some(ToolOutput::error(format!(
                "a person denied call {}: {reason}",
                call.id
            )))),
            Decision::Later => Err(self.pause(call)),
        }
    }

    /// Runs a call that only reads, unmarked: a repeat is harmless, so an
    /// unknown outcome is simply retried, up to [`Agent::UNKNOWN_TRIES`]
    /// times.
    fn retried(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        key: Option<&str>,
    ) -> Result<ToolOutput, Error> {
        let mut reason = String::new();
        for n in 0..Agent::UNKNOWN_TRIES {
            match self.invoke(call, tool, args, key, n > 0)? {
                Ok(out) => return Ok(out),
                Err(r) => reason = r,
            }
        }
        Err(Error::OutcomeUnknown {
            call: call.id.clone(),
            tool: call.tool.clone(),
            tries: Agent::UNKNOWN_TRIES,
            reason,
        })
    }

    /// Run the tool once. The inner `Err` carries the reason of an unknown
    /// outcome; the outer one stops the run (a refusal for good).
    pub(crate) fn invoke(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        args: &Value,
        key: Option<&str>,
        rerun: bool,
    ) -> Result<Result<ToolOutput, String>, Error> {
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
            epoch: self.checkpoint.epoch(),
            messages: &self.st.messages,
        };
        let mut fatal = None;
        let result = match tool.call(&ctx, args) {
            Ok(out) => Ok(out),
            Err(ToolError::Failed(message)) => Ok(ToolOutput::error(message)),
            Err(ToolError::Unknown(reason)) => Err(reason),
            // Before the point and the event: a stale process acts no more.
            Err(ToolError::Stale(reason)) => {
                return Err(Error::Stale {
                    call: call.id.clone(),
                    tool: call.tool.clone(),
                    reason,
                })
            }
            Err(ToolError::Fatal(reason)) => {
                let out = ToolOutput::error(&reason);
                fatal = Some(reason);
                Ok(out)
            }
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
        if let Some(reason) = fatal {
            return Err(Error::ToolFatal {
                call: call.id.clone(),
                tool: call.tool.clone(),
                reason,
            });
        }
        Ok(result)
    }
}
