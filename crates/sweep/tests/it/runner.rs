//! The generic runner on small subjects whose every count is known by hand.

use std::sync::atomic::{AtomicBool, Ordering};

use sweep::{scenario::Scenario, Config, Counter, Report, Subject, Verdict};

/// Counts to `n`, saving after each step; a crash between the step and its
/// save repeats the step (an "extra" effect).
struct Counting {
    n: u32,
    save_first: bool,
}

#[derive(Default)]
struct CWorld {
    saved: u32,
    effects: u32,
    starts: u32,
}

impl Subject for Counting {
    type World = CWorld;
    fn name(&self) -> String {
        format!("count to {}", self.n)
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("extra")
                .with_scenarios("with extra")
                .required(),
            Counter::new("starts").titled("starts+").over_clean(),
        ]
    }
    fn world(&self) -> Result<CWorld, sweep::LifeError> {
        Ok(CWorld::default())
    }
    fn life(&self, w: &mut CWorld) -> Result<(), sweep::LifeError> {
        w.starts += 1;
        while w.saved < self.n {
            if self.save_first {
                w.saved += 1;
                crashpoint::point!("saved");
                w.effects += 1;
                crashpoint::point!("acted");
            } else {
                w.effects += 1;
                crashpoint::point!("acted");
                w.saved += 1;
                crashpoint::point!("saved");
            }
        }
        Ok(())
    }
    fn judge(&self, w: &CWorld) -> Verdict {
        let mut v = Verdict::new()
            .count("extra", u64::from(w.effects.saturating_sub(self.n)))
            .count("starts", u64::from(w.starts));
        if w.effects > self.n {
            v = v.note(format!("acted {} times for {} steps", w.effects, self.n));
        }
        v
    }
}

fn run(s: &impl Subject, depth: u32) -> Report {
    sweep::run(
        s,
        &Config {
            depth,
            ..Config::default()
        },
    )
    .unwrap()
}

#[test]
fn scenario_counts_follow_the_hits_of_each_restart() {
    let s = Counting {
        n: 2,
        save_first: false,
    };
    // Clean run: acted#1 saved#1 acted#2 saved#2 — 4 hits.
    // Restarts reach: after acted#1: 4; after saved#1: 2; after acted#2: 2; after saved#2: 0.
    let r = run(&s, 2);
    assert_eq!(r.row().depth_counts, vec![4, 8]);
    // Depth 3 adds, for each double scenario, the hits of its last life.
    let r3 = run(&s, 3);
    assert_eq!(r3.row().depth_counts[..2], [4, 8]);
    assert_eq!(
        r3.scenarios.len() as u64,
        r3.row().depth_counts.iter().sum::<u64>()
    );
    // Depth 0 is the clean run alone.
    assert!(run(&s, 0).scenarios.is_empty());
    // Untraced, a result keeps no lives and no world.
    assert!(r3
        .scenarios
        .iter()
        .all(|s| s.lives.is_empty() && s.world.is_none()));
}

