//! The progress bar: one level of the sweep at a time, so its total is
//! final when it is shown (a level's count is known once the level above
//! it has finished).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Progress;

/// Per-level counts of planned and finished scenarios.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Levels {
    planned: Vec<u64>,
    finished: Vec<u64>,
    /// How many crash states have started before the current one.
    state: usize,
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
        };
        let i = depth.saturating_sub(1);
        if self.planned.len() <= i {
            self.planned.resize(i + 1, 0);
            self.finished.resize(i + 1, 0);
        }
        self.planned[i] += planned;
        self.finished[i] += finished;
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
}

/// A bar on standard error, drawn only when it is a terminal.
pub(crate) struct Bar {
    bar: ProgressBar,
    levels: Mutex<Levels>,
    subject: Mutex<(String, u32, usize)>,
}

impl Bar {
    pub(crate) fn new(visible: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if visible {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{msg:>40} [{bar:30}] {pos}/{len} scenarios {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Bar {
            bar,
            levels: Mutex::new(Levels::default()),
            subject: Mutex::new((String::new(), 0, 1)),
        }
    }

    pub(crate) fn start(&self, subject: &str, depth: u32, states: usize) {
        *self.lock_levels() = Levels::default();
        *self.subject.lock().unwrap_or_else(|e| e.into_inner()) =
            (subject.to_owned(), depth, states);
        self.bar.set_length(0);
        self.bar.set_position(0);
        self.bar.set_message(subject.to_owned());
    }

    pub(crate) fn note(&self, p: Progress) {
        let (current, state) = {
            let mut levels = self.lock_levels();
            levels.note(p);
            (levels.current(), levels.state())
        };
        if let Some((level, done, total)) = current {
            let (name, depth, states) = self
                .subject
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.bar.set_length(total);
            self.bar.set_position(done);
            let state = if states > 1 {
                format!(", crash state {state} of {states}")
            } else {
                String::new()
            };
            self.bar
                .set_message(format!("{name}{state}, level {level} of {depth}"));
        }
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn lock_levels(&self) -> std::sync::MutexGuard<'_, Levels> {
        self.levels.lock().unwrap_or_else(|e| e.into_inner())
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
    /// started for, naming the crash state when there are several.
    #[test]
    fn the_bar_shows_the_current_level_of_the_current_subject() {
        let bar = Bar::new(false);
        bar.start("transfer", 2, 2);
        assert_eq!(bar.bar.message(), "transfer");
        bar.note(Progress::Planned { depth: 1, count: 3 });
        bar.note(Progress::Finished { depth: 1 });
        assert_eq!((bar.bar.length(), bar.bar.position()), (Some(3), 1));
        assert_eq!(
            bar.bar.message(),
            "transfer, crash state 1 of 2, level 1 of 2"
        );
        // Starting another subject forgets the last one's counts.
        bar.start("outbox", 1, 1);
        assert_eq!((bar.bar.length(), bar.bar.position()), (Some(0), 0));
        bar.note(Progress::Planned { depth: 1, count: 5 });
        assert_eq!(bar.bar.length(), Some(5));
        assert_eq!(bar.bar.message(), "outbox, level 1 of 1");
        bar.finish();
        assert!(bar.bar.is_finished());
    }
}
