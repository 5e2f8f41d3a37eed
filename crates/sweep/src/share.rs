//! Shared lives: a sweep that runs each distinct life once.
//!
//! A life of a deterministic program is a function of the world it starts
//! from and the hit it crashes at. When a subject opts in
//! ([`Subject::snapshot`] and [`Subject::fingerprint`]), the runner
//!
//! - starts the children of a scenario (`[h1, *]`) from a deep copy of the
//!   world its crashed lives left, instead of replaying those lives;
//! - remembers, for each (world fingerprint, crash target), the fingerprint
//!   of the world the crashed life leaves, and for each world fingerprint
//!   the outcome of the final life run from it and the judge's verdict on
//!   the world after;
//! - re-derives each scenario's result (its failure, its broken invariants)
//!   from those outcomes, exactly as a replay from a fresh world would.
//!
//! The report is the same byte for byte as the brute-force sweep
//! ([`Config::share`](crate::Config::share) `= false`). A subject whose two
//! clean runs differ is refused ([`Error::NotShareable`]) rather than shared;
//! a scenario whose crash does not fire, or whose world has no fingerprint,
//! is replayed from a fresh world as without sharing.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use crashpoint::{Hit, Outcome};
use rayon::prelude::*;

use crate::error::Error;
use crate::judge::{broken_invariants, Verdict};
use crate::report::{Report, ScenarioResult};
use crate::runner::{expand, in_partition, run_inner, Config, Progress, Ran, Replayer};
use crate::scenario::Scenario;
use crate::subject::Subject;

/// A hash of a world: what a life can observe, and separately what only the
/// judge counts (128 bits each). Build one with [`Fingerprint::new`] and feed
/// it every part of the world.
///
/// ```
/// use sweep::Fingerprint;
/// let a = Fingerprint::new().observe(&"checkpoint bytes").judge(&3u64);
/// let b = Fingerprint::new().observe(&"checkpoint bytes").judge(&4u64);
/// assert_ne!(a, b);
/// assert_eq!(a, Fingerprint::new().observe(&"checkpoint bytes").judge(&3u64));
/// ```
#[derive(Clone, Debug)]
pub struct Fingerprint {
    observed: TwoHashers,
    judged: TwoHashers,
}

#[derive(Clone, Debug)]
struct TwoHashers(DefaultHasher, DefaultHasher);

impl TwoHashers {
    fn new() -> Self {
        // `DefaultHasher::new` has fixed keys: the same world hashes the
        // same in every thread of a run. The second hasher starts from a
        // different prefix, for 128 bits in all.
        let a = DefaultHasher::new();
        let mut b = DefaultHasher::new();
        b.write_u64(0x9e37_79b9_7f4a_7c15);
        TwoHashers(a, b)
    }

    fn value(&self) -> u128 {
        (u128::from(self.0.finish()) << 64) | u128::from(self.1.finish())
    }
}

impl Hasher for TwoHashers {
    fn finish(&self) -> u64 {
        self.0.finish() ^ self.1.finish()
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
        self.1.write(bytes);
    }
}

impl fmt::Write for TwoHashers {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Hasher::write(self, s.as_bytes());
        Ok(())
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Fingerprint {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Fingerprint {}

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Self {
        Fingerprint {
            observed: TwoHashers::new(),
            judged: TwoHashers::new(),
        }
    }

    /// Add something a life can observe (files, a service's records).
    pub fn observe<T: Hash + ?Sized>(mut self, part: &T) -> Self {
        part.hash(&mut self.observed);
        self
    }

    /// Add something a life can observe, by its `Debug` text (for types
    /// without `Hash`; the text must tell different values apart).
    pub fn observe_debug(mut self, part: &dyn fmt::Debug) -> Self {
        // Writing into a hasher cannot fail.
        let _ = fmt::write(&mut self.observed, format_args!("{part:?}\u{0}"));
        self
    }

    /// Add something only the judge counts (tallies the program never reads).
    pub fn judge<T: Hash + ?Sized>(mut self, part: &T) -> Self {
        part.hash(&mut self.judged);
        self
    }

    /// Add something only the judge counts, by its `Debug` text.
    pub fn judge_debug(mut self, part: &dyn fmt::Debug) -> Self {
        let _ = fmt::write(&mut self.judged, format_args!("{part:?}\u{0}"));
        self
    }

    /// A hasher for what a life observes, for parts that hash themselves.
    pub fn observer(&mut self) -> &mut dyn Hasher {
        &mut self.observed
    }

    /// The hash of what a life observes.
    pub fn observed(&self) -> u128 {
        self.observed.value()
    }

    /// The hash of what only the judge counts.
    pub fn judged(&self) -> u128 {
        self.judged.value()
    }

    /// Both hashes: the key of a world in the runner's memo.
    fn key(&self) -> (u128, u128) {
        (self.observed(), self.judged())
    }
}

/// How much work a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Scenarios in the report, the clean run included.
    pub scenarios: u64,
    /// Lives actually run (clean runs included).
    pub lives: u64,
    /// Whether lives were shared.
    pub shared: bool,
}

