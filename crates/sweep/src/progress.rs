//! Progress of a running sweep, as the runner reports it to a progress
//! bar: scenarios planned and finished, level by level; and, once it is
//! over, how much work it did.

/// Progress of a running sweep, for a progress bar.
///
/// `depth` is the scenario's level (1 = one crash). A scenario's children
/// are planned as soon as it finishes, so once every scenario of level `d`
/// has finished, the count planned at level `d + 1` is final: a bar over one
/// level at a time has a total that does not grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// This many more scenarios of level `depth` are planned.
    Planned {
        /// The level of the planned scenarios.
        depth: usize,
        /// How many more.
        count: u64,
    },
    /// One more scenario of level `depth` has finished.
    Finished {
        /// The level of the finished scenario.
        depth: usize,
    },
    /// One scenario of level `depth` failed (a required invariant broken,
    /// a life that failed or hung). Told once its result is in, on top of
    /// its [`Finished`](Progress::Finished); scenarios outside the sweep's
    /// shard are never told.
    Failed {
        /// The level of the failed scenario.
        depth: usize,
    },
}

/// How much work a sweep did ([`Report::stats`](crate::Report::stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Scenarios run and kept for the report (of its shard), the clean run
    /// included.
    pub scenarios: u64,
    /// Lives actually run (clean runs included).
    pub lives: u64,
    /// Whether lives were shared ([`Subject::share`](crate::Subject::share)).
    pub shared: bool,
    /// The processes the sweep started, for a subject that starts them
    /// ([`Subject::processes`](crate::Subject::processes)); `None` for one
    /// swept in this process.
    pub processes: Option<Processes>,
}

/// The processes a subject started ([`Stats::processes`](Stats::processes)): lives (exec'd
/// or forked), judges, services and fork servers, reruns included. They are
/// the sweep's own: the lives and judges of discovery
/// (`sweep::process::Process::discover`, its clean run and the fork server's
/// check) are not counted, but the fork servers it started are, since they
/// serve the sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Processes {
    /// Lives started as a new process.
    pub lives: u64,
    /// Lives forked from a fork server.
    pub forked: u64,
    /// Judges started as a new process (one a scenario, for a judge
    /// command).
    pub judges: u64,
    /// Judges forked from the judge's fork server (one a scenario, for a
    /// judge command that calls `ready()`, swept with a fork server).
    pub forked_judges: u64,
    /// Services started (one a world, again after a crash that kills it).
    pub services: u64,
    /// Fork servers started for the subject, those that discovery started
    /// included: they serve the sweep (a judge's that ended without
    /// `ready()` is counted too).
    pub servers: u64,
}

impl Processes {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.lives + self.forked + self.judges + self.forked_judges + self.services + self.servers
    }

    /// What a sweep started: `self - before`, field by field (saturating),
    /// but the fork servers, all of which are kept: those started before
    /// (at discovery) serve the sweep too.
    pub fn since(&self, before: &Processes) -> Processes {
        Processes {
            lives: self.lives.saturating_sub(before.lives),
            forked: self.forked.saturating_sub(before.forked),
            judges: self.judges.saturating_sub(before.judges),
            forked_judges: self.forked_judges.saturating_sub(before.forked_judges),
            services: self.services.saturating_sub(before.services),
            servers: self.servers,
        }
    }

    /// `self + other`, field by field.
    pub fn plus(&self, other: &Processes) -> Processes {
        Processes {
            lives: self.lives + other.lives,
            forked: self.forked + other.forked,
            judges: self.judges + other.judges,
            forked_judges: self.forked_judges + other.forked_judges,
            services: self.services + other.services,
            servers: self.servers + other.servers,
        }
    }
}
