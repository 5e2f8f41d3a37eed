//! A directory whose calls fail on demand: the disk that answers with an
//! error instead of crashing.
//!
//! [`FaultDir`] wraps any [`Dir`] and counts every call by kind
//! ([`Call`]), across all its clones (so across the lives of one world). A
//! [`Fault`] makes the `hit`-th call of one kind fail once, with the error a
//! disk gives there: `ENOSPC` for [`Call::CreateTemp`] and [`Call::Write`],
//! `EIO` for everything else. A fault sweep first runs the program on a
//! healthy `FaultDir` to count the calls, then once per call with that call
//! failing.
//!
//! What a failed call leaves, as adversarially as a real disk may:
//!
//! * a failed **write** wrote the first half of its data (a short write
//!   before the disk filled up), then failed;
//! * a failed **fsync** synced nothing, and *poisons* the file: every later
//!   fsync of it reports success and syncs nothing, as Linux does after a
//!   writeback error (the error is reported once, the dirty pages are
//!   dropped or marked clean). A writer that retries the fsync and believes
//!   it is wrong here, as it was in PostgreSQL; a rename or remove moves or
//!   clears the poison with the name;
//! * a failed **rename**, **remove**, **create**, **directory fsync**,
//!   **read**, **list** or **lock** did nothing.
//!
//! Besides these one-shot faults, [`FaultDir::fail_every`] makes *every*
//! call of a kind fail with a chosen error kind until [`FaultDir::heal`]
//! (a file a test running as root cannot make unreadable with its mode
//! bits, a directory that refuses every lock): such an error reaches
//! `inner` never, and carries the file's name in its message.
//!
//! ```
//! use durable::testing::{Call, FaultDir, MemDir};
//! use durable::write::{write_atomic, WriteOptions};
//! use durable::Dir;
//!
//! let disk = FaultDir::new(MemDir::new());
//! disk.fail(Call::Sync, 1); // the first fsync fails
//! let err = write_atomic(&disk, "f", b"data", WriteOptions::default()).unwrap_err();
//! assert_eq!(err.raw_os_error(), Some(libc::EIO));
//! assert_eq!(disk.read("f").unwrap(), None, "the failed save published nothing");
//! // The next save starts again from a fresh temp file, and succeeds.
//! write_atomic(&disk, "f", b"data", WriteOptions::default()).unwrap();
//! assert_eq!(disk.read("f").unwrap().as_deref(), Some(&b"data"[..]));
//! assert_eq!(disk.hits(Call::Sync), 2);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::{Dir, LockGuard};

/// A kind of call through the [`Dir`] seam.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Call {
    /// [`Dir::create_temp`]; fails with `ENOSPC`.
    CreateTemp,
    /// [`Dir::write`]; fails with `ENOSPC` after writing half.
    Write,
    /// [`Dir::sync`]; fails with `EIO` and poisons the file.
    Sync,
    /// [`Dir::rename`]; fails with `EIO`.
    Rename,
    /// [`Dir::sync_dir`]; fails with `EIO`.
    SyncDir,
    /// [`Dir::read`]; fails with `EIO`.
    Read,
    /// [`Dir::remove`]; fails with `EIO`.
    Remove,
    /// [`Dir::list`]; fails with `EIO`.
    List,
    /// [`Dir::lock`]; fails with `EIO`.
    Lock,
}

impl Call {
    /// Every kind, in the order of [`Dir`]'s methods.
    pub const ALL: [Call; 9] = [
        Call::CreateTemp,
        Call::Write,
        Call::Sync,
        Call::Rename,
        Call::SyncDir,
        Call::Read,
        Call::Remove,
        Call::List,
        Call::Lock,
    ];

