//! One life of a process subject: the program started as a child process
//! with the point protocol's descriptor, each hit it reports relayed into
//! the life's scope and answered, and the program killed where the scope
//! crashes (or at the time limit).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, Stdio};

use super::builder::Process;
use super::child::{describe_status, pass_fd, show_argv, tail, Kid, Running, POLL};
use super::count::Kind;
use super::forking::fork_life;
use super::forkserver::Via;
use super::restart;
use super::world::ProcessWorld;
use super::{DIE_AT_VAR, FD_VAR, SERVICE_VAR, VERSION, VERSION_VAR};
use crate::error::LifeError;

impl Process {
    /// One life: run the program (or the restart) to its end, relaying its
    /// hits into the current scope.
    pub(super) fn run_life(&self, world: &mut ProcessWorld) -> Result<(), LifeError> {
        let via = if self.fork.wanted {
            Via::Fork
        } else {
            Via::Exec
        };
        self.run_life_via(world, via)
    }

    /// One life, exec'd or forked from the fork server.
    pub(super) fn run_life_via(&self, world: &mut ProcessWorld, via: Via) -> Result<(), LifeError> {
        let argv = match (&self.restart, world.lives) {
            (Some(r), n) if n > 0 => r,
            _ => &self.argv,
        };
        let Some((program, args)) = argv.split_first() else {
            return Err(format!("{}: the program's command line is empty", self.name).into());
        };
        if let Some(service) = world.service.as_mut() {
            if service.ensure_running()? {
                self.count.one(Kind::Service);
            }
        }
        world.lives += 1;
        let life = world.lives;
        let shown = show_argv(argv);
        let (ours, theirs) = UnixStream::pair()?;
        let fd = theirs.as_raw_fd();
        // The child gets its end as descriptor 3: a low number, which Node
        // (for one) marks close-on-exec at its start-up, so the program's
        // own children do not inherit it.
        let child_fd: i32 = 3;
        let mut cmd = self.life_command(world, program, args, child_fd);
        let (out, err) = (
            File::create(world.log(life, "out"))?,
            File::create(world.log(life, "err"))?,
        );
        let child = match via {
            Via::Fork => {
                if let Some(io) = &self.traced() {
                    let server = self.fork_server_now()?.ok_or("no fork server")?;
                    let null = File::open("/dev/null")?;
                    self.count.one(Kind::Forked);
                    let start = super::trace::Start::Fork(Box::new(
                        |world: &ProcessWorld, theirs: &UnixStream, filter: Vec<u8>| {
                            fork_life(
                                self,
                                &server,
                                world,
                                [&null, &out, &err],
                                theirs,
                                Some(&filter),
                            )
                        },
                    ));
                    return super::trace::life(start, ours, theirs, world, life, shown, io);
                }
                self.fork_kid(world, &out, &err, &theirs)?
            }
            Via::Exec => {
                cmd.stdout(out).stderr(err);
                pass_fd(&mut cmd, fd);
                self.count.one(Kind::Life);
                if let Some(io) = &self.traced() {
                    let start = super::trace::Start::Exec(cmd);
                    return super::trace::life(start, ours, theirs, world, life, shown, io);
                }
                Kid::Spawned(
                    cmd.spawn()
                        .map_err(|e| format!("{shown} could not start: {e}"))?,
                )
            }
        };
        drop(theirs);
        self.await_life(world, life, &shown, &ours, child)
    }

    /// The command of one life: the program and its arguments (with the
    /// world's names expanded), in the world, with the point protocol's
    /// descriptor number and the service's address in its environment.
    fn life_command(
        &self,
        world: &ProcessWorld,
        program: &OsStr,
        args: &[OsString],
        child_fd: i32,
    ) -> Command {
        let mut cmd = Command::new(world.expand(program));
        if let Some(url) = world.service_url() {
            cmd.env(SERVICE_VAR, url);
        }
        cmd.args(args.iter().map(|a| world.expand(a)))
            .current_dir(world.dir())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(FD_VAR, child_fd.to_string())
            .env(VERSION_VAR, VERSION)
            .env_remove(DIE_AT_VAR)
            .stdin(Stdio::null());
        cmd
    }

    /// A life forked from the fork server, its output to `out` and `err`,
    /// `theirs` its end of the point protocol.
    fn fork_kid(
        &self,
        world: &ProcessWorld,
        out: &File,
        err: &File,
        theirs: &UnixStream,
    ) -> Result<Kid, LifeError> {
        let server = self.fork_server_now()?.ok_or("no fork server")?;
        let null = File::open("/dev/null")?;
        self.count.one(Kind::Forked);
        Ok(Kid::Forked(Box::new(fork_life(
            self,
            &server,
            world,
            [&null, out, err],
            theirs,
            None,
        )?)))
    }

