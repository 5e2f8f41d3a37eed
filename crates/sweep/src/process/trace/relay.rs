//! A traced life, on the life's own thread (the one in the scenario's
//! scope): the tracer thread starts the program and reports each I/O call,
//! a reader thread reports each named point, and this thread relays both,
//! in the order they come, into the scope, then answers. A crash at
//! either kills the whole tree, and the main process must die of
//! `SIGKILL`, as a point protocol crash must.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::call::Names;
use super::filter;
use super::select::IoPoints;
use super::tracer::{self, Tree};
use super::{Event, Start};
use crate::error::LifeError;
use crate::process::child::{describe_status, tail, Reaped, POLL};
use crate::process::world::ProcessWorld;

/// Whether a program can be traced here: a traced `true` is started and
/// must exit 0. `Err` names the setting that forbids ptrace.
pub(in crate::process) fn probe() -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let names = Names {
        world: std::env::temp_dir(),
        service: None,
        record: None,
    };
    let mut cmd = Command::new("true");
    cmd.stdin(std::process::Stdio::null());
    tracer::start(
        cmd,
        (),
        Arc::new(IoPoints::all()),
        names,
        tx,
        Tree::default(),
    )?;
    loop {
        match rx.recv() {
            Ok(Event::Exited(s)) if s.success() => return Ok(()),
            Ok(Event::Exited(s)) => {
                return Err(format!(
                    "a traced `true` {}: the tracer cannot run here",
                    describe_status(s)
                ))
            }
            Ok(Event::Failed(why)) => return Err(why),
            Ok(Event::Io { reply, .. }) => {
                let _ = reply.send(true);
            }
            Ok(_) => {}
            Err(_) => return Err("the tracer thread ended without a word".into()),
        }
    }
}

/// Read the program's hits (`hit NAME`) and pass them on, each waiting for
/// its answer before the next is read.
fn read_points(ours: UnixStream, events: Sender<Event>) {
    let Ok(mut writer) = ours.try_clone() else {
        let _ = events.send(Event::Eof);
        return;
    };
    let mut reader = BufReader::new(ours);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.last() != Some(&b'\n') => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                let Some(name) = text.strip_prefix("hit ").filter(|n| !n.is_empty()) else {
                    let _ = events.send(Event::Protocol(format!(
                        "it wrote {text:?}, not `hit NAME`"
                    )));
                    return;
                };
                let (tx, rx) = mpsc::channel();
                if events.send(Event::Named(name.to_owned(), tx)).is_err() {
                    return;
                }
                if rx.recv() != Ok(true) || writer.write_all(b"go\n").is_err() {
                    return;
                }
            }
        }
    }
    let _ = events.send(Event::Eof);
}

/// The answer a hit waits for.
enum Answer {
    Io(Sender<bool>),
    Named(Sender<bool>),
}

/// One life under the tracer, started as `start` says, `theirs` the
/// program's end of the point protocol.
pub(in crate::process) fn life(
    start: Start<'_>,
    ours: UnixStream,
    theirs: UnixStream,
    world: &mut ProcessWorld,
    life: u32,
    shown: String,
    io: &Arc<IoPoints>,
) -> Result<(), LifeError> {
    let dir = world.dir();
    let names = Names {
        world: std::fs::canonicalize(&dir).unwrap_or(dir),
        service: world.service_url().and_then(service_addr),
        record: world.disk.clone().map(super::record::recorder),
    };
    let (tx, rx) = mpsc::channel();
    let tree = Tree::default();
    let (pid, _forked) = match start {
        Start::Exec(cmd) => {
            let started =
                tracer::start(cmd, theirs, Arc::clone(io), names, tx.clone(), tree.clone())
                    .map_err(|e| format!("{shown} could not start: {e}"))?;
            (started.pid, None)
        }
        Start::Fork(fork) => {
            let prog = filter::program().map_err(|e| format!("the tracer's filter: {e}"))?;
            let forked = fork(world, &theirs, filter::bytes(&prog))?;
            drop(theirs);
            // On an error the forked child, never told `seized`, is killed
            // as `forked` drops.
            let started = super::forked::attach(
                forked.id(),
                ours.try_clone()?,
                Arc::clone(io),
                names,
                tx.clone(),
                tree.clone(),
            )
            .map_err(|e| format!("{shown}, forked, could not be traced: {e}"))?;
            (started.pid, Some(forked))
        }
    };
    let _in_life = world.service.as_ref().map(|s| s.life_started(pid));
    std::thread::Builder::new()
        .name("crashsweep-points".into())
        .spawn(move || read_points(ours, tx))?;
    let mut life_run = Life {
        rx: &rx,
        tree: &tree,
        shown: &shown,
        life,
        exited: None,
    };
    let status = life_run.relay(world)?;
    let end = describe_status(status);
    if let Some(s) = &world.service {
        world.ends.extend(s.take_ends());
    }
    world.ends.push(format!("life {life}: {shown} {end}"));
    if status.success() {
        Ok(())
    } else {
        let err = std::fs::read_to_string(world.log(life, "err")).unwrap_or_default();
        Err(format!("{shown} {end}{}", tail(&err)).into())
    }
}

/// `http://127.0.0.1:4000/…` → 127.0.0.1:4000.
fn service_addr(url: &str) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split('/').next()?;
    host_port.to_socket_addrs().ok()?.next()
}

struct Life<'a> {
    rx: &'a Receiver<Event>,
    tree: &'a Tree,
    shown: &'a str,
    life: u32,
    exited: Option<ExitStatus>,
}

