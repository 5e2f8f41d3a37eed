//! A blocking client of the tracker service's HTTP API, for tools that run
//! on a synchronous agent loop.
//!
//! The key goes in the `Idempotency-Key` header as a Structured Field
//! string, never in the JSON body. What each answer means for the caller:
//!
//! | the service said | [`HttpTracker`] returns | outcome |
//! | --- | --- | --- |
//! | `201` (or a replayed `201`) | `Ok` | done |
//! | `409` after [`Retry::in_flight`] tries | [`ClientError::InFlight`] | unknown: the first request may still land |
//! | `422` | [`ClientError::KeyReused`] | a bug (one key, two requests): stop |
//! | other `4xx` | [`ClientError::Refused`] | certainly not done |
//! | `5xx`, a cut connection, a timeout, an answer not understood | [`ClientError::Unknown`] | unknown |
//! | connection refused for [`Retry::unreachable`] | [`ClientError::Unreachable`] | certainly not sent |
//!
//! Each request opens its own connection (no pool), so a restarted server
//! never meets a stale pooled connection, and "connection refused" always
//! means the request was not sent.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let t = tracker::client::HttpTracker::connect("http://127.0.0.1:8080")?;
//! let number = t.file_issue("crash in parser", "trace", Some("run-1/call-1"))?;
//! assert_eq!(t.file_issue("crash in parser", "trace", Some("run-1/call-1"))?, number);
//! # Ok(())
//! # }
//! ```

use std::thread;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::wire::{self, Config, Created, ErrorBody, LookupReply, LookupRequest, SearchAnswer};
use crate::{Fence, Issue, Mode, Request, Response};

/// How long the client waits on a busy or restarting service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Tries of a request answered `409` (its key's first request is still
    /// being processed), the first included; then [`ClientError::InFlight`].
    pub in_flight: u32,
    /// The pause between two of those tries (doubled each time).
    pub in_flight_pause: Duration,
    /// How long to keep trying a service that refuses connections (it may
    /// be restarting); then [`ClientError::Unreachable`].
    pub unreachable: Duration,
    /// The most a single request may take, sending to answer.
    pub timeout: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            in_flight: 5,
            in_flight_pause: Duration::from_millis(20),
            unreachable: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a request did not produce an answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No connection could be made: the request was certainly not sent.
    #[error("the tracker at {url} is unreachable: {reason}")]
    Unreachable {
        /// The service.
        url: String,
        /// The last error.
        reason: String,
    },
    /// The request may have reached the service and acted: the connection
    /// broke after sending, the answer timed out or was not understood, or
    /// the service failed (`5xx`).
    #[error("outcome unknown ({url}): {reason}")]
    Unknown {
        /// The route.
        url: String,
        /// Why it is unknown.
        reason: String,
    },
    /// Still `409` after the bounded wait: the key's first request is being
    /// processed and may yet land.
    #[error("a request with this key is still being processed after {tries} tries: {message}")]
    InFlight {
        /// Tries made.
        tries: u32,
        /// The service's message.
        message: String,
    },
    /// `422`: the key was already used for a request with other arguments.
    /// It means the caller gave two requests one key — a bug; retrying
    /// cannot help.
    #[error("the tracker refused a reused idempotency key: {message}")]
    KeyReused {
        /// The service's message.
        message: String,
    },
    /// `412`: the request's fence is older than one the service recorded
    /// for its run: another process holds the run now, and this one must
    /// stop. Nothing was recorded.
    #[error("412, a newer holder of the run acted here: {message}")]
    Stale {
        /// The service's message.
        message: String,
    },
    /// Another `4xx`: the service recorded nothing.
    #[error("the tracker refused the request ({status} {code}): {message}")]
    Refused {
        /// The status.
        status: u16,
        /// The error code.
        code: String,
        /// The service's message.
        message: String,
    },
}

impl ClientError {
    /// Whether the request may have acted (the caller cannot know).
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            ClientError::Unknown { .. } | ClientError::InFlight { .. }
        )
    }
}

/// A client of one tracker service.
#[derive(Clone, Debug)]
pub struct HttpTracker {
    base: String,
    agent: ureq::Agent,
    config: Config,
    retry: Retry,
}

/// What one exchange gave: status, replayed header, body.
struct Answer {
    status: u16,
    body: String,
}

enum Method<'a> {
    Get(&'a [(&'a str, &'a str)]),
    Post {
        body: Vec<u8>,
        key: Option<&'a str>,
        fence: Option<&'a Fence>,
    },
}

