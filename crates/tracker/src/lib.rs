//! A durable fake issue tracker: the outside world of a crash sweep.
//!
//! An agent's tools act on a service that outlives the agent's process. A
//! crash sweep kills the agent at every point and restarts it, so it needs a
//! stand-in for that service whose records survive every crash, and which can
//! behave like the services the book chapter compares:
//!
//! * [`Mode::Keyed`] honours idempotency keys the way Stripe and the IETF
//!   Idempotency-Key draft do: a repeat with a held key gets the first answer
//!   and changes nothing, the same key with different arguments is refused;
//! * [`Mode::Keyless`] ignores keys, so every retry files again — the
//!   duplicates the sweep exists to find;
//! * [`Tracker::lookup`] answers "did this request happen?" for the
//!   resolution ladder, by key or by arguments, and can be made unsure with
//!   [`Tracker::with_uncertain_lookup`];
//! * [`Fault::FailAfterAccept`] records a request and then fails the call,
//!   like an MCP server dying after the service acted.
//!
//! Clones of a [`Tracker`] share one set of records, so the sweep keeps a
//! clone as the *world* and hands another to each life; a crashed life leaves
//! the records behind. [`Tracker::open_dir`] keeps them in a file for a
//! world that must outlive the process itself.
//!
//! Every new record, and every keyed repeat, passes the point
//! [`ACCEPTED`] (`"tracker accepted"`) *after* the record exists and before
//! the caller hears back: a crash there is the window no checkpoint can close.
//!
//! ```
//! use tracker::{LookupAnswer, Mode, Request, Response, Tracker};
//!
//! let world = Tracker::new(Mode::Keyed);
//! let life = world.clone();
//!
//! // The first life files an issue and crashes before it hears the answer.
//! let crashed = crashpoint::crash_at(crashpoint::Hit::new("tracker accepted", 1), || {
//!     life.file_issue("crash in parser", "stack trace…", Some("run-1/call-1"))
//! });
//! assert!(crashed.outcome.crashed().is_some());
//!
//! // The record outlived the crash, and the restart can tell it happened...
//! let req = Request::FileIssue { title: "crash in parser".into(), body: "stack trace…".into() };
//! assert_eq!(world.lookup(&req, Some("run-1/call-1")), LookupAnswer::Found(Response::Issue { number: 1 }));
//! // ...or simply retry with the same key: the tracker answers as the first time.
//! assert!(world.holds_key("run-1/call-1"));
//! assert_eq!(world.file_issue("crash in parser", "stack trace…", Some("run-1/call-1")).unwrap(), 1);
//! assert_eq!(world.count(&req), 1);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "serve")]
pub mod http;
mod log;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(any(feature = "serve", feature = "mcp"))]
pub mod service;
mod store;
pub mod wire;

pub use log::LogLayout;

/// The point every accepted mutating request passes: after the record exists
/// (and is on disk, for a file-backed tracker), before the caller hears back.
pub const ACCEPTED: &str = "tracker accepted";

/// A log-backed tracker ([`Tracker::open_log`]) passes this point when it has
/// recorded a new request in memory and made nothing durable: a crash here
/// loses the request, and the caller (who heard nothing) must send it again.
pub const RECEIVED: &str = "tracker received";

/// A log-backed tracker passes this point when the request's log entry is
/// durable and its index is not yet updated: a restart replays the entry.
pub const LOG_APPENDED: &str = "tracker log appended";

/// A log-backed tracker passes this point when its index covers the new
/// record, before [`ACCEPTED`] and the answer.
pub const INDEX_UPDATED: &str = "tracker index updated";

/// Whether the tracker honours idempotency keys. The book chapter's table compares a
/// loop against both kinds of service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// A repeat with a held key gets the first answer and changes nothing.
    Keyed,
    /// Keys are ignored: every request is new.
    Keyless,
}

/// A request that changes the tracker. Its arguments are what a keyed repeat
/// is compared by, and what [`Tracker::lookup`] and [`Tracker::count`] match.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Request {
    /// File a new issue.
    FileIssue {
        /// The issue's title.
        title: String,
        /// The issue's body.
        body: String,
    },
    /// Comment on an existing issue.
    Comment {
        /// The issue's number.
        issue: u64,
        /// The comment's text.
        body: String,
    },
}

