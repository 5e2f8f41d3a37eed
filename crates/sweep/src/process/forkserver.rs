//! The harness's side of a fork server (point protocol, version 2): the
//! program started once and run to its `ready()` (imports, set-up), then a
//! child forked from it for every life instead of a new process.
//!
//! The server is started lazily, once per [`Process`], in a copy of the
//! world template of its own. Each life sends it `fork <n>` with four
//! descriptors (standard input, output, error and the life's end of the
//! point protocol's socket pair) and `n` bytes: the world directory and the
//! life's environment, separated by NUL. The server answers `pid <pid>`,
//! and `exit <pid> <status>` when it reaps the child. A crash is what it is
//! for an exec'd life: `SIGKILL` to the child, whose wait status the
//! server reports, checked for signal 9.
//!
//! A server whose lives are traced (I/O points) speaks version 3: each
//! request is `fork <n> <m>`, with the tracer's seccomp filter in `m`
//! bytes after the payload. The child waits for `seized` on its point
//! descriptor, written once the life's tracer has seized it
//! (`trace::relay`), then installs the filter and runs.
//!
//! What a [`Process`](super::Process) does with it — when lives are
//! forked, and the check that they equal exec'd lives — is in `forking`.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::child::{describe_status, pass_fd, show_argv, tail, Reaped};
use super::{DIE_AT_VAR, FD_VAR, VERSION_VAR};

pub use crashpoint::protocol::{FORK_SERVER_VERSION, TRACED_FORK_SERVER_VERSION};

/// How long a program may take to reach `ready()`.
const READY_LIMIT: Duration = Duration::from_secs(300);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A [`Process`]'s fork server: whether it is wanted, whether the check
/// passed, and the server once started.
#[derive(Default)]
pub(super) struct ForkSlot {
    pub(super) wanted: bool,
    /// Set by the check (`Process::check_fork_server`): lives may be forked.
    pub(super) checked: AtomicBool,
    server: Mutex<Option<Arc<ForkServer>>>,
}

impl fmt::Debug for ForkSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForkSlot")
            .field("wanted", &self.wanted)
            .field("checked", &self.checked.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Whether the judge is forked: not tried yet, forked from its server, or
/// started per scenario (and why).
#[derive(Debug, Default)]
pub(super) enum JudgeFork {
    #[default]
    Untried,
    Forked(Arc<ForkServer>),
    Exec(String),
}

/// A [`Process`]'s judge fork server, tried at the first judge.
#[derive(Debug, Default)]
pub(super) struct JudgeSlot(pub(super) Mutex<JudgeFork>);

/// What the server's reader thread shares with the lives.
#[derive(Debug, Default)]
struct State {
    /// Answers to fork requests, in order (one request at a time).
    replies: VecDeque<Result<u32, String>>,
    /// Raw wait statuses of children the server reaped, not yet taken.
    ended: HashMap<u32, i32>,
    /// Why the server is gone, once it is.
    gone: Option<String>,
}

/// A running fork server.
pub(super) struct ForkServer {
    control: Mutex<UnixStream>,
    state: Arc<(Mutex<State>, Condvar)>,
    server: Mutex<Option<Child>>,
    shown: String,
    /// Protocol 3: every request carries a filter.
    traced: bool,
    // Last: removed after the server is killed.
    _dir: tempfile::TempDir,
}

impl fmt::Debug for ForkServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ForkServer({})", self.shown)
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        if let Some(mut c) = lock(&self.server).take() {
            let _ = c.kill();
            let _ = c.wait();
            super::child::reaped(c.id());
        }
    }
}

/// A life forked by a server: killed and reaped if dropped while running.
#[derive(Debug)]
pub(super) struct Forked {
    pid: u32,
    server: Arc<ForkServer>,
    reaped: bool,
}

impl Reaped for Forked {
    fn id(&self) -> u32 {
        self.pid
    }

    /// Its end, if the server has reported it.
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let (m, _) = &*self.server.state;
        let mut s = lock(m);
        if let Some(raw) = s.ended.remove(&self.pid) {
            self.reaped = true;
            return Ok(Some(ExitStatus::from_raw(raw)));
        }
        match &s.gone {
            Some(why) => Err(std::io::Error::other(why.clone())),
            None => Ok(None),
        }
    }

    /// `SIGKILL` (unless it has ended), then its end as the server reports it.
    fn kill(&mut self) -> std::io::Result<ExitStatus> {
        self.signal_then_wait(true)
    }
}

