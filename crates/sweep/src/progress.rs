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
}
