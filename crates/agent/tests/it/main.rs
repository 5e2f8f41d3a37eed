//! Integration tests of the agent crate, in one binary so they link once
//! (the checkpointed state's tests are its `state` module).

mod agent_loop;
mod guide;
#[cfg(feature = "mcp-tools")]
mod mcp_answers;
#[cfg(feature = "mcp-tools")]
mod mcp_tools;
#[cfg(feature = "mcp-tools")]
mod pipe;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod provider;
mod state;
