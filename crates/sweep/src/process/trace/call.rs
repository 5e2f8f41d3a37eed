//! One stopped call, read from the tracee: its operation, the paths or
//! peer it targets, and how it is shown in a timeline. Paths are resolved
//! as the kernel would (against the tracee's working directory or the
//! directory descriptor), then named relative to the world; a descriptor
//! is named by its link in `/proc/PID/fd`; a socket's peer by the address
//! the call passes or the socket's own (`getpeername` on a copy made with
//! `pidfd_getfd`). Strings and buffers are read with `process_vm_readv`.

use std::ffi::OsStr;
use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use super::select::Op;

/// What the tracer needs to name a call: the world and the service.
#[derive(Clone, Debug)]
pub(super) struct Names {
    /// The world directory, canonical.
    pub(super) world: PathBuf,
    /// The scenario's service, named `service` whatever its port.
    pub(super) service: Option<SocketAddr>,
    /// What every stop tells the disk record, when power cuts are swept.
    pub(super) record: Option<Recorder>,
}

/// A hook every stop calls first (the disk record's), before the call is
/// decoded as a point.
#[derive(Clone)]
pub(super) struct Recorder(pub(super) std::sync::Arc<OnStop>);

/// The hook's signature: the stopped thread, its call, the world's names.
pub(super) type OnStop = dyn Fn(Pid, &Regs, &Names) + Send + Sync;

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

/// A call that targets the world or a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) op: Op,
    /// World-relative paths (one, or two for rename and link), or the
    /// peer's name.
    pub(crate) targets: Vec<String>,
    /// The call with its arguments, for the timeline:
    /// `write(fd 4 → state.json, 12 bytes)`.
    pub(crate) shown: String,
}

/// The x86_64 system call at a seccomp stop: its number and six arguments.
pub(super) struct Regs {
    pub(super) nr: i64,
    pub(super) args: [u64; 6],
}

/// Read up to `len` bytes at `addr` in `pid` (fewer at an unmapped page).
pub(super) fn read_mem(pid: Pid, addr: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len.min(1 << 16));
    let mut at = addr;
    while out.len() < len {
        // Never across a page: one unmapped page fails the whole read.
        let page_left = 4096 - (at % 4096) as usize;
        let n = page_left.min(len - out.len());
        let mut buf = vec![0u8; n];
        let remote = [RemoteIoVec {
            base: at as usize,
            len: n,
        }];
        match process_vm_readv(pid, &mut [IoSliceMut::new(&mut buf)], &remote) {
            Ok(got) if got > 0 => {
                out.extend_from_slice(&buf[..got]);
                at += got as u64;
                if got < n {
                    break;
                }
            }
            _ => break,
        }
    }
    out
}

/// A NUL-terminated string at `addr` (at most `PATH_MAX` bytes).
pub(super) fn read_str(pid: Pid, addr: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < 4096 {
        let n = 4096 - (at % 4096) as usize;
        let chunk = read_mem(pid, at, n);
        if chunk.is_empty() {
            return None;
        }
        if let Some(end) = chunk.iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(out);
        }
        out.extend_from_slice(&chunk);
        at += chunk.len() as u64;
    }
    None
}

pub(super) fn read_u64(pid: Pid, addr: u64) -> Option<u64> {
    let b = read_mem(pid, addr, 8);
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

/// What descriptor `fd` of `pid` points at (`/abs/path`, `socket:[123]`,
/// `pipe:[4]`, `/dev/null`).
pub(super) fn fd_target(pid: Pid, fd: u64) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/fd/{}", fd as i32)).ok()
}

