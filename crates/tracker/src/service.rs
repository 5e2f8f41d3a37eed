//! The receiver's half of the idempotency contract, shared by the HTTP
//! ([`http`](crate::http)) and MCP ([`mcp`](crate::mcp)) front ends, so a
//! key in an `Idempotency-Key` header and a key in MCP `_meta` are honoured
//! by one piece of code.
//!
//! A [`Service`] is a file-backed [`Tracker`] in a directory, locked so one
//! service at a time owns it, plus a table of keys whose first request is
//! still being processed. [`Service::create`] is the whole contract of
//! draft-ietf-httpapi-idempotency-key-header:
//!
//! | situation | answer |
//! | --- | --- |
//! | keyed service, no key | [`Refusal::MissingKey`] (`400`) |
//! | key not a printable string of 1–255 bytes | [`Refusal::BadKey`] (`400`) |
//! | key held for the same request | the first answer, nothing changes (replay) |
//! | key held for another request | [`Refusal::KeyReused`] (`422`) |
//! | key's first request still in flight | [`Refusal::InFlight`] (`409`) |
//! | key expired | a new request |
//! | keyless service | keys ignored: every request is new |
//! | a fence older than the run's highest recorded epoch (keyed or keyless) | [`Refusal::StaleEpoch`] (`412`) |
//! | a fence that is not a run and a whole-number epoch | [`Refusal::BadFence`] (`400`) |
//!
//! A request may carry a [`Fence`]: its run and the sender's fencing epoch
//! (the `Crashsweep-Run` and `Crashsweep-Epoch` headers, or MCP `_meta`).
//! The service remembers the highest epoch of each run among the requests
//! it recorded, on disk with the records, and refuses a lower one before
//! anything else: a process that lost its run to another cannot act here,
//! even on a keyless service.
//!
//! The request's *fingerprint* is the request itself ([`Request`]: the
//! operation and its arguments, parsed), so the same JSON with other
//! whitespace or field order is the same request.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::wire::{self, Config, Created, KeyError, LookupReply, SearchAnswer, SearchHit};
use crate::{Fence, Issue, Mode, Request, Tracker, TrackerError};

/// The lock file a service holds in its directory while it runs.
pub const LOCK_FILE: &str = "tracker.lock";

/// Seconds on some clock: Unix time for a real service, a counter in tests.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Called with each new keyed or keyless request after it is registered as
/// in flight and before the tracker records it: tests hold a request there
/// to observe `409`, the chaos test widens the window a kill can land in.
pub type Hold = Arc<dyn Fn(&Request) + Send + Sync>;

/// How a service treats keys and lookups.
#[derive(Clone)]
pub struct Options {
    /// Keyed (keys required and honoured) or keyless (keys ignored).
    pub mode: Mode,
    /// How long a key is kept; `None`: for ever.
    pub key_ttl: Option<Duration>,
    /// Lookups by arguments answer `cant_tell`, like a lagging search index.
    pub uncertain_lookup: bool,
    /// The clock keys expire on, in seconds.
    pub clock: Clock,
    /// See [`Hold`].
    pub hold: Option<Hold>,
    /// Called with each new request after the tracker recorded it (on disk)
    /// and before the answer goes out: where a crash loses only the answer.
    pub after: Option<Hold>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("mode", &self.mode)
            .field("key_ttl", &self.key_ttl)
            .field("uncertain_lookup", &self.uncertain_lookup)
            .field("hold", &self.hold.is_some())
            .field("after", &self.after.is_some())
            .finish()
    }
}

impl Options {
    /// Keyed, keys kept 24 hours (as Stripe keeps them), certain lookups,
    /// Unix time.
    pub fn keyed() -> Options {
        Options {
            mode: Mode::Keyed,
            key_ttl: Some(Duration::from_secs(24 * 60 * 60)),
            uncertain_lookup: false,
            clock: Arc::new(unix_secs),
            hold: None,
            after: None,
        }
    }

