//! The subject: a program to sweep, as the runner sees it — a fresh world,
//! one life against it, and a judge of the world once a scenario is over.

use crate::judge::{Counter, Verdict};

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
}
