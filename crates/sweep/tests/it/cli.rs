//! The command line of `sweep::cli`: parsing, exit codes, the snapshot and
//! --bless under CI, the JSON documents, shards and merge.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sweep::cli::{App, Env, Levels, EXIT_FAILED, EXIT_PASSED, EXIT_USAGE};
use sweep::{report::Progress, Counter, LifeError, Subject, Verdict};

/// Moves 10 coins from `a` to `b`; `careful` saves its progress with the
/// debit, the hasty one after it.
struct Transfer {
    careful: bool,
}

#[derive(Default)]
struct Coins {
    a: i64,
    b: i64,
    step: u8,
}

impl Subject for Transfer {
    type World = Coins;
    fn name(&self) -> String {
        if self.careful {
            "careful transfer"
        } else {
            "hasty transfer"
        }
        .into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("created").required()]
    }
    fn world(&self) -> Result<Coins, sweep::LifeError> {
        Ok(Coins {
            a: 10,
            ..Coins::default()
        })
    }
    fn life(&self, w: &mut Coins) -> Result<(), LifeError> {
        if w.step == 0 {
            if self.careful {
                // The debit and the progress saved as one write.
                (w.a, w.step) = (w.a - 10, 1);
                crashpoint::point!("saved");
            } else {
                w.a -= 10;
                crashpoint::point!("debited");
                w.step = 1;
            }
        }
        if w.step == 1 {
            w.b += 10;
            w.step = 2;
            crashpoint::point!("credited");
        }
        Ok(())
    }
    fn judge(&self, w: &Coins) -> Verdict {
        let created = (w.a + w.b - 10).unsigned_abs();
        let v = Verdict::new().count("created", created);
        if created > 0 {
            v.note(format!("{created} coins appeared or vanished"))
        } else {
            v
        }
    }
}

/// A world of another type, in the same list.
struct Counter2;
impl Subject for Counter2 {
    type World = u32;
    fn name(&self) -> String {
        "tally".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("n")]
    }
    fn world(&self) -> Result<u32, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, w: &mut u32) -> Result<(), LifeError> {
        *w += 1;
        crashpoint::point!("counted");
        Ok(())
    }
    fn judge(&self, w: &u32) -> Verdict {
        Verdict::new().count("n", u64::from(*w))
    }
}

fn app(snapshot: Option<PathBuf>) -> App {
    let app = App::new("mysweep")
        .subject(Transfer { careful: true })
        .subject_in("lose", Transfer { careful: false })
        .subject(Counter2);
    match snapshot {
        Some(p) => app.snapshot(p),
        None => app,
    }
}

