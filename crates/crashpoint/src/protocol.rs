//! The point protocol's client: how a real process reports its hits to a
//! harness that runs it as a child, so the harness can kill it with
//! `SIGKILL` exactly at a chosen hit.
//!
//! A harness (`sweep::process`, or the `crashsweep` command) starts the
//! program with `CRASHSWEEP_FD=<n>`, one end of a Unix socket pair, and
//! `CRASHSWEEP_PROTOCOL=1`. Then every [`point!`](crate::point) passed
//! outside a scope writes `hit <name>\n` to that descriptor and blocks until
//! the harness answers `go\n`. To crash the program at that hit, the harness
//! does not answer: it kills the process and checks that it died of
//! `SIGKILL`. Hits of every thread go through one lock, so the harness sees
//! one sequence; it counts occurrences itself.
//!
//! Without a harness, `CRASHSWEEP_DIE_AT=name#n` makes the program kill
//! itself with `SIGKILL` at the `n`-th pass over `name` (counted here).
//!
//! With neither variable set, a point costs one check of a value read once.
//! Any Rust binary built with points (`crashpoint` with its `enabled`
//! feature) speaks the protocol unchanged. The full protocol is described in
//! the repository's `docs/point-protocol.md`.
//!
//! A point that cannot report (the descriptor is bad, the harness went away
//! or answered something else) never lets the program go on silently: it
//! prints why on standard error and exits with status 70. A harness that
//! asks for another protocol version gets exit status 2.
//!
//! On the harness's side, [`hit`] passes each point a child reports, by
//! name, inside the scope of the child's life.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Mutex, OnceLock};

use crate::Hit;

/// The protocol version this client speaks at a point.
pub const VERSION: &str = "1";
/// The protocol version a harness asks for when it wants a fork server
/// (see [`ready`](crate::ready)): version 1 with a server's control channel.
pub const FORK_SERVER_VERSION: &str = "2";
/// The protocol version a harness asks for when it wants a fork server
/// whose lives it traces (I/O points): version 2 where each fork request
/// carries a seccomp filter, and each child waits to be seized before it
/// installs it.
pub const TRACED_FORK_SERVER_VERSION: &str = "3";
/// The variable naming the inherited descriptor.
pub const FD_VAR: &str = "CRASHSWEEP_FD";
/// The variable naming the protocol version.
pub const VERSION_VAR: &str = "CRASHSWEEP_PROTOCOL";
/// The variable naming the hit to die at without a harness.
pub const DIE_AT_VAR: &str = "CRASHSWEEP_DIE_AT";
/// Exit status when a point cannot report to its harness.
pub const EXIT_LOST: i32 = 70;
/// Exit status when the variables are wrong (another version, a bad value).
pub const EXIT_USAGE: i32 = 2;

enum Mode {
    /// Neither variable: points outside a scope do nothing here.
    Off,
    /// A harness listens on this descriptor.
    Harness(Mutex<File>),
    /// Die at this hit; passes counted per name.
    DieAt(Hit, Mutex<Vec<(String, u32)>>),
    /// The variables are wrong: refused at the first point.
    Refused(String),
    /// A harness asked for a fork server, and a point came before
    /// [`ready`](crate::ready): refused at that point, by name.
    NotReady,
}

static MODE: OnceLock<Mode> = OnceLock::new();

fn mode() -> &'static Mode {
    MODE.get_or_init(|| from_env(|k| std::env::var_os(k)))
}

/// Whether a point has chosen this client's mode already (so
/// [`ready`](crate::ready) comes too late to serve).
pub(crate) fn chosen() -> bool {
    MODE.get().is_some()
}

/// Whether points outside a scope go to this client (a harness or a hit to
/// die at is set).
#[inline]
pub(crate) fn speaks() -> bool {
    !matches!(mode(), Mode::Off)
}

