//! The log-backed mode: a tracker that can crash in the middle of a write
//! and restart from its own durable records.
//!
//! Every new record is first appended to a log (one synced file per entry,
//! `tracker-log-<seq>.json`, each holding the request, its answer and its
//! key), then the index (`tracker-index.json`: the issues, the key table,
//! the clock, and the last entry it covers) is rewritten. Three points mark
//! the steps, so a sweep can crash the tracker between them:
//!
//! * [`RECEIVED`](crate::RECEIVED): recorded in memory, nothing durable — a
//!   crash loses the request, and the caller must send it again;
//! * [`LOG_APPENDED`](crate::LOG_APPENDED): the entry is durable, the index
//!   is not — a restart replays the entry, key included;
//! * [`INDEX_UPDATED`](crate::INDEX_UPDATED): both durable, no answer sent.
//!
//! The key table is rebuilt from the log entries themselves, so a key can
//! never be lost while the record it protects survives. [`LogLayout`] can
//! put the keys in the index only, the wrong way round, for a sweep to catch.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{KeyEntry, State};
use crate::{Fence, Issue, Request, Response, TrackerError};

/// The index file's name.
pub(crate) const INDEX: &str = "tracker-index.json";
/// Log entries are `tracker-log-<seq, 12 digits>.json`, from 1.
const ENTRY_PREFIX: &str = "tracker-log-";
const VERSION: u32 = 1;

/// Where a log-backed tracker keeps the keys of its records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogLayout {
    /// Each log entry carries its key, and a restart rebuilds the key table
    /// from the log: the key lives exactly as long as its record.
    #[default]
    KeysInLog,
    /// A deliberately wrong layout for mutation tests: keys live only in
    /// the index, so a crash after the log append and before the index
    /// update keeps the record and loses its key.
    KeysInIndexOnly,
}

fn entry_name(seq: u64) -> String {
    format!("{ENTRY_PREFIX}{seq:012}.json")
}

fn entry_seq(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(ENTRY_PREFIX)?.strip_suffix(".json")?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One log entry: a record as it was made.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    seq: u64,
    tick: u64,
    request: Request,
    response: Response,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fence: Option<Fence>,
}

#[derive(Serialize)]
struct IndexOut<'a> {
    version: u32,
    applied: u64,
    clock_ticks: u64,
    comments_total: u64,
    issues: &'a [Issue],
    keys: &'a BTreeMap<String, KeyEntry>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    epochs: &'a BTreeMap<String, u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexIn {
    version: u32,
    applied: u64,
    clock_ticks: u64,
    comments_total: u64,
    issues: Vec<Issue>,
    keys: BTreeMap<String, KeyEntry>,
    #[serde(default)]
    epochs: BTreeMap<String, u64>,
}

/// A log-backed tracker's files.
pub(crate) struct LogStore {
    dir: Arc<dyn durable::Dir>,
    layout: LogLayout,
    /// The sequence number the next entry gets.
    next_seq: u64,
}

/// The invariants the tracker's counting relies on (issue numbers, the
/// comment total, room for the next entry), checked on a loaded index: the
/// numbers come from a file, and a tracker that went on from a wrong count
/// would hand out clashing numbers or overflow.
fn check_index(index: &IndexIn) -> Result<(), String> {
    for (position, issue) in (1u64..).zip(&index.issues) {
        if issue.number != position {
            return Err(format!(
                "issue #{} stands at position {position} (numbers run 1, 2, 3, …)",
                issue.number
            ));
        }
    }
    let comments: u64 = index.issues.iter().map(|i| i.comments.len() as u64).sum();
    if index.comments_total != comments {
        return Err(format!(
            "comments_total is {} but the issues hold {comments} comments",
            index.comments_total
        ));
    }
    if index.applied == u64::MAX {
        return Err("applied is u64::MAX: no entry can follow it".into());
    }
    Ok(())
}

const SYNCED: durable::write::WriteOptions = durable::write::WriteOptions {
    sync: true,
    points: false,
};

