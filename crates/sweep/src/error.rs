//! Why a sweep could not run, or its reports could not be merged; why a
//! life stopped on its own ([`LifeError`]).

/// Why a life stopped on its own (not by a crash): any error converts into
/// it with `?`, a `String` or `&str` included.
pub type LifeError = Box<dyn std::error::Error + Send + Sync>;

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
        reason: Box<crate::Failure>,
    },
    /// Deeper than [`Config::MAX_DEPTH`](crate::Config::MAX_DEPTH) crashes in a row: no
    /// real program is restarted that often in one scenario, and the same
    /// limit holds for [`Report::merge`](crate::Report::merge).
    #[error(
        "depth {depth} asks for {depth} crashes in a row; sweeps deeper than {max} are refused \
         (the same limit as merging shards): sweep at depth {max} or less"
    )]
    TooDeep {
        /// The depth asked for.
        depth: u32,
        /// The limit.
        max: u32,
    },
    /// The build aborts on panic, so an injected crash would kill the
    /// sweep's process.
    #[error(
        "this program is built with panic = \"abort\", but crash points need unwinding: an injected \
         crash is a panic the sweep catches, and with abort it kills the whole process. Build the \
         sweep with unwinding: remove `panic = \"abort\"` from the profile it runs in (e.g. \
         [profile.release] in Cargo.toml), or give the sweep a profile of its own \
         ([profile.sweep] inherits = \"release\", panic = \"unwind\") and run it with --profile sweep"
    )]
    PanicAbort,
    /// Two clean runs passed different hits (compared as sets: threads may
    /// pass them in any order): the program does not behave the same way
    /// twice, so no scenario name means one thing.
    #[error(
        "{subject:?} is not deterministic: two clean runs passed different hits (first run: {}, second run: {}).\n  first run around it:  {}\n  second run around it: {}\n\
         A sweep needs a program that passes the same hits every time, each point as many times; threads may pass them in any order (look for iteration over a HashMap or HashSet, the clock, randomness, or work that depends on a race)",
        at.first.as_ref().map_or("nothing the second lacks".to_owned(), |h| format!("{h}, which the second did not")),
        at.second.as_ref().map_or("nothing the first lacks".to_owned(), |h| format!("{h}, which the first did not")),
        at.first_around.join(", "),
        at.second_around.join(", ")
    )]
    Nondeterministic {
        /// The subject's name.
        subject: String,
        /// Where the runs part.
        at: Box<Divergence>,
    },
    /// Two clean runs passed the same hits but ended differently: the
    /// judge's verdicts differ, or one run failed (a life panicked, say) and
    /// the other did not.
    #[error("{subject:?} is not deterministic: two clean runs give different verdicts ({first} / {second})")]
    NondeterministicVerdict {
        /// The subject's name.
        subject: String,
        /// The first run's counts (`name=value`, space-separated), then
        /// `, notes: ` and its notes if the runs' notes differ, then `, then `
        /// and its failure if it failed.
        first: String,
        /// The second's, the same way.
        second: String,
    },
    /// The clean run passed no point: there is nothing to crash.
    #[error(
        "the clean run of {subject:?} passed no crash point, so there is nothing to sweep: mark the places a crash may land with crashpoint::point!, check that crashpoint's `enabled` feature is on, and run threads with crashpoint::spawn{}",
        if unscoped.is_empty() { String::new() } else { format!(" (points passed on threads without a scope: {})", unscoped.join(", ")) }
    )]
    NoPoints {
        /// The subject's name.
        subject: String,
        /// Points passed outside any scope meanwhile.
        unscoped: Vec<String>,
    },
    /// With [`Config::strict_points`](crate::Config::strict_points): the
    /// clean run left out points compiled into the modules it went through.
    #[error(
        "the clean run of {subject:?} never passed {} crash point(s) compiled into the modules it went through, so no scenario crashes there: {}; make the clean run pass them (take the branch, enable the feature), remove them, or sweep without strict points",
        points.len(), points.join(", ")
    )]
    PointsNeverPassed {
        /// The subject's name.
        subject: String,
        /// Each point, `name (file:line)`.
        points: Vec<String>,
    },
    /// The judge faults the clean run: a judge that counts a fault when no
    /// crash happened is wrong, not the program.
    #[error("the judge of {subject:?} faults the clean run ({counters}): a required counter must be zero when nothing crashed, so the judge is wrong, not the program")]
    CleanJudgeFaults {
        /// The subject's name.
        subject: String,
        /// The broken counters, `title = value`.
        counters: String,
    },
    /// The judge counts a name no counter declares (a misspelt counter).
    #[error("the judge of {subject:?} counts {name:?}, which no counter declares (declared: {}): a misspelt counter name?", declared.join(", "))]
    UndeclaredCounter {
        /// The subject's name.
        subject: String,
        /// The name counted.
        name: String,
        /// The names declared.
        declared: Vec<String>,
    },
    /// A required counter that the judge never sets in the clean run.
    #[error("the judge of {subject:?} never sets the required counter {name:?}, so it would always read 0: set it (to 0 when nothing is wrong) in every verdict")]
    RequiredNeverSet {
        /// The subject's name.
        subject: String,
        /// The counter.
        name: String,
    },
    /// The sweep would run more scenarios than the config allows.
    #[error(
        "{subject:?} at depth {depth} would run about {estimate} scenarios ({hits} hits in the clean run), more than the limit of {limit}: lower the depth, or raise the limit (Config::max_scenarios, --max-scenarios)",
        estimate = fmt_estimate(*estimate)
    )]
    TooManyScenarios {
        /// The subject's name.
        subject: String,
        /// The depth asked for.
        depth: u32,
        /// Hits of the clean run.
        hits: usize,
        /// The estimate.
        estimate: f64,
        /// The limit.
        limit: u64,
    },
    /// A scenario name given to [`rerun`](crate::rerun) does not parse.
    #[error("{name:?} is not a scenario name: {source}")]
    BadScenario {
        /// The name given.
        name: String,
        /// Why it does not parse.
        #[source]
        source: crate::scenario::ParseScenarioError,
    },
    /// A crash state the subject cannot run in.
    #[error("{subject:?} cannot run in crash state {state:?} (it runs in: {})", known.join(", "))]
    UnknownCrashState {
        /// The subject's name.
        subject: String,
        /// The state asked for.
        state: String,
        /// The states it can run in.
        known: Vec<String>,
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
    /// A subject that opted in to shared lives declared its sharing wrongly:
    /// a capture taken at a hit differs from the world a crash there leaves,
    /// or a shared scenario's result differs from its replay from a fresh
    /// world (see [`sharing`](crate::sharing)).
    #[error("{subject:?} declares its shared lives wrongly, so its table cannot be trusted: {detail}; hash everything a life or the judge reads in its fingerprint and copy all of the world in its copy and capture, or sweep without sharing (Config::share = false, --no-share)")]
    WronglyShared {
        /// The subject's name.
        subject: String,
        /// Which scenario or hit showed it, and how.
        detail: String,
    },
    /// [`Report::require`](crate::Report::require) on a report that kept
    /// only tallies of its passing scenarios, when some of them would now
    /// fail: they cannot be named.
    #[error("cannot require {counter:?} of {subject:?} after the sweep: only tallies of its passing scenarios were kept, and some count it; require it in the sweep's Config::required instead")]
    Tallied {
        /// The subject's name.
        subject: String,
        /// The counter.
        counter: String,
    },
    /// The subject could not make a world ([`Subject::world`](crate::Subject::world)
    /// returned an error, or panicked).
    #[error("cannot make a world for {subject:?}: {error}")]
    World {
        /// The subject's name.
        subject: String,
        /// Why, as the subject said it.
        error: String,
    },
    /// Two clean runs passed the same hits and got the same verdict but
    /// left different worlds: what the program did depends on something
    /// other than its hits (iteration over a `HashSet`, the clock), which
    /// neither the hits nor the judge saw.
    #[error(
        "{subject:?} is not deterministic: two clean runs pass the same hits and get the same verdict, but leave different worlds ({how}).\n  first run:  {first}\n  second run: {second}\n\
         A sweep needs a program that does the same thing every time (look for iteration over a HashMap or HashSet, the clock, randomness, or threads racing); if the difference is not the program's (a temporary path in Subject::describe), leave it out of describe (for a process subject, Process::describe_with), or give the subject a fingerprint"
    )]
    NondeterministicWorld {
        /// The subject's name.
        subject: String,
        /// What told them apart: `their fingerprints differ` or `their
        /// descriptions differ`.
        how: String,
        /// The first run's world: the first line of its description that
        /// differs (or the whole description, when it is short).
        first: String,
        /// The second's, the same way.
        second: String,
    },
    /// Points passed on threads without a scope, which no crash can reach,
    /// in every clean run of this sweep
    /// ([`Config::refuse_unscoped`](crate::Config::refuse_unscoped)).
    #[error(
        "{subject:?} passed crash points on threads without a scope, where no crash can reach them: {}.\n\
         Carry the life's scope into every thread and task a life starts: crashpoint::spawn for threads, crashpoint::task::spawn_task for tokio tasks, and for a server's own worker threads take crashpoint::scope::current() in the life and run each request in Handle::enter (the guide's steps 5 and 6). To only warn, set Config::refuse_unscoped = false (--allow-unscoped)",
        points.iter().map(|(n, c)| format!("{n} ({c}×)")).collect::<Vec<_>>().join(", ")
    )]
    Unscoped {
        /// The subject's name.
        subject: String,
        /// Each point, with how many times it was passed.
        points: Vec<(String, u64)>,
    },
    /// Partial reports that do not belong to one sweep.
    #[error("cannot merge these reports: {0}")]
    Merge(String),
}

