//! The file-system seam: a small directory trait, a real directory, an
//! in-memory one, and the crash-safe write built on top of them.
//!
//! The checkpoint store needs only a handful of operations on one directory.
//! Putting them behind [`Dir`] lets the same store run against a real
//! directory ([`DiskDir`]) in production and against an in-memory one
//! ([`MemDir`]) in crash sweeps, where thousands of scenarios each make dozens
//! of saves and a real disk would turn seconds into minutes.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// missing. Not crash-safe on its own: use [`write_atomic`] for that.
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
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>>;

    /// Remove the file. Removing a missing file is `Ok`, so cleanup after a
    /// crash can be repeated after another crash.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// The names of the directory's entries, sorted.
    fn list(&self) -> io::Result<Vec<String>>;

    /// Take an exclusive, non-blocking lock on `name` (created if missing).
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] if the lock is held, by this
    /// process or another. Dropping the guard releases it; for [`DiskDir`]
    /// this is `flock(LOCK_EX|LOCK_NB)` on an open descriptor, so the kernel
    /// also releases it when the process dies by any means, and a crash never
    /// leaves a run locked by a process that no longer exists.
    fn lock(&self, name: &str) -> io::Result<LockGuard>;

    /// Where `name` lives, for error messages: a real path, or `mem:/name`.
    fn path_of(&self, name: &str) -> PathBuf;
}

/// A held lock from [`Dir::lock`]; dropping it releases the lock.
///
/// It owns whatever keeps the lock held (an open file for [`DiskDir`]), so a
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

// ---------------------------------------------------------------------------
// DiskDir

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

// ---------------------------------------------------------------------------
// MemDir

/// One file's contents: what a reader sees now, and what a power cut keeps.
struct Node {
    data: Arc<[u8]>,
    /// The contents as of the last `sync`; `None` if never synced, in which
    /// case a power cut leaves the file empty.
    synced: Option<Arc<[u8]>>,
}

#[derive(Default)]
struct MemInner {
    /// Names as a reader sees them now → node.
    names: BTreeMap<String, u64>,
    /// Names as of the last `sync_dir`: what a power cut keeps.
    durable: BTreeMap<String, u64>,
    nodes: HashMap<u64, Node>,
    next_node: u64,
    next_temp: u64,
}

impl MemInner {
    fn new_node(&mut self, data: Arc<[u8]>) -> u64 {
        self.next_node += 1;
        self.nodes
            .insert(self.next_node, Node { data, synced: None });
        self.next_node
    }

    fn node(&self, name: &str) -> io::Result<&Node> {
        self.names
            .get(name)
            .and_then(|n| self.nodes.get(n))
            .ok_or_else(|| not_found(name))
    }

    /// Drop `node` if no name, current or durable, refers to it any more.
    fn release(&mut self, node: u64) {
        let named = |m: &BTreeMap<String, u64>| m.values().any(|&n| n == node);
        if !named(&self.names) && !named(&self.durable) {
            self.nodes.remove(&node);
        }
    }

    fn collect_garbage(&mut self) {
        let live: BTreeSet<u64> = self
            .names
            .values()
            .chain(self.durable.values())
            .copied()
            .collect();
        self.nodes.retain(|n, _| live.contains(n));
    }
}

/// An in-memory directory: a *world* that outlives a crashed life.
///
/// Clones share the same files and locks, so a test keeps one clone, hands
/// another to a life that crashes, and inspects or resumes from what the
/// crash left. Temp names come from a counter, so the same scenario gives the
/// same names every time. A lock is released when its guard drops, which
/// happens while a crashed life unwinds, as the kernel would release a dead
/// process's `flock`.
///
/// A panic models a process crash, which keeps every write. To model a power
/// cut as well, `sync` and `sync_dir` record what the disk would keep, and
/// [`MemDir::power_cut`] forgets the rest, so a sweep can show why
/// [`write_atomic`] syncs the file before the rename and the directory after.
#[derive(Clone, Default)]
pub struct MemDir {
    inner: Arc<Mutex<MemInner>>,
    locks: LockTable,
}

impl MemDir {
    /// A new, empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cut the power: forget everything that was not made durable.
    ///
    /// Names revert to the last [`Dir::sync_dir`] (files created or renamed
    /// since are gone, files removed since are back), every file's contents
    /// revert to its last [`Dir::sync`] (empty if never synced), and every
    /// lock is released, since no process survives. This is the pessimistic
    /// reading of POSIX: real file systems often keep more, never less.
    pub fn power_cut(&self) {
        let mut inner = self.inner();
        inner.names = inner.durable.clone();
        for node in inner.nodes.values_mut() {
            node.data = node.synced.clone().unwrap_or_else(|| Arc::from(&[][..]));
        }
        inner.collect_garbage();
        drop(inner);
        self.locks.clear();
    }

