//! The tracker's state machine: everything behind its lock (the records,
//! the key table, the clock, the configuration and where it is kept), and
//! how a new request is recorded, made durable, or undone when that fails.
//!
//! Where the state is kept are its children: [`store`] (one file rewritten
//! atomically) and [`log`] (a log of entries and an index).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Comment, Fault, Fence, Issue, Request, Response, TrackerError};

pub(crate) mod log;
pub(crate) mod store;

/// A key the tracker remembers: the request it came with, the first answer,
/// and when (on the logical clock) it was taken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct KeyEntry {
    pub(crate) request: Request,
    pub(crate) response: Response,
    pub(crate) at_tick: u64,
}

/// What [`State::record`] did, so a failed persist can undo it.
enum Undo {
    Issue,
    Comment { index: usize },
}

/// Everything behind the tracker's lock.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) key_ttl_ticks: Option<u64>,
    pub(crate) faults: Vec<Fault>,
    pub(crate) uncertain_lookup: bool,
    pub(crate) clock_ticks: u64,
    /// Invariant: `issues[i].number == i + 1`.
    /// Shared with the copies [`Tracker::deep_clone`](crate::Tracker::deep_clone)
    /// made, and copied on the first change after one (a crash sweep copies
    /// its world at every point, and most points change no record).
    pub(crate) issues: Arc<Vec<Issue>>,
    /// Comments over all issues; the next comment id is this plus one.
    pub(crate) comments_total: u64,
    /// Ordered, so the file is the same byte for byte for the same history.
    /// Shared with copies, as `issues` is.
    pub(crate) keys: Arc<BTreeMap<String, KeyEntry>>,
    /// The highest fencing epoch of each run among the recorded requests
    /// that carried a [`Fence`].
    /// Shared with copies, as `issues` is.
    pub(crate) epochs: Arc<BTreeMap<String, u64>>,
    pub(crate) store: Option<store::Store>,
    /// The file holds records whose save failed after the file was replaced
    /// (a failed directory fsync): visible, not known durable. The next
    /// answer from memory saves again first.
    pub(crate) not_durable: bool,
    /// The log-backed mode's files ([`Tracker::open_log`]).
    pub(crate) log: Option<log::LogStore>,
}

impl State {
    /// The entry for `key` if the tracker still holds it.
    pub(crate) fn held(&self, key: &str) -> Option<&KeyEntry> {
        let entry = self.keys.get(key)?;
        let age_ticks = self.clock_ticks.saturating_sub(entry.at_tick);
        match self.key_ttl_ticks {
            Some(ttl_ticks) if age_ticks >= ttl_ticks => None,
            _ => Some(entry),
        }
    }

    /// Refuse a fence older than the run's highest recorded epoch.
    pub(crate) fn check_fence(&self, fence: Option<&Fence>) -> Result<(), TrackerError> {
        let Some(f) = fence else { return Ok(()) };
        match self.epochs.get(&f.run) {
            Some(&highest) if highest > f.epoch => Err(TrackerError::StaleEpoch {
                run: f.run.clone(),
                epoch: f.epoch,
                highest,
            }),
            _ => Ok(()),
        }
    }

    /// Raise the run's recorded epoch to the fence's; returns what to
    /// restore on undo (`None`: nothing changed).
    pub(crate) fn raise(&mut self, fence: Option<&Fence>) -> Option<(String, Option<u64>)> {
        let f = fence?;
        let before = self.epochs.get(&f.run).copied();
        if before.is_some_and(|h| h >= f.epoch) {
            return None;
        }
        Arc::make_mut(&mut self.epochs).insert(f.run.clone(), f.epoch);
        Some((f.run.clone(), before))
    }

    pub(crate) fn issue_index(&self, number: u64) -> Option<usize> {
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
                Arc::make_mut(&mut self.issues).push(Issue {
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
                Arc::make_mut(&mut self.issues)[index]
                    .comments
                    .push(Comment {
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
                Arc::make_mut(&mut self.issues).pop();
            }
            Undo::Comment { index } => {
                Arc::make_mut(&mut self.issues)[index].comments.pop();
                self.comments_total -= 1;
            }
        }
    }

    /// Record a new request, remember its key, persist; on a failed persist
    /// undo all of it. Returns the answer and whether a fault fires.
    pub(crate) fn accept(
        &mut self,
        req: &Request,
        key: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<(Response, bool), TrackerError> {
        let records_before = self.records();
        let (response, undo) = self.record(req)?;
        let raised = self.raise(fence);
        let replaced = key.map(|k| {
            let entry = KeyEntry {
                request: req.clone(),
                response: response.clone(),
                at_tick: self.clock_ticks,
            };
            (k, Arc::make_mut(&mut self.keys).insert(k.to_owned(), entry))
        });
        if let Err(e) = self.persist_new(req, &response, key, fence) {
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
            if let Some((run, before)) = raised {
                match before {
                    Some(epoch) => Arc::make_mut(&mut self.epochs).insert(run, epoch),
                    None => Arc::make_mut(&mut self.epochs).remove(&run),
                };
            }
            if let Some((k, previous)) = replaced {
                match previous {
                    Some(entry) => Arc::make_mut(&mut self.keys).insert(k.to_owned(), entry),
                    None => Arc::make_mut(&mut self.keys).remove(k),
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
    pub(crate) fn find(&self, req: &Request) -> Option<Response> {
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
        fence: Option<&Fence>,
    ) -> Result<(), TrackerError> {
        match &mut self.log {
            Some(log) => log.append(
                (req, response, key, fence),
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                (&self.keys, &self.epochs),
            ),
            None => self.persist(),
        }
    }

    /// Write the state down (file-backed and log-backed modes); in memory
    /// there is nothing to do.
    pub(crate) fn persist(&mut self) -> Result<(), TrackerError> {
        if let Some(log) = &mut self.log {
            return log.save_index(
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                (&self.keys, &self.epochs),
            );
        }
        match &mut self.store {
            Some(store) => store.save(
                self.clock_ticks,
                &self.issues,
                self.comments_total,
                (&self.keys, &self.epochs),
            ),
            None => Ok(()),
        }
    }

    /// Where the records live, for error messages.
    pub(crate) fn path(&self) -> PathBuf {
        if let Some(log) = &self.log {
            return log.path();
        }
        match &self.store {
            Some(store) => store.path(),
            None => PathBuf::from("<memory>"),
        }
    }
}