/// `path` as the kernel resolves it for `pid` relative to `dirfd`
/// (`AT_FDCWD` for the working directory): absolute, `.` and `..`
/// removed, its directory's symbolic links resolved when it exists.
pub(super) fn resolve(pid: Pid, dirfd: i64, path: &[u8]) -> Option<PathBuf> {
    let path = Path::new(OsStr::from_bytes(path));
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let base = if dirfd as i32 == libc::AT_FDCWD {
            std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?
        } else {
            fd_target(pid, dirfd as u64)?
        };
        base.join(path)
    };
    let mut norm = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                norm.pop();
            }
            Component::CurDir => {}
            other => norm.push(other),
        }
    }
    match (norm.parent(), norm.file_name()) {
        (Some(dir), Some(name)) => match std::fs::canonicalize(dir) {
            Ok(d) => Some(d.join(name)),
            Err(_) => Some(norm),
        },
        _ => Some(norm),
    }
}

impl Names {
    /// `path` relative to the world (`.` for the world itself), if inside.
    pub(super) fn relative(&self, path: &Path) -> Option<String> {
        let path = path
            .to_str()
            .map(|s| s.strip_suffix(" (deleted)").unwrap_or(s))
            .map(Path::new)?;
        let rel = path.strip_prefix(&self.world).ok()?;
        let s = rel.to_string_lossy().into_owned();
        Some(if s.is_empty() { ".".into() } else { s })
    }

    /// A path outside the world keeps its absolute form in a name.
    fn named(&self, path: &Path) -> String {
        self.relative(path)
            .unwrap_or_else(|| path.to_string_lossy().into_owned())
    }

    fn peer(&self, addr: SocketAddr) -> String {
        match self.service {
            Some(s) if s == addr || (s.port() == addr.port() && same_host(s.ip(), addr.ip())) => {
                "service".into()
            }
            _ => addr.to_string(),
        }
    }
}

fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a == b || (a.is_loopback() && b.is_loopback()) || a.is_unspecified() || b.is_unspecified()
}

/// A socket address read from the tracee: TCP/UDP peers only.
fn sockaddr(bytes: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(bytes.get(..2)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
            let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
        libc::AF_INET6 => {
            let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            let ip = Ipv6Addr::from(ip);
            let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
            Some(SocketAddr::new(ip, port))
        }
        _ => None,
    }
}

/// The process (thread group) of thread `tid`, from `/proc/TID/status`.
fn thread_group(tid: Pid) -> Option<Pid> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Tgid:"))?;
    line.trim().parse().ok().map(Pid::from_raw)
}

/// The peer of socket `fd` of `pid`: a copy of the socket in this process
/// (`pidfd_getfd`, allowed to its tracer), asked `getpeername`. `pid` may
/// be any thread's: `pidfd_open` takes its process's id.
fn socket_peer(pid: Pid, fd: u64) -> Option<SocketAddr> {
    let pid = thread_group(pid)?;
    // SAFETY: plain system calls on numbers; every descriptor made here is
    // closed here.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) as i32;
        if pidfd < 0 {
            return None;
        }
        let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd as i32, 0) as i32;
        libc::close(pidfd);
        if copy < 0 {
            return None;
        }
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let rc = libc::getpeername(
            copy,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        );
        libc::close(copy);
        if rc != 0 {
            return None;
        }
        let bytes = std::slice::from_raw_parts(
            (&storage as *const libc::sockaddr_storage).cast::<u8>(),
            len as usize,
        );
        sockaddr(bytes)
    }
}

fn is_socket(target: &Path) -> bool {
    target.as_os_str().as_bytes().starts_with(b"socket:")
}

/// The I/O call at this stop, if it targets the world or a TCP peer.
pub(super) fn decode(pid: Pid, r: &Regs, names: &Names) -> Option<Call> {
    if let Some(rec) = &names.record {
        (rec.0)(pid, r, names);
    }
    let d = Decoder {
        pid,
        nr: r.nr,
        a: r.args,
        names,
    };
    match r.nr {
        libc::SYS_open | libc::SYS_creat | libc::SYS_openat | libc::SYS_openat2 => d.open(),
        libc::SYS_write
        | libc::SYS_pwrite64
        | libc::SYS_writev
        | libc::SYS_pwritev
        | libc::SYS_pwritev2
        | libc::SYS_sendto
        | libc::SYS_sendmsg => d.write(),
        libc::SYS_ftruncate | libc::SYS_fsync | libc::SYS_fdatasync => d.on_fd(),
        libc::SYS_rename
        | libc::SYS_renameat
        | libc::SYS_renameat2
        | libc::SYS_link
        | libc::SYS_linkat => d.two_paths(),
        libc::SYS_truncate
        | libc::SYS_symlink
        | libc::SYS_symlinkat
        | libc::SYS_unlink
        | libc::SYS_unlinkat
        | libc::SYS_rmdir
        | libc::SYS_mkdir
        | libc::SYS_mkdirat => d.one_path(),
        libc::SYS_connect => d.connect(),
        _ => None,
    }
}

