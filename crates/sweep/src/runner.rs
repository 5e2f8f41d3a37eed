//! The runner: the clean run (twice, compared), the safety nets, then every
//! scenario of the sweep in each crash state, replayed from a fresh world on
//! rayon (or with lives shared between scenarios, see `share.rs`), gathered
//! into a [`Report`] in a fixed order — or, with [`Config::tally`], into
//! tallies and the failing scenarios alone; and one scenario rerun by name.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::brute::subtree;
use crate::config::Config;
use crate::crash_state::CrashState;
use crate::erased::{Adapter, Erased, ErasedSubject};
use crate::error::Error;
use crate::judge::{broken_invariants, Counter, Verdict};
use crate::nets::checked_clean_run;
use crate::plan::expand;
use crate::progress::{Progress, Stats};
use crate::replay::{Ran, Replayer};
use crate::report::{sort_scenarios, Report, ScenarioResult, StateRow, Tally};
use crate::scenario::Scenario;
use crate::share::Shared;
use crate::sink::{Gathered, Run, Sink};
use crate::subject::{cuts, Subject};
use crate::watchdog::{StopOnDrop, Watchdog};
use crashpoint::Hit;

/// Sweep `subject` as `config` says: the clean run, then every scenario of
/// every crash state, gathered into a [`Report`] in a fixed order (how much
/// work that took is in [`Report::stats`]; a progress callback is
/// [`Config::progress`]). `Err` when the sweep could not run or refused to
/// (see [`Error`]); failing scenarios are in the report.
///
/// Generic at its surface only: the subject is wrapped with its world boxed
/// and the engine, compiled once in this crate, runs it, so a crate that
/// sweeps many subject types does not compile the engine again for each.
pub fn run<S: Subject>(subject: &S, config: &Config) -> Result<Report, Error> {
    let before = subject.processes();
    let mut report = run_erased(&Adapter(subject), config)?;
    report.stats.processes = subject
        .processes()
        .map(|after| after.since(&before.unwrap_or_default()));
    Ok(report)
}

/// [`run`] on any subject seen through its world boxed: not generic, so the
/// engine below is compiled once, in this crate, for [`Erased`] alone (see
/// `erased.rs`).
fn run_erased(subject: &dyn ErasedSubject, config: &Config) -> Result<Report, Error> {
    let subject = &Erased(subject);
    let progress: &(dyn Fn(Progress) + Sync) = match &config.progress {
        Some(p) => p.as_ref(),
        None => &|_| {},
    };
    run_inner(subject, config, progress)
}

/// Whether this program was built to abort on panic, in which case no
/// injected crash can be caught. `cfg!(panic)` is the profile's setting, the
/// same for every crate of one build (Cargo passes `-C panic` to all of them).
pub(crate) fn unwinding_missing() -> bool {
    cfg!(panic = "abort")
}

