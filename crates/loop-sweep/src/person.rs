//! The world's watchers: a model that counts its calls, the gated tool's
//! witness, and the scripted person's answers.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use agent::approve::Answer;
use agent::model::{Model, ModelError, Reply};
use agent::state::{Message, ToolCall};
use agent::tool::{CallContext, Effect, Gated, Keys, Lookup, Tool, ToolError, ToolOutput};
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
) -> Answer {
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
                    epoch: 1,
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
        Some(output) => Answer::Done(agent::state::ToolResult {
            output,
            is_error: false,
        }),
        None => Answer::Rerun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable::testing::MemDir;
    use serde_json::json;
    use tracker::Mode;

    fn call(id: &str, tool: &str, args: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool: tool.into(),
            args: args.to_string(),
        }
    }

    fn done(output: String) -> Answer {
        Answer::Done(agent::state::ToolResult {
            output,
            is_error: false,
        })
    }

    /// The person finds an issue by its title *and* body, a comment by its
    /// issue and body, and a patch by the workspace; anything else did not
    /// happen.
    #[test]
    fn the_person_finds_what_the_tracker_and_the_workspace_hold() {
        let t = Tracker::new(Mode::Keyed);
        let n = t.file_issue("A", "a", None).unwrap();
        let c = t.comment(n, "x", None).unwrap();
        let ws: Arc<dyn Dir> = Arc::new(MemDir::new());
        let file = |title: &str, body: &str| {
            person_answer(
                &t,
                &ws,
                &call("c1", "issue_file", json!({"title": title, "body": body})),
            )
        };
        assert_eq!(file("A", "a"), done(issue_output(n)));
        assert_eq!(file("A", "b"), Answer::Rerun, "same title, other body");
        assert_eq!(file("B", "a"), Answer::Rerun, "same body, other title");
        let comment = |issue: u64, body: &str| {
            person_answer(
                &t,
                &ws,
                &call("c2", "issue_comment", json!({"issue": issue, "body": body})),
            )
        };
        assert_eq!(comment(n, "x"), done(comment_output(n, c)));
        assert_eq!(comment(n, "y"), Answer::Rerun);
        assert_eq!(comment(n + 1, "x"), Answer::Rerun);

        let args = json!({"path": "lib.rs", "old": "", "new": "fn f() {}\n"});
        let patch = call("c3", "code_patch", args.clone());
        assert_eq!(person_answer(&t, &ws, &patch), Answer::Rerun, "not applied");
        let run = RunId::parse(RUN).unwrap();
        let ctx = CallContext {
            run: &run,
            call_id: "c3",
            key: None,
            epoch: 1,
            messages: &[],
        };
        let out = CodePatch::new(Arc::clone(&ws)).call(&ctx, &args).unwrap();
        assert_eq!(person_answer(&t, &ws, &patch), done(out.output));
        assert_eq!(
            person_answer(&t, &ws, &call("c4", "search", json!({"query": "A"}))),
            Answer::Rerun
        );
    }

    /// A gated call counts against the gate unless the person said yes and
    /// the yes is saved: a yes only in the person's memory is not enough.
    #[test]
    fn a_yes_that_is_not_saved_does_not_open_the_gate() {
        let t = Tracker::new(Mode::Keyed);
        let tally = Arc::new(Tally::default());
        let w = Witnessed {
            inner: Gated(IssueFile::new(t.clone())),
            checkpoints: Arc::new(MemDir::new()),
            tally: Arc::clone(&tally),
        };
        let run = RunId::parse(RUN).unwrap();
        let ctx = |id| CallContext {
            run: &run,
            call_id: id,
            key: None,
            epoch: 1,
            messages: &[],
        };
        let args = json!({"title": "A", "body": "a"});
        tally.yes.lock().unwrap().insert("c1".to_owned());
        w.call(&ctx("c1"), &args).unwrap();
        assert_eq!(tally.gate.load(Ordering::SeqCst), 1);
        w.call(&ctx("c2"), &args).unwrap();
        assert_eq!(tally.gate.load(Ordering::SeqCst), 2);
        assert_eq!(
            *tally.notes.lock().unwrap(),
            vec![
                "gated call c1 ran without a saved yes".to_owned(),
                "gated call c2 ran without a yes".to_owned()
            ]
        );
        assert_eq!(t.issues().len(), 2, "the gate's witness lets both run");
    }
}
