//! The world's watchers: a model that counts its calls, the gated tool's
//! witness, and the scripted person's answers.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use agent::{
    CallContext, Effect, Gated, Keys, Lookup, Model, ModelError, Reply, Resolution, Tool,
    ToolError, ToolOutput,
};
use agent::{Message, ToolCall};
use durable::{Dir, RunId};
use serde_json::Value;
use tracker::Tracker;
use triage_tools::{comment_output, issue_output, CodePatch, IssueFile};

use crate::world::{saved_yes, Tally};
use crate::RUN;

/// A model that counts its calls in the world.
pub(crate) struct Counted {
    pub(crate) inner: Box<dyn Model>,
    pub(crate) tally: Arc<Tally>,
}

impl Model for Counted {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        self.tally.model_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.reply(conversation)
    }
}

/// The gated `issue_file`, watched: a call that runs unless the person said
/// yes to it *and* the yes is saved counts against the gate. (The saved
/// marker alone would not do: a loop that wrote it before asking would
/// vouch for itself.)
pub(crate) struct Witnessed {
    pub(crate) inner: Gated<IssueFile>,
    pub(crate) checkpoints: Arc<dyn Dir>,
    pub(crate) tally: Arc<Tally>,
}

impl Tool for Witnessed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn effect(&self) -> Effect {
        self.inner.effect()
    }
    fn keys(&self) -> Keys {
        self.inner.keys()
    }
    fn needs_approval(&self) -> bool {
        self.inner.needs_approval()
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let said = self.tally.said_yes(ctx.call_id);
        if !(said && saved_yes(self.checkpoints.as_ref(), ctx.call_id)) {
            self.tally.gate.fetch_add(1, Ordering::SeqCst);
            self.tally.note(format!(
                "gated call {} ran without {}",
                ctx.call_id,
                if said { "a saved yes" } else { "a yes" }
            ));
        }
        self.inner.call(ctx, args)
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        self.inner.lookup(ctx, args)
    }
}

/// The scripted person's answer to a ladder question: they look at the
/// tracker's records and the workspace themselves (not through the lagging
/// search) and always answer right.
pub(crate) fn person_answer(
    w_tracker: &Tracker,
    workspace: &Arc<dyn Dir>,
    call: &ToolCall,
) -> Resolution {
    let args: Value = serde_json::from_str(&call.args).unwrap_or(Value::Null);
    let s = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or_default();
    let found = match call.tool.as_str() {
        "issue_file" => w_tracker
            .issues()
            .iter()
            .find(|i| i.title == s("title") && i.body == s("body"))
            .map(|i| issue_output(i.number)),
        "issue_comment" => {
            let issue = args.get("issue").and_then(Value::as_u64).unwrap_or(0);
            w_tracker
                .issues()
                .iter()
                .filter(|i| i.number == issue)
                .flat_map(|i| &i.comments)
                .find(|c| c.body == s("body"))
                .map(|c| comment_output(issue, c.id))
        }
        "code_patch" => {
            let run = RunId::parse(RUN).ok();
            let tool = CodePatch::new(Arc::clone(workspace));
            run.and_then(|run| {
                let ctx = CallContext {
                    run: &run,
                    call_id: &call.id,
                    key: None,
                    messages: &[],
                };
                match tool.lookup(&ctx, &args) {
                    Lookup::Found(out) => Some(out.output),
                    _ => None,
                }
            })
        }
        _ => None,
    };
    match found {
        Some(output) => Resolution::Done(agent::ToolResult {
            output,
            is_error: false,
        }),
        None => Resolution::Rerun,
    }
}
