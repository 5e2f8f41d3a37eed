//! The tracker service's wire format: the JSON bodies of its HTTP API (see
//! the crate's README for the routes), the headers and the MCP `_meta` name
//! that carry an idempotency key, and the checks both ends apply to a key.
//!
//! Shared by the server ([`http`](crate::http), [`mcp`](crate::mcp)) and the
//! client ([`client`](crate::client)), so the two cannot drift apart. Every
//! body type refuses unknown fields: a misspelt field is a `400`, never a
//! silently empty title.
//!
//! ```
//! use tracker::wire::{self, Created, NewIssue};
//!
//! let body: NewIssue = serde_json::from_str(r#"{"title": "crash", "body": "trace"}"#).unwrap();
//! assert_eq!(body.title, "crash");
//! assert!(serde_json::from_str::<NewIssue>(r#"{"title": "crash", "bdy": "x"}"#).is_err());
//! assert_eq!(serde_json::to_string(&Created::Issue { number: 3 }).unwrap(), r#"{"number":3}"#);
//! // Keys travel as a Structured Field string, quoted, as the IETF draft asks.
//! assert_eq!(wire::parse_key_header("\"k-1\"").unwrap(), "k-1");
//! assert_eq!(wire::key_header_value("k-1"), "\"k-1\"");
//! ```

use serde::{Deserialize, Serialize};

use crate::{Fence, LookupAnswer, Request, Response};

/// The request header that carries an idempotency key
/// (draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// A response header set to `true` on a keyed repeat: the body and status
/// are the first request's, and nothing changed.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// The `_meta` entry that carries an idempotency key in an MCP `tools/call`
/// request. The MCP specification reserves un-prefixed and
/// `modelcontextprotocol`/`mcp` prefixes for itself and asks others for a
/// reverse-DNS prefix of their own, hence `io.crashsweep/`.
pub const MCP_META_KEY: &str = "io.crashsweep/idempotency-key";

/// The `_meta` entry of a tool in an MCP `tools/list` answer that says the
/// server honours [`MCP_META_KEY`] for it: `{"ttl_secs": N}` (or `null` for
/// keys kept for ever). Absent: keys are ignored (a keyless server).
pub const MCP_KEYS_META: &str = "io.crashsweep/idempotency";

/// The request header naming the run a mutating request acts for; with
/// [`EPOCH_HEADER`] it is the request's [`Fence`]. Both or neither.
pub const RUN_HEADER: &str = "Crashsweep-Run";

/// The request header carrying the sender's fencing epoch of the run in
/// [`RUN_HEADER`] (a decimal number).
pub const EPOCH_HEADER: &str = "Crashsweep-Epoch";

/// The `_meta` entry naming the run of an MCP `tools/call` (with
/// [`MCP_EPOCH_META`], a number): the MCP form of the fence headers.
pub const MCP_RUN_META: &str = "io.crashsweep/run";

/// The `_meta` entry carrying the sender's fencing epoch (a number).
pub const MCP_EPOCH_META: &str = "io.crashsweep/epoch";

/// The status of a request whose fence is older than one the tracker
/// recorded for its run (`412 Precondition Failed`, code `stale_epoch`):
/// the sender no longer holds the run and must stop. Nothing was recorded.
pub const STALE_EPOCH_STATUS: u16 = 412;

/// The fence of a request from its run and epoch fields (headers or MCP
/// `_meta`): `Ok(None)` when neither is there; an error naming what is
/// wrong when only one is, the run is not a printable string of 1–255
/// bytes, or the epoch is not a whole number.
pub fn parse_fence(run: Option<&str>, epoch: Option<&str>) -> Result<Option<Fence>, String> {
    match (run, epoch) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!("{RUN_HEADER} was sent without {EPOCH_HEADER}")),
        (None, Some(_)) => Err(format!("{EPOCH_HEADER} was sent without {RUN_HEADER}")),
        (Some(run), Some(epoch)) => {
            if run.is_empty()
                || run.len() > MAX_KEY_BYTES
                || !run.chars().all(|c| c.is_ascii_graphic() || c == ' ')
            {
                return Err(format!(
                    "{RUN_HEADER} must be 1 to {MAX_KEY_BYTES} printable ASCII characters"
                ));
            }
            let epoch = epoch
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{EPOCH_HEADER} {epoch:?} is not a whole number"))?;
            Ok(Some(Fence {
                run: run.to_owned(),
                epoch,
            }))
        }
    }
}

/// The largest request body the service reads, in bytes; a larger one is
/// `413`.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The longest key the service accepts, in bytes (after unquoting).
pub const MAX_KEY_BYTES: usize = 255;

/// `POST /issues`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewIssue {
    /// The issue's title.
    pub title: String,
    /// The issue's body.
    pub body: String,
}

/// `POST /issues/{number}/comments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    /// The comment's text.
    pub body: String,
}

/// The `201` body of a creation, and what a keyed repeat gets again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Created {
    /// `POST /issues`: `{"number": N}`.
    Issue {
        /// The new issue's number.
        number: u64,
    },
    /// `POST /issues/{number}/comments`: `{"issue": N, "id": ID}`.
    Comment {
        /// The issue commented on.
        issue: u64,
        /// The new comment's id.
        id: u64,
    },
}

impl From<Response> for Created {
    fn from(r: Response) -> Created {
        match r {
            Response::Issue { number } => Created::Issue { number },
            Response::Comment { issue, id } => Created::Comment { issue, id },
        }
    }
}

impl From<Created> for Response {
    fn from(c: Created) -> Response {
        match c {
            Created::Issue { number } => Response::Issue { number },
            Created::Comment { issue, id } => Response::Comment { issue, id },
        }
    }
}

