//! Answers that must be true: nothing reaches a run's outside world before
//! the run is held, the workspace is fenced like every other receiver, a
//! finished run is reported without its tracker, a file changed behind the
//! run's back stops it, bad input (the environment too) creates nothing,
//! and messages name what a person can paste back.

use crate::common::{self, arg, task, Out};
use crate::stores::{once_the_lease_expired, Svc};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use durable::store::{Claim, RunStore, SqliteStore};
use durable::RunId;

/// A queued run on SQLite whose lease another holder has: a process that
/// cannot claim it files none of its seed issues (it used to seed first),
/// and says until when the run is leased.
#[test]
fn a_run_is_seeded_only_by_the_process_that_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store_url = format!("sqlite:{}", db.display());
    let worlds = tmp.path().join("runs.db.worlds");
    let svc = Svc::start(false);
    let run = crate::stores::enqueue(&store_url, &worlds, "s2-known-sync-timeout", &svc.url);
    let store = SqliteStore::open(&db).unwrap();
    let id = RunId::parse(&run).unwrap();
    let claim = store
        .claim(&id, "someone-else", Duration::from_secs(600))
        .unwrap();
    assert!(matches!(claim, Claim::Won { .. }), "{claim:?}");
    for args in [
        vec!["--store", &store_url, "--run", &run, "--approve", "off"],
        vec![
            "worker",
            "--store",
            &store_url,
            "--approve",
            "off",
            "--lease-secs",
            "1",
        ],
    ] {
        let out = common::triage(&args);
        // "Leased by" says until when.
        out.expect_code(3);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains("leased by \"someone-else\" until ")
                || said.contains("leased by someone-else until "),
            "{out:?}"
        );
        assert!(said.contains(" UTC (in "), "{out:?}");
        assert!(
            svc.issues().is_empty(),
            "{args:?} filed seeds of a run it does not hold: {:#?}\n{out:?}",
            svc.issues()
        );
    }
}

/// The same command again on a finished run calls nothing: with its
/// tracker service gone it still prints the saved answer and checks.
#[test]
fn a_finished_run_is_reported_without_its_tracker_service() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let t = task("s2-known-sync-timeout");
    let svc = Svc::start(true);
    let url = svc.url.clone();
    let args = [
        "--task",
        t.name.as_str(),
        "--state",
        arg(&state),
        "--tracker",
        &url,
        "--approve",
        "off",
    ];
    common::triage(&args)
        .expect_code(0)
        .expect_stdout(&common::all_passed(&t));
    drop(svc);
    common::triage_gone_tracker(&args)
        .expect_code(0)
        .expect_stdout("is already done")
        .expect_stdout(&common::all_passed(&t));
}

/// A person changed a seeded file before the run patched it: the run stops
/// (exit 5, "changed behind the run's back") before it patches or files
/// anything, instead of filing the issue and claiming a fix.
#[test]
fn a_seeded_file_changed_behind_the_runs_back_stops_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let t = task("a3-login-after-wake");
    let s = arg(&state);
    common::triage(&["--task", &t.name, "--state", s, "--die-after", "search"]).expect_killed();
    let run = common::only_run(&state);
    let auth = common::world(&state, &run).join("workspace/auth.rs");
    std::fs::write(&auth, "// rewritten by a person\n").unwrap();
    let out = common::triage(&["--task", &t.name, "--state", s, "--approve", "off"]);
    out.expect_code(5)
        .expect_stderr("workspace file changed behind the run's back: auth.rs");
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        "// rewritten by a person\n",
        "the run wrote over the person's file"
    );
    let tracker = common::tracker(&state, &run);
    assert_eq!(
        tracker.issues().len(),
        t.seeded_issues(),
        "the run filed an issue about a fix it did not make"
    );
}

/// A child under the point protocol that the test holds at a hit.
struct Held {
    child: Child,
    protocol: BufReader<UnixStream>,
}

