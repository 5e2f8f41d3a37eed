//! The agent's state in its checkpoint: JSON shape, round trips, workspace
//! hashes, and the refusal of the old format.

mod old_format;
mod props;
mod serde_format;
mod workspace;

use std::sync::Arc;

use agent::state::{Checkpoint, Opened, State};
use durable::testing::MemDir;
use durable::{Dir, Options, RunId};

#[test]
fn public_types_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Checkpoint>();
    send_sync::<Opened>();
    send_sync::<State>();
}

/// Options for tests: no fsync (a process crash cannot tear a file anyway),
/// the default restart limit.
pub fn fast() -> Options {
    Options {
        sync: false,
        ..Options::default()
    }
}

pub fn run_id(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}

/// Open `run` in a clone of `world`, as a new process would.
pub fn open(world: &MemDir, run: &RunId, opts: Options) -> durable::Result<Opened> {
    Checkpoint::open(Arc::new(world.clone()), run, opts)
}

/// Every file in `dir` with its contents, to check that nothing changed.
pub fn snapshot(dir: &dyn Dir) -> Vec<(String, Vec<u8>)> {
    dir.list()
        .unwrap()
        .into_iter()
        .map(|n| {
            let data = dir.read(&n).unwrap().unwrap_or_default();
            (n, data)
        })
        .collect()
}

/// A realistic state: a few messages, calls, results and markers.
pub fn populated(run: &RunId) -> State {
    use agent::state::{Attempt, Message, Phase, Role, ToolCall, ToolResult, Usage};
    let mut s = State {
        phase: Phase::Tools,
        turns: 3,
        ..State::default()
    };
    s.summary = Some("earlier: read the crash log".into());
    s.usage = Usage {
        input_tokens: 12_345,
        output_tokens: 678,
        dollars: 0.1 + 0.2,
    };
    let calls = vec![
        ToolCall {
            id: "call_1".into(),
            tool: "issue_file".into(),
            args: r#"{"title":"crash in parser"}"#.into(),
        },
        ToolCall {
            id: "call_2".into(),
            tool: "code_patch".into(),
            args: r#"{"path": "src/lib.rs", "diff": "#.into(), // invalid JSON
        },
    ];
    s.messages = vec![
        Message {
            role: Role::User,
            text: "triage the crashes ✓".into(),
            ..Default::default()
        },
        Message {
            role: Role::Assistant,
            text: String::new(),
            calls: calls.clone(),
            call_id: None,
        },
        Message {
            role: Role::Tool,
            text: "filed #12".into(),
            calls: vec![],
            call_id: Some("call_1".into()),
        },
    ];
    s.calls = calls;
    s.results.insert(
        "call_1".into(),
        ToolResult {
            output: "filed #12".into(),
            is_error: false,
        },
    );
    s.attempts.insert(
        "call_1".into(),
        Attempt {
            key: Some(durable::key(run.as_str(), "call_1")),
            approved: true,
            at: 1_700_000_000,
        },
    );
    s.attempts.insert(
        "call_2".into(),
        Attempt {
            key: None,
            approved: false,
            at: 0,
        },
    );
    s.waiting = vec!["call_3".into()];
    s.record_file("src/lib.rs", b"fn main() {}\n");
    s
}

/// The bytes of a checkpoint file of run `r` holding `state`.
pub fn file_bytes(state: &State) -> Vec<u8> {
    let file = serde_json::json!({"version": durable::checkpoint::FORMAT_VERSION, "run": "r", "state": state});
    serde_json::to_vec_pretty(&file).unwrap()
}
