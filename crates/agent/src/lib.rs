#![doc = include_str!("../README.md")]
//!
//! # How a run survives a crash
//!
//! An [`Agent`] runs a [`Model`](model::Model) and its
//! [`Tools`](tool::Tools) against a [`Checkpoint`](state::Checkpoint)
//! (durable's store holding the agent's [`State`](state::State)).
//! [`Agent::run`] is one *life* of the run: it starts the run or resumes it
//! from its saved phase, and every later call (in this process or a new
//! one) carries on where the last stopped.
//!
//! * **Five save moments**, each a crash-safe write: at start (the restart
//!   count, before anything else), after each model reply (before any of its
//!   calls runs, so a restart runs exactly those calls and never pays for the
//!   reply again), an attempt marker before each call that can change
//!   something (after the yes, for a gated call), after each result, and when
//!   the run pauses or finishes.
//! * **Idempotency keys** (`durable::key(run, call)`) travel beside the
//!   arguments in [`CallContext::key`](tool::CallContext::key), never inside
//!   what the model writes.
//! * **The resolution ladder** settles a marked call without a result (or a
//!   call whose transport failed after sending): rerun it if a repeat is
//!   harmless (the tool reads only, is idempotent, or sent a key its service
//!   still holds), else ask the service through the tool's
//!   [`lookup`](tool::Tool::lookup), else ask the person
//!   ([`Approver::answer`](approve::Approver::answer)).
//! * **Limits** on turns, tokens and dollars live in the state, so they cover
//!   the run's whole life; restarts are limited by
//!   [`durable::Options::max_resumes`]. Every stop is a typed [`Error`].
//! * **Approvals**: a tool that [needs approval](tool::Tool::needs_approval)
//!   waits for the [`Approver`](approve::Approver)'s yes; "later" pauses the
//!   run.
//! * **Events**: an [`Observer`](observe::Observer) sees one
//!   [`Event`](observe::Event) per step.
//!
//! What is where in the source: [`Agent`] (the run as built) and its
//! one-life entry [`Agent::run`]; the phases of a life, each call's gate and
//! marker, and the [resolution ladder](observe::Rung) each in a file of its
//! own; the seams [`tool`], [`model`], [`approve`], [`clock`], [`observe`];
//! recorded jobs as data ([`Transcript`](model::Transcript)) and their
//! replay ([`ScriptedModel`](model::ScriptedModel)).
//!
//! The loop knows nothing of any particular service. The triage job's
//! tools (`issue_file`, `issue_comment`, `search` on a tracker, `code_patch`
//! in the workspace) are the `triage-tools` crate; the loop's own crash
//! sweep, which crashes this loop at every point it has and counts, is the
//! `loop-sweep` crate.
//!
//! A command wires the pieces to disk: checkpoints in a
//! [`durable::DiskDir`], the tools on their services (`triage-tools`
//! builds the four on a file-backed tracker and a workspace `DiskDir`), a
//! [`TerminalApprover`](approve::TerminalApprover) (or
//! [`ApproveAll`](approve::ApproveAll)), an observer that prints each
//! event ([`observe::Print`]; it may also kill the process on
//! [`Event::ToolReturned`](observe::Event::ToolReturned), before the result
//! is saved), and a cancel flag set by its signal handler. Each stop is an
//! [`Error`] variant to map to an exit code:
//! `Checkpoint(durable::Error::Locked)`, `Paused`, `Cancelled`, the limits,
//! `Checkpoint(durable::Error::WorkspaceChanged)`.
//!
//! # Testing
//!
//! Production and test doubles are told apart by what a production run
//! uses. Replaying a recorded [`Transcript`](model::Transcript) with a
//! [`ScriptedModel`](model::ScriptedModel) is the `triage` command's
//! production mode, so both are always built. The doubles —
//! `testing::ScriptedApprover` (a person answering with closures) and
//! `testing::ManualClock` (a clock that moves only when told) — are in the
//! `testing` module, behind the `testing` cargo feature (the convention of
//! tokio's `test-util`), off by default: enable it in `[dev-dependencies]`
//! for tests, or in `[dependencies]` of a crate that exists to test (a
//! crash sweep).
//!
//! # Example: a crash and a resume
//!
//! A scripted job on an in-memory world, crashed once in the window no
//! checkpoint can close (after the tracker filed the issue, before the
//! result was saved), then resumed. The tools are the triage job's, from
//! the `triage-tools` crate (a dev-dependency here; a user brings their own
//! [`Tool`](tool::Tool)s):
//!
//! ```
//! use std::sync::Arc;
//! use agent::model::Transcript;
//! use agent::Agent;
//! use durable::testing::MemDir;
//! use durable::{Options, RunId};
//! use tracker::{Mode, Tracker};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let transcript = Transcript::parse(r#"{
//!   "name": "doc", "task": "File the parser crash and patch it.",
//!   "replies": [
//!     {"text": "Filing.", "calls": [{"id": "c1", "tool": "issue_file",
//!        "args": {"title": "panic in parser", "body": "12 reports on empty input"}}]},
//!     {"text": "Patching.", "calls": [{"id": "c2", "tool": "code_patch",
//!        "args": {"path": "parser.rs", "old": "", "new": "fn parse() {}"}}]},
//!     {"text": "Filed #1 and patched parser.rs."}]}"#, "doc.json")?;
//!
//! // The world: what a crash does not erase (clones share their contents).
//! let checkpoints = MemDir::new();
//! let workspace = MemDir::new();
//! let tracker = Tracker::new(Mode::Keyed);
//! let life = || -> Result<Agent, Box<dyn std::error::Error>> {
//!     let tools = triage_tools::triage(&tracker, Arc::new(workspace.clone()));
//!     let run = RunId::parse("doc-run")?;
//!     Ok(Agent::scripted(run, Arc::new(checkpoints.clone()), transcript.clone(), tools)?
//!         .with_options(Options { sync: false, ..Options::default() })
//!         .with_workspace(Arc::new(workspace.clone())))
//! };
//!
//! // First life: dies right after issue_file returns.
//! let first = life()?;
//! let crashed = crashpoint::crash_at(crashpoint::Hit::new("tool returned", 1), || first.run());
//! assert!(crashed.outcome.crashed().is_some());
//! assert_eq!(tracker.issues().len(), 1);
//!
//! // Second life: the marked call climbs the ladder; the tracker holds its
//! // key, so it is rerun and answers as the first time. No duplicate.
//! let result = life()?.run()?;
//! assert_eq!(result.answer, "Filed #1 and patched parser.rs.");
//! assert_eq!(result.resumes, 1);
//! assert_eq!(tracker.issues().len(), 1);
//! assert!(result.files.contains_key("parser.rs"));
//!
//! // A finished run returns its answer and calls nothing.
//! assert_eq!(life()?.run()?, result);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod agent;
pub mod approve;
mod call;
pub mod clock;
mod drive;
mod error;
mod ladder;
mod limits;
#[cfg(feature = "mcp-tools")]
pub mod mcp;
pub mod model;
pub mod observe;
pub mod provider;
mod result;
mod resume;
pub mod state;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;

pub use crate::agent::Agent;
pub use error::Error;
pub use limits::Limits;
pub use result::RunResult;