fn run_env(app: &App, args: &[&str], env: &Env) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = std::iter::once("mysweep").chain(args.iter().copied());
    let code = app.run(argv, env, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn run(args: &[&str]) -> (u8, String, String) {
    run_env(&app(None), args, &Env::default())
}

/// A new, empty directory of this test's own, removed when dropped: what a
/// test finds in it is what the test put there (a directory named after
/// the process id can be left over from a process of the same id).
fn temp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("sweep-cli-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn help_documents_the_exit_codes_and_bad_flags_exit_2() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, EXIT_PASSED);
    assert!(
        out.contains("Exit codes:") && out.contains("--bless refused under CI"),
        "{out}"
    );
    for bad in [&["--depth", "x"][..], &["--partition", "3/2"], &["--nope"]] {
        let (code, _, err) = run(bad);
        assert_eq!(code, EXIT_USAGE, "{bad:?}: {err}");
    }
    let (_, _, err) = run(&["--partition", "0/3"]);
    assert!(err.contains("expected K/N"), "{err}");
}

#[test]
fn list_names_every_subject_and_state() {
    let (code, out, _) = run(&["--list"]);
    assert_eq!(code, EXIT_PASSED);
    for needle in [
        "careful-transfer",
        "hasty-transfer",
        "tally",
        "lose",
        "crash states: process, lose",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
}

#[test]
fn a_passing_sweep_exits_0_and_a_failing_one_1_naming_the_rerun() {
    let (code, out, err) = run(&["careful-transfer", "tally"]);
    assert_eq!(code, EXIT_PASSED, "{err}");
    assert!(out.contains("careful transfer") && out.contains("tally") && !out.contains("hasty"));
    let (code, _, err) = run(&["--crash-state", "lose", "--depth", "1", "--threads", "1"]);
    assert_eq!(code, EXIT_FAILED);
    assert!(err.contains("FAILED hasty transfer / debited#1"), "{err}");
    assert!(
        err.contains("rerun: mysweep hasty-transfer --scenario \"debited#1\""),
        "{err}"
    );
    assert!(!err.contains("Some(") && !err.contains("None"), "{err}");
    let (code, _, err) = run(&["nobody"]);
    assert_eq!(code, EXIT_USAGE);
    assert!(err.contains("no subject is named \"nobody\""), "{err}");
    let (code, _, err) = run(&["--crash-state", "torn"]);
    assert_eq!(code, EXIT_USAGE);
    assert!(err.contains("the states are process, lose"), "{err}");
}

#[test]
fn a_scenario_reruns_with_its_timeline_as_text_and_as_json() {
    let (code, out, _) = run(&["hasty-transfer", "--scenario", "debited#1"]);
    assert_eq!(code, EXIT_FAILED);
    assert!(
        out.contains("subject: hasty transfer") && out.contains("debited#1  ← crash"),
        "{out}"
    );
    let (code, out, _) = run(&[
        "hasty-transfer",
        "--scenario",
        "debited#1",
        "--format",
        "json",
    ]);
    assert_eq!(code, EXIT_FAILED);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sc = &v["scenarios"][0];
    let keys: Vec<&str> = sc.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["subject", "scenario", "passed", "failure", "lives", "counts", "notes", "world"]
    );
    assert_eq!(sc["scenario"], "debited#1");
    assert_eq!(sc["passed"], false);
    assert_eq!(sc["counts"]["created"], 10);
    assert_eq!(sc["lives"][0]["crash"], "debited#1");
    assert_eq!(sc["lives"][1]["crash"], serde_json::Value::Null);
    assert_eq!(sc["lives"][1]["end"], "finished");
    let (code, _, err) = run(&["--scenario", "a#b#c"]);
    assert_eq!(code, EXIT_USAGE, "{err}");
}

#[test]
fn json_sweeps_follow_the_documented_schema() {
    let (code, out, _) = run(&["hasty-transfer", "--format", "json", "--depth", "1"]);
    assert_eq!(code, EXIT_FAILED);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(top, ["rows", "failures"]);
    let row: Vec<&str> = v["rows"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(row, ["variant", "once", "created"]);
    let f = &v["failures"][0];
    let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "subject",
            "scenario",
            "reason",
            "flaky",
            "not_fired",
            "rerun"
        ]
    );
    assert_eq!(
        (&f["flaky"], &f["not_fired"]),
        (&false.into(), &false.into())
    );
    assert_eq!(f["scenario"], "debited#1");
}

#[test]
fn shards_merge_into_the_whole_table_and_a_refused_shard_names_its_file() {
    let tmp = temp("shards");
    let dir = tmp.path();
    let (_, whole, _) = run(&["hasty-transfer"]);
    let mut files = Vec::new();
    for k in 1..=2 {
        let (_, out, _) = run(&[
            "hasty-transfer",
            "--partition",
            &format!("{k}/2"),
            "--format",
            "json",
        ]);
        let f = dir.join(format!("shard-{k}.json"));
        std::fs::write(&f, out).unwrap();
        files.push(f.to_string_lossy().into_owned());
    }
    let (code, merged, err) = run(&["merge", &files[0], &files[1]]);
    assert_eq!(code, EXIT_FAILED, "{err}");
    assert_eq!(merged, whole);
    let (code, _, err) = run(&["merge", &files[0], &files[0]]);
    assert_eq!(code, EXIT_USAGE);
    assert!(
        err.contains("shard-1.json: shard 1/2 of hasty transfer is also in"),
        "{err}"
    );
    assert!(!err.contains("Some("), "{err}");
    std::fs::write(dir.join("bad.json"), "{}").unwrap();
    let bad = dir.join("bad.json").to_string_lossy().into_owned();
    let (code, _, err) = run(&["merge", &bad]);
    assert_eq!(code, EXIT_USAGE);
    assert!(err.contains("bad.json: no partial reports"), "{err}");
    let (code, _, err) = run(&["merge", &files[0]]);
    assert_eq!(code, EXIT_USAGE);
    assert!(err.contains("shard-1.json"), "{err}");
}

