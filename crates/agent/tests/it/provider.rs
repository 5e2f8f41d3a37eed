//! The provider clients against the loopback test provider: a reply with
//! tool calls, 429 with Retry-After, 500 then success, retries running out,
//! a 4xx that is not retried, a timeout, a dropped connection, a malformed
//! body, invalid tool-call arguments (saved as a string, and the run goes
//! on), and the key in no error, no Debug output and no checkpoint.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::model::{Model, ModelError};
use agent::provider::{
    Anthropic, ApiKey, OpenAi, Price, Prices, ProviderError, Retry, Sleep, Timeouts,
};
use agent::state::{Checkpoint, Message, Phase, Role};
use agent::tool::ToolSpec;
use agent::tool::{CallContext, Effect, Tool, ToolError, ToolOutput, Tools};
use agent::{Agent, Error};
use durable::testing::MemDir;
use durable::{Dir, Options, RunId};
use serde_json::{json, Value};
use test_provider::{anthropic, openai, Response, Script, TestProvider};

const KEY: &str = "sk-test-0123456789abcdef";

fn key() -> ApiKey {
    ApiKey::new(KEY).unwrap()
}

/// A sleep that records the waits instead of waiting.
fn recorder() -> (Sleep, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let w = Arc::clone(&waits);
    (Arc::new(move |d| w.lock().unwrap().push(d)), waits)
}

fn client(server: &TestProvider, sleep: Sleep) -> OpenAi {
    OpenAi::new(&server.url(), key(), "test-model")
        .unwrap()
        .with_prices(Prices::empty().with(
            "test-model",
            Price {
                input_per_mtok: 2.0,
                output_per_mtok: 10.0,
            },
        ))
        .with_sleep(sleep)
        .with_retry(Retry {
            attempts: 3,
            ..Retry::default()
        })
}

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        text: text.into(),
        ..Message::default()
    }
}

fn provider_error(e: ModelError) -> ProviderError {
    match e {
        ModelError::Provider(p) => p,
        other => panic!("not a provider error: {other}"),
    }
}

#[test]
fn a_reply_keeps_the_providers_call_ids_and_prices_its_usage() {
    let server = TestProvider::start(Script::by_turn(vec![openai::completion(
        "searching",
        &[("call_abc", "search", r#"{"query": "parser"}"#)],
        1_000,
        100,
    )]))
    .unwrap();
    let (sleep, waits) = recorder();
    let model = client(&server, sleep).with_tools(vec![ToolSpec::new(
        "search",
        "Search issues.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    )]);
    let reply = model.reply(&[user("find parser issues")]).unwrap();
    assert_eq!(reply.text, "searching");
    assert_eq!(reply.calls.len(), 1);
    assert_eq!(reply.calls[0].id, "call_abc");
    assert_eq!(reply.calls[0].tool, "search");
    assert_eq!(reply.calls[0].args, r#"{"query": "parser"}"#);
    assert_eq!(
        (reply.usage.input_tokens, reply.usage.output_tokens),
        (1_000, 100)
    );
    assert!(
        (reply.usage.dollars - 0.003).abs() < 1e-12,
        "{}",
        reply.usage.dollars
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = r.json().unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "find parser issues"}])
    );
    assert_eq!(body["tools"][0]["function"]["name"], "search");
    assert!(waits.lock().unwrap().is_empty());
}

#[test]
fn a_429_waits_what_retry_after_says_then_succeeds() {
    let server = TestProvider::start(
        Script::first(vec![
            openai::error(429, "Rate limit reached").with_header("Retry-After", "2")
        ])
        .then_by_turn(vec![openai::completion("done", &[], 5, 1)]),
    )
    .unwrap();
    let (sleep, waits) = recorder();
    let reply = client(&server, sleep).reply(&[user("hi")]).unwrap();
    assert_eq!(reply.text, "done");
    assert_eq!(server.count(), 2);
    assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(2)]);
}

#[test]
fn a_500_is_retried_with_jittered_backoff() {
    let server = TestProvider::start(
        Script::first(vec![
            openai::error(500, "internal"),
            openai::error(503, "overloaded"),
        ])
        .then_by_turn(vec![openai::completion("done", &[], 5, 1)]),
    )
    .unwrap();
    let (sleep, waits) = recorder();
    let reply = client(&server, sleep).reply(&[user("hi")]).unwrap();
    assert_eq!(reply.text, "done");
    assert_eq!(server.count(), 3);
    let waits = waits.lock().unwrap();
    let r = Retry::default();
    assert_eq!(waits.len(), 2);
    assert!(
        waits[0] <= r.ceiling(1) && waits[1] <= r.ceiling(2),
        "{waits:?}"
    );
}

#[test]
fn retries_are_bounded_in_count_and_in_time() {
    let server = TestProvider::start(Script::first(vec![openai::error(500, "down"); 5])).unwrap();
    let (sleep, _) = recorder();
    let e = provider_error(client(&server, sleep).reply(&[user("hi")]).unwrap_err());
    assert_eq!(e.status(), Some(500));
    assert_eq!(e.attempts(), 3);
    assert_eq!(server.count(), 3);
    assert!(
        e.to_string()
            .ends_with(": HTTP 500 (after 3 attempts): down"),
        "{e}"
    );

    // A wait longer than the budget left is not waited: the error says so.
    let server = TestProvider::start(Script::first(vec![
        openai::error(429, "quota").with_header("Retry-After", "3600")
    ]))
    .unwrap();
    let (sleep, waits) = recorder();
    let e = provider_error(client(&server, sleep).reply(&[user("hi")]).unwrap_err());
    assert_eq!(server.count(), 1);
    assert!(waits.lock().unwrap().is_empty());
    assert!(
        e.to_string().ends_with(
            ": HTTP 429: quota (the provider asked to wait 3600 s, past the retry budget)"
        ),
        "{e}"
    );
}

/// A wait that takes the time since the first request exactly to the
/// budget is still waited: the budget is how long retries may take.
#[test]
fn a_wait_that_just_fits_the_budget_is_waited() {
    let server = TestProvider::start(
        Script::first(vec![
            openai::error(429, "slow down")
                .with_header("Retry-After", "30");
            2
        ])
        .then_by_turn(vec![openai::completion("done", &[], 5, 1)]),
    )
    .unwrap();
    let (sleep, waits) = recorder();
    let model = client(&server, sleep).with_retry(Retry {
        attempts: 5,
        budget: Duration::from_secs(60),
        ..Retry::default()
    });
    let reply = model.reply(&[user("hi")]).unwrap();
    assert_eq!(reply.text, "done");
    assert_eq!(server.count(), 3);
    assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(30); 2]);
}

