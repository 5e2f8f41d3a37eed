//! Each safety net of the runner, with a subject that only that net catches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sweep::{
    power::{Boot, CrashState},
    report::Failure,
    Config, Counter, Error, Subject, Verdict,
};

/// Two points per life; the judge counts what `judge` says.
struct Job<F: Fn(u64) -> Verdict + Sync> {
    judge: F,
    counters: Vec<Counter>,
}

impl<F: Fn(u64) -> Verdict + Sync> Subject for Job<F> {
    type World = u64;
    fn name(&self) -> String {
        "job".into()
    }
    fn counters(&self) -> Vec<Counter> {
        self.counters.clone()
    }
    fn world(&self) -> Result<u64, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, w: &mut u64) -> Result<(), sweep::LifeError> {
        *w += 1;
        crashpoint::point!("a");
        crashpoint::point!("b");
        Ok(())
    }
    fn judge(&self, w: &u64) -> Verdict {
        (self.judge)(*w)
    }
}

trait WithLimit {
    fn clone_with_limit(&self, n: u64) -> Config;
}
impl WithLimit for Config {
    fn clone_with_limit(&self, n: u64) -> Config {
        Config {
            max_scenarios: n,
            ..self.clone()
        }
    }
}

fn cfg(depth: u32) -> Config {
    Config {
        depth,
        ..Config::default()
    }
}

#[test]
fn a_misspelt_counter_is_an_error() {
    let s = Job {
        judge: |_| Verdict::new().count("bda", 0).count("bad", 0),
        counters: vec![Counter::new("bad").required()],
    };
    let e = sweep::run(&s, &cfg(1)).unwrap_err();
    assert!(
        matches!(e, Error::UndeclaredCounter { ref name, .. } if name == "bda"),
        "{e}"
    );
}

#[test]
fn a_required_counter_never_set_is_an_error() {
    let s = Job {
        judge: |_| Verdict::new(),
        counters: vec![Counter::new("bad").required()],
    };
    let e = sweep::run(&s, &cfg(1)).unwrap_err();
    assert!(
        matches!(e, Error::RequiredNeverSet { ref name, .. } if name == "bad"),
        "{e}"
    );
}

#[test]
fn a_judge_that_faults_the_clean_run_is_an_error() {
    let s = Job {
        judge: |_| Verdict::new().count("bad", 1),
        counters: vec![Counter::new("bad").required()],
    };
    let e = sweep::run(&s, &cfg(1)).unwrap_err();
    assert!(matches!(e, Error::CleanJudgeFaults { .. }), "{e}");
}

#[test]
fn a_subject_with_no_points_is_an_error() {
    struct None_;
    impl Subject for None_ {
        type World = ();
        fn name(&self) -> String {
            "none".into()
        }
        fn counters(&self) -> Vec<Counter> {
            vec![]
        }
        fn world(&self) -> Result<(), sweep::LifeError> {
            Ok(())
        }
        fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
            // A point on a thread without the life's scope: no hit.
            std::thread::spawn(|| crashpoint::point!("lost on a plain thread"))
                .join()
                .map_err(|_| "join")?;
            Ok(())
        }
        fn judge(&self, _: &()) -> Verdict {
            Verdict::new()
        }
    }
    let e = sweep::run(&None_, &cfg(1)).unwrap_err();
    let Error::NoPoints { unscoped, .. } = &e else {
        panic!("{e}")
    };
    assert!(
        unscoped.iter().any(|n| n == "lost on a plain thread"),
        "{e}"
    );
    assert!(e.to_string().contains("crashpoint::spawn"), "{e}");
}