impl HttpTracker {
    /// Connect to the service at `base` (`http://127.0.0.1:PORT`) with the
    /// default [`Retry`], reading `GET /config` to learn whether it honours
    /// keys and how long it keeps them.
    pub fn connect(base: &str) -> Result<HttpTracker, ClientError> {
        HttpTracker::connect_with(base, Retry::default())
    }

    /// [`HttpTracker::connect`] with a chosen [`Retry`].
    pub fn connect_with(base: &str, retry: Retry) -> Result<HttpTracker, ClientError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .timeout_global(Some(retry.timeout))
            .build()
            .into();
        let mut t = HttpTracker {
            base: base.trim_end_matches('/').to_owned(),
            agent,
            config: Config {
                mode: String::new(),
                requires_key: false,
                key_ttl_secs: None,
                uncertain_lookup: false,
                max_body_bytes: wire::MAX_BODY_BYTES,
                idempotency_header: wire::IDEMPOTENCY_KEY_HEADER.into(),
                mcp_meta_key: wire::MCP_META_KEY.into(),
            },
            retry,
        };
        t.config = t.get_json("/config", &[])?;
        Ok(t)
    }

    /// The service's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// What the service published at `GET /config` when connecting.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the service honours keys.
    pub fn mode(&self) -> Mode {
        if self.config.mode == "keyed" {
            Mode::Keyed
        } else {
            Mode::Keyless
        }
    }

    fn unknown(&self, path: &str, reason: impl Into<String>) -> ClientError {
        ClientError::Unknown {
            url: format!("{}{path}", self.base),
            reason: reason.into(),
        }
    }

    /// One exchange, retrying while connections are refused.
    fn exchange(&self, path: &str, method: &Method<'_>) -> Result<Answer, ClientError> {
        let url = format!("{}{path}", self.base);
        let started = Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            let result = match method {
                Method::Get(query) => {
                    let mut r = self.agent.get(&url);
                    for (k, v) in *query {
                        r = r.query(*k, *v);
                    }
                    r.call()
                }
                Method::Post { body, key, fence } => {
                    let mut r = self.agent.post(&url).content_type("application/json");
                    if let Some(k) = key {
                        r = r.header(wire::IDEMPOTENCY_KEY_HEADER, wire::key_header_value(k));
                    }
                    if let Some(f) = fence {
                        r = r
                            .header(wire::RUN_HEADER, f.run.as_str())
                            .header(wire::EPOCH_HEADER, f.epoch.to_string());
                    }
                    r.send(&body[..])
                }
            };
            match result {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let body = resp
                        .into_body()
                        .with_config()
                        .limit(1 << 24)
                        .read_to_string()
                        .map_err(|e| self.unknown(path, format!("the answer broke off: {e}")))?;
                    return Ok(Answer { status, body });
                }
                Err(e) if not_sent(&e) => {
                    if started.elapsed() >= self.retry.unreachable {
                        return Err(ClientError::Unreachable {
                            url: self.base.clone(),
                            reason: format!(
                                "{e} (tried for {:.1} s)",
                                started.elapsed().as_secs_f64()
                            ),
                        });
                    }
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(e) => return Err(self.unknown(path, e.to_string())),
            }
        }
    }

    fn decode<T: DeserializeOwned>(&self, path: &str, a: &Answer) -> Result<T, ClientError> {
        serde_json::from_str(&a.body).map_err(|e| {
            self.unknown(
                path,
                format!("answer {} not understood ({e}): {}", a.status, a.body),
            )
        })
    }

    /// The error an answer other than 2xx stands for.
    fn failure(&self, path: &str, a: &Answer) -> ClientError {
        let body: ErrorBody = match serde_json::from_str(&a.body) {
            Ok(b) => b,
            Err(_) => ErrorBody {
                error: "unknown".into(),
                message: a.body.clone(),
            },
        };
        match a.status {
            422 => ClientError::KeyReused {
                message: body.message,
            },
            wire::STALE_EPOCH_STATUS => ClientError::Stale {
                message: body.message,
            },
            400..=499 => ClientError::Refused {
                status: a.status,
                code: body.error,
                message: body.message,
            },
            _ => self.unknown(
                path,
                format!("the service answered {}: {}", a.status, body.message),
            ),
        }
    }

    fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, ClientError> {
        let a = self.exchange(path, &Method::Get(query))?;
        if a.status == 200 {
            self.decode(path, &a)
        } else {
            Err(self.failure(path, &a))
        }
    }

    fn post_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        (key, fence): (Option<&str>, Option<&Fence>),
        ok: u16,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| self.unknown(path, format!("cannot encode the request: {e}")))?;
        let mut pause = self.retry.in_flight_pause;
        let mut tries = 0;
        loop {
            tries += 1;
            let a = self.exchange(
                path,
                &Method::Post {
                    body: body.clone(),
                    key,
                    fence,
                },
            )?;
            if a.status == ok {
                return self.decode(path, &a);
            }
            if a.status == 409 {
                if tries < self.retry.in_flight.max(1) {
                    thread::sleep(pause);
                    pause *= 2;
                    continue;
                }
                let message = match serde_json::from_str::<ErrorBody>(&a.body) {
                    Ok(b) => b.message,
                    Err(_) => a.body,
                };
                return Err(ClientError::InFlight { tries, message });
            }
            return Err(self.failure(path, &a));
        }
    }

    /// Perform a mutating request with `key` in the `Idempotency-Key` header
    /// (none is sent if `None`).
    pub fn apply(&self, req: &Request, key: Option<&str>) -> Result<Response, ClientError> {
        self.apply_fenced(req, key, None)
    }

    /// [`HttpTracker::apply`] with the sender's [`Fence`] in the
    /// `Crashsweep-Run` and `Crashsweep-Epoch` headers: a service that has
    /// recorded a newer epoch of the run answers `412`,
    /// [`ClientError::Stale`].
    pub fn apply_fenced(
        &self,
        req: &Request,
        key: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<Response, ClientError> {
        let created: Created = match req {
            Request::FileIssue { title, body } => self.post_json(
                "/issues",
                &wire::NewIssue {
                    title: title.clone(),
                    body: body.clone(),
                },
                (key, fence),
                201,
            )?,
            Request::Comment { issue, body } => self.post_json(
                &format!("/issues/{issue}/comments"),
                &wire::NewComment { body: body.clone() },
                (key, fence),
                201,
            )?,
        };
        let response = Response::from(created);
        let fits = matches!(
            (req, &response),
            (Request::FileIssue { .. }, Response::Issue { .. })
                | (Request::Comment { .. }, Response::Comment { .. })
        );
        if fits {
            Ok(response)
        } else {
            Err(self.unknown("", format!("{req:?} was answered with {response:?}")))
        }
    }

    /// `POST /issues`; returns the issue's number.
    pub fn file_issue(
        &self,
        title: &str,
        body: &str,
        key: Option<&str>,
    ) -> Result<u64, ClientError> {
        let req = Request::FileIssue {
            title: title.to_owned(),
            body: body.to_owned(),
        };
        match self.apply(&req, key)? {
            Response::Issue { number } => Ok(number),
            other => Err(self.unknown("/issues", format!("answered {other:?}"))),
        }
    }

    /// `POST /issues/{issue}/comments`; returns the comment's id.
    pub fn comment(&self, issue: u64, body: &str, key: Option<&str>) -> Result<u64, ClientError> {
        let req = Request::Comment {
            issue,
            body: body.to_owned(),
        };
        match self.apply(&req, key)? {
            Response::Comment { id, .. } => Ok(id),
            other => Err(self.unknown("/comments", format!("answered {other:?}"))),
        }
    }

    /// `POST /lookup`: did `req` (sent with `key`) happen?
    pub fn lookup(&self, req: &Request, key: Option<&str>) -> Result<LookupReply, ClientError> {
        self.post_json(
            "/lookup",
            &LookupRequest::from(req.clone()),
            (key, None),
            200,
        )
    }

    /// `GET /keys/{key}`.
    pub fn lookup_key(&self, key: &str) -> Result<LookupReply, ClientError> {
        let mut path = String::from("/keys/");
        for b in key.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                path.push(char::from(b));
            } else {
                path.push_str(&format!("%{b:02X}"));
            }
        }
        self.get_json(&path, &[])
    }

    /// `GET /search?q=…`.
    pub fn search(&self, query: &str) -> Result<SearchAnswer, ClientError> {
        self.get_json("/search", &[("q", query)])
    }

    /// `GET /issues`.
    pub fn issues(&self) -> Result<Vec<Issue>, ClientError> {
        self.get_json("/issues", &[])
    }
}

/// Whether a transport error means the request never left: no connection
/// was made.
fn not_sent(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
        ureq::Error::Timeout(t) => matches!(t, ureq::Timeout::Connect | ureq::Timeout::Resolve),
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}
