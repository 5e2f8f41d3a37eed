//! The command line's flags: those every sweep command shares
//! ([`SweepFlags`], which a bigger command line can flatten into its own),
//! and the whole command of an [`App`](super::App).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A fixed-width table (the default).
    #[default]
    Table,
    /// A Markdown table.
    Markdown,
    /// JSON, in the schema the module docs describe.
    Json,
}

/// The flags of any sweep command: depth, threads, output, one scenario,
/// a shard, blessing the snapshot. Flatten them into a larger command line
/// with `#[command(flatten)]`.
#[derive(Args, Clone, Debug, Default)]
pub struct SweepFlags {
    /// How many lives in a row crash (0 = clean only, 1 = single, 2 = double, …).
    #[arg(long)]
    pub depth: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Rerun one scenario by name (e.g. "tracker accepted#2 → mid-save#1") and print its timeline.
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// Run only shard K of N (e.g. 2/3); with --format json, writes a partial report for `merge`.
    #[arg(long, value_name = "K/N", value_parser = parse_partition)]
    pub partition: Option<(u32, u32)>,
    /// Rewrite the reviewed snapshot with this run's table (refused when CI is set to a true value).
    #[arg(long)]
    pub bless: bool,
    /// Stop a scenario still running after this many seconds at its next
    /// crash point and fail it as hung (0: no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = crate::Config::DEFAULT_SCENARIO_TIMEOUT.as_secs_f64(), value_parser = parse_seconds)]
    pub scenario_timeout: f64,
    /// Refuse at once a sweep estimated (from its clean run) to run more
    /// scenarios than this.
    #[arg(long, value_name = "N", default_value_t = crate::Config::DEFAULT_MAX_SCENARIOS)]
    pub max_scenarios: u64,
    /// Replay every scenario from a fresh world (brute force) instead of
    /// sharing lives between scenarios; the report is the same.
    #[arg(long)]
    pub no_share: bool,
    /// Only warn, instead of refusing the sweep, when its lives pass crash
    /// points on threads without a scope (which no crash can reach).
    #[arg(long)]
    pub allow_unscoped: bool,
    /// Write a directory per failing scenario here: the rerun command (an
    /// argv array and a shell line), the timeline, the verdict with its
    /// notes and the final world, so a CI failure is read without a rerun.
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<std::path::PathBuf>,
    /// Refuse the sweep when its clean run never passes a crash point
    /// compiled into the code it went through (no scenario would crash
    /// there); without it such points are a warning.
    #[arg(long)]
    pub strict_points: bool,
}

/// A number of seconds, `0` or more.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!(
            "{s:?} is not a number of seconds: expected a number ≥ 0, e.g. 60 or 0.5 (0: no limit)"
        )),
    }
}

impl SweepFlags {
    /// The per-scenario time limit these flags ask for (`None`: no limit).
    pub fn timeout(&self) -> Option<std::time::Duration> {
        (self.scenario_timeout > 0.0)
            .then(|| std::time::Duration::from_secs_f64(self.scenario_timeout))
    }
}

/// `K/N` with `1 ≤ K ≤ N`.
pub fn parse_partition(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("{s:?} is not a shard: expected K/N with 1 ≤ K ≤ N, e.g. 2/3");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (u32, u32) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  every scenario passed (and the table matches its snapshot)
  1  a scenario failed a required invariant, was flaky or never fired its crash,
     or the table differs from its snapshot
  2  the command could not run: bad flags, an unreadable or refused file,
     a sweep that could not start, --bless refused under CI";

/// The command line of an [`App`](super::App).
#[derive(Parser, Debug)]
#[command(after_help = EXIT_CODES, args_conflicts_with_subcommands = true)]
pub(crate) struct AppArgs {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// Subjects to sweep, by name or slug (see --list); default: all.
    #[arg(value_name = "SUBJECT")]
    pub subjects: Vec<String>,
    /// List the subjects and the crash states.
    #[arg(long)]
    pub list: bool,
    /// Only the subjects of these crash states (repeatable, or NAME,NAME); default: all.
    #[arg(long, value_name = "STATE", value_delimiter = ',')]
    pub crash_state: Vec<String>,
    #[command(flatten)]
    pub flags: SweepFlags,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Action {
    /// Merge the partial JSON reports of a partitioned sweep into its table.
    Merge {
        /// Partial reports written by `--partition K/N --format json`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_a_finite_number_not_below_zero() {
        assert_eq!(parse_seconds("60"), Ok(60.0));
        assert_eq!(parse_seconds(" 0.5 "), Ok(0.5));
        assert_eq!(parse_seconds("0"), Ok(0.0));
        for bad in ["-1", "-0.001", "inf", "NaN", "", "ten"] {
            let e = parse_seconds(bad).unwrap_err();
            assert!(e.contains("is not a number of seconds"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_timeout_of_zero_is_no_limit() {
        let flags = |s| SweepFlags {
            scenario_timeout: s,
            ..SweepFlags::default()
        };
        assert_eq!(flags(0.0).timeout(), None);
        assert_eq!(
            flags(1.5).timeout(),
            Some(std::time::Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_shard_is_k_of_n_with_k_from_1_to_n() {
        assert_eq!(parse_partition("2/3"), Ok((2, 3)));
        assert_eq!(parse_partition(" 1 / 1 "), Ok((1, 1)));
        assert_eq!(parse_partition("3/3"), Ok((3, 3)));
        for bad in ["0/3", "4/3", "2", "a/3", "2/b", "/", "-1/3"] {
            let e = parse_partition(bad).unwrap_err();
            assert!(e.contains("is not a shard"), "{bad}: {e}");
        }
    }
}