impl LogStore {
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path_of(INDEX)
    }

    fn io(&self, source: io::Error) -> TrackerError {
        TrackerError::Io {
            path: self.path(),
            source,
        }
    }

    fn corrupt(&self, name: &str, reason: impl Into<String>) -> TrackerError {
        TrackerError::Corrupt {
            path: self.dir.path_of(name),
            reason: reason.into(),
        }
    }

    /// Load the index, then replay every log entry after it.
    pub(crate) fn open(
        dir: Arc<dyn durable::Dir>,
        layout: LogLayout,
    ) -> Result<State, TrackerError> {
        let mut store = LogStore {
            dir,
            layout,
            next_seq: 1,
        };
        let names = store.dir.list().map_err(|e| store.io(e))?;
        for name in &names {
            // A killed write_atomic leaves `.tracker-…tmp`; it was never
            // published, so nobody heard of what it holds.
            if name.starts_with(".tracker-") && name.ends_with(".tmp") {
                store.dir.remove(name).map_err(|e| store.io(e))?;
            }
        }
        let mut st = State::default();
        let applied = store.read_index(&mut st)?;
        let mut seqs: Vec<u64> = names.iter().filter_map(|n| entry_seq(n)).collect();
        seqs.sort_unstable();
        let mut expected = applied + 1;
        for seq in seqs.into_iter().filter(|s| *s > applied) {
            let name = entry_name(seq);
            if seq != expected {
                return Err(store.corrupt(&name, format!("expected entry {expected} first")));
            }
            store.replay_entry(&mut st, seq, &name)?;
            expected += 1;
        }
        store.next_seq = expected;
        st.log = Some(store);
        Ok(st)
    }

    /// Loads the index, if there is one, into `st`: how many entries it
    /// has applied (0 without an index).
    fn read_index(&self, st: &mut State) -> Result<u64, TrackerError> {
        let Some(bytes) = self.dir.read(INDEX).map_err(|e| self.io(e))? else {
            return Ok(0);
        };
        let index: IndexIn =
            serde_json::from_slice(&bytes).map_err(|e| self.corrupt(INDEX, e.to_string()))?;
        if index.version != VERSION {
            return Err(self.corrupt(
                INDEX,
                format!(
                    "format version {}, this build reads {VERSION}",
                    index.version
                ),
            ));
        }
        check_index(&index).map_err(|reason| self.corrupt(INDEX, reason))?;
        st.clock_ticks = index.clock_ticks;
        st.comments_total = index.comments_total;
        st.issues = index.issues.into();
        st.keys = index.keys.into();
        st.epochs = index.epochs.into();
        Ok(index.applied)
    }

    /// Reads entry `seq` (the file `name`) and applies it to `st`,
    /// checking it replays as it answered.
    fn replay_entry(&self, st: &mut State, seq: u64, name: &str) -> Result<(), TrackerError> {
        let bytes = self
            .dir
            .read(name)
            .map_err(|e| self.io(e))?
            .ok_or_else(|| self.corrupt(name, "listed but missing"))?;
        let entry: Entry =
            serde_json::from_slice(&bytes).map_err(|e| self.corrupt(name, e.to_string()))?;
        if entry.seq != seq {
            return Err(self.corrupt(name, format!("holds entry {}", entry.seq)));
        }
        // Replay, and check that it answers as it did (assert on read
        // what was true on write).
        let (response, _) = st
            .record(&entry.request)
            .map_err(|e| self.corrupt(name, format!("does not replay: {e}")))?;
        if response != entry.response {
            return Err(self.corrupt(
                name,
                format!("replays as {response:?}, was {:?}", entry.response),
            ));
        }
        st.raise(entry.fence.as_ref());
        if let Some(k) = entry.key {
            Arc::make_mut(&mut st.keys).insert(
                k,
                KeyEntry {
                    request: entry.request,
                    response: entry.response,
                    at_tick: entry.tick,
                },
            );
        }
        st.clock_ticks = st.clock_ticks.max(entry.tick);
        Ok(())
    }

    /// Make one new record durable: log entry, then index, with a point
    /// before, between and after.
    pub(crate) fn append(
        &mut self,
        new: (&Request, &Response, Option<&str>, Option<&Fence>),
        clock_ticks: u64,
        issues: &[Issue],
        comments_total: u64,
        tables: (&BTreeMap<String, KeyEntry>, &BTreeMap<String, u64>),
    ) -> Result<(), TrackerError> {
        let (request, response, key, fence) = new;
        crashpoint::point!(crate::RECEIVED);
        let entry = Entry {
            seq: self.next_seq,
            tick: clock_ticks,
            request: request.clone(),
            response: response.clone(),
            key: match self.layout {
                LogLayout::KeysInLog => key.map(str::to_owned),
                LogLayout::KeysInIndexOnly => None,
            },
            fence: fence.cloned(),
        };
        let bytes = serde_json::to_vec_pretty(&entry).map_err(|e| self.io(e.into()))?;
        durable::write::write_atomic(
            self.dir.as_ref(),
            &entry_name(self.next_seq),
            &bytes,
            SYNCED,
        )
        .map_err(|e| self.io(e))?;
        self.next_seq += 1;
        crashpoint::point!(crate::LOG_APPENDED);
        // The entry is the commit: from here the record exists whatever
        // happens, so a failed index write must not undo it (the next open
        // replays the entry, and the next write covers it).
        let _repaired_by_replay = self.save_index(clock_ticks, issues, comments_total, tables);
        crashpoint::point!(crate::INDEX_UPDATED);
        Ok(())
    }

    /// Rewrite the index as of the last entry.
    pub(crate) fn save_index(
        &mut self,
        clock_ticks: u64,
        issues: &[Issue],
        comments_total: u64,
        (keys, epochs): (&BTreeMap<String, KeyEntry>, &BTreeMap<String, u64>),
    ) -> Result<(), TrackerError> {
        let index = IndexOut {
            version: VERSION,
            applied: self.next_seq - 1,
            clock_ticks,
            comments_total,
            issues,
            keys,
            epochs,
        };
        let bytes = serde_json::to_vec_pretty(&index).map_err(|e| self.io(e.into()))?;
        durable::write::write_atomic(self.dir.as_ref(), INDEX, &bytes, SYNCED)
            .map_err(|e| self.io(e))
    }
}
