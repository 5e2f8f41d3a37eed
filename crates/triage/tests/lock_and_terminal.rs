//! Two real processes on one run, and a person at a (pseudo-)terminal.
//!
//! The first `triage` gets a pty as stdin, so `--approve on` asks at the
//! terminal before filing the issue and blocks there, holding the run's
//! lock. A second `triage` on the same run must get the "locked" exit code
//! and message at once. Then the test answers at the terminal and the
//! first run finishes.

mod common;

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
