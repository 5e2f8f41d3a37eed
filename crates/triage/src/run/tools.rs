//! The loop's tools on the run's world, and who approves gated calls.

use std::io::{self, IsTerminal};
use std::sync::Arc;

use agent::approve::{ApproveAll, Approver, TerminalApprover, Unattended};
use durable::{Dir, DiskDir};

use super::{parts, Drive, Holder};
use crate::exit::Failure;
use crate::remote::RunTracker;
use crate::{Approve, Cli};

/// The run's workspace, and the tools on it and on the tracker:
/// `code_patch` expects each file as the task seeded it or the run wrote
/// it, and on a store asks the store for the run's epoch before a write.
pub(crate) fn workspace_and_tools(
    d: &Drive<'_>,
    tracker: &RunTracker,
) -> Result<(Arc<dyn Dir>, agent::tool::Tools), Failure> {
    let ws_path = d.world.workspace();
    let workspace: Arc<dyn Dir> = Arc::new(DiskDir::new(&ws_path).map_err(|e| {
        Failure::run(
            "io",
            format!("cannot open the workspace {}: {e}", ws_path.display()),
        )
    })?);
    let fence = match &d.holder {
        Holder::Store { store, .. } => {
            Some(Arc::new(parts::StoreFence(Arc::clone(store))) as Arc<dyn triage_tools::Holds>)
        }
        Holder::Lock(_) => None,
    };
    let tools = parts::build_tools(
        &tracker.backend(),
        parts::Workspace {
            dir: Arc::clone(&workspace),
            expected: triage_tools::Expected::new(&d.world.task.workspace, &d.written),
            fence,
        },
        &d.world.task.approval,
    );
    Ok((workspace, tools))
}

/// Who approves gated calls: nobody (`--approve off`), the person at the
/// terminal, or, without one, a pause.
pub(crate) fn approver(cli: &Cli) -> Box<dyn Approver> {
    match cli.approve {
        Approve::Off => Box::new(ApproveAll),
        Approve::On if io::stdin().is_terminal() => Box::new(TerminalApprover::stdio()),
        Approve::On => Box::new(Unattended),
    }
}
