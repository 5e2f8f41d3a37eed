//! The judge's vocabulary and its counting rules: the [`Counter`]s a subject
//! declares, the [`Verdict`] it gives for one world, and how a verdict is
//! measured against its [`Baseline`] and its required counters.

use serde::{Deserialize, Serialize};

use crate::failure::Failure;

/// What a counter's totals are measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Baseline {
    /// The count as judged.
    Zero,
    /// The count beyond the clean run's (e.g. model calls repeated).
    Clean,
}

/// One number the judge reports for each scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// The name the judge uses in [`Verdict::count`].
    pub name: String,
    /// The column title of the counter's total.
    pub title: String,
    /// Totals count beyond this baseline.
    pub baseline: Baseline,
    /// A scenario whose count (beyond the baseline) is not zero fails.
    pub required_zero: bool,
    /// Also show a column counting the scenarios whose count is not zero.
    pub scenarios_title: Option<String>,
    /// Declared (the judge may count it) but not a column of the table:
    /// for counts a program reads from the verdicts itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

impl Counter {
    /// A counter named `name`, summed over scenarios, titled by its name.
    pub fn new(name: &str) -> Self {
        Counter {
            name: name.to_owned(),
            title: name.to_owned(),
            baseline: Baseline::Zero,
            required_zero: false,
            scenarios_title: None,
            hidden: false,
        }
    }

    /// Declare the counter without a column in the table (the judge may
    /// count it; a program reads it from the verdicts).
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }
    /// Title the total column.
    pub fn titled(mut self, title: &str) -> Self {
        self.title = title.to_owned();
        self
    }
    /// Count beyond the clean run's value.
    pub fn over_clean(mut self) -> Self {
        self.baseline = Baseline::Clean;
        self
    }
    /// Every scenario must count zero here, or it fails.
    pub fn required(mut self) -> Self {
        self.required_zero = true;
        self
    }
    /// Add a column, placed before the total, counting scenarios with a
    /// non-zero count.
    pub fn with_scenarios(mut self, title: &str) -> Self {
        self.scenarios_title = Some(title.to_owned());
        self
    }
}

/// What the judge saw in one world: named counts and human-readable notes
/// (e.g. `issue "B" filed 2 times`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Counts by counter name, in the order they were set.
    pub counts: Vec<(String, u64)>,
    /// What went wrong, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Verdict {
    /// An empty verdict: every counter zero.
    pub fn new() -> Self {
        Verdict::default()
    }
    /// Set counter `name` to `n`.
    pub fn count(mut self, name: &str, n: u64) -> Self {
        match self.counts.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = n,
            None => self.counts.push((name.to_owned(), n)),
        }
        self
    }
    /// Add a note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    /// Counter `name`, zero if never set.
    pub fn get(&self, name: &str) -> u64 {
        self.counts
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// Why `verdict` fails against `counters`, or `None` if it does not: a name
/// no counter declares, a required counter it does not set, or required
/// counters that are not zero (beyond their baseline), with the judge's
/// notes.
pub(crate) fn verdict_failure(
    verdict: &Verdict,
    clean: Option<&Verdict>,
    counters: &[Counter],
) -> Option<Failure> {
    if let Some((name, _)) = verdict
        .counts
        .iter()
        .find(|(n, _)| !counters.iter().any(|c| &c.name == n))
    {
        return Some(Failure::UndeclaredCounter { name: name.clone() });
    }
    // A required counter the judge forgot in this verdict reads 0 and would
    // pass unseen: every verdict sets every required counter.
    if let Some(c) = counters
        .iter()
        .find(|c| c.required_zero && !verdict.counts.iter().any(|(n, _)| *n == c.name))
    {
        return Some(Failure::RequiredNotSet {
            name: c.name.clone(),
        });
    }
    broken_invariants(verdict, clean, counters)
}

/// Why `verdict` breaks the required counters among `counters`, with the
/// judge's notes, or `None` if it does not.
pub(crate) fn broken_invariants(
    verdict: &Verdict,
    clean: Option<&Verdict>,
    counters: &[Counter],
) -> Option<Failure> {
    let broken: Vec<(String, u64)> = counters
        .iter()
        .filter(|c| c.required_zero)
        .filter_map(|c| {
            let v = over(verdict, clean, c);
            (v != 0).then(|| (c.title.clone(), v))
        })
        .collect();
    if broken.is_empty() {
        return None;
    }
    Some(Failure::Broken {
        counters: broken,
        notes: verdict.notes.clone(),
    })
}

/// A counter's value in `verdict`, beyond its baseline.
pub(crate) fn over(verdict: &Verdict, clean: Option<&Verdict>, c: &Counter) -> u64 {
    let v = verdict.get(&c.name);
    match (c.baseline, clean) {
        (Baseline::Clean, Some(cl)) => v.saturating_sub(cl.get(&c.name)),
        _ => v,
    }
}
