//! A clock that moves only when told to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Clock;

/// A clock that moves only when told to; clones share the time. For tests
/// that expire keys without waiting, and for sweeps that must be
/// deterministic.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `now`.
    pub fn new(now: u64) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(now)))
    }

    /// Move the clock `by` units forward.
    pub fn advance(&self, by: u64) {
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
