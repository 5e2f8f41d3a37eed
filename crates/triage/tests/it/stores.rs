//! `triage` on a database store, as real processes: a pool of workers on
//! one Postgres store, a process stopped with SIGSTOP at its approval
//! prompt past its lease while another finishes its run, runs on SQLite,
//! and bad input.
//!
//! Each run sends its effects to a tracker service of its own, started in
//! this process: the recorded replies name issue numbers (`comment on #2`),
//! so two runs on one service would step on each other's numbers, and the
//! checks count the service's records.
//!
//! Postgres comes from a throwaway cluster ([`PgCluster`]); without the
//! server installed the Postgres tests skip saying why, and under CI (`CI`
//! set) they fail instead.

use crate::common::{self, arg, task, AtTerminal, Out, TaskFile};
use crate::pg_cluster::PgCluster;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use durable::store::{Record, RunStore};
use durable::RunId;
use tracker::client::HttpTracker;
use tracker::http::Running;
use tracker::service::{Options, Service};

/// A bound on every wait, so a broken test fails instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

/// A tracker service on 127.0.0.1 in a temporary directory.
pub(crate) struct Svc {
    server: Option<Running>,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

impl Svc {
    pub(crate) fn start(keyed: bool) -> Svc {
        let dir = tempfile::tempdir().unwrap();
        let opts = if keyed {
            Options::keyed()
        } else {
            Options::keyless()
        };
        let svc = Service::open(dir.path(), opts).unwrap();
        let server = tracker::http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
        let url = server.url();
        Svc {
            server: Some(server),
            url,
            _dir: dir,
        }
    }

