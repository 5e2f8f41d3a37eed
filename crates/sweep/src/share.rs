//! Shared lives: a sweep that runs each distinct life once.
//!
//! A life of a deterministic program is a function of the world it starts
//! from and the hit it crashes at. When a subject opts in
//! ([`Subject::snapshot`] and [`Subject::fingerprint`]), the runner
//!
//! - starts the children of a scenario (`[h1, *]`) from a deep copy of the
//!   world its crashed lives left, instead of replaying those lives;
//! - remembers, for each world fingerprint (and life number), the outcome
//!   of the final life run from it and the judge's verdict on the world
//!   after — for the worlds of scenarios with children over the whole
//!   sweep (up to a fixed number of worlds each for leaves and for scenarios
//!   with children, so memory stays bounded);
//! - re-derives each scenario's result (its typed failure, its broken
//!   invariants) from those outcomes, exactly as a replay from a fresh world
//!   would, and reruns a failing one from a fresh world as the brute-force
//!   sweep does (a changed result is flaky).
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

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crashpoint::scope::Handle;
use crashpoint::{Hit, Outcome};
use rayon::prelude::*;

use crate::brute::subtree;
use crate::error::Error;
use crate::failure::Failure;
use crate::judge::Verdict;
use crate::plan::{expand, in_partition};
use crate::progress::Progress;
use crate::replay::{Ran, Replayer};
use crate::report::ScenarioResult;
use crate::scenario::Scenario;
use crate::sink::Run;
use crate::subject::{Boot, Subject};

type WorldKey = (u128, u128);

/// A world before a life: its fingerprint, and which life of the scenario
/// runs on it (the runner's boot sees the life number).
type LifeKey = (WorldKey, usize);

/// A hash map split into shards, so parallel scenarios rarely wait on each
/// other's lookups, that stops remembering at `cap` entries (a memo only
/// saves work: a miss runs the life).
struct Memo<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
    cap: usize,
    len: AtomicUsize,
}

