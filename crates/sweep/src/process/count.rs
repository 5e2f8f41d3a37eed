//! The processes a [`Process`](super::Process) starts, counted by kind for
//! the sweep's stats ([`Processes`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::report::Processes;

/// The kinds of process a process subject starts.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Life,
    Forked,
    Judge,
    ForkedJudge,
    Service,
    Server,
}

/// Counts of the processes started so far.
#[derive(Debug, Default)]
pub(super) struct Count([AtomicU64; 6]);

impl Count {
    pub(super) fn one(&self, kind: Kind) {
        self.0[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn now(&self) -> Processes {
        let n = |k: Kind| self.0[k as usize].load(Ordering::Relaxed);
        Processes {
            lives: n(Kind::Life),
            forked: n(Kind::Forked),
            judges: n(Kind::Judge),
            forked_judges: n(Kind::ForkedJudge),
            services: n(Kind::Service),
            servers: n(Kind::Server),
        }
    }
}
