//! Named crash points, scoped per thread.
//!
//! A *point* is a named place where a crash may land. Mark one with
//! [`point!`]. What a point does depends on the *scope* the current thread
//! runs in:
//!
//! * outside any scope it does nothing (one thread-local check);
//! * inside [`record`] every pass over it is appended to the scope's list of
//!   [`Hit`]s — the point's name plus its occurrence number within the scope;
//! * inside [`crash_at`] the chosen hit panics with the [`Crash`] payload, the
//!   scope catches it and reports [`Outcome::Crashed`] with the hits before it.
//!
//! Scopes belong to one thread, so hundreds of scenarios can run at once on a
//! thread pool without seeing each other (unlike a global failpoint registry).
//! A life that spawns threads carries its scope into them with [`spawn`] or
//! [`Handle::enter`]; an async life carries it into tasks a multi-thread
//! runtime polls elsewhere with [`scoped`] (or `spawn_task`, with the `tokio`
//! feature): see [`task`].
//!
// The example records and crashes, so it runs only where points are on.
#![cfg_attr(feature = "enabled", doc = "```")]
#![cfg_attr(not(feature = "enabled"), doc = "```ignore")]
//! fn save() {
//!     crashpoint::point!("mid-save");
//!     crashpoint::point!("after rename");
//! }
//! fn job() {
//!     save();
//!     save();
//! }
//!
//! // A clean run records every hit.
//! let clean = crashpoint::record(job);
//! let names: Vec<String> = clean.hits.iter().map(|h| h.to_string()).collect();
//! assert_eq!(names, ["mid-save#1", "after rename#1", "mid-save#2", "after rename#2"]);
//!
//! // Crash at the third hit: the scope reports it and the hits before it.
//! let hit: crashpoint::Hit = "mid-save#2".parse().unwrap();
//! let life = crashpoint::crash_at(hit.clone(), job);
//! assert_eq!(life.outcome.crashed(), Some(&hit));
//! assert_eq!(life.hits, clean.hits[..2]);
//! ```
//!
//! Crash points need unwinding: an injected crash is a panic that the scope
//! catches. In a build with `panic = "abort"` (common in release profiles)
//! the first injected crash kills the whole process; `sweep` refuses such a
//! build at the start of a sweep, with the profile fix.
//!
//! Injected crashes print nothing: a panic hook, installed once, silences the
//! [`Crash`] payload and passes every other panic to the hook that was there
//! before. A real panic inside a scope comes back as [`Outcome::Panicked`],
//! never mistaken for an injected crash.
//!
//! Without the `enabled` feature (off by default) [`point!`] compiles to
//! nothing, and every scope records no hits.

pub mod protocol;
pub mod task;
mod unscoped;
#[cfg(feature = "tokio")]
pub use task::{join_task, spawn_task};
pub use task::{scoped, Scoped};
pub use unscoped::{current_owner, watch_unscoped, Owner, UnscopedWatch};

use std::any::Any;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::thread;

/// One pass over a point during one scope: the point's name and which pass
/// it was (1-based) among the passes over that name in the scope.
///
/// Written and parsed as `name#occurrence`, e.g. `after rename#3`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hit {
    /// The point's name, as given to [`point!`].
    pub point: Cow<'static, str>,
    /// 1 for the first pass over this point in the scope, 2 for the second, …
    pub occurrence: u32,
}

impl Hit {
    /// A hit of `point` at its `occurrence`-th pass (1-based).
    pub fn new(point: impl Into<Cow<'static, str>>, occurrence: u32) -> Self {
        Hit {
            point: point.into(),
            occurrence,
        }
    }
}

impl fmt::Display for Hit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.point, self.occurrence)
    }
}

/// Why a string is not a [`Hit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseHitError {
    input: String,
}

impl fmt::Display for ParseHitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a hit: expected `point name#occurrence` with occurrence ≥ 1, e.g. `mid-save#2`",
            self.input
        )
    }
}

impl std::error::Error for ParseHitError {}

impl FromStr for Hit {
    type Err = ParseHitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseHitError {
            input: s.to_owned(),
        };
        let (name, n) = s.trim().rsplit_once('#').ok_or_else(err)?;
        let occurrence: u32 = n.parse().map_err(|_| err())?;
        if name.is_empty() || occurrence == 0 {
            return Err(err());
        }
        Ok(Hit::new(name.to_owned(), occurrence))
    }
}

/// The panic payload of an injected crash. Catch it with [`crash_at`]; test
/// for it with [`is_crash`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crash {
    /// The hit at which the crash was injected.
    pub hit: Hit,
}

/// The injected crash in a panic payload, if it is one.
pub fn is_crash(payload: &(dyn Any + Send)) -> Option<&Crash> {
    payload.downcast_ref::<Crash>()
}

