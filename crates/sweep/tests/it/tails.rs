//! Shared tails: a leaf's final life that reaches a hit where an earlier
//! life stood with the same behaviour state ends there, and the report is
//! the same byte for byte as brute force; a subject that declares as a
//! tally something its program reads is refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sweep::sharing::{Capture, Fingerprint, Probe, Share, Tally};
use sweep::{Config, Counter, Error, Report, Subject, Verdict};

/// What the program keeps: its saved step and the tool calls it made
/// (which it reads: a budget), and what only the judge counts.
#[derive(Clone, Debug, Default)]
struct Inner {
    saved: u32,
    calls: u32,
    effects: u32,
    starts: u32,
    /// Saved steps reread at starts (a tally: how much a start reread
    /// depends on where the crashes before it fell).
    looks: u32,
}

type World = Arc<Mutex<Inner>>;

/// The tallies: effects, starts and looks.
#[derive(Clone, Copy)]
struct Counts {
    effects: u32,
    starts: u32,
    looks: u32,
}

/// Counts to `n`, calling a tool and causing an effect at each step, then
/// saving; a life that finds it has made more than `n + 1` calls stops
/// with an error (the budget reads the calls).
struct Budget {
    n: u32,
    /// Share tails at all.
    tails: bool,
    /// Declare the calls a tally (wrong: the budget reads them).
    calls_as_tally: bool,
    /// Steps the lives ran (all sweeps of this subject).
    steps: AtomicU64,
    /// Steps by the life of its scenario they ran in (1: the clean run's).
    life_steps: Mutex<Vec<u64>>,
}

impl Budget {
    fn new(n: u32, tails: bool, calls_as_tally: bool) -> Self {
        Budget {
            n,
            tails,
            calls_as_tally,
            steps: AtomicU64::new(0),
            life_steps: Mutex::new(vec![0; 8]),
        }
    }
}

fn lock(w: &World) -> std::sync::MutexGuard<'_, Inner> {
    w.lock().unwrap()
}

impl Subject for Budget {
    type World = World;
    fn name(&self) -> String {
        format!("budget of {}", self.n)
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("extra").with_scenarios("with extra"),
            Counter::new("starts").titled("starts+").over_clean(),
            Counter::new("looks"),
        ]
    }
    fn world(&self) -> Result<World, sweep::LifeError> {
        Ok(World::default())
    }
    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        let life = {
            // A start rereads the steps saved so far.
            let mut i = lock(w);
            i.starts += 1;
            i.looks += i.saved;
            i.starts as usize
        };
        loop {
            let saved = lock(w).saved;
            if saved >= self.n {
                return Ok(());
            }
            self.steps.fetch_add(1, Ordering::Relaxed);
            if let Some(n) = self.life_steps.lock().unwrap().get_mut(life) {
                *n += 1;
            }
            crashpoint::point!("step");
            let calls = {
                let mut i = lock(w);
                i.calls += 1;
                i.calls
            };
            if calls > self.n + 1 {
                return Err("over budget".into());
            }
            lock(w).effects += 1;
            crashpoint::point!("effect");
            lock(w).saved = saved + 1;
        }
    }
    fn judge(&self, w: &World) -> Verdict {
        let i = lock(w);
        Verdict::new()
            .count("extra", u64::from(i.effects - i.saved))
            .count("starts", u64::from(i.starts))
            .count("looks", u64::from(i.looks))
    }
    fn share(&self) -> Option<&dyn Share<World>> {
        Some(self)
    }
}

