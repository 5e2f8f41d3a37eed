//! The tracker's records and the requests that make them: a [`Request`],
//! the [`Response`] it gets, the [`Issue`] and [`Comment`] records, and the
//! [`LookupAnswer`] to "did this request happen?".

use serde::{Deserialize, Serialize};

/// Which holder of a run sent a request: the run and its fencing epoch,
/// which rises every time a process takes the run over (the checkpoint
/// records it). The tracker remembers the highest epoch of each run among
/// the requests it recorded and refuses a lower one
/// ([`TrackerError::StaleEpoch`](crate::TrackerError::StaleEpoch)): a
/// process that lost its run (paused past its lease while another finished
/// it) cannot act through this tracker, keys or no keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fence {
    /// The run.
    pub run: String,
    /// The sender's epoch.
    pub epoch: u64,
}

/// A request that changes the tracker. Its arguments are what a keyed repeat
/// is compared by, and what [`Tracker::lookup`] and [`Tracker::count`] match.
///
/// [`Tracker::lookup`]: crate::Tracker::lookup
/// [`Tracker::count`]: crate::Tracker::count
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