    /// A short name, for scenario names and tables.
    pub fn slug(self) -> &'static str {
        match self {
            Call::CreateTemp => "create",
            Call::Write => "write",
            Call::Sync => "fsync",
            Call::Rename => "rename",
            Call::SyncDir => "fsync-dir",
            Call::Read => "read",
            Call::Remove => "remove",
            Call::List => "list",
            Call::Lock => "lock",
        }
    }

    /// The kind named by `slug`.
    pub fn from_slug(slug: &str) -> Option<Call> {
        Call::ALL.into_iter().find(|c| c.slug() == slug)
    }

    /// The error the disk answers this call with.
    pub fn errno(self) -> i32 {
        match self {
            Call::CreateTemp | Call::Write => libc::ENOSPC,
            _ => libc::EIO,
        }
    }
}

/// The `hit`-th call (1-based, counted across every clone) of kind `call`
/// fails once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fault {
    /// Which kind of call.
    pub call: Call,
    /// Which of its calls, 1-based.
    pub hit: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.call.slug(), self.hit)
    }
}

impl Fault {
    /// Parse `call#k` (the k-th call of that kind), as [`Fault`]'s `Display` writes it.
    pub fn parse(s: &str) -> Option<Fault> {
        let (call, hit) = s.split_once('#')?;
        Some(Fault {
            call: Call::from_slug(call)?,
            hit: hit.parse().ok().filter(|&h| h > 0)?,
        })
    }
}

#[derive(Default)]
struct Faults {
    armed: BTreeSet<Fault>,
    /// Kinds whose every call fails, with the error kind, until healed.
    every: BTreeMap<Call, io::ErrorKind>,
    hits: BTreeMap<Call, u64>,
    /// Faults that fired, with the file they hit, in order.
    fired: Vec<(Fault, String)>,
    /// Files whose fsync failed: later fsyncs lie.
    poisoned: BTreeSet<String>,
}

/// A [`Dir`] whose calls fail on demand: the [`Fault`]s armed with
/// [`FaultDir::fail`] each fail once, with the errno of [`Call::errno`]; a
/// failed write is short, and a failed fsync poisons the file so that later
/// fsyncs of it report success and sync nothing (Linux after a writeback
/// error).
#[derive(Clone)]
pub struct FaultDir<D> {
    inner: D,
    faults: Arc<Mutex<Faults>>,
}

impl<D: Dir> FaultDir<D> {
    /// `inner`, healthy until told to fail.
    pub fn new(inner: D) -> Self {
        FaultDir {
            inner,
            faults: Arc::default(),
        }
    }

    /// The directory it wraps.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Make the `hit`-th call of kind `call` (counted from the first call
    /// ever made through any clone) fail once.
    pub fn fail(&self, call: Call, hit: u64) {
        self.state().armed.insert(Fault { call, hit });
    }

    /// Make every call of kind `call` fail with an error of `kind` from now
    /// on, until [`FaultDir::heal`]. The calls are still counted.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use durable::testing::{Call, FaultDir, MemDir};
    /// use durable::Dir;
    ///
    /// let dir = FaultDir::new(MemDir::new());
    /// dir.write("a", b"1").unwrap();
    /// dir.fail_every(Call::Read, ErrorKind::PermissionDenied);
    /// assert_eq!(dir.read("a").unwrap_err().kind(), ErrorKind::PermissionDenied);
    /// assert_eq!(dir.read("a").unwrap_err().kind(), ErrorKind::PermissionDenied);
    /// dir.heal();
    /// assert_eq!(dir.read("a").unwrap().as_deref(), Some(&b"1"[..]));
    /// ```
    pub fn fail_every(&self, call: Call, kind: io::ErrorKind) {
        self.state().every.insert(call, kind);
    }

    /// Arm each of `faults`.
    pub fn fail_all(&self, faults: &[Fault]) {
        self.state().armed.extend(faults.iter().copied());
    }

    /// Disarm every fault not yet fired and every [`FaultDir::fail_every`]:
    /// the disk is healthy from now on (space was freed). Poisoned files
    /// stay poisoned.
    pub fn heal(&self) {
        let mut st = self.state();
        st.armed.clear();
        st.every.clear();
    }