/// How many leaves' final lives a sweep remembers (each a verdict, about a
/// kilobyte in the designs).
const LEAF_MEMO_CAP: usize = 1 << 16;
/// How many final lives of scenarios with children a sweep remembers (each
/// with its hits).
const PARENT_MEMO_CAP: usize = 1 << 12;

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    fn new(cap: usize) -> Self {
        Memo {
            shards: (0..64).map(|_| Mutex::new(HashMap::new())).collect(),
            cap,
            len: AtomicUsize::new(0),
        }
    }

    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        let i = (h.finish() % self.shards.len() as u64) as usize;
        // `i` is below the shard count.
        &self.shards[i]
    }

    fn get(&self, k: &K) -> Option<V> {
        let m = self.shard(k).lock().unwrap_or_else(|e| e.into_inner());
        m.get(k).cloned()
    }

    fn insert(&self, k: K, v: V) {
        if self.len.load(Ordering::Relaxed) >= self.cap {
            return;
        }
        let mut m = self.shard(&k).lock().unwrap_or_else(|e| e.into_inner());
        if m.insert(k, v).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The final life from one world, and the judge's verdict after it.
struct Final {
    /// The scenario's failure, as [`Replayer::replay`] derives it.
    failure: Option<Failure>,
    /// Its hits, kept only when some scenario expands from them.
    hits: Option<Vec<Hit>>,
    verdict: Verdict,
}

/// The memos of one crash state's sweep: world before the final life →
/// its outcome, for scenarios with children and for leaves.
struct Memos {
    finals: Memo<LifeKey, Arc<Final>>,
    leaves: Memo<LifeKey, Arc<Final>>,
}

/// The sweep's shared state: the replayer.
pub(crate) struct Shared<'r, 'a, S: Subject> {
    replayer: &'r Replayer<'a, S>,
}

impl<'r, 'a, S: Subject> Shared<'r, 'a, S> {
    /// Sharing for this sweep, if the subject opts in; refuses a subject
    /// whose clean runs from fresh worlds differ.
    pub(crate) fn new(replayer: &'r Replayer<'a, S>, clean: &Ran) -> Result<Option<Self>, Error> {
        let subject = replayer.subject;
        // A world that cannot be made ends the sweep (with the error the
        // replayer keeps), not sharing.
        let Ok(fresh) = replayer.world() else {
            return Ok(None);
        };
        if subject.snapshot(&fresh).is_none() {
            return Ok(None);
        }
        let Some(fp) = subject.fingerprint(&fresh) else {
            return Ok(None);
        };
        let refuse = |detail: String| Error::NotShareable {
            subject: subject.name(),
            detail,
        };
        let Ok(second) = replayer.world() else {
            return Ok(None);
        };
        if subject.fingerprint(&second).map(|f| f.key()) != Some(fp.key()) {
            return Err(refuse(
                "two fresh worlds have different fingerprints".into(),
            ));
        }
        let first = Self::clean_life(replayer);
        let again = Self::clean_life(replayer);
        for (hits, _) in [&first, &again] {
            if *hits != clean.last_hits {
                let i = hits
                    .iter()
                    .zip(&clean.last_hits)
                    .take_while(|(a, b)| a == b)
                    .count();
                let show = |h: &[Hit]| {
                    h.get(i)
                        .map_or_else(|| "(the end)".to_owned(), Hit::to_string)
                };
                return Err(refuse(format!(
                    "the clean run's hit {} was {} once and {} another time",
                    i + 1,
                    show(&clean.last_hits),
                    show(hits)
                )));
            }
        }
        if first.1 != again.1 {
            return Err(refuse(
                "two clean runs from fresh worlds leave worlds with different fingerprints".into(),
            ));
        }
        Ok(Some(Shared { replayer }))
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
        let fp = replayer.subject.fingerprint(&world).map(|f| f.key());
        (fin.hits, fp)
    }

    /// Every scenario below the clean run in one crash state, handed to the
    /// run's sink in any order.
    pub(crate) fn sweep(&self, top: Vec<(Scenario, Vec<u32>)>, run: &Run<'_>) {
        let memos = Memos {
            finals: Memo::new(PARENT_MEMO_CAP),
            leaves: Memo::new(LEAF_MEMO_CAP),
        };
        top.into_par_iter()
            .for_each(|(sc, order)| self.node(sc, order, None, run, &memos));
    }

    /// `sc` and its children as without sharing.
    fn brute(&self, sc: Scenario, order: Vec<u32>, run: &Run<'_>) {
        subtree(self.replayer, sc, order, run);
    }

    /// The scenario `sc`, whose last hit is the crash target of its last
    /// crashed life; `parent` is the world its earlier lives left (none: a
    /// fresh world).
    fn node(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        parent: Option<&Mutex<S::World>>,
        run: &Run<'_>,
        memos: &Memos,
    ) {
        let subject = self.replayer.subject;
        let Some(target) = sc.hits.last().cloned() else {
            return;
        };
        let k = sc.depth();
        let finished = || (run.progress)(Progress::Finished { depth: k });
        let leaf = k >= run.config.depth as usize;
        let wanted = in_partition(&sc, run.config.partition);
        if leaf && !wanted {
            // Not reported and no children: nothing to run.
            finished();
            return;
        }
        let finals = if leaf { &memos.leaves } else { &memos.finals };
        let world = match parent {
            None => self.replayer.world().ok(),
            Some(m) => subject.snapshot(&m.lock().unwrap_or_else(|e| e.into_inner())),
        };
        let Some(mut world) = world else {
            return self.brute(sc, order, run);
        };
        let ctx = Boot::new(sc.state.clone(), k, k > 1);
        let handle = Handle::new(Some(target.clone()));
        let deadline = self.replayer.deadline();
        let crashed =
            match self
                .replayer
                .life(&mut world, &ctx, &handle, deadline, &sc, &mut Vec::new())
            {
                Ok(lived) => {
                    matches!(lived.life.outcome, Outcome::Crashed(_))
                        && handle.cancelled().is_none()
                        && lived.outlived.is_empty()
                }
                Err(_) => false,
            };
        let after = match (crashed, subject.fingerprint(&world)) {
            (true, Some(fp)) => fp.key(),
            _ => return self.brute(sc, order, run),
        };
        // A leaf's world is not needed after its final life; a parent's is
        // kept for its children. (Leaves and parents remember apart, and a
        // parent's final life always keeps its hits.)
        let (fin, world) = match finals.get(&(after, k + 1)) {
            Some(f) => (f, (!leaf).then_some(world)),
            _ => {
                let (fin, world) = if leaf {
                    (self.final_life(world, &sc, false), None)
                } else {
                    let fin = subject
                        .snapshot(&world)
                        .and_then(|copy| self.final_life(copy, &sc, true));
                    (fin, Some(world))
                };
                let Some(fin) = fin else {
                    return self.brute(sc, order, run);
                };
                let fin = Arc::new(fin);
                finals.insert((after, k + 1), Arc::clone(&fin));
                (fin, world)
            }
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
            (run.progress)(Progress::Planned {
                depth: k + 1,
                count: children.len() as u64,
            });
            let parent = Mutex::new(world);
            children
                .into_par_iter()
                .for_each(|(c, o)| self.node(c, o, Some(&parent), run, memos));
        }
    }

    /// The final life of `sc` on `world`, and the judge after it; `None` if
    /// it ran too long (timing is not a function of the world).
    fn final_life(&self, mut world: S::World, sc: &Scenario, keep_hits: bool) -> Option<Final> {
        let fin = self.replayer.final_life(
            &mut world,
            sc,
            true,
            self.replayer.deadline(),
            &mut Vec::new(),
        );
        // Like a time limit, threads that outlive their life are a matter
        // of timing, not of the world: replayed, not remembered.
        if fin.hung || matches!(fin.failure, Some(Failure::Outlived { .. })) {
            return None;
        }
        let mut failure = fin.failure;
        let verdict = self.replayer.judge_only(&world, &mut failure);
        Some(Final {
            failure,
            hits: keep_hits.then_some(fin.hits),
            verdict,
        })
    }

    /// A scenario's result from its final life's outcome, as
    /// [`Replayer::replay`] derives it, settled (a failure rerun) and handed
    /// to the sink.
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
        self.replayer
            .settle(&result.scenario.clone(), &mut result, run.clean, run.config);
        run.sink.push(result);
    }
}
