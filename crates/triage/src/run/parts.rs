//! The loop's parts for a run: the triage tools on its world (gated ones
//! wait for a person), and its model (the recording's replies or a live
//! provider, with `--record` and `--die-after-reply` around it).

use std::sync::Arc;

use agent::model::{Model, Recording, ScriptedModel};
use agent::provider::Prices;
use agent::tool::{Gated, Tool, Tools};
use durable::Dir;
use serde_json::Value;
use triage_tools::{Backend, CodePatch, IssueComment, IssueFile, Search};

use super::hooks::DieAfterReply;
use super::Shared;
use crate::exit::Failure;
use crate::live::Mode;
use crate::task;
use crate::world::World;
use crate::Cli;

/// The triage tools on this run's world; tools named in `gated` wait for a
/// person's yes.
pub(crate) fn build_tools(tracker: &Backend, workspace: Arc<dyn Dir>, gated: &[String]) -> Tools {
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
    add(&mut tools, CodePatch::new(workspace), gated);
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
