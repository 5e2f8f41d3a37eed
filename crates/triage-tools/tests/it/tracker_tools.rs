//! `issue_file`, `issue_comment` and `search` on the in-process tracker:
//! what each sends, answers and declares, and the refile guard's reading of
//! the conversation (the mutants the crate's own tests missed).

use std::sync::Arc;

use agent::state::{Message, Role, ToolCall};
use agent::tool::{CallContext, Effect, Keys, Lookup, Tool, ToolError, ToolOutput};
use durable::testing::MemDir;
use durable::RunId;
use serde_json::{json, Value};
use tracker::{Fault, Mode, Tracker};
use triage_tools::{comment_output, issue_output, IssueComment, IssueFile, Search};

fn run() -> RunId {
    RunId::parse("r").unwrap()
}

fn ctx<'a>(
    run: &'a RunId,
    call_id: &'a str,
    key: Option<&'a str>,
    messages: &'a [Message],
) -> CallContext<'a> {
    CallContext {
        run,
        call_id,
        key,
        epoch: 1,
        messages,
    }
}

/// An assistant message calling `tool` with `args` as call `id`.
fn calls(id: &str, tool: &str, args: Value) -> Message {
    Message {
        role: Role::Assistant,
        calls: vec![ToolCall {
            id: id.into(),
            tool: tool.into(),
            args: args.to_string(),
        }],
        ..Message::default()
    }
}

/// The tool message answering call `id` with `text`.
fn answers(id: &str, text: &str) -> Message {
    Message {
        role: Role::Tool,
        text: text.into(),
        call_id: Some(id.into()),
        ..Message::default()
    }
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{s:?} is not JSON: {e}"))
}

fn titles(t: &Tracker) -> Vec<(u64, String, String)> {
    t.issues()
        .into_iter()
        .map(|i| (i.number, i.title, i.body))
        .collect()
}

/// Each tool describes itself to the model once, in the tool: a
/// description, and an object schema whose required arguments are the
/// ones the tool refuses to run without.
#[test]
fn each_tool_describes_itself_with_the_arguments_it_requires() {
    let tools = triage_tools::triage(Tracker::new(Mode::Keyed), Arc::new(MemDir::new()));
    let specs = tools.specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["code_patch", "issue_comment", "issue_file", "search"]
    );
    let run = RunId::parse("r").unwrap();
    for spec in &specs {
        assert!(!spec.description.is_empty(), "{}", spec.name);
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert_eq!(
            spec.parameters["additionalProperties"], false,
            "{}",
            spec.name
        );
        let tool = tools.get(&spec.name).unwrap();
        for required in spec.parameters["required"].as_array().unwrap() {
            let name = required.as_str().unwrap();
            assert!(
                spec.parameters["properties"].get(name).is_some(),
                "{}: {name}",
                spec.name
            );
            // Every other argument given, this one missing: refused.
            let mut args = serde_json::Map::new();
            for (other, schema) in spec.parameters["properties"].as_object().unwrap() {
                if other != name {
                    let v = if schema["type"] == "integer" {
                        json!(1)
                    } else {
                        json!("x")
                    };
                    args.insert(other.clone(), v);
                }
            }
            let ctx = CallContext {
                run: &run,
                call_id: "c1",
                key: Some("k"),
                epoch: 1,
                messages: &[],
            };
            let e = tool.call(&ctx, &Value::Object(args)).unwrap_err();
            assert!(
                matches!(&e, ToolError::Failed(m) if m.contains(name)),
                "{}: {name}: {e:?}",
                spec.name
            );
        }
    }
}

#[test]
fn triage_has_the_four_tools_under_their_names_and_effects() {
    let tools = triage_tools::triage(Tracker::new(Mode::Keyed), Arc::new(MemDir::new()));
    assert_eq!(
        tools.names().collect::<Vec<_>>(),
        ["code_patch", "issue_comment", "issue_file", "search"]
    );
    let effect = |name: &str| tools.get(name).map(|t| t.effect());
    assert_eq!(effect("issue_file"), Some(Effect::Changes));
    assert_eq!(effect("issue_comment"), Some(Effect::Changes));
    assert_eq!(effect("code_patch"), Some(Effect::Changes));
    assert_eq!(effect("search"), Some(Effect::ReadsOnly));

    let t = Tracker::new(Mode::Keyed);
    assert_eq!(IssueFile::new(&t).name(), "issue_file");
    assert_eq!(IssueComment::new(&t).name(), "issue_comment");
    assert_eq!(Search::new(&t).name(), "search");
}

