//! The runner: the clean run (twice, compared), the safety nets, then every
//! scenario of the sweep in each crash state, replayed from a fresh world on
//! rayon (or with lives shared between scenarios, see `share.rs`), gathered
//! into a [`Report`] in a fixed order — or, with [`Config::tally`], into
//! tallies and the failing scenarios alone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crashpoint::{Handle, Hit, Outcome};
use rayon::prelude::*;

use crate::crash_state::CrashState;
use crate::error::{Divergence, Error};
use crate::failure::{Failure, Life};
use crate::judge::{broken_invariants, verdict_failure, Counter, Verdict};
use crate::report::{sort_scenarios, LifeTrace, Report, ScenarioResult, StateRow, Tally};
use crate::scenario::Scenario;
use crate::share::{Shared, Stats};
use crate::subject::{LifeContext, Subject};

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
    /// The crash states to sweep, each a full sweep of its own whose
    /// scenarios' names start with the state; empty: the subject's
    /// [`default_crash_states`](Subject::default_crash_states). A state the
    /// subject does not list in [`crash_states`](Subject::crash_states) is
    /// refused ([`Error::UnknownCrashState`]).
    pub crash_states: Vec<CrashState>,
    /// A scenario still running after this long is stopped at its next point
    /// and fails as [`Failure::Hung`]; the sweep goes on. `None`: no limit.
    ///
    /// Rust cannot stop a thread from outside: a life that never passes
    /// another point (blocked on a channel, a loop with no point in it) is
    /// not stopped; the sweep waits for it, and prints once to stderr which
    /// scenario it waits for and the last hit that life passed.
    pub scenario_timeout: Option<Duration>,
    /// Refuse, before running any scenario, a sweep whose estimated scenario
    /// count (from the clean run's hits, the depth and the states) is above
    /// this ([`Error::TooManyScenarios`]).
    pub max_scenarios: u64,
    /// Run every failing scenario once more; one whose result changes is
    /// flaky ([`Failure::Flaky`]), neither a pass nor a fail.
    pub rerun_failures: bool,
    /// Run the clean run this many times (at least 1) and compare their hits
    /// and verdicts ([`Error::Nondeterministic`]).
    pub clean_runs: u32,
    /// Share lives between scenarios when the subject opts in
    /// ([`Subject::snapshot`] and [`Subject::fingerprint`]): the report is the
    /// same byte for byte, with far fewer lives run. `false` replays every
    /// scenario from a fresh world (brute force). Ignored with `trace`.
    pub share: bool,
    /// Keep only the failing and flaky scenarios and tally the rest as their
    /// results arrive ([`Report::tallies`]): memory stays bounded by the
    /// failures, not by the scenario count, and the report's rows, tables,
    /// failures and JSON rows are the same. Ignored with `trace`.
    pub tally: bool,
    /// Counters to require zero on top of the subject's own, as
    /// [`Report::require`] does after the fact, but applied to each result
    /// as it arrives (so that a tallied sweep can require them). Names the
    /// subject does not declare are left to [`Report::require`] to refuse.
    pub required: Vec<String>,
}

/// [`Config::scenario_timeout`]'s default.
pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);
/// [`Config::max_scenarios`]'s default.
pub const DEFAULT_MAX_SCENARIOS: u64 = 1_000_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            depth: 2,
            threads: None,
            partition: None,
            trace: false,
            crash_states: Vec::new(),
            scenario_timeout: Some(DEFAULT_SCENARIO_TIMEOUT),
            max_scenarios: DEFAULT_MAX_SCENARIOS,
            rerun_failures: true,
            clean_runs: 2,
            share: true,
            tally: false,
            required: Vec::new(),
        }
    }
}

/// Progress of a running sweep, for a progress bar.
///
/// `depth` is the scenario's level (1 = one crash). A scenario's children
/// are planned as soon as it finishes, so once every scenario of level `d`
/// has finished, the count planned at level `d + 1` is final: a bar over one
/// level at a time has a total that does not grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// This many more scenarios of level `depth` are planned.
    Planned {
        /// The level of the planned scenarios.
        depth: usize,
        /// How many more.
        count: u64,
    },
    /// One more scenario of level `depth` has finished.
    Finished {
        /// The level of the finished scenario.
        depth: usize,
    },
}

/// Sweep `subject` as `config` says.
pub fn run<S: Subject>(subject: &S, config: &Config) -> Result<Report, Error> {
    run_with(subject, config, &|_| {})
}

