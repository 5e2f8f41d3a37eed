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
//! * the threads of a scope: a thread counts as running in a scope while it
//!   is inside [`Handle::enter`] (every thread [`spawn`](crate::spawn)
//!   starts, every poll of a [`scoped`](crate::task::scoped) task);
//!   [`Handle::running`] names them, [`Handle::fence`] makes each of them
//!   die at its next point, and [`Handle::wait_threads`] waits until none
//!   runs — so a life's threads never act after their life ended;
//! * [`CrashState`], what a crash keeps (a process crash, or a power cut a
//!   directory models by name): the one crash-state type of every crate, a
//!   sweep's dimension; a harness names the state of each life's scope
//!   ([`Handle::set_crash_state`], read back with [`crash_state`]);
//! * the panic hook that keeps injected crashes silent, [`install_hook`]:
//!   installed once, it swallows the [`Crash`] payload and passes every other
//!   panic to the hook that was there before. A real panic inside a scope
//!   comes back as [`Outcome::Panicked`], never mistaken for an injected
//!   crash.

pub use crate::crash_state::{BadCrashState, CrashState};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::time::Instant;

use crate::points::Site;
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
    /// [`Handle::watch_hits`]: what runs at every hit that does not crash.
    watch: Option<Watch>,
    /// [`Handle::fence`] was called: every later hit dies.
    fenced: bool,
    /// The hits passed once fenced (each killed its thread).
    after_fence: Vec<Hit>,
    /// The threads inside [`Handle::enter`] now: an id and a name each.
    entered: Vec<(u64, String)>,
    next_entry: u64,
    /// How many threads wait in [`Handle::wait_threads`]: a thread leaving
    /// signals only then (a signal is a system call even with no waiter,
    /// and a sweep leaves a scope at every life and every judgement).
    waiting: usize,
    /// The crash state the life runs in ([`Handle::set_crash_state`]).
    crash_state: Option<Arc<str>>,
    /// Each point passed, as compiled ([`Handle::sites`]), once.
    sites: Vec<&'static Site>,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    /// Signalled each time a thread leaves [`Handle::enter`].
    left: Condvar,
}

/// What [`Handle::pause_at`] runs at its hit.
#[derive(Clone)]
struct Pause {
    hit: Hit,
    then: Arc<dyn Fn() + Send + Sync>,
}

/// What [`Handle::watch_hits`] runs at each hit: the hit, and how many
/// threads were inside the scope then.
#[derive(Clone)]
struct Watch(Arc<WatchFn>);

/// The closure of [`Handle::watch_hits`].
type WatchFn = dyn Fn(&Hit, usize) + Send + Sync;

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch at every hit")
    }
}

impl std::fmt::Debug for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pause at {}", self.hit)
    }
}

