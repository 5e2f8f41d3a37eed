//! A child program of a process subject (a life's, a service's): killed
//! and reaped if the harness lets go of it while it runs, given the point
//! protocol's descriptor across exec, its command line and how it ended
//! told in words.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard};
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

/// The children running now (lives, services, a fork server), by process
/// id: what [`kill_running`] kills when the harness itself is stopped.
static CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn children() -> MutexGuard<'static, BTreeSet<u32>> {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Count `pid` among the children running now, until [`reaped`].
pub(super) fn started(pid: u32) {
    children().insert(pid);
}

/// `pid` was reaped: no longer one to kill.
pub(super) fn reaped(pid: u32) {
    children().remove(&pid);
}

/// The scratch directories made so far (worlds, copies, servers' worlds),
/// removed by a harness stopped by a signal: their `TempDir`s would
/// remove them when dropped, but the process exits without dropping them.
/// Pruned of removed ones as it grows.
static SCRATCH: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

/// A scratch directory was made at `path`.
pub(super) fn scratch_made(path: &std::path::Path) {
    let mut dirs = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    if dirs.len() >= 4096 && dirs.len().is_power_of_two() {
        dirs.retain(|d| d.exists());
    }
    dirs.push(path.to_path_buf());
}

/// Remove every scratch directory still there; how many there were.
fn remove_scratch() -> usize {
    let dirs = std::mem::take(&mut *SCRATCH.lock().unwrap_or_else(|e| e.into_inner()));
    dirs.iter()
        .filter(|d| std::fs::remove_dir_all(d).is_ok())
        .count()
}

/// `SIGKILL` to every child running now; how many there were. For a
/// harness stopped by a signal, so that no service or life outlives it.
pub(super) fn kill_running() -> usize {
    let pids: Vec<u32> = children().iter().copied().collect();
    for &pid in &pids {
        if let Ok(pid) = i32::try_from(pid) {
            // An error means it is gone already.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    pids.len()
}

/// Stop every child when the harness is stopped: `SIGINT`, `SIGTERM` and
/// `SIGHUP` are blocked in this thread (and the threads it starts after)
/// and waited for by a thread of their own, which kills the running
/// children (lives, services, the fork server) with `SIGKILL`, removes the
/// scratch directories (worlds and their copies), says so on
/// standard error, and ends the process with status 128 + the signal, as a
/// shell reports a death by that signal. Without it a service outlives a
/// harness stopped by `kill`, holding its port. Call it first in `main`,
/// before any thread starts; a child started by [`std::process::Command`]
/// gets an empty signal mask, so the programs see these signals as usual.
pub fn stop_children_on_signals() -> std::io::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block().map_err(std::io::Error::from)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Ok(sig) = set.wait() {
                let n = kill_running();
                let dirs = remove_scratch();
                eprintln!(
                    "crashsweep: stopped by {}; {n} running child process{} killed, \
                     {dirs} temporary director{} removed",
                    sig.as_str(),
                    if n == 1 { "" } else { "es" },
                    if dirs == 1 { "y" } else { "ies" }
                );
                std::process::exit(128 + sig as i32);
            }
        })?;
    Ok(())
}

impl Running {
    /// A child just started, counted among the running ones.
    pub(super) fn new(child: Kid, shown: &str) -> Running {
        started(child.id());
        Running {
            child: Some(child),
            shown: shown.to_owned(),
        }
    }

    /// Wait for its end; if the scope is cancelled meanwhile (the time
    /// limit), kill it and stop the scope.
    pub(super) fn wait_or_stop(&mut self) -> std::io::Result<ExitStatus> {
        // A child is usually reaped within a millisecond of closing its
        // point descriptor: poll often at first, then every POLL / 4.
        let mut pause = Duration::from_micros(50);
        loop {
            let Some(c) = self.child.as_mut() else {
                return Err(std::io::Error::other("the child was reaped already"));
            };
            if let Some(status) = c.try_wait()? {
                reaped(c.id());
                self.child = None;
                return Ok(status);
            }
            if let Some(scope) = crashpoint::scope::current() {
                if scope.cancel_requested() {
                    self.kill()?;
                    scope.stop();
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL / 4);
        }
    }

    /// `SIGKILL`, then reap: its exit status.
    pub(super) fn kill(&mut self) -> std::io::Result<ExitStatus> {
        match self.child.take() {
            Some(mut c) => {
                let status = c.kill();
                reaped(c.id());
                status
            }
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
