//! Scopes by hand, and the crash a scope catches.
//!
//! [`record`](crate::record) and [`crash_at`](crate::crash_at) are
//! [`run`] with no target and with one. This module is for what they leave
//! out:
//!
//! * a [`Handle`] on a scope: [`current`] returns the one this thread runs
//!   in, [`Handle::enter`] carries it into a thread that
//!   [`spawn`](crate::spawn) did not start (a pool's worker, say), and
//!   [`Handle::cancel`] stops it from another thread;
//! * the panic payload of an injected crash, [`Crash`], which [`is_crash`]
//!   recognises in a caught panic;
//! * the panic hook that keeps injected crashes silent, [`install_hook`]:
//!   installed once, it swallows the [`Crash`] payload and passes every other
//!   panic to the hook that was there before. A real panic inside a scope
//!   comes back as [`Outcome::Panicked`], never mistaken for an injected
//!   crash.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use crate::{Hit, Life, Outcome};

/// The panic payload of an injected crash. Catch it with
/// [`crash_at`](crate::crash_at); test for it with [`is_crash`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crash {
    /// The hit at which the crash was injected.
    pub hit: Hit,
}

/// The injected crash in a panic payload, if it is one.
pub fn is_crash(payload: &(dyn Any + Send)) -> Option<&Crash> {
    payload.downcast_ref::<Crash>()
}

#[derive(Debug, Default)]
struct State {
    hits: Vec<Hit>,
    counts: Vec<(&'static str, u32)>,
    target: Option<Hit>,
    crashed: Option<Hit>,
    /// [`Handle::cancel`] was called: the next hit stops the scope.
    cancel: bool,
    /// The scope was stopped by [`Handle::cancel`], at this hit.
    cancelled: Option<Hit>,
    /// [`Handle::pause_at`]: the hit, and what runs there.
    pause: Option<Pause>,
}

/// What [`Handle::pause_at`] runs at its hit.
#[derive(Clone)]
struct Pause {
    hit: Hit,
    then: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pause at {}", self.hit)
    }
}

/// A handle on the scope a thread runs in, to carry it into another thread.
#[derive(Clone, Debug)]
pub struct Handle {
    state: Arc<Mutex<State>>,
}

thread_local! {
    pub(crate) static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A poisoned scope only means another thread of the same life panicked
    // while holding it; the list of hits is still consistent.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Handle {
    /// A new scope that records every hit and crashes at `target` (never, if
    /// `None`); run a closure in it with [`Handle::run`]. [`run`] is
    /// `Handle::new(target).run(f)`; keep the handle to [`cancel`](Handle::cancel)
    /// the scope from another thread.
    pub fn new(target: Option<Hit>) -> Handle {
        Handle {
            state: Arc::new(Mutex::new(State {
                target,
                ..State::default()
            })),
        }
    }

    /// At `hit`, hold the thread that reaches it and run `then` there, then
    /// let the life go on, as if the process had been paused (a long GC
    /// pause, a stalled VM, `SIGSTOP`) at that point. The hit is recorded
    /// like any other; a scope that also crashes at `hit` crashes instead.
    /// `then` runs outside the scope: points it passes on its own thread
    /// are not this life's (run another life there in a scope of its own).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use crashpoint::scope::Handle;
    /// use crashpoint::Hit;
    ///
    /// let seen = Arc::new(AtomicU32::new(0));
    /// let during = Arc::clone(&seen);
    /// let state = Arc::new(AtomicU32::new(0));
    /// let life_state = Arc::clone(&state);
    /// let life = Handle::new(None)
    ///     .pause_at(Hit::new("step", 2), move || {
    ///         // What the world looked like while the life was held.
    ///         during.store(life_state.load(Ordering::SeqCst), Ordering::SeqCst);
    ///     })
    ///     .run(|| {
    ///         for _ in 0..3 {
    ///             crashpoint::point!("step");
    ///             state.fetch_add(1, Ordering::SeqCst);
    ///         }
    ///     });
    /// assert!(life.outcome.crashed().is_none());
    /// # if crashpoint::ENABLED {
    /// assert_eq!(seen.load(Ordering::SeqCst), 1);
    /// # }
    /// ```
    pub fn pause_at(self, hit: Hit, then: impl Fn() + Send + Sync + 'static) -> Handle {
        lock(&self.state).pause = Some(Pause {
            hit,
            then: Arc::new(then),
        });
        self
    }

    /// Run `f` in this scope, as [`run`] does: catch the injected crash (or a
    /// real panic) and return how the scope ended with its hits.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Life<R> {
        install_hook();
        let result = self.enter(|| panic::catch_unwind(AssertUnwindSafe(f)));
        let mut st = lock(&self.state);
        let hits = std::mem::take(&mut st.hits);
        let outcome = match result {
            Ok(r) => match st.crashed.take() {
                // A spawned thread crashed but the life swallowed the panic:
                // the process would be dead all the same.
                Some(hit) => Outcome::Crashed(hit),
                None => Outcome::Finished(r),
            },
            Err(payload) => match is_crash(payload.as_ref()) {
                Some(c) => Outcome::Crashed(c.hit.clone()),
                None => Outcome::Panicked(message(payload.as_ref())),
            },
        };
        Life { outcome, hits }
    }

    /// Stop the scope at its next hit, from any thread: that hit panics with
    /// the [`Crash`] payload as an injected crash would, so the scope ends
    /// [`Outcome::Crashed`] there and [`Handle::cancelled`] names the hit. A
    /// thread that never passes another point cannot be stopped this way (Rust
    /// has no thread cancellation): it runs on until it returns.
    pub fn cancel(&self) {
        lock(&self.state).cancel = true;
    }

    /// Whether [`Handle::cancel`] was called and the scope has not stopped
    /// yet: a life that waits for something other than its own points (a
    /// child process, say) polls this and calls [`Handle::stop`].
    pub fn cancel_requested(&self) -> bool {
        let st = lock(&self.state);
        st.cancel && st.crashed.is_none()
    }

    /// Stop the scope here, as a [`cancel`](Handle::cancel) stops it at a
    /// hit: the scope ends [`Outcome::Crashed`] and [`Handle::cancelled`]
    /// names its last hit (`life start#1` if it passed none). Call it on a
    /// thread running in this scope, once whatever the life waited for is
    /// stopped; it unwinds with the [`Crash`] payload.
    pub fn stop(&self) -> ! {
        let hit = {
            let mut st = lock(&self.state);
            let hit = st
                .hits
                .last()
                .cloned()
                .unwrap_or_else(|| Hit::new("life start", 1));
            st.cancelled = Some(hit.clone());
            st.crashed = Some(hit.clone());
            hit
        };
        panic::panic_any(Crash { hit })
    }

    /// The hit at which [`Handle::cancel`] stopped the scope, if it did.
    pub fn cancelled(&self) -> Option<Hit> {
        lock(&self.state).cancelled.clone()
    }

    /// The last hit the scope passed so far (not counting a crash hit).
    pub fn last_hit(&self) -> Option<Hit> {
        lock(&self.state).hits.last().cloned()
    }

    /// Run `f` on this thread inside this scope; the previous scope (if any)
    /// is restored afterwards, even if `f` panics.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Handle>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                ACTIVE.with(|a| a.set(prev.is_some()));
                CURRENT.with(|c| *c.borrow_mut() = prev);
            }
        }
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        ACTIVE.with(|a| a.set(true));
        let _restore = Restore(prev);
        f()
    }
}