/// Passes a point on a plain thread besides its own points.
struct Unscoped;
impl Subject for Unscoped {
    type World = ();
    fn name(&self) -> String {
        "unscoped".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("scoped");
        std::thread::spawn(|| crashpoint::point!("unscoped-in-a-sweep"))
            .join()
            .map_err(|_| "join")?;
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

#[test]
fn points_on_threads_without_a_scope_are_reported() {
    let config = Config {
        refuse_unscoped: false,
        ..cfg(1)
    };
    let r = sweep::run(&Unscoped, &config).unwrap();
    // A plain thread belongs to no sweep: a stray pass, reported but kept
    // out of the report's equality.
    assert!(
        r.stray
            .iter()
            .any(|(n, c)| n == "unscoped-in-a-sweep" && *c >= 2),
        "{:?}",
        r.stray
    );
    assert!(r.unscoped.is_empty(), "{:?}", r.unscoped);
    let mut other = r.clone();
    other.stray.clear();
    assert_eq!(r, other);
    assert!(!serde_json::to_string(&r)
        .unwrap()
        .contains("unscoped-in-a-sweep"));
}

/// Passes a point outside its lives' scope on the sweep's own thread each
/// time a world is made, and one in each life.
struct MadeWorlds;
impl Subject for MadeWorlds {
    type World = ();
    fn name(&self) -> String {
        "made worlds".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        crashpoint::point!("made a world");
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("one");
        crashpoint::point!("two");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// Two sweeps at once in one binary, while a third thread passes points
/// outside any scope: each report holds its own unscoped points and none of
/// the other's or the third thread's, so both equal the report of a sweep
/// run alone. (Before, the tally was process-wide and both reports held
/// the third thread's points.)
#[test]
fn concurrent_sweeps_see_only_their_own_unscoped_points() {
    // The third thread passes points on a plain thread outside any sweep:
    // alone, so that no other test's sweep counts them.
    if !crate::alone("nets::concurrent_sweeps_see_only_their_own_unscoped_points") {
        return;
    }
    let config = sweep::Config {
        depth: 2,
        threads: Some(2),
        refuse_unscoped: false,
        ..sweep::Config::default()
    };
    let alone = sweep::run(&MadeWorlds, &config).unwrap();
    let made = alone.unscoped.iter().find(|(n, _)| n == "made a world");
    assert!(made.is_some_and(|(_, c)| *c > 0), "{:?}", alone.unscoped);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::sync::Barrier::new(2);
    let (one, two, passes) = std::thread::scope(|s| {
        let third = s.spawn(|| {
            let mut passes = 0u64;
            while !stop.load(Ordering::SeqCst) {
                crashpoint::point!("a third thread's point");
                passes += 1;
                if passes == 1 {
                    // The sweeps start only once this thread is passing
                    // points, however busy the machine is.
                    started.wait();
                }
                std::thread::yield_now();
            }
            passes
        });
        started.wait();
        let one = s.spawn(|| sweep::run(&MadeWorlds, &config).unwrap());
        let two = s.spawn(|| sweep::run(&MadeWorlds, &config).unwrap());
        let (one, two) = (one.join().unwrap(), two.join().unwrap());
        stop.store(true, Ordering::SeqCst);
        (one, two, third.join().unwrap())
    });
    assert!(passes > 0);
    for r in [&one, &two] {
        assert!(
            !r.unscoped
                .iter()
                .any(|(n, _)| n == "a third thread's point"),
            "{:?}",
            r.unscoped
        );
        assert_eq!(*r, alone);
        assert_eq!(
            serde_json::to_string(r).unwrap(),
            serde_json::to_string(&alone).unwrap()
        );
    }
}

/// Its hits depend on a counter shared by every world: not deterministic.
struct Drifting(AtomicU64);
impl Subject for Drifting {
    type World = ();
    fn name(&self) -> String {
        "drifting".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("start");
        if self.0.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
            crashpoint::point!("even");
        } else {
            crashpoint::point!("odd");
        }
        for _ in 0..3 {
            crashpoint::point!("after");
        }
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

#[test]
fn the_clean_run_runs_twice_and_must_agree() {
    let e = sweep::run(&Drifting(AtomicU64::new(0)), &cfg(1)).unwrap_err();
    let Error::Nondeterministic { at, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(at.index, 1);
    assert_eq!(at.first.as_deref(), Some("even#1"));
    assert_eq!(at.second.as_deref(), Some("odd#1"));
    // Two hits before the first that differs, two after.
    assert_eq!(at.first_around, ["start#1", "even#1", "after#1", "after#2"]);
    assert_eq!(at.second_around, ["start#1", "odd#1", "after#1", "after#2"]);
    let once = Config {
        clean_runs: 1,
        ..cfg(1)
    };
    assert!(sweep::run(&Drifting(AtomicU64::new(0)), &once).is_ok());
}

/// Its points come in another order every other life, as two threads
/// racing would pass them: the same hits, as sets.
struct Swapping(AtomicU64);
impl Subject for Swapping {
    type World = ();
    fn name(&self) -> String {
        "swapping".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        if self.0.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
            crashpoint::point!("main");
            crashpoint::point!("writer");
        } else {
            crashpoint::point!("writer");
            crashpoint::point!("main");
        }
        crashpoint::point!("main");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

#[test]
fn clean_runs_that_differ_only_in_order_are_swept_by_occurrence_then_point() {
    let r = sweep::run(&Swapping(AtomicU64::new(0)), &cfg(2)).unwrap();
    assert!(
        r.notices.iter().any(|n| n.contains("in different orders")),
        "{:?}",
        r.notices
    );
    assert_eq!(r.row().depth_counts, vec![3, 9]);
    let once: Vec<String> = (r.scenarios.iter())
        .filter(|s| s.scenario.depth() == 1)
        .map(|s| s.scenario.to_string())
        .collect();
    assert_eq!(once, ["main#1", "writer#1", "main#2"]);
    // Each parent's children in the same order, whichever order its final
    // life passed them in.
    let after_writer: Vec<String> = (r.scenarios.iter())
        .filter(|s| s.scenario.depth() == 2 && s.scenario.hits[0].point == "writer")
        .map(|s| s.scenario.hits[1].to_string())
        .collect();
    assert_eq!(after_writer, ["main#1", "writer#1", "main#2"]);
}

/// The same hits every time; what differs between its clean runs is the
/// verdict (a count of the judgements so far), or, with `panics`, only how
/// the second run ends: its life panics after its last point.
struct Drifts {
    judged: AtomicU64,
    lives: AtomicU64,
    panics: bool,
}

impl Drifts {
    fn new(panics: bool) -> Self {
        Drifts {
            judged: AtomicU64::new(0),
            lives: AtomicU64::new(0),
            panics,
        }
    }
}

impl Subject for Drifts {
    type World = ();
    fn name(&self) -> String {
        "drifts".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("judged")]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        if self.panics && self.lives.fetch_add(1, Ordering::SeqCst) == 1 {
            panic!("only the second time");
        }
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        let n = self.judged.fetch_add(1, Ordering::SeqCst);
        Verdict::new().count("judged", if self.panics { 0 } else { n })
    }
}

/// Two clean runs through the same hits must also end the same way: the
/// same verdict, and the same failure or none. Either difference is an
/// error that shows both.
#[test]
fn two_clean_runs_must_end_alike() {
    let e = sweep::run(&Drifts::new(false), &cfg(1)).unwrap_err();
    let Error::NondeterministicVerdict { first, second, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!((first.as_str(), second.as_str()), ("judged=0", "judged=1"));
    let e = sweep::run(&Drifts::new(true), &cfg(1)).unwrap_err();
    let Error::NondeterministicVerdict { first, second, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(first, "judged=0");
    assert!(
        second.starts_with("judged=0, then ") && second.contains("only the second time"),
        "{second}"
    );
    assert!(e.to_string().contains("only the second time"), "{e}");
}

/// Fails every other time it is judged.
struct Coin(AtomicU64);
impl Subject for Coin {
    type World = ();
    fn name(&self) -> String {
        "coin".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("bad").required()]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        // Clean runs (the first two judgements) pass; then fail, pass, ….
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Verdict::new().count("bad", u64::from(n >= 2 && n % 2 == 0))
    }
}

#[test]
fn a_failure_that_does_not_repeat_is_flaky() {
    let r = sweep::run(&Coin(AtomicU64::new(0)), &cfg(1)).unwrap();
    assert_eq!(r.failures().count(), 0);
    let flaky: Vec<_> = r.flaky().collect();
    assert_eq!(flaky.len(), 1);
    assert!(matches!(
        flaky[0].failure,
        Some(Failure::Flaky { again: None, .. })
    ));
    let row = r.row();
    assert_eq!((row.failed, row.flaky), (0, 1));
    let tallied = Config {
        tally: true,
        ..cfg(1)
    };
    let t = sweep::run(&Coin(AtomicU64::new(0)), &tallied).unwrap();
    assert_eq!(t.row(), row, "a tallied row counts flaky scenarios too");
    assert!(sweep::table(&[row]).contains("flaky"));
    let timeline = flaky[0].timeline();
    assert!(
        timeline.ends_with("FLAKY: flaky: failed with bad = 1, then passed when run again\n"),
        "{timeline}"
    );
    let strict = Config {
        rerun_failures: false,
        ..cfg(1)
    };
    let r = sweep::run(&Coin(AtomicU64::new(0)), &strict).unwrap();
    assert_eq!((r.failures().count(), r.flaky().count()), (1, 0));
}

/// Fails every scenario the same way (judged "bad" after the clean runs);
/// a counter it does not require counts the judgements after the clean
/// runs, so a failing scenario run again ends with another verdict.
struct Wobbly(AtomicU64);
impl Subject for Wobbly {
    type World = ();
    fn name(&self) -> String {
        "wobbly".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("bad").required(), Counter::new("judged")]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Verdict::new()
            .count("bad", u64::from(n >= 2))
            .count("judged", if n >= 2 { n } else { 0 })
    }
}

/// The same failure with another verdict when run again is flaky too: the
/// result changed.
#[test]
fn a_failure_whose_verdict_changes_when_run_again_is_flaky() {
    let r = sweep::run(&Wobbly(AtomicU64::new(0)), &cfg(1)).unwrap();
    assert_eq!(r.failures().count(), 0);
    let flaky: Vec<_> = r.flaky().collect();
    assert_eq!(flaky.len(), 1);
    let Some(Failure::Flaky { first, again }) = &flaky[0].failure else {
        panic!("{:?}", flaky[0].failure)
    };
    assert_eq!(Some(first), again.as_ref(), "the same failure both times");
}

/// Its restart loops for ever, passing a point each time round.
struct Hangs;
impl Subject for Hangs {
    type World = bool;
    fn name(&self) -> String {
        "hangs".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<bool, sweep::LifeError> {
        Ok(false)
    }
    fn life(&self, started: &mut bool) -> Result<(), sweep::LifeError> {
        if std::mem::replace(started, true) {
            loop {
                crashpoint::point!("retry");
                std::thread::yield_now();
            }
        }
        crashpoint::point!("first");
        *started = false;
        Ok(())
    }
    fn judge(&self, _: &bool) -> Verdict {
        Verdict::new()
    }
}

#[test]
fn a_life_past_the_time_limit_fails_as_hung_and_the_sweep_goes_on() {
    let config = Config {
        scenario_timeout: Some(Duration::from_millis(50)),
        rerun_failures: false,
        ..cfg(1)
    };
    let r = sweep::run(&Hangs, &config).unwrap();
    let f: Vec<_> = r.failures().collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].scenario.to_string(), "first#1");
    let Some(Failure::Hung { last_hit, .. }) = &f[0].failure else {
        panic!("{:?}", f[0].failure)
    };
    assert_eq!(last_hit.point, "retry");
}

/// With failures rerun (the default), a hung scenario stays hung although
/// its rerun stops at another `retry#N`. (Before, the two stops differed and
/// the scenario was reported flaky.)
#[test]
fn a_hung_scenario_rerun_is_hung_not_flaky() {
    let config = Config {
        scenario_timeout: Some(Duration::from_millis(50)),
        ..cfg(1)
    };
    assert!(config.rerun_failures);
    let r = sweep::run(&Hangs, &config).unwrap();
    assert_eq!(r.flaky().count(), 0, "{:?}", r.scenarios);
    let f: Vec<_> = r.failures().collect();
    assert_eq!(f.len(), 1);
    assert!(
        matches!(f[0].failure, Some(Failure::Hung { .. })),
        "{:?}",
        f[0].failure
    );
}

#[test]
fn a_sweep_too_big_is_refused_at_once_with_its_estimate() {
    // hits + hits² + … + hits^depth, for each crash state.
    let at = |depth| Config {
        depth,
        ..Config::default()
    };
    assert_eq!(at(12).estimate_scenarios(2, 1), 8190.0);
    assert_eq!(at(2).estimate_scenarios(3, 2), 24.0);
    assert_eq!(at(0).estimate_scenarios(5, 1), 0.0);
    let s = Job {
        judge: |_| Verdict::new(),
        counters: vec![],
    };
    // Refused before it starts: a sweep that ran instead would never end.
    let e = within(30, || {
        let s = Job {
            judge: |_| Verdict::new(),
            counters: vec![],
        };
        sweep::run(&s, &cfg(16).clone_with_limit(100_000))
    })
    .unwrap_err();
    let Error::TooManyScenarios { estimate, .. } = e else {
        panic!("{e}")
    };
    // 2 + 4 + … + 2^16.
    assert_eq!(estimate, 131_070.0);
    let raised = Config {
        max_scenarios: 10_000,
        ..cfg(12)
    };
    // 2 + 4 + … + 2^12 = 8190 scenarios: under a limit raised to 10,000.
    assert_eq!(sweep::run(&s, &raised).unwrap().scenarios.len(), 8190);
    // A limit of exactly the estimate is not exceeded.
    let exact = cfg(12).clone_with_limit(8190);
    assert_eq!(sweep::run(&s, &exact).unwrap().scenarios.len(), 8190);
    let e = sweep::run(&s, &cfg(13).clone_with_limit(10_000)).unwrap_err();
    assert!(e.to_string().contains("16,382"), "{e}");
}

/// A subject with two crash states, booted by the runner.
struct Stateful;
impl Subject for Stateful {
    type World = (Vec<String>, bool);
    fn name(&self) -> String {
        "stateful".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("lost").required()]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok((Vec::new(), false))
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        crashpoint::point!("start");
        w.1 = true;
        crashpoint::point!("done, unsynced");
        Ok(())
    }
    fn judge(&self, w: &Self::World) -> Verdict {
        Verdict::new().count("lost", u64::from(!w.1))
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<(Vec<String>, bool)>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<(Vec<String>, bool)> for Stateful {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS, CrashState::named("lose")]
    }

    fn boot(&self, w: &mut (Vec<String>, bool), ctx: &Boot) -> Result<(), sweep::LifeError> {
        // A power cut in `lose` loses an unsynced `done`.
        if ctx.after_crash() && ctx.state().name() == "lose" {
            w.1 = false;
        }
        w.0.push(format!("boot {} in {}", ctx.life(), ctx.state()));
        Ok(())
    }
}

#[test]
fn crash_states_are_a_dimension_named_in_each_scenario() {
    let config = Config {
        crash_states: vec![CrashState::PROCESS, CrashState::named("lose")],
        ..cfg(1)
    };
    let r = sweep::run(&Stateful, &config).unwrap();
    let names: Vec<String> = r.scenarios.iter().map(|s| s.scenario.to_string()).collect();
    assert_eq!(
        names,
        [
            "start#1",
            "done, unsynced#1",
            "lose: start#1",
            "lose: done, unsynced#1"
        ]
    );
    let rows = r.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].variant, "stateful | lose");
    // Rerun by name alone: the state comes from the name.
    let again = sweep::rerun(&Stateful, &cfg(1), "lose: done, unsynced#1").unwrap();
    assert!(again.world.is_some() || again.failure.is_some());
    let bad = Config {
        crash_states: vec![CrashState::named("torn")],
        ..cfg(1)
    };
    assert!(matches!(
        sweep::run(&Stateful, &bad),
        Err(Error::UnknownCrashState { .. })
    ));
}

/// A panic outside any scenario (here the progress callback's) comes out of
/// the sweep as that panic; it does not leave the sweep waiting for ever
/// on its own watchdog.
#[test]
fn a_panicking_progress_callback_ends_the_sweep_with_its_panic() {
    let panicked = within(30, || {
        let job = Job {
            judge: |_| Verdict::new().count("n", 0),
            counters: vec![Counter::new("n")],
        };
        std::panic::catch_unwind(|| {
            let config = Config {
                progress: Some(std::sync::Arc::new(|_| panic!("progress callback broke"))),
                ..cfg(1)
            };
            sweep::run(&job, &config)
        })
        .is_err()
    });
    assert!(panicked, "the callback's panic came out of the sweep");
}

/// `f`'s result, run on a thread of its own; a test failure if it takes
/// more than `secs` seconds (a generous bound, so that a hang fails instead
/// of stalling the suite; the thread is left behind).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("still running after {secs} s: hung"))
}

/// One point per life.
struct OnePoint;
impl Subject for OnePoint {
    type World = ();
    fn name(&self) -> String {
        "one point".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("only");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// `run` and `merge` share one depth limit: the deepest sweep `run` runs
/// is the deepest shard `merge` takes, and one deeper is refused by both.
/// (Before, `run` swept depth 20 and `merge` refused it.)
#[test]
fn run_and_merge_share_one_depth_limit() {
    let deepest = sweep::Config {
        depth: Config::MAX_DEPTH,
        partition: Some((1, 1)),
        ..cfg(1)
    };
    let r = sweep::run(&OnePoint, &deepest).unwrap();
    assert_eq!(r.scenarios.len() as u32, Config::MAX_DEPTH);
    let merged = sweep::Report::merge(vec![r]).unwrap();
    assert_eq!(merged.depth, Config::MAX_DEPTH);
    let e = sweep::run(
        &OnePoint,
        &sweep::Config {
            depth: Config::MAX_DEPTH + 1,
            ..cfg(1)
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::TooDeep { depth, max } if depth == Config::MAX_DEPTH + 1 && max == Config::MAX_DEPTH),
        "{e}"
    );
    assert!(e.to_string().contains("refused"), "{e}");
}

/// Its judge sets the required counter `dups` only when no life crashed:
/// after a crash the branch that forgets it would read 0 and pass.
struct ForgetsAfterACrash;
impl Subject for ForgetsAfterACrash {
    type World = u64;
    fn name(&self) -> String {
        "forgets after a crash".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("dups").required()]
    }
    fn world(&self) -> Result<u64, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, lives: &mut u64) -> Result<(), sweep::LifeError> {
        *lives += 1;
        crashpoint::point!("paid");
        Ok(())
    }
    fn judge(&self, lives: &u64) -> Verdict {
        if *lives == 1 {
            Verdict::new().count("dups", 0)
        } else {
            // The duplicate is here, but the judge forgot to count it.
            Verdict::new()
        }
    }
}

/// Every verdict is checked for every required counter, not only the clean
/// run's. (Before, the scenario after a crash passed.)
#[test]
fn a_required_counter_forgotten_after_a_crash_fails_the_scenario() {
    let r = sweep::run(&ForgetsAfterACrash, &cfg(1)).unwrap();
    let f: Vec<_> = r.failures().collect();
    assert_eq!(f.len(), 1, "{:?}", r.scenarios);
    let Some(Failure::RequiredNotSet { name }) = &f[0].failure else {
        panic!("{:?}", f[0].failure)
    };
    assert_eq!(name, "dups");
    let text = f[0].failure.as_ref().unwrap().to_string();
    assert!(text.contains("did not set the required counter"), "{text}");
}

/// By default, a point passed on a plain thread while the sweep's life runs
/// refuses the sweep, naming the point and the fix. (Before, `sweep::run`
/// returned `Ok` and only the command line printed a warning.)
#[test]
fn points_on_plain_threads_refuse_the_sweep_by_default() {
    // Alone: a pass counts for the sweep whose lives alone run at the time.
    if !crate::alone("nets::points_on_plain_threads_refuse_the_sweep_by_default") {
        return;
    }
    let e = sweep::run(&Unscoped, &cfg(1)).unwrap_err();
    let Error::Unscoped { subject, points } = &e else {
        panic!("expected Unscoped, got {e}");
    };
    assert_eq!(subject, "unscoped");
    assert!(
        points
            .iter()
            .any(|(n, c)| n == "unscoped-in-a-sweep" && *c >= 1),
        "{points:?}"
    );
    let text = e.to_string();
    assert!(text.contains("unscoped-in-a-sweep ("), "{text}");
    assert!(text.contains("crashpoint::spawn"), "{text}");
    assert!(text.contains("Handle::enter"), "{text}");
    assert!(text.contains("refuse_unscoped = false"), "{text}");
    // Turned off, the same sweep runs and warns.
    let config = Config {
        refuse_unscoped: false,
        ..cfg(1)
    };
    let r = sweep::run(&Unscoped, &config).unwrap();
    assert!(r.stray.iter().any(|(n, _)| n == "unscoped-in-a-sweep"));
}

/// Builds its world's list from a `HashSet`: the same hits and the same
/// verdict every time, but another order in the world each time.
struct SetOrder;
impl Subject for SetOrder {
    type World = Vec<u32>;
    fn name(&self) -> String {
        "set order".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("items")]
    }
    fn world(&self) -> Result<Vec<u32>, sweep::LifeError> {
        Ok(Vec::new())
    }
    fn life(&self, w: &mut Vec<u32>) -> Result<(), sweep::LifeError> {
        let set: std::collections::HashSet<u32> = (0..32).collect();
        crashpoint::point!("collected");
        w.extend(set);
        crashpoint::point!("written");
        Ok(())
    }
    fn judge(&self, w: &Vec<u32>) -> Verdict {
        Verdict::new().count("items", w.len() as u64)
    }
    fn describe(&self, w: &Vec<u32>) -> String {
        format!("{w:?}")
    }
}