fn fmt_estimate(e: f64) -> String {
    if e < 1e15 {
        // Whole numbers with thousands separators.
        let n = e.round() as u64;
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{e:.2e}")
    }
}

/// Where two clean runs part ([`Error::Nondeterministic`]), their hits
/// compared as sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The index (0-based) of `first` in the first run (of `second` in
    /// the second run when `first` is `None`).
    pub index: usize,
    /// The first hit of the first run that the second did not pass
    /// (`None`: it passed every one).
    pub first: Option<String>,
    /// The first hit of the second run that the first did not pass.
    pub second: Option<String>,
    /// The first run's hits around `first` (two before, the hit, two
    /// after; its last hits when `first` is `None`).
    pub first_around: Vec<String>,
    /// The second run's hits around `second`.
    pub second_around: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::fmt_estimate;

    #[test]
    fn estimates_are_whole_numbers_with_separators_below_1e15() {
        assert_eq!(fmt_estimate(7.0), "7");
        assert_eq!(fmt_estimate(999.4), "999");
        assert_eq!(fmt_estimate(123_456.0), "123,456");
        assert_eq!(fmt_estimate(1_234_567.0), "1,234,567");
        assert_eq!(fmt_estimate(999_999_999_999_999.0), "999,999,999,999,999");
        assert_eq!(fmt_estimate(1e15), "1.00e15");
        assert_eq!(fmt_estimate(2.5e20), "2.50e20");
    }
}
