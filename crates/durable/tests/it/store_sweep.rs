//! The run stores swept with `sweep` at depth 2: a worker counts to four on
//! a [`Checkpoint`] opened on a store, renewing its lease after each save,
//! finishes and releases the run; it is crashed at every point of the
//! claim, save, renew and release paths (`claim: before commit`, `save:
//! committed`, …) and, after the crash, at every point of the restart. A
//! crashed worker's lease stays until it expires, as a dead process's would,
//! so the restart waits it out. No returned save is lost, a finished run is
//! never reopened unfinished, and every scenario ends with the run done.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use durable::store::{FileStore, PostgresStore, RunStore, SqliteStore};
use durable::testing::MemDir;
use durable::{Checkpoint, Durable, Error, Options, RunId};
use serde::{Deserialize, Serialize};
use sweep::{Config, Counter, LifeError, Subject, Verdict};

use crate::pg_cluster::PgCluster;

const STEPS: u32 = 3;
/// Long enough that a live worker never loses it between two renewals on a
/// loaded machine, short enough that waiting out a crashed one is cheap.
const LEASE: Duration = Duration::from_millis(60);

#[derive(Debug, Default, Serialize, Deserialize)]
struct Count {
    n: u32,
    done: bool,
}

impl Durable for Count {
    fn is_finished(&self) -> bool {
        self.done
    }
}

/// Which store the worker runs on.
enum Kind {
    Files,
    Sqlite,
    Postgres(String),
}

struct Worker(Kind);

/// What a crash does not erase: the store, and what the worker was told.
struct World {
    files: MemDir,
    sqlite: Option<tempfile::TempDir>,
    run: RunId,
    /// The highest step whose save returned.
    acked: u32,
    /// Whether the finishing save returned.
    done_acked: bool,
    lost: u64,
    reopened: u64,
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A fresh directory for one world's SQLite database: on tmpfs
/// (`/dev/shm`) when the machine has one, else the usual temp directory.
/// The sweep crashes the worker's process, never the machine: what a
/// crashed life wrote stays in the page cache for the restart either way,
/// so the `synchronous = FULL` fsyncs a real disk pays for (seconds over the
/// sweep's scenarios) prove nothing here; what the sweep proves is the
/// store's logic at each of its crash points, and tmpfs keeps all of it.
fn sqlite_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return Ok(dir);
        }
    }
    tempfile::tempdir()
}

impl Worker {
    fn store(&self, w: &World) -> durable::Result<Arc<dyn RunStore>> {
        Ok(match &self.0 {
            Kind::Files => Arc::new(FileStore::new(Arc::new(w.files.clone()), false)),
            Kind::Sqlite => {
                let dir = w.sqlite.as_ref().expect("an SQLite world has a directory");
                Arc::new(SqliteStore::open(dir.path().join("runs.db"))?)
            }
            Kind::Postgres(conn) => Arc::new(PostgresStore::connect(conn)?),
        })
    }

    /// Count on from the opened state to the end; `Fenced` if this worker
    /// lost its lease meanwhile.
    fn work(w: &mut World, opened: durable::Opened<Count>) -> durable::Result<()> {
        let (mut state, mut cp) = (opened.state, opened.checkpoint);
        while state.n < STEPS {
            state.n += 1;
            cp.save(&state)?;
            w.acked = state.n;
            cp.renew(LEASE)?;
        }
        if !state.done {
            state.done = true;
            cp.save(&state)?;
            w.done_acked = true;
        }
        cp.release()
    }
}

impl Subject for Worker {
    type World = World;