fn from_env(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Mode {
    if let Some(fd) = var(FD_VAR) {
        let fd = fd.to_string_lossy().into_owned();
        let version = var(VERSION_VAR).map(|v| v.to_string_lossy().into_owned());
        if matches!(
            version.as_deref(),
            Some(FORK_SERVER_VERSION | TRACED_FORK_SERVER_VERSION)
        ) {
            return Mode::NotReady;
        }
        if version.as_deref() != Some(VERSION) {
            return Mode::Refused(format!(
                "crashsweep: this client speaks point protocol {VERSION}, the harness asked for {}",
                version
                    .as_deref()
                    .unwrap_or("none (CRASHSWEEP_PROTOCOL is unset)")
            ));
        }
        return match open_fd(&fd) {
            Ok(file) => Mode::Harness(Mutex::new(file)),
            Err(e) => Mode::Refused(format!("crashsweep: {FD_VAR}={fd:?}: {e}")),
        };
    }
    if let Some(at) = var(DIE_AT_VAR) {
        let at = at.to_string_lossy().into_owned();
        return match at.parse::<Hit>() {
            Ok(hit) => Mode::DieAt(hit, Mutex::new(Vec::new())),
            Err(e) => Mode::Refused(format!("crashsweep: {DIE_AT_VAR}: {e}")),
        };
    }
    Mode::Off
}

/// The descriptor, duplicated close-on-exec (so the program's own child
/// processes do not inherit it) and the inherited number closed.
#[cfg(unix)]
fn open_fd(fd: &str) -> Result<File, String> {
    use std::os::fd::FromRawFd;
    let n: i32 = fd
        .trim()
        .parse()
        .map_err(|_| "not a descriptor number".to_owned())?;
    if n < 3 {
        return Err("a standard stream is not the harness's descriptor".into());
    }
    // SAFETY: fcntl(F_GETFD) only asks whether `n` is an open descriptor.
    if unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
        return Err("no such open descriptor (was it inherited?)".into());
    }
    // SAFETY: `n` is open, and the harness handed it to this process for
    // the protocol alone; nothing else in the process owns it.
    let inherited = unsafe { File::from_raw_fd(n) };
    // `try_clone` duplicates with F_DUPFD_CLOEXEC; dropping the original
    // closes the number children would inherit.
    inherited.try_clone().map_err(|e| e.to_string())
}

#[cfg(not(unix))]
fn open_fd(_fd: &str) -> Result<File, String> {
    Err("the point protocol needs a Unix socket pair".into())
}

fn die(code: i32, message: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "{message}");
    std::process::exit(code)
}

/// Pass a point whose name is known only at run time, as
/// [`point!`](crate::point) passes a literal one: the harness side of this
/// protocol (`sweep::process`, relaying the hits a child program reports)
/// calls this for each, inside the scope of the child's life. Names are
/// interned for the life of the process, so use it for a bounded set of
/// names. It is a point whatever the `enabled` feature says: the caller asked
/// for it by name.
pub fn hit(name: &str) {
    crate::__hit(intern(name));
}

/// `name` as a `&'static str`, leaked once per distinct name.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    match names.iter().find(|n| **n == name) {
        Some(n) => n,
        None => {
            let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.push(leaked);
            leaked
        }
    }
}

/// One pass over `name` outside any scope, reported to the harness (or
/// counted towards the hit to die at).
#[cold]
#[inline(never)]
pub(crate) fn report(name: &'static str) {
    if name.is_empty() || name.contains(['\n', '\r']) {
        die(
            EXIT_USAGE,
            &format!("crashsweep: the point name {name:?} is empty or holds a line break"),
        );
    }
    match mode() {
        Mode::Off => {}
        Mode::Refused(why) => die(EXIT_USAGE, why),
        Mode::NotReady => die(
            EXIT_USAGE,
            &format!(
                "crashsweep: point {name:?} was passed before crashpoint::ready(): the harness \
                 started this program as a fork server (point protocol 2), so call ready() \
                 once, before any point"
            ),
        ),
        Mode::Harness(file) => {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(why) = exchange(&mut file, name) {
                die(
                    EXIT_LOST,
                    &format!("crashsweep: point {name:?} could not report to the harness: {why}"),
                );
            }
        }
        Mode::DieAt(target, counts) => {
            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
            let n = match counts.iter_mut().find(|(n, _)| n == name) {
                Some((_, c)) => {
                    *c += 1;
                    *c
                }
                None => {
                    counts.push((name.to_owned(), 1));
                    1
                }
            };
            if target.point == name && target.occurrence == n {
                let _ = writeln!(std::io::stderr(), "crashsweep: dying at {target}");
                kill_self();
            }
        }
    }
}