#[test]
fn a_required_counter_fails_the_scenario_with_its_name_and_the_judges_words() {
    let s = Counting {
        n: 2,
        save_first: false,
    };
    let r = run(&s, 1);
    let failed: Vec<(String, String)> = r
        .failures()
        .map(|f| {
            (
                f.scenario.to_string(),
                f.failure
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [
            (
                "acted#1".to_string(),
                "extra = 1; acted 3 times for 2 steps".to_string()
            ),
            (
                "acted#2".to_string(),
                "extra = 1; acted 3 times for 2 steps".to_string()
            ),
        ]
    );
    let row = r.row();
    assert_eq!(row.cells[0], ("with extra".to_string(), 2));
    assert_eq!(row.cells[1], ("extra".to_string(), 2));
    // Every crash scenario starts once more than the clean run.
    assert_eq!(row.cells[2], ("starts+".to_string(), 4));
    // Saving first moves the window: no extra effect anywhere.
    let ok = run(
        &Counting {
            n: 2,
            save_first: true,
        },
        2,
    );
    assert_eq!(ok.failures().count(), 0);
}

#[test]
fn one_thread_or_sixteen_give_the_same_report() {
    let s = Counting {
        n: 5,
        save_first: false,
    };
    let a = sweep::run(
        &s,
        &Config {
            threads: Some(1),
            ..Config::default()
        },
    )
    .unwrap();
    let b = sweep::run(
        &s,
        &Config {
            threads: Some(16),
            ..Config::default()
        },
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(sweep::table(&[a.row()]), sweep::table(&[b.row()]));
}

#[test]
fn merging_every_partition_gives_the_unpartitioned_report() {
    let s = Counting {
        n: 4,
        save_first: false,
    };
    let whole = run(&s, 2);
    for n in [1u32, 2, 3, 7] {
        let parts: Vec<Report> = (1..=n)
            .map(|k| {
                let r = sweep::run(
                    &s,
                    &Config {
                        partition: Some((k, n)),
                        ..Config::default()
                    },
                )
                .unwrap();
                // Through JSON, as partial reports travel between CI machines.
                serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap()
            })
            .collect();
        let total: usize = parts.iter().map(|p| p.scenarios.len()).sum();
        assert_eq!(total, whole.scenarios.len(), "n = {n}");
        let merged = Report::merge(parts).unwrap();
        assert_eq!(merged, whole, "n = {n}");
        assert_eq!(sweep::table(&[merged.row()]), sweep::table(&[whole.row()]));
    }
}

#[test]
fn merge_refuses_missing_or_repeated_shards() {
    let part = |k| shard_of_two_steps(k, 3);
    assert!(Report::merge(vec![part(1), part(2)]).is_err());
    assert!(Report::merge(vec![part(1), part(1), part(2)]).is_err());
    assert!(Report::merge(vec![]).is_err());
    // Shard numbers read from a file: 1/3, 2/3 and "4/3" are three shards of
    // three but shard 3 is missing.
    let mut forged = part(3);
    forged.partition = Some((4, 3));
    assert!(matches!(
        Report::merge(vec![part(1), part(2), forged]),
        Err(sweep::Error::BadPartition { k: 4, n: 3 })
    ));
    let s = Counting {
        n: 2,
        save_first: false,
    };
    assert!(sweep::run(
        &s,
        &Config {
            partition: Some((4, 3)),
            ..Config::default()
        }
    )
    .is_err());
}

#[test]
fn a_scenario_stays_on_its_shard_when_others_are_added() {
    // Growing the program adds scenarios; existing ones keep their shard.
    let shard_of = |n_steps: u32| -> Vec<(String, u32)> {
        let s = Counting {
            n: n_steps,
            save_first: false,
        };
        (1..=3)
            .flat_map(|k| {
                let r = sweep::run(
                    &s,
                    &Config {
                        depth: 1,
                        partition: Some((k, 3)),
                        ..Config::default()
                    },
                )
                .unwrap();
                r.scenarios
                    .into_iter()
                    .map(move |sc| (sc.scenario.to_string(), k))
            })
            .collect()
    };
    let small = shard_of(2);
    // Shards are FNV-1a of the name, the same on every machine and in
    // every version: shard numbers a CI configuration relies on.
    let mut pinned = small.clone();
    pinned.sort();
    assert_eq!(
        pinned,
        [
            ("acted#1", 1),
            ("acted#2", 3),
            ("saved#1", 1),
            ("saved#2", 1)
        ]
        .map(|(n, k)| (n.to_owned(), k))
    );
    let big = shard_of(4);
    for entry in &small {
        assert!(big.contains(entry), "{entry:?} moved");
    }
}

/// A program whose crash point is only reached on the first life.
struct Flaky {
    real_panic: bool,
}

impl Subject for Flaky {
    type World = bool;
    fn name(&self) -> String {
        "flaky".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<bool, sweep::LifeError> {
        Ok(false)
    }
    fn life(&self, started: &mut bool) -> Result<(), sweep::LifeError> {
        let first = !*started;
        *started = true;
        crashpoint::point!("p");
        if self.real_panic && !first {
            panic!("bug on restart");
        }
        Ok(())
    }
    fn judge(&self, _: &bool) -> Verdict {
        Verdict::new()
    }
}

#[test]
fn a_real_panic_fails_its_scenario_by_name() {
    let r = run(&Flaky { real_panic: true }, 1);
    let f: Vec<_> = r.failures().collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].scenario.to_string(), "p#1");
    let msg = f[0]
        .failure
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(msg.contains("panicked: bug on restart"), "{msg}");
}

#[test]
fn a_crash_that_does_not_fire_is_reported_as_not_fired() {
    struct Once(AtomicBool);
    impl Subject for Once {
        type World = ();
        fn name(&self) -> String {
            "once".into()
        }
        fn counters(&self) -> Vec<Counter> {
            vec![]
        }
        fn world(&self) -> Result<(), sweep::LifeError> {
            Ok(())
        }
        fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
            // Only the very first life in the process passes the point: a
            // hidden global, exactly what a world must not be.
            if !self.0.swap(true, Ordering::SeqCst) {
                crashpoint::point!("p");
            }
            Ok(())
        }
        fn judge(&self, _: &()) -> Verdict {
            Verdict::new()
        }
    }
    // With one clean run (the check of two is a safety net of its own,
    // which this program fails: `the_clean_run_runs_twice_and_must_agree`).
    let config = Config {
        depth: 1,
        clean_runs: 1,
        ..Config::default()
    };
    let r = sweep::run(&Once(AtomicBool::new(false)), &config).unwrap();
    // Not the program's failure, and not a pass: counted apart.
    assert_eq!(r.failures().count(), 0);
    let row = r.row();
    assert_eq!((row.failed, row.flaky, row.unfired), (0, 0, 1));
    let f: Vec<_> = r.unfired().collect();
    assert_eq!(f.len(), 1);
    assert!(
        matches!(
            f[0].failure,
            Some(sweep::report::Failure::CrashDidNotFire {
                life: sweep::report::WhichLife::Crashing(1),
                ..
            })
        ),
        "{:?}",
        f[0].failure
    );
    assert!(
        f[0].failure
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
            .contains("did not fire"),
        "{:?}",
        f[0].failure
    );
}

#[test]
fn the_clean_run_must_finish() {
    struct Broken;
    impl Subject for Broken {
        type World = ();
        fn name(&self) -> String {
            "broken".into()
        }
        fn counters(&self) -> Vec<Counter> {
            vec![]
        }
        fn world(&self) -> Result<(), sweep::LifeError> {
            Ok(())
        }
        fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
            Err("no config".into())
        }
        fn judge(&self, _: &()) -> Verdict {
            Verdict::new()
        }
    }
    let e = sweep::run(&Broken, &Config::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no config") && e.contains("broken"), "{e}");
}

#[test]
fn scenarios_print_and_parse_back() {
    for text in [
        "clean",
        "a#1",
        "tracker accepted#2 → mid-save#1",
        "x#3 → y#1 → z#9",
    ] {
        let sc: Scenario = text.parse().unwrap();
        assert_eq!(sc.to_string(), text);
    }
    let ascii: Scenario = "a#1 -> b#2".parse().unwrap();
    assert_eq!(ascii.to_string(), "a#1 → b#2");
    assert!("a → b#1".parse::<Scenario>().is_err());
}

#[test]
fn a_traced_scenario_shows_each_life() {
    let s = Counting {
        n: 1,
        save_first: false,
    };
    let r = sweep::rerun(&s, &sweep::Config::default(), "acted#1").unwrap();
    let t = r.timeline();
    assert!(t.contains("life 1: crashed at acted#1"), "{t}");
    assert!(t.contains("life 2: finished"), "{t}");
    assert!(t.contains("FAILED: extra = 1"), "{t}");
}

/// Every scenario of a report reruns by the name the report prints, to the
/// same verdict; a name that does not parse, and a crash state the subject
/// does not run in, are typed errors.
#[test]
fn a_rerun_takes_the_name_a_report_prints_and_refuses_bad_ones() {
    let s = Counting {
        n: 2,
        save_first: false,
    };
    let config = Config::default();
    let report = sweep::run(&s, &config).unwrap();
    assert!(report.failures().count() > 0);
    for sc in &report.scenarios {
        let again = sweep::rerun(&s, &config, &sc.scenario.to_string()).unwrap();
        assert_eq!(again.scenario, sc.scenario);
        assert_eq!(again.verdict, sc.verdict, "{}", sc.scenario);
        assert_eq!(again.failed(), sc.failed(), "{}", sc.scenario);
        assert!(!again.lives.is_empty(), "a rerun is traced");
    }
    match sweep::rerun(&s, &config, "acted#one") {
        Err(sweep::Error::BadScenario { name, .. }) => assert_eq!(name, "acted#one"),
        other => panic!("not refused as a bad name: {other:?}"),
    }
    match sweep::rerun(&s, &config, "lose: acted#1") {
        Err(sweep::Error::UnknownCrashState { state, known, .. }) => {
            assert_eq!(
                (state.as_str(), known),
                ("lose", vec!["process".to_owned()])
            )
        }
        other => panic!("not refused as an unknown state: {other:?}"),
    }
}

#[test]
fn merge_refuses_a_report_claiming_an_absurd_depth() {
    let s = Counting {
        n: 1,
        save_first: false,
    };
    let mut r = run(&s, 1);
    r.depth = u32::MAX;
    let e = Report::merge(vec![r]).unwrap_err().to_string();
    assert!(e.contains("depth"), "{e}");
}

/// `Counting` with its "extra" counter not required.
struct Lenient(Counting);

impl Subject for Lenient {
    type World = CWorld;
    fn name(&self) -> String {
        self.0.name()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("extra"), Counter::new("starts").over_clean()]
    }
    fn world(&self) -> Result<CWorld, sweep::LifeError> {
        self.0.world()
    }
    fn life(&self, w: &mut CWorld) -> Result<(), sweep::LifeError> {
        self.0.life(w)
    }
    fn judge(&self, w: &CWorld) -> Verdict {
        self.0.judge(w)
    }
}

