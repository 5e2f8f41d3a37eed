//! The runner: the clean run, then every scenario of the sweep replayed from
//! a fresh world on rayon, gathered into a [`Report`] in a fixed order.

use crashpoint::{Hit, Outcome};
use rayon::prelude::*;

use crate::error::Error;
use crate::judge::{broken_invariants, Counter, Verdict};
use crate::report::{LifeTrace, Report, ScenarioResult};
use crate::scenario::Scenario;
use crate::subject::Subject;

/// How to sweep.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many lives in a row crash: 0 runs the clean run only, 1 adds one
    /// scenario per hit, 2 (the default) also crashes each restart once at
    /// every hit it reaches, and so on.
    pub depth: u32,
    /// Worker threads; `None` lets rayon choose (one per core).
    pub threads: Option<usize>,
    /// Run only shard `k` of `n` (1-based): scenarios are assigned by a stable
    /// hash of their name, so a scenario keeps its shard when others are
    /// added. Scenarios of other shards that are needed to find deeper ones
    /// still run, but are not reported.
    pub partition: Option<(u32, u32)>,
    /// Keep each life's hits and the world's description in every result
    /// (memory-hungry; for reruns of single scenarios).
    pub trace: bool,
    /// Share lives between scenarios when the subject opts in
    /// ([`Subject::snapshot`] and [`Subject::fingerprint`]): the report is the
    /// same byte for byte, with far fewer lives run. `false` replays every
    /// scenario from a fresh world (brute force). Ignored with `trace`.
    pub share: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            depth: 2,
            threads: None,
            partition: None,
            trace: false,
            share: true,
        }
    }
}

/// Progress of a running sweep, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    /// This many more scenarios are planned.
    Planned(u64),
    /// One more scenario has finished.
    Finished,
}

/// Sweep `subject` as `config` says.
pub fn run<S: Subject>(subject: &S, config: &Config) -> Result<Report, Error> {
    run_with(subject, config, &|_| {})
}

pub(crate) struct Ran {
    pub(crate) result: ScenarioResult,
    pub(crate) last_hits: Vec<Hit>,
}

/// [`run`], telling `progress` about each scenario.
pub fn run_with<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report, Error> {
    run_inner(subject, config, progress).map(|(r, _)| r)
}

pub(crate) fn run_inner<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Report, crate::share::Stats), Error> {
    if let Some((k, n)) = config.partition {
        if k == 0 || k > n {
            return Err(Error::BadPartition { k, n });
        }
    }
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = config.threads {
        builder = builder.num_threads(t);
    }
    let pool = builder.build().map_err(|e| Error::ThreadPool {
        threads: config.threads.unwrap_or(0),
        reason: e.to_string(),
    })?;

    let replayer = Replayer::new(subject, config.trace);
    let clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    if let Some(reason) = &clean.result.failure {
        return Err(Error::CleanRunFailed {
            subject: subject.name(),
            reason: reason.clone(),
        });
    }
    let clean_verdict = clean.result.verdict.clone();
    let shared = if config.share && !config.trace && config.depth > 0 {
        crate::share::Shared::new(&replayer, &clean)?
    } else {
        None
    };

    // Each scenario's children (the hits its final life reaches) start as
    // soon as it finishes — no barrier between depths — and results are
    // sorted into the sweep's fixed order at the end.
    let top = expand(&Scenario::default(), &[], &clean.last_hits);
    progress(Progress::Planned(top.len() as u64));
    let mut scenarios: Vec<ScenarioResult> = if config.depth == 0 {
        Vec::new()
    } else if let Some(shared) = &shared {
        pool.install(|| shared.sweep(top, config, &clean_verdict, progress))
    } else {
        pool.install(|| {
            top.into_par_iter()
                .flat_map_iter(|(sc, order)| {
                    subtree(&replayer, sc, order, config, &clean_verdict, progress)
                })
                .collect()
        })
    };
    scenarios.sort_by(|a, b| (a.scenario.depth(), &a.order).cmp(&(b.scenario.depth(), &b.order)));
    let stats = crate::share::Stats {
        scenarios: scenarios.len() as u64 + 1,
        lives: replayer.lives.load(std::sync::atomic::Ordering::Relaxed),
        shared: shared.is_some(),
    };
    drop(shared);
    Ok((
        Report {
            subject: subject.name(),
            counters: replayer.counters,
            depth: config.depth,
            partition: config.partition,
            clean: clean.result,
            scenarios,
        },
        stats,
    ))
}