    /// How many calls of kind `call` were made so far.
    pub fn hits(&self, call: Call) -> u64 {
        self.state().hits.get(&call).copied().unwrap_or(0)
    }

    /// Every call so far, as the faults that would fail each one.
    pub fn sites(&self) -> Vec<Fault> {
        let st = self.state();
        Call::ALL
            .into_iter()
            .flat_map(|call| {
                let n = st.hits.get(&call).copied().unwrap_or(0);
                (1..=n).map(move |hit| Fault { call, hit })
            })
            .collect()
    }

    /// The faults that fired, with the file each hit (`""` for the
    /// directory itself), in order.
    pub fn fired(&self) -> Vec<(Fault, String)> {
        self.state().fired.clone()
    }

    fn state(&self) -> MutexGuard<'_, Faults> {
        // Counting only: a panic mid-update leaves consistent numbers.
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count a call of `call` on `name`; `Err` if it must fail.
    fn hit(&self, call: Call, name: &str) -> Result<(), Injected> {
        let mut st = self.state();
        let n = st.hits.entry(call).or_insert(0);
        *n += 1;
        let fault = Fault { call, hit: *n };
        if let Some(&kind) = st.every.get(&call) {
            let shown = if name.is_empty() { "." } else { name };
            return Err(Injected::Every(io::Error::new(
                kind,
                format!("injected {kind} on {} of {shown:?}", call.slug()),
            )));
        }
        if st.armed.remove(&fault) {
            st.fired.push((fault, name.to_owned()));
            return Err(Injected::Once(io::Error::from_raw_os_error(call.errno())));
        }
        Ok(())
    }
}

/// Why a call fails: a one-shot [`Fault`] (the disk's own answer, with its
/// side effects: a short write, a poisoned file) or a
/// [`FaultDir::fail_every`] (refused before reaching the directory).
enum Injected {
    Once(io::Error),
    Every(io::Error),
}

impl From<Injected> for io::Error {
    fn from(i: Injected) -> io::Error {
        match i {
            Injected::Once(e) | Injected::Every(e) => e,
        }
    }
}

impl<D> fmt::Debug for FaultDir<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("FaultDir")
            .field("armed", &st.armed)
            .field("every", &st.every)
            .field("fired", &st.fired)
            .finish_non_exhaustive()
    }
}