/// A handle on the scope a thread runs in, to carry it into another thread.
#[derive(Clone, Debug)]
pub struct Handle {
    inner: Arc<Inner>,
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
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    target,
                    ..State::default()
                }),
                left: Condvar::new(),
            }),
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
        self.state().pause = Some(Pause {
            hit,
            then: Arc::new(then),
        });
        self
    }

    /// At every hit that does not crash the scope, hold the thread that
    /// reaches it and run `watch` there with the hit and how many threads
    /// were inside the scope at that moment (1: the life's own thread
    /// alone), then let the life go on — as [`Handle::pause_at`] does at one
    /// hit (which runs first, when both match). `watch` runs outside the
    /// scope, with no lock of the scope held, so it may read what the life
    /// shares with it (a sweep copies its world there).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use crashpoint::scope::Handle;
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let life = Handle::new(None)
    ///     .watch_hits(move |hit, threads| log.lock().unwrap().push((hit.to_string(), threads)))
    ///     .run(|| {
    ///         crashpoint::point!("a");
    ///         crashpoint::point!("a");
    ///     });
    /// # if crashpoint::ENABLED {
    /// assert_eq!(life.hits.len(), 2);
    /// assert_eq!(seen.lock().unwrap().len(), 2);
    /// assert_eq!(seen.lock().unwrap()[1].1, 1);
    /// # }
    /// ```
    pub fn watch_hits(self, watch: impl Fn(&Hit, usize) + Send + Sync + 'static) -> Handle {
        self.state().watch = Some(Watch(Arc::new(watch)));
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// Run `f` in this scope, as [`run`] does: catch the injected crash (or a
    /// real panic) and return how the scope ended with its hits.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Life<R> {
        install_hook();
        let running = crate::unscoped::life_running();
        let result = self.enter(|| panic::catch_unwind(AssertUnwindSafe(f)));
        drop(running);
        let mut st = self.state();
        let hits = std::mem::take(&mut st.hits);
        let outcome = match result {
            Ok(r) => match st.crashed.clone() {
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
        self.state().cancel = true;
    }

    /// Whether [`Handle::cancel`] was called and the scope has not stopped
    /// yet: a life that waits for something other than its own points (a
    /// child process, say) polls this and calls [`Handle::stop`].
    pub fn cancel_requested(&self) -> bool {
        let st = self.state();
        st.cancel && st.crashed.is_none()
    }

    /// Stop the scope here, as a [`cancel`](Handle::cancel) stops it at a
    /// hit: the scope ends [`Outcome::Crashed`] and [`Handle::cancelled`]
    /// names its last hit (`life start#1` if it passed none). Call it on a
    /// thread running in this scope, once whatever the life waited for is
    /// stopped; it unwinds with the [`Crash`] payload.
    pub fn stop(&self) -> ! {
        let hit = {
            let mut st = self.state();
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

    /// Tell the code running in this scope the name of the crash state its
    /// life runs in (`process`, `lose`, …): a harness (sweep's runner) sets
    /// it before each life, and a test double of the disk reads it with
    /// [`crash_state`] to refuse a life whose directory was not booted in
    /// that state (durable's `PowerDir`), which would otherwise sweep every
    /// state as a process crash without a word.
    pub fn set_crash_state(&self, name: &str) {
        self.state().crash_state = Some(Arc::from(name));
    }

    /// Each point (as compiled: name, module, file, line) the scope has
    /// passed, once each, in the order first passed; points named at run
    /// time are not among them. What
    /// [`points::never_passed`](crate::points::never_passed) compares with
    /// the points linked into the program.
    pub fn sites(&self) -> Vec<&'static Site> {
        self.state().sites.clone()
    }

    /// The hit at which [`Handle::cancel`] stopped the scope, if it did.
    pub fn cancelled(&self) -> Option<Hit> {
        self.state().cancelled.clone()
    }

    /// The last hit the scope passed so far (not counting a crash hit).
    pub fn last_hit(&self) -> Option<Hit> {
        self.state().hits.last().cloned()
    }

    /// Run `f` on this thread inside this scope; the previous scope (if any)
    /// is restored afterwards, even if `f` panics.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = self.entered(thread_name());
        self.enter_counted(f)
    }

    /// [`Handle::enter`] for a thread counted in the scope since before it
    /// started (`counted`, from [`Handle::entered`] on the thread that
    /// started it): a life that returns at once still sees it running.
    pub(crate) fn enter_as<R>(&self, counted: Entered, f: impl FnOnce() -> R) -> R {
        let _entered = counted;
        self.enter_counted(f)
    }

    /// Run `f` in this scope on this thread, already counted as running in it.
    fn enter_counted<R>(&self, f: impl FnOnce() -> R) -> R {
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

    /// Count a thread, by `name`, as running in the scope until the guard
    /// drops.
    pub(crate) fn entered(&self, name: String) -> Entered {
        let mut st = self.state();
        let id = st.next_entry;
        st.next_entry += 1;
        st.entered.push((id, name));
        Entered {
            handle: self.clone(),
            id,
        }
    }

    /// The threads running in this scope now (inside [`Handle::enter`], a
    /// [`spawn`](crate::spawn)ed thread from its spawning on), each by its
    /// name (`the thread started at src/flush.rs:12` for a
    /// [`spawn`](crate::spawn)ed one, else `thread "flusher"` or `an
    /// unnamed thread`), in the order they entered. Once the life's own [`run`](Handle::run) returned, these are
    /// the threads its life left running.
    pub fn running(&self) -> Vec<String> {
        self.state()
            .entered
            .iter()
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// Fence the scope: from now on every point passed in it panics with
    /// the [`Crash`] payload, as in a crashed scope, so a thread the life
    /// left running dies at its next point instead of acting on a world
    /// that belongs to the next life (or to the judge).
    pub fn fence(&self) {
        self.state().fenced = true;
    }

    /// The hits passed in this scope since [`Handle::fence`], each by a
    /// thread that was still at work then and died there.
    pub fn fenced_hits(&self) -> Vec<Hit> {
        self.state().after_fence.clone()
    }

    /// Wait until no thread runs in this scope ([`Handle::running`] is
    /// empty), or until `until` passes (`None`: no limit). Returns the
    /// threads still running then (empty when all left). Rust cannot stop a
    /// thread from outside: [`fence`](Handle::fence) the scope first, so
    /// that each dies at its next point.
    pub fn wait_threads(&self, until: Option<Instant>) -> Vec<String> {
        let mut st = self.state();
        st.waiting += 1;
        while !st.entered.is_empty() {
            st = match until {
                None => self.inner.left.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let now = Instant::now();
                    if now >= t {
                        break;
                    }
                    self.inner
                        .left
                        .wait_timeout(st, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        st.waiting -= 1;
        st.entered.iter().map(|(_, n)| n.clone()).collect()
    }
}

/// This thread's name as [`Handle::running`] gives it.
fn thread_name() -> String {
    std::thread::current().name().map_or_else(
        || "an unnamed thread".to_owned(),
        |n| format!("thread {n:?}"),
    )
}

/// A thread counted as running in a scope; it leaves on drop, unwinding
/// included.
#[derive(Debug)]
pub(crate) struct Entered {
    handle: Handle,
    id: u64,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let mut st = self.handle.state();
        st.entered.retain(|(i, _)| *i != self.id);
        let waiting = st.waiting > 0;
        drop(st);
        if waiting {
            self.handle.inner.left.notify_all();
        }
    }
}

/// The scope this thread runs in, if any.
pub fn current() -> Option<Handle> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The crash state of the scope this thread runs in, as its harness set it
/// with [`Handle::set_crash_state`]; `None` outside a scope or in a scope
/// with none (a plain [`record`](crate::record), a judge).
pub fn crash_state() -> Option<Arc<str>> {
    CURRENT.with(|c| {
        let current = c.borrow();
        let handle = current.as_ref()?;
        let st = handle.state();
        st.crash_state.clone()
    })
}

/// Run `f` in a new scope that records every hit and crashes at `target`
/// (never, if `None`).
pub fn run<R>(target: Option<Hit>, f: impl FnOnce() -> R) -> Life<R> {
    Handle::new(target).run(f)
}

#[cold]
#[inline(never)]
pub(crate) fn hit_in_scope(name: &'static str, site: Option<&'static Site>) {
    // Decide under the scope's lock (borrowing the thread's handle, not
    // cloning it), then panic only after every borrow is released: the
    // unwinding restores the previous scope, which needs the RefCell.
    let crash = CURRENT.with(|current| {
        let current = current.borrow();
        let handle = current.as_ref()?;
        let mut st = handle.state();
        if let Some(site) = site {
            if !st.sites.iter().any(|s| std::ptr::eq(*s, site)) {
                st.sites.push(site);
            }
        }
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
        if st.fenced {
            // The life ended: a thread it left running dies at its next point.
            st.after_fence.push(hit.clone());
            return Some(Err(hit));
        }
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
            let watch = st.watch.clone().map(|w| (w, hit.clone(), st.entered.len()));
            st.hits.push(hit);
            (pause.is_some() || watch.is_some()).then_some(Ok((pause, watch)))
        }
    });
    match crash {
        Some(Err(hit)) => panic::panic_any(Crash { hit }),
        // Held: every borrow and lock released, so `then` may read the
        // scope (or run other scopes) while this thread waits.
        Some(Ok((pause, watch))) => hold_outside_scope(pause, watch),
        None => {}
    }
}

/// Run a hit's pause and watch outside the thread's scope, which is
/// restored afterwards, even if `then` panics.
fn hold_outside_scope(pause: Option<Pause>, watch: Option<(Watch, Hit, usize)>) {
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
    if let Some(pause) = pause {
        (pause.then)();
    }
    if let Some((watch, hit, threads)) = watch {
        (watch.0)(&hit, threads);
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