#[test]
fn outputs_are_the_json_the_model_reads() {
    assert_eq!(json_of(&issue_output(3)), json!({ "issue": 3 }));
    assert_eq!(
        json_of(&comment_output(3, 7)),
        json!({ "issue": 3, "comment": 7 })
    );
}

#[test]
fn keys_are_honoured_only_by_a_keyed_tracker() {
    let keyed = Tracker::new(Mode::Keyed);
    let keyless = Tracker::new(Mode::Keyless);
    // In process, keys live for ever unless the tools are told otherwise.
    let for_ever = Keys::Honoured { keep_for: None };
    let ten = Keys::Honoured { keep_for: Some(10) };
    assert_eq!(IssueFile::new(&keyed).keys(), for_ever);
    assert_eq!(IssueComment::new(&keyed).keys(), for_ever);
    assert_eq!(IssueFile::new(&keyed).keep_keys_for(10).keys(), ten);
    assert_eq!(IssueComment::new(&keyed).keep_keys_for(10).keys(), ten);
    // A keyless tracker ignores keys, so the tools promise none.
    assert_eq!(IssueFile::new(&keyless).keys(), Keys::None);
    assert_eq!(
        IssueComment::new(&keyless).keep_keys_for(10).keys(),
        Keys::None
    );
    // `search` only reads: no key.
    assert_eq!(Search::new(&keyed).keys(), Keys::None);
}

#[test]
fn issue_file_files_the_issue_and_answers_its_number() {
    let t = Tracker::new(Mode::Keyed);
    let tool = IssueFile::new(&t);
    let run = run();
    let out = tool
        .call(
            &ctx(&run, "c1", Some("k1"), &[]),
            &json!({ "title": "crash in parser", "body": "trace 1" }),
        )
        .unwrap();
    assert_eq!(out, ToolOutput::ok(issue_output(1)));
    let out = tool
        .call(
            &ctx(&run, "c2", Some("k2"), &[]),
            &json!({ "title": "slow start", "body": "trace 2" }),
        )
        .unwrap();
    assert_eq!(out, ToolOutput::ok(issue_output(2)));
    assert_eq!(
        titles(&t),
        [
            (1, "crash in parser".into(), "trace 1".into()),
            (2, "slow start".into(), "trace 2".into())
        ]
    );
    // The same key again is a repeat: the first answer, nothing new.
    let out = tool
        .call(
            &ctx(&run, "c1", Some("k1"), &[]),
            &json!({ "title": "crash in parser", "body": "trace 1" }),
        )
        .unwrap();
    assert_eq!(out.output, issue_output(1));
    assert_eq!(t.issues().len(), 2);
}

#[test]
fn issue_file_refuses_arguments_that_are_not_strings() {
    let t = Tracker::new(Mode::Keyless);
    let tool = IssueFile::new(&t);
    let run = run();
    let e = tool
        .call(&ctx(&run, "c1", None, &[]), &json!({ "title": "t" }))
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.starts_with("issue_file: missing argument \"body\"")),
        "{e:?}"
    );
    let e = tool
        .call(
            &ctx(&run, "c1", None, &[]),
            &json!({ "title": 1, "body": "b" }),
        )
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.contains("argument \"title\" must be a string, not 1")),
        "{e:?}"
    );
    assert!(t.issues().is_empty());
}

#[test]
fn a_refiling_for_the_same_cause_is_refused_with_the_first_issue() {
    let t = Tracker::new(Mode::Keyed);
    let tool = IssueFile::new(&t);
    let run = run();
    let first = json!({ "title": "crash in parser", "body": "trace" });
    let messages = vec![
        Message {
            role: Role::User,
            text: "triage the crash".into(),
            ..Message::default()
        },
        calls("c1", "issue_file", first.clone()),
        answers("c1", &issue_output(7)),
    ];
    let out = tool
        .call(&ctx(&run, "c2", Some("k2"), &messages), &first)
        .unwrap();
    assert!(out.is_error, "{out:?}");
    let v = json_of(&out.output);
    assert_eq!(v["issue"], 7, "{v}");
    let why = v["error"].as_str().unwrap_or_default();
    assert!(
        why.contains(
            "cause \"crash in parser\" was already filed by this run as issue #7 (call c1)"
        ),
        "{why}"
    );
    assert!(t.issues().is_empty(), "nothing was filed");
}

