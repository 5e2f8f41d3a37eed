//! A shutdown signal stops the run after the save that records where it
//! stopped (exit 6), and a rerun finishes it without doing anything twice.
//!
//! `--signal-after TOOL` sends the process a real SIGTERM in the same window
//! `--die-after TOOL` dies in (the tool has returned, its result is not yet
//! saved); unlike the SIGKILL, the handler only sets the loop's cancel flag,
//! so the result is saved and the checkpoint holds it, not just a marker.

use crate::common;

use agent::state::{Phase, Role, State};
use common::*;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;

/// The exit code of a run stopped by SIGTERM or SIGINT.
const STOPPED: i32 = 6;

/// The message of a run stopped by `signal` in `phase`.
fn stopped_line(run: &str, signal: &str, phase: Phase) -> String {
    format!(
        "triage: error: run {run} stopped by {signal} in phase {phase} after saving; \
         run the same command again to continue"
    )
}

/// The result the checkpoint holds for `call`: the tool message answering
/// it in the conversation, which must agree with `results` while the turn's
/// calls are still being run (phase `tools`).
#[track_caller]
fn saved_result(st: &State, call: &str) -> String {
    let answers: Vec<&str> = st
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.call_id.as_deref() == Some(call))
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(answers.len(), 1, "tool messages answering {call}");
    if st.phase == Phase::Tools {
        assert_eq!(st.results[call].output, answers[0], "results[{call}]");
    }
    answers[0].to_owned()
}

/// One scenario: SIGTERM right after the first call of `tool` returns, then
/// rerun the same command (less the option) in a fresh process.
fn signal_and_resume(task: &TaskFile, tool: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let name = task.name.as_str();
    let at = format!("{name} --signal-after {tool}");

    let stopped = triage(&[
        "--task",
        name,
        "--state",
        s,
        "--signal-after",
        tool,
        "--approve",
        "off",
        "--json",
    ]);
    stopped.expect_code(STOPPED);
    let events: Vec<Value> = stopped
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = task.first_call_of(tool);
    let returned = events
        .iter()
        .find(|e| e["event"] == "tool_returned" && e["call"] == call.id.as_str())
        .unwrap_or_else(|| panic!("{at}: no tool_returned for {}", call.id));
    let signal = events
        .iter()
        .position(|e| e["event"] == "signal_after")
        .expect("a signal_after event");
    assert_eq!(events[signal]["call"], call.id.as_str(), "{at}");
    // After the signal: the result is saved, then the stop is.
    let after: Vec<&str> = events[signal + 1..]
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(after, ["result_saved", "cancelled", "error"], "{at}");
    let error = events.last().unwrap();
    assert_eq!(
        (&error["exit"], &error["status"], &error["kind"]),
        (
            &Value::from(STOPPED),
            &Value::from("stopped"),
            &Value::from("stopped")
        ),
        "{at}"
    );

    // The checkpoint holds the call's result: saved despite the shutdown.
    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!(st.turns, call.turn, "{at}: turns");
    assert!(
        matches!(st.phase, Phase::Tools | Phase::Model),
        "{at}: phase {}",
        st.phase
    );
    assert_eq!(
        saved_result(&st, &call.id),
        returned["output"].as_str().unwrap(),
        "{at}: the saved result is what the tool returned"
    );
    stopped.expect_stderr(&stopped_line(&run, "SIGTERM", st.phase));

    // The same command again: nothing to settle, the replay goes on.
    let resumed = triage(&["--task", name, "--state", s, "--approve", "off"]);
    resumed
        .expect_code(0)
        .expect_stdout(&format!(
            "resumed   run {run} in phase {} after {} (restart 1, saved)",
            st.phase,
            turns(call.turn)
        ))
        .expect_stdout(&all_passed(task));
    assert!(
        !resumed.stdout.contains("ladder "),
        "{at}: a saved result needs no ladder:\n{}",
        resumed.stdout
    );
    assert!(
        !resumed
            .stdout
            .contains(&format!("call      {tool} {} ", call.id)),
        "{at}: the call ran again:\n{}",
        resumed.stdout
    );
    let done = checkpoint(&state, &run);
    assert_eq!((done.phase, done.resumes), (Phase::Done, 1), "{at}");
    assert_each_effect_once(task, &tracker(&state, &run));
}

#[test]
fn signal_after_each_tool_of_each_task_then_resume() {
    let mut ran = Vec::new();
    for task in tasks() {
        for tool in task.tools() {
            signal_and_resume(&task, &tool);
            ran.push(format!("{} --signal-after {tool}", task.name));
        }
    }
    // Every tool, on at least one task: the two kinds of ending (phase
    // tools mid-turn, phase model after a turn's last call) are both here.
    for tool in ["search", "code_patch", "issue_file", "issue_comment"] {
        assert!(
            ran.iter().any(|r| r.ends_with(&format!(" {tool}"))),
            "{tool}: {ran:?}"
        );
    }
}

