//! `triage`: run a recorded triage job as a durable agent run, kill it on
//! purpose, and resume it.
//!
//! ```text
//! cargo run -p triage -- --task m1-done-after-delete --state /tmp/triage-state --die-after code_patch
//! cargo run -p triage -- --task m1-done-after-delete --state /tmp/triage-state --approve off
//! ```
//!
//! The first command replays the task's recorded model replies against real
//! parts under `--state`: the checkpoint store of the `durable` crate, a
//! file-backed tracker and a workspace directory. It sends itself SIGKILL
//! right after the first `code_patch` returns, before the result is saved.
//! The second finds the run, resumes it, settles the patch on the resolution
//! ladder (the lookup finds it in the workspace), finishes the replay and
//! prints which of the task's checks passed. SIGTERM or SIGINT stops a run
//! at its next step, after the save that records where it stopped (exit 6);
//! rerunning the command continues it. Once the run is done, the same
//! command prints its saved answer and checks and calls nothing;
//! `--new-run` starts the task again. See `crates/triage/README.md`.
//!
//! With `--store sqlite:PATH` or `--store postgres://…` the runs'
//! checkpoints live in a database under a lease instead, and `triage
//! enqueue` / `triage worker` let several processes, on several machines,
//! share the runs (see [`stored`]).

mod adopt;
mod checks;
mod exit;
mod faults;
mod files;
mod live;
mod output;
mod remote;
mod run;
mod select;
mod shell;
mod shutdown;
mod stored;
mod task;
mod worker;
mod world;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::output::Printer;

/// Whether gated calls wait for a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Approve {
    /// Ask at the terminal before gated calls and on the ladder's last step;
    /// without a terminal, a gated call pauses the run (exit 4).
    On,
    /// Approve gated calls without asking; never block. A ladder question
    /// still pauses the run rather than guess.
    Off,
}