pub(crate) struct Ran {
    pub(crate) result: ScenarioResult,
    pub(crate) last_hits: Vec<Hit>,
    /// In an enumerating state: how many disks the cut after each crash
    /// could have left, for each boot after a crash that got that far.
    pub(crate) cut_disks: Vec<u32>,
}

/// Whether this program was built to abort on panic, in which case no
/// injected crash can be caught. `cfg!(panic)` is the profile's setting, the
/// same for every crate of one build (Cargo passes `-C panic` to all of them).
pub fn unwinding_missing() -> bool {
    cfg!(panic = "abort")
}

/// The states `config` sweeps for `subject`, checked against those it lists.
fn states_of<S: Subject>(subject: &S, config: &Config) -> Result<Vec<CrashState>, Error> {
    let known = subject.crash_states();
    let asked = if config.crash_states.is_empty() {
        subject.default_crash_states()
    } else {
        config.crash_states.clone()
    };
    let mut states: Vec<CrashState> = Vec::new();
    for s in asked {
        if !known.contains(&s) {
            return Err(Error::UnknownCrashState {
                subject: subject.name(),
                state: s.to_string(),
                known: known.iter().map(ToString::to_string).collect(),
            });
        }
        if !states.contains(&s) {
            states.push(s);
        }
    }
    if states.is_empty() {
        states.push(CrashState::PROCESS);
    }
    Ok(states)
}

/// About how many scenarios a sweep of `depth` runs from a clean run of
/// `hits` hits, in `states` crash states: at most `hits^k` at depth `k` when
/// no restart passes more hits than the clean run (a restart usually passes
/// fewer, so this errs on the side of refusing).
pub fn estimate_scenarios(hits: usize, depth: u32, states: usize) -> f64 {
    let n = hits as f64;
    let mut total = 0.0;
    let mut term = 1.0;
    for _ in 0..depth {
        term *= n;
        total += term;
    }
    total * states as f64
}

/// [`run`], telling `progress` about each scenario.
pub fn run_with<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report, Error> {
    run_inner(subject, config, progress).map(|(r, _)| r)
}

/// [`run_with`], also saying how much work the sweep did.
pub(crate) fn run_inner<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Report, Stats), Error> {
    if unwinding_missing() {
        return Err(Error::PanicAbort);
    }
    if let Some((k, n)) = config.partition {
        if k == 0 || k > n {
            return Err(Error::BadPartition { k, n });
        }
    }
    if config.depth > crate::MAX_DEPTH {
        return Err(Error::TooDeep {
            depth: config.depth,
            max: crate::MAX_DEPTH,
        });
    }
    let states = states_of(subject, config)?;
    // Points passed outside any scope on this sweep's threads (its workers,
    // this thread) count for this sweep alone.
    let unscoped = crashpoint::watch_unscoped();
    let owner = unscoped.owner().clone();
    let mut builder = rayon::ThreadPoolBuilder::new().start_handler(move |_| owner.adopt_thread());
    if let Some(t) = config.threads {
        builder = builder.num_threads(t);
    }
    let pool = builder.build().map_err(|e| Error::ThreadPool {
        threads: config.threads.unwrap_or(0),
        reason: e.to_string(),
    })?;

    let watchdog = Watchdog::new(config.scenario_timeout);
    unscoped.owner().enter(|| {
        std::thread::scope(|scope| {
            if config.scenario_timeout.is_some() {
                scope.spawn(|| watchdog.watch());
            }
            // Stopped on the way out, a panic's too (a progress callback's, a
            // judge's outside a scenario): the scope would wait for ever for a
            // watchdog nobody stopped.
            let _stop = StopOnDrop(&watchdog);
            sweep_states(
                subject, config, progress, &pool, &states, &watchdog, &unscoped,
            )
        })
    })
}

