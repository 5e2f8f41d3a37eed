//! Crash a program at every point it can be crashed, and count what went wrong.
//!
//! You describe your program as a [`Subject`]: how to make a fresh *world*
//! (everything a crash does not erase: files, a fake service's records), how
//! to run one *life* against it (start or resume from the world, run until
//! done), and how to *judge* the world once a scenario is over. Mark the
//! places a crash may land with [`crashpoint::point!`]. Then [`run`] does the
//! rest:
//!
//! 1. one clean life records every hit the program passes;
//! 2. **once**: for each hit, a fresh world, a life that crashes there, and a
//!    restart that runs to the end;
//! 3. **twice** (depth 2): for each single scenario, one more scenario per hit
//!    its restart reaches, crashing the restart there too;
//! 4. and so on for deeper sweeps: depth *k* crashes *k* lives in a row.
//!
//! A depth-*k* sweep runs `1 + n₁ + n₂ + … + n_k` scenarios, where `n₁` is the
//! number of hits of the clean run and `n_{j+1}` is the sum, over the depth-*j*
//! scenarios, of the hits their final life reaches: roughly `n^k` for a program
//! with `n` points, so depth 3 is for small programs.
//!
//! Scenarios run in parallel on rayon and are gathered in a fixed order, so a
//! [`Report`] (and its table) is the same byte for byte with 1 thread or 16.
//!
//! Every scenario checks that its crash fired at the hit its name says, and
//! that its final life finished; a real panic fails the scenario with its
//! message. A scenario's name (`tracker accepted#2 → mid-save#1`) parses back
//! into a [`Scenario`], so [`rerun`] reruns it alone,
//! by that name, with its timeline.
//! Partitions ([`Config::partition`]) split a sweep across machines by a
//! stable hash of scenario names; [`Report::merge`] puts the shards back
//! together into exactly the unpartitioned report.
//!
//! Crash points need unwinding: an injected crash is a panic the runner
//! catches. A program built with `panic = "abort"` (common in release
//! profiles) is refused at the start of a sweep with [`Error::PanicAbort`],
//! whose message says how to fix the profile.
//!
//! Before trusting a table, a sweep checks itself (each net on by default,
//! see [`Config`] and [`Error`]): the clean run runs twice and must pass
//! the same hits, get the same verdict and leave the same world; a world
//! that cannot be made is [`Error::World`]; a judge's misspelt or never-set
//! counter is refused; every
//! failing scenario runs again, and one whose result changes is *flaky*; a
//! scenario past [`Config::scenario_timeout`] fails as hung; a sweep
//! estimated above [`Config::max_scenarios`] is refused at once; points
//! passed in every clean run on plain threads its lives started refuse it
//! ([`Config::refuse_unscoped`]; else reported in [`Report::stray`], and
//! those on the sweep's own threads outside a life or in a judge in
//! [`Report::unscoped`]); a life that returns while a thread it started in
//! its scope is still at work fails ([`Failure::Outlived`]), and a crashed
//! life's threads are gone before the next life starts. What a sweep could
//! not check (worlds with no `describe` to compare, points on threads it
//! cannot tell are its own) is said in one line each ([`Report::notices`]).
//!
//! Many sweeps in one process (`cargo test`) get the same answers as one
//! alone: a plain thread counts for a sweep only when one of its lives
//! started it. The one thing a shared process blurs is a thread no life
//! started (a pool made before the life): its points may be another
//! test's, so they are noticed, never refused. `cargo nextest`, which runs
//! each test in a process of its own, is where those notices are exact.
//! [`Config::crash_states`] sweeps each crash state a subject lists
//! ([`power::PowerCuts::crash_states`], the opt-in of
//! [`Subject::power_cuts`]), one table row per state ([`Report::rows`]).
//!
//! A complete example outside this project's domain is the workspace's
//! `crates/bank`: a bank-transfer job with idempotency keys, checkpointed with
//! `durable`, judged on money created or lost, plus a variant with an
//! ordering bug that the sweep catches and names.
//!
//! ```
//! use sweep::{Counter, Subject, Verdict};
//!
//! /// A job that moves 10 coins from `a` to `b`, saving its progress.
//! struct Transfer;
//!
//! #[derive(Default)]
//! struct World { a: i64, b: i64, step: u8 }
//!
//! impl Subject for Transfer {
//!     type World = World;
//!     fn name(&self) -> String { "transfer".into() }
//!     fn counters(&self) -> Vec<Counter> {
//!         vec![Counter::new("created").required()]
//!     }
//!     fn world(&self) -> Result<World, sweep::LifeError> { Ok(World { a: 10, ..World::default() }) }
//!     fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
//!         if w.step == 0 {
//!             w.a -= 10;
//!             crashpoint::point!("debited");
//!             w.step = 1; // saved progress
//!             crashpoint::point!("saved");
//!         }
//!         if w.step == 1 {
//!             w.b += 10;
//!             crashpoint::point!("credited");
//!             w.step = 2;
//!         }
//!         Ok(())
//!     }
//!     fn judge(&self, w: &World) -> Verdict {
//!         Verdict::new().count("created", (w.a + w.b - 10).unsigned_abs())
//!     }
//! }
//!
//! let report = sweep::run(&Transfer, &sweep::Config::default()).unwrap();
//! // 3 hits in the clean run; the restarts reach 3 + 1 + 1 more.
//! assert_eq!(report.row().depth_counts, vec![3, 5]);
//! // "Act, then save" repeats the act after a crash in between: a crash at
//! // `debited#1` restarts at step 0 and debits again.
//! let failing: Vec<String> = report.failures().map(|s| s.scenario.to_string()).collect();
//! assert_eq!(failing[..2], ["debited#1", "credited#1"]);
//! println!("{}", sweep::table(&[report.row()]));
//! // Any failing scenario reruns alone by the name the report prints, with
//! // its timeline (each life's hits and how it ended).
//! let again = sweep::rerun(&Transfer, &sweep::Config::default(), "debited#1").unwrap();
//! assert!(again.failed());
//! print!("{}", again.timeline());
//! ```