#[test]
fn the_snapshot_is_checked_and_bless_is_refused_only_under_a_true_ci() {
    let tmp = temp("snap");
    let dir = tmp.path();
    let snap = dir.join("table.txt");
    let app = app(Some(snap.clone()));
    let env = |ci: Option<&str>| Env {
        ci: ci.map(str::to_owned),
        progress: false,
    };
    // No snapshot yet: the run fails on it.
    let (code, _, err) = run_env(&app, &[], &env(None));
    assert_eq!(code, EXIT_FAILED);
    assert!(err.contains("table.txt does not exist"), "{err}");
    for ci in ["true", "1", "yes"] {
        let (code, _, err) = run_env(&app, &["--bless"], &env(Some(ci)));
        assert_eq!(code, EXIT_USAGE, "CI={ci}");
        assert!(err.contains("refused under CI"), "{err}");
        assert!(!snap.exists());
    }
    for ci in [Some("false"), Some("0"), Some(""), None] {
        let _ = std::fs::remove_file(&snap);
        let (_, table, err) = run_env(&app, &["--bless"], &env(ci));
        assert!(err.contains("wrote"), "CI={ci:?}: {err}");
        assert_eq!(std::fs::read_to_string(&snap).unwrap(), table);
    }
    // Blessed: the same run now meets its snapshot (the hasty transfer
    // still fails its scenarios, so the code stays 1, with no diff).
    let (code, _, err) = run_env(&app, &[], &env(Some("true")));
    assert_eq!(code, EXIT_FAILED);
    assert!(!err.contains("snapshot"), "{err}");
    std::fs::write(&snap, "old\n").unwrap();
    let (_, _, err) = run_env(&app, &[], &env(None));
    assert!(err.contains("- old"), "{err}");
    // A run that is not the registered one is not compared, and cannot bless.
    let (code, _, err) = run_env(&app, &["--depth", "1", "--bless"], &env(None));
    assert_eq!(code, EXIT_USAGE);
    assert!(
        err.contains("--bless rewrites the reviewed snapshot"),
        "{err}"
    );
}

#[test]
fn the_progress_bar_counts_one_level_whose_total_is_final() {
    let mut levels = Levels::default();
    levels.note(Progress::Planned { depth: 1, count: 2 });
    assert_eq!(levels.current(), Some((1, 0, 2)));
    levels.note(Progress::Finished { depth: 1 });
    levels.note(Progress::Planned { depth: 2, count: 3 });
    assert_eq!(levels.current(), Some((1, 1, 2)));
    levels.note(Progress::Finished { depth: 2 });
    levels.note(Progress::Finished { depth: 1 });
    levels.note(Progress::Planned { depth: 2, count: 1 });
    // Level 1 is done: level 2's total (4) cannot grow any more.
    assert_eq!(levels.current(), Some((2, 1, 4)));
    for _ in 0..3 {
        levels.note(Progress::Finished { depth: 2 });
    }
    assert_eq!(levels.current(), None);

    // The runner's events add up to its scenarios, level by level.
    let events = Arc::new(Mutex::new(Levels::default()));
    let seen = Arc::clone(&events);
    let config = sweep::Config {
        progress: Some(Arc::new(move |p| seen.lock().unwrap().note(p))),
        ..sweep::Config::default()
    };
    let report = sweep::run(&Transfer { careful: false }, &config).unwrap();
    assert_eq!(events.lock().unwrap().current(), None);
    assert_eq!(
        report.scenarios.len(),
        report.row().depth_counts.iter().sum::<u64>() as usize
    );
}

/// Sends one message to a receiver that outlives every crash, then marks
/// it sent. The mark is never synced: in the `forget` crash state a crash
/// loses it, and the restart sends again (a duplicate). A process crash
/// keeps it.
struct Marker;

#[derive(Default)]
struct Mailbox {
    sent: u64,
    marked: bool,
    /// The mark as the disk holds it (never synced: always `false`).
    synced: bool,
    running: bool,
}

const FORGET: sweep::power::CrashState = sweep::power::CrashState::named("forget");