/// The tracker's answer to an accepted [`Request`]; a keyed repeat gets the
/// first one again.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Response {
    /// The issue filed, by number (from 1).
    Issue {
        /// The new issue's number.
        number: u64,
    },
    /// The comment made, by id (from 1, counted over all issues).
    Comment {
        /// The issue commented on.
        issue: u64,
        /// The new comment's id.
        id: u64,
    },
}

/// One issue record, with its comments in the order they were made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// The issue's number: 1 for the first issue, 2 for the second, …
    pub number: u64,
    /// The title it was filed with.
    pub title: String,
    /// The body it was filed with.
    pub body: String,
    /// Its comments, oldest first.
    pub comments: Vec<Comment>,
}

/// One comment record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// The comment's id, unique over the whole tracker, from 1.
    pub id: u64,
    /// Its text.
    pub body: String,
}

/// The answer to "did this request happen?" — the second step of the
/// resolution ladder. Only a lookup that is sure says `NotFound`; one that
/// cannot be sure says `CantTell` and passes the question up the ladder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupAnswer {
    /// It happened; this is what the tracker answered (or would have).
    Found(Response),
    /// It certainly did not happen: rerunning it makes no duplicate.
    NotFound,
    /// The tracker cannot tell (a lagging search index): ask someone else.
    CantTell,
}

/// A fault injected into the tracker, to test how a loop handles a call that
/// failed although the service acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// The `nth` NEW mutating request the tracker records (1-based, counted
    /// over the tracker's whole life, across every crash of its clients) is
    /// recorded and then answered with [`TrackerError::Dropped`], like an MCP
    /// server dying mid-call after the service acted. A keyed repeat is not
    /// new and does not count; the fault fires once.
    FailAfterAccept {
        /// Which new record fails its call (1 = the first).
        nth: u64,
    },
}

/// Why the tracker refused or failed a request, or could not open its file.
#[derive(thiserror::Error, Debug)]
pub enum TrackerError {
    /// The key is held for a request with different arguments. A loop that
    /// sees this has given two calls one key: a bug in its key derivation.
    #[error("idempotency key {key:?} was already used for a different request")]
    KeyReused {
        /// The reused key.
        key: String,
    },
    /// A comment on an issue that does not exist. Nothing was recorded.
    #[error("no issue #{issue}")]
    NoSuchIssue {
        /// The missing issue's number.
        issue: u64,
    },
    /// The connection dropped after the tracker recorded the request (an
    /// injected [`Fault`]): the caller cannot know it took effect.
    #[error("the connection dropped after the tracker accepted the request")]
    Dropped,
    /// The tracker's file cannot be read as a tracker; it was left untouched.
    #[error("tracker file {} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// [`Tracker::open_existing`] found no tracker file where one must be.
    /// Nothing was created.
    #[error("tracker file {} is missing; it is never replaced by an empty tracker", path.display())]
    Missing {
        /// The missing file.
        path: PathBuf,
    },
    /// Saving an accepted request to the tracker's file failed (a full
    /// disk, a failed fsync): the request may or may not be recorded — a
    /// failed directory fsync comes after the new file replaced the old
    /// one, and a failed fsync says nothing about what reached the disk.
    /// A caller must treat it as an unknown outcome (look it up, or retry
    /// with the same key), never as "did not happen".
    #[error("tracker file {}: saving the accepted request failed, so it may or may not be recorded: {source}", path.display())]
    Unknown {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Reading or writing the tracker's file failed, or another tracker
    /// changed the file since this one read it (see [`Tracker::open_dir`]).
    /// A failed read, or a refusal before anything was written, records
    /// nothing; a failed save of an accepted request is
    /// [`TrackerError::Unknown`] instead.
    #[error("tracker file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A key the tracker remembers: the request it came with, the first answer,
/// and when (on the logical clock) it was taken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct KeyEntry {
    request: Request,
    response: Response,
    at_tick: u64,
}

/// What [`State::record`] did, so a failed persist can undo it.
enum Undo {
    Issue,
    Comment { index: usize },
}

/// Everything behind the tracker's lock.
#[derive(Default)]
struct State {
    key_ttl_ticks: Option<u64>,
    faults: Vec<Fault>,
    uncertain_lookup: bool,
    clock_ticks: u64,
    /// Invariant: `issues[i].number == i + 1`.
    issues: Vec<Issue>,
    /// Comments over all issues; the next comment id is this plus one.
    comments_total: u64,
    /// Ordered, so the file is the same byte for byte for the same history.
    keys: BTreeMap<String, KeyEntry>,
    store: Option<store::Store>,
    /// The file holds records whose save failed after the file was replaced
    /// (a failed directory fsync): visible, not known durable. The next
    /// answer from memory saves again first.
    not_durable: bool,
    /// The log-backed mode's files ([`Tracker::open_log`]).
    log: Option<log::LogStore>,
}

impl State {
    /// The entry for `key` if the tracker still holds it.
    fn held(&self, key: &str) -> Option<&KeyEntry> {
        let entry = self.keys.get(key)?;
        let age_ticks = self.clock_ticks.saturating_sub(entry.at_tick);
        match self.key_ttl_ticks {
            Some(ttl_ticks) if age_ticks >= ttl_ticks => None,
            _ => Some(entry),
        }
    }

