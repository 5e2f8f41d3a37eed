//! Shared lives with captures: each restart starts from the world copied at
//! its crash hit in the parent's final life, about one life per scenario,
//! and the same report byte for byte as brute force at depths 1 to 3; a
//! subject whose capture or fingerprint misses part of its world is refused
//! with a clear error, never averaged into the table.

use std::sync::{Arc, Mutex};

use sweep::sharing::{Capture, Fingerprint, Share};
use sweep::{Config, Counter, Error, Report, Subject, Verdict};

/// What the program keeps: its saved step, the effects it caused, its
/// starts; shared with the world's capture through the `Arc`.
#[derive(Clone, Debug, Default)]
struct Inner {
    saved: u32,
    effects: u32,
    starts: u32,
}

type World = Arc<Mutex<Inner>>;

/// How a subject declares its sharing wrongly.
#[derive(Clone, Copy, PartialEq)]
enum Wrong {
    Nothing,
    /// The capture forgets the effects caused so far.
    CaptureForgetsEffects,
    /// The fingerprint leaves out the saved step, which each life reads.
    FingerprintMissesSaved,
}

/// Counts to `n`, causing an effect and then saving at each step: a crash
/// between the effect and its save repeats the effect.
struct Steps {
    n: u32,
    wrong: Wrong,
}

fn lock(w: &World) -> std::sync::MutexGuard<'_, Inner> {
    w.lock().unwrap()
}

impl Subject for Steps {
    type World = World;
    fn name(&self) -> String {
        format!("steps to {}", self.n)
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("extra").with_scenarios("with extra"),
            Counter::new("starts").titled("starts+").over_clean(),
        ]
    }
    fn world(&self) -> Result<World, sweep::LifeError> {
        Ok(World::default())
    }
    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        lock(w).starts += 1;
        loop {
            let saved = lock(w).saved;
            if saved >= self.n {
                return Ok(());
            }
            crashpoint::point!("step");
            lock(w).effects += 1;
            crashpoint::point!("effect");
            lock(w).saved = saved + 1;
        }
    }
    fn judge(&self, w: &World) -> Verdict {
        let i = lock(w);
        Verdict::new()
            .count("extra", u64::from(i.effects - self.n))
            .count("starts", u64::from(i.starts))
    }
    fn share(&self) -> Option<&dyn Share<World>> {
        Some(self)
    }
}

impl Share<World> for Steps {
    fn copy(&self, w: &World) -> Option<World> {
        Some(Arc::new(Mutex::new(lock(w).clone())))
    }
    fn fingerprint(&self, w: &World) -> Option<Fingerprint> {
        let i = lock(w);
        let fp = Fingerprint::new().judge(&i.effects).observe(&i.starts);
        Some(match self.wrong {
            Wrong::FingerprintMissesSaved => fp,
            _ => fp.observe(&i.saved),
        })
    }
    fn capture(&self, w: &World) -> Option<Capture<World>> {
        let shared = Arc::clone(w);
        let forget = self.wrong == Wrong::CaptureForgetsEffects;
        Some(Capture::new(move || {
            let mut copy = shared.lock().ok()?.clone();
            if forget {
                copy.effects = 0;
            }
            Some(Arc::new(Mutex::new(copy)))
        }))
    }
}

fn config(depth: u32, share: bool) -> Config {
    Config {
        depth,
        share,
        threads: Some(2),
        ..Config::default()
    }
}

fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

#[test]
fn captured_restarts_give_the_brute_force_report_with_about_one_life_per_scenario() {
    let s = Steps {
        n: 4,
        wrong: Wrong::Nothing,
    };
    for depth in [1, 2, 3] {
        let shared = sweep::run(&s, &config(depth, true)).unwrap();
        let stats = shared.stats;
        let brute = sweep::run(&s, &config(depth, false)).unwrap();
        let brute_stats = brute.stats;
        assert!(stats.shared && !brute_stats.shared);
        assert_eq!(json(&shared), json(&brute), "depth {depth}");
        assert_eq!(stats.scenarios, brute_stats.scenarios);
        assert!(
            shared.scenarios.iter().any(|r| r.verdict.get("extra") > 0),
            "the sweep finds the extra effects"
        );
        if depth == 3 {
            // Brute force runs about depth + 1 lives per scenario; with
            // captures, at most one (the sample replayed from fresh worlds,
            // the clean runs and the checks of the captures included).
            let per = |lives: u64| lives as f64 / stats.scenarios as f64;
            assert!(per(brute_stats.lives) > 3.5, "{brute_stats:?}");
            // Without captures each scenario runs its crashed life again
            // (above one life per scenario here, 1.3); with them, no
            // crashed life runs, and leaves reaching a world seen before
            // run no final life either.
            assert!(per(stats.lives) < 0.8, "{stats:?} vs {brute_stats:?}");
        }
    }
}

#[test]
fn a_capture_that_misses_part_of_the_world_is_refused() {
    let s = Steps {
        n: 4,
        wrong: Wrong::CaptureForgetsEffects,
    };
    match sweep::run(&s, &config(2, true)) {
        Err(e @ Error::WronglyShared { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("steps to 4"), "{msg}");
            assert!(
                msg.contains("differs from the world a crash there leaves"),
                "{msg}"
            );
            assert!(msg.contains("Config::share = false"), "{msg}");
        }
        other => panic!("expected WronglyShared, got {:?}", other.map(|r| r.row())),
    }
    // Brute force does not use the declaration: it sweeps as ever.
    assert!(sweep::run(&s, &config(2, false)).is_ok());
}

#[test]
fn a_fingerprint_that_misses_what_a_life_reads_is_refused() {
    let s = Steps {
        n: 6,
        wrong: Wrong::FingerprintMissesSaved,
    };
    for threads in [1, 2] {
        let c = Config {
            threads: Some(threads),
            ..config(2, true)
        };
        match sweep::run(&s, &c) {
            Err(e @ Error::WronglyShared { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("when replayed from a fresh world"), "{msg}");
            }
            other => panic!("expected WronglyShared, got {:?}", other.map(|r| r.row())),
        }
    }
}