impl Subject for Marker {
    type World = Mailbox;
    fn name(&self) -> String {
        "marker".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("dups").required()]
    }
    fn world(&self) -> Result<Mailbox, sweep::LifeError> {
        Ok(Mailbox::default())
    }
    fn life(&self, w: &mut Mailbox) -> Result<(), LifeError> {
        if !w.marked {
            crashpoint::point!("sending");
            w.sent += 1;
            w.marked = true;
            crashpoint::point!("marked");
        }
        Ok(())
    }
    fn judge(&self, w: &Mailbox) -> Verdict {
        Verdict::new().count("dups", w.sent.saturating_sub(1))
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<Mailbox>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<Mailbox> for Marker {
    fn crash_states(&self) -> Vec<sweep::power::CrashState> {
        vec![sweep::power::CrashState::PROCESS, FORGET]
    }

    fn boot(&self, w: &mut Mailbox, ctx: &sweep::power::Boot) -> Result<(), LifeError> {
        if w.running && *ctx.state() == FORGET {
            w.marked = w.synced;
        }
        w.running = true;
        Ok(())
    }

    fn shutdown(&self, w: &mut Mailbox, _: &sweep::power::Boot) {
        w.running = false;
    }
}

fn states_app() -> App {
    App::new("mysweep").subject(Marker).subject(Counter2)
}

#[test]
fn crash_state_drives_the_dimension_of_a_subject_with_several_states() {
    let env = Env::default();
    let (code, out, _) = run_env(&states_app(), &["--list"], &env);
    assert_eq!(code, EXIT_PASSED);
    assert!(out.contains("process,forget (default process)"), "{out}");
    assert!(out.contains("crash states: process, forget"), "{out}");

    // No --crash-state: the default state alone, which passes.
    let (code, out, err) = run_env(&states_app(), &["marker"], &env);
    assert_eq!(code, EXIT_PASSED, "{err}");
    assert!(
        out.contains("| marker ") && !out.contains("forget"),
        "{out}"
    );

    // --crash-state forget sweeps that state (Config::crash_states), whose
    // scenario names and rerun hints carry it; `tally` has no such state
    // and is left out.
    let (code, out, err) = run_env(&states_app(), &["--crash-state", "forget"], &env);
    assert_eq!(code, EXIT_FAILED, "{err}");
    assert!(
        out.contains("marker | forget") && !out.contains("tally"),
        "{out}"
    );
    assert!(
        err.contains("FAILED marker / forget: marked#1: dups = 1"),
        "{err}"
    );
    assert!(
        err.contains("rerun: mysweep marker --scenario \"forget: marked#1\""),
        "{err}"
    );

    // Both states: one row each.
    let (code, out, _) = run_env(
        &states_app(),
        &["marker", "--crash-state", "process,forget"],
        &env,
    );
    assert_eq!(code, EXIT_FAILED);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("| marker")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows[0].starts_with("| marker ") && rows[1].starts_with("| marker | forget"),
        "{out}"
    );
}

#[test]
fn a_scenario_name_with_its_state_reruns_from_the_name_alone() {
    let env = Env::default();
    let (code, out, _) = run_env(&states_app(), &["--scenario", "forget: marked#1"], &env);
    assert_eq!(code, EXIT_FAILED, "{out}");
    assert!(
        out.contains("subject: marker")
            && out.contains("scenario: forget: marked#1")
            && out.contains("marked#1  ← crash")
            && !out.contains("subject: tally"),
        "{out}"
    );
    // The same crash in the process state keeps the mark.
    let (code, out, _) = run_env(&states_app(), &["marker", "--scenario", "marked#1"], &env);
    assert_eq!(code, EXIT_PASSED, "{out}");
    // No subject runs in a state nobody has.
    let (code, _, err) = run_env(
        &states_app(),
        &["tally", "--scenario", "forget: counted#1"],
        &env,
    );
    assert_eq!(code, EXIT_USAGE);
    assert!(
        err.contains("no subject runs in crash state forget"),
        "{err}"
    );
}

#[test]
fn the_progress_bar_starts_afresh_for_each_crash_state() {
    let events = Arc::new(Mutex::new(Levels::default()));
    let max_total = Arc::new(Mutex::new(0));
    let (seen, max) = (Arc::clone(&events), Arc::clone(&max_total));
    let config = sweep::Config {
        crash_states: vec![sweep::power::CrashState::PROCESS, FORGET],
        depth: 1,
        progress: Some(Arc::new(move |p| {
            let mut l = seen.lock().unwrap();
            l.note(p);
            if let Some((_, _, total)) = l.current() {
                let mut m = max.lock().unwrap();
                *m = (*m).max(total);
            }
        })),
        ..sweep::Config::default()
    };
    sweep::run(&Marker, &config).unwrap();
    let l = events.lock().unwrap();
    assert_eq!(l.state(), 2, "the second state started afresh");
    // Each state's level 1 is the clean run's 2 hits, never 4.
    assert_eq!(*max_total.lock().unwrap(), 2);
}

