//! Which calls the tracer makes points of: every operation on the world
//! (the default), or those `--io-ops` names, on the paths `--io-paths`
//! matches; and the mask of a path's parts that differ from run to run.

use std::fmt;

use regex_lite::Regex;

/// An operation the tracer can make a point of. Its name starts every I/O
/// point's name (`rename a.tmp→a`, `send service`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// An `open` that creates its file (`O_CREAT`, the file absent).
    OpenCreate,
    /// An `open` that empties an existing file (`O_TRUNC`).
    OpenTruncate,
    /// `write`, `pwrite64`, `writev`, `pwritev` on a file of the world.
    Write,
    /// `truncate`, `ftruncate`.
    Truncate,
    /// `fsync`, `fdatasync` (of a file or a directory of the world).
    Fsync,
    /// `rename`, `renameat`, `renameat2`.
    Rename,
    /// `unlink`, `unlinkat`.
    Unlink,
    /// `mkdir`, `mkdirat`.
    Mkdir,
    /// `rmdir`, `unlinkat` with `AT_REMOVEDIR`.
    Rmdir,
    /// `link`, `linkat`.
    Link,
    /// `symlink`, `symlinkat`.
    Symlink,
    /// `connect` to a TCP peer.
    Connect,
    /// `sendto`, `sendmsg`, or a `write` on a TCP socket.
    Send,
}

impl Op {
    /// Every operation, in the order `--io-ops` lists them.
    pub const ALL: [Op; 13] = [
        Op::OpenCreate,
        Op::OpenTruncate,
        Op::Write,
        Op::Truncate,
        Op::Fsync,
        Op::Rename,
        Op::Unlink,
        Op::Mkdir,
        Op::Rmdir,
        Op::Link,
        Op::Symlink,
        Op::Connect,
        Op::Send,
    ];

    /// Its name in point names and in `--io-ops`.
    pub fn name(self) -> &'static str {
        match self {
            Op::OpenCreate => "open-create",
            Op::OpenTruncate => "open-truncate",
            Op::Write => "write",
            Op::Truncate => "truncate",
            Op::Fsync => "fsync",
            Op::Rename => "rename",
            Op::Unlink => "unlink",
            Op::Mkdir => "mkdir",
            Op::Rmdir => "rmdir",
            Op::Link => "link",
            Op::Symlink => "symlink",
            Op::Connect => "connect",
            Op::Send => "send",
        }
    }

    /// Whether its target is a peer rather than a path.
    pub fn is_network(self) -> bool {
        matches!(self, Op::Connect | Op::Send)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an I/O point option is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// `--io-ops` names an operation the tracer does not know.
    #[error("--io-ops: {0:?} is not an operation; the operations are {list} (`open` means both opens)", list = ops_list())]
    UnknownOp(String),
    /// `--io-ops` is empty.
    #[error("--io-ops names no operation; the operations are {list}", list = ops_list())]
    NoOps,
    /// `--io-mask` is not a regular expression.
    #[error("--io-mask {pattern:?} is not a regular expression: {reason}")]
    BadMask {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// `--io-paths` is an empty pattern.
    #[error("--io-paths: an empty pattern matches no path; e.g. '*.db*'")]
    EmptyGlob,
}

fn ops_list() -> String {
    Op::ALL.map(Op::name).join(", ")
}

/// Which calls become I/O points, and how their names are made stable:
/// the option [`Process::io_points`](super::super::Process::io_points) takes.
///
/// By default every operation of [`Op::ALL`] on any path of the world, and
/// every connection and send to a TCP peer.
#[derive(Clone, Debug, Default)]
pub struct IoPoints {
    ops: Option<Vec<Op>>,
    paths: Vec<String>,
    mask: Option<Regex>,
}

impl IoPoints {
    /// Every operation on every path of the world.
    pub fn all() -> IoPoints {
        IoPoints::default()
    }

    /// No call is a point: the tracer only records (a power-cut sweep
    /// without I/O points).
    pub(crate) fn none() -> IoPoints {
        IoPoints {
            ops: Some(Vec::new()),
            ..IoPoints::default()
        }
    }

    /// Only these operations, by name (`rename`, `fsync`, `send`, …; `open`
    /// is both `open-create` and `open-truncate`).
    pub fn ops<I, S>(mut self, names: I) -> Result<IoPoints, SelectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut ops = Vec::new();
        for n in names {
            let n = n.as_ref().trim();
            if n.is_empty() {
                continue;
            }
            if n == "open" {
                ops.extend([Op::OpenCreate, Op::OpenTruncate]);
                continue;
            }
            match Op::ALL.iter().find(|o| o.name() == n) {
                Some(o) => ops.push(*o),
                None => return Err(SelectError::UnknownOp(n.to_owned())),
            }
        }
        if ops.is_empty() {
            return Err(SelectError::NoOps);
        }
        ops.sort();
        ops.dedup();
        self.ops = Some(ops);
        Ok(self)
    }

    /// Only files whose path relative to the world matches one of these
    /// globs (`*` and `?` within a path's part, `**` across parts; a glob
    /// without `/` matches the file's name in any directory). Network
    /// operations have no path: this leaves them in.
    pub fn paths<I, S>(mut self, globs: I) -> Result<IoPoints, SelectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for g in globs {
            let g = g.as_ref();
            if g.is_empty() {
                return Err(SelectError::EmptyGlob);
            }
            self.paths.push(g.to_owned());
        }
        Ok(self)
    }

    /// Replace each match of `pattern` in a point's paths by `*`: for a
    /// program whose file names carry random parts (`tmpab12cd`), so that
    /// its points keep one name from run to run.
    pub fn mask(mut self, pattern: &str) -> Result<IoPoints, SelectError> {
        let re = Regex::new(pattern).map_err(|e| SelectError::BadMask {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })?;
        self.mask = Some(re);
        Ok(self)
    }

    /// Whether a mask is set.
    pub fn masks(&self) -> bool {
        self.mask.is_some()
    }

    /// Whether a call of `op` on these world-relative paths is a point.
    pub(crate) fn selects(&self, op: Op, paths: &[&str]) -> bool {
        if let Some(ops) = &self.ops {
            if !ops.contains(&op) {
                return false;
            }
        }
        if self.paths.is_empty() || op.is_network() {
            return true;
        }
        paths
            .iter()
            .any(|p| self.paths.iter().any(|g| glob_matches(g, p)))
    }

    /// `path` with the mask's matches replaced by `*`.
    pub(crate) fn masked(&self, path: &str) -> String {
        match &self.mask {
            Some(re) => re.replace_all(path, "*").into_owned(),
            None => path.to_owned(),
        }
    }
}