/// One stop's system call being read: the tracee, the call's number and
/// arguments, and the world's names.
struct Decoder<'a> {
    pid: Pid,
    nr: i64,
    a: [u64; 6],
    names: &'a Names,
}

const CWD: i64 = libc::AT_FDCWD as i64;

impl Decoder<'_> {
    /// The path at `addr`, resolved against `dirfd`, and its raw bytes.
    fn path_at(&self, dirfd: i64, addr: u64) -> Option<(PathBuf, Vec<u8>)> {
        let raw = read_str(self.pid, addr)?;
        Some((resolve(self.pid, dirfd, &raw)?, raw))
    }

    /// A call on one path of the world.
    fn one(&self, op: Op, name: &str, path: PathBuf, args: String) -> Option<Call> {
        let rel = self.names.relative(&path)?;
        Some(Call {
            op,
            shown: format!("{name}({rel}{args})"),
            targets: vec![rel],
        })
    }

    /// A call on two paths, at least one of them in the world.
    fn two(&self, op: Op, name: &str, from: PathBuf, to: PathBuf) -> Option<Call> {
        let names = self.names;
        if names.relative(&from).is_none() && names.relative(&to).is_none() {
            return None;
        }
        let (f, t) = (names.named(&from), names.named(&to));
        Some(Call {
            op,
            shown: format!("{name}({f}, {t})"),
            targets: vec![f, t],
        })
    }

    /// open, creat, openat, openat2: only a create or a truncate of a
    /// non-empty file changes the world.
    fn open(&self) -> Option<Call> {
        let (pid, a) = (self.pid, self.a);
        let (dirfd, addr, flags) = match self.nr {
            libc::SYS_open => (CWD, a[0], a[1]),
            libc::SYS_creat => (CWD, a[0], (libc::O_CREAT | libc::O_TRUNC) as u64),
            libc::SYS_openat => (a[0] as i64, a[1], a[2]),
            _ => (a[0] as i64, a[1], read_u64(pid, a[2])?),
        };
        let (path, _) = self.path_at(dirfd, addr)?;
        let flags = flags as i32;
        let meta = std::fs::symlink_metadata(&path).ok();
        let op = match meta {
            None if flags & libc::O_CREAT != 0 => Op::OpenCreate,
            Some(m) if flags & libc::O_TRUNC != 0 && m.is_file() && m.len() > 0 => Op::OpenTruncate,
            _ => return None,
        };
        let how = if op == Op::OpenCreate {
            "O_CREAT"
        } else {
            "O_TRUNC"
        };
        self.one(op, "open", path, format!(", {how}"))
    }

    /// The write family and the sends: a write to a file of the world, or
    /// a send to a peer.
    fn write(&self) -> Option<Call> {
        let fd = self.a[0];
        let target = fd_target(self.pid, fd)?;
        let call = match self.nr {
            libc::SYS_write => "write",
            libc::SYS_pwrite64 => "pwrite64",
            libc::SYS_writev => "writev",
            libc::SYS_pwritev => "pwritev",
            libc::SYS_pwritev2 => "pwritev2",
            libc::SYS_sendto => "sendto",
            _ => "sendmsg",
        };
        let size = self.write_size()?;
        if is_socket(&target) {
            let peer = self
                .names
                .peer(self.send_to()?.or_else(|| socket_peer(self.pid, fd))?);
            return Some(Call {
                op: Op::Send,
                shown: format!("{call}(fd {} → {peer}, {size} bytes)", fd as i32),
                targets: vec![peer],
            });
        }
        if size == 0 {
            return None;
        }
        let rel = self.names.relative(&target)?;
        Some(Call {
            op: Op::Write,
            shown: format!("{call}(fd {} → {rel}, {size} bytes)", fd as i32),
            targets: vec![rel],
        })
    }

    /// How many bytes a write or a send hands over.
    fn write_size(&self) -> Option<u64> {
        let (pid, a) = (self.pid, self.a);
        Some(match self.nr {
            libc::SYS_write | libc::SYS_pwrite64 | libc::SYS_sendto => a[2],
            libc::SYS_sendmsg => {
                // struct msghdr: name, namelen, iov, iovlen, …
                let iov = read_u64(pid, a[1] + 16)?;
                let n = read_u64(pid, a[1] + 24)?;
                iov_size(pid, iov, n)
            }
            _ => iov_size(pid, a[1], a[2]),
        })
    }

    /// The address a send names, if it names one (`Some(None)` when not;
    /// `None` when the message cannot be read).
    fn send_to(&self) -> Option<Option<SocketAddr>> {
        let (pid, a) = (self.pid, self.a);
        Some(match self.nr {
            libc::SYS_sendto if a[4] != 0 => {
                sockaddr(&read_mem(pid, a[4], (a[5] as usize).min(128)))
            }
            libc::SYS_sendmsg => {
                let name = read_u64(pid, a[1])?;
                let len = read_u64(pid, a[1] + 8)? as u32 as usize;
                if name != 0 {
                    sockaddr(&read_mem(pid, name, len.min(128)))
                } else {
                    None
                }
            }
            _ => None,
        })
    }

    /// ftruncate, fsync, fdatasync: a call on an open file of the world.
    fn on_fd(&self) -> Option<Call> {
        let a = self.a;
        let target = fd_target(self.pid, a[0])?;
        let rel = self.names.relative(&target)?;
        let (op, shown) = match self.nr {
            libc::SYS_ftruncate => (
                Op::Truncate,
                format!("ftruncate(fd {} → {rel}, {})", a[0] as i32, a[1]),
            ),
            libc::SYS_fsync => (Op::Fsync, format!("fsync(fd {} → {rel})", a[0] as i32)),
            _ => (Op::Fsync, format!("fdatasync(fd {} → {rel})", a[0] as i32)),
        };
        Some(Call {
            op,
            shown,
            targets: vec![rel],
        })
    }

    /// rename and link in their forms: a call on two paths.
    fn two_paths(&self) -> Option<Call> {
        let a = self.a;
        let (from, to) = match self.nr {
            libc::SYS_rename | libc::SYS_link => {
                (self.path_at(CWD, a[0])?.0, self.path_at(CWD, a[1])?.0)
            }
            _ => (
                self.path_at(a[0] as i64, a[1])?.0,
                self.path_at(a[2] as i64, a[3])?.0,
            ),
        };
        match self.nr {
            libc::SYS_rename | libc::SYS_renameat | libc::SYS_renameat2 => {
                self.two(Op::Rename, "rename", from, to)
            }
            _ => self.two(Op::Link, "link", from, to),
        }
    }

    /// truncate, symlink, unlink, rmdir, mkdir in their forms: a call on
    /// one path.
    fn one_path(&self) -> Option<Call> {
        let a = self.a;
        let none = String::new;
        match self.nr {
            libc::SYS_truncate => {
                let (path, _) = self.path_at(CWD, a[0])?;
                self.one(Op::Truncate, "truncate", path, format!(", {}", a[1]))
            }
            libc::SYS_symlink | libc::SYS_symlinkat => {
                let content = read_str(self.pid, a[0])?;
                let (path, _) = match self.nr {
                    libc::SYS_symlink => self.path_at(CWD, a[1])?,
                    _ => self.path_at(a[1] as i64, a[2])?,
                };
                let content = String::from_utf8_lossy(&content).into_owned();
                self.one(Op::Symlink, "symlink", path, format!(" → {content}"))
            }
            libc::SYS_unlink => self.one(Op::Unlink, "unlink", self.path_at(CWD, a[0])?.0, none()),
            libc::SYS_unlinkat => {
                let (path, _) = self.path_at(a[0] as i64, a[1])?;
                if a[2] as i32 & libc::AT_REMOVEDIR != 0 {
                    self.one(Op::Rmdir, "rmdir", path, none())
                } else {
                    self.one(Op::Unlink, "unlink", path, none())
                }
            }
            libc::SYS_rmdir => self.one(Op::Rmdir, "rmdir", self.path_at(CWD, a[0])?.0, none()),
            libc::SYS_mkdir => self.one(Op::Mkdir, "mkdir", self.path_at(CWD, a[0])?.0, none()),
            _ => {
                let (path, _) = self.path_at(a[0] as i64, a[1])?;
                self.one(Op::Mkdir, "mkdir", path, none())
            }
        }
    }

    /// connect: a call that reaches a peer.
    fn connect(&self) -> Option<Call> {
        let a = self.a;
        let addr = sockaddr(&read_mem(self.pid, a[1], (a[2] as usize).min(128)))?;
        let peer = self.names.peer(addr);
        Some(Call {
            op: Op::Connect,
            shown: format!("connect(fd {} → {peer} at {addr})", a[0] as i32),
            targets: vec![peer],
        })
    }
}