/// The scope this thread runs in, if any.
pub fn current() -> Option<Handle> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Run `f` in a new scope that records every hit and crashes at `target`
/// (never, if `None`).
pub fn run<R>(target: Option<Hit>, f: impl FnOnce() -> R) -> Life<R> {
    Handle::new(target).run(f)
}

#[cold]
#[inline(never)]
pub(crate) fn hit_in_scope(name: &'static str) {
    // Decide under the scope's lock (borrowing the thread's handle, not
    // cloning it), then panic only after every borrow is released: the
    // unwinding restores the previous scope, which needs the RefCell.
    let crash = CURRENT.with(|current| {
        let current = current.borrow();
        let handle = current.as_ref()?;
        let mut st = lock(&handle.state);
        if let Some(hit) = st.crashed.clone() {
            // The life is already dead: a thread still running in it dies too.
            return Some(Err(hit));
        }
        let occurrence = match st.counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => {
                *c += 1;
                *c
            }
            None => {
                st.counts.push((name, 1));
                1
            }
        };
        let hit = Hit::new(name, occurrence);
        if st.cancel {
            st.cancelled = Some(hit.clone());
            st.crashed = Some(hit.clone());
            return Some(Err(hit));
        }
        if st.target.as_ref() == Some(&hit) {
            st.crashed = Some(hit.clone());
            Some(Err(hit))
        } else {
            let pause = st.pause.as_ref().filter(|p| p.hit == hit).cloned();
            st.hits.push(hit);
            pause.map(Ok)
        }
    });
    match crash {
        Some(Err(hit)) => panic::panic_any(Crash { hit }),
        // Held: every borrow and lock released, so `then` may read the
        // scope (or run other scopes) while this thread waits.
        Some(Ok(pause)) => {
            // Outside the scope while held: restored afterwards, even if
            // `then` panics.
            struct Back(Option<Handle>);
            impl Drop for Back {
                fn drop(&mut self) {
                    let h = self.0.take();
                    ACTIVE.with(|a| a.set(h.is_some()));
                    CURRENT.with(|c| *c.borrow_mut() = h);
                }
            }
            let _back = Back(CURRENT.with(|c| c.borrow_mut().take()));
            ACTIVE.with(|a| a.set(false));
            (pause.then)()
        }
        None => {}
    }
}

static HOOK: Once = Once::new();

/// Install (once per process) the panic hook that keeps injected crashes
/// silent and passes every other panic to the previous hook. Scopes call it
/// themselves; call it early if you install hooks of your own afterwards.
pub fn install_hook() {
    HOOK.call_once(|| {
        let prev = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Crash>().is_none() {
                prev(info);
            }
        }));
    });
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}
