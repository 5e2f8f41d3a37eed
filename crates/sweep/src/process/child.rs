//! A child program of a process subject (a life's, a service's): killed
//! and reaped if the harness lets go of it while it runs, given the point
//! protocol's descriptor across exec, its command line and how it ended
//! told in words.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use super::{DIE_AT_VAR, FD_VAR, VERSION_VAR};

/// How often a life waiting for its program looks at the time limit.
pub(super) const POLL: Duration = Duration::from_millis(20);

/// A child process, killed and reaped if dropped while still running (a
/// panic between its start and its end).
#[derive(Debug)]
pub(super) struct Running {
    pub(super) child: Option<Kid>,
    pub(super) shown: String,
}

/// A child this process cannot wait for itself (a fork server's child):
/// its id, its end once known, and `SIGKILL` then its end.
pub(super) trait Reaped: std::fmt::Debug + Send {
    fn id(&self) -> u32;
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>>;
    fn kill(&mut self) -> std::io::Result<ExitStatus>;
}

/// A child started as a new process, or forked by a fork server.
#[derive(Debug)]
pub(super) enum Kid {
    Spawned(Child),
    Forked(Box<dyn Reaped>),
}

impl Kid {
    pub(super) fn id(&self) -> u32 {
        match self {
            Kid::Spawned(c) => c.id(),
            Kid::Forked(f) => f.id(),
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Kid::Spawned(c) => c.try_wait(),
            Kid::Forked(f) => f.try_wait(),
        }
    }

    fn kill(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Kid::Spawned(c) => {
                // An error means it has exited already; `wait` tells how.
                let _ = c.kill();
                c.wait()
            }
            Kid::Forked(f) => f.kill(),
        }
    }
}

/// Keep a harness's protocol variables out of `cmd`'s environment (the
/// judge, a service without swept points, a life before its own are set).
pub(super) fn without_protocol(cmd: &mut Command) -> &mut Command {
    cmd.env_remove(FD_VAR)
        .env_remove(VERSION_VAR)
        .env_remove(DIE_AT_VAR)
}

/// A descriptor the child gets as number 3 across exec, set up between
/// fork and exec.
pub(super) fn pass_fd(cmd: &mut Command, fd: i32) {
    const CHILD_FD: i32 = 3;
    // SAFETY: only dup2 and fcntl, which are async-signal-safe, between
    // fork and exec: the descriptor becomes number 3, open across exec
    // (dup2 clears close-on-exec on the copy; if it is 3 already, fcntl
    // clears it).
    unsafe {
        cmd.pre_exec(move || {
            let ok = if fd == CHILD_FD {
                libc::fcntl(CHILD_FD, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(fd, CHILD_FD) >= 0
            };
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

impl Running {
    /// Wait for its end; if the scope is cancelled meanwhile (the time
    /// limit), kill it and stop the scope.
    pub(super) fn wait_or_stop(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            let Some(c) = self.child.as_mut() else {
                return Err(std::io::Error::other("the child was reaped already"));
            };
            if let Some(status) = c.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if let Some(scope) = crashpoint::scope::current() {
                if scope.cancel_requested() {
                    self.kill()?;
                    scope.stop();
                }
            }
            std::thread::sleep(POLL / 4);
        }
    }

    /// `SIGKILL`, then reap: its exit status.
    pub(super) fn kill(&mut self) -> std::io::Result<ExitStatus> {
        match self.child.take() {
            Some(mut c) => c.kill(),
            None => Err(std::io::Error::other("the child was reaped already")),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// `exited with status 3`, `was killed by signal 9 (SIGKILL)`, `exited`.
pub(super) fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(0), _) => "exited with status 0".into(),
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) if s == libc::SIGKILL => "was killed by signal 9 (SIGKILL)".into(),
        (None, Some(s)) => format!("was killed by signal {s}"),
        (None, None) => "ended".into(),
    }
}

pub(super) fn show_argv(argv: &[OsString]) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| {
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
                format!("'{}'", s.replace('\'', r"'\''"))
            } else {
                s.into_owned()
            }
        })
        .collect();
    format!("`{}`", parts.join(" "))
}

/// The last lines of a program's standard error, for a failure message.
pub(super) fn tail(err: &str) -> String {
    let lines: Vec<&str> = err.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(5);
    format!("; its standard error ends: {}", lines[from..].join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_shown_as_a_shell_would_read_it() {
        let argv: Vec<OsString> = ["python3", "a b.py", "it's"]
            .iter()
            .map(Into::into)
            .collect();
        assert_eq!(show_argv(&argv), r#"`python3 'a b.py' 'it'\''s'`"#);
    }

    #[test]
    fn a_tail_is_the_last_five_lines() {
        assert_eq!(tail(""), "");
        let t = tail("1\n2\n3\n4\n5\n6\n");
        assert_eq!(t, "; its standard error ends: 2 | 3 | 4 | 5 | 6");
    }
}
