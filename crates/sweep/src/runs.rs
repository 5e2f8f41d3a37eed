//! The other ways to run a sweep, beyond [`run`](crate::run): one
//! scenario again by its name ([`run_one`]), with a progress report,
//! counting scenarios without keeping them, a subject behind `dyn` (what
//! `sweep::cli` holds); and the limits a sweep keeps to.

pub use crate::config::{DEFAULT_MAX_SCENARIOS, DEFAULT_SCENARIO_TIMEOUT};
pub use crate::dyn_subject::DynSubject;
pub use crate::plan::estimate_scenarios;
pub use crate::progress::Progress;
pub use crate::runner::{run_counted, run_one, run_with, unwinding_missing, Stats};

/// The most crashes in a row a sweep runs ([`Config::depth`](crate::Config::depth))
/// and a merged report may claim: [`run`](crate::run) refuses a deeper sweep
/// ([`Error::TooDeep`](crate::Error::TooDeep)) and
/// [`Report::merge`](crate::Report::merge) a deeper shard.
pub const MAX_DEPTH: u32 = 16;
