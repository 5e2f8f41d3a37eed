//! Shared lives: a sweep that runs each distinct life once (the public
//! opt-in and its checks are described in [`sharing`](crate::sharing)).
//!
//! When a subject opts in ([`Subject::share`]), the runner
//!
//! - starts each scenario's restart where its crash left the world: from
//!   the copy its subject's [`Capture`](crate::sharing::Capture) took at
//!   that hit in the parent's final life, or (a subject without captures,
//!   a hit with other threads running, a capture that failed) from a copy
//!   of the world its parent's crashed lives left, running the crashed life
//!   again there;
//! - remembers, for each world fingerprint (and life number), the outcome
//!   of a leaf's final life run from it and the judge's verdict on the
//!   world after (up to a fixed number of worlds, so memory stays bounded),
//!   and the same for scenarios with children when captures are off;
//! - re-derives each scenario's result (its typed failure, its broken
//!   invariants) from those outcomes, exactly as a replay from a fresh world
//!   would, and reruns a failing one from a fresh world as the brute-force
//!   sweep does (a changed result is flaky);
//! - replays a fixed sample of scenarios from a fresh world and ends the
//!   sweep with [`Error::WronglyShared`] if one differs;
//! - ends a final life whose children are leaves where an earlier such
//!   life stood with the same behaviour state, and derives the children
//!   after that point from the earlier life's (see `parents`).
//!
//! The report is the same byte for byte as the brute-force sweep
//! ([`Config::share`](crate::Config::share) `= false`). A subject whose two
//! clean runs from fresh worlds differ in their hits or in the fingerprint
//! of the world they leave is refused ([`Error::NotShareable`]) rather than
//! shared. A scenario whose crash does not fire, whose life fails, stops for
//! running too long or whose world has no fingerprint or copy is replayed
//! from a fresh world as without sharing, with its children. Each shared
//! life has the whole time limit to itself (a brute-force scenario has it
//! for all its lives together).

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use crashpoint::scope::Handle;
use crashpoint::{Hit, Outcome};
use rayon::prelude::*;

use crate::brute::subtree;
use crate::error::Error;
use crate::failure::Failure;
use crate::judge::Verdict;
use crate::plan::{expand, in_partition};
use crate::power::Boot;
use crate::progress::Progress;
use crate::replay::{Ran, Replayer};
use crate::report::ScenarioResult;
use crate::scenario::Scenario;
use crate::sharing::Share;
use crate::sink::Run;
use crate::subject::Subject;

mod checks;
mod memo;
mod parents;
mod tails;

use memo::{Memo, LEAF_MEMO_CAP, PARENT_MEMO_CAP};
use parents::Parents;
use tails::{StartTail, Tails};

type WorldKey = (u128, u128);

/// A world before a life: its fingerprint, and which life of the scenario
/// runs on it (the runner's boot sees the life number).
type LifeKey = (WorldKey, usize);

/// The final life from one world, and the judge's verdict after it.
struct Final {
    /// The scenario's failure, as [`Replayer::replay`] derives it.
    failure: Option<Failure>,
    /// Its hits, kept only when some scenario expands from them.
    hits: Option<Vec<Hit>>,
    verdict: Verdict,
}

/// The memos of one crash state's sweep: world before the final life →
/// its outcome, for scenarios with children and for leaves; and the tails
/// of leaves' final lives.
struct Memos<W> {
    finals: Memo<LifeKey, Arc<Final>>,
    leaves: Memo<LifeKey, Arc<Final>>,
    tails: Arc<Tails<W>>,
    parents: Arc<Parents<W>>,
}