    fn issue_index(&self, number: u64) -> Option<usize> {
        let index = usize::try_from(number.checked_sub(1)?).ok()?;
        (index < self.issues.len()).then_some(index)
    }

    /// Every record ever made: issues plus comments. Records are never
    /// deleted, so this counts new requests over the tracker's life.
    fn records(&self) -> u64 {
        self.issues.len() as u64 + self.comments_total
    }

    /// Validate and record a new request.
    fn record(&mut self, req: &Request) -> Result<(Response, Undo), TrackerError> {
        match req {
            Request::FileIssue { title, body } => {
                let number = self.issues.len() as u64 + 1;
                self.issues.push(Issue {
                    number,
                    title: title.clone(),
                    body: body.clone(),
                    comments: Vec::new(),
                });
                Ok((Response::Issue { number }, Undo::Issue))
            }
            Request::Comment { issue, body } => {
                let index = self
                    .issue_index(*issue)
                    .ok_or(TrackerError::NoSuchIssue { issue: *issue })?;
                let id = self.comments_total + 1;
                self.issues[index].comments.push(Comment {
                    id,
                    body: body.clone(),
                });
                self.comments_total = id;
                Ok((
                    Response::Comment { issue: *issue, id },
                    Undo::Comment { index },
                ))
            }
        }
    }

    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Issue => {
                self.issues.pop();
            }
            Undo::Comment { index } => {
                self.issues[index].comments.pop();
                self.comments_total -= 1;
            }
        }
    }

    /// Record a new request, remember its key, persist; on a failed persist
    /// undo all of it. Returns the answer and whether a fault fires.
    fn accept(
        &mut self,
        req: &Request,
        key: Option<&str>,
    ) -> Result<(Response, bool), TrackerError> {
        let records_before = self.records();
        let (response, undo) = self.record(req)?;
        let replaced = key.map(|k| {
            let entry = KeyEntry {
                request: req.clone(),
                response: response.clone(),
                at_tick: self.clock_ticks,
            };
            (k, self.keys.insert(k.to_owned(), entry))
        });
        if let Err(e) = self.persist_new(req, &response, key) {
            if self
                .store
                .as_ref()
                .is_some_and(store::Store::published_on_failure)
            {
                // The file holds the record: keep it, so a retry with the
                // key gets this answer and a lookup finds it — once it is
                // saved again (see `not_durable`).
                self.not_durable = true;
                return Err(e);
            }
            self.undo(undo);
            if let Some((k, previous)) = replaced {
                match previous {
                    Some(entry) => self.keys.insert(k.to_owned(), entry),
                    None => self.keys.remove(k),
                };
            }
            debug_assert_eq!(self.records(), records_before);
            return Err(e);
        }
        self.not_durable = false;
        let nth_record = self.records();
        debug_assert_eq!(nth_record, records_before + 1);
        let dropped = self
            .faults
            .iter()
            .any(|Fault::FailAfterAccept { nth }| *nth == nth_record);
        Ok((response, dropped))
    }

    /// The first record matching `req`'s arguments.
    fn find(&self, req: &Request) -> Option<Response> {
        match req {
            Request::FileIssue { title, body } => self
                .issues
                .iter()
                .find(|i| i.title == *title && i.body == *body)
                .map(|i| Response::Issue { number: i.number }),
            Request::Comment { issue, body } => {
                let index = self.issue_index(*issue)?;
                self.issues[index]
                    .comments
                    .iter()
                    .find(|c| c.body == *body)
                    .map(|c| Response::Comment {
                        issue: *issue,
                        id: c.id,
                    })
            }
        }
    }

    /// Make a new record durable: the log-backed mode appends it (passing
    /// its points), the file-backed mode rewrites its file.
    fn persist_new(
        &mut self,
        req: &Request,
        response: &Response,
        key: Option<&str>,
    ) -> Result<(), TrackerError> {
        match &mut self.log {
            Some(log) => log.append(
                (req, response, key),
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                &self.keys,
            ),
            None => self.persist(),
        }
    }

    /// Write the state down (file-backed and log-backed modes); in memory
    /// there is nothing to do.
    fn persist(&mut self) -> Result<(), TrackerError> {
        if let Some(log) = &mut self.log {
            return log.save_index(
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                &self.keys,
            );
        }
        match &mut self.store {
            Some(store) => store.save(
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                &self.keys,
            ),
            None => Ok(()),
        }
    }

    /// Where the records live, for error messages.
    fn path(&self) -> PathBuf {
        if let Some(log) = &self.log {
            return log.path();
        }
        match &self.store {
            Some(store) => store.path(),
            None => PathBuf::from("<memory>"),
        }
    }
}

