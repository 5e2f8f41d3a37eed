//! A [`Process`] with a fork server: when its lives are forked, what a
//! forked life is given, and the check that forked lives are exec'd lives.
//!
//! [`Process::discover`] checks the fork server before any sweep uses it:
//! clean lives exec'd and forked must pass the same hits and leave the same
//! world, on a fresh world and on the world a clean run left. They are
//! compared as the safety nets compare two clean runs: the hits as sets
//! (a writer thread may pass them in another order), the worlds as the
//! subject describes them. Any difference is refused, naming the first
//! differing hit.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::builder::Process;
use super::count::Kind;
use super::error::ProcessError;
use super::forkserver::{ForkServer, Forked, Via};
use super::world::ProcessWorld;
use super::{DIE_AT_VAR, FD_VAR, SERVICE_VAR, VERSION_VAR};

impl Process {
    /// The fork server if lives are forked: wanted and checked. Wanted but
    /// not checked is an error (the sweep would run unchecked).
    pub(super) fn fork_server_now(&self) -> Result<Option<Arc<ForkServer>>, String> {
        if !self.fork.wanted {
            return Ok(None);
        }
        if !self.fork.checked.load(Ordering::SeqCst) {
            return Err(format!(
                "{}: the fork server is not checked: call Process::discover() before sweeping",
                self.name
            ));
        }
        self.start_fork_server().map(Some)
    }

    /// The fork server, started in a copy of the template of its own.
    fn start_fork_server(&self) -> Result<Arc<ForkServer>, String> {
        self.fork.started(|| {
            self.count.one(Kind::Server);
            let dir = self.scratch("crashsweep-server-")?;
            self.fill(&dir.path().join("world"))?;
            ForkServer::start(&self.argv, &self.env, dir, self.traced().is_some())
        })
    }
}

/// The environment an exec'd life would have, without the protocol's
/// variables (a forked life's client reads its descriptor directly).
pub(super) fn life_env(process: &Process, world: &ProcessWorld) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    env.extend(process.env.iter().cloned());
    if let Some(url) = world.service_url() {
        env.insert(SERVICE_VAR.into(), url.into());
    }
    for k in [FD_VAR, VERSION_VAR, DIE_AT_VAR] {
        env.remove(std::ffi::OsStr::new(k));
    }
    env.into_iter().collect()
}

/// Fork the life `life` of `world` from `server`; a traced life (I/O
/// points) with the tracer's `filter`.
pub(super) fn fork_life(
    process: &Process,
    server: &Arc<ForkServer>,
    world: &ProcessWorld,
    streams: [&File; 3],
    point: &UnixStream,
    filter: Option<&[u8]>,
) -> Result<Forked, String> {
    server.fork(
        &world.dir(),
        &life_env(process, world),
        streams,
        point,
        filter,
    )
}

impl Process {
    /// Refuse a fork server this subject cannot use: a restart command of
    /// its own, or `{service}` in the program's arguments (both fixed when
    /// the server starts).
    pub(super) fn fork_server_fits(&self) -> Result<(), String> {
        if self.restart.as_ref().is_some_and(|r| *r != self.argv) {
            return Err(
                "a fork server forks the program's own command, so a restart command of \
                 its own (--restart, Process::restart) cannot be forked: drop the restart \
                 command (a restart runs the program's command again), or the fork server"
                    .into(),
            );
        }
        if self
            .argv
            .iter()
            .any(|a| a.to_str().is_some_and(super::world::per_world))
        {
            return Err(
                "the program's arguments hold {service}, which differs per world; \
                        a forked life reads the URL from CRASHSWEEP_SERVICE instead"
                    .into(),
            );
        }
        Ok(())
    }

