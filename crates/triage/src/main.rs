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
mod task;
mod world;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Parser, ValueEnum};

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
#[derive(Debug, Parser)]
#[command(name = "triage", version, after_help = live::after_help())]
pub struct Cli {
    /// The recorded task to run (see --list-tasks).
    #[arg(long, value_name = "NAME", required_unless_present_any = ["list_tasks", "run"])]
    pub task: Option<String>,

    /// The state directory (created if missing): checkpoints, locks, and
    /// each run's tracker and workspace.
    #[arg(long, value_name = "DIR", required_unless_present = "list_tasks")]
    pub state: Option<PathBuf>,

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
    #[arg(long, conflicts_with_all = ["task", "state", "die_after", "signal_after", "run", "new_run", "tracker"])]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let printer = Arc::new(Mutex::new(Printer::new(cli.json)));
    match run::execute(&cli, &printer) {
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
}
