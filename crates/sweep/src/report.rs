//! The report: every scenario's outcome in the sweep's fixed order, from
//! which a table's row is computed; reports of shards merge into one.

use serde::{Deserialize, Serialize};

use crate::crash_state::CrashState;
use crate::error::Error;
use crate::failure::Failure;
use crate::judge::{broken_invariants, over, Counter, Verdict};
use crate::scenario::Scenario;
use crate::table::Row;

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
    /// Whether the scenario failed (not flaky).
    pub fn failed(&self) -> bool {
        self.failure.as_ref().is_some_and(|f| !f.is_flaky())
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Points passed on threads that ran in no scope during the sweep (see
    /// [`crashpoint::UnscopedWatch`]): hits no crash could land on. The
    /// tally is process-wide: a point another test of the same binary passes
    /// outside any scope while this sweep runs is counted here too, so it is
    /// a warning to look into, never a failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unscoped: Vec<(String, u64)>,
    /// The clean run.
    pub clean: ScenarioResult,
    /// Every crash scenario (of the shard), ordered by crash state, then by
    /// depth, then by `order`.
    pub scenarios: Vec<ScenarioResult>,
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

impl AsRef<CrashState> for CrashState {
    fn as_ref(&self) -> &CrashState {
        self
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
        self.row_of(title, self.scenarios.iter(), true)
    }

    /// One row per crash state, in the report's order.
    pub fn rows(&self) -> Vec<Row> {
        if self.states.len() <= 1 {
            return vec![self.row()];
        }
        self.states
            .iter()
            .enumerate()
            .map(|(i, st)| self.row_of(st.title.clone(), self.in_state(&st.state), i == 0))
            .collect()
    }

    fn row_of<'a>(
        &'a self,
        title: String,
        scenarios: impl Iterator<Item = &'a ScenarioResult> + Clone,
        with_clean: bool,
    ) -> Row {
        let mut depth_counts = vec![0u64; self.depth as usize];
        for s in scenarios.clone() {
            if let Some(d) = s.scenario.depth().checked_sub(1) {
                if let Some(slot) = depth_counts.get_mut(d) {
                    *slot += 1;
                }
            }
        }
        let mut cells = Vec::new();
        for c in self.counters.iter().filter(|c| !c.hidden) {
            let values = scenarios
                .clone()
                .map(|s| over(&s.verdict, Some(&self.clean.verdict), c));
            if let Some(t) = &c.scenarios_title {
                cells.push((t.clone(), values.clone().filter(|v| *v > 0).count() as u64));
            }
            cells.push((c.title.clone(), values.sum()));
        }
        let clean_failed = u64::from(with_clean && self.clean.failed());
        Row {
            variant: title,
            depth_counts,
            cells,
            failed: scenarios.clone().filter(|s| s.failed()).count() as u64 + clean_failed,
            flaky: scenarios.filter(|s| s.flaky()).count() as u64,
        }
    }

    /// Require counter `name` to be zero after the fact — e.g. because a
    /// sweep definition says so: every scenario whose count (beyond its
    /// baseline) is not zero fails, as if the subject had marked the counter
    /// required. Scenarios that already failed keep their first reason.
    pub fn require(&mut self, name: &str) -> Result<(), Error> {
        let Some(c) = self.counters.iter_mut().find(|c| c.name == name) else {
            return Err(Error::UnknownCounter {
                subject: self.subject.clone(),
                counter: name.to_owned(),
                known: self.counters.iter().map(|c| c.name.clone()).collect(),
            });
        };
        c.required_zero = true;
        let clean = self.clean.verdict.clone();
        for s in std::iter::once(&mut self.clean).chain(self.scenarios.iter_mut()) {
            if s.failure.is_none() {
                s.failure = broken_invariants(&s.verdict, Some(&clean), &self.counters);
            }
        }
        Ok(())
    }

    /// Merge the partial reports of one sweep's shards into the report a
    /// single unpartitioned run gives.
    pub fn merge(parts: Vec<Report>) -> Result<Report, Error> {
        let mut parts = parts.into_iter();
        let Some(mut first) = parts.next() else {
            return Err(Error::Merge("no reports given".into()));
        };
        if first.depth > MAX_DEPTH {
            return Err(Error::Merge(format!(
                "{:?} claims depth {}; sweeps deeper than {MAX_DEPTH} crashes in a row are not real",
                first.subject, first.depth
            )));
        }
        let mut seen = vec![first.partition];
        for p in parts {
            if p.subject != first.subject || p.depth != first.depth || p.counters != first.counters
            {
                return Err(Error::Merge(format!(
                    "{:?} (depth {}) and {:?} (depth {}) are different sweeps",
                    first.subject, first.depth, p.subject, p.depth
                )));
            }
            if p.states != first.states {
                return Err(Error::Merge(format!(
                    "the shards of {:?} swept different crash states",
                    p.subject
                )));
            }
            if p.clean.verdict != first.clean.verdict {
                return Err(Error::Merge(format!(
                    "the clean runs of {:?} differ between shards",
                    p.subject
                )));
            }
            if seen.contains(&p.partition) {
                let shard = p
                    .partition
                    .map_or("all".into(), |(k, n)| format!("{k}/{n}"));
                return Err(Error::Merge(format!("shard {shard} given twice")));
            }
            seen.push(p.partition);
            first.scenarios.extend(p.scenarios);
            for u in p.unscoped {
                if !first.unscoped.contains(&u) {
                    first.unscoped.push(u);
                }
            }
        }
        // Shard numbers come from files: without this, `1/2` and `3/2` would
        // pass the count check below with shard 2's scenarios missing.
        if let Some(&(k, n)) = seen.iter().flatten().find(|(k, n)| *k == 0 || k > n) {
            return Err(Error::BadPartition { k, n });
        }
        let n = match seen.first().copied().flatten() {
            Some((_, n)) => n as usize,
            None => 1,
        };
        if seen.len() != n || seen.iter().any(|p| p.map_or(1, |(_, m)| m as usize) != n) {
            return Err(Error::Merge(format!(
                "expected all {n} shards of one partitioning, got {}",
                seen.iter()
                    .map(|p| p.map_or("all".into(), |(k, n)| format!("{k}/{n}")))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let states = first.states.clone();
        sort_scenarios(&mut first.scenarios, &states);
        first.partition = None;
        Ok(first)
    }
}

/// The deepest sweep a merged report may claim: the scenario count grows as
/// (points per life)^depth, so anything deeper is a damaged file, not a run.
const MAX_DEPTH: u32 = 16;