#![deny(missing_docs)]

/// The crate README's example, run as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod brute;

#[cfg(feature = "cli")]
pub mod cli;
mod config;
mod crash_state;
mod disks;
mod dyn_subject;
mod erased;
mod error;
mod failure;
mod fingerprint;
mod judge;
mod merge;
mod nets;
mod plan;
pub mod power;
#[cfg(unix)]
pub mod process;
mod progress;
mod reach;
mod replay;
pub mod report;
mod runner;
pub mod scenario;
mod share;
pub mod sharing;
mod sink;
mod subject;
mod table;
mod watchdog;

// What a first sweep types (one way to run a sweep, one to rerun a
// scenario); the rest is in the modules `report` (what a sweep found, its
// tables, its reviewed snapshots, its progress and stats), `scenario` (one scenario: its crashes, by
// a name that parses back), `power` (crash states beyond a process crash:
// power cuts), `sharing` (shared lives) and `process`.
pub use config::Config;
pub use error::{Error, LifeError};
pub use judge::{Counter, Verdict};
#[doc(inline)]
pub use report::Report;
pub use runner::{rerun, rerun_keeping, run};
pub use subject::Subject;
pub use table::table;

/// Plumbing for sibling crates: an object-safe view of any [`Subject`]
/// (documented as `sweep::cli::DynSubject`, where a command line keeps its
/// subjects).
#[doc(hidden)]
pub use dyn_subject::DynSubject;

// Paths the crate's own modules name (`crate::Failure`, …), in code, tests
// and doc links.
#[allow(unused_imports)]
pub(crate) use crashpoint::Hit;
pub(crate) use failure::Failure;
#[allow(unused_imports)]
pub(crate) use scenario::Scenario;
