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
//! With [`Process::fork_server`], the program runs once to its `ready()`
//! call and every life is a child forked there (point protocol version 2),
//! checked first against exec'd lives. A sweep's
//! [`Stats::processes`](crate::report::Stats::processes) counts the
//! processes it started.
//!
//! A scenario does not replay the lives before its last crash: while the
//! program waits at a hit, its world directory is copied (cloned where the
//! file system can), and every scenario that crashes there restarts from
//! the copy. The runner's checks of shared lives apply, and
//! [`Config::share`](crate::Config::share) `= false` (`--no-share`)
//! replays every scenario instead; the table is the same.
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

mod builder;
mod child;
mod count;
mod disk;
mod error;
mod forking;
mod forkserver;
mod judge;
mod life;
mod power;
mod restart;
mod service;
pub mod trace;
mod world;

use std::path::Path;

pub use builder::{ram_disk, DescribeFn, JudgeFn, Process};
pub use child::stop_children_on_signals;
pub use error::ProcessError;
pub use trace::{IoPoints, Listing, Op, SelectError};
pub use world::ProcessWorld;

use crate::error::LifeError;
use crate::judge::{Counter, Verdict};
use crate::subject::Subject;
use world::list_tree;

pub use crashpoint::protocol::{DIE_AT_VAR, FD_VAR, VERSION, VERSION_VAR};

/// The variable holding a world's service URL, for lives and the judge.
pub const SERVICE_VAR: &str = "CRASHSWEEP_SERVICE";
/// The variable naming the directory of the lives' logs, for the judge.
pub const LOGS_VAR: &str = "CRASHSWEEP_LOGS";

impl Subject for Process {
    type World = ProcessWorld;

    fn name(&self) -> String {
        self.name.clone()
    }

    fn counters(&self) -> Vec<Counter> {
        self.counters.clone()
    }

    fn world(&self) -> Result<ProcessWorld, LifeError> {
        Ok(self.try_world()?)
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

    fn processes(&self) -> Option<crate::report::Processes> {
        Some(self.count.now())
    }

    /// The world directory as `world/`, the service's directory as
    /// `service/` (if the subject has a service) and the lives' logs as
    /// `logs/`.
    fn keep(&self, world: &ProcessWorld, to: &Path) -> std::io::Result<bool> {
        world.keep(to)?;
        Ok(true)
    }

    fn power_cuts(&self) -> Option<&dyn crate::power::PowerCuts<ProcessWorld>> {
        self.power.is_some().then_some(self as _)
    }

    fn share(&self) -> Option<&dyn crate::sharing::Share<ProcessWorld>> {
        self.restarts().then_some(self as _)
    }

    fn describe(&self, world: &ProcessWorld) -> String {
        let mut out = world.ends.join("\n");
        if let Some(f) = &self.describe.0 {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&f(world));
            return out;
        }
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
