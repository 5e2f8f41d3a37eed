//! The Postgres store: runs in one table of a Postgres database, for
//! workers on many hosts.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use postgres::{Client, Config, NoTls, Transaction};

use super::{millis, refused, Claim, Lease, Record, RunStore};
use crate::error::{Error, Result};
use crate::run_id::RunId;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS runs (
    run_id text PRIMARY KEY,
    epoch bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_expires_at timestamptz,
    status text NOT NULL DEFAULT 'runnable' CHECK (status IN ('runnable', 'done')),
    checkpoint bytea,
    updated_at timestamptz NOT NULL DEFAULT now()
)";

const INSERT: &str = "INSERT INTO runs (run_id, epoch, status, updated_at) \
    VALUES ($1, 0, 'runnable', now()) ON CONFLICT (run_id) DO NOTHING";

/// The lease's expiry, `$3` milliseconds from the server's `now()`.
const CLAIM: &str = "UPDATE runs SET epoch = epoch + 1, lease_owner = $2, \
    lease_expires_at = now() + $3::float8 * interval '1 millisecond', updated_at = now() \
    WHERE run_id = $1 AND status <> 'done' \
    AND (lease_owner IS NULL OR lease_expires_at < now()) \
    RETURNING epoch, checkpoint";

const NEXT: &str = "UPDATE runs SET epoch = epoch + 1, lease_owner = $1, \
    lease_expires_at = now() + $2::float8 * interval '1 millisecond', updated_at = now() \
    WHERE run_id = (SELECT run_id FROM runs WHERE status <> 'done' \
        AND (lease_owner IS NULL OR lease_expires_at < now()) \
        ORDER BY run_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
    AND status <> 'done' AND (lease_owner IS NULL OR lease_expires_at < now()) \
    RETURNING run_id, epoch, checkpoint";

/// Runs in a Postgres database: one row per run in the table `runs`
/// (`run_id`, `epoch`, `lease_owner`, `lease_expires_at`, `status`,
/// `checkpoint`, `updated_at`), created if missing; every step one
/// transaction.
///
/// Leases are computed and compared with the server's clock (`now()`), so
/// workers whose clocks disagree still agree on when a lease ends. A claim
/// is one `UPDATE … WHERE (lease_owner IS NULL OR lease_expires_at < now())
/// AND status <> 'done' RETURNING epoch`; a save one `UPDATE … WHERE run_id
/// = $1 AND epoch = $2`; [`RunStore::claim_next`] takes its row with `FOR
/// UPDATE SKIP LOCKED`, so a pool of workers never waits on one another.
///
/// The client is the synchronous `postgres` crate, which runs a tokio
/// runtime of its own inside: called on a thread that already runs one, it
/// would panic, so every method refuses there with
/// [`Error::InsideAsyncRuntime`] (call it from `spawn_blocking`). TLS is
/// not built in: connect over a Unix socket or a trusted network.
pub struct PostgresStore {
    client: Mutex<Client>,
    /// To connect again when the server closed the connection (it was
    /// restarted, or a network hiccup cut it).
    config: Config,
    name: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn outside_runtime(path: impl Fn() -> PathBuf, op: &'static str) -> Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::InsideAsyncRuntime { path: path(), op });
    }
    Ok(())
}

/// Parse a connection string, refusing a bad one as bad input.
fn parse(params: &str) -> Result<Config> {
    Config::from_str(params).map_err(|e| Error::Store {
        path: PathBuf::from("the Postgres store"),
        op: "parse the connection string of",
        source: explain(&e).into(),
    })
}

