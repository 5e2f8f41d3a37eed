//! The report: every scenario's outcome in the sweep's fixed order, from
//! which a table's row is computed; reports of shards merge into one. Also
//! what a sweep tells as it runs ([`Progress`]) and how much work it did
//! ([`Stats`]), and the reviewed snapshots a table is checked against
//! ([`snapshot`]).

pub mod snapshot;

pub use crate::config::OnProgress;
pub use crate::error::Divergence;
pub use crate::failure::{Failure, WhichLife};
pub use crate::judge::Baseline;
pub use crate::progress::{Processes, Progress, Stats};
pub use crate::table::{depth_title, markdown, Row, Table};

use serde::{Deserialize, Serialize};

use crate::crash_state::CrashState;
use crate::error::Error;
use crate::judge::{broken_invariants, over, Counter, Verdict};
use crate::scenario::Scenario;

/// One life of a traced scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifeTrace {
    /// The hit this life was to crash at (`None` for the final life).
    pub crash: Option<String>,
    /// Every hit the life passed, in order.
    pub hits: Vec<String>,
    /// How the life ended.
    pub end: String,
}

impl LifeTrace {
    pub(crate) fn new(
        crash: Option<&crashpoint::Hit>,
        hits: &[crashpoint::Hit],
        end: String,
    ) -> Self {
        LifeTrace {
            crash: crash.map(ToString::to_string),
            hits: hits.iter().map(ToString::to_string).collect(),
            end,
        }
    }
}

/// The outcome of one scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Which hits crashed, in order.
    pub scenario: Scenario,
    /// Where the scenario stands in the sweep's fixed order: the index of each
    /// crash hit among the hits of the life it crashed.
    pub order: Vec<u32>,
    /// What the judge saw.
    pub verdict: Verdict,
    /// Why the scenario failed, if it did (flaky included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Each life, when traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lives: Vec<LifeTrace>,
    /// The world at the end, when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
}

impl ScenarioResult {
    /// Whether the scenario failed (not flaky, and not a crash that never
    /// fired).
    pub fn failed(&self) -> bool {
        self.failure
            .as_ref()
            .is_some_and(|f| !f.is_flaky() && !f.is_unfired())
    }

    /// Whether the scenario's crash never fired: its hit was not reached
    /// in that run (and, the config rerunning failures, in the next).
    pub fn unfired(&self) -> bool {
        self.failure.as_ref().is_some_and(Failure::is_unfired)
    }

    /// Whether the scenario is flaky: it failed, and gave another result when
    /// run again.
    pub fn flaky(&self) -> bool {
        self.failure.as_ref().is_some_and(Failure::is_flaky)
    }

    /// The scenario's timeline: each life's hits and end, the judge's counts
    /// and notes, and the world.
    pub fn timeline(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "scenario: {}", self.scenario);
        for (i, life) in self.lives.iter().enumerate() {
            let _ = writeln!(out, "life {}: {}", i + 1, life.end);
            for h in &life.hits {
                let _ = writeln!(out, "    {h}");
            }
            if let Some(c) = &life.crash {
                if life.end.starts_with("crashed") {
                    let _ = writeln!(out, "    {c}  ← crash");
                }
            }
        }
        let counts: Vec<String> = self
            .verdict
            .counts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "judge: {}", counts.join(" "));
        for n in &self.verdict.notes {
            let _ = writeln!(out, "    {n}");
        }
        if let Some(w) = &self.world {
            let _ = writeln!(out, "world:");
            for line in w.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        match &self.failure {
            Some(f) if f.is_flaky() => {
                let _ = writeln!(out, "FLAKY: {f}");
            }
            Some(f) if f.is_unfired() => {
                let _ = writeln!(out, "NOT FIRED: {f}");
            }
            Some(f) => {
                let _ = writeln!(out, "FAILED: {f}");
            }
            None => {
                let _ = writeln!(out, "ok");
            }
        }
        out
    }
}

