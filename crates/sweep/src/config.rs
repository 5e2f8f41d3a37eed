//! How to sweep: the [`Config`] a caller hands the runner, its defaults
//! and its limits.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::crash_state::CrashState;
use crate::progress::Progress;
// For the links of the docs below.
#[cfg(doc)]
use crate::{Error, Failure, Report, Subject};

/// A callback told about each scenario as a sweep runs ([`Config::progress`]).
pub type OnProgress = Arc<dyn Fn(Progress) + Send + Sync>;

/// How to sweep.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use sweep::report::Progress;
///
/// let finished = Arc::new(AtomicU64::new(0));
/// let seen = Arc::clone(&finished);
/// let config = sweep::Config {
///     depth: 1,
///     progress: Some(Arc::new(move |p| {
///         if let Progress::Finished { .. } = p {
///             seen.fetch_add(1, Ordering::Relaxed);
///         }
///     })),
///     ..sweep::Config::default()
/// };
/// # struct One;
/// # impl sweep::Subject for One {
/// #     type World = ();
/// #     fn name(&self) -> String { "one".into() }
/// #     fn counters(&self) -> Vec<sweep::Counter> { vec![] }
/// #     fn world(&self) -> Result<(), sweep::LifeError> { Ok(()) }
/// #     fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
/// #         crashpoint::point!("a");
/// #         crashpoint::point!("b");
/// #         Ok(())
/// #     }
/// #     fn judge(&self, _: &()) -> sweep::Verdict { sweep::Verdict::new() }
/// # }
/// let report = sweep::run(&One, &config).unwrap();
/// assert_eq!(finished.load(Ordering::Relaxed), report.scenario_count());
/// ```
#[derive(Clone)]
pub struct Config {
    /// How many lives in a row crash: 0 runs the clean run only, 1 adds one
    /// scenario per hit, 2 (the default) also crashes each restart once at
    /// every hit it reaches, and so on.
    pub depth: u32,
    /// Worker threads; `None` lets rayon choose (one per core).
    pub threads: Option<usize>,
    /// Run only shard `k` of `n` (1-based): scenarios are assigned by a stable
    /// hash of their name, so a scenario keeps its shard when others are
    /// added. Scenarios of other shards that are needed to find deeper ones
    /// still run, but are not reported.
    pub partition: Option<(u32, u32)>,
    /// Keep each life's hits and the world's description in every result
    /// (memory-hungry; for reruns of single scenarios).
    pub trace: bool,
    /// The crash states to sweep, each a full sweep of its own whose
    /// scenarios' names start with the state; empty: the subject's
    /// [`default_crash_states`](crate::power::PowerCuts::default_crash_states)
    /// (`process` for a subject without [`Subject::power_cuts`]). A state the
    /// subject does not list in [`crash_states`](crate::power::PowerCuts::crash_states) is
    /// refused ([`Error::UnknownCrashState`]).
    pub crash_states: Vec<CrashState>,
    /// A scenario still running after this long is stopped at its next point
    /// and fails as [`Failure::Hung`]; the sweep goes on. `None`: no limit.
    ///
    /// Rust cannot stop a thread from outside: a life that never passes
    /// another point (blocked on a channel, a loop with no point in it) is
    /// not stopped; the sweep waits for it, and prints once to stderr which
    /// scenario it waits for and the last hit that life passed.
    pub scenario_timeout: Option<Duration>,
    /// Refuse, before running any scenario, a sweep whose estimated scenario
    /// count (from the clean run's hits, the depth and the states) is above
    /// this ([`Error::TooManyScenarios`]).
    pub max_scenarios: u64,
    /// Run every failing scenario once more; one whose result changes is
    /// flaky ([`Failure::Flaky`]), neither a pass nor a fail.
    pub rerun_failures: bool,
    /// Run the clean run this many times (at least 1) and compare their hits
    /// and verdicts ([`Error::Nondeterministic`]).
    pub clean_runs: u32,
    /// Share lives between scenarios when the subject opts in
    /// ([`Subject::share`], see [`sharing`](crate::sharing)): the report is
    /// the same byte for byte, with far fewer lives run. `false` replays every
    /// scenario from a fresh world (brute force). Ignored with `trace`.
    pub share: bool,
    /// Keep only the failing and flaky scenarios and tally the rest as their
    /// results arrive ([`Report::tallies`]): memory stays bounded by the
    /// failures, not by the scenario count, and the report's rows, tables,
    /// failures and JSON rows are the same. Ignored with `trace`.
    pub tally: bool,
    /// Counters to require zero on top of the subject's own, as
    /// [`Report::require`] does after the fact, but applied to each result
    /// as it arrives (so that a tallied sweep can require them). Names the
    /// subject does not declare are left to [`Report::require`] to refuse.
    pub required: Vec<String>,
    /// Refuse the sweep ([`Error::Unscoped`]) when every clean run passes
    /// a point on a plain thread its life started (`std::thread::spawn`, a
    /// runtime's or a server's worker made in the life): no crash can reach
    /// it, so the table would say nothing of it. On by default, for tests
    /// and the command line alike (`--allow-unscoped` turns it off);
    /// `false` only warns ([`Report::stray`], which also holds such passes
    /// in crash scenarios).
    ///
    /// The verdict does not depend on what else the process runs. A life
    /// marks its thread (in its signal mask, which every thread started
    /// from it inherits, on Linux), so a pass is counted for the sweep
    /// whose life started its thread, and for no other, even while the
    /// lives of other sweeps run at the same moments. A pass on a thread
    /// that no life started (a pool made before the life, another test's
    /// thread) is never refused: the sweep cannot tell whose it is, and
    /// says so in one line ([`Report::notices`]) when every clean run saw
    /// it. Under `cargo nextest`, which runs each test in a process of its
    /// own, such a pass can only be the subject's: that is where the net
    /// is exact.
    pub refuse_unscoped: bool,
    /// Refuse the sweep ([`Error::PointsNeverPassed`]) when the clean run
    /// leaves out points compiled into the modules it went through
    /// ([`Report::never_passed`] lists them either way): no scenario
    /// crashes at a point the clean run never passes.
    pub strict_points: bool,
    /// Told about each scenario as it is planned and as it finishes, from
    /// the sweep's worker threads (a progress bar; see [`Progress`]).
    /// `None`: nobody is told.
    pub progress: Option<OnProgress>,
}