/// [`run_with`](crate::run_with), also saying how many lives it ran.
pub fn run_counted<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Report, Stats), Error> {
    run_inner(subject, config, progress)
}

type WorldKey = (u128, u128);

/// A hash map split into shards, so parallel scenarios rarely wait on each
/// other's lookups.
struct Memo<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    fn new() -> Self {
        Memo {
            shards: (0..64).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }

    fn get(&self, k: &K) -> Option<V> {
        let m = self.shard(k).lock().unwrap_or_else(|e| e.into_inner());
        m.get(k).cloned()
    }

    fn insert(&self, k: K, v: V) {
        let mut m = self.shard(&k).lock().unwrap_or_else(|e| e.into_inner());
        m.insert(k, v);
    }
}

/// The final life from one world, and the judge's verdict after it.
struct Final {
    /// Whether it finished without an error.
    ok: bool,
    /// How it ended, in the words of the brute-force runner.
    end: String,
    /// Its hits, kept only when some scenario expands from them.
    hits: Option<Vec<Hit>>,
    verdict: Verdict,
    judge_failure: Option<String>,
}

/// The sweep's shared state: the memo of lives.
pub(crate) struct Shared<'r, 'a, S: Subject> {
    replayer: &'r Replayer<'a, S>,
    fresh: WorldKey,
    /// (world before, crash target) → world after the crashed life.
    crashes: Memo<(WorldKey, Hit), WorldKey>,
    /// World before the final life → its outcome.
    finals: Memo<WorldKey, Arc<Final>>,
}

impl<'r, 'a, S: Subject> Shared<'r, 'a, S> {
    /// Sharing for this sweep, if the subject opts in; refuses a subject
    /// whose clean run differs between two runs.
    pub(crate) fn new(replayer: &'r Replayer<'a, S>, clean: &Ran) -> Result<Option<Self>, Error> {
        let subject = replayer.subject;
        let fresh = subject.world();
        if subject.snapshot(&fresh).is_none() {
            return Ok(None);
        }
        let Some(fp) = subject.fingerprint(&fresh) else {
            return Ok(None);
        };
        let again = replayer.replay(&Scenario::default(), Vec::new(), None);
        if again.last_hits != clean.last_hits {
            let i = again
                .last_hits
                .iter()
                .zip(&clean.last_hits)
                .take_while(|(a, b)| a == b)
                .count();
            let show = |h: &[Hit]| {
                h.get(i)
                    .map_or_else(|| "(the end)".to_owned(), Hit::to_string)
            };
            return Err(Error::NotShareable {
                subject: subject.name(),
                detail: format!(
                    "the clean run's hit {} was {} once and {} the next time",
                    i + 1,
                    show(&clean.last_hits),
                    show(&again.last_hits)
                ),
            });
        }
        Ok(Some(Shared {
            replayer,
            fresh: fp.key(),
            crashes: Memo::new(),
            finals: Memo::new(),
        }))
    }