/// Everything a sweep found: every scenario's outcome, in the sweep's fixed
/// order, from which rows and tables are computed.
///
/// Two reports are equal when everything the sweep itself ran is equal:
/// [`Report::stray`], which may hold other code's points, is left out of
/// equality and of the JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The subject's name.
    pub subject: String,
    /// The counters the judge reports.
    pub counters: Vec<Counter>,
    /// How many lives in a row crashed at most.
    pub depth: u32,
    /// The shard this report covers (`None`: all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<(u32, u32)>,
    /// The crash states swept, in order, each with its row's title.
    #[serde(default)]
    pub states: Vec<StateRow>,
    /// Points passed outside any scope on the sweep's own threads (the
    /// thread that runs it, its workers, and threads they start with
    /// `crashpoint::spawn`): hits no crash could land on, such as a point
    /// passed while a world is made or judged. Only this sweep's: another
    /// sweep or test of the same binary never adds to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unscoped: Vec<(String, u64)>,
    /// Points passed on plain threads (`std::thread::spawn`, a runtime's
    /// worker), which run in no scope, so no crash can land on them: first
    /// those a life of this sweep started (its own, whatever else the
    /// process runs; see [`crashpoint::unscoped::UnscopedWatch::plain`]),
    /// then those of threads no life started, passed while its lives ran
    /// (a pool made outside the life, or another test's thread: see
    /// [`Report::notices`]). A warning, left out of the report's equality,
    /// JSON and merge.
    #[serde(skip)]
    pub stray: Vec<(String, u64)>,
    /// Points compiled into the modules the clean run went through that it
    /// never passed, `name (file:line)` (see
    /// [`crashpoint::points::never_passed`]): no scenario crashes there. A
    /// warning, left out of equality, JSON and merge, like [`Report::stray`];
    /// [`Config::strict_points`](crate::Config::strict_points) refuses the
    /// sweep instead.
    #[serde(skip)]
    pub never_passed: Vec<String>,
    /// What the sweep could not check, each in one line naming why and how
    /// to make it check: clean runs' worlds it could not compare (no
    /// `describe`, no fingerprint), points on threads it cannot tell are
    /// its own. A library call also prints each on stderr (the command
    /// line prints them with its warnings). Left out of the report's
    /// equality, JSON and merge.
    #[serde(skip)]
    pub notices: Vec<String>,
    /// The clean run.
    pub clean: ScenarioResult,
    /// Every crash scenario (of the shard), ordered by crash state, then by
    /// depth, then by `order` — or, when [`Report::tallies`] is not empty,
    /// only those that failed or are flaky.
    pub scenarios: Vec<ScenarioResult>,
    /// Empty when every scenario is in [`Report::scenarios`]; otherwise (a
    /// sweep with [`Config::tally`](crate::Config::tally)) one tally per
    /// crash state, in the order of [`Report::states`], of every scenario,
    /// passing ones included: what the rows are computed from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tallies: Vec<Tally>,
    /// How much work the sweep did (lives run, whether they were shared):
    /// how it ran, not what it found, so left out of equality and of the
    /// JSON (all zero in a report read back); a merged report adds up its
    /// shards'.
    #[serde(skip)]
    pub stats: Stats,
}

impl PartialEq for Report {
    fn eq(&self, other: &Self) -> bool {
        // Every field but `stray`, `never_passed` and `stats`, spelt out so that a new field is not
        // forgotten silently (the destructuring fails to compile).
        let Report {
            subject,
            counters,
            depth,
            partition,
            states,
            unscoped,
            stray: _,
            never_passed: _,
            notices: _,
            clean,
            scenarios,
            tallies,
            stats: _,
        } = self;
        *subject == other.subject
            && *counters == other.counters
            && *depth == other.depth
            && *partition == other.partition
            && *states == other.states
            && *unscoped == other.unscoped
            && *clean == other.clean
            && *scenarios == other.scenarios
            && *tallies == other.tallies
    }
}

/// What a table row needs of the scenarios of one crash state, counted as
/// their results arrive instead of keeping them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// The crash state.
    pub state: CrashState,
    /// Scenarios by depth: `[0]` crashed once, `[1]` twice, …
    pub by_depth: Vec<u64>,
    /// For each of the report's counters, in its order: how many scenarios
    /// count it above its baseline, and the sum of those counts.
    pub counters: Vec<CounterTally>,
    /// Scenarios that failed (not flaky).
    pub failed: u64,
    /// Scenarios that are flaky.
    pub flaky: u64,
    /// Scenarios whose crash never fired.
    #[serde(default)]
    pub unfired: u64,
}

/// One counter over the scenarios of a [`Tally`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterTally {
    /// Scenarios whose count is above the baseline.
    pub scenarios: u64,
    /// The sum of the counts beyond the baseline.
    pub sum: u64,
}