/// How a scope ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<R> {
    /// The closure returned.
    Finished(R),
    /// The injected crash fired at this hit.
    Crashed(Hit),
    /// A real panic (not an injected crash), with its message.
    Panicked(String),
}

impl<R> Outcome<R> {
    /// The hit of the injected crash, if the scope crashed.
    pub fn crashed(&self) -> Option<&Hit> {
        match self {
            Outcome::Crashed(h) => Some(h),
            _ => None,
        }
    }
}

/// What a scope saw: how it ended and the hits it passed, in order. For a
/// crashed scope, `hits` holds the hits *before* the crash, not the crash's.
#[derive(Debug)]
pub struct Life<R> {
    /// How the scope ended.
    pub outcome: Outcome<R>,
    /// Every hit of the scope, in order (excluding the crash hit).
    pub hits: Vec<Hit>,
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
}

/// A handle on the scope a thread runs in, to carry it into another thread.
#[derive(Clone, Debug)]
pub struct Handle {
    state: Arc<Mutex<State>>,
}

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
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

/// Spawn a thread that runs in the current scope (or none), owned by the
/// current thread's [`Owner`] (if any). Join it with
/// [`join`] so that an injected crash on that thread crashes the caller too.
pub fn spawn<F, T>(f: F) -> thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let scope = current();
    let owner = current_owner();
    thread::spawn(move || {
        let run = move || match scope {
            Some(h) => h.enter(f),
            None => f(),
        };
        match owner {
            Some(o) => o.enter(run),
            None => run(),
        }
    })
}

/// Join a thread, re-raising its panic (an injected crash included) on the
/// joining thread.
pub fn join<T>(handle: thread::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(v) => v,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// Mark a point. Outside a scope this costs one thread-local read; without
/// the `enabled` feature it compiles to nothing.
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! point {
    ($name:expr) => {
        $crate::__hit($name)
    };
}

/// Mark a point. Outside a scope this costs one thread-local read; without
/// the `enabled` feature it compiles to nothing.
#[cfg(not(feature = "enabled"))]
#[macro_export]
macro_rules! point {
    ($name:expr) => {{
        let _: &'static str = $name;
    }};
}

#[doc(hidden)]
#[inline(always)]
pub fn __hit(name: &'static str) {
    if ACTIVE.with(|a| a.get()) {
        hit_in_scope(name);
    } else if protocol::speaks() {
        protocol::hit(name);
    } else if unscoped::WATCHES.load(Ordering::Relaxed) > 0 {
        unscoped::unscoped_hit(name);
    }
}

/// Pass a point whose name is known only at run time, as [`point!`] passes
/// a literal one: a harness that relays the points of another program (a
/// child process reporting its hits over the point protocol) calls this for
/// each. Names are interned for the life of the process, so use it for a
/// bounded set of names. It is a point whatever the `enabled` feature says:
/// the caller asked for it by name.
pub fn hit(name: &str) {
    __hit(intern(name));
}

/// `name` as a `&'static str`, leaked once per distinct name.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    match names.iter().find(|n| **n == name) {
        Some(n) => n,
        None => {
            let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.push(leaked);
            leaked
        }
    }
}

#[cold]
#[inline(never)]
fn hit_in_scope(name: &'static str) {
    // Decide under the scope's lock (borrowing the thread's handle, not
    // cloning it), then panic only after every borrow is released: the
    // unwinding restores the previous scope, which needs the RefCell.
    let crash = CURRENT.with(|current| {
        let current = current.borrow();
        let handle = current.as_ref()?;
        let mut st = lock(&handle.state);
        if let Some(hit) = st.crashed.clone() {
            // The life is already dead: a thread still running in it dies too.
            return Some(hit);
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
            return Some(hit);
        }
        if st.target.as_ref() == Some(&hit) {
            st.crashed = Some(hit.clone());
            Some(hit)
        } else {
            st.hits.push(hit);
            None
        }
    });
    if let Some(hit) = crash {
        panic::panic_any(Crash { hit });
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

/// Run `f` in a new scope that records every hit and crashes at `target`
/// (never, if `None`).
pub fn run<R>(target: Option<Hit>, f: impl FnOnce() -> R) -> Life<R> {
    Handle::new(target).run(f)
}

/// Run `f` in a scope that records every hit and never crashes.
pub fn record<R>(f: impl FnOnce() -> R) -> Life<R> {
    run(None, f)
}

/// Run `f` in a scope that crashes at `hit` and records the hits before it.
pub fn crash_at<R>(hit: Hit, f: impl FnOnce() -> R) -> Life<R> {
    run(Some(hit), f)
}

#[cfg(test)]
mod tests;
