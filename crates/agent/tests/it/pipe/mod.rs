//! An MCP server served in process over a pipe, for the MCP tests.

use std::sync::Arc;

use agent::mcp::McpClient;
use rmcp::{ServerHandler, ServiceExt};

/// `server` on a pipe, served by a thread of its own (a current-thread
/// tokio runtime); the client end, handshake done.
pub fn connect(server: impl ServerHandler) -> Arc<McpClient> {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            if let Ok(running) = server.serve(server_end).await {
                let _ = running.waiting().await;
            }
        });
    });
    let (read, write) = tokio::io::split(client_end);
    McpClient::over(read, write).unwrap()
}
