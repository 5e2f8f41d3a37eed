//! Exit codes, and the one error type every failure of the command becomes.
//!
//! Each way the command can end has its own code, so a script (or a test)
//! can tell "the run is held by another process" from "the run waits for a
//! person" from "the checkpoint is corrupt" without reading the message.

use std::fmt;
use std::process::ExitCode;

/// How the command ended. The numbers are part of the interface: they are
/// printed by `--help` ([`EXIT_CODES_HELP`]) and documented in the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The run is done and every check of the task's catalog passed (or
    /// `--list-tasks` printed the tasks).
    Done,
    /// The run is done but at least one check failed.
    ChecksFailed,
    /// Bad input: bad arguments, unknown task or tool, a bad `--state`, an
    /// invalid or unknown run ID, several unfinished runs to choose from,
    /// `--new-run` while the task has an unfinished run.
    Usage,
    /// Another process holds the run's lock (or its lease, on a database
    /// store), or took the run over from this one (fenced, stale holder).
    Locked,
    /// The run is paused, waiting for a person (approval or a ladder
    /// question) and nobody could be asked; rerunning continues it.
    Paused,
    /// The run cannot go on: a corrupt checkpoint or world, a world whose
    /// checkpoint is lost, the restart limit, a changed workspace, a failing
    /// model or tool, an I/O error.
    RunError,
    /// SIGTERM or SIGINT stopped the run at its next step, after the save
    /// that records where it stopped; rerunning continues it.
    Stopped,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::ChecksFailed => 1,
            Exit::Usage => 2,
            Exit::Locked => 3,
            Exit::Paused => 4,
            Exit::RunError => 5,
            Exit::Stopped => 6,
        }
    }

    /// A short machine name, used in `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::ChecksFailed => "checks_failed",
            Exit::Usage => "usage",
            Exit::Locked => "locked",
            Exit::Paused => "paused",
            Exit::RunError => "run_error",
            Exit::Stopped => "stopped",
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The exit codes as `--help` shows them.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    the run is done and every check of the task's catalog passed
  1    the run is done but some checks failed
  2    bad input: arguments, unknown task or tool, bad --state, invalid or
       unknown run ID, more than one unfinished run (pick one with --run),
       --new-run while the task has an unfinished run
  3    the run is locked by another process (on a database store: another
       process holds its lease); or this process was fenced: it lost the
       run to a newer holder (it was stopped past its lease, say), so its
       saves and its tracker calls are refused and it did nothing more
  4    the run is paused waiting for a person (a gated call and no terminal
       to ask at, an answer of 'later', or a ladder question only a person
       can answer); rerun to continue
  5    the run cannot go on: corrupt checkpoint or world, a world whose
       checkpoint is lost (never removed or started afresh), restart limit,
       workspace changed, model or tool failure, I/O error
  6    stopped by SIGTERM or SIGINT at the run's next step, after the save
       that records where it stopped; run the same command again to
       continue (a second signal while stopping kills the process; a
       signal during a terminal prompt takes effect after the answer)
  137  (from the shell) the process killed itself with --die-after";

/// Why the command stopped without finishing a run: a message for a person,
/// a kind for machines, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// A short machine name of what went wrong (`unknown_task`, `locked`, …).
    pub kind: &'static str,
    /// The message, naming the file or value at fault.
    pub message: String,
    /// What to do about it, if there is something to say.
    pub hint: Option<String>,
}

