//! An MCP server served in process over a pipe, for the MCP tests.

use std::sync::Arc;

use agent::mcp::McpClient;
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
