//! The run's clock: when a call went out, to tell whether its key expired.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A clock in whole units (seconds for real runs, ticks in tests). Markers
/// record [`Clock::now`] when a call goes out; the ladder compares it with a
/// tool's [`Keys::Honoured::keep_for`](crate::Keys::Honoured) after a crash.
pub trait Clock: Send {
    /// The time now.
    fn now(&self) -> u64;
}

/// Unix seconds. A clock before 1970 reads 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

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
