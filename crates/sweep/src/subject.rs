//! The subject: a program to sweep, as the runner sees it — a fresh world,
//! one life against it, and a judge of the world once a scenario is over —
//! with its two opt-ins: more crash states ([`PowerCuts`]) and shared lives
//! ([`Share`]).

use crate::error::LifeError;
use crate::judge::{Counter, Verdict};
use crate::power::{PowerCuts, ProcessOnly};
use crate::sharing::Share;

/// A program to sweep. Implement it for your own durable program.
///
/// Crash points need unwinding: an injected crash is a panic that the
/// runner catches. A build with `panic = "abort"` is refused at the start of
/// a sweep ([`Error::PanicAbort`](crate::Error::PanicAbort)).
pub trait Subject: Sync {
    /// Everything a crash does not erase. Each scenario gets a fresh one, and
    /// parallel scenarios never share one. (It owns what it holds: shared
    /// lives keep copies of worlds between lives.)
    type World: Send + 'static;

    /// The row's name in a table, e.g. `keys and markers`.
    fn name(&self) -> String;

    /// The counters [`judge`](Subject::judge) reports, in table order.
    fn counters(&self) -> Vec<Counter>;

    /// A fresh world, as before the program's first start. `Err` (a
    /// temporary directory that cannot be made, a service that does not
    /// start) ends the sweep with
    /// [`Error::World`](crate::Error::World), which names the subject; any
    /// error type converts with `?`, as in [`life`](Subject::life).
    fn world(&self) -> Result<Self::World, LifeError>;

    /// One life: start or resume from the world and run until done. An
    /// injected crash arrives as a panic from a point and never returns here;
    /// `Err` means the life stopped with an error of the program's own (any
    /// error type converts with `?`).
    fn life(&self, world: &mut Self::World) -> Result<(), LifeError>;

    /// Look at the world once the scenario is over and count.
    fn judge(&self, world: &Self::World) -> Verdict;

    /// A short human description of the world, printed at the end of a
    /// scenario's timeline (records, saved state, …).
    fn describe(&self, _world: &Self::World) -> String {
        String::new()
    }

    /// Copy what `world` holds into the directory `to` (it exists and is
    /// empty), for a failing scenario's artifacts (`--artifacts`): its
    /// files, so a reader opens them as the scenario left them. A [process
    /// subject](crate::process::Process) keeps its world directory, its
    /// service's directory and its lives' logs. `Ok(false)` (the default):
    /// the subject keeps nothing, and its [`describe`](Subject::describe)
    /// text is all the artifacts show of the world.
    fn keep(&self, _world: &Self::World, _to: &std::path::Path) -> std::io::Result<bool> {
        Ok(false)
    }

    /// Opt in to crash states beyond a process crash (power cuts): the
    /// subject's [`PowerCuts`] (usually `Some(self)`), which lists its
    /// states and boots each life in one. `None` (the default) sweeps the
    /// process state alone, [`CrashState::PROCESS`](crate::power::CrashState::PROCESS).
    fn power_cuts(&self) -> Option<&dyn PowerCuts<Self::World>> {
        None
    }

    /// Opt in to shared lives: the subject's [`Share`] (usually
    /// `Some(self)`), which copies and fingerprints its worlds. `None` (the
    /// default) keeps every scenario on a fresh world of its own.
    fn share(&self) -> Option<&dyn Share<Self::World>> {
        None
    }

    /// The points this subject never passes by design: points of code it
    /// shares with other subjects, on a branch this one never takes (a
    /// design that saves no marker, in a loop whose other designs do). The
    /// check of points never passed
    /// ([`Report::never_passed`](crate::Report::never_passed),
    /// [`Config::strict_points`](crate::Config::strict_points)) leaves them
    /// out; every other point its clean run leaves out is still reported.
    /// Default: none.
    fn points_not_taken(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// For a subject that starts processes (a [process
    /// subject](crate::process::Process)): how many it has started so far,
    /// by kind. A sweep reports the difference over its run in
    /// [`Stats::processes`](crate::report::Stats::processes). `None` (the default):
    /// it starts none.
    fn processes(&self) -> Option<crate::report::Processes> {
        None
    }
}

/// `subject`'s [`PowerCuts`], or the process state alone.
pub(crate) fn cuts<S: Subject>(subject: &S) -> &dyn PowerCuts<S::World> {
    match subject.power_cuts() {
        Some(cuts) => cuts,
        None => &ProcessOnly,
    }
}
