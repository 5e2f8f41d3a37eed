//! A command line for sweeping your own crate, in five lines (feature `cli`).
//!
//! Hand your subjects to an [`App`] in a binary's `main` (or in a test
//! target with `harness = false`):
//!
//! ```no_run
//! # struct Relay;
//! # impl sweep::Subject for Relay {
//! #     type World = ();
//! #     fn name(&self) -> String { "relay".into() }
//! #     fn counters(&self) -> Vec<sweep::Counter> { vec![] }
//! #     fn world(&self) {}
//! #     fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> { Ok(()) }
//! #     fn judge(&self, _: &()) -> sweep::Verdict { sweep::Verdict::new() }
//! # }
//! fn main() -> std::process::ExitCode {
//!     sweep::cli::App::new("cargo run -p outbox --")
//!         .subject(Relay)
//!         .snapshot("snapshots/outbox.txt")
//!         .main()
//! }
//! ```
//!
//! and get:
//!
//! | command | does |
//! |---|---|
//! | `--list` | lists the subjects (slug, crash states, name) |
//! | *(no subject)* / `SUBJECT…` | sweeps all subjects, or those named (by slug or name) |
//! | `--depth N`, `--threads N` | lives crashed in a row (default 2); worker threads |
//! | `--crash-state STATE,…` | sweeps these crash states (of the subjects that have them) |
//! | `--scenario NAME` | reruns one scenario by name and prints its timeline |
//! | `--format table\|markdown\|json` | how results are printed |
//! | `--partition K/N`, `merge FILE…` | one shard of the sweep; shards merged into the table |
//! | `--bless` | rewrites the snapshot (refused when `CI` is set to a true value) |
//! | `--scenario-timeout SECONDS` | fails a scenario still running after this long as hung (default 60, 0: none) |
//! | `--max-scenarios N` | refuses at once a sweep estimated above `N` scenarios (default 1,000,000) |
//! | `--no-share` | replays every scenario from a fresh world instead of sharing lives (same report) |
//!
//! Subjects of different world types fit in one list: each is kept as a
//! [`DynSubject`].
//!
//! # Crash states
//!
//! A subject that can run in several crash states (its
//! [`Subject::crash_states`](crate::Subject::crash_states), e.g. `process`
//! and the power cuts of a `durable::testing::PowerDir` it boots in
//! [`Subject::boot`](crate::Subject::boot)) is swept in its
//! [default states](crate::Subject::default_crash_states), or in those
//! `--crash-state` names ([`Config::crash_states`]): one table row per
//! state. Its scenarios' names start with their state
//! (`lose: posting#2 → receiver accepted#1`), and so do the rerun hints, so
//! `--scenario "lose: …"` reruns a failure from its name alone. `--list`
//! shows each subject's states. `--crash-state` leaves out the subjects
//! that have none of the states named.
//!
//! A subject registered with [`App::subject_in`] instead carries one state
//! as a label (for a subject that is built for one state and has no
//! dimension of its own): `--crash-state` picks it by that label.
//!
//! When the [`App`] has a snapshot and runs as registered (every subject, no
//! `--depth`, `--crash-state` or `--partition`), its table is compared with
//! the snapshot file, and a difference is printed as a line diff (exit 1).
//! `--bless` rewrites the file instead, unless the `CI` variable is set to a
//! true value (`CI=false`, `CI=0` and an empty `CI` are not CI; see
//! [`crate::snapshot::under_ci`]).
//! The flag is the only way: `CRASHSWEEP_BLESS`, which tests read
//! ([`crate::snapshot::check`]), does not bless a command line's run
//! ([`crate::snapshot::compare`]).
//!
//! A progress bar is drawn on standard error when it is a terminal. It shows
//! one level of the sweep at a time (`level 2 of 2`), whose total is final
//! when shown: a level's scenarios are all planned once the level above it
//! has finished.
//!
//! # Exit codes
//!
//! - `0`: every scenario passed (and the table matches its snapshot);
//! - `1`: a scenario failed a required invariant, or the table differs from
//!   its snapshot;
//! - `2`: the command could not run: bad flags, an unreadable or refused
//!   file, a sweep that could not start, `--bless` refused under CI.
//!
//! # JSON
//!
//! A sweep with `--format json` prints one object:
//!
//! ```text
//! {
//!   "rows": [ { "variant": NAME, "once": N, "twice": N, …, COLUMN: N, … } ],
//!   "failures": [ { "subject": NAME, "scenario": NAME, "reason": TEXT, "flaky": BOOL, "rerun": COMMAND } ],
//!   "reports": [ REPORT, … ]          // only with --partition: what `merge` reads
//! }
//! ```
//!
//! A row's keys after `variant` are the depth columns (`once`, `twice`,
//! `thrice`, `4 times`, …) and then each counter's columns in table order,
//! their titles with `+` spelt `_plus` and any other character that is not a
//! letter or digit spelt `_`. With `--scenario`, it prints
//! `{ "scenarios": [ SCENARIO, … ] }`, one per subject, each as
//! [`scenario_json`] describes: `subject`, `scenario`, `passed`, `failure`
//! (text or null), `lives` (each `{ "crash": HIT or null, "hits": [HIT…],
//! "end": TEXT }`), `counts` (counter name → value), `notes`, `world`.

