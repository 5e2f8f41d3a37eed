//! The unscoped watch: counting passes over points outside any scope.
//!
//! A pass outside every scope is recorded by no scope and no crash can land
//! on it. While an [`UnscopedWatch`] (from [`watch_unscoped`]) is alive such
//! passes are tallied, per [`Owner`] for the threads a watch owns and, for
//! the threads nobody owns ("stray"), by every watch alive at the time —
//! and by the one watch whose lives alone were running then ("attributed").

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A tally of passes over points, each name with its count, in the order
/// first seen.
type Tally = Vec<(&'static str, u64)>;

/// How many [`UnscopedWatch`]es are alive.
pub(crate) static WATCHES: AtomicUsize = AtomicUsize::new(0);
/// The tallies of every [`UnscopedWatch`] alive, for passes on threads no
/// watch owns.
static ALIVE: Mutex<Vec<Arc<Tallies>>> = Mutex::new(Vec::new());

/// One watch's tallies (shared by its [`Owner`]s).
#[derive(Debug, Default)]
struct Tallies {
    /// Passes on the threads the watch owns.
    owned: Mutex<Tally>,
    /// Passes on threads nobody owns while the watch was alive.
    stray: Mutex<Tally>,
    /// Those of `stray` passed while this watch's owner alone, of all the
    /// watches alive, had a life running.
    attributed: Mutex<Tally>,
    /// Lives ([`Handle::run`](crate::scope::Handle::run)) running now on
    /// the threads the watch owns.
    lives: AtomicUsize,
}

thread_local! {
    /// The watch this thread works for (see [`Owner`]), if any.
    static OWNER: RefCell<Option<Owner>> = const { RefCell::new(None) };
}

fn tally_lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(|e| e.into_inner())
}

fn count(tally: &mut Tally, name: &'static str) {
    match tally.iter_mut().find(|(n, _)| *n == name) {
        Some((_, c)) => *c += 1,
        None => tally.push((name, 1)),
    }
}

fn owned(tally: &Tally) -> Vec<(String, u64)> {
    tally.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect()
}

#[cold]
#[inline(never)]
pub(crate) fn unscoped_hit(name: &'static str) {
    let counted = OWNER.with(|o| match o.try_borrow() {
        Ok(owner) => match owner.as_ref() {
            Some(owner) => {
                count(&mut tally_lock(&owner.tallies.owned), name);
                true
            }
            None => false,
        },
        Err(_) => false,
    });
    if counted {
        return;
    }
    let alive = ALIVE.lock().unwrap_or_else(|e| e.into_inner());
    let mut living = alive.iter().filter(|t| t.lives.load(Ordering::SeqCst) > 0);
    if let (Some(only), None) = (living.next(), living.next()) {
        count(&mut tally_lock(&only.attributed), name);
    }
    for t in alive.iter() {
        count(&mut tally_lock(&t.stray), name);
    }
}

/// A life runs on this thread until the guard drops: counted for the
/// thread's owner (if any), to tell whose life a stray pass happened in.
pub(crate) struct LifeRunning(Option<Owner>);

pub(crate) fn life_running() -> LifeRunning {
    let owner = current_owner();
    if let Some(o) = &owner {
        o.tallies.lives.fetch_add(1, Ordering::SeqCst);
    }
    LifeRunning(owner)
}

impl Drop for LifeRunning {
    fn drop(&mut self) {
        if let Some(o) = &self.0 {
            o.tallies.lives.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// While alive, counts the passes over points outside any scope — hits no
/// scope records and no crash can land on — in two tallies:
///
/// * [`UnscopedWatch::hits`]: passes on the threads the watch *owns*: those
///   running under its [`Owner`] (a sweep's own threads: the one that runs
///   it and its workers) and the threads they start with [`spawn`](crate::spawn). These
///   belong to whoever holds the watch and nobody else.
/// * [`UnscopedWatch::stray`]: passes on threads nobody owns — a thread
///   started with `std::thread::spawn` instead of [`spawn`](crate::spawn), a runtime's
///   worker — while the watch is alive, counted for each watch alive then
///   (each watch has its own tally, from zero). Rust cannot tell which code
///   started such a thread: in a test binary it may hold another test's
///   points. Read it as a warning, never compare it.
/// * [`UnscopedWatch::attributed`]: those of them passed while a life ran
///   ([`Handle::run`](crate::scope::Handle::run)) on a thread this watch
///   owns and on no thread another live watch owns: passes that, unless
///   code that runs no life passed them meanwhile, this watch's lives
///   caused. A sweep can refuse these.
#[derive(Debug)]
pub struct UnscopedWatch {
    owner: Owner,
}

/// The owner of an [`UnscopedWatch`]'s threads: a thread that runs under it
/// (see [`Owner::enter`] and [`Owner::adopt_thread`]) counts its passes
/// outside any scope for that watch alone. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Owner {
    tallies: Arc<Tallies>,
}

impl Owner {
    /// Run `f` with the current thread owned by this owner; the thread's
    /// previous owner (if any) is restored afterwards, even if `f` panics.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Owner>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                OWNER.with(|o| *o.borrow_mut() = prev);
            }
        }
        let prev = OWNER.with(|o| o.borrow_mut().replace(self.clone()));
        let _restore = Restore(prev);
        f()
    }

    /// Own the current thread for the rest of its life (a worker thread of
    /// a pool made for one sweep, from the pool's start handler).
    pub fn adopt_thread(&self) {
        OWNER.with(|o| *o.borrow_mut() = Some(self.clone()));
    }
}

