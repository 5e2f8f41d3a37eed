//! Sharing lives between scenarios: the opt-in a subject gives the runner
//! ([`Share`], returned by [`Subject::share`](crate::Subject::share)), the
//! capture of a world while a life runs ([`Capture`]), and the split of a
//! world into behaviour state and tallies for shared tails ([`Probe`],
//! [`Tally`]).
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
//! # Shared tails
//!
//! After a restart has recovered, the rest of its life is usually a life
//! some earlier scenario already ran: the same hits from the same state.
//! A subject that splits its world into *behaviour state* (what decides
//! what the program does next, and how the rest of the life changes the
//! counts) and *tallies* (counts that only add up: model calls repeated,
//! questions asked, lost saves, settled crash records) lets the runner run
//! each such rest once. It gives a [`Probe`] ([`Share::probe`]), which the
//! runner calls at each hit of a leaf's final life (the last life of a
//! scenario with no children) and of the final life of a scenario whose
//! children are leaves, to read the behaviour state's fingerprint and
//! the tallies, [`Share::graft`], which builds the world a life leaves
//! from an earlier life's end and the two lives' tallies at the hit (the
//! runner only judges it), and [`Share::shift`], the same sum on tallies
//! alone.
//!
//! When a life stands at a point (same life of its scenario, same point,
//! however often either life passed it) where an earlier life that ran to
//! its end stood with the same behaviour fingerprint, the runner stops it
//! there and judges the grafted world instead of running the rest: each
//! distinct (position, behaviour state) runs once. A life that resumed
//! from a later save reaches the same state having passed each point fewer
//! times, so the behaviour state must also tell apart the places one point
//! sits in (a save helper's point, passed at every save, sits after each of
//! them: the state under way tells them apart). A life's start
//! (before its boot) is a position too, so a life whose start was seen
//! before runs not at all; a life that ended on a tail leaves its start
//! as a step to that tail, with [`Share::shift`] carrying the tallies
//! along (the chains are kept short). A final life whose children are
//! leaves stops the same way where an earlier such life stood, once that
//! life's children are done: its later children's results are the earlier
//! children's tails with this life's tallies shifted on, and its later hits
//! the earlier life's, each numbered on from this life's own passes. The program's own
//! memory is not in the world: a subject declares, by sharing tails, that
//! at a hit its world decides what the program holds in memory too (what
//! a life reads back and has not yet written again must leave a mark in
//! the behaviour state, e.g. the observer's notes of the model's replies).
//! A hit with another thread running is never a tail's start.
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
//! [`Error::WronglyShared`](crate::Error::WronglyShared) (and one whose two
//! clean runs differ with [`Error::NotShareable`](crate::Error::NotShareable)):
//! before the sweep, the captures of the clean life are compared with the
//! worlds brute-force crashes leave at the same hits; during it, a fixed
//! sample of shared scenarios (the first at each depth, and one in 32
//! chosen by a hash of their names — at a depth whose scenarios, estimated
//! from the clean run's hits, exceed 32 × 128, about 128 of them, so the
//! replays, each as long as the clean run, grow with the clean run and not
//! with the scenarios — the same in every run) is replayed from a fresh world and must give the same result — shared
//! tails included: a sampled scenario whose life ended on a tail is judged
//! on its grafted world, and a probe that leaves out a part of the world
//! the rest of the life reads, or a graft that adds wrongly, shows there as
//! a different count. Which scenarios end on a tail depends on which ran
//! first (threads), so a wrong declaration is refused once a sampled
//! scenario ends on a tail it makes wrong; the sample is large enough that
//! such a subject is refused in practice, and the report of a right one is
//! the same in every run.

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

    /// Shared tails: a way to read, at each hit of a life running on
    /// `world`, the fingerprint of its *behaviour state* and its *tallies*
    /// (see [`Probe`] and the [module docs](self#shared-tails)), taken just
    /// before the life starts. `None` (the default): every final life runs
    /// to its end. A subject that gives a probe gives [`Share::graft`] too.
    fn probe(&self, _world: &W) -> Option<Probe> {
        None
    }

    /// The world a life leaves that stood at a hit with tallies `at`, given
    /// that an earlier life stood at the same position (same life of its
    /// scenario, same point) with the same behaviour state and tallies
    /// `from`, and left `end`: `end`'s behaviour state, with the tallies
    /// `at` plus what the earlier life added after the hit (`end`'s minus
    /// `from`'s). `None` runs the life to its end instead. The runner only
    /// judges the world this returns (no life runs on it), so it may share
    /// with `end` what nothing changes any more (`end` is never changed
    /// either).
    fn graft(&self, _at: &Tally, _from: &Tally, _end: &W) -> Option<W> {
        None
    }

    /// The tallies a life that stood at a hit with tallies `at` has at a
    /// later hit, given that an earlier life stood at the first hit with
    /// the same behaviour state and tallies `from`, and at the later one
    /// with `to`: `at` plus `to` minus `from`, as [`Share::graft`] adds
    /// them. It lets a life that ended on a tail pass that tail on from
    /// its start. `None` (the default): such a life's start leaves no tail.
    fn shift(&self, _at: &Tally, _from: &Tally, _to: &Tally) -> Option<Tally> {
        None
    }
}

