//! A directory whose operations fail on demand.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::{Dir, LockGuard};

/// One operation of a [`Dir`], for [`FaultDir::fail`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// [`Dir::create_temp`].
    CreateTemp,
    /// [`Dir::write`].
    Write,
    /// [`Dir::sync`].
    Sync,
    /// [`Dir::rename`].
    Rename,
    /// [`Dir::sync_dir`].
    SyncDir,
    /// [`Dir::read`] and [`Dir::read_limited`].
    Read,
    /// [`Dir::remove`].
    Remove,
    /// [`Dir::list`].
    List,
    /// [`Dir::lock`].
    Lock,
}

/// A [`Dir`] that passes every operation to `inner`, except those told to
/// fail with [`FaultDir::fail`]: they return an error of the chosen kind
/// (before reaching `inner`) until [`FaultDir::heal`]. Clones share the
/// faults.
///
/// ```
/// use std::io::ErrorKind;
/// use durable::testing::{FaultDir, MemDir, Op};
/// use durable::Dir;
///
/// let dir = FaultDir::new(MemDir::new());
/// dir.write("a", b"1").unwrap();
/// dir.fail(Op::Read, ErrorKind::PermissionDenied);
/// assert_eq!(dir.read("a").unwrap_err().kind(), ErrorKind::PermissionDenied);
/// dir.heal();
/// assert_eq!(dir.read("a").unwrap().as_deref(), Some(&b"1"[..]));
/// ```
#[derive(Clone, Debug)]
pub struct FaultDir<D> {
    inner: D,
    faults: Arc<Mutex<BTreeMap<Op, io::ErrorKind>>>,
}

impl<D: Dir> FaultDir<D> {
    /// Wrap `inner`, failing nothing yet.
    pub fn new(inner: D) -> Self {
        FaultDir {
            inner,
            faults: Arc::default(),
        }
    }

    /// Make every `op` fail with an error of `kind` from now on.
    pub fn fail(&self, op: Op, kind: io::ErrorKind) {
        self.faults().insert(op, kind);
    }

    /// Stop failing anything.
    pub fn heal(&self) {
        self.faults().clear();
    }

    fn faults(&self) -> MutexGuard<'_, BTreeMap<Op, io::ErrorKind>> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(&self, op: Op, name: &str) -> io::Result<()> {
        match self.faults().get(&op) {
            Some(&kind) => Err(io::Error::new(
                kind,
                format!("injected {kind} on {op:?} of {name:?}"),
            )),
            None => Ok(()),
        }
    }
}

impl<D: Dir> Dir for FaultDir<D> {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.check(Op::CreateTemp, prefix)?;
        self.inner.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.check(Op::Write, name)?;
        self.inner.write(name, data)
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        self.check(Op::Sync, name)?;
        self.inner.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.check(Op::Rename, from)?;
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.check(Op::SyncDir, ".")?;
        self.inner.sync_dir()
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.check(Op::Read, name)?;
        self.inner.read(name)
    }
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        self.check(Op::Read, name)?;
        self.inner.read_limited(name, limit)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.check(Op::Remove, name)?;
        self.inner.remove(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.check(Op::List, ".")?;
        self.inner.list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        self.check(Op::Lock, name)?;
        self.inner.lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        self.inner.path_of(name)
    }
}
