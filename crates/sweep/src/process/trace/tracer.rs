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
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::call::{decode, Names, Regs};
use super::filter;
use super::select::IoPoints;
use super::Event;

/// The processes and threads of a traced tree, for whoever kills it.
#[derive(Clone, Debug, Default)]
pub(super) struct Tree(Arc<Mutex<HashSet<i32>>>);

impl Tree {
    pub(super) fn insert(&self, pid: i32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
    }

    fn remove(&self, pid: i32) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
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

/// A pipe's two ends, close-on-exec, numbered 10 or more (clear of the
/// descriptors a life passes to its program by number).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills `fds`; each number is then owned once.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let raw = [OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])];
        let high = |fd: &OwnedFd| -> std::io::Result<OwnedFd> {
            let n = libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10);
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(OwnedFd::from_raw_fd(n))
            }
        };
        Ok((high(&raw[0])?, high(&raw[1])?))
    }
}

/// Between fork and exec, the child: tells the tracer its pid, waits until
/// it is seized (the tracer's options, `PTRACE_O_TRACESECCOMP` among them,
/// already set), then installs the filter. So the filter never meets a
/// child without its tracer (whose calls would fail with `ENOSYS`), and a
/// failed exec is traced like any other call. A refused seize comes back
/// from `spawn` as `EPERM`.
fn arm(cmd: &mut Command, prog: filter::Prog, pid_w: i32, pid_r: i32, go_r: i32, go_w: i32) {
    // SAFETY: close, getpid, write, read, prctl and seccomp are plain
    // system calls, async-signal-safe; nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            libc::close(pid_r);
            libc::close(go_w);
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_w, pid.as_ptr().cast(), 4) != 4 {
                return Err(std::io::Error::last_os_error());
            }
            let mut go = [0u8; 1];
            if libc::read(go_r, go.as_mut_ptr().cast(), 1) != 1 || go[0] != 1 {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            filter::install(&prog)
        });
    }
}

/// The program of one life, started traced.
pub(super) struct Started {
    /// Its pid.
    pub(super) pid: u32,
}

/// Start `cmd` traced: a tracer thread of its own seizes the child between
/// fork and exec, then waits for its stops; this thread spawns it. Events
/// go to `events` until the tree is gone (the last is [`Event::Exited`] or
/// [`Event::Failed`]). `Err`: why it could not start (the tracer is then
/// gone, and the child reaped).
pub(super) fn start(
    mut cmd: Command,
    keep_until_spawned: impl Send + 'static,
    io: Arc<IoPoints>,
    names: Names,
    events: Sender<Event>,
    tree: Tree,
) -> Result<Started, String> {
    let prog = filter::program()?;
    let (pid_r, pid_w) = pipe().map_err(|e| format!("a pipe: {e}"))?;
    let (go_r, go_w) = pipe().map_err(|e| format!("a pipe: {e}"))?;
    arm(
        &mut cmd,
        prog,
        pid_w.as_raw_fd(),
        pid_r.as_raw_fd(),
        go_r.as_raw_fd(),
        go_w.as_raw_fd(),
    );
    let (refused_tx, refused_rx) = mpsc::channel::<String>();
    let thread_tree = tree.clone();
    let tracer = std::thread::Builder::new()
        .name("crashsweep-tracer".into())
        .spawn(move || trace_child(pid_r, go_w, refused_tx, &io, &names, &events, &thread_tree))
        .map_err(|e| format!("the tracer thread could not start: {e}"))?;
    let child = cmd.spawn();
    drop(keep_until_spawned);
    drop(pid_w);
    drop(go_r);
    match child {
        Ok(c) => Ok(Started { pid: c.id() }),
        Err(e) => {
            // The tracer reaps a child that failed after it was seized; it
            // ends by itself either way.
            let _ = tracer.join();
            Err(refused_rx.try_recv().unwrap_or_else(|_| refusal(&e)))
        }
    }
}

/// The tracer's options: every seccomp stop, every thread and process the
/// tree makes, and its execs; the whole tree killed if the tracer goes.
pub(super) fn options() -> Options {
    Options::PTRACE_O_TRACESECCOMP
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_EXITKILL
}

/// The tracer thread's work: seize the child, trace it to its end, and
/// send that end as the last event.
fn trace_child(
    pid_r: OwnedFd,
    go_w: OwnedFd,
    refused: Sender<String>,
    io: &IoPoints,
    names: &Names,
    events: &Sender<Event>,
    tree: &Tree,
) {
    let Some(main) = seize_child(pid_r, go_w, &refused, tree) else {
        return;
    };
    trace_to_end(main, true, io, names, events, tree);
}

