//! The five designs swept in more ways than the book chapter's table (that
//! table is `tests/crash_sweep.rs`, a test target of its own).

use designs::{Design, Script, Storage};
use sweep::{Config, Report};

fn script() -> Script {
    Script::load(designs::default_script_path()).expect("the triage job loads")
}

fn sweep(design: Design, threads: Option<usize>) -> Report {
    let config = Config {
        threads,
        ..Config::default()
    };
    sweep::run(&design.subject(&script(), Storage::Memory), &config).expect("sweep runs")
}

fn cell(row: &sweep::report::Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title}"))
}

/// "Save once per turn: duplicates at 8 of 18 crash points"; "save as soon
/// as the model replies: … duplicates still show up at 9 of 34".
#[test]
fn duplicates_land_at_the_seeds_crash_points() {
    for (design, with_dups, points) in [
        (Design::SaveOncePerTurn, 8, 18),
        (Design::SaveAfterReply, 9, 34),
    ] {
        let config = Config {
            depth: 1,
            ..Config::default()
        };
        let r = sweep::run(&design.subject(&script(), Storage::Memory), &config).unwrap();
        let dup_points = r
            .scenarios
            .iter()
            .filter(|s| r.value(s, "dups") > 0)
            .count();
        assert_eq!(
            (dup_points, r.scenarios.len()),
            (with_dups, points),
            "{design:?}"
        );
        // Each is a crash after the tracker took a request and before the
        // save that records it (a half-done save included).
        for s in r.scenarios.iter().filter(|s| r.value(s, "dups") > 0) {
            assert!(
                matches!(
                    &*s.scenario.hits[0].point,
                    "tracker accepted" | "tool returned" | "mid-save"
                ),
                "{}",
                s.scenario
            );
        }
    }
}

#[test]
fn one_thread_or_sixteen_give_the_same_table() {
    let a = sweep::table(&[sweep(Design::KeysMarkers, Some(1)).row()]);
    let b = sweep::table(&[sweep(Design::KeysMarkers, Some(16)).row()]);
    assert_eq!(a, b);
}

#[test]
fn every_scenario_crashed_where_it_says_and_finished() {
    for design in Design::ALL {
        let r = sweep(design, None);
        let failed: Vec<String> = r
            .failures()
            .map(|s| format!("{}: {:?}", s.scenario, s.failure))
            .collect();
        assert!(failed.is_empty(), "{design:?}: {failed:?}");
    }
}

#[test]
fn a_real_directory_gives_the_same_counts_as_memory() {
    let config = Config {
        depth: 1,
        ..Config::default()
    };
    for design in [Design::SaveAfterReply, Design::Markers] {
        let mem = sweep::run(&design.subject(&script(), Storage::Memory), &config).unwrap();
        let disk = sweep::run(&design.subject(&script(), Storage::Disk), &config).unwrap();
        assert_eq!(mem.row(), disk.row());
    }
}

/// The timeline `cargo xtask sweep --scenario` prints, compared with its
/// reviewed snapshot (`snapshots/the_timeline_of_a_duplicating_scenario.txt`
/// beside this file; `CRASHSWEEP_BLESS=1` rewrites it): the crash after the
/// tracker took issue A and before the turn's save files A twice.
#[test]
fn the_timeline_of_a_duplicating_scenario() {
    let subject = Design::SaveOncePerTurn.subject(&script(), Storage::Memory);
    let result = sweep::rerun(&subject, &sweep::Config::default(), "tracker accepted#1").unwrap();
    assert!(result.failure.is_none());
    assert_eq!(result.verdict.get("dups"), 1);
    let snapshot = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/snapshots/the_timeline_of_a_duplicating_scenario.txt");
    if let Err(diff) = sweep::report::snapshot::check(&snapshot, &result.timeline()) {
        panic!("{diff}");
    }
}

