//! The loop's parts for a run: the triage tools on its world (gated ones
//! wait for a person), and its model (the recording's replies or a live
//! provider, with `--record` and `--die-after-reply` around it).

use std::sync::Arc;

use agent::model::{Model, Recording, ScriptedModel};
use agent::provider::Prices;
use agent::tool::{Gated, Tool, ToolError, Tools};
use durable::store::RunStore;
use durable::{Dir, RunId};
use serde_json::Value;
use triage_tools::{Backend, CodePatch, Expected, Holds, IssueComment, IssueFile, Search};

use super::hooks::DieAfterReply;
use super::Shared;
use crate::exit::Failure;
use crate::live::Mode;
use crate::task;
use crate::world::World;
use crate::Cli;

/// The workspace as `code_patch` acts on it: what each file must hold
/// (the task's seeds, with what the run wrote over them), and, on a
/// store, the fence it asks before each write.
pub(crate) struct Workspace {
    pub(crate) dir: Arc<dyn Dir>,
    pub(crate) expected: Expected,
    pub(crate) fence: Option<Arc<dyn Holds>>,
}

/// A run store as the fence of the workspace's writes: the run must still
/// be at the writer's epoch.
#[derive(Debug)]
pub(crate) struct StoreFence(pub(crate) Arc<dyn RunStore>);

impl Holds for StoreFence {
    fn holds(&self, run: &RunId, epoch: u64) -> Result<(), ToolError> {
        match self.0.load(run) {
            Ok(Some(record)) if record.epoch == epoch => Ok(()),
            Ok(Some(record)) => Err(ToolError::Stale(format!(
                "the store records epoch {} for run {run}, this process holds {epoch}; the \
                 patch was not written",
                record.epoch
            ))),
            Ok(None) => Err(ToolError::Fatal(format!(
                "the store has no run {run}; the patch was not written"
            ))),
            Err(e) => Err(ToolError::Fatal(format!(
                "cannot ask the store whether this process still holds run {run} ({e}); the \
                 patch was not written"
            ))),
        }
    }
}

/// The triage tools on this run's world; tools named in `gated` wait for a
/// person's yes.
pub(crate) fn build_tools(tracker: &Backend, workspace: Workspace, gated: &[String]) -> Tools {
    fn add<T: Tool + std::fmt::Debug + 'static>(tools: &mut Tools, tool: T, gated: &[String]) {
        if gated.iter().any(|g| g == tool.name()) {
            tools.insert(Gated(tool));
        } else {
            tools.insert(tool);
        }
    }
    let mut tools = Tools::new();
    add(&mut tools, IssueFile::new(tracker.clone()), gated);
    add(&mut tools, IssueComment::new(tracker.clone()), gated);
    add(&mut tools, Search::new(tracker.clone()), gated);
    let mut patch = CodePatch::new(workspace.dir).expecting(workspace.expected);
    if let Some(fence) = workspace.fence {
        patch = patch.fenced(fence);
    }
    add(&mut tools, patch, gated);
    tools
}

/// The run's model: the recording's replies or a live provider, then
/// `--record FILE` and `--die-after-reply N` around it.
pub(crate) fn model(
    cli: &Cli,
    mode: &Mode,
    prices: Prices,
    world: &World,
    tools: &Tools,
    printer: &Shared,
) -> Result<Box<dyn Model>, Failure> {
    let transcript = &world.task.transcript;
    let mut model: Box<dyn Model> = match mode {
        Mode::Replay => {
            transcript
                .check_tools(tools)
                .map_err(|e| Failure::run("bad_task", e.to_string()))?;
            Box::new(ScriptedModel::new(transcript.clone()))
        }
        Mode::Live(live) => live
            .model(prices, tools.specs())
            .map_err(|e| Failure::usage("live", e.to_string()))?,
    };
    if let Some(path) = &cli.record {
        let mut header = match serde_json::from_str::<Value>(&world.task.text) {
            Ok(Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        };
        header.remove("replies");
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        header.insert(
            "name".into(),
            Value::String(
                stem.filter(|s| task::valid_name(s))
                    .unwrap_or_else(|| world.task.name.clone()),
            ),
        );
        header.insert("task".into(), Value::String(transcript.task.clone()));
        crate::files::create_parents(path)?;
        model = Box::new(
            Recording::new(model, path, header)
                .map_err(|e| Failure::usage("record", e.to_string()))?,
        );
    }
    if let Some(turn) = cli.die_after_reply {
        model = Box::new(DieAfterReply {
            inner: model,
            turn,
            printer: Arc::clone(printer),
        });
    }
    Ok(model)
}
