//! Process subjects: sweep a real program, in any language, from outside.
//!
//! A [`Process`] is a program's argv (and, if different, the restart's), a
//! world directory copied fresh for every scenario from a template, and a
//! judge: a command run in the world copy after the final life that prints
//! one JSON object of counters (`{"duplicates": 0, "missing": 0}`), or a
//! Rust closure. Each life runs the program as a child process in the world
//! copy, on the real disk, with the point protocol's descriptor in its
//! environment (see [`crashpoint::protocol`]): every point the program
//! passes is reported here and relayed into the life's scope, so every
//! hit of every thread of the program is a hit of the sweep. To crash the
//! program at a hit, the harness does not answer it: it sends `SIGKILL`,
//! reaps the child and checks that it died of that signal — the crash
//! landed exactly at the point. A life past the scenario time limit is
//! killed the same way and fails as hung.
//!
//! Everything the runner offers applies: depth 1 and 2, scenarios in
//! parallel (each with its own directory), the safety nets, tables, JSON,
//! snapshots, shards, a scenario rerun by name with its timeline.
//!
//! ```no_run
//! use sweep::process::Process;
//!
//! let payouts = Process::new("payouts", ["python3", "payouts.py"])
//!     .world_from("examples/world")
//!     .judge_command("python3 /abs/path/judge.py")
//!     .discover()?;
//! let report = sweep::run(&payouts, &sweep::Config::default())?;
//! print!("{}", sweep::table(&report.rows()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Unix only.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::judge::{Counter, Verdict};
use crate::subject::{LifeError, Subject};

pub use crashpoint::protocol::{DIE_AT_VAR, FD_VAR, VERSION, VERSION_VAR};

/// The variable holding a world's service URL, for lives and the judge.
pub const SERVICE_VAR: &str = "CRASHSWEEP_SERVICE";
/// The variable naming the directory of the lives' logs, for the judge.
pub const LOGS_VAR: &str = "CRASHSWEEP_LOGS";

/// How often a life waiting for its program looks at the time limit.
const POLL: Duration = Duration::from_millis(20);

/// Why a [`Process`] cannot be swept.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The argv is empty.
    #[error("{subject}: the program's command line is empty")]
    NoProgram {
        /// The subject.
        subject: String,
    },
    /// The world template is not a readable directory.
    #[error("{subject}: the world template {path} is not a directory: {reason}")]
    BadTemplate {
        /// The subject.
        subject: String,
        /// The template.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A scratch directory for a world could not be made.
    #[error("{subject}: cannot make a world directory: {reason}")]
    World {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
    /// The program's clean run (to discover the judge's counters) failed.
    #[error("{subject}: the clean run to discover the judge's counters failed: {reason}")]
    Discovery {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
    /// The program ran to its end without reporting a point.
    #[error("{subject}: the program ran to its end without reporting a crash point over the point protocol: mark its crash points with a client (crashpoint::point! in Rust with crashpoint's `enabled` feature, crashsweep.point in Python, crashsweep.Point in Go, point in Node); see docs/point-protocol.md")]
    NoPoints {
        /// The subject.
        subject: String,
    },
    /// The judge gave no counter at all.
    #[error("{subject}: the judge printed no counter (an empty JSON object): nothing could fail; print e.g. {{\"duplicates\": 0}}")]
    NoCounters {
        /// The subject.
        subject: String,
    },
}

/// A judge of a [`Process`] world: given the world (its directory, the
/// lives' logs, the service's URL), the counts.
pub type JudgeFn = dyn Fn(&ProcessWorld) -> Result<Verdict, String> + Send + Sync;

enum Judge {
    /// A shell command run in the world directory; prints a JSON object.
    Command(String),
    /// A closure.
    Fn(Box<JudgeFn>),
}

impl fmt::Debug for Judge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Judge::Command(c) => write!(f, "Command({c:?})"),
            Judge::Fn(_) => write!(f, "Fn(..)"),
        }
    }
}

