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
//! into a [`Scenario`], so [`run_one`] reruns it alone with its timeline.
//! Partitions ([`Config::partition`]) split a sweep across machines by a
//! stable hash of scenario names; [`Report::merge`] puts the shards back
//! together into exactly the unpartitioned report.
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
//!     fn world(&self) -> World { World { a: 10, ..World::default() } }
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
//! ```

mod report;
mod runner;
mod scenario;
pub mod snapshot;

pub use report::{depth_title, markdown, table, LifeTrace, Report, Row, ScenarioResult};
pub use runner::{run, run_one, run_with, Config, Error, Progress};
pub use scenario::Scenario;

pub use crashpoint::Hit;

use serde::{Deserialize, Serialize};

/// Why a life stopped on its own (not by a crash): any error converts into
/// it with `?`, a `String` or `&str` included.
pub type LifeError = Box<dyn std::error::Error + Send + Sync>;

/// A program to sweep. Implement it for your own durable program.
pub trait Subject: Sync {
    /// Everything a crash does not erase. Each scenario gets a fresh one, and
    /// parallel scenarios never share one.
    type World: Send;

    /// The row's name in a table, e.g. `keys and markers`.
    fn name(&self) -> String;

    /// The counters [`judge`](Subject::judge) reports, in table order.
    fn counters(&self) -> Vec<Counter>;

    /// A fresh world, as before the program's first start.
    fn world(&self) -> Self::World;

    /// One life: start or resume from the world and run until done. An
    /// injected crash arrives as a panic from a point and never returns here;
    /// `Err` means the life stopped with an error of the program's own (any
    /// error type converts with `?`).
    fn life(&self, world: &mut Self::World) -> Result<(), LifeError>;

    /// Look at the world once the scenario is over and count.
    fn judge(&self, world: &Self::World) -> Verdict;

    /// A short human description of the world, printed at the end of a
    /// scenario's timeline (records, saved state, …).
    fn describe(&self, _world: &Self::World) -> String {
        String::new()
    }
}

/// What a counter's totals are measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Baseline {
    /// The count as judged.
    Zero,
    /// The count beyond the clean run's (e.g. model calls repeated).
    Clean,
}

/// One number the judge reports for each scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// The name the judge uses in [`Verdict::count`].
    pub name: String,
    /// The column title of the counter's total.
    pub title: String,
    /// Totals count beyond this baseline.
    pub baseline: Baseline,
    /// A scenario whose count (beyond the baseline) is not zero fails.
    pub required_zero: bool,
    /// Also show a column counting the scenarios whose count is not zero.
    pub scenarios_title: Option<String>,
}

impl Counter {
    /// A counter named `name`, summed over scenarios, titled by its name.
    pub fn new(name: &str) -> Self {
        Counter {
            name: name.to_owned(),
            title: name.to_owned(),
            baseline: Baseline::Zero,
            required_zero: false,
            scenarios_title: None,
        }
    }
    /// Title the total column.
    pub fn titled(mut self, title: &str) -> Self {
        self.title = title.to_owned();
        self
    }
    /// Count beyond the clean run's value.
    pub fn over_clean(mut self) -> Self {
        self.baseline = Baseline::Clean;
        self
    }
    /// Every scenario must count zero here, or it fails.
    pub fn required(mut self) -> Self {
        self.required_zero = true;
        self
    }
    /// Add a column, placed before the total, counting scenarios with a
    /// non-zero count.
    pub fn with_scenarios(mut self, title: &str) -> Self {
        self.scenarios_title = Some(title.to_owned());
        self
    }
}

/// What the judge saw in one world: named counts and human-readable notes
/// (e.g. `issue "B" filed 2 times`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Counts by counter name, in the order they were set.
    pub counts: Vec<(String, u64)>,
    /// What went wrong, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Verdict {
    /// An empty verdict: every counter zero.
    pub fn new() -> Self {
        Verdict::default()
    }
    /// Set counter `name` to `n`.
    pub fn count(mut self, name: &str, n: u64) -> Self {
        match self.counts.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = n,
            None => self.counts.push((name.to_owned(), n)),
        }
        self
    }
    /// Add a note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    /// Counter `name`, zero if never set.
    pub fn get(&self, name: &str) -> u64 {
        self.counts
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// An object-safe view of any [`Subject`], so a program can keep subjects of
/// different world types in one list (a command line choosing a variant).
pub trait DynSubject: Sync {
    /// The subject's name.
    fn name(&self) -> String;
    /// [`run_with`] on this subject.
    fn sweep(&self, config: &Config, progress: &(dyn Fn(Progress) + Sync))
        -> Result<Report, Error>;
    /// [`run_one`] on this subject.
    fn scenario(&self, scenario: &Scenario) -> ScenarioResult;
}

impl<S: Subject> DynSubject for S {
    fn name(&self) -> String {
        Subject::name(self)
    }
    fn sweep(
        &self,
        config: &Config,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Report, Error> {
        run_with(self, config, progress)
    }
    fn scenario(&self, scenario: &Scenario) -> ScenarioResult {
        run_one(self, scenario)
    }
}
