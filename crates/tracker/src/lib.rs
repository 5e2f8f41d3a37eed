//! A durable fake issue tracker: the outside world of a crash sweep.
//!
//! An agent's tools act on a service that outlives the agent's process. A
//! crash sweep kills the agent at every point and restarts it, so it needs a
//! stand-in for that service whose records survive every crash, and which can
//! behave like the services the book chapter compares:
//!
//! * [`Mode::Keyed`] honours idempotency keys the way Stripe and the IETF
//!   Idempotency-Key draft do: a repeat with a held key gets the first answer
//!   and changes nothing, the same key with different arguments is refused;
//! * [`Mode::Keyless`] ignores keys, so every retry files again — the
//!   duplicates the sweep exists to find;
//! * [`Tracker::lookup`] answers "did this request happen?" for the
//!   resolution ladder, by key or by arguments, and can be made unsure with
//!   [`Tracker::with_uncertain_lookup`];
//! * [`Fault::FailAfterAccept`] records a request and then fails the call,
//!   like an MCP server dying after the service acted.
//!
//! Clones of a [`Tracker`] share one set of records, so the sweep keeps a
//! clone as the *world* and hands another to each life; a crashed life leaves
//! the records behind. [`Tracker::open_dir`] keeps them in a file for a
//! world that must outlive the process itself.
//!
//! Every new record, and every keyed repeat, passes the point
//! [`ACCEPTED`] (`"tracker accepted"`) *after* the record exists and before
//! the caller hears back: a crash there is the window no checkpoint can close.
//!
//! ```
//! use tracker::{LookupAnswer, Mode, Request, Response, Tracker};
//!
//! let world = Tracker::new(Mode::Keyed);
//! let life = world.clone();
//!
//! // The first life files an issue and crashes before it hears the answer.
//! let crashed = crashpoint::crash_at(crashpoint::Hit::new("tracker accepted", 1), || {
//!     life.file_issue("crash in parser", "stack trace…", Some("run-1/call-1"))
//! });
//! assert!(crashed.outcome.crashed().is_some());
//!
//! // The record outlived the crash, and the restart can tell it happened...
//! let req = Request::FileIssue { title: "crash in parser".into(), body: "stack trace…".into() };
//! assert_eq!(world.lookup(&req, Some("run-1/call-1")), LookupAnswer::Found(Response::Issue { number: 1 }));
//! // ...or simply retry with the same key: the tracker answers as the first time.
//! assert!(world.holds_key("run-1/call-1"));
//! assert_eq!(world.file_issue("crash in parser", "stack trace…", Some("run-1/call-1")).unwrap(), 1);
//! assert_eq!(world.count(&req), 1);
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "client")]
pub mod client;
mod config;
mod error;
#[cfg(feature = "serve")]
pub mod http;
#[cfg(feature = "mcp")]
pub mod mcp;
mod model;
#[cfg(any(feature = "serve", feature = "mcp"))]
pub mod service;
mod state;
mod tracker;
pub mod wire;

pub use config::{Fault, Mode};
pub use error::TrackerError;
pub use model::{Comment, Fence, Issue, LookupAnswer, Request, Response};
pub use state::log::LogLayout;
pub use tracker::Tracker;

/// The point every accepted mutating request passes: after the record exists
/// (and is on disk, for a file-backed tracker), before the caller hears back.
pub const ACCEPTED: &str = "tracker accepted";

/// A log-backed tracker ([`Tracker::open_log`]) passes this point when it has
/// recorded a new request in memory and made nothing durable: a crash here
/// loses the request, and the caller (who heard nothing) must send it again.
pub const RECEIVED: &str = "tracker received";

/// A log-backed tracker passes this point when the request's log entry is
/// durable and its index is not yet updated: a restart replays the entry.
pub const LOG_APPENDED: &str = "tracker log appended";

/// A log-backed tracker passes this point when its index covers the new
/// record, before [`ACCEPTED`] and the answer.
pub const INDEX_UPDATED: &str = "tracker index updated";
