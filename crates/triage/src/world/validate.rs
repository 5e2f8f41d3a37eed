//! Taking `--state` as the state directory: checked without creating
//! anything ([`StateDir::existing`]), created only when a run needs it
//! ([`StateDir::open`]), and probed for writing with a file that a kill
//! may leave behind for the next start to remove.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

use durable::DiskDir;

use super::StateDir;
use crate::exit::Failure;
use crate::files::{self, io_failure};

impl StateDir {
    /// Check `path` as the state directory without creating anything:
    /// `Ok(None)` if it does not exist (and could be created), `Ok(Some)`
    /// if it is a directory the command can write in, and bad input
    /// (naming what is wrong) otherwise.
    pub fn existing(path: &Path) -> Result<Option<StateDir>, Failure> {
        let bad = |reason: String| {
            Failure::usage(
                "bad_state",
                format!("bad --state {}: {reason}", path.display()),
            )
        };
        if path.as_os_str().is_empty() {
            return Err(bad("the path is empty".to_owned()));
        }
        match fs::metadata(path) {
            Ok(m) if !m.is_dir() => {
                let kind = fs::symlink_metadata(path)
                    .map_or("not a directory", |m| files::kind_of(m.file_type()));
                return Err(bad(format!("it exists and is {kind}, not a directory")));
            }
            Ok(_) => {
                // Exists: it must be one we may write in, or every save fails
                // later with a less helpful message.
                if let Err(e) = tempfile_probe(path) {
                    return Err(bad(format!("cannot write in it: {}", files::words(&e))));
                }
                let dir = DiskDir::new(path)
                    .map_err(|e| bad(format!("cannot open it: {}", files::words(&e))))?;
                return Ok(Some(StateDir {
                    path: path.to_path_buf(),
                    dir: Arc::new(dir),
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
            Err(e) => return Err(bad(files::words(&e))),
        }
        // Missing: the nearest ancestor that exists must be a directory.
        for ancestor in path.ancestors().skip(1) {
            let shown = if ancestor.as_os_str().is_empty() {
                Path::new(".")
            } else {
                ancestor
            };
            match fs::metadata(shown) {
                Ok(m) if m.is_dir() => return Ok(None),
                Ok(m) => {
                    let kind = fs::symlink_metadata(shown)
                        .map_or("not a directory", |l| files::kind_of(l.file_type()));
                    let kind = if kind == "a symbolic link" && m.is_file() {
                        "a regular file"
                    } else {
                        kind
                    };
                    return Err(bad(format!(
                        "{} is {kind}, not a directory, so nothing can be created under it",
                        shown.display()
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
                Err(e) => return Err(bad(format!("{}: {}", shown.display(), files::words(&e)))),
            }
        }
        Ok(None)
    }

    /// Use `path` as the state directory, creating it (0700) if missing.
    ///
    /// A path that exists and is not a directory, or that cannot be created
    /// or written, is bad input: nothing is created or changed.
    pub fn open(path: &Path) -> Result<StateDir, Failure> {
        if let Some(sd) = StateDir::existing(path)? {
            return Ok(sd);
        }
        let dir = DiskDir::new(path).map_err(|e| {
            Failure::usage(
                "bad_state",
                format!(
                    "bad --state {}: cannot create it: {}",
                    path.display(),
                    files::words(&e)
                ),
            )
        })?;
        files::set_dir_mode(path).map_err(|e| io_failure("set the mode of", path, &e))?;
        Ok(StateDir {
            path: path.to_path_buf(),
            dir: Arc::new(dir),
        })
    }
}

/// The name of the file [`tempfile_probe`] creates, before the pid.
pub(crate) const PROBE_PREFIX: &str = ".triage-probe-";

/// Check that a new file can be created in `dir`, without leaving one. A
/// kill between the two leaves `.triage-probe-<pid>`, which the next start's
/// clean-up removes ([`StateDir::collect`]); so a probe removed under us was
/// still created, and one already named by our pid is a killed process's
/// (pids are reused), removed and made again.
fn tempfile_probe(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!("{PROBE_PREFIX}{}", std::process::id()));
    let create = || File::options().write(true).create_new(true).open(&probe);
    match create() {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&probe)?;
            create()?;
        }
        Err(e) => return Err(e),
    }
    match fs::remove_file(&probe) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_state_paths_are_refused_without_creating_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = StateDir::open(&file).unwrap_err();
        assert_eq!(e.kind, "bad_state");
        assert!(e.message.contains("not a directory"), "{}", e.message);
        let e = StateDir::open(&file.join("sub")).unwrap_err();
        assert_eq!(e.kind, "bad_state");
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
        assert!(StateDir::open(Path::new("")).is_err());
    }

    #[test]
    fn a_probe_left_under_our_pid_is_stale_and_none_is_left_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let stale = tmp
            .path()
            .join(format!("{PROBE_PREFIX}{}", std::process::id()));
        fs::write(&stale, "").unwrap();
        tempfile_probe(tmp.path()).unwrap();
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