/// Run one scenario and, while depth remains, every scenario that adds one
/// crash at a hit its final life reached; return those of the partition.
fn subtree<S: Subject>(
    replayer: &Replayer<'_, S>,
    sc: Scenario,
    order: Vec<u32>,
    config: &Config,
    clean: &Verdict,
    progress: &(dyn Fn(Progress) + Sync),
) -> Vec<ScenarioResult> {
    let ran = replayer.replay(&sc, order, Some(clean));
    progress(Progress::Finished);
    let children = if sc.depth() < config.depth as usize {
        expand(&sc, &ran.result.order, &ran.last_hits)
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    if in_partition(&sc, config.partition) {
        out.push(ran.result);
    }
    if !children.is_empty() {
        progress(Progress::Planned(children.len() as u64));
        let nested: Vec<Vec<ScenarioResult>> = children
            .into_par_iter()
            .map(|(c, o)| subtree(replayer, c, o, config, clean, progress))
            .collect();
        out.extend(nested.into_iter().flatten());
    }
    out
}

pub(crate) fn expand(parent: &Scenario, order: &[u32], hits: &[Hit]) -> Vec<(Scenario, Vec<u32>)> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let mut sc = parent.0.clone();
            sc.push(h.clone());
            let mut o = order.to_vec();
            o.push(i as u32);
            (Scenario(sc), o)
        })
        .collect()
}

/// FNV-1a over the scenario's name: stable across runs, machines and versions.
pub(crate) fn shard_of(sc: &Scenario, n: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(n)) as u32 + 1
}

pub(crate) fn in_partition(sc: &Scenario, partition: Option<(u32, u32)>) -> bool {
    partition.map_or(true, |(k, n)| shard_of(sc, n) == k)
}

/// Run one scenario by itself, with its timeline (each life's hits and how it
/// ended) and the world's description. The clean run is replayed first, for
/// counters measured over it.
pub fn run_one<S: Subject>(subject: &S, scenario: &Scenario) -> ScenarioResult {
    let replayer = Replayer::new(subject, true);
    let clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    replayer
        .replay(scenario, Vec::new(), Some(&clean.result.verdict))
        .result
}

/// Replays scenarios of one subject, with what stays the same for all of
/// them computed once (the counters are asked for once per sweep, not once
/// per scenario).
pub(crate) struct Replayer<'a, S> {
    pub(crate) subject: &'a S,
    pub(crate) counters: Vec<Counter>,
    trace: bool,
    /// Lives run so far (for [`crate::Stats`]).
    pub(crate) lives: std::sync::atomic::AtomicU64,
}

impl<'a, S: Subject> Replayer<'a, S> {
    fn new(subject: &'a S, trace: bool) -> Self {
        Replayer {
            subject,
            counters: subject.counters(),
            trace,
            lives: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn count_life(&self) {
        self.lives
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn replay(
        &self,
        scenario: &Scenario,
        order: Vec<u32>,
        clean: Option<&Verdict>,
    ) -> Ran {
        let mut world = self.subject.world();
        let mut failure = None;
        let mut lives = Vec::new();
        for (n, target) in scenario.0.iter().enumerate() {
            self.count_life();
            let life = crashpoint::crash_at(target.clone(), || self.subject.life(&mut world));
            let end = match &life.outcome {
                Outcome::Crashed(_) => format!("crashed at {target}"),
                Outcome::Finished(Ok(())) => {
                    format!("finished before reaching {target}: the crash did not fire")
                }
                Outcome::Finished(Err(e)) => {
                    format!("stopped with an error before reaching {target}: {e}")
                }
                Outcome::Panicked(m) => format!("panicked: {m}"),
            };
            if life.outcome.crashed().is_none() {
                failure = Some(format!("life {}: {end}", n + 1));
            }
            if self.trace {
                lives.push(LifeTrace::new(Some(target), &life.hits, end));
            }
            if failure.is_some() {
                break;
            }
        }
        let mut last_hits = Vec::new();
        if failure.is_none() {
            self.count_life();
            let life = crashpoint::record(|| self.subject.life(&mut world));
            let end = match &life.outcome {
                Outcome::Finished(Ok(())) => "finished".to_owned(),
                Outcome::Finished(Err(e)) => format!("stopped with an error: {e}"),
                Outcome::Crashed(h) => format!("crashed at {h} with no crash injected"),
                Outcome::Panicked(m) => format!("panicked: {m}"),
            };
            if !matches!(life.outcome, Outcome::Finished(Ok(()))) {
                failure = Some(format!("final life {}: {end}", scenario.depth() + 1));
            }
            if self.trace {
                lives.push(LifeTrace::new(None, &life.hits, end));
            }
            last_hits = life.hits;
        }
        let judged = crashpoint::record(|| self.subject.judge(&world));
        let verdict = match judged.outcome {
            Outcome::Finished(v) => v,
            Outcome::Panicked(m) => {
                failure.get_or_insert_with(|| format!("the judge panicked: {m}"));
                Verdict::new()
            }
            Outcome::Crashed(h) => {
                failure.get_or_insert_with(|| format!("the judge crashed at {h}"));
                Verdict::new()
            }
        };
        if failure.is_none() {
            failure = broken_invariants(&verdict, clean, &self.counters);
        }
        let world_text = self.trace.then(|| self.subject.describe(&world));
        Ran {
            result: ScenarioResult {
                scenario: scenario.clone(),
                order,
                verdict,
                failure,
                lives,
                world: world_text,
            },
            last_hits,
        }
    }
}
