//! The [`Tracker`] handle: opening a tracker (in memory, in one file, in a
//! log), configuring it, and the requests a caller makes of it; clones
//! share one [`State`].

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::state::{log, store, State};
use crate::{
    Fault, Fence, Issue, LogLayout, LookupAnswer, Mode, Request, Response, TrackerError, ACCEPTED,
};

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
    /// The file is rewritten with [`durable::write::write_atomic`] (synced, no
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
    ///
    /// [`RECEIVED`]: crate::RECEIVED
    /// [`LOG_APPENDED`]: crate::LOG_APPENDED
    /// [`INDEX_UPDATED`]: crate::INDEX_UPDATED
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
    /// records, keys, clock and configuration, and no change made on either
    /// side is ever seen on the other; `None` for a tracker kept in files
    /// ([`Tracker::open_dir`], [`Tracker::open_log`]), whose files a copy
    /// would share. The records are shared copy on write, so a copy costs a
    /// few reference counts and the first change after it copies the one
    /// collection it changes (a crash sweep copies its world at every
    /// point, and most points change no record).
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
            epochs: st.epochs.clone(),
            store: None,
            log: None,
            not_durable: st.not_durable,
        };
        Some(Tracker::from_state(self.mode, copy))
    }

    /// Feed everything the tracker would answer from to `h`: its mode,
    /// configuration, clock, records and keys.
    /// (Hashed field by field with their `Hash`: a crash sweep asks after
    /// every change, and records are long.)
    pub fn hash_contents(&self, mut h: &mut dyn std::hash::Hasher) {
        use std::hash::Hash as _;
        let st = self.lock();
        (
            self.mode,
            st.key_ttl_ticks,
            &st.faults,
            st.uncertain_lookup,
            st.clock_ticks,
            st.comments_total,
        )
            .hash(&mut h);
        st.issues.hash(&mut h);
        st.keys.hash(&mut h);
        (st.store.is_some(), st.log.is_some()).hash(&mut h);
        st.epochs.hash(&mut h);
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
        self.apply_fenced(req, key, None)
    }

    /// [`Tracker::apply`] for a sender that says which holder of its run it
    /// is: a `fence` older than the run's highest recorded epoch is refused
    /// with [`TrackerError::StaleEpoch`] before anything else (a keyed
    /// repeat too), and a recorded request raises the run's epoch to its
    /// own, durably with the record.
    pub fn apply_fenced(
        &self,
        req: &Request,
        key: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<Response, TrackerError> {
        let key = self.effective_key(key);
        let (response, dropped) = {
            let mut st = self.lock();
            st.check_fence(fence)?;
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
                None => st.accept(req, key, fence)?,
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
        self.lock().issues.to_vec()
    }

    /// [`Tracker::issues`] without copying them: the records as they are
    /// now, shared (a later change copies them first, so this view stays as
    /// it was).
    pub fn issues_shared(&self) -> Arc<Vec<Issue>> {
        Arc::clone(&self.lock().issues)
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
