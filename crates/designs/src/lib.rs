//! The five simplified durable loops of the book chapter's comparison table,
//! each a [`sweep::Subject`] built on the real [`durable`] checkpoint store
//! and the [`tracker`] fake.
//!
//! | design | saves | keys | markers |
//! | --- | --- | --- | --- |
//! | `save once per turn` | start, end of each tool turn, done | no | no |
//! | `save after the reply` | also after each reply with calls and after each result | no | no |
//! | `+ idempotency keys` | as above | yes | no |
//! | `+ attempt markers, no keys` | as above, plus a marker before each mutating call | no | yes |
//! | `keys and markers` | as above | yes | yes |
//!
//! A [`Design`] becomes a [`DesignSubject`] running a [`Script`] (the
//! scripted triage job); each of its [`World`]s keeps the checkpoints in
//! memory or on disk ([`Storage`]).
//!
//! Beyond the book chapter's table, [`Modes`] run the same loops in harder
//! worlds, each default to the chapter's behaviour: checkpoints in a
//! [`durable::testing::PowerDir`] whose crashes are power cuts, written by the real
//! writer or a mutation of it ([`Power`], [`Writer`]); a person who answers
//! one question wrong ([`Person`]); a model that answers a repeated question
//! differently ([`ModelBehaviour`]); a log-backed tracker that crashes with
//! the loop (`Modes::tracker`). [`variants`] names every such variant for
//! `cargo xtask sweep --variant`, [`tables`] draws the tables over their
//! sweeps, and [`labels`] records, for every crash, where the call in flight
//! stood and how the restart settled it.
//!
//! ```
//! use designs::{Design, Script, Storage};
//!
//! let script = Script::load(designs::default_script_path()).unwrap();
//! let subject = Design::KeysMarkers.subject(&script, Storage::Memory);
//! let config = sweep::Config { depth: 1, ..sweep::Config::default() };
//! let row = sweep::run(&subject, &config).unwrap().row();
//! assert_eq!(row.depth_counts, vec![43]);
//! // No duplicate, nothing missing, nobody asked.
//! let zero = |t: &str| row.cells.iter().any(|(c, n)| c == t && *n == 0);
//! assert!(zero("dups") && zero("missing") && zero("asks"), "{row:?}");
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod design;
mod durable_loop;
mod judge;
pub mod labels;
mod modes;
mod script;
mod subject;
pub mod tables;
pub mod variants;
mod world;

use std::path::PathBuf;

pub use design::Design;
pub use modes::{ModelBehaviour, Modes, Person, Power, Writer, MID_OVERWRITE, WRITERS};
pub use script::{Call, Op, Script, ScriptError};
pub use subject::{DesignSubject, ENUMERATED};
pub use world::{Storage, World};

/// The scripted job the book chapter's table was measured with.
pub fn default_script_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sweeps/triage.json")
}
