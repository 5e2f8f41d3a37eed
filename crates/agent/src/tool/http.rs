//! What an HTTP answer means for the loop, declared once for every tool on
//! an HTTP service (re-exported in [`crate::tool`]).

use std::fmt;

use crate::tool::ToolError;

/// How one HTTP request of a tool ended, as its client saw it: the input
/// of [`http_outcome`]. Sort the client's transport errors into these
/// (with `ureq`: `Io(ConnectionRefused)`, `ConnectionFailed`,
/// `HostNotFound` and a connect or resolve timeout are [`HttpEnd::NotSent`];
/// every other error is [`HttpEnd::Lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpEnd {
    /// The service answered with this status code.
    Status(u16),
    /// No connection was made (refused, no such host): the request was
    /// certainly not sent.
    NotSent,
    /// The connection broke or timed out once the request may have gone
    /// out: the service may have acted.
    Lost,
}

/// What a tool does after an HTTP answer that is not an error (see
/// [`http_outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpNext {
    /// `2xx`: the service did it; read the answer's body.
    Done,
    /// `409` with tries left: the first request with this key is still
    /// being processed. Wait a little and send the same request, with the
    /// same key, again.
    Retry,
}

/// What an HTTP answer means for the loop, for a tool that sends the call's
/// idempotency key with its request.
///
/// | the request ended | the tool's next step |
/// | --- | --- |
/// | `2xx` | `Ok(HttpNext::Done)`: read the answer |
/// | `409` (a request with this key is in flight) | `Ok(HttpNext::Retry)`; on the last try, [`ToolError::Unknown`]: the first request may still land |
/// | `422` (the key was used with other arguments) | [`ToolError::Fatal`]: a bug in the caller, the run stops |
/// | `412` (the service has seen a newer epoch of the run than [`CallContext::epoch`](crate::tool::CallContext::epoch)) | [`ToolError::Stale`]: another process holds the run; this one stops |
/// | another `4xx` | [`ToolError::Failed`]: nothing was done; the model sees `message` |
/// | `5xx`, [`HttpEnd::Lost`] (a cut connection, a timeout) | [`ToolError::Unknown`]: it may have acted, the call goes up the resolution ladder |
/// | [`HttpEnd::NotSent`] (connection refused) | [`ToolError::Unknown`], `message` followed by `; nothing was sent`: nothing happened, but the call cannot finish now; after its tries the run stops and a rerun goes on |
/// | anything else (`1xx`, `3xx`) | [`ToolError::Unknown`]: an answer the tool cannot read |
///
/// `last_try` says whether this was the last try the tool will make (for a
/// `409`). `message` is what the error says: name the tool and give the
/// service's words, e.g. `format!("file_ticket: {status} {body}")`.
///
/// ```
/// use agent::tool::{http_outcome, HttpEnd, HttpNext, ToolError};
///
/// assert_eq!(http_outcome(HttpEnd::Status(201), false, "created"), Ok(HttpNext::Done));
/// assert_eq!(http_outcome(HttpEnd::Status(409), false, "busy"), Ok(HttpNext::Retry));
/// assert_eq!(http_outcome(HttpEnd::Status(409), true, "busy"), Err(ToolError::Unknown("busy".into())));
/// assert_eq!(http_outcome(HttpEnd::Status(412), false, "stale"), Err(ToolError::Stale("stale".into())));
/// assert_eq!(http_outcome(HttpEnd::Status(404), false, "no such ticket"),
///            Err(ToolError::Failed("no such ticket".into())));
/// assert!(matches!(http_outcome(HttpEnd::NotSent, false, "down"),
///                  Err(ToolError::Unknown(m)) if m == "down; nothing was sent"));
/// ```
pub fn http_outcome(
    end: HttpEnd,
    last_try: bool,
    message: impl fmt::Display,
) -> Result<HttpNext, ToolError> {
    let status = match end {
        HttpEnd::Status(status) => status,
        HttpEnd::Lost => return Err(ToolError::Unknown(message.to_string())),
        HttpEnd::NotSent => return Err(ToolError::Unknown(format!("{message}; nothing was sent"))),
    };
    match status {
        200..=299 => Ok(HttpNext::Done),
        409 if !last_try => Ok(HttpNext::Retry),
        422 => Err(ToolError::Fatal(message.to_string())),
        412 => Err(ToolError::Stale(message.to_string())),
        409 => Err(ToolError::Unknown(message.to_string())),
        400..=499 => Err(ToolError::Failed(message.to_string())),
        _ => Err(ToolError::Unknown(message.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(end: HttpEnd, last_try: bool) -> Result<HttpNext, ToolError> {
        http_outcome(end, last_try, "m")
    }

    fn unknown(m: &str) -> Result<HttpNext, ToolError> {
        Err(ToolError::Unknown(m.into()))
    }

    /// Every `2xx` is done, on any try.
    #[test]
    fn a_2xx_is_done() {
        for status in [200, 201, 204, 299] {
            for last in [false, true] {
                assert_eq!(outcome(HttpEnd::Status(status), last), Ok(HttpNext::Done));
            }
        }
    }

    /// `409` is retried while tries are left, then unknown: the first
    /// request with the key may still land.
    #[test]
    fn a_409_is_retried_then_unknown() {
        assert_eq!(outcome(HttpEnd::Status(409), false), Ok(HttpNext::Retry));
        assert_eq!(outcome(HttpEnd::Status(409), true), unknown("m"));
    }

    /// `422` (one key, other arguments) is a bug: fatal, on any try.
    #[test]
    fn a_422_is_fatal() {
        for last in [false, true] {
            assert_eq!(
                outcome(HttpEnd::Status(422), last),
                Err(ToolError::Fatal("m".into()))
            );
        }
    }

    /// Any other `4xx` refused the call: nothing was done, the model sees it.
    #[test]
    fn another_4xx_failed() {
        for status in [400, 401, 403, 404, 408, 410, 413, 421, 423, 429, 499] {
            assert_eq!(
                outcome(HttpEnd::Status(status), false),
                Err(ToolError::Failed("m".into())),
                "{status}"
            );
        }
    }

    /// A `5xx` may have acted: unknown, up the ladder.
    #[test]
    fn a_5xx_is_unknown() {
        for status in [500, 502, 503, 504, 599] {
            assert_eq!(outcome(HttpEnd::Status(status), false), unknown("m"));
        }
    }

    /// A cut connection or a timeout after sending may have acted: unknown.
    #[test]
    fn a_lost_answer_is_unknown() {
        for last in [false, true] {
            assert_eq!(outcome(HttpEnd::Lost, last), unknown("m"));
        }
    }

    /// A refused connection sent nothing, and says so.
    #[test]
    fn a_refused_connection_was_not_sent() {
        assert_eq!(
            outcome(HttpEnd::NotSent, false),
            unknown("m; nothing was sent")
        );
    }

    /// An answer no tool reads (`1xx`, `3xx`, beyond `5xx`) is unknown.
    #[test]
    fn an_unreadable_status_is_unknown() {
        for status in [100, 301, 304, 600, 0] {
            assert_eq!(
                outcome(HttpEnd::Status(status), false),
                unknown("m"),
                "{status}"
            );
        }
    }
}
