//! Live mode against the loopback test provider: the built binary, with
//! `OPENAI_API_KEY` and `OPENAI_BASE_URL` pointing at a server the test
//! started on 127.0.0.1, which answers each turn with the task's recorded
//! reply in the Chat Completions wire format and counts requests.
//!
//! The request counts are the point: a resumed live run never asks for a
//! reply it saved, and a reply that arrived but was never saved is asked
//! for exactly once more.

use crate::common;

use std::path::Path;

use agent::state::Phase;
use common::*;
use test_provider::{openai, Script, TestProvider};

const KEY: &str = "sk-live-test-5f1e0c9a7b3d";

/// A test provider answering each turn with `task`'s recorded reply.
fn provider(task: &TaskFile) -> TestProvider {
    let replies = openai::transcript(&task.json.to_string()).unwrap();
    TestProvider::start(Script::by_turn(replies)).unwrap()
}

/// The summary line of a live run whose checks all passed: the checks
/// that compare with the recording (`turns`, `paid_once`) are skipped live.
fn live_passed(task: &TaskFile) -> String {
    let n = task.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !matches!(c["check"].as_str(), Some("turns" | "paid_once")))
        .count();
    format!("checks    {n} of {n} passed")
}

fn replies(task: &TaskFile) -> usize {
    task.json["replies"].as_array().unwrap().len()
}

/// `triage ARGS` in live mode against `server`.
fn live(server: &TestProvider, args: &[&str]) -> Out {
    let out = command(args)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", server.url())
        .env("OPENAI_MODEL", "test-model")
        .output()
        .expect("run the triage binary");
    let out = Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !out.stdout.contains(KEY),
        "the key in stdout:\n{}",
        out.stdout
    );
    assert!(
        !out.stderr.contains(KEY),
        "the key in stderr:\n{}",
        out.stderr
    );
    out
}

/// The turn each request asked for, in order.
fn turns(server: &TestProvider) -> Vec<usize> {
    server
        .requests()
        .iter()
        .map(|r| r.turn().expect("a chat request"))
        .collect()
}

/// No file under `dir` holds the key.
fn assert_no_key_under(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            assert_no_key_under(&path);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(KEY),
                "the key in {}",
                path.display()
            );
        }
    }
}

#[test]
fn a_live_run_goes_end_to_end_with_the_mode_in_the_first_line_and_the_checkpoint() {
    let task = task("m1-done-after-delete");
    let server = provider(&task);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let out = live(
        &server,
        &[
            "--task",
            &task.name,
            "--state",
            arg(&state),
            "--approve",
            "off",
        ],
    );
    out.expect_code(0).expect_stdout(&live_passed(&task));
    let first = out.stdout.lines().next().unwrap();
    assert!(
        first.contains(&format!(
            "live: openai model test-model at {}",
            server.url()
        )),
        "{first}"
    );
    assert_eq!(server.count(), replies(&task));
    assert_eq!(turns(&server), (0..replies(&task)).collect::<Vec<_>>());
    let first = &server.requests()[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = first.json().unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(4));

    let run = only_run(&state);
    let st = checkpoint(&state, &run);
    assert_eq!(st.phase, Phase::Done);
    assert_eq!(
        st.mode.as_deref(),
        Some(format!("live openai test-model {}", server.url()).as_str())
    );
    assert_each_effect_once(&task, &tracker(&state, &run));
    assert_no_key_under(&state);

    // Without a key, the same command replays, and says so.
    let tmp2 = tempfile::tempdir().unwrap();
    let replay = triage(&[
        "--task",
        &task.name,
        "--state",
        arg(tmp2.path()),
        "--approve",
        "off",
    ]);
    replay.expect_code(0);
    let first = replay.stdout.lines().next().unwrap();
    assert!(first.contains("replay of the recorded replies"), "{first}");
    let run2 = only_run(tmp2.path());
    assert_eq!(
        checkpoint(tmp2.path(), &run2).mode.as_deref(),
        Some("replay")
    );
}

