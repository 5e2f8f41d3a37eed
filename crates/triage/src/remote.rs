//! Which tracker a run's tools talk to: the run's own file-backed tracker
//! in its world (`<run>.world/tracker.json`), or, with `--tracker URL`, the
//! tracker service (`cargo run -p tracker -- serve`), with each call's key
//! in the `Idempotency-Key` header.
//!
//! A run on the service files the task's seed issues there when it starts,
//! then records that in `<run>.world/tracker-seeded`. A run killed between
//! the two seeds again when it goes on (it is adopted under its own ID even
//! if it was killed before its first save), and files each seed once: on a
//! keyed service under the same key, `key(run, "seed-N")`, which the service
//! answers with its first answer; on a keyless one, only the seeds the
//! service does not hold yet (an issue with the same title and body counts
//! as filed). Its checks count the service's records: give each run a fresh
//! service.

use std::sync::Arc;
use std::time::Duration;

use durable::{Dir, RunId};
use tracker::client::{ClientError, HttpTracker, Retry};
use tracker::{Fence, Issue, Mode, Request, Tracker};
use triage_tools::Backend;

use crate::exit::Failure;
use crate::world::World;

/// The marker, in the run's world, that the seeds are on the service.
const SEEDED: &str = "tracker-seeded";

/// What seeding the service did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeded {
    /// Seeds sent to the service (keyed: possibly answered by a key it
    /// already held).
    pub filed: usize,
    /// Seeds a keyless service already held, not sent again.
    pub found: usize,
    /// Whether the service is keyed.
    pub keyed: bool,
}

impl Seeded {
    /// A line for the output.
    pub fn describe(&self) -> String {
        let how = if self.keyed {
            "keyed by key(run, \"seed-N\"), so a seed the service already holds is not filed twice"
        } else {
            "keyless: a seed already on the service (same title and body) is not filed again"
        };
        format!(
            "the task's seed issues on the tracker service: {} filed, {} already there ({how})",
            self.filed, self.found
        )
    }
}

/// The tracker of one run.
#[derive(Clone, Debug)]
pub enum RunTracker {
    /// The run's own file-backed tracker.
    Local(Tracker),
    /// The tracker service at a URL.
    Http(Arc<HttpTracker>),
}

/// The variable that shortens how long a tracker service that refuses
/// connections is tried before it counts as gone: milliseconds, for the
/// run's calls and for the check before a run is made alike. Unset: a run
/// tries for [`RUN_UNREACHABLE`] (a restarting service comes back) and the
/// check for [`CHECK_UNREACHABLE`]. For tests of a service that is gone,
/// so they do not wait those out; anything but a whole number of
/// milliseconds up to [`MAX_UNREACHABLE_MS`] is refused (exit 2).
pub const UNREACHABLE_ENV: &str = "TRIAGE_TRACKER_UNREACHABLE_MS";

/// The longest [`UNREACHABLE_ENV`] may ask for: ten minutes. A larger
/// value (`18446744073709551615`) would wait for ever.
pub const MAX_UNREACHABLE_MS: u64 = 600_000;

/// How long a run tries a service that refuses connections.
pub const RUN_UNREACHABLE: Duration = Duration::from_secs(5);

/// How long the check before a run is made tries a service that refuses
/// connections.
pub const CHECK_UNREACHABLE: Duration = Duration::from_secs(2);

/// The client's retries, trying a service that refuses connections for
/// `default` unless [`UNREACHABLE_ENV`] says otherwise.
fn retry(default: Duration) -> Result<Retry, Failure> {
    let unreachable = env_ms(UNREACHABLE_ENV, default, MAX_UNREACHABLE_MS)?;
    Ok(Retry {
        unreachable,
        ..Retry::default()
    })
}

/// The duration the variable `name` gives in milliseconds, or `default`
/// when it is unset; anything but a whole number up to `max` is refused.
pub(crate) fn env_ms(name: &str, default: Duration, max: u64) -> Result<Duration, Failure> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(ms) => (ms.trim().parse::<u64>().ok())
            .filter(|n| *n <= max)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                Failure::usage(
                    "usage",
                    format!(
                        "{name}={ms:?}: expected a whole number of milliseconds, at most {max}"
                    ),
                )
                .hint(format!(
                    "unset it to wait the default ({} s)",
                    default.as_secs()
                ))
            }),
        Err(e) => Err(Failure::usage("usage", format!("{name}: {e}"))),
    }
}

