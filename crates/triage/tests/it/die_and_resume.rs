//! Die after each tool of each task (a real SIGKILL, in the window between
//! the tool returning and its result being saved), look at the checkpoint
//! on disk, resume, and count the world's effects.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use agent::state::Phase;
use common::*;

/// One scenario: die right after the first call of `tool` returns, then
/// resume with a fresh process. Returns whether a person had to settle the
/// call (the ladder's last rung).
fn die_and_resume(task: &TaskFile, tool: &str) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let name = task.name.as_str();
    let at = format!("{name} --die-after {tool}");

    let died = triage(&[
        "--task",
        name,
        "--state",
        s,
        "--die-after",
        tool,
        "--approve",
        "off",
    ]);
    died.expect_killed()
        .expect_stdout(&format!("kill      --die-after {tool}: "));

    // The checkpoint: mid-turn, the call unanswered, and marked if it can
    // change something.
    let run = only_run(&state);
    let call = task.first_call_of(tool);
    let st = checkpoint(&state, &run);
    assert_eq!(st.phase, Phase::Tools, "{at}");
    assert_eq!(st.turns, call.turn, "{at}: turns");
    assert!(
        st.calls.iter().any(|c| c.id == call.id),
        "{at}: the reply's calls are saved"
    );
    assert!(
        !st.results.contains_key(&call.id),
        "{at}: the result was not saved"
    );
    let mode = std::fs::metadata(state.join(format!("{run}.json")))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{at}: checkpoint mode");
    match tool {
        "search" => assert!(
            !st.attempts.contains_key(&call.id),
            "{at}: a read needs no marker"
        ),
        "issue_file" | "issue_comment" => {
            let marker = &st.attempts[&call.id];
            assert_eq!(
                marker.key.as_deref(),
                Some(durable::key(&run, &call.id).as_str()),
                "{at}"
            );
            assert_eq!(
                marker.approved,
                task.approval().iter().any(|t| t == tool),
                "{at}"
            );
        }
        _ => {
            let marker = &st.attempts[&call.id];
            assert_eq!(marker.key, None, "{at}: the workspace takes no key");
        }
    }

    let resumed = triage(&["--task", name, "--state", s, "--approve", "off"]);
    resumed.expect_stdout(&format!(
        "resumed   run {run} in phase tools after {} (restart 1, saved)",
        turns(call.turn)
    ));
    // Keys settle a tracker call on rung 1, the workspace lookup a patch on
    // rung 2; a patch whose texts do not decide it goes to a person (rung
    // 3), who is only asked at a terminal: without one the run pauses.
    let (finished, resumes) = if resumed.code() == Some(4) {
        assert_eq!(tool, "code_patch", "{at}: only a patch can need a person");
        resumed
            .expect_stdout(&format!(
                "ladder    code_patch {}: rung 2 (ask the service): cannot decide: ",
                call.id
            ))
            .expect_stderr("only a person can say whether it did");
        let st = checkpoint(&state, &run);
        assert_eq!(
            (st.phase, st.waiting.clone()),
            (Phase::Paused, vec![call.id.clone()]),
            "{at}"
        );
        let mut person = AtTerminal::spawn(&["--task", name, "--state", s]);
        person.answer_prompts(&[
            (
                "did it happen? [r]erun (it did not) / [d]one <what you found> / [l]ater: ",
                "done the patch is in the file\n",
            ),
            ("? [y]es / [n]o [reason] / [l]ater: ", "y\n"),
        ]);
        let out = person.finish();
        out.expect_stdout(&format!(
            "ladder    code_patch {}: rung 3 (ask a person): settled: a person says it happened",
            call.id
        ));
        (out, 2)
    } else {
        let settled = match tool {
            "search" => format!("call      search {} key -", call.id),
            "code_patch" => format!(
                "ladder    code_patch {}: rung 2 (ask the service): settled: the lookup found it",
                call.id
            ),
            t => format!(
                "ladder    {t} {}: rung 1 (rerun if harmless): settled: rerun: the service still holds the call's key",
                call.id
            ),
        };
        resumed.expect_stdout(&settled);
        (resumed, 1)
    };
    finished.expect_code(0).expect_stdout(&all_passed(task));

    let st = checkpoint(&state, &run);
    assert_eq!(st.phase, Phase::Done, "{at}");
    assert_eq!(st.resumes, resumes, "{at}");
    assert_each_effect_once(task, &tracker(&state, &run));
    resumes == 2
}