    fn name(&self) -> String {
        match &self.0 {
            Kind::Files => "file store".into(),
            Kind::Sqlite => "sqlite store".into(),
            Kind::Postgres(_) => "postgres store".into(),
        }
    }

    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("lost save").required(),
            Counter::new("done reopened unfinished").required(),
            Counter::new("unfinished").required(),
        ]
    }

    fn world(&self) -> Result<World, sweep::LifeError> {
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let sqlite = match self.0 {
            Kind::Sqlite => Some(sqlite_dir()?),
            _ => None,
        };
        Ok(World {
            files: MemDir::new(),
            sqlite,
            run: RunId::parse(&format!("count-{n}"))?,
            acked: 0,
            done_acked: false,
            lost: 0,
            reopened: 0,
        })
    }

    fn life(&self, w: &mut World) -> Result<(), LifeError> {
        let store = self.store(w)?;
        let opts = Options {
            sync: false,
            max_resumes: None,
            ..Options::default()
        };
        loop {
            let run = w.run.clone();
            let opened =
                match Checkpoint::open_store(store.clone(), &run, "w", LEASE, opts, Count::default)
                {
                    // A crashed worker's lease: wait for it to expire.
                    Err(Error::Leased { .. }) => {
                        std::thread::sleep(Duration::from_millis(3));
                        continue;
                    }
                    other => other?,
                };
            w.lost += u64::from(opened.state.n < w.acked);
            w.reopened += u64::from(w.done_acked && !opened.state.done);
            match Self::work(w, opened) {
                // This worker's own lease ran out (a stall): claim again.
                Err(Error::Fenced { .. }) => continue,
                other => return Ok(other?),
            }
        }
    }

    fn judge(&self, w: &World) -> Verdict {
        let done = self
            .store(w)
            .and_then(|s| s.load(&w.run))
            .ok()
            .flatten()
            .and_then(|rec| {
                let bytes = rec.checkpoint?;
                let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
                Some(rec.done && v["state"]["n"] == STEPS && v["state"]["done"] == true)
            })
            .unwrap_or(false);
        Verdict::new()
            .count("lost save", w.lost)
            .count("done reopened unfinished", w.reopened)
            .count("unfinished", u64::from(!done))
    }
}

/// Worker threads for a store sweep. Its scenarios mostly wait: each
/// restart after a crash sleeps until the crashed worker's lease expires
/// (about [`LEASE`], about 1.5 s of CPU in a sweep of 13 s on one thread
/// per core), so more threads than cores overlap those waits; the report
/// is the same bytes with any number of threads. A Postgres sweep keeps
/// to [`PG_THREADS`]: each thread's worker holds a connection, and the
/// throwaway cluster allows 40.
const THREADS: usize = 32;

/// [`THREADS`] for the Postgres store.
const PG_THREADS: usize = 16;

fn sweep_store(kind: Kind, points: &[&str]) {
    let threads = match kind {
        Kind::Postgres(_) => PG_THREADS,
        _ => THREADS,
    };
    let worker = Worker(kind);
    let config = Config {
        threads: Some(threads),
        ..Config::default()
    };
    let report = sweep::run(&worker, &config).expect("the clean run finishes");
    println!("{}", sweep::table(&[report.row()]));
    let failures: Vec<String> = report
        .failures()
        .map(|s| format!("{}: {:?}", s.scenario, s.failure))
        .collect();
    assert_eq!(failures, Vec::<String>::new());
    let first: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.scenario.hits.len() == 1)
        .map(|s| s.scenario.hits[0].to_string())
        .collect();
    for p in points {
        assert!(
            first.iter().any(|n| n == p),
            "no scenario crashes at {p}: {first:?}"
        );
    }
    // Depth 2: crashes in the restart after a crash.
    let deep = report
        .scenarios
        .iter()
        .filter(|s| s.scenario.hits.len() == 2);
    assert!(deep.count() > first.len(), "too few depth-2 scenarios");
}

const POINTS: &[&str] = &[
    "claim: before commit#1",
    "claim: committed#1",
    "save: before commit#1",
    "save: committed#4",
    "renew: before commit#1",
    "renew: committed#3",
    "release: before commit#1",
    "release: committed#1",
];

#[test]
fn the_file_store_swept_at_depth_2() {
    sweep_store(Kind::Files, POINTS);
}

#[test]
fn the_sqlite_store_swept_at_depth_2() {
    sweep_store(Kind::Sqlite, POINTS);
}

#[test]
fn the_postgres_store_swept_at_depth_2() {
    let Some(cluster) = PgCluster::start(false) else {
        return;
    };
    let conn = cluster.create_db("swept");
    drop(PostgresStore::connect(&conn).unwrap());
    sweep_store(Kind::Postgres(conn), POINTS);
}