/// The owner of the current thread, if any: carried into threads started
/// with [`spawn`](crate::spawn).
pub fn current_owner() -> Option<Owner> {
    OWNER.with(|o| o.borrow().clone())
}

/// Start counting passes over points outside any scope (see [`UnscopedWatch`]).
pub fn watch_unscoped() -> UnscopedWatch {
    let owner = Owner::default();
    ALIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::clone(&owner.tallies));
    WATCHES.fetch_add(1, Ordering::SeqCst);
    UnscopedWatch { owner }
}

impl UnscopedWatch {
    /// The owner whose threads count for this watch alone.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Each point passed outside any scope on a thread this watch owns,
    /// with how many times, in the order first seen.
    pub fn hits(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.owned))
    }

    /// Each point passed outside any scope on a thread no watch owns while
    /// this watch was alive, with how many times, in the order first seen.
    /// May include other code's points.
    pub fn stray(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.stray))
    }

    /// The passes of [`UnscopedWatch::stray`] made while a life ran on a
    /// thread this watch owns and on no thread of another live watch.
    pub fn attributed(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.attributed))
    }
}

impl Drop for UnscopedWatch {
    fn drop(&mut self) {
        WATCHES.fetch_sub(1, Ordering::SeqCst);
        ALIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| !Arc::ptr_eq(t, &self.owner.tallies));
    }
}

#[cfg(all(test, feature = "enabled"))]
mod tests {
    use super::*;
    use crate::{join, point, record, spawn};

    #[test]
    fn unscoped_hits_are_counted_only_while_watched() {
        // Before any watch: not counted.
        std::thread::spawn(|| point!("unscoped-before"))
            .join()
            .unwrap();
        let watch = watch_unscoped();
        std::thread::spawn(|| {
            point!("unscoped-test-point");
            point!("unscoped-test-point");
        })
        .join()
        .unwrap();
        // A point inside a scope is not unscoped.
        let _ = record(|| point!("scoped-test-point"));
        // A plain thread is nobody's: a stray pass.
        assert!(!watch.hits().iter().any(|(n, _)| n == "unscoped-test-point"));
        let hits = watch.stray();
        assert!(
            hits.contains(&("unscoped-test-point".to_owned(), 2)),
            "{hits:?}"
        );
        assert!(!hits
            .iter()
            .any(|(n, _)| n == "scoped-test-point" || n == "unscoped-before"));
    }

    #[test]
    fn an_owned_thread_counts_for_its_watch_alone() {
        let mine = watch_unscoped();
        let theirs = watch_unscoped();
        mine.owner().enter(|| {
            point!("owned-test-point");
            // A thread started with `spawn` outside a scope keeps the owner.
            join(spawn(|| point!("owned-spawned-point")));
        });
        // After `enter`, the thread is nobody's again.
        std::thread::spawn(|| {
            point!("owned-stray-point");
        })
        .join()
        .unwrap();
        let adopted = theirs.owner().clone();
        std::thread::spawn(move || {
            adopted.adopt_thread();
            point!("adopted-test-point");
            point!("adopted-test-point");
        })
        .join()
        .unwrap();
        assert_eq!(
            mine.hits(),
            [
                ("owned-test-point".to_owned(), 1),
                ("owned-spawned-point".to_owned(), 1)
            ]
        );
        assert_eq!(theirs.hits(), [("adopted-test-point".to_owned(), 2)]);
        for w in [&mine, &theirs] {
            let stray = w.stray();
            assert!(
                stray.contains(&("owned-stray-point".to_owned(), 1)),
                "{stray:?}"
            );
            assert!(!stray.iter().any(|(n, _)| n.starts_with("owned-test")
                || n.starts_with("adopted")
                || n.starts_with("owned-spawned")));
        }
        assert!(current_owner().is_none());
    }
}
