//! A real directory on a local disk: the [`Dir`] of production.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::{check_name, Dir, EntryError, FileKind, LockGuard, TEMP_ATTEMPTS};

/// A real directory on a local disk.
///
/// Every file it creates has mode 0600 and the directory itself 0700, because
/// checkpoints hold every tool result the agent saw.
#[derive(Clone, Debug)]
pub struct DiskDir {
    path: PathBuf,
    /// Temp files created and not yet renamed or removed, kept open so the
    /// write and the sync that follow `create_temp` need no second open (a
    /// save is create, write, sync, rename: two opens fewer per save).
    open: Arc<Mutex<HashMap<String, File>>>,
}

impl DiskDir {
    /// [`DiskDir::new`] with its failure as the crate's [`Error::Io`](crate::Error::Io)
    /// naming the directory, for the stores that open one by path.
    pub(crate) fn create(path: &Path) -> crate::Result<Self> {
        DiskDir::new(path).map_err(|source| crate::Error::Io {
            path: path.to_path_buf(),
            op: "create directory",
            source,
        })
    }

    /// Use the directory at `path`, creating it (and its parents) with mode
    /// 0700 if missing.
    ///
    /// Directories it creates are made durable (their parents are synced), so
    /// a power cut cannot take away the directory under a synced checkpoint.
    pub fn new(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        // The directories about to be created, deepest first (bounded by the
        // path's depth).
        let created: Vec<PathBuf> = path
            .ancestors()
            .take_while(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_err())
            .map(Path::to_path_buf)
            .collect();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)?;
        for dir in &created {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            File::open(parent)?.sync_all()?;
        }
        if !fs::metadata(&path)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", path.display()),
            ));
        }
        Ok(DiskDir {
            path,
            open: Arc::default(),
        })
    }

    fn open_files(&self) -> MutexGuard<'_, HashMap<String, File>> {
        // A poisoned map only means a thread panicked (a crash) mid-save; the
        // handles in it are still valid descriptors.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, name: &str) -> io::Result<PathBuf> {
        check_name(name)?;
        Ok(self.path.join(name))
    }
}

/// What `file_type` is, if it is not a regular file.
fn not_regular(file_type: fs::FileType) -> Option<FileKind> {
    let kind = if file_type.is_file() {
        return None;
    } else if file_type.is_symlink() {
        FileKind::Symlink
    } else if file_type.is_dir() {
        FileKind::Directory
    } else if file_type.is_fifo() {
        FileKind::Fifo
    } else if file_type.is_socket() {
        FileKind::Socket
    } else if file_type.is_block_device() {
        FileKind::BlockDevice
    } else if file_type.is_char_device() {
        FileKind::CharDevice
    } else {
        FileKind::Other
    };
    Some(kind)
}

/// Refuse `meta` unless it describes a regular file.
fn regular(meta: &fs::Metadata) -> io::Result<()> {
    match not_regular(meta.file_type()) {
        Some(kind) => Err(EntryError::NotRegularFile(kind).into_io()),
        None => Ok(()),
    }
}

/// Whether an entry exists at `path` (without following a symbolic link),
/// refusing one that is not a regular file. Only a missing entry is
/// `Ok(false)`; every other error of `lstat` is an error.
fn regular_entry(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(meta) => regular(&meta).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Open flags that never follow a symbolic link at the last component and
/// never block on a FIFO.
const NO_FOLLOW_NO_BLOCK: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// Refuse unless the entry at `path` is the file `locked` describes (same
/// device and inode): `flock` locks an inode, not a path, so a lock on a
/// file deleted or replaced since it was opened excludes nobody.
fn still_at(path: &Path, locked: &fs::Metadata) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(now) if (now.dev(), now.ino()) == (locked.dev(), locked.ino()) => Ok(()),
        Ok(_) => Err(EntryError::LockReplaced.into_io()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(EntryError::LockReplaced.into_io()),
        Err(e) => Err(e),
    }
}

/// A file whose `flock` this process holds; dropping it unlocks the file
/// before closing it.
///
/// Closing alone is not enough. An `flock` belongs to the open file
/// description, which a `fork` shares with the child: a child that another
/// thread of this process forks holds a copy of every descriptor until its
/// `exec` closes them (they are close-on-exec). Had the lock been released
/// by the close alone, it would live on in that copy for the fork-to-exec
/// window, and a restart in this process would find its run "locked by
/// another process". `LOCK_UN` on our descriptor releases the lock of the
/// description itself, copies included. A process that dies still has the
/// kernel release it when its last copy closes.
///
/// Why not another kind of lock: an OFD lock (`F_OFD_SETLK`) belongs to the
/// description too, so a child's copy would hold it just the same; a
/// classic `fcntl` lock belongs to the process, is released by closing any
/// descriptor of the file and never excludes the same process, so a second
/// checkpoint of the run in one process would not be refused.
#[derive(Debug)]
struct Flock(fs::File);

impl Drop for Flock {
    fn drop(&mut self) {
        // SAFETY: the file owns a valid open descriptor until it drops,
        // after this. An error leaves the close to release the lock.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Call `f` again while it fails with `EINTR`.
fn retry_interrupted<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            done => return done,
        }
    }
}

fn random_alnum(len: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| char::from(CHARS[rng.gen_range(0..CHARS.len())]))
        .collect()
}

