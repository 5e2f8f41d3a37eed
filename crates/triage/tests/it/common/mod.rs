//! Helpers for the tests that run the built `triage` binary as a child
//! process, each in its own temporary state directory.

#![allow(dead_code)] // each test file uses its own subset

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use agent::state::{Checkpoint, State};
use durable::{DiskDir, RunId};
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

/// The provider variables live mode reads; removed from every child's
/// environment, so a key in the environment of whoever runs the tests never
/// turns a replay test live (the live tests set their own).
pub const LIVE_VARS: [&str; 6] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
];

/// The command, with stdin closed: never a terminal, whatever runs the
/// tests, so `--approve on` never blocks; and no provider key, so it
/// replays.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    for var in LIVE_VARS {
        cmd.env_remove(var);
    }
    // The tracker is tried as long as a user's run tries it, unless a test
    // says otherwise ([`triage_gone_tracker`]).
    cmd.env_remove(UNREACHABLE_ENV);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `TRIAGE_TRACKER_UNREACHABLE_MS`, which shortens how long a tracker
/// service that refuses connections is tried.
pub const UNREACHABLE_ENV: &str = "TRIAGE_TRACKER_UNREACHABLE_MS";

/// How long [`triage_gone_tracker`] lets a process try a tracker that
/// refuses connections: a service that is gone never comes back, so any
/// wait proves the same refusal; this one is short.
pub const GONE_TRACKER_MS: &str = "200";

/// Run `triage ARGS` to the end.
pub fn triage(args: &[&str]) -> Out {
    output(command(args))
}

/// [`command`] for a process whose tracker service is gone: it is tried
/// for [`GONE_TRACKER_MS`] instead of the seconds a restarting service is
/// given.
pub fn command_gone_tracker(args: &[&str]) -> Command {
    let mut cmd = command(args);
    cmd.env(UNREACHABLE_ENV, GONE_TRACKER_MS);
    cmd
}

/// [`triage`] for a process whose tracker service is gone
/// ([`command_gone_tracker`]).
pub fn triage_gone_tracker(args: &[&str]) -> Out {
    output(command_gone_tracker(args))
}

fn output(mut cmd: Command) -> Out {
    let out = cmd.output().expect("run the triage binary");
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`triage`], but a process still running after `limit` is killed and the
/// test fails: for a process that must not wait (on a lock), so that waiting
/// shows up as a failure instead of a hung test. Not a speed check.
pub fn triage_or_hang(args: &[&str], limit: Duration) -> Out {
    wait_or_hang(command(args), args, limit)
}

/// [`triage_or_hang`] of a command made here (`args` names it).
pub fn wait_or_hang(mut cmd: Command, args: &[&str], limit: Duration) -> Out {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the triage binary");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("poll the child").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("triage {args:?} still running after {limit:?}: it waited instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child
        .wait_with_output()
        .expect("collect the child's output");
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
/// Start a new run of `task` under `state` that kills itself right after
/// `tool` returns; the run's ID.
pub fn killed_run(state: &Path, task: &str, tool: &str) -> String {
    triage(&["--task", task, "--state", arg(state), "--die-after", tool]).expect_killed();
    only_run(state)
}

pub fn only_run(state: &Path) -> String {
    let runs = runs(state);
    assert_eq!(runs.len(), 1, "runs in {}: {runs:?}", state.display());
    runs.into_iter().next().unwrap()
}

/// A run's checkpoint, read as the store reads it.
pub fn checkpoint(state: &Path, run: &str) -> durable::checkpoint::Saved<State> {
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

/// A pseudo-terminal: (master, slave).
pub fn openpty() -> (File, File) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: the out-pointers are valid; name, termios and winsize may be
    // null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    // The child must not inherit the master side.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    (master, slave)
}

/// A triage child whose stdin is a terminal (a pty), with its stderr read by a
/// thread, so the test can wait for the prompt.
pub struct AtTerminal {
    child: Child,
    master: File,
    stderr: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl AtTerminal {
    pub fn spawn(args: &[&str]) -> AtTerminal {
        AtTerminal::spawn_with_env(args, &[])
    }

    /// [`AtTerminal::spawn`] with these environment variables set.
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> AtTerminal {
        let (master, slave) = openpty();
        let mut cmd = Command::new(BIN);
        for var in LIVE_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        AtTerminal {
            child,
            master,
            stderr: rx,
            seen: String::new(),
        }
    }

    /// Wait until stderr shows `text` (the prompt has no newline).
    pub fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(chunk) => self.seen.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => panic!("{text:?} never appeared on stderr; saw:\n{}", self.seen),
            }
        }
    }

    /// Answer every prompt until the child closes stderr: each time one of
    /// `rules`' prompt texts appears in output not yet answered, type its
    /// answer.
    pub fn answer_prompts(&mut self, rules: &[(&str, &str)]) {
        let mut answered = 0;
        loop {
            let pending = &self.seen[answered..];
            let next = rules
                .iter()
                .filter_map(|(prompt, reply)| {
                    pending.find(prompt).map(|at| (at + prompt.len(), *reply))
                })
                .min_by_key(|(end, _)| *end);
            if let Some((end, reply)) = next {
                answered += end;
                self.answer(reply);
                continue;
            }
            match self.stderr.recv_timeout(Duration::from_secs(30)) {
                Ok(chunk) => self.seen.push_str(&String::from_utf8_lossy(&chunk)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "no prompt and no exit within 30 s; stderr so far:\n{}",
                        self.seen
                    )
                }
            }
        }
    }

    /// The child's process ID, for sending it a signal.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn answer(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    pub fn finish(self) -> Out {
        let out = self.child.wait_with_output().unwrap();
        let mut stderr = self.seen;
        while let Ok(chunk) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            stderr.push_str(&String::from_utf8_lossy(&chunk));
        }
        Out {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        }
    }
}

/// `1 turn`, `2 turns`: how the command counts turns.
pub fn turns(n: u32) -> String {
    if n == 1 {
        "1 turn".to_owned()
    } else {
        format!("{n} turns")
    }
}

/// Every path under `dir`, relative, sorted (directories end in `/`).
pub fn tree(dir: &Path) -> std::collections::BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"));
                walk(root, &e.path(), out);
            } else {
                out.insert(rel);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// What a state directory holding one finished run of `task` holds, and
/// nothing else.
pub fn one_run_files(
    run: &str,
    task: &TaskFile,
    created: &[&str],
) -> std::collections::BTreeSet<String> {
    let mut want: std::collections::BTreeSet<String> = [
        ".triage.lock".to_owned(),
        format!("{run}.json"),
        format!("{run}.lock"),
        format!("{run}.world/"),
        format!("{run}.world/checkpointed"),
        format!("{run}.world/run.json"),
        format!("{run}.world/task.json"),
        format!("{run}.world/tracker.json"),
        format!("{run}.world/workspace/"),
    ]
    .into_iter()
    .collect();
    let ws = task.json["workspace"].as_object().into_iter().flatten();
    for f in ws.map(|(k, _)| k.as_str()).chain(created.iter().copied()) {
        want.insert(format!("{run}.world/workspace/{f}"));
    }
    want
}

/// The workspace files `task`'s calls create (a `code_patch` with `old`
/// empty).
pub fn created_files(task: &TaskFile) -> Vec<String> {
    task.calls()
        .iter()
        .filter(|c| c.tool == "code_patch" && c.args["old"] == "")
        .map(|c| c.args["path"].as_str().unwrap().to_owned())
        .collect()
}
