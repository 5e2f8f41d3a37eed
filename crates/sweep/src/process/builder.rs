//! A [`Process`] described step by step — its program, restart, world
//! template, judge, environment, service and counters — then checked, its
//! counters learned by a clean run ([`Process::discover`]); and the fresh
//! world of each scenario it makes.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

use super::count::{Count, Kind};
use super::error::ProcessError;
use super::forkserver::ForkSlot;
use super::service;
use super::world::{copy_tree, ProcessWorld};
use crate::judge::{Counter, Verdict};

/// A judge of a [`Process`] world: given the world (its directory, the
/// lives' logs, the service's URL), the counts.
pub type JudgeFn = dyn Fn(&ProcessWorld) -> Result<Verdict, String> + Send + Sync;

pub(super) enum Judge {
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

/// How a [`Process`] describes a world in a failure's timeline and in the
/// clean-run check ([`Process::describe_with`]).
pub type DescribeFn = dyn Fn(&ProcessWorld) -> String + Send + Sync;

#[derive(Default)]
pub(super) struct Describe(pub(super) Option<Box<DescribeFn>>);

impl fmt::Debug for Describe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Fn(..)" } else { "files" })
    }
}

/// A real program swept as a child process (see the [module docs](super)).
#[derive(Debug)]
pub struct Process {
    pub(super) name: String,
    pub(super) argv: Vec<OsString>,
    pub(super) restart: Option<Vec<OsString>>,
    template: Option<PathBuf>,
    pub(super) judge: Judge,
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) counters: Vec<Counter>,
    count_only: Vec<String>,
    pub(super) service: Option<Vec<OsString>>,
    pub(super) service_points: bool,
    pub(super) worlds_in: Option<PathBuf>,
    pub(super) describe: Describe,
    /// The tracer's I/O points, when on ([`Process::io_points`]).
    pub(super) io_points: Option<std::sync::Arc<super::trace::IoPoints>>,
    pub(super) fork: ForkSlot,
    /// The judge command's fork server, tried at the first judge when
    /// lives are forked.
    pub(super) judge_fork: super::forkserver::JudgeSlot,
    /// The crash states of a power-cut sweep ([`Process::crash_states`]).
    pub(super) power: Option<super::disk::Power>,
    pub(super) count: Count,
    /// A mutation for the tests: every capture copies the world as it was
    /// before its life, not at its hit.
    #[cfg(test)]
    pub(super) stale_captures: bool,
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
            worlds_in: None,
            describe: Describe::default(),
            io_points: None,
            fork: ForkSlot::default(),
            judge_fork: Default::default(),
            power: None,
            count: Count::default(),
            #[cfg(test)]
            stale_captures: false,
        }
    }

    /// Crash the program at its system calls too, with no change to it:
    /// each life runs under the tracer (Linux on x86_64), and every call
    /// `io` selects on the world or a peer is a point (`write state.json`,
    /// `rename a.tmp→a`, `send service`), in one sequence with the named
    /// points the program reports. See [`super::trace`].
    pub fn io_points(mut self, io: super::trace::IoPoints) -> Process {
        self.io_points = Some(std::sync::Arc::new(io));
        self
    }

    /// Fork every life from a fork server instead of starting the program
    /// anew: the program runs once to its `ready()` call (its imports and
    /// set-up; point protocol version 2), then each life is a child forked
    /// there. [`Process::discover`] checks it first: forked and exec'd
    /// clean lives must pass the same hits and leave the same world, and the
    /// program must have one thread at `ready()`; else it is refused. It
    /// suits Python and Rust programs; Go and Node cannot fork a running
    /// runtime (their clients refuse version 2).
    pub fn fork_server(mut self) -> Process {
        self.fork.wanted = true;
        self
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

    /// Make each scenario's world (its directory, the lives' logs, the
    /// service's files) under `dir` instead of the system's temporary
    /// directory. A RAM disk such as `/dev/shm` makes a program that syncs
    /// its files several times faster to sweep (the triage sweep: 3.8 s to
    /// 0.9 s at depth 1), and changes no result: `SIGKILL` kills the
    /// process, not the machine, so what a restart reads is the page cache
    /// either way. [`ram_disk`] finds one. The directory must exist.
    pub fn worlds_in(mut self, dir: impl Into<PathBuf>) -> Process {
        self.worlds_in = Some(dir.into());
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

    /// Describe a world with `f` instead of listing its files: for a
    /// program that names files after something that differs from run to
    /// run (a clock, a random ID), which would make two identical clean runs
    /// look different to the sweep's check that they leave the same world.
    /// Leave out only what differs by chance; what the program did must
    /// still show.
    pub fn describe_with(
        mut self,
        f: impl Fn(&ProcessWorld) -> String + Send + Sync + 'static,
    ) -> Process {
        self.describe = Describe(Some(Box::new(f)));
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
        self.check_setup()?;
        if !self.counters.is_empty() {
            return Ok(self);
        }
        let verdict = self.discovery_run()?;
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

    /// The checks before discovery: a program, a readable template, I/O
    /// points (traceable, their names known) and a fork server that works
    /// (its forked lives traced too, with I/O points).
    fn check_setup(&self) -> Result<(), ProcessError> {
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
        if self.io_points.is_some() || self.power.is_some() {
            super::trace::probe().map_err(|reason| ProcessError::Untraceable {
                subject: self.name.clone(),
                reason,
            })?;
        }
        // The fork server before the names' check, whose lives it forks.
        if self.fork.wanted {
            self.check_fork_server()?;
        }
        if self.io_points.is_some() {
            self.check_io_names()?;
        }
        Ok(())
    }

    /// The discovery life: the program run once to its end in a fresh
    /// world, then the judge's verdict on that world.
    fn discovery_run(&self) -> Result<Verdict, ProcessError> {
        let discovery = |reason: String| ProcessError::Discovery {
            subject: self.name.clone(),
            reason,
        };
        let mut world = self.try_world().map_err(|reason| ProcessError::World {
            subject: self.name.clone(),
            reason,
        })?;
        // Discovery runs a life too: in a scope of its own (recording, never
        // crashing), so that its points are no passes outside any scope,
        // which a sweep running meanwhile in the process would count.
        match crashpoint::record(|| self.run_life(&mut world)).outcome {
            crashpoint::Outcome::Finished(r) => r.map_err(|e| discovery(e.to_string()))?,
            crashpoint::Outcome::Crashed(hit) => {
                return Err(discovery(format!("it was stopped at {hit}")))
            }
            crashpoint::Outcome::Panicked(m) => {
                return Err(discovery(format!("the harness panicked: {m}")))
            }
        }
        if world.hits == 0 && self.io_points.is_some() {
            return Err(ProcessError::NoIoPoints {
                subject: self.name.clone(),
            });
        }
        if world.hits == 0 {
            return Err(ProcessError::NoPoints {
                subject: self.name.clone(),
            });
        }
        self.try_judge(&world).map_err(discovery)
    }

    /// A scratch directory where worlds are made.
    pub(super) fn scratch(&self, prefix: &str) -> Result<tempfile::TempDir, String> {
        scratch_in(self.worlds_in.as_deref(), prefix)
    }

    /// `dir` made as a copy of the template (or empty).
    pub(super) fn fill(&self, dir: &std::path::Path) -> Result<(), String> {
        match &self.template {
            Some(t) => copy_tree(t, dir)
                .map_err(|e| format!("copying {} to {}: {e}", t.display(), dir.display())),
            None => std::fs::create_dir(dir).map_err(|e| e.to_string()),
        }
    }

    pub(super) fn try_world(&self) -> Result<ProcessWorld, String> {
        let root = self.scratch("crashsweep-world-")?;
        let dir = root.path().join("world");
        self.fill(&dir)?;
        std::fs::create_dir(root.path().join("logs")).map_err(|e| e.to_string())?;
        let service = match &self.service {
            Some(argv) => {
                self.count.one(Kind::Service);
                Some(service::Service::start(
                    argv,
                    &root.path().join("service"),
                    self.service_points,
                )?)
            }
            None => None,
        };
        Ok(ProcessWorld {
            root,
            lives: 0,
            hits: 0,
            ends: Vec::new(),
            makers: Vec::new(),
            lineage: 0,
            finished: false,
            disk: self
                .power
                .as_ref()
                .map(|_| super::disk::record_of(&dir))
                .transpose()?,
            crash_disks: None,
            service,
        })
    }
}

/// A scratch directory where worlds are made: in `dir`, or in the system's
/// temporary directory.
pub(super) fn scratch_in(
    dir: Option<&std::path::Path>,
    prefix: &str,
) -> Result<tempfile::TempDir, String> {
    let mut temp = tempfile::Builder::new();
    temp.prefix(prefix);
    let made = match dir {
        Some(dir) => temp
            .tempdir_in(dir)
            .map_err(|e| format!("a temporary directory in {}: {e}", dir.display())),
        None => temp
            .tempdir()
            .map_err(|e| format!("a temporary directory: {e}")),
    }?;
    super::child::scratch_made(made.path());
    Ok(made)
}

/// A RAM disk for [`Process::worlds_in`]: `/dev/shm` when it is a
/// writable directory (Linux), else `None` (sweep on the temporary
/// directory's disk).
pub fn ram_disk() -> Option<PathBuf> {
    let shm = PathBuf::from("/dev/shm");
    let probe = tempfile::Builder::new()
        .prefix("crashsweep-probe-")
        .tempdir_in(&shm)
        .ok()?;
    drop(probe);
    Some(shm)
}