/// Stops a [`Watchdog`] when dropped, unwinding included.
struct StopOnDrop<'w>(&'w Watchdog);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[allow(clippy::too_many_arguments)]
fn sweep_states<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
    pool: &rayon::ThreadPool,
    states: &[CrashState],
    watchdog: &Watchdog,
    unscoped: &crashpoint::UnscopedWatch,
) -> Result<(Report, Stats), Error> {
    let replayer = Replayer::new(subject, config.trace, watchdog);
    let mut clean = checked_clean_run(&replayer, config, unscoped)?;
    let clean_verdict = clean.result.verdict.clone();

    let estimate = estimate_scenarios(clean.last_hits.len(), config.depth, states.len());
    if estimate > config.max_scenarios as f64 {
        return Err(Error::TooManyScenarios {
            subject: subject.name(),
            depth: config.depth,
            hits: clean.last_hits.len(),
            estimate,
            limit: config.max_scenarios,
        });
    }

    // Enumerated crash states choose a disk per crash by the scenario's
    // name; their lives are not shared (run brute force).
    let enumerates = states.iter().any(|s| subject.enumerates(s));
    let shared = if config.share && !config.trace && config.depth > 0 && !enumerates {
        Shared::new(&replayer, &clean)?
    } else {
        None
    };

    // Counters the config requires, as `Report::require` marks them.
    let mut counters = replayer.counters.clone();
    let mut extra_required = false;
    for name in &config.required {
        if let Some(c) = counters.iter_mut().find(|c| c.name == *name) {
            extra_required |= !c.required_zero;
            c.required_zero = true;
        }
    }
    // The clean run passed its own checks (no failure); a counter the
    // config adds may fail it.
    if extra_required {
        clean.result.failure = broken_invariants(&clean_verdict, Some(&clean_verdict), &counters);
    }

    // Each scenario's children (the hits its final life reaches) start as
    // soon as it finishes — no barrier between depths — and results are
    // sorted into the sweep's fixed order at the end.
    let mut scenarios: Vec<ScenarioResult> = Vec::new();
    let mut tallies = Vec::new();
    let mut count = 0;
    if config.depth > 0 {
        for state in states {
            let top = expand(
                &Scenario::in_state(state.clone(), Vec::new()),
                &[],
                &clean.last_hits,
                subject.enumerates(state),
            );
            progress(Progress::Planned {
                depth: 1,
                count: top.len() as u64,
            });
            let sink = Sink {
                clean: &clean_verdict,
                counters: &counters,
                required: extra_required,
                keep_all: config.trace || !config.tally,
                inner: Mutex::new(Gathered {
                    tally: Tally::new(state.clone(), config.depth, counters.len()),
                    kept: Vec::new(),
                    count: 0,
                }),
            };
            let run = Run {
                config,
                clean: &clean_verdict,
                progress,
                sink: &sink,
            };
            pool.install(|| match &shared {
                Some(shared) => shared.sweep(top, &run),
                None => top
                    .into_par_iter()
                    .for_each(|(sc, order)| subtree(&replayer, sc, order, &run)),
            });
            let gathered = sink.inner.into_inner().unwrap_or_else(|e| e.into_inner());
            count += gathered.count;
            scenarios.extend(gathered.kept);
            if !config.trace && config.tally {
                tallies.push(gathered.tally);
            }
        }
    }
    sort_scenarios(&mut scenarios, states);
    let stats = Stats {
        scenarios: count + 1,
        lives: replayer.lives.load(Ordering::Relaxed),
        shared: shared.is_some(),
    };
    let report = Report {
        subject: subject.name(),
        counters,
        depth: config.depth,
        partition: config.partition,
        states: states
            .iter()
            .map(|s| StateRow {
                state: s.clone(),
                title: subject.row_title(s),
            })
            .collect(),
        unscoped: unscoped.hits(),
        stray: unscoped.stray(),
        clean: clean.result,
        scenarios,
        tallies,
    };
    Ok((report, stats))
}

/// What every scenario of one crash state's sweep shares: the config, the
/// clean run's verdict, the progress callback and where results go.
pub(crate) struct Run<'r> {
    pub(crate) config: &'r Config,
    pub(crate) clean: &'r Verdict,
    pub(crate) progress: &'r (dyn Fn(Progress) + Sync),
    pub(crate) sink: &'r Sink<'r>,
}

/// Where a sweep's results go as they arrive: each is tallied, and kept
/// only if it failed (or every one, when the sweep keeps all).
pub(crate) struct Sink<'r> {
    clean: &'r Verdict,
    counters: &'r [Counter],
    required: bool,
    keep_all: bool,
    inner: Mutex<Gathered>,
}

struct Gathered {
    tally: Tally,
    kept: Vec<ScenarioResult>,
    count: u64,
}

impl Sink<'_> {
    /// One scenario's result (of the shard), in any order.
    pub(crate) fn push(&self, mut result: ScenarioResult) {
        if self.required && result.failure.is_none() {
            result.failure = broken_invariants(&result.verdict, Some(self.clean), self.counters);
        }
        let values = (!self.keep_all).then(|| Tally::values(&result, self.clean, self.counters));
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.count += 1;
        if let Some(values) = values {
            g.tally.add(&result, &values);
        }
        if self.keep_all || result.failure.is_some() {
            g.kept.push(result);
        }
    }
}