impl Tally {
    /// An empty tally of `state` for a sweep of `depth` and `counters` counters.
    pub(crate) fn new(state: CrashState, depth: u32, counters: usize) -> Tally {
        Tally {
            state,
            by_depth: vec![0; depth as usize],
            counters: vec![CounterTally::default(); counters],
            failed: 0,
            flaky: 0,
            unfired: 0,
        }
    }

    /// Each counter's value in `s` beyond its baseline.
    pub(crate) fn values(s: &ScenarioResult, clean: &Verdict, counters: &[Counter]) -> Vec<u64> {
        counters
            .iter()
            .map(|c| over(&s.verdict, Some(clean), c))
            .collect()
    }

    /// Count `s`, whose counter values are `values` ([`Tally::values`]).
    pub(crate) fn add(&mut self, s: &ScenarioResult, values: &[u64]) {
        if let Some(d) = s.scenario.depth().checked_sub(1) {
            if let Some(slot) = self.by_depth.get_mut(d) {
                *slot += 1;
            }
        }
        for (t, v) in self.counters.iter_mut().zip(values) {
            t.scenarios += u64::from(*v > 0);
            t.sum += v;
        }
        self.failed += u64::from(s.failed());
        self.flaky += u64::from(s.flaky());
        self.unfired += u64::from(s.unfired());
    }

    /// Add another tally of the same state and shape.
    pub(crate) fn absorb(&mut self, other: &Tally) {
        for (a, b) in self.by_depth.iter_mut().zip(&other.by_depth) {
            *a += b;
        }
        for (a, b) in self.counters.iter_mut().zip(&other.counters) {
            a.scenarios += b.scenarios;
            a.sum += b.sum;
        }
        self.failed += other.failed;
        self.flaky += other.flaky;
        self.unfired += other.unfired;
    }
}

/// One crash state of a report, with the title of its row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRow {
    /// The state.
    pub state: CrashState,
    /// Its row's title.
    pub title: String,
}

/// Sort scenarios into a report's fixed order: by the index of their state
/// in `states`, then depth, then `order`.
pub(crate) fn sort_scenarios<T: AsRef<CrashState>>(scenarios: &mut [ScenarioResult], states: &[T]) {
    let index = |s: &ScenarioResult| {
        states
            .iter()
            .position(|t| *t.as_ref() == s.scenario.state)
            .unwrap_or(usize::MAX)
    };
    scenarios.sort_by(|a, b| {
        (index(a), a.scenario.depth(), &a.order, &a.scenario.disks).cmp(&(
            index(b),
            b.scenario.depth(),
            &b.order,
            &b.scenario.disks,
        ))
    });
}

impl AsRef<CrashState> for StateRow {
    fn as_ref(&self) -> &CrashState {
        &self.state
    }
}

impl Report {
    /// Scenarios that failed, the clean run first if it did; flaky ones are
    /// not among them ([`Report::flaky`]).
    pub fn failures(&self) -> impl Iterator<Item = &ScenarioResult> {
        std::iter::once(&self.clean)
            .chain(&self.scenarios)
            .filter(|s| s.failed())
    }

    /// Scenarios that are flaky: they failed, and gave another result when
    /// run again. Neither passed nor failed.
    pub fn flaky(&self) -> impl Iterator<Item = &ScenarioResult> {
        self.scenarios.iter().filter(|s| s.flaky())
    }

    /// Scenarios whose crash never fired: neither failed nor passed.
    pub fn unfired(&self) -> impl Iterator<Item = &ScenarioResult> {
        self.scenarios.iter().filter(|s| s.unfired())
    }

