//! The checks of a subject's declarations: the clean life's captures
//! compared with the worlds crashes leave, and a sample of shared scenarios
//! replayed from fresh worlds.

use std::collections::HashMap;

use crate::failure::Failure;
use crate::plan::shard_of;
use crate::report::ScenarioResult;
use crate::scenario::Scenario;
use crate::sink::Run;
use crate::subject::Subject;

use super::{Captures, Shared, CAPTURE_CHECKS, RECHECK_ONE_IN};

impl<S: Subject> Shared<'_, '_, S> {
    /// The clean life in the state of `first` (a scenario of one crash),
    /// capturing its world at each hit; a sample of those captures is
    /// compared with the world a crash at the same hit leaves, from a fresh
    /// world.
    pub(super) fn clean_captures(&self, first: &Scenario) -> Captures<S::World> {
        let clean = Scenario::in_state(first.state.clone(), Vec::new());
        let Ok(world) = self.replayer.world() else {
            return HashMap::new();
        };
        let Some((fin, captures)) = self.final_life(world, &clean, false, true) else {
            return HashMap::new();
        };
        let hits = fin.hits.unwrap_or_default();
        let stride = (hits.len() / CAPTURE_CHECKS).max(1);
        for (i, hit) in hits.iter().enumerate() {
            if i % stride != 0 && i + 1 != hits.len() {
                continue;
            }
            let Some(copy) = captures.get(hit) else {
                continue;
            };
            let captured = self.share.fingerprint(copy).map(|f| f.key());
            let sc = Scenario::in_state(first.state.clone(), vec![hit.clone()]);
            let crashed = self.replayer.world().ok().and_then(|mut w| {
                self.crash(&mut w, &sc, hit)
                    .then(|| self.share.fingerprint(&w).map(|f| f.key()))
            });
            if let Some(left) = crashed {
                if left != captured {
                    self.refuse(
                        &[],
                        format!(
                            "the world its capture copied at hit {} of the clean run ({hit}) \
                             differs from the world a crash there leaves",
                            i + 1
                        ),
                    );
                }
            }
        }
        captures
    }

    /// Whether the scenario is one of the sample replayed from a fresh world.
    pub(super) fn sampled(&self, sc: &Scenario, order: &[u32]) -> bool {
        let one_in = sc
            .hits
            .len()
            .checked_sub(1)
            .and_then(|d| self.recheck_one_in.get(d))
            .copied()
            .unwrap_or(RECHECK_ONE_IN);
        order.iter().all(|&i| i == 0) || shard_of(sc, one_in) == 1
    }

    /// Replay a shared scenario from a fresh world: a different result
    /// (other than one of timing) is a wrong declaration.
    pub(super) fn recheck(&self, shared: &ScenarioResult, run: &Run<'_>) {
        let again = self
            .replayer
            .replay(&shared.scenario, Vec::new(), Some(run.clean))
            .result;
        if matches!(
            again.failure,
            Some(Failure::Hung { .. } | Failure::Outlived { .. })
        ) {
            return;
        }
        let show = |f: &Option<Failure>| {
            f.as_ref()
                .map_or_else(|| "passed".to_owned(), |f| f.to_string())
        };
        if again.failure != shared.failure {
            self.refuse(
                &shared.order,
                format!(
                    "scenario {} {} when shared but {} when replayed from a fresh world",
                    shared.scenario,
                    show(&shared.failure),
                    show(&again.failure)
                ),
            );
        } else if again.verdict != shared.verdict {
            self.refuse(
                &shared.order,
                format!(
                    "scenario {} counts {:?} when shared but {:?} when replayed from a fresh world",
                    shared.scenario, shared.verdict, again.verdict
                ),
            );
        }
    }
}

/// Where two hit lists first differ: the hit's number (from 1), and each
/// list's hit there (`(the end)` past a list's end).
pub(crate) fn first_difference(
    a: &[crashpoint::Hit],
    b: &[crashpoint::Hit],
) -> (usize, String, String) {
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let show = |h: &[crashpoint::Hit]| {
        h.get(i)
            .map_or_else(|| "(the end)".to_owned(), crashpoint::Hit::to_string)
    };
    (i + 1, show(a), show(b))
}

/// Whether `a` and `b` hold the same hits, in any order.
pub(crate) fn same_hits(a: &[crashpoint::Hit], b: &[crashpoint::Hit]) -> bool {
    let sorted = |h: &[crashpoint::Hit]| {
        let mut v: Vec<String> = h.iter().map(crashpoint::Hit::to_string).collect();
        v.sort_unstable();
        v
    };
    a.len() == b.len() && sorted(a) == sorted(b)
}
