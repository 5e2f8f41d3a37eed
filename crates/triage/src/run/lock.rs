//! The run's lock: `<run>.lock`, taken without waiting before the run's
//! world is opened, and handed to the loop's checkpoint store
//! ([`HeldLock`]) so one lock covers the run's whole life.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use durable::dir::LockGuard;
use durable::{Dir, DiskDir};

use crate::exit::Failure;
use crate::world::StateDir;

/// Take `<run>.lock` without waiting: another process holding it is
/// [`durable::Error::Locked`], with the store's own message.
pub(crate) fn take_lock(sd: &StateDir, lock_name: &str) -> Result<LockGuard, Failure> {
    let dir = sd.dir();
    dir.lock(lock_name).map_err(|e| {
        let path = dir.path_of(lock_name);
        if e.kind() == io::ErrorKind::WouldBlock {
            Failure::from(durable::Error::Locked { path })
        } else {
            Failure::run("io", format!("cannot lock {}: {e}", path.display()))
        }
    })
}

/// The state directory as the loop's checkpoint [`Dir`], with the run's lock
/// already held: the command takes `<run>.lock` before it opens the run's
/// world, and hands the guard to [`Checkpoint::open`] when the loop asks for
/// that lock, so the lock is held without a gap from before the world is
/// touched until the life ends. Every other operation goes to the real
/// directory.
///
/// [`Checkpoint::open`]: agent::state::Checkpoint::open
#[derive(Debug)]
pub(crate) struct HeldLock {
    pub(crate) dir: Arc<DiskDir>,
    pub(crate) name: String,
    pub(crate) guard: Mutex<Option<LockGuard>>,
}

impl Dir for HeldLock {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.dir.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.dir.write(name, data)
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        self.dir.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.dir.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.dir.sync_dir()
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.dir.read(name)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.dir.remove(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.dir.list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        if name == self.name {
            let held = self.guard.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(guard) = held {
                return Ok(guard);
            }
        }
        self.dir.lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        self.dir.path_of(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lock_hands_over_its_guard_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Arc::new(DiskDir::new(tmp.path()).unwrap());
        let guard = dir.lock("r.lock").unwrap();
        let held = HeldLock {
            dir: Arc::clone(&dir),
            name: "r.lock".into(),
            guard: Mutex::new(Some(guard)),
        };
        let g = held.lock("r.lock").expect("the held guard");
        // The lock is still held: by the guard just handed over.
        assert_eq!(
            held.lock("r.lock").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(g);
        assert!(held.lock("r.lock").is_ok(), "released with the guard");
    }
}
