//! The program's side of a fork server (point protocol, version 2):
//! [`ready`] ends the program's set-up, and under a harness that asked for a
//! fork server the program forks there once per life.
//!
//! The harness starts the program with `CRASHSWEEP_PROTOCOL=2` and
//! `CRASHSWEEP_FD` naming a Unix stream socket, the server's control
//! channel. At [`ready`] the program (on its only thread) writes `ready`,
//! then serves: for each `fork <n>` request, which carries four descriptors
//! (standard input, output, error and the life's point descriptor) and `n`
//! bytes (the world directory and the environment, separated by NUL), it
//! forks. The parent answers `pid <pid>` and later `exit <pid> <status>`
//! when it reaps the child. The child takes the streams, enters the
//! directory, takes the environment and returns from [`ready`] as a life
//! speaking protocol version 1 on its point descriptor.
//!
//! Version 3 is version 2 for a harness that traces its lives (I/O points):
//! each request is `fork <n> <m>`, whose `m` bytes after the payload are a
//! seccomp-bpf filter. The child reads `seized` from its point descriptor
//! (the harness's tracer has seized it), installs the filter, and only then
//! returns from [`ready`]. The full protocol is in the repository's
//! `docs/point-protocol.md`.

use std::io::Write;

use crate::protocol::{
    EXIT_LOST, EXIT_USAGE, FD_VAR, FORK_SERVER_VERSION, TRACED_FORK_SERVER_VERSION, VERSION,
    VERSION_VAR,
};

/// The end of the program's set-up (imports, configuration): under a
/// harness that asked for a fork server, the program forks here for every
/// life, and each child returns from this call in its life's world
/// directory, with its environment, standard streams and point descriptor.
///
/// Call it once, on the only thread, before any point and before reading
/// anything of the world: a child starts with the memory the program had
/// here, so state read before it would leak into every life. More than one
/// thread alive is refused: the program prints their names and exits with
/// status 2.
///
/// Without a harness, under protocol version 1, after a point, or called a
/// second time, it does nothing.
pub fn ready() {
    #[cfg(unix)]
    unix::ready();
}

fn die(code: i32, message: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "crashsweep: {message}");
    std::process::exit(code)
}

#[cfg(unix)]
mod unix {
    use std::ffi::{OsStr, OsString};
    use std::io::Write;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    use super::{
        die, EXIT_LOST, EXIT_USAGE, FD_VAR, FORK_SERVER_VERSION, TRACED_FORK_SERVER_VERSION,
        VERSION, VERSION_VAR,
    };

    /// The write end of the self-pipe a `SIGCHLD` wakes the server with.
    static WAKE: AtomicI32 = AtomicI32::new(-1);
    /// Whether `ready` ran in this process (or its parent, for a child).
    static DONE: AtomicBool = AtomicBool::new(false);

    pub(super) fn ready() {
        if DONE.swap(true, Ordering::SeqCst) || crate::protocol::chosen() {
            return;
        }
        let (Some(fd), Some(version)) = (std::env::var_os(FD_VAR), std::env::var_os(VERSION_VAR))
        else {
            return;
        };
        let traced = version == TRACED_FORK_SERVER_VERSION;
        if version != FORK_SERVER_VERSION && !traced {
            return;
        }
        alone();
        let fd = fd.to_string_lossy().into_owned();
        let control: i32 = match fd.trim().parse() {
            // SAFETY: fcntl(F_GETFD) only asks whether the number is open.
            Ok(n) if n > 2 && unsafe { libc::fcntl(n, libc::F_GETFD) } >= 0 => n,
            _ => die(
                EXIT_LOST,
                &format!("{FD_VAR}={fd:?} is not the fork server's open socket"),
            ),
        };
        std::env::remove_var(FD_VAR);
        std::env::remove_var(VERSION_VAR);
        // SAFETY: FD_CLOEXEC on a descriptor checked open above.
        unsafe { libc::fcntl(control, libc::F_SETFD, libc::FD_CLOEXEC) };
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        serve(control, traced);
    }