impl Life<'_> {
    /// Relay every hit until the tree is gone and the descriptor closed:
    /// the main process's status.
    fn relay(&mut self, world: &mut ProcessWorld) -> Result<ExitStatus, LifeError> {
        let mut eof = false;
        let mut eof_deadline: Option<Instant> = None;
        loop {
            if let (Some(status), true) = (self.exited, eof) {
                return Ok(status);
            }
            // Every process is gone: whatever holds the descriptor still is
            // no process of this life; do not wait for it long.
            if let (Some(status), Some(d)) = (self.exited, eof_deadline) {
                if Instant::now() > d {
                    return Ok(status);
                }
            }
            match self.rx.recv_timeout(POLL) {
                Ok(Event::Io {
                    point,
                    shown,
                    who,
                    reply,
                }) => {
                    world.makers.push((point.clone(), who));
                    self.pass(world, &point, Some(&shown), Answer::Io(reply));
                }
                Ok(Event::Named(name, reply)) => {
                    self.pass(world, &name, None, Answer::Named(reply));
                }
                Ok(Event::Eof) => eof = true,
                Ok(Event::Exited(status)) => {
                    self.exited = Some(status);
                    eof_deadline = Some(Instant::now() + Duration::from_secs(2));
                }
                Ok(Event::Protocol(why)) => {
                    self.tree.kill_all();
                    self.wait_exit();
                    return Err(format!("{} broke the point protocol: {why}", self.shown).into());
                }
                Ok(Event::Failed(why)) => {
                    return Err(format!("{}: the tracer failed: {why}", self.shown).into());
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(scope) = crashpoint::scope::current() {
                        if scope.cancel_requested() {
                            self.tree.kill_all();
                            let status = self.wait_exit();
                            world.ends.push(format!(
                                "life {}: {} {} at the time limit",
                                self.life,
                                self.shown,
                                describe_status(status)
                            ));
                            scope.stop();
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return match self.exited {
                        Some(s) => Ok(s),
                        None => Err(format!(
                            "{}: the tracer ended without the program's exit status",
                            self.shown
                        )
                        .into()),
                    };
                }
            }
        }
    }

    /// Pass the point `name` in the scope; answer go, or (the crash, or a
    /// cancel) kill the tree, check it died of `SIGKILL` and unwind.
    fn pass(&mut self, world: &mut ProcessWorld, name: &str, call: Option<&str>, answer: Answer) {
        world.hits += 1;
        let passed = panic::catch_unwind(AssertUnwindSafe(|| crashpoint::protocol::hit(name)));
        let payload = match passed {
            Ok(()) => {
                match answer {
                    Answer::Io(r) | Answer::Named(r) => {
                        let _ = r.send(true);
                    }
                }
                return;
            }
            Err(payload) => payload,
        };
        match answer {
            Answer::Io(r) => {
                // The tracer kills the tree at the stop: the call never runs.
                if let Some(d) = &world.disk {
                    d.lock().unwrap_or_else(|e| e.into_inner()).discard();
                }
                let _ = r.send(false);
            }
            Answer::Named(r) => {
                self.tree.kill_all();
                drop(r);
            }
        }
        let status = self.wait_exit();
        let at = match call {
            Some(c) => format!("{name}, before {c}"),
            None => name.to_owned(),
        };
        world.ends.push(format!(
            "life {}: {} {} at {at}",
            self.life,
            self.shown,
            describe_status(status)
        ));
        if status.signal() != Some(libc::SIGKILL) {
            panic!(
                "{} was to be killed at point {name:?}, but it {}",
                self.shown,
                describe_status(status)
            );
        }
        panic::resume_unwind(payload);
    }

    /// Wait for the tree's end, refusing every hit meanwhile: the main
    /// process's status.
    fn wait_exit(&mut self) -> ExitStatus {
        if let Some(s) = self.exited {
            return s;
        }
        loop {
            match self.rx.recv() {
                Ok(Event::Exited(s)) => {
                    self.exited = Some(s);
                    return s;
                }
                Ok(Event::Io { reply: r, .. }) | Ok(Event::Named(_, r)) => {
                    self.tree.kill_all();
                    let _ = r.send(false);
                }
                Ok(Event::Failed(_)) | Err(_) => {
                    // The tracer reaped the tree without telling how the
                    // main process ended: as killed.
                    return ExitStatus::from_raw(libc::SIGKILL);
                }
                Ok(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tracer_runs_here() {
        probe().unwrap();
    }

    /// A thread under a seccomp filter that fails ptrace with `EPERM` (as a
    /// container's profile does): the probe refuses, naming the setting.
    #[test]
    fn a_forbidden_ptrace_is_refused_by_name() {
        use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
        let refused = std::thread::spawn(|| {
            let filter = SeccompFilter::new(
                [(libc::SYS_ptrace, Vec::new())].into_iter().collect(),
                SeccompAction::Allow,
                SeccompAction::Errno(libc::EPERM as u32),
                TargetArch::x86_64,
            )
            .unwrap();
            let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
            // This thread only (no TSYNC): the tracer thread it starts
            // inherits the filter.
            seccompiler::apply_filter(&prog).unwrap();
            probe()
        })
        .join()
        .unwrap();
        let why = refused.unwrap_err();
        assert!(why.contains("ptrace is not allowed here (EPERM)"), "{why}");
        let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope");
        if yama.is_err() {
            assert!(why.contains("seccomp profile"), "{why}");
        }
    }

    #[test]
    fn yama_scopes_are_named() {
        let three = tracer::refusal_for(Some(3));
        assert!(three.contains("kernel.yama.ptrace_scope is 3"), "{three}");
        let two = tracer::refusal_for(Some(2));
        assert!(two.contains("sysctl kernel.yama.ptrace_scope=1"), "{two}");
        let none = tracer::refusal_for(None);
        assert!(none.contains("--cap-add SYS_PTRACE"), "{none}");
    }
}