/// Two clean runs with the same hits and verdict but different worlds are
/// refused. (Before, they passed: the runs were compared on hits and
/// verdicts only.)
#[test]
fn clean_runs_that_leave_different_worlds_are_refused() {
    let e = sweep::run(&SetOrder, &cfg(1)).unwrap_err();
    let Error::NondeterministicWorld {
        subject,
        how,
        first,
        second,
    } = &e
    else {
        panic!("expected NondeterministicWorld, got {e}");
    };
    assert_eq!(subject, "set order");
    assert_eq!(how, "their descriptions differ");
    assert_ne!(first, second);
    assert!(first.starts_with("line 1: [") && second.starts_with("line 1: ["));
    assert!(e.to_string().contains("HashSet"), "{e}");
}

/// Its world cannot be made (or its making panics).
struct NoWorld {
    panics: bool,
}
impl Subject for NoWorld {
    type World = ();
    fn name(&self) -> String {
        "no world".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        if self.panics {
            panic!("the disk is full");
        }
        Err("the disk is full".into())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// A world that cannot be made is a typed error naming the subject, not a
/// panic out of `sweep::run`. (Before, `Subject::world` could not fail, and
/// a world that panicked panicked out of the sweep.)
#[test]
fn a_world_that_cannot_be_made_is_an_error_naming_the_subject() {
    for panics in [false, true] {
        let e = sweep::run(&NoWorld { panics }, &cfg(1)).unwrap_err();
        let Error::World { subject, error } = &e else {
            panic!("expected World, got {e}");
        };
        assert_eq!(subject, "no world");
        assert!(error.contains("the disk is full"), "{error}");
        assert_eq!(panics, error.contains("panicked"), "{error}");
        assert!(
            e.to_string()
                .starts_with("cannot make a world for \"no world\""),
            "{e}"
        );
    }
    // Rerun alone, it is the same error.
    let one = sweep::rerun(&NoWorld { panics: false }, &cfg(1), "p#1").unwrap_err();
    assert!(
        matches!(&one, Error::World { error, .. } if error.contains("the disk is full")),
        "{one}"
    );
}

/// Its judge notes what it found in `HashSet` order: the same hits and the
/// same counts every time, but notes in another order.
struct NotesInSetOrder;
impl Subject for NotesInSetOrder {
    type World = ();
    fn name(&self) -> String {
        "notes in set order".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("found")]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        let found: std::collections::HashSet<u32> = (0..32).collect();
        found
            .iter()
            .fold(Verdict::new().count("found", found.len() as u64), |v, n| {
                v.note(format!("found {n}"))
            })
    }
}

/// Two clean runs whose verdicts differ only in their notes are refused,
/// and the message shows the notes (the counts alone read the same twice).
/// (Before, the message showed only the counts: `found=32 / found=32`.)
#[test]
fn clean_runs_whose_notes_differ_show_the_notes() {
    let e = sweep::run(&NotesInSetOrder, &cfg(1)).unwrap_err();
    let Error::NondeterministicVerdict { first, second, .. } = &e else {
        panic!("expected NondeterministicVerdict, got {e}");
    };
    assert_ne!(first, second, "{e}");
    assert!(first.starts_with("found=32, notes: [\"found "), "{first}");
}

/// A job with a point behind a feature it never enables: compiled into the
/// program, passed by no clean run, so no scenario crashes there. (A module
/// of its own: points are scoped to the modules the clean run went through.)
mod never_passed {
    use sweep::{Config, Counter, Error, Subject, Verdict};

