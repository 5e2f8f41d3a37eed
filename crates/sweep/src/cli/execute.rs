//! One sweep command, resolved into a [`Plan`], run: each subject swept with
//! the [`Config`] the flags ask for, the results printed, the table compared
//! with its snapshot (or blessed), the failures told with their rerun
//! commands — or one scenario rerun by name.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::args::{Format, SweepFlags};
use super::output::{self, failure_lines, failures_json, render, scenario_json};
use super::{bar, Env, EXIT_FAILED, EXIT_PASSED, EXIT_USAGE};
use crate::config::Config;
use crate::crash_state::CrashState;
use crate::dyn_subject::DynSubject;
use crate::report::Report;
use crate::scenario::Scenario;

/// One sweep command, resolved: the subjects to sweep, the snapshot to
/// compare with (if this run is the one it reviews), counters a definition
/// requires, and how to write the command that reruns a scenario.
pub struct Plan<'a> {
    /// The subjects, in table order.
    pub subjects: Vec<&'a dyn DynSubject>,
    /// The reviewed table this run is compared with, if any.
    pub snapshot: Option<PathBuf>,
    /// Counters required to be zero on top of the subjects' own.
    pub required: Vec<String>,
    /// The crash states to sweep, for each subject those of them it has
    /// ([`DynSubject::crash_states`]); empty, or none that a subject has:
    /// its [default states](DynSubject::default_crash_states).
    pub crash_states: Vec<CrashState>,
    /// The depth when `--depth` is not given.
    pub default_depth: u32,
    /// The command that reruns scenario `sc` of subject `i`.
    pub rerun: &'a dyn Fn(usize, &Scenario) -> String,
}

/// A message for people and the exit code that goes with it.
type Refusal = (u8, String);

/// Run `plan` as `flags` say, printing to `out` (results) and `err`
/// (progress, failures, refusals); returns the exit code.
pub fn execute(
    plan: &Plan<'_>,
    flags: &SweepFlags,
    env: &Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    match try_execute(plan, flags, env, out, err) {
        Ok(code) => code,
        Err((code, msg)) => {
            let _ = writeln!(err, "error: {msg}");
            code
        }
    }
}

