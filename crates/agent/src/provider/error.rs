//! Why a provider gave no reply.

use std::time::Duration;

/// Why a model provider gave no reply. Never holds the API key: every text
/// that came from outside (the provider's message, a transport error) has
/// the key replaced by `[redacted]` before it is stored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The provider answered with an error status: a 4xx other than 429 at
    /// once (retrying cannot help), or a 429 or 5xx when the retries ran out.
    #[error("{url}: HTTP {status}{}: {message}{}", attempts_note(*attempts), wait_note(*retry_after))]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The provider's own message (`error.message` of its error body),
        /// or the start of the body if it has none.
        message: String,
        /// How many requests were sent.
        attempts: u32,
        /// The wait the provider asked for last (`Retry-After`), if it was
        /// longer than the retry budget had left.
        retry_after: Option<Duration>,
    },
    /// No response (or no complete body) within a timeout.
    #[error("{url}: {what}{}", attempts_note(*attempts))]
    Timeout {
        /// The endpoint.
        url: String,
        /// Which timeout, as the HTTP client put it.
        what: String,
        /// How many requests were sent.
        attempts: u32,
    },
    /// The connection failed (refused, reset, TLS, DNS).
    #[error("{url}: {reason}{}", attempts_note(*attempts))]
    Transport {
        /// The endpoint.
        url: String,
        /// What failed.
        reason: String,
        /// How many requests were sent.
        attempts: u32,
    },
    /// A success status, but the body is not a reply of the wire format.
    #[error("{url}: HTTP {status}, but the body is not a {format} reply: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// The HTTP status (a 2xx).
        status: u16,
        /// The wire format expected.
        format: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The client is not configured right (a base URL without a scheme, an
    /// empty key, a key that cannot go in a header).
    #[error("{0}")]
    Config(String),
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

fn wait_note(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(
            " (the provider asked to wait {} s, past the retry budget)",
            d.as_secs_f64()
        ),
        None => String::new(),
    }
}

impl ProviderError {
    /// The HTTP status, if the provider answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Status { status, .. } | ProviderError::Malformed { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }

    /// How many requests were sent before giving up (0 for a configuration
    /// error, 1 for a malformed body).
    pub fn attempts(&self) -> u32 {
        match self {
            ProviderError::Status { attempts, .. }
            | ProviderError::Timeout { attempts, .. }
            | ProviderError::Transport { attempts, .. } => *attempts,
            ProviderError::Malformed { .. } => 1,
            ProviderError::Config(_) => 0,
        }
    }
}

/// `text` with every occurrence of `secret` replaced by `[redacted]`.
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) fn redact(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_owned()
    } else {
        text.replace(secret, "[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_status_attempts_and_wait() {
        let e = ProviderError::Status {
            url: "http://h/v1/chat/completions".into(),
            status: 429,
            message: "slow down".into(),
            attempts: 3,
            retry_after: Some(Duration::from_secs(90)),
        };
        assert_eq!(
            e.to_string(),
            "http://h/v1/chat/completions: HTTP 429 (after 3 attempts): slow down (the provider asked to wait 90 s, past the retry budget)"
        );
        assert_eq!(e.status(), Some(429));
        assert_eq!(e.attempts(), 3);
        assert_eq!(
            redact("bad key sk-123 here", "sk-123"),
            "bad key [redacted] here"
        );
    }
}