#[test]
fn die_after_a_tool_then_resume_asks_for_no_saved_reply_again() {
    for task in tasks() {
        for tool in task.tools() {
            let server = provider(&task);
            let tmp = tempfile::tempdir().unwrap();
            let state = tmp.path().join("state");
            let s = arg(&state);
            let at = format!("{} --die-after {tool}", task.name);
            live(
                &server,
                &[
                    "--task",
                    &task.name,
                    "--state",
                    s,
                    "--die-after",
                    &tool,
                    "--approve",
                    "off",
                ],
            )
            .expect_killed();
            let call = task.first_call_of(&tool);
            // The first life asked once per turn up to the call's reply.
            assert_eq!(server.count(), call.turn as usize, "{at}: first life");
            let run = only_run(&state);
            assert_eq!(checkpoint(&state, &run).phase, Phase::Tools, "{at}");

            let resumed = live(
                &server,
                &["--task", &task.name, "--state", s, "--approve", "off"],
            );
            let finished = if resumed.code() == Some(4) {
                // A patch whose texts do not settle it goes to a person, who
                // is asked at a terminal: the run paused before any model
                // call, and the person's life finishes it.
                assert_eq!(tool, "code_patch", "{at}: only a patch can need a person");
                assert_eq!(
                    server.count(),
                    call.turn as usize,
                    "{at}: no request while paused"
                );
                let url = server.url();
                let env = [
                    ("OPENAI_API_KEY", KEY),
                    ("OPENAI_BASE_URL", url.as_str()),
                    ("OPENAI_MODEL", "test-model"),
                ];
                let mut person =
                    AtTerminal::spawn_with_env(&["--task", &task.name, "--state", s], &env);
                person.answer_prompts(&[
                    (
                        "did it happen? [r]erun (it did not) / [d]one <what you found> / [l]ater: ",
                        "done the patch is in the file\n",
                    ),
                    ("? [y]es / [n]o [reason] / [l]ater: ", "y\n"),
                ]);
                person.finish()
            } else {
                resumed
            };
            finished.expect_code(0).expect_stdout(&live_passed(&task));
            assert!(!finished.stdout.contains(KEY) && !finished.stderr.contains(KEY));
            assert_eq!(
                turns(&server),
                (0..replies(&task)).collect::<Vec<_>>(),
                "{at}: each turn asked once, across both lives"
            );
            assert_each_effect_once(&task, &tracker(&state, &run));
            assert_no_key_under(&state);
            eprintln!(
                "requests {at}: {} in the first life, {} in all (replies: {})",
                call.turn,
                server.count(),
                replies(&task)
            );
        }
    }
}

#[test]
fn a_crash_after_the_reply_arrived_and_before_it_was_saved_asks_exactly_once_more() {
    let task = task("m1-done-after-delete");
    let n = replies(&task);
    for turn in 1..n {
        let server = provider(&task);
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let t = turn.to_string();
        live(
            &server,
            &[
                "--task",
                &task.name,
                "--state",
                s,
                "--die-after-reply",
                &t,
                "--approve",
                "off",
            ],
        )
        .expect_killed();
        assert_eq!(server.count(), turn, "turn {turn}: the reply arrived");
        let run = only_run(&state);
        let st = checkpoint(&state, &run);
        assert_eq!(
            st.turns as usize,
            turn - 1,
            "turn {turn}: the reply was not saved"
        );
        let saved_replies = st
            .messages
            .iter()
            .filter(|m| m.role == agent::state::Role::Assistant)
            .count();
        assert_eq!(saved_replies, turn - 1, "turn {turn}");
        assert_ne!(st.phase, Phase::Done, "turn {turn}");

        live(
            &server,
            &["--task", &task.name, "--state", s, "--approve", "off"],
        )
        .expect_code(0)
        .expect_stdout(&live_passed(&task));
        assert_eq!(
            server.count(),
            n + 1,
            "turn {turn}: exactly one more request"
        );
        let mut want: Vec<usize> = (0..n).collect();
        want.insert(turn, turn - 1);
        assert_eq!(
            turns(&server),
            want,
            "turn {turn}: the lost turn asked again"
        );
        assert_each_effect_once(&task, &tracker(&state, &run));
        eprintln!(
            "requests --die-after-reply {turn}: {turn} in the first life, {} in all (replies: {n})",
            server.count()
        );
    }
}

