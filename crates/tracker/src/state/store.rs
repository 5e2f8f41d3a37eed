//! The file-backed mode: the tracker's whole state in one `tracker.json`,
//! rewritten atomically after every change.
//!
//! The file is the service's database. It is written before the tracker
//! passes [`ACCEPTED`](crate::ACCEPTED) or answers, so whatever the caller
//! heard about is on disk, and it is checked in full when loaded (assert on
//! read what was asserted on write), because a tracker that silently started
//! empty over a bad file would hide every duplicate a sweep exists to count.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{KeyEntry, State};
use crate::{Issue, Request, Response, TrackerError};

/// The file's name inside the tracker's directory.
pub(crate) const FILE: &str = "tracker.json";

/// The format this build writes and reads.
const VERSION: u32 = 1;

/// The file as written: borrowed from the state, so a save copies nothing
/// but the bytes.
#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    generation: u64,
    clock_ticks: u64,
    next_issue: u64,
    next_comment: u64,
    issues: &'a [Issue],
    keys: &'a BTreeMap<String, KeyEntry>,
    /// Absent until a fenced request is recorded: older files read as they
    /// were, and a tracker nobody fences writes the same bytes as before.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    epochs: &'a BTreeMap<String, u64>,
}

/// The file as read; unknown fields are an error, not silently dropped on
/// the next save.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIn {
    version: u32,
    generation: u64,
    clock_ticks: u64,
    next_issue: u64,
    next_comment: u64,
    issues: Vec<Issue>,
    keys: BTreeMap<String, KeyEntry>,
    #[serde(default)]
    epochs: BTreeMap<String, u64>,
}

/// Just the generation, to check nobody else wrote the file since we did.
#[derive(Deserialize)]
struct GenerationOnly {
    generation: u64,
}

/// Where a file-backed tracker keeps its state.
pub(crate) struct Store {
    dir: Arc<dyn durable::Dir>,
    /// The generation this tracker last loaded or wrote; 0 for no file yet.
    generation: u64,
    /// The last save failed after its file replaced the old one (the
    /// directory fsync failed): the records it holds are on the disk,
    /// though not known durable, so the caller must not undo them.
    published_on_failure: bool,
}

impl Store {
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path_of(FILE)
    }

    fn io(&self, source: io::Error) -> TrackerError {
        TrackerError::Io {
            path: self.path(),
            source,
        }
    }

    fn corrupt(&self, reason: impl Into<String>) -> TrackerError {
        TrackerError::Corrupt {
            path: self.path(),
            reason: reason.into(),
        }
    }

    /// Load the state from `dir`: an empty state if there is no file yet,
    /// unless `existing`, which refuses a missing file with
    /// [`TrackerError::Missing`].
    pub(crate) fn open(dir: Arc<dyn durable::Dir>, existing: bool) -> Result<State, TrackerError> {
        let mut store = Store {
            dir,
            generation: 0,
            published_on_failure: false,
        };
        store.remove_leftover_temps()?;
        let read = store
            .dir
            .read_limited(FILE, durable::checkpoint::DEFAULT_MAX_READ_BYTES);
        let Some(bytes) = read.map_err(|e| store.io(e))? else {
            if existing {
                return Err(TrackerError::Missing { path: store.path() });
            }
            return Ok(State {
                store: Some(store),
                ..State::default()
            });
        };
        let file: FileIn =
            serde_json::from_slice(&bytes).map_err(|e| store.corrupt(e.to_string()))?;
        check(&file).map_err(|reason| store.corrupt(reason))?;
        store.generation = file.generation;
        Ok(State {
            clock_ticks: file.clock_ticks,
            comments_total: file.next_comment - 1,
            issues: file.issues.into(),
            keys: file.keys.into(),
            epochs: file.epochs.into(),
            store: Some(store),
            ..State::default()
        })
    }

    /// A process killed inside [`durable::write::write_atomic`] leaves its temp file
    /// behind; it never became `tracker.json`, so it holds nothing anyone
    /// heard about.
    fn remove_leftover_temps(&self) -> Result<(), TrackerError> {
        durable::write::remove_leftover_temps(self.dir.as_ref(), FILE).map_err(|e| self.io(e))?;
        Ok(())
    }

    /// Refuse to write over a file another tracker wrote since this one
    /// loaded it: the other's records would vanish without a word.
    fn check_unchanged(&self) -> Result<(), TrackerError> {
        let on_disk = match self.dir.read(FILE).map_err(|e| self.io(e))? {
            None => 0,
            Some(bytes) => {
                serde_json::from_slice::<GenerationOnly>(&bytes)
                    .map_err(|e| self.corrupt(e.to_string()))?
                    .generation
            }
        };
        if on_disk == self.generation {
            return Ok(());
        }
        Err(self.io(io::Error::other(format!(
            "changed by another tracker since this one read it (generation {on_disk} on disk, \
             {} here); open it again",
            self.generation
        ))))
    }

    /// Write the whole state atomically and durably.
    pub(crate) fn save(
        &mut self,
        clock_ticks: u64,
        issues: &[Issue],
        comments_total: u64,
        (keys, epochs): (&BTreeMap<String, KeyEntry>, &BTreeMap<String, u64>),
    ) -> Result<(), TrackerError> {
        self.check_unchanged()?;
        let file = FileOut {
            version: VERSION,
            generation: self.generation + 1,
            clock_ticks,
            next_issue: issues.len() as u64 + 1,
            next_comment: comments_total + 1,
            issues,
            keys,
            epochs,
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| self.io(e.into()))?;
        let opts = durable::write::WriteOptions {
            sync: true,
            points: false,
        };
        self.published_on_failure = false;
        if let Err(source) = durable::write::write_atomic(self.dir.as_ref(), FILE, &bytes, opts) {
            // What reached the file is not known from the error alone: a
            // failed directory fsync comes after the rename. Read it back
            // (best effort) so the next save neither refuses a file this
            // tracker wrote nor forgets records that a reader will see.
            let on_disk = self
                .dir
                .read(FILE)
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice::<GenerationOnly>(&b).ok())
                .map(|g| g.generation);
            if on_disk == Some(self.generation + 1) {
                self.generation += 1;
                self.published_on_failure = true;
            }
            return Err(TrackerError::Unknown {
                path: self.path(),
                source,
            });
        }
        self.generation += 1;
        Ok(())
    }

    /// Whether the last failed save had already replaced the file: its
    /// records are visible to every reader and must be kept.
    pub(crate) fn published_on_failure(&self) -> bool {
        self.published_on_failure
    }
}

