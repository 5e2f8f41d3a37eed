//! Progress while a sweep runs, on standard error: indicatif's bar on a
//! terminal, one summary line every so often otherwise (a log). The bar
//! shows one level of the sweep at a time, so its total is final when it
//! is shown (a level's count is known once the level above it has
//! finished). Nothing is written once the sweep is over, so no line falls
//! into the results printed after it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Progress;

/// Per-level counts of planned and finished scenarios, and the totals of
/// the subject (planned, finished, failed) over all its crash states.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Levels {
    planned: Vec<u64>,
    finished: Vec<u64>,
    /// How many crash states have started before the current one.
    state: usize,
    /// Over every crash state: planned, finished, failed.
    totals: (u64, u64, u64),
}

impl Levels {
    /// Count one progress event. A sweep of several crash states runs them
    /// one after the other: level 1 planned again once everything planned
    /// has finished starts the counts afresh (the next state).
    pub fn note(&mut self, p: Progress) {
        if matches!(p, Progress::Planned { depth: 1, .. })
            && !self.planned.is_empty()
            && self.current().is_none()
        {
            self.planned.clear();
            self.finished.clear();
            self.state += 1;
        }
        let (depth, planned, finished) = match p {
            Progress::Planned { depth, count } => (depth, count, 0),
            Progress::Finished { depth } => (depth, 0, 1),
            Progress::Failed { .. } => {
                self.totals.2 += 1;
                return;
            }
        };
        let i = depth.saturating_sub(1);
        if self.planned.len() <= i {
            self.planned.resize(i + 1, 0);
            self.finished.resize(i + 1, 0);
        }
        self.planned[i] += planned;
        self.finished[i] += finished;
        self.totals.0 += planned;
        self.totals.1 += finished;
    }

    /// The first level not yet finished, as (level, finished, total): its
    /// total is final, because every scenario of the level above finished.
    /// `None` when every planned scenario finished.
    pub fn current(&self) -> Option<(usize, u64, u64)> {
        self.planned
            .iter()
            .zip(&self.finished)
            .enumerate()
            .find(|(_, (p, f))| f < p)
            .map(|(i, (p, f))| (i + 1, *f, *p))
    }

    /// Which crash state of the sweep is running (1-based, in the order the
    /// sweep runs them).
    pub fn state(&self) -> usize {
        self.state + 1
    }

    /// Scenarios planned so far, finished, and failed, over every level and
    /// crash state.
    pub fn totals(&self) -> (u64, u64, u64) {
        self.totals
    }
}

/// How a sweep's progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Show {
    /// indicatif's bar (standard error is a terminal).
    Bar,
    /// One summary line every this long.
    Lines(Duration),
    /// Nothing.
    Nothing,
}

/// Where summary lines go: standard error, or a test's collector.
type Print = Box<dyn Fn(&str) + Send + Sync>;

/// The subject being swept: its name, depth, crash states, and when its
/// sweep started.
struct Current {
    name: String,
    depth: u32,
    states: usize,
    since: Instant,
}

/// What the worker threads update and the line ticker reads.
struct Shared {
    levels: Mutex<Levels>,
    current: Mutex<Current>,
    /// Set when the sweep is over: the ticker stops.
    over: Mutex<bool>,
    wake: Condvar,
    print: Print,
}

/// Progress on standard error: a bar on a terminal, summary lines on a log.
pub(crate) struct Bar {
    bar: ProgressBar,
    shared: Arc<Shared>,
    ticker: Mutex<Option<JoinHandle<()>>>,
}

impl Bar {
    pub(crate) fn new(show: Show) -> Bar {
        Bar::printing(
            show,
            Box::new(|line| {
                use std::io::Write;
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }),
        )
    }