/// The designs run any scripted job (`--script`): on a one-call job every
/// count can be worked out by hand.
#[test]
fn a_one_call_job_counts_as_worked_out_by_hand() {
    let job = r#"{"name": "one", "replies": [
        [{"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a"}}],
        []
    ]}"#;
    let script = Script::parse(job, std::path::Path::new("one.json")).unwrap();
    let config = Config {
        depth: 1,
        ..Config::default()
    };
    // Start save (2), reply arrived, tracker accepted, tool returned,
    // end-of-turn save (2), reply arrived, done save (2) = 10 points; the
    // second design adds a reply save (2) and a result save (2) with
    // `result saved`; the marker designs a marker save (2) and `marker saved`.
    // Duplicates land after the tracker took the request and before the save
    // that records it: accepted, returned, and the half-done save.
    for (design, points, with_dups, asks) in [
        (Design::SaveOncePerTurn, 10, 3, 0),
        (Design::SaveAfterReply, 15, 3, 0),
        (Design::Keys, 15, 0, 0),
        (Design::Markers, 18, 0, 5),
        (Design::KeysMarkers, 18, 0, 0),
    ] {
        let row = sweep::run(&design.subject(&script, Storage::Memory), &config)
            .unwrap()
            .row();
        assert_eq!(
            (
                row.depth_counts[0],
                cell(&row, "with dups"),
                cell(&row, "asks"),
                cell(&row, "missing")
            ),
            (points, with_dups, asks, 0),
            "{design:?}"
        );
    }
}

/// The judge keys a comment by the issue it is on and its body: two
/// comments with one body on two different issues are two effects, so the
/// clean run counts no duplicate (it once counted `dups=2`).
/// The clean run of `job` duplicates nothing and misses nothing, in every
/// design.
fn clean_run_is_exact(job: &str, what: &str) {
    let script = Script::parse(job, std::path::Path::new("job.json")).unwrap();
    let config = Config {
        depth: 0,
        ..Config::default()
    };
    for design in Design::ALL {
        let report = sweep::run(&design.subject(&script, Storage::Memory), &config).unwrap();
        let counted = |c: &str| report.clean.verdict.counts.iter().any(|(k, _)| k == c);
        assert!(counted("dups") && counted("missing"), "{design:?}");
        assert_eq!(
            (
                report.value(&report.clean, "dups"),
                report.value(&report.clean, "missing")
            ),
            (0, 0),
            "{design:?}: the clean run of a job with {what}"
        );
    }
}

#[test]
fn two_comments_with_one_body_on_two_issues_are_no_duplicate() {
    let job = r#"{"name": "same-body", "replies": [
        [{"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a"}},
         {"id": "c2", "tool": "issue_file", "args": {"title": "B", "body": "b"}}],
        [{"id": "c3", "tool": "issue_comment", "args": {"issue": "c1", "body": "x"}},
         {"id": "c4", "tool": "issue_comment", "args": {"issue": "c2", "body": "x"}}],
        []
    ]}"#;
    clean_run_is_exact(job, "one comment body on two issues");
}

/// An issue is its title and its body: two issues with one title (or one
/// body) are two effects, each made once, and so are comments with one body
/// on each of them.
#[test]
fn two_issues_with_one_title_or_one_body_are_no_duplicate() {
    let job = r#"{"name": "same-title", "replies": [
        [{"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a"}},
         {"id": "c2", "tool": "issue_file", "args": {"title": "A", "body": "b"}},
         {"id": "c3", "tool": "issue_file", "args": {"title": "B", "body": "b"}}],
        [{"id": "c4", "tool": "issue_comment", "args": {"issue": "c1", "body": "x"}},
         {"id": "c5", "tool": "issue_comment", "args": {"issue": "c2", "body": "x"}},
         {"id": "c6", "tool": "issue_comment", "args": {"issue": "c3", "body": "x"}}],
        []
    ]}"#;
    clean_run_is_exact(job, "two issues of one title");
}