/// Reads, at each hit of a life, the fingerprint of the world's behaviour
/// state and its tallies (`None`: nothing to share at this hit). Built like
/// a [`Capture`], from clones of the handles the world shares with its
/// life; called on the life's thread with no lock of the program's held.
///
/// The behaviour state is everything that decides what the rest of the
/// life does *and how it changes the tallies*: what the program reads back
/// (files, a service's records, anything a reply depends on) and the
/// observer's bookkeeping that decides a later count (a save under way that
/// a restart may find lost, a crash's record not settled yet). The tallies
/// are what only adds up for the judge (model calls repeated, lost saves,
/// settled crash records): a life's rest adds the same to them whatever
/// they were.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use sweep::sharing::{Fingerprint, Probe, Tally};
///
/// // (saved step, model calls so far)
/// let world = Arc::new(Mutex::new((2u32, 5u64)));
/// let seen = Arc::clone(&world);
/// let probe = Probe::new(move || {
///     let (saved, calls) = *seen.lock().ok()?;
///     Some((Fingerprint::new().observe(&saved), Tally::new(calls)))
/// });
/// let (fp, tally) = probe.take().unwrap();
/// assert_eq!(fp, Fingerprint::new().observe(&2u32));
/// assert_eq!(tally.get::<u64>(), Some(&5));
/// ```
#[allow(clippy::type_complexity)]
pub struct Probe(Box<dyn Fn() -> Option<(Fingerprint, Tally)> + Send + Sync>);

impl Probe {
    /// A probe that calls `read` at each hit.
    pub fn new(read: impl Fn() -> Option<(Fingerprint, Tally)> + Send + Sync + 'static) -> Self {
        Probe(Box::new(read))
    }

    /// The behaviour state's fingerprint and the tallies, now.
    pub fn take(&self) -> Option<(Fingerprint, Tally)> {
        (self.0)()
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probe")
    }
}

/// A world's tallies at one hit, of a type the subject chooses (its
/// [`Share::graft`] reads them back with [`Tally::get`]).
pub struct Tally(Box<dyn std::any::Any + Send + Sync>);

impl Tally {
    /// Tallies of any type.
    pub fn new<T: std::any::Any + Send + Sync>(t: T) -> Self {
        Tally(Box::new(t))
    }

    /// The tallies, if they are a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tally")
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
#[allow(clippy::type_complexity)]
pub struct Capture<W>(Box<dyn Fn(Option<&crashpoint::Hit>) -> Option<W> + Send + Sync>);

impl<W> Capture<W> {
    /// A capture that calls `copy` at each hit.
    pub fn new(copy: impl Fn() -> Option<W> + Send + Sync + 'static) -> Self {
        Capture(Box::new(move |_| copy()))
    }

    /// A capture that is told the hit it copies at (a process subject
    /// records it in the copy's lineage). Its [`Capture::take`] without a
    /// hit copies nothing.
    pub fn at_hit(copy: impl Fn(&crashpoint::Hit) -> Option<W> + Send + Sync + 'static) -> Self {
        Capture(Box::new(move |hit| hit.and_then(&copy)))
    }

    /// A capture told the hit when there is one (the erased adapter's,
    /// which passes both ways through).
    pub(crate) fn from_fn(
        copy: impl Fn(Option<&crashpoint::Hit>) -> Option<W> + Send + Sync + 'static,
    ) -> Self {
        Capture(Box::new(copy))
    }

    /// The world as a crash now would leave it.
    pub fn take(&self) -> Option<W> {
        (self.0)(None)
    }

    /// The world as a crash now, at `hit`, would leave it.
    pub fn take_at(&self, hit: &crashpoint::Hit) -> Option<W> {
        (self.0)(Some(hit))
    }
}

impl<W> std::fmt::Debug for Capture<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Capture")
    }
}
