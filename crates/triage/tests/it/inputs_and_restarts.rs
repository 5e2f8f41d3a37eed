//! Finished runs, paused runs, bad input, `--json` and `--list-tasks`,
//! each through the built binary.

use crate::common;

use std::fs;
use std::path::Path;

use agent::state::Phase;
use common::*;
use serde_json::Value;

/// Every file under `dir` with its bytes, for "nothing changed" checks.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push((p.display().to_string(), fs::read(&p).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn restarting_a_finished_run_prints_the_saved_answer_and_calls_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("s2-known-sync-timeout");
    triage(&["--task", &task.name, "--state", s]).expect_code(0);
    let run = only_run(&state);
    let before = snapshot(&state);

    let again = triage(&["--run", &run, "--state", s]);
    again
        .expect_code(0)
        .expect_stdout(&format!(
            "done      run {run} is already done: printing its saved answer, calling nothing"
        ))
        .expect_stdout(&format!(
            "opened    run {run} in phase done after 3 turns: nothing to resume, nothing saved"
        ))
        .expect_stdout("answer    S2 is already filed as #2")
        .expect_stdout(&all_passed(&task));
    for line in again.stdout.lines() {
        for step in ["model ", "call ", "saved ", "ladder "] {
            assert!(!line.starts_with(step), "a finished run did {line:?}");
        }
    }
    assert_eq!(snapshot(&state), before, "nothing was written");

    // Without --run, the same: a task whose runs are all done has its most
    // recent one reported, and nothing is called or written.
    let same = triage(&["--task", &task.name, "--state", s]);
    same.expect_code(0)
        .expect_stdout(&format!("done      run {run} is already done"))
        .expect_stdout("add --new-run")
        .expect_stdout(&all_passed(&task));
    assert_eq!(snapshot(&state), before, "nothing was written");

    // --new-run starts a new run: run IDs are never reused.
    triage(&["--task", &task.name, "--state", s, "--new-run"])
        .expect_code(0)
        .expect_stdout("run       new run s2-known-sync-timeout-");
    assert_eq!(runs(&state).len(), 2);
}

#[test]
fn without_a_terminal_a_gated_call_pauses_and_a_rerun_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");

    let paused = triage(&["--task", &task.name, "--state", s]);
    paused
        .expect_code(4)
        .expect_stdout("saved     pause: waiting on a person for call_06")
        .expect_stderr("is paused (phase paused, saved): issue_file call call_06 needs a person's approval, and stdin is not a terminal to ask at")
        .expect_stderr("--approve off");
    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!(st.phase, Phase::Paused);
    assert_eq!(st.waiting, ["call_06"]);
    assert!(
        !st.attempts.contains_key("call_06"),
        "no marker before the yes"
    );
    assert_eq!(tracker(&state, &run).issues().len(), 2, "nothing filed yet");

    // Still nobody to ask: paused again, nothing else happens.
    triage(&["--task", &task.name, "--state", s]).expect_code(4);
    let done = triage(&["--task", &task.name, "--state", s, "--approve", "off"]);
    done.expect_code(0)
        .expect_stdout(&format!(
            "resumed   run {run} in phase paused after 4 turns (restart 2, saved)"
        ))
        .expect_stdout(&all_passed(&task));
    assert_each_effect_once(&task, &tracker(&state, &run));
}

