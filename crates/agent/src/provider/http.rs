//! One JSON POST with timeouts and retries, over blocking `ureq` with
//! rustls: what both wire formats share.

use std::time::{Duration, Instant, SystemTime};

use super::error::redact;
use super::retry::{retry_after, thread_sleep, Jitter, Retry, Sleep};
use super::{ProviderError, Timeouts};

/// The HTTP side of a client.
pub(crate) struct Http {
    agent: ureq::Agent,
    pub(crate) timeouts: Timeouts,
    pub(crate) retry: Retry,
    pub(crate) sleep: Sleep,
}

fn agent(t: Timeouts) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(t.connect))
        .timeout_send_body(Some(t.read))
        .timeout_recv_response(Some(t.read))
        .timeout_recv_body(Some(t.read))
        // Statuses are ours to read: 4xx bodies carry the provider's message.
        .http_status_as_error(false)
        .user_agent(concat!("crashsweep-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// Why one attempt failed, and whether another may pass.
struct Failure {
    error: ProviderError,
    retry: bool,
    wait: Option<Duration>,
}

impl Http {
    pub(crate) fn new(timeouts: Timeouts) -> Http {
        Http {
            agent: agent(timeouts),
            timeouts,
            retry: Retry::default(),
            sleep: thread_sleep(),
        }
    }

    pub(crate) fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
        self.agent = agent(timeouts);
    }

    /// POST `body` to `url` with `headers`; the body of the first 2xx
    /// answer, with its status. Retries as [`Retry`] says. `secret` is
    /// redacted from every error text.
    pub(crate) fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &str,
        secret: &str,
    ) -> Result<(u16, String), ProviderError> {
        let start = Instant::now();
        let mut waited = Duration::ZERO;
        let mut jitter = Jitter::new();
        let attempts = self.retry.attempts.max(1);
        let mut n = 0;
        loop {
            n += 1;
            let failure = match self.once(url, headers, body, secret) {
                Ok(ok) => return Ok(ok),
                Err(f) => f,
            };
            if !failure.retry || n >= attempts {
                return Err(with_attempts(failure.error, n, None));
            }
            let delay = failure
                .wait
                .unwrap_or_else(|| jitter.upto(self.retry.ceiling(n)));
            // Real sleeps show in the elapsed time; a test's recorded sleeps
            // only in `waited`. Either way the budget holds.
            let used = start.elapsed().max(waited);
            if used.saturating_add(delay) > self.retry.budget {
                let asked = failure.wait.filter(|w| *w > Duration::ZERO);
                return Err(with_attempts(failure.error, n, asked));
            }
            (self.sleep)(delay);
            waited = waited.saturating_add(delay);
        }
    }

    fn once(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &str,
        secret: &str,
    ) -> Result<(u16, String), Failure> {
        let mut req = self
            .agent
            .post(url)
            .header("Content-Type", "application/json");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let mut resp = req.send(body).map_err(|e| transport(url, &e, secret))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let wait = retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
            SystemTime::now(),
        );
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| transport(url, &e, secret))?;
        if (200..300).contains(&status) {
            return Ok((status, text));
        }
        Err(Failure {
            error: ProviderError::Status {
                url: url.to_owned(),
                status,
                message: redact(&provider_message(&text), secret),
                attempts: 1,
                retry_after: None,
            },
            retry: status == 429 || (500..600).contains(&status),
            wait,
        })
    }
}

fn with_attempts(e: ProviderError, n: u32, asked: Option<Duration>) -> ProviderError {
    match e {
        ProviderError::Status {
            url,
            status,
            message,
            ..
        } => ProviderError::Status {
            url,
            status,
            message,
            attempts: n,
            retry_after: asked,
        },
        ProviderError::Timeout { url, what, .. } => ProviderError::Timeout {
            url,
            what,
            attempts: n,
        },
        ProviderError::Transport { url, reason, .. } => ProviderError::Transport {
            url,
            reason,
            attempts: n,
        },
        other => other,
    }
}

/// A transport error as a failure; timeouts and connection trouble may pass
/// on a retry, a bad URL or a TLS set-up error will not.
fn transport(url: &str, e: &ureq::Error, secret: &str) -> Failure {
    let text = redact(&e.to_string(), secret);
    let (error, retry) = match e {
        ureq::Error::Timeout(_) => (
            ProviderError::Timeout {
                url: url.to_owned(),
                what: text,
                attempts: 1,
            },
            true,
        ),
        ureq::Error::Io(_)
        | ureq::Error::ConnectionFailed
        | ureq::Error::HostNotFound
        | ureq::Error::Protocol(_) => (
            ProviderError::Transport {
                url: url.to_owned(),
                reason: text,
                attempts: 1,
            },
            true,
        ),
        _ => (
            ProviderError::Transport {
                url: url.to_owned(),
                reason: text,
                attempts: 1,
            },
            false,
        ),
    };
    Failure {
        error,
        retry,
        wait: None,
    }
}

/// The provider's own message from an error body: `error.message` (both
/// OpenAI's and Anthropic's shape), else `message`, else the body's first
/// 300 characters.
pub(crate) fn provider_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let found = v
            .pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()));
        if let Some(m) = found.and_then(|m| m.as_str()) {
            return m.to_owned();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut cut: String = body.chars().take(300).collect();
    if cut.len() < body.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_messages() {
        assert_eq!(
            provider_message(r#"{"error": {"message": "bad model", "type": "x"}}"#),
            "bad model"
        );
        assert_eq!(provider_message(r#"{"message": "m"}"#), "m");
        assert_eq!(provider_message(r#"{"error": "e"}"#), "e");
        assert_eq!(provider_message("  "), "(empty body)");
        assert_eq!(provider_message("<html>"), "<html>");
        assert_eq!(provider_message(&"x".repeat(400)).chars().count(), 301);
    }
}
