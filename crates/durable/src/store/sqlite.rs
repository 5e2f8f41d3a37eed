//! The SQLite store: runs in one table of an embedded database file, for
//! one host without a file tree of checkpoints.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{millis, refused, Claim, Lease, Record, RunStore};
use crate::error::{Error, Result};
use crate::run_id::RunId;

/// SQLite's clock, in milliseconds since the Unix epoch (one value for the
/// whole statement).
macro_rules! now_ms {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    status TEXT NOT NULL DEFAULT 'runnable' CHECK (status IN ('runnable', 'done')),
    checkpoint BLOB,
    updated_at INTEGER NOT NULL
)";

const INSERT: &str = concat!(
    "INSERT INTO runs (run_id, epoch, status, updated_at) VALUES (?1, 0, 'runnable', ",
    now_ms!(),
    ") ON CONFLICT (run_id) DO NOTHING"
);

const CLAIM: &str = concat!(
    "UPDATE runs SET epoch = epoch + 1, lease_owner = ?2, lease_expires_at = ",
    now_ms!(),
    " + ?3, updated_at = ",
    now_ms!(),
    " WHERE run_id = ?1 AND status <> 'done' AND (lease_owner IS NULL OR lease_expires_at < ",
    now_ms!(),
    ") RETURNING epoch, checkpoint"
);

const NEXT: &str = concat!(
    "SELECT run_id FROM runs WHERE status <> 'done' AND (lease_owner IS NULL OR lease_expires_at < ",
    now_ms!(),
    ") ORDER BY run_id LIMIT 1"
);

/// A run's row: epoch, owner, status, checkpoint.
type Row = (i64, Option<String>, String, Option<Vec<u8>>);

fn read_row(conn: &Connection, run: &RunId) -> rusqlite::Result<Option<Row>> {
    conn.query_row(
        "SELECT epoch, lease_owner, status, checkpoint FROM runs WHERE run_id = ?1",
        params![run.as_str()],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    )
    .optional()
}

/// Runs in an SQLite database file: one row per run in the table `runs`
/// (`run_id`, `epoch`, `lease_owner`, `lease_expires_at`, `status`,
/// `checkpoint`, `updated_at`), every step one transaction.
///
/// The database runs in WAL mode with `synchronous = FULL`: with `NORMAL` a
/// power cut may roll back the last commits, and a claim or a save that
/// returned would be undone. Every write transaction begins `IMMEDIATE`, so
/// one writer at a time holds the database and a claim's check and its
/// update see the same row. Leases use SQLite's clock (this host's).
/// SQLite comes compiled into this crate (rusqlite's `bundled`): no system
/// library is needed.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
}

/// Create `path` empty with mode 0600 if it does not exist (an empty file
/// is an empty SQLite database); an existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// How long a writer waits for another's write lock, by default.
pub const SQLITE_BUSY: Duration = Duration::from_secs(10);