#[test]
fn json_output_is_one_object_per_line() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let parse = |out: &Out| -> Vec<Value> {
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect()
    };

    let died = triage(&[
        "--task",
        "s2-known-sync-timeout",
        "--state",
        s,
        "--json",
        "--die-after",
        "issue_comment",
    ]);
    died.expect_killed();
    let events = parse(&died);
    assert_eq!(events[0]["event"], "run");
    assert_eq!(events[0]["new"], true);
    let last = events.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["tool"].as_str()),
        (Some("die_after"), Some("issue_comment"))
    );
    let marker = events
        .iter()
        .find(|e| e["event"] == "marker_saved")
        .unwrap();
    let run = only_run(&state);
    assert_eq!(marker["key"], durable::key(&run, "call_03"));

    let done = triage(&["--task", "s2-known-sync-timeout", "--state", s, "--json"]);
    done.expect_code(0);
    let events = parse(&done);
    assert!(events
        .iter()
        .any(|e| e["event"] == "ladder" && e["rung"] == "rerun" && e["settled"] == true));
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["status"], "done");
    assert_eq!(summary["exit"], 0);
    assert_eq!(summary["resumes"], 1);
    assert_eq!(summary["passed"], summary["total"]);
    assert_eq!(summary["run"], run.as_str());

    // Errors are a last JSON line too.
    let locked_out = triage(&["--task", "nope", "--state", s, "--json"]);
    locked_out.expect_code(2);
    let err = &parse(&locked_out)[0];
    assert_eq!(
        (err["event"].as_str(), err["kind"].as_str()),
        (Some("error"), Some("unknown_task"))
    );
}

#[test]
fn list_tasks_and_help() {
    let out = triage(&["--list-tasks"]);
    out.expect_code(0);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let want: Vec<String> = tasks().into_iter().map(|t| t.name).collect();
    assert_eq!(names, want);
    assert!(names.len() >= 2);

    let json = triage(&["--list-tasks", "--json"]);
    let first: Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["name"], want[0].as_str());

    triage(&["--help"])
        .expect_code(0)
        .expect_stdout("Exit codes:")
        .expect_stdout("3    the run is locked by another process")
        .expect_stdout("--die-after <TOOL>");
    triage(&["--task", "m1-done-after-delete"])
        .expect_code(2)
        .expect_stderr("--state <DIR>");
}

#[test]
fn bad_input_is_refused_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    triage(&["--task", "nope", "--state", s])
        .expect_code(2)
        .expect_stderr("triage: error: unknown task \"nope\"")
        .expect_stderr(
            "known tasks: a3-login-after-wake, m1-done-after-delete, s2-known-sync-timeout",
        );
    assert!(
        !state.exists(),
        "an unknown task creates no state directory"
    );

    for id in ["../escape", "/tmp/x", "a/../../b", ".hidden", "a..b"] {
        triage(&["--run", id, "--state", s])
            .expect_code(2)
            .expect_stderr(&format!("invalid run ID {id:?}"));
    }
    assert!(!state.exists());
    assert!(!tmp.path().join("escape.json").exists());

    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--die-after",
        "rm_rf",
    ])
    .expect_code(2)
    .expect_stderr("--die-after \"rm_rf\": no such tool");
    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--die-after",
        "issue_comment",
    ])
    .expect_code(2)
    .expect_stderr("task m1-done-after-delete never calls issue_comment");
    assert!(!state.exists());

    let file = tmp.path().join("a-file");
    fs::write(&file, "precious").unwrap();
    for bad in [file.clone(), file.join("sub")] {
        triage(&["--task", "m1-done-after-delete", "--state", arg(&bad)])
            .expect_code(2)
            .expect_stderr(&format!("bad --state {}", bad.display()));
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "precious");

    fs::create_dir(&state).unwrap();
    triage(&["--run", "m1-done-after-delete-1-abcdefgh", "--state", s])
        .expect_code(2)
        .expect_stderr("no run m1-done-after-delete-1-abcdefgh in")
        .expect_stderr("holds no runs");
    assert_eq!(fs::read_dir(&state).unwrap().count(), 0);

    let tasks = tmp.path().join("tasks");
    fs::create_dir(&tasks).unwrap();
    fs::write(
        tasks.join("typo.json"),
        r#"{"checks": [{"check": "paid_once"}],
            "replies": [{"calls": [{"id": "c1", "tool": "issue_fiel"}]}, {"text": "done"}]}"#,
    )
    .unwrap();
    triage(&["--tasks", arg(&tasks), "--task", "typo", "--state", s])
        .expect_code(2)
        .expect_stderr("task file")
        .expect_stderr("unknown tool \"issue_fiel\"");
}

