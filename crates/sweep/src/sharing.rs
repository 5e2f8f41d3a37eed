//! Sharing lives between scenarios: the opt-in a subject gives the runner
//! ([`Share`], returned by [`Subject::share`](crate::Subject::share)) and
//! the capture of a world while a life runs ([`Capture`]).
//!
//! A life of a deterministic program is a function of the world it starts
//! from and the hit it crashes at. A subject that can copy its world and
//! hash it lets the runner start each scenario's children from a copy
//! instead of replaying the lives before, and reuse a final life's outcome
//! for every scenario that reaches the same world. A subject that can also
//! copy its world *while a life runs* ([`Share::capture`]) lets the runner
//! skip the crashed life too: a crash at a hit leaves the world as the life
//! had it at that hit, so the copy taken at the hit in the parent's final
//! life is where the child's restart begins — about one life per scenario.
//!
//! # Why a capture, and not a look at the world
//!
//! A life holds its world mutably (`life(&self, world: &mut World)`), so
//! the runner cannot read it at a hit without aliasing a `&mut`. Instead,
//! before a life starts, the runner asks the subject for a [`Capture`]: a
//! closure over the handles the world shares with the life (the
//! `Arc<Mutex<…>>` inside an in-memory directory, a tracker, the
//! observer's notes). The runner calls it on the life's thread at each hit
//! (through [`crashpoint::scope::Handle::watch_hits`], with no lock of the
//! program's held: points sit outside them), and it deep-copies the state
//! as a crash there would leave it (held locks released, as a dead process
//! releases them).
//!
//! # Caught, not trusted
//!
//! A subject that declares wrongly (a fingerprint that misses something a
//! life reads, a capture that misses a field) would give wrong tables. The
//! runner refuses such a subject with
//! [`Error::NotShareable`](crate::Error::NotShareable): before the sweep,
//! the captures of the clean life are compared with the worlds brute-force
//! crashes leave at the same hits; during it, a fixed sample of shared
//! scenarios (chosen by a hash of their names, so the same in every run) is
//! replayed from a fresh world and must give the same result.

pub use crate::fingerprint::Fingerprint;

/// A subject's opt-in to shared lives. Return it from
/// [`Subject::share`](crate::Subject::share) (usually `Some(self)`).
pub trait Share<W>: Sync {
    /// A deep copy of `world` that shares nothing with it (a later life on
    /// either leaves the other as it was). `None` keeps every scenario on a
    /// fresh world of its own.
    fn copy(&self, world: &W) -> Option<W>;

    /// A hash of everything in `world` a life can observe
    /// ([`Fingerprint::observe`]) and, separately, of everything only the
    /// judge counts ([`Fingerprint::judge`]). Two worlds with the same
    /// fingerprint must give the same life (same hits, same world after)
    /// at every crash target, and the same verdict: whatever a life or the
    /// judge reads must be hashed. `None` shares nothing.
    fn fingerprint(&self, world: &W) -> Option<Fingerprint>;

    /// A way to copy `world` while a life runs on it (see the
    /// [module docs](self)), taken just before the life starts. `None` (the
    /// default): each scenario runs its crashed life again from its
    /// parent's world.
    fn capture(&self, _world: &W) -> Option<Capture<W>> {
        None
    }
}

/// Copies a world while a life runs on it: the world as a crash at the
/// current point would leave it, or `None` if it cannot be copied now.
/// Build it from clones of the handles the world shares with its life.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use sweep::sharing::Capture;
///
/// let counter = Arc::new(Mutex::new(3u32));
/// let seen = Arc::clone(&counter);
/// let capture = Capture::new(move || Some(Arc::new(Mutex::new(*seen.lock().ok()?))));
/// *counter.lock().unwrap() += 1;
/// assert_eq!(*capture.take().unwrap().lock().unwrap(), 4);
/// ```
pub struct Capture<W>(Box<dyn Fn() -> Option<W> + Send + Sync>);

impl<W> Capture<W> {
    /// A capture that calls `copy` at each hit.
    pub fn new(copy: impl Fn() -> Option<W> + Send + Sync + 'static) -> Self {
        Capture(Box::new(copy))
    }

    /// The world as a crash now would leave it.
    pub fn take(&self) -> Option<W> {
        (self.0)()
    }
}

impl<W> std::fmt::Debug for Capture<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Capture")
    }
}