#[test]
fn the_cause_argument_decides_a_refiling_not_the_title() {
    let t = Tracker::new(Mode::Keyed);
    let tool = IssueFile::new(&t);
    let run = run();
    let messages = vec![
        calls(
            "c1",
            "issue_file",
            json!({ "title": "A", "body": "b", "cause": "parser.rs:10" }),
        ),
        answers("c1", &issue_output(1)),
    ];
    // Another title, the same cause: refused.
    let out = tool
        .call(
            &ctx(&run, "c2", Some("k2"), &messages),
            &json!({ "title": "B", "body": "b", "cause": "parser.rs:10" }),
        )
        .unwrap();
    assert!(out.is_error, "{out:?}");
    assert_eq!(json_of(&out.output)["issue"], 1);
    // The same title, another cause: filed.
    let out = tool
        .call(
            &ctx(&run, "c3", Some("k3"), &messages),
            &json!({ "title": "A", "body": "b", "cause": "lexer.rs:5" }),
        )
        .unwrap();
    assert_eq!(out, ToolOutput::ok(issue_output(1)));
    assert_eq!(titles(&t), [(1, "A".into(), "b".into())]);
}

#[test]
fn only_answered_filings_of_other_calls_count_as_filed_before() {
    let t = Tracker::new(Mode::Keyed);
    let tool = IssueFile::new(&t);
    let run = run();
    let args = json!({ "title": "X", "body": "b" });
    let messages = vec![
        // Another title, answered: another cause.
        calls("c1", "issue_file", json!({ "title": "Y", "body": "b" })),
        answers("c1", &issue_output(1)),
        // Not a filing, though its arguments name the title and its answer
        // names an issue.
        calls(
            "c2",
            "issue_comment",
            json!({ "issue": 1, "body": "b", "title": "X" }),
        ),
        answers("c2", &comment_output(1, 1)),
        // A filing for the cause that failed.
        calls("c3", "issue_file", args.clone()),
        answers("c3", &ToolOutput::error("the tracker refused it").output),
        // A filing for the cause with no answer yet.
        calls("c4", "issue_file", args.clone()),
        // This very call, answered in an earlier life: a retry of itself is
        // no refiling.
        calls("c5", "issue_file", args.clone()),
        answers("c5", &issue_output(9)),
    ];
    let out = tool
        .call(&ctx(&run, "c5", Some("k5"), &messages), &args)
        .unwrap();
    assert_eq!(out, ToolOutput::ok(issue_output(1)));
    assert_eq!(titles(&t), [(1, "X".into(), "b".into())]);
}

#[test]
fn issue_file_lookup_finds_a_filing_by_key_or_arguments() {
    let t = Tracker::new(Mode::Keyed);
    let tool = IssueFile::new(&t);
    let run = run();
    let args = json!({ "title": "crash", "body": "trace" });
    let c = ctx(&run, "c1", Some("k1"), &[]);
    assert_eq!(tool.lookup(&c, &args), Lookup::NotFound);
    tool.call(&c, &args).unwrap();
    assert_eq!(
        tool.lookup(&c, &args),
        Lookup::Found(ToolOutput::ok(issue_output(1)))
    );
    // Arguments that are no filing cannot be looked up.
    let l = tool.lookup(&c, &json!({ "title": "crash" }));
    assert!(
        matches!(&l, Lookup::CantTell(m) if m.contains("missing argument \"body\"")),
        "{l:?}"
    );

    // A tracker whose search lags cannot promise a filing is missing.
    let lagging = Tracker::new(Mode::Keyless).with_uncertain_lookup();
    let l = IssueFile::new(&lagging).lookup(&ctx(&run, "c1", None, &[]), &args);
    assert!(
        matches!(&l, Lookup::CantTell(m) if m.contains("may lag behind its writes")),
        "{l:?}"
    );
}

#[test]
fn issue_file_reports_an_answer_lost_after_the_tracker_acted_as_unknown() {
    let t = Tracker::new(Mode::Keyed).with_fault(Fault::FailAfterAccept { nth: 1 });
    let tool = IssueFile::new(&t);
    let run = run();
    let args = json!({ "title": "crash", "body": "trace" });
    let e = tool
        .call(&ctx(&run, "c1", Some("k1"), &[]), &args)
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Unknown(m) if m.starts_with("issue_file: ")),
        "{e:?}"
    );
    assert_eq!(t.issues().len(), 1, "the tracker acted");
    // A reused key with other arguments is a refusal the model sees.
    let e = tool
        .call(
            &ctx(&run, "c2", Some("k1"), &[]),
            &json!({ "title": "other", "body": "trace" }),
        )
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.starts_with("issue_file: ")),
        "{e:?}"
    );
}

