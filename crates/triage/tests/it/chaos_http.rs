//! Crash it for real, across a real socket: `triage --tracker URL` against
//! the tracker service on 127.0.0.1.
//!
//! * The agent (the `triage` process) is killed with SIGKILL while one of
//!   its requests is in flight in the server — held there before the record
//!   is made, or after it is on disk and before the answer goes out — and
//!   the request is then let go. The rerun finishes the run.
//! * The tracker server (a process of its own) is killed with SIGKILL at the
//!   same two moments and restarted on the same port and directory while
//!   the agent runs on.
//!
//! With keys on, every effect happens exactly once after the run finishes.
//! With keys off (a keyless server whose lookups cannot promise "not
//! found", as in the sweep), there is no duplicate either, and the ladder
//! asks a person: the run pauses (exit 4).
//!
//! Bounded: every mutating call of one task × 2 moments × keyed/keyless,
//! one kill each. (`cargo xtask chaos` is another test.)

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{arg, Out, TaskFile};
use serde_json::Value;
use tracker::client::HttpTracker;
use tracker::service::{Hold, Options, Service};
use tracker::Request;

const TASK: &str = "a3-login-after-wake";
/// The environment variable that turns this test binary into a tracker
/// server (see [`tracker_server_child`]).
const CHILD_ENV: &str = "CRASHSWEEP_CHAOS_TRACKER";
/// A bound on every wait, so a broken test fails instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Moment {
    /// Held after the request is registered, before the record exists.
    Before,
    /// Held after the record is on disk, before the answer is sent.
    After,
}

impl Moment {
    fn name(self) -> &'static str {
        match self {
            Moment::Before => "before",
            Moment::After => "after",
        }
    }
}

fn task() -> TaskFile {
    common::task(TASK)
}

/// The run's own new records, by position among all new records (the
/// task's seed issues come first).
fn run_records(t: &TaskFile) -> std::ops::RangeInclusive<u64> {
    let seeds = t.seeded_issues() as u64;
    let mutating = t
        .calls()
        .iter()
        .filter(|c| c.tool == "issue_file" || c.tool == "issue_comment")
        .count() as u64;
    seeds + 1..=seeds + mutating
}

