//! Tables over several sweeps of the variants: the power-loss grid, the
//! failing sweeps with their first failing scenario, rows summed into one;
//! drawn by sweep's one renderer ([`sweep::report::Table`]).

use durable::testing::DiskState;
use sweep::report::Table;
use sweep::Report;

use crate::design::Design;
use crate::modes::{Power, Writer};
use crate::variants::DesignVariant;

/// The power-loss grid: one row per design and writer, one column per crash
/// state, each cell the scenarios that failed (lost or duplicated an effect,
/// or stopped on a checkpoint it could not read) out of those run.
pub fn power_grid(reports: &[(DesignVariant, Report)]) -> String {
    let mut header = vec!["failing scenarios: design | writer".to_owned()];
    header.extend(DiskState::ALL.iter().map(|s| s.slug().to_owned()));
    let mut table = Table::new(header);
    let mut keys: Vec<(Design, Writer)> = Vec::new();
    for (v, _) in reports {
        if let Some(p) = v.modes.power {
            if !keys.contains(&(v.design, p.writer)) {
                keys.push((v.design, p.writer));
            }
        }
    }
    for (design, writer) in keys {
        let mut row = vec![format!("{} | {}", design.title(), writer.title())];
        for state in DiskState::ALL {
            let cell = reports
                .iter()
                .find(|(v, _)| v.design == design && v.modes.power == Some(Power { writer, state }))
                .map_or_else(
                    || "-".to_owned(),
                    |(_, r)| format!("{}/{}", r.failures().count(), r.scenarios.len()),
                );
            row.push(cell);
        }
        table.row(row);
    }
    table.text()
}

/// One line per failing sweep: how many scenarios failed and the first of
/// them by name, with why (the command `--scenario` reruns it).
pub fn failures_list(reports: &[(DesignVariant, Report)]) -> String {
    let mut out = String::new();
    for (v, r) in reports {
        let n = r.failures().count();
        if let Some(first) = r.failures().next() {
            out.push_str(&format!(
                "{}: {n} failing; first: {} ({})\n",
                v.title(),
                first.scenario,
                first
                    .failure
                    .as_ref()
                    .map(sweep::report::Failure::cause)
                    .unwrap_or_default()
            ));
        }
    }
    out
}

/// Rows summed cell by cell into one titled `title` (scenario counts and
/// every column), for a total over variants that split one sweep in parts.
pub fn sum_rows(title: &str, rows: &[sweep::report::Row]) -> sweep::report::Row {
    let mut total = sweep::report::Row {
        variant: title.to_owned(),
        depth_counts: Vec::new(),
        cells: Vec::new(),
        failed: 0,
        flaky: 0,
        unfired: 0,
    };
    for r in rows {
        let depths = total.depth_counts.len().max(r.depth_counts.len());
        total.depth_counts.resize(depths, 0);
        for (t, n) in total.depth_counts.iter_mut().zip(&r.depth_counts) {
            *t += n;
        }
        for (title, n) in &r.cells {
            match total.cells.iter_mut().find(|(t, _)| t == title) {
                Some((_, m)) => *m += n,
                None => total.cells.push((title.clone(), *n)),
            }
        }
        total.failed += r.failed;
        total.flaky += r.flaky;
        total.unfired += r.unfired;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        name: &str,
        depths: &[u64],
        cells: &[(&str, u64)],
        failed: u64,
        flaky: u64,
    ) -> sweep::report::Row {
        sweep::report::Row {
            variant: name.into(),
            depth_counts: depths.to_vec(),
            cells: cells.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
            failed,
            flaky,
            unfired: 0,
        }
    }

    /// Counts and cells add up across rows; a column one row lacks is
    /// taken from the row that has it, in first-seen order.
    #[test]
    fn rows_sum_cell_by_cell() {
        let total = sum_rows(
            "all",
            &[
                row("a", &[3], &[("dups", 2), ("missing", 5)], 1, 0),
                row("b", &[4, 7], &[("missing", 3), ("asks", 6)], 2, 1),
                row("c", &[1, 1], &[("dups", 4)], 0, 2),
            ],
        );
        assert_eq!(
            total,
            row(
                "all",
                &[8, 8],
                &[("dups", 6), ("missing", 8), ("asks", 6)],
                3,
                3
            )
        );
        assert_eq!(sum_rows("none", &[]), row("none", &[], &[], 0, 0));
    }
}
