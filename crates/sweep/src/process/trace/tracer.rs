//! The tracer thread of one life: it starts the program (so it is the
//! program's tracer: ptrace requests must come from that thread), then
//! waits for its stops until every process of the tree is gone. At each
//! seccomp stop it names the call; a call on the world or a peer goes to
//! the life's thread as an event, and the tracee stays stopped until the
//! answer: go on, or die there (`SIGKILL` before the call runs).
//!
//! It waits with `__WALL | __WNOTHREAD`: for its own children and tracees
//! only, never for a process another thread of the harness started.

use std::collections::HashSet;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::call::{decode, Names, Regs};
use super::filter;
use super::select::IoPoints;
use super::Event;

/// The processes and threads of a traced tree, for whoever kills it.
#[derive(Clone, Debug, Default)]
pub(super) struct Tree(Arc<Mutex<HashSet<i32>>>);

impl Tree {
    fn insert(&self, pid: i32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
    }

    fn remove(&self, pid: i32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
    }

    /// `SIGKILL` to every process and thread of the tree.
    pub(super) fn kill_all(&self) {
        let pids = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for pid in pids.iter() {
            // SAFETY: kill(2) on a tracee of ours, not yet reaped (reaping
            // removes it from the set under this lock).
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
    }
}

/// Why a program cannot be traced, from the error of its start.
pub(super) fn refusal(e: &std::io::Error) -> String {
    if e.raw_os_error() != Some(libc::EPERM) {
        return format!("the tracer could not start the program: {e}");
    }
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    refusal_for(scope)
}

/// The refusal's words for a Yama `ptrace_scope` (`None`: no Yama).
pub(super) fn refusal_for(scope: Option<u32>) -> String {
    let head = "I/O points need ptrace, and ptrace is not allowed here (EPERM)";
    match scope {
        Some(3) => format!(
            "{head}: kernel.yama.ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope), \
             which forbids every process to trace another until the next reboot; \
             sweep without --io-points, or on a machine where it is 0 or 1"
        ),
        Some(2) => format!(
            "{head}: kernel.yama.ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope), \
             which allows ptrace only with CAP_SYS_PTRACE; \
             set it to 1 (`sysctl kernel.yama.ptrace_scope=1`) or give the harness CAP_SYS_PTRACE"
        ),
        _ => format!(
            "{head}: a seccomp profile (a container's) or a security module forbids the ptrace \
             system call; run the container with `--cap-add SYS_PTRACE` or a seccomp profile \
             that allows ptrace"
        ),
    }
}

/// Between fork and exec: become the tracee of the forking thread, then
/// install the filter. `EPERM` from `PTRACE_TRACEME` is ptrace refused;
/// the filter's errors come back as `EINVAL`-like codes.
fn arm(cmd: &mut Command, prog: filter::Prog) {
    // SAFETY: ptrace(PTRACE_TRACEME), prctl and seccomp are plain system
    // calls, async-signal-safe; nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            match filter::install(&prog) {
                // EPERM is ptrace's: the filter's refusal is told apart.
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    Err(std::io::Error::from_raw_os_error(libc::EACCES))
                }
                other => other,
            }
        });
    }
}

/// Start `cmd` traced on a thread of its own. Its pid, or why it could not
/// start; events go to `events` until the tree is gone (the last is
/// [`Event::Exited`] or [`Event::Failed`]).
pub(super) fn start(
    mut cmd: Command,
    keep_until_spawned: impl Send + 'static,
    io: Arc<IoPoints>,
    names: Names,
    events: Sender<Event>,
    tree: Tree,
) -> Result<u32, String> {
    let prog = filter::program()?;
    arm(&mut cmd, prog);
    let (started_tx, started_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("crashsweep-tracer".into())
        .spawn(move || {
            let child = cmd.spawn();
            drop(keep_until_spawned);
            let pid = match child {
                Ok(c) => c.id(),
                Err(e) => {
                    let _ = started_tx.send(Err(refusal(&e)));
                    return;
                }
            };
            tree.insert(pid as i32);
            let _ = started_tx.send(Ok(pid));
            let end = match run(Pid::from_raw(pid as i32), &io, &names, &events, &tree) {
                Ok(status) => Event::Exited(status),
                Err(why) => {
                    tree.kill_all();
                    // Reap what is left, so nothing outlives the life.
                    while waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD))
                        .is_ok()
                    {}
                    Event::Failed(why)
                }
            };
            let _ = events.send(end);
        })
        .map_err(|e| format!("the tracer thread could not start: {e}"))?;
    started_rx
        .recv()
        .map_err(|_| "the tracer thread ended before the program started".to_owned())?
}

/// Resume `pid` (a vanished tracee is no error: it was killed).
fn resume(pid: Pid, sig: Option<Signal>) -> Result<(), String> {
    match ptrace::cont(pid, sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(format!("ptrace(PTRACE_CONT, {pid}): {e}")),
    }
}

