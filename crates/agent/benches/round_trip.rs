//! What one save costs next to one model round trip: the reply save (save
//! point 2) sits between every model call and the calls it asks for, so its
//! price only matters relative to the call it protects.
//!
//! Run with `cargo bench -p agent --features openai --bench round_trip`.
//! Std only: 11 samples of N operations each, the median per operation of:
//!
//! * one `OpenAi::reply` to the loopback test provider (a 20-message
//!   conversation, a reply with one tool call): the floor of a model round
//!   trip, with no model behind it and no network between;
//! * one `Checkpoint::save` of the state after that reply, on a real
//!   directory with fsync (as the `triage` command saves), and without.
//!
//! A real provider's round trip is seconds; the loopback one is the
//! client's own cost (request building, HTTP, JSON parsing), so the ratio
//! printed here is the most a save can weigh against a model call.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use agent::model::Model;
use agent::provider::{ApiKey, OpenAi};
use agent::state::{Checkpoint, Message, Phase, Role, State, ToolCall};
use agent::tool::ToolSpec;
use durable::{DiskDir, Options, RunId};
use serde_json::json;
use test_provider::{openai, Script, TestProvider};

const SAMPLES: usize = 11;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Microseconds per call of `f`, median of [`SAMPLES`] samples of `n`.
fn time(n: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up (connection, caches)
    median(
        (0..SAMPLES)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..n {
                    f();
                }
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            })
            .collect(),
    )
}

/// A conversation part-way through a triage run: the task, then six
/// replies with one call each and their results.
fn conversation() -> Vec<Message> {
    let mut m = vec![Message {
        role: Role::User,
        text: "Triage crash group M1: `todo done 3` after `todo rm 2` panics. ".repeat(8),
        ..Message::default()
    }];
    let output = "thread 'main' panicked at src/todo.rs:37:9: index out of bounds\n".repeat(12);
    for i in 0..6 {
        let id = format!("call_{i:02}AbCdEf");
        m.push(Message {
            role: Role::Assistant,
            text: format!("Looking at step {i}."),
            calls: vec![ToolCall {
                id: id.clone(),
                tool: "search".into(),
                args: r#"{"query":"index out of bounds"}"#.into(),
            }],
            call_id: None,
        });
        m.push(Message {
            role: Role::Tool,
            text: output.clone(),
            calls: vec![],
            call_id: Some(id),
        });
    }
    m
}

fn main() {
    let conv = conversation();
    let turns = conv.iter().filter(|m| m.role == Role::Assistant).count();
    let mut script = vec![openai::completion("", &[], 0, 0); turns];
    script.push(openai::completion(
        "Patching todo.rs.",
        &[(
            "call_patch01",
            "code_patch",
            r#"{"path":"todo.rs","old":"a","new":"b"}"#,
        )],
        9_000,
        120,
    ));
    let server = TestProvider::start(Script::by_turn(script)).expect("start the test provider");
    let model = OpenAi::new(
        &server.url(),
        ApiKey::new("sk-bench").expect("key"),
        "test-model",
    )
    .expect("client")
    .with_tools(vec![ToolSpec::new(
        "search",
        "Search issues.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    )]);

    let reply = model
        .reply(&conv)
        .expect("a reply from the loopback provider");
    let round_trip = time(50, || {
        black_box(model.reply(black_box(&conv)).expect("reply"));
    });

    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = Arc::new(DiskDir::new(tmp.path()).expect("disk dir"));
    let run = RunId::parse("bench-run").expect("run id");
    let mut messages = conv.clone();
    messages.push(Message {
        role: Role::Assistant,
        text: reply.text.clone(),
        calls: reply.calls.clone(),
        call_id: None,
    });
    let st = State {
        messages,
        calls: reply.calls.clone(),
        phase: Phase::Tools,
        turns: 7,
        ..State::default()
    };
    let saves = |sync: bool| {
        let opened = Checkpoint::open(
            dir.clone(),
            &run,
            Options {
                sync,
                max_resumes: None,
                ..Options::default()
            },
        )
        .expect("open the checkpoint");
        let mut cp = opened.checkpoint;
        time(if sync { 20 } else { 200 }, || {
            cp.save(black_box(&st)).expect("save");
        })
    };
    let synced = saves(true);
    let unsynced = saves(false);

    println!(
        "one model round trip, loopback provider   {round_trip:>9.1} µs (median of {SAMPLES})"
    );
    println!("one reply save, disk, fsync               {synced:>9.1} µs");
    println!("one reply save, disk, no fsync            {unsynced:>9.1} µs");
    println!(
        "save / round trip                          {:>9.2} (fsync), {:.2} (no fsync)",
        synced / round_trip,
        unsynced / round_trip
    );
    println!(
        "state saved: {} bytes; request sent: {} bytes",
        serde_json::to_string(&st).map_or(0, |s| s.len()),
        model.request_body(&conv).to_string().len()
    );
}
