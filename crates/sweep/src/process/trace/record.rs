//! The disk record's side of a stop: the call the tracee is about to make
//! on its world, read with its data (`process_vm_readv`), its offset (the
//! call's own, or the descriptor's position and `O_APPEND` flag from
//! `/proc/PID/fdinfo`) and its barriers (`fsync` of a file or a directory,
//! `sync`, `syncfs`, a descriptor opened `O_SYNC` or `O_DSYNC`). What the
//! record cannot model is named: a writable shared mapping of a world file,
//! `io_uring`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::unistd::Pid;

use super::call::{
    fd_target, iov_data, read_mem, read_str, read_u64, resolve, Names, Recorder, Regs,
};
use crate::process::disk::{Call, DiskRecord, Kind};

const CWD: i64 = libc::AT_FDCWD as i64;

/// The hook of a recording tracer: at every stop, commit the call of the
/// last stop into `rec`, and hold this one's until it is known to have run.
pub(super) fn recorder(rec: Arc<Mutex<DiskRecord>>) -> Recorder {
    Recorder(Arc::new(move |pid, r, names| {
        let call = Reader { pid, r, names }.call();
        rec.lock().unwrap_or_else(|e| e.into_inner()).stop(call);
    }))
}

/// `pos:` and `flags:` of a descriptor, from `/proc/PID/fdinfo/FD`.
fn fdinfo(pid: Pid, fd: u64) -> Option<(u64, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd as i32)).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_owned())
    };
    let pos = field("pos:")?.parse().ok()?;
    let flags = i32::from_str_radix(&field("flags:")?, 8).ok()?;
    Some((pos, flags))
}

struct Reader<'a> {
    pid: Pid,
    r: &'a Regs,
    names: &'a Names,
}