#[test]
fn die_after_each_tool_of_each_task_then_resume() {
    let scenarios: Vec<(TaskFile, String)> = tasks()
        .into_iter()
        .flat_map(|t| t.tools().into_iter().map(move |tool| (t.clone(), tool)))
        .collect();
    assert!(scenarios.len() >= 5, "{scenarios:?}");
    let tools: std::collections::BTreeSet<&str> =
        scenarios.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        tools.into_iter().collect::<Vec<_>>(),
        ["code_patch", "issue_comment", "issue_file", "search"],
        "the tasks between them call every tool"
    );
    let asked: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = scenarios
            .iter()
            .map(|(task, tool)| {
                let name = format!("{} --die-after {tool}", task.name);
                (name, scope.spawn(move || die_and_resume(task, tool)))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(name, h)| h.join().unwrap().then_some(name))
            .collect()
    });
    assert_eq!(
        asked,
        ["a3-login-after-wake --die-after code_patch"],
        "the scenarios that needed a person at the terminal"
    );
}

/// The README's two commands, as written: the first with the default
/// `--approve on` (no terminal here; the gated call comes after the kill).
#[test]
fn try_it_commands_from_the_readme() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("triage-state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");

    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--die-after",
        "code_patch",
    ])
    .expect_killed();
    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!((st.phase, st.turns), (Phase::Tools, 3));
    assert_eq!(st.attempts.keys().collect::<Vec<_>>(), ["call_04"]);
    // The patch is in the workspace although the checkpoint has no result.
    assert!(world(&state, &run)
        .join("workspace/todo_tests.rs")
        .is_file());

    triage(&[
        "--task",
        "m1-done-after-delete",
        "--state",
        s,
        "--approve",
        "off",
    ])
    .expect_code(0)
    .expect_stdout(
        "ladder    code_patch call_04: rung 2 (ask the service): settled: the lookup found it",
    )
    .expect_stdout("decided   issue_file call_06: approved")
    .expect_stdout("checks    16 of 16 passed");
    assert_each_effect_once(&task, &tracker(&state, &run));
}

/// A second crash in the restart: die after the patch, then after filing
/// the issue, then finish. Still every effect once.
#[test]
fn two_crashes_in_two_lives() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");
    let m1 = task.name.as_str();

    triage(&[
        "--task",
        m1,
        "--state",
        s,
        "--die-after",
        "code_patch",
        "--approve",
        "off",
    ])
    .expect_killed();
    triage(&[
        "--task",
        m1,
        "--state",
        s,
        "--die-after",
        "issue_file",
        "--approve",
        "off",
    ])
    .expect_killed()
    .expect_stdout("returned  issue_file call_06: {\"issue\":3}");
    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!((st.phase, st.turns, st.resumes), (Phase::Tools, 4, 1));
    assert!(
        st.attempts["call_06"].approved,
        "the yes is saved with the marker"
    );

    triage(&["--task", m1, "--state", s, "--approve", "off"])
        .expect_code(0)
        .expect_stdout("ladder    issue_file call_06: rung 1 (rerun if harmless): settled")
        .expect_stdout("call      issue_file call_06 (rerun) key ")
        .expect_stdout("returned  issue_file call_06: {\"issue\":3}")
        .expect_stdout(&all_passed(&task));
    assert_eq!(checkpoint(&state, &run).resumes, 2);
    assert_each_effect_once(&task, &tracker(&state, &run));
}