impl Held {
    /// Start `triage ARGS` under the point protocol and answer its hits
    /// until the `n`-th pass of `point`, where it is left waiting and
    /// stopped (SIGSTOP: its lease is no longer renewed).
    fn stop_at(args: &[&str], point: &str, n: u32) -> Held {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
        let mut cmd: Command = common::command(args);
        cmd.env("CRASHSWEEP_FD", "3")
            .env("CRASHSWEEP_PROTOCOL", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: only dup2 between fork and exec (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(theirs);
        ours.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut held = Held {
            child,
            protocol: BufReader::new(ours),
        };
        let mut seen = 0;
        loop {
            let hit = held.next_hit().unwrap_or_else(|| {
                panic!(
                    "the child ended before {point}#{n}: {:?}",
                    held.finish_now()
                )
            });
            if hit == point {
                seen += 1;
                if seen == n {
                    break;
                }
            }
            held.go();
        }
        // SAFETY: a signal to our own child, alive and waiting for us.
        let stopped = unsafe { libc::kill(held.child.id() as i32, libc::SIGSTOP) };
        assert_eq!(stopped, 0);
        held
    }

    fn next_hit(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.protocol.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end().trim_start_matches("hit ").to_owned()),
        }
    }

    fn go(&mut self) {
        self.protocol.get_mut().write_all(b"go\n").unwrap();
    }

    fn finish_now(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    /// Continue it (SIGCONT), answer every further hit, and collect it.
    fn resume(mut self) -> Out {
        // SAFETY: as in `stop_at`; the child is stopped, not gone.
        let continued = unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
        assert_eq!(continued, 0);
        self.go();
        while self.next_hit().is_some() {
            self.go();
        }
        crate::stores::finish(self.child)
    }
}

/// A worker stopped right after saving its intent to patch, held past its
/// lease while another process finishes the run, patches nothing when it
/// continues: it is fenced (exit 3) and `auth.rs` holds the fix once.
#[test]
fn a_process_stopped_before_its_patch_is_fenced_from_the_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store_url = format!("sqlite:{}", db.display());
    let t = task("a3-login-after-wake");
    let svc = Svc::start(true);
    let base = [
        "--store",
        store_url.as_str(),
        "--lease-secs",
        "1",
        "--approve",
        "off",
    ];
    let mut first = base.to_vec();
    first.extend(["--task", t.name.as_str(), "--tracker", svc.url.as_str()]);
    // The first marker a3 saves is its patch's (a search has none).
    let held = Held::stop_at(&first, "marker saved", 1);
    let worlds = tmp.path().join("runs.db.worlds");
    let run = crate::stores::world_runs(&worlds).remove(0);
    let mut second = base.to_vec();
    second.extend(["--run", run.as_str()]);
    once_the_lease_expired(&second)
        .expect_code(0)
        .expect_stdout(&common::all_passed(&t));
    let auth = worlds.join(format!("{run}.world/workspace/auth.rs"));
    let finished = std::fs::read_to_string(&auth).unwrap();

    let out = held.resume();
    out.expect_code(3);
    assert!(out.stderr.contains("the patch was not written"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        finished,
        "the stale process patched auth.rs again"
    );
    crate::stores::each_effect_once(&t, &svc, "after the stale process continued");
}

/// Bad values in the environment are bad input: exit 2, and no state
/// directory, world or lock is made.
#[test]
fn bad_environment_values_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let svc = Svc::start(true);
    for (var, value, said) in [
        (
            "TRIAGE_TRACKER_UNREACHABLE_MS",
            "abc",
            "whole number of milliseconds",
        ),
        ("CRASHSWEEP_DIE_AT", "world built", "CRASHSWEEP_DIE_AT"),
    ] {
        let out = common::command(&[
            "--task",
            "s2-known-sync-timeout",
            "--state",
            arg(&state),
            "--tracker",
            &svc.url,
        ])
        .env(var, value)
        .output()
        .unwrap();
        let out = Out {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        out.expect_code(2).expect_stderr(said);
        assert!(!state.exists(), "{var}={value}: made {}", state.display());
    }
    assert!(svc.issues().is_empty());
}

/// A new run whose tracker service is gone is refused before its world is
/// built, naming the service once and the time in seconds; one that
/// accepts connections and never answers is refused too, not waited on.
#[test]
fn a_new_run_checks_its_tracker_before_building_its_world() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // A port nobody listens on (bound, then closed), and one that accepts
    // and never answers.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    for url in [&gone, &silent_url] {
        let args = [
            "--task",
            "s2-known-sync-timeout",
            "--state",
            arg(&state),
            "--tracker",
            url.as_str(),
        ];
        let out = common::wait_or_hang(
            common::command_gone_tracker(&args),
            &args,
            Duration::from_secs(60),
        );
        out.expect_code(5).expect_stderr("does not answer");
        assert_eq!(out.stderr.matches(url.as_str()).count(), 1, "{out:?}");
        assert!(
            !out.stderr.contains("ms)") && !out.stderr.contains("µs"),
            "{out:?}"
        );
        let left: Vec<_> = std::fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".world"))
            .collect();
        assert!(left.is_empty(), "{url}: a world was built: {left:?}");
    }
}