/// A real program swept as a child process (see the [module docs](self)).
#[derive(Debug)]
pub struct Process {
    name: String,
    argv: Vec<OsString>,
    restart: Option<Vec<OsString>>,
    template: Option<PathBuf>,
    judge: Judge,
    env: Vec<(OsString, OsString)>,
    counters: Vec<Counter>,
    count_only: Vec<String>,
    service: Option<Vec<OsString>>,
    service_points: bool,
}

/// The world of a [`Process`]: a scratch directory holding the program's
/// working directory (a fresh copy of the template) and the logs of its
/// lives, removed when dropped.
#[derive(Debug)]
pub struct ProcessWorld {
    lives: u32,
    /// Hits the programs of this world reported, over all lives.
    hits: u64,
    ends: Vec<String>,
    /// The service of this world, if the subject has one, killed when the
    /// world is dropped.
    service: Option<service::Service>,
    // Last: removed after the service is killed.
    root: tempfile::TempDir,
}

impl ProcessWorld {
    /// The program's working directory.
    pub fn dir(&self) -> PathBuf {
        self.root.path().join("world")
    }

    fn log(&self, life: u32, stream: &str) -> PathBuf {
        self.root.path().join(format!("logs/life-{life}.{stream}"))
    }

    /// How many lives have started on this world.
    pub fn lives(&self) -> u32 {
        self.lives
    }

    /// The logs of the lives: `life-N.out` and `life-N.err`, N from 1.
    pub fn logs(&self) -> PathBuf {
        self.root.path().join("logs")
    }

    /// The URL of this world's service, if the subject has one.
    pub fn service_url(&self) -> Option<&str> {
        self.service.as_ref().map(service::Service::url)
    }

    /// `arg` with `{service}` replaced by the service's URL.
    fn expand(&self, arg: &OsStr) -> OsString {
        match (self.service_url(), arg.to_str()) {
            (Some(url), Some(s)) if s.contains("{service}") => {
                OsString::from(s.replace("{service}", url))
            }
            _ => arg.to_owned(),
        }
    }
}

impl Process {
    /// The program `argv` (its first item the program, found on `PATH` as a
    /// shell would), named `name` in tables. The restart after a crash runs
    /// the same command unless [`Process::restart`] says otherwise; the
    /// world starts empty unless [`Process::world_from`] names a template;
    /// the judge, until [`Process::judge_command`] or
    /// [`Process::judge_with`], counts nothing.
    pub fn new<I, A>(name: &str, argv: I) -> Process
    where
        I: IntoIterator<Item = A>,
        A: AsRef<OsStr>,
    {
        Process {
            name: name.to_owned(),
            argv: argv.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            restart: None,
            template: None,
            judge: Judge::Fn(Box::new(|_| Ok(Verdict::new()))),
            env: Vec::new(),
            counters: Vec::new(),
            count_only: Vec::new(),
            service: None,
            service_points: false,
        }
    }

    /// Start a service for every world: `argv` runs (before the first life)
    /// in a directory of the world's own beside the program's, and must
    /// print its URL (`http://HOST:PORT…`) in its first line on standard
    /// output, e.g. `tracker serve --dir . --addr 127.0.0.1:0`. `{service}`
    /// in the program's argv, the restart's and the judge's command is
    /// replaced by that URL, which is also in `CRASHSWEEP_SERVICE` for the
    /// lives and the judge. The service is killed when the scenario ends.
    /// Its points are no-ops unless [`Process::crash_service`].
    pub fn service<I, A>(mut self, argv: I) -> Process
    where
        I: IntoIterator<Item = A>,
        A: AsRef<OsStr>,
    {
        self.service = Some(argv.into_iter().map(|a| a.as_ref().to_owned()).collect());
        self
    }

    /// Sweep the service's points too: it is started with the point
    /// protocol's descriptor, its hits join the life's (one sequence), and a
    /// crash at one of them kills the service and the program together, as
    /// a machine that goes down; the next life starts the service again on
    /// the same directory (at a new URL, which `{service}` follows).
    pub fn crash_service(mut self) -> Process {
        self.service_points = true;
        self
    }

