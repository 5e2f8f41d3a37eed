//! A real directory on a local disk: the [`Dir`] of production.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::{check_name, Dir, LockGuard, TEMP_ATTEMPTS};

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

fn random_alnum(len: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| char::from(CHARS[rng.gen_range(0..CHARS.len())]))
        .collect()
}

impl Dir for DiskDir {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        for _ in 0..TEMP_ATTEMPTS {
            let name = format!("{prefix}{}.tmp", random_alnum(12));
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
        match fs::read(self.file(name)?) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.file(name)?)?;
        loop {
            // SAFETY: `file` owns a valid open descriptor for the whole call.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(LockGuard::new(file));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                // EWOULDBLOCK already maps to WouldBlock; say which file.
                io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!("{} is locked", self.path.join(name).display()),
                    ))
                }
                _ => return Err(err),
            }
        }
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}
