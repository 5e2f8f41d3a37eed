//! The four windows a new user found by killing `triage` (`kill -9`) at
//! random moments, each closed:
//!
//! * H1: killed after the task's seed issues reached the tracker service
//!   and before the run's first save. The next start adopts the run (same
//!   ID, so the same seed keys) instead of removing its world and starting a
//!   new run that files the seeds again: every seed on the service once,
//!   keyed or keyless.
//! * H2: killed after the final save and before exit. The same command
//!   reports the finished run — its saved answer and checks — and calls
//!   nothing: no model turn paid again, no effect repeated, exit 0.
//!   `--new-run` starts the task again.
//! * H3: a run whose checkpoint was deleted and whose world holds what it
//!   did is refused by name, never removed and never replaced by a fresh
//!   run.
//! * M1: `--run ID` of a run killed before its first save continues it
//!   under that ID.
//!
//! The kills land exactly: inside the tracker service (a request held
//! after its record is on disk, and the agent killed then), or at a named
//! point with `CRASHSWEEP_DIE_AT=name#n` (`world built`, `seeds filed`,
//! `exiting`), which makes the process `SIGKILL` itself there.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use agent::state::Phase;
use common::*;
use serde_json::Value;
use tracker::client::HttpTracker;
use tracker::service::{Hold, Options, Service};
use tracker::Request;

/// A bound on every wait, so a broken test fails instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

/// The task of the tracker tests: two seed issues, three searches, two
/// patches, one issue filed.
const SEEDED: &str = "m1-done-after-delete";

/// A keyed service, or a keyless one whose lookups cannot promise "not
/// found" (as in the sweep and `tests/it/chaos_http.rs`).
fn options(keyed: bool) -> Options {
    let mut o = if keyed {
        Options::keyed()
    } else {
        Options::keyless()
    };
    o.uncertain_lookup = !keyed;
    o
}

/// A tracker service on 127.0.0.1 whose `record`-th new request (if any)
/// is held after its record is on disk and before its answer goes out,
/// until released. Fields drop in order: the release first, so a failing
/// test never leaves the server waiting on a held request.
struct Served {
    release: Option<mpsc::Sender<()>>,
    arrived: mpsc::Receiver<()>,
    server: tracker::http::Running,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(keyed: bool, hold: Option<u64>) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let (arrived_tx, arrived) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let mut opts = options(keyed);
        if let Some(record) = hold {
            let seen = AtomicU64::new(0);
            let arrived_tx = Mutex::new(arrived_tx);
            let release_rx = Mutex::new(release_rx);
            let hook: Hold = Arc::new(move |_: &Request| {
                if seen.fetch_add(1, Ordering::SeqCst) + 1 == record {
                    let _ = arrived_tx.lock().unwrap().send(());
                    let _ = release_rx.lock().unwrap().recv_timeout(WAIT);
                }
            });
            opts.after = Some(hook);
        }
        let svc = Service::open(dir.path(), opts).unwrap();
        let server = tracker::http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
        Served {
            release: Some(release),
            arrived,
            server,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        self.server.url()
    }

    /// Wait until the held request is on disk, SIGKILL `agent`, then let
    /// the request go (its answer goes to a dead process).
    fn kill_when_held(&mut self, mut agent: Child, what: &str) -> Out {
        self.arrived
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{what}: the held request never arrived"));
        agent.kill().expect("SIGKILL");
        let out = finish(agent);
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
        out.expect_killed();
        out
    }

    fn issues(&self) -> Vec<tracker::Issue> {
        HttpTracker::connect(&self.url()).unwrap().issues().unwrap()
    }
}

fn finish(child: Child) -> Out {
    let out = child.wait_with_output().expect("triage output");
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `triage ARGS` with `CRASHSWEEP_DIE_AT=at`, to the end.
fn triage_dying_at(args: &[&str], at: &str) -> Out {
    let child = command(args)
        .env("CRASHSWEEP_DIE_AT", at)
        .spawn()
        .expect("run the triage binary");
    finish(child)
}

/// The run ID a start printed on its first line (`run       new run ID of
/// task …`).
#[track_caller]
fn printed_run(out: &Out) -> String {
    let first = out.stdout.lines().next().unwrap_or_default();
    first
        .strip_prefix("run       new run ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no new run on the first line:\n{}", out.stdout))
        .to_owned()
}

