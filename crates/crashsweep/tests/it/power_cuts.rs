//! Power cuts of real programs: the tracer records what a program asked of
//! its world's disk (data, names, syncs), and each crash leaves the world
//! as a power cut in the scenario's state leaves it. Each program gets the
//! verdict its syncs earn, state by state; a barrier the record ignored
//! (a synced write dropped, an unsynced rename kept) turns one of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sweep::power::CrashState;
use sweep::process::{IoPoints, Process};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> String {
    root()
        .join("clients/examples/power")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// state.py in `mode`, crashing before each rename, in `states`.
fn state_py(mode: &str, states: &[&str]) -> Process {
    Process::new(mode, ["python3", &example("state.py"), mode])
        .judge_command(&format!("python3 {}", example("judge.py")))
        .io_points(IoPoints::all().ops(["rename"]).unwrap())
        .crash_states(states)
        .unwrap()
        .discover()
        .unwrap()
}

/// Each state's scenarios that lost acknowledged work, by state name.
fn lost(p: &Process, states: &[&str], depth: u32) -> BTreeMap<String, usize> {
    let config = sweep::Config {
        depth,
        crash_states: states
            .iter()
            .map(|s| CrashState::new((*s).to_owned()).unwrap())
            .collect(),
        ..Default::default()
    };
    let report = sweep::run(p, &config).unwrap();
    let mut out: BTreeMap<String, usize> = states.iter().map(|s| ((*s).to_owned(), 0)).collect();
    for s in &report.scenarios {
        assert_eq!(s.verdict.get("missing"), 0, "{}", s.scenario);
        if s.verdict.get("lost") > 0 {
            *out.entry(s.scenario.state.name().to_owned()).or_default() += 1;
        }
    }
    out
}

#[test]
fn without_fsync_work_survives_a_process_crash_and_not_a_power_cut() {
    let states = ["process", "lose", "entries"];
    let got = lost(&state_py("nosync", &states), &states, 1);
    // Crashes before renames #2 and #3 follow an acknowledged step.
    assert_eq!(got["process"], 0, "{got:?}");
    assert_eq!(got["lose"], 2, "{got:?}");
    // The names survive, the unsynced contents do not: an empty state.
    assert_eq!(got["entries"], 2, "{got:?}");
}

/// The file is synced, its directory is not: a cut that loses unsynced
/// names loses the rename (LazyFS passes renames through and cannot see
/// this); one that keeps names keeps the synced data.
#[test]
fn a_synced_file_in_an_unsynced_directory_loses_its_rename() {
    let states = ["lose", "entries", "torn", "contents"];
    let got = lost(&state_py("file", &states), &states, 1);
    assert_eq!(got["lose"], 2, "an unsynced rename kept: {got:?}");
    assert_eq!(got["contents"], 2, "an unsynced rename kept: {got:?}");
    assert_eq!(got["entries"], 0, "a synced write dropped: {got:?}");
    assert_eq!(got["torn"], 0, "a synced write torn: {got:?}");
}

/// The directory's fsync makes the rename durable: the states that lose
/// unsynced names keep it.
#[test]
fn a_synced_file_and_directory_pass_where_names_are_lost() {
    let states = ["lose", "contents"];
    let got = lost(&state_py("full", &states), &states, 1);
    assert!(
        got.values().all(|n| *n == 0),
        "a synced rename dropped: {got:?}"
    );
}

#[test]
#[ignore = "slow tier: .ci/run runs every ignored test"]
fn a_synced_file_and_directory_pass_every_state_and_every_disk() {
    let states = [
        "process",
        "lose",
        "entries",
        "torn",
        "contents",
        "in-order",
        "enumerated",
    ];
    let got = lost(&state_py("full", &states), &states, 1);
    assert!(got.values().all(|n| *n == 0), "{got:?}");
}

#[test]
#[ignore = "slow tier: .ci/run runs every ignored test"]
fn the_restart_loses_power_too_at_depth_two() {
    let states = ["process", "lose", "entries"];
    let p = state_py("nosync", &states);
    let got = lost(&p, &states, 2);
    assert_eq!(got["process"], 0, "{got:?}");
    assert!(got["lose"] > 2, "{got:?}");
}

fn crashsweep(args: &[&str], mode: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(["--io-points", "--io-ops", "rename", "--name", mode])
        .args(["--judge", &format!("python3 {}", example("judge.py"))])
        .args(args)
        .args(["--", "python3", &example("state.py"), mode])
        .output()
        .unwrap()
}

/// A scenario's name carries its state and reruns by that name, with the
/// power cut in its timeline: at depth 2, both lives' machines lose power.
#[test]
fn a_power_cut_scenario_reruns_by_name_with_its_cuts_in_the_timeline() {
    let out = crashsweep(
        &[
            "--crash-states",
            "lose",
            "--depth",
            "2",
            "--scenario",
            "lose: rename state.tmp→state#2 → rename state.tmp→state#1",
        ],
        "nosync",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.matches("power cut (lose)").count(), 2, "{stdout}");
    assert!(stdout.contains("FAILED: lost = 1"), "{stdout}");
}

#[test]
fn an_unknown_crash_state_is_refused_by_name_and_runs_nothing() {
    let out = crashsweep(&["--crash-states", "lose,fire"], "nosync");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no crash state is called \"fire\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("lose, entries, torn, contents, in-order, enumerated"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// A world holding an empty `jobs.db` (made by `sqlite_job.py init`).
fn sqlite_world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("python3")
        .arg(example("sqlite_job.py"))
        .arg("init")
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

/// sqlite_job.py in `journal` mode with `synchronous`, crashing after
/// each acknowledged commit (its point `acked`).
fn sqlite_job(world: &Path, journal: &str, synchronous: &str, states: &[&str]) -> Process {
    let name = format!("{journal}-{synchronous}");
    Process::new(
        &name,
        ["python3", &example("sqlite_job.py"), journal, synchronous],
    )
    .world_from(world)
    .judge_command(&format!("python3 {}", example("judge.py")))
    .crash_states(states)
    .unwrap()
    .discover()
    .unwrap()
}

/// `PRAGMA synchronous=OFF` never syncs: a power cut takes back committed
/// transactions, which a process crash never does.
#[test]
fn sqlite_with_synchronous_off_loses_committed_transactions() {
    let world = sqlite_world();
    let states = ["process", "lose"];
    let got = lost(
        &sqlite_job(world.path(), "delete", "off", &states),
        &states,
        1,
    );
    assert_eq!(got["process"], 0, "{got:?}");
    assert_eq!(got["lose"], 3, "{got:?}");
}

/// In rollback-journal mode the commit is the journal's unlink. FULL does
/// not sync the directory after it: a cut that loses the unlink leaves a
/// hot journal, which rolls the last commit back. EXTRA syncs it (as
/// SQLite's documentation of `synchronous` says).
#[test]
fn sqlite_full_in_delete_mode_can_roll_back_the_last_commit_and_extra_cannot() {
    let world = sqlite_world();
    let states = ["lose"];
    let full = lost(
        &sqlite_job(world.path(), "delete", "full", &states),
        &states,
        1,
    );
    assert_eq!(full["lose"], 3, "the unsynced unlink kept: {full:?}");
    let extra = lost(
        &sqlite_job(world.path(), "delete", "extra", &states),
        &states,
        1,
    );
    assert_eq!(extra["lose"], 0, "a synced unlink dropped: {extra:?}");
}

/// Every journal mode and `synchronous` setting in every named state:
/// which scenarios lose a committed transaction (the guide's table).
#[test]
#[ignore = "slow tier: .ci/run runs every ignored test"]
fn sqlite_settings_in_every_state() {
    let world = sqlite_world();
    let states = ["process", "lose", "entries", "torn", "contents", "in-order"];
    // Scenarios losing work, in the order of `states`.
    let expected: [(&str, &str, [usize; 6]); 8] = [
        ("delete", "off", [0, 3, 3, 0, 0, 3]),
        ("delete", "normal", [0, 3, 0, 0, 3, 3]),
        ("delete", "full", [0, 3, 0, 0, 3, 3]),
        ("delete", "extra", [0; 6]),
        ("wal", "off", [0, 3, 3, 3, 3, 3]),
        ("wal", "normal", [0, 3, 3, 3, 0, 3]),
        ("wal", "full", [0; 6]),
        ("wal", "extra", [0; 6]),
    ];
    let mut wrong = Vec::new();
    for (journal, sync, want) in expected {
        let got = lost(
            &sqlite_job(world.path(), journal, sync, &states),
            &states,
            1,
        );
        let got: Vec<usize> = states.iter().map(|s| got[*s]).collect();
        if got != want {
            wrong.push(format!("{journal} {sync}: {got:?}, not {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The Go port (raw system calls, no libc): the same verdicts as Python's.
#[test]
fn a_go_program_gets_the_verdicts_its_syncs_earn() {
    let (_bin, exe) = crate::unchanged::go_build("clients/examples/power/go");
    let states = ["lose", "entries"];
    let mut got = BTreeMap::new();
    for mode in ["nosync", "file", "full"] {
        let p = Process::new(mode, [exe.as_str(), mode])
            .judge_command(&format!("python3 {}", example("judge.py")))
            .io_points(IoPoints::all().ops(["rename"]).unwrap())
            .crash_states(states)
            .unwrap()
            .discover()
            .unwrap();
        let l = lost(&p, &states, 1);
        got.insert(mode, (l["lose"], l["entries"]));
    }
    assert_eq!(got["nosync"], (2, 2), "{got:?}");
    assert_eq!(got["file"], (2, 0), "{got:?}");
    assert_eq!(got["full"], (0, 0), "{got:?}");
}

/// Under the fork server each forked life is traced and its disk record
/// kept as an exec'd life's is: the Python payouts example (its client
/// calls `crashsweep.ready()`), buggy and fixed, gives the exec'd table in
/// a process crash and two power cuts, every life forked.
#[test]
fn power_cuts_with_the_fork_server_give_the_exec_d_table() {
    let payouts = root().join("clients/python/examples/payouts.py");
    let judge = root().join("clients/examples/judge.py");
    let states = ["process", "lose", "entries"];
    let sweep_of = |fixed: bool, fork: bool| {
        let mut argv = vec!["python3".to_owned(), payouts.to_string_lossy().into_owned()];
        if fixed {
            argv.push("--fixed".into());
        }
        let mut p =
            Process::new("payouts", argv).judge_command(&format!("python3 {}", judge.display()));
        if fork {
            p = p.fork_server();
        }
        let p = (p.crash_states(states).unwrap().discover())
            .unwrap_or_else(|e| panic!("fixed: {fixed}, forked: {fork}: {e}"));
        let config = sweep::Config {
            depth: 1,
            crash_states: states
                .iter()
                .map(|s| CrashState::new((*s).to_owned()).unwrap())
                .collect(),
            ..Default::default()
        };
        let r = sweep::run(&p, &config).unwrap();
        let names: Vec<(String, bool)> = (r.scenarios.iter())
            .map(|s| (s.scenario.to_string(), s.failure.is_some()))
            .collect();
        let forked = r.stats.processes.map_or(0, |n| n.forked);
        (sweep::table(&r.rows()), names, forked)
    };
    for fixed in [false, true] {
        let (table, names, none) = sweep_of(fixed, false);
        let (forked_table, forked_names, forked) = sweep_of(fixed, true);
        assert_eq!(table, forked_table, "fixed: {fixed}");
        assert_eq!(names, forked_names, "fixed: {fixed}");
        assert_eq!(none, 0);
        assert!(forked > names.len() as u64, "{forked} forked");
        assert!(
            names.iter().any(|(n, _)| n.starts_with("lose: ")),
            "{names:?}"
        );
        // The buggy job pays twice after a process crash.
        assert_eq!(fixed, !names.iter().any(|(_, failed)| *failed), "{names:?}");
    }
}