#[test]
fn a_signal_after_a_turns_last_call_stops_in_phase_model() {
    // m1's issue_file call_06 is the only call of turn 4: its result is in
    // the conversation, and the run stops before the model call of turn 5.
    let task = task("m1-done-after-delete");
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    triage(&[
        "--task",
        &task.name,
        "--state",
        s,
        "--signal-after",
        "issue_file",
        "--approve",
        "off",
    ])
    .expect_code(STOPPED)
    .expect_stdout(
        "signal    --signal-after issue_file: call_06 returned; sending SIGTERM to myself",
    )
    .expect_stdout("saved     result of issue_file call_06")
    .expect_stdout("saved     cancelled in phase model");
    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!((st.phase, st.turns), (Phase::Model, 4));
    assert!(saved_result(&st, "call_06").contains("\"issue\""));
    assert_eq!(
        tracker(&state, &run).issues().len(),
        task.seeded_issues() + 1
    );
}

#[test]
fn signal_after_is_hidden_and_checked_like_die_after() {
    let help = triage(&["--help"]);
    help.expect_code(0)
        .expect_stdout(&format!("{STOPPED}    stopped by SIGTERM or SIGINT"));
    assert!(!help.stdout.contains("--signal-after"), "{}", help.stdout);

    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    triage(&[
        "--task",
        "s2-known-sync-timeout",
        "--state",
        s,
        "--signal-after",
        "rm_rf",
    ])
    .expect_code(2)
    .expect_stderr("--signal-after \"rm_rf\": no such tool");
    triage(&[
        "--task",
        "s2-known-sync-timeout",
        "--state",
        s,
        "--signal-after",
        "code_patch",
    ])
    .expect_code(2)
    .expect_stderr("--signal-after code_patch: task s2-known-sync-timeout never calls code_patch");
    triage(&[
        "--task",
        "s2-known-sync-timeout",
        "--state",
        s,
        "--signal-after",
        "search",
        "--die-after",
        "search",
    ])
    .expect_code(2);
    assert!(!state.exists(), "bad input creates nothing");
}

/// A plain SIGTERM from outside, to a run blocked at its approval prompt.
///
/// Deterministic without sleeping: the test sends the signal only after the
/// prompt is on the terminal, and answers only after `kill` returned. By
/// then the signal is pending on the (single-threaded) child, and Linux runs
/// a pending handler before the thread returns to user code, so the cancel
/// flag is set before the child can read the answer. The prompt's read is
/// not interrupted (`SA_RESTART`): the signal takes effect after the answer,
/// so the approved call runs, its result is saved, and the run stops before
/// the next model call.
#[test]
fn sigterm_during_the_approval_prompt_stops_after_the_answer() {
    let task = task("m1-done-after-delete");
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut first = AtTerminal::spawn(&["--task", &task.name, "--state", s]);
        first.wait_for("approve issue_file call call_06 with ");
        // SAFETY: kill on the pid of our own child, which has not been
        // waited for, so the pid cannot have been reused.
        let rc = unsafe { libc::kill(first.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
        first.answer("y\n");
        let run = only_run(&state);
        first
            .finish()
            .expect_code(STOPPED)
            .expect_stdout("decided   issue_file call_06: approved")
            .expect_stdout("saved     result of issue_file call_06")
            .expect_stderr(&stopped_line(&run, name, Phase::Model));
        let st = checkpoint(&state, &run);
        assert_eq!((st.phase, st.turns), (Phase::Model, 4), "{name}");
        saved_result(&st, "call_06");

        triage(&["--task", &task.name, "--state", s])
            .expect_code(0)
            .expect_stdout(&all_passed(&task));
        assert_each_effect_once(&task, &tracker(&state, &run));
        std::fs::remove_dir_all(&state).unwrap();
    }
}

/// A second signal while the run is stopping takes the default action: the
/// process dies, and the run survives that like any crash.
///
/// Deterministic: the child blocks at its prompt (never answered), and two
/// different signals are both pending after the two `kill`s return, so both
/// are delivered; whichever comes second finds the cancel flag set. (Two of
/// the same signal could merge into one while pending.)
#[test]
fn a_second_signal_while_stopping_kills_and_the_rerun_finishes() {
    let task = task("m1-done-after-delete");
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    let mut first = AtTerminal::spawn(&["--task", &task.name, "--state", s]);
    first.wait_for("approve issue_file call call_06 with ");
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: kill on the pid of our own child, not yet waited for.
        let rc = unsafe { libc::kill(first.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }
    let out = first.finish();
    assert!(
        matches!(out.status.signal(), Some(libc::SIGTERM | libc::SIGINT)),
        "expected death by the second signal; got {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    let run = only_run(&state);
    assert_eq!(checkpoint(&state, &run).phase, Phase::Tools);

    triage(&["--task", &task.name, "--state", s, "--approve", "off"])
        .expect_code(0)
        .expect_stdout("decided   issue_file call_06: approved")
        .expect_stdout(&all_passed(&task));
    assert_each_effect_once(&task, &tracker(&state, &run));
}
