//! `agent::mcp` against a scripted MCP server (in process, over a pipe),
//! for the answers the tracker never gives: each kind of JSON-RPC error,
//! a result with structured content only, an error result, a call still in
//! flight, lookups that find nothing, and a server with no lookup tool.

#![cfg(feature = "mcp-tools")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::mcp::IN_FLIGHT_TRIES;
use agent::tool::{Lookup, ToolError, ToolOutput, Tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};

/// Answers each tool by its name; counts the calls of `busy` and when each
/// came.
#[derive(Clone)]
struct Scripted {
    with_lookup: bool,
    busy_calls: Arc<AtomicU32>,
    busy_at: Arc<Mutex<Vec<Instant>>>,
    /// `busy` answers "in flight" this many times, then files.
    busy_for: u32,
    /// Every call's tool, in order.
    called: Arc<Mutex<Vec<String>>>,
}

fn in_flight() -> ErrorData {
    // Not an internal error: the code alone must decide.
    ErrorData::invalid_request("still running", Some(json!({"code": "request_in_flight"})))
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut names = vec!["busy", "internal", "refused", "structured", "erring"];
        if self.with_lookup {
            names.push("lookup");
        }
        let tools = names
            .into_iter()
            .map(|n| Tool::new(n, "scripted", Arc::new(JsonObject::new())))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        self.called.lock().unwrap().push(request.name.to_string());
        let result = match request.name.as_ref() {
            "busy" => {
                self.busy_at.lock().unwrap().push(Instant::now());
                if self.busy_calls.fetch_add(1, Ordering::SeqCst) < self.busy_for {
                    return Err(in_flight());
                }
                CallToolResult::success(vec![ContentBlock::text("filed")])
            }
            "internal" => return Err(ErrorData::internal_error("disk full", None)),
            "refused" => return Err(ErrorData::invalid_params("no such issue", None)),
            // Structured content and no text block at all.
            "structured" => {
                let mut r = CallToolResult::structured(json!({"issue": 7}));
                r.content.clear();
                r
            }
            "erring" => CallToolResult::error(vec![ContentBlock::text("no issue #9")]),
            // The lookup knows of nothing but `structured`'s calls with
            // `{"n": 1}` (answered in `response`, as over HTTP) and
            // `{"n": 3}` (in `output`, an older server's name); of `erring`
            // it cannot tell.
            "lookup" => {
                let answer = match (args["tool"].as_str(), &args["arguments"]) {
                    (Some("structured"), a) if *a == json!({"n": 1}) => {
                        json!({"outcome": "found", "response": {"issue": 7}})
                    }
                    (Some("structured"), a) if *a == json!({"n": 3}) => {
                        json!({"outcome": "found", "output": {"issue": 8}})
                    }
                    (Some("structured"), a) if *a == json!({"n": 4}) => {
                        json!({"outcome": "found"})
                    }
                    (Some("erring"), _) => {
                        json!({"outcome": "cant_tell", "reason": "the index lags"})
                    }
                    _ => json!({"outcome": "not_found"}),
                };
                CallToolResult::success(vec![ContentBlock::text(answer.to_string())])
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::from(result))
    }
}

fn scripted(with_lookup: bool, busy_for: u32) -> Scripted {
    Scripted {
        with_lookup,
        busy_calls: Arc::new(AtomicU32::new(0)),
        busy_at: Arc::new(Mutex::new(Vec::new())),
        busy_for,
        called: Arc::new(Mutex::new(Vec::new())),
    }
}

use crate::pipe;
use pipe::{connect, with_tool};

fn ctx_call(tools: &Tools, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
    with_tool(tools, name, |t, ctx| t.call(ctx, &args))
}

fn ctx_lookup(tools: &Tools, name: &str, args: Value) -> Lookup {
    with_tool(tools, name, |t, ctx| t.lookup(ctx, &args))
}

