//! Tools from an MCP server (feature `mcp-tools`), with the call's
//! idempotency key in the request's `_meta`.
//!
//! [`McpClient::spawn`] starts a server as a child process speaking MCP on
//! its stdin/stdout (or [`McpClient::over`] any byte pipe), and
//! [`McpClient::tools`] lists its tools and wraps each as a [`Tool`]:
//!
//! * its [`Effect`] comes from the tool's annotations: `readOnlyHint` is
//!   [`Effect::ReadsOnly`], `idempotentHint` [`Effect::Idempotent`], anything
//!   else [`Effect::Changes`];
//! * its [`Keys`] from the tool's `_meta` [`KEYS_META`]
//!   (`io.crashsweep/idempotency`, `{"ttl_secs": N | null}`): present, the
//!   server honours keys for that long, and every call carries
//!   [`CallContext::key`] in the request's `_meta` under [`META_KEY`]
//!   (`io.crashsweep/idempotency-key`) — never in the arguments;
//! * every call carries its fence in `_meta`: the run under [`META_RUN`]
//!   and [`CallContext::epoch`] under [`META_EPOCH`], so a server that has
//!   seen a newer holder of the run refuses this one (error code
//!   `stale_epoch`, [`ToolError::Stale`]: the run stops);
//! * its [`lookup`](Tool::lookup) calls the server's `lookup` tool, if it has
//!   one (`{"tool", "arguments"}`, the key in `_meta`; it answers
//!   `{"outcome": "found", "output"} | {"outcome": "not_found"} |
//!   {"outcome": "cant_tell", "reason"}`).
//!
//! What a call's answer means for the loop: a result is the output (a
//! result with `isError` an error the model sees); a JSON-RPC error whose
//! `data.code` is `request_in_flight` is retried a bounded number of times,
//! then an unknown outcome (up the ladder); `key_reused` is
//! [`ToolError::Fatal`] (one key, two requests: a bug; the run stops); any
//! other JSON-RPC error refused the call ([`ToolError::Failed`]), except
//! `internal_error`, which may have acted; a closed transport or a timeout
//! after the request went out is an unknown outcome.
//!
//! The client runs its own small tokio runtime and blocks the loop's thread
//! on each call, so the loop stays synchronous; do not call it from inside
//! another tokio runtime.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = std::process::Command::new("tracker");
//! server.args(["mcp", "--dir", "/tmp/tracker"]);
//! let tools = agent::mcp::McpClient::spawn(server)?.tools()?;
//! assert!(tools.get("issue_file").is_some());
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, MetaObject, RequestMetaObject};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::tool::{CallContext, Effect, Keys, Lookup, Tool, ToolError, ToolOutput, Tools};

/// The `_meta` entry of a `tools/call` request that carries the call's key.
pub const META_KEY: &str = "io.crashsweep/idempotency-key";

/// The `_meta` entry of a `tools/call` request that names the run (with
/// [`META_EPOCH`]: the call's fence, sent on every call).
pub const META_RUN: &str = "io.crashsweep/run";

/// The `_meta` entry of a `tools/call` request that carries this process's
/// fencing epoch of the run ([`CallContext::epoch`]). A server that has
/// seen a newer one answers with the error code `stale_epoch`:
/// [`ToolError::Stale`], and the run stops.
pub const META_EPOCH: &str = "io.crashsweep/epoch";

/// The `_meta` entry of a listed tool saying the server honours keys for it.
pub const KEYS_META: &str = "io.crashsweep/idempotency";

/// How many times a call answered `request_in_flight` is sent, in all.
pub const IN_FLIGHT_TRIES: u32 = 5;

/// Why the client could not start or list tools.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The runtime, the child process or the MCP handshake failed.
    #[error("cannot start the MCP client: {0}")]
    Start(String),
    /// `tools/list` failed.
    #[error("cannot list the MCP server's tools: {0}")]
    List(String),
}

/// A connection to one MCP server.
pub struct McpClient {
    runtime: tokio::runtime::Runtime,
    service: RunningService<RoleClient, ()>,
    timeout: Duration,
    /// The server's process, when [`McpClient::spawn`] started it: killed
    /// when the client goes (its stdin closes first, which ends a server
    /// that reads to the end).
    _child: Option<tokio::process::Child>,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, McpError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| McpError::Start(format!("tokio runtime: {e}")))
}