/// The store's name for messages, in a form libpq takes back (pasteable):
/// `postgres://USER@HOST:PORT/DB` for TCP hosts, and
/// `postgresql:///DB?host=DIR&port=PORT&user=USER` when a host is a Unix
/// socket's directory. Never the password.
fn name_of(config: &Config) -> String {
    use postgres::config::Host;
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().or(config.get_user()).unwrap_or("");
    let port = |i: usize| config.get_ports().get(i).or(config.get_ports().first());
    let unix = config
        .get_hosts()
        .iter()
        .any(|h| matches!(h, Host::Unix(_)));
    if unix {
        let mut query = Vec::new();
        for (i, h) in config.get_hosts().iter().enumerate() {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(dir) => dir.display().to_string(),
            };
            query.push(format!("host={host}"));
            if let Some(p) = port(i) {
                query.push(format!("port={p}"));
            }
        }
        if !user.is_empty() {
            query.push(format!("user={user}"));
        }
        return format!("postgresql:///{db}?{}", query.join("&"));
    }
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(dir) => dir.display().to_string(),
            };
            match port(i) {
                Some(p) => format!("{host}:{p}"),
                None => host,
            }
        })
        .collect();
    let at = if user.is_empty() { "" } else { "@" };
    format!("postgres://{user}{at}{}/{db}", hosts.join(","))
}

