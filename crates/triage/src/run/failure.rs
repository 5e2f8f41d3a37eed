//! How a run that did not finish ends: the loop's error mapped to the
//! command's failure, with a hint that says what to run next.

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use durable::RunId;

use super::Shared;
use crate::exit::{Exit, Failure};
use crate::output::{self, PauseCause};
use crate::shell::{invocation, shell_quote};
use crate::shutdown::Shutdown;
use crate::{Approve, Cli};

/// Map the loop's error to the command's failure.
pub(crate) fn loop_failure(
    e: agent::Error,
    run: &RunId,
    task: &str,
    cli: &Cli,
    shutdown: &Shutdown,
    printer: &Shared,
) -> Failure {
    use agent::Error as E;
    match e {
        E::Checkpoint(e @ durable::Error::MaxResumes { .. }) => {
            Failure::from(e).hint(max_resumes_hint(&state_arg(cli), run, task))
        }
        E::Checkpoint(e) => Failure::from(e),
        E::Paused { waiting } => paused(&waiting, run, cli, printer),
        E::Model { .. } => Failure::run("model", e.to_string()),
        E::TurnLimit { .. } | E::TokenLimit { .. } | E::DollarLimit { .. } => {
            Failure::run("limit", e.to_string())
        }
        E::OutcomeUnknown { .. } => Failure::run("outcome_unknown", e.to_string()),
        E::UnknownTool { .. } => Failure::run("unknown_tool", e.to_string()),
        E::ToolFatal { .. } if e.to_string().contains("changed behind the run's back") => {
            Failure::run("workspace_changed", e.to_string()).hint(
                "the run stopped before acting on it; put the file back as it was (or remove \
                 the run's world and start the task again), then rerun",
            )
        }
        E::ToolFatal { .. } => Failure::run("tool_refused", e.to_string()),
        // The tracker has seen a newer holder of this run: like a fenced
        // save, this process stops and leaves the run to it.
        E::Stale { .. } => Failure::new(Exit::Locked, "stale_holder", e.to_string())
            .hint("another process holds the run now and finishes it; this one did nothing more"),
        E::BadCallId { .. } => Failure::run("bad_call_id", e.to_string()),
        E::Cancelled { phase } => Failure::new(
            Exit::Stopped,
            "stopped",
            format!(
                "run {run} stopped by {} in phase {phase} after saving; run the same command again to continue",
                shutdown.cause()
            ),
        )
        .hint(format!("or continue it by its ID: {}", rerun_command(cli, run, None))),
    }
}

/// The failure of a run paused for a person: why it waits, and the command
/// that goes on (at a terminal when a question is to be asked).
fn paused(waiting: &[String], run: &RunId, cli: &Cli, printer: &Shared) -> Failure {
    let cause = output::lock(printer).pause.clone();
    let rerun = rerun_command(cli, run, None);
    let (why, hint) = match cause {
        Some(PauseCause::Approval { tool, call }) => {
            if cli.approve == Approve::On && !io::stdin().is_terminal() {
                (
                    format!("{tool} call {call} needs a person's approval, and stdin is not a terminal to ask at"),
                    format!(
                        "rerun at a terminal to be asked, or approve gated calls with --approve off: {}",
                        rerun_command(cli, run, Some("off"))
                    ),
                )
            } else {
                (
                    format!("{tool} call {call} waits for a person's approval"),
                    format!("rerun to be asked again: {rerun}"),
                )
            }
        }
        Some(PauseCause::Question { tool, call, why }) => (
            format!("{tool} call {call} may have acted before the run stopped; {why}; only a person can say whether it did"),
            format!(
                "rerun at a terminal with --approve on to answer: {}",
                rerun_command(cli, run, Some("on"))
            ),
        ),
        None => (
            format!("waiting on a person for {}", waiting.join(", ")),
            format!("rerun to continue: {rerun}"),
        ),
    };
    Failure::new(
        Exit::Paused,
        "paused",
        format!("run {run} is paused (phase paused, saved): {why}"),
    )
    .hint(hint)
}

/// The command that continues this run, for hints.
fn rerun_command(cli: &Cli, run: &RunId, approve: Option<&str>) -> String {
    let approve = approve.unwrap_or(match cli.approve {
        Approve::On => "on",
        Approve::Off => "off",
    });
    let tracker = cli
        .tracker
        .as_ref()
        .map_or_else(String::new, |url| format!(" --tracker {url}"));
    match &cli.store {
        // A run on a database store records its tracker.
        Some(store) => format!(
            "{} --store {}{} --run {run} --approve {approve}",
            invocation(),
            shell_quote(store),
            cli.state.as_ref().map_or_else(String::new, |s| format!(
                " --state {}",
                shell_quote(&s.to_string_lossy())
            )),
        ),
        None => format!(
            "{} --state {} --run {run} --approve {approve}{tracker}",
            invocation(),
            state_arg(cli)
        ),
    }
}

/// `--state`'s value, quoted for a shell.
fn state_arg(cli: &Cli) -> String {
    let state = cli.state.as_ref().map_or_else(PathBuf::new, PathBuf::clone);
    shell_quote(&state.to_string_lossy())
}

/// What the restart limit's error says to do: where to look, and the
/// options.
fn max_resumes_hint(state: &str, run: &RunId, task: &str) -> String {
    format!(
        "the run stops for good rather than restart again. Look at it: its checkpoint \
         {state}/{run}.json (phase, turns, calls, restarts) and its world {state}/{run}.world/ \
         (tracker.json, workspace/). Options: find out why it keeps stopping (each restart \
         follows a kill, a crash, a pause or a signal) and fix that; then keep the run as \
         a record, or start the task over as a new run in a fresh world: move both away \
         and run `{} --task {} --state {state}` (what this run did stays in its own world)",
        invocation(),
        shell_quote(task),
    )
}
