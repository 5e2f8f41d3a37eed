//! An enumerating crash state: each crash's power cut may leave several
//! disks, every one a scenario named by its disk, rerun by name alone.

use sweep::{
    power::{Boot, CrashState},
    scenario::Scenario,
    Config, Counter, Subject, Verdict,
};

const ALL: CrashState = CrashState::named("all");

/// Two points per life. A crash's cut may leave 3 disks after the first
/// crash and 2 after the second; the world remembers which it kept. Disk 2
/// of the first crash is "bad".
struct Disks;

#[derive(Default)]
struct World {
    running: bool,
    chosen: Vec<u32>,
    last: Option<u32>,
}

impl Subject for Disks {
    type World = World;
    fn name(&self) -> String {
        "disks".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("bad").required()]
    }
    fn world(&self) -> Result<World, sweep::LifeError> {
        Ok(World::default())
    }
    fn life(&self, _: &mut World) -> Result<(), sweep::LifeError> {
        crashpoint::point!("a");
        crashpoint::point!("b");
        Ok(())
    }
    fn judge(&self, w: &World) -> Verdict {
        Verdict::new().count("bad", u64::from(w.chosen.first() == Some(&2)))
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<World>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<World> for Disks {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS, ALL]
    }

    fn enumerates(&self, state: &CrashState) -> bool {
        *state == ALL
    }

    fn boot(&self, w: &mut World, ctx: &Boot) -> Result<(), sweep::LifeError> {
        w.last = None;
        if std::mem::replace(&mut w.running, true) {
            let n = if w.chosen.is_empty() { 3 } else { 2 };
            w.chosen.push(ctx.disk().unwrap_or(0).min(n - 1));
            w.last = Some(n);
        }
        Ok(())
    }

    fn shutdown(&self, w: &mut World, _: &Boot) {
        w.running = false;
    }

    fn crash_disks(&self, w: &World) -> Option<u32> {
        w.last
    }
}

fn cfg(depth: u32, states: Vec<CrashState>) -> Config {
    Config {
        depth,
        crash_states: states,
        ..Config::default()
    }
}

#[test]
fn every_disk_of_every_crash_is_a_scenario_named_by_its_disk() {
    let r = sweep::run(&Disks, &cfg(2, vec![ALL])).unwrap();
    let names: Vec<String> = r.scenarios.iter().map(|s| s.scenario.to_string()).collect();
    // Depth 1: 2 hits × 3 disks; depth 2: each of those × 2 hits × 2 disks.
    assert_eq!(names.len(), 6 + 6 * 2 * 2, "{names:#?}");
    assert_eq!(names[0], "all: a#1 (disk 0)");
    assert_eq!(names[1], "all: a#1 (disk 1)");
    assert_eq!(names[2], "all: a#1 (disk 2)");
    assert!(names.contains(&"all: b#1 (disk 1) → a#1 (disk 1)".to_owned()));
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "no scenario twice");
    // Disk 2 of the first crash fails, whatever follows: 2 hits at depth 1,
    // 2 × 2 × 2 at depth 2.
    let failing: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
    assert_eq!(failing.len(), 2 + 8, "{failing:#?}");
    assert!(
        failing.iter().all(|n| n.contains("#1 (disk 2)")),
        "{failing:#?}"
    );
    // 2 first crashes of 3 disks, 6 × 2 second crashes of 2.
    let c = sweep::power::CrashDisks::of(&r, &ALL);
    assert_eq!((c.scenarios, c.crashes, c.max, c.median), (30, 14, 3, 2));
}

#[test]
fn a_scenario_reruns_from_its_name_with_the_same_disks() {
    for name in ["all: a#1 (disk 2)", "all: b#1 (disk 2) → a#1 (disk 1)"] {
        let sc: Scenario = name.parse().unwrap();
        assert_eq!(sc.to_string(), name);
        let r = sweep::rerun(&Disks, &sweep::Config::default(), name).unwrap();
        assert!(r.failed(), "{name}: {}", r.timeline());
    }
    let sc: Scenario = "all: a#1 (disk 1) → b#1 (disk 1)".parse().unwrap();
    assert_eq!(sc.disks, [1, 1]);
    assert!(
        !sweep::rerun(&Disks, &sweep::Config::default(), &sc.to_string())
            .unwrap()
            .failed()
    );
}

#[test]
fn a_state_that_does_not_enumerate_keeps_its_plain_names() {
    let r = sweep::run(&Disks, &cfg(2, vec![CrashState::PROCESS])).unwrap();
    assert_eq!(r.scenarios.len(), 2 + 2 * 2);
    assert!(r.scenarios.iter().all(|s| s.scenario.disks.is_empty()));
    assert_eq!(r.scenarios[0].scenario.to_string(), "a#1");
}