    pub(super) struct Exporter {
        pub(super) export: bool,
        /// What it declares it never passes ([`Subject::points_not_taken`]).
        pub(super) not_taken: Vec<&'static str>,
    }

    impl Subject for Exporter {
        type World = u32;
        fn name(&self) -> String {
            "exporter".into()
        }
        fn counters(&self) -> Vec<Counter> {
            vec![Counter::new("n")]
        }
        fn world(&self) -> Result<u32, sweep::LifeError> {
            Ok(0)
        }
        fn life(&self, w: &mut u32) -> Result<(), sweep::LifeError> {
            *w += 1;
            crashpoint::point!("saved");
            if self.export {
                crashpoint::point!("exported");
            }
            Ok(())
        }
        fn judge(&self, w: &u32) -> Verdict {
            Verdict::new().count("n", u64::from(*w))
        }
        fn points_not_taken(&self) -> Vec<&'static str> {
            self.not_taken.clone()
        }
    }

    fn exporter(export: bool) -> Exporter {
        Exporter {
            export,
            not_taken: Vec::new(),
        }
    }

    /// A subject that declares the branch it never takes is not warned
    /// about its point, strict or not; a declaration names that point only,
    /// so a point it does not name is still listed.
    #[test]
    fn a_point_declared_not_taken_is_not_listed_and_others_still_are() {
        let strict = Config {
            strict_points: true,
            ..Config::default()
        };
        let declared = Exporter {
            export: false,
            not_taken: vec!["exported"],
        };
        let r = sweep::run(&declared, &strict).unwrap();
        assert!(r.never_passed.is_empty(), "{:?}", r.never_passed);
        let other = Exporter {
            export: false,
            not_taken: vec!["archived"],
        };
        let r = sweep::run(&other, &Config::default()).unwrap();
        assert_eq!(r.never_passed.len(), 1, "{:?}", r.never_passed);
        assert!(r.never_passed[0].starts_with("exported ("));
    }