/// The fake tracker. Clones share the records (and the configuration), so a
/// clone handed to a life that crashes leaves them with the others.
#[derive(Clone)]
pub struct Tracker {
    mode: Mode,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("Tracker")
            .field("mode", &self.mode)
            .field("issues", &st.issues.len())
            .field("comments", &st.comments_total)
            .field("keys", &st.keys.len())
            .field("clock_ticks", &st.clock_ticks)
            .field("key_ttl_ticks", &st.key_ttl_ticks)
            .field("faults", &st.faults)
            .field("uncertain_lookup", &st.uncertain_lookup)
            .field("path", &st.path())
            .finish()
    }
}

impl Tracker {
    /// An empty tracker kept in memory: its records live as long as any clone.
    pub fn new(mode: Mode) -> Tracker {
        Tracker::from_state(mode, State::default())
    }

    /// A tracker whose records live in `dir`'s `tracker.json`, so they
    /// outlive the process as well as its crashes: the world of the triage
    /// command, which dies on purpose and resumes in a new process.
    ///
    /// A missing file is a new, empty tracker. Anything else that is not a
    /// consistent tracker (bad JSON, unknown format version, numbers out of
    /// order, a key answering with a record it did not make) is
    /// [`TrackerError::Corrupt`] and the file is left as it is: starting empty
    /// over it would hide every record a judge should count. Temp files a
    /// killed writer left behind are removed.
    ///
    /// The file is rewritten with [`durable::write_atomic`] (synced, no
    /// points of its own) after every new record, before the tracker passes
    /// [`ACCEPTED`] or answers. Configuration (`with_key_ttl`, faults,
    /// uncertain lookups) is not stored: each opener sets its own. One
    /// tracker at a time should own a directory; a write over a file that
    /// another tracker changed since this one read it is refused with
    /// [`TrackerError::Io`] rather than erase the other's records.
    pub fn open_dir(dir: Arc<dyn durable::Dir>, mode: Mode) -> Result<Tracker, TrackerError> {
        Ok(Tracker::from_state(mode, store::Store::open(dir, false)?))
    }

    /// [`Tracker::open_dir`] for a tracker that must already exist: a
    /// missing `tracker.json` is [`TrackerError::Missing`], never an empty
    /// tracker, so a world that lost its tracker is refused rather than
    /// refilled from nothing. Everything else is as in `open_dir`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tracker::{Mode, Tracker, TrackerError};
    ///
    /// let disk = durable::testing::MemDir::new();
    /// let missing = Tracker::open_existing(Arc::new(disk.clone()), Mode::Keyed);
    /// assert!(matches!(missing, Err(TrackerError::Missing { .. })));
    /// // Once a tracker was created and wrote its file, it opens.
    /// let t = Tracker::open_dir(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    /// t.file_issue("bug", "trace", None).unwrap();
    /// let t = Tracker::open_existing(Arc::new(disk), Mode::Keyed).unwrap();
    /// assert_eq!(t.issues().len(), 1);
    /// ```
    pub fn open_existing(dir: Arc<dyn durable::Dir>, mode: Mode) -> Result<Tracker, TrackerError> {
        Ok(Tracker::from_state(mode, store::Store::open(dir, true)?))
    }