impl Reader<'_> {
    fn rel(&self, path: &Path) -> Option<String> {
        self.names.relative(path).filter(|r| r != ".")
    }

    fn path(&self, dirfd: i64, addr: u64) -> Option<PathBuf> {
        resolve(self.pid, dirfd, &read_str(self.pid, addr)?)
    }

    fn fd_name(&self, fd: u64) -> Option<(PathBuf, String)> {
        let target = fd_target(self.pid, fd)?;
        let rel = self.names.relative(&target)?;
        Some((target, rel))
    }

    fn call(&self) -> Option<Call> {
        let a = self.r.args;
        match self.r.nr {
            libc::SYS_open => self.open(CWD, a[0], a[1] as i32),
            libc::SYS_creat => self.open(CWD, a[0], libc::O_CREAT | libc::O_TRUNC),
            libc::SYS_openat => self.open(a[0] as i64, a[1], a[2] as i32),
            libc::SYS_openat2 => self.open(a[0] as i64, a[1], read_u64(self.pid, a[2])? as i32),
            libc::SYS_write
            | libc::SYS_pwrite64
            | libc::SYS_writev
            | libc::SYS_pwritev
            | libc::SYS_pwritev2 => self.write(),
            libc::SYS_ftruncate => Some(Call::SetLen(self.fd_name(a[0])?.1, a[1])),
            libc::SYS_truncate => Some(Call::SetLen(self.rel(&self.path(CWD, a[0])?)?, a[1])),
            libc::SYS_fallocate => {
                let (_, name) = self.fd_name(a[0])?;
                let mode = a[1] as i32;
                if mode == 0 {
                    Some(Call::Grow(name, a[2].saturating_add(a[3])))
                } else if mode == libc::FALLOC_FL_KEEP_SIZE {
                    None
                } else {
                    Some(Call::Unmodelled(format!(
                        "fallocate(mode {mode:#x}) on {name}: not modelled (its bytes are not recorded)"
                    )))
                }
            }
            libc::SYS_fsync | libc::SYS_fdatasync => {
                let (target, name) = self.fd_name(a[0])?;
                if name == "." || target.is_dir() {
                    Some(Call::SyncNames)
                } else {
                    Some(Call::SyncFile(name))
                }
            }
            libc::SYS_sync | libc::SYS_syncfs => Some(Call::SyncAll),
            libc::SYS_rename => self.rename(CWD, a[0], CWD, a[1], 0),
            libc::SYS_renameat => self.rename(a[0] as i64, a[1], a[2] as i64, a[3], 0),
            libc::SYS_renameat2 => self.rename(a[0] as i64, a[1], a[2] as i64, a[3], a[4]),
            libc::SYS_link => self.link(CWD, a[0], CWD, a[1]),
            libc::SYS_linkat => self.link(a[0] as i64, a[1], a[2] as i64, a[3]),
            libc::SYS_unlink | libc::SYS_rmdir => Some(Call::Remove(self.rel(&self.path(CWD, a[0])?)?)),
            libc::SYS_unlinkat => Some(Call::Remove(self.rel(&self.path(a[0] as i64, a[1])?)?)),
            libc::SYS_mkdir => self.create(&self.path(CWD, a[0])?, Kind::Dir),
            libc::SYS_mkdirat => self.create(&self.path(a[0] as i64, a[1])?, Kind::Dir),
            libc::SYS_symlink | libc::SYS_symlinkat => {
                let target = String::from_utf8_lossy(&read_str(self.pid, a[0])?).into_owned();
                let path = match self.r.nr {
                    libc::SYS_symlink => self.path(CWD, a[1])?,
                    _ => self.path(a[1] as i64, a[2])?,
                };
                self.create(&path, Kind::Symlink(target))
            }
            libc::SYS_mmap => {
                // The filter stops only MAP_SHARED with PROT_WRITE.
                let (_, name) = self.fd_name(a[4])?;
                Some(Call::Unmodelled(format!(
                    "a writable shared mapping of {name}: writes through it are not recorded (a power cut keeps them as the last write or sync left the file)"
                )))
            }
            libc::SYS_io_uring_setup => Some(Call::Unmodelled(
                "io_uring: its writes are not recorded (a power cut keeps none of them unless synced by a recorded call)".into(),
            )),
            _ => None,
        }
    }

    fn create(&self, path: &Path, kind: Kind) -> Option<Call> {
        if std::fs::symlink_metadata(path).is_ok() {
            return None;
        }
        Some(Call::Create(self.rel(path)?, kind))
    }

    /// An open: a create of an absent file, a truncate of an existing one.
    fn open(&self, dirfd: i64, addr: u64, flags: i32) -> Option<Call> {
        let path = self.path(dirfd, addr)?;
        let name = self.rel(&path)?;
        match std::fs::metadata(&path) {
            Err(_) if flags & libc::O_CREAT != 0 => Some(Call::Create(name, Kind::File(0o644))),
            Ok(m) if flags & libc::O_TRUNC != 0 && m.is_file() && m.len() > 0 => {
                Some(Call::SetLen(name, 0))
            }
            _ => None,
        }
    }

    /// The write family on a file of the world, with its bytes.
    fn write(&self) -> Option<Call> {
        let (pid, a) = (self.pid, self.r.args);
        let (target, name) = self.fd_name(a[0])?;
        if !target.is_file() {
            return None;
        }
        let (pos, flags) = fdinfo(pid, a[0])?;
        let data: Vec<u8> = match self.r.nr {
            libc::SYS_write | libc::SYS_pwrite64 => read_mem(pid, a[1], a[2] as usize),
            _ => iov_data(pid, a[1], a[2]),
        };
        if data.is_empty() {
            return None;
        }
        let own = match self.r.nr {
            libc::SYS_pwrite64 | libc::SYS_pwritev => Some(a[3]),
            libc::SYS_pwritev2 if a[3] as i64 != -1 => Some(a[3]),
            _ => None,
        };
        let append = flags & libc::O_APPEND != 0;
        let at = match own {
            Some(at) => Some(at),
            None if append => None,
            None => Some(pos),
        };
        Some(Call::Write {
            name,
            at,
            data: Arc::from(data),
            sync: flags & libc::O_DSYNC != 0,
        })
    }

    fn rename(&self, fd1: i64, a1: u64, fd2: i64, a2: u64, flags: u64) -> Option<Call> {
        let from = self.rel(&self.path(fd1, a1)?)?;
        let to_path = self.path(fd2, a2)?;
        let to = self.rel(&to_path)?;
        let exchange = flags & u64::from(libc::RENAME_EXCHANGE) != 0;
        if flags & u64::from(libc::RENAME_NOREPLACE) != 0
            && std::fs::symlink_metadata(&to_path).is_ok()
        {
            return None;
        }
        Some(Call::Rename { from, to, exchange })
    }

    fn link(&self, fd1: i64, a1: u64, fd2: i64, a2: u64) -> Option<Call> {
        let from = self.rel(&self.path(fd1, a1)?)?;
        let to = self.rel(&self.path(fd2, a2)?)?;
        Some(Call::Link(from, to))
    }
}