fn try_execute(
    plan: &Plan<'_>,
    flags: &SweepFlags,
    env: &Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Refusal> {
    if let Some(name) = &flags.scenario {
        let sc: Scenario = name
            .parse()
            .map_err(|e| usage(format!("--scenario {name:?}: {e}")))?;
        return rerun(plan, &sweep_config(plan, flags), &sc, flags.format, out);
    }
    if flags.bless {
        check_bless(plan, env)?;
    }
    let bar = Arc::new(bar::Bar::new(show(flags, env)));
    let config = Config {
        progress: Some({
            let bar = Arc::clone(&bar);
            Arc::new(move |p| bar.note(p))
        }),
        ..sweep_config(plan, flags)
    };
    let mut reports = Vec::new();
    for s in &plan.subjects {
        let (config, states) = subject_config(plan, *s, &config);
        bar.start(&s.name(), config.depth, states);
        let result = s.run(&config);
        let mut report = match result {
            Ok(r) => r,
            Err(e) => {
                bar.finish();
                return Err(usage(e.to_string()));
            }
        };
        for counter in &plan.required {
            report.require(counter).map_err(|e| {
                usage(format!(
                    "the sweep definition requires a counter its subject lacks: {e}"
                ))
            })?;
        }
        reports.push(report);
    }
    bar.finish();
    write_results(plan, flags, &reports, out)?;
    for line in reports.iter().filter_map(output::processes_line) {
        let _ = writeln!(err, "{line}");
    }
    let mut code = compare_snapshot(plan, flags, &reports, err)?;
    let (lines, failed) = failure_lines(&reports, plan.rerun);
    for l in lines {
        let _ = writeln!(err, "{l}");
    }
    if let Some(dir) = &flags.artifacts {
        write_artifacts(dir, plan, &config, &reports, err)?;
    }
    if failed > 0 {
        code = EXIT_FAILED;
    }
    Ok(code)
}

/// How progress is shown: a bar when standard error is a terminal, a
/// summary line a minute (or `--progress-every`) otherwise, nothing with
/// `--no-progress`.
fn show(flags: &SweepFlags, env: &Env) -> bar::Show {
    if flags.no_progress {
        bar::Show::Nothing
    } else if env.progress {
        bar::Show::Bar
    } else {
        bar::Show::Lines(flags.progress_every.unwrap_or(PROGRESS_EVERY))
    }
}

/// How often a summary line of progress is written off a terminal.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// A refusal of the command as given, with its usage exit code.
fn usage(message: String) -> Refusal {
    (EXIT_USAGE, message)
}

/// `--bless` is refused unless this run is the one its snapshot reviews,
/// and under CI.
fn check_bless(plan: &Plan<'_>, env: &Env) -> Result<(), Refusal> {
    if plan.snapshot.is_none() {
        return Err(usage(
            "--bless rewrites the reviewed snapshot of a run as registered: \
             drop the subject names, --depth, --crash-state and --partition"
                .into(),
        ));
    }
    if crate::report::snapshot::under_ci(env.ci.as_deref()) {
        return Err(usage(format!(
            "--bless is refused under CI (CI={}): snapshots are reviewed, not rewritten",
            env.ci.as_deref().unwrap_or_default()
        )));
    }
    Ok(())
}

/// Subject `s`'s config: the plan's crash states it has, and how many
/// states it sweeps (its default ones when it has none of them).
fn subject_config(plan: &Plan<'_>, s: &dyn DynSubject, config: &Config) -> (Config, usize) {
    let has = s.crash_states();
    let config = Config {
        crash_states: plan
            .crash_states
            .iter()
            .filter(|st| has.contains(st))
            .cloned()
            .collect(),
        ..config.clone()
    };
    let states = if config.crash_states.is_empty() {
        s.default_crash_states().len()
    } else {
        config.crash_states.len()
    };
    (config, states)
}

/// The reports, written to `out` in the format the flags ask for (JSON with
/// the failures and their rerun commands).
fn write_results(
    plan: &Plan<'_>,
    flags: &SweepFlags,
    reports: &[Report],
    out: &mut dyn Write,
) -> Result<(), Refusal> {
    let write_err = |e: std::io::Error| usage(format!("cannot write the output: {e}"));
    if flags.format == Format::Json {
        let mut v: serde_json::Value =
            serde_json::from_str(&render(reports, Format::Json, flags.partition.is_some()))
                .unwrap_or_default();
        v["failures"] = failures_json(reports, plan.rerun);
        if let Some(reports) = v.as_object_mut().and_then(|m| m.remove("reports")) {
            v["reports"] = reports;
        }
        out.write_all(output::pretty(&v).as_bytes())
            .map_err(write_err)?;
    } else {
        out.write_all(render(reports, flags.format, false).as_bytes())
            .map_err(write_err)?;
    }
    Ok(())
}

/// The table compared with the plan's snapshot, or written over it with
/// `--bless`: [`EXIT_FAILED`] when they differ (the diff told on `err`).
fn compare_snapshot(
    plan: &Plan<'_>,
    flags: &SweepFlags,
    reports: &[Report],
    err: &mut dyn Write,
) -> Result<u8, Refusal> {
    let Some(snap) = &plan.snapshot else {
        return Ok(EXIT_PASSED);
    };
    let table = crate::table(&reports.iter().flat_map(Report::rows).collect::<Vec<_>>());
    if flags.bless {
        std::fs::write(snap, &table)
            .map_err(|e| usage(format!("cannot write {}: {e}", snap.display())))?;
        let _ = writeln!(err, "wrote {}", snap.display());
    } else if let Err(diff) = crate::report::snapshot::compare(
        snap,
        &table,
        "If the new output is right, accept it by rerunning this command with --bless, \
         and say in review why the numbers moved.",
    ) {
        let _ = writeln!(err, "{diff}");
        return Ok(EXIT_FAILED);
    }
    Ok(EXIT_PASSED)
}

/// The failing scenarios' artifacts, written in `dir` (and how many told on
/// `err`).
fn write_artifacts(
    dir: &std::path::Path,
    plan: &Plan<'_>,
    config: &Config,
    reports: &[Report],
    err: &mut dyn Write,
) -> Result<(), Refusal> {
    let written = super::artifacts::write(dir, &plan.subjects, config, reports, plan.rerun)
        .map_err(|e| {
            usage(format!(
                "cannot write the artifacts in {}: {e}",
                dir.display()
            ))
        })?;
    if !written.is_empty() {
        let _ = writeln!(
            err,
            "artifacts: {} failing scenario(s) written to {}",
            written.len(),
            dir.display()
        );
    }
    Ok(())
}

/// Rerun `sc` on each subject that has its crash state.
fn rerun(
    plan: &Plan<'_>,
    config: &Config,
    sc: &Scenario,
    format: Format,
    out: &mut dyn Write,
) -> Result<u8, Refusal> {
    let subjects: Vec<&dyn DynSubject> = plan
        .subjects
        .iter()
        .copied()
        .filter(|s| s.crash_states().contains(&sc.state))
        .collect();
    if subjects.is_empty() {
        let names: Vec<String> = plan.subjects.iter().map(|s| s.name()).collect();
        return Err((
            EXIT_USAGE,
            format!(
                "--scenario \"{sc}\": no subject runs in crash state {} (the subjects are {})",
                sc.state,
                names.join(", ")
            ),
        ));
    }
    let mut failed = false;
    let mut docs = Vec::new();
    for s in subjects {
        let r = s
            .rerun(config, &sc.to_string())
            .map_err(|e| (EXIT_USAGE, e.to_string()))?;
        failed |= r.failure.is_some();
        if format == Format::Json {
            docs.push(scenario_json(&s.name(), &r));
        } else {
            let _ = writeln!(out, "subject: {}", s.name());
            let _ = write!(out, "{}", r.timeline());
        }
    }
    if format == Format::Json {
        let _ = write!(
            out,
            "{}",
            output::pretty(&serde_json::json!({ "scenarios": docs }))
        );
    }
    Ok(if failed { EXIT_FAILED } else { EXIT_PASSED })
}

/// The sweep's [`Config`] as `flags` and `plan` ask for it (before each
/// subject's crash states are chosen).
fn sweep_config(plan: &Plan<'_>, flags: &SweepFlags) -> Config {
    Config {
        depth: flags.depth.unwrap_or(plan.default_depth),
        threads: flags.threads,
        partition: flags.partition,
        scenario_timeout: flags.timeout(),
        max_scenarios: flags.max_scenarios,
        share: !flags.no_share,
        refuse_unscoped: !flags.allow_unscoped,
        // Only rows and failures are printed: keep tallies of the passing
        // scenarios (a shard's partial report keeps them all, for merging).
        tally: flags.partition.is_none(),
        required: plan.required.clone(),
        strict_points: flags.strict_points,
        ..Config::default()
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        flags: SweepFlags,
    }

    fn flags(args: &[&str]) -> SweepFlags {
        Flags::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .flags
    }

    fn plan(required: &[&str]) -> Plan<'static> {
        Plan {
            subjects: Vec::new(),
            snapshot: None,
            required: required.iter().map(|s| (*s).to_owned()).collect(),
            crash_states: Vec::new(),
            default_depth: 3,
            rerun: &|_, _| String::new(),
        }
    }

    /// Every flag reaches the sweep's configuration.
    #[test]
    fn the_flags_become_the_sweeps_config() {
        let c = sweep_config(
            &plan(&["dup"]),
            &flags(&[
                "--depth",
                "1",
                "--threads",
                "3",
                "--scenario-timeout",
                "2.5",
                "--max-scenarios",
                "7",
                "--no-share",
                "--allow-unscoped",
                "--partition",
                "2/4",
            ]),
        );
        assert_eq!(c.depth, 1);
        assert_eq!(c.threads, Some(3));
        assert_eq!(c.partition, Some((2, 4)));
        assert!(!c.trace);
        assert_eq!(
            c.scenario_timeout,
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(c.max_scenarios, 7);
        assert!(!c.share);
        assert!(!c.refuse_unscoped);
        assert!(!c.tally, "a shard keeps every tally for merging");
        assert_eq!(c.required, vec!["dup".to_owned()]);
    }

    /// Without flags: the plan's depth, sharing on, tallies kept, the
    /// default limits.
    #[test]
    fn no_flags_give_the_plans_depth_and_the_defaults() {
        let c = sweep_config(&plan(&[]), &flags(&[]));
        assert_eq!(c.depth, 3);
        assert_eq!(c.threads, None);
        assert_eq!(c.partition, None);
        assert_eq!(
            c.scenario_timeout,
            Some(crate::Config::DEFAULT_SCENARIO_TIMEOUT)
        );
        assert_eq!(c.max_scenarios, crate::Config::DEFAULT_MAX_SCENARIOS);
        assert!(c.share);
        assert!(c.refuse_unscoped);
        assert!(c.tally);
        assert!(c.required.is_empty());
        let none = sweep_config(&plan(&[]), &flags(&["--scenario-timeout", "0"]));
        assert_eq!(none.scenario_timeout, None);
    }
}
