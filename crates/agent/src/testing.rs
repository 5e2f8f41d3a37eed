//! Test doubles of the loop's seams, behind the `testing` cargo feature
//! (the convention of tokio's `test-util`): a [`ScriptedApprover`] that
//! answers with closures and passes the crash point `person deciding`, and
//! a [`ManualClock`] that moves only when told to.
//!
//! A production build leaves the feature off and contains neither. Tests
//! enable it in `[dev-dependencies]`; a harness crate (the loop's crash
//! sweep, `loop-sweep`) in `[dependencies]`:
//!
//! ```toml
//! [dev-dependencies]
//! agent = { workspace = true, features = ["testing"] }
//! ```
//!
//! The model that replays a [`Transcript`](crate::model::Transcript)
//! ([`ScriptedModel`](crate::model::ScriptedModel)) is not here: replaying a
//! recorded job is the `triage` command's production mode.

mod approver;
mod clock;

pub use approver::{Asked, ScriptedApprover};
pub use clock::ManualClock;