    fn inner(&self) -> MutexGuard<'_, MemInner> {
        // No code runs a crash point while holding this lock, so a poisoned
        // mutex still holds consistent files.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for MemDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The file contents could be megabytes; names are enough to debug.
        let inner = self.inner();
        f.debug_struct("MemDir")
            .field("files", &inner.names.keys().collect::<Vec<_>>())
            .field("locks", &self.locks.held())
            .finish()
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("mem:/{name}: no such file"),
    )
}

/// The locks of an in-memory directory ([`MemDir`], `PowerDir`): which names
/// are held, by which guard. Clones share the table; a power cut clears it,
/// since no process survives one.
#[derive(Clone, Default)]
pub(crate) struct LockTable(Arc<Mutex<LockState>>);

#[derive(Default)]
struct LockState {
    /// Held names, with the token of the guard that holds each.
    held: BTreeMap<String, u64>,
    next_token: u64,
}

impl LockTable {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take `name`, or fail with `WouldBlock` naming it as `shown`.
    pub(crate) fn acquire(&self, name: &str, shown: &str) -> io::Result<LockGuard> {
        let mut st = self.state();
        if st.held.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{shown} is locked"),
            ));
        }
        st.next_token += 1;
        let token = st.next_token;
        st.held.insert(name.to_owned(), token);
        Ok(LockGuard::new(TableLock {
            table: Arc::clone(&self.0),
            name: name.to_owned(),
            token,
        }))
    }

    /// Release every lock: the power went out.
    pub(crate) fn clear(&self) {
        self.state().held.clear();
    }

    /// The names held now, sorted.
    pub(crate) fn held(&self) -> Vec<String> {
        self.state().held.keys().cloned().collect()
    }
}

/// The token inside a [`LockTable`] guard: releases the name on drop, unless
/// a power cut already did and someone else took it since.
struct TableLock {
    table: Arc<Mutex<LockState>>,
    name: String,
    token: u64,
}

impl Drop for TableLock {
    fn drop(&mut self) {
        let mut st = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if st.held.get(&self.name) == Some(&self.token) {
            st.held.remove(&self.name);
        }
    }
}

/// The next free temp name `<prefix><n>.tmp` of an in-memory directory
/// (deterministic: a counter, so sweeps stay byte-identical), trying at most
/// [`TEMP_ATTEMPTS`] names.
pub(crate) fn next_temp_name(
    prefix: &str,
    counter: &mut u64,
    taken: impl Fn(&str) -> bool,
) -> io::Result<String> {
    for _ in 0..TEMP_ATTEMPTS {
        *counter += 1;
        let name = format!("{prefix}{counter}.tmp");
        check_name(&name)?;
        if !taken(&name) {
            return Ok(name);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free temp name for prefix {prefix:?} after {TEMP_ATTEMPTS} tries"),
    ))
}

impl Dir for MemDir {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        let mut guard = self.inner();
        let inner = &mut *guard;
        let names = &inner.names;
        let name = next_temp_name(prefix, &mut inner.next_temp, |n| names.contains_key(n))?;
        let node = inner.new_node(Arc::from(&[][..]));
        inner.names.insert(name.clone(), node);
        Ok(name)
    }

    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        let data: Arc<[u8]> = Arc::from(data);
        match inner.names.get(name).copied() {
            Some(n) => {
                if let Some(node) = inner.nodes.get_mut(&n) {
                    node.data = data;
                }
            }
            None => {
                let node = inner.new_node(data);
                inner.names.insert(name.to_owned(), node);
            }
        }
        Ok(())
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        let n = *inner.names.get(name).ok_or_else(|| not_found(name))?;
        if let Some(node) = inner.nodes.get_mut(&n) {
            node.synced = Some(Arc::clone(&node.data));
        }
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        let mut inner = self.inner();
        let node = inner.names.remove(from).ok_or_else(|| not_found(from))?;
        if let Some(old) = inner.names.insert(to.to_owned(), node) {
            if old != node {
                inner.release(old);
            }
        }
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut inner = self.inner();
        inner.durable = inner.names.clone();
        inner.collect_garbage();
        Ok(())
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        check_name(name)?;
        let inner = self.inner();
        match inner.node(name) {
            Ok(node) => Ok(Some(node.data.to_vec())),
            Err(_) => Ok(None),
        }
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        if let Some(node) = inner.names.remove(name) {
            inner.release(node);
        }
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.inner().names.keys().cloned().collect())
    }

    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        check_name(name)?;
        let guard = self.locks.acquire(name, &format!("mem:/{name}"))?;
        let mut inner = self.inner();
        if !inner.names.contains_key(name) {
            let node = inner.new_node(Arc::from(&[][..]));
            inner.names.insert(name.to_owned(), node);
        }
        Ok(guard)
    }

    fn path_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("mem:/{name}"))
    }
}

