//! Shared lives and tallied reports on small subjects: the same report as
//! brute force with fewer lives, refusal of a subject that opts in but is
//! not deterministic, no sharing for a subject that does not opt in, and
//! tallies that give the same rows and failures as keeping every result.

use std::sync::atomic::{AtomicU64, Ordering};

use sweep::{sharing::Fingerprint, Config, Counter, Error, Report, Subject, Verdict};

/// Counts to `n`, saving after each step; a crash between the step and its
/// save repeats the step. Opts in to shared lives when `share`; with
/// `noise`, each fresh world holds a value that differs between worlds (the
/// program does not read it, the judge does not count it, but it is part of
/// the world until the first life clears it); with `life_noise`, each life
/// leaves such a value in the world.
struct Steps {
    n: u32,
    share: bool,
    snapshot: bool,
    noise: Option<&'static AtomicU64>,
    life_noise: Option<&'static AtomicU64>,
    /// No fingerprint for a world saved this many times.
    blind_at: Option<u32>,
    fingerprints: AtomicU64,
}

impl Steps {
    fn new(n: u32) -> Self {
        Steps {
            n,
            share: true,
            snapshot: true,
            noise: None,
            life_noise: None,
            blind_at: None,
            fingerprints: AtomicU64::new(0),
        }
    }
}

#[derive(Clone, Default)]
struct World {
    saved: u32,
    effects: u32,
    starts: u32,
    noise: u64,
}

impl Subject for Steps {
    type World = World;
    fn name(&self) -> String {
        format!("steps to {}", self.n)
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("extra")
                .with_scenarios("with extra")
                .required(),
            Counter::new("starts").titled("starts+").over_clean(),
        ]
    }
    fn world(&self) -> Result<World, sweep::LifeError> {
        Ok(World {
            noise: self.noise.map_or(0, |n| n.fetch_add(1, Ordering::Relaxed)),
            ..World::default()
        })
    }
    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        w.starts += 1;
        w.noise = self
            .life_noise
            .map_or(0, |n| n.fetch_add(1, Ordering::Relaxed));
        while w.saved < self.n {
            w.effects += 1;
            crashpoint::point!("acted");
            w.saved += 1;
            crashpoint::point!("saved");
        }
        Ok(())
    }
    fn judge(&self, w: &World) -> Verdict {
        Verdict::new()
            .count("extra", u64::from(w.effects.saturating_sub(self.n)))
            .count("starts", u64::from(w.starts))
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }
}

impl sweep::sharing::Share<World> for Steps {
    fn copy(&self, w: &World) -> Option<World> {
        (self.share && self.snapshot).then(|| w.clone())
    }
    fn fingerprint(&self, w: &World) -> Option<Fingerprint> {
        self.fingerprints.fetch_add(1, Ordering::Relaxed);
        (self.share && self.blind_at != Some(w.saved)).then(|| {
            Fingerprint::new()
                .observe(&w.saved)
                .observe(&w.noise)
                .judge(&w.effects)
                .judge(&w.starts)
        })
    }
}

fn config(depth: u32) -> Config {
    Config {
        depth,
        threads: Some(2),
        ..Config::default()
    }
}

fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

#[test]
fn shared_lives_give_the_brute_force_report_with_fewer_lives() {
    let s = Steps::new(4);
    for depth in [1, 2, 3] {
        let shared = sweep::run(&s, &config(depth)).unwrap();
        let stats = shared.stats;
        let brute = sweep::run(
            &s,
            &Config {
                share: false,
                ..config(depth)
            },
        )
        .unwrap();
        let brute_stats = brute.stats;
        assert!(stats.shared && !brute_stats.shared);
        assert_eq!(json(&shared), json(&brute), "depth {depth}");
        assert_eq!(stats.scenarios, brute_stats.scenarios);
        // At depth 1 every life runs on a world of its own (and sharing
        // checks its clean run twice more); deeper, the first lives of
        // `[h1, *]` are shared.
        assert!(
            depth == 1 || stats.lives < brute_stats.lives,
            "depth {depth}: {} shared lives, {} brute",
            stats.lives,
            brute_stats.lives
        );
        assert!(
            shared.failures().count() > 0,
            "the subject has a bug to find"
        );
    }
}