/// Every seed issue of `task`, and every issue and comment its calls make,
/// is on the service exactly once, and nothing else is.
#[track_caller]
fn each_effect_once_on_the_service(task: &TaskFile, issues: &[tracker::Issue], what: &str) {
    let mut titles: Vec<String> = task.json["tracker"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["title"].as_str().unwrap().to_owned())
        .collect();
    let calls = task.calls();
    for c in calls.iter().filter(|c| c.tool == "issue_file") {
        titles.push(c.args["title"].as_str().unwrap().to_owned());
    }
    for title in &titles {
        let n = issues.iter().filter(|i| &i.title == title).count();
        assert_eq!(
            n, 1,
            "{what}: issue {title:?} is there {n} times: {issues:#?}"
        );
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

/// No line of `out` says the command called the model or a tool or saved.
#[track_caller]
fn called_nothing(out: &Out, what: &str) {
    for line in out.stdout.lines() {
        for step in ["model ", "call ", "saved ", "ladder ", "returned "] {
            assert!(
                !line.starts_with(step),
                "{what}: a finished run did {line:?}\n{}",
                out.stdout
            );
        }
    }
}

/// H1: a kill after the seeds reached the service and before the run's
/// first save. The next start adopts the run under its ID and files every
/// seed exactly once — keyed (the same keys) and keyless (looked up
/// first) — and the run finishes with every check passing.
#[test]
fn a_kill_after_the_seeds_reached_the_service_files_each_seed_once() {
    let task = task(SEEDED);
    let seeds = task.seeded_issues() as u64;
    assert_eq!(seeds, 2, "the test wants a task with two seeds");
    // Held after seed 1 (half the seeds filed), after seed 2 (all filed),
    // and the exact window: a kill at the point between the seeds and the
    // record that they are filed.
    let moments: Vec<Option<u64>> = (1..=seeds).map(Some).chain([None]).collect();
    for keyed in [true, false] {
        for hold in &moments {
            let what = format!(
                "{} service, {}",
                if keyed { "keyed" } else { "keyless" },
                match hold {
                    Some(n) => format!("killed while seed {n} was answered"),
                    None => "killed at \"seeds filed\"".to_owned(),
                }
            );
            let tmp = tempfile::tempdir().unwrap();
            let state = tmp.path().join("state");
            let mut served = Served::start(keyed, *hold);
            let url = served.url();
            let args = [
                "--task",
                SEEDED,
                "--state",
                arg(&state),
                "--tracker",
                &url,
                "--approve",
                "off",
            ];
            let first = match hold {
                Some(_) => {
                    let agent = command(&args).spawn().expect("start triage");
                    served.kill_when_held(agent, &what)
                }
                None => {
                    let out = triage_dying_at(&args, "seeds filed#1");
                    out.expect_killed()
                        .expect_stderr("crashsweep: dying at seeds filed#1");
                    out
                }
            };
            let run = printed_run(&first);
            assert!(
                runs(&state).is_empty(),
                "{what}: killed before its first save"
            );

            let again = triage(&args);
            again
                .expect_code(0)
                .expect_stdout(&format!("run       adopted run {run} of task {SEEDED}"))
                .expect_stdout(&all_passed(&task));
            assert!(
                !again.stdout.contains("killed before their first save"),
                "{what}: no world is removed:\n{}",
                again.stdout
            );
            assert_eq!(
                runs(&state),
                vec![run.clone()],
                "{what}: one run, its ID kept"
            );
            each_effect_once_on_the_service(&task, &served.issues(), &what);
        }
    }
}

/// H2: a kill after the final save and before exit; then the same command
/// (what a person, or a supervisor that reruns until exit 0, runs) prints
/// the saved answer and checks, calls nothing, writes nothing and exits 0.
/// `--new-run` starts the task again, as a new run.
#[test]
fn the_same_command_after_a_kill_at_exit_reports_the_run_and_calls_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for service in [false, true] {
        let what = if service {
            "tracker service"
        } else {
            "own tracker"
        };
        let task = task(if service {
            "a3-login-after-wake"
        } else {
            SEEDED
        });
        let state = tmp.path().join(format!("state-{service}"));
        let served = Served::start(true, None);
        let url = served.url();
        let mut args = vec![
            "--task",
            task.name.as_str(),
            "--state",
            arg(&state),
            "--approve",
            "off",
        ];
        if service {
            args.extend(["--tracker", url.as_str()]);
        }
        let first = triage_dying_at(&args, "exiting#1");
        first.expect_stdout(&all_passed(&task));
        let run = only_run(&state);
        assert_eq!(checkpoint(&state, &run).phase, Phase::Done, "{what}");
        let files = tree(&state);
        let issues = served.issues();

        // The same command, as the READMEs say to run it: the finished run.
        let again = triage(&args);
        again
            .expect_code(0)
            .expect_stdout(&format!(
                "done      run {run} is already done: printing its saved answer, calling nothing"
            ))
            .expect_stdout("add --new-run")
            .expect_stdout(&all_passed(&task));
        called_nothing(&again, what);
        // And as JSON: no model call, no tool call, no save.
        let json = triage(&[&args[..], &["--json"]].concat());
        json.expect_code(0);
        let events: Vec<Value> = json
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
        for paid in [
            "model_call",
            "reply_saved",
            "tool_call",
            "result_saved",
            "started",
        ] {
            assert!(!names.contains(&paid), "{what}: {paid} in {names:?}");
        }
        assert!(names.contains(&"already_done"), "{what}: {names:?}");
        let summary = events.last().unwrap();
        assert_eq!(summary["event"], "summary", "{what}");
        assert_eq!(summary["already_done"], true, "{what}");
        assert_eq!(summary["run"], run.as_str(), "{what}");
        assert_eq!(runs(&state), vec![run.clone()], "{what}: no new run");
        assert_eq!(tree(&state), files, "{what}: nothing written");
        if service {
            assert_eq!(served.issues(), issues, "{what}: nothing filed again");
            each_effect_once_on_the_service(&task, &issues, what);
        } else {
            assert_each_effect_once(&task, &tracker(&state, &run));
        }

        // The window was the one meant: killed at exit, after the report.
        first
            .expect_killed()
            .expect_stderr("crashsweep: dying at exiting#1");
    }

    // --new-run: the task again, as a new run with a new ID.
    let state = tmp.path().join("state-false");
    let s = arg(&state);
    let done = only_run(&state);
    let fresh = triage(&[
        "--task",
        SEEDED,
        "--state",
        s,
        "--approve",
        "off",
        "--new-run",
    ]);
    fresh
        .expect_code(0)
        .expect_stdout(&format!("run       new run {SEEDED}-"))
        .expect_stdout(&all_passed(&task(SEEDED)));
    let all = runs(&state);
    assert_eq!(all.len(), 2, "{all:?}");
    let newest = all.iter().find(|r| **r != done).unwrap().clone();
    // The same command now reports the newest finished run.
    triage(&["--task", SEEDED, "--state", s, "--approve", "off"])
        .expect_code(0)
        .expect_stdout(&format!("done      run {newest} is already done"));
    // --new-run is refused while the task has an unfinished run.
    triage(&[
        "--task",
        SEEDED,
        "--state",
        s,
        "--new-run",
        "--die-after",
        "code_patch",
    ])
    .expect_killed();
    let out = triage(&["--task", SEEDED, "--state", s, "--new-run"]);
    out.expect_code(2)
        .expect_stderr("--new-run: task \"m1-done-after-delete\" has an unfinished run")
        .expect_stderr("(tools)");
    assert_eq!(runs(&state).len(), 3);
}

/// H3: a run whose checkpoint is gone and whose world shows it got past
/// its first save — a patched workspace, or only its first-save mark (it
/// searched, which leaves nothing in the world), or, for a world made
/// before runs wrote that mark, the patch alone — is refused by `--task`,
/// `--run` and `--new-run` alike: exit 5, naming the world and what to do;
/// nothing removed, no new run. Its checkpoint put back, it finishes.
#[test]
fn a_world_whose_checkpoint_was_deleted_is_refused_not_replaced() {
    for (tool, drop_mark, sign) in [
        (
            "code_patch",
            false,
            "checkpointed marks its first save as done",
        ),
        (
            "code_patch",
            true,
            "workspace/todo_tests.rs is not one the task seeded",
        ),
        ("search", false, "checkpointed marks its first save as done"),
    ] {
        let what = format!("killed after {tool}, mark dropped: {drop_mark}");
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let task = task(SEEDED);
        let run = killed_run(&state, SEEDED, tool);
        let w = world(&state, &run);
        let saved = tmp.path().join("checkpoint.json");
        fs::rename(state.join(format!("{run}.json")), &saved).unwrap();
        if drop_mark {
            fs::remove_file(w.join("checkpointed")).unwrap();
        }
        let before = tree(&state);
        for args in [
            vec!["--task", SEEDED, "--state", s, "--approve", "off"],
            vec!["--run", run.as_str(), "--state", s, "--approve", "off"],
            vec![
                "--task",
                SEEDED,
                "--state",
                s,
                "--approve",
                "off",
                "--new-run",
            ],
        ] {
            let out = triage(&args);
            out.expect_code(5)
                .expect_stderr(&format!(
                    "run {run} has no checkpoint, but its world {} shows it got past its first save",
                    w.display()
                ))
                .expect_stderr(sign)
                .expect_stderr("neither removed nor started afresh")
                .expect_stderr(&format!("restore its checkpoint {s}/{run}.json"))
                .expect_stderr("move the world");
            assert!(
                !out.stdout.contains("cleanup"),
                "{what} {args:?}: {}",
                out.stdout
            );
            assert!(!out.stdout.contains("new run"), "{what} {args:?}");
            assert_eq!(
                tree(&state),
                before,
                "{what} {args:?}: nothing removed or created"
            );
        }

        // The checkpoint put back: the run goes on and finishes, each
        // effect once.
        fs::rename(&saved, state.join(format!("{run}.json"))).unwrap();
        triage(&["--task", SEEDED, "--state", s, "--approve", "off"])
            .expect_code(0)
            .expect_stdout(&format!("found run {run}"))
            .expect_stdout(&all_passed(&task));
        assert!(w.join("checkpointed").is_file(), "{what}: marked again");
        assert_each_effect_once(&task, &tracker(&state, &run));
    }
}

/// M1: `--run ID` of a run killed before its first save — the ID the
/// command printed as its new run — continues that run, on the tracker
/// service (killed while a seed was answered) and on its own tracker
/// (killed at "world built", the world in place and no checkpoint yet).
#[test]
fn run_id_of_a_run_killed_before_its_first_save_continues_it() {
    let task = task(SEEDED);
    let created = created_files(&task);
    let created: Vec<&str> = created.iter().map(String::as_str).collect();
    for service in [true, false] {
        let what = if service {
            "tracker service"
        } else {
            "own tracker"
        };
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let mut served = Served::start(true, Some(1));
        let url = served.url();
        let mut args = vec!["--task", SEEDED, "--state", s, "--approve", "off"];
        if service {
            args.extend(["--tracker", url.as_str()]);
        }
        let first = if service {
            let agent = command(&args).spawn().expect("start triage");
            served.kill_when_held(agent, what)
        } else {
            let out = triage_dying_at(&args, "world built#1");
            out.expect_killed()
                .expect_stderr("crashsweep: dying at world built#1");
            out
        };
        // Killed at "world built", the command had not printed its first
        // line yet: the run is the world's.
        let run = if service {
            printed_run(&first)
        } else {
            only_world(&state)
        };
        assert!(runs(&state).is_empty(), "{what}: no checkpoint yet");
        assert!(world(&state, &run).is_dir(), "{what}: its world is there");

        let mut by_id = vec!["--run", run.as_str(), "--state", s, "--approve", "off"];
        if service {
            by_id.extend(["--tracker", url.as_str()]);
        }
        triage(&by_id)
            .expect_code(0)
            .expect_stdout(&format!("run       adopted run {run} of task {SEEDED}"))
            .expect_stdout(&all_passed(&task));
        assert_eq!(runs(&state), vec![run.clone()], "{what}");
        assert_eq!(checkpoint(&state, &run).phase, Phase::Done, "{what}");
        if service {
            each_effect_once_on_the_service(&task, &served.issues(), what);
        } else {
            assert_each_effect_once(&task, &tracker(&state, &run));
            assert_eq!(tree(&state), one_run_files(&run, &task, &created), "{what}");
        }
        // And the finished run, by its ID, is reported.
        triage(&by_id)
            .expect_code(0)
            .expect_stdout("is already done");
        assert_no_world_without_checkpoint(&state);
    }
}

/// The run of the one world in `state`.
#[track_caller]
fn only_world(state: &Path) -> String {
    let worlds: Vec<String> = fs::read_dir(state)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".world").map(str::to_owned)
        })
        .collect();
    assert_eq!(worlds.len(), 1, "{worlds:?}");
    worlds.into_iter().next().unwrap()
}

/// Every world in `state` has its checkpoint.
#[track_caller]
fn assert_no_world_without_checkpoint(state: &Path) {
    for e in fs::read_dir(state).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(run) = name.strip_suffix(".world") {
            assert!(state.join(format!("{run}.json")).is_file(), "{name}");
        }
    }
}
