//! Which tracker a run's tools talk to: the run's own file-backed tracker
//! in its world (`<run>.world/tracker.json`), or, with `--tracker URL`, the
//! tracker service (`cargo run -p tracker -- serve`), with each call's key
//! in the `Idempotency-Key` header.
//!
//! A run on the service files the task's seed issues there when it starts
//! (keyed by `key(run, "seed-N")`, so a run that stops part-way and resumes
//! files them once), then records that in `<run>.world/tracker-seeded`. Its
//! checks count the service's records: give each run a fresh service.

use std::sync::Arc;

use durable::{Dir, RunId};
use tracker::client::HttpTracker;
use tracker::{Issue, Mode, Tracker};
use triage_tools::Backend;

use crate::exit::Failure;
use crate::world::World;

/// The marker, in the run's world, that the seeds are on the service.
const SEEDED: &str = "tracker-seeded";

/// The tracker of one run.
#[derive(Debug)]
pub enum RunTracker {
    /// The run's own file-backed tracker.
    Local(Tracker),
    /// The tracker service at a URL.
    Http(Arc<HttpTracker>),
}

/// `--tracker URL` must be an `http://` URL: checked before anything is
/// created.
pub fn check_url(url: &str) -> Result<(), Failure> {
    if url.starts_with("http://") && url.len() > "http://".len() {
        return Ok(());
    }
    Err(Failure::usage(
        "bad_tracker",
        format!("--tracker {url:?}: expected http://HOST:PORT"),
    )
    .hint("start a tracker with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0"))
}

fn unreachable(url: &str, e: impl std::fmt::Display) -> Failure {
    Failure::run("tracker", format!("the tracker at {url}: {e}")).hint(
        "start one with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0 \
         (it prints the URL on its first line)",
    )
}

impl RunTracker {
    /// The run's tracker: the service at `url` if given (seeded once for
    /// this run), else the world's file.
    pub fn open(url: Option<&str>, world: &World, run: &RunId) -> Result<RunTracker, Failure> {
        let Some(url) = url else {
            // A world's tracker must be there: a missing tracker.json is
            // refused, never replaced by an empty one. Only a task that
            // seeds no issues starts without the file. (Its directory fails
            // where the test hook `TRIAGE_TRACKER_FAULTS` says.)
            let dir = crate::faults::tracker_dir(world.dir()?)?;
            let tracker = if world.task.tracker.is_empty() && !world.has_tracker_file()? {
                Tracker::open_dir(dir, Mode::Keyed)?
            } else {
                Tracker::open_existing(dir, Mode::Keyed)?
            };
            return Ok(RunTracker::Local(tracker));
        };
        let http = HttpTracker::connect(url).map_err(|e| unreachable(url, e))?;
        let dir = world.dir()?;
        let seeded = dir
            .read(SEEDED)
            .map_err(|e| Failure::run("io", format!("{}: {e}", dir.path_of(SEEDED).display())))?
            .is_some();
        if !seeded {
            for (i, seed) in world.task.tracker.iter().enumerate() {
                let key = match http.mode() {
                    Mode::Keyed => Some(durable::key(run.as_str(), &format!("seed-{i}"))),
                    Mode::Keyless => None,
                };
                http.file_issue(&seed.title, &seed.body, key.as_deref())
                    .map_err(|e| {
                        unreachable(url, format!("cannot file the task's seed issue: {e}"))
                    })?;
            }
            let opts = durable::WriteOptions {
                sync: true,
                points: false,
            };
            durable::write_atomic(dir.as_ref(), SEEDED, url.as_bytes(), opts).map_err(|e| {
                Failure::run("io", format!("{}: {e}", dir.path_of(SEEDED).display()))
            })?;
        }
        Ok(RunTracker::Http(Arc::new(http)))
    }

    /// What the tools talk to.
    pub fn backend(&self) -> Backend {
        match self {
            RunTracker::Local(t) => Backend::Local(t.clone()),
            RunTracker::Http(t) => Backend::Http(Arc::clone(t)),
        }
    }

    /// Every issue, for the checks.
    pub fn issues(&self) -> Result<Vec<Issue>, Failure> {
        match self {
            RunTracker::Local(t) => Ok(t.issues()),
            RunTracker::Http(t) => t.issues().map_err(|e| unreachable(t.url(), e)),
        }
    }

    /// A line saying where the records are.
    pub fn describe(&self) -> Option<String> {
        match self {
            RunTracker::Local(_) => None,
            RunTracker::Http(t) => {
                let c = t.config();
                let keys = match (t.mode(), c.key_ttl_secs) {
                    (Mode::Keyless, _) => "keyless: keys ignored".to_owned(),
                    (Mode::Keyed, Some(s)) => format!("keyed, keys kept {s} s"),
                    (Mode::Keyed, None) => "keyed, keys kept for ever".to_owned(),
                };
                Some(format!("tracker    {} ({keys})", t.url()))
            }
        }
    }
}