#[test]
fn a_subject_that_opts_in_but_is_not_deterministic_is_refused() {
    static NOISE: AtomicU64 = AtomicU64::new(0);
    let s = Steps {
        noise: Some(&NOISE),
        ..Steps::new(3)
    };
    // Its hits are the same every time, and so is the world a life leaves,
    // so the clean runs agree; its fresh worlds are not, so sharing (which
    // compares worlds by fingerprint) would be wrong.
    match sweep::run(&s, &config(2)) {
        Err(e @ Error::NotShareable { .. }) => {
            let text = e.to_string();
            assert!(text.contains("steps to 3"), "{text}");
            assert!(text.contains("--no-share"), "{text}");
        }
        other => panic!("expected NotShareable, got {other:?}"),
    }
    // Brute force sweeps it (its verdicts do not depend on the noise).
    let brute = sweep::run(
        &s,
        &Config {
            share: false,
            ..config(2)
        },
    )
    .unwrap();
    assert!(brute.scenario_count() > 0);
}

#[test]
fn a_subject_without_a_snapshot_is_never_shared() {
    let opted_out = Steps {
        share: false,
        ..Steps::new(3)
    };
    let no_copy = Steps {
        snapshot: false,
        ..Steps::new(3)
    };
    let brute = sweep::run(
        &Steps::new(3),
        &Config {
            share: false,
            ..config(2)
        },
    )
    .unwrap()
    .stats;
    for s in [&opted_out, &no_copy] {
        let stats = sweep::run(s, &config(2)).unwrap().stats;
        assert!(!stats.shared);
        assert_eq!(stats.lives, brute.lives, "every life replayed");
    }
    // Without a snapshot the world is fingerprinted only to compare the
    // clean runs' worlds.
    assert_eq!(
        no_copy.fingerprints.load(Ordering::Relaxed),
        u64::from(config(2).clean_runs)
    );
}

/// Clean runs that pass the same hits and get the same verdicts but leave
/// worlds with different fingerprints are refused, shared or not. (Before,
/// brute force swept such a subject: the clean runs were compared on their
/// hits and verdicts only.)
#[test]
fn clean_runs_whose_worlds_differ_by_fingerprint_are_refused() {
    static NOISE: AtomicU64 = AtomicU64::new(0);
    let s = Steps {
        life_noise: Some(&NOISE),
        ..Steps::new(3)
    };
    for share in [true, false] {
        let e = sweep::run(&s, &Config { share, ..config(2) }).unwrap_err();
        let Error::NondeterministicWorld { subject, how, .. } = &e else {
            panic!("expected NondeterministicWorld, got {e}");
        };
        assert_eq!(subject, "steps to 3");
        assert_eq!(how, "their fingerprints differ");
    }
}

#[test]
fn a_tallied_report_renders_the_same_rows_and_failures() {
    let s = Steps::new(3);
    for share in [false, true] {
        let full = sweep::run(&s, &Config { share, ..config(2) }).unwrap();
        let tallied = sweep::run(
            &s,
            &Config {
                share,
                tally: true,
                ..config(2)
            },
        )
        .unwrap();
        assert!(full.tallies.is_empty());
        assert!(!tallied.tallies.is_empty());
        assert!(tallied.scenarios.len() < full.scenarios.len());
        assert!(tallied.scenarios.iter().all(|r| r.failure.is_some()));
        assert_eq!(sweep::table(&tallied.rows()), sweep::table(&full.rows()));
        let names = |r: &Report| -> Vec<String> {
            r.failures()
                .map(|f| format!("{} {:?}", f.scenario, f.failure))
                .collect()
        };
        assert_eq!(names(&tallied), names(&full));
        assert_eq!(tallied.scenario_count(), full.scenario_count());
        // Tallying after the fact gives the same tallies.
        let mut later = full.clone();
        later.tally_up();
        assert_eq!(json(&later), json(&tallied));
    }
}