    /// Lives after the first run this command instead.
    pub fn restart<I, A>(mut self, argv: I) -> Process
    where
        I: IntoIterator<Item = A>,
        A: AsRef<OsStr>,
    {
        self.restart = Some(argv.into_iter().map(|a| a.as_ref().to_owned()).collect());
        self
    }

    /// Every scenario's world starts as a copy of this directory.
    pub fn world_from(mut self, template: impl Into<PathBuf>) -> Process {
        self.template = Some(template.into());
        self
    }

    /// The judge is `sh -c COMMAND`, run in the world directory after the
    /// final life; it prints one JSON object whose values are counts
    /// (whole numbers ≥ 0). Exiting non-zero, or printing anything else,
    /// fails the scenario with what it printed.
    pub fn judge_command(mut self, command: &str) -> Process {
        self.judge = Judge::Command(command.to_owned());
        self
    }

    /// The judge is a closure given the world ([`ProcessWorld::dir`], its
    /// [`logs`](ProcessWorld::logs), its [`service_url`](ProcessWorld::service_url)).
    pub fn judge_with(
        mut self,
        f: impl Fn(&ProcessWorld) -> Result<Verdict, String> + Send + Sync + 'static,
    ) -> Process {
        self.judge = Judge::Fn(Box::new(f));
        self
    }

    /// Set a variable in every life's environment (and the judge's).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Process {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Declare the judge's counters (instead of [`Process::discover`]).
    pub fn counters(mut self, counters: Vec<Counter>) -> Process {
        self.counters = counters;
        self
    }

    /// A counter [`Process::discover`] finds that only counts: a column, not
    /// a failure when above zero (by default every counter the judge prints
    /// must be zero in every scenario).
    pub fn count_only(mut self, name: &str) -> Process {
        self.count_only.push(name.to_owned());
        self
    }

    /// Check the subject and learn its counters: run the program once to
    /// the end (no crash) and the judge on its world, and declare each key
    /// the judge prints, in its order, as a counter that must stay zero
    /// (unless [`Process::count_only`]). Counters declared with
    /// [`Process::counters`] are kept as they are.
    pub fn discover(mut self) -> Result<Process, ProcessError> {
        if self.argv.is_empty() {
            return Err(ProcessError::NoProgram {
                subject: self.name.clone(),
            });
        }
        if let Some(t) = &self.template {
            if let Err(reason) = std::fs::read_dir(t) {
                return Err(ProcessError::BadTemplate {
                    subject: self.name.clone(),
                    path: t.clone(),
                    reason: reason.to_string(),
                });
            }
        }
        if !self.counters.is_empty() {
            return Ok(self);
        }
        let discovery = |reason: String| ProcessError::Discovery {
            subject: self.name.clone(),
            reason,
        };
        let mut world = self.try_world().map_err(|reason| ProcessError::World {
            subject: self.name.clone(),
            reason,
        })?;
        self.run_life(&mut world)
            .map_err(|e| discovery(e.to_string()))?;
        if world.hits == 0 {
            return Err(ProcessError::NoPoints {
                subject: self.name.clone(),
            });
        }
        let verdict = self.try_judge(&world).map_err(discovery)?;
        if verdict.counts.is_empty() {
            return Err(ProcessError::NoCounters {
                subject: self.name.clone(),
            });
        }
        self.counters = verdict
            .counts
            .iter()
            .map(|(n, _)| {
                let c = Counter::new(n);
                if self.count_only.contains(n) {
                    c
                } else {
                    c.required()
                }
            })
            .collect();
        Ok(self)
    }