impl Config {
    /// [`Config::scenario_timeout`]'s default.
    pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);
    /// [`Config::max_scenarios`]'s default.
    pub const DEFAULT_MAX_SCENARIOS: u64 = 1_000_000;
    /// The most crashes in a row a sweep runs ([`Config::depth`]) and a
    /// merged report may claim: [`run`](crate::run) refuses a deeper sweep
    /// ([`Error::TooDeep`]) and [`Report::merge`] a deeper shard.
    pub const MAX_DEPTH: u32 = 16;

    /// About how many scenarios this config's sweep runs from a clean run of
    /// `hits` hits, in `states` crash states (what [`Config::max_scenarios`]
    /// is held against): at most `hits^k` at depth `k` when no restart
    /// passes more hits than the clean run (a restart usually passes fewer,
    /// so this errs on the side of refusing).
    pub fn estimate_scenarios(&self, hits: usize, states: usize) -> f64 {
        crate::plan::estimate_scenarios(hits, self.depth, states)
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every field, spelt out so that a new one is not forgotten
        // silently (the destructuring fails to compile).
        let Config {
            depth,
            threads,
            partition,
            trace,
            crash_states,
            scenario_timeout,
            max_scenarios,
            rerun_failures,
            clean_runs,
            share,
            tally,
            required,
            refuse_unscoped,
            strict_points,
            progress,
        } = self;
        f.debug_struct("Config")
            .field("depth", depth)
            .field("threads", threads)
            .field("partition", partition)
            .field("trace", trace)
            .field("crash_states", crash_states)
            .field("scenario_timeout", scenario_timeout)
            .field("max_scenarios", max_scenarios)
            .field("rerun_failures", rerun_failures)
            .field("clean_runs", clean_runs)
            .field("share", share)
            .field("tally", tally)
            .field("required", required)
            .field("refuse_unscoped", refuse_unscoped)
            .field("strict_points", strict_points)
            .field("progress", &progress.as_ref().map(|_| "Fn(Progress)"))
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            depth: 2,
            threads: None,
            partition: None,
            trace: false,
            crash_states: Vec::new(),
            scenario_timeout: Some(Config::DEFAULT_SCENARIO_TIMEOUT),
            max_scenarios: Config::DEFAULT_MAX_SCENARIOS,
            rerun_failures: true,
            clean_runs: 2,
            share: true,
            tally: false,
            required: Vec::new(),
            refuse_unscoped: true,
            strict_points: false,
            progress: None,
        }
    }
}
