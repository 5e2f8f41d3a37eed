//! The command's own file handling: errors in words, reads that never follow
//! a link or block on a FIFO, and files and directories whose modes do not
//! depend on the umask.
//!
//! Every file the command writes is 0600 and every directory it creates
//! 0700 whatever the umask: the mode is set on creation and set again with
//! `chmod` (which the umask does not touch), because a world holds what the
//! agent read.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::exit::Failure;

/// The mode of every file the command writes.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory the command creates.
pub const DIR_MODE: u32 = 0o700;
/// The largest world file (run metadata, task copy) the command reads.
pub const MAX_READ: u64 = 64 << 20;

/// An I/O error in words, without the bare `os error N` of its `Display`.
pub fn words(e: &io::Error) -> String {
    let known = match e.raw_os_error() {
        Some(libc::ENOTDIR) => Some("a part of the path is not a directory"),
        Some(libc::ENOENT) => Some("no such file or directory"),
        Some(libc::EACCES | libc::EPERM) => Some("permission denied"),
        Some(libc::EEXIST) => Some("it already exists"),
        Some(libc::EISDIR) => Some("it is a directory"),
        Some(libc::ELOOP) => Some("it is a symbolic link, or a path with too many of them"),
        Some(libc::ENOSPC) => Some("no space left on the device"),
        Some(libc::EROFS) => Some("the file system is read-only"),
        Some(libc::EIO) => Some("the device reported an input/output error"),
        Some(libc::ENAMETOOLONG) => Some("the name is too long"),
        Some(libc::ENOTEMPTY) => Some("the directory is not empty"),
        _ => None,
    };
    if let Some(text) = known {
        return text.to_owned();
    }
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_lowercase(),
        None => text,
    }
}

/// `cannot WHAT PATH: why`, a run error (exit 5).
pub fn io_failure(what: &str, path: &Path, e: &io::Error) -> Failure {
    Failure::run(
        "io",
        format!("cannot {what} {}: {}", path.display(), words(e)),
    )
}

/// What a directory entry is, in words: "a directory", "a FIFO", ….
pub fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Whether `path` is a regular file (`Ok(true)`), missing (`Ok(false)`), or
/// something else (`Err` naming it and what it is, without reading it or
/// following a link). `what` names the file for the message ("the
/// checkpoint").
pub fn regular(what: &str, path: &Path) -> Result<bool, Failure> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(true),
        Ok(m) => Err(not_regular(what, path, kind_of(m.file_type()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_failure("look at", path, &e)),
    }
}

/// `WHAT PATH is KIND, not a regular file`.
pub fn not_regular(what: &str, path: &Path, kind: &str) -> Failure {
    Failure::run(
        "not_a_file",
        format!(
            "{what} {} is {kind}, not a regular file",
            path.display()
        ),
    )
    .hint("it was left as it is and nothing was started in its place; move it away, or name another run with --run")
}

/// Read a regular file: `None` if missing; never follows a symbolic link,
/// never blocks on a FIFO, never reads more than [`MAX_READ`] bytes.
pub fn read_regular(what: &str, path: &Path) -> Result<Option<Vec<u8>>, Failure> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular(what, path, "a symbolic link"))
        }
        Err(e) => return Err(io_failure("read", path, &e)),
    };
    let meta = file.metadata().map_err(|e| io_failure("read", path, &e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(what, path, kind_of(meta.file_type())));
    }
    if meta.len() > MAX_READ {
        return Err(Failure::run(
            "too_large",
            format!(
                "{what} {} holds {} bytes, more than the {MAX_READ} this command reads",
                path.display(),
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_READ + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_failure("read", path, &e))?;
    Ok(Some(bytes))
}

/// Create `path` (which must not exist) holding `bytes`, mode 0600, synced.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| io_failure("create", path, &e))?;
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .and_then(|()| f.write_all(bytes))
        .and_then(|()| f.sync_all())
        .map_err(|e| io_failure("write", path, &e))
}

/// Create the directory `path` (which must not exist), mode 0700.
pub fn create_dir(path: &Path) -> Result<(), Failure> {
    fs::DirBuilder::new()
        .mode(DIR_MODE)
        .create(path)
        .and_then(|()| set_dir_mode(path))
        .map_err(|e| io_failure("create", path, &e))
}

/// Create the missing directories above the file `path`, each 0700 like
/// every directory the command makes (existing ones are left alone).
pub fn create_parents(path: &Path) -> Result<(), Failure> {
    let mut missing = Vec::new();
    let mut at = path.parent();
    while let Some(dir) = at.filter(|d| !d.as_os_str().is_empty()) {
        if fs::symlink_metadata(dir).is_ok() {
            break;
        }
        missing.push(dir);
        at = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        create_dir(dir)?;
    }
    Ok(())
}

/// Set a directory's mode to 0700, whatever the umask made it.
pub fn set_dir_mode(path: &Path) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
}

/// Sync a directory, so the names in it survive a power cut.
pub fn sync_dir(path: &Path) -> Result<(), Failure> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_failure("sync", path, &e))
}

/// Whether `name` is a temp file [`durable::write::write_atomic`] leaves when it
/// is killed: `.<target>-<letters and digits>.tmp`.
pub fn is_write_temp(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .and_then(|rest| rest.rsplit_once('-'))
        .is_some_and(|(target, unique)| {
            !target.is_empty()
                && !unique.is_empty()
                && unique.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Remove every temp file a killed [`durable::write::write_atomic`] left in the
/// directory `dir` (not in its subdirectories); the names removed. Call it
/// only while no process can be writing there (under the run's lock).
pub fn remove_write_temps(dir: &Path) -> Result<Vec<String>, Failure> {
    let mut removed = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| io_failure("list", dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_failure("list", dir, &e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !is_write_temp(&name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        match fs::remove_file(&path) {
            Ok(()) => removed.push(name),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_failure("remove the leftover temp file", &path, &e)),
        }
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_in_words() {
        let e = io::Error::from_raw_os_error(libc::ENOTDIR);
        assert_eq!(words(&e), "a part of the path is not a directory");
        let e = io::Error::from_raw_os_error(libc::EXDEV);
        assert!(!words(&e).contains("os error"), "{}", words(&e));
        let e = io::Error::other("plain");
        assert_eq!(words(&e), "plain");
    }

    #[test]
    fn write_temps_are_recognised() {
        assert!(is_write_temp(".todo.rs-Ab3xYz012345.tmp"));
        assert!(is_write_temp(".r-1.json-abc.tmp"));
        assert!(!is_write_temp("todo.rs"));
        assert!(!is_write_temp(".todo.rs.tmp"));
        assert!(!is_write_temp(".x-a_b.tmp"));
        assert!(!is_write_temp(".-abc.tmp"));
    }

    #[test]
    fn reads_refuse_what_is_not_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "x").unwrap();
        assert_eq!(read_regular("f", &file).unwrap().unwrap(), b"x");
        assert!(read_regular("f", &tmp.path().join("none"))
            .unwrap()
            .is_none());
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = read_regular("the file", &link).unwrap_err();
        assert!(e.message.contains("is a symbolic link"), "{}", e.message);
        let e = read_regular("the file", tmp.path()).unwrap_err();
        assert!(e.message.contains("is a directory"), "{}", e.message);
        let fifo = tmp.path().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular("the file", &fifo).unwrap_err();
        assert!(e.message.contains("is a FIFO"), "{}", e.message);
        assert!(regular("the file", &file).unwrap());
        assert!(regular("the file", &fifo).is_err());
    }
}