impl SqliteStore {
    /// Open (creating if missing) the database at `path` and its `runs`
    /// table. Each worker may open its own; they share the file. A writer
    /// waits [`SQLITE_BUSY`] for another's write lock.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::open_waiting(path, SQLITE_BUSY)
    }

    /// [`SqliteStore::open`], waiting `busy` for another writer's lock
    /// before a write fails with `database is locked`.
    pub fn open_waiting(path: impl AsRef<Path>, busy: Duration) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        let fail = |op, e: rusqlite::Error| Error::Store {
            path: PathBuf::from(format!("sqlite:{}", path.display())),
            op,
            source: Box::new(e),
        };
        // A new database file is made 0600 first: SQLite makes its -wal
        // and -shm files with the database file's mode, and otherwise
        // would make all three by the umask (0644, readable by every
        // user, checkpoints and all).
        create_private(&path).map_err(|e| Error::Store {
            path: PathBuf::from(format!("sqlite:{}", path.display())),
            op: "create",
            source: Box::new(e),
        })?;
        let conn = Connection::open(&path).map_err(|e| fail("open", e))?;
        conn.busy_timeout(busy)
            .map_err(|e| fail("set the busy timeout of", e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| fail("turn on WAL in", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Store {
                path: PathBuf::from(format!("sqlite:{}", path.display())),
                op: "turn on WAL in",
                source: format!("the database stays in journal mode {mode:?}").into(),
            });
        }
        conn.execute_batch("PRAGMA synchronous = FULL")
            .map_err(|e| fail("set synchronous = FULL in", e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| fail("create the runs table in", e))?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-step (an injected crash) rolled its transaction back
        // when it unwound: the connection is fine to use.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, run: Option<&RunId>, op: &'static str) -> impl Fn(rusqlite::Error) -> Error {
        let path = match run {
            Some(run) => self.path_of(run),
            None => PathBuf::from(format!("sqlite:{}", self.path.display())),
        };
        move |e| Error::Store {
            path: path.clone(),
            op,
            source: Box::new(e),
        }
    }

    /// Claim `run` inside `tx`, which holds the database.
    fn claim_in(
        &self,
        tx: &rusqlite::Transaction<'_>,
        run: &RunId,
        owner: &str,
        lease: Duration,
    ) -> Result<Claim> {
        let fail = self.fail(Some(run), "claim");
        tx.execute(INSERT, params![run.as_str()]).map_err(&fail)?;
        let won: Option<(i64, Option<Vec<u8>>)> = tx
            .query_row(CLAIM, params![run.as_str(), owner, millis(lease)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
            .map_err(&fail)?;
        if let Some((epoch, checkpoint)) = won {
            return Ok(Claim::Won {
                lease: Lease {
                    run: run.clone(),
                    owner: owner.to_owned(),
                    epoch: epoch as u64,
                },
                checkpoint,
            });
        }
        // The INSERT above made sure the row is there.
        let (epoch, owner, status, checkpoint) = read_row(tx, run)
            .map_err(&fail)?
            .ok_or_else(|| fail(rusqlite::Error::QueryReturnedNoRows))?;
        Ok(if status == "done" {
            Claim::Done {
                epoch: epoch as u64,
                checkpoint,
            }
        } else {
            Claim::Held {
                owner: owner.unwrap_or_default(),
            }
        })
    }

    /// Run `update` (whose `?1` is the run, `?2` the epoch) in a write
    /// transaction for `lease`'s holder; zero rows changed is refused.
    fn fenced_update(
        &self,
        lease: &Lease,
        op: &'static str,
        points: (&'static str, &'static str),
        update: &str,
        extra: &[&dyn rusqlite::ToSql],
    ) -> Result<()> {
        let fail = self.fail(Some(&lease.run), op);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let epoch = lease.epoch as i64;
        let run = lease.run.as_str();
        let mut args: Vec<&dyn rusqlite::ToSql> = vec![&run, &epoch];
        args.extend_from_slice(extra);
        let changed = tx.execute(update, args.as_slice()).map_err(&fail)?;
        if changed == 0 {
            let now: Option<(i64, String)> = tx
                .query_row(
                    "SELECT epoch, status FROM runs WHERE run_id = ?1",
                    params![lease.run.as_str()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(&fail)?;
            return Err(refused(
                self.path_of(&lease.run),
                lease.epoch,
                now.map(|(e, s)| (e as u64, s == "done")),
            ));
        }
        crashpoint::point!(points.0);
        tx.commit().map_err(&fail)?;
        crashpoint::point!(points.1);
        Ok(())
    }
}

impl RunStore for SqliteStore {
    fn add(&self, run: &RunId) -> Result<bool> {
        let fail = self.fail(Some(run), "add");
        let added = self
            .conn()
            .execute(INSERT, params![run.as_str()])
            .map_err(fail)?;
        Ok(added > 0)
    }

    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        let fail = self.fail(Some(run), "claim");
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let claim = self.claim_in(&tx, run, owner, lease)?;
        // Points only where the claim changed something: a claim that
        // finds the run held or done commits nothing a crash could lose,
        // and a worker may poll for a lease to expire any number of times.
        let won = matches!(claim, Claim::Won { .. });
        if won {
            crashpoint::point!("claim: before commit");
        }
        tx.commit().map_err(&fail)?;
        if won {
            crashpoint::point!("claim: committed");
        }
        Ok(claim)
    }

    fn claim_next(&self, owner: &str, lease: Duration) -> Result<Option<(Lease, Option<Vec<u8>>)>> {
        let fail = self.fail(None, "claim the next run in");
        let mut conn = self.conn();
        // One writer at a time: no other worker can claim between the
        // SELECT and the UPDATE.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let next: Option<String> = tx
            .query_row(NEXT, [], |row| row.get(0))
            .optional()
            .map_err(&fail)?;
        let Some(next) = next else {
            return Ok(None);
        };
        let run = RunId::parse(&next)?;
        let Claim::Won { lease, checkpoint } = self.claim_in(&tx, &run, owner, lease)? else {
            return Ok(None);
        };
        crashpoint::point!("claim: before commit");
        tx.commit().map_err(&fail)?;
        crashpoint::point!("claim: committed");
        Ok(Some((lease, checkpoint)))
    }

    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()> {
        let ms = millis(lease_for);
        self.fenced_update(
            lease,
            "renew",
            ("renew: before commit", "renew: committed"),
            concat!(
                "UPDATE runs SET lease_expires_at = ",
                now_ms!(),
                " + ?3, updated_at = ",
                now_ms!(),
                " WHERE run_id = ?1 AND epoch = ?2 AND status <> 'done'"
            ),
            &[&ms],
        )
    }

    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()> {
        let status = if done { "done" } else { "runnable" };
        self.fenced_update(
            lease,
            "save",
            ("save: before commit", "save: committed"),
            concat!(
                "UPDATE runs SET checkpoint = ?3, status = ?4, updated_at = ",
                now_ms!(),
                " WHERE run_id = ?1 AND epoch = ?2 AND status <> 'done'"
            ),
            &[&checkpoint, &status],
        )
    }

    fn load(&self, run: &RunId) -> Result<Option<Record>> {
        let fail = self.fail(Some(run), "load");
        let row = read_row(&self.conn(), run).map_err(fail)?;
        Ok(row.map(|(epoch, owner, status, checkpoint)| Record {
            epoch: epoch as u64,
            owner,
            done: status == "done",
            checkpoint,
        }))
    }

    fn release(&self, lease: &Lease) -> Result<()> {
        self.fenced_update(
            lease,
            "release",
            ("release: before commit", "release: committed"),
            concat!(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
                now_ms!(),
                " WHERE run_id = ?1 AND epoch = ?2"
            ),
            &[],
        )
    }

    fn path_of(&self, run: &RunId) -> PathBuf {
        PathBuf::from(format!("sqlite:{}#{run}", self.path.display()))
    }

    fn end_lease_of(&self, run: &RunId, owner: &str) -> Result<bool> {
        let fail = self.fail(Some(run), "end a gone holder's lease in");
        let ended = self
            .conn()
            .execute(
                concat!(
                    "UPDATE runs SET lease_expires_at = ",
                    now_ms!(),
                    " - 1 WHERE run_id = ?1 AND lease_owner = ?2 AND status <> 'done'"
                ),
                params![run.as_str(), owner],
            )
            .map_err(fail)?;
        Ok(ended > 0)
    }

    fn lease_left(&self, run: &RunId) -> Result<Option<Duration>> {
        let fail = self.fail(Some(run), "read the lease in");
        let left: Option<Option<i64>> = self
            .conn()
            .query_row(
                concat!(
                    "SELECT lease_expires_at - ",
                    now_ms!(),
                    " FROM runs WHERE run_id = ?1 AND lease_owner IS NOT NULL AND status <> 'done'"
                ),
                params![run.as_str()],
                |row| row.get(0),
            )
            .optional()
            .map_err(fail)?;
        Ok(left
            .flatten()
            .filter(|ms| *ms > 0)
            .map(|ms| Duration::from_millis(ms as u64)))
    }
}