/// One in how many scenarios (by a hash of its name) a shared sweep also
/// replays from a fresh world, to check the subject's declarations (the
/// first scenario at each depth is always checked too) — at least. A sweep
/// whose scenarios of one depth would give more than [`RECHECK_SAMPLES`]
/// samples at that rate (estimated from the clean run's hits: `hits^d / d!`
/// scenarios at depth `d`) checks about that many instead, spread by the
/// same hash: each replay is as long as the clean run and each of its saves
/// grows with the job, so a rate fixed for every size would make the checks
/// grow faster than the sweep they check (as `calls³` at depth 2).
const RECHECK_ONE_IN: u32 = 32;
/// About how many scenarios of one depth a large sweep replays from fresh
/// worlds (see [`RECHECK_ONE_IN`]): a declaration wrong in 2 % of the
/// scenarios of a depth goes unseen in 128 samples with odds of 1 in 13.
const RECHECK_SAMPLES: u64 = 128;

/// How many of a scenario's children (in the order of their crash hits)
/// run one after another before the rest run in parallel, when lives share
/// tails: children that crash at the same stage of a step end on each
/// other's tails, and the first of each such kind runs whole; started side
/// by side, two of a kind would both run whole.
const FIRST_ALONE: usize = 16;

/// At most how many hits of the clean life have their capture compared with
/// the world a crash there leaves, before a sweep with captures.
const CAPTURE_CHECKS: usize = 16;

/// Where a scenario's last crashed life leaves its world from.
enum Start<'p, W> {
    /// Run the crashed life on a fresh world.
    Fresh,
    /// Run the crashed life on a copy of the world the parent's crashed
    /// lives left.
    Parent(&'p Mutex<W>),
    /// The world as the crash leaves it, captured at its hit in the
    /// parent's final life: no life to run.
    Captured(W),
}

/// The worlds a final life's capture copied, by hit.
type Captures<W> = HashMap<Hit, W>;

/// A node's final life: its result, the captures of the worlds at its
/// hits, the world kept for its children, and the tail its start leads to.
type NodeFinal<W> = (Arc<Final>, Captures<W>, Option<W>, Option<StartTail<W>>);

