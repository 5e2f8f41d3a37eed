//! A command line for sweeping your own crate, in five lines (feature `cli`).
//!
//! Hand your subjects to an [`App`] in a binary's `main` (or in a test
//! target with `harness = false`):
//!
//! ```no_run
//! # struct Relay;
//! # impl sweep::Subject for Relay {
//! #     type World = ();
//! #     fn name(&self) -> String { "relay".into() }
//! #     fn counters(&self) -> Vec<sweep::Counter> { vec![] }
//! #     fn world(&self) -> Result<(), sweep::LifeError> { Ok(()) }
//! #     fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> { Ok(()) }
//! #     fn judge(&self, _: &()) -> sweep::Verdict { sweep::Verdict::new() }
//! # }
//! fn main() -> std::process::ExitCode {
//!     sweep::cli::App::new("cargo run -p outbox --")
//!         .subject(Relay)
//!         .snapshot("snapshots/outbox.txt")
//!         .main()
//! }
//! ```
//!
//! and get:
//!
//! | command | does |
//! |---|---|
//! | `--list` | lists the subjects (NAME, crash states, row title) |
//! | *(no subject)* / `SUBJECT…` | sweeps all subjects, or those named (by NAME or row title) |
//! | `--depth N`, `--threads N` | lives crashed in a row (default 2); worker threads |
//! | `--crash-state STATE,…` | sweeps these crash states (of the subjects that have them) |
//! | `--scenario NAME` | reruns one scenario by name and prints its timeline |
//! | `--format table\|markdown\|json` | how results are printed |
//! | `--partition K/N`, `merge FILE…` | one shard of the sweep; shards merged into the table |
//! | `--bless` | rewrites the snapshot (refused when `CI` is set to a true value) |
//! | `--scenario-timeout SECONDS` | fails a scenario still running after this long as hung (default 60, 0: none) |
//! | `--max-scenarios N` | refuses at once a sweep estimated above `N` scenarios (default 1,000,000) |
//! | `--no-share` | replays every scenario from a fresh world instead of sharing lives (same report) |
//! | `--strict-points` | refuses a sweep whose clean run never passes a point compiled into the code it went through (a warning without it) |
//! | `--artifacts DIR` | writes a directory per failing scenario: the rerun command (argv and shell line), timeline, verdict with notes, final world |
//!
//! Subjects of different world types fit in one list: each is kept as a
//! [`DynSubject`], which every [`Subject`](crate::Subject) is.
//!
//! # Crash states
//!
//! A subject that can run in several crash states (its
//! [`PowerCuts::crash_states`](crate::power::PowerCuts::crash_states), e.g. `process`
//! and the power cuts of a `durable::testing::PowerDir` it boots in
//! [`PowerCuts::boot`](crate::power::PowerCuts::boot)) is swept in its
//! [default states](crate::power::PowerCuts::default_crash_states), or in those
//! `--crash-state` names ([`Config::crash_states`](crate::Config::crash_states)): one table row per
//! state. Its scenarios' names start with their state
//! (`lose: posting#2 → receiver accepted#1`), and so do the rerun hints, so
//! `--scenario "lose: …"` reruns a failure from its name alone. `--list`
//! shows each subject's states. `--crash-state` leaves out the subjects
//! that have none of the states named.
//!
//! A subject registered with [`App::subject_in`] instead carries one state
//! as a label (for a subject that is built for one state and has no
//! dimension of its own): `--crash-state` picks it by that label.
//!
//! When the [`App`] has a snapshot and runs as registered (every subject, no
//! `--depth`, `--crash-state` or `--partition`), its table is compared with
//! the snapshot file, and a difference is printed as a line diff (exit 1).
//! `--bless` rewrites the file instead, unless the `CI` variable is set to a
//! true value (`CI=false`, `CI=0` and an empty `CI` are not CI; see
//! [`crate::report::snapshot::under_ci`]).
//! The flag is the only way: `CRASHSWEEP_BLESS`, which tests read
//! ([`crate::report::snapshot::check`]), does not bless a command line's run
//! ([`crate::report::snapshot::compare`]).
//!
//! A progress bar is drawn on standard error when it is a terminal. It shows
//! one level of the sweep at a time (`level 2 of 2`), whose total is final
//! when shown: a level's scenarios are all planned once the level above it
//! has finished.
//!
//! # Exit codes
//!
//! - `0`: every scenario passed (and the table matches its snapshot);
//! - `1`: a scenario failed a required invariant, was flaky or never fired
//!   its crash (counted apart: the `not fired` column), or the table differs
//!   from its snapshot;
//! - `2`: the command could not run: bad flags, an unreadable or refused
//!   file, a sweep that could not start, `--bless` refused under CI.
//!
//! # JSON
//!
//! A sweep with `--format json` prints one object:
//!
//! ```text
//! {
//!   "rows": [ { "variant": NAME, "once": N, "twice": N, …, COLUMN: N, … } ],
//!   "failures": [ { "subject": NAME, "scenario": NAME, "reason": TEXT, "flaky": BOOL, "not_fired": BOOL, "rerun": COMMAND } ],
//!   "reports": [ REPORT, … ]          // only with --partition: what `merge` reads
//! }
//! ```
//!
//! A row's keys after `variant` are the depth columns (`once`, `twice`,
//! `thrice`, `4 times`, …) and then each counter's columns in table order,
//! their titles with `+` spelt `_plus` and any other character that is not a
//! letter or digit spelt `_`. With `--scenario`, it prints
//! `{ "scenarios": [ SCENARIO, … ] }`, one per subject, each with
//! `subject`, `scenario`, `passed`, `failure`
//! (text or null), `lives` (each `{ "crash": HIT or null, "hits": [HIT…],
//! "end": TEXT }`), `counts` (counter name → value), `notes`, `world`.

mod app;
mod args;
mod artifacts;
mod bar;
mod execute;
mod output;

use std::io::IsTerminal;

pub use crate::dyn_subject::DynSubject;
pub use app::{main, App};

// The pieces the workspace's other command lines (`crashsweep`, xtask) are
// built from: public for them, hidden from this page, which is [`App`]'s.
#[doc(hidden)]
pub use app::slug;
#[doc(hidden)]
pub use args::{parse_partition, Format, SweepFlags};
#[doc(hidden)]
pub use bar::Levels;
#[doc(hidden)]
pub use execute::{execute, Plan};
#[doc(hidden)]
pub use output::{failure_lines, failures_json, merge_files, render, scenario_json, MergeError};

/// Every scenario passed.
pub const EXIT_PASSED: u8 = 0;
/// A scenario failed, or the table differs from its snapshot.
pub const EXIT_FAILED: u8 = 1;
/// The command could not run.
pub const EXIT_USAGE: u8 = 2;

/// What the command line reads from its environment, passed in so tests
/// can set it without touching the process's variables.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// The value of `CI`, if set.
    pub ci: Option<String>,
    /// Draw a progress bar (standard error is a terminal).
    pub progress: bool,
}

impl Env {
    /// This process's environment.
    pub fn from_process() -> Env {
        Env {
            ci: std::env::var("CI").ok(),
            progress: std::io::stderr().is_terminal(),
        }
    }
}
