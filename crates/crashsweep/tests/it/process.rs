//! Process subjects against a real Rust program (`examples/payouts.rs`):
//! each crash lands by `SIGKILL` at its named hit, points on a second
//! thread count, a hung program is killed at its limit, and
//! `CRASHSWEEP_DIE_AT` kills a program without a harness.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sweep::process::{Process, ProcessWorld};
use sweep::{report::Failure, Config, Verdict};

/// The example program, built by `cargo test` next to this crate's binary.
pub(crate) fn payouts() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_crashsweep"));
    let dir = bin.parent().expect("the target directory");
    let exe = dir.join("examples").join("payouts");
    assert!(
        exe.exists(),
        "{} is missing: `cargo test -p crashsweep` builds it",
        exe.display()
    );
    exe
}

/// Duplicates and missing payees in the world's ledger.
pub(crate) fn judge(world: &ProcessWorld) -> Result<Verdict, String> {
    let ledger = std::fs::read_to_string(world.dir().join("ledger.txt")).unwrap_or_default();
    let mut dups = 0;
    let mut missing = 0;
    for payee in ["alice", "bob", "carol"] {
        let n = ledger
            .lines()
            .filter(|l| l.split(' ').next() == Some(payee))
            .count() as u64;
        dups += n.saturating_sub(1);
        missing += u64::from(n == 0);
    }
    Ok(Verdict::new()
        .count("duplicates", dups)
        .count("missing", missing))
}

fn subject(name: &str, args: &[&str]) -> Process {
    let mut argv = vec![payouts().to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    Process::new(name, argv)
        .judge_with(judge)
        .discover()
        .unwrap()
}

/// The hits of the clean run, as the single-crash scenarios name them.
fn first_crashes(r: &sweep::Report) -> Vec<String> {
    r.scenarios
        .iter()
        .filter(|s| s.scenario.depth() == 1)
        .map(|s| s.scenario.to_string())
        .collect()
}

pub(crate) fn config(depth: u32) -> Config {
    Config {
        depth,
        threads: Some(2),
        ..Config::default()
    }
}

#[test]
fn the_bug_is_found_at_each_payment_and_the_fix_is_clean() {
    let buggy = sweep::run(&subject("payouts", &[]), &config(2)).unwrap();
    let failed: Vec<String> = buggy
        .scenarios
        .iter()
        .filter(|s| s.failure.is_some())
        .map(|s| s.scenario.to_string())
        .collect();
    // A crash right after a payment, before its save, pays again.
    for hit in ["paid#1", "paid#2", "paid#3"] {
        assert!(failed.contains(&hit.to_owned()), "{hit} not in {failed:?}");
    }
    // The clean run's hits, in order: every point of the program.
    let clean = first_crashes(&buggy);
    assert_eq!(
        clean,
        [
            "start#1",
            "paid#1",
            "mid-save#1",
            "paid#2",
            "mid-save#2",
            "paid#3",
            "mid-save#3"
        ]
    );
    let fixed = sweep::run(&subject("payouts --fixed", &["--fixed"]), &config(2)).unwrap();
    assert!(
        fixed.scenarios.iter().all(|s| s.failure.is_none()),
        "{}",
        sweep::table(&fixed.rows())
    );
    assert_eq!(fixed.row().depth_counts, buggy.row().depth_counts);
}

#[test]
fn a_crash_lands_by_sigkill_exactly_at_its_hit() {
    let s = subject("payouts", &[]);
    let r = sweep::rerun(&s, &sweep::Config::default(), "paid#2").unwrap();
    let timeline = r.timeline();
    assert!(timeline.contains("crashed at paid#2"), "{timeline}");
    // The world says how each life ended: the first by SIGKILL.
    let world = r.world.clone().unwrap_or_default();
    assert!(
        world.contains("life 1: ") && world.contains("was killed by signal 9 (SIGKILL)"),
        "{world}"
    );
    assert!(
        world.contains("life 2: ") && world.contains("exited with status 0"),
        "{world}"
    );
    // Killed after bob's payment and before its save: bob is paid twice.
    assert_eq!(r.verdict.get("duplicates"), 1, "{timeline}");
    assert!(
        matches!(r.failure, Some(Failure::Broken { .. })),
        "{timeline}"
    );
}

#[test]
fn a_point_on_a_second_thread_is_a_hit_and_can_be_crashed() {
    let s = subject("payouts --thread", &["--thread"]);
    let r = sweep::run(&s, &config(1)).unwrap();
    assert!(first_crashes(&r).contains(&"paid#3".to_owned()));
    let one = sweep::rerun(&s, &sweep::Config::default(), "paid#1").unwrap();
    assert!(
        one.timeline().contains("crashed at paid#1"),
        "{}",
        one.timeline()
    );
    assert_eq!(one.verdict.get("duplicates"), 1);
}

#[test]
fn a_hung_program_is_killed_at_its_limit() {
    let s = subject("payouts --hang-on-restart", &["--hang-on-restart"]);
    // Every restart hangs until the limit, idle: a thread for each
    // scenario (more than there are) lets those waits overlap instead of
    // following one another two at a time.
    let cfg = Config {
        scenario_timeout: Some(Duration::from_millis(1000)),
        rerun_failures: false,
        threads: Some(16),
        ..config(1)
    };
    let r = sweep::run(&s, &cfg).unwrap();
    let hung: Vec<&sweep::report::ScenarioResult> = r
        .scenarios
        .iter()
        .filter(|s| matches!(s.failure, Some(Failure::Hung { .. })))
        .collect();
    assert_eq!(hung.len(), r.scenarios.len(), "{}", sweep::table(&r.rows()));
    let text = hung[0].failure.as_ref().unwrap().to_string();
    assert!(
        text.contains("hung") && text.contains("hanging#1"),
        "{text}"
    );
}

#[test]
fn die_at_kills_the_program_without_a_harness() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(payouts())
        .current_dir(dir.path())
        .env("CRASHSWEEP_DIE_AT", "paid#2")
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.status.signal(), Some(9), "{status:?}");
    assert!(String::from_utf8_lossy(&status.stderr).contains("crashsweep: dying at paid#2"));
    let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap();
    assert_eq!(ledger.lines().count(), 2, "{ledger}");
    // A bad value is refused with exit status 2, before any effect.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(payouts())
        .current_dir(dir.path())
        .env("CRASHSWEEP_DIE_AT", "paid")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("ledger.txt").exists());
}