    /// Keyless: keys ignored, like today's keyless tracker.
    pub fn keyless() -> Options {
        Options {
            mode: Mode::Keyless,
            ..Options::keyed()
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Why a creation was refused. Every refusal recorded nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A keyed service got a request without a key.
    #[error(
        "this tracker requires an {} header on every POST",
        wire::IDEMPOTENCY_KEY_HEADER
    )]
    MissingKey,
    /// The key is not usable.
    #[error(transparent)]
    BadKey(#[from] KeyError),
    /// The key is held for a request with other arguments.
    #[error("idempotency key {key:?} was already used for a different request")]
    KeyReused {
        /// The key.
        key: String,
    },
    /// The key's first request is still being processed.
    #[error("a request with idempotency key {key:?} is still being processed; retry later")]
    InFlight {
        /// The key.
        key: String,
    },
    /// The fence is older than one recorded for its run: the sender no
    /// longer holds the run.
    #[error("run {run:?} at epoch {epoch} is stale: epoch {highest} of it was recorded here; this process no longer holds the run and must stop")]
    StaleEpoch {
        /// The run.
        run: String,
        /// The sender's epoch.
        epoch: u64,
        /// The highest epoch recorded for the run.
        highest: u64,
    },
    /// The fence headers (or `_meta` entries) are unusable.
    #[error("bad fence: {0}")]
    BadFence(String),
    /// A comment on an issue that does not exist.
    #[error("no issue #{issue}")]
    NoSuchIssue {
        /// The issue.
        issue: u64,
    },
    /// The tracker's files could not be written (or read); nothing recorded.
    #[error("the tracker could not store the request: {0}")]
    Storage(String),
}

impl Refusal {
    /// The stable code of the error body.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::MissingKey => "missing_idempotency_key",
            Refusal::BadKey(_) => "bad_idempotency_key",
            Refusal::KeyReused { .. } => "key_reused",
            Refusal::InFlight { .. } => "request_in_flight",
            Refusal::StaleEpoch { .. } => "stale_epoch",
            Refusal::BadFence(_) => "bad_fence",
            Refusal::NoSuchIssue { .. } => "no_such_issue",
            Refusal::Storage(_) => "storage",
        }
    }
}

/// A creation's answer: the first answer, and whether this was a repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// What the tracker answered (the first time, for a repeat).
    pub created: Created,
    /// A keyed repeat: nothing changed.
    pub replayed: bool,
}

/// The tracker service: see the module docs.
pub struct Service {
    tracker: Tracker,
    opts: Options,
    in_flight: Mutex<HashMap<String, Request>>,
    /// Held while the service lives: one service per directory (none for a
    /// service over a tracker it was handed, [`Service::over`]).
    _lock: Option<durable::dir::LockGuard>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("tracker", &self.tracker)
            .field("opts", &self.opts)
            .finish()
    }
}

/// Why a service could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another service holds the directory's lock.
    #[error("{} is locked: another tracker service runs on this directory", path.display())]
    Locked {
        /// The lock file.
        path: std::path::PathBuf,
    },
    /// The directory or its lock file could not be used.
    #[error("cannot use {}: {source}", path.display())]
    Io {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The tracker's file is corrupt or unreadable (left as it is).
    #[error(transparent)]
    Tracker(#[from] TrackerError),
}

/// Removes a key from the in-flight table when its request is done, however
/// it ends.
struct InFlightGuard<'s> {
    service: &'s Service,
    key: String,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.service.in_flight().remove(&self.key);
    }
}

