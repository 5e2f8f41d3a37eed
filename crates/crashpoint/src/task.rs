//! Scopes for async programs: a future that carries its scope into every
//! poll, whichever thread polls it.
//!
//! On a current-thread runtime (tokio's `new_current_thread`, or any
//! executor that polls on the thread that calls `block_on`) a life needs
//! nothing: every task runs on the life's thread, inside its scope. On a
//! multi-thread runtime a spawned task runs on worker threads that carry no
//! scope, and its points do nothing: wrap each spawned future in [`scoped`]
//! (or, with the `tokio` feature, spawn it with `spawn_task`) so that each
//! poll enters the scope of the life that created it.
//!
//! A task spawned with plain `tokio::spawn` on a multi-thread runtime is not
//! followed: its points cannot be crashed. While a sweep runs, such passes
//! are not silent: [`watch_unscoped`](crate::unscoped::watch_unscoped) counts every
//! point passed outside any scope, and `sweep` refuses the sweep naming
//! them (`sweep::Error::Unscoped`; `Report::stray` when only warned).
//!
//! A server in the world that serves the life's requests on threads of its
//! own (an in-process HTTP service) runs each request in the scope the life
//! hands it: [`current`] taken in the life, then [`Handle::enter`] around a
//! request on the server's thread, or [`scoped_in`] around its future.
//!
//! ```
//! use std::future::Future;
//! use std::pin::pin;
//! use std::sync::Arc;
//! use std::task::{Context, Poll, Wake, Waker};
//!
//! async fn deliver() {
//!     crashpoint::point!("sent");
//! }
//! // A one-poll executor standing in for a runtime's worker thread.
//! struct Noop;
//! impl Wake for Noop {
//!     fn wake(self: Arc<Self>) {}
//! }
//! fn poll_once(f: impl Future<Output = ()>) -> Poll<()> {
//!     let waker = Waker::from(Arc::new(Noop));
//!     pin!(f).poll(&mut Context::from_waker(&waker))
//! }
//! let life = crashpoint::record(|| {
//!     let task = crashpoint::task::scoped(deliver()); // carries this life's scope
//!     std::thread::spawn(move || poll_once(task)).join().unwrap()
//! });
//! if crashpoint::ENABLED {
//!     assert_eq!(life.hits[0].to_string(), "sent#1");
//! }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::scope::{current, Handle};

/// A future that enters the scope it was created in on every poll; see
/// [`scoped`].
#[must_use = "futures do nothing unless polled"]
pub struct Scoped<F> {
    scope: Option<Handle>,
    fut: Pin<Box<F>>,
}

/// Wrap `fut` so that every poll runs in the current thread's scope (the
/// scope at the time of this call, or none), on whatever thread polls it.
pub fn scoped<F: Future>(fut: F) -> Scoped<F> {
    Scoped {
        scope: current(),
        fut: Box::pin(fut),
    }
}

/// Wrap `fut` so that every poll runs in `scope` (none: as it is), on
/// whatever thread polls it: for a server that serves a life's requests on
/// its own threads, with the scope the life handed it
/// ([`current`] taken in the life).
pub fn scoped_in<F: Future>(scope: Option<Handle>, fut: F) -> Scoped<F> {
    Scoped {
        scope,
        fut: Box::pin(fut),
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        match &this.scope {
            Some(h) => h.enter(|| this.fut.as_mut().poll(cx)),
            None => this.fut.as_mut().poll(cx),
        }
    }
}

/// Spawn `fut` on the current tokio runtime inside the current scope
/// ([`scoped`]); join it with [`join_task`] so that an injected crash in the
/// task crashes the life that awaits it.
#[cfg(feature = "tokio")]
pub fn spawn_task<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(scoped(fut))
}

/// Await a spawned task, re-raising its panic (an injected crash included)
/// in the awaiting task.
#[cfg(feature = "tokio")]
pub async fn join_task<T>(handle: tokio::task::JoinHandle<T>) -> T {
    match handle.await {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: the runtime is shutting down, as in a dying process.
        Err(e) => std::panic::panic_any(format!("task {e}")),
    }
}
