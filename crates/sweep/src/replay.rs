//! The replayer: one scenario run from a fresh world, life by life — each
//! crashing life checked to crash where the scenario's name says, the final
//! life run to its end — and the world judged after.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crashpoint::scope::Handle;
use crashpoint::{Hit, Outcome};

use crate::config::Config;
use crate::failure::{Failure, WhichLife};
use crate::judge::{verdict_failure, Counter, Verdict};
use crate::power::Boot;
use crate::report::{LifeTrace, ScenarioResult};
use crate::scenario::Scenario;
use crate::subject::{cuts, Subject};
use crate::watchdog::Watchdog;

pub(crate) struct Ran {
    pub(crate) result: ScenarioResult,
    pub(crate) last_hits: Vec<Hit>,
    /// The points (as compiled) the final life passed.
    pub(crate) last_sites: Vec<&'static crashpoint::points::Site>,
    /// In an enumerating state: how many disks the cut after each crash
    /// could have left, for each boot after a crash that got that far.
    pub(crate) cut_disks: Vec<u32>,
    /// For the clean run: the world it left, as the clean runs are
    /// compared (its fingerprint, and its description).
    pub(crate) world_seen: Option<WorldSeen>,
}

/// What a clean run's final world looks like, to compare two clean runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorldSeen {
    /// [`Share::fingerprint`](crate::sharing::Share::fingerprint)'s two
    /// halves, if the subject gives one.
    pub(crate) fingerprint: Option<(u128, u128)>,
    /// [`Subject::describe`].
    pub(crate) description: String,
}

/// How long the threads a life leaves in its scope, fenced as it returns,
/// may take to leave without passing another point (a thread that sent
/// its last result and is returning) before those still running fail the
/// scenario. A thread that passes a point in that time dies there and
/// fails it at once (see [`Replayer::life`]).
const THREADS_GRACE: Duration = Duration::from_secs(1);

/// A life as [`Replayer::life`] ran it: the scope's record, and the threads
/// of its scope still running when it ended (see [`Failure::Outlived`]).
pub(crate) struct Lived {
    pub(crate) life: crashpoint::Life<Result<(), crate::LifeError>>,
    pub(crate) outlived: Vec<String>,
}

/// Replays scenarios of one subject, with what stays the same for all of
/// them computed once (the counters are asked for once per sweep, not once
/// per scenario).
pub(crate) struct Replayer<'a, S> {
    pub(crate) subject: &'a S,
    pub(crate) counters: Vec<Counter>,
    trace: bool,
    watchdog: &'a Watchdog,
    /// Lives run so far (for [`Stats`](crate::report::Stats)).
    pub(crate) lives: AtomicU64,
    /// The first error of [`Subject::world`]: the sweep ends with it.
    pub(crate) world_error: Mutex<Option<String>>,
}

/// How a final life went: its failure (if any), how it ended in words, its
/// hits, and whether it was stopped for running too long.
pub(crate) struct FinalRun {
    pub(crate) failure: Option<Failure>,
    end: String,
    pub(crate) hits: Vec<Hit>,
    /// The points (as compiled) it passed.
    pub(crate) sites: Vec<&'static crashpoint::points::Site>,
    pub(crate) hung: bool,
}

impl<'a, S: Subject> Replayer<'a, S> {
    pub(crate) fn new(subject: &'a S, trace: bool, watchdog: &'a Watchdog) -> Self {
        Replayer {
            subject,
            counters: subject.counters(),
            trace,
            watchdog,
            lives: AtomicU64::new(0),
            world_error: Mutex::new(None),
        }
    }

    /// A fresh world; an error (or a panic) of [`Subject::world`] is kept
    /// for the sweep to end with ([`Replayer::world_error`]).
    pub(crate) fn world(&self) -> Result<S::World, String> {
        let made = panic::catch_unwind(AssertUnwindSafe(|| self.subject.world()));
        let error = match made {
            Ok(Ok(w)) => return Ok(w),
            Ok(Err(e)) => e.to_string(),
            Err(payload) => format!("it panicked: {}", panic_message(payload.as_ref())),
        };
        let mut first = self.world_error.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert_with(|| error.clone());
        Err(error)
    }

