#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod crash_state;
mod fork_server;
pub mod hit;
pub mod points;
pub mod protocol;
pub mod scope;
pub mod task;
pub mod unscoped;

pub use fork_server::ready;
#[doc(inline)]
pub use hit::Hit;

use std::panic;
use std::sync::atomic::Ordering;
use std::thread;

/// Whether points are on in this build: crashpoint's `enabled` feature
/// (off by default; a test build or a harness turns it on). Without it
/// [`point!`] compiles to nothing and every scope records no hits.
pub const ENABLED: bool = cfg!(feature = "enabled");

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

/// Run `f` in a scope that records every hit and never crashes.
pub fn record<R>(f: impl FnOnce() -> R) -> Life<R> {
    scope::run(None, f)
}

/// Run `f` in a scope that crashes at `hit` and records the hits before it.
pub fn crash_at<R>(hit: Hit, f: impl FnOnce() -> R) -> Life<R> {
    scope::run(Some(hit), f)
}

/// Spawn a thread that runs in the current scope (or none), owned by the
/// current thread's [`Owner`](unscoped::Owner) (if any). Join it with
/// [`join`] so that an injected crash on that thread crashes the caller too.
///
/// The thread counts as running in the scope from this call on (see
/// [`Handle::running`](scope::Handle::running)), named by where it was
/// started: `the thread started at src/flush.rs:12`.
#[track_caller]
pub fn spawn<F, T>(f: F) -> thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let at = std::panic::Location::caller();
    let scope = scope::current().map(|h| {
        let counted = h.entered(format!("the thread started at {}:{}", at.file(), at.line()));
        (h, counted)
    });
    let owner = unscoped::current_owner();
    thread::spawn(move || {
        let run = move || match scope {
            Some((h, counted)) => h.enter_as(counted, f),
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
///
/// A name given as a literal is also listed at link time
/// ([`points::linked`]), so a sweep can name the points its clean run never
/// passed; a name computed at run time is not.
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! point {
    ($name:literal) => {{
        #[$crate::points::__linkme::distributed_slice($crate::points::__SITES)]
        #[linkme(crate = $crate::points::__linkme)]
        static __CRASHPOINT_SITE: $crate::points::Site = $crate::points::Site {
            module: ::core::module_path!(),
            name: $name,
            file: ::core::file!(),
            line: ::core::line!(),
        };
        $crate::__hit_site(&__CRASHPOINT_SITE)
    }};
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

/// What [`point!`] expands to: one pass over the point `name`.
#[doc(hidden)]
#[inline(always)]
pub fn __hit(name: &'static str) {
    if scope::ACTIVE.with(|a| a.get()) {
        scope::hit_in_scope(name, None);
    } else if protocol::speaks() {
        protocol::report(name);
    } else if unscoped::WATCHES.load(Ordering::Relaxed) > 0 {
        unscoped::unscoped_hit(name);
    }
}

/// What [`point!`] with a literal name expands to: one pass over the
/// point compiled at `site`.
#[doc(hidden)]
#[inline(always)]
pub fn __hit_site(site: &'static points::Site) {
    if scope::ACTIVE.with(|a| a.get()) {
        scope::hit_in_scope(site.name, Some(site));
    } else {
        __hit(site.name);
    }
}

#[cfg(test)]
mod tests;