mod args;
mod bar;
mod output;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

pub use args::{parse_partition, Format, SweepFlags};
pub use bar::Levels;
pub use output::{failure_lines, failures_json, merge_files, render, scenario_json, MergeError};

use crate::crash_state::CrashState;
use crate::dyn_subject::DynSubject;
use crate::report::Report;
use crate::runner::Config;
use crate::scenario::Scenario;

/// Every scenario passed.
pub const EXIT_PASSED: u8 = 0;
/// A scenario failed, or the table differs from its snapshot.
pub const EXIT_FAILED: u8 = 1;
/// The command could not run.
pub const EXIT_USAGE: u8 = 2;

/// What the command line reads from its environment, passed in so tests
/// can set it without touching the process's variables.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// The value of `CI`, if set.
    pub ci: Option<String>,
    /// Draw a progress bar (standard error is a terminal).
    pub progress: bool,
}

impl Env {
    /// This process's environment.
    pub fn from_process() -> Env {
        Env {
            ci: std::env::var("CI").ok(),
            progress: std::io::stderr().is_terminal(),
        }
    }
}

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
    let usage = |m: String| (EXIT_USAGE, m);
    if let Some(name) = &flags.scenario {
        let sc: Scenario = name
            .parse()
            .map_err(|e| usage(format!("--scenario {name:?}: {e}")))?;
        return rerun(plan, &sc, flags.format, out);
    }
    if flags.bless {
        if plan.snapshot.is_none() {
            return Err(usage(
                "--bless rewrites the reviewed snapshot of a run as registered: \
                 drop the subject names, --depth, --crash-state and --partition"
                    .into(),
            ));
        }
        if crate::snapshot::under_ci(env.ci.as_deref()) {
            return Err(usage(format!(
                "--bless is refused under CI (CI={}): snapshots are reviewed, not rewritten",
                env.ci.as_deref().unwrap_or_default()
            )));
        }
    }
    let config = sweep_config(plan, flags);
    let bar = bar::Bar::new(env.progress);
    let mut reports = Vec::new();
    for s in &plan.subjects {
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
        bar.start(&s.name(), config.depth, states);
        let result = s.sweep(&config, &|p| bar.note(p));
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
    let write_err = |e: std::io::Error| usage(format!("cannot write the output: {e}"));
    if flags.format == Format::Json {
        let mut v: serde_json::Value =
            serde_json::from_str(&render(&reports, Format::Json, flags.partition.is_some()))
                .unwrap_or_default();
        v["failures"] = failures_json(&reports, plan.rerun);
        if let Some(reports) = v.as_object_mut().and_then(|m| m.remove("reports")) {
            v["reports"] = reports;
        }
        out.write_all(output::pretty(&v).as_bytes())
            .map_err(write_err)?;
    } else {
        out.write_all(render(&reports, flags.format, false).as_bytes())
            .map_err(write_err)?;
    }
    let mut code = EXIT_PASSED;
    if let Some(snap) = &plan.snapshot {
        let table = crate::table(&reports.iter().flat_map(Report::rows).collect::<Vec<_>>());
        if flags.bless {
            std::fs::write(snap, &table)
                .map_err(|e| usage(format!("cannot write {}: {e}", snap.display())))?;
            let _ = writeln!(err, "wrote {}", snap.display());
        } else if let Err(diff) = crate::snapshot::compare(
            snap,
            &table,
            "If the new output is right, accept it by rerunning this command with --bless, \
             and say in review why the numbers moved.",
        ) {
            let _ = writeln!(err, "{diff}");
            code = EXIT_FAILED;
        }
    }
    let (lines, failed) = failure_lines(&reports, plan.rerun);
    for l in lines {
        let _ = writeln!(err, "{l}");
    }
    if failed > 0 {
        code = EXIT_FAILED;
    }
    Ok(code)
}