#[test]
fn a_bad_checkpoint_stops_the_run_and_is_left_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let run = killed_run(&state, "s2-known-sync-timeout", "search");
    let file = state.join(format!("{run}.json"));
    let good = fs::read_to_string(&file).unwrap();

    let cases = [
        ("not json at all".to_owned(), "corrupt checkpoint"),
        (good[..good.len() / 2].to_owned(), "truncated checkpoint"),
        (
            good.replace("\"phase\": \"tools\"", "\"phase\": \"thinking\""),
            "unknown variant `thinking`",
        ),
        (
            good.replace(&format!("\"run\": \"{run}\""), "\"run\": \"someone-else\""),
            "holds run \"someone-else\"",
        ),
    ];
    for (bytes, want) in cases {
        fs::write(&file, &bytes).unwrap();
        let before = snapshot(&state);
        for args in [
            vec!["--task", "s2-known-sync-timeout", "--state", s],
            vec!["--run", run.as_str(), "--state", s],
        ] {
            triage(&args)
                .expect_code(5)
                .expect_stderr(want)
                .expect_stderr(&file.display().to_string());
            assert_eq!(
                snapshot(&state),
                before,
                "{want}: nothing was written, no new run started"
            );
        }
    }
    fs::write(&file, good).unwrap();
    triage(&["--run", &run, "--state", s]).expect_code(0);
}

#[test]
fn runs_are_picked_by_the_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let first = killed_run(&state, "s2-known-sync-timeout", "search");

    // --run must belong to --task.
    triage(&[
        "--task",
        "m1-done-after-delete",
        "--run",
        &first,
        "--state",
        s,
    ])
    .expect_code(2)
    .expect_stderr(&format!(
        "run {first} runs task \"s2-known-sync-timeout\", not \"m1-done-after-delete\""
    ));
    // Another task's unfinished run is not this task's.
    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--approve",
        "off",
    ])
    .expect_code(0)
    .expect_stdout("run       new run m1-done-after-delete-");

    // A second unfinished run of the same task (a copy under another ID).
    let second = "s2-known-sync-timeout-1-copy0000";
    let text = fs::read_to_string(state.join(format!("{first}.json"))).unwrap();
    fs::write(
        state.join(format!("{second}.json")),
        text.replace(&first, second),
    )
    .unwrap();
    let from = world(&state, &first);
    let to = world(&state, second);
    fs::create_dir_all(to.join("workspace")).unwrap();
    for f in ["run.json", "task.json", "tracker.json"] {
        fs::copy(from.join(f), to.join(f)).unwrap();
    }
    triage(&["--task", "s2-known-sync-timeout", "--state", s])
        .expect_code(2)
        .expect_stderr("task \"s2-known-sync-timeout\" has 2 unfinished runs")
        .expect_stderr(&format!(
            "pick one with --run: {second} (tools), {first} (tools)"
        ));
    triage(&["--run", second, "--state", s]).expect_code(0);
    triage(&["--task", "s2-known-sync-timeout", "--state", s])
        .expect_code(0)
        .expect_stdout(&format!(
            "found run {first} of task s2-known-sync-timeout in phase tools"
        ));
}

#[test]
fn a_workspace_changed_behind_the_runs_back_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--die-after",
        "issue_file",
        "--approve",
        "off",
    ])
    .expect_killed();
    let run = only_run(&state);
    let todo = world(&state, &run).join("workspace/todo.rs");
    let mut text = fs::read_to_string(&todo).unwrap();
    text.push_str("// edited by hand\n");
    fs::write(&todo, &text).unwrap();
    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--approve",
        "off",
    ])
    .expect_code(5)
    .expect_stderr(&format!(
        "workspace changed since the run wrote {}",
        todo.display()
    ));
    assert_eq!(fs::read_to_string(&todo).unwrap(), text);
}

#[test]
fn every_rerun_counts_towards_the_restart_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let args = ["--task", "m1-done-after-delete", "--state", s];
    triage(&args).expect_code(4);
    for restart in 1..=10 {
        triage(&args)
            .expect_code(4)
            .expect_stdout(&format!("(restart {restart}, saved)"));
    }
    let run = only_run(&state);
    triage(&args)
        .expect_code(5)
        .expect_stderr("run was restarted 11 times, more than its limit of 10");
    assert_eq!(checkpoint(&state, &run).phase, Phase::Paused);
}