    #[test]
    fn a_point_the_clean_run_never_passes_is_listed_and_strict_refuses() {
        let dark = sweep::run(&exporter(false), &Config::default()).unwrap();
        assert_eq!(dark.never_passed.len(), 1, "{:?}", dark.never_passed);
        let p = &dark.never_passed[0];
        assert!(p.starts_with("exported (") && p.contains("nets.rs:"), "{p}");
        let strict = Config {
            strict_points: true,
            ..Config::default()
        };
        match sweep::run(&exporter(false), &strict) {
            Err(e @ Error::PointsNeverPassed { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("exported (") && msg.contains("never passed"),
                    "{msg}"
                );
            }
            other => panic!("not refused: {other:?}"),
        }
        // Every point passed: nothing listed, strict sweeps.
        let lit = sweep::run(&exporter(true), &strict).unwrap();
        assert!(lit.never_passed.is_empty());
    }
}

/// Passes a point on a plain thread in its first life only: as another
/// test of the binary would, by chance, while one clean run ran.
struct OnceOnAPlainThread(AtomicU64);
impl Subject for OnceOnAPlainThread {
    type World = ();
    fn name(&self) -> String {
        "once on a plain thread".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("scoped");
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            std::thread::spawn(|| crashpoint::point!("once-on-a-plain-thread"))
                .join()
                .unwrap();
        }
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new()
    }
}

/// A point passed on a plain thread in one clean run but not in the other
/// refuses nothing (a program's own threads pass theirs every time): it is
/// a warning.
#[test]
fn a_plain_pass_in_one_clean_run_only_is_a_warning() {
    if !crate::alone("nets::a_plain_pass_in_one_clean_run_only_is_a_warning") {
        return;
    }
    let r = sweep::run(&OnceOnAPlainThread(AtomicU64::new(0)), &cfg(1)).unwrap();
    assert!(
        r.stray.iter().any(|(n, _)| n == "once-on-a-plain-thread"),
        "{:?}",
        r.stray
    );
}