/// Every invariant the tracker keeps in memory, checked on a loaded file.
fn check(file: &FileIn) -> Result<(), String> {
    if file.version != VERSION {
        return Err(format!(
            "format version {}, this build reads version {VERSION}",
            file.version
        ));
    }
    if file.generation == 0 {
        return Err("generation 0: a written file starts at 1".into());
    }
    if file.generation == u64::MAX {
        return Err("generation u64::MAX leaves no number for the next save".into());
    }
    for (index, issue) in file.issues.iter().enumerate() {
        if issue.number != index as u64 + 1 {
            return Err(format!(
                "issue #{} stands at position {} (numbers run 1, 2, 3, …)",
                issue.number,
                index + 1
            ));
        }
    }
    if file.next_issue != file.issues.len() as u64 + 1 {
        return Err(format!(
            "next_issue is {} but there are {} issues",
            file.next_issue,
            file.issues.len()
        ));
    }
    let comments = check_comments(file)?;
    for (key, entry) in &file.keys {
        check_key(file, &comments, key, entry)?;
    }
    Ok(())
}

/// Comment ids are 1..next_comment, each once, rising within an issue.
/// Returns which issue each id is on.
fn check_comments(file: &FileIn) -> Result<BTreeMap<u64, (u64, &str)>, String> {
    let mut seen = BTreeMap::new();
    for issue in &file.issues {
        let mut last = 0;
        for c in &issue.comments {
            if c.id <= last {
                return Err(format!(
                    "comment ids on issue #{} do not rise at id {}",
                    issue.number, c.id
                ));
            }
            last = c.id;
            if c.id >= file.next_comment {
                return Err(format!(
                    "comment id {} is not below next_comment {}",
                    c.id, file.next_comment
                ));
            }
            if seen.insert(c.id, (issue.number, c.body.as_str())).is_some() {
                return Err(format!("comment id {} appears twice", c.id));
            }
        }
    }
    if seen.len() as u64 != file.next_comment.saturating_sub(1) || file.next_comment == 0 {
        return Err(format!(
            "next_comment is {} but there are {} comments",
            file.next_comment,
            seen.len()
        ));
    }
    Ok(seen)
}

/// A key's first answer must be a record made by that key's request.
fn check_key(
    file: &FileIn,
    comments: &BTreeMap<u64, (u64, &str)>,
    key: &str,
    entry: &KeyEntry,
) -> Result<(), String> {
    let bad = |why: &str| Err(format!("key {key:?}: {why}"));
    if entry.at_tick > file.clock_ticks {
        return bad("taken after the clock's present");
    }
    match (&entry.request, &entry.response) {
        (Request::FileIssue { title, body }, Response::Issue { number }) => {
            let index = number.checked_sub(1).and_then(|i| usize::try_from(i).ok());
            match index.and_then(|i| file.issues.get(i)) {
                Some(issue) if issue.title == *title && issue.body == *body => Ok(()),
                Some(_) => bad("its issue has other arguments"),
                None => bad("answers with an issue that does not exist"),
            }
        }
        (Request::Comment { issue, body }, Response::Comment { issue: on, id }) => {
            match comments.get(id) {
                Some((actual, text)) if actual == issue && on == issue && *text == body => Ok(()),
                Some(_) => bad("its comment has other arguments"),
                None => bad("answers with a comment that does not exist"),
            }
        }
        _ => bad("the answer is of another kind than the request"),
    }
}