/// Merged shards of a passing subject exit 0 (a failing one exits 1, above).
#[test]
fn merged_shards_of_a_passing_sweep_exit_0() {
    let tmp = temp("passing-shards");
    let dir = tmp.path();
    let mut files = Vec::new();
    for k in 1..=2 {
        let (code, out, err) = run(&[
            "careful-transfer",
            "--partition",
            &format!("{k}/2"),
            "--format",
            "json",
        ]);
        assert_eq!(code, EXIT_PASSED, "{err}");
        let f = dir.join(format!("shard-{k}.json"));
        std::fs::write(&f, out).unwrap();
        files.push(f.to_string_lossy().into_owned());
    }
    let (code, merged, err) = run(&["merge", &files[0], &files[1]]);
    assert_eq!(code, EXIT_PASSED, "{err}");
    assert_eq!(merged, run(&["careful-transfer"]).1);
    assert!(err.is_empty(), "{err}");
}

/// `--list` names a subject's default states only when it has more states
/// than defaults.
#[test]
fn list_shows_defaults_only_where_some_states_are_not_default() {
    let line = |out: &str, slug: &str| -> String {
        out.lines()
            .find(|l| l.trim_start().starts_with(slug))
            .unwrap_or_else(|| panic!("{slug} in {out}"))
            .to_owned()
    };
    let (_, out, _) = run_env(&states_app(), &["--list"], &Env::default());
    assert!(line(&out, "marker").contains("process,forget (default process)"));
    assert!(!line(&out, "tally").contains("(default"), "{out}");
    let (_, out, _) = run(&["--list"]);
    for slug in ["careful-transfer", "hasty-transfer", "tally"] {
        assert!(!line(&out, slug).contains("(default"), "{out}");
    }
}

#[test]
fn artifacts_hold_each_failure_with_its_rerun_timeline_verdict_and_world() {
    let dir = temp("artifacts");
    let at = dir.path().join("out");
    let at_s = at.to_str().unwrap();
    let args = [
        "hasty-transfer",
        "--crash-state",
        "lose",
        "--depth",
        "1",
        "--artifacts",
        at_s,
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, EXIT_FAILED, "{err}");
    assert!(err.contains(&format!("written to {at_s}")), "{err}");
    let mut dirs: Vec<_> = std::fs::read_dir(&at)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    let names: Vec<_> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["001-hasty-transfer-debited-1"]);
    let read = |f: &str| std::fs::read_to_string(dirs[0].join(f)).unwrap();
    let rerun: serde_json::Value = serde_json::from_str(&read("rerun.json")).unwrap();
    assert_eq!(
        rerun["argv"],
        serde_json::json!(["mysweep", "hasty-transfer", "--scenario", "debited#1"])
    );
    assert_eq!(
        rerun["shell"],
        "mysweep hasty-transfer --scenario \"debited#1\""
    );
    assert_eq!(
        read("rerun.sh"),
        "mysweep hasty-transfer --scenario \"debited#1\"\n"
    );
    let timeline = read("timeline.txt");
    assert!(
        timeline.contains("life 1: crashed at debited#1") && timeline.contains("← crash"),
        "{timeline}"
    );
    let verdict: serde_json::Value = serde_json::from_str(&read("verdict.json")).unwrap();
    assert_eq!(verdict["scenario"], "debited#1");
    assert_eq!(verdict["counts"]["created"], 10);
    assert_eq!(verdict["notes"][0], "10 coins appeared or vanished");
    assert!(verdict["failure"].as_str().unwrap().contains("created"));
    assert_eq!(verdict["rerun"]["passed"], false);
    // Transfer describes no world: the file says how to get one.
    assert!(read("world.txt").contains("Subject::describe"));
    // A passing sweep writes nothing.
    let (code, _, _) = run(&["careful-transfer", "--artifacts", at_s]);
    assert_eq!(code, EXIT_PASSED);
    assert_eq!(std::fs::read_dir(&at).unwrap().count(), 1);
}
