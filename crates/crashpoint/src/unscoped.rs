//! The unscoped watch: counting passes over points outside any scope.
//!
//! A pass outside every scope is recorded by no scope and no crash can land
//! on it. While an [`UnscopedWatch`] (from [`watch_unscoped`]) is alive such
//! passes are tallied by whom they belong to, as far as the process can
//! tell:
//!
//! * a thread under the watch's [`Owner`] (a sweep's own threads) is the
//!   watch's;
//! * a plain thread (`std::thread::spawn`, a runtime's worker) started,
//!   directly or not, from a thread while it ran a life of the watch's
//!   threads is the watch's too ([`UnscopedWatch::plain`]). A life marks its
//!   thread, and a new thread inherits the mark (see `mark` below), so this
//!   holds whatever else the process runs at the same time;
//! * any other plain thread was started by no life: nothing tells whose it
//!   is ([`UnscopedWatch::stray`], [`UnscopedWatch::during_lives`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A tally of passes over points, each name with its count, in the order
/// first seen.
type Tally = Vec<(Cow<'static, str>, u64)>;

/// How many [`UnscopedWatch`]es are alive.
pub(crate) static WATCHES: AtomicUsize = AtomicUsize::new(0);
/// The tallies of every [`UnscopedWatch`] alive.
static ALIVE: Mutex<Vec<Arc<Tallies>>> = Mutex::new(Vec::new());
/// The number of the next watch (never 0: 0 is no mark).
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// One watch's tallies (shared by its [`Owner`]s).
#[derive(Debug, Default)]
struct Tallies {
    /// The watch's number, which its lives' threads carry as their mark.
    id: u32,
    /// Passes on the threads the watch owns.
    owned: Mutex<Tally>,
    /// Passes on plain threads its lives started.
    plain: Mutex<Tally>,
    /// Passes on plain threads no life started while the watch was alive.
    stray: Mutex<Tally>,
    /// Those of `stray` passed while a life of the watch ran.
    during: Mutex<Tally>,
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

fn count(tally: &mut Tally, name: Cow<'static, str>) {
    match tally.iter_mut().find(|(n, _)| *n == name) {
        Some((_, c)) => *c += 1,
        None => tally.push((name, 1)),
    }
}

fn owned(tally: &Tally) -> Vec<(String, u64)> {
    tally.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[cold]
#[inline(never)]
pub(crate) fn unscoped_hit(name: &'static str) {
    let counted = OWNER.with(|o| match o.try_borrow() {
        Ok(owner) => match owner.as_ref() {
            Some(owner) => {
                count(&mut tally_lock(&owner.tallies.owned), Cow::Borrowed(name));
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
    // Started by a life: that life's watch's alone. Once the watch is gone
    // (a pool a life started, used later by others) it is nobody's.
    let marked = mark::read().and_then(|id| alive.iter().find(|t| t.id == id));
    if let Some(t) = marked {
        count(&mut tally_lock(&t.plain), Cow::Borrowed(name));
        return;
    }
    for t in alive.iter() {
        count(&mut tally_lock(&t.stray), Cow::Borrowed(name));
        if t.lives.load(Ordering::SeqCst) > 0 {
            count(&mut tally_lock(&t.during), Cow::Borrowed(name));
        }
    }
}

/// Count passes that a scope recorded but no crash can land on (a judge's,
/// which runs in a scope of its own) as passes outside any scope on this
/// thread: for its owner, if any.
pub fn count_unscoped<'a>(names: impl IntoIterator<Item = &'a Cow<'static, str>>) {
    let Some(owner) = current_owner() else {
        return;
    };
    let mut tally = tally_lock(&owner.tallies.owned);
    for name in names {
        count(&mut tally, name.clone());
    }
}

/// A life runs on this thread until the guard drops: counted for the
/// thread's owner (if any), and the thread marked as the owner's, so that
/// the plain threads the life starts are known as its.
pub(crate) struct LifeRunning(Option<(Owner, mark::Saved)>);

pub(crate) fn life_running() -> LifeRunning {
    LifeRunning(current_owner().map(|o| {
        o.tallies.lives.fetch_add(1, Ordering::SeqCst);
        let saved = mark::set(o.tallies.id);
        (o, saved)
    }))
}

impl Drop for LifeRunning {
    fn drop(&mut self) {
        if let Some((o, saved)) = self.0.take() {
            mark::restore(saved);
            o.tallies.lives.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The mark a life's thread carries, and every thread started from it
/// inherits: a watch's number, written in the thread's signal mask.
///
/// Rust gives no hook when `std::thread::spawn` (or a runtime) starts a
/// thread, but the kernel copies the starting thread's signal mask into
/// the new one (POSIX requires it of `pthread_create`). So while a life
/// runs, its thread blocks a pattern of real-time signals that spells its
/// watch's number; a plain thread passing a point reads its own mask back.
/// The pattern uses the 24 highest real-time signals: 4 fixed bits, so
/// that a thread blocking every signal reads as no mark, and 20 bits of
/// number. Blocking them costs a program nothing unless it waits for those
/// signals on a life's thread. A child process starts with an empty mask
/// (std's `Command` clears it).
#[cfg(target_os = "linux")]
mod mark {
    use std::mem::MaybeUninit;

    /// The fixed bits, lowest signal first.
    const TAG: [bool; 4] = [true, false, true, false];
    /// Bits of a watch's number.
    const ID_BITS: i32 = 20;

    /// The mask the thread had before [`set`].
    pub(crate) struct Saved(Option<libc::sigset_t>);

    /// The `k`-th signal of the pattern, if the system has enough.
    fn signal(k: i32) -> Option<i32> {
        let top = libc::SIGRTMAX();
        let s = top - (TAG.len() as i32 + ID_BITS) + 1 + k;
        (s >= libc::SIGRTMIN()).then_some(s)
    }

    fn current() -> Option<libc::sigset_t> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: a null new set only reads the mask into `set`.
        let rc =
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), set.as_mut_ptr()) };
        // SAFETY: written by the call when it succeeds.
        (rc == 0).then(|| unsafe { set.assume_init() })
    }

    pub(crate) fn set(id: u32) -> Saved {
        let Some(old) = current() else {
            return Saved(None);
        };
        let mut new = old;
        for k in 0..(TAG.len() as i32 + ID_BITS) {
            let Some(s) = signal(k) else {
                return Saved(None);
            };
            let on = match TAG.get(k as usize) {
                Some(t) => *t,
                None => (id >> (k - TAG.len() as i32)) & 1 == 1,
            };
            // SAFETY: `new` is an initialised set and `s` a valid signal.
            unsafe {
                if on {
                    libc::sigaddset(&mut new, s);
                } else {
                    libc::sigdelset(&mut new, s);
                }
            }
        }
        // SAFETY: both sets are initialised.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &new, std::ptr::null_mut()) };
        Saved((rc == 0).then_some(old))
    }

    pub(crate) fn restore(saved: Saved) {
        if let Some(old) = saved.0 {
            // SAFETY: `old` is the initialised set read in `set`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        }
    }

    /// The watch number this thread's mask spells, if it spells one.
    pub(crate) fn read() -> Option<u32> {
        let set = current()?;
        let mut id = 0u32;
        for k in 0..(TAG.len() as i32 + ID_BITS) {
            let s = signal(k)?;
            // SAFETY: `set` is initialised and `s` a valid signal.
            let on = unsafe { libc::sigismember(&set, s) } == 1;
            match TAG.get(k as usize) {
                Some(t) if *t != on => return None,
                Some(_) => {}
                None => id |= u32::from(on) << (k - TAG.len() as i32),
            }
        }
        (id != 0).then_some(id)
    }

    /// The largest number a mark holds; watch numbers wrap past it.
    pub(crate) const MAX: u32 = (1 << ID_BITS) - 1;
}

/// Elsewhere no mark: a plain thread's passes are nobody's.
#[cfg(not(target_os = "linux"))]
mod mark {
    pub(crate) struct Saved;
    pub(crate) fn set(_: u32) -> Saved {
        Saved
    }
    pub(crate) fn restore(_: Saved) {}
    pub(crate) fn read() -> Option<u32> {
        None
    }
    pub(crate) const MAX: u32 = u32::MAX;
}

/// While alive, counts the passes over points outside any scope — hits no
/// scope records and no crash can land on — in four tallies:
///
/// * [`UnscopedWatch::hits`]: passes on the threads the watch *owns*: those
///   running under its [`Owner`] (a sweep's own threads: the one that runs
///   it and its workers) and the threads they start with
///   [`spawn`](crate::spawn), and the points a judge passes
///   ([`count_unscoped`]). These belong to whoever holds the watch.
/// * [`UnscopedWatch::plain`]: passes on plain threads (`std::thread::spawn`,
///   a runtime's worker) that a life of the watch's threads started,
///   directly or through threads they started. These are the watch's as
///   surely as the first kind, whatever else the process runs (on Linux;
///   elsewhere this tally stays empty).
/// * [`UnscopedWatch::stray`]: passes on plain threads no life started —
///   a pool started before the life, another test's thread — while the
///   watch is alive, counted for each watch alive then. Nothing tells
///   whose they are: read it as a warning, never compare it.
/// * [`UnscopedWatch::during_lives`]: those of them passed while a life of
///   the watch's threads ran: the watch's own if nothing else in the
///   process passes points (a process per test, as `cargo nextest` runs
///   them), perhaps not otherwise.
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
    let mut alive = ALIVE.lock().unwrap_or_else(|e| e.into_inner());
    // A number no live watch holds (they wrap past what a mark holds).
    let id = loop {
        let n = NEXT_ID.fetch_add(1, Ordering::Relaxed) % mark::MAX.saturating_add(1);
        if n != 0 && !alive.iter().any(|t| t.id == n) {
            break n;
        }
    };
    let owner = Owner {
        tallies: Arc::new(Tallies {
            id,
            ..Tallies::default()
        }),
    };
    alive.push(Arc::clone(&owner.tallies));
    WATCHES.fetch_add(1, Ordering::SeqCst);
    UnscopedWatch { owner }
}

impl UnscopedWatch {
    /// The owner whose threads count for this watch alone.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Each point passed outside any scope on a thread this watch owns (or
    /// in a judge, see [`count_unscoped`]), with how many times, in the
    /// order first seen.
    pub fn hits(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.owned))
    }

    /// Each point passed on a plain thread that a life of this watch's
    /// threads started, with how many times, in the order first seen.
    pub fn plain(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.plain))
    }

    /// Each point passed outside any scope on a plain thread no life
    /// started while this watch was alive, with how many times, in the
    /// order first seen. May include other code's points.
    pub fn stray(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.stray))
    }

    /// The passes of [`UnscopedWatch::stray`] made while a life ran on a
    /// thread this watch owns.
    pub fn during_lives(&self) -> Vec<(String, u64)> {
        owned(&tally_lock(&self.owner.tallies.during))
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