/// Run a triage job as a durable agent run, live or from a recording; kill
/// it on purpose; resume it.
///
/// Runs a task against real parts under --state DIR: the run's checkpoint
/// DIR/RUN.json (0600) and its lock, and the run's world DIR/RUN.world/ (a
/// file-backed tracker that honours idempotency keys, and the workspace
/// code_patch writes in). With OPENAI_API_KEY (or ANTHROPIC_API_KEY) set,
/// the replies come from a live model; without a key, from the task's
/// recording (see "Live mode" below). Without --run, resumes the task's one
/// unfinished run in DIR (a run killed before its first save included, under
/// its own ID); if the task has none, reports its most recent finished run
/// (its saved answer and checks, calling nothing, exiting 0 or 1 as it did);
/// with no run of the task in DIR, or with --new-run, starts a new one.
///
/// With --store sqlite:PATH or --store postgres://… the checkpoints live in
/// that database under a lease (--lease-secs) instead, effects go to the
/// tracker service (--tracker), and each run's world stays in --state DIR,
/// which every process on the store must share; `triage enqueue` queues
/// runs and `triage worker` runs them (see "Many machines" below).
#[derive(Clone, Debug, Parser)]
#[command(
    name = "triage",
    version,
    after_help = live::after_help(),
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// The recorded task to run (see --list-tasks).
    #[arg(long, value_name = "NAME", required_unless_present_any = ["list_tasks", "run"])]
    pub task: Option<String>,

    /// The state directory (created if missing): checkpoints, locks, and
    /// each run's tracker and workspace. With a database --store, the
    /// directory of the runs' worlds only (task copy, workspace), which
    /// every process on that store must share; for sqlite:PATH it defaults
    /// to PATH.worlds.
    #[arg(long, value_name = "DIR", required_unless_present_any = ["list_tasks", "store"])]
    pub state: Option<PathBuf>,

    /// Where the runs' checkpoints live: a directory (the same as --state
    /// DIR), sqlite:PATH (one host), or postgres://… / postgresql://… (many
    /// hosts; libpq's URL form, e.g. postgresql:///runs?host=/run/postgresql
    /// for a Unix socket). A database store needs --tracker.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,

    /// With a database --store: how long a claim on a run lasts without
    /// being renewed. A running triage renews it every third of that; a
    /// process stopped longer (paused, frozen) loses the run to the next
    /// claimer, and is fenced when it wakes: its saves and its tracker
    /// calls are refused, and it exits 3.
    #[arg(long, value_name = "N", default_value_t = stored::DEFAULT_LEASE_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease_secs: u64,

    /// Send this process SIGKILL right after a call of TOOL returns, before
    /// its result is saved (the first such call of this life).
    #[arg(long, value_name = "TOOL")]
    pub die_after: Option<String>,

    /// For tests: send this process SIGTERM right after a call of TOOL
    /// returns (the first such call of this life), so the run stops after
    /// saving that call's result. Hidden from --help; see the README's
    /// testing section.
    #[arg(long, value_name = "TOOL", hide = true, conflicts_with = "die_after")]
    pub signal_after: Option<String>,

    /// Whether gated calls (filing an issue) wait for a person's yes.
    #[arg(long, value_enum, value_name = "on|off", default_value = "on")]
    pub approve: Approve,

    /// Resume (or report, if done) this run instead of the task's one
    /// unfinished run.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,

    /// Start a new run of the task even though it has a finished run here
    /// (without it, the same command reports the finished run and calls
    /// nothing). Refused while the task has an unfinished run.
    #[arg(long, requires = "task", conflicts_with = "run")]
    pub new_run: bool,

    /// Print one JSON object per line instead of readable lines.
    #[arg(long)]
    pub json: bool,

    /// Print the recorded tasks, one a line, name first, and exit.
    #[arg(long, conflicts_with_all = ["task", "state", "store", "die_after", "signal_after", "run", "new_run", "tracker"])]
    pub list_tasks: bool,

    /// Read task files from DIR/*.json instead of the built-in tasks.
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,

    /// Live mode: the model to ask (default $OPENAI_MODEL, else
    /// gpt-4o-mini; with ANTHROPIC_API_KEY, $ANTHROPIC_MODEL, else
    /// claude-sonnet-4-20250514). Ignored when replaying.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// Write the run's replies to FILE: the task's fields plus the replies
    /// (text, calls with IDs and arguments, usage) in the transcript format,
    /// so `--tasks DIR` replays it and the loop's sweep reads it. A resumed
    /// run continues the file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Live mode: model prices in dollars per million tokens, added to the
    /// built-in table, for the dollars the run reports and limits.
    #[arg(long, value_name = "MODEL=IN/OUT,...")]
    pub price: Option<String>,

    /// For tests: send this process SIGKILL right after model reply N (the
    /// turn, 1-based) arrives, before it is saved. Hidden from --help.
    #[arg(long, value_name = "N", hide = true)]
    pub die_after_reply: Option<u32>,

    /// Send the tracker tools' requests to the tracker service at URL
    /// (started with `cargo run -p tracker -- serve`) instead of the run's
    /// own tracker file; each call's idempotency key goes in the
    /// Idempotency-Key header. Give each run a fresh service: the task's
    /// seed issues are filed there when the run starts, and its checks count
    /// the service's records. Pass it again to resume the run.
    #[arg(long, value_name = "URL")]
    pub tracker: Option<String>,

    /// `enqueue` or `worker` (see their --help).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The commands for a pool of workers on one database store.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Queue a new run of a task on a database store, for `triage worker`:
    /// builds the run's world in --state DIR, records --tracker URL in it,
    /// adds the run to the store, and prints its ID.
    Enqueue(Enqueue),
    /// Claim queued runs on a store and run each to its end, one at a
    /// time, until no runnable run is left; then exit.
    Worker(Worker),
}