/// Every error body: a stable machine-readable `error` code and a sentence
/// saying what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `malformed_body`, `body_too_large`, `missing_idempotency_key`,
    /// `bad_idempotency_key`, `key_reused`, `request_in_flight`,
    /// `no_such_issue`, `not_found`, `method_not_allowed`, `bad_query`,
    /// `storage`.
    pub error: String,
    /// What was wrong, for a person.
    pub message: String,
}

/// `GET /config`: how the service treats keys, published so a client can
/// tell a keyed service from a keyless one and how long keys last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// `"keyed"` or `"keyless"`.
    pub mode: String,
    /// Whether `POST`s without a key are refused with `400` (keyed mode).
    pub requires_key: bool,
    /// How long a key is kept after its first request, in seconds; `null`:
    /// for ever. An expired key counts as no key.
    pub key_ttl_secs: Option<u64>,
    /// Whether a lookup by arguments answers `cant_tell` (a lagging index).
    pub uncertain_lookup: bool,
    /// [`MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// [`IDEMPOTENCY_KEY_HEADER`].
    pub idempotency_header: String,
    /// [`MCP_META_KEY`].
    pub mcp_meta_key: String,
}

/// `POST /lookup`: "did this request happen?", the request as the client
/// sent it (its key, if any, in the `Idempotency-Key` header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum LookupRequest {
    /// A `POST /issues`.
    FileIssue {
        /// Its title.
        title: String,
        /// Its body.
        body: String,
    },
    /// A `POST /issues/{issue}/comments`.
    Comment {
        /// The issue.
        issue: u64,
        /// The comment's text.
        body: String,
    },
}

impl From<LookupRequest> for Request {
    fn from(l: LookupRequest) -> Request {
        match l {
            LookupRequest::FileIssue { title, body } => Request::FileIssue { title, body },
            LookupRequest::Comment { issue, body } => Request::Comment { issue, body },
        }
    }
}

impl From<Request> for LookupRequest {
    fn from(r: Request) -> LookupRequest {
        match r {
            Request::FileIssue { title, body } => LookupRequest::FileIssue { title, body },
            Request::Comment { issue, body } => LookupRequest::Comment { issue, body },
        }
    }
}

/// The answer of `POST /lookup` and `GET /keys/{key}`. `not_found` is said
/// only when certain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LookupReply {
    /// It happened: the answer it got (or would have).
    Found {
        /// The first answer.
        response: Created,
    },
    /// It certainly did not happen.
    NotFound,
    /// The service cannot tell; ask someone else.
    CantTell {
        /// Why not.
        reason: String,
    },
}

impl From<LookupAnswer> for LookupReply {
    fn from(l: LookupAnswer) -> LookupReply {
        match l {
            LookupAnswer::Found(r) => LookupReply::Found { response: r.into() },
            LookupAnswer::NotFound => LookupReply::NotFound,
            LookupAnswer::CantTell => LookupReply::CantTell {
                reason: "the tracker's search may lag behind its writes, so it cannot promise \
                         the record is missing"
                    .into(),
            },
        }
    }
}

/// One hit of `GET /search?q=…`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The issue's number.
    pub number: u64,
    /// Its title.
    pub title: String,
}

/// `GET /search?q=…`: `{"issues": [{"number", "title"}, …]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchAnswer {
    /// Matching issues, by number.
    pub issues: Vec<SearchHit>,
}

/// Why a key is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty after unquoting.
    #[error("the idempotency key is empty")]
    Empty,
    /// Longer than [`MAX_KEY_BYTES`].
    #[error("the idempotency key is {0} bytes; at most {MAX_KEY_BYTES} are accepted")]
    TooLong(usize),
    /// A character outside printable ASCII, or a bad quoted string.
    #[error("the idempotency key must be a quoted string of printable ASCII: {0}")]
    Malformed(String),
}

/// Check a key (already unquoted): 1 to [`MAX_KEY_BYTES`] bytes of printable
/// ASCII (`0x20`–`0x7e`).
pub fn check_key(key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(KeyError::TooLong(key.len()));
    }
    if let Some(c) = key.chars().find(|c| !(' '..='~').contains(c)) {
        return Err(KeyError::Malformed(format!("it contains {c:?}")));
    }
    Ok(())
}

/// The key in an `Idempotency-Key` header value. The draft makes it a
/// Structured Field string (`"…"`, with `\"` and `\\` escapes); a bare
/// token, as Stripe sends, is accepted too.
pub fn parse_key_header(value: &str) -> Result<String, KeyError> {
    let value = value.trim_matches(' ');
    let key = match value.strip_prefix('"') {
        None => value.to_owned(),
        Some(rest) => {
            let inner = rest.strip_suffix('"').ok_or_else(|| {
                KeyError::Malformed("an opening quote without a closing one".into())
            })?;
            let mut key = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e @ ('"' | '\\')) => key.push(e),
                        _ => return Err(KeyError::Malformed("a bad escape".into())),
                    },
                    '"' => return Err(KeyError::Malformed("an unescaped quote inside".into())),
                    c => key.push(c),
                }
            }
            key
        }
    };
    check_key(&key)?;
    Ok(key)
}

/// The header value for `key`: a Structured Field string.
pub fn key_header_value(key: &str) -> String {
    let mut v = String::with_capacity(key.len() + 2);
    v.push('"');
    for c in key.chars() {
        if c == '"' || c == '\\' {
            v.push('\\');
        }
        v.push(c);
    }
    v.push('"');
    v
}