/// Write the hit and wait for `go`.
fn exchange(file: &mut File, name: &str) -> Result<(), String> {
    file.write_all(format!("hit {name}\n").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut line = Vec::with_capacity(4);
    let mut byte = [0u8; 1];
    loop {
        match file.read(&mut byte) {
            Ok(0) => return Err("the harness closed the descriptor".into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() < 64 => line.push(byte[0]),
            Ok(_) => return Err("the harness's answer is too long".into()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    if line == b"go" {
        Ok(())
    } else {
        Err(format!(
            "the harness answered {:?}, not \"go\"",
            String::from_utf8_lossy(&line)
        ))
    }
}

#[cfg(unix)]
fn kill_self() -> ! {
    // SAFETY: kill(2) on our own process id; SIGKILL is not caught.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // Not reached: SIGKILL cannot be blocked.
    std::process::abort()
}

#[cfg(not(unix))]
fn kill_self() -> ! {
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn no_variable_is_off() {
        assert!(matches!(from_env(env(&[])), Mode::Off));
    }

    #[test]
    fn another_version_or_none_is_refused() {
        for pairs in [
            &[(FD_VAR, "7"), (VERSION_VAR, "4")][..],
            &[(FD_VAR, "7")][..],
        ] {
            let Mode::Refused(why) = from_env(env(pairs)) else {
                panic!("not refused: {pairs:?}")
            };
            assert!(why.contains("speaks point protocol 1"), "{why}");
        }
    }

    #[test]
    fn a_fork_server_asked_for_refuses_points_before_ready() {
        for version in [FORK_SERVER_VERSION, TRACED_FORK_SERVER_VERSION] {
            let m = from_env(env(&[(FD_VAR, "7"), (VERSION_VAR, version)]));
            assert!(matches!(m, Mode::NotReady), "{version}");
        }
    }

    #[test]
    fn a_bad_descriptor_is_refused() {
        for fd in ["x", "1", "987654"] {
            let Mode::Refused(why) = from_env(env(&[(FD_VAR, fd), (VERSION_VAR, "1")])) else {
                panic!("not refused: {fd}")
            };
            assert!(why.contains(FD_VAR), "{why}");
        }
    }

    #[test]
    fn die_at_is_a_hit() {
        let Mode::DieAt(hit, _) = from_env(env(&[(DIE_AT_VAR, "mid-save#2")])) else {
            panic!("not die-at")
        };
        assert_eq!(hit, Hit::new("mid-save", 2));
        let Mode::Refused(why) = from_env(env(&[(DIE_AT_VAR, "mid-save")])) else {
            panic!("not refused")
        };
        assert!(why.contains("is not a hit"), "{why}");
    }

    #[test]
    fn the_harness_wins_over_die_at() {
        let m = from_env(env(&[
            (FD_VAR, "x"),
            (VERSION_VAR, "1"),
            (DIE_AT_VAR, "a#1"),
        ]));
        assert!(matches!(m, Mode::Refused(_)));
    }

    #[cfg(unix)]
    #[test]
    fn an_exchange_writes_the_hit_and_reads_go() {
        use std::os::unix::net::UnixStream;
        let (mine, theirs) = UnixStream::pair().unwrap();
        let harness = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut reader = std::io::BufReader::new(theirs.try_clone().unwrap());
            let mut theirs = theirs;
            let (mut a, mut b) = (String::new(), String::new());
            reader.read_line(&mut a).unwrap();
            theirs.write_all(b"go\n").unwrap();
            reader.read_line(&mut b).unwrap();
            theirs.write_all(b"no\n").unwrap();
            (a, b)
        });
        let mut file = File::from(std::os::fd::OwnedFd::from(mine));
        assert_eq!(exchange(&mut file, "mid-save#"), Ok(()));
        let e = exchange(&mut file, "after").unwrap_err();
        assert!(e.contains("not \"go\""), "{e}");
        let (a, b) = harness.join().unwrap();
        assert_eq!(a, "hit mid-save#\n");
        assert_eq!(b, "hit after\n");
        let e = exchange(&mut file, "again").unwrap_err();
        assert!(e.contains("closed") || e.contains("write"), "{e}");
    }
}