impl Forked {
    /// Its end as the server reports it, waiting for it.
    pub(super) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.signal_then_wait(false)
    }

    /// `SIGKILL` first if `kill` (unless it has ended), then its end.
    fn signal_then_wait(&mut self, kill: bool) -> std::io::Result<ExitStatus> {
        let (m, cv) = &*self.server.state;
        let mut s = lock(m);
        if kill && !s.ended.contains_key(&self.pid) {
            if let Ok(pid) = i32::try_from(self.pid) {
                // SAFETY: kill(2) on the server's child, not yet reaped by
                // the server (it has not reported the end), so the id is
                // still its own.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        loop {
            if let Some(raw) = s.ended.remove(&self.pid) {
                self.reaped = true;
                return Ok(ExitStatus::from_raw(raw));
            }
            if let Some(why) = &s.gone {
                self.reaped = true;
                return Err(std::io::Error::other(why.clone()));
            }
            s = cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill();
        }
    }
}

impl ForkSlot {
    /// The server, started by `start` the first time.
    pub(super) fn started(
        &self,
        start: impl FnOnce() -> Result<ForkServer, String>,
    ) -> Result<Arc<ForkServer>, String> {
        let mut slot = lock(&self.server);
        if let Some(s) = &*slot {
            return Ok(Arc::clone(s));
        }
        let s = Arc::new(start()?);
        *slot = Some(Arc::clone(&s));
        Ok(s)
    }
}