/// A design's world in plain memory has copies, so its sweep shares lives
/// (and gives brute force's report); on a real directory or under power
/// loss it has none, and every life is replayed.
#[test]
fn memory_worlds_share_lives_and_disk_or_power_worlds_do_not() {
    let shallow = Config {
        depth: 1,
        ..Config::default()
    };
    for design in Design::ALL {
        let subject = design.subject(&script(), Storage::Memory);
        let shared = sweep::run(&subject, &shallow).unwrap();
        let stats = shared.stats;
        assert!(stats.shared, "{design:?}");
        let brute = Config {
            share: false,
            ..shallow.clone()
        };
        assert_eq!(shared, sweep::run(&subject, &brute).unwrap(), "{design:?}");
    }
    let disk = Design::KeysMarkers.subject(&script(), Storage::Disk);
    assert!(!sweep::run(&disk, &shallow).unwrap().stats.shared);
    let power = designs::variants::power(
        Design::KeysMarkers,
        designs::Writer::Real,
        durable::testing::DiskState::LoseUnsynced,
    );
    let stats = sweep::run(&power.subject(&script()), &shallow)
        .unwrap()
        .stats;
    assert!(!stats.shared);
    // In memory, but behind a fault injector, or with a tracker that
    // crashes from its own files: no copy either.
    let faults = Design::KeysMarkers
        .subject(&script(), Storage::Memory)
        .with_faults(Vec::new());
    let stats = sweep::run(&faults, &shallow).unwrap().stats;
    assert!(!stats.shared, "a world with a fault injector");
    let tracker =
        designs::variants::tracker_crash(Design::KeysMarkers, tracker::LogLayout::KeysInLog);
    let stats = sweep::run(&tracker.subject(&script()), &shallow)
        .unwrap()
        .stats;
    assert!(!stats.shared, "a world with a crashing tracker");
    // Each world says so itself, by its copy and by its fingerprint.
    assert_eq!(
        copies(&Design::KeysMarkers.subject(&script(), Storage::Memory)),
        (true, true)
    );
    assert_eq!(copies(&disk), (false, false), "on disk");
    assert_eq!(copies(&power.subject(&script())), (false, false), "power");
    assert_eq!(copies(&faults), (false, false), "faults");
    assert_eq!(
        copies(&tracker.subject(&script())),
        (false, false),
        "tracker"
    );
}

/// Every counter a subject declares has a name of its own, and the book
/// chapter's sweep declares none of the harder worlds' tallies.
#[test]
fn counters_are_declared_once() {
    use sweep::Subject;
    let names = |s: &designs::DesignSubject| -> Vec<String> {
        s.counters().into_iter().map(|c| c.name).collect()
    };
    let mut subjects: Vec<(String, designs::DesignSubject)> = Design::ALL
        .iter()
        .map(|d| (format!("{d:?}"), d.subject(&script(), Storage::Memory)))
        .collect();
    for v in designs::variants::power_variants()
        .into_iter()
        .chain(designs::variants::model_variants())
        .chain(designs::variants::person_variants())
        .chain(designs::variants::tracker_variants())
    {
        subjects.push((v.title(), v.subject(&script())));
    }
    for (title, s) in &subjects {
        let n = names(s);
        let mut unique = n.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), n.len(), "{title}: {n:?}");
    }
    for (title, s) in subjects.iter().take(Design::ALL.len()) {
        let n = names(s);
        for tally in ["lost saves", "stopped", "wrong answers"] {
            assert!(!n.iter().any(|x| x == tally), "{title}: {n:?}");
        }
    }
}

/// Run `f`, a life outside any sweep, in a recording scope of its own as a
/// sweep would: its points are recorded, not passes outside any scope,
/// which another test's sweep running meanwhile would count (and refuse).
fn lived<R>(f: impl FnOnce() -> R) -> R {
    match crashpoint::record(f).outcome {
        crashpoint::Outcome::Finished(r) => r,
        crashpoint::Outcome::Crashed(hit) => panic!("the life crashed at {hit}"),
        crashpoint::Outcome::Panicked(m) => panic!("the life panicked: {m}"),
    }
}