#[test]
fn a_provider_error_names_status_and_message_but_never_the_key() {
    let server = TestProvider::start(Script::first(vec![openai::error(
        401,
        &format!("Incorrect API key provided: {KEY}"),
    )]))
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for json in [false, true] {
        let state = tmp.path().join(format!("state-{json}"));
        let mut args = vec![
            "--task",
            "m1-done-after-delete",
            "--state",
            arg(&state),
            "--approve",
            "off",
        ];
        if json {
            args.push("--json");
        }
        server.set_script(Script::first(vec![openai::error(
            401,
            &format!("Incorrect API key provided: {KEY}"),
        )]));
        let out = live(&server, &args);
        assert_ne!(out.code(), Some(0));
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains("HTTP 401"), "{all}");
        assert!(
            all.contains("Incorrect API key provided: [redacted]"),
            "{all}"
        );
        assert_no_key_under(&state);
    }
}

#[test]
fn a_live_run_is_not_resumed_as_a_replay() {
    let task = task("m1-done-after-delete");
    let server = provider(&task);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    live(
        &server,
        &[
            "--task",
            &task.name,
            "--state",
            s,
            "--die-after",
            "code_patch",
            "--approve",
            "off",
        ],
    )
    .expect_killed();
    let run = only_run(&state);
    let before = std::fs::read(state.join(format!("{run}.json"))).unwrap();
    let out = triage(&["--task", &task.name, "--state", s, "--approve", "off"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    out.expect_stderr("was started live")
        .expect_stderr("OPENAI_API_KEY");
    assert_eq!(
        std::fs::read(state.join(format!("{run}.json"))).unwrap(),
        before
    );
}

#[test]
fn a_recorded_live_run_replays_to_the_same_tool_calls() {
    let task = task("m1-done-after-delete");
    let server = provider(&task);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let recorded = tmp.path().join("recorded");
    std::fs::create_dir(&recorded).unwrap();
    let file = recorded.join("m1-recorded.json");
    // Killed after a tool, resumed: the recording continues across lives.
    live(
        &server,
        &[
            "--task",
            &task.name,
            "--state",
            arg(&state),
            "--record",
            arg(&file),
            "--die-after",
            "code_patch",
            "--approve",
            "off",
        ],
    )
    .expect_killed();
    live(
        &server,
        &[
            "--task",
            &task.name,
            "--state",
            arg(&state),
            "--record",
            arg(&file),
            "--approve",
            "off",
        ],
    )
    .expect_code(0);
    assert!(!std::fs::read_to_string(&file).unwrap().contains(KEY));

    // The file is a transcript with the same calls, IDs and arguments …
    let original = agent::model::Transcript::parse(&task.json.to_string(), "original").unwrap();
    let copy = agent::model::Transcript::load(&file).unwrap();
    let calls = |t: &agent::model::Transcript| t.calls().cloned().collect::<Vec<_>>();
    assert_eq!(calls(&copy), calls(&original));
    assert_eq!(copy.task, original.task);
    let usage: Vec<_> = copy
        .replies
        .iter()
        .map(|r| (r.usage.input_tokens, r.usage.output_tokens))
        .collect();
    let want: Vec<_> = original
        .replies
        .iter()
        .map(|r| (r.usage.input_tokens, r.usage.output_tokens))
        .collect();
    assert_eq!(usage, want);

    // … and a task file: replayed with no key, it makes the same calls.
    let replay_state = tmp.path().join("replay");
    let out = triage(&[
        "--tasks",
        arg(&recorded),
        "--task",
        "m1-recorded",
        "--state",
        arg(&replay_state),
        "--approve",
        "off",
    ]);
    out.expect_code(0)
        .expect_stdout("replay of the recorded replies");
    let run = only_run(&replay_state);
    let st = checkpoint(&replay_state, &run);
    let made: Vec<_> = st.messages.iter().flat_map(|m| m.calls.clone()).collect();
    assert_eq!(made, calls(&original));
}