    /// A started life to its end: its hits relayed, its exit status
    /// awaited and written among the world's ends.
    fn await_life(
        &self,
        world: &mut ProcessWorld,
        life: u32,
        shown: &str,
        ours: &UnixStream,
        child: Kid,
    ) -> Result<(), LifeError> {
        // The service's hits go to this life's scope while it runs, and a
        // crash at one of them kills this program too.
        let _in_life = world.service.as_ref().map(|s| s.life_started(child.id()));
        let mut running = Running::new(child, shown);
        let result = relay(ours, &mut running, world, life, self.restarts())?;
        let status = match result {
            Relayed::Exited => running.wait_or_stop()?,
            Relayed::Protocol(why) => {
                running.kill()?;
                return Err(format!("{shown} broke the point protocol: {why}").into());
            }
        };
        let end = describe_status(status);
        let mut how = end.clone();
        world.finished = true;
        if let Some(s) = &world.service {
            world.ends.extend(s.take_ends());
            if let Some(hit) = s.take_crash() {
                how = restart::killed_at(&hit);
                world.finished = false;
            }
        }
        world.lineage = restart::next_lineage(world.lineage, life, &how);
        world.ends.push(format!("life {life}: {shown} {end}"));
        if status.success() {
            Ok(())
        } else {
            let err = std::fs::read_to_string(world.log(life, "err")).unwrap_or_default();
            Err(format!("{shown} {end}{}", tail(&err)).into())
        }
    }
}

/// How a relay of a program's hits ended (other than by unwinding).
enum Relayed {
    /// The program closed the descriptor (it exited).
    Exited,
    /// It wrote something that is not a hit.
    Protocol(String),
}

/// Read the program's hits and answer them until it exits. A hit the scope
/// crashes at (or a cancel) unwinds from here after the child was killed.
/// `captures`: a sweep may capture the world at a hit (the subject
/// restarts from captured worlds), so each hit says which program waits.
fn relay(
    ours: &UnixStream,
    running: &mut Running,
    world: &mut ProcessWorld,
    life: u32,
    captures: bool,
) -> Result<Relayed, LifeError> {
    ours.set_read_timeout(Some(POLL))?;
    let mut reader = BufReader::new(ours.try_clone()?);
    let mut writer = ours.try_clone()?;
    let mut line = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(Relayed::Exited),
            Ok(_) if line.last() != Some(&b'\n') => return Ok(Relayed::Exited),
            Ok(_) => {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                line.clear();
                let Some(name) = text.strip_prefix("hit ").filter(|n| !n.is_empty()) else {
                    return Ok(Relayed::Protocol(format!(
                        "it wrote {text:?}, not `hit NAME`"
                    )));
                };
                world.hits += 1;
                let pid = running.child.as_ref().map(Kid::id).filter(|_| captures);
                if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| {
                    // The program waits at this point: a capture of its
                    // world meanwhile is the world a crash here leaves.
                    restart::stopped_at_hit(pid, &running.shown, || {
                        crashpoint::protocol::hit(name);
                    });
                })) {
                    killed_at_hit(running, world, life, name, payload)?;
                }
                if writer.write_all(b"go\n").is_err() {
                    // It is gone: its exit status says why.
                    return Ok(Relayed::Exited);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Some(scope) = crashpoint::scope::current() {
                    if scope.cancel_requested() {
                        let status = running.kill()?;
                        world.ends.push(format!(
                            "life {life}: {} {} at the time limit",
                            running.shown,
                            describe_status(status)
                        ));
                        scope.stop();
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// The crash (or a cancel) at the hit `name`, where the program is blocked
/// until it is killed: kill it, check that it died of `SIGKILL`, record how
/// in the world, and unwind with `payload`.
fn killed_at_hit(
    running: &mut Running,
    world: &mut ProcessWorld,
    life: u32,
    name: &str,
    payload: Box<dyn std::any::Any + Send>,
) -> Result<(), LifeError> {
    let status = running.kill()?;
    world.ends.push(format!(
        "life {life}: {} {} at {name}",
        running.shown,
        describe_status(status)
    ));
    if status.signal() != Some(libc::SIGKILL) {
        panic!(
            "{} was to be killed at point {name:?}, but it {}",
            running.shown,
            describe_status(status)
        );
    }
    world.finished = false;
    if let Some(c) = crashpoint::scope::is_crash(payload.as_ref()) {
        world.lineage = restart::next_lineage(world.lineage, life, &restart::killed_at(&c.hit));
    }
    panic::resume_unwind(payload)
}