#[test]
fn a_counter_required_after_the_fact_fails_the_same_scenarios() {
    let counting = || Counting {
        n: 2,
        save_first: false,
    };
    let strict = run(&counting(), 2);
    let mut lenient = run(&Lenient(counting()), 2);
    assert_eq!(lenient.failures().count(), 0);
    lenient.require("extra").unwrap();
    let names = |r: &Report| -> Vec<(String, Option<String>)> {
        r.failures()
            .map(|f| {
                (
                    f.scenario.to_string(),
                    f.failure.as_ref().map(ToString::to_string),
                )
            })
            .collect()
    };
    assert_eq!(names(&lenient), names(&strict));
    assert!(!names(&strict).is_empty());
    // Measured over the clean run: every crash scenario starts once more.
    let mut starts = run(&Lenient(counting()), 1);
    starts.require("starts").unwrap();
    assert_eq!(starts.failures().count(), starts.scenarios.len());
    let e = lenient.require("nope").unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("extra, starts"), "{e}");
}

/// Depth 16 is the deepest a merged report may claim; 17 is refused.
#[test]
fn merge_accepts_depth_16_and_refuses_17() {
    let s = Counting {
        n: 1,
        save_first: false,
    };
    let mut r = run(&s, 1);
    r.depth = 16;
    assert!(Report::merge(vec![r.clone()]).is_ok());
    r.depth = 17;
    let e = Report::merge(vec![r]).unwrap_err().to_string();
    assert!(e.contains("claims depth 17"), "{e}");
}