#[test]
fn a_counter_required_in_the_config_fails_the_same_scenarios_as_after_the_fact() {
    let s = Steps::new(3);
    let mut after = sweep::run(&s, &config(2)).unwrap();
    after.require("starts").unwrap();
    let during = sweep::run(
        &s,
        &Config {
            tally: true,
            required: vec!["starts".into()],
            ..config(2)
        },
    )
    .unwrap();
    assert_eq!(sweep::table(&during.rows()), sweep::table(&after.rows()));
    let failed = |r: &Report| {
        r.failures()
            .map(|f| f.scenario.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(failed(&during), failed(&after));
    // A tallied report cannot require a counter some passing scenario counts.
    let mut tallied = sweep::run(
        &s,
        &Config {
            tally: true,
            ..config(2)
        },
    )
    .unwrap();
    assert!(matches!(
        tallied.require("starts"),
        Err(Error::Tallied { .. })
    ));
}

/// A tally counts every scenario: by depth, and per counter the scenarios
/// above the baseline and the sum beyond it, as the full report does.
#[test]
fn tallies_count_every_scenario_by_depth_and_counter() {
    let s = Steps::new(3);
    let full = sweep::run(&s, &config(2)).unwrap();
    let tallied = sweep::run(
        &s,
        &Config {
            tally: true,
            ..config(2)
        },
    )
    .unwrap();
    assert_eq!(tallied.tallies.len(), 1);
    let t = &tallied.tallies[0];
    let at = |d: usize| {
        full.scenarios
            .iter()
            .filter(|r| r.scenario.depth() == d)
            .count() as u64
    };
    assert_eq!(t.by_depth, vec![at(1), at(2)]);
    for (i, name) in ["extra", "starts"].into_iter().enumerate() {
        let values: Vec<u64> = full.scenarios.iter().map(|r| full.value(r, name)).collect();
        let above = values.iter().filter(|v| **v > 0).count() as u64;
        assert!(above > 0, "{name} is counted somewhere");
        assert_eq!(t.counters[i].scenarios, above, "{name}");
        assert_eq!(t.counters[i].sum, values.iter().sum::<u64>(), "{name}");
    }
    assert_eq!(t.failed, full.failures().count() as u64);
    assert!(t.failed > 0);
    assert_eq!(t.flaky, 0);
}

/// Copies its world but gives no fingerprint: nothing is
/// shared, every life is replayed, and the report is brute force's.
struct NoFingerprint(Steps);

impl Subject for NoFingerprint {
    type World = World;
    fn name(&self) -> String {
        self.0.name()
    }
    fn counters(&self) -> Vec<Counter> {
        self.0.counters()
    }
    fn world(&self) -> Result<World, sweep::LifeError> {
        self.0.world()
    }
    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        self.0.life(w)
    }
    fn judge(&self, w: &World) -> Verdict {
        self.0.judge(w)
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }
}

impl sweep::sharing::Share<World> for NoFingerprint {
    fn copy(&self, w: &World) -> Option<World> {
        Some(w.clone())
    }
    fn fingerprint(&self, _w: &World) -> Option<Fingerprint> {
        None
    }
}

#[test]
fn a_subject_without_a_fingerprint_is_never_shared() {
    let s = NoFingerprint(Steps::new(3));
    let report = sweep::run(&s, &config(2)).unwrap();
    let stats = report.stats;
    let brute = sweep::run(
        &Steps::new(3),
        &Config {
            share: false,
            ..config(2)
        },
    )
    .unwrap();
    assert!(!stats.shared);
    assert_eq!(json(&report), json(&brute));
}

/// Depth 0 is the clean run alone: nothing to share, one scenario, and the
/// lives of the clean runs only.
#[test]
fn depth_zero_shares_nothing_and_counts_the_clean_run() {
    let s = Steps::new(3);
    let report = sweep::run(&s, &config(0)).unwrap();
    let stats = report.stats;
    assert!(report.scenarios.is_empty());
    assert!(!stats.shared);
    assert_eq!(stats.scenarios, 1);
    assert_eq!(stats.lives, u64::from(Config::default().clean_runs.max(1)));
}

/// Three points a tenth of a second apart: a life long enough for the
/// watchdog to look at it while it runs.
struct Slow;

impl Subject for Slow {
    type World = u32;
    fn name(&self) -> String {
        "slow".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<u32, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, done: &mut u32) -> Result<(), sweep::LifeError> {
        while *done < 3 {
            // A life lasts 150 ms: longer than the watchdog's tick (at
            // most 100 ms), so a deadline that came too early would be
            // seen and the life stopped.
            std::thread::sleep(std::time::Duration::from_millis(50));
            *done += 1;
            crashpoint::point!("step");
        }
        Ok(())
    }
    fn judge(&self, _: &u32) -> Verdict {
        Verdict::new()
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }
}

impl sweep::sharing::Share<u32> for Slow {
    fn copy(&self, w: &u32) -> Option<u32> {
        Some(*w)
    }
    fn fingerprint(&self, w: &u32) -> Option<Fingerprint> {
        Some(Fingerprint::new().observe(w))
    }
}

/// A time limit far off stops no life, shared or replayed: every life's
/// deadline is its start plus the limit.
#[test]
fn a_distant_time_limit_stops_no_life() {
    // The two sweeps only wait on their lives' sleeps: run side by side.
    std::thread::scope(|scope| {
        let sweeps: Vec<_> = [true, false]
            .into_iter()
            .map(|share| {
                let limited = Config {
                    scenario_timeout: Some(std::time::Duration::from_secs(600)),
                    share,
                    ..config(1)
                };
                (share, scope.spawn(move || sweep::run(&Slow, &limited)))
            })
            .collect();
        for (share, sweep) in sweeps {
            let r = sweep.join().unwrap().unwrap();
            let stats = r.stats;
            assert_eq!(stats.shared, share);
            assert_eq!(r.scenarios.len(), 3);
            assert_eq!(
                r.failures().count(),
                0,
                "share {share}: {:?}",
                r.failures().next()
            );
        }
    });
}

/// Changes its world only once its life is over: a crash at any of its
/// three points leaves the fresh world, so every single-crash scenario's
/// final life starts from the same world.
struct Late;

impl Subject for Late {
    type World = bool;
    fn name(&self) -> String {
        "late".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<bool, sweep::LifeError> {
        Ok(false)
    }
    fn life(&self, done: &mut bool) -> Result<(), sweep::LifeError> {
        crashpoint::point!("a");
        crashpoint::point!("b");
        crashpoint::point!("c");
        *done = true;
        Ok(())
    }
    fn judge(&self, _: &bool) -> Verdict {
        Verdict::new()
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }
}

impl sweep::sharing::Share<bool> for Late {
    fn copy(&self, w: &bool) -> Option<bool> {
        Some(*w)
    }
    fn fingerprint(&self, w: &bool) -> Option<Fingerprint> {
        Some(Fingerprint::new().observe(w))
    }
}

/// A final life from a world already seen is not run again: brute force
/// runs the two clean runs and two lives per scenario; shared, the clean
/// runs, the two fresh lives that check the world's fingerprint is
/// repeatable, three crashed lives and one final life for all three.
#[test]
fn a_final_life_from_a_world_seen_before_runs_once() {
    for threads in [1, 2] {
        let shared = Config {
            threads: Some(threads),
            ..config(1)
        };
        let report = sweep::run(&Late, &shared).unwrap();
        let stats = report.stats;
        let brute = Config {
            share: false,
            ..shared.clone()
        };
        let replayed = sweep::run(&Late, &brute).unwrap();
        let brute_stats = replayed.stats;
        assert_eq!(json(&report), json(&replayed));
        assert_eq!(brute_stats.lives, 2 + 3 * 2);
        if threads == 1 {
            // The first scenario is also replayed from a fresh world (two
            // lives), a sample that checks the sharing.
            assert_eq!(stats.lives, 2 + 2 + 3 + 1 + 2);
            // Depth 2: the three parents' final life runs once too, then
            // nine crashed lives from the world they share and one final
            // life after them all.
            let deeper = sweep::run(
                &Late,
                &Config {
                    depth: 2,
                    ..shared.clone()
                },
            )
            .unwrap()
            .stats;
            // And the first scenario at each depth replayed: 2 + 3 lives.
            assert_eq!(deeper.lives, 2 + 2 + 3 + 1 + 9 + 1 + 2 + 3);
        }
        // Two threads may both miss before either has remembered.
        assert!(stats.lives <= 2 + 2 + 3 + 2 + 2, "{stats:?}");
    }
}

/// With no fingerprint for a world saved twice, the scenarios reaching it
/// are replayed from a fresh world, children included, and the report is
/// still brute force's.
#[test]
fn a_world_without_a_fingerprint_is_replayed_with_its_children() {
    for depth in [1, 2] {
        let patchy = Steps {
            blind_at: Some(2),
            ..Steps::new(3)
        };
        let shared = sweep::run(&patchy, &config(depth)).unwrap();
        let stats = shared.stats;
        let brute = Config {
            share: false,
            ..config(depth)
        };
        let replayed = sweep::run(&Steps::new(3), &brute).unwrap();
        assert!(stats.shared);
        assert_eq!(json(&shared), json(&replayed), "depth {depth}");
    }
}

/// Records each boot's life number and whether a crash came before; with
/// `slow_second`, its second life passes a point and then sleeps far past
/// the sweep's time limit, with no point to stop it at.
struct Lives {
    slow_second: bool,
}

impl Subject for Lives {
    type World = Vec<(usize, bool)>;
    fn name(&self) -> String {
        "lives".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("wrong").required()]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok(Vec::new())
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        if self.slow_second && w.len() == 2 {
            crashpoint::point!("recovering");
            std::thread::sleep(std::time::Duration::from_millis(400));
            crashpoint::point!("recovered");
        }
        crashpoint::point!("a");
        crashpoint::point!("b");
        Ok(())
    }
    fn judge(&self, w: &Self::World) -> Verdict {
        let wrong = w
            .iter()
            .enumerate()
            .filter(|(i, (life, after))| *life != i + 1 || *after != (*life > 1))
            .count();
        Verdict::new().count("wrong", wrong as u64)
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<Vec<(usize, bool)>>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<Vec<(usize, bool)>> for Lives {
    fn boot(
        &self,
        w: &mut Vec<(usize, bool)>,
        ctx: &sweep::power::Boot,
    ) -> Result<(), sweep::LifeError> {
        w.push((ctx.life(), ctx.after_crash()));
        Ok(())
    }
}

impl sweep::sharing::Share<Vec<(usize, bool)>> for Lives {
    fn copy(&self, w: &Vec<(usize, bool)>) -> Option<Vec<(usize, bool)>> {
        Some(w.clone())
    }
    fn fingerprint(&self, w: &Vec<(usize, bool)>) -> Option<Fingerprint> {
        Some(Fingerprint::new().observe(w))
    }
}

/// Shared lives are told their number and that a crash came before them,
/// as replayed ones are.
#[test]
fn a_shared_life_knows_its_number_and_whether_a_crash_came_before() {
    let r = sweep::run(&Lives { slow_second: false }, &config(3)).unwrap();
    let stats = r.stats;
    assert!(stats.shared);
    assert_eq!(r.row().depth_counts, [2, 4, 8]);
    let row = r.row();
    assert_eq!((row.failed, row.flaky), (0, 0), "{:?}", r.scenarios.first());
}

/// A shared life stopped for running too long fails its scenario as hung,
/// as without sharing (and a hung scenario has no children).
#[test]
fn a_shared_life_stopped_by_the_time_limit_fails_as_hung() {
    let limited = Config {
        scenario_timeout: Some(std::time::Duration::from_millis(100)),
        ..config(2)
    };
    let s = Lives { slow_second: true };
    // The two sweeps mostly wait on the slow lives: run side by side.
    let brute_config = Config {
        share: false,
        ..limited.clone()
    };
    let (shared, brute) = std::thread::scope(|scope| {
        let shared = scope.spawn(|| sweep::run(&s, &limited));
        let brute = scope.spawn(|| sweep::run(&s, &brute_config));
        (shared.join().unwrap(), brute.join().unwrap())
    });
    let (shared, brute) = (shared.unwrap(), brute.unwrap());
    let stats = shared.stats;
    assert!(stats.shared);
    let names =
        |r: &Report| -> Vec<String> { r.failures().map(|f| f.scenario.to_string()).collect() };
    eprintln!("{:?}", names(&brute));
    assert_eq!(json(&shared), json(&brute));
}

/// Like `Late`, but each boot notes its life's number if it is even (0 if
/// odd): the world a third crash leaves is the world a first one leaves,
/// and only the life number tells the final lives after them apart.
struct Parity;

impl Subject for Parity {
    type World = (bool, u64);
    fn name(&self) -> String {
        "parity".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("last")]
    }
    fn world(&self) -> Result<(bool, u64), sweep::LifeError> {
        Ok((false, 0))
    }
    fn life(&self, w: &mut (bool, u64)) -> Result<(), sweep::LifeError> {
        Late.life(&mut w.0)
    }
    fn judge(&self, w: &(bool, u64)) -> Verdict {
        Verdict::new().count("last", w.1)
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<(bool, u64)>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<(bool, u64)> for Parity {
    fn boot(&self, w: &mut (bool, u64), ctx: &sweep::power::Boot) -> Result<(), sweep::LifeError> {
        let n = ctx.life() as u64;
        w.1 = if n % 2 == 0 { n } else { 0 };
        Ok(())
    }
}

impl sweep::sharing::Share<(bool, u64)> for Parity {
    fn copy(&self, w: &(bool, u64)) -> Option<(bool, u64)> {
        Some(*w)
    }
    fn fingerprint(&self, w: &(bool, u64)) -> Option<Fingerprint> {
        Some(Fingerprint::new().observe(w))
    }
}

/// A remembered final life is one of the same world *and* life number; and
/// progress plans, depth by depth, what shared lives finish.
#[test]
fn remembered_final_lives_are_told_apart_by_their_life_number() {
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&events);
    let told = Config {
        progress: Some(std::sync::Arc::new(move |p| seen.lock().unwrap().push(p))),
        ..config(3)
    };
    let shared = sweep::run(&Parity, &told).unwrap();
    let stats = shared.stats;
    let brute = sweep::run(
        &Parity,
        &Config {
            share: false,
            ..config(3)
        },
    )
    .unwrap();
    assert!(stats.shared);
    assert_eq!(json(&shared), json(&brute));
    let (mut planned, mut finished) = ([0u64; 4], [0u64; 4]);
    for e in events.lock().unwrap().iter() {
        match *e {
            sweep::report::Progress::Planned { depth, count } => planned[depth] += count,
            sweep::report::Progress::Finished { depth } => finished[depth] += 1,
            sweep::report::Progress::Failed { .. } => {}
        }
    }
    assert_eq!(planned, [0, 3, 9, 27]);
    assert_eq!(finished, planned);
}