/// [`UNREACHABLE_ENV`], if set, is a whole number of milliseconds: checked
/// before anything is created.
pub fn check_env() -> Result<(), Failure> {
    retry(CHECK_UNREACHABLE).map(|_| ())
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

/// `--tracker URL` for a run about to be made on a database store: a
/// well-formed URL whose service answers (`GET /config`), checked before
/// anything is created, so a run is never made to send its effects where
/// nothing listens (its URL is recorded for good when it is made).
pub fn check_answers(url: &str) -> Result<(), Failure> {
    check_url(url)?;
    let retry = retry(CHECK_UNREACHABLE)?;
    // A service that accepts and never answers is bounded too: connecting
    // and reading take at most as long as connections are tried.
    let retry = Retry {
        timeout: retry.unreachable.max(Duration::from_millis(100)),
        ..retry
    };
    HttpTracker::connect_with(url, retry).map_err(|e| {
        // The error names the service; the message names it once.
        let why = match &e {
            ClientError::Unreachable { reason, .. } => format!("it refuses connections: {reason}"),
            ClientError::Unknown { reason, .. } => reason.clone(),
            e => e.to_string(),
        };
        Failure::run(
            "tracker",
            format!("the tracker at {url} does not answer ({why}); nothing was created"),
        )
        .hint(
            "start one with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0 \
             (it prints the URL on its first line), and pass that URL",
        )
    })?;
    Ok(())
}

fn unreachable(url: &str, e: impl std::fmt::Display) -> Failure {
    // The client's own "unreachable" already names the service.
    let e = e.to_string();
    let message = if e.starts_with(&format!("the tracker at {url}")) {
        e
    } else {
        format!("the tracker at {url}: {e}")
    };
    Failure::run("tracker", message).hint(
        "start one with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0 \
         (it prints the URL on its first line)",
    )
}

/// Whether a keyless service already holds seed `i` of `seeds` (an issue
/// with its title and body, beyond those earlier equal seeds account for).
fn already_there(held: &[Issue], seeds: &[crate::task::SeedIssue], i: usize) -> bool {
    let seed = &seeds[i];
    let same = |title: &str, body: &str| title == seed.title && body == seed.body;
    let there = held.iter().filter(|h| same(&h.title, &h.body)).count();
    let before = seeds[..i]
        .iter()
        .filter(|s| same(&s.title, &s.body))
        .count();
    there > before
}

impl RunTracker {
    /// The run's tracker: the service at `url` if given, else the world's
    /// file. Connecting reads the service's `GET /config` and changes
    /// nothing: the seeds are filed by [`RunTracker::seed`], once the run
    /// is held.
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
        let http = HttpTracker::connect_with(url, retry(RUN_UNREACHABLE)?).map_err(|e| {
            // The run is bound to this URL: a service started on another
            // port would be refused, so the hint names this address.
            let addr = url
                .trim_end_matches('/')
                .trim_start_matches("http://")
                .trim_start_matches("https://");
            unreachable(url, e).hint(format!(
                "start the service again at this address, with the directory it kept its records \
                 in: cargo run -p tracker -- serve --dir DIR --addr {addr}; the run sends its \
                 effects to this URL only: if that service is gone for good, the run cannot go \
                 on (its world is {}; give the run up by removing it, and on a database store \
                 its row: DELETE FROM runs WHERE run_id = '{run}')",
                world.path.display()
            ))
        })?;
        Ok(RunTracker::Http(Arc::new(http)))
    }

    /// File the task's seed issues on the service, once per run: only by
    /// the process that holds the run (its lock, or its lease, whose epoch
    /// goes with each seed as `fence`). What seeding did, if it seeded now;
    /// `None` for the world's own tracker or a run seeded before.
    pub fn seed(
        &self,
        world: &World,
        run: &RunId,
        fence: Option<&Fence>,
    ) -> Result<Option<Seeded>, Failure> {
        let RunTracker::Http(http) = self else {
            return Ok(None);
        };
        let url = http.url();
        let dir = world.dir()?;
        let seeded = dir
            .read(SEEDED)
            .map_err(|e| Failure::run("io", format!("{}: {e}", dir.path_of(SEEDED).display())))?
            .is_some();
        if seeded {
            return Ok(None);
        }
        let keyed = http.mode() == Mode::Keyed;
        // Keyless, a repeat cannot be recognised by its key: look first.
        let held = if keyed {
            Vec::new()
        } else {
            http.issues()
                .map_err(|e| unreachable(url, format!("cannot list its issues to seed it: {e}")))?
        };
        let mut tally = Seeded {
            filed: 0,
            found: 0,
            keyed,
        };
        let seeds = &world.task.tracker;
        for (i, seed) in seeds.iter().enumerate() {
            if !keyed && already_there(&held, seeds, i) {
                tally.found += 1;
                continue;
            }
            let key = keyed.then(|| durable::key(run.as_str(), &format!("seed-{i}")));
            let req = Request::FileIssue {
                title: seed.title.clone(),
                body: seed.body.clone(),
            };
            http.apply_fenced(&req, key.as_deref(), fence)
                .map_err(|e| match e {
                    ClientError::Stale { .. } => Failure::new(
                        crate::exit::Exit::Locked,
                        "stale_holder",
                        format!("the tracker at {url} refused the run's seed issue: {e}"),
                    )
                    .hint("another process holds the run now; this one stopped and filed nothing more"),
                    e => unreachable(url, format!("cannot file the task's seed issue: {e}")),
                })?;
            tally.filed += 1;
        }
        // The seeds are on the service and not yet recorded as such: a
        // kill here leaves a run that seeds again when it goes on.
        crashpoint::point!("seeds filed");
        let opts = durable::write::WriteOptions {
            sync: true,
            points: false,
        };
        durable::write::write_atomic(dir.as_ref(), SEEDED, url.as_bytes(), opts)
            .map_err(|e| Failure::run("io", format!("{}: {e}", dir.path_of(SEEDED).display())))?;
        Ok(Some(tally))
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