/// The waitpid loop: until every tracee is gone; the main process's exit
/// status.
fn run(
    main: Pid,
    io: &IoPoints,
    names: &Names,
    events: &Sender<Event>,
    tree: &Tree,
) -> Result<ExitStatus, String> {
    let flags = Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD);
    // The stop at exec (PTRACE_TRACEME's SIGTRAP): set the options there.
    match waitpid(main, flags) {
        Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => {}
        Ok(other) => return Err(format!("the program did not stop at its exec: {other:?}")),
        Err(e) => return Err(format!("waitpid: {e}")),
    }
    ptrace::setoptions(
        main,
        Options::PTRACE_O_TRACESECCOMP
            | Options::PTRACE_O_TRACECLONE
            | Options::PTRACE_O_TRACEFORK
            | Options::PTRACE_O_TRACEVFORK
            | Options::PTRACE_O_TRACEEXEC
            | Options::PTRACE_O_EXITKILL,
    )
    .map_err(|e| format!("ptrace(PTRACE_SETOPTIONS): {e}"))?;
    resume(main, None)?;
    let mut known: HashSet<Pid> = HashSet::from([main]);
    // Tracees announced by an event whose first stop is still to come.
    let mut fresh: HashSet<Pid> = HashSet::new();
    let mut status: Option<ExitStatus> = None;
    // Once the main process is gone (or the life decided to crash), every
    // tracee left is killed at its next stop.
    let mut ending = false;
    loop {
        let ws = match waitpid(None, flags) {
            Ok(ws) => ws,
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => return Err(format!("waitpid: {e}")),
        };
        match ws {
            WaitStatus::Exited(pid, code) => {
                known.remove(&pid);
                tree.remove(pid.as_raw());
                if pid == main {
                    status = Some(ExitStatus::from_raw((code & 0xff) << 8));
                    ending = true;
                    tree.kill_all();
                }
            }
            WaitStatus::Signaled(pid, sig, core) => {
                known.remove(&pid);
                tree.remove(pid.as_raw());
                if pid == main {
                    status = Some(ExitStatus::from_raw(sig as i32 | if core { 0x80 } else { 0 }));
                    ending = true;
                    tree.kill_all();
                }
            }
            WaitStatus::Stopped(pid, sig) => {
                if ending {
                    tree.insert(pid.as_raw());
                    tree.kill_all();
                    resume(pid, None)?;
                    continue;
                }
                if sig == Signal::SIGSTOP && (fresh.remove(&pid) || known.insert(pid)) {
                    // A new tracee's first stop.
                    tree.insert(pid.as_raw());
                    resume(pid, None)?;
                } else if ptrace::getsiginfo(pid).is_err() {
                    // A group stop: let it run on.
                    resume(pid, None)?;
                } else {
                    resume(pid, Some(sig))?;
                }
            }
            WaitStatus::PtraceEvent(pid, _, event) => {
                if ending {
                    tree.kill_all();
                    resume(pid, None)?;
                    continue;
                }
                match event {
                    libc::PTRACE_EVENT_SECCOMP => {
                        if !stop_at_call(pid, io, names, events)? {
                            ending = true;
                            tree.kill_all();
                        }
                        resume(pid, None)?;
                    }
                    libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                        if let Ok(new) = ptrace::getevent(pid) {
                            let new = Pid::from_raw(new as i32);
                            if known.insert(new) {
                                fresh.insert(new);
                            }
                            tree.insert(new.as_raw());
                        }
                        resume(pid, None)?;
                    }
                    libc::PTRACE_EVENT_EXEC => {
                        // A thread that called exec takes the leader's id;
                        // its own id is gone without an exit.
                        if let Ok(former) = ptrace::getevent(pid) {
                            let former = Pid::from_raw(former as i32);
                            if former != pid {
                                known.remove(&former);
                                tree.remove(former.as_raw());
                            }
                        }
                        resume(pid, None)?;
                    }
                    _ => resume(pid, None)?,
                }
            }
            _ => {}
        }
    }
    status.ok_or_else(|| "the program's end was never seen".to_owned())
}

/// A seccomp stop: name the call; if it is an I/O point, ask the life.
/// `false`: the life crashes here (kill the tree before the call runs).
fn stop_at_call(
    pid: Pid,
    io: &IoPoints,
    names: &Names,
    events: &Sender<Event>,
) -> Result<bool, String> {
    let regs = match ptrace::getregs(pid) {
        Ok(r) => r,
        // Killed meanwhile.
        Err(Errno::ESRCH) => return Ok(true),
        Err(e) => return Err(format!("ptrace(PTRACE_GETREGS, {pid}): {e}")),
    };
    let regs = Regs {
        nr: regs.orig_rax as i64,
        args: [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9],
    };
    let Some(call) = decode(pid, &regs, names) else {
        return Ok(true);
    };
    let refs: Vec<&str> = call.targets.iter().map(String::as_str).collect();
    if !io.selects(call.op, &refs) {
        return Ok(true);
    }
    let (reply_tx, reply_rx): (Sender<bool>, Receiver<bool>) = mpsc::channel();
    let point = format!(
        "{} {}",
        call.op,
        call.targets
            .iter()
            .map(|t| io.masked(t))
            .collect::<Vec<_>>()
            .join("→")
    );
    let event = Event::Io {
        point,
        shown: call.shown,
        reply: reply_tx,
    };
    if events.send(event).is_err() {
        return Ok(false);
    }
    Ok(reply_rx.recv().unwrap_or(false))
}
