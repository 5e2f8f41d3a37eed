//! A process subject's service: a second program started for each world
//! (e.g. the tracker service on a free loopback port), whose URL the
//! program is given. With its points swept, its hits join the running
//! life's scope, and a crash at one of them kills the service and the
//! program together; the next life starts the service again.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};

use crashpoint::scope::Handle;

use super::child::{describe_status, pass_fd, show_argv, tail, without_protocol, Kid, Running};
use super::{FD_VAR, VERSION, VERSION_VAR};

/// What the service's relay thread shares with the lives.
#[derive(Debug, Default)]
struct Shared {
    /// The scope of the life running now, if any.
    scope: Option<Handle>,
    /// The process id of the program of the life running now.
    program: Option<u32>,
    /// How the service's lives ended, for the world's description.
    ends: Vec<String>,
    /// The hit a crash killed the service (and the program) at, since last
    /// asked: the world's lineage records it.
    crashed: Option<crashpoint::Hit>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A world's service.
#[derive(Debug)]
pub(super) struct Service {
    argv: Vec<OsString>,
    dir: PathBuf,
    points: bool,
    url: String,
    running: Arc<Mutex<Option<Running>>>,
    shared: Arc<Mutex<Shared>>,
    starts: u32,
}

/// While alive, the service's hits go to a life's scope; dropped when the
/// life ends (unwinding included).
pub(super) struct InLife(Arc<Mutex<Shared>>);

impl Drop for InLife {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.scope = None;
        s.program = None;
    }
}

impl Service {
    /// Start `argv` in `dir` (created) and read its URL.
    pub(super) fn start(argv: &[OsString], dir: &Path, points: bool) -> Result<Service, String> {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut s = Service {
            argv: argv.to_vec(),
            dir: dir.to_path_buf(),
            points,
            url: String::new(),
            running: Arc::new(Mutex::new(None)),
            shared: Arc::new(Mutex::new(Shared::default())),
            starts: 0,
        };
        s.launch()?;
        Ok(s)
    }

    /// Its URL now.
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// Start it again if a crash killed it; whether it was started.
    pub(super) fn ensure_running(&mut self) -> Result<bool, String> {
        if lock(&self.running).is_none() {
            self.launch()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// A life of the program with process id `pid` starts in the current
    /// scope.
    pub(super) fn life_started(&self, pid: u32) -> InLife {
        let mut s = lock(&self.shared);
        s.scope = crashpoint::scope::current();
        s.program = Some(pid);
        InLife(Arc::clone(&self.shared))
    }

    /// How the service ended since last asked, for the world's description.
    pub(super) fn take_ends(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.shared).ends)
    }

    /// The hit a crash of the service landed at since last asked, if any.
    pub(super) fn take_crash(&self) -> Option<crashpoint::Hit> {
        lock(&self.shared).crashed.take()
    }

    /// The same service on `dir` (a copy of its directory), not running:
    /// the next life starts it there, as after a crash.
    pub(super) fn stopped_copy(&self, dir: &Path) -> Service {
        Service {
            argv: self.argv.clone(),
            dir: dir.to_path_buf(),
            points: self.points,
            url: String::new(),
            running: Arc::new(Mutex::new(None)),
            shared: Arc::new(Mutex::new(Shared::default())),
            starts: self.starts,
        }
    }

    fn launch(&mut self) -> Result<(), String> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err("the service's command line is empty".into());
        };
        self.starts += 1;
        let shown = show_argv(&self.argv);
        let err_path = self.dir.join("service.err");
        let err = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&err_path)
            .map_err(|e| format!("{}: {e}", err_path.display()))?;
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.dir);
        without_protocol(&mut cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let pair = if self.points {
            let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
            cmd.env(FD_VAR, "3").env(VERSION_VAR, VERSION);
            pass_fd(&mut cmd, theirs.as_raw_fd());
            Some((ours, theirs))
        } else {
            None
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("the service {shown} could not start: {e}"))?;
        let ours = pair.map(|(ours, theirs)| {
            drop(theirs);
            ours
        });
        let stdout = child.stdout.take();
        let mut running = Running::new(Kid::Spawned(child), &shown);
        let Some(stdout) = stdout else {
            return Err(format!("the service {shown} has no standard output"));
        };
        // The relay answers the service's hits from now on: it may pass
        // points before it prints its URL.
        if let Some(ours) = ours {
            let shared = Arc::clone(&self.shared);
            let running = Arc::clone(&self.running);
            let start = self.starts;
            std::thread::spawn(move || relay(ours, &shared, &running, start));
        }
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        if let Err(e) = lines.read_line(&mut first) {
            let _ = running.kill();
            return Err(format!("the service {shown}: {e}"));
        }
        let Some(url) = first
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .map(str::to_owned)
        else {
            let status = running.kill().map(describe_status).unwrap_or_default();
            let log = std::fs::read_to_string(&err_path).unwrap_or_default();
            return Err(format!(
                "the service {shown} printed {:?} first, not its URL (it {status}){}",
                first.trim(),
                tail(&log)
            ));
        };
        // Whatever else it prints is read and dropped, so it never blocks
        // on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            while lines.read_until(b'\n', &mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        self.url = url;
        *lock(&self.running) = Some(running);
        Ok(())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut r) = lock(&self.running).take() {
            let _ = r.kill();
        }
    }
}

/// Answer the service's hits: in the running life's scope, or, between
/// lives, at once. A crash at a hit kills the program of the life and the
/// service (a machine that goes down), and ends the relay.
fn relay(ours: UnixStream, shared: &Mutex<Shared>, running: &Mutex<Option<Running>>, start: u32) {
    let Ok(read) = ours.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read);
    let mut writer = ours;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(n) if n > 0 && line.last() == Some(&b'\n') => {}
            _ => return, // it exited, or was killed
        }
        let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
        let Some(name) = text.strip_prefix("hit ").filter(|n| !n.is_empty()) else {
            return; // not the protocol: its life ends without answers
        };
        let (scope, program) = {
            let s = lock(shared);
            (s.scope.clone(), s.program)
        };
        if let Some(scope) = scope {
            let hit = panic::catch_unwind(AssertUnwindSafe(|| {
                scope.enter(|| crashpoint::protocol::hit(name));
            }));
            if let Err(payload) = hit {
                // Recorded before the program dies: its life reads it as
                // soon as it sees the program gone.
                lock(shared).crashed =
                    crashpoint::scope::is_crash(payload.as_ref()).map(|c| c.hit.clone());
                // Down together. The service is taken out of the world
                // before the program dies, under the lock the next life's
                // start waits on, so that start always sees it gone. The
                // program dies first (it may be waiting for the service's
                // answer), then the service, blocked at this very point.
                let mut slot = lock(running);
                let service = slot.take();
                if let Some(pid) = program.and_then(|p| i32::try_from(p).ok()) {
                    // SAFETY: kill(2) on the life's child, not yet reaped
                    // (the life waits for it), so the id is still its own.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
                let end = match service.map(|mut r| r.kill()) {
                    Some(Ok(status)) if status.signal() == Some(libc::SIGKILL) => {
                        format!("service start {start}: killed by signal 9 (SIGKILL) at {name}")
                    }
                    Some(Ok(status)) => format!(
                        "service start {start}: was to be killed at {name} but {}",
                        describe_status(status)
                    ),
                    Some(Err(e)) => format!("service start {start}: {e}"),
                    None => format!("service start {start}: gone before {name}"),
                };
                drop(slot);
                lock(shared).ends.push(end);
                return;
            }
        }
        if writer.write_all(b"go\n").is_err() {
            return;
        }
    }
}