    /// Every scenario below the clean run, in any order.
    pub(crate) fn sweep(
        &self,
        top: Vec<(Scenario, Vec<u32>)>,
        config: &Config,
        clean: &Verdict,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<ScenarioResult> {
        top.into_par_iter()
            .flat_map_iter(|(sc, order)| {
                self.node(sc, order, None, self.fresh, config, clean, progress)
            })
            .collect()
    }

    fn brute(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        config: &Config,
        clean: &Verdict,
    ) -> Vec<ScenarioResult> {
        // A scenario that cannot be shared is replayed as without sharing;
        // its crash did not fire or its world has no fingerprint, so its
        // children (if any) are replayed too.
        let ran = self.replayer.replay(&sc, order, Some(clean));
        let mut out = Vec::new();
        let children = if sc.depth() < config.depth as usize {
            expand(&sc, &ran.result.order, &ran.last_hits)
        } else {
            Vec::new()
        };
        if in_partition(&sc, config.partition) {
            out.push(ran.result);
        }
        for (c, o) in children {
            out.extend(self.brute(c, o, config, clean));
        }
        out
    }

    /// The scenario `sc`, whose last hit is the crash target of its last
    /// crashed life; `parent` is the world its earlier lives left (none: a
    /// fresh world), fingerprinted `before`.
    #[allow(clippy::too_many_arguments)]
    fn node(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        parent: Option<&Mutex<S::World>>,
        before: WorldKey,
        config: &Config,
        clean: &Verdict,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<ScenarioResult> {
        let subject = self.replayer.subject;
        let Some(target) = sc.0.last().cloned() else {
            return Vec::new();
        };
        let leaf = sc.depth() >= config.depth as usize;
        let wanted = in_partition(&sc, config.partition);
        if leaf {
            if !wanted {
                // Not reported and no children: nothing to run.
                progress(Progress::Finished);
                return Vec::new();
            }
            if let Some(after) = self.crashes.get(&(before, target.clone())) {
                if let Some(fin) = self.finals.get(&after) {
                    progress(Progress::Finished);
                    return vec![self.result(sc, order, &fin, clean)];
                }
            }
        }
        let world = match parent {
            None => Some(subject.world()),
            Some(m) => subject.snapshot(&m.lock().unwrap_or_else(|e| e.into_inner())),
        };
        let Some(mut world) = world else {
            progress(Progress::Finished);
            return self.brute(sc, order, config, clean);
        };
        self.replayer.count_life();
        let life = crashpoint::crash_at(target.clone(), || subject.life(&mut world));
        let after = match (&life.outcome, subject.fingerprint(&world)) {
            (Outcome::Crashed(_), Some(fp)) => fp.key(),
            _ => {
                progress(Progress::Finished);
                return self.brute(sc, order, config, clean);
            }
        };
        self.crashes.insert((before, target), after);
        let fin = match self.finals.get(&after) {
            Some(f) if leaf || f.hits.is_some() => f,
            _ => {
                let copy = if leaf { None } else { subject.snapshot(&world) };
                let Some(fin) = self.final_life(
                    copy.unwrap_or_else(|| {
                        // A leaf's world is not needed after its final life.
                        std::mem::replace(&mut world, subject.world())
                    }),
                    !leaf,
                ) else {
                    progress(Progress::Finished);
                    return self.brute(sc, order, config, clean);
                };
                let fin = Arc::new(fin);
                self.finals.insert(after, Arc::clone(&fin));
                fin
            }
        };
        progress(Progress::Finished);
        let result = self.result(sc.clone(), order, &fin, clean);
        let children = match (&fin.hits, leaf) {
            (Some(hits), false) => expand(&sc, &result.order, hits),
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        if wanted {
            out.push(result);
        }
        if !children.is_empty() {
            progress(Progress::Planned(children.len() as u64));
            let parent = Mutex::new(world);
            let nested: Vec<Vec<ScenarioResult>> = children
                .into_par_iter()
                .map(|(c, o)| self.node(c, o, Some(&parent), after, config, clean, progress))
                .collect();
            out.extend(nested.into_iter().flatten());
        }
        out
    }

    /// The final life on `world`, and the judge after it.
    fn final_life(&self, mut world: S::World, keep_hits: bool) -> Option<Final> {
        let subject = self.replayer.subject;
        self.replayer.count_life();
        let life = crashpoint::record(|| subject.life(&mut world));
        let ok = matches!(life.outcome, Outcome::Finished(Ok(())));
        let end = match &life.outcome {
            Outcome::Finished(Ok(())) => "finished".to_owned(),
            Outcome::Finished(Err(e)) => format!("stopped with an error: {e}"),
            Outcome::Crashed(h) => format!("crashed at {h} with no crash injected"),
            Outcome::Panicked(m) => format!("panicked: {m}"),
        };
        let judged = crashpoint::record(|| subject.judge(&world));
        let (verdict, judge_failure) = match judged.outcome {
            Outcome::Finished(v) => (v, None),
            Outcome::Panicked(m) => (Verdict::new(), Some(format!("the judge panicked: {m}"))),
            Outcome::Crashed(h) => (Verdict::new(), Some(format!("the judge crashed at {h}"))),
        };
        Some(Final {
            ok,
            end,
            hits: keep_hits.then_some(life.hits),
            verdict,
            judge_failure,
        })
    }

    /// A scenario's result from its final life's outcome, as
    /// [`Replayer::replay`] derives it.
    fn result(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        fin: &Final,
        clean: &Verdict,
    ) -> ScenarioResult {
        let mut failure = None;
        if !fin.ok {
            failure = Some(format!("final life {}: {}", sc.depth() + 1, fin.end));
        }
        if let Some(j) = &fin.judge_failure {
            failure.get_or_insert_with(|| j.clone());
        }
        if failure.is_none() {
            failure = broken_invariants(&fin.verdict, Some(clean), &self.replayer.counters);
        }
        ScenarioResult {
            scenario: sc,
            order,
            verdict: fin.verdict.clone(),
            failure,
            lives: Vec::new(),
            world: None,
        }
    }
}