/// Rerun `sc` on each subject that has its crash state.
fn rerun(
    plan: &Plan<'_>,
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
        let r = s.scenario(sc);
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

struct Entry {
    subject: Box<dyn DynSubject>,
    /// The state given with [`App::subject_in`], a label.
    label: Option<String>,
}

impl Entry {
    /// The states `--list` shows and `--crash-state` picks from: the label,
    /// or the subject's own states.
    fn states(&self) -> Vec<String> {
        match &self.label {
            Some(l) => vec![l.clone()],
            None => self
                .subject
                .crash_states()
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
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
        // Only rows and failures are printed: keep tallies of the passing
        // scenarios (a shard's partial report keeps them all, for merging).
        tally: flags.partition.is_none(),
        required: plan.required.clone(),
        ..Config::default()
    }
}

/// A command line over a list of subjects; see the [module docs](self).
pub struct App {
    command: String,
    entries: Vec<Entry>,
    snapshot: Option<PathBuf>,
}

/// A name as typed on a command line: lower case, words joined by `-`.
pub fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() {
            s.extend(c.to_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_owned()
}

impl App {
    /// A command line whose rerun hints start with `command` (how a user
    /// runs this binary, e.g. `cargo run -p outbox --`).
    pub fn new(command: &str) -> App {
        App {
            command: command.to_owned(),
            entries: Vec::new(),
            snapshot: None,
        }
    }

    /// Add a subject, swept in its own crash states (see the
    /// [module docs](self#crash-states)).
    pub fn subject(mut self, subject: impl DynSubject + 'static) -> App {
        self.entries.push(Entry {
            subject: Box::new(subject),
            label: None,
        });
        self
    }

    /// Add a subject built for one crash state, under `state` as a label for
    /// `--crash-state` and `--list` (it is swept in its own default states).
    pub fn subject_in(mut self, state: &str, subject: impl DynSubject + 'static) -> App {
        self.entries.push(Entry {
            subject: Box::new(subject),
            label: Some(state.to_owned()),
        });
        self
    }

    /// Compare the table of a run as registered with this file.
    pub fn snapshot(mut self, path: impl Into<PathBuf>) -> App {
        self.snapshot = Some(path.into());
        self
    }

    /// Parse this process's arguments, run, and exit with the documented code.
    pub fn main(self) -> ExitCode {
        let env = Env::from_process();
        let code = self.run(
            std::env::args_os(),
            &env,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        );
        ExitCode::from(code)
    }

    /// Run with `args` (the program's name first) and `env`; returns the
    /// exit code.
    pub fn run<I, T>(&self, args: I, env: &Env, out: &mut dyn Write, err: &mut dyn Write) -> u8
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let parsed = match args::AppArgs::try_parse_from(args) {
            Ok(p) => p,
            Err(e) => {
                let code = if e.use_stderr() {
                    EXIT_USAGE
                } else {
                    EXIT_PASSED
                };
                let text = e.render().to_string();
                let _ = if e.use_stderr() {
                    write!(err, "{text}")
                } else {
                    write!(out, "{text}")
                };
                return code;
            }
        };
        match self.dispatch(&parsed, env, out, err) {
            Ok(code) => code,
            Err(msg) => {
                let _ = writeln!(err, "error: {msg}");
                EXIT_USAGE
            }
        }
    }

    fn dispatch(
        &self,
        a: &args::AppArgs,
        env: &Env,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<u8, String> {
        let slugs: Vec<String> = self
            .entries
            .iter()
            .map(|e| slug(&e.subject.name()))
            .collect();
        for (i, s) in slugs.iter().enumerate() {
            if slugs[..i].contains(s) {
                return Err(format!(
                    "two subjects are named {s:?}: give each its own name"
                ));
            }
        }
        if let Some(args::Action::Merge { files, format }) = &a.action {
            let merged = merge_files(files).map_err(|e| e.to_string())?;
            let _ = write!(out, "{}", render(&merged, *format, false));
            let rerun = |i: usize, sc: &Scenario| {
                let name = merged.get(i).map_or_else(String::new, |r| slug(&r.subject));
                self.rerun_command(&name, sc)
            };
            let (lines, failed) = failure_lines(&merged, &rerun);
            for l in lines {
                let _ = writeln!(err, "{l}");
            }
            return Ok(if failed > 0 { EXIT_FAILED } else { EXIT_PASSED });
        }
        let entry_states: Vec<Vec<String>> = self.entries.iter().map(Entry::states).collect();
        let mut states: Vec<&str> = Vec::new();
        for s in entry_states.iter().flatten() {
            if !states.contains(&s.as_str()) {
                states.push(s);
            }
        }
        if a.list {
            let _ = writeln!(out, "subjects (slug, crash states, name):");
            let width = slugs.iter().map(String::len).max().unwrap_or(0);
            let shown: Vec<String> = self
                .entries
                .iter()
                .zip(&entry_states)
                .map(|(e, st)| {
                    let defaults = e.subject.default_crash_states();
                    // (A labelled entry has one state, its label.)
                    if defaults.len() < st.len() {
                        let d: Vec<String> = defaults.iter().map(ToString::to_string).collect();
                        format!("{} (default {})", st.join(","), d.join(","))
                    } else {
                        st.join(",")
                    }
                })
                .collect();
            let sw = shown.iter().map(String::len).max().unwrap_or(0).max(10);
            for ((e, s), st) in self.entries.iter().zip(&slugs).zip(&shown) {
                let _ = writeln!(out, "  {s:width$}  {st:sw$}  {}", e.subject.name());
            }
            let _ = writeln!(out, "crash states: {}", states.join(", "));
            return Ok(EXIT_PASSED);
        }
        let mut asked: Vec<CrashState> = Vec::new();
        for s in &a.crash_state {
            if !states.contains(&s.as_str()) {
                return Err(format!(
                    "--crash-state {s}: no subject has it (the states are {})",
                    states.join(", ")
                ));
            }
            asked.push(CrashState::new(s.clone()).map_err(|e| format!("--crash-state: {e}"))?);
        }
        let mut chosen: Vec<usize> = Vec::new();
        for name in &a.subjects {
            let want = slug(name);
            let Some(i) = slugs.iter().position(|s| *s == want) else {
                return Err(format!(
                    "no subject is named {name:?} (the subjects are {}; see --list)",
                    slugs.join(", ")
                ));
            };
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        if chosen.is_empty() {
            chosen = (0..self.entries.len()).collect();
        }
        chosen.retain(|&i| {
            a.crash_state.is_empty() || entry_states[i].iter().any(|s| a.crash_state.contains(s))
        });
        if chosen.is_empty() {
            return Err(
                "no subject is left to sweep: the names and --crash-state exclude every one".into(),
            );
        }
        let as_registered = a.subjects.is_empty()
            && a.crash_state.is_empty()
            && a.flags.depth.is_none()
            && a.flags.partition.is_none();
        let rerun = |i: usize, sc: &Scenario| {
            let name = chosen
                .get(i)
                .map_or_else(String::new, |&j| slugs[j].clone());
            self.rerun_command(&name, sc)
        };
        let plan = Plan {
            subjects: chosen.iter().map(|&i| &*self.entries[i].subject).collect(),
            snapshot: self.snapshot.clone().filter(|_| as_registered),
            required: Vec::new(),
            crash_states: asked,
            default_depth: 2,
            rerun: &rerun,
        };
        Ok(execute(&plan, &a.flags, env, out, err))
    }

    fn rerun_command(&self, slug: &str, sc: &Scenario) -> String {
        format!("{} {slug} --scenario \"{sc}\"", self.command)
    }
}

/// [`App`] over `subjects`, in one call: `sweep::cli::main("cargo run --", vec![Box::new(a), Box::new(b)])`.
pub fn main(command: &str, subjects: Vec<Box<dyn DynSubject>>) -> ExitCode {
    let mut app = App::new(command);
    for s in subjects {
        app.entries.push(Entry {
            subject: s,
            label: None,
        });
    }
    app.main()
}

#[cfg(test)]
mod tests {
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
        assert_eq!(c.scenario_timeout, Some(crate::DEFAULT_SCENARIO_TIMEOUT));
        assert_eq!(c.max_scenarios, crate::DEFAULT_MAX_SCENARIOS);
        assert!(c.share);
        assert!(c.tally);
        assert!(c.required.is_empty());
        let none = sweep_config(&plan(&[]), &flags(&["--scenario-timeout", "0"]));
        assert_eq!(none.scenario_timeout, None);
    }

    #[test]
    fn slugs_join_words_with_one_dash_and_no_dash_at_either_end() {
        assert_eq!(slug("Hasty  transfer!"), "hasty-transfer");
        assert_eq!(slug("(keys) + markers"), "keys-markers");
        assert_eq!(slug("lose: posting#2"), "lose-posting-2");
        assert_eq!(slug("--"), "");
    }
}
