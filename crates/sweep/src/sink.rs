//! One crash state's sweep as its scenarios see it: the [`Run`] they
//! share, and the [`Sink`] their results go to as they arrive (tallied, and
//! kept only if they failed).

use std::sync::Mutex;

use crate::config::Config;
use crate::judge::{broken_invariants, Counter, Verdict};
use crate::progress::Progress;
use crate::report::{ScenarioResult, Tally};

/// What every scenario of one crash state's sweep shares: the config, the
/// clean run's verdict, the progress callback and where results go.
pub(crate) struct Run<'r> {
    pub(crate) config: &'r Config,
    pub(crate) clean: &'r Verdict,
    /// Whether the clean runs passed their hits in different orders: each
    /// final life's hits are then put in
    /// [`canonical_order`](crate::nets::canonical_order) before its children
    /// are planned.
    pub(crate) interleaved: bool,
    pub(crate) progress: &'r (dyn Fn(Progress) + Sync),
    pub(crate) sink: &'r Sink<'r>,
}

/// Where a sweep's results go as they arrive: each is tallied, and kept
/// only if it failed (or every one, when the sweep keeps all).
pub(crate) struct Sink<'r> {
    pub(crate) clean: &'r Verdict,
    pub(crate) counters: &'r [Counter],
    pub(crate) required: bool,
    pub(crate) keep_all: bool,
    pub(crate) inner: Mutex<Gathered>,
}

pub(crate) struct Gathered {
    pub(crate) tally: Tally,
    pub(crate) kept: Vec<ScenarioResult>,
    pub(crate) count: u64,
}

impl Sink<'_> {
    /// One scenario's result (of the shard), in any order.
    pub(crate) fn push(&self, mut result: ScenarioResult) {
        if self.required && result.failure.is_none() {
            result.failure = broken_invariants(&result.verdict, Some(self.clean), self.counters);
        }
        let values = (!self.keep_all).then(|| Tally::values(&result, self.clean, self.counters));
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Every result is of this sink's crash state and of a depth the
        // sweep planned (the tally would drop it silently otherwise);
        // `finish` checks the counts add up.
        let depth = result.scenario.depth();
        assert!(
            result.scenario.state == g.tally.state && (1..=g.tally.by_depth.len()).contains(&depth),
            "a scenario of state {:?} and depth {depth} reached the sink of state {:?} and depth {}",
            result.scenario.state,
            g.tally.state,
            g.tally.by_depth.len()
        );
        g.count += 1;
        if let Some(values) = values {
            g.tally.add(&result, &values);
        }
        if self.keep_all || result.failure.is_some() {
            g.kept.push(result);
        }
    }

    /// What the sink gathered, once every scenario is in: the results
    /// counted, tallied (unless all are kept) and kept add up.
    pub(crate) fn finish(self) -> Gathered {
        let g = self.inner.into_inner().unwrap_or_else(|e| e.into_inner());
        let tallied: u64 = g.tally.by_depth.iter().sum();
        let kept = g.kept.len() as u64;
        if self.keep_all {
            assert_eq!(
                kept, g.count,
                "a sink that keeps all kept {kept} of {} results",
                g.count
            );
        } else {
            assert_eq!(
                tallied, g.count,
                "a sink tallied {tallied} of {} results",
                g.count
            );
            assert!(
                kept <= g.count && g.tally.failed + g.tally.flaky + g.tally.unfired <= g.count,
                "a sink kept {kept} results and tallied {} failed, {} flaky and {} not fired of {} results",
                g.tally.failed,
                g.tally.flaky,
                g.tally.unfired,
                g.count
            );
        }
        g
    }
}