/// `--store sqlite:` on something that is not a regular file is refused and
/// makes nothing beside it; a file that is not a database gets a hint that
/// says so.
#[test]
fn sqlite_stores_that_are_not_databases_are_refused_with_true_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = Svc::start(true);
    let fifo = tmp.path().join("fifo");
    nix_mkfifo(&fifo);
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, "not a database, just notes\n".repeat(40)).unwrap();
    let worlds = tmp.path().join("worlds");
    let fifo_store = format!("sqlite:{}", fifo.display());
    let out = common::triage(&[
        "enqueue",
        "--store",
        &fifo_store,
        "--state",
        arg(&worlds),
        "--task",
        "s2-known-sync-timeout",
        "--tracker",
        &svc.url,
    ]);
    out.expect_code(2).expect_stderr("not a regular file");
    assert!(!tmp.path().join("fifo-journal").exists());
    let notes_store = format!("sqlite:{}", notes.display());
    let out = common::triage(&[
        "enqueue",
        "--store",
        &notes_store,
        "--state",
        arg(&worlds),
        "--task",
        "s2-known-sync-timeout",
        "--tracker",
        &svc.url,
    ]);
    assert_ne!(out.code(), Some(0), "{out:?}");
    out.expect_stderr("not an SQLite database");
    assert!(!out.stderr.contains("must be writable"), "{out:?}");
}

fn nix_mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `--record` into a missing directory makes its parents 0700, like every
/// directory the command makes.
#[test]
fn record_makes_its_missing_parents_0700() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let file = tmp.path().join("rec/deeper/m1.json");
    common::triage(&[
        "--task",
        "s2-known-sync-timeout",
        "--state",
        arg(&state),
        "--approve",
        "off",
        "--record",
        arg(&file),
    ])
    .expect_code(0);
    for dir in [tmp.path().join("rec"), tmp.path().join("rec/deeper")] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
}

/// A new run prints its ID before its world is built: killed right after
/// the world is renamed into place, it has already told the user its ID.
#[test]
fn a_new_run_prints_its_id_before_its_world_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let out = common::command(&["--task", "s2-known-sync-timeout", "--state", arg(&state)])
        .env("CRASHSWEEP_DIE_AT", "world built#1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let run = crate::stores::world_runs(&state).remove(0);
    assert!(
        stdout.starts_with(&format!("run       new run {run} of task")),
        "{stdout}"
    );
}

/// A Postgres store is shown as a connection string libpq takes back.
#[test]
fn a_postgres_store_is_shown_as_it_can_be_pasted() {
    let Some(pg) = crate::pg_cluster::PgCluster::start(false) else {
        return;
    };
    let url = crate::stores::pg_url(&pg, "shown");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let svc = Svc::start(true);
    let out = common::triage(&[
        "--store",
        &url,
        "--state",
        arg(&worlds),
        "--task",
        "s2-known-sync-timeout",
        "--tracker",
        &svc.url,
        "--approve",
        "off",
    ]);
    out.expect_code(0);
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("checkpoint "))
        .unwrap()
        .to_owned();
    let shown = line.split(" (run ").next().unwrap();
    assert!(shown.starts_with("postgresql:///shown?host=/"), "{line}");
    durable::store::PostgresStore::connect(shown).expect("the shown store connects");
}

/// A process stopped while writing its first-save mark (its first
/// checkpoint saved), woken after another process finished the run and
/// removed its temp file, is fenced (exit 3): it calls nothing.
#[test]
fn a_process_stopped_at_its_first_save_is_fenced_when_it_wakes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store_url = format!("sqlite:{}", db.display());
    let t = task("s2-known-sync-timeout");
    let svc = Svc::start(true);
    let base = [
        "--store",
        store_url.as_str(),
        "--lease-secs",
        "1",
        "--approve",
        "off",
    ];
    let mut first = base.to_vec();
    first.extend(["--task", t.name.as_str(), "--tracker", svc.url.as_str()]);
    let held = Held::stop_at(&first, "first-save mark: before rename", 1);
    let worlds = tmp.path().join("runs.db.worlds");
    let run = crate::stores::world_runs(&worlds).remove(0);
    let mut second = base.to_vec();
    second.extend(["--run", run.as_str()]);
    once_the_lease_expired(&second)
        .expect_code(0)
        .expect_stdout(&common::all_passed(&t));
    let out = held.resume();
    out.expect_code(3);
    assert!(!out.stdout.contains("call      "), "{out:?}");
    crate::stores::each_effect_once(&t, &svc, "after the stale process continued");
}

