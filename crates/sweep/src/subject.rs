//! The subject: a program to sweep, as the runner sees it — a fresh world,
//! one life against it, and a judge of the world once a scenario is over —
//! and the [`Boot`] the runner boots and shuts down each life with.

use crate::crash_state::CrashState;
use crate::judge::{Counter, Verdict};
use crate::sharing::Share;

/// Why a life stopped on its own (not by a crash): any error converts into
/// it with `?`, a `String` or `&str` included.
pub type LifeError = Box<dyn std::error::Error + Send + Sync>;

/// A life's boot, as the runner tells a subject about it: the scenario's
/// crash state, which life this is, whether the one before it crashed, and
/// which disk the cut left (when the subject enumerates them).
///
/// The runner calls [`Subject::boot`] before every life and
/// [`Subject::shutdown`] after every life that returned (finished or stopped
/// with an error) — never after a crash. A subject with power-loss
/// directories boots them there, so the boot after a crash cuts the power
/// in [`Boot::state`] before the life reads anything; its life never
/// has to remember to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boot {
    state: CrashState,
    life: usize,
    after_crash: bool,
    disk: Option<u32>,
}

impl Boot {
    pub(crate) fn new(state: CrashState, life: usize, after_crash: bool) -> Self {
        Boot {
            state,
            life,
            after_crash,
            disk: None,
        }
    }

    pub(crate) fn with_disk(mut self, disk: Option<u32>) -> Self {
        self.disk = disk;
        self
    }

    /// In an enumerating state ([`Subject::enumerates`]), after a crash:
    /// which of the disks the power cut may leave it keeps (an index, from
    /// the scenario's name). A subject boots its directories keeping that
    /// disk (an index past the last means the last), and tells the runner
    /// how many there were ([`Subject::crash_disks`]). `None` otherwise.
    pub fn disk(&self) -> Option<u32> {
        self.disk
    }

    /// What the crash before this life keeps of the world.
    pub fn state(&self) -> &CrashState {
        &self.state
    }

    /// Which life of the scenario this is (1-based).
    pub fn life(&self) -> usize {
        self.life
    }

    /// Whether the life before this one crashed (`false` for the first).
    pub fn after_crash(&self) -> bool {
        self.after_crash
    }
}

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

    /// The crash states this subject can run in, the one a sweep uses when
    /// its [`Config::crash_states`](crate::Config::crash_states) is empty
    /// first. Default: [`CrashState::PROCESS`] alone.
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS]
    }

    /// The states a sweep runs when its config names none. Default: the
    /// first of [`Subject::crash_states`].
    fn default_crash_states(&self) -> Vec<CrashState> {
        self.crash_states().into_iter().take(1).collect()
    }

    /// A process starts on `world` (see [`Boot`]): boot power-loss
    /// directories here. An error fails the scenario as the life's own.
    fn boot(&self, _world: &mut Self::World, _ctx: &Boot) -> Result<(), LifeError> {
        Ok(())
    }

    /// A process ends on `world` without a crash.
    fn shutdown(&self, _world: &mut Self::World, _ctx: &Boot) {}

    /// Whether a power cut in `state` may leave more than one disk, each a
    /// scenario of its own: the runner then names the disk of every crash
    /// in the scenario ([`Scenario::disks`](crate::Scenario::disks), given
    /// to the boot as [`Boot::disk`]), runs disk 0 first and, once
    /// [`Subject::crash_disks`] has said how many there were, the others.
    /// Default: `false`.
    fn enumerates(&self, _state: &CrashState) -> bool {
        false
    }

    /// After a [`Subject::boot`] in an enumerating state that cut the
    /// power: how many different disks that cut could have left (at least
    /// 1). `None` (the default) if the boot cut nothing.
    fn crash_disks(&self, _world: &Self::World) -> Option<u32> {
        None
    }

    /// The title of the table row for the scenarios in `state`. Default: the
    /// subject's name in the process state, `name | state` in any other.
    fn row_title(&self, state: &CrashState) -> String {
        if state.is_process() {
            self.name()
        } else {
            format!("{} | {state}", self.name())
        }
    }

    /// Opt in to shared lives: the subject's [`Share`] (usually
    /// `Some(self)`), which copies and fingerprints its worlds. `None` (the
    /// default) keeps every scenario on a fresh world of its own.
    fn share(&self) -> Option<&dyn Share<Self::World>> {
        None
    }
}
