//! Why a sweep could not run, or its reports could not be merged.

/// Why a sweep could not run at all (a failing scenario is not an error: it
/// is in the [`Report`](crate::Report)).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program fails without any crash; nothing can be compared to it.
    #[error("the clean run of {subject:?} fails, so there is nothing to sweep: {reason}")]
    CleanRunFailed {
        /// The subject's name.
        subject: String,
        /// What went wrong.
        reason: String,
    },
    /// The thread pool could not be built.
    #[error("cannot start {threads} worker threads: {reason}")]
    ThreadPool {
        /// Threads asked for.
        threads: usize,
        /// rayon's reason.
        reason: String,
    },
    /// A partition `k/n` with `k` outside `1..=n`.
    #[error("partition {k}/{n} is invalid: expected k/n with 1 ≤ k ≤ n")]
    BadPartition {
        /// The shard asked for.
        k: u32,
        /// The number of shards.
        n: u32,
    },
    /// A counter named that the subject does not report.
    #[error("{subject:?} reports no counter {counter:?} (it reports: {})", known.join(", "))]
    UnknownCounter {
        /// The subject's name.
        subject: String,
        /// The counter asked for.
        counter: String,
        /// The counters it does report.
        known: Vec<String>,
    },
    /// A subject that opted in to shared lives gave two clean runs with
    /// different hits: sharing lives between scenarios would be wrong.
    #[error("{subject:?} is not deterministic, so its lives cannot be shared: {detail}; make the program deterministic, or sweep without sharing (Config::share = false, --no-share)")]
    NotShareable {
        /// The subject's name.
        subject: String,
        /// Where the two clean runs differ.
        detail: String,
    },
    /// Partial reports that do not belong to one sweep.
    #[error("cannot merge these reports: {0}")]
    Merge(String),
}