    /// Refuse (exit 2) unless this process has one thread.
    fn alone() {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::syscall(libc::SYS_gettid) }.to_string();
        let mut others: Vec<(u64, String)> = tasks
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|tid| *tid != me)
            .map(|tid| {
                let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .unwrap_or_default();
                (
                    tid.parse().unwrap_or(0),
                    format!("{} (task {tid})", comm.trim()),
                )
            })
            .collect();
        if others.is_empty() {
            return;
        }
        others.sort();
        let names: Vec<String> = others.into_iter().map(|(_, n)| n).collect();
        die(
            EXIT_USAGE,
            &format!(
                "ready(): {} other thread(s) are alive ({}); a fork server forks one thread only, \
                 so start threads after ready()",
                names.len(),
                names.join(", ")
            ),
        );
    }

    extern "C" fn on_sigchld(_: libc::c_int) {
        let fd = WAKE.load(Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking.
            unsafe { libc::write(fd, [0u8].as_ptr().cast(), 1) };
        }
    }

    fn send(control: i32, line: &[u8]) {
        let mut rest = line;
        while !rest.is_empty() {
            // SAFETY: writing from a live buffer to an open descriptor.
            let n = unsafe {
                libc::send(
                    control,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                // The harness is gone: the sweep is over.
                std::process::exit(0);
            }
            rest = &rest[n as usize..];
        }
    }

    /// The server's loop; returns in a child only. `traced`: protocol 3,
    /// each request carries the filter its child installs once seized.
    fn serve(control: i32, traced: bool) {
        let mut pipe = [0i32; 2];
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            die(EXIT_LOST, "the fork server cannot make its pipe");
        }
        WAKE.store(pipe[1], Ordering::SeqCst);
        set_sigchld(on_sigchld as *const () as usize);
        send(control, b"ready\n");
        loop {
            report_reaped(control);
            let mut fds = [
                libc::pollfd {
                    fd: control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pipe[0],
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: poll over a live two-element array.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue; // EINTR: a SIGCHLD
            }
            if fds[1].revents != 0 {
                let mut buf = [0u8; 64];
                // SAFETY: reading into a live buffer; the pipe is non-blocking.
                while unsafe { libc::read(pipe[0], buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
            }
            if fds[0].revents == 0 {
                continue;
            }
            let Some((passed, payload, filter)) = request(control, traced) else {
                std::process::exit(0); // the harness closed its end
            };
            // SAFETY: the process has one thread (checked at `ready`).
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                set_sigchld(libc::SIG_DFL);
                WAKE.store(-1, Ordering::SeqCst);
                // SAFETY: closing the server's own descriptors in the child.
                unsafe {
                    libc::close(pipe[0]);
                    libc::close(pipe[1]);
                    libc::close(control);
                }
                become_life(passed, &payload);
                if traced {
                    super::seized_then_filtered(passed[3], &filter);
                }
                return;
            }
            for fd in passed {
                // SAFETY: the child has its copies.
                unsafe { libc::close(fd) };
            }
            if pid < 0 {
                let e = std::io::Error::last_os_error();
                send(control, format!("error fork: {e}\n").as_bytes());
            } else {
                send(control, format!("pid {pid}\n").as_bytes());
            }
        }
    }

    /// Reap every child that has ended and tell the harness how.
    fn report_reaped(control: i32) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a status out-parameter.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            send(control, format!("exit {pid} {status}\n").as_bytes());
        }
    }

    fn set_sigchld(handler: usize) {
        // SAFETY: a zeroed sigaction with a handler that only writes to a
        // pipe, or SIG_DFL.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler;
            action.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        }
    }

    /// One `fork <n>` request (`fork <n> <m>` when `traced`): its four
    /// descriptors, its payload and its filter's `m` bytes; `None` at end
    /// of file.
    fn request(control: i32, traced: bool) -> Option<([i32; 4], Vec<u8>, Vec<u8>)> {
        let mut buf = vec![0u8; 1 << 16];
        let mut passed = [-1i32; 4];
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<[i32; 4]>() as u32) } as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr pointing at live buffers; recvmsg fills
        // them; the control messages are walked with the CMSG macros.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            let n = loop {
                let n = libc::recvmsg(control, &mut msg, libc::MSG_CMSG_CLOEXEC);
                if n >= 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break n;
                }
            };
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<i32>();
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                    for (i, slot) in passed.iter_mut().enumerate().take(count) {
                        *slot = data.add(i).read_unaligned();
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            n
        };
        if n <= 0 {
            return None;
        }
        let mut data = buf[..n as usize].to_vec();
        let header_end = loop {
            if let Some(i) = data.iter().position(|b| *b == b'\n') {
                break i;
            }
            data.extend(read_some(control)?);
        };
        let header = String::from_utf8_lossy(&data[..header_end]).into_owned();
        let (Some((len, filter_len)), true) =
            (lengths(&header, traced), passed.iter().all(|fd| *fd >= 0))
        else {
            let want = if traced { "fork <n> <m>" } else { "fork <n>" };
            die(
                EXIT_LOST,
                &format!(
                    "the fork server got {header:?}, not a request `{want}` with 4 descriptors"
                ),
            );
        };
        let mut payload = data.split_off(header_end + 1);
        while payload.len() < len + filter_len {
            payload.extend(read_some(control)?);
        }
        let filter = payload.split_off(len);
        Some((passed, payload, filter))
    }

    /// The lengths a request's header announces: `fork <n>`, or `fork <n>
    /// <m>` (`traced`, with `m` the filter's bytes).
    fn lengths(header: &str, traced: bool) -> Option<(usize, usize)> {
        let mut words = header.strip_prefix("fork ")?.split(' ');
        let n = words.next()?.parse().ok()?;
        let m = if traced {
            words.next()?.parse().ok()?
        } else {
            0
        };
        words.next().is_none().then_some((n, m))
    }

    fn read_some(fd: i32) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            // SAFETY: reading into a live buffer.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                buf.truncate(n as usize);
                return Some(buf);
            }
            if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return None;
            }
        }
    }

    /// In the child: the life's streams, directory and environment, and its
    /// point descriptor in `CRASHSWEEP_FD` (protocol 1), read at its first
    /// point as an exec'd life's is.
    fn become_life(passed: [i32; 4], payload: &[u8]) {
        for (i, fd) in passed[..3].iter().enumerate() {
            // SAFETY: dup2 onto the standard streams, then close the copy.
            unsafe {
                libc::dup2(*fd, i as i32);
                libc::close(*fd);
            }
        }
        let mut fields = payload.split(|b| *b == 0);
        let dir = fields.next().unwrap_or_default();
        if let Err(e) = std::env::set_current_dir(OsStr::from_bytes(dir)) {
            die(
                EXIT_LOST,
                &format!(
                    "cannot enter the life's directory {:?}: {e}",
                    OsStr::from_bytes(dir)
                ),
            );
        }
        for (key, _) in std::env::vars_os() {
            std::env::remove_var(key);
        }
        for field in fields {
            if let Some(eq) = field.iter().position(|b| *b == b'=').filter(|i| *i > 0) {
                let key = OsString::from_vec(field[..eq].to_vec());
                let value = OsString::from_vec(field[eq + 1..].to_vec());
                std::env::set_var(key, value);
            }
        }
        std::env::set_var(FD_VAR, passed[3].to_string());
        std::env::set_var(VERSION_VAR, VERSION);
    }
}