/// Shards that differ in any one of subject, depth, counters, crash states
/// or clean run are not one sweep.
#[test]
fn merge_refuses_shards_of_different_sweeps() {
    let part = |k| shard_of_two_steps(k, 2);
    assert!(Report::merge(vec![part(1), part(2)]).is_ok());
    type Change = (&'static str, fn(&mut Report));
    let changes: [Change; 5] = [
        ("different sweeps", |r| r.subject.push('!')),
        ("different sweeps", |r| r.depth = 1),
        ("different sweeps", |r| {
            r.counters.pop().map(drop).unwrap_or(())
        }),
        ("different crash states", |r| r.states[0].title.push('!')),
        ("clean runs", |r| r.clean.verdict.notes.push("other".into())),
    ];
    for (why, change) in changes {
        let mut other = part(2);
        change(&mut other);
        let e = Report::merge(vec![part(1), other]).unwrap_err().to_string();
        assert!(e.contains(why), "{why}: {e}");
    }
}

/// Unscoped points reported by several shards are listed once.
#[test]
fn merge_lists_each_unscoped_point_once() {
    let part = |k, unscoped: &[(&str, u64)]| {
        let mut r = shard_of_two_steps(k, 2);
        r.unscoped = unscoped
            .iter()
            .map(|(n, c)| ((*n).to_owned(), *c))
            .collect();
        r
    };
    let merged = Report::merge(vec![
        part(1, &[("stray", 1)]),
        part(2, &[("stray", 1), ("other", 2)]),
    ])
    .unwrap();
    assert_eq!(
        merged.unscoped,
        [("stray".to_owned(), 1), ("other".to_owned(), 2)]
    );
}

/// A `:` after a hit belongs to a hit's name: only a prefix before every
/// hit names a crash state.
#[test]
fn a_colon_after_the_first_hit_is_part_of_a_hits_name() {
    for name in ["a#1 → b:c#2", "a#1 -> b:c#2"] {
        let sc: Scenario = name.parse().unwrap();
        assert!(sc.state.is_process(), "{name}");
        assert_eq!(sc.to_string(), "a#1 → b:c#2");
    }
    let sc: Scenario = "lose: a#1 → b:c#2".parse().unwrap();
    assert_eq!(sc.state.name(), "lose");
    assert_eq!(sc.to_string(), "lose: a#1 → b:c#2");
}

/// Records what each boot is told.
struct Booted;

impl Subject for Booted {
    type World = Vec<(usize, bool)>;
    fn name(&self) -> String {
        "booted".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("boots"), Counter::new("wrong").required()]
    }
    fn world(&self) -> Result<Vec<(usize, bool)>, sweep::LifeError> {
        Ok(Vec::new())
    }
    fn life(&self, _: &mut Vec<(usize, bool)>) -> Result<(), sweep::LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, w: &Vec<(usize, bool)>) -> Verdict {
        let want: Vec<(usize, bool)> = (1..=w.len()).map(|n| (n, n > 1)).collect();
        Verdict::new()
            .count("boots", w.len() as u64)
            .count("wrong", u64::from(*w != want))
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<Vec<(usize, bool)>>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<Vec<(usize, bool)>> for Booted {
    fn boot(
        &self,
        w: &mut Vec<(usize, bool)>,
        ctx: &sweep::power::Boot,
    ) -> Result<(), sweep::LifeError> {
        w.push((ctx.life(), ctx.after_crash()));
        Ok(())
    }
}

/// Each life is told its number and whether the one before it crashed.
#[test]
fn each_life_knows_its_number_and_whether_a_crash_came_before() {
    let r = sweep::rerun(&Booted, &sweep::Config::default(), "p#1 → p#1").unwrap();
    assert!(!r.failed(), "{}", r.timeline());
    assert_eq!(r.verdict.counts[0], ("boots".to_owned(), 3));
    // Without a `describe`, the world says nothing.
    let t = sweep::rerun(&Booted, &sweep::Config::default(), "p#1")
        .unwrap()
        .timeline();
    assert_eq!(
        t,
        "scenario: p#1\nlife 1: crashed at p#1\n    p#1  ← crash\nlife 2: finished\n    p#1\n\
         judge: boots=2 wrong=0\nworld:\nok\n"
    );
    let report = sweep::run(&Booted, &Config::default()).unwrap();
    assert_eq!(report.failures().count(), 0);
    assert_eq!(report.clean.verdict.counts[0], ("boots".to_owned(), 1));
}

/// Shard `k` of `n` of a sweep of `Counting` to 2.
fn shard_of_two_steps(k: u32, n: u32) -> Report {
    let s = Counting {
        n: 2,
        save_first: false,
    };
    sweep::run(
        &s,
        &Config {
            partition: Some((k, n)),
            ..Config::default()
        },
    )
    .unwrap()
}

/// Starts a second life once a crash came, and cannot read what the first
/// one left: every recovery stops with an error. It counts nothing it
/// requires; "lost" is there to be required by a config.
struct Stumbles;

impl Subject for Stumbles {
    type World = u32;
    fn name(&self) -> String {
        "stumbles".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("lost")]
    }
    fn world(&self) -> Result<u32, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, lives: &mut u32) -> Result<(), sweep::LifeError> {
        *lives += 1;
        if *lives > 1 {
            return Err("cannot read what the last life saved".into());
        }
        crashpoint::point!("a");
        crashpoint::point!("b");
        Ok(())
    }
    fn judge(&self, _: &u32) -> Verdict {
        Verdict::new().count("lost", 0)
    }
}