/// Whether a world after a clean life has a copy and a fingerprint.
fn copies<S: sweep::Subject>(s: &S) -> (bool, bool) {
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    let Some(share) = s.share() else {
        return (false, false);
    };
    (share.copy(&w).is_some(), share.fingerprint(&w).is_some())
}

/// A design's loop has no restart limit of its own: a run crashed more
/// times than durable's default limit (ten) still finishes, once.
#[test]
fn many_crashes_in_a_row_do_not_reach_a_restart_limit() {
    use sweep::Subject;
    for design in Design::ALL {
        let s = design.subject(&script(), Storage::Memory);
        let mut w = s.world().unwrap();
        for i in 1..=12 {
            let life =
                crashpoint::crash_at(crashpoint::Hit::new("reply arrived", 1), || s.life(&mut w));
            assert!(
                life.outcome.crashed().is_some(),
                "{design:?} life {i}: {:?}",
                life.outcome
            );
        }
        lived(|| s.life(&mut w)).unwrap_or_else(|e| panic!("{design:?}: the thirteenth life: {e}"));
        let v = s.judge(&w);
        assert!(
            v.counts.iter().any(|(k, _)| k == "missing"),
            "{design:?}: {v:?}"
        );
        assert_eq!(v.get("missing"), 0, "{design:?}: {:?}", v.notes);
    }
}

/// A marker saved before a call goes out carries the call's key when the
/// design sends keys, and none when it does not; the world's description
/// says which.
#[test]
fn a_marker_carries_the_key_its_design_sends() {
    use sweep::Subject;
    for (design, want) in [
        (Design::KeysMarkers, "with its key"),
        (Design::Markers, "no key"),
    ] {
        let s = design.subject(&script(), Storage::Memory);
        let mut w = s.world().unwrap();
        let life = crashpoint::crash_at(crashpoint::Hit::new("marker saved", 1), || s.life(&mut w));
        assert!(
            life.outcome.crashed().is_some(),
            "{design:?}: {:?}",
            life.outcome
        );
        let d = s.describe(&w);
        let markers: Vec<&str> = d.lines().filter(|l| l.contains("marker ")).collect();
        assert_eq!(markers.len(), 1, "{design:?}: {d}");
        assert!(markers[0].ends_with(want), "{design:?}: {d}");
    }
}