/// The clean run, with every safety net that needs no crash: it must
/// finish, pass a point, count only declared counters, set every required
/// one, fault nothing, and do the same again when run twice.
fn checked_clean_run<S: Subject>(
    replayer: &Replayer<'_, S>,
    config: &Config,
    unscoped: &crashpoint::UnscopedWatch,
) -> Result<Ran, Error> {
    let subject = replayer.subject;
    let mut clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    let verdict = &clean.result.verdict;
    let counters = &replayer.counters;
    if let Some((name, _)) = verdict
        .counts
        .iter()
        .find(|(n, _)| !counters.iter().any(|c| &c.name == n))
    {
        return Err(Error::UndeclaredCounter {
            subject: subject.name(),
            name: name.clone(),
            declared: counters.iter().map(|c| c.name.clone()).collect(),
        });
    }
    // A judge's broken counters are told apart below.
    if let Some(reason) = clean
        .result
        .failure
        .as_ref()
        .filter(|f| !matches!(f, Failure::Broken { .. } | Failure::RequiredNotSet { .. }))
    {
        return Err(Error::CleanRunFailed {
            subject: subject.name(),
            reason: Box::new(reason.clone()),
        });
    }
    if let Some(c) = counters
        .iter()
        .find(|c| c.required_zero && !verdict.counts.iter().any(|(n, _)| *n == c.name))
    {
        return Err(Error::RequiredNeverSet {
            subject: subject.name(),
            name: c.name.clone(),
        });
    }
    // Measured over itself, an over-clean counter is zero: what remains is
    // a fault counted when nothing crashed.
    if let Some(Failure::Broken {
        counters: broken, ..
    }) = broken_invariants(verdict, Some(verdict), counters)
    {
        let parts: Vec<String> = broken.iter().map(|(t, v)| format!("{t} = {v}")).collect();
        return Err(Error::CleanJudgeFaults {
            subject: subject.name(),
            counters: parts.join(", "),
        });
    }
    if clean.last_hits.is_empty() {
        return Err(Error::NoPoints {
            subject: subject.name(),
            unscoped: unscoped
                .hits()
                .into_iter()
                .chain(unscoped.stray())
                .map(|(n, _)| n)
                .collect(),
        });
    }
    for _ in 1..config.clean_runs.max(1) {
        let again = replayer.replay(&Scenario::default(), Vec::new(), None);
        compare_clean_runs(&subject.name(), &clean, &again)?;
    }
    // What is left is no failure or a broken counter measured over the
    // clean run: judged without a clean run to measure over, its own value
    // counted; judged over itself (above), it is zero. The clean run passes.
    clean.result.failure = None;
    Ok(clean)
}

