//! The subject: a program to sweep, as the runner sees it — a fresh world,
//! one life against it, and a judge of the world once a scenario is over.

use crate::judge::{Counter, Verdict};
use crate::share::Fingerprint;

/// Why a life stopped on its own (not by a crash): any error converts into
/// it with `?`, a `String` or `&str` included.
pub type LifeError = Box<dyn std::error::Error + Send + Sync>;

/// A program to sweep. Implement it for your own durable program.
pub trait Subject: Sync {
    /// Everything a crash does not erase. Each scenario gets a fresh one, and
    /// parallel scenarios never share one.
    type World: Send;

    /// The row's name in a table, e.g. `keys and markers`.
    fn name(&self) -> String;

    /// The counters [`judge`](Subject::judge) reports, in table order.
    fn counters(&self) -> Vec<Counter>;

    /// A fresh world, as before the program's first start.
    fn world(&self) -> Self::World;

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

    /// Opt in to shared lives: a deep copy of `world` that shares nothing
    /// with it (a later life on either leaves the other as it was). `None`
    /// (the default) keeps every scenario on a fresh world of its own.
    ///
    /// Together with [`fingerprint`](Subject::fingerprint) it lets the
    /// runner start the children of a scenario from a copy of the world its
    /// crashed lives left instead of replaying them, and reuse a life's
    /// outcome for every scenario that reaches the same world.
    fn snapshot(&self, _world: &Self::World) -> Option<Self::World> {
        None
    }

    /// Opt in to shared lives: a hash of everything in `world` a life can
    /// observe ([`Fingerprint::observe`]) and, separately, of everything only
    /// the judge counts ([`Fingerprint::judge`]). Two worlds with the same
    /// fingerprint must give the same life (same hits, same world after) at
    /// every crash target, and the same verdict: whatever a life or the
    /// judge reads must be hashed. `None` (the default) shares nothing.
    fn fingerprint(&self, _world: &Self::World) -> Option<Fingerprint> {
        None
    }
}