impl Share<World> for Budget {
    fn copy(&self, w: &World) -> Option<World> {
        Some(Arc::new(Mutex::new(lock(w).clone())))
    }
    fn fingerprint(&self, w: &World) -> Option<Fingerprint> {
        let i = lock(w);
        Some(
            Fingerprint::new()
                .observe(&i.saved)
                .observe(&i.calls)
                .judge(&i.effects)
                .judge(&i.starts)
                .judge(&i.looks),
        )
    }
    fn capture(&self, w: &World) -> Option<Capture<World>> {
        let shared = Arc::clone(w);
        Some(Capture::new(move || {
            Some(Arc::new(Mutex::new(shared.lock().ok()?.clone())))
        }))
    }
    fn probe(&self, w: &World) -> Option<Probe> {
        if !self.tails {
            return None;
        }
        let shared = Arc::clone(w);
        let calls_as_tally = self.calls_as_tally;
        Some(Probe::new(move || {
            let i = shared.lock().ok()?;
            let mut fp = Fingerprint::new().observe(&i.saved);
            if !calls_as_tally {
                fp = fp.observe(&i.calls);
            }
            let counts = Counts {
                effects: i.effects,
                starts: i.starts,
                looks: i.looks,
            };
            Some((fp, Tally::new((counts, i.calls))))
        }))
    }
    fn shift(&self, at: &Tally, from: &Tally, to: &Tally) -> Option<Tally> {
        let (at, at_calls) = *at.get::<(Counts, u32)>()?;
        let (from, from_calls) = *from.get::<(Counts, u32)>()?;
        let (to, to_calls) = *to.get::<(Counts, u32)>()?;
        let counts = Counts {
            effects: to.effects - from.effects + at.effects,
            starts: to.starts - from.starts + at.starts,
            looks: to.looks - from.looks + at.looks,
        };
        Some(Tally::new((counts, to_calls - from_calls + at_calls)))
    }
    fn graft(&self, at: &Tally, from: &Tally, end: &World) -> Option<World> {
        let (at, at_calls) = *at.get::<(Counts, u32)>()?;
        let (from, from_calls) = *from.get::<(Counts, u32)>()?;
        let mut w = lock(end).clone();
        w.effects = w.effects - from.effects + at.effects;
        w.starts = w.starts - from.starts + at.starts;
        w.looks = w.looks - from.looks + at.looks;
        if self.calls_as_tally {
            w.calls = w.calls - from_calls + at_calls;
        }
        Some(Arc::new(Mutex::new(w)))
    }
}

fn config(depth: u32, share: bool, threads: usize) -> Config {
    Config {
        depth,
        share,
        threads: Some(threads),
        ..Config::default()
    }
}

fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

#[test]
fn shared_tails_give_the_brute_force_report_and_run_fewer_steps() {
    for depth in [1, 2, 3] {
        let brute = Budget::new(5, false, false);
        let with = Budget::new(5, true, false);
        let without = Budget::new(5, false, false);
        let expected = json(&sweep::run(&brute, &config(depth, false, 2)).unwrap());
        let r = sweep::run(&with, &config(depth, true, 2)).unwrap();
        assert_eq!(json(&r), expected, "depth {depth}");
        assert!(
            depth == 1
                || r.scenarios.iter().any(|s| s
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.to_string().contains("over budget"))),
            "depth {depth}: the sweep finds lives over budget"
        );
        // One thread: no two lives race to leave the same tail.
        assert_eq!(
            json(&sweep::run(&with, &config(depth, true, 1)).unwrap()),
            expected
        );
        for threads in [1, 2] {
            assert_eq!(
                json(&sweep::run(&without, &config(depth, true, threads)).unwrap()),
                expected
            );
        }
        let (a, b) = (
            with.steps.load(Ordering::Relaxed),
            without.steps.load(Ordering::Relaxed),
        );
        // At depth 1 too: each leaf resumes from another save, and passes
        // `step` fewer times before it stands where an earlier life stood
        // (a position is the point, not how often a life passed it).
        assert!(a < b, "depth {depth}: {a} steps with tails, {b} without");
        // The last parents' final lives (life `depth` of a scenario) end
        // where an earlier parent's life stood, their children derived from
        // that life's children: fewer steps in that life too (the
        // scenarios replayed from fresh worlds to check the declarations
        // are the same with and without tails).
        if depth > 1 {
            let d = depth as usize;
            let (a, b) = (
                with.life_steps.lock().unwrap()[d],
                without.life_steps.lock().unwrap()[d],
            );
            assert!(
                a < b,
                "depth {depth}: life {d} ran {a} steps with tails, {b} without"
            );
        }
    }
}

#[test]
fn a_tally_the_program_reads_is_refused() {
    let s = Budget::new(10, true, true);
    // One thread: the same lives leave tails in every run.
    match sweep::run(&s, &config(2, true, 1)) {
        Err(e @ Error::WronglyShared { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("budget of 10"), "{msg}");
            assert!(msg.contains("when replayed from a fresh world"), "{msg}");
        }
        other => panic!("expected WronglyShared, got {:?}", other.map(|r| r.row())),
    }
    // Declared right, the same sweep passes, as brute force does.
    let right = Budget::new(10, true, false);
    assert_eq!(
        json(&sweep::run(&right, &config(2, true, 1)).unwrap()),
        json(&sweep::run(&right, &config(2, false, 1)).unwrap())
    );
}
