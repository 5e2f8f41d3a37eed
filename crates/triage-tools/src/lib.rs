//! The triage job's tools for the [`agent`] loop: `issue_file`,
//! `issue_comment` and `search` against a [`tracker::Tracker`], and
//! `code_patch` writing into the run's workspace.
//!
//! They live apart from `agent` so the loop itself knows nothing of the
//! tracker: the `triage` command and the loop's crash sweep (`loop-sweep`)
//! both use them. Each declares what the loop needs to run it safely across
//! crashes ([`agent::tool::Effect`], [`agent::tool::Keys`], a
//! [`lookup`](agent::tool::Tool::lookup)).
//!
//! For a command with everything on disk:
//!
//! ```no_run
//! use std::sync::Arc;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = std::path::Path::new("/tmp/triage-state");
//! let tracker = tracker::Tracker::open_dir(
//!     Arc::new(durable::DiskDir::new(state.join("tracker"))?),
//!     tracker::Mode::Keyed,
//! )?;
//! let workspace: Arc<dyn durable::Dir> = Arc::new(durable::DiskDir::new(state.join("workspace"))?);
//! let tools = triage_tools::triage(&tracker, Arc::clone(&workspace));
//! assert_eq!(tools.names().collect::<Vec<_>>(), ["code_patch", "issue_comment", "issue_file", "search"]);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod patch;
mod tracker_tools;

use std::sync::Arc;

use agent::tool::{ToolError, Tools};
use durable::Dir;
use serde_json::Value;

pub use backend::Backend;
pub use patch::{CodePatch, Expected, Holds};
pub use tracker_tools::{comment_output, issue_output, IssueComment, IssueFile, Search};

/// The four tools of the triage job: tracker tools on `tracker` (keyed if
/// it honours keys) and `code_patch` on `workspace` (synced writes).
/// `tracker` is an in-process [`tracker::Tracker`] or the tracker service
/// over HTTP ([`tracker::client::HttpTracker`]); see [`Backend`].
pub fn triage(tracker: impl Into<Backend>, workspace: Arc<dyn Dir>) -> Tools {
    let tracker = tracker.into();
    Tools::new()
        .with(IssueFile::new(tracker.clone()))
        .with(IssueComment::new(tracker.clone()))
        .with(Search::new(tracker))
        .with(CodePatch::new(workspace))
}

/// The string argument `name` of a `tool` call.
pub(crate) fn str_arg<'v>(tool: &str, args: &'v Value, name: &str) -> Result<&'v str, ToolError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ToolError::Failed(format!(
            "{tool}: argument {name:?} must be a string, not {other}"
        ))),
        None => Err(ToolError::Failed(format!(
            "{tool}: missing argument {name:?} (arguments: {args})"
        ))),
    }
}
