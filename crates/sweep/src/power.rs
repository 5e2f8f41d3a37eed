//! Power cuts and the other crash states: what a crash keeps of the world.
//!
//! A plain subject is swept in one crash state, [`CrashState::PROCESS`]: a
//! crash kills the process and keeps everything it wrote. A subject whose
//! world can lose more (a power cut drops what was never synced) opts in to
//! more states with [`PowerCuts`], returned by
//! [`Subject::power_cuts`](crate::Subject::power_cuts) (usually
//! `Some(self)`), as it opts in to shared lives with
//! [`Subject::share`](crate::Subject::share). Its sweep runs each state a
//! [`Config::crash_states`](crate::Config::crash_states) names (or its
//! [default ones](PowerCuts::default_crash_states)), one table row per
//! state; the runner boots every life with a [`Boot`] that says which
//! state the crash before it was in.
//!
//! The disk's other attack, I/O errors (a call that fails, then the disk
//! heals), is `sweep::power::faults`'s, behind the `faults` feature.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use sweep::power::{Boot, CrashState, PowerCuts};
//! use sweep::{Counter, LifeError, Subject, Verdict};
//!
//! /// A counter kept in two places: `saved` survives a power cut,
//! /// `cached` only a process crash.
//! struct Count;
//!
//! #[derive(Default)]
//! struct World { saved: u32, cached: u32 }
//!
//! const LOSE: CrashState = CrashState::named("lose");
//!
//! impl Subject for Count {
//!     type World = World;
//!     fn name(&self) -> String { "count".into() }
//!     fn counters(&self) -> Vec<Counter> { vec![Counter::new("lost")] }
//!     fn world(&self) -> Result<World, LifeError> { Ok(World::default()) }
//!     fn life(&self, w: &mut World) -> Result<(), LifeError> {
//!         while w.cached < 2 {
//!             w.cached += 1;
//!             crashpoint::point!("counted");
//!         }
//!         w.saved = w.cached; // synced at the end of a life
//!         Ok(())
//!     }
//!     fn judge(&self, w: &World) -> Verdict {
//!         Verdict::new().count("lost", u64::from(2 - w.saved.min(2)))
//!     }
//!     fn power_cuts(&self) -> Option<&dyn PowerCuts<World>> { Some(self) }
//! }
//!
//! impl PowerCuts<World> for Count {
//!     fn crash_states(&self) -> Vec<CrashState> { vec![CrashState::PROCESS, LOSE] }
//!     fn boot(&self, w: &mut World, boot: &Boot) -> Result<(), LifeError> {
//!         if boot.after_crash() && *boot.state() == LOSE {
//!             w.cached = w.saved; // the power cut dropped the cache
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let config = sweep::Config { crash_states: vec![CrashState::PROCESS, LOSE], ..Default::default() };
//! let report = sweep::run(&Count, &config).unwrap();
//! let titles: Vec<String> = report.rows().into_iter().map(|r| r.variant).collect();
//! assert_eq!(titles, ["count", "count | lose"]);
//! ```

use crate::error::LifeError;

#[cfg(feature = "faults")]
pub mod faults;

pub use crate::crash_state::{BadCrashState, CrashState};
pub use crate::disks::CrashDisks;

/// A subject's opt-in to crash states beyond a process crash: the states
/// it can run in, how each life boots and shuts down in them, and, for a
/// state whose power cut may leave several disks, how many it left. Return
/// it from [`Subject::power_cuts`](crate::Subject::power_cuts) (usually
/// `Some(self)`).
///
/// The runner calls [`PowerCuts::boot`] before every life and
/// [`PowerCuts::shutdown`] after every life that returned (finished or
/// stopped with an error) — never after a crash. A subject with power-loss
/// directories (`durable::testing::PowerDir`) boots them in
/// [`Boot::state`] there, so the boot after a crash cuts the power before
/// the life reads anything; its life never has to remember to.
pub trait PowerCuts<W>: Sync {
    /// The crash states this subject can run in; a sweep refuses any other
    /// ([`Error::UnknownCrashState`](crate::Error::UnknownCrashState)).
    /// Default: [`CrashState::PROCESS`] alone (for a subject that only
    /// boots and shuts down its lives).
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS]
    }

    /// The states a sweep runs when its
    /// [`Config::crash_states`](crate::Config::crash_states) names none.
    /// Default: the first of [`PowerCuts::crash_states`].
    fn default_crash_states(&self) -> Vec<CrashState> {
        self.crash_states().into_iter().take(1).collect()
    }

    /// A process starts on `world` (see [`Boot`]): boot power-loss
    /// directories here. An error fails the scenario as the life's own.
    fn boot(&self, _world: &mut W, _boot: &Boot) -> Result<(), LifeError> {
        Ok(())
    }

    /// A process ends on `world` without a crash.
    fn shutdown(&self, _world: &mut W, _boot: &Boot) {}

    /// Whether a power cut in `state` may leave more than one disk, each a
    /// scenario of its own: the runner then names the disk of every crash
    /// in the scenario ([`Scenario::disks`](crate::scenario::Scenario::disks),
    /// given to the boot as [`Boot::disk`]), runs disk 0 first and, once
    /// [`PowerCuts::crash_disks`] has said how many there were, the others.
    /// Default: `false`.
    fn enumerates(&self, _state: &CrashState) -> bool {
        false
    }

    /// After a [`PowerCuts::boot`] in an enumerating state that cut the
    /// power: how many different disks that cut could have left (at least
    /// 1). `None` (the default) if the boot cut nothing.
    fn crash_disks(&self, _world: &W) -> Option<u32> {
        None
    }

    /// The title of the table row for the scenarios in `state`, for the
    /// subject named `subject`. Default: `subject` in the process state,
    /// `subject | state` in any other.
    fn row_title(&self, subject: &str, state: &CrashState) -> String {
        if state.is_process() {
            subject.to_owned()
        } else {
            format!("{subject} | {state}")
        }
    }
}

/// What a subject that does not opt in gets: the process state alone.
pub(crate) struct ProcessOnly;

impl<W> PowerCuts<W> for ProcessOnly {}

/// A life's boot, as the runner tells a subject about it: the scenario's
/// crash state, which life this is, whether the one before it crashed, and
/// which disk the cut left (when the subject enumerates them). Given to
/// [`PowerCuts::boot`] and [`PowerCuts::shutdown`].
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

    /// In an enumerating state ([`PowerCuts::enumerates`]), after a crash:
    /// which of the disks the power cut may leave it keeps (an index, from
    /// the scenario's name). A subject boots its directories keeping that
    /// disk (an index past the last means the last), and tells the runner
    /// how many there were ([`PowerCuts::crash_disks`]). `None` otherwise.
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