fn compare_clean_runs(subject: &str, first: &Ran, second: &Ran) -> Result<(), Error> {
    let (a, b) = (&first.last_hits, &second.last_hits);
    if a != b {
        let index = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let around = |hits: &[Hit]| -> Vec<String> {
            let lo = index.saturating_sub(2);
            let hi = (index + 3).min(hits.len());
            hits.get(lo..hi)
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        return Err(Error::Nondeterministic {
            subject: subject.to_owned(),
            at: Box::new(Divergence {
                index,
                first: a.get(index).map(ToString::to_string),
                second: b.get(index).map(ToString::to_string),
                first_around: around(a),
                second_around: around(b),
            }),
        });
    }
    let (va, vb) = (&first.result.verdict, &second.result.verdict);
    if va != vb || first.result.failure != second.result.failure {
        let show = |ran: &Ran| {
            let c: Vec<String> = (ran.result.verdict.counts.iter())
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            match &ran.result.failure {
                Some(f) => format!("{}, then {f}", c.join(" ")),
                None => c.join(" "),
            }
        };
        return Err(Error::NondeterministicVerdict {
            subject: subject.to_owned(),
            first: show(first),
            second: show(second),
        });
    }
    Ok(())
}

/// Run one scenario and, while depth remains, every scenario that adds one
/// crash at a hit its final life reached; hand those of the partition to
/// the run's sink.
pub(crate) fn subtree<S: Subject>(
    replayer: &Replayer<'_, S>,
    sc: Scenario,
    order: Vec<u32>,
    run: &Run<'_>,
) {
    let mut ran = replayer.replay(&sc, order, Some(run.clean));
    replayer.settle(&sc, &mut ran.result, run.clean, run.config);
    (run.progress)(Progress::Finished { depth: sc.depth() });
    let enumerates = replayer.subject.enumerates(&sc.state);
    // Disk 0 of a crash ran first; it tells how many disks the cut could
    // leave, and each other one is a scenario of its own. (Only scenarios
    // of an enumerating state name disks and count cuts.)
    let siblings: Vec<(Scenario, Vec<u32>)> = match (
        sc.disks.last(),
        ran.cut_disks.get(sc.depth().wrapping_sub(1)),
    ) {
        (Some(0), Some(&n)) => (1..n)
            .map(|k| {
                let mut s = sc.clone();
                if let Some(last) = s.disks.last_mut() {
                    *last = k;
                }
                (s, ran.result.order.clone())
            })
            .collect(),
        _ => Vec::new(),
    };
    let children = if sc.depth() < run.config.depth as usize {
        expand(&sc, &ran.result.order, &ran.last_hits, enumerates)
    } else {
        Vec::new()
    };
    if in_partition(&sc, run.config.partition) {
        run.sink.push(ran.result);
    }
    if !siblings.is_empty() {
        (run.progress)(Progress::Planned {
            depth: sc.depth(),
            count: siblings.len() as u64,
        });
    }
    if !children.is_empty() {
        (run.progress)(Progress::Planned {
            depth: sc.depth() + 1,
            count: children.len() as u64,
        });
    }
    let next: Vec<(Scenario, Vec<u32>)> = siblings.into_iter().chain(children).collect();
    if !next.is_empty() {
        next.into_par_iter()
            .for_each(|(c, o)| subtree(replayer, c, o, run));
    }
}

/// `parent` with one more crash at each of `hits`; in an enumerating
/// state, its cut keeping disk 0 (the others follow once it has run).
pub(crate) fn expand(
    parent: &Scenario,
    order: &[u32],
    hits: &[Hit],
    enumerates: bool,
) -> Vec<(Scenario, Vec<u32>)> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let mut sc = parent.hits.clone();
            sc.push(h.clone());
            let mut o = order.to_vec();
            o.push(i as u32);
            let mut disks = parent.disks.clone();
            if enumerates {
                disks.push(0);
            }
            (Scenario::with_disks(parent.state.clone(), sc, disks), o)
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
/// counters measured over it. A scenario in a state the subject does not
/// list fails as [`Failure::UnknownState`].
pub fn run_one<S: Subject>(subject: &S, scenario: &Scenario) -> ScenarioResult {
    let watchdog = Watchdog::new(None);
    let replayer = Replayer::new(subject, true, &watchdog);
    let known = subject.crash_states();
    if !known.contains(&scenario.state) {
        return ScenarioResult {
            scenario: scenario.clone(),
            order: Vec::new(),
            verdict: Verdict::new(),
            failure: Some(Failure::UnknownState {
                state: scenario.state.to_string(),
                known: known.iter().map(ToString::to_string).collect(),
            }),
            lives: Vec::new(),
            world: None,
        };
    }
    let clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    replayer
        .replay(scenario, Vec::new(), Some(&clean.result.verdict))
        .result
}

/// The lives running now, each with its scenario's deadline; one thread
/// stops those past it at their next point.
struct Watchdog {
    limit: Option<Duration>,
    running: Mutex<Vec<Watched>>,
    next: AtomicU64,
    done: Mutex<bool>,
    wake: Condvar,
    warned: AtomicBool,
}

struct Watched {
    id: u64,
    deadline: Instant,
    handle: Handle,
    scenario: String,
    cancelled_at: Option<Instant>,
}

impl Watchdog {
    fn new(limit: Option<Duration>) -> Self {
        Watchdog {
            limit,
            running: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            done: Mutex::new(false),
            wake: Condvar::new(),
            warned: AtomicBool::new(false),
        }
    }

    fn running(&self) -> MutexGuard<'_, Vec<Watched>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch `handle` until [`Watchdog::forget`] with the id returned.
    fn register(&self, handle: &Handle, deadline: Instant, scenario: &Scenario) -> Option<u64> {
        self.limit?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.running().push(Watched {
            id,
            deadline,
            handle: handle.clone(),
            scenario: scenario.to_string(),
            cancelled_at: None,
        });
        Some(id)
    }

    fn forget(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.running().retain(|w| w.id != id);
        }
    }

    fn stop(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    fn watch(&self) {
        let Some(limit) = self.limit else { return };
        let tick = (limit / 10).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self
                .wake
                .wait_timeout(done, tick)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
            let now = Instant::now();
            for w in self.running().iter_mut() {
                if now < w.deadline {
                    continue;
                }
                match w.cancelled_at {
                    None => {
                        w.handle.cancel();
                        w.cancelled_at = Some(now);
                    }
                    // Told once per sweep (only this thread sets the flag).
                    Some(at)
                        if now.duration_since(at) > limit
                            && !self.warned.load(Ordering::Relaxed) =>
                    {
                        self.warned.store(true, Ordering::Relaxed);
                        eprintln!(
                            "sweep: scenario {} is past its time limit and passes no point, so it cannot be stopped; the sweep waits for it (last hit passed: {})",
                            w.scenario,
                            w.handle.last_hit().map_or_else(|| "none".to_owned(), |h| h.to_string())
                        );
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// Replays scenarios of one subject, with what stays the same for all of
/// them computed once (the counters are asked for once per sweep, not once
/// per scenario).
pub(crate) struct Replayer<'a, S> {
    pub(crate) subject: &'a S,
    pub(crate) counters: Vec<Counter>,
    trace: bool,
    watchdog: &'a Watchdog,
    /// Lives run so far (for [`Stats`]).
    lives: AtomicU64,
}

/// How a final life went: its failure (if any), how it ended in words, its
/// hits, and whether it was stopped for running too long.
pub(crate) struct FinalRun {
    pub(crate) failure: Option<Failure>,
    end: String,
    pub(crate) hits: Vec<Hit>,
    pub(crate) hung: bool,
}

impl<'a, S: Subject> Replayer<'a, S> {
    fn new(subject: &'a S, trace: bool, watchdog: &'a Watchdog) -> Self {
        Replayer {
            subject,
            counters: subject.counters(),
            trace,
            watchdog,
            lives: AtomicU64::new(0),
        }
    }

    /// The deadline of a scenario (or a shared life) starting now.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.watchdog.limit.unwrap_or(Duration::ZERO)
    }

    /// Run every failing scenario once more, if the config says so: a result
    /// that changes makes the scenario flaky.
    pub(crate) fn settle(
        &self,
        sc: &Scenario,
        result: &mut ScenarioResult,
        clean: &Verdict,
        config: &Config,
    ) {
        if !config.rerun_failures {
            return;
        }
        if let Some(first) = &result.failure {
            let again = self.replay(sc, Vec::new(), Some(clean));
            // A hung life is stopped wherever it is when the time limit
            // comes: hung again in the same life is the same result,
            // whatever hit it stopped at (and whatever the world then holds).
            let hung_again = matches!(
                (first, &again.result.failure),
                (Failure::Hung { life: a, .. }, Some(Failure::Hung { life: b, .. })) if a == b
            );
            if hung_again {
                return;
            }
            if again.result.failure != result.failure || again.result.verdict != result.verdict {
                result.failure = Some(Failure::Flaky {
                    first: Box::new(first.clone()),
                    again: again.result.failure.map(Box::new),
                });
            }
        }
    }

    /// One life in `handle`'s scope, booted and (unless it crashed) shut
    /// down; `Err` if the boot failed.
    pub(crate) fn life(
        &self,
        world: &mut S::World,
        ctx: &LifeContext,
        handle: &Handle,
        deadline: Instant,
        scenario: &Scenario,
        cut_disks: &mut Vec<u32>,
    ) -> Result<crashpoint::Life<Result<(), crate::LifeError>>, String> {
        self.subject
            .boot(world, ctx)
            .map_err(|e| format!("the boot failed: {e}"))?;
        if ctx.after_crash() && self.subject.enumerates(ctx.state()) {
            if let Some(n) = self.subject.crash_disks(world) {
                cut_disks.push(n.max(1));
            }
        }
        self.lives.fetch_add(1, Ordering::Relaxed);
        let id = self.watchdog.register(handle, deadline, scenario);
        let life = handle.run(|| self.subject.life(world));
        self.watchdog.forget(id);
        if matches!(life.outcome, Outcome::Finished(_)) {
            self.subject.shutdown(world, ctx);
        }
        Ok(life)
    }

    fn hung(&self, handle: &Handle, life: Life) -> Option<Failure> {
        let last_hit = handle.cancelled()?;
        Some(Failure::Hung {
            life,
            last_hit,
            limit_ms: self.watchdog.limit.map_or(0, Failure::millis),
        })
    }

    pub(crate) fn replay(
        &self,
        scenario: &Scenario,
        order: Vec<u32>,
        clean: Option<&Verdict>,
    ) -> Ran {
        let deadline = self.deadline();
        let mut world = self.subject.world();
        let mut failure = None;
        let mut lives = Vec::new();
        let mut after_crash = false;
        let mut cut_disks = Vec::new();
        for (n, target) in scenario.hits.iter().enumerate() {
            let ctx = LifeContext::new(scenario.state.clone(), n + 1, after_crash)
                .with_disk(scenario.disk_after(n));
            let handle = Handle::new(Some(target.clone()));
            let which = Life::Crashing(n + 1);
            let life = match self.life(
                &mut world,
                &ctx,
                &handle,
                deadline,
                scenario,
                &mut cut_disks,
            ) {
                Ok(life) => life,
                Err(error) => {
                    failure = Some(Failure::Stopped {
                        life: which,
                        before: Some(target.clone()),
                        error,
                    });
                    break;
                }
            };
            let (end, fail) = match &life.outcome {
                Outcome::Crashed(_) => match self.hung(&handle, which) {
                    Some(h) => (h.to_string(), Some(h)),
                    None => (format!("crashed at {target}"), None),
                },
                Outcome::Finished(Ok(())) => (
                    format!("finished before reaching {target}: the crash did not fire"),
                    Some(Failure::CrashDidNotFire {
                        life: which,
                        target: target.clone(),
                    }),
                ),
                Outcome::Finished(Err(e)) => (
                    format!("stopped with an error before reaching {target}: {e}"),
                    Some(Failure::Stopped {
                        life: which,
                        before: Some(target.clone()),
                        error: e.to_string(),
                    }),
                ),
                Outcome::Panicked(m) => (
                    format!("panicked: {m}"),
                    Some(Failure::Panicked {
                        life: which,
                        message: m.clone(),
                    }),
                ),
            };
            after_crash = true;
            if self.trace {
                lives.push(LifeTrace::new(Some(target), &life.hits, end));
            }
            if fail.is_some() {
                failure = fail;
                break;
            }
        }
        let mut last_hits = Vec::new();
        if failure.is_none() {
            let fin = self.final_life(&mut world, scenario, after_crash, deadline, &mut cut_disks);
            failure = fin.failure;
            if self.trace && !(fin.hits.is_empty() && fin.end.is_empty()) {
                lives.push(LifeTrace::new(None, &fin.hits, fin.end));
            }
            last_hits = fin.hits;
        }
        let verdict = self.judge(&world, &mut failure, clean);
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
            cut_disks,
        }
    }

    /// The final life of `scenario` on `world` (booted, run with no crash,
    /// shut down if it returned).
    pub(crate) fn final_life(
        &self,
        world: &mut S::World,
        scenario: &Scenario,
        after_crash: bool,
        deadline: Instant,
        cut_disks: &mut Vec<u32>,
    ) -> FinalRun {
        let n = scenario.depth() + 1;
        let which = Life::Final(n);
        let ctx = LifeContext::new(scenario.state.clone(), n, after_crash)
            .with_disk(scenario.disk_after(n - 1));
        let handle = Handle::new(None);
        match self.life(world, &ctx, &handle, deadline, scenario, cut_disks) {
            Err(error) => FinalRun {
                failure: Some(Failure::Stopped {
                    life: which,
                    before: None,
                    error,
                }),
                end: String::new(),
                hits: Vec::new(),
                hung: false,
            },
            Ok(life) => {
                let mut hung = false;
                let (end, failure) = match &life.outcome {
                    Outcome::Finished(Ok(())) => ("finished".to_owned(), None),
                    Outcome::Finished(Err(e)) => (
                        format!("stopped with an error: {e}"),
                        Some(Failure::Stopped {
                            life: which,
                            before: None,
                            error: e.to_string(),
                        }),
                    ),
                    Outcome::Crashed(h) => match self.hung(&handle, which) {
                        Some(f) => {
                            hung = true;
                            (f.to_string(), Some(f))
                        }
                        None => (
                            format!("crashed at {h} with no crash injected"),
                            Some(Failure::Uninjected {
                                life: which,
                                hit: h.clone(),
                            }),
                        ),
                    },
                    Outcome::Panicked(m) => (
                        format!("panicked: {m}"),
                        Some(Failure::Panicked {
                            life: which,
                            message: m.clone(),
                        }),
                    ),
                };
                FinalRun {
                    failure,
                    end,
                    hits: life.hits,
                    hung,
                }
            }
        }
    }

    /// The judge's verdict on `world`; a judge that panics or crashes fails
    /// the scenario (unless a life already did), and so does a verdict that
    /// breaks a required counter or counts an undeclared one.
    pub(crate) fn judge(
        &self,
        world: &S::World,
        failure: &mut Option<Failure>,
        clean: Option<&Verdict>,
    ) -> Verdict {
        let verdict = self.judge_only(world, failure);
        if failure.is_none() {
            *failure = verdict_failure(&verdict, clean, &self.counters);
        }
        verdict
    }

    /// The judge's verdict on `world`; a judge that panics or crashes fails
    /// the scenario, unless a life already did.
    pub(crate) fn judge_only(&self, world: &S::World, failure: &mut Option<Failure>) -> Verdict {
        let judged = crashpoint::record(|| self.subject.judge(world));
        match judged.outcome {
            Outcome::Finished(v) => v,
            Outcome::Panicked(m) => {
                failure.get_or_insert(Failure::JudgePanicked { message: m });
                Verdict::new()
            }
            Outcome::Crashed(h) => {
                failure.get_or_insert(Failure::JudgeCrashed { hit: h });
                Verdict::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The watchdog, one piece at a time (the sweeps in `tests/nets.rs`
    //! see only its effect on a hanging scenario).
    use std::sync::{mpsc, Arc};

    use super::*;

    fn scenario() -> Scenario {
        Scenario::in_state(CrashState::PROCESS, vec![Hit::new("a", 1)])
    }

    #[test]
    fn a_watchdog_without_a_limit_watches_nothing() {
        let w = Watchdog::new(None);
        assert_eq!(
            w.register(&Handle::new(None), Instant::now(), &scenario()),
            None
        );
        assert!(w.running().is_empty());
        // With nothing to watch, watching returns at once.
        w.watch();
    }

    #[test]
    fn each_registration_has_its_own_id_and_forgetting_drops_only_it() {
        let w = Watchdog::new(Some(Duration::from_secs(60)));
        let h = Handle::new(None);
        let a = w.register(&h, Instant::now(), &scenario());
        let b = w.register(&h, Instant::now(), &scenario());
        assert_eq!((a, b), (Some(0), Some(1)));
        let ids = |w: &Watchdog| w.running().iter().map(|x| x.id).collect::<Vec<_>>();
        w.forget(a);
        assert_eq!(ids(&w), [1]);
        w.forget(None);
        assert_eq!(ids(&w), [1]);
        w.forget(b);
        assert!(ids(&w).is_empty());
    }

    /// A life that passes no point cannot be stopped: once it is still
    /// running a whole limit after it was cancelled, the sweep says so, once.
    #[test]
    fn a_life_that_cannot_be_stopped_is_told_of_after_another_limit() {
        let limit = Duration::from_secs(2);
        let w = Arc::new(Watchdog::new(Some(limit)));
        let watcher = Arc::clone(&w);
        let watching = std::thread::spawn(move || watcher.watch());
        let start = Instant::now();
        // Never runs, so never passes a point: cancelling it changes nothing.
        let _id = w.register(&Handle::new(None), start, &scenario());
        std::thread::sleep(limit / 4);
        assert!(!w.warned.load(Ordering::Relaxed), "told before its limit");
        while !w.warned.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(w.warned.load(Ordering::Relaxed), "never told");
        assert!(start.elapsed() >= limit);
        w.stop();
        watching.join().unwrap();
    }

    /// A life past its deadline is cancelled at its next point, and the
    /// watching thread ends once stopped.
    #[test]
    fn the_watchdog_cancels_a_life_past_its_deadline_and_ends_when_stopped() {
        let w = Arc::new(Watchdog::new(Some(Duration::from_millis(10))));
        let (ended, watch_ended) = mpsc::channel();
        let watcher = Arc::clone(&w);
        std::thread::spawn(move || {
            watcher.watch();
            let _ = ended.send(());
        });
        let h = Handle::new(None);
        let id = w.register(&h, Instant::now(), &scenario());
        // Ten seconds at most, if nothing cancels it.
        let life = h.run(|| {
            for _ in 0..10_000 {
                crashpoint::point!("spin");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        w.forget(id);
        assert!(!matches!(life.outcome, Outcome::Finished(())));
        assert_eq!(
            h.cancelled().map(|hit| hit.point.into_owned()),
            Some("spin".to_owned())
        );
        w.stop();
        assert!(
            watch_ended.recv_timeout(Duration::from_secs(10)).is_ok(),
            "the watchdog went on watching after stop"
        );
    }
}