#[test]
fn each_answer_means_what_the_module_docs_say() {
    let server = scripted(true, 0);
    let called = server.called.clone();
    let client = connect(server);
    let debug = format!("{client:?}");
    assert!(
        debug.starts_with("McpClient {") && debug.contains("timeout: 30s"),
        "{debug}"
    );
    let tools = client.tools().unwrap();
    let names: Vec<&str> = tools.names().collect();
    assert_eq!(
        names,
        ["busy", "erring", "internal", "refused", "structured"]
    );
    // An internal error may have happened: unknown. Any other refusal did
    // not: failed, and the model sees why.
    let internal = ctx_call(&tools, "internal", json!({})).unwrap_err();
    assert!(
        matches!(&internal, ToolError::Unknown(m) if m == "internal: disk full"),
        "{internal:?}"
    );
    let refused = ctx_call(&tools, "refused", json!({})).unwrap_err();
    assert!(
        matches!(&refused, ToolError::Failed(m) if m == "refused: no such issue"),
        "{refused:?}"
    );
    // Structured content alone is the output, as JSON text.
    let out = ctx_call(&tools, "structured", json!({"n": 1})).unwrap();
    assert_eq!(out, ToolOutput::ok(r#"{"issue":7}"#));
    // An error result is output the model sees, marked as an error.
    let out = ctx_call(&tools, "erring", json!({})).unwrap();
    assert_eq!(out.output, "no issue #9");
    assert!(out.is_error);
    // Arguments that are not an object never reach the server.
    let bad = ctx_call(&tools, "refused", json!([1])).unwrap_err();
    assert!(
        matches!(&bad, ToolError::Failed(m) if m.contains("JSON object")),
        "{bad:?}"
    );
    // Only a call in flight is asked again: each of these was sent once.
    assert_eq!(
        *called.lock().unwrap(),
        ["internal", "refused", "structured", "erring"]
    );
}

#[test]
fn the_lookup_tool_answers_found_not_found_or_cant_tell() {
    let tools = connect(scripted(true, 0)).tools().unwrap();
    assert_eq!(
        ctx_lookup(&tools, "structured", json!({"n": 1})),
        Lookup::Found(ToolOutput::ok(r#"{"issue":7}"#))
    );
    assert_eq!(
        ctx_lookup(&tools, "structured", json!({"n": 3})),
        Lookup::Found(ToolOutput::ok(r#"{"issue":8}"#))
    );
    assert_eq!(
        ctx_lookup(&tools, "structured", json!({"n": 4})),
        Lookup::CantTell("the lookup found it but gave no response".into())
    );
    assert_eq!(
        ctx_lookup(&tools, "structured", json!({"n": 2})),
        Lookup::NotFound
    );
    assert_eq!(
        ctx_lookup(&tools, "erring", json!({})),
        Lookup::CantTell("the index lags".into())
    );
}

#[test]
fn without_a_lookup_tool_every_lookup_cant_tell() {
    let tools = connect(scripted(false, 0)).tools().unwrap();
    assert_eq!(
        ctx_lookup(&tools, "structured", json!({"n": 1})),
        Lookup::CantTell("the MCP server of structured offers no lookup tool".into())
    );
}

/// A call still in flight is asked again, after 20 ms, then 40, 80, …; one
/// that answers in time files once.
#[test]
fn a_call_in_flight_is_retried_with_doubling_pauses() {
    let server = scripted(true, IN_FLIGHT_TRIES - 1);
    let (calls, at) = (server.busy_calls.clone(), server.busy_at.clone());
    let tools = connect(server).tools().unwrap();
    let out = ctx_call(&tools, "busy", json!({})).unwrap();
    assert_eq!(out, ToolOutput::ok("filed"));
    assert_eq!(calls.load(Ordering::SeqCst), IN_FLIGHT_TRIES);
    let at = at.lock().unwrap();
    for (i, pair) in at.windows(2).enumerate() {
        let least = Duration::from_millis(20 << i);
        assert!(
            pair[1] - pair[0] >= least,
            "pause {i}: {:?}",
            pair[1] - pair[0]
        );
    }
}

/// One still in flight after every try may have happened: unknown, saying
/// how many tries it had.
#[test]
fn a_call_in_flight_after_every_try_is_unknown() {
    let server = scripted(true, u32::MAX);
    let calls = server.busy_calls.clone();
    let tools = connect(server).tools().unwrap();
    let e = ctx_call(&tools, "busy", json!({})).unwrap_err();
    assert!(
        matches!(&e, ToolError::Unknown(m)
            if m == &format!("busy: still in flight after {IN_FLIGHT_TRIES} tries: still running")),
        "{e:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), IN_FLIGHT_TRIES);
}