/// After a life that ends without a crash the subject shuts its power-loss
/// directory down, so a boot right after it cuts nothing. (A sweep never
/// boots again after such a life; a subject that restarts at once shows it.)
#[test]
fn a_clean_shutdown_is_no_power_cut() {
    use std::sync::Mutex;
    use sweep::{
        power::{Boot, CrashState},
        Counter, LifeError, Subject, Verdict,
    };
    struct Restarts {
        inner: designs::DesignSubject,
        cuts: Mutex<Vec<(String, String)>>,
    }
    fn cuts(d: &str) -> String {
        d.lines().filter(|l| l.starts_with("power cuts")).collect()
    }
    impl Subject for Restarts {
        type World = designs::World;
        fn name(&self) -> String {
            self.inner.name()
        }
        fn counters(&self) -> Vec<Counter> {
            self.inner.counters()
        }
        fn world(&self) -> Result<designs::World, sweep::LifeError> {
            self.inner.world()
        }
        fn life(&self, w: &mut designs::World) -> Result<(), LifeError> {
            self.inner.life(w)
        }
        fn judge(&self, w: &designs::World) -> Verdict {
            self.inner.judge(w)
        }

        fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<designs::World>> {
            Some(self)
        }
    }

    impl sweep::power::PowerCuts<designs::World> for Restarts {
        fn crash_states(&self) -> Vec<CrashState> {
            self.inner.crash_states()
        }

        fn default_crash_states(&self) -> Vec<CrashState> {
            self.inner.default_crash_states()
        }

        fn boot(&self, w: &mut designs::World, ctx: &Boot) -> Result<(), LifeError> {
            self.inner.boot(w, ctx)
        }

        fn shutdown(&self, w: &mut designs::World, ctx: &Boot) {
            self.inner.shutdown(w, ctx);
            let before = cuts(&self.inner.describe(w));
            let booted = self.inner.boot(w, ctx);
            assert!(booted.is_ok());
            let after = cuts(&self.inner.describe(w));
            self.cuts.lock().unwrap().push((before, after));
        }
    }
    let s = Restarts {
        inner: designs::variants::power(
            Design::KeysMarkers,
            designs::Writer::Real,
            durable::testing::DiskState::LoseUnsynced,
        )
        .subject(&script()),
        cuts: Mutex::new(Vec::new()),
    };
    let config = Config {
        depth: 0,
        ..Config::default()
    };
    sweep::run(&s, &config).expect("the clean run finishes");
    let cuts = s.cuts.into_inner().unwrap();
    assert!(!cuts.is_empty());
    for (before, after) in cuts {
        assert!(before.starts_with("power cuts: 0 ("), "{before}");
        assert_eq!(before, after);
    }
}

#[test]
fn a_subject_keeps_the_modes_it_is_given() {
    let modes = designs::Modes {
        keys: true,
        ..designs::Modes::default()
    };
    let s = Design::SaveOncePerTurn
        .subject(&script(), Storage::Memory)
        .with_modes(modes.clone());
    assert_eq!(s.modes(), &modes);
}

/// A power cut by hand (the fault sweep's) is a cut the world counts; a
/// world without power loss has nothing to cut.
#[test]
fn a_cut_by_hand_is_counted() {
    use sweep::Subject;
    let s = designs::variants::power(
        Design::KeysMarkers,
        designs::Writer::Real,
        durable::testing::DiskState::LoseUnsynced,
    )
    .subject(&script());
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    assert!(
        s.describe(&w).contains("\npower cuts: 0 ("),
        "{}",
        s.describe(&w)
    );
    w.power_cut();
    assert!(
        s.describe(&w).contains("\npower cuts: 1 ("),
        "{}",
        s.describe(&w)
    );
    let plain = Design::KeysMarkers.subject(&script(), Storage::Memory);
    let mut w = plain.world().unwrap();
    lived(|| plain.life(&mut w)).expect("the clean run finishes");
    w.power_cut();
    assert!(!plain.describe(&w).contains("power cuts"));
}

/// The five designs share one loop: each passes every point of it but those
/// on branches it never takes (a marker save, a save after each result), and
/// names those, so a strict sweep of its clean run passes and `cargo xtask
/// sweep` prints no warning. Each name it gives is a point of the loop.
#[test]
fn every_design_passes_its_points_or_names_the_branch_it_never_takes() {
    use sweep::Subject;
    let strict = Config {
        depth: 0,
        strict_points: true,
        ..Config::default()
    };
    let linked = crashpoint::points::linked();
    let mut named = 0;
    for design in Design::ALL {
        let subject = design.subject(&script(), Storage::Memory);
        let report = sweep::run(&subject, &strict).unwrap_or_else(|e| panic!("{design:?}: {e}"));
        assert!(
            report.never_passed.is_empty(),
            "{design:?}: {:?}",
            report.never_passed
        );
        for name in subject.points_not_taken() {
            named += 1;
            assert!(
                linked
                    .iter()
                    .any(|s| s.name == name && s.module.starts_with("designs::")),
                "{design:?} names {name:?}, no point of the loop"
            );
        }
    }
    // save once per turn: neither; save after the reply and + keys: no marker.
    assert_eq!(named, 4);
}