/// A counter the config requires is judged only where nothing else failed:
/// a scenario that stopped with an error stays failed, by that error, when
/// the required counter is zero (in kept and in tallied reports).
#[test]
fn a_required_counter_at_zero_keeps_a_scenarios_own_failure() {
    for tally in [false, true] {
        let config = Config {
            depth: 1,
            tally,
            required: vec!["lost".into()],
            ..Config::default()
        };
        let r = sweep::run(&Stumbles, &config).unwrap();
        let stats = r.stats;
        assert!(!r.clean.failed());
        let failed: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
        assert_eq!(failed, ["a#1", "b#1"], "tally {tally}");
        for s in r.failures() {
            let msg = s
                .failure
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                msg.contains("cannot read what the last life saved"),
                "{msg}"
            );
        }
        assert_eq!(r.row().failed, 2, "tally {tally}");
        // Every scenario is counted, the clean run too.
        assert_eq!(stats.scenarios, 3, "tally {tally}");
    }
}

/// `Counting` with its over-clean "starts" counter required as well.
struct StartsRequired;

impl Subject for StartsRequired {
    type World = CWorld;
    fn name(&self) -> String {
        "starts required".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("extra").required(),
            Counter::new("starts").over_clean().required(),
        ]
    }
    fn world(&self) -> Result<CWorld, sweep::LifeError> {
        Ok(CWorld::default())
    }
    fn life(&self, w: &mut CWorld) -> Result<(), sweep::LifeError> {
        COUNT_TO_2.life(w)
    }
    fn judge(&self, w: &CWorld) -> Verdict {
        COUNT_TO_2.judge(w)
    }
}

