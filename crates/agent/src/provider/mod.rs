//! Model clients for real providers, behind cargo features: `OpenAi`
//! (feature `openai`) for any OpenAI-compatible Chat Completions endpoint —
//! OpenAI's own, and the many providers and local servers that speak its
//! format — and `Anthropic` (feature `anthropic`) for the Anthropic
//! Messages API. Both implement [`Model`](crate::model::Model), so an
//! [`Agent`](crate::Agent) runs them like the scripted model, with the same
//! save points: the reply, with the provider's call IDs, is saved before any
//! of its calls runs, and a resumed run in phase `tools` never asks again.
//!
//! What both share, and what is always compiled:
//!
//! * [`ProviderError`]: a 4xx other than 429 names its status and the
//!   provider's message at once; 429 and 5xx are retried ([`Retry`]:
//!   backoff with full jitter, `Retry-After` honoured, bounded in count and
//!   total time); timeouts ([`Timeouts`]: connect, read) and lost
//!   connections likewise.
//! * [`ApiKey`]: never printed; redacted from every error text.
//! * [`Prices`]: usage becomes tokens as the provider reports them, and
//!   dollars from a table the caller can override.
//!
//! What the model is told about the tools is each tool's own
//! [`ToolSpec`](crate::tool::ToolSpec) ([`Tools::specs`](crate::tool::Tools::specs)).
//!
//! Tool-call arguments stay the raw text the model wrote, even when it is
//! not valid JSON: the loop saves it as a string, and the tool answers with
//! an error result the model can read, so the run goes on.
//!
//! The HTTP client is blocking [`ureq`](https://docs.rs/ureq) with rustls
//! (ring, webpki roots): the loop is synchronous, one model call at a time,
//! so an async runtime would add a dependency tree and no concurrency; and
//! rustls needs neither the system's OpenSSL nor cmake.
//!
//! ```no_run
//! # #[cfg(feature = "openai")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use agent::model::Model;
//! use agent::provider::{ApiKey, OpenAi};
//! use agent::tool::ToolSpec;
//!
//! let key = ApiKey::new(std::env::var("OPENAI_API_KEY")?)?;
//! let model = OpenAi::new(OpenAi::DEFAULT_BASE_URL, key, "gpt-4o-mini")?
//!     .with_tools(vec![ToolSpec::new("search", "Search the tracker's issues.",
//!         serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}},
//!                            "required": ["query"]}))]);
//! let reply = model.reply(&[agent::state::Message {
//!     role: agent::state::Role::User,
//!     text: "Any open issue about the parser?".into(),
//!     ..Default::default()
//! }])?;
//! println!("{} ({} calls, ${})", reply.text, reply.calls.len(), reply.usage.dollars);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "openai"))]
//! # fn main() {}
//! ```

use std::time::Duration;

mod error;
mod key;
mod prices;
mod retry;

#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;

#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "openai")]
mod openai;

#[cfg(feature = "anthropic")]
pub use anthropic::Anthropic;
pub use error::ProviderError;
pub use key::ApiKey;
#[cfg(feature = "openai")]
pub use openai::OpenAi;
pub use prices::{Price, PriceError, Prices};
pub use retry::{retry_after, thread_sleep, Retry, Sleep};

/// How long a client waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For the TCP connection and the TLS handshake.
    pub connect: Duration,
    /// For each of: sending the request body, receiving the response's
    /// headers, receiving its body. A model may think for a while before
    /// the first byte, so this is long by default.
    pub read: Duration,
}

impl Default for Timeouts {
    /// Connect 10 s, read 120 s.
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(120),
        }
    }
}

/// `base` without trailing slashes, checked to be an `http` or `https`
/// URL.
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
fn base_url(base: &str, what: &str) -> Result<String, ProviderError> {
    let base = base.trim().trim_end_matches('/');
    let rest = base
        .strip_prefix("https://")
        .or_else(|| base.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(base.to_owned()),
        _ => Err(ProviderError::Config(format!(
            "{what} {base:?} is not an http:// or https:// URL with a host"
        ))),
    }
}

/// The ID of the `index`-th call of the reply to a conversation with
/// `turn` assistant messages, for a provider that sent none: unique within
/// the run, and the same if the turn is asked again.
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
fn fallback_call_id(turn: usize, index: usize) -> String {
    format!("call_t{}_{}", turn + 1, index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(
            base_url("https://api.openai.com/v1/", "OPENAI_BASE_URL").unwrap(),
            "https://api.openai.com/v1"
        );
        assert_eq!(
            base_url("http://127.0.0.1:8080", "x").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in ["api.openai.com/v1", "ftp://x", "https://", "http:///v1", ""] {
            let e = base_url(bad, "OPENAI_BASE_URL").unwrap_err().to_string();
            assert!(e.starts_with("OPENAI_BASE_URL "), "{e}");
        }
    }
}