#[test]
fn issue_comment_takes_the_issue_as_a_number_or_text() {
    let t = Tracker::new(Mode::Keyless);
    let run = run();
    let c = ctx(&run, "c1", None, &[]);
    IssueFile::new(&t)
        .call(&c, &json!({ "title": "crash", "body": "trace" }))
        .unwrap();
    let tool = IssueComment::new(&t);
    let out = tool
        .call(&c, &json!({ "issue": 1, "body": "one" }))
        .unwrap();
    assert_eq!(out, ToolOutput::ok(comment_output(1, 1)));
    let out = tool
        .call(&c, &json!({ "issue": "#1", "body": "two" }))
        .unwrap();
    assert_eq!(out, ToolOutput::ok(comment_output(1, 2)));
    let out = tool
        .call(&c, &json!({ "issue": "1", "body": "three" }))
        .unwrap();
    assert_eq!(out, ToolOutput::ok(comment_output(1, 3)));
    let bodies: Vec<String> = t.issues()[0]
        .comments
        .iter()
        .map(|c| c.body.clone())
        .collect();
    assert_eq!(bodies, ["one", "two", "three"]);

    for bad in [json!("one"), json!(-1), json!(1.5), json!(null), json!([1])] {
        let e = tool
            .call(&c, &json!({ "issue": bad, "body": "x" }))
            .unwrap_err();
        assert!(
            matches!(&e, ToolError::Failed(m) if m.contains("\"issue\" must be an issue number")),
            "{bad}: {e:?}"
        );
    }
    let e = tool.call(&c, &json!({ "body": "x" })).unwrap_err();
    assert!(matches!(&e, ToolError::Failed(_)), "{e:?}");
    // No such issue: refused, nothing done.
    let e = tool
        .call(&c, &json!({ "issue": 9, "body": "x" }))
        .unwrap_err();
    assert_eq!(e, ToolError::Failed("issue_comment: no issue #9".into()));
    assert_eq!(t.issues()[0].comments.len(), 3);
}

#[test]
fn issue_comment_lookup_finds_the_comment() {
    let t = Tracker::new(Mode::Keyed);
    let run = run();
    let c = ctx(&run, "c1", Some("k1"), &[]);
    IssueFile::new(&t)
        .call(&c, &json!({ "title": "crash", "body": "trace" }))
        .unwrap();
    let tool = IssueComment::new(&t);
    let args = json!({ "issue": 1, "body": "seen again" });
    let c = ctx(&run, "c2", Some("k2"), &[]);
    assert_eq!(tool.lookup(&c, &args), Lookup::NotFound);
    tool.call(&c, &args).unwrap();
    assert_eq!(
        tool.lookup(&c, &args),
        Lookup::Found(ToolOutput::ok(comment_output(1, 1)))
    );
    assert!(matches!(
        tool.lookup(&c, &json!({ "issue": "x", "body": "b" })),
        Lookup::CantTell(_)
    ));
}

#[test]
fn search_answers_the_matching_issues_numbers_and_titles() {
    let t = Tracker::new(Mode::Keyless);
    let run = run();
    let c = ctx(&run, "c1", None, &[]);
    let file = IssueFile::new(&t);
    file.call(&c, &json!({ "title": "crash in parser", "body": "x" }))
        .unwrap();
    file.call(&c, &json!({ "title": "slow start", "body": "no crash" }))
        .unwrap();
    file.call(&c, &json!({ "title": "typo", "body": "y" }))
        .unwrap();
    let tool = Search::new(&t);
    let out = tool.call(&c, &json!({ "query": "crash" })).unwrap();
    assert!(!out.is_error);
    assert_eq!(
        json_of(&out.output),
        json!({ "issues": [
            { "number": 1, "title": "crash in parser" },
            { "number": 2, "title": "slow start" },
        ] })
    );
    let out = tool
        .call(&c, &json!({ "query": "nothing like it" }))
        .unwrap();
    assert_eq!(json_of(&out.output), json!({ "issues": [] }));
    let e = tool.call(&c, &json!({})).unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.starts_with("search: missing argument \"query\"")),
        "{e:?}"
    );
}

#[test]
fn a_stale_holder_of_the_run_is_refused_as_stale_and_files_nothing() {
    // Keyless: without the epoch, nothing would stop the older holder's
    // request from filing a second issue.
    let t = Tracker::new(Mode::Keyless);
    let tool = IssueFile::new(&t);
    let run = run();
    let newer = CallContext {
        epoch: 2,
        ..ctx(&run, "c1", None, &[])
    };
    tool.call(&newer, &json!({ "title": "crash", "body": "t" }))
        .unwrap();
    let older = CallContext {
        epoch: 1,
        ..ctx(&run, "c1", None, &[])
    };
    match tool.call(&older, &json!({ "title": "crash", "body": "t" })) {
        Err(ToolError::Stale(m)) => assert!(m.contains("issue_file"), "{m}"),
        other => panic!("the older holder was not refused as stale: {other:?}"),
    }
    assert_eq!(t.issues().len(), 1);
}
