//! Two real processes on one run, and a person at a (pseudo-)terminal.
//!
//! The first `triage` gets a pty as stdin, so `--approve on` asks at the
//! terminal before filing the issue and blocks there, holding the run's
//! lock. A second `triage` on the same run must get the "locked" exit code
//! and message at once. Then the test answers at the terminal and the
//! first run finishes.

use crate::common;

use std::time::Duration;

use common::*;

const PROMPT: &str = "approve issue_file call call_06 with ";

#[test]
fn a_second_process_on_a_held_run_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");

    let mut first = AtTerminal::spawn(&["--task", &task.name, "--state", s]);
    first.wait_for(PROMPT);
    let run = only_run(&state);
    let checkpoint_file = state.join(format!("{run}.json"));
    let before = std::fs::read(&checkpoint_file).unwrap();

    // By run ID, and by task (which picks the one unfinished run).
    for args in [
        vec!["--run", run.as_str(), "--state", s, "--approve", "off"],
        vec![
            "--task",
            task.name.as_str(),
            "--state",
            s,
            "--approve",
            "off",
        ],
    ] {
        // The first process holds the lock until it is answered below, so
        // a second one that waited for the lock would never return.
        let second = triage_or_hang(&args, Duration::from_secs(60));
        second.expect_code(3).expect_stderr(&format!(
            "triage: error: run is locked by another process: {}",
            state.join(format!("{run}.lock")).display()
        ));
        assert!(!second.stdout.contains("call "), "{}", second.stdout);
    }
    assert_eq!(
        std::fs::read(&checkpoint_file).unwrap(),
        before,
        "the second process wrote nothing"
    );

    first.answer("y\n");
    let out = first.finish();
    out.expect_code(0)
        .expect_stdout("decided   issue_file call_06: approved")
        .expect_stdout(&all_passed(&task));
    assert_each_effect_once(&task, &tracker(&state, &run));

    // The lock died with its holder: the run is free again (and done).
    triage(&["--run", &run, "--state", s]).expect_code(0);
}

#[test]
fn a_no_at_the_terminal_denies_the_call_and_the_checks_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    let mut first = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    first.wait_for(PROMPT);
    first.answer("n not filing today\n");
    let out = first.finish();
    out.expect_code(1)
        .expect_stdout("decided   issue_file call_06: denied: not filing today")
        .expect_stdout("checks    14 of 16 passed")
        .expect_stdout("  FAIL    issue \"todo: `done` after `rm` panics with index out of bounds\" filed once");
    let run = only_run(&state);
    assert_eq!(tracker(&state, &run).issues().len(), 2, "nothing filed");
}

#[test]
fn later_at_the_terminal_pauses_and_a_rerun_asks_again() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    let mut first = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    first.wait_for(PROMPT);
    first.answer("later\n");
    first
        .finish()
        .expect_code(4)
        .expect_stderr("issue_file call call_06 waits for a person's approval");

    let mut again = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    again.wait_for(PROMPT);
    again.answer("yes\n");
    again
        .finish()
        .expect_code(0)
        .expect_stdout("checks    16 of 16 passed");
}

/// Finding 1, end to end: with the run's lock file deleted while a process
/// holds it, a second process can take a new lock and run the run — but
/// the first, once approved, is fenced: its save is refused, it writes
/// nothing, and the finished checkpoint and the tracker stay as the second
/// left them (each effect once).
#[test]
fn a_deleted_lock_file_does_not_let_two_processes_run_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");

    let mut first = AtTerminal::spawn(&["--task", &task.name, "--state", s]);
    first.wait_for(PROMPT);
    let run = only_run(&state);
    std::fs::remove_file(state.join(format!("{run}.lock"))).unwrap();

    let second = triage(&["--run", &run, "--state", s, "--approve", "off"]);
    second.expect_code(0).expect_stdout(&all_passed(&task));
    let checkpoint_file = state.join(format!("{run}.json"));
    let finished = std::fs::read(&checkpoint_file).unwrap();
    let tracker_file = world(&state, &run).join("tracker.json");
    let filed = std::fs::read(&tracker_file).unwrap();

    first.answer("y\n");
    let out = first.finish();
    assert_ne!(
        out.code(),
        Some(0),
        "the stale holder must not finish:\n{}",
        out.stdout
    );
    out.expect_stderr("run was opened by a newer holder");
    assert_eq!(
        std::fs::read(&checkpoint_file).unwrap(),
        finished,
        "the stale holder wrote nothing over the finished checkpoint"
    );
    assert_eq!(
        std::fs::read(&tracker_file).unwrap(),
        filed,
        "nor in the tracker"
    );
    assert_eq!(checkpoint(&state, &run).phase, agent::state::Phase::Done);
    assert_each_effect_once(&task, &tracker(&state, &run));
}

/// Finding 2, end to end: a lock path that is a symbolic link is refused;
/// nothing is created where it points.
#[test]
fn a_lock_path_that_is_a_symlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let run = killed_run(&state, "m1-done-after-delete", "code_patch");
    let lock = state.join(format!("{run}.lock"));
    std::fs::remove_file(&lock).unwrap();
    let outside = tmp.path().join("outside.lock");
    std::os::unix::fs::symlink(&outside, &lock).unwrap();
    let out = triage(&["--run", &run, "--state", s, "--approve", "off"]);
    assert_ne!(out.code(), Some(0), "{}", out.stdout);
    out.expect_stderr("symbolic link");
    assert!(
        !outside.exists(),
        "the lock file was created outside the state directory"
    );
}
