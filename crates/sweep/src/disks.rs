//! How many disks the crashes of an enumerating sweep chose from, read off
//! its scenarios: the disks of one crash are the scenarios that differ only
//! in that crash's disk.

use std::collections::BTreeMap;

use crate::crash_state::CrashState;
use crate::report::Report;

/// The crashes of one enumerating state of a [`Report`]: how many there
/// were, and how many disks each chose from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashDisks {
    /// Scenarios in the state.
    pub scenarios: usize,
    /// Crash sites: scenarios with their last crash's disk left out.
    pub crashes: usize,
    /// The most disks one crash chose from.
    pub max: usize,
    /// The median number of disks per crash (the lower middle of an even
    /// count).
    pub median: usize,
}

impl CrashDisks {
    /// The crashes of `report`'s scenarios in `state` (all zero if none
    /// names a disk).
    pub fn of(report: &Report, state: &CrashState) -> CrashDisks {
        let mut sites: BTreeMap<String, usize> = BTreeMap::new();
        let mut scenarios = 0;
        for s in report
            .scenarios
            .iter()
            .filter(|s| s.scenario.state == *state)
        {
            scenarios += 1;
            if s.scenario.disks.is_empty() {
                continue;
            }
            let mut site = s.scenario.clone();
            if let Some(last) = site.disks.last_mut() {
                *last = 0;
            }
            *sites.entry(site.to_string()).or_default() += 1;
        }
        let mut counts: Vec<usize> = sites.into_values().collect();
        counts.sort_unstable();
        CrashDisks {
            scenarios,
            crashes: counts.len(),
            max: counts.last().copied().unwrap_or(0),
            median: counts
                .get(counts.len().saturating_sub(1) / 2)
                .copied()
                .unwrap_or(0),
        }
    }
}