/// In a traced child (protocol 3): wait until the harness's tracer has
/// seized this process (`seized` on the point descriptor), then install
/// the filter it sent, so that every call it stops at has a tracer. Any
/// other answer exits with status 70: a life that is not traced must not
/// run as one that is.
#[cfg(unix)]
fn seized_then_filtered(point: i32, filter: &[u8]) {
    let mut line = Vec::new();
    while line.last() != Some(&b'\n') && line.len() < 16 {
        let mut byte = [0u8; 1];
        // SAFETY: reading one byte into a live buffer.
        let n = unsafe { libc::read(point, byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            line.push(byte[0]);
        } else if n == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            break;
        }
    }
    if line != b"seized\n" {
        die(
            crate::protocol::EXIT_LOST,
            &format!(
                "a traced life got {:?} instead of `seized` from its harness",
                String::from_utf8_lossy(&line)
            ),
        );
    }
    if let Err(e) = install_filter(filter) {
        die(
            crate::protocol::EXIT_LOST,
            &format!("a traced life could not install its seccomp filter: {e}"),
        );
    }
}

/// `PR_SET_NO_NEW_PRIVS`, then the seccomp-bpf program `filter` (its
/// instructions as the kernel lays them out, 8 bytes each).
#[cfg(target_os = "linux")]
fn install_filter(filter: &[u8]) -> std::io::Result<()> {
    if filter.is_empty() || filter.len() % 8 != 0 || filter.len() / 8 > usize::from(u16::MAX) {
        return Err(std::io::Error::other(format!(
            "{} bytes is no filter (8 bytes an instruction)",
            filter.len()
        )));
    }
    let prog: Vec<libc::sock_filter> = filter
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program from `fprog`, which (and the
    // instructions it points to) outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Seccomp filters are Linux's: elsewhere a traced life cannot run.
#[cfg(all(unix, not(target_os = "linux")))]
fn install_filter(_filter: &[u8]) -> std::io::Result<()> {
    Err(std::io::Error::other("seccomp filters are Linux's"))
}
