//! A throwaway Postgres cluster for tests and benches: `initdb` into a
//! temporary directory, a server listening only on a Unix socket in it (no
//! TCP port), stopped by a drop guard, on a panic too. As root it runs as
//! the `postgres` user, since Postgres refuses to run as root.
//!
//! The server binaries are looked up on PATH, then in `/usr/local/bin`,
//! then in Debian's `/usr/lib/postgresql/<version>/bin` (newest first).
//! Without them, [`PgCluster::start`] says why and returns `None`, so the
//! test skips; under CI (`CI` set and not `false`) it panics instead, so a
//! CI machine missing the package fails rather than skipping in silence.
//!
//! `triage`'s tests use this file too, through `#[path]` (one crate's test
//! modules cannot be imported by another's).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster; dropping it stops the server and removes its files.
pub struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    /// The server's options (`pg_ctl -o`), to start it again.
    opts: String,
    /// The socket's directory and the cluster's files.
    dir: tempfile::TempDir,
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
fn find_bin() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    candidates.push(PathBuf::from("/usr/local/bin"));
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    debian.sort();
    candidates.extend(debian.into_iter().rev().map(|(_, p)| p));
    candidates.into_iter().find(|d| has(d))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl PgCluster {
    /// Start a cluster; `fsync` off makes tests faster, on makes a bench
    /// honest. `None` (having said why) when the server is not installed
    /// and CI is not set.
    pub fn start(fsync: bool) -> Option<PgCluster> {
        let Some(bin) = find_bin() else {
            let why = "the Postgres server (initdb, pg_ctl) is not installed: not on PATH, \
                       in /usr/local/bin or in /usr/lib/postgresql/*/bin \
                       (apt-get install postgresql)";
            if under_ci() {
                panic!("{why}; under CI the Postgres store's tests must run");
            }
            eprintln!("skipped: {why}");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("pg-cluster-")
            .tempdir()
            .expect("a temporary directory");
        let data = dir.path().join("data");
        let as_postgres = is_root();
        let mut cluster = PgCluster {
            bin,
            data,
            as_postgres,
            opts: String::new(),
            dir,
        };
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(cluster.dir.path())
                .status()
                .expect("chown runs");
            assert!(
                ok.success(),
                "chown of the cluster's directory to postgres failed"
            );
        }
        cluster.run(
            "initdb",
            &[
                "-D",
                path_str(&cluster.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let opts = format!(
            "-k {} -c listen_addresses='' -c fsync={} -c max_connections=40",
            path_str(cluster.dir.path()),
            if fsync { "on" } else { "off" }
        );
        cluster.opts = opts;
        cluster.start_again();
        Some(cluster)
    }

    /// Start the (stopped) server, and wait until it takes connections.
    pub fn start_again(&self) {
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                path_str(&self.data),
                "-o",
                &self.opts,
                "-l",
                path_str(&log),
                "-w",
                "start",
            ],
        );
    }

    /// Stop the server as a power cut would (`pg_ctl stop -m immediate`:
    /// no checkpoint, connections dropped, recovery from the WAL at the
    /// next start).
    pub fn stop_immediate(&self) {
        self.run(
            "pg_ctl",
            &["-D", path_str(&self.data), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Run one of the server's programs, as `postgres` when root; panic
    /// with its output if it fails.
    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).output().expect("the Postgres program runs");
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A libpq connection string to `dbname` over the Unix socket.
    pub fn conn(&self, dbname: &str) -> String {
        format!(
            "host={} port=5432 user=postgres dbname={dbname}",
            path_str(self.dir.path())
        )
    }

    /// A new, empty database named `name`.
    pub fn create_db(&self, name: &str) -> String {
        let mut admin = postgres::Client::connect(&self.conn("postgres"), postgres::NoTls)
            .expect("connect to the cluster");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a database");
        self.conn(name)
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Immediate: nothing here is worth a clean shutdown, and a test
        // that panicked may have left connections open.
        let exe = self.bin.join("pg_ctl");
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let _ = cmd
            .args(["-D", path_str(&self.data), "-m", "immediate", "-w", "stop"])
            .output();
    }
}