/// `triage enqueue`.
#[derive(Clone, Debug, Args)]
pub struct Enqueue {
    /// The database store: sqlite:PATH or postgres://… (see triage --help).
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The worlds' directory, shared by every worker (default for
    /// sqlite:PATH: PATH.worlds).
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// The recorded task to queue (see triage --list-tasks).
    #[arg(long, value_name = "NAME")]
    pub task: String,
    /// Read task files from DIR/*.json instead of the built-in tasks.
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,
    /// The tracker service the run's tools send to (required).
    #[arg(long, value_name = "URL")]
    pub tracker: Option<String>,
    /// Queue this many runs of the task (each its own run and world).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub count: u32,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// `triage worker`.
#[derive(Clone, Debug, Args)]
pub struct Worker {
    /// The database store: sqlite:PATH or postgres://… (see triage --help).
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The worlds' directory, shared by every worker (default for
    /// sqlite:PATH: PATH.worlds).
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// How long a claim lasts without renewal (see triage --help).
    #[arg(long, value_name = "N", default_value_t = stored::DEFAULT_LEASE_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease_secs: u64,
    /// Whether gated calls wait for a person. A worker has no terminal: with
    /// on, a gated call pauses its run, which the worker keeps held until it
    /// exits (4) and a person resumes with `triage --store URL --run ID`.
    #[arg(long, value_enum, value_name = "on|off", default_value = "on")]
    pub approve: Approve,
    /// Stop after this many runs (default: until none is left).
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u32>,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Some(Command::Enqueue(e)) => e.json,
        Some(Command::Worker(w)) => w.json,
        None => cli.json,
    };
    let printer = Arc::new(Mutex::new(Printer::new(json)));
    // The environment is input too: refused before anything is made.
    let result = run::input::check_env().and_then(|()| match &cli.command {
        Some(Command::Enqueue(e)) => worker::enqueue(e, &printer),
        Some(Command::Worker(w)) => worker::work(w, &printer),
        None => run::execute(&cli, &printer),
    });
    match result {
        Ok(exit) => exit.into(),
        Err(failure) => {
            output::lock(&printer).failure(&failure);
            failure.exit.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed_and_help_lists_exit_codes() {
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:"), "{help}");
        assert!(
            help.contains("3    the run is locked by another process"),
            "{help}"
        );
        for text in [
            "Live mode:",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "--model <NAME>",
            "--record <FILE>",
            "--new-run",
            "--store <URL>",
            "--lease-secs <N>",
            "Many machines:",
            "triage worker --store URL",
        ] {
            assert!(help.contains(text), "{text:?} not in --help:\n{help}");
        }
        assert!(!help.contains("--die-after-reply"), "a hidden test option");
    }

    #[test]
    fn task_and_state_are_required_unless_listing() {
        assert!(Cli::try_parse_from(["triage", "--list-tasks"]).is_ok());
        assert!(Cli::try_parse_from(["triage", "--task", "x"]).is_err());
        assert!(Cli::try_parse_from(["triage", "--state", "d"]).is_err());
        assert!(Cli::try_parse_from(["triage", "--state", "d", "--run", "r"]).is_ok());
        assert!(Cli::try_parse_from([
            "triage",
            "--task",
            "x",
            "--state",
            "d",
            "--approve",
            "maybe"
        ])
        .is_err());
        assert!(Cli::try_parse_from(["triage", "--list-tasks", "--task", "x"]).is_err());
        let new_run = ["triage", "--task", "x", "--state", "d", "--new-run"];
        assert!(Cli::try_parse_from(new_run).is_ok());
        assert!(
            Cli::try_parse_from(["triage", "--state", "d", "--run", "r", "--new-run"]).is_err()
        );
        assert!(Cli::try_parse_from([&new_run[..], &["--run", "r"]].concat()).is_err());
    }

    #[test]
    fn store_options_and_subcommands_parse() {
        let cli = Cli::try_parse_from(["triage", "--store", "sqlite:r.db", "--task", "x"]).unwrap();
        assert_eq!(cli.store.as_deref(), Some("sqlite:r.db"));
        assert_eq!(cli.lease_secs, stored::DEFAULT_LEASE_SECS);
        for bad in ["0", "86401", "x"] {
            let args = ["triage", "--store", "s", "--task", "x", "--lease-secs", bad];
            assert!(Cli::try_parse_from(args).is_err(), "--lease-secs {bad}");
        }
        let w = Cli::try_parse_from(["triage", "worker", "--store", "sqlite:r.db"]).unwrap();
        let Some(Command::Worker(w)) = w.command else {
            panic!("a worker")
        };
        assert_eq!((w.approve, w.lease_secs), (Approve::On, 30));
        let e = [
            "triage",
            "enqueue",
            "--store",
            "s",
            "--task",
            "x",
            "--tracker",
            "u",
        ];
        assert!(matches!(
            Cli::try_parse_from(e).unwrap().command,
            Some(Command::Enqueue(_))
        ));
        // The run's own options do not mix with a subcommand.
        assert!(Cli::try_parse_from(["triage", "--state", "d", "worker", "--store", "s"]).is_err());
        assert!(
            Cli::try_parse_from(["triage", "worker"]).is_err(),
            "--store is required"
        );
    }
}
