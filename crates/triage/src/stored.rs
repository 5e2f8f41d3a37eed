//! Runs on a database store: `--store sqlite:PATH` or `--store
//! postgres://…`.
//!
//! # Where each part of a run lives
//!
//! | part | directory store (`--state DIR`) | database store |
//! | --- | --- | --- |
//! | checkpoint | `DIR/<run>.json` | the store's `runs` row |
//! | one process per run | `DIR/<run>.lock` (`flock`) | the row's lease and fencing epoch |
//! | tracker | `DIR/<run>.world/tracker.json`, or `--tracker URL` | the tracker service only (`--tracker URL`, recorded in the world) |
//! | world (`run.json`, `task.json`, `workspace/`) | `DIR/<run>.world/` | `--state DIR/<run>.world/`, a directory every process on the store shares |
//!
//! The store holds what must be decided in one place: which runs exist,
//! who holds each one, and its checkpoint. A run's world stays in files,
//! in a worlds directory (`--state DIR`; for `sqlite:PATH` it defaults to
//! `PATH.worlds`) that every process on the store must see: one host, or a
//! shared volume. Runs are found by listing the worlds and asking the store
//! about each (`pick.rs`); the store needs no listing of its own. A new
//! run's world is built whole before the run is added to the store, so a
//! run in the store always has a world; a world whose run is not in the
//! store was left by a start stopped before it added the run: nothing ran,
//! and it is picked up as a queued run. Worlds are built (by a start or
//! an enqueue) under the worlds' directory lock, in `.<run>.world.tmp`; one
//! found there by the next start, which holds that lock, was left by a
//! killed builder and is removed, as on a directory store.
//!
//! The tracker must be the tracker service: a file-backed tracker lives in
//! one process's memory between writes, so a process paused past its lease
//! would write its stale copy over the newer holder's records when it
//! wakes. The service remembers the highest epoch per run and refuses a
//! lower one (412), so a stale process's tracker call is refused there. A
//! database store without `--tracker` is refused (exit 2; with `--run ID`
//! it may be left out). The URL is recorded in the run's world when the run
//! is made, and every later process on the run uses it (a different
//! `--tracker` is refused).
//!
//! # The lease
//!
//! A process claims the run for `--lease-secs` (default
//! [`DEFAULT_LEASE_SECS`]) and renews it every third of that from a thread
//! ([`Heartbeat`]), so a run waiting at a person's prompt keeps its lease. A
//! process that stops running altogether (SIGSTOP, a frozen VM) stops
//! renewing: once its lease has expired, another process may claim the run
//! with a higher epoch and finish it. When the stopped one wakes, its next
//! save is refused (`fenced`, exit 3) before it calls anything: every call
//! that can change something is preceded by a save of its attempt marker,
//! and the tracker refuses its calls by their epoch too. The one write no
//! epoch guards is the workspace's: a process stopped between its marker's
//! save and its patch's write, past its lease, still writes that patch when
//! it wakes: the workspace is not a receiver that knows epochs.

mod patient;
mod pick;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use durable::store::{Lease, RunStore};
use durable::RunId;

use crate::exit::Failure;

pub use patient::Patient;
pub use pick::{execute, execute_with, Given};

/// Many machines, as `--help` explains it.
pub const STORE_HELP: &str = "\
Many machines:
  --store sqlite:PATH (one host) or --store postgres://... (many hosts;
  postgresql:///DB?host=/run/postgresql for a Unix socket) keeps each run's
  checkpoint and lease in that database. Its effects go to the tracker
  service: --tracker URL is required (but with --run ID) and recorded in
  the run's world when the run is made. The worlds (task copy, workspace) stay in --state DIR, which every
  process on the store must share (one host or a shared volume; default
  PATH.worlds for SQLite). A running triage renews its lease every third of
  --lease-secs; one stopped longer loses the run and, when it wakes, is
  fenced before it calls anything (exit 3). A killed one's run is free again
  once its lease expires.
    triage enqueue --store URL --state DIR --task NAME --tracker URL
    triage worker --store URL --state DIR --approve off
  A worker claims runnable runs one by one until none is left (waiting up
  to --lease-secs for runs others hold, so a killed holder's run is taken
  over), then exits: 0 all done and passed; else the worst of 5 (a run
  failed), 3 (fenced, or runs left that live holders still lease),
  4 (a run waits for a person), 1 (checks failed); 6 on SIGTERM/SIGINT.";

/// The lease's default length in seconds (`--lease-secs`).
pub const DEFAULT_LEASE_SECS: u64 = 30;