/// The client's error with what the server said (its message, detail and
/// hint) and the chain of causes: `postgres::Error` alone prints only
/// `db error` or `error connecting to server`.
fn explain(e: &postgres::Error) -> String {
    use std::error::Error as _;
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_owned();
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// [`Error::Store`] for `op` on `path`, with [`explain`]'s message.
fn store_error(path: PathBuf, op: &'static str, e: &postgres::Error) -> Error {
    Error::Store {
        path,
        op,
        source: explain(e).into(),
    }
}

impl PostgresStore {
    /// Connect with a connection string as libpq takes it, either
    /// `key=value` pairs (`host=/run/postgresql user=worker dbname=runs`; a
    /// host that is a directory is a Unix socket) or a URL
    /// (`postgresql://worker@db.internal/runs`), and create the `runs`
    /// table if it is missing.
    pub fn connect(params: &str) -> Result<PostgresStore> {
        outside_runtime(|| PathBuf::from("postgres:"), "connect to")?;
        let config = parse(params)?;
        let name = name_of(&config);
        let mut client = config
            .connect(NoTls)
            .map_err(|e| store_error(PathBuf::from(&name), "connect to", &e))?;
        client
            .batch_execute(SCHEMA)
            .map_err(|e| store_error(PathBuf::from(&name), "create the runs table in", &e))?;
        Ok(PostgresStore {
            client: Mutex::new(client),
            config,
            name,
        })
    }

    /// The store's name for messages, from a connection string, without
    /// connecting: `postgres://USER@HOST:PORT/DB` (a Unix socket's
    /// directory as its host), never a password. An unparsable string is
    /// [`Error::Store`] with the operation `"parse the connection string
    /// of"`: bad input, to refuse before anything is made.
    pub fn name(params: &str) -> Result<String> {
        parse(params).map(|config| name_of(&config))
    }

    fn client(
        &self,
        path: impl Fn() -> PathBuf,
        op: &'static str,
    ) -> Result<MutexGuard<'_, Client>> {
        outside_runtime(&path, op)?;
        // A panic mid-step (an injected crash) dropped its transaction,
        // which rolls it back: the client is fine to use.
        let mut client = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if client.is_closed() {
            // The server went away (restarted, or the connection was cut):
            // the step that saw it failed, its outcome unknown to its
            // caller; this one connects again, and reads what committed.
            *client = self
                .config
                .connect(NoTls)
                .map_err(|e| store_error(path(), op, &e))?;
        }
        Ok(client)
    }

    fn fail(&self, run: Option<&RunId>, op: &'static str) -> impl Fn(postgres::Error) -> Error {
        let path = match run {
            Some(run) => self.path_of(run),
            None => PathBuf::from(&self.name),
        };
        move |e| store_error(path.clone(), op, &e)
    }

    /// Claim `run` inside `tx`.
    fn claim_in(
        &self,
        tx: &mut Transaction<'_>,
        run: &RunId,
        owner: &str,
        lease: Duration,
    ) -> Result<Claim> {
        let fail = self.fail(Some(run), "claim");
        tx.execute(INSERT, &[&run.as_str()]).map_err(&fail)?;
        let ms = millis(lease) as f64;
        if let Some(row) = tx
            .query_opt(CLAIM, &[&run.as_str(), &owner, &ms])
            .map_err(&fail)?
        {
            let epoch: i64 = row.try_get(0).map_err(&fail)?;
            return Ok(Claim::Won {
                lease: Lease {
                    run: run.clone(),
                    owner: owner.to_owned(),
                    epoch: epoch as u64,
                },
                checkpoint: row.try_get(1).map_err(&fail)?,
            });
        }
        let row = tx
            .query_one(
                "SELECT epoch, lease_owner, status, checkpoint FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
            .map_err(&fail)?;
        let status: String = row.try_get(2).map_err(&fail)?;
        Ok(if status == "done" {
            let epoch: i64 = row.try_get(0).map_err(&fail)?;
            Claim::Done {
                epoch: epoch as u64,
                checkpoint: row.try_get(3).map_err(&fail)?,
            }
        } else {
            let owner: Option<String> = row.try_get(1).map_err(&fail)?;
            Claim::Held {
                owner: owner.unwrap_or_default(),
            }
        })
    }

    /// Run `update` (`$1` the run, `$2` the epoch) in a transaction for
    /// `lease`'s holder; zero rows changed is refused.
    fn fenced_update(
        &self,
        lease: &Lease,
        op: &'static str,
        points: (&'static str, &'static str),
        update: &str,
        extra: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<()> {
        let fail = self.fail(Some(&lease.run), op);
        let mut client = self.client(|| self.path_of(&lease.run), op)?;
        let mut tx = client.transaction().map_err(&fail)?;
        let run = lease.run.as_str();
        let epoch = lease.epoch as i64;
        let mut args: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&run, &epoch];
        args.extend_from_slice(extra);
        let changed = tx.execute(update, &args).map_err(&fail)?;
        if changed == 0 {
            let now = tx
                .query_opt("SELECT epoch, status FROM runs WHERE run_id = $1", &[&run])
                .map_err(&fail)?;
            let now = match now {
                Some(row) => {
                    let epoch: i64 = row.try_get(0).map_err(&fail)?;
                    let status: String = row.try_get(1).map_err(&fail)?;
                    Some((epoch as u64, status == "done"))
                }
                None => None,
            };
            return Err(refused(self.path_of(&lease.run), lease.epoch, now));
        }
        crashpoint::point!(points.0);
        tx.commit().map_err(&fail)?;
        crashpoint::point!(points.1);
        Ok(())
    }
}

impl RunStore for PostgresStore {
    fn add(&self, run: &RunId) -> Result<bool> {
        let fail = self.fail(Some(run), "add");
        let added = self
            .client(|| self.path_of(run), "add")?
            .execute(INSERT, &[&run.as_str()])
            .map_err(fail)?;
        Ok(added > 0)
    }

    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        let fail = self.fail(Some(run), "claim");
        let mut client = self.client(|| self.path_of(run), "claim")?;
        let mut tx = client.transaction().map_err(&fail)?;
        let claim = self.claim_in(&mut tx, run, owner, lease)?;
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
        let op = "claim the next run in";
        let fail = self.fail(None, op);
        let mut client = self.client(|| PathBuf::from(&self.name), op)?;
        let mut tx = client.transaction().map_err(&fail)?;
        let ms = millis(lease) as f64;
        let Some(row) = tx.query_opt(NEXT, &[&owner, &ms]).map_err(&fail)? else {
            return Ok(None);
        };
        let run: String = row.try_get(0).map_err(&fail)?;
        let epoch: i64 = row.try_get(1).map_err(&fail)?;
        let checkpoint: Option<Vec<u8>> = row.try_get(2).map_err(&fail)?;
        let run = RunId::parse(&run)?;
        crashpoint::point!("claim: before commit");
        tx.commit().map_err(&fail)?;
        crashpoint::point!("claim: committed");
        let lease = Lease {
            run,
            owner: owner.to_owned(),
            epoch: epoch as u64,
        };
        Ok(Some((lease, checkpoint)))
    }

    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()> {
        let ms = millis(lease_for) as f64;
        self.fenced_update(
            lease,
            "renew",
            ("renew: before commit", "renew: committed"),
            "UPDATE runs SET lease_expires_at = now() + $3::float8 * interval '1 millisecond', \
             updated_at = now() WHERE run_id = $1 AND epoch = $2 AND status <> 'done'",
            &[&ms],
        )
    }

    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()> {
        let status = if done { "done" } else { "runnable" };
        self.fenced_update(
            lease,
            "save",
            ("save: before commit", "save: committed"),
            "UPDATE runs SET checkpoint = $3, status = $4, updated_at = now() \
             WHERE run_id = $1 AND epoch = $2 AND status <> 'done'",
            &[&checkpoint, &status],
        )
    }

    fn load(&self, run: &RunId) -> Result<Option<Record>> {
        let fail = self.fail(Some(run), "load");
        let query = |client: &mut Client| {
            client.query_opt(
                "SELECT epoch, lease_owner, status, checkpoint FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
        };
        let mut client = self.client(|| self.path_of(run), "load")?;
        let row = match query(&mut client) {
            // A read is safe to repeat: a connection the server closed
            // since the last step (it was restarted) is opened again once.
            Err(e) if e.is_closed() || client.is_closed() => {
                drop(client);
                query(&mut *self.client(|| self.path_of(run), "load")?)
            }
            other => other,
        }
        .map_err(&fail)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let epoch: i64 = row.try_get(0).map_err(&fail)?;
        let status: String = row.try_get(2).map_err(&fail)?;
        Ok(Some(Record {
            epoch: epoch as u64,
            owner: row.try_get(1).map_err(&fail)?,
            done: status == "done",
            checkpoint: row.try_get(3).map_err(&fail)?,
        }))
    }

    fn release(&self, lease: &Lease) -> Result<()> {
        self.fenced_update(
            lease,
            "release",
            ("release: before commit", "release: committed"),
            "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now() \
             WHERE run_id = $1 AND epoch = $2",
            &[],
        )
    }

    fn path_of(&self, run: &RunId) -> PathBuf {
        // The name stays pasteable: the run goes after a space.
        PathBuf::from(format!("{} (run {run})", self.name))
    }

    fn end_lease_of(&self, run: &RunId, owner: &str) -> Result<bool> {
        let fail = self.fail(Some(run), "end a gone holder's lease in");
        let ended = self
            .client(|| self.path_of(run), "end a gone holder's lease in")?
            .execute(
                "UPDATE runs SET lease_expires_at = now() - interval '1 millisecond' \
                 WHERE run_id = $1 AND lease_owner = $2 AND status <> 'done'",
                &[&run.as_str(), &owner],
            )
            .map_err(fail)?;
        Ok(ended > 0)
    }

    fn lease_left(&self, run: &RunId) -> Result<Option<Duration>> {
        let fail = self.fail(Some(run), "read the lease in");
        let row = self
            .client(|| self.path_of(run), "read the lease in")?
            .query_opt(
                "SELECT (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 \
                 FROM runs WHERE run_id = $1 AND lease_owner IS NOT NULL AND status <> 'done'",
                &[&run.as_str()],
            )
            .map_err(fail)?;
        let ms: Option<f64> = row.and_then(|r| r.get(0));
        Ok(ms
            .filter(|ms| *ms > 0.0)
            .map(|ms| Duration::from_millis(ms as u64)))
    }
}
