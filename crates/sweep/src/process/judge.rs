//! The judge of a process world after the final life: a shell command
//! that prints one JSON object of counters, or a closure, as a [`Verdict`].
//!
//! With a fork server ([`Process::fork_server`]), a judge command that
//! calls `ready()` after its imports is forked too: its fork server is
//! started at the first judge (discovery's), that judge is run both ways
//! and must give the same verdict, and every later judge is a child forked
//! in the world's directory. A judge that ends without calling `ready()`,
//! or whose command holds `{service}`, is started per scenario as without
//! a fork server ([`Process::judge_not_forked`] says why).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek};
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;

use super::builder::{Judge, Process};
use super::child::{describe_status, without_protocol};
use super::count::Kind;
use super::forking::life_env;
use super::forkserver::{ForkServer, JudgeFork};
use super::world::ProcessWorld;
use super::{LOGS_VAR, SERVICE_VAR};
use crate::judge::Verdict;

impl Process {
    pub(super) fn try_judge(&self, world: &ProcessWorld) -> Result<Verdict, String> {
        match &self.judge {
            Judge::Fn(f) => f(world),
            Judge::Command(cmd) => match self.judge_server(world, cmd)? {
                Some(server) => self.judge_forked(&server, world, cmd),
                None => self.judge_exec(world, cmd),
            },
        }
    }

    /// Why the judge command is started per scenario under a fork server
    /// (it ended without calling `ready()`, say); `None` when it is forked,
    /// or when no fork server was asked for or no judge has run yet.
    pub fn judge_not_forked(&self) -> Option<String> {
        match &*self.judge_fork.0.lock().unwrap_or_else(|e| e.into_inner()) {
            JudgeFork::Exec(why) if self.fork.wanted => Some(why.clone()),
            _ => None,
        }
    }

    /// The judge's fork server when judges are forked: tried at the first
    /// judge of a subject with a fork server, whose verdict it checks.
    fn judge_server(
        &self,
        world: &ProcessWorld,
        cmd: &str,
    ) -> Result<Option<Arc<ForkServer>>, String> {
        if !self.fork.wanted {
            return Ok(None);
        }
        let mut slot = self.judge_fork.0.lock().unwrap_or_else(|e| e.into_inner());
        if let JudgeFork::Untried = &*slot {
            *slot = self.try_judge_server(world, cmd)?;
        }
        Ok(match &*slot {
            JudgeFork::Forked(s) => Some(Arc::clone(s)),
            _ => None,
        })
    }

    /// Start the judge's fork server and check it on `world`: the judge
    /// exec'd and forked must give the same verdict.
    fn try_judge_server(&self, world: &ProcessWorld, cmd: &str) -> Result<JudgeFork, String> {
        if super::world::per_world(cmd) {
            return Ok(JudgeFork::Exec(
                "its command holds {service}, which differs per world; a forked judge reads \
                 the URL from CRASHSWEEP_SERVICE"
                    .into(),
            ));
        }
        let dir = self.scratch("crashsweep-judge-server-")?;
        self.fill(&dir.path().join("world"))?;
        let argv: [OsString; 3] = ["sh".into(), "-c".into(), cmd.into()];
        let server = match ForkServer::start(&argv, &self.env, dir, false) {
            Ok(s) => Arc::new(s),
            Err(why) => {
                // It ran as a judge of its template world, and never served.
                self.count.one(Kind::Judge);
                return Ok(JudgeFork::Exec(why));
            }
        };
        self.count.one(Kind::Server);
        let exec = self.judge_exec(world, cmd)?;
        let forked = self.judge_forked(&server, world, cmd)?;
        if exec.counts != forked.counts {
            return Err(format!(
                "the judge `{cmd}` forked from its fork server gave {:?} where exec'd it gave \
                 {:?} on the same world: state read before ready() leaks between judges, so \
                 read the world after ready()",
                forked.counts, exec.counts
            ));
        }
        Ok(JudgeFork::Forked(server))
    }

    /// The judge command started as a new process in the world.
    fn judge_exec(&self, world: &ProcessWorld, cmd: &str) -> Result<Verdict, String> {
        let cmd = world.expand(OsStr::new(cmd)).to_string_lossy().into_owned();
        let mut command = Command::new("sh");
        if let Some(url) = world.service_url() {
            command.env(SERVICE_VAR, url);
        }
        command
            .arg("-c")
            .arg(&cmd)
            .current_dir(world.dir())
            .env(LOGS_VAR, world.logs())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        self.count.one(Kind::Judge);
        let out = without_protocol(&mut command)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("the judge `{cmd}` could not start: {e}"))?;
        verdict_of(&cmd, out.status, &out.stdout, &out.stderr)
    }

    /// The judge forked from `server` in the world's directory, with the
    /// environment an exec'd judge gets.
    fn judge_forked(
        &self,
        server: &Arc<ForkServer>,
        world: &ProcessWorld,
        cmd: &str,
    ) -> Result<Verdict, String> {
        let io = |e: std::io::Error| format!("the judge `{cmd}`, forked: {e}");
        // A life's, and the logs' directory (unless the subject sets it).
        let mut env = life_env(self, world);
        if !env.iter().any(|(k, _)| k == LOGS_VAR) {
            env.push((LOGS_VAR.into(), world.logs().into()));
        }
        let null = File::open("/dev/null").map_err(io)?;
        let (mut out, mut err) = (
            tempfile::tempfile().map_err(io)?,
            tempfile::tempfile().map_err(io)?,
        );
        // The point descriptor a forked child is given: a judge passes no
        // point, and the harness's end is closed when the judge ends.
        let (_ours, theirs) = UnixStream::pair().map_err(io)?;
        self.count.one(Kind::ForkedJudge);
        let mut child = server.fork(&world.dir(), &env, [&null, &out, &err], &theirs, None)?;
        drop(theirs);
        let status = child.wait().map_err(io)?;
        let read = |f: &mut File| -> Result<Vec<u8>, String> {
            let mut v = Vec::new();
            f.rewind().map_err(io)?;
            f.read_to_end(&mut v).map_err(io)?;
            Ok(v)
        };
        let (stdout, stderr) = (read(&mut out)?, read(&mut err)?);
        verdict_of(cmd, status, &stdout, &stderr)
    }
}

/// A judge's verdict from its exit status and output: its JSON object of
/// counts, or why there is none.
fn verdict_of(
    cmd: &str,
    status: ExitStatus,
    stdout: &[u8],
    stderr: &[u8],
) -> Result<Verdict, String> {
    let stdout = String::from_utf8_lossy(stdout);
    if !status.success() {
        return Err(format!(
            "the judge `{cmd}` {}; its standard error: {}",
            describe_status(status),
            String::from_utf8_lossy(stderr).trim()
        ));
    }
    parse_counts(&stdout).map_err(|e| format!("the judge `{cmd}` printed {}: {e}", stdout.trim()))
}

/// The judge's JSON object as counts.
fn parse_counts(stdout: &str) -> Result<Verdict, String> {
    let value: serde_json::Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object of counters")?;
    let mut v = Verdict::new();
    for (k, n) in obj {
        let n = n
            .as_u64()
            .ok_or_else(|| format!("the counter {k:?} is {n}, not a whole number ≥ 0"))?;
        v = v.count(k, n);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_in_an_object() {
        let v = parse_counts(r#"{"b": 2, "a": 0}"#).unwrap();
        assert_eq!(v.counts, [("b".to_owned(), 2), ("a".to_owned(), 0)]);
        for bad in ["[1]", r#"{"a": -1}"#, r#"{"a": 1.5}"#, "nope", ""] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }
}
