//! The tracker's tools served over MCP (stdio is enough), with the key in
//! the request's `_meta` under [`MCP_META_KEY`](crate::wire::MCP_META_KEY)
//! (`io.crashsweep/idempotency-key`), honoured exactly as the HTTP header
//! is: by the same [`Service::create`].
//!
//! Tools: `issue_file {title, body}`, `issue_comment {issue, body}`,
//! `search {query}` and `lookup {tool, arguments}` (did the call of `tool`
//! with `arguments`, and the key in `_meta`, happen?). Their text answers
//! are the in-process tools' (`{"issue": N}`, `{"issue": N, "comment": ID}`,
//! `{"issues": […]}`), also given as structured content.
//!
//! A tool's `_meta` in `tools/list` carries
//! [`MCP_KEYS_META`](crate::wire::MCP_KEYS_META) (`{"ttl_secs": N}`) when
//! the server honours keys for it; annotations say which tools only read.
//!
//! Refusals of the contract are JSON-RPC errors (`invalid_params`, or
//! `internal_error` for storage) whose `data` is `{"code": C}` with the HTTP
//! API's error codes: `missing_idempotency_key`, `bad_idempotency_key`,
//! `key_reused` (the HTTP `422`), `request_in_flight` (the `409`). Their
//! messages speak of the key where MCP carries it, the `_meta` field, never
//! of the HTTP header. A bad argument or a missing issue is a tool error
//! result (`isError`), which the model sees, as with the in-process tools.
//!
//! `lookup` answers `{"outcome": "found", "response": …}` (the field the
//! HTTP `POST /lookup` answers with), `{"outcome": "not_found"}` or
//! `{"outcome": "cant_tell", "reason": …}`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, JsonObject,
    ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::service::{Refusal, Service};
use crate::wire::{self, Created, LookupReply};
use crate::{Fence, Mode, Request};

/// The MCP face of a [`Service`].
#[derive(Clone, Debug)]
pub struct McpServer {
    svc: Arc<Service>,
}

impl McpServer {
    /// Serve `svc`'s tools.
    pub fn new(svc: Arc<Service>) -> McpServer {
        McpServer { svc }
    }
}

fn schema(props: Value, required: &[&str]) -> Arc<JsonObject> {
    let v = json!({"type": "object", "properties": props, "required": required,
                   "additionalProperties": false});
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

/// What a created record answers, in the in-process tools' words.
pub fn output(created: &Created) -> Value {
    match created {
        Created::Issue { number } => json!({ "issue": number }),
        Created::Comment { issue, id } => json!({ "issue": issue, "comment": id }),
    }
}

fn ok(value: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    r.structured_content = Some(value);
    r
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    let value = json!({ "error": message.into() });
    CallToolResult::error(vec![ContentBlock::text(value.to_string())])
}

fn refusal(r: &Refusal) -> ErrorData {
    let data = Some(json!({ "code": r.code() }));
    // The service's words for a missing or malformed key name the HTTP
    // header; over MCP the key is a `_meta` field.
    let message = match r {
        Refusal::MissingKey => format!(
            "this tracker requires the call's idempotency key in the request's _meta field \"{}\" \
             on every call of issue_file and issue_comment",
            wire::MCP_META_KEY
        ),
        Refusal::BadKey(wire::KeyError::Malformed(why)) => format!(
            "the idempotency key in _meta \"{}\" must be a string of printable ASCII: {why}",
            wire::MCP_META_KEY
        ),
        _ => r.to_string(),
    };
    match r {
        Refusal::Storage(_) => ErrorData::internal_error(message, data),
        _ => ErrorData::invalid_params(message, data),
    }
}

fn str_arg<'a>(tool: &str, args: &'a JsonObject, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "{tool}: argument {name:?} must be a string, not {other}"
        )),
        None => Err(format!("{tool}: missing argument {name:?}")),
    }
}