    /// The scenarios in `state`.
    pub fn in_state<'a>(
        &'a self,
        state: &'a CrashState,
    ) -> impl Iterator<Item = &'a ScenarioResult> + Clone {
        self.scenarios
            .iter()
            .filter(move |s| s.scenario.state == *state)
    }

    /// Counter `name` of one scenario beyond its baseline.
    pub fn value(&self, s: &ScenarioResult, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|c| c.name == name)
            .map_or(0, |c| over(&s.verdict, Some(&self.clean.verdict), c))
    }

    /// The report's row of a table: over every scenario, titled by the
    /// report's one crash state (or the subject, for a report of none); a
    /// report of several states has one row per state ([`Report::rows`]).
    pub fn row(&self) -> Row {
        let title = match self.states.as_slice() {
            [one] => one.title.clone(),
            _ => self.subject.clone(),
        };
        let state = self
            .states
            .first()
            .map_or(CrashState::PROCESS, |s| s.state.clone());
        let mut all = Tally::new(state, self.depth, self.counters.len());
        if self.tallies.is_empty() {
            self.tally_into(&mut all, self.scenarios.iter());
        } else {
            for t in &self.tallies {
                all.absorb(t);
            }
        }
        self.row_of(title, &all, true)
    }

    fn tally_into<'a>(
        &'a self,
        t: &mut Tally,
        scenarios: impl Iterator<Item = &'a ScenarioResult>,
    ) {
        for s in scenarios {
            t.add(s, &Tally::values(s, &self.clean.verdict, &self.counters));
        }
    }

    /// The tally of `state`: the stored one, or one counted from the
    /// scenarios when every scenario is kept.
    pub fn tally(&self, state: &CrashState) -> Tally {
        if let Some(t) = self.tallies.iter().find(|t| t.state == *state) {
            return t.clone();
        }
        let mut t = Tally::new(state.clone(), self.depth, self.counters.len());
        if self.tallies.is_empty() {
            self.tally_into(&mut t, self.in_state(state));
        }
        t
    }

    /// One row per crash state, in the report's order.
    pub fn rows(&self) -> Vec<Row> {
        if self.states.len() <= 1 {
            return vec![self.row()];
        }
        self.states
            .iter()
            .enumerate()
            .map(|(i, st)| self.row_of(st.title.clone(), &self.tally(&st.state), i == 0))
            .collect()
    }

    fn row_of(&self, title: String, tally: &Tally, with_clean: bool) -> Row {
        let mut cells = Vec::new();
        for (c, t) in self.counters.iter().zip(&tally.counters) {
            if c.hidden {
                continue;
            }
            if let Some(title) = &c.scenarios_title {
                cells.push((title.clone(), t.scenarios));
            }
            cells.push((c.title.clone(), t.sum));
        }
        let clean_failed = u64::from(with_clean && self.clean.failed());
        Row {
            variant: title,
            depth_counts: tally.by_depth.clone(),
            cells,
            failed: tally.failed + clean_failed,
            flaky: tally.flaky,
            unfired: tally.unfired,
        }
    }

    /// How many crash scenarios the report covers (passing ones included,
    /// also when only tallies of them are kept).
    pub fn scenario_count(&self) -> u64 {
        if self.tallies.is_empty() {
            self.scenarios.len() as u64
        } else {
            self.tallies.iter().flat_map(|t| &t.by_depth).sum()
        }
    }

    /// Require counter `name` to be zero after the fact — e.g. because a
    /// sweep definition says so: every scenario whose count (beyond its
    /// baseline) is not zero fails, as if the subject had marked the counter
    /// required. Scenarios that already failed keep their first reason.
    pub fn require(&mut self, name: &str) -> Result<(), Error> {
        let Some(i) = self.counters.iter().position(|c| c.name == name) else {
            return Err(Error::UnknownCounter {
                subject: self.subject.clone(),
                counter: name.to_owned(),
                known: self.counters.iter().map(|c| c.name.clone()).collect(),
            });
        };
        let counter = &self.counters[i];
        if !self.tallies.is_empty() {
            // Only failing scenarios are kept: refuse if a passing one would
            // now fail, since it cannot be named. (For a counter already
            // required, every scenario counting it failed and is kept.)
            let clean = &self.clean.verdict;
            let kept = self
                .scenarios
                .iter()
                .filter(|s| over(&s.verdict, Some(clean), counter) > 0)
                .count() as u64;
            let counted: u64 = self
                .tallies
                .iter()
                .filter_map(|t| t.counters.get(i))
                .map(|t| t.scenarios)
                .sum();
            if counted > kept {
                return Err(Error::Tallied {
                    subject: self.subject.clone(),
                    counter: name.to_owned(),
                });
            }
        }
        self.counters[i].required_zero = true;
        let clean = self.clean.verdict.clone();
        for s in std::iter::once(&mut self.clean).chain(self.scenarios.iter_mut()) {
            if s.failure.is_none() {
                s.failure = broken_invariants(&s.verdict, Some(&clean), &self.counters);
            }
        }
        Ok(())
    }
}
