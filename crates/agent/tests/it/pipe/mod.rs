//! An MCP server served in process over a pipe, for the MCP tests.

use std::sync::Arc;

use agent::mcp::McpClient;
use agent::tool::{CallContext, Tools};
use durable::RunId;
use rmcp::{ServerHandler, ServiceExt};

/// `server` on a pipe, served by a thread of its own; the client end,
/// handshake done. The server runs through the tracker's one boxed server
/// (`tracker::mcp::serve_in_process`), and the client through `McpClient`'s
/// boxed streams: this test binary compiles neither of the SDK's generic
/// services again.
pub fn connect(server: impl ServerHandler) -> Arc<McpClient> {
    let end = tracker::mcp::serve_in_process(server.into_dyn()).unwrap();
    let (read, write) = tokio::io::split(end);
    McpClient::over(read, write).unwrap()
}

/// What `f` makes of the tool `name` in a call context of run `run-1`,
/// call `c1`, key `k-c1`.
pub fn with_tool<R>(
    tools: &Tools,
    name: &str,
    f: impl FnOnce(&dyn agent::tool::Tool, &CallContext<'_>) -> R,
) -> R {
    let run = RunId::parse("run-1").unwrap();
    let ctx = CallContext {
        run: &run,
        call_id: "c1",
        key: Some("k-c1"),
        epoch: 1,
        messages: &[],
    };
    f(tools.get(name).unwrap(), &ctx)
}