/// The tracker request a call of `tool` with `args` stands for.
fn request(tool: &str, args: &JsonObject) -> Result<Request, String> {
    match tool {
        "issue_file" => Ok(Request::FileIssue {
            title: str_arg(tool, args, "title")?.to_owned(),
            body: str_arg(tool, args, "body")?.to_owned(),
        }),
        "issue_comment" => {
            let issue = match args.get("issue") {
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.trim_start_matches('#').parse().ok(),
                _ => None,
            }
            .ok_or_else(|| {
                "issue_comment: argument \"issue\" must be an issue number".to_owned()
            })?;
            Ok(Request::Comment {
                issue,
                body: str_arg(tool, args, "body")?.to_owned(),
            })
        }
        other => Err(format!("no tool {other:?} changes the tracker")),
    }
}

impl McpServer {
    fn tools(&self) -> Vec<Tool> {
        let mut keys = MetaObject::new();
        keys.0.insert(
            wire::MCP_KEYS_META.into(),
            json!({ "ttl_secs": self.svc.key_ttl_secs() }),
        );
        let keyed = |t: Tool| match self.svc.mode() {
            Mode::Keyed => t.with_meta(keys.clone()),
            Mode::Keyless => t,
        };
        let changes = ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false);
        let reads = ToolAnnotations::new().read_only(true);
        let text = json!({"type": "string"});
        vec![
            keyed(Tool::new(
                "issue_file",
                "File a new issue; answers {\"issue\": N}.",
                schema(json!({"title": text, "body": text, "cause": text}), &["title", "body"]),
            ))
            .annotate(changes.clone()),
            keyed(Tool::new(
                "issue_comment",
                "Comment on issue N; answers {\"issue\": N, \"comment\": ID}.",
                schema(json!({"issue": {"type": ["integer", "string"]}, "body": text}), &["issue", "body"]),
            ))
            .annotate(changes),
            Tool::new(
                "search",
                "Issues whose title or body contains the query; answers {\"issues\": [{\"number\", \"title\"}]}.",
                schema(json!({"query": text}), &["query"]),
            )
            .annotate(reads.clone()),
            Tool::new(
                "lookup",
                "Did the call of `tool` with `arguments` (and the key in _meta) happen? \
                 Answers {\"outcome\": \"found\", \"response\": …} | {\"outcome\": \"not_found\"} | \
                 {\"outcome\": \"cant_tell\", \"reason\": …}; not_found only when certain.",
                schema(json!({"tool": text, "arguments": {"type": "object"}}), &["tool", "arguments"]),
            )
            .annotate(reads),
        ]
    }

    fn call(
        &self,
        name: &str,
        args: &JsonObject,
        key: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<CallToolResult, ErrorData> {
        match name {
            "issue_file" | "issue_comment" => {
                let req = match request(name, args) {
                    Ok(r) => r,
                    Err(message) => return Ok(tool_error(message)),
                };
                match self.svc.create_fenced(&req, key, fence) {
                    Ok(accepted) => Ok(ok(output(&accepted.created))),
                    Err(Refusal::NoSuchIssue { issue }) => {
                        Ok(tool_error(format!("{name}: no issue #{issue}")))
                    }
                    Err(r) => Err(refusal(&r)),
                }
            }
            "search" => {
                let query = match str_arg(name, args, "query") {
                    Ok(q) => q,
                    Err(message) => return Ok(tool_error(message)),
                };
                let hits = self.svc.search(query);
                Ok(ok(json!({ "issues": hits.issues })))
            }
            "lookup" => {
                let tool = match str_arg(name, args, "tool") {
                    Ok(t) => t,
                    Err(message) => return Ok(tool_error(message)),
                };
                let Some(Value::Object(call_args)) = args.get("arguments") else {
                    return Ok(tool_error(
                        "lookup: argument \"arguments\" must be an object",
                    ));
                };
                let req = match request(tool, call_args) {
                    Ok(r) => r,
                    Err(message) => return Ok(tool_error(message)),
                };
                Ok(ok(match self.svc.lookup(&req, key) {
                    LookupReply::Found { response } => {
                        json!({"outcome": "found", "response": output(&response)})
                    }
                    LookupReply::NotFound => json!({"outcome": "not_found"}),
                    LookupReply::CantTell { reason } => {
                        json!({"outcome": "cant_tell", "reason": reason})
                    }
                }))
            }
            other => Err(ErrorData::invalid_params(
                format!(
                    "no tool {other:?}; the tools are issue_file, issue_comment, search, lookup"
                ),
                Some(json!({"code": "no_such_tool"})),
            )),
        }
    }
}