    /// The two halves of `world`'s fingerprint, if the subject shares.
    pub(crate) fn fingerprint(&self, world: &S::World) -> Option<(u128, u128)> {
        let share = self.subject.share()?;
        share.fingerprint(world).map(|f| f.key())
    }

    /// The sweep's error if a world could not be made.
    pub(crate) fn world_failed(&self) -> Option<crate::Error> {
        let first = self.world_error.lock().unwrap_or_else(|e| e.into_inner());
        first.as_ref().map(|error| crate::Error::World {
            subject: self.subject.name(),
            error: error.clone(),
        })
    }

    /// The time limit's end for a scenario that started `deadline` (see
    /// [`Replayer::deadline`]), `None` with no limit.
    fn limit_end(&self, deadline: Instant) -> Option<Instant> {
        self.watchdog.limit.map(|_| deadline)
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
        // A crash that never fired tested nothing: no result to compare.
        if let Some(first) = result.failure.as_ref().filter(|f| !f.is_unfired()) {
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
            // Each replay makes a fresh world: one in a temporary directory
            // names another path each time, and a failure that names it is
            // the same failure all the same.
            let same = without_temp_paths(&format!("{:?}", again.result.failure))
                == without_temp_paths(&format!("{:?}", result.failure))
                && without_temp_paths(&format!("{:?}", again.result.verdict))
                    == without_temp_paths(&format!("{:?}", result.verdict));
            if !same {
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
        ctx: &Boot,
        handle: &Handle,
        deadline: Instant,
        scenario: &Scenario,
        cut_disks: &mut Vec<u32>,
    ) -> Result<Lived, String> {
        let cuts = cuts(self.subject);
        cuts.boot(world, ctx)
            .map_err(|e| format!("the boot failed: {e}"))?;
        if ctx.after_crash() && cuts.enumerates(ctx.state()) {
            if let Some(n) = cuts.crash_disks(world) {
                cut_disks.push(n.max(1));
            }
        }
        self.lives.fetch_add(1, Ordering::Relaxed);
        // Code in the life can see its crash state: a power-loss directory
        // not booted in it refuses (durable's `PowerDir`).
        handle.set_crash_state(ctx.state().name());
        let id = self.watchdog.register(handle, deadline, scenario);
        let life = handle.run(|| self.subject.life(world));
        self.watchdog.forget(id);
        let outlived = if matches!(life.outcome, Outcome::Finished(_)) {
            // An exited process's threads do nothing more: fenced at once,
            // a thread the life left at work dies at its next point, before
            // it can touch the world the judge will see, and fails the life
            // (`Outlived`). One that sent the life its last result and is on
            // its way out passes no point: it may leave within a moment's
            // grace. What a thread does between the return and its next
            // point without passing one is the one thing a sweep in a
            // process cannot stop.
            handle.fence();
            let running = handle.running();
            let left = handle.wait_threads(Some(Instant::now() + THREADS_GRACE));
            if left.is_empty() && !handle.fenced_hits().is_empty() {
                running
            } else {
                left
            }
        } else {
            // A crash stops every thread of the process at once: here each
            // dies at its next point, and the next life (or the judge)
            // starts once all are gone, so none acts after the crash.
            handle.fence();
            handle.wait_threads(self.limit_end(deadline))
        };
        if matches!(life.outcome, Outcome::Finished(_)) {
            cuts.shutdown(world, ctx);
        }
        Ok(Lived { life, outlived })
    }

    fn hung(&self, handle: &Handle, life: WhichLife) -> Option<Failure> {
        let last_hit = handle.cancelled()?;
        Some(Failure::Hung {
            life,
            last_hit,
            limit_ms: self.watchdog.limit.map_or(0, Failure::millis),
        })
    }

    /// The crashing lives of `scenario` on `world`, each crashed at its
    /// hit, until one fails: that failure, and whether a life crashed (the
    /// next life starts after a crash). Each life's trace goes to `lives`.
    fn crashing_lives(
        &self,
        world: &mut S::World,
        scenario: &Scenario,
        deadline: Instant,
        cut_disks: &mut Vec<u32>,
        lives: &mut Vec<LifeTrace>,
    ) -> (Option<Failure>, bool) {
        let mut after_crash = false;
        for (n, target) in scenario.hits.iter().enumerate() {
            let ctx = Boot::new(scenario.state.clone(), n + 1, after_crash)
                .with_disk(scenario.disk_after(n));
            let handle = Handle::new(Some(target.clone()));
            let which = WhichLife::Crashing(n + 1);
            let lived = match self.life(world, &ctx, &handle, deadline, scenario, cut_disks) {
                Ok(lived) => lived,
                Err(error) => {
                    let failure = Failure::Stopped {
                        life: which,
                        before: Some(target.clone()),
                        error,
                    };
                    return (Some(failure), after_crash);
                }
            };
            let (end, fail) = self.crash_end(&lived, &handle, which, target);
            after_crash = true;
            if self.trace {
                lives.push(LifeTrace::new(Some(target), &lived.life.hits, end));
            }
            if fail.is_some() {
                return (fail, after_crash);
            }
        }
        (None, after_crash)
    }

    /// How the crashing life `which`, meant to crash at `target`, ended:
    /// the line its trace ends with, and its failure (`None`: it crashed
    /// at `target` as planned).
    fn crash_end(
        &self,
        lived: &Lived,
        handle: &Handle,
        which: WhichLife,
        target: &Hit,
    ) -> (String, Option<Failure>) {
        match &lived.life.outcome {
            Outcome::Crashed(_) => match self.hung(handle, which) {
                Some(h) => (h.to_string(), Some(h)),
                None if !lived.outlived.is_empty() => {
                    let f = Failure::Outlived {
                        life: which,
                        threads: lived.outlived.clone(),
                    };
                    (f.to_string(), Some(f))
                }
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
        }
    }

    pub(crate) fn replay(
        &self,
        scenario: &Scenario,
        order: Vec<u32>,
        clean: Option<&Verdict>,
    ) -> Ran {
        let deadline = self.deadline();
        let mut world = match self.world() {
            Ok(w) => w,
            Err(error) => return self.no_world(scenario, order, error),
        };
        let mut lives = Vec::new();
        let mut cut_disks = Vec::new();
        let (mut failure, after_crash) =
            self.crashing_lives(&mut world, scenario, deadline, &mut cut_disks, &mut lives);
        let mut last_hits = Vec::new();
        let mut last_sites = Vec::new();
        if failure.is_none() {
            let fin = self.final_life(&mut world, scenario, after_crash, deadline, &mut cut_disks);
            failure = fin.failure;
            if self.trace && !(fin.hits.is_empty() && fin.end.is_empty()) {
                lives.push(LifeTrace::new(None, &fin.hits, fin.end));
            }
            last_hits = fin.hits;
            last_sites = fin.sites;
        }
        let verdict = self.judge(&world, &mut failure, clean);
        let world_text = self.trace.then(|| self.subject.describe(&world));
        let world_seen = scenario.hits.is_empty().then(|| WorldSeen {
            fingerprint: self.fingerprint(&world),
            description: match &world_text {
                Some(t) => t.clone(),
                None => self.subject.describe(&world),
            },
        });
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
            last_sites,
            cut_disks,
            world_seen,
        }
    }

    /// A scenario whose world could not be made: it fails as stopped before
    /// its first life (and the sweep ends with [`Replayer::world_failed`]).
    fn no_world(&self, scenario: &Scenario, order: Vec<u32>, error: String) -> Ran {
        let life = match scenario.hits.first() {
            Some(_) => WhichLife::Crashing(1),
            None => WhichLife::Final(1),
        };
        Ran {
            result: ScenarioResult {
                scenario: scenario.clone(),
                order,
                verdict: Verdict::new(),
                failure: Some(Failure::Stopped {
                    life,
                    before: scenario.hits.first().cloned(),
                    error: format!("no world could be made: {error}"),
                }),
                lives: Vec::new(),
                world: None,
            },
            last_hits: Vec::new(),
            last_sites: Vec::new(),
            cut_disks: Vec::new(),
            world_seen: None,
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
        let handle = Handle::new(None);
        self.final_life_in(world, scenario, after_crash, deadline, cut_disks, handle)
    }

    /// [`Replayer::final_life`] in the scope of `handle` (which crashes
    /// nowhere).
    pub(crate) fn final_life_in(
        &self,
        world: &mut S::World,
        scenario: &Scenario,
        after_crash: bool,
        deadline: Instant,
        cut_disks: &mut Vec<u32>,
        handle: Handle,
    ) -> FinalRun {
        let n = scenario.depth() + 1;
        let which = WhichLife::Final(n);
        let ctx =
            Boot::new(scenario.state.clone(), n, after_crash).with_disk(scenario.disk_after(n - 1));
        match self.life(world, &ctx, &handle, deadline, scenario, cut_disks) {
            Err(error) => FinalRun {
                failure: Some(Failure::Stopped {
                    life: which,
                    before: None,
                    error,
                }),
                end: String::new(),
                hits: Vec::new(),
                sites: Vec::new(),
                hung: false,
            },
            Ok(lived) => {
                let (end, failure, hung) = self.final_end(&lived, &handle, which);
                FinalRun {
                    failure,
                    end,
                    hits: lived.life.hits,
                    sites: handle.sites(),
                    hung,
                }
            }
        }
    }

    /// How the final life `which` ended: the line its trace ends with, its
    /// failure, and whether it was stopped for running too long.
    fn final_end(
        &self,
        lived: &Lived,
        handle: &Handle,
        which: WhichLife,
    ) -> (String, Option<Failure>, bool) {
        match &lived.life.outcome {
            Outcome::Finished(Ok(())) if !lived.outlived.is_empty() => {
                let f = Failure::Outlived {
                    life: which,
                    threads: lived.outlived.clone(),
                };
                (f.to_string(), Some(f), false)
            }
            Outcome::Finished(Ok(())) => ("finished".to_owned(), None, false),
            Outcome::Finished(Err(e)) => (
                format!("stopped with an error: {e}"),
                Some(Failure::Stopped {
                    life: which,
                    before: None,
                    error: e.to_string(),
                }),
                false,
            ),
            Outcome::Crashed(h) => match self.hung(handle, which) {
                Some(f) => (f.to_string(), Some(f), true),
                None => (
                    format!("crashed at {h} with no crash injected"),
                    Some(Failure::Uninjected {
                        life: which,
                        hit: h.clone(),
                    }),
                    false,
                ),
            },
            Outcome::Panicked(m) => (
                format!("panicked: {m}"),
                Some(Failure::Panicked {
                    life: which,
                    message: m.clone(),
                }),
                false,
            ),
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
        // No crash lands in a judge: its points are passes outside any
        // life, counted with the sweep's others (`Report::unscoped`).
        crashpoint::unscoped::count_unscoped(judged.hits.iter().map(|h| &h.point));
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

/// `text` with the name of each entry of the temporary directory (a
/// world's fresh directory, `/tmp/.tmpAbC123`) replaced by `*`: how two
/// replays' results are compared.
pub(crate) fn without_temp_paths(text: &str) -> String {
    let temp = std::env::temp_dir();
    let mut prefix = temp.to_string_lossy().trim_end_matches('/').to_owned();
    prefix.push('/');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        let after = at + prefix.len();
        out.push_str(&rest[..after]);
        let name = rest[after..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map_or(rest.len() - after, |n| n);
        if name > 0 {
            out.push('*');
        }
        rest = &rest[after + name..];
    }
    out.push_str(rest);
    out
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::without_temp_paths;

    #[test]
    fn only_the_name_under_the_temporary_directory_is_masked() {
        let tmp = std::env::temp_dir();
        let tmp = tmp.to_string_lossy();
        let tmp = tmp.trim_end_matches('/');
        let a = format!("locked: {tmp}/.tmpAb12_x/r.lock (and {tmp}/.tmpZZ)");
        let b = format!("locked: {tmp}/.tmpQq9-Yz/r.lock (and {tmp}/.tmp01)");
        assert_eq!(without_temp_paths(&a), without_temp_paths(&b));
        assert_eq!(
            without_temp_paths(&a),
            format!("locked: {tmp}/*/r.lock (and {tmp}/*)")
        );
        assert_ne!(
            without_temp_paths(&format!("{tmp}/a/r.lock")),
            without_temp_paths(&format!("{tmp}/a/s.lock"))
        );
        assert_eq!(without_temp_paths("no path"), "no path");
    }
}