/// The bytes `n` iovecs at `iov` hold.
fn iov_size(pid: Pid, iov: u64, n: u64) -> u64 {
    let bytes = read_mem(pid, iov, (n.min(1024) * 16) as usize);
    bytes
        .chunks_exact(16)
        .filter_map(|c| c[8..16].try_into().ok().map(u64::from_ne_bytes))
        .sum()
}

/// The bytes `n` iovecs at `iov` hold, read from the tracee.
pub(super) fn iov_data(pid: Pid, iov: u64, n: u64) -> Vec<u8> {
    let bytes = read_mem(pid, iov, (n.min(1024) * 16) as usize);
    let mut out = Vec::new();
    for c in bytes.chunks_exact(16) {
        let (Ok(base), Ok(len)) = (c[..8].try_into(), c[8..16].try_into()) else {
            break;
        };
        let (base, len) = (u64::from_ne_bytes(base), u64::from_ne_bytes(len));
        let got = read_mem(pid, base, len as usize);
        let short = got.len() as u64 != len;
        out.extend_from_slice(&got);
        if short {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_named_service_or_host_port() {
        let names = Names {
            world: PathBuf::from("/w"),
            service: Some("127.0.0.1:4000".parse().unwrap()),
            record: None,
        };
        assert_eq!(names.peer("127.0.0.1:4000".parse().unwrap()), "service");
        assert_eq!(names.peer("[::1]:4000".parse().unwrap()), "service");
        assert_eq!(names.peer("10.0.0.1:80".parse().unwrap()), "10.0.0.1:80");
    }

    #[test]
    fn paths_are_named_relative_to_the_world() {
        let names = Names {
            world: PathBuf::from("/w/world"),
            service: None,
            record: None,
        };
        assert_eq!(
            names.relative(Path::new("/w/world/a/b.json")).as_deref(),
            Some("a/b.json")
        );
        assert_eq!(names.relative(Path::new("/w/world")).as_deref(), Some("."));
        assert_eq!(
            names.relative(Path::new("/w/world/x (deleted)")).as_deref(),
            Some("x")
        );
        assert_eq!(names.relative(Path::new("/w/worlds/x")), None);
        assert_eq!(names.relative(Path::new("/dev/null")), None);
    }

    #[test]
    fn a_sockaddr_is_read_as_the_kernel_lays_it_out() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&8080u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(sockaddr(&v4), Some("127.0.0.1:8080".parse().unwrap()));
        let mut unix = vec![0u8; 16];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(sockaddr(&unix), None);
    }
}