// ---------------------------------------------------------------------------
// write_atomic

/// How [`write_atomic`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// fsync the temp file before the rename and the directory after it.
    /// Turn off only where a power cut does not matter (crash sweeps, tests):
    /// a process crash cannot tear the file either way.
    pub sync: bool,
    /// Pass the crash points `mid-save` (before the rename) and
    /// `after rename`, so a sweep can crash a save on either side of the step
    /// that swaps old for new.
    pub points: bool,
}

impl Default for WriteOptions {
    /// Synced, with crash points: the safe choice.
    fn default() -> Self {
        WriteOptions {
            sync: true,
            points: true,
        }
    }
}

/// Which step of [`write_atomic`] failed, for error messages.
pub(crate) type StepError = (&'static str, io::Error);

/// [`write_atomic`], naming the step that failed.
pub(crate) fn write_atomic_step(
    dir: &dyn Dir,
    name: &str,
    bytes: &[u8],
    opts: WriteOptions,
) -> Result<(), StepError> {
    check_name(name).map_err(|e| ("write", e))?;
    let tmp = dir
        .create_temp(&format!(".{name}-"))
        .map_err(|e| ("create temp file for", e))?;
    let swapped = (|| {
        dir.write(&tmp, bytes)
            .map_err(|e| ("write temp file for", e))?;
        if opts.sync {
            dir.sync(&tmp).map_err(|e| ("sync temp file for", e))?;
        }
        if opts.points {
            crashpoint::point!("mid-save");
        }
        dir.rename(&tmp, name)
            .map_err(|e| ("rename temp file over", e))
    })();
    if let Err(e) = swapped {
        // Best effort: the error that matters is the one above, and open
        // removes leftovers anyway.
        let _ = dir.remove(&tmp);
        return Err(e);
    }
    if opts.points {
        crashpoint::point!("after rename");
    }
    if opts.sync {
        dir.sync_dir().map_err(|e| ("sync directory of", e))?;
    }
    Ok(())
}

/// Remove the temp files a crashed [`write_atomic`] of `name` left behind
/// (`.<name>-<unique>.tmp`), and return their names.
///
/// Such a file never became `name`, so nobody ever heard of what it holds;
/// call this when a process starts, under the lock that keeps other writers
/// out. Only names whose unique part is alphanumeric count, so the temp
/// files of another file whose name extends this one's (`a` and `a-b`) are
/// never touched.
pub fn remove_leftover_temps(dir: &dyn Dir, name: &str) -> io::Result<Vec<String>> {
    let prefix = format!(".{name}-");
    let mut removed = Vec::new();
    for file in dir.list()? {
        let ours = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .is_some_and(|unique| {
                !unique.is_empty() && unique.bytes().all(|b| b.is_ascii_alphanumeric())
            });
        if ours {
            dir.remove(&file)?;
            removed.push(file);
        }
    }
    Ok(removed)
}

/// Replace `name` with `bytes` so that, whenever a crash comes, the directory
/// holds either the old file or the new one, never half of one.
///
/// Writing over a file in place can be torn by a crash. Instead this creates
/// a temp file `.<name>-<unique>.tmp` in the same directory (a rename cannot
/// cross file systems), writes it, syncs it (if `opts.sync`: so the new name
/// never points at data that did not reach the disk), passes the point
/// `mid-save`, renames it over `name` (the one step that swaps old for new),
/// passes `after rename`, and syncs the directory (if `opts.sync`: so the
/// rename survives a power cut). On an error the temp file is removed; after
/// a crash it is left for [`remove_leftover_temps`] (which
/// [`Checkpoint::open`](crate::Checkpoint::open) calls) to remove.
pub fn write_atomic(dir: &dyn Dir, name: &str, bytes: &[u8], opts: WriteOptions) -> io::Result<()> {
    write_atomic_step(dir, name, bytes, opts).map_err(|(_, e)| e)
}