impl DiskDir {
    /// [`Dir::create_temp`] with the unique part of each name tried drawn
    /// from `unique`: a name taken is tried again with the next one, up to
    /// [`TEMP_ATTEMPTS`] names; any other error stops at once.
    fn create_temp_with(
        &self,
        prefix: &str,
        unique: &mut dyn FnMut() -> String,
    ) -> io::Result<String> {
        for _ in 0..TEMP_ATTEMPTS {
            let name = format!("{prefix}{}.tmp", unique());
            let path = self.file(&name)?;
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => {
                    self.open_files().insert(name.clone(), file);
                    return Ok(name);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free temp name for prefix {prefix:?} after {TEMP_ATTEMPTS} tries"),
        ))
    }
}

impl Dir for DiskDir {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.create_temp_with(prefix, &mut || random_alnum(12))
    }

    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        if let Some(f) = self.open_files().get_mut(name) {
            // Fresh from `create_temp` the file is empty and the cursor at 0;
            // only a second write must cut what the first one left.
            if f.stream_position()? != 0 {
                f.set_len(0)?;
                f.seek(SeekFrom::Start(0))?;
            }
            return f.write_all(data);
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(self.file(name)?)?;
        f.write_all(data)
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        if let Some(f) = self.open_files().get(name) {
            return f.sync_all();
        }
        File::open(self.file(name)?)?.sync_all()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from_path, to_path) = (self.file(from)?, self.file(to)?);
        {
            let mut open = self.open_files();
            open.remove(from);
            open.remove(to);
        }
        fs::rename(from_path, to_path)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.path)?.sync_all()
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.read_limited(name, u64::MAX)
    }

    /// `lstat` first, so a device or socket is never opened; then an open
    /// that follows no link and never blocks, and `fstat` on what was
    /// opened, so an entry swapped in between is refused too.
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let path = self.file(name)?;
        if !regular_entry(&path)? {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(NO_FOLLOW_NO_BLOCK)
            .open(&path)?;
        let meta = file.metadata()?;
        regular(&meta)?;
        let too_large = |size| EntryError::TooLarge { size, limit }.into_io();
        if meta.len() > limit {
            return Err(too_large(meta.len()));
        }
        let mut bytes = Vec::new();
        // The file may grow after the `fstat`: read one byte past the limit
        // at most, to tell.
        file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(too_large(bytes.len() as u64));
        }
        Ok(Some(bytes))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let path = self.file(name)?;
        self.open_files().remove(name);
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.path)? {
            // A name that is not UTF-8 was not written by this crate; skip it
            // rather than mangle it into a name that means another file.
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        let path = self.file(name)?;
        regular_entry(&path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(NO_FOLLOW_NO_BLOCK)
            .open(&path)?;
        let locked = file.metadata()?;
        regular(&locked)?;
        retry_interrupted(|| {
            // SAFETY: `file` owns a valid open descriptor for the whole call.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        })
        .map_err(|err| match err.kind() {
            // EWOULDBLOCK already maps to WouldBlock; say which file.
            io::ErrorKind::WouldBlock => io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            ),
            _ => err,
        })?;
        let held = Flock(file);
        still_at(&path, &locked)?;
        Ok(LockGuard::new(held))
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_call_is_retried_and_other_errors_are_not() {
        let mut calls = 0;
        let r = retry_interrupted(|| {
            calls += 1;
            if calls < 3 {
                Err(io::Error::from(io::ErrorKind::Interrupted))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let mut calls = 0;
        let r: io::Result<()> = retry_interrupted(|| {
            calls += 1;
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_lock_file_deleted_or_replaced_after_its_open_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.lock");
        fs::write(&path, b"").unwrap();
        let opened = fs::metadata(&path).unwrap();
        still_at(&path, &opened).unwrap();
        let replaced = |r: io::Result<()>| {
            let e = r.unwrap_err();
            assert_eq!(EntryError::of(&e), Some(&EntryError::LockReplaced), "{e}");
        };
        // Replaced by another file (a new inode) at the same path.
        let other = dir.path().join("other");
        fs::write(&other, b"").unwrap();
        fs::rename(&other, &path).unwrap();
        replaced(still_at(&path, &opened));
        // Deleted.
        fs::remove_file(&path).unwrap();
        replaced(still_at(&path, &opened));
        // An error other than "not found" is that error.
        let long = dir.path().join("x".repeat(300));
        let e = still_at(&long, &opened).unwrap_err();
        assert_eq!(EntryError::of(&e), None, "{e}");
    }

    #[test]
    fn every_kind_of_entry_that_is_not_a_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let kind = |p: &Path| not_regular(fs::symlink_metadata(p).unwrap().file_type());
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        assert_eq!(kind(&file), None);
        assert_eq!(kind(dir.path()), Some(FileKind::Directory));
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(kind(&link), Some(FileKind::Symlink));
        let sock = dir.path().join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(kind(&sock), Some(FileKind::Socket));
        let fifo = dir.path().join("p");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(kind(&fifo), Some(FileKind::Fifo));
        assert_eq!(kind(Path::new("/dev/null")), Some(FileKind::CharDevice));
        for (k, words) in [
            (FileKind::Symlink, "a symbolic link"),
            (FileKind::Directory, "a directory"),
            (FileKind::Fifo, "a FIFO"),
            (FileKind::Socket, "a socket"),
            (FileKind::BlockDevice, "a block device"),
            (FileKind::CharDevice, "a character device"),
            (FileKind::Other, "not a regular file"),
        ] {
            assert_eq!(k.to_string(), words);
        }
    }
}

#[cfg(test)]
mod mutant_tests;