#[test]
fn a_name_with_a_disk_on_some_hits_only_is_refused() {
    assert!("all: a#1 (disk 1) → b#1".parse::<Scenario>().is_err());
    assert!("all: a#1 (disk x)".parse::<Scenario>().is_err());
}

/// A crash at the k-th of five hits leaves k disks: the median of 1..=5
/// disks is 3, the most 5.
struct Graded;

#[derive(Default)]
struct Steps {
    running: bool,
    at: u32,
    last: Option<u32>,
}

impl Subject for Graded {
    type World = Steps;
    fn name(&self) -> String {
        "graded".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("bad")]
    }
    fn world(&self) -> Result<Steps, sweep::LifeError> {
        Ok(Steps::default())
    }
    fn life(&self, w: &mut Steps) -> Result<(), sweep::LifeError> {
        for k in 1..=5 {
            w.at = k;
            crashpoint::point!("step");
        }
        Ok(())
    }
    fn judge(&self, _: &Steps) -> Verdict {
        Verdict::new().count("bad", 0)
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<Steps>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<Steps> for Graded {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![ALL]
    }

    fn enumerates(&self, state: &CrashState) -> bool {
        *state == ALL
    }

    fn boot(&self, w: &mut Steps, _: &Boot) -> Result<(), sweep::LifeError> {
        w.last = std::mem::replace(&mut w.running, true).then_some(w.at);
        Ok(())
    }

    fn shutdown(&self, w: &mut Steps, _: &Boot) {
        w.running = false;
    }

    fn crash_disks(&self, w: &Steps) -> Option<u32> {
        w.last
    }
}

#[test]
fn crash_disks_counts_the_median_and_the_most_disks_per_crash() {
    let r = sweep::run(&Graded, &cfg(1, vec![ALL])).unwrap();
    let c = sweep::power::CrashDisks::of(&r, &ALL);
    assert_eq!((c.scenarios, c.crashes, c.max, c.median), (15, 5, 5, 3));
    assert_eq!(
        sweep::power::CrashDisks::of(&r, &CrashState::PROCESS),
        sweep::power::CrashDisks::default()
    );
}

/// Progress plans every scenario it finishes, the other disks of a crash
/// included, and never plans an empty batch: per depth, planned ==
/// finished == the report's count.
#[test]
fn progress_plans_each_disk_scenario_it_runs() {
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&events);
    let config = Config {
        progress: Some(std::sync::Arc::new(move |p| seen.lock().unwrap().push(p))),
        ..cfg(2, vec![ALL])
    };
    let r = sweep::run(&Disks, &config).unwrap();
    let events = events.lock().unwrap().clone();
    let (mut planned, mut finished) = ([0u64; 3], [0u64; 3]);
    for e in &events {
        match *e {
            sweep::report::Progress::Planned { depth, count } => {
                assert!(count > 0, "an empty batch planned at depth {depth}");
                planned[depth] += count;
            }
            sweep::report::Progress::Finished { depth } => finished[depth] += 1,
            sweep::report::Progress::Failed { .. } => {}
        }
    }
    assert_eq!(planned, [0, 6, 24]);
    assert_eq!(finished, planned);
    assert_eq!(r.row().depth_counts, [6, 24]);
}

/// Says a power cut left one more disk than it has booted before, whether
/// or not a crash came: the runner must ask only after a crash.
struct Eager;

impl Subject for Eager {
    type World = u32;
    fn name(&self) -> String {
        "eager".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<u32, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, _: &mut u32) -> Result<(), sweep::LifeError> {
        crashpoint::point!("a");
        crashpoint::point!("b");
        Ok(())
    }
    fn judge(&self, _: &u32) -> Verdict {
        Verdict::new()
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<u32>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<u32> for Eager {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![ALL]
    }

    fn enumerates(&self, _: &CrashState) -> bool {
        true
    }

    fn boot(&self, boots: &mut u32, _: &Boot) -> Result<(), sweep::LifeError> {
        *boots += 1;
        Ok(())
    }

    fn crash_disks(&self, boots: &u32) -> Option<u32> {
        Some(*boots + 1)
    }
}

#[test]
fn disks_are_asked_for_only_after_a_crash() {
    let r = sweep::run(&Eager, &cfg(1, vec![ALL])).unwrap();
    // The boot after the crash is the second: 3 disks for each of 2 hits.
    assert_eq!(r.row().depth_counts, [6]);
    assert_eq!(r.scenarios[2].scenario.to_string(), "all: a#1 (disk 2)");
}