    /// A tracker whose records live in `dir` as a log of entries and an
    /// index, and which can crash part-way through a write: the tracker of a
    /// sweep that crashes the service as well as its client.
    ///
    /// Each new record passes [`RECEIVED`] (in memory only), is appended to
    /// the log as one synced file, passes [`LOG_APPENDED`], rewrites the
    /// index, passes [`INDEX_UPDATED`], then [`ACCEPTED`] as always. A crash
    /// at any of them kills the tracker too: drop it and open the directory
    /// again, which loads the index and replays the entries after it,
    /// keys included, so the key table survives with the records it
    /// protects. An entry that does not replay as it was written is
    /// [`TrackerError::Corrupt`]. Configuration is not stored.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tracker::{Mode, Tracker, LOG_APPENDED};
    ///
    /// let disk = durable::testing::MemDir::new();
    /// let t = Tracker::open_log(Arc::new(disk.clone()), Mode::Keyed).unwrap();
    /// // The tracker dies after its log append, before its index update.
    /// let life = crashpoint::crash_at(crashpoint::Hit::new(LOG_APPENDED, 1), || {
    ///     t.file_issue("bug", "trace", Some("k1"))
    /// });
    /// assert!(life.outcome.crashed().is_some());
    /// // It restarts from its own files: the record is there, and so is its key.
    /// let t = Tracker::open_log(Arc::new(disk), Mode::Keyed).unwrap();
    /// assert!(t.holds_key("k1"));
    /// assert_eq!(t.file_issue("bug", "trace", Some("k1")).unwrap(), 1);
    /// assert_eq!(t.issues().len(), 1);
    /// ```
    pub fn open_log(dir: Arc<dyn durable::Dir>, mode: Mode) -> Result<Tracker, TrackerError> {
        Tracker::open_log_with(dir, mode, LogLayout::KeysInLog)
    }

    /// [`Tracker::open_log`] with a chosen [`LogLayout`]: the wrong one is
    /// for mutation tests.
    pub fn open_log_with(
        dir: Arc<dyn durable::Dir>,
        mode: Mode,
        layout: LogLayout,
    ) -> Result<Tracker, TrackerError> {
        Ok(Tracker::from_state(mode, log::LogStore::open(dir, layout)?))
    }

