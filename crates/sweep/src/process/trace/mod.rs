//! The tracer: a process subject's view of its program's system calls, and
//! the I/O points it makes of them ([`Process::io_points`](super::Process::io_points)).
//!
//! The program runs under `ptrace` with a seccomp-bpf filter that stops it
//! only at the calls that may change the world or reach a peer (opens that
//! create or truncate, writes, truncates, syncs, renames, unlinks, mkdirs,
//! rmdirs, links, symlinks, connects, sends); every other call runs at full
//! speed. Threads, forks, vforks and execs are followed, and the whole tree
//! is one life (`PTRACE_O_EXITKILL`: nothing outlives the tracer). Each
//! stop before a selected call whose target is in the world directory, or
//! a TCP peer, is a hit of the point the call names:
//!
//! | call | point |
//! |---|---|
//! | `open(O_CREAT)` of an absent file | `open-create x` |
//! | `open(O_TRUNC)` of a non-empty file | `open-truncate x` |
//! | `write`, `pwrite64`, `writev`, `pwritev` | `write x` |
//! | `truncate`, `ftruncate` | `truncate x` |
//! | `fsync`, `fdatasync` | `fsync x` (`fsync .` for the world itself) |
//! | `rename`, `renameat`, `renameat2` | `rename a→b` |
//! | `unlink`, `rmdir`, `mkdir`, `link`, `symlink` (and their `at` forms) | `unlink x`, `rmdir d`, `mkdir d`, `link a→b`, `symlink x` |
//! | `connect` | `connect service` (the scenario's service, whatever its port), `connect 10.0.0.1:80` |
//! | `sendto`, `sendmsg`, a `write` on a TCP socket | `send service`, `send HOST:PORT` |
//!
//! Paths are relative to the world. Writes to the standard streams, pipes,
//! terminals, `/dev`, `/proc`, Unix sockets and files outside the world
//! are no points. Named points (the point protocol) and I/O points form one
//! sequence, relayed into the life's scope by the same function. The crash
//! lands before the call runs: the tracee is killed with `SIGKILL` at its
//! stop. What the tracer does not see is named, not hidden: writes through
//! a shared memory mapping, `io_uring`, and 32-bit programs (which the
//! filter's architecture check kills).
//!
//! Threads interleave their calls differently from run to run. A hit's
//! name is its point and its occurrence among that point's passes
//! (`write ledger.txt#2`), whichever thread made the call, and the clean
//! runs are compared by their hits as sets (see the runner's safety nets).
//! The crash's line in the timeline names the thread or process after the
//! first that made the call, by creation order (`before rename(a.tmp, a)
//! on thread 2`), and so does [`Listing`] for each I/O point: stable for a
//! program's own threads, not for a pool's, whose threads take work in any
//! order. Named points say nothing of their thread.
//!
//! A life forked from the fork server is traced too (point protocol 3):
//! the server's child waits on its point descriptor until the life's
//! tracer thread has seized it by its pid, then installs the filter the
//! fork request carried. The harness is its ancestor, so Yama's
//! `ptrace_scope` 1 allows it. From there it is traced as an exec'd life
//! is; calls before `ready()` are not.
//!
//! Linux on x86_64 only; elsewhere a sweep with I/O points is refused.

mod listing;
mod select;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod call;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod filter;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod forked;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod record;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod relay;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tracer;

pub use listing::Listing;
pub use select::{IoPoints, Op, SelectError};

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(super) use relay::{life, probe};

/// How a traced life starts.
pub(in crate::process) enum Start<'a> {
    /// Spawn this command (set up by the life: argv, directory,
    /// environment, logs, the protocol's descriptor), seized between fork
    /// and exec.
    Exec(std::process::Command),
    /// Ask the fork server (point protocol 3) for a child of the world,
    /// with the program's end of the point protocol, that installs this
    /// filter (its bytes) once seized; the child is kept (and killed if
    /// need be) until the life ends.
    Fork(Box<ForkLife<'a>>),
}

/// A fork server's request for one traced life: the world, the program's
/// end of the point protocol, the filter's bytes.
pub(in crate::process) type ForkLife<'a> = dyn FnOnce(
        &super::ProcessWorld,
        &std::os::unix::net::UnixStream,
        Vec<u8>,
    ) -> Result<super::forkserver::Forked, String>
    + 'a;

/// What the tracer thread and the protocol reader tell the life's thread.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
enum Event {
    /// A stop before an I/O call: the tracee waits for `true` (go on) or
    /// `false` (die here).
    Io {
        /// The point's name (`rename a.tmp→a`), masked.
        point: String,
        /// The call with its arguments, for the timeline.
        shown: String,
        /// The thread or process after the first that made the call
        /// (`thread 2`), by creation order; `None` for the first.
        who: Option<String>,
        /// The answer.
        reply: std::sync::mpsc::Sender<bool>,
    },
    /// A named point over the point protocol: the same answer.
    Named(String, std::sync::mpsc::Sender<bool>),
    /// The protocol descriptor is closed (every holder is gone).
    Eof,
    /// The program wrote something that is not a hit.
    Protocol(String),
    /// The main process ended so (and the whole tree is gone).
    Exited(std::process::ExitStatus),
    /// The tracer failed (the tree is killed and reaped).
    Failed(String),
}

/// Where the tracer cannot run: why.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) fn unsupported() -> String {
    format!(
        "I/O points need the tracer, which runs on Linux on x86_64 only; this is {} on {}: sweep with named points instead",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Whether a program can be traced here: `Err` with the setting that
/// forbids it.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) fn probe() -> Result<(), String> {
    Err(unsupported())
}

/// A traced life where the tracer cannot run: refused.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) fn life(
    _start: Start<'_>,
    _ours: std::os::unix::net::UnixStream,
    _theirs: std::os::unix::net::UnixStream,
    _world: &mut super::ProcessWorld,
    _life: u32,
    _shown: String,
    _io: &std::sync::Arc<IoPoints>,
) -> Result<(), crate::error::LifeError> {
    Err(unsupported().into())
}