/// A provider that asks for no wait (`Retry-After: 0`) when the budget is
/// spent asked for nothing the error should report.
#[test]
fn a_zero_retry_after_past_the_budget_is_not_reported_as_asked() {
    let server = TestProvider::start(Script::first(vec![
        openai::error(429, "quota").with_header("Retry-After", "0")
    ]))
    .unwrap();
    let (sleep, waits) = recorder();
    let model = client(&server, sleep).with_retry(Retry {
        attempts: 5,
        budget: Duration::ZERO,
        ..Retry::default()
    });
    let e = provider_error(model.reply(&[user("hi")]).unwrap_err());
    assert_eq!(server.count(), 1);
    assert!(waits.lock().unwrap().is_empty());
    assert!(
        matches!(
            e,
            ProviderError::Status {
                status: 429,
                attempts: 1,
                retry_after: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().ends_with(": HTTP 429: quota"), "{e}");
}

/// Anthropic's client shows its endpoint, model and tools (in its Debug
/// output and by its getters), and the key only as redacted.
#[test]
fn anthropics_client_shows_its_settings_but_not_the_key() {
    let model = Anthropic::new("http://127.0.0.1:9", key(), "claude-x")
        .unwrap()
        .with_tools(vec![ToolSpec::new(
            "echo",
            "Echo.",
            json!({"type": "object"}),
        )]);
    let shown = format!("{model:?}");
    for part in [
        "Anthropic {",
        "url: \"http://127.0.0.1:9/v1/messages\"",
        "model: \"claude-x\"",
        "key: ApiKey([redacted])",
        "tools: [\"echo\"]",
    ] {
        assert!(shown.contains(part), "{part} in {shown}");
    }
    assert!(!shown.contains(KEY), "{shown}");
    assert_eq!(model.endpoint(), "http://127.0.0.1:9/v1/messages");
    assert_eq!(model.model(), "claude-x");
}

#[test]
fn a_4xx_other_than_429_is_not_retried_and_names_status_and_message_but_not_the_key() {
    let server = TestProvider::start(Script::first(vec![openai::error(
        401,
        &format!("Incorrect API key provided: {KEY}."),
    )]))
    .unwrap();
    let (sleep, waits) = recorder();
    let model = client(&server, sleep);
    let e = provider_error(model.reply(&[user("hi")]).unwrap_err());
    assert_eq!(server.count(), 1);
    assert!(waits.lock().unwrap().is_empty());
    assert_eq!(
        e.to_string(),
        format!(
            "{}/chat/completions: HTTP 401: Incorrect API key provided: [redacted].",
            server.url()
        )
    );
    for shown in [e.to_string(), format!("{e:?}"), format!("{model:?}")] {
        assert!(!shown.contains(KEY), "{shown}");
    }
}

#[test]
fn a_timeout_is_retried_then_reported() {
    let server =
        TestProvider::start(Script::first(vec![Response::hang(), Response::hang()])).unwrap();
    let (sleep, _) = recorder();
    let model = client(&server, sleep)
        .with_retry(Retry {
            attempts: 2,
            ..Retry::default()
        })
        .with_timeouts(Timeouts {
            connect: Duration::from_secs(5),
            read: Duration::from_millis(200),
        });
    // The client holds the timeouts it was given (else the hang below
    // would last the default 120 s).
    assert!(
        format!("{model:?}").contains("timeouts: Timeouts { connect: 5s, read: 200ms }"),
        "{model:?}"
    );
    let e = provider_error(model.reply(&[user("hi")]).unwrap_err());
    assert!(
        matches!(e, ProviderError::Timeout { attempts: 2, .. }),
        "{e:?}"
    );
    assert_eq!(server.count(), 2);
    assert!(e.to_string().contains("(after 2 attempts)"), "{e}");
}

#[test]
fn a_dropped_connection_is_retried() {
    let server = TestProvider::start(
        Script::first(vec![Response::close()]).then_by_turn(vec![openai::completion(
            "ok",
            &[],
            1,
            1,
        )]),
    )
    .unwrap();
    let (sleep, _) = recorder();
    assert_eq!(
        client(&server, sleep).reply(&[user("hi")]).unwrap().text,
        "ok"
    );
    assert_eq!(server.count(), 2);
}

#[test]
fn a_malformed_body_is_a_typed_error_and_not_retried() {
    let server =
        TestProvider::start(Script::first(vec![Response::ok(r#"{"choices": [{"mess"#)])).unwrap();
    let (sleep, _) = recorder();
    let e = provider_error(client(&server, sleep).reply(&[user("hi")]).unwrap_err());
    assert!(
        matches!(e, ProviderError::Malformed { status: 200, .. }),
        "{e:?}"
    );
    assert_eq!(server.count(), 1);
    assert!(
        e.to_string()
            .contains("the body is not a OpenAI chat completion reply"),
        "{e}"
    );
}

/// A tool that reads its arguments as JSON and echoes them.
struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn effect(&self) -> Effect {
        Effect::ReadsOnly
    }
    fn call(&self, _ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok(args.to_string()))
    }
}

#[test]
fn invalid_tool_call_arguments_are_saved_as_a_string_and_the_run_goes_on() {
    let server = TestProvider::start(Script::by_turn(vec![
        openai::completion(
            "",
            &[("call_1", "echo", r#"{"text": "unterminated"#)],
            10,
            2,
        ),
        openai::completion("", &[("call_2", "echo", r#"{"text": "fixed"}"#)], 20, 2),
        openai::completion("echoed", &[], 30, 2),
    ]))
    .unwrap();
    let (sleep, _) = recorder();
    let checkpoints = MemDir::new();
    let run = RunId::parse("live-run-1").unwrap();
    let agent = Agent::new(
        run.clone(),
        Arc::new(checkpoints.clone()),
        "echo something",
        client(&server, sleep),
        Tools::new().with(Echo),
    )
    .with_options(Options {
        sync: false,
        ..Options::default()
    });
    let result = agent.run().unwrap();
    assert_eq!(result.answer, "echoed");
    assert_eq!(server.count(), 3);

    let st = Checkpoint::load(&checkpoints, &run).unwrap().unwrap();
    assert_eq!(st.phase, Phase::Done);
    let calls: Vec<&str> = st
        .messages
        .iter()
        .flat_map(|m| &m.calls)
        .map(|c| c.args.as_str())
        .collect();
    assert_eq!(calls, [r#"{"text": "unterminated"#, r#"{"text": "fixed"}"#]);
    let first_result = st
        .messages
        .iter()
        .find(|m| m.call_id.as_deref() == Some("call_1"))
        .unwrap();
    assert!(first_result.text.contains("error"), "{}", first_result.text);
    // The second request carried the invalid arguments back as they were.
    let second = server.requests()[1].json().unwrap();
    assert_eq!(
        second["messages"][1]["tool_calls"][0]["function"]["arguments"],
        r#"{"text": "unterminated"#
    );
    assert_eq!(st.usage.input_tokens, 60);

    // The key is in no checkpoint file.
    for name in checkpoints.list().unwrap() {
        let bytes = checkpoints.read(&name).unwrap().unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains(KEY), "{name}");
    }
}

#[test]
fn a_model_error_stops_the_run_without_the_key_in_it() {
    let server = TestProvider::start(Script::first(vec![openai::error(
        403,
        &format!("key {KEY} revoked"),
    )]))
    .unwrap();
    let (sleep, _) = recorder();
    let agent = Agent::new(
        RunId::parse("live-run-2").unwrap(),
        Arc::new(MemDir::new()),
        "task",
        client(&server, sleep),
        Tools::new().with(Echo),
    )
    .with_options(Options {
        sync: false,
        ..Options::default()
    });
    let e = agent.run().unwrap_err();
    assert!(matches!(e, Error::Model { turn: 1, .. }), "{e:?}");
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(shown.contains("403"), "{shown}");
        assert!(!shown.contains(KEY), "{shown}");
    }
}

#[test]
fn anthropic_messages_round_trip() {
    let server = TestProvider::start(
        Script::first(vec![anthropic::error(529, "Overloaded")]).then_by_turn(vec![
            anthropic::message(
                "looking",
                &[("toolu_1", "echo", r#"{"text": "x"}"#)],
                100,
                10,
            ),
        ]),
    )
    .unwrap();
    let (sleep, waits) = recorder();
    let base = format!("http://{}", server.addr());
    let model = Anthropic::new(&base, key(), "claude-sonnet-4-20250514")
        .unwrap()
        .with_sleep(sleep)
        .with_tools(vec![ToolSpec::new(
            "echo",
            "Echo.",
            json!({"type": "object"}),
        )]);
    let reply = model.reply(&[user("go")]).unwrap();
    assert_eq!(reply.calls[0].id, "toolu_1");
    assert_eq!(reply.calls[0].args, r#"{"text":"x"}"#);
    assert_eq!(server.count(), 2);
    assert_eq!(waits.lock().unwrap().len(), 1);
    let r = &server.requests()[1];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some(Anthropic::VERSION));
    assert_eq!(
        r.json().unwrap()["tools"][0]["input_schema"],
        json!({"type": "object"})
    );

    let server = TestProvider::start(Script::first(vec![anthropic::error(
        400,
        "max_tokens: too large",
    )]))
    .unwrap();
    let e = provider_error(
        Anthropic::new(&format!("http://{}", server.addr()), key(), "claude-x")
            .unwrap()
            .reply(&[user("go")])
            .unwrap_err(),
    );
    assert!(
        e.to_string()
            .ends_with("/v1/messages: HTTP 400: max_tokens: too large"),
        "{e}"
    );
    assert!(!format!("{model:?}").contains(KEY));
}

/// The conversation of a second turn: the task, the first reply's call,
/// its result.
fn second_turn() -> [Message; 3] {
    [
        user("go"),
        Message {
            role: Role::Assistant,
            calls: vec![agent::state::ToolCall {
                id: "call_1".into(),
                tool: "echo".into(),
                args: "{}".into(),
            }],
            ..Message::default()
        },
        Message {
            role: Role::Tool,
            text: "x".into(),
            call_id: Some("call_1".into()),
            ..Message::default()
        },
    ]
}

/// A tool call a provider sends without an ID gets one made from the turn
/// (how many assistant messages the conversation already holds, plus one)
/// and its place in the reply, the same on every retry: OpenAI's client
/// and Anthropic's alike.
#[test]
fn a_call_without_an_id_is_named_by_its_turn() {
    let server = TestProvider::start(Script::first(vec![openai::completion(
        "",
        &[("", "echo", r#"{"text": "x"}"#)],
        1,
        1,
    )]))
    .unwrap();
    let (sleep, _) = recorder();
    let reply = client(&server, sleep).reply(&second_turn()).unwrap();
    assert_eq!(reply.calls[0].id, "call_t2_1");

    let server = TestProvider::start(Script::first(vec![anthropic::message(
        "",
        &[("", "echo", r#"{"text": "x"}"#)],
        1,
        1,
    )]))
    .unwrap();
    let model = Anthropic::new(&format!("http://{}", server.addr()), key(), "claude-x").unwrap();
    let reply = model.reply(&second_turn()).unwrap();
    assert_eq!(reply.calls[0].id, "call_t2_1");
}