/// A run whose holder on this host was killed is taken over at once: its
/// process is gone, so its lease is not waited out.
#[test]
fn a_killed_local_holders_run_is_taken_over_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store_url = format!("sqlite:{}", db.display());
    let t = task("s2-known-sync-timeout");
    let svc = Svc::start(true);
    let base = [
        "--store",
        store_url.as_str(),
        "--lease-secs",
        "600",
        "--approve",
        "off",
    ];
    let mut first = base.to_vec();
    first.extend([
        "--task",
        t.name.as_str(),
        "--tracker",
        svc.url.as_str(),
        "--die-after",
        "search",
    ]);
    common::triage(&first).expect_killed();
    let run = crate::stores::world_runs(&tmp.path().join("runs.db.worlds")).remove(0);
    let mut second = base.to_vec();
    second.extend(["--run", run.as_str()]);
    let out = common::triage_or_hang(&second, Duration::from_secs(120));
    out.expect_code(0)
        .expect_stdout("its process on this host is gone")
        .expect_stdout(&common::all_passed(&t));
    crate::stores::each_effect_once(&t, &svc, "after the takeover");
}

/// A Postgres restart of a second or two in the middle of a run costs
/// nothing: each store step is tried again within the lease.
#[test]
fn a_postgres_restart_mid_run_is_waited_out() {
    let Some(pg) = crate::pg_cluster::PgCluster::start(false) else {
        return;
    };
    let url = crate::stores::pg_url(&pg, "restart");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let t = task("s2-known-sync-timeout");
    let svc = Svc::start(true);
    let args = [
        "--store",
        url.as_str(),
        "--state",
        arg(&worlds),
        "--task",
        t.name.as_str(),
        "--tracker",
        svc.url.as_str(),
        "--approve",
        "off",
    ];
    // Held after its first call's marker: its next step is a store save.
    let held = Held::stop_at(&args, "marker saved", 1);
    pg.stop_immediate();
    let pg = std::sync::Arc::new(pg);
    let again = {
        let pg = std::sync::Arc::clone(&pg);
        std::thread::spawn(move || {
            // The child meets the server down first, then up again.
            std::thread::sleep(Duration::from_millis(1500));
            pg.start_again();
        })
    };
    let out = held.resume();
    again.join().unwrap();
    out.expect_code(0).expect_stdout(&common::all_passed(&t));
    crate::stores::each_effect_once(&t, &svc, "across the restart");
}

/// On SQLite a process stopped inside a write holds the database's write
/// lock: another process's run waits for it (past the busy timeout) and
/// goes on once it is let go, instead of failing.
#[test]
fn a_sqlite_writer_stopped_inside_a_write_is_waited_for() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store_url = format!("sqlite:{}", db.display());
    let worlds = tmp.path().join("runs.db.worlds");
    let t = task("s2-known-sync-timeout");
    let (svc_a, svc_b) = (Svc::start(true), Svc::start(true));
    let a = crate::stores::enqueue(&store_url, &worlds, &t.name, &svc_a.url);
    let b = crate::stores::enqueue(&store_url, &worlds, &t.name, &svc_b.url);
    let run_args = |run: &str| -> Vec<String> {
        [
            "--store",
            store_url.as_str(),
            "--run",
            run,
            "--approve",
            "off",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let a_args = run_args(&a);
    let a_args: Vec<&str> = a_args.iter().map(String::as_str).collect();
    // Held inside its first save's transaction: the write lock is its.
    let held = Held::stop_at(&a_args, "save: before commit", 1);
    let b_args = run_args(&b);
    let b_args: Vec<&str> = b_args.iter().map(String::as_str).collect();
    // Its busy timeout shortened to 1 s (10 s by default): past it, the
    // other process has met `database is locked` at least once.
    let other = common::command(&b_args)
        .env(triage_busy_env(), "1000")
        .spawn()
        .expect("run the triage binary");
    std::thread::sleep(Duration::from_millis(2500));
    let out_a = held.resume();
    let out_b = crate::stores::finish(other);
    out_a.expect_code(0);
    out_b.expect_code(0).expect_stdout(&common::all_passed(&t));
    crate::stores::each_effect_once(&t, &svc_b, "the other run");
}

/// The variable that shortens an SQLite writer's busy timeout.
fn triage_busy_env() -> &'static str {
    "TRIAGE_SQLITE_BUSY_MS"
}
