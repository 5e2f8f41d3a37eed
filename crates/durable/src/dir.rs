//! The file-system seam: the small directory trait the store needs, and the
//! guard a held lock lives in.
//!
//! The checkpoint store needs only a handful of operations on one directory.
//! Putting them behind [`Dir`] lets the same store run against a real
//! directory ([`DiskDir`](crate::DiskDir)) in production and against an
//! in-memory one (`durable::testing::MemDir`, behind the `testing` feature) in
//! crash sweeps, where thousands of scenarios each make dozens of saves and a
//! real disk would turn seconds into minutes.

use std::any::Any;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// A directory of plain files: the only file-system access the checkpoint
/// store makes.
///
/// Names are plain file names inside the directory, never paths: an
/// implementation rejects an empty name, `.`, `..`, and any name holding `/`
/// or NUL with [`io::ErrorKind::InvalidInput`], so no caller can reach a file
/// outside it.
pub trait Dir: Send + Sync + fmt::Debug {
    /// Create a new empty file `<prefix><unique>.tmp` with mode 0600, failing
    /// rather than reusing an existing file, and return its name.
    ///
    /// `<unique>` is one or more ASCII letters or digits, so the store can
    /// tell its own temp files from those of a run whose ID happens to extend
    /// its own. Mode 0600 matters because a checkpoint holds every tool
    /// result, and tool results hold whatever the agent read.
    fn create_temp(&self, prefix: &str) -> io::Result<String>;

    /// Replace the file's contents with `data`, creating it (mode 0600) if
    /// missing. Not crash-safe on its own: use [`write_atomic`](crate::write::write_atomic) for that.
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()>;

    /// Make the file's current contents durable (fsync), so that a rename
    /// that follows never points at data that did not reach the disk.
    fn sync(&self, name: &str) -> io::Result<()>;

    /// Atomically replace `to` with `from`: a reader sees the old file or the
    /// new one, never a mix.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Make the directory's entries durable (fsync the directory), so that a
    /// rename does not vanish in a power cut.
    fn sync_dir(&self) -> io::Result<()>;

    /// The file's contents, or `Ok(None)` when the file does not exist.
    ///
    /// Only a missing entry is `Ok(None)`: every other failure (permission
    /// denied, `EIO`, …) is an error, so a caller never mistakes an
    /// unreadable file for no file. An entry that is not a regular file (a
    /// symbolic link, even to a regular file, a directory, a FIFO, a socket,
    /// a device) is refused with [`EntryError::NotRegularFile`] inside the
    /// [`io::Error`], and a real directory never blocks on a FIFO.
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>>;

    /// [`Dir::read`], refusing a file larger than `limit` bytes with
    /// [`EntryError::TooLarge`] inside the [`io::Error`], without reading
    /// more than `limit + 1` bytes of it where the directory can help it.
    ///
    /// The default reads the whole file and then checks its length: right
    /// for directories in memory, whose files are in memory already.
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        match self.read(name)? {
            Some(bytes) if bytes.len() as u64 > limit => Err(EntryError::TooLarge {
                size: bytes.len() as u64,
                limit,
            }
            .into_io()),
            found => Ok(found),
        }
    }

    /// Remove the file. Removing a missing file is `Ok`, so cleanup after a
    /// crash can be repeated after another crash; every other failure is an
    /// error.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// The names of the directory's entries, sorted.
    fn list(&self) -> io::Result<Vec<String>>;

    /// Take an exclusive, non-blocking lock on `name` (created if missing).
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] if the lock is held, by this
    /// process or another. Dropping the guard releases it; for [`DiskDir`](crate::DiskDir)
    /// this is `flock(LOCK_EX|LOCK_NB)` on an open descriptor, so the kernel
    /// also releases it when the process dies by any means, and a crash never
    /// leaves a run locked by a process that no longer exists.
    ///
    /// A lock is only worth its path: [`DiskDir`](crate::DiskDir) refuses a
    /// lock path that is not a regular file (a symbolic link is never
    /// followed) with [`EntryError::NotRegularFile`], and, once it holds the
    /// lock, checks that the file it locked is still the one at the path
    /// (same device and inode), refusing with [`EntryError::LockReplaced`]
    /// otherwise: a lock on a deleted or replaced file excludes nobody.
    fn lock(&self, name: &str) -> io::Result<LockGuard>;

    /// Where `name` lives, for error messages: a real path, or `mem:/name`.
    fn path_of(&self, name: &str) -> PathBuf;
}

/// A shared directory is a directory: each call goes to the one it points
/// to (so a wrapper such as a fault-injecting one can take an
/// `Arc<dyn Dir>`).
impl<D: Dir + ?Sized> Dir for std::sync::Arc<D> {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        (**self).create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        (**self).write(name, data)
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        (**self).sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        (**self).rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        (**self).sync_dir()
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        (**self).read(name)
    }
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        (**self).read_limited(name, limit)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        (**self).remove(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        (**self).list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        (**self).lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        (**self).path_of(name)
    }
}

/// The kind of a directory entry that is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A symbolic link (never followed, even to a regular file).
    Symlink,
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block device.
    BlockDevice,
    /// A character device.
    CharDevice,
    /// Anything else.
    Other,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Symlink => "a symbolic link",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::BlockDevice => "a block device",
            FileKind::CharDevice => "a character device",
            FileKind::Other => "not a regular file",
        })
    }
}

/// Why a [`Dir`] refused an entry, carried inside the [`io::Error`] its
/// methods return (find it with [`EntryError::of`]); the checkpoint store
/// turns each into its own [`Error`](crate::Error) variant naming the path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The entry exists but is not a regular file.
    #[error("is {0}, not a regular file")]
    NotRegularFile(FileKind),
    /// The file is larger than the reader's limit.
    #[error("is {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The file's size (or a lower bound of it).
        size: u64,
        /// The limit it broke.
        limit: u64,
    },
    /// The locked file is no longer the file at the lock's path (it was
    /// deleted or replaced), so the lock excludes nobody.
    #[error("was deleted or replaced while being locked")]
    LockReplaced,
}

impl EntryError {
    /// This refusal as an [`io::Error`] (kind `InvalidData`, or
    /// `InvalidInput` for a file that is not regular).
    pub fn into_io(self) -> io::Error {
        let kind = match self {
            EntryError::NotRegularFile(_) => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, self)
    }

    /// The refusal inside `e`, if `e` carries one.
    pub fn of(e: &io::Error) -> Option<&EntryError> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<EntryError>())
    }
}

/// A held lock from [`Dir::lock`]; dropping it releases the lock.
///
/// It owns whatever keeps the lock held (an open file for [`DiskDir`](crate::DiskDir)), so a
/// [`Dir`] implemented outside this crate can put its own token inside with
/// [`LockGuard::new`].
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard(#[allow(dead_code)] Box<dyn Any + Send + Sync>);

impl LockGuard {
    /// A guard that keeps `held` alive until it is dropped; `held`'s own
    /// `Drop` releases the lock.
    pub fn new<T: Any + Send + Sync>(held: T) -> LockGuard {
        LockGuard(Box::new(held))
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockGuard { .. }")
    }
}

/// Reject names that are not a plain file name, so that no caller of a
/// [`Dir`] can reach outside the directory whatever string it passes.
pub(crate) fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    Ok(())
}

/// How many names [`Dir::create_temp`] tries before giving up; with 12
/// random characters a second try is already astronomically rare.
pub(crate) const TEMP_ATTEMPTS: u32 = 16;