/// Trace the seized `main` to the end of its tree (from its exec, if
/// `exec`: a spawned child's) and send that end as the last event.
pub(super) fn trace_to_end(
    main: Pid,
    exec: bool,
    io: &IoPoints,
    names: &Names,
    events: &Sender<Event>,
    tree: &Tree,
) {
    let end = match run(main, exec, io, names, events, tree) {
        Ok(status) => Event::Exited(status),
        Err(why) => {
            tree.kill_all();
            // Reap what is left, so nothing outlives the life (but
            // a child whose exec failed: `spawn` reaps it).
            if why != EXEC_FAILED {
                while waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD)).is_ok() {}
            }
            Event::Failed(why)
        }
    };
    let _ = events.send(end);
}

/// Read the child's pid, seize it with the tracer's options, and tell it
/// to go on (or, refused, to fail its spawn). `None`: nothing to trace.
fn seize_child(
    pid_r: OwnedFd,
    go_w: OwnedFd,
    refused: &Sender<String>,
    tree: &Tree,
) -> Option<Pid> {
    let mut pid = [0u8; 4];
    let mut pid_r = std::fs::File::from(pid_r);
    let mut go_w = std::fs::File::from(go_w);
    // EOF: the spawn failed before the child could tell its pid.
    if pid_r.read_exact(&mut pid).is_err() {
        return None;
    }
    let main = Pid::from_raw(i32::from_ne_bytes(pid));
    if let Err(e) = ptrace::seize(main, options()) {
        let _ = refused.send(refusal(&std::io::Error::from_raw_os_error(e as i32)));
        let _ = go_w.write_all(&[0]);
        return None;
    }
    tree.insert(main.as_raw());
    if go_w.write_all(&[1]).is_err() {
        tree.kill_all();
    }
    drop(go_w);
    Some(main)
}

/// The tracer's word for a child whose exec failed (`spawn` says why).
const EXEC_FAILED: &str = "the program could not start (its exec failed)";

/// Resume `pid` (a vanished tracee is no error: it was killed).
fn resume(pid: Pid, sig: Option<Signal>) -> Result<(), String> {
    match ptrace::cont(pid, sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(format!("ptrace(PTRACE_CONT, {pid}): {e}")),
    }
}

/// The waitpid loop: until every tracee is gone; the main process's exit
/// status. `exec`: the main process was seized before its exec (a spawned
/// child), not running its program already (a forked life).
fn run(
    main: Pid,
    exec: bool,
    io: &IoPoints,
    names: &Names,
    events: &Sender<Event>,
    tree: &Tree,
) -> Result<ExitStatus, String> {
    let flags = Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD);
    if exec {
        until_exec(main, flags, tree)?;
    }
    let mut watch = Watch {
        main,
        io,
        names,
        events,
        tree,
        known: HashSet::from([main]),
        fresh: HashSet::new(),
        born: Born::default(),
        status: None,
        ending: false,
    };
    loop {
        let ws = match waitpid(None, flags) {
            Ok(ws) => ws,
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => return Err(format!("waitpid: {e}")),
        };
        watch.on_status(ws)?;
    }
    watch
        .status
        .ok_or_else(|| "the program's end was never seen".to_owned())
}

/// The main process, from its seize to its exec: its stops resumed.
/// Until its exec, the child belongs to `spawn` too: if the exec fails,
/// the child exits, and `spawn` must reap it (it panics otherwise). So
/// its end is only looked at (WNOWAIT), never reaped here.
fn until_exec(main: Pid, flags: Option<WaitPidFlag>, tree: &Tree) -> Result<(), String> {
    loop {
        let peek = waitid(
            Id::Pid(main),
            WaitPidFlag::WEXITED
                | WaitPidFlag::WSTOPPED
                | WaitPidFlag::WNOWAIT
                | WaitPidFlag::__WALL
                | WaitPidFlag::__WNOTHREAD,
        );
        match peek {
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(format!("waitid: {e}")),
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => {
                tree.remove(main.as_raw());
                return Err(EXEC_FAILED.into());
            }
            Ok(_) => {}
        }
        match waitpid(main, flags) {
            Ok(WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXEC)) => {
                resume(main, None)?;
                return Ok(());
            }
            Ok(WaitStatus::Stopped(_, sig)) => resume(main, Some(sig))?,
            Ok(_) => resume(main, None)?,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(format!("waitpid: {e}")),
        }
    }
}

/// What the waitpid loop knows of the tree after the main exec.
struct Watch<'a> {
    main: Pid,
    io: &'a IoPoints,
    names: &'a Names,
    events: &'a Sender<Event>,
    tree: &'a Tree,
    known: HashSet<Pid>,
    /// Tracees announced by an event whose first stop is still to come.
    fresh: HashSet<Pid>,
    /// Each thread and process after the first, by creation order.
    born: Born,
    status: Option<ExitStatus>,
    /// Once the main process is gone (or the life decided to crash),
    /// every tracee left is killed at its next stop.
    ending: bool,
}