    /// A bar whose summary lines go to `print`.
    fn printing(show: Show, print: Print) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if show == Show::Bar {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{wide_msg} [{bar:20}] {pos}/{len} scenarios {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let shared = Arc::new(Shared {
            levels: Mutex::new(Levels::default()),
            current: Mutex::new(Current {
                name: String::new(),
                depth: 0,
                states: 1,
                since: Instant::now(),
            }),
            over: Mutex::new(false),
            wake: Condvar::new(),
            print,
        });
        let ticker = match show {
            Show::Lines(every) => {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name("sweep progress".into())
                    .spawn(move || shared.tick(every))
                    .ok()
            }
            Show::Bar | Show::Nothing => None,
        };
        Bar {
            bar,
            shared,
            ticker: Mutex::new(ticker),
        }
    }

    pub(crate) fn start(&self, subject: &str, depth: u32, states: usize) {
        *self.shared.levels() = Levels::default();
        *self.shared.current() = Current {
            name: subject.to_owned(),
            depth,
            states,
            since: Instant::now(),
        };
        self.bar.set_length(0);
        self.bar.set_position(0);
        self.bar.set_message(subject.to_owned());
    }

    pub(crate) fn note(&self, p: Progress) {
        let (levels, current) = {
            let mut levels = self.shared.levels();
            levels.note(p);
            (levels.clone(), levels.current())
        };
        if let Some((_, done, total)) = current {
            self.bar.set_length(total);
            self.bar.set_position(done);
            let c = self.shared.current();
            self.bar.set_message(describe(&c, &levels, false));
        }
    }

    /// The sweep is over: the bar is cleared, the ticker stopped (no line
    /// is written after this returns).
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
        *self.shared.over.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
        let ticker = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = ticker {
            let _ = t.join();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Shared {
    fn levels(&self) -> MutexGuard<'_, Levels> {
        self.levels.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn current(&self) -> MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Print a summary line every `every` until the sweep is over.
    fn tick(&self, every: Duration) {
        let mut over = self.over.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            over = match self.wake.wait_timeout_while(over, every, |over| !*over) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
            if *over {
                return;
            }
            let levels = self.levels().clone();
            let line = describe(&self.current(), &levels, true);
            (self.print)(&line);
        }
    }
}

/// The sweep's progress in words: on the bar (its message, the level's
/// counts drawn beside it) or as a line of its own (`line`), e.g.
/// `progress: payouts.py, level 2 of 2: 52 of 340 scenarios, 3.1
/// scenarios/s, 0 failed so far, 1m 00s elapsed`.
fn describe(c: &Current, levels: &Levels, line: bool) -> String {
    let (planned, done, failed) = levels.totals();
    let elapsed = c.since.elapsed();
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let state = if c.states > 1 {
        format!(", crash state {} of {}", levels.state(), c.states)
    } else {
        String::new()
    };
    let level = match levels.current() {
        Some((level, _, _)) => format!(", level {level} of {}", c.depth),
        None if planned == 0 => ", clean runs".to_owned(),
        None => String::new(),
    };
    if line && planned == 0 {
        format!(
            "progress: {}{state}: clean runs, {} elapsed",
            c.name,
            minutes(elapsed)
        )
    } else if line {
        format!(
            "progress: {}{state}{level}: {done} of {planned} scenarios, {rate:.1} scenarios/s, \
             {failed} failed so far, {} elapsed",
            c.name,
            minutes(elapsed)
        )
    } else {
        format!("{}{state}{level}, {failed} failed, {rate:.1}/s", c.name)
    }
}

/// `12s`, `3m 05s`, `1h 02m`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The levels of a sweep of two crash states: the second state's level 1
    /// starts the counts afresh only once everything planned has finished.
    #[test]
    fn a_second_crash_state_starts_the_counts_afresh() {
        let mut levels = Levels::default();
        assert_eq!((levels.current(), levels.state()), (None, 1));
        levels.note(Progress::Planned { depth: 1, count: 2 });
        levels.note(Progress::Finished { depth: 1 });
        // More of level 1 while some is running (another disk): same state.
        levels.note(Progress::Planned { depth: 1, count: 1 });
        assert_eq!((levels.current(), levels.state()), (Some((1, 1, 3)), 1));
        levels.note(Progress::Finished { depth: 1 });
        levels.note(Progress::Finished { depth: 1 });
        assert_eq!(levels.current(), None);
        levels.note(Progress::Planned { depth: 1, count: 4 });
        assert_eq!((levels.current(), levels.state()), (Some((1, 0, 4)), 2));
    }

    /// The bar shows the first unfinished level of the subject it was
    /// started for, naming the crash state when there are several, and the
    /// failures so far.
    #[test]
    fn the_bar_shows_the_current_level_of_the_current_subject() {
        let bar = Bar::new(Show::Nothing);
        bar.start("transfer", 2, 2);
        assert_eq!(bar.bar.message(), "transfer");
        bar.note(Progress::Planned { depth: 1, count: 3 });
        bar.note(Progress::Failed { depth: 1 });
        bar.note(Progress::Finished { depth: 1 });
        assert_eq!((bar.bar.length(), bar.bar.position()), (Some(3), 1));
        let shown = bar.bar.message();
        assert!(
            shown.starts_with("transfer, crash state 1 of 2, level 1 of 2, 1 failed, "),
            "{shown}"
        );
        assert!(shown.ends_with("/s"), "{shown}");
        // Starting another subject forgets the last one's counts.
        bar.start("outbox", 1, 1);
        assert_eq!((bar.bar.length(), bar.bar.position()), (Some(0), 0));
        bar.note(Progress::Planned { depth: 1, count: 5 });
        assert_eq!(bar.bar.length(), Some(5));
        assert!(
            bar.bar
                .message()
                .starts_with("outbox, level 1 of 1, 0 failed, "),
            "{}",
            bar.bar.message()
        );
        bar.finish();
        assert!(bar.bar.is_finished());
    }

    /// Off a terminal: summary lines with the counts, until the sweep is
    /// over, and none after. (The test waits for a line; it does not time
    /// one.)
    #[test]
    fn off_a_terminal_summary_lines_come_until_the_sweep_is_over() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = Arc::clone(&lines);
        let bar = Bar::printing(
            Show::Lines(Duration::from_millis(5)),
            Box::new(move |l| seen.lock().unwrap().push(l.to_owned())),
        );
        bar.start("payouts.py", 2, 1);
        bar.note(Progress::Planned { depth: 1, count: 4 });
        bar.note(Progress::Finished { depth: 1 });
        bar.note(Progress::Failed { depth: 1 });
        bar.note(Progress::Finished { depth: 1 });
        bar.note(Progress::Planned { depth: 2, count: 3 });
        while lines.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        bar.finish();
        // The ticker is joined: nothing more is written.
        assert!(bar.ticker.lock().unwrap().is_none());
        let lines = lines.lock().unwrap().clone();
        let first = &lines[0];
        assert!(
            first.starts_with("progress: payouts.py, level 1 of 2: 2 of 7 scenarios, "),
            "{first}"
        );
        assert!(first.contains(" scenarios/s, 1 failed so far, "), "{first}");
        assert!(first.ends_with("s elapsed"), "{first}");
    }

    #[test]
    fn elapsed_time_is_in_seconds_minutes_or_hours() {
        let m = |s| minutes(Duration::from_secs(s));
        assert_eq!(m(7), "7s");
        assert_eq!(m(65), "1m 05s");
        assert_eq!(m(3720), "1h 02m");
    }
}