    pub(crate) fn issues(&self) -> Vec<tracker::Issue> {
        HttpTracker::connect(&self.url).unwrap().issues().unwrap()
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// Every effect of `t` is on the service exactly once (its seeds and the
/// issues and comments its calls make), and nothing else is.
#[track_caller]
pub(crate) fn each_effect_once(t: &TaskFile, svc: &Svc, what: &str) {
    let issues = svc.issues();
    let mut titles: Vec<String> = t.json["tracker"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["title"].as_str().unwrap().to_owned())
        .collect();
    let calls = t.calls();
    for c in calls.iter().filter(|c| c.tool == "issue_file") {
        titles.push(c.args["title"].as_str().unwrap().to_owned());
    }
    for title in &titles {
        let n = issues.iter().filter(|i| &i.title == title).count();
        assert_eq!(n, 1, "{what}: issue {title:?} filed {n} times: {issues:#?}");
    }
    assert_eq!(issues.len(), titles.len(), "{what}: {issues:#?}");
    let comments: Vec<&str> = issues
        .iter()
        .flat_map(|i| i.comments.iter().map(|c| c.body.as_str()))
        .collect();
    let made: Vec<&str> = calls
        .iter()
        .filter(|c| c.tool == "issue_comment")
        .map(|c| c.args["body"].as_str().unwrap())
        .collect();
    assert_eq!(comments, made, "{what}: comments");
}

/// The run IDs whose worlds are in `worlds`.
pub(crate) fn world_runs(worlds: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(worlds)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(".world").map(str::to_owned))
        .collect();
    runs.sort();
    runs
}

pub(crate) fn spawn(args: &[&str]) -> Child {
    common::command(args)
        .spawn()
        .expect("run the triage binary")
}

pub(crate) fn finish(child: Child) -> Out {
    let out = child.wait_with_output().unwrap();
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The `triage enqueue` of one run of `task` on `store`; its ID.
pub(crate) fn enqueue(store: &str, worlds: &Path, task: &str, tracker: &str) -> String {
    let out = common::triage(&[
        "enqueue",
        "--store",
        store,
        "--state",
        arg(worlds),
        "--task",
        task,
        "--tracker",
        tracker,
    ]);
    out.expect_code(0);
    let line = out.stdout.lines().next().unwrap();
    line.split_whitespace().nth(2).unwrap().to_owned()
}

/// `triage ARGS`, run again while it is refused because the run's lease
/// (a stopped or killed holder's) has not expired yet.
pub(crate) fn once_the_lease_expired(args: &[&str]) -> Out {
    let deadline = Instant::now() + WAIT;
    loop {
        // A process that hangs fails the test instead of hanging it.
        let out = common::triage_or_hang(args, WAIT);
        if out.code() == Some(3) && out.stderr.contains("leased") {
            assert!(
                Instant::now() < deadline,
                "the lease never expired: {out:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        return out;
    }
}

/// The cluster's database `name` (created) as a libpq URL with a
/// Unix-socket host, the form a user writes.
pub(crate) fn pg_url(pg: &PgCluster, name: &str) -> String {
    let conn = pg.create_db(name);
    let socket = conn
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("host="))
        .unwrap();
    format!("postgresql:///{name}?host={socket}&user=postgres")
}

/// The runs a worker's output says it ran to their end.
fn ran(out: &Out) -> Vec<String> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worker    run "))
        .filter(|l| l.ends_with("ended: done (exit 0)"))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

pub(crate) fn record(store: &dyn RunStore, run: &str) -> Record {
    store
        .load(&RunId::parse(run).unwrap())
        .unwrap()
        .expect("the run is in the store")
}

#[test]
fn two_workers_on_one_postgres_store_run_every_queued_run_once() {
    let Some(pg) = PgCluster::start(false) else {
        return;
    };
    let store_url = pg_url(&pg, "workers");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let names = [
        "a3-login-after-wake",
        "m1-done-after-delete",
        "s2-known-sync-timeout",
        "a3-login-after-wake",
        "m1-done-after-delete",
        "s2-known-sync-timeout",
    ];
    let mut queued = Vec::new();
    for name in names {
        let svc = Svc::start(true);
        let run = enqueue(&store_url, &worlds, name, &svc.url);
        queued.push((run, task(name), svc));
    }
    let worker = [
        "worker",
        "--store",
        &store_url,
        "--state",
        arg(&worlds),
        "--approve",
        "off",
    ];
    let (a, b) = (spawn(&worker), spawn(&worker));
    let (a, b) = (finish(a), finish(b));
    a.expect_code(0);
    b.expect_code(0);
    let mut all: Vec<String> = ran(&a).into_iter().chain(ran(&b)).collect();
    all.sort();
    let mut want: Vec<String> = queued.iter().map(|(r, _, _)| r.clone()).collect();
    want.sort();
    assert_eq!(
        all, want,
        "every run ran to its end in exactly one worker:\n--- a\n{}\n--- b\n{}",
        a.stdout, b.stdout
    );
    let store = durable::store::PostgresStore::connect(&store_url).unwrap();
    for (run, t, svc) in &queued {
        let r = record(&store, run);
        assert!(r.done, "{run}: {r:?}");
        each_effect_once(t, svc, run);
    }
    // Nothing is left: a third worker finds no run and exits 0 at once.
    let third = finish(spawn(&worker));
    third.expect_code(0).expect_stdout("ran 0 run(s)");
}

const PROMPT: &str = "approve issue_file call call_06 with ";

/// The zombie, as a real process: a `triage` process at its approval prompt,
/// stopped with SIGSTOP past its lease while a second process finishes the
/// run, is fenced when it continues: it saves nothing, calls nothing, and
/// exits 3.
#[test]
fn a_process_stopped_at_its_prompt_past_its_lease_is_fenced_when_it_continues() {
    let Some(pg) = PgCluster::start(false) else {
        return;
    };
    let url = pg_url(&pg, "zombie");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let t = task("m1-done-after-delete");
    // Keyless: nothing but the epoch could tell a stale request apart.
    let svc = Svc::start(false);
    let base = [
        "--store",
        url.as_str(),
        "--state",
        arg(&worlds),
        "--lease-secs",
        "1",
    ];
    let mut first_args = base.to_vec();
    first_args.extend(["--task", &t.name, "--tracker", &svc.url]);
    let mut first = AtTerminal::spawn(&first_args);
    first.wait_for(PROMPT);
    let run = world_runs(&worlds).remove(0);
    let mut second_args = base.to_vec();
    second_args.extend(["--run", &run, "--approve", "off"]);
    // While it runs, waiting at its prompt, it renews its lease: well past
    // two lease lengths, a second process is still refused.
    std::thread::sleep(Duration::from_millis(2500));
    common::triage(&second_args)
        .expect_code(3)
        .expect_stderr("run is leased by");
    // SAFETY: a signal to our own child, which is alive (at its prompt).
    assert_eq!(unsafe { libc::kill(first.pid() as i32, libc::SIGSTOP) }, 0);

    // The second process is refused while the stopped one's lease lasts
    // (exit 3, "leased"), then takes the run over and finishes it.
    let second = once_the_lease_expired(&second_args);
    second.expect_code(0).expect_stdout(&common::all_passed(&t));
    let store = durable::store::PostgresStore::connect(&url).unwrap();
    let finished = record(&store, &run);
    assert!(finished.done);
    let filed = svc.issues();
    each_effect_once(&t, &svc, "after the second process");

    // SAFETY: as above; the child is stopped, not gone.
    assert_eq!(unsafe { libc::kill(first.pid() as i32, libc::SIGCONT) }, 0);
    first.answer("y\n");
    let out = first.finish();
    out.expect_code(3)
        .expect_stderr("run was opened by a newer holder (epoch 2 in the store, 1 here)");
    assert!(
        !out.stdout.contains("call      issue_file"),
        "the stale process called nothing:\n{}",
        out.stdout
    );
    assert_eq!(
        record(&store, &run),
        finished,
        "the stale process saved nothing: the store holds the second's record"
    );
    assert_eq!(svc.issues(), filed, "the stale process filed nothing");
    each_effect_once(&t, &svc, "after the stale process continued");
}

#[test]
fn runs_on_sqlite_die_resume_and_are_worked_off_the_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let store = format!("sqlite:{}", db.display());
    let t = task("m1-done-after-delete");
    let svc = Svc::start(true);
    let args = [
        "--store",
        store.as_str(),
        "--task",
        t.name.as_str(),
        "--tracker",
        svc.url.as_str(),
        "--approve",
        "off",
        "--lease-secs",
        "1",
    ];
    let mut dying = args.to_vec();
    dying.extend(["--die-after", "code_patch"]);
    common::triage(&dying).expect_killed();
    // The worlds default to PATH.worlds beside the database.
    let worlds = PathBuf::from(format!("{}.worlds", db.display()));
    let run = world_runs(&worlds).remove(0);
    // A temp file a killed patch write left in the workspace is removed
    // once the next process holds the run.
    let temp = worlds
        .join(format!("{run}.world/workspace"))
        .join(".todo.rs-1234-abcd.tmp");
    std::fs::write(&temp, "half a patch").unwrap();
    // A killed holder's lease simply expires (here after a second).
    let resumed = once_the_lease_expired(&args);
    resumed
        .expect_code(0)
        .expect_stdout(&format!("found run {run}"))
        .expect_stdout("removed 1 temp file left by a killed writer")
        .expect_stdout(&common::all_passed(&t));
    each_effect_once(&t, &svc, "sqlite, killed and resumed");
    // The same command again reports the finished run and calls nothing.
    common::triage(&args)
        .expect_code(0)
        .expect_stdout("is already done");
    each_effect_once(&t, &svc, "sqlite, reported again");

    // Two queued runs, one worker.
    let queue = tmp.path().join("queue.db");
    let queue_url = format!("sqlite:{}", queue.display());
    let qworlds = tmp.path().join("qworlds");
    let jobs: Vec<(String, TaskFile, Svc)> = ["s2-known-sync-timeout", "a3-login-after-wake"]
        .into_iter()
        .map(|name| {
            let svc = Svc::start(true);
            (
                enqueue(&queue_url, &qworlds, name, &svc.url),
                task(name),
                svc,
            )
        })
        .collect();
    let out = common::triage(&[
        "worker",
        "--store",
        &queue_url,
        "--state",
        arg(&qworlds),
        "--approve",
        "off",
    ]);
    out.expect_code(0);
    let mut done = ran(&out);
    done.sort();
    let mut want: Vec<String> = jobs.iter().map(|(r, _, _)| r.clone()).collect();
    want.sort();
    assert_eq!(done, want, "{}", out.stdout);
    let sq = durable::store::SqliteStore::open(&queue).unwrap();
    for (run, t, svc) in &jobs {
        assert!(record(&sq, run).done);
        each_effect_once(t, svc, run);
    }
}

/// A worker that meets a gated call with nobody to ask pauses that run,
/// keeps it held so it does not claim it again, finishes the rest, and
/// exits 4; a person then resumes the paused run by its ID.
#[test]
fn a_worker_keeps_a_paused_run_held_and_exits_4() {
    let tmp = tempfile::tempdir().unwrap();
    let queue = format!("sqlite:{}", tmp.path().join("q.db").display());
    let worlds = tmp.path().join("w");
    let svc = Svc::start(true);
    let run = enqueue(&queue, &worlds, "m1-done-after-delete", &svc.url);
    let worker = ["worker", "--store", queue.as_str(), "--state", arg(&worlds)];
    let out = common::triage(&worker);
    out.expect_code(4)
        .expect_stdout(&format!("run {run} ended: paused (exit 4)"))
        .expect_stdout("gave back 1");
    let t = task("m1-done-after-delete");
    common::triage(&[
        "--store",
        &queue,
        "--state",
        arg(&worlds),
        "--run",
        &run,
        "--approve",
        "off",
    ])
    .expect_code(0)
    .expect_stdout(&common::all_passed(&t));
    each_effect_once(&t, &svc, "paused by the worker, resumed by a person");
}

/// Bad input: a clear error, exit 2 (or 5 when the database cannot be
/// reached), and nothing created.
#[test]
fn bad_store_input_is_refused_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let sqlite = format!("sqlite:{}", db.display());
    let worlds = tmp.path().join("worlds");
    let w = arg(&worlds);
    let svc = Svc::start(true);
    let tracker = svc.url.as_str();
    let dead = "http://127.0.0.1:1";
    let missing_dir = format!("sqlite:{}", tmp.path().join("no-dir/runs.db").display());
    // A database under a regular file: its "directory" exists, as a file.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("a-file"), "").unwrap();
    let under_file = format!(
        "sqlite:{}",
        elsewhere.path().join("a-file/runs.db").display()
    );
    let m1 = "m1-done-after-delete";
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec![
                "--store",
                "mysql://h/db",
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            2,
            "unknown store scheme \"mysql\"",
        ),
        (
            vec!["--store", "sqlite:", "--task", m1, "--tracker", tracker],
            2,
            "sqlite: needs the database file's path",
        ),
        (
            vec!["--store", &sqlite, "--state", w, "--task", m1],
            2,
            "a database --store needs --tracker URL",
        ),
        (
            vec![
                "--store",
                "postgres://h/db",
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            2,
            "--state DIR is required with a Postgres store",
        ),
        (
            vec![
                "--store",
                "postgresql:///db?host=/nonexistent-triage-socket-dir&connect_timeout=5",
                "--state",
                w,
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            5,
            "connect to postgresql:///db?host=/nonexistent-triage-socket-dir: error connecting to server: ",
        ),
        (
            vec![
                "--store",
                "postgresql:///db?host=/tmp&bogus_option=1",
                "--state",
                w,
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            2,
            "parse the connection string of the Postgres store: invalid connection string: unknown option",
        ),
        (
            vec![
                "--store", &sqlite, "--state", w, "--task", m1, "--tracker", dead,
            ],
            5,
            "the tracker at http://127.0.0.1:1 does not answer",
        ),
        (
            vec![
                "enqueue", "--store", &sqlite, "--state", w, "--task", m1, "--tracker", dead,
            ],
            5,
            "the tracker at http://127.0.0.1:1 does not answer",
        ),
        (
            vec![
                "--store",
                &missing_dir,
                "--state",
                w,
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            2,
            "does not exist",
        ),
        (
            vec![
                "--store",
                &under_file,
                "--state",
                w,
                "--task",
                m1,
                "--tracker",
                tracker,
            ],
            2,
            "a-file is not a directory",
        ),
        (
            vec!["--state", w, "--task", m1, "--lease-secs", "5"],
            2,
            "--lease-secs is for a database --store",
        ),
        (
            vec!["--store", &sqlite, "--state", w, "--run", "m1-x"],
            2,
            "no run m1-x",
        ),
        (
            vec!["enqueue", "--store", &sqlite, "--state", w, "--task", m1],
            2,
            "enqueue needs --tracker URL",
        ),
        (
            vec!["worker", "--store", w],
            2,
            "enqueue and worker need a database store",
        ),
        (
            vec!["worker", "--store", &sqlite, "--state", w],
            2,
            "no such database",
        ),
    ];
    for (args, code, text) in cases {
        // A tracker that is gone is refused as it is after the seconds a
        // restarting one is given; the others never reach a tracker.
        let out = common::triage_gone_tracker(&args);
        assert_eq!(out.code(), Some(code), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(text),
            "{args:?}: {text:?} not in {}",
            out.stderr
        );
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
    let args = [
        "--store",
        &sqlite,
        "--state",
        w,
        "--task",
        m1,
        "--tracker",
        tracker,
    ];
    // How long to try a tracker, and how long an SQLite writer waits for
    // another's lock: whole milliseconds, or a clear refusal.
    let variables = [
        (
            common::UNREACHABLE_ENV,
            &["soon", "-1", "1.5", "", "600001", "18446744073709551615"][..],
        ),
        ("TRIAGE_SQLITE_BUSY_MS", &["soon", "-1", "600001"][..]),
    ];
    for (variable, bads) in variables {
        for bad in bads {
            let mut cmd = common::command(&args);
            cmd.env(variable, bad);
            let out = common::wait_or_hang(cmd, &args, WAIT);
            assert_eq!(out.code(), Some(2), "{variable}={bad:?}: {out:?}");
            assert!(
                out.stderr.contains(&format!(
                    "{variable}={bad:?}: expected a whole number of milliseconds, at most 600000"
                )),
                "{bad:?}: {}",
                out.stderr
            );
            let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
            assert!(left.is_empty(), "{variable}={bad:?} created {left:?}");
        }
    }
}

/// A database that is not there: the server's own message, the store
/// named once (user, socket, database; no password), exit 5, nothing made.
#[test]
fn a_postgres_connection_error_says_what_the_server_said() {
    let Some(pg) = PgCluster::start(false) else {
        return;
    };
    let url = pg_url(&pg, "exists");
    let url = url.replace("/exists?", "/no_such_db?");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let svc = Svc::start(true);
    let out = common::triage(&[
        "--store",
        &url,
        "--state",
        arg(&worlds),
        "--task",
        "m1-done-after-delete",
        "--tracker",
        &svc.url,
    ]);
    assert_eq!(out.code(), Some(5), "{out:?}");
    assert!(
        out.stderr
            .contains("database \"no_such_db\" does not exist"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("connect to postgresql:///no_such_db?host=/"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("postgres::"), "{}", out.stderr);
    assert!(!worlds.exists(), "the worlds were made: {out:?}");
}

/// The window a fenced save cannot close: a process stopped with its
/// request already in flight (held inside the service before it is
/// recorded) while a second process takes the run over and files the
/// issue. When the held request goes on, the service refuses it by its
/// older epoch (`412`), even keyless; the first process, continued, stops
/// as a stale holder (exit 3), and every effect is there once.
#[test]
fn a_stopped_process_whose_request_is_in_flight_is_refused_by_its_epoch() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc, Mutex};

    let Some(pg) = PgCluster::start(false) else {
        return;
    };
    let url = pg_url(&pg, "inflight");
    let tmp = tempfile::tempdir().unwrap();
    let worlds = tmp.path().join("worlds");
    let t = task("m1-done-after-delete");
    let title = t.first_call_of("issue_file").args["title"]
        .as_str()
        .unwrap()
        .to_owned();
    // Hold the first filing of the issue until released.
    let (arrived_tx, arrived_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (arrived_tx, release_rx) = (Mutex::new(arrived_tx), Mutex::new(release_rx));
    let held = AtomicBool::new(false);
    let mut opts = Options::keyless();
    opts.hold = Some(Arc::new(move |req: &tracker::Request| {
        let ours = matches!(req, tracker::Request::FileIssue { title: t, .. } if *t == title);
        if ours && !held.swap(true, Ordering::SeqCst) {
            let _ = arrived_tx.lock().unwrap().send(());
            let _ = release_rx.lock().unwrap().recv_timeout(WAIT);
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let server = tracker::http::spawn(
        Service::open(dir.path(), opts).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let svc = Svc {
        url: server.url(),
        server: Some(server),
        _dir: dir,
    };
    let base = [
        "--store",
        url.as_str(),
        "--state",
        arg(&worlds),
        "--lease-secs",
        "1",
        "--approve",
        "off",
    ];
    let mut first_args = base.to_vec();
    first_args.extend(["--task", &t.name, "--tracker", &svc.url]);
    let first = spawn(&first_args);
    arrived_rx
        .recv_timeout(WAIT)
        .expect("the first process's filing never arrived");
    let run = world_runs(&worlds).remove(0);
    // SAFETY: a signal to our own child, alive, its request held.
    assert_eq!(unsafe { libc::kill(first.id() as i32, libc::SIGSTOP) }, 0);

    let mut second_args = base.to_vec();
    second_args.extend(["--run", &run]);
    once_the_lease_expired(&second_args)
        .expect_code(0)
        .expect_stdout(&common::all_passed(&t));
    let store = durable::store::PostgresStore::connect(&url).unwrap();
    let finished = record(&store, &run);
    assert!(finished.done);

    // The held request goes on now, with the first process's older epoch.
    release_tx.send(()).unwrap();
    // SAFETY: as above; the child is stopped, not gone.
    assert_eq!(unsafe { libc::kill(first.id() as i32, libc::SIGCONT) }, 0);
    let out = finish(first);
    out.expect_code(3)
        .expect_stderr("at epoch 1 is stale: epoch 2 of it was recorded here");
    assert_eq!(
        record(&store, &run),
        finished,
        "the stale process saved nothing"
    );
    each_effect_once(&t, &svc, "after the stale request was refused");
}

/// `--store DIR` is `--state DIR`: the same files, the same run found
/// again by either; naming two different directories is refused.
#[test]
fn a_directory_store_is_the_state_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let t = task("m1-done-after-delete");
    common::triage(&["--store", s, "--task", &t.name, "--approve", "off"])
        .expect_code(0)
        .expect_stdout(&common::all_passed(&t));
    let run = common::only_run(&state);
    assert!(state.join(format!("{run}.json")).is_file());
    common::triage(&["--state", s, "--task", &t.name])
        .expect_code(0)
        .expect_stdout(&format!("run {run} is already done"));
    let other = tmp.path().join("other");
    common::triage(&["--store", s, "--state", arg(&other), "--task", &t.name])
        .expect_code(2)
        .expect_stderr("--store DIR and --state DIR name two directories");
    assert!(!other.exists());
}

/// A queued run that cannot start (its world lost its task copy) fails
/// once; the worker keeps it claimed rather than claim it again and
/// again, runs the rest, and exits 5; the broken world is left as it was.
#[test]
fn a_worker_tries_a_broken_run_once_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let queue = format!("sqlite:{}", tmp.path().join("q.db").display());
    let worlds = tmp.path().join("w");
    let (bad_svc, good_svc) = (Svc::start(true), Svc::start(true));
    let bad = enqueue(&queue, &worlds, "a3-login-after-wake", &bad_svc.url);
    let good = enqueue(&queue, &worlds, "s2-known-sync-timeout", &good_svc.url);
    let copy = worlds.join(format!("{bad}.world/task.json"));
    std::fs::remove_file(&copy).unwrap();
    let out = common::triage_or_hang(
        &["worker", "--store", &queue, "--state", arg(&worlds)],
        WAIT,
    );
    out.expect_code(5)
        .expect_stdout(&format!("run {bad} ended: run_error (exit 5)"))
        .expect_stdout("gave back 1")
        .expect_stderr("is not whole");
    assert_eq!(ran(&out), vec![good.clone()], "{}", out.stdout);
    assert_eq!(
        out.stdout.matches(&format!("run {bad} ended")).count(),
        1,
        "tried once: {}",
        out.stdout
    );
    assert!(!copy.exists(), "nothing replaced");
    each_effect_once(&task("s2-known-sync-timeout"), &good_svc, &good);
}

/// A queued run whose tracker service has gone since it was queued: the
/// worker tries it once, gives it back, and counts it once.
#[test]
fn a_worker_counts_a_run_whose_tracker_is_gone_once() {
    let tmp = tempfile::tempdir().unwrap();
    let queue = format!("sqlite:{}", tmp.path().join("q.db").display());
    let worlds = tmp.path().join("w");
    let svc = Svc::start(true);
    let run = enqueue(&queue, &worlds, "m1-done-after-delete", &svc.url);
    drop(svc);
    let worker = ["worker", "--store", &queue, "--state", arg(&worlds)];
    let out = common::wait_or_hang(common::command_gone_tracker(&worker), &worker, WAIT);
    out.expect_code(5)
        .expect_stdout(&format!("run {run} ended: run_error (exit 5)"))
        .expect_stdout("ran 1 run(s), gave back 1 it could not finish; exit 5")
        .expect_stderr(&format!("DELETE FROM runs WHERE run_id = '{run}'"));
    // A new run of the task is refused while that one is unfinished, and
    // the refusal names what to remove to give it up.
    let other = Svc::start(true);
    let world = worlds.join(format!("{run}.world"));
    common::triage(&[
        "--store",
        &queue,
        "--state",
        arg(&worlds),
        "--task",
        "m1-done-after-delete",
        "--new-run",
        "--tracker",
        &other.url,
    ])
    .expect_code(2)
    .expect_stderr(&format!(
        "{} and DELETE FROM runs WHERE run_id = '{run}'",
        world.display()
    ));
}

/// A run another process holds (its lease renewed, as a live holder's
/// is): the worker waits one lease (and a second) for it, then exits 3
/// naming the run and its holder; never "ran 0 run(s)" with exit 0. Once
/// that holder is gone (its lease expired, as a killed one's does), a
/// worker takes the run over and finishes it.
#[test]
fn a_worker_does_not_exit_0_while_another_process_holds_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("q.db");
    let queue = format!("sqlite:{}", db.display());
    let worlds = tmp.path().join("w");
    let svc = Svc::start(true);
    let run = enqueue(&queue, &worlds, "m1-done-after-delete", &svc.url);
    let store = durable::store::SqliteStore::open(&db).unwrap();
    let id = RunId::parse(&run).unwrap();
    let claim = store
        .claim(&id, "elsewhere", Duration::from_secs(2))
        .unwrap();
    assert!(
        matches!(claim, durable::store::Claim::Won { .. }),
        "{claim:?}"
    );
    // The worker's own lease is 1 s: it waits 2 s; the holder's lease runs
    // 2 s from the claim, so the holder is renewed once meanwhile.
    let worker = [
        "worker",
        "--store",
        queue.as_str(),
        "--state",
        arg(&worlds),
        "--lease-secs",
        "1",
        "--approve",
        "off",
    ];
    let child = spawn(&worker);
    std::thread::sleep(Duration::from_millis(1000));
    let durable::store::Claim::Won { lease, .. } = claim else {
        unreachable!()
    };
    store.renew(&lease, Duration::from_secs(30)).unwrap();
    let out = finish(child);
    out.expect_code(3)
        .expect_stdout("ran 0 run(s), left 1 unfinished run(s) other processes still hold")
        .expect_stdout(&format!("{run} leased by elsewhere"));
    // A holder killed while holding the run: its 1 s lease is never
    // renewed. A worker waits for it to expire, takes the run over, and
    // finishes it.
    store.release(&lease).unwrap();
    let killed = store.claim(&id, "killed", Duration::from_secs(1)).unwrap();
    assert!(
        matches!(killed, durable::store::Claim::Won { .. }),
        "{killed:?}"
    );
    let mut worker = worker.to_vec();
    worker[6] = "3";
    let out = common::triage_or_hang(&worker, WAIT);
    out.expect_code(0)
        .expect_stdout("waiting up to 4 s for their leases to end");
    assert_eq!(ran(&out), vec![run.clone()], "{}", out.stdout);
}

/// A half-built world a killed start or enqueue left (`.<run>.world.tmp`)
/// is removed by the next start on the store, under the worlds' lock, as a
/// directory store removes it; the worlds are otherwise untouched.
#[test]
fn a_half_built_world_is_removed_on_a_database_store() {
    let tmp = tempfile::tempdir().unwrap();
    let queue = format!("sqlite:{}", tmp.path().join("q.db").display());
    let worlds = tmp.path().join("w");
    let svc = Svc::start(true);
    let run = enqueue(&queue, &worlds, "m1-done-after-delete", &svc.url);
    let half = worlds.join(".m1-done-after-delete-1795951947-1zq6xn9g.world.tmp");
    std::fs::create_dir_all(half.join("workspace")).unwrap();
    std::fs::write(half.join("task.json"), "{").unwrap();
    let out = common::triage_or_hang(
        &[
            "--store",
            &queue,
            "--state",
            arg(&worlds),
            "--run",
            &run,
            "--approve",
            "off",
        ],
        WAIT,
    );
    out.expect_code(0)
        .expect_stdout("removed 1 half-built world of killed starts");
    // The database and its WAL files are the user's alone, as the README
    // promises of every file a run writes.
    use std::os::unix::fs::PermissionsExt;
    for name in ["q.db", "q.db-wal", "q.db-shm"] {
        let path = tmp.path().join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            assert_ne!(name, "q.db", "the database is there");
            continue;
        };
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
    }
    assert!(!half.exists(), "the half-built world is gone");
    assert_eq!(world_runs(&worlds), vec![run]);
}

/// A run's tracker service gone when the run is resumed: the error names
/// the service once, and the hint starts it again at the run's own
/// address (a service on another port would be refused), not at port 0.
#[test]
fn a_gone_tracker_of_a_run_is_named_once_with_its_own_address() {
    let state = tempfile::tempdir().unwrap();
    let s = arg(state.path());
    let svc = Svc::start(true);
    let url = svc.url.clone();
    let m1 = "m1-done-after-delete";
    let args = [
        "--task",
        m1,
        "--state",
        s,
        "--tracker",
        url.as_str(),
        "--approve",
        "off",
    ];
    let mut killed = args.to_vec();
    killed.extend(["--die-after", "code_patch"]);
    common::triage(&killed).expect_killed();
    drop(svc);
    let out = common::triage_gone_tracker(&args);
    assert_eq!(out.code(), Some(5), "{out:?}");
    let error = out
        .stderr
        .lines()
        .find(|l| l.starts_with("triage: error:"))
        .unwrap_or_default();
    assert_eq!(error.matches("the tracker at").count(), 1, "{error}");
    assert!(
        error.contains(&format!("the tracker at {url} is unreachable")),
        "{error}"
    );
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    assert!(
        out.stderr.contains(&format!("--addr {addr};")) && !out.stderr.contains("127.0.0.1:0"),
        "{}",
        out.stderr
    );
}