impl Watch<'_> {
    /// One status from waitpid.
    fn on_status(&mut self, ws: WaitStatus) -> Result<(), String> {
        let tree = self.tree;
        match ws {
            WaitStatus::Exited(pid, code) => {
                self.gone(pid, ExitStatus::from_raw((code & 0xff) << 8));
            }
            WaitStatus::Signaled(pid, sig, core) => {
                self.gone(
                    pid,
                    ExitStatus::from_raw(sig as i32 | if core { 0x80 } else { 0 }),
                );
            }
            WaitStatus::Stopped(pid, sig) => {
                if self.ending {
                    tree.insert(pid.as_raw());
                    tree.kill_all();
                    return resume(pid, None);
                }
                // A signal on its way to the tracee: deliver it.
                tree.insert(pid.as_raw());
                self.known.insert(pid);
                resume(pid, Some(sig))?;
            }
            WaitStatus::PtraceEvent(pid, _, event) => {
                if self.ending {
                    tree.kill_all();
                    return resume(pid, None);
                }
                self.on_event(pid, event)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// A tracee is gone; if it is the main process, `status` is its end.
    fn gone(&mut self, pid: Pid, status: ExitStatus) {
        self.known.remove(&pid);
        self.tree.remove(pid.as_raw());
        if pid == self.main {
            self.status = Some(status);
            self.ending = true;
            self.tree.kill_all();
        }
    }

    /// A ptrace event stop of `pid`, before the end: handled, resumed.
    fn on_event(&mut self, pid: Pid, event: i32) -> Result<(), String> {
        let tree = self.tree;
        match event {
            libc::PTRACE_EVENT_STOP => {
                // A new tracee's first stop (seized tracees' children
                // start so), or a group stop: let it run on.
                if self.fresh.remove(&pid) || self.known.insert(pid) {
                    tree.insert(pid.as_raw());
                }
                resume(pid, None)
            }
            libc::PTRACE_EVENT_SECCOMP => {
                let who = self.born.name(pid);
                if !stop_at_call(pid, who, self.io, self.names, self.events)? {
                    self.ending = true;
                    tree.kill_all();
                }
                resume(pid, None)
            }
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                if let Ok(new) = ptrace::getevent(pid) {
                    let new = Pid::from_raw(new as i32);
                    self.born.add(new, event == libc::PTRACE_EVENT_CLONE);
                    if self.known.insert(new) {
                        self.fresh.insert(new);
                    }
                    tree.insert(new.as_raw());
                }
                resume(pid, None)
            }
            libc::PTRACE_EVENT_EXEC => {
                // A thread that called exec takes the leader's id;
                // its own id is gone without an exit.
                if let Ok(former) = ptrace::getevent(pid) {
                    let former = Pid::from_raw(former as i32);
                    if former != pid {
                        self.known.remove(&former);
                        tree.remove(former.as_raw());
                    }
                }
                resume(pid, None)
            }
            _ => resume(pid, None),
        }
    }
}

/// The threads and processes of a life after its first, each named by
/// its creation order (`thread 2`, `process 3`): a thread is made by
/// `clone` (`PTRACE_EVENT_CLONE`), a process by `fork` or `vfork`. What
/// the timeline can say of who made a call: stable for a program's own
/// threads, started in one order; not for a pool's (libuv's, Go's), whose
/// threads take work in any order.
#[derive(Default)]
struct Born {
    names: std::collections::HashMap<Pid, String>,
    threads: u32,
    processes: u32,
}

impl Born {
    fn add(&mut self, pid: Pid, thread: bool) {
        let name = if thread {
            self.threads += 1;
            format!("thread {}", self.threads + 1)
        } else {
            self.processes += 1;
            format!("process {}", self.processes + 1)
        };
        self.names.entry(pid).or_insert(name);
    }

    /// `None` for the first thread of the main process.
    fn name(&self, pid: Pid) -> Option<&str> {
        self.names.get(&pid).map(String::as_str)
    }
}

/// A seccomp stop: name the call; if it is an I/O point, ask the life.
/// `false`: the life crashes here (kill the tree before the call runs).
/// `who` names the thread or process after the first that made it.
fn stop_at_call(
    pid: Pid,
    who: Option<&str>,
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
    let shown = match who {
        Some(w) => format!("{} on {w}", call.shown),
        None => call.shown,
    };
    let event = Event::Io {
        point,
        shown,
        who: who.map(str::to_owned),
        reply: reply_tx,
    };
    if events.send(event).is_err() {
        return Ok(false);
    }
    Ok(reply_rx.recv().unwrap_or(false))
}
