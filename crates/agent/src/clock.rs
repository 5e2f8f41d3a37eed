//! The run's clock: when a call went out, to tell whether its key expired.

use std::time::{SystemTime, UNIX_EPOCH};

/// A clock in whole units (seconds for real runs, ticks in tests). Markers
/// record [`Clock::now`] when a call goes out; the ladder compares it with a
/// tool's [`Keys::Honoured::keep_for`](crate::tool::Keys::Honoured) after a crash.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_unix_seconds() {
        let secs = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        let before = secs();
        let now = SystemClock.now();
        assert!(before <= now && now <= secs(), "{now}");
    }
}