fn triage_args(state: &std::path::Path, url: &str) -> Vec<String> {
    [
        "--task",
        TASK,
        "--state",
        arg(state),
        "--tracker",
        url,
        "--approve",
        "off",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn_triage(args: &[String]) -> Child {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    common::command(&a).spawn().expect("start triage")
}

fn finish(child: Child) -> Out {
    let out = child.wait_with_output().expect("triage output");
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn kill(child: &mut Child) {
    // SIGKILL: Child::kill sends it on Unix.
    child.kill().expect("SIGKILL");
    let _ = child.wait();
}

/// Every effect of the task is in the tracker exactly once (keyed), or at
/// most once (keyless), and nothing else is.
fn check_effects(t: &TaskFile, url: &str, exactly: bool, what: &str) {
    let issues = HttpTracker::connect(url).unwrap().issues().unwrap();
    let calls = t.calls();
    let mut expected_titles: Vec<String> = t.json["tracker"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["title"].as_str().unwrap().to_owned())
        .collect();
    for c in calls.iter().filter(|c| c.tool == "issue_file") {
        expected_titles.push(c.args["title"].as_str().unwrap().to_owned());
    }
    for title in &expected_titles {
        let n = issues.iter().filter(|i| &i.title == title).count();
        if exactly {
            assert_eq!(n, 1, "{what}: issue {title:?} filed {n} times: {issues:#?}");
        } else {
            assert!(
                n <= 1,
                "{what}: issue {title:?} filed {n} times: {issues:#?}"
            );
        }
    }
    assert!(
        issues.len() <= expected_titles.len(),
        "{what}: extra issues {issues:#?}"
    );
    let comments: Vec<&str> = issues
        .iter()
        .flat_map(|i| i.comments.iter().map(|c| c.body.as_str()))
        .collect();
    for c in calls.iter().filter(|c| c.tool == "issue_comment") {
        let body = c.args["body"].as_str().unwrap();
        let n = comments.iter().filter(|b| **b == body).count();
        if exactly {
            assert_eq!(n, 1, "{what}: comment made {n} times: {issues:#?}");
        } else {
            assert!(n <= 1, "{what}: comment made {n} times: {issues:#?}");
        }
    }
}

/// How a rerun after the kill must end: keyed, done with every check
/// passing (exit 0); keyless, paused on the ladder's question (exit 4).
fn expect_rerun(out: &Out, keyed: bool, what: &str) {
    if keyed {
        assert_eq!(out.code(), Some(0), "{what}: {out:?}");
    } else {
        assert_eq!(out.code(), Some(4), "{what}: {out:?}");
        assert!(
            out.stderr.contains("only a person can say"),
            "{what}: {out:?}"
        );
    }
}

fn options(keyed: bool) -> Options {
    let mut o = if keyed {
        Options::keyed()
    } else {
        Options::keyless()
    };
    o.uncertain_lookup = !keyed;
    o
}

/// A hook that blocks the `record`-th new request until released.
fn blocking_hook(record: u64, arrived: mpsc::Sender<()>, release: mpsc::Receiver<()>) -> Hold {
    let seen = AtomicU64::new(0);
    let arrived = Mutex::new(arrived);
    let release = Mutex::new(release);
    Arc::new(move |_: &Request| {
        if seen.fetch_add(1, Ordering::SeqCst) + 1 == record {
            let _ = arrived.lock().unwrap().send(());
            let _ = release.lock().unwrap().recv_timeout(WAIT);
        }
    })
}

#[test]
fn the_agent_killed_while_its_request_is_in_flight_does_each_effect_once() {
    let t = task();
    let mut iterations = 0;
    for keyed in [true, false] {
        for moment in [Moment::Before, Moment::After] {
            for record in run_records(&t) {
                let what = format!(
                    "agent SIGKILL, {} tracker, record {record}, {}",
                    if keyed { "keyed" } else { "keyless" },
                    moment.name()
                );
                let dir = tempfile::tempdir().unwrap();
                let state = tempfile::tempdir().unwrap();
                let (arrived_tx, arrived_rx) = mpsc::channel();
                let (release_tx, release_rx) = mpsc::channel();
                let mut opts = options(keyed);
                let hook = Some(blocking_hook(record, arrived_tx, release_rx));
                match moment {
                    Moment::Before => opts.hold = hook,
                    Moment::After => opts.after = hook,
                }
                let svc = Service::open(dir.path(), opts).unwrap();
                let server = tracker::http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
                let url = server.url();
                let args = triage_args(state.path(), &url);

                let mut agent = spawn_triage(&args);
                arrived_rx
                    .recv_timeout(WAIT)
                    .unwrap_or_else(|_| panic!("{what}: the request never arrived"));
                kill(&mut agent);
                release_tx.send(()).unwrap();

                let rerun = common::triage(&args.iter().map(String::as_str).collect::<Vec<_>>());
                expect_rerun(&rerun, keyed, &what);
                check_effects(&t, &url, keyed, &what);
                server.stop();
                iterations += 1;
            }
        }
    }
    assert_eq!(iterations, 8);
}

/// Run this test binary as a tracker server (the restartable process of
/// [`the_tracker_killed_and_restarted_mid_run_does_each_effect_once`]): a
/// no-op unless [`CHILD_ENV`] is set.
#[test]
fn tracker_server_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let keyed = spec["keyed"].as_bool().unwrap();
    let mut opts = options(keyed);
    if let Some(record) = spec["hold"].as_u64() {
        let moment = spec["moment"].as_str().unwrap().to_owned();
        let seen = AtomicU64::new(0);
        let hook: Hold = Arc::new(move |_: &Request| {
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == record {
                println!("chaos: holding record {record} {moment}");
                // Until the test kills this process.
                std::thread::sleep(WAIT);
            }
        });
        if spec["moment"] == "before" {
            opts.hold = Some(hook);
        } else {
            opts.after = Some(hook);
        }
    }
    let dir = std::path::PathBuf::from(spec["dir"].as_str().unwrap());
    let addr: SocketAddr = spec["addr"].as_str().unwrap().parse().unwrap();
    let svc = Service::open(&dir, opts).unwrap();
    let server = tracker::http::spawn(svc, addr).unwrap();
    println!("chaos: listening on {}", server.url());
    std::thread::sleep(WAIT * 2);
}

/// A tracker server in a process of its own, read line by line.
struct ServerProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl ServerProcess {
    fn start(
        dir: &std::path::Path,
        addr: SocketAddr,
        keyed: bool,
        hold: Option<(u64, Moment)>,
    ) -> ServerProcess {
        let spec = serde_json::json!({
            "dir": arg(dir), "addr": addr.to_string(), "keyed": keyed,
            "hold": hold.map(|h| h.0), "moment": hold.map(|h| h.1.name()),
        });
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "chaos_http::tracker_server_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, spec.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // libtest prints "test NAME ... " before the test's own output,
            // on the same line.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(at) = line.find("chaos: ") {
                    if tx.send(line[at..].to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        let p = ServerProcess { child, lines };
        p.expect("chaos: listening on");
        p
    }

    fn expect(&self, prefix: &str) -> String {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("the server never printed {prefix:?}"));
        assert!(line.starts_with(prefix), "{line:?} is not {prefix:?}");
        line
    }

    fn kill(mut self) {
        kill(&mut self.child);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_loopback_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[test]
fn the_tracker_killed_and_restarted_mid_run_does_each_effect_once() {
    let t = task();
    let mut iterations = 0;
    for keyed in [true, false] {
        for moment in [Moment::Before, Moment::After] {
            for record in run_records(&t) {
                let what = format!(
                    "tracker SIGKILL + restart, {} tracker, record {record}, {}",
                    if keyed { "keyed" } else { "keyless" },
                    moment.name()
                );
                let dir = tempfile::tempdir().unwrap();
                let state = tempfile::tempdir().unwrap();
                let addr = free_loopback_addr();
                let url = format!("http://{addr}");
                let server = ServerProcess::start(dir.path(), addr, keyed, Some((record, moment)));
                let args = triage_args(state.path(), &url);
                let agent = spawn_triage(&args);
                server.expect(&format!("chaos: holding record {record} {}", moment.name()));
                server.kill();
                let server = ServerProcess::start(dir.path(), addr, keyed, None);
                let out = finish(agent);
                expect_rerun(&out, keyed, &what);
                check_effects(&t, &url, keyed, &what);
                drop(server);
                iterations += 1;
            }
        }
    }
    assert_eq!(iterations, 8);
}