    /// Check that forked lives are exec'd lives: a clean life on a fresh
    /// world, then a second life on the world it left, each run both ways,
    /// must pass the same hits and leave the same world. Sets the check
    /// that lets lives be forked.
    pub(super) fn check_fork_server(&self) -> Result<(), ProcessError> {
        let refuse = |reason: String| ProcessError::ForkServer {
            subject: self.name.clone(),
            reason,
        };
        self.fork_server_fits().map_err(&refuse)?;
        // The server first: a program that cannot serve (threads at
        // ready(), a point before it) is refused for that.
        self.start_fork_server().map_err(&refuse)?;
        let mut exec = self.try_world().map_err(&refuse)?;
        let mut fork = self.try_world().map_err(&refuse)?;
        self.fork.checked.store(true, Ordering::SeqCst);
        // An exec'd life that fails fails without the fork server too: the
        // program's error, not the server's.
        let mut exec_failed = None;
        let compared = (|| {
            for n in 1..=2 {
                let a = self
                    .recorded(&mut exec, Via::Exec)
                    .map_err(|e| exec_failed.insert(e).clone())?;
                let b = self.recorded(&mut fork, Via::Fork)?;
                let which = if n == 1 {
                    "a clean life on a fresh world"
                } else {
                    "a second life on the world a clean life left"
                };
                // Compared as the safety nets compare two clean runs: the
                // hits as sets (threads may pass them in another order),
                // the worlds as the subject describes them.
                if let Some(at) = crate::nets::divergence(&a, &b) {
                    let show = |h: Option<String>| h.unwrap_or_else(|| "its end".to_owned());
                    return Err(format!(
                        "{which}, forked, passed {} where the exec'd one passed {} \
                         (hit {} of the life): state read before ready() leaks between lives, \
                         so read the world after ready()",
                        show(at.second),
                        show(at.first),
                        at.index + 1
                    ));
                }
                let (wa, wb) = (self.world_seen(&exec), self.world_seen(&fork));
                if wa != wb {
                    let (da, db) = crate::nets::first_difference(&wa, &wb);
                    return Err(format!(
                        "{which}, forked, left another world than the exec'd one after the \
                         same {} hits (exec'd {da:?}, forked {db:?}): state read before \
                         ready() leaks between lives, so read the world after ready(); or the \
                         forked life's exit skipped work (a finalizer, a file left open, under \
                         Python's ready(exit_fast=True)), so close what the life opens",
                        a.len()
                    ));
                }
            }
            Ok(())
        })();
        if let Err(why) = compared {
            self.fork.checked.store(false, Ordering::SeqCst);
            return Err(match exec_failed {
                Some(reason) => ProcessError::Discovery {
                    subject: self.name.clone(),
                    reason,
                },
                None => refuse(why),
            });
        }
        Ok(())
    }

    /// One life of `world` run `via`, its hits recorded.
    fn recorded(&self, world: &mut ProcessWorld, via: Via) -> Result<Vec<crashpoint::Hit>, String> {
        let life = crashpoint::record(|| self.run_life_via(world, via));
        let how = match via {
            Via::Exec => "exec'd",
            Via::Fork => "forked",
        };
        match life.outcome {
            crashpoint::Outcome::Finished(Ok(())) => Ok(life.hits),
            crashpoint::Outcome::Finished(Err(e)) => Err(format!("a clean life, {how}: {e}")),
            crashpoint::Outcome::Crashed(hit) => {
                Err(format!("a clean life, {how}, was stopped at {hit}"))
            }
            crashpoint::Outcome::Panicked(m) => {
                Err(format!("a clean life, {how}: the harness panicked: {m}"))
            }
        }
    }
}

impl Process {
    /// A world as the safety nets see it when they compare two clean runs:
    /// the subject's description (the lives' ends and the files' names and
    /// sizes, or [`Process::describe_with`]), which is also what its
    /// fingerprint holds for a finished world. Bytes a judge ignores (a
    /// time, an id) differ between any two runs, so they are not compared.
    fn world_seen(&self, world: &ProcessWorld) -> String {
        crate::subject::Subject::describe(self, world)
    }
}