/// The streams the client reads answers from and writes requests to.
type Streams = (
    Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
);

impl McpClient {
    /// Start `command` as an MCP server on its stdin/stdout and shake hands.
    /// Its stderr stays this process's.
    pub fn spawn(command: std::process::Command) -> Result<Arc<McpClient>, McpError> {
        let runtime = runtime()?;
        let program = command.get_program().to_string_lossy().into_owned();
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = {
            let _in_runtime = runtime.enter();
            command
                .spawn()
                .map_err(|e| McpError::Start(format!("cannot start {program}: {e}")))?
        };
        let (Some(write), Some(read)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(McpError::Start(format!(
                "{program}: no pipe to its stdin or stdout"
            )));
        };
        McpClient::start(runtime, (Box::new(read), Box::new(write)), Some(child))
            .map_err(|e| McpError::Start(format!("{program}: {e}")))
    }

    /// Speak MCP over a byte pipe (`read` from the server, `write` to it).
    pub fn over<R, W>(read: R, write: W) -> Result<Arc<McpClient>, McpError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        McpClient::start(runtime()?, (Box::new(read), Box::new(write)), None)
            .map_err(McpError::Start)
    }

    /// The handshake on boxed streams: every client (a child's pipes, any
    /// caller's streams) runs through here, so the SDK's client service,
    /// generic over its transport, is compiled once.
    fn start(
        runtime: tokio::runtime::Runtime,
        streams: Streams,
        child: Option<tokio::process::Child>,
    ) -> Result<Arc<McpClient>, String> {
        let service = runtime
            .block_on(async { ().serve(streams).await })
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(McpClient {
            runtime,
            service,
            timeout: Duration::from_secs(30),
            _child: child,
        }))
    }

    /// List the server's tools and wrap each as a [`Tool`] (see the module
    /// docs). The `lookup` tool itself is not offered to the model.
    pub fn tools(self: &Arc<Self>) -> Result<Tools, McpError> {
        let listed = self
            .runtime
            .block_on(self.service.peer().list_all_tools())
            .map_err(|e| McpError::List(e.to_string()))?;
        let has_lookup = listed.iter().any(|t| t.name == "lookup");
        let mut tools = Tools::new();
        for t in listed.iter().filter(|t| t.name != "lookup") {
            let a = t.annotations.as_ref();
            let effect = if a.and_then(|a| a.read_only_hint) == Some(true) {
                Effect::ReadsOnly
            } else if a.and_then(|a| a.idempotent_hint) == Some(true) {
                Effect::Idempotent
            } else {
                Effect::Changes
            };
            let keys = match t.meta.as_ref().and_then(|m| m.0.get(KEYS_META)) {
                Some(v) => Keys::Honoured {
                    keep_for: v.get("ttl_secs").and_then(Value::as_u64),
                },
                None => Keys::None,
            };
            tools.insert(McpTool {
                client: Arc::clone(self),
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                parameters: Value::Object((*t.input_schema).clone()),
                effect,
                keys,
                has_lookup,
            });
        }
        Ok(tools)
    }

    /// One `tools/call`, with `key` and the fence (run, epoch) in `_meta`,
    /// bounded by the timeout.
    fn call(
        &self,
        name: &str,
        args: serde_json::Map<String, Value>,
        key: Option<&str>,
        fence: Option<(&str, u64)>,
    ) -> Result<CallToolResult, ServiceError> {
        let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        let mut meta = MetaObject::new();
        if let Some(k) = key {
            meta.0.insert(META_KEY.into(), Value::String(k.to_owned()));
        }
        if let Some((run, epoch)) = fence {
            meta.0
                .insert(META_RUN.into(), Value::String(run.to_owned()));
            meta.0.insert(META_EPOCH.into(), Value::from(epoch));
        }
        if !meta.0.is_empty() {
            params.meta = Some(RequestMetaObject(meta));
        }
        let peer = self.service.peer().clone();
        let timeout = self.timeout;
        self.runtime.block_on(async move {
            match tokio::time::timeout(timeout, peer.call_tool(params)).await {
                Ok(r) => r,
                Err(_) => Err(ServiceError::Timeout { timeout }),
            }
        })
    }
}