/// Whether `path` (relative, `/`-separated) matches `glob`. A glob without
/// `/` is matched against the last part of the path alone.
pub(crate) fn glob_matches(glob: &str, path: &str) -> bool {
    if !glob.contains('/') {
        let name = path.rsplit('/').next().unwrap_or(path);
        return matches(glob.as_bytes(), name.as_bytes(), false);
    }
    matches(glob.as_bytes(), path.as_bytes(), true)
}

/// `*` any run of bytes but `/` (any run at all for `**`), `?` one byte but
/// `/`; everything else literally.
fn matches(glob: &[u8], s: &[u8], slashes: bool) -> bool {
    match glob.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => {
            let (any, rest) = match rest.split_first() {
                Some((b'*', r)) => (true, r),
                _ => (!slashes, rest),
            };
            for i in 0..=s.len() {
                if matches(rest, &s[i..], slashes) {
                    return true;
                }
                if i < s.len() && s[i] == b'/' && !any {
                    return false;
                }
            }
            false
        }
        Some((b'?', rest)) => match s.split_first() {
            Some((c, tail)) if *c != b'/' || !slashes => matches(rest, tail, slashes),
            _ => false,
        },
        Some((c, rest)) => s.first() == Some(c) && matches(rest, &s[1..], slashes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_and_paths() {
        assert!(glob_matches("*.db*", "state.db"));
        assert!(glob_matches("*.db*", "dir/state.db-journal"));
        assert!(!glob_matches("*.db*", "state.json"));
        assert!(glob_matches("data/*.json", "data/a.json"));
        assert!(!glob_matches("data/*.json", "data/sub/a.json"));
        assert!(glob_matches("data/**.json", "data/sub/a.json"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "abbc"));
    }

    #[test]
    fn ops_are_checked_and_open_means_both() {
        let io = IoPoints::all().ops(["rename", "open", " fsync"]).unwrap();
        assert!(io.selects(Op::Rename, &["a"]));
        assert!(io.selects(Op::OpenTruncate, &["a"]));
        assert!(!io.selects(Op::Write, &["a"]));
        let e = IoPoints::all().ops(["renam"]).unwrap_err();
        assert!(
            e.to_string().contains("\"renam\" is not an operation"),
            "{e}"
        );
        assert!(
            e.to_string().contains("open-create, open-truncate, write"),
            "{e}"
        );
        assert_eq!(IoPoints::all().ops([""]).unwrap_err(), SelectError::NoOps);
    }

    #[test]
    fn paths_filter_files_but_not_peers() {
        let io = IoPoints::all().paths(["*.db*"]).unwrap();
        assert!(io.selects(Op::Write, &["x.db"]));
        assert!(!io.selects(Op::Write, &["x.json"]));
        assert!(io.selects(Op::Rename, &["x.tmp", "x.db"]));
        assert!(io.selects(Op::Send, &[]));
    }

    #[test]
    fn a_mask_replaces_each_match() {
        let io = IoPoints::all().mask("tmp[a-z0-9]{6}").unwrap();
        assert_eq!(io.masked("d/tmpab12cd.json"), "d/*.json");
        let e = IoPoints::all().mask("(").unwrap_err();
        assert!(e.to_string().contains("--io-mask \"(\""), "{e}");
    }
}