impl Failure {
    /// A failure with exit code `exit`.
    pub fn new(exit: Exit, kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            kind,
            message: message.into(),
            hint: None,
        }
    }

    /// Bad input (exit 2).
    pub fn usage(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure::new(Exit::Usage, kind, message)
    }

    /// The run cannot go on (exit 5).
    pub fn run(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure::new(Exit::RunError, kind, message)
    }

    /// Add advice on what to do.
    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<durable::Error> for Failure {
    /// The checkpoint store's typed errors, each with its exit code.
    fn from(e: durable::Error) -> Failure {
        use durable::Error as E;
        let message = e.to_string();
        match e {
            E::Locked { .. } => Failure::new(Exit::Locked, "locked", message).hint(
                "another triage is running this run; wait for it to finish or stop it, then rerun",
            ),
            E::MaxResumes { .. } => Failure::run("max_resumes", message),
            E::WorkspaceChanged { .. } => Failure::run("workspace_changed", message).hint(
                "someone changed a file the run wrote; the run stops rather than reason about \
                 code its conversation does not describe",
            ),
            E::Corrupt { .. } => Failure::run("corrupt_checkpoint", message)
                .hint("the file was left as it is; inspect or move it away"),
            E::Truncated { .. } => Failure::run("corrupt_checkpoint", message)
                .hint("the file was left as it is; inspect or move it away"),
            E::UnsupportedVersion { .. } => Failure::run("unsupported_checkpoint", message),
            E::InvalidRunId { .. } => Failure::usage("invalid_run_id", message),
            E::InvalidState { .. } => Failure::run("invalid_state", message),
            E::Io { .. } => Failure::run("io", message),
            // A newer holder took the run over (this process lost its lock
            // or outlived its lease): this one stops and leaves it, like a
            // locked run.
            E::Fenced {
                path,
                ours,
                on_disk,
            } => {
                // durable's message speaks of the checkpoint file on disk;
                // on a database store the epoch is the store's row's.
                let shown = path.to_string_lossy();
                let message = if shown.starts_with("sqlite:") || shown.starts_with("postgres") {
                    format!(
                        "run was opened by a newer holder (epoch {on_disk} in the store, {ours} \
                         here); this process must stop: {shown}"
                    )
                } else {
                    message
                };
                Failure::new(Exit::Locked, "fenced", message).hint(
                    "another process took this run over and holds it now; this one wrote nothing \
                 more and called nothing more",
                )
            }
            E::LockReplaced { .. } => Failure::new(Exit::Locked, "lock_replaced", message),
            E::NotRegularFile { .. } => Failure::run("not_a_file", message),
            E::TooLarge { .. } => Failure::run("too_large", message),
            E::UnknownField { .. } => Failure::run("unknown_field", message),
            E::Leased { .. } => Failure::new(Exit::Locked, "leased", message).hint(
                "another worker holds this run's lease; wait for it to finish or for the lease \
                 to expire, then rerun",
            ),
            E::Finished { .. } => Failure::run("finished", message),
            E::Store { .. } if message.contains("database is locked") => {
                Failure::run("store", message).hint(
                    "another process holds the database (a triage or worker in a long write, or \
                     an sqlite3 shell with a transaction open) longer than the busy timeout; \
                     wait for it or end it, then rerun",
                )
            }
            E::Store { .. } | E::InsideAsyncRuntime { .. } => Failure::run("store", message),
        }
    }
}

impl From<tracker::TrackerError> for Failure {
    fn from(e: tracker::TrackerError) -> Failure {
        let kind = match e {
            tracker::TrackerError::Corrupt { .. } => "corrupt_tracker",
            tracker::TrackerError::Missing { .. } => "world_incomplete",
            _ => "tracker",
        };
        Failure::run(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_say_what_to_do() {
        let locked = Failure::from(durable::Error::Store {
            path: "sqlite:/tmp/r.db#m1-x".into(),
            op: "claim",
            source: "database is locked".into(),
        });
        let hint = locked.hint.unwrap_or_default();
        assert!(
            hint.contains("another process holds the database"),
            "{hint}"
        );
        let fenced = |path: &str| {
            Failure::from(durable::Error::Fenced {
                path: path.into(),
                ours: 1,
                on_disk: 2,
            })
            .message
        };
        assert!(fenced("postgres://u@h/db#m1-x").contains("epoch 2 in the store, 1 here"));
        assert!(fenced("sqlite:/tmp/r.db#m1-x").contains("epoch 2 in the store, 1 here"));
        assert!(fenced("/tmp/state/m1-x.json").contains("epoch 2 on disk, 1 here"));
    }

    #[test]
    fn codes_are_distinct_and_documented() {
        let all = [
            Exit::Done,
            Exit::ChecksFailed,
            Exit::Usage,
            Exit::Locked,
            Exit::Paused,
            Exit::RunError,
            Exit::Stopped,
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.code(), b.code(), "{a:?} and {b:?}");
                assert_ne!(a.name(), b.name());
            }
            let line = format!("\n  {}    ", a.code());
            assert!(EXIT_CODES_HELP.contains(&line), "{a:?} is not in the help");
        }
    }
}