/// The states `config` sweeps for `subject`, checked against those it lists.
fn states_of<S: Subject>(subject: &S, config: &Config) -> Result<Vec<CrashState>, Error> {
    let cuts = cuts(subject);
    let known = cuts.crash_states();
    let asked = if config.crash_states.is_empty() {
        cuts.default_crash_states()
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

/// [`run`], telling `progress` about each scenario.
fn run_inner<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report, Error> {
    if unwinding_missing() {
        return Err(Error::PanicAbort);
    }
    if let Some((k, n)) = config.partition {
        if k == 0 || k > n {
            return Err(Error::BadPartition { k, n });
        }
    }
    if config.depth > Config::MAX_DEPTH {
        return Err(Error::TooDeep {
            depth: config.depth,
            max: Config::MAX_DEPTH,
        });
    }
    let states = states_of(subject, config)?;
    // Points passed outside any scope on this sweep's threads (its workers,
    // this thread) count for this sweep alone.
    let unscoped = crashpoint::unscoped::watch_unscoped();
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

#[allow(clippy::too_many_arguments)]
fn sweep_states<S: Subject>(
    subject: &S,
    config: &Config,
    progress: &(dyn Fn(Progress) + Sync),
    pool: &rayon::ThreadPool,
    states: &[CrashState],
    watchdog: &Watchdog,
    unscoped: &crashpoint::unscoped::UnscopedWatch,
) -> Result<Report, Error> {
    let replayer = Replayer::new(subject, config.trace, watchdog);
    let mut notices = Vec::new();
    let (mut clean, interleaved) = checked_clean_run(&replayer, config, unscoped, &mut notices)?;
    let clean_verdict = clean.result.verdict.clone();
    let never_passed = crate::reach::never_passed(subject, config, &clean.last_sites)?;
    refuse_too_many(&subject.name(), config, clean.last_hits.len(), states.len())?;
    let shared = share_lives(&replayer, config, states, (&clean, interleaved))?;
    let (counters, extra_required) = required_counters(&replayer.counters, config);
    // The clean run passed its own checks (no failure); a counter the
    // config adds may fail it.
    if extra_required {
        clean.result.failure = broken_invariants(&clean_verdict, Some(&clean_verdict), &counters);
    }
    let (mut scenarios, tallies, count) = sweep_each_state(
        &replayer,
        shared.as_ref(),
        pool,
        (config, progress),
        (&clean.last_hits, &clean_verdict, interleaved),
        (&counters, extra_required),
        states,
    );
    if let Some(e) = replayer.world_failed() {
        return Err(e);
    }
    if let Some(e) = shared.as_ref().and_then(Shared::refusal) {
        return Err(e);
    }
    sort_scenarios(&mut scenarios, states);
    let stats = Stats {
        scenarios: count + 1,
        lives: replayer.lives.load(Ordering::Relaxed),
        shared: shared.is_some(),
        processes: None,
    };
    if config.progress.is_none() {
        // A library call (a test) reads no warning it is not shown: each
        // notice once on stderr. The command line prints them itself.
        notices
            .iter()
            .for_each(|n| eprintln!("sweep: {}: {n}", subject.name()));
    }
    Ok(Report {
        subject: subject.name(),
        counters,
        depth: config.depth,
        partition: config.partition,
        states: state_rows(subject, states),
        unscoped: unscoped.hits(),
        // This sweep's plain threads, then those no life started that
        // passed points while its lives ran.
        stray: merge_tallies(unscoped.plain(), unscoped.during_lives()),
        notices,
        never_passed,
        clean: clean.result,
        scenarios,
        tallies,
        stats,
    })
}

/// Lives shared between scenarios, if the config shares them and the sweep
/// can: not traced, not at depth 0, and in no crash state that enumerates
/// (those choose a disk per crash by the scenario's name: run brute force).
/// Nor when the clean runs `interleaved` their hits: lives are shared by
/// the order of their hits, which threads change from run to run.
fn share_lives<'r, 'a, S: Subject>(
    replayer: &'r Replayer<'a, S>,
    config: &Config,
    states: &[CrashState],
    (clean, interleaved): (&Ran, bool),
) -> Result<Option<Shared<'r, 'a, S>>, Error> {
    let enumerates = states.iter().any(|s| cuts(replayer.subject).enumerates(s));
    if config.share && !config.trace && config.depth > 0 && !enumerates && !interleaved {
        Shared::new(replayer, clean)
    } else {
        Ok(None)
    }
}

/// [`Error::TooManyScenarios`] if the sweep of `hits` points in `states`
/// crash states is estimated over the config's limit.
fn refuse_too_many(
    subject: &str,
    config: &Config,
    hits: usize,
    states: usize,
) -> Result<(), Error> {
    let estimate = config.estimate_scenarios(hits, states);
    if estimate > config.max_scenarios as f64 {
        return Err(Error::TooManyScenarios {
            subject: subject.to_owned(),
            depth: config.depth,
            hits,
            estimate,
            limit: config.max_scenarios,
        });
    }
    Ok(())
}

/// The report's row of each crash state, titled as the subject's cuts say.
fn state_rows<S: Subject>(subject: &S, states: &[CrashState]) -> Vec<StateRow> {
    (states.iter())
        .map(|s| StateRow {
            state: s.clone(),
            title: cuts(subject).row_title(&subject.name(), s),
        })
        .collect()
}

/// Every crash state's scenarios (none at depth 0): those kept, each
/// state's tally (when the config tallies) and how many ran.
///
/// Each scenario's children (the hits its final life reaches) start as
/// soon as it finishes — no barrier between depths — and results are
/// sorted into the sweep's fixed order at the end.
fn sweep_each_state<S: Subject>(
    replayer: &Replayer<'_, S>,
    shared: Option<&Shared<'_, '_, S>>,
    pool: &rayon::ThreadPool,
    (config, progress): (&Config, &(dyn Fn(Progress) + Sync)),
    clean: (&[Hit], &Verdict, bool),
    counters: (&[Counter], bool),
    states: &[CrashState],
) -> (Vec<ScenarioResult>, Vec<Tally>, u64) {
    let mut scenarios: Vec<ScenarioResult> = Vec::new();
    let mut tallies = Vec::new();
    let mut count = 0;
    if config.depth > 0 {
        for state in states {
            let gathered = sweep_state(
                replayer,
                shared,
                pool,
                (config, progress),
                clean,
                counters,
                state,
            );
            count += gathered.count;
            scenarios.extend(gathered.kept);
            if !config.trace && config.tally {
                tallies.push(gathered.tally);
            }
        }
    }
    (scenarios, tallies, count)
}

/// One crash state's scenarios: those at depth 1 and, each as soon as its
/// parent finishes, their children, gathered by the state's own sink.
fn sweep_state<S: Subject>(
    replayer: &Replayer<'_, S>,
    shared: Option<&Shared<'_, '_, S>>,
    pool: &rayon::ThreadPool,
    (config, progress): (&Config, &(dyn Fn(Progress) + Sync)),
    (clean_hits, clean_verdict, interleaved): (&[Hit], &Verdict, bool),
    (counters, extra_required): (&[Counter], bool),
    state: &CrashState,
) -> Gathered {
    let top = expand(
        &Scenario::in_state(state.clone(), Vec::new()),
        &[],
        clean_hits,
        cuts(replayer.subject).enumerates(state),
    );
    progress(Progress::Planned {
        depth: 1,
        count: top.len() as u64,
    });
    let sink = Sink {
        clean: clean_verdict,
        progress,
        counters,
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
        clean: clean_verdict,
        interleaved,
        progress,
        sink: &sink,
    };
    pool.install(|| match shared {
        Some(shared) => shared.sweep(top, &run),
        None => top
            .into_par_iter()
            .for_each(|(sc, order)| subtree(replayer, sc, order, &run)),
    });
    sink.finish()
}

/// The subject's counters with those the config requires marked, as
/// `Report::require` marks them, and whether that marked any new one.
fn required_counters(declared: &[Counter], config: &Config) -> (Vec<Counter>, bool) {
    let mut counters = declared.to_vec();
    let mut extra_required = false;
    for name in &config.required {
        if let Some(c) = counters.iter_mut().find(|c| c.name == *name) {
            extra_required |= !c.required_zero;
            c.required_zero = true;
        }
    }
    (counters, extra_required)
}

/// `a` then the names of `b` it lacks, counts added.
fn merge_tallies(mut a: Vec<(String, u64)>, b: Vec<(String, u64)>) -> Vec<(String, u64)> {
    for (n, c) in b {
        match a.iter_mut().find(|(m, _)| *m == n) {
            Some((_, k)) => *k += c,
            None => a.push((n, c)),
        }
    }
    a
}

/// Run one scenario again by the name a report prints for it (`told#1`,
/// `lose: posting#2 → receiver accepted#1`, `all: mid-save#3 (disk 2)`),
/// with its timeline: each life's hits and how it ended, and the world's
/// description ([`ScenarioResult::timeline`]). The clean run is replayed
/// first, for counters measured over it. Of `config`, only
/// [`Config::scenario_timeout`] applies (a hung life fails the result as
/// [`Failure::Hung`](crate::report::Failure::Hung)).
///
/// `Err` for a name that does not parse ([`Error::BadScenario`]), a crash
/// state the subject does not list ([`Error::UnknownCrashState`]), a world
/// that cannot be made ([`Error::World`]) or a build that cannot unwind
/// ([`Error::PanicAbort`]).
pub fn rerun<S: Subject>(
    subject: &S,
    config: &Config,
    scenario: &str,
) -> Result<ScenarioResult, Error> {
    rerun_erased(&Adapter(subject), config, scenario, None).map(|(r, _)| r)
}

/// [`rerun`], and the final world kept in the directory `to` (it exists)
/// by [`Subject::keep`]: for a failing scenario's artifacts. The second
/// value tells whether the subject kept it (`Ok(false)`: it keeps
/// nothing), or why it could not.
pub fn rerun_keeping<S: Subject>(
    subject: &S,
    config: &Config,
    scenario: &str,
    to: &std::path::Path,
) -> Result<(ScenarioResult, std::io::Result<bool>), Error> {
    rerun_erased(&Adapter(subject), config, scenario, Some(to))
}

/// [`rerun`] on any subject seen through its world boxed, not generic (as
/// [`run_erased`]).
fn rerun_erased(
    subject: &dyn ErasedSubject,
    config: &Config,
    scenario: &str,
    keep: Option<&std::path::Path>,
) -> Result<(ScenarioResult, std::io::Result<bool>), Error> {
    let subject = &Erased(subject);
    if unwinding_missing() {
        return Err(Error::PanicAbort);
    }
    let sc: Scenario = scenario.parse().map_err(|source| Error::BadScenario {
        name: scenario.to_owned(),
        source,
    })?;
    let known = cuts(subject).crash_states();
    if !known.contains(&sc.state) {
        return Err(Error::UnknownCrashState {
            subject: subject.name(),
            state: sc.state.to_string(),
            known: known.iter().map(ToString::to_string).collect(),
        });
    }
    let watchdog = Watchdog::new(config.scenario_timeout);
    std::thread::scope(|scope| {
        if config.scenario_timeout.is_some() {
            scope.spawn(|| watchdog.watch());
        }
        let _stop = StopOnDrop(&watchdog);
        let replayer = Replayer::new(subject, true, &watchdog);
        let clean = replayer.replay(&Scenario::default(), Vec::new(), None);
        let (again, kept) =
            replayer.replay_keeping(&sc, Vec::new(), Some(&clean.result.verdict), keep);
        match replayer.world_failed() {
            Some(e) => Err(e),
            None => Ok((again.result, kept)),
        }
    })
}
