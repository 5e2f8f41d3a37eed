//! Helpers for the tests that run the built `triage` binary as a child
//! process, each in its own temporary state directory.

#![allow(dead_code)] // each test file uses its own subset

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;

use durable::{Checkpoint, DiskDir, RunId, State};
use serde_json::Value;
use tracker::{Mode, Request, Tracker};

/// The built binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_triage");

/// What a child run printed and how it ended.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The exit code; `None` if a signal ended the process.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Whether the process died of SIGKILL.
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(libc::SIGKILL)
    }

    /// Panic with everything the child printed unless it exited with `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Out {
        assert_eq!(
            self.code(),
            Some(code),
            "expected exit {code}; got {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panic unless the child killed itself with SIGKILL.
    #[track_caller]
    pub fn expect_killed(&self) -> &Out {
        assert!(
            self.killed(),
            "expected death by SIGKILL; got {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panic unless stdout contains `text`.
    #[track_caller]
    pub fn expect_stdout(&self, text: &str) -> &Out {
        assert!(
            self.stdout.contains(text),
            "{text:?} not in stdout:\n{}--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panic unless stderr contains `text`.
    #[track_caller]
    pub fn expect_stderr(&self, text: &str) -> &Out {
        assert!(
            self.stderr.contains(text),
            "{text:?} not in stderr:\n{}--- stdout\n{}",
            self.stderr,
            self.stdout
        );
        self
    }
}

/// The command, with stdin closed: never a terminal, whatever runs the
/// tests, so `--approve on` never blocks.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Run `triage ARGS` to the end.
pub fn triage(args: &[&str]) -> Out {
    let out = command(args).output().expect("run the triage binary");
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A path as an argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// One recorded call of a task file.
#[derive(Clone, Debug)]
pub struct Call {
    pub turn: u32,
    pub id: String,
    pub tool: String,
    pub args: Value,
}

/// A task file of `crates/triage/tasks`, as JSON.
#[derive(Clone, Debug)]
pub struct TaskFile {
    pub name: String,
    pub json: Value,
}

impl TaskFile {
    pub fn calls(&self) -> Vec<Call> {
        let mut calls = Vec::new();
        for (n, reply) in self.json["replies"].as_array().unwrap().iter().enumerate() {
            for c in reply["calls"].as_array().into_iter().flatten() {
                calls.push(Call {
                    turn: n as u32 + 1,
                    id: c["id"].as_str().unwrap().to_owned(),
                    tool: c["tool"].as_str().unwrap().to_owned(),
                    args: c["args"].clone(),
                });
            }
        }
        calls
    }

    /// Each tool the task calls, in order of first call.
    pub fn tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = Vec::new();
        for c in self.calls() {
            if !tools.contains(&c.tool) {
                tools.push(c.tool);
            }
        }
        tools
    }

    pub fn first_call_of(&self, tool: &str) -> Call {
        self.calls().into_iter().find(|c| c.tool == tool).unwrap()
    }

    pub fn seeded_issues(&self) -> usize {
        self.json["tracker"].as_array().map_or(0, Vec::len)
    }

    pub fn checks(&self) -> usize {
        self.json["checks"].as_array().unwrap().len()
    }

    pub fn approval(&self) -> Vec<String> {
        match self.json.get("approval") {
            Some(v) => v
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect(),
            None => vec!["issue_file".to_owned()],
        }
    }
}

pub fn tasks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

/// Every built-in task, by name.
pub fn tasks() -> Vec<TaskFile> {
    let mut tasks: Vec<TaskFile> = std::fs::read_dir(tasks_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| TaskFile {
            name: p.file_stem().unwrap().to_str().unwrap().to_owned(),
            json: serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
        })
        .collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    tasks
}

pub fn task(name: &str) -> TaskFile {
    tasks().into_iter().find(|t| t.name == name).unwrap()
}

/// The IDs of the runs in a state directory (one per `*.json`).
pub fn runs(state: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(".json").map(str::to_owned))
        .filter(|n| !n.starts_with('.'))
        .collect();
    runs.sort();
    runs
}

/// The one run in a state directory.
#[track_caller]
pub fn only_run(state: &Path) -> String {
    let runs = runs(state);
    assert_eq!(runs.len(), 1, "runs in {}: {runs:?}", state.display());
    runs.into_iter().next().unwrap()
}

/// A run's checkpoint, read as the store reads it.
pub fn checkpoint(state: &Path, run: &str) -> State {
    let dir = DiskDir::new(state).unwrap();
    Checkpoint::load(&dir, &RunId::parse(run).unwrap())
        .unwrap()
        .expect("the run has a checkpoint")
}

pub fn world(state: &Path, run: &str) -> PathBuf {
    state.join(format!("{run}.world"))
}

/// A run's tracker, opened from its file (only once no process runs it).
pub fn tracker(state: &Path, run: &str) -> Tracker {
    let dir = DiskDir::new(world(state, run)).unwrap();
    Tracker::open_dir(Arc::new(dir), Mode::Keyed).unwrap()
}

fn str_arg(c: &Call, name: &str) -> String {
    c.args[name].as_str().unwrap().to_owned()
}

/// Every effect the task's calls make is in the tracker exactly once, and
/// nothing else was added.
#[track_caller]
pub fn assert_each_effect_once(task: &TaskFile, tracker: &Tracker) {
    let mut filed = 0;
    let mut commented = 0;
    for c in task.calls() {
        let req = match c.tool.as_str() {
            "issue_file" => {
                filed += 1;
                Request::FileIssue {
                    title: str_arg(&c, "title"),
                    body: str_arg(&c, "body"),
                }
            }
            "issue_comment" => {
                commented += 1;
                Request::Comment {
                    issue: c.args["issue"].as_u64().unwrap(),
                    body: str_arg(&c, "body"),
                }
            }
            _ => continue,
        };
        assert_eq!(
            tracker.count(&req),
            1,
            "{}: {} {} in the tracker",
            task.name,
            c.tool,
            c.id
        );
    }
    let issues = tracker.issues();
    assert_eq!(
        issues.len(),
        task.seeded_issues() + filed,
        "{}: issues",
        task.name
    );
    let comments: usize = issues.iter().map(|i| i.comments.len()).sum();
    assert_eq!(comments, commented, "{}: comments", task.name);
}

/// The summary line of a run whose checks all passed.
pub fn all_passed(task: &TaskFile) -> String {
    let n = task.checks();
    format!("checks    {n} of {n} passed")
}