    fn try_world(&self) -> Result<ProcessWorld, String> {
        let root = tempfile::Builder::new()
            .prefix("crashsweep-world-")
            .tempdir()
            .map_err(|e| format!("a temporary directory: {e}"))?;
        let dir = root.path().join("world");
        match &self.template {
            Some(t) => copy_tree(t, &dir)
                .map_err(|e| format!("copying {} to {}: {e}", t.display(), dir.display()))?,
            None => std::fs::create_dir(&dir).map_err(|e| e.to_string())?,
        }
        std::fs::create_dir(root.path().join("logs")).map_err(|e| e.to_string())?;
        let service = match &self.service {
            Some(argv) => Some(service::Service::start(
                argv,
                &root.path().join("service"),
                self.service_points,
            )?),
            None => None,
        };
        Ok(ProcessWorld {
            root,
            lives: 0,
            hits: 0,
            ends: Vec::new(),
            service,
        })
    }

    fn try_judge(&self, world: &ProcessWorld) -> Result<Verdict, String> {
        match &self.judge {
            Judge::Fn(f) => f(world),
            Judge::Command(cmd) => {
                let cmd = world.expand(OsStr::new(cmd)).to_string_lossy().into_owned();
                let mut command = Command::new("sh");
                if let Some(url) = world.service_url() {
                    command.env(SERVICE_VAR, url);
                }
                command
                    .arg("-c")
                    .arg(&cmd)
                    .current_dir(world.dir())
                    .env(LOGS_VAR, world.logs())
                    .envs(self.env.iter().map(|(k, v)| (k, v)));
                let out = without_protocol(&mut command)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("the judge `{cmd}` could not start: {e}"))?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() {
                    return Err(format!(
                        "the judge `{cmd}` {}; its standard error: {}",
                        describe_status(out.status),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                parse_counts(&stdout)
                    .map_err(|e| format!("the judge `{cmd}` printed {}: {e}", stdout.trim()))
            }
        }
    }

    /// One life: run the program (or the restart) to its end, relaying its
    /// hits into the current scope.
    fn run_life(&self, world: &mut ProcessWorld) -> Result<(), LifeError> {
        let argv = match (&self.restart, world.lives) {
            (Some(r), n) if n > 0 => r,
            _ => &self.argv,
        };
        let Some((program, args)) = argv.split_first() else {
            return Err(format!("{}: the program's command line is empty", self.name).into());
        };
        if let Some(service) = world.service.as_mut() {
            service.ensure_running()?;
        }
        world.lives += 1;
        let life = world.lives;
        let shown = show_argv(argv);
        let (ours, theirs) = UnixStream::pair()?;
        let fd = theirs.as_raw_fd();
        // The child gets its end as descriptor 3: a low number, which Node
        // (for one) marks close-on-exec at its start-up, so the program's
        // own children do not inherit it.
        let child_fd: i32 = 3;
        let mut cmd = Command::new(world.expand(program));
        if let Some(url) = world.service_url() {
            cmd.env(SERVICE_VAR, url);
        }
        cmd.args(args.iter().map(|a| world.expand(a)))
            .current_dir(world.dir())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(FD_VAR, child_fd.to_string())
            .env(VERSION_VAR, VERSION)
            .env_remove(DIE_AT_VAR)
            .stdin(Stdio::null())
            .stdout(File::create(world.log(life, "out"))?)
            .stderr(File::create(world.log(life, "err"))?);
        pass_fd(&mut cmd, fd);
        let child = cmd
            .spawn()
            .map_err(|e| format!("{shown} could not start: {e}"))?;
        drop(theirs);
        // The service's hits go to this life's scope while it runs, and a
        // crash at one of them kills this program too.
        let _in_life = world.service.as_ref().map(|s| s.life_started(child.id()));
        let mut running = Running {
            child: Some(child),
            shown: shown.clone(),
        };
        let result = relay(&ours, &mut running, world, life)?;
        let status = match result {
            Relayed::Exited => running.wait_or_stop()?,
            Relayed::Protocol(why) => {
                running.kill()?;
                return Err(format!("{shown} broke the point protocol: {why}").into());
            }
        };
        let end = describe_status(status);
        if let Some(s) = &world.service {
            world.ends.extend(s.take_ends());
        }
        world.ends.push(format!("life {life}: {shown} {end}"));
        if status.success() {
            Ok(())
        } else {
            let err = std::fs::read_to_string(world.log(life, "err")).unwrap_or_default();
            Err(format!("{shown} {end}{}", tail(&err)).into())
        }
    }
}

/// How a relay of a program's hits ended (other than by unwinding).
enum Relayed {
    /// The program closed the descriptor (it exited).
    Exited,
    /// It wrote something that is not a hit.
    Protocol(String),
}

/// Read the program's hits and answer them until it exits. A hit the scope
/// crashes at (or a cancel) unwinds from here after the child was killed.
fn relay(
    ours: &UnixStream,
    running: &mut Running,
    world: &mut ProcessWorld,
    life: u32,
) -> Result<Relayed, LifeError> {
    let ends = &mut world.ends;
    ours.set_read_timeout(Some(POLL))?;
    let mut reader = BufReader::new(ours.try_clone()?);
    let mut writer = ours.try_clone()?;
    let mut line = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(Relayed::Exited),
            Ok(_) if line.last() != Some(&b'\n') => return Ok(Relayed::Exited),
            Ok(_) => {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                line.clear();
                let Some(name) = text.strip_prefix("hit ").filter(|n| !n.is_empty()) else {
                    return Ok(Relayed::Protocol(format!(
                        "it wrote {text:?}, not `hit NAME`"
                    )));
                };
                world.hits += 1;
                if let Err(payload) =
                    panic::catch_unwind(AssertUnwindSafe(|| crashpoint::hit(name)))
                {
                    // The crash (or a cancel) lands here: the program is
                    // blocked at this very point until it is killed.
                    let status = running.kill()?;
                    ends.push(format!(
                        "life {life}: {} {} at {name}",
                        running.shown,
                        describe_status(status)
                    ));
                    if status.signal() != Some(libc::SIGKILL) {
                        panic!(
                            "{} was to be killed at point {name:?}, but it {}",
                            running.shown,
                            describe_status(status)
                        );
                    }
                    panic::resume_unwind(payload);
                }
                if writer.write_all(b"go\n").is_err() {
                    // It is gone: its exit status says why.
                    return Ok(Relayed::Exited);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Some(scope) = crashpoint::current() {
                    if scope.cancel_requested() {
                        let status = running.kill()?;
                        ends.push(format!(
                            "life {life}: {} {} at the time limit",
                            running.shown,
                            describe_status(status)
                        ));
                        scope.stop();
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// A child process, killed and reaped if dropped while still running (a
/// panic between its start and its end).
#[derive(Debug)]
struct Running {
    child: Option<Child>,
    shown: String,
}

/// Keep a harness's protocol variables out of `cmd`'s environment (the
/// judge, a service without swept points, a life before its own are set).
pub(super) fn without_protocol(cmd: &mut Command) -> &mut Command {
    cmd.env_remove(FD_VAR)
        .env_remove(VERSION_VAR)
        .env_remove(DIE_AT_VAR)
}

/// A descriptor the child gets as number 3 across exec, set up between
/// fork and exec.
fn pass_fd(cmd: &mut Command, fd: i32) {
    const CHILD_FD: i32 = 3;
    // SAFETY: only dup2 and fcntl, which are async-signal-safe, between
    // fork and exec: the descriptor becomes number 3, open across exec
    // (dup2 clears close-on-exec on the copy; if it is 3 already, fcntl
    // clears it).
    unsafe {
        cmd.pre_exec(move || {
            let ok = if fd == CHILD_FD {
                libc::fcntl(CHILD_FD, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(fd, CHILD_FD) >= 0
            };
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

impl Running {
    /// Wait for its end; if the scope is cancelled meanwhile (the time
    /// limit), kill it and stop the scope.
    fn wait_or_stop(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            let Some(c) = self.child.as_mut() else {
                return Err(std::io::Error::other("the child was reaped already"));
            };
            if let Some(status) = c.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if let Some(scope) = crashpoint::current() {
                if scope.cancel_requested() {
                    self.kill()?;
                    scope.stop();
                }
            }
            std::thread::sleep(POLL / 4);
        }
    }

    /// `SIGKILL`, then reap: its exit status.
    fn kill(&mut self) -> std::io::Result<ExitStatus> {
        match self.child.take() {
            Some(mut c) => {
                // An error means it has exited already; `wait` tells how.
                let _ = c.kill();
                c.wait()
            }
            None => Err(std::io::Error::other("the child was reaped already")),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

impl Subject for Process {
    type World = ProcessWorld;

    fn name(&self) -> String {
        self.name.clone()
    }

    fn counters(&self) -> Vec<Counter> {
        self.counters.clone()
    }

    fn world(&self) -> ProcessWorld {
        match self.try_world() {
            Ok(w) => w,
            // `Subject::world` cannot fail; `discover` made one already.
            Err(e) => panic!("{}: cannot make a world: {e}", self.name),
        }
    }

    fn life(&self, world: &mut ProcessWorld) -> Result<(), LifeError> {
        self.run_life(world)
    }

    fn judge(&self, world: &ProcessWorld) -> Verdict {
        match self.try_judge(world) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    fn describe(&self, world: &ProcessWorld) -> String {
        let mut out = world.ends.join("\n");
        let mut files = Vec::new();
        list_tree(&world.dir(), Path::new(""), &mut files);
        files.sort();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "world: {}",
            if files.is_empty() {
                "empty".to_owned()
            } else {
                files.join(", ")
            }
        ));
        out
    }
}

/// The judge's JSON object as counts.
fn parse_counts(stdout: &str) -> Result<Verdict, String> {
    let value: serde_json::Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object of counters")?;
    let mut v = Verdict::new();
    for (k, n) in obj {
        let n = n
            .as_u64()
            .ok_or_else(|| format!("the counter {k:?} is {n}, not a whole number ≥ 0"))?;
        v = v.count(k, n);
    }
    Ok(v)
}

/// `exited with status 3`, `was killed by signal 9 (SIGKILL)`, `exited`.
fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(0), _) => "exited with status 0".into(),
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) if s == libc::SIGKILL => "was killed by signal 9 (SIGKILL)".into(),
        (None, Some(s)) => format!("was killed by signal {s}"),
        (None, None) => "ended".into(),
    }
}

fn show_argv(argv: &[OsString]) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| {
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
                format!("'{}'", s.replace('\'', r"'\''"))
            } else {
                s.into_owned()
            }
        })
        .collect();
    format!("`{}`", parts.join(" "))
}

/// The last lines of a program's standard error, for a failure message.
fn tail(err: &str) -> String {
    let lines: Vec<&str> = err.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(5);
    format!("; its standard error ends: {}", lines[from..].join(" | "))
}

/// Copy a directory tree (files with their permissions, symbolic links as
/// links).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn list_tree(dir: &Path, prefix: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let rel = prefix.join(e.file_name());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            list_tree(&e.path(), &rel, out);
        } else {
            let len = e.metadata().map_or(0, |m| m.len());
            out.push(format!("{} ({len} B)", rel.display()));
        }
    }
}

mod service;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_in_an_object() {
        let v = parse_counts(r#"{"b": 2, "a": 0}"#).unwrap();
        assert_eq!(v.counts, [("b".to_owned(), 2), ("a".to_owned(), 0)]);
        for bad in ["[1]", r#"{"a": -1}"#, r#"{"a": 1.5}"#, "nope", ""] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn argv_is_shown_as_a_shell_would_read_it() {
        let argv: Vec<OsString> = ["python3", "a b.py", "it's"]
            .iter()
            .map(Into::into)
            .collect();
        assert_eq!(show_argv(&argv), r#"`python3 'a b.py' 'it'\''s'`"#);
    }

    #[test]
    fn a_tail_is_the_last_five_lines() {
        assert_eq!(tail(""), "");
        let t = tail("1\n2\n3\n4\n5\n6\n");
        assert_eq!(t, "; its standard error ends: 2 | 3 | 4 | 5 | 6");
    }
}
