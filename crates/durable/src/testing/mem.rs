//! An in-memory directory whose clones share files: the world of a crash
//! sweep, which outlives every crashed life.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::Hasher;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::lock_table::{next_temp_name, LockTable};
use crate::dir::{check_name, Dir, LockGuard};

/// A file's bytes, immutable and shared by reference count, with their
/// digest taken the first time a sweep hashes them: a sweep fingerprints
/// the directory at every point, and a checkpoint file is the longest thing
/// in it, rewritten far less often than it is hashed.
#[derive(Clone)]
struct Contents(Arc<ContentsInner>);

struct ContentsInner {
    bytes: Box<[u8]>,
    digest: OnceLock<(u64, u64)>,
}

impl Contents {
    fn new(bytes: &[u8]) -> Self {
        Contents(Arc::new(ContentsInner {
            bytes: bytes.into(),
            digest: OnceLock::new(),
        }))
    }

    fn empty() -> Self {
        Self::new(&[])
    }

    /// The same bytes: the same contents, or a copy of them.
    fn same(&self, other: &Contents) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.bytes == other.0.bytes
    }

    /// 128 bits of two SipHash passes under different prefixes, taken once.
    fn digest(&self) -> (u64, u64) {
        *self.0.digest.get_or_init(|| {
            let pass = |prefix: u8| {
                let mut h = std::hash::DefaultHasher::new();
                h.write_u8(prefix);
                h.write(&self.0.bytes);
                h.finish()
            };
            (pass(1), pass(2))
        })
    }
}

impl std::ops::Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.bytes
    }
}