#[test]
fn without_a_harness_points_do_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(payouts())
        .current_dir(dir.path())
        .env_remove("CRASHSWEEP_FD")
        .env_remove("CRASHSWEEP_DIE_AT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap();
    assert_eq!(ledger.lines().count(), 3);
}

#[test]
fn a_program_that_cannot_start_is_a_typed_error() {
    let e = Process::new("nothing", ["/nonexistent/program"])
        .judge_with(judge)
        .discover()
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("could not start"), "{text}");
    // A program that reports no point is refused, naming the clients.
    let e = Process::new("no points", ["true"])
        .judge_with(judge)
        .discover()
        .unwrap_err();
    assert!(
        e.to_string().contains("without reporting a crash point"),
        "{e}"
    );
    let e = Process::new("no world", [payouts()])
        .world_from("/nonexistent/world")
        .discover()
        .unwrap_err();
    assert!(e.to_string().contains("is not a directory"), "{e}");
}

/// A program that leaves a file named after its process ID (a clock or a
/// random run ID does the same): two identical clean runs leave different
/// file names, and the sweep refuses to trust them until the subject
/// describes its world without the accident (`Process::describe_with`).
#[test]
fn a_world_named_by_chance_is_refused_until_described_without_it() {
    let script = format!(
        "{} --fixed && touch \"noise-$$\"",
        payouts().to_string_lossy()
    );
    let make = || {
        Process::new("payouts, noisy", ["sh", "-c", script.as_str()])
            .judge_with(judge)
            .discover()
            .unwrap()
    };
    let refused = sweep::run(&make(), &config(1)).unwrap_err();
    assert!(
        refused.to_string().contains("not deterministic") && refused.to_string().contains("noise-"),
        "{refused}"
    );
    let described = make()
        .describe_with(|w| std::fs::read_to_string(w.dir().join("ledger.txt")).unwrap_or_default());
    let report = sweep::run(&described, &config(1)).unwrap();
    assert_eq!(report.failures().count(), 0);
}

/// A clean run that fails is named as such, with no judge in the
/// message: `--list-points` runs none.
#[test]
fn a_failing_clean_run_of_list_points_names_no_judge() {
    let out = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(["--list-points", "--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("false: its clean run (no crash) failed: `false` exited with status 1"),
        "{err}"
    );
    assert!(!err.contains("judge"), "{err}");
}