impl ForkServer {
    /// Start `argv` with protocol 2 (3 if its lives are `traced`) in
    /// `dir`'s `world` (made by the caller), with `env` on top of this
    /// process's, and wait for its `ready`.
    pub(super) fn start(
        argv: &[OsString],
        env: &[(OsString, OsString)],
        dir: tempfile::TempDir,
        traced: bool,
    ) -> Result<ForkServer, String> {
        let shown = show_argv(argv);
        let Some((program, args)) = argv.split_first() else {
            return Err("the program's command line is empty".into());
        };
        let world = dir.path().join("world");
        let io = |e: std::io::Error| format!("the fork server {shown}: {e}");
        let err_path = dir.path().join("server.err");
        let (ours, theirs) = UnixStream::pair().map_err(io)?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&world)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env(FD_VAR, "3")
            .env(
                VERSION_VAR,
                if traced {
                    TRACED_FORK_SERVER_VERSION
                } else {
                    FORK_SERVER_VERSION
                },
            )
            .env_remove(DIE_AT_VAR)
            .stdin(Stdio::null())
            .stdout(File::create(dir.path().join("server.out")).map_err(io)?)
            .stderr(File::create(&err_path).map_err(io)?);
        pass_fd(&mut cmd, theirs.as_raw_fd());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("the fork server {shown} could not start: {e}"))?;
        super::child::started(child.id());
        drop(theirs);
        Self::wait_ready(&ours, &mut child, &shown, &err_path)
            .inspect_err(|_| super::child::reaped(child.id()))?;
        ours.set_read_timeout(None).map_err(io)?;
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let reader = ours.try_clone().map_err(io)?;
        {
            let state = Arc::clone(&state);
            let shown = shown.clone();
            std::thread::spawn(move || read_replies(reader, &state, &shown));
        }
        Ok(ForkServer {
            control: Mutex::new(ours),
            state,
            server: Mutex::new(Some(child)),
            shown,
            traced,
            _dir: dir,
        })
    }

    /// Wait for the server's `ready`, with one thread only; else it is
    /// killed and the error says why, with its stderr's tail.
    fn wait_ready(
        ours: &UnixStream,
        child: &mut Child,
        shown: &str,
        err_path: &Path,
    ) -> Result<(), String> {
        let refuse = |child: &mut Child, why: String| {
            let _ = child.kill();
            let status = child.wait().map(describe_status).unwrap_or_default();
            let err = std::fs::read_to_string(err_path).unwrap_or_default();
            format!("the fork server {shown} {why} (it {status}){}", tail(&err))
        };
        let first = match first_line(ours, child) {
            Ok(line) => line,
            Err(why) => return Err(refuse(child, why)),
        };
        if first != "ready" {
            return Err(refuse(
                child,
                format!("wrote {first:?} before `ready`: call ready() before any point"),
            ));
        }
        let threads = threads_of(child.id());
        if threads.len() > 1 {
            return Err(refuse(
                child,
                format!(
                    "had {} threads at ready() ({}): a fork server forks one thread only",
                    threads.len(),
                    threads.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Fork a life in `dir` with `env`, its streams and its point socket;
    /// a server of traced lives needs the `filter` the child installs once
    /// seized, any other none.
    pub(super) fn fork(
        self: &Arc<Self>,
        dir: &Path,
        env: &[(OsString, OsString)],
        streams: [&File; 3],
        point: &UnixStream,
        filter: Option<&[u8]>,
    ) -> Result<Forked, String> {
        if filter.is_some() != self.traced {
            return Err(format!(
                "the fork server {} was started for {} lives, and asked for {} one",
                self.shown,
                if self.traced { "traced" } else { "untraced" },
                if self.traced {
                    "an untraced"
                } else {
                    "a traced"
                },
            ));
        }
        let mut payload = dir.as_os_str().as_bytes().to_vec();
        for (k, v) in env {
            payload.push(0);
            payload.extend_from_slice(k.as_bytes());
            payload.push(b'=');
            payload.extend_from_slice(v.as_bytes());
        }
        let mut message = match filter {
            Some(f) => format!("fork {} {}\n", payload.len(), f.len()),
            None => format!("fork {}\n", payload.len()),
        }
        .into_bytes();
        message.extend(payload);
        message.extend(filter.unwrap_or_default());
        let fds = [
            streams[0].as_raw_fd(),
            streams[1].as_raw_fd(),
            streams[2].as_raw_fd(),
            point.as_raw_fd(),
        ];
        let control = lock(&self.control);
        let (m, cv) = &*self.state;
        if let Some(why) = &lock(m).gone {
            return Err(why.clone());
        }
        send_with_fds(&control, &message, &fds)
            .map_err(|e| format!("the fork server {}: {e}", self.shown))?;
        let mut s = lock(m);
        loop {
            if let Some(reply) = s.replies.pop_front() {
                drop(s);
                drop(control);
                return reply
                    .map(|pid| Forked {
                        pid,
                        server: Arc::clone(self),
                        reaped: false,
                    })
                    .map_err(|e| format!("the fork server {} could not fork: {e}", self.shown));
            }
            if let Some(why) = &s.gone {
                return Err(why.clone());
            }
            s = cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The server's first line, read while it runs to `ready()`.
fn first_line(ours: &UnixStream, child: &mut Child) -> Result<String, String> {
    ours.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(ours);
    let mut line = Vec::new();
    let end = Instant::now() + READY_LIMIT;
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            Ok(_) => return Err("ended before ready()".into()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Ok(Some(_)) = child.try_wait() {
                    return Err("ended before ready()".into());
                }
                if Instant::now() > end {
                    return Err(format!(
                        "did not reach ready() in {} s",
                        READY_LIMIT.as_secs()
                    ));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The threads of process `pid`, by name and task id.
fn threads_of(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, String)> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .map(|tid| {
            let comm =
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
            (
                tid.parse().unwrap_or(0),
                format!("{} (task {tid})", comm.trim()),
            )
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, n)| n).collect()
}

/// The reader thread: `pid`, `error` and `exit` lines into the state.
fn read_replies(control: UnixStream, state: &(Mutex<State>, Condvar), shown: &str) {
    let (m, cv) = state;
    let mut reader = BufReader::new(control);
    let mut line = String::new();
    let why = loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => break format!("the fork server {shown} ended"),
            Ok(_) => {}
            Err(e) => break format!("the fork server {shown}: {e}"),
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut s = lock(m);
        match words.as_slice() {
            ["pid", pid] if pid.parse::<u32>().is_ok() => {
                s.replies.push_back(Ok(pid.parse().unwrap_or(0)));
            }
            ["exit", pid, status] => match (pid.parse(), status.parse()) {
                (Ok(pid), Ok(status)) => {
                    s.ended.insert(pid, status);
                }
                _ => break format!("the fork server {shown} wrote {:?}", line.trim()),
            },
            ["error", ..] => {
                let text = line.trim().trim_start_matches("error").trim().to_owned();
                s.replies.push_back(Err(text));
            }
            _ => break format!("the fork server {shown} wrote {:?}", line.trim()),
        }
        cv.notify_all();
    };
    lock(m).gone = Some(why);
    cv.notify_all();
}

/// Write `data` with `fds` attached (`SCM_RIGHTS`) to its first byte.
fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE and CMSG_LEN are pure computations.
    let (space, len) = unsafe {
        (
            libc::CMSG_SPACE(fd_bytes as u32) as usize,
            libc::CMSG_LEN(fd_bytes as u32),
        )
    };
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr pointing at live buffers (the data is only
    // read); the one control message is filled with the CMSG macros inside
    // a buffer of CMSG_SPACE bytes.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = len as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
        loop {
            let n = libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
            if n >= 0 {
                break n as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(e);
            }
        }
    };
    let mut rest = &data[sent.min(data.len())..];
    let mut sock = sock;
    while !rest.is_empty() {
        let n = sock.write(rest)?;
        rest = &rest[n..];
    }
    Ok(())
}

/// How a life is run, for [`Process::check_fork_server`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Via {
    /// As a new process.
    Exec,
    /// Forked from the server.
    Fork,
}