/// One file's contents: what a reader sees now, and what a power cut keeps.
struct Node {
    data: Contents,
    /// The contents as of the last `sync`; `None` if never synced, in which
    /// case a power cut leaves the file empty.
    synced: Option<Contents>,
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
    fn new_node(&mut self, data: Contents) -> u64 {
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
/// [`write_atomic`](crate::write::write_atomic) syncs the file before the rename and the directory after.
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
            node.data = node.synced.clone().unwrap_or_else(Contents::empty);
        }
        inner.collect_garbage();
        drop(inner);
        self.locks.clear();
    }

    /// A deep copy: the same files (names, contents, what a power cut would
    /// keep, the temp-name counter) in a directory that shares nothing with
    /// this one, or `None` while a lock is held (a lock belongs to a running
    /// life, which a copy cannot have). File contents are immutable and
    /// shared by reference count, so a copy costs the names, not the bytes.
    ///
    /// ```
    /// use durable::{testing::MemDir, Dir};
    /// let a = MemDir::new();
    /// a.write("x", b"1").unwrap();
    /// let b = a.deep_clone().unwrap();
    /// b.write("x", b"2").unwrap();
    /// assert_eq!(a.read("x").unwrap().unwrap(), b"1");
    /// ```
    pub fn deep_clone(&self) -> Option<MemDir> {
        if !self.locks.held().is_empty() {
            return None;
        }
        Some(self.copy_as_crashed())
    }

    /// A deep copy as a process crash now would leave the directory: the
    /// same files as [`MemDir::deep_clone`], with no lock held (a dead
    /// process holds none), even while a life holds one here — for a sweep
    /// that copies the world at a crash point of a running life.
    ///
    /// ```
    /// use durable::{testing::MemDir, Dir};
    /// let a = MemDir::new();
    /// let _held = a.lock("run.lock").unwrap();
    /// assert!(a.deep_clone().is_none());
    /// let b = a.copy_as_crashed();
    /// assert!(b.lock("run.lock").is_ok());
    /// ```
    pub fn copy_as_crashed(&self) -> MemDir {
        let inner = self.inner();
        let copy = MemInner {
            names: inner.names.clone(),
            durable: inner.durable.clone(),
            nodes: inner
                .nodes
                .iter()
                .map(|(&n, node)| {
                    (
                        n,
                        Node {
                            data: node.data.clone(),
                            synced: node.synced.clone(),
                        },
                    )
                })
                .collect(),
            next_node: inner.next_node,
            next_temp: inner.next_temp,
        };
        MemDir {
            inner: Arc::new(Mutex::new(copy)),
            locks: LockTable::default(),
        }
    }

    /// Feed everything a user of this directory could ever observe to `h`:
    /// each name with its contents and synced contents, what a power cut
    /// would keep, which names share a file, the temp-name counter and the
    /// held locks. Two directories that hash the same behave the same.
    pub fn hash_contents(&self, h: &mut dyn Hasher) {
        self.hash_with(h, true);
    }

    /// [`MemDir::hash_contents`] without the temp-name counter, and with
    /// each temp file's name (`{prefix}{n}.tmp`, from
    /// [`Dir::create_temp`](crate::Dir::create_temp)) fed without its
    /// number: two directories that hash the same behave the same for a
    /// program that never keeps a temp file's name across a crash (as
    /// durable's atomic writes do not: a restart removes leftover temps),
    /// whatever number of temp files each made before.
    ///
    /// ```
    /// use durable::{testing::MemDir, Dir};
    /// use std::hash::{DefaultHasher, Hasher};
    /// let hash = |d: &MemDir| {
    ///     let mut h = DefaultHasher::new();
    ///     d.hash_files(&mut h);
    ///     h.finish()
    /// };
    /// let (a, b) = (MemDir::new(), MemDir::new());
    /// let t = b.create_temp(".x-").unwrap();
    /// b.remove(&t).unwrap();
    /// let (ta, tb) = (a.create_temp(".x-").unwrap(), b.create_temp(".x-").unwrap());
    /// assert_ne!(ta, tb);
    /// assert_eq!(hash(&a), hash(&b));
    /// ```
    pub fn hash_files(&self, h: &mut dyn Hasher) {
        self.hash_with(h, false);
    }

    fn hash_with(&self, h: &mut dyn Hasher, temps: bool) {
        let inner = self.inner();
        // Files by first appearance, so the hash does not depend on the
        // internal numbering of nodes.
        let mut seen: HashMap<u64, u64> = HashMap::new();
        for map in [&inner.names, &inner.durable] {
            h.write_usize(map.len());
            for (name, n) in map {
                let fed = match name.strip_suffix(".tmp") {
                    Some(stem) if !temps => stem.trim_end_matches(|c: char| c.is_ascii_digit()),
                    _ => name.as_str(),
                };
                h.write(fed.as_bytes());
                h.write_u8(0xff);
                let next = seen.len() as u64;
                let first = *seen.entry(*n).or_insert(next);
                h.write_u64(first);
                if first == next {
                    match inner.nodes.get(n) {
                        Some(node) => {
                            // Each file's bytes by their digest, taken once
                            // per contents (a sweep asks at every point).
                            let (a, b) = node.data.digest();
                            h.write_usize(node.data.len());
                            h.write_u64(a);
                            h.write_u64(b);
                            // Synced contents equal to the contents (the
                            // usual case after a sync) are fed as a mark:
                            // the same mark for the same bytes, whether
                            // shared or copied.
                            match &node.synced {
                                Some(d) if d.same(&node.data) => {
                                    h.write_u8(3);
                                }
                                Some(d) => {
                                    let (a, b) = d.digest();
                                    h.write_u8(1);
                                    h.write_usize(d.len());
                                    h.write_u64(a);
                                    h.write_u64(b);
                                }
                                None => h.write_u8(0),
                            }
                        }
                        None => h.write_u8(2),
                    }
                }
            }
        }
        if temps {
            h.write_u64(inner.next_temp);
        }
        drop(inner);
        for name in self.locks.held() {
            h.write(name.as_bytes());
            h.write_u8(0xff);
        }
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

impl Dir for MemDir {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        let mut guard = self.inner();
        let inner = &mut *guard;
        let names = &inner.names;
        let name = next_temp_name(prefix, &mut inner.next_temp, |n| names.contains_key(n))?;
        let node = inner.new_node(Contents::empty());
        inner.names.insert(name.clone(), node);
        Ok(name)
    }

    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        let data = Contents::new(data);
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
            node.synced = Some(node.data.clone());
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
            let node = inner.new_node(Contents::empty());
            inner.names.insert(name.to_owned(), node);
        }
        Ok(guard)
    }

    fn path_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("mem:/{name}"))
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{DefaultHasher, Hasher};

    use super::MemDir;
    use crate::Dir;

    fn hash(d: &MemDir) -> u64 {
        let mut h = DefaultHasher::new();
        d.hash_contents(&mut h);
        h.finish()
    }

    /// Files are hashed by a digest of their bytes taken once per contents:
    /// the same bytes hash the same whether written again or shared by a
    /// copy, and any difference — in the bytes now, in what a sync kept, in
    /// whether a sync happened — tells two directories apart.
    #[test]
    fn the_hash_tells_contents_apart_and_nothing_else() {
        let a = MemDir::new();
        a.write("f", b"one").unwrap();
        a.sync("f").unwrap();
        let b = MemDir::new();
        b.write("f", b"one").unwrap();
        b.sync("f").unwrap();
        assert_eq!(hash(&a), hash(&b), "the same bytes, written apart");
        assert_eq!(hash(&a), hash(&a.deep_clone().unwrap()), "a copy");
        // Asked twice: the digest kept is the digest taken.
        assert_eq!(hash(&a), hash(&a));

        let c = MemDir::new();
        c.write("f", b"two").unwrap();
        c.sync("f").unwrap();
        assert_ne!(hash(&a), hash(&c), "other bytes");

        // Contents unsynced since: the synced bytes differ from the bytes.
        let d = a.deep_clone().unwrap();
        d.write("f", b"two").unwrap();
        assert_ne!(hash(&d), hash(&c), "a sync kept other bytes");
        // Never synced.
        let e = MemDir::new();
        e.write("f", b"two").unwrap();
        assert_ne!(hash(&e), hash(&c));
        assert_ne!(hash(&e), hash(&d));
        // The same again: synced "one", now "two".
        let f = MemDir::new();
        f.write("f", b"one").unwrap();
        f.sync("f").unwrap();
        f.write("f", b"two").unwrap();
        assert_eq!(hash(&f), hash(&d));
    }
}