/// The key a `tools/call` carries in its `_meta`, if any. A value that is
/// not a string is refused as a bad key.
fn meta_key(meta: &MetaObject) -> Result<Option<String>, ErrorData> {
    match meta.0.get(wire::MCP_META_KEY) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(refusal(&Refusal::BadKey(wire::KeyError::Malformed(
            format!(
                "_meta {:?} must be a string, not {other}",
                wire::MCP_META_KEY
            ),
        )))),
    }
}

/// The fence a `tools/call` carries in its `_meta`
/// ([`MCP_RUN_META`](wire::MCP_RUN_META) and
/// [`MCP_EPOCH_META`](wire::MCP_EPOCH_META)), if any.
fn meta_fence(meta: &MetaObject) -> Result<Option<Fence>, ErrorData> {
    let bad = |m: String| refusal(&Refusal::BadFence(m));
    let run = match meta.0.get(wire::MCP_RUN_META) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(bad(format!(
                "_meta {:?} must be a string, not {other}",
                wire::MCP_RUN_META
            )))
        }
    };
    let epoch = match meta.0.get(wire::MCP_EPOCH_META) {
        None => None,
        Some(Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        Some(other) => {
            return Err(bad(format!(
                "_meta {:?} must be a whole number, not {other}",
                wire::MCP_EPOCH_META
            )))
        }
    };
    wire::parse_fence(run.as_deref(), epoch.as_deref()).map_err(|m| {
        bad(m
            .replace(wire::RUN_HEADER, &format!("_meta {:?}", wire::MCP_RUN_META))
            .replace(
                wire::EPOCH_HEADER,
                &format!("_meta {:?}", wire::MCP_EPOCH_META),
            ))
    })
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "A fake issue tracker. Send the call's idempotency key in _meta \
             \"io.crashsweep/idempotency-key\", never in the arguments.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let key = meta_key(&context.meta.0)?;
        let fence = meta_fence(&context.meta.0)?;
        let args = request.arguments.unwrap_or_default();
        let name = request.name.to_string();
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.call(&name, &args, key.as_deref(), fence.as_ref()))
            .await
            .map_err(|e| ErrorData::internal_error(format!("the call's task failed: {e}"), None))?
            .map(CallToolResponse::from)
    }
}

/// Any MCP server, boxed: [`McpServer`] or a handler of your own, made one
/// with [`ServiceExt::into_dyn`].
pub type Handler = Box<dyn rmcp::service::DynService<RoleServer>>;

/// The stream a server reads its requests from.
pub type Reader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;

/// The stream a server writes its answers to.
pub type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// Why serving stopped before the client went away.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The handshake (`initialize`) failed.
    #[error("MCP initialisation failed: {0}")]
    Start(String),
    /// The service stopped with an error.
    #[error("MCP service failed: {0}")]
    Serve(String),
    /// The in-process server's runtime could not start.
    #[error("cannot start the MCP server's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Serve `handler` on `read` and `write` (newline-delimited JSON-RPC, as
/// MCP's stdio transport) until the client hangs up or `stop` finishes
/// (before the handshake too).
///
/// Every server of the workspace runs through this one function (the
/// binary's stdio, [`serve_in_process`]): the SDK's server, generic over
/// its handler and its streams, is compiled once, here, for the boxed ones.
pub async fn serve_until(
    handler: Handler,
    read: Reader,
    write: Writer,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> Result<(), ServeError> {
    // `stop` ends the handshake too: a server no client spoke to yet
    // still stops on SIGTERM.
    let serve = async move {
        let running = handler
            .serve((read, write))
            .await
            .map_err(|e| ServeError::Start(e.to_string()))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| ServeError::Serve(e.to_string()))
    };
    tokio::select! {
        r = serve => r,
        () = stop => Ok(()),
    }
}

