//! Reports merged: the partial reports of one sweep's shards put back
//! together into the report an unpartitioned run gives; a report's passing
//! scenarios folded into tallies.

use crate::config::Config;
use crate::crash_state::CrashState;
use crate::error::Error;
use crate::progress::Stats;
use crate::report::{sort_scenarios, Report};

impl Report {
    /// Merge the partial reports of one sweep's shards into the report a
    /// single unpartitioned run gives.
    pub fn merge(parts: Vec<Report>) -> Result<Report, Error> {
        let mut parts = parts.into_iter();
        let Some(mut first) = parts.next() else {
            return Err(Error::Merge("no reports given".into()));
        };
        if first.depth > Config::MAX_DEPTH {
            return Err(Error::Merge(format!(
                "{:?} claims depth {}; sweeps deeper than {} crashes in a row are not real",
                first.subject,
                first.depth,
                Config::MAX_DEPTH
            )));
        }
        let mut seen = vec![first.partition];
        for mut p in parts {
            first.mergeable_with(&p, &seen)?;
            seen.push(p.partition);
            first.absorb_shard(&mut p);
        }
        check_partitioning(&seen)?;
        let states = first.states.clone();
        sort_scenarios(&mut first.scenarios, &states);
        first.partition = None;
        Ok(first)
    }
}

impl Report {
    /// Whether the shard `p` is of the same sweep as `self` and not one of
    /// the shards `seen` (their partitions) already.
    fn mergeable_with(&self, p: &Report, seen: &[Option<(u32, u32)>]) -> Result<(), Error> {
        if p.subject != self.subject || p.depth != self.depth || p.counters != self.counters {
            return Err(Error::Merge(format!(
                "{:?} (depth {}) and {:?} (depth {}) are different sweeps",
                self.subject, self.depth, p.subject, p.depth
            )));
        }
        if p.states != self.states {
            return Err(Error::Merge(format!(
                "the shards of {:?} swept different crash states",
                p.subject
            )));
        }
        if p.clean.verdict != self.clean.verdict {
            return Err(Error::Merge(format!(
                "the clean runs of {:?} differ between shards",
                p.subject
            )));
        }
        if seen.contains(&p.partition) {
            let shard = p
                .partition
                .map_or("all".into(), |(k, n)| format!("{k}/{n}"));
            return Err(Error::Merge(format!("shard {shard} given twice")));
        }
        Ok(())
    }

    /// Takes the shard `p`'s scenarios, tallies, unscoped and stray points
    /// and statistics into `self`.
    fn absorb_shard(&mut self, p: &mut Report) {
        if self.tallies.is_empty() != p.tallies.is_empty() {
            self.tally_up();
            p.tally_up();
        }
        for t in &p.tallies {
            if let Some(f) = self.tallies.iter_mut().find(|f| f.state == t.state) {
                f.absorb(t);
            }
        }
        self.scenarios.append(&mut p.scenarios);
        for u in p.unscoped.drain(..) {
            if !self.unscoped.contains(&u) {
                self.unscoped.push(u);
            }
        }
        for u in p.stray.drain(..) {
            if !self.stray.contains(&u) {
                self.stray.push(u);
            }
        }
        self.stats = Stats {
            scenarios: self.stats.scenarios + p.stats.scenarios,
            lives: self.stats.lives + p.stats.lives,
            shared: self.stats.shared && p.stats.shared,
            processes: match (self.stats.processes, p.stats.processes) {
                (Some(a), Some(b)) => Some(a.plus(&b)),
                (a, b) => a.or(b),
            },
        };
    }
}

/// Whether the shards `seen` (their partitions) are all the shards of one
/// partitioning.
fn check_partitioning(seen: &[Option<(u32, u32)>]) -> Result<(), Error> {
    // Shard numbers come from files: without this, `1/2` and `3/2` would
    // pass the count check below with shard 2's scenarios missing.
    if let Some(&(k, n)) = seen.iter().flatten().find(|(k, n)| *k == 0 || k > n) {
        return Err(Error::BadPartition { k, n });
    }
    let n = match seen.first().copied().flatten() {
        Some((_, n)) => n as usize,
        None => 1,
    };
    if seen.len() != n || seen.iter().any(|p| p.map_or(1, |(_, m)| m as usize) != n) {
        return Err(Error::Merge(format!(
            "expected all {n} shards of one partitioning, got {}",
            seen.iter()
                .map(|p| p.map_or("all".into(), |(k, n)| format!("{k}/{n}")))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

impl Report {
    /// Keep only the failing and flaky scenarios, tallying the rest (no
    /// change to a report that is tallied already).
    pub fn tally_up(&mut self) {
        if !self.tallies.is_empty() {
            return;
        }
        let states: Vec<CrashState> = if self.states.is_empty() {
            vec![CrashState::PROCESS]
        } else {
            self.states.iter().map(|s| s.state.clone()).collect()
        };
        self.tallies = states.iter().map(|s| self.tally(s)).collect();
        self.scenarios.retain(|s| s.failure.is_some());
    }
}