    fn from_state(mode: Mode, state: State) -> Tracker {
        Tracker {
            mode,
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// A deep copy of an in-memory tracker ([`Tracker::new`]): the same
    /// records, keys, clock and configuration, sharing nothing with this one;
    /// `None` for a tracker kept in files ([`Tracker::open_dir`],
    /// [`Tracker::open_log`]), whose files a copy would share.
    pub fn deep_clone(&self) -> Option<Tracker> {
        let st = self.lock();
        if st.store.is_some() || st.log.is_some() {
            return None;
        }
        let copy = State {
            key_ttl_ticks: st.key_ttl_ticks,
            faults: st.faults.clone(),
            uncertain_lookup: st.uncertain_lookup,
            clock_ticks: st.clock_ticks,
            issues: st.issues.clone(),
            comments_total: st.comments_total,
            keys: st.keys.clone(),
            store: None,
            log: None,
            not_durable: st.not_durable,
        };
        Some(Tracker::from_state(self.mode, copy))
    }

    /// Feed everything the tracker would answer from to `h`: its mode,
    /// configuration, clock, records and keys.
    pub fn hash_contents(&self, h: &mut dyn std::hash::Hasher) {
        use std::fmt::Write as _;
        struct W<'a>(&'a mut dyn std::hash::Hasher);
        impl std::fmt::Write for W<'_> {
            fn write_str(&mut self, s: &str) -> std::fmt::Result {
                self.0.write(s.as_bytes());
                Ok(())
            }
        }
        let st = self.lock();
        let _ = write!(
            W(h),
            "{:?}|{:?}|{:?}|{}|{}|{}|{:?}|{:?}|{}|{}",
            self.mode,
            st.key_ttl_ticks,
            st.faults,
            st.uncertain_lookup,
            st.clock_ticks,
            st.comments_total,
            st.issues,
            st.keys,
            st.store.is_some(),
            st.log.is_some()
        );
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The lock is never held across user code, and across a point only
        // in the log-backed mode, whose points stand for the tracker itself
        // dying (its memory is then thrown away and the directory reopened).
        // Otherwise a poisoned lock means a panic inside the tracker itself,
        // between consistent steps; the records are still the records.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keys expire `ticks` after they were taken (see [`Tracker::advance`]),
    /// as a real service forgets keys (Stripe after 24 hours). An expired key
    /// counts as no key. By default keys never expire. Applies to every clone.
    pub fn with_key_ttl(self, ticks: u64) -> Tracker {
        self.lock().key_ttl_ticks = Some(ticks);
        self
    }

    /// Inject a fault (several may be injected). Applies to every clone.
    pub fn with_fault(self, fault: Fault) -> Tracker {
        self.lock().faults.push(fault);
        self
    }

    /// Lookups by arguments answer [`LookupAnswer::CantTell`], like a search index
    /// that lags behind writes and so cannot promise a record is missing. A
    /// lookup by a held key still answers: the key table is not an index.
    pub fn with_uncertain_lookup(self) -> Tracker {
        self.lock().uncertain_lookup = true;
        self
    }

    /// Whether the tracker honours keys.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Move the logical clock `ticks` forward, to expire keys in a test
    /// without waiting. A file-backed tracker writes the clock down; if that
    /// write fails the clock still moves in memory and reaches the file with
    /// the next record (meanwhile a restarted tracker would hold keys longer,
    /// the safe side).
    pub fn advance(&self, ticks: u64) {
        let mut st = self.lock();
        st.clock_ticks = st.clock_ticks.saturating_add(ticks);
        if st.store.is_some() || st.log.is_some() {
            let _best_effort = st.persist();
        }
    }

    /// Move the logical clock forward to `ticks` if it is behind (never
    /// back), without writing: the new clock reaches the file with the next
    /// record. A service on a wall clock calls this before each request, so
    /// keys expire in real time; a restart that reloads an older clock moves
    /// it forward again on its first request.
    pub fn advance_to(&self, ticks: u64) {
        let mut st = self.lock();
        st.clock_ticks = st.clock_ticks.max(ticks);
    }

    /// The logical clock now (see [`Tracker::advance`]).
    pub fn clock_ticks(&self) -> u64 {
        self.lock().clock_ticks
    }

    /// How long keys are kept, in clock ticks ([`Tracker::with_key_ttl`]);
    /// `None`: for ever.
    pub fn key_ttl_ticks(&self) -> Option<u64> {
        self.lock().key_ttl_ticks
    }

    /// Whether lookups by arguments answer [`LookupAnswer::CantTell`]
    /// ([`Tracker::with_uncertain_lookup`]).
    pub fn uncertain_lookup(&self) -> bool {
        self.lock().uncertain_lookup
    }

    /// The request and first answer a held key stands for (keyed mode only):
    /// what a lookup by key alone can say. `None` when the key was never
    /// taken *or* has expired, which is why `None` is not a certain "it did
    /// not happen".
    pub fn held_key(&self, key: &str) -> Option<(Request, Response)> {
        if self.mode != Mode::Keyed {
            return None;
        }
        self.lock()
            .held(key)
            .map(|e| (e.request.clone(), e.response.clone()))
    }

    /// The key a request is handled by: keyless mode ignores keys entirely.
    fn effective_key<'k>(&self, key: Option<&'k str>) -> Option<&'k str> {
        match self.mode {
            Mode::Keyed => key,
            Mode::Keyless => None,
        }
    }

    /// Perform a mutating request.
    ///
    /// In keyed mode with a held key, the same request passes [`ACCEPTED`] and
    /// returns the *first* response, changing nothing (a safe retry); a
    /// different request is refused with [`TrackerError::KeyReused`]. Any
    /// other request (keyless mode, no key, a new or expired key) is
    /// validated, recorded, its key remembered (keyed mode), written to disk
    /// (file-backed), and only then passes [`ACCEPTED`] — so a crash there
    /// leaves a record the caller never heard about — and then any injected
    /// [`Fault`] fires.
    pub fn apply(&self, req: &Request, key: Option<&str>) -> Result<Response, TrackerError> {
        let key = self.effective_key(key);
        let (response, dropped) = {
            let mut st = self.lock();
            let repeat = match key {
                Some(k) => match st.held(k) {
                    Some(first) if first.request == *req => Some(first.response.clone()),
                    Some(_) => return Err(TrackerError::KeyReused { key: k.to_owned() }),
                    None => None,
                },
                None => None,
            };
            match repeat {
                Some(first) => {
                    if st.not_durable {
                        // The first answer is on the file but not known
                        // durable: make it so before repeating it.
                        st.persist()?;
                        st.not_durable = false;
                    }
                    (first, false)
                }
                None => st.accept(req, key)?,
            }
        };
        // Outside the lock: a crash here must not poison the world.
        crashpoint::point!(ACCEPTED);
        if dropped {
            Err(TrackerError::Dropped)
        } else {
            Ok(response)
        }
    }

    /// File an issue; returns its number. See [`Tracker::apply`].
    pub fn file_issue(
        &self,
        title: &str,
        body: &str,
        key: Option<&str>,
    ) -> Result<u64, TrackerError> {
        let req = Request::FileIssue {
            title: title.to_owned(),
            body: body.to_owned(),
        };
        match self.apply(&req, key)? {
            Response::Issue { number } => Ok(number),
            other => Err(self.mismatch(&req, &other)),
        }
    }

    /// Comment on issue `issue`; returns the comment's id. See [`Tracker::apply`].
    pub fn comment(&self, issue: u64, body: &str, key: Option<&str>) -> Result<u64, TrackerError> {
        let req = Request::Comment {
            issue,
            body: body.to_owned(),
        };
        match self.apply(&req, key)? {
            Response::Comment { id, .. } => Ok(id),
            other => Err(self.mismatch(&req, &other)),
        }
    }

    /// A held key whose first answer does not fit its request. A file-backed
    /// tracker refuses such a key table when it loads; a log-backed one does
    /// not check the keys of its index, so an edited index reaches this. It
    /// is an error rather than a panic because the table comes from a file.
    fn mismatch(&self, req: &Request, response: &Response) -> TrackerError {
        TrackerError::Corrupt {
            path: self.lock().path(),
            reason: format!("key table answers {req:?} with {response:?}"),
        }
    }

    /// Issues whose title or body contains `query`, ignoring case, as
    /// `(number, title)` by number. Reads only, so it passes no point: a
    /// crash during a search changes nothing.
    pub fn search(&self, query: &str) -> Vec<(u64, String)> {
        let query = query.to_lowercase();
        self.lock()
            .issues
            .iter()
            .filter(|i| {
                i.title.to_lowercase().contains(&query) || i.body.to_lowercase().contains(&query)
            })
            .map(|i| (i.number, i.title.clone()))
            .collect()
    }

    /// "Did this request happen?" — the resolution ladder's second step.
    ///
    /// Keyed mode with a key held *for this request*: `Found` with the first
    /// answer. Otherwise (keyless, no key, expired key, or a key held for a
    /// different request) the request is matched by its arguments against
    /// the records; they are the source of truth, so no match is a certain
    /// `NotFound` — unless [`Tracker::with_uncertain_lookup`] made matching
    /// by arguments answer `CantTell`. A match by arguments finds the first
    /// such record, which may be an earlier, deliberate twin.
    pub fn lookup(&self, req: &Request, key: Option<&str>) -> LookupAnswer {
        let st = self.lock();
        if let Some(first) = self.effective_key(key).and_then(|k| st.held(k)) {
            if first.request == *req {
                return LookupAnswer::Found(first.response.clone());
            }
        }
        if st.uncertain_lookup {
            return LookupAnswer::CantTell;
        }
        match st.find(req) {
            Some(response) => LookupAnswer::Found(response),
            None => LookupAnswer::NotFound,
        }
    }

    /// Keyed mode and the tracker still holds `key`: a repeat with it is
    /// harmless (the ladder's first step).
    pub fn holds_key(&self, key: &str) -> bool {
        self.mode == Mode::Keyed && self.lock().held(key).is_some()
    }

    /// Every issue with its comments, by number: what a judge counts.
    pub fn issues(&self) -> Vec<Issue> {
        self.lock().issues.clone()
    }

    /// How many records match a request's arguments: issues with its title
    /// and body, or comments with its body on its issue. More than one means
    /// a duplicate (unless the script made twins on purpose).
    pub fn count(&self, req: &Request) -> usize {
        let st = self.lock();
        match req {
            Request::FileIssue { title, body } => st
                .issues
                .iter()
                .filter(|i| i.title == *title && i.body == *body)
                .count(),
            Request::Comment { issue, body } => match st.issue_index(*issue) {
                Some(index) => st.issues[index]
                    .comments
                    .iter()
                    .filter(|c| c.body == *body)
                    .count(),
                None => 0,
            },
        }
    }
}

#[cfg(test)]
mod tests;
