//! Where the tracker tools send their requests: the in-process
//! [`Tracker`], or the tracker service over HTTP ([`HttpTracker`], the key
//! in the `Idempotency-Key` header).
//!
//! Both answer the same questions with the same words, so `issue_file`,
//! `issue_comment` and `search` behave alike on either; what differs is
//! only how an HTTP failure maps to an outcome. The client's errors stand
//! for the answers agent's one table reads ([`http_outcome`]):
//!
//! | the client says | read as | the tool returns |
//! | --- | --- | --- |
//! | `409` after its bounded wait | `409` on the last try | [`ToolError::Unknown`]: up the ladder |
//! | a cut connection, a timeout, `5xx` | the answer lost, or `5xx` | [`ToolError::Unknown`]: up the ladder |
//! | `422` (key reused with other arguments) | `422` | [`ToolError::Fatal`]: a bug, the run stops |
//! | another `4xx` (no such issue, a malformed request) | that status | [`ToolError::Failed`]: nothing done, the model sees it |
//! | unreachable for the client's whole retry window | not sent | [`ToolError::Unknown`] ending `; nothing was sent`: the call cannot finish; the run stops after its tries and a rerun continues |

use std::sync::Arc;

use tracker::client::{ClientError, HttpTracker};
use tracker::wire::LookupReply;
use tracker::{Fence, LookupAnswer, Mode, Request, Response, Tracker, TrackerError};

use agent::tool::{http_outcome, CallContext, HttpEnd, ToolError};

/// The tracker a tool talks to.
#[derive(Clone, Debug)]
pub enum Backend {
    /// In this process (clones share the records).
    Local(Tracker),
    /// The tracker service, over HTTP (shared by the tools on it).
    Http(Arc<HttpTracker>),
}

impl From<Tracker> for Backend {
    fn from(t: Tracker) -> Backend {
        Backend::Local(t)
    }
}

impl From<&Tracker> for Backend {
    fn from(t: &Tracker) -> Backend {
        Backend::Local(t.clone())
    }
}

impl From<HttpTracker> for Backend {
    fn from(t: HttpTracker) -> Backend {
        Backend::Http(Arc::new(t))
    }
}

impl From<Arc<HttpTracker>> for Backend {
    fn from(t: Arc<HttpTracker>) -> Backend {
        Backend::Http(t)
    }
}

/// "Did it happen?" in the tracker's words, from either backend.
pub(crate) enum Answer {
    Found(Response),
    NotFound,
    CantTell(String),
}

const LAGGING: &str =
    "the tracker's search may lag behind its writes, so it cannot promise the record is missing";

impl Backend {
    /// Whether the tracker honours keys.
    pub fn mode(&self) -> Mode {
        match self {
            Backend::Local(t) => t.mode(),
            Backend::Http(t) => t.mode(),
        }
    }

    /// How long the service keeps keys, in seconds, as it publishes it
    /// (`GET /config`); `None` for the in-process tracker, whose tools are
    /// told with `keep_keys_for`.
    pub fn published_key_ttl(&self) -> Option<u64> {
        match self {
            Backend::Local(_) => None,
            Backend::Http(t) => t.config().key_ttl_secs,
        }
    }

    /// Perform a mutating request; see the module docs for the errors.
    pub(crate) fn apply(
        &self,
        tool: &str,
        req: &Request,
        ctx: &CallContext<'_>,
        send_epoch: bool,
    ) -> Result<Response, ToolError> {
        let key = ctx.key;
        // Every request says which holder of the run sends it: a tracker
        // that has recorded a newer one refuses it (`412`), keys or no keys.
        let fence = send_epoch.then(|| Fence {
            run: ctx.run.to_string(),
            epoch: ctx.epoch,
        });
        let fence = fence.as_ref();
        match self {
            // As before the service existed: a reused key is an error the
            // model sees (the sweeps' tables count on it). `Dropped` (the
            // connection dropped after the tracker acted) and `Unknown` (its
            // save of the accepted request failed: a full disk, a failed
            // fsync) may have acted: an unknown outcome, up the ladder.
            Backend::Local(t) => t.apply_fenced(req, key, fence).map_err(|e| match e {
                TrackerError::Dropped | TrackerError::Unknown { .. } => {
                    ToolError::Unknown(format!("{tool}: {e}"))
                }
                TrackerError::StaleEpoch { .. } => ToolError::Stale(format!("{tool}: {e}")),
                other => ToolError::Failed(format!("{tool}: {other}")),
            }),
            Backend::Http(t) => t
                .apply_fenced(req, key, fence)
                .map_err(|e| http_error(tool, e)),
        }
    }

    /// "Did this request happen?" Never `NotFound` unless the tracker is
    /// certain; a lookup that fails over HTTP cannot tell.
    pub(crate) fn lookup(&self, req: &Request, key: Option<&str>) -> Answer {
        match self {
            Backend::Local(t) => match t.lookup(req, key) {
                LookupAnswer::Found(r) => Answer::Found(r),
                LookupAnswer::NotFound => Answer::NotFound,
                LookupAnswer::CantTell => Answer::CantTell(LAGGING.into()),
            },
            Backend::Http(t) => match t.lookup(req, key) {
                Ok(LookupReply::Found { response }) => Answer::Found(response.into()),
                Ok(LookupReply::NotFound) => Answer::NotFound,
                Ok(LookupReply::CantTell { reason }) => Answer::CantTell(reason),
                Err(e) => Answer::CantTell(format!("the lookup failed: {e}")),
            },
        }
    }

    /// Issues whose title or body contains `query`, as `(number, title)`.
    pub(crate) fn search(&self, tool: &str, query: &str) -> Result<Vec<(u64, String)>, ToolError> {
        match self {
            Backend::Local(t) => Ok(t.search(query)),
            Backend::Http(t) => t
                .search(query)
                .map(|a| a.issues.into_iter().map(|h| (h.number, h.title)).collect())
                .map_err(|e| http_error(tool, e)),
        }
    }
}

/// What an HTTP failure means for the loop: the client's error read as the
/// answer it stands for, by [`http_outcome`] (see the module docs).
fn http_error(tool: &str, e: ClientError) -> ToolError {
    let end = match &e {
        ClientError::KeyReused { .. } => HttpEnd::Status(422),
        ClientError::Stale { .. } => HttpEnd::Status(tracker::wire::STALE_EPOCH_STATUS),
        ClientError::Refused { status, .. } => HttpEnd::Status(*status),
        // The client has waited out its `409`s: this was the last try.
        ClientError::InFlight { .. } => HttpEnd::Status(409),
        ClientError::Unreachable { .. } => HttpEnd::NotSent,
        ClientError::Unknown { .. } => HttpEnd::Lost,
    };
    match http_outcome(end, true, format_args!("{tool}: {e}")) {
        Err(error) => error,
        // No client error is a `2xx`, or a `409` with tries left.
        Ok(_) => ToolError::Unknown(format!("{tool}: {e}")),
    }
}