/// Serve `handler` in this process on a pipe, from a thread of its own
/// (with a current-thread runtime), and return the client's end of the
/// pipe: for tests of an MCP client without a child process. The thread
/// ends when the client's end is dropped.
///
/// ```
/// use rmcp::ServiceExt;
/// use tracker::mcp::{serve_in_process, McpServer};
/// use tracker::service::{Options, Service};
///
/// let dir = tempfile::tempdir()?;
/// let svc = Service::open(dir.path(), Options::keyed())?;
/// let pipe = serve_in_process(McpServer::new(std::sync::Arc::new(svc)).into_dyn())?;
/// let (_read, _write) = tokio::io::split(pipe);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve_in_process(handler: Handler) -> Result<tokio::io::DuplexStream, ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    std::thread::spawn(move || {
        let (read, write) = tokio::io::split(server_end);
        // An error here has nowhere to go but the client, which sees the
        // pipe close.
        let _ = runtime.block_on(serve_until(
            handler,
            Box::new(read),
            Box::new(write),
            Box::pin(std::future::pending()),
        ));
    });
    Ok(client_end)
}

#[cfg(test)]
mod tests {
    //! The MCP layer's pieces, one by one (what `tests/it/binary.rs` drives
    //! end to end through the `tracker mcp` binary).
    use super::*;

    #[test]
    fn a_schema_is_the_object_it_describes() {
        let s = schema(json!({ "title": { "type": "string" } }), &["title"]);
        assert_eq!(s.get("type"), Some(&json!("object")));
        assert_eq!(s.get("required"), Some(&json!(["title"])));
        assert_eq!(s.get("additionalProperties"), Some(&json!(false)));
        assert_eq!(s["properties"]["title"]["type"], "string");
    }

    #[test]
    fn a_tool_error_is_an_error_result_carrying_its_message() {
        let r = tool_error("no issue #9");
        assert_eq!(r.is_error, Some(true));
        let text = serde_json::to_string(&r.content).unwrap();
        assert!(text.contains("no issue #9"), "{text}");
    }

    #[test]
    fn a_storage_refusal_is_an_internal_error_and_the_rest_bad_params() {
        let storage = refusal(&Refusal::Storage("disk full".into()));
        let reused = refusal(&Refusal::KeyReused { key: "k".into() });
        assert_ne!(storage.code, reused.code);
        assert_eq!(storage.code, ErrorData::internal_error("", None).code);
        assert_eq!(reused.code, ErrorData::invalid_params("", None).code);
        assert_eq!(storage.data, Some(json!({ "code": "storage" })));
    }

    /// A missing or malformed key is refused in MCP's words: the `_meta`
    /// field, not the HTTP header.
    #[test]
    fn a_key_refusal_names_the_meta_field_not_the_header() {
        let missing = refusal(&Refusal::MissingKey);
        let malformed = refusal(&Refusal::BadKey(wire::KeyError::Malformed(
            "it contains '\\n'".into(),
        )));
        for (e, code) in [
            (&missing, "missing_idempotency_key"),
            (&malformed, "bad_idempotency_key"),
        ] {
            assert!(e.message.contains("_meta"), "{}", e.message);
            assert!(e.message.contains(wire::MCP_META_KEY), "{}", e.message);
            assert!(!e.message.contains("header"), "{}", e.message);
            assert!(
                !e.message.contains(wire::IDEMPOTENCY_KEY_HEADER),
                "{}",
                e.message
            );
            assert_eq!(e.data, Some(json!({ "code": code })));
        }
        assert!(
            malformed.message.ends_with("it contains '\\n'"),
            "{}",
            malformed.message
        );
    }

    #[test]
    fn a_comment_names_its_issue_as_a_number_or_as_text() {
        for (given, want) in [(json!(2), 2), (json!("#3"), 3), (json!("4"), 4)] {
            let args = json!({ "issue": given, "body": "b" });
            let args = args.as_object().unwrap();
            assert_eq!(
                request("issue_comment", args),
                Ok(Request::Comment {
                    issue: want,
                    body: "b".into()
                })
            );
        }
        let bad = json!({ "issue": true, "body": "b" });
        assert!(request("issue_comment", bad.as_object().unwrap()).is_err());
    }

    #[test]
    fn the_server_offers_tools_and_says_where_the_key_goes() {
        let dir = tempfile::tempdir().unwrap();
        let svc = Arc::new(Service::open(dir.path(), crate::service::Options::keyed()).unwrap());
        let info = McpServer::new(svc).get_info();
        assert!(info.capabilities.tools.is_some());
        let instructions = info.instructions.unwrap_or_default();
        assert!(instructions.contains(wire::MCP_META_KEY), "{instructions}");
    }
}