impl<D: Dir> Dir for FaultDir<D> {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.hit(Call::CreateTemp, prefix)?;
        self.inner.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        match self.hit(Call::Write, name) {
            Ok(()) => self.inner.write(name, data),
            Err(Injected::Once(e)) => {
                // A short write, then the disk was full.
                self.inner.write(name, &data[..data.len() / 2])?;
                Err(e)
            }
            Err(Injected::Every(e)) => Err(e),
        }
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        match self.hit(Call::Sync, name) {
            Ok(()) => {}
            Err(Injected::Once(e)) => {
                self.state().poisoned.insert(name.to_owned());
                return Err(e);
            }
            Err(Injected::Every(e)) => return Err(e),
        }
        if self.state().poisoned.contains(name) {
            // Linux reported the writeback error once; this fsync "succeeds".
            return Ok(());
        }
        self.inner.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.hit(Call::Rename, from)?;
        self.inner.rename(from, to)?;
        let mut st = self.state();
        st.poisoned.remove(to);
        if st.poisoned.remove(from) {
            st.poisoned.insert(to.to_owned());
        }
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.hit(Call::SyncDir, "")?;
        self.inner.sync_dir()
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.hit(Call::Read, name)?;
        self.inner.read(name)
    }
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        self.hit(Call::Read, name)?;
        self.inner.read_limited(name, limit)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.hit(Call::Remove, name)?;
        self.inner.remove(name)?;
        self.state().poisoned.remove(name);
        Ok(())
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.hit(Call::List, "")?;
        self.inner.list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        self.hit(Call::Lock, name)?;
        self.inner.lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        self.inner.path_of(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{DiskState, PowerDir};
    use crate::write::{write_atomic, WriteOptions};

    #[test]
    fn each_call_fails_once_at_its_hit_with_its_errno() {
        for call in Call::ALL {
            let d = FaultDir::new(PowerDir::default());
            d.fail(call, 2);
            let mut errors = Vec::new();
            for _ in 0..3 {
                let r = match call {
                    Call::CreateTemp => d.create_temp(".f-").map(drop),
                    Call::Write => d.write("f", b"abcd"),
                    Call::Sync => d.write("f", b"x").and_then(|()| d.sync("f")),
                    Call::Rename => d.write("a", b"x").and_then(|()| d.rename("a", "b")),
                    Call::SyncDir => d.sync_dir(),
                    Call::Read => d.read("f").map(drop),
                    Call::Remove => d.remove("f"),
                    Call::List => d.list().map(drop),
                    Call::Lock => d.lock("f.lock").map(drop),
                };
                errors.push(r.err().and_then(|e| e.raw_os_error()));
            }
            assert_eq!(errors, [None, Some(call.errno()), None], "{call:?}");
            assert_eq!(d.hits(call), 3);
            assert_eq!(d.fired().len(), 1);
            assert_eq!(
                Fault::parse(&d.fired()[0].0.to_string()),
                Some(d.fired()[0].0)
            );
        }
    }

    #[test]
    fn a_failed_fsync_poisons_the_file_and_a_retry_would_lie() {
        let power = PowerDir::new(DiskState::LoseUnsynced);
        let d = FaultDir::new(power.clone());
        d.write("f", b"data").unwrap();
        d.fail(Call::Sync, 1);
        assert!(d.sync("f").is_err());
        d.sync("f").unwrap(); // the retry "succeeds"...
        d.sync_dir().unwrap();
        power.power_cut();
        // ... and synced nothing: believing it loses the data.
        assert_eq!(power.read("f").unwrap(), Some(Vec::new()));
    }

    #[test]
    fn the_real_writer_after_a_failed_fsync_publishes_only_a_fresh_synced_file() {
        let power = PowerDir::new(DiskState::LoseUnsynced);
        let d = FaultDir::new(power.clone());
        write_atomic(&d, "f", b"old", WriteOptions::default()).unwrap();
        d.fail(Call::Sync, 2);
        assert!(write_atomic(&d, "f", b"new", WriteOptions::default()).is_err());
        assert_eq!(d.read("f").unwrap().as_deref(), Some(&b"old"[..]));
        write_atomic(&d, "f", b"new", WriteOptions::default()).unwrap();
        power.power_cut();
        assert_eq!(power.read("f").unwrap().as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn fail_every_refuses_before_the_directory_and_names_the_file() {
        let d = FaultDir::new(PowerDir::default());
        d.fail_every(Call::Write, io::ErrorKind::StorageFull);
        for _ in 0..2 {
            let e = d.write("f", b"abcd").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::StorageFull);
            assert!(e.to_string().contains("\"f\""), "{e}");
        }
        assert_eq!(d.read("f").unwrap(), None, "nothing written, not even half");
        assert_eq!(d.hits(Call::Write), 2);
        assert!(d.fired().is_empty(), "no one-shot fault fired");
        d.heal();
        d.write("f", b"abcd").unwrap();
        assert_eq!(
            d.read_limited("f", 10).unwrap().as_deref(),
            Some(&b"abcd"[..])
        );
    }

    #[test]
    fn a_failed_write_is_short() {
        let d = FaultDir::new(PowerDir::default());
        d.fail(Call::Write, 1);
        assert!(d.write("f", b"abcd").is_err());
        assert_eq!(d.read("f").unwrap().as_deref(), Some(&b"ab"[..]));
        d.heal();
    }
}