/// `--store URL`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// A directory: the same as `--state DIR`.
    Dir(PathBuf),
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`, as libpq takes it.
    Postgres(String),
}

impl StoreUrl {
    /// Parse `--store`: bad input is refused before anything is touched.
    pub fn parse(url: &str) -> Result<StoreUrl, Failure> {
        let bad = |why: &str| {
            Failure::usage("bad_store", format!("--store {url:?}: {why}")).hint(
                "give a directory, sqlite:PATH, or postgres://USER@HOST/DB \
                 (postgresql:///DB?host=/run/postgresql for a Unix socket)",
            )
        };
        if url.is_empty() {
            return Err(bad("empty"));
        }
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(bad("sqlite: needs the database file's path"));
            }
            if path.ends_with('/') {
                return Err(bad("sqlite:PATH names the database file, not a directory"));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // An unparsable connection string is bad input (exit 2).
            return match durable::store::PostgresStore::name(url) {
                Ok(_) => Ok(StoreUrl::Postgres(url.to_owned())),
                Err(e) => Err(Failure::usage("bad_store", e.to_string()).hint(
                    "give postgres://USER@HOST/DB or postgresql:///DB?host=/run/postgresql; \
                     options are libpq's (connect_timeout, application_name, ...)",
                )),
            };
        }
        // Anything that looks like a URL scheme is not a directory.
        if let Some((scheme, _)) = url.split_once(':') {
            let looks_like_scheme = !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if looks_like_scheme {
                return Err(bad(&format!(
                    "unknown store scheme {scheme:?} (for a directory whose name holds a colon, write ./{url})"
                )));
            }
        }
        Ok(StoreUrl::Dir(PathBuf::from(url)))
    }

    /// The worlds' directory: `--state DIR`, or for `sqlite:PATH`,
    /// `PATH.worlds` beside the database. A Postgres store has no place of
    /// its own on disk, so it needs `--state`.
    pub fn worlds(&self, state: Option<&Path>) -> Result<PathBuf, Failure> {
        if let Some(dir) = state {
            return Ok(dir.to_path_buf());
        }
        match self {
            StoreUrl::Dir(dir) => Ok(dir.clone()),
            StoreUrl::Sqlite(path) => {
                let mut name = path.as_os_str().to_owned();
                name.push(".worlds");
                Ok(PathBuf::from(name))
            }
            StoreUrl::Postgres(_) => Err(Failure::usage(
                "usage",
                "--state DIR is required with a Postgres store: the runs' worlds (task copy, \
                 workspace) live there, and every process on the store must share it",
            )
            .hint("mount one directory on every worker (a shared volume) and pass it as --state")),
        }
    }

    /// Open the store: create the SQLite file (only when `create`; else a
    /// missing file is "no runs"), or connect to Postgres. `None` for a
    /// missing SQLite file.
    pub fn open(&self, create: bool) -> Result<Option<Arc<dyn RunStore>>, Failure> {
        match self {
            StoreUrl::Dir(dir) => Err(Failure::usage(
                "bad_store",
                format!("{} is a directory store, not a database", dir.display()),
            )),
            StoreUrl::Sqlite(path) => open_sqlite(path, create),
            StoreUrl::Postgres(url) => {
                let store = durable::store::PostgresStore::connect(url).map_err(|e| {
                    Failure::from(e).hint(
                        "is the server running, and does the URL name its host (or socket \
                         directory), user and database? nothing was created",
                    )
                })?;
                Ok(Some(Arc::new(store)))
            }
        }
    }

    /// For messages: the URL without a password.
    pub fn describe(&self) -> String {
        match self {
            StoreUrl::Dir(dir) => dir.display().to_string(),
            StoreUrl::Sqlite(path) => format!("sqlite:{}", path.display()),
            StoreUrl::Postgres(url) => match url.split_once('@') {
                Some((front, back)) if front.contains(':') && front.matches(':').count() > 1 => {
                    let user_end = front.rfind(':').unwrap_or(front.len());
                    format!("{}:***@{back}", &front[..user_end])
                }
                _ => url.clone(),
            },
        }
    }
}

/// This host's name.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "host".to_owned()
    }
}

/// Whether `owner` (a lease holder's name, [`owner_name`]) is a triage
/// process on this host that no longer exists: its lease need not be
/// waited out. Any doubt (another host, a name of another form, a pid
/// that exists, perhaps reused) is "no".
pub fn gone_local_holder(owner: &str) -> bool {
    let Some(rest) = owner.strip_prefix("triage@") else {
        return false;
    };
    let mut parts = rest.rsplitn(3, ':');
    let (Some(_nanos), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        return false;
    };
    if host != host_name() || pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the pid exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// If `run` is leased by a process on this host that is gone, end that
/// lease so this process can claim the run now; the holder's name if so.
pub fn end_gone_holders_lease(
    store: &dyn RunStore,
    run: &RunId,
) -> Result<Option<String>, Failure> {
    let Some(record) = store.load(run).map_err(Failure::from)? else {
        return Ok(None);
    };
    match record.owner {
        Some(owner) if !record.done && gone_local_holder(&owner) => Ok(store
            .end_lease_of(run, &owner)
            .map_err(Failure::from)?
            .then_some(owner)),
        _ => Ok(None),
    }
}

/// When `run`'s lease ends by the store's clock unless renewed, for
/// messages: `until 07:31:05 UTC (in 27 s)`; `None` if the store cannot say.
pub fn lease_until(store: &dyn RunStore, run: &RunId) -> Option<String> {
    let left = store.lease_left(run).ok()??;
    let at = std::time::SystemTime::now() + left;
    let secs = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs() % 86_400;
    Some(format!(
        "until {:02}:{:02}:{:02} UTC (in {} s) unless renewed",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        left.as_secs_f64().ceil() as u64
    ))
}

/// A name for this process as a lease holder, unique among the workers:
/// host, pid and a random part.
pub fn owner_name() -> String {
    let host = host_name();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    format!("triage@{host}:{pid}:{nanos:08x}")
}

/// Renews a run's lease every third of its length from a thread, once the
/// loop has claimed the run ([`Heartbeat::learn`]). A refusal (another
/// holder has the run, or it is done) ends the renewals: the loop's next
/// save is refused the same way and stops the run.
pub struct Heartbeat {
    shared: Arc<Beat>,
    thread: Option<JoinHandle<()>>,
}

struct Beat {
    store: Arc<dyn RunStore>,
    run: RunId,
    owner: String,
    lease_for: Duration,
    lease: Mutex<Option<Lease>>,
    stop: AtomicBool,
}

impl Heartbeat {
    /// Start the thread; it renews nothing until [`Heartbeat::learn`] (or
    /// [`Heartbeat::holding`]) tells it the lease.
    pub fn start(
        store: Arc<dyn RunStore>,
        run: RunId,
        owner: String,
        lease_for: Duration,
    ) -> Heartbeat {
        let shared = Arc::new(Beat {
            store,
            run,
            owner,
            lease_for,
            lease: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let beat = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("lease".into())
            .spawn(move || beat.beat())
            .ok();
        Heartbeat { shared, thread }
    }

    /// Read the run's holder from the store after the loop's claim: if it
    /// is this process, renew that lease from now on. (A run the store
    /// reports done, or held by another, is not ours: nothing to renew.)
    pub fn learn(&self) -> Result<(), Failure> {
        let b = &self.shared;
        let record = b.store.load(&b.run).map_err(Failure::from)?;
        if let Some(r) = record.filter(|r| r.owner.as_deref() == Some(&b.owner) && !r.done) {
            *b.lease.lock().unwrap_or_else(|e| e.into_inner()) = Some(Lease {
                run: b.run.clone(),
                owner: b.owner.clone(),
                epoch: r.epoch,
            });
        }
        Ok(())
    }

    /// Renew `lease` (already held) from now on.
    pub fn holding(&self, lease: Lease) {
        *self.shared.lease.lock().unwrap_or_else(|e| e.into_inner()) = Some(lease);
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.shared.run
    }

    /// The lease this process holds on the run, if it still renews one.
    pub fn lease(&self) -> Option<Lease> {
        self.shared
            .lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stop renewing and give the run up, so another process may claim it
    /// at once (a refusal means it is not ours any more: nothing to do).
    pub fn release(mut self) {
        self.stop_thread();
        if let Some(lease) = self.lease() {
            let _not_ours_any_more = self.shared.store.release(&lease);
        }
    }

    fn stop_thread(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

impl Beat {
    fn beat(&self) {
        let every = (self.lease_for / 3).max(Duration::from_millis(50));
        let step = Duration::from_millis(20).min(every);
        let mut waited = Duration::ZERO;
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(step);
            waited += step;
            if waited < every {
                continue;
            }
            waited = Duration::ZERO;
            let lease = self.lease.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let Some(lease) = lease else { continue };
            match self.store.renew(&lease, self.lease_for) {
                Ok(()) => {}
                // Fenced or finished: not ours to renew any more; the
                // loop's next save says so and stops the run.
                Err(durable::Error::Fenced { .. } | durable::Error::Finished { .. }) => {
                    *self.lease.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                // The database is away for a moment: try again next beat
                // (the lease lasts three beats).
                Err(_) => {}
            }
        }
    }
}

/// `--store sqlite:PATH`, opened (made when `create`): `None` when it does
/// not exist and `create` is off. A path that cannot hold a database is
/// refused before SQLite makes anything beside it.
fn open_sqlite(path: &Path, create: bool) -> Result<Option<Arc<dyn RunStore>>, Failure> {
    if !create && std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        // A parent that exists as a file, FIFO or device is
        // not "missing": say what it is.
        let what = if std::fs::metadata(parent).is_ok() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(Failure::usage(
                "bad_store",
                format!(
                    "--store sqlite:{}: the directory {} {what}",
                    path.display(),
                    parent.display()
                ),
            )
            .hint("create the directory first, or name a database in one that exists; nothing was created"));
    }
    // A device, FIFO or directory is no database: SQLite would
    // make its journal beside it (`/dev/null-journal`).
    let existing = std::fs::metadata(path).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(Failure::usage(
            "bad_store",
            format!(
                "--store sqlite:{}: not a regular file, so it cannot hold a database",
                path.display()
            ),
        )
        .hint("name a database file (enqueue creates it); nothing was created"));
    }
    let store = durable::store::SqliteStore::open_waiting(path, sqlite_busy()?).map_err(|e| {
        let failure = Failure::from(e);
        if failure.hint.is_some() {
            return failure;
        }
        let hint = if existing.is_some() && failure.message.contains("not a database") {
            format!(
                "{} is a file, but not an SQLite database; name the store's database \
                     or a new file; it was left as it is",
                path.display()
            )
        } else {
            format!(
                "the database file is {}; its directory must be writable",
                path.display()
            )
        };
        failure.hint(hint)
    })?;
    Ok(Some(Arc::new(store)))
}

/// The variable that sets how long an SQLite store's writer waits for
/// another's write lock before it meets `database is locked`:
/// milliseconds, at most [`MAX_SQLITE_BUSY_MS`]; unset, SQLite's busy
/// timeout is [`durable::store::SQLITE_BUSY`]. For tests of a held lock,
/// so they do not wait the default out.
pub const SQLITE_BUSY_ENV: &str = "TRIAGE_SQLITE_BUSY_MS";

/// The longest [`SQLITE_BUSY_ENV`] may ask for: ten minutes.
pub const MAX_SQLITE_BUSY_MS: u64 = 600_000;

/// [`SQLITE_BUSY_ENV`] read, or the default: a bad value is refused
/// (exit 2) before anything is created.
pub(crate) fn sqlite_busy() -> Result<std::time::Duration, Failure> {
    crate::remote::env_ms(
        SQLITE_BUSY_ENV,
        durable::store::SQLITE_BUSY,
        MAX_SQLITE_BUSY_MS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_process_on_this_host_is_a_gone_holder() {
        let me = owner_name();
        assert!(!gone_local_holder(&me), "this process is alive: {me}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let host = host_name();
        assert!(gone_local_holder(&format!("triage@{host}:{pid}:0000abcd")));
        assert!(!gone_local_holder(&format!(
            "triage@elsewhere-{host}:{pid}:0000abcd"
        )));
        for odd in ["someone-else", "triage@", "triage@h:x:1", ""] {
            assert!(!gone_local_holder(odd), "{odd:?}");
        }
    }

    #[test]
    fn store_urls_parse_or_are_refused() {
        assert_eq!(
            StoreUrl::parse("sqlite:/tmp/r.db").unwrap(),
            StoreUrl::Sqlite("/tmp/r.db".into())
        );
        assert_eq!(
            StoreUrl::parse("sqlite:runs.db").unwrap(),
            StoreUrl::Sqlite("runs.db".into())
        );
        assert_eq!(
            StoreUrl::parse("state").unwrap(),
            StoreUrl::Dir("state".into())
        );
        assert_eq!(
            StoreUrl::parse("./a:b").unwrap(),
            StoreUrl::Dir("./a:b".into())
        );
        for url in ["postgres://u@h/db", "postgresql:///db?host=/tmp/s"] {
            assert_eq!(
                StoreUrl::parse(url).unwrap(),
                StoreUrl::Postgres(url.into())
            );
        }
        for bad in ["", "mysql://h/db", "sqlite:", "sqlite:dir/", "http://x"] {
            let e = StoreUrl::parse(bad).unwrap_err();
            assert_eq!(e.kind, "bad_store", "{bad:?}");
            assert_eq!(e.exit, crate::exit::Exit::Usage);
        }
        assert_eq!(
            StoreUrl::Sqlite("/x/r.db".into()).worlds(None).unwrap(),
            PathBuf::from("/x/r.db.worlds")
        );
        assert_eq!(
            StoreUrl::Postgres("postgres://h/d".into())
                .worlds(None)
                .unwrap_err()
                .exit,
            crate::exit::Exit::Usage
        );
        assert_eq!(
            StoreUrl::Postgres("postgres://u:secret@h/d".into()).describe(),
            "postgres://u:***@h/d"
        );
    }
}