/// One in how many scenarios of each depth (index 0: depth 1) a sweep
/// whose clean run passed `hits` hits replays from a fresh world.
fn recheck_one_in(hits: usize) -> Vec<u32> {
    let hits = u64::try_from(hits).unwrap_or(u64::MAX);
    let mut scenarios: u64 = 1;
    (1..=u64::from(crate::config::Config::MAX_DEPTH))
        .map(|d| {
            scenarios = scenarios.saturating_mul(hits) / d;
            let one_in = (scenarios / RECHECK_SAMPLES).max(u64::from(RECHECK_ONE_IN));
            u32::try_from(one_in).unwrap_or(u32::MAX)
        })
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sweep's shared state: the replayer, the subject's sharing, and the
/// first sign that the subject declared it wrongly.
pub(crate) struct Shared<'r, 'a, S: Subject> {
    replayer: &'r Replayer<'a, S>,
    share: &'a dyn Share<S::World>,
    /// Whether the subject copies its world while a life runs.
    captures: bool,
    /// Whether the subject shares tails ([`Share::probe`]).
    tails: bool,
    /// One in how many scenarios is replayed from a fresh world (see
    /// [`RECHECK_ONE_IN`]), by depth from 1.
    recheck_one_in: Vec<u32>,
    /// The first scenario (in the sweep's order) that showed a wrong
    /// declaration, and how.
    wrong: Mutex<Option<(Vec<u32>, String)>>,
}

impl<'r, 'a, S: Subject> Shared<'r, 'a, S> {
    /// Sharing for this sweep, if the subject opts in; refuses a subject
    /// whose clean runs from fresh worlds differ.
    pub(crate) fn new(replayer: &'r Replayer<'a, S>, clean: &Ran) -> Result<Option<Self>, Error> {
        let subject: &'a S = replayer.subject;
        let Some(share) = subject.share() else {
            return Ok(None);
        };
        // A world that cannot be made ends the sweep (with the error the
        // replayer keeps), not sharing.
        let Ok(fresh) = replayer.world() else {
            return Ok(None);
        };
        if share.copy(&fresh).is_none() {
            return Ok(None);
        }
        let Some(fp) = share.fingerprint(&fresh) else {
            return Ok(None);
        };
        let refuse = |detail: String| Error::NotShareable {
            subject: subject.name(),
            detail,
        };
        let Ok(second) = replayer.world() else {
            return Ok(None);
        };
        if share.fingerprint(&second).map(|f| f.key()) != Some(fp.key()) {
            return Err(refuse(
                "two fresh worlds have different fingerprints".into(),
            ));
        }
        let first = Self::clean_life(replayer);
        let again = Self::clean_life(replayer);
        for (hits, _) in [&first, &again] {
            // The same hits in another order: threads racing, which the
            // checked clean runs happened not to show. Lives are shared by
            // the order of their hits, so this sweep runs brute force.
            if *hits != clean.last_hits && checks::same_hits(hits, &clean.last_hits) {
                return Ok(None);
            }
            if *hits != clean.last_hits {
                let (i, was, other) = checks::first_difference(&clean.last_hits, hits);
                return Err(refuse(format!(
                    "the clean run's hit {i} was {was} once and {other} another time"
                )));
            }
        }
        if first.1 != again.1 {
            return Err(refuse(
                "two clean runs from fresh worlds leave worlds with different fingerprints".into(),
            ));
        }
        Ok(Some(Shared {
            replayer,
            share,
            captures: share.capture(&fresh).is_some(),
            tails: share.probe(&fresh).is_some(),
            recheck_one_in: recheck_one_in(clean.last_hits.len()),
            wrong: Mutex::new(None),
        }))
    }

    /// The clean life on a fresh world: its hits and the fingerprint of the
    /// world it leaves.
    fn clean_life(replayer: &Replayer<'_, S>) -> (Vec<Hit>, Option<(u128, u128)>) {
        let Ok(mut world) = replayer.world() else {
            return (Vec::new(), None);
        };
        let fin = replayer.final_life(
            &mut world,
            &Scenario::default(),
            false,
            replayer.deadline(),
            &mut Vec::new(),
        );
        (fin.hits, replayer.fingerprint(&world))
    }

    /// The subject's wrong declaration the sweep found, if any.
    pub(crate) fn refusal(&self) -> Option<Error> {
        lock(&self.wrong)
            .as_ref()
            .map(|(_, detail)| Error::WronglyShared {
                subject: self.replayer.subject.name(),
                detail: detail.clone(),
            })
    }

    /// Remember a wrong declaration shown by the scenario of `order` (the
    /// first in the sweep's order is reported, whatever the threads did).
    fn refuse(&self, order: &[u32], detail: String) {
        let mut wrong = lock(&self.wrong);
        if !matches!(&*wrong, Some((o, _)) if o.as_slice() <= order) {
            *wrong = Some((order.to_vec(), detail));
        }
    }

    /// Every scenario below the clean run in one crash state, handed to the
    /// run's sink in any order.
    pub(crate) fn sweep(&self, top: Vec<(Scenario, Vec<u32>)>, run: &Run<'_>) {
        let memos = Memos {
            finals: Memo::new(PARENT_MEMO_CAP),
            leaves: Memo::new(LEAF_MEMO_CAP),
            tails: Arc::new(Tails::new()),
            parents: Arc::new(Parents::new()),
        };
        let mut captured = match top.first() {
            Some((sc, _)) if self.captures => self.clean_captures(sc),
            _ => HashMap::new(),
        };
        let jobs: Vec<_> = top
            .into_iter()
            .map(|(sc, order)| {
                let start = sc
                    .hits
                    .last()
                    .and_then(|h| captured.remove(h))
                    .map_or(Start::Fresh, Start::Captured);
                (sc, order, start)
            })
            .collect();
        self.siblings(jobs, 1, run, &memos);
    }

    /// Whether scenarios of depth `depth` share the tails of their final
    /// lives as parents of leaves (see `parents`).
    fn parents_of_leaves(&self, depth: usize, run: &Run<'_>) -> bool {
        self.captures && self.tails && depth + 1 == run.config.depth as usize
    }

    /// Where a child crashed at its last hit in its parent's final life
    /// starts: the capture taken there, or its parent's world.
    fn child_start<'p>(
        captures: &mut Captures<S::World>,
        child: &Scenario,
        parent: &'p Mutex<S::World>,
    ) -> Start<'p, S::World> {
        child
            .hits
            .last()
            .and_then(|h| captures.remove(h))
            .map_or(Start::Parent(parent), Start::Captured)
    }

    /// Sibling scenarios of depth `depth`. When lives share tails, the
    /// first runs alone (its children in parallel) before the rest: it
    /// crashes earliest, so its final life passes nearly every state its
    /// siblings' lives reach, and they end on it only once it is done (a
    /// parent's once its children are too); siblings started beside it
    /// would run whole. Parents of leaves run one after another, each with
    /// its children in parallel: a parent's first children run lives that
    /// the next parent's would end on. Returns what each sibling's
    /// [`Shared::node`] returned, in the order of `jobs`.
    fn siblings(
        &self,
        mut jobs: Vec<(Scenario, Vec<u32>, Start<'_, S::World>)>,
        depth: usize,
        run: &Run<'_>,
        memos: &Memos<S::World>,
    ) -> Vec<Option<StartTail<S::World>>> {
        let rest = match (self.tails, self.parents_of_leaves(depth, run)) {
            (false, _) => std::mem::take(&mut jobs),
            (true, true) => Vec::new(),
            (true, false) => jobs.split_off(FIRST_ALONE.min(jobs.len())),
        };
        let mut tails: Vec<_> = jobs
            .into_iter()
            .map(|(sc, order, start)| self.node(sc, order, start, run, memos))
            .collect();
        tails.par_extend(
            rest.into_par_iter()
                .map(|(sc, order, start)| self.node(sc, order, start, run, memos)),
        );
        tails
    }

    /// `sc` and its children as without sharing (no tail to pass on).
    fn brute(&self, sc: Scenario, order: Vec<u32>, run: &Run<'_>) -> Option<StartTail<S::World>> {
        subtree(self.replayer, sc, order, run);
        None
    }

    /// Run the last crashed life of `sc` on `world`: whether it crashed at
    /// `target` as it should (nothing else running, not stopped for time).
    fn crash(&self, world: &mut S::World, sc: &Scenario, target: &Hit) -> bool {
        let k = sc.depth();
        let ctx = Boot::new(sc.state.clone(), k, k > 1);
        let handle = Handle::new(Some(target.clone()));
        let deadline = self.replayer.deadline();
        match self
            .replayer
            .life(world, &ctx, &handle, deadline, sc, &mut Vec::new())
        {
            Ok(lived) => {
                matches!(lived.life.outcome, Outcome::Crashed(_))
                    && handle.cancelled().is_none()
                    && lived.outlived.is_empty()
            }
            Err(_) => false,
        }
    }

    /// The scenario `sc`, whose last hit is the crash target of its last
    /// crashed life, starting from `start`; for a leaf, the tail its final
    /// life's start leads to, if it has one.
    fn node(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        start: Start<'_, S::World>,
        run: &Run<'_>,
        memos: &Memos<S::World>,
    ) -> Option<StartTail<S::World>> {
        let target = sc.hits.last().cloned()?;
        let k = sc.depth();
        let finished = || (run.progress)(Progress::Finished { depth: k });
        let leaf = k >= run.config.depth as usize;
        let wanted = in_partition(&sc, run.config.partition);
        if leaf && !wanted {
            // Not reported and no children: nothing to run.
            finished();
            return None;
        }
        let captured = matches!(start, Start::Captured(_));
        let world = match start {
            Start::Captured(w) => Some(w),
            Start::Fresh => self.replayer.world().ok(),
            Start::Parent(m) => self.share.copy(&lock(m)),
        }
        .and_then(|mut w| {
            let ran = captured || self.crash(&mut w, &sc, &target);
            ran.then_some(w)
        });
        let Some(world) = world else {
            return self.brute(sc, order, run);
        };
        // A parent of leaves shares tails too (see `parents`).
        if self.parents_of_leaves(k, run) {
            self.parent_node(sc, order, world, run, memos, wanted);
            return None;
        }
        // A leaf whose subject shares tails looks its whole life up by its
        // behaviour state (the life's start is a tail's position), not by
        // the whole world.
        let after = match (leaf && self.tails, self.share.fingerprint(&world)) {
            (true, _) => None,
            (false, Some(f)) => Some(f.key()),
            (false, None) => return self.brute(sc, order, run),
        };
        let Some((fin, captures, world, start_tail)) =
            self.node_final(&sc, world, after, memos, run)
        else {
            return self.brute(sc, order, run);
        };
        finished();
        let children = match (&fin.hits, leaf) {
            (Some(hits), false) => expand(&sc, &order, hits, false),
            _ => Vec::new(),
        };
        if wanted {
            self.emit(sc, order, &fin, run);
        }
        if let (false, Some(world)) = (children.is_empty(), world) {
            self.children(children, captures, world, k + 1, run, memos);
        }
        start_tail
    }

    /// The final life of the node `sc` on `world` (crashed), from a memo
    /// when `after` (the world's key) names one: its result, the captures
    /// of the worlds at its hits, the world kept for the children whose
    /// hit has no capture (`None` for a leaf), and the tail a leaf's start
    /// leads to. `None`: run it without sharing.
    fn node_final(
        &self,
        sc: &Scenario,
        world: S::World,
        after: Option<WorldKey>,
        memos: &Memos<S::World>,
        run: &Run<'_>,
    ) -> Option<NodeFinal<S::World>> {
        let k = sc.depth();
        // A leaf's world is not needed after its final life; a parent's is
        // kept for the children whose hit has no capture.
        if k >= run.config.depth as usize {
            if let Some(f) = after.and_then(|a| memos.leaves.get(&(a, k + 1))) {
                return Some((f, HashMap::new(), None, None));
            }
            let (mut fin, tail) = self.leaf_life(world, sc, &memos.tails)?;
            // A leaf has no children: its hits are not kept.
            fin.hits = None;
            let fin = Arc::new(fin);
            if let Some(a) = after {
                memos.leaves.insert((a, k + 1), Arc::clone(&fin));
            }
            return Some((fin, HashMap::new(), None, tail));
        }
        if self.captures {
            let copy = self.share.copy(&world)?;
            let (fin, captures) = self.final_life(copy, sc, true, true)?;
            return Some((Arc::new(fin), captures, Some(world), None));
        }
        // Not a leaf: `after` was taken.
        let after = after?;
        if let Some(f) = memos.finals.get(&(after, k + 1)) {
            return Some((f, HashMap::new(), Some(world), None));
        }
        let copy = self.share.copy(&world)?;
        let (fin, _) = self.final_life(copy, sc, true, false)?;
        let fin = Arc::new(fin);
        memos.finals.insert((after, k + 1), Arc::clone(&fin));
        Some((fin, HashMap::new(), Some(world), None))
    }

    /// Runs the `children` (of `depth`) of a node whose world after its
    /// final life's crash is `world`, each from its capture if it has one.
    fn children(
        &self,
        children: Vec<(Scenario, Vec<u32>)>,
        mut captures: Captures<S::World>,
        world: S::World,
        depth: usize,
        run: &Run<'_>,
        memos: &Memos<S::World>,
    ) {
        (run.progress)(Progress::Planned {
            depth,
            count: children.len() as u64,
        });
        let parent = Mutex::new(world);
        let jobs: Vec<_> = children
            .into_iter()
            .map(|(c, o)| {
                let start = Self::child_start(&mut captures, &c, &parent);
                (c, o, start)
            })
            .collect();
        self.siblings(jobs, depth, run, memos);
    }

    /// The final life of `sc` on `world` (`after_crash`: the life before it
    /// crashed), copying the world at each hit if `capture`, and the judge
    /// after it; `None` if it ran too long (timing is not a function of the
    /// world).
    fn final_life(
        &self,
        mut world: S::World,
        sc: &Scenario,
        after_crash: bool,
        capture: bool,
    ) -> Option<(Final, Captures<S::World>)> {
        let store: Arc<Mutex<Captures<S::World>>> = Arc::default();
        let mut handle = Handle::new(None);
        if let Some(copy) = capture.then(|| self.share.capture(&world)).flatten() {
            let into = Arc::clone(&store);
            handle = handle.watch_hits(move |hit, threads| {
                // With another thread running, the world at this hit is
                // not the one a crash here leaves (that thread goes on to
                // its next point): no copy, the child runs its crash.
                if threads != 1 {
                    return;
                }
                let taken = panic::catch_unwind(AssertUnwindSafe(|| copy.take_at(hit)));
                if let Ok(Some(w)) = taken {
                    lock(&into).insert(hit.clone(), w);
                }
            });
        }
        let fin = self.replayer.final_life_in(
            &mut world,
            sc,
            after_crash,
            self.replayer.deadline(),
            &mut Vec::new(),
            handle,
        );
        // Like a time limit, threads that outlive their life are a matter
        // of timing, not of the world: replayed, not remembered.
        if fin.hung || matches!(fin.failure, Some(Failure::Outlived { .. })) {
            return None;
        }
        let mut failure = fin.failure;
        let verdict = self.replayer.judge_only(&world, &mut failure);
        let captures = std::mem::take(&mut *lock(&store));
        Some((
            Final {
                failure,
                hits: Some(fin.hits),
                verdict,
            },
            captures,
        ))
    }

    /// A scenario's result from its final life's outcome, as
    /// [`Replayer::replay`] derives it, checked against a replay from a
    /// fresh world if sampled, settled (a failure rerun) and handed to the
    /// sink.
    fn emit(&self, sc: Scenario, order: Vec<u32>, fin: &Final, run: &Run<'_>) {
        let failure = match &fin.failure {
            None => crate::judge::verdict_failure(
                &fin.verdict,
                Some(run.clean),
                &self.replayer.counters,
            ),
            f => f.clone(),
        };
        let mut result = ScenarioResult {
            scenario: sc,
            order,
            verdict: fin.verdict.clone(),
            failure,
            lives: Vec::new(),
            world: None,
        };
        if self.sampled(&result.scenario, &result.order) {
            self.recheck(&result, run);
        }
        self.replayer
            .settle(&result.scenario.clone(), &mut result, run.clean, run.config);
        run.sink.push(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small sweeps are checked at one in 32 at every depth; a large one
    /// checks about `RECHECK_SAMPLES` scenarios of each depth, so the
    /// replays grow with the clean run's length, not with the scenarios.
    #[test]
    fn the_recheck_samples_a_fixed_share_then_a_fixed_count() {
        let one_in = recheck_one_in(40);
        assert_eq!(one_in.len(), crate::config::Config::MAX_DEPTH as usize);
        // 40 scenarios of depth 1, 800 of depth 2, 10,666 of depth 3.
        assert_eq!(&one_in[..3], &[32, 32, 83]);
        for hits in [200_usize, 400, 800] {
            let one_in = recheck_one_in(hits);
            assert_eq!(one_in[0], 32, "{hits}: depth 1 keeps one in 32");
            let at_depth_2 = (hits * hits / 2) as u64;
            let samples = at_depth_2 / u64::from(one_in[1]);
            assert!(
                (RECHECK_SAMPLES - 1..=RECHECK_SAMPLES + 1).contains(&samples),
                "{hits} hits: {samples} samples at depth 2"
            );
        }
        // No overflow at the deepest depth of a long run.
        assert_eq!(recheck_one_in(1_000_000)[15], u32::MAX);
    }
}