const COUNT_TO_2: Counting = Counting {
    n: 2,
    save_first: false,
};

/// A counter measured over the clean run is zero in the clean run itself,
/// so requiring it never fails the clean run (it used to: its one start,
/// measured over nothing, was reported as "starts = 1"), whether the
/// subject or the config requires it; every crash scenario starts again,
/// and fails.
#[test]
fn a_required_counter_over_the_clean_run_passes_the_clean_run() {
    for required in [vec![], vec!["extra".to_owned()]] {
        let config = Config {
            depth: 1,
            required,
            ..Config::default()
        };
        let r = sweep::run(&StartsRequired, &config).unwrap();
        assert_eq!(r.clean.failure, None, "{:?}", config.required);
        assert_eq!(r.row().depth_counts, vec![4]);
        assert_eq!(r.row().failed, 4, "{:?}", config.required);
    }
}

/// Its restart finishes at once, passing no point.
struct QuickRecovery;

impl Subject for QuickRecovery {
    type World = bool;
    fn name(&self) -> String {
        "quick recovery".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<bool, sweep::LifeError> {
        Ok(false)
    }
    fn life(&self, started: &mut bool) -> Result<(), sweep::LifeError> {
        if std::mem::replace(started, true) {
            return Ok(());
        }
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &bool) -> Verdict {
        Verdict::new()
    }
}

/// A traced final life that passes no point is still in the timeline.
#[test]
fn a_final_life_without_hits_is_traced() {
    let r = sweep::rerun(&QuickRecovery, &sweep::Config::default(), "p#1").unwrap();
    assert!(!r.failed(), "{}", r.timeline());
    assert_eq!(r.lives.len(), 2, "{}", r.timeline());
    assert!(r.lives[1].hits.is_empty());
    assert_eq!(r.lives[1].end, "finished");
}