/// One tool of an MCP server.
struct McpTool {
    client: Arc<McpClient>,
    name: String,
    description: String,
    parameters: Value,
    effect: Effect,
    keys: Keys,
    has_lookup: bool,
}

fn text_of(r: &CallToolResult) -> String {
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    match (&r.structured_content, text.is_empty()) {
        (Some(v), true) => v.to_string(),
        _ => text,
    }
}

/// The `data.code` of a JSON-RPC error, if the server set one.
fn code(e: &rmcp::ErrorData) -> Option<&str> {
    e.data.as_ref()?.get("code")?.as_str()
}

fn object(tool: &str, args: &Value) -> Result<serde_json::Map<String, Value>, ToolError> {
    match args {
        Value::Object(o) => Ok(o.clone()),
        other => Err(ToolError::Failed(format!(
            "{tool}: the arguments must be a JSON object, not {other}"
        ))),
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.parameters.clone()
    }
    fn effect(&self) -> Effect {
        self.effect
    }
    fn keys(&self) -> Keys {
        self.keys
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let args = object(&self.name, args)?;
        let key = if self.keys.sends() { ctx.key } else { None };
        let fence = Some((ctx.run.as_str(), ctx.epoch));
        let mut pause = Duration::from_millis(20);
        for _ in 1..IN_FLIGHT_TRIES {
            match self.client.call(&self.name, args.clone(), key, fence) {
                Err(ServiceError::McpError(e)) if code(&e) == Some("request_in_flight") => {
                    std::thread::sleep(pause);
                    pause *= 2;
                }
                other => return self.answer(other),
            }
        }
        self.answer(self.client.call(&self.name, args, key, fence))
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        if !self.has_lookup {
            return Lookup::CantTell(format!(
                "the MCP server of {} offers no lookup tool",
                self.name
            ));
        }
        let query = json!({"tool": self.name, "arguments": args});
        let Value::Object(query) = query else {
            return Lookup::CantTell("cannot build the lookup".into());
        };
        let result = match self.client.call("lookup", query, ctx.key, None) {
            Ok(r) => r,
            Err(e) => return Lookup::CantTell(format!("the lookup failed: {e}")),
        };
        let answer: Value = match serde_json::from_str(&text_of(&result)) {
            Ok(v) => v,
            Err(e) => return Lookup::CantTell(format!("the lookup's answer is not JSON: {e}")),
        };
        match answer.get("outcome").and_then(Value::as_str) {
            // `response`, as over HTTP; `output` from an older server.
            Some("found") => match answer.get("response").or_else(|| answer.get("output")) {
                Some(out) => Lookup::Found(ToolOutput::ok(out.to_string())),
                None => Lookup::CantTell("the lookup found it but gave no response".into()),
            },
            Some("not_found") => Lookup::NotFound,
            _ => Lookup::CantTell(
                answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("the lookup cannot tell")
                    .to_owned(),
            ),
        }
    }
}

impl McpTool {
    /// What one call's answer means (see the module docs).
    fn answer(&self, r: Result<CallToolResult, ServiceError>) -> Result<ToolOutput, ToolError> {
        let tool = &self.name;
        match r {
            Ok(result) if result.is_error == Some(true) => Ok(ToolOutput {
                output: text_of(&result),
                is_error: true,
                ..ToolOutput::default()
            }),
            Ok(result) => Ok(ToolOutput::ok(text_of(&result))),
            Err(ServiceError::McpError(e)) => match code(&e) {
                Some("key_reused") => Err(ToolError::Fatal(format!("{tool}: {}", e.message))),
                Some("stale_epoch") => Err(ToolError::Stale(format!("{tool}: {}", e.message))),
                Some("request_in_flight") => Err(ToolError::Unknown(format!(
                    "{tool}: still in flight after {IN_FLIGHT_TRIES} tries: {}",
                    e.message
                ))),
                _ if e.code == rmcp::model::ErrorCode::INTERNAL_ERROR => {
                    Err(ToolError::Unknown(format!("{tool}: {}", e.message)))
                }
                _ => Err(ToolError::Failed(format!("{tool}: {}", e.message))),
            },
            Err(e) => Err(ToolError::Unknown(format!("{tool}: {e}"))),
        }
    }
}
