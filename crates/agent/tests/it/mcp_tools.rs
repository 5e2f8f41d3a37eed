//! `agent::mcp` against the tracker's MCP server, in process over a pipe:
//! the client lists the tools, learns their effects and key policy, sends
//! the key in `_meta`, and a crashed run resumed through it files once.

#![cfg(feature = "mcp-tools")]

use std::sync::Arc;

use agent::mcp::McpClient;
use agent::model::Transcript;
use agent::tool::{CallContext, Effect, Keys, Lookup, ToolError, Tools};
use agent::Agent;
use durable::testing::MemDir;
use durable::{Options, RunId};
use serde_json::json;
use tracker::mcp::McpServer;
use tracker::service::{self, Service};

use crate::pipe;

/// A tracker service in `dir`, served over MCP on a pipe; the client.
fn serve(dir: &std::path::Path) -> Arc<McpClient> {
    let svc = Arc::new(Service::open(dir, service::Options::keyed()).unwrap());
    pipe::connect(McpServer::new(svc))
}

#[test]
fn the_constants_are_the_trackers() {
    assert_eq!(agent::mcp::META_KEY, tracker::wire::MCP_META_KEY);
    assert_eq!(agent::mcp::KEYS_META, tracker::wire::MCP_KEYS_META);
}

#[test]
fn tools_carry_their_effects_and_keys_and_send_the_key_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let tools = serve(dir.path()).tools().unwrap();
    let names: Vec<&str> = tools.names().collect();
    assert_eq!(names, ["issue_comment", "issue_file", "search"]);
    let file = tools.get("issue_file").unwrap();
    assert_eq!(file.effect(), Effect::Changes);
    assert_eq!(
        file.keys(),
        Keys::Honoured {
            keep_for: Some(86_400)
        }
    );
    assert_eq!(tools.get("search").unwrap().effect(), Effect::ReadsOnly);
    assert_eq!(tools.get("search").unwrap().keys(), Keys::None);

    let run = RunId::parse("run-1").unwrap();
    let ctx = CallContext {
        run: &run,
        call_id: "c1",
        key: Some("k-c1"),
        epoch: 1,
        messages: &[],
    };
    let args = json!({"title": "crash in parser", "body": "trace"});
    let first = file.call(&ctx, &args).unwrap();
    assert_eq!(first.output, r#"{"issue":1}"#);
    assert_eq!(file.call(&ctx, &args).unwrap(), first);
    assert_eq!(file.lookup(&ctx, &args), Lookup::Found(first.clone()));
    // The same key with other arguments: a bug, the run must stop.
    let reused = file
        .call(&ctx, &json!({"title": "other", "body": "b"}))
        .unwrap_err();
    assert!(matches!(reused, ToolError::Fatal(_)), "{reused:?}");
    // A missing issue is an error the model sees.
    let comment = tools.get("issue_comment").unwrap();
    let ctx2 = CallContext {
        call_id: "c2",
        key: Some("k-c2"),
        epoch: 1,
        ..ctx
    };
    let missing = comment
        .call(&ctx2, &json!({"issue": 9, "body": "x"}))
        .unwrap();
    assert!(missing.is_error, "{missing:?}");
    let search = tools.get("search").unwrap();
    let hits = search.call(&ctx, &json!({"query": "parser"})).unwrap();
    assert_eq!(
        hits.output,
        r#"{"issues":[{"number":1,"title":"crash in parser"}]}"#
    );
    let on_disk = std::fs::read_to_string(dir.path().join("tracker.json")).unwrap();
    assert_eq!(
        on_disk.matches("crash in parser").count(),
        2,
        "the issue and its key: {on_disk}"
    );
}

#[test]
fn a_run_crashed_after_the_tracker_filed_resumes_through_mcp_without_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let client = serve(dir.path());
    let transcript = Transcript::parse(
        r#"{"name": "mcp", "task": "File the parser crash.",
            "replies": [
              {"text": "Filing.", "calls": [{"id": "c1", "tool": "issue_file",
                 "args": {"title": "panic in parser", "body": "12 reports"}}]},
              {"text": "Filed #1."}]}"#,
        "mcp.json",
    )
    .unwrap();
    let checkpoints = MemDir::new();
    let life = |tools: Tools| {
        Agent::scripted(
            RunId::parse("mcp-run").unwrap(),
            Arc::new(checkpoints.clone()),
            transcript.clone(),
            tools,
        )
        .unwrap()
        .with_options(Options {
            sync: false,
            ..Options::default()
        })
    };
    let first = life(client.tools().unwrap());
    let crashed = crashpoint::crash_at(crashpoint::Hit::new("tool returned", 1), || first.run());
    assert!(crashed.outcome.crashed().is_some());
    let result = life(client.tools().unwrap()).run().unwrap();
    assert_eq!(result.answer, "Filed #1.");
    assert_eq!(result.resumes, 1);
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("tracker.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk["issues"].as_array().unwrap().len(), 1, "{on_disk}");
}

/// A server of a few lines of Python on stdin/stdout, as `McpClient::spawn`
/// starts one: it lists one keyed tool and answers a call with the key the
/// call carried in `_meta`, then exits when its stdin closes.
const PY_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "py", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "file", "inputSchema": {"type": "object"},
                        "_meta": {"io.crashsweep/idempotency": {"ttl_secs": 60}}}]}
    elif m["method"] == "tools/call":
        key = m["params"].get("_meta", {}).get("io.crashsweep/idempotency-key")
        r = {"content": [{"type": "text", "text": json.dumps({"key": key})}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

#[test]
fn spawn_speaks_to_a_child_process_on_its_stdin_and_stdout() {
    let mut server = std::process::Command::new("python3");
    server.args(["-c", PY_SERVER]);
    let tools = McpClient::spawn(server).unwrap().tools().unwrap();
    let file = tools.get("file").unwrap();
    assert_eq!(file.keys(), Keys::Honoured { keep_for: Some(60) });
    let answer = pipe::with_tool(&tools, "file", |file, ctx| file.call(ctx, &json!({}))).unwrap();
    assert_eq!(answer.output, r#"{"key": "k-c1"}"#);
}

#[test]
fn spawn_names_a_program_that_cannot_start_or_hangs_up() {
    let missing = std::process::Command::new("/nonexistent/mcp-server");
    let err = McpClient::spawn(missing).unwrap_err().to_string();
    assert!(
        err.contains("cannot start /nonexistent/mcp-server"),
        "{err}"
    );
    // A program that exits at once: the handshake fails, naming it.
    let err = McpClient::spawn(std::process::Command::new("true"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot start the MCP client: true: "),
        "{err}"
    );
}