impl Service {
    /// Open the file-backed tracker in `dir` (created if missing) and lock
    /// the directory (`tracker.lock`, released when the service is dropped
    /// or its process dies). Records from an earlier run, or from a service
    /// that was killed, are loaded; a temp file a killed write left is
    /// removed.
    pub fn open(dir: &Path, opts: Options) -> Result<Service, OpenError> {
        let io = |source| OpenError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let disk = durable::DiskDir::new(dir).map_err(io)?;
        let lock = durable::Dir::lock(&disk, LOCK_FILE).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                OpenError::Locked {
                    path: dir.join(LOCK_FILE),
                }
            } else {
                io(e)
            }
        })?;
        let mut tracker = Tracker::open_dir(Arc::new(disk), opts.mode)?;
        if let Some(ttl) = opts.key_ttl {
            tracker = tracker.with_key_ttl(ttl.as_secs());
        }
        if opts.uncertain_lookup {
            tracker = tracker.with_uncertain_lookup();
        }
        Ok(Service {
            tracker,
            opts,
            in_flight: Mutex::new(HashMap::new()),
            _lock: Some(lock),
        })
    }

    /// Serve a tracker this process already has (in memory, say, as a
    /// sweep's world keeps it): its mode decides keys, and its own key
    /// lifetime, faults and lookups apply; `opts` gives the clock and the
    /// hooks. No directory, so no lock.
    pub fn over(tracker: Tracker, opts: Options) -> Service {
        let opts = Options {
            mode: tracker.mode(),
            key_ttl: tracker.key_ttl_ticks().map(Duration::from_secs),
            uncertain_lookup: tracker.uncertain_lookup(),
            ..opts
        };
        Service {
            tracker,
            opts,
            in_flight: Mutex::new(HashMap::new()),
            _lock: None,
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, Request>> {
        // Only inserts and removes happen under this lock; a panic cannot
        // leave it half-changed.
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tracker behind the service (shared records).
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Whether the service requires and honours keys.
    pub fn mode(&self) -> Mode {
        self.opts.mode
    }

    /// What `GET /config` publishes.
    pub fn config(&self) -> Config {
        Config {
            mode: match self.opts.mode {
                Mode::Keyed => "keyed".into(),
                Mode::Keyless => "keyless".into(),
            },
            requires_key: self.opts.mode == Mode::Keyed,
            key_ttl_secs: self.key_ttl_secs(),
            uncertain_lookup: self.opts.uncertain_lookup,
            max_body_bytes: wire::MAX_BODY_BYTES,
            idempotency_header: wire::IDEMPOTENCY_KEY_HEADER.into(),
            mcp_meta_key: wire::MCP_META_KEY.into(),
        }
    }

    /// How long keys are kept, in seconds (`None`: for ever), as the
    /// tracker applies it.
    pub fn key_ttl_secs(&self) -> Option<u64> {
        self.tracker.key_ttl_ticks()
    }

    fn tick(&self) {
        self.tracker.advance_to((self.opts.clock)());
    }

    /// The key a request is handled by: `None` in keyless mode whatever was
    /// sent (a bad key is not even looked at: keys are ignored).
    fn effective_key(&self, key: Option<&str>) -> Result<Option<String>, Refusal> {
        match self.opts.mode {
            Mode::Keyless => Ok(None),
            Mode::Keyed => {
                let key = key.ok_or(Refusal::MissingKey)?;
                wire::check_key(key)?;
                Ok(Some(key.to_owned()))
            }
        }
    }

    /// Register `key` as in flight for `req`, or refuse: `409` for the same
    /// request, `422` for another one.
    fn enter(&self, key: &str, req: &Request) -> Result<InFlightGuard<'_>, Refusal> {
        let mut table = self.in_flight();
        if let Some(first) = table.get(key) {
            return Err(if first == req {
                Refusal::InFlight {
                    key: key.to_owned(),
                }
            } else {
                Refusal::KeyReused {
                    key: key.to_owned(),
                }
            });
        }
        table.insert(key.to_owned(), req.clone());
        Ok(InFlightGuard {
            service: self,
            key: key.to_owned(),
        })
    }

    /// Perform a mutating request under the idempotency contract (see the
    /// module docs). `key` is the key as received (already unquoted), if any.
    pub fn create(&self, req: &Request, key: Option<&str>) -> Result<Accepted, Refusal> {
        self.create_fenced(req, key, None)
    }

    /// [`Service::create`] with the sender's [`Fence`], if it sent one: a
    /// stale one is refused ([`Refusal::StaleEpoch`]) whatever the mode.
    pub fn create_fenced(
        &self,
        req: &Request,
        key: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<Accepted, Refusal> {
        let key = self.effective_key(key)?;
        self.tick();
        let _guard = key.as_deref().map(|k| self.enter(k, req)).transpose()?;
        let replayed = key
            .as_deref()
            .and_then(|k| self.tracker.held_key(k))
            .is_some_and(|(first, _)| first == *req);
        if !replayed {
            if let Some(hold) = &self.opts.hold {
                hold(req);
            }
        }
        let response = self
            .tracker
            .apply_fenced(req, key.as_deref(), fence)
            .map_err(|e| match e {
                TrackerError::KeyReused { key } => Refusal::KeyReused { key },
                TrackerError::StaleEpoch {
                    run,
                    epoch,
                    highest,
                } => Refusal::StaleEpoch {
                    run,
                    epoch,
                    highest,
                },
                TrackerError::NoSuchIssue { issue } => Refusal::NoSuchIssue { issue },
                other => Refusal::Storage(other.to_string()),
            })?;
        if !replayed {
            if let Some(after) = &self.opts.after {
                after(req);
            }
        }
        Ok(Accepted {
            created: response.into(),
            replayed,
        })
    }

    /// "Did this request happen?" with its key if the client sent one (a
    /// malformed key is simply not held). Reads only.
    pub fn lookup(&self, req: &Request, key: Option<&str>) -> LookupReply {
        self.tick();
        self.tracker.lookup(req, key).into()
    }

    /// "Did the request with this key happen?" by the key alone: `found` if
    /// the key is held; otherwise `cant_tell`, since a key that is not held
    /// may have expired after its request happened.
    pub fn lookup_key(&self, key: &str) -> LookupReply {
        self.tick();
        match self.tracker.held_key(key) {
            Some((_, response)) => LookupReply::Found {
                response: response.into(),
            },
            None => LookupReply::CantTell {
                reason: match self.opts.mode {
                    Mode::Keyless => "this tracker is keyless: it keeps no keys; look the \
                                      request up by its arguments (POST /lookup)"
                        .into(),
                    Mode::Keyed => "the key is not held: it was never used, or it expired; \
                                    look the request up by its arguments (POST /lookup)"
                        .into(),
                },
            },
        }
    }

    /// `GET /search?q=…`.
    pub fn search(&self, query: &str) -> SearchAnswer {
        SearchAnswer {
            issues: self
                .tracker
                .search(query)
                .into_iter()
                .map(|(number, title)| SearchHit { number, title })
                .collect(),
        }
    }

    /// `GET /issues`: every issue with its comments.
    pub fn issues(&self) -> Vec<Issue> {
        self.tracker.issues()
    }
}
