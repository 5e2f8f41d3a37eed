//! A directory that loses what was not synced when the power goes: the
//! [`Dir`] a crash sweep needs to test durability, not only save order.
//!
//! A panic keeps the operating system's file cache, so a sweep that crashes by
//! panicking can never see a missing fsync. [`PowerDir`] keeps two views of
//! every file and name: what a reader sees now, and what the disk holds (the
//! contents as of each file's last [`Dir::sync`], the names as of the last
//! [`Dir::sync_dir`]), plus the unsynced operations in between, in program
//! order. A power cut replaces the present by one [`DiskState`]: a subset of
//! the unsynced operations that a real file system may have persisted, chosen
//! in advance for the world, as ALICE and LazyFS explore such subsets.
//!
//! The directory notices a cut by itself: a process calls [`PowerDir::boot`]
//! when it starts and [`PowerDir::shutdown`] when it ends normally, so a boot
//! that finds the previous process never shut down knows it died, and cuts
//! the power before anything is read.
//!
//! ```
//! use durable::testing::{DiskState, PowerDir};
//! use durable::write::{write_atomic, WriteOptions};
//! use durable::Dir;
//!
//! // A save without the file fsync, then a power cut that keeps the rename
//! // but not the unsynced contents: the file is there, and empty.
//! let dir = PowerDir::new(DiskState::KeepEntries);
//! assert!(!dir.boot());
//! let no_fsync = WriteOptions { sync: false, points: false };
//! write_atomic(&dir, "run.json", b"{}", no_fsync).unwrap();
//! dir.sync_dir().unwrap();
//! // ... the process dies without shutting down ...
//! assert!(dir.boot(), "the previous process never shut down: power cut");
//! assert_eq!(dir.read("run.json").unwrap(), Some(Vec::new()));
//!
//! // The real writer syncs both: every crash state keeps the file whole.
//! for state in DiskState::ALL {
//!     let dir = PowerDir::new(state);
//!     write_atomic(&dir, "run.json", b"{}", WriteOptions { sync: true, points: false }).unwrap();
//!     dir.power_cut();
//!     assert_eq!(dir.read("run.json").unwrap().as_deref(), Some(&b"{}"[..]), "{state:?}");
//! }
//! ```

mod cut;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use super::disk_state::DiskState;
use super::enumerate::{CutRecord, Op, PersistenceModel, Space};
use super::lock_table::{next_temp_name, LockTable};
use crate::dir::{check_name, Dir, LockGuard};
use cut::{not_found, Enumerated, Inner};

fn empty() -> Arc<[u8]> {
    Arc::from(&[][..])
}

/// Refuse `name`'s operation in a life whose harness named its crash state
/// ([`crashpoint::scope::crash_state`], set by sweep's runner before each
/// life) when the directory was not booted in that state: a subject that
/// lists power-cut states but never calls [`PowerDir::boot_in`] would cut
/// nothing, and every `lose` row would pass a missing fsync without a word.
/// Outside such a life (a unit test, a world being made, a judge) nothing
/// is checked.
fn check_booted(inner: &Inner, name: &str) -> io::Result<()> {
    let Some(wanted) = crashpoint::scope::crash_state() else {
        return Ok(());
    };
    let named = DiskState::from_slug(&wanted);
    let booted_in = |s| inner.running && (inner.enumerated.is_some() || inner.state == Some(s));
    let ok = match named {
        // A process crash cuts nothing: a directory never booted is right,
        // but one booted in a power-cut state would cut the power.
        Some(DiskState::Process) => !inner.running || booted_in(DiskState::Process),
        Some(s) => booted_in(s),
        // A state durable does not name (an enumerated one, a subject's
        // label): booted at all.
        None => inner.running,
    };
    if ok {
        return Ok(());
    }
    let was = match (inner.running, inner.state) {
        (false, _) => "not booted".to_owned(),
        (true, Some(s)) => format!("booted in `{}`", s.slug()),
        (true, None) => "booted".to_owned(),
    };
    Err(io::Error::other(format!(
        "power:/{name}: this PowerDir is used in a life of crash state `{wanted}` but was {was}: \
         call `dir.boot_in(state)` in `PowerCuts::boot` with the `Boot`'s state (and \
         `dir.shutdown()` in `PowerCuts::shutdown`), or no `{wanted}` scenario cuts the power"
    )))
}

/// An in-memory directory that models what a power cut keeps.
///
/// Clones share files, like [`MemDir`](crate::testing::MemDir). Each operation is
/// visible at once to readers; what the disk holds moves forward only with
/// [`Dir::sync`] (one file's contents) and [`Dir::sync_dir`] (every name).
/// [`PowerDir::power_cut`] (or a [`PowerDir::boot`] after a process that
/// never shut down) replaces the present by the directory's [`DiskState`].
#[derive(Clone)]
pub struct PowerDir {
    inner: Arc<Mutex<Inner>>,
    /// No process survives a power cut: every cut clears it.
    locks: LockTable,
}

impl PowerDir {
    /// An empty directory whose power cuts keep what `state` says.
    pub fn new(state: DiskState) -> PowerDir {
        PowerDir {
            inner: Arc::new(Mutex::new(Inner {
                state: Some(state),
                ..Inner::default()
            })),
            locks: LockTable::default(),
        }
    }

    /// The crash state this directory's power cuts apply.
    pub fn state(&self) -> DiskState {
        self.inner().state.unwrap_or(DiskState::LoseUnsynced)
    }

    /// A process starts using the directory. If the previous one never
    /// called [`PowerDir::shutdown`], it died: the power is cut first (in the
    /// directory's state) and `true` is returned.
    pub fn boot(&self) -> bool {
        let state = self.state();
        self.boot_in(state)
    }

    /// [`PowerDir::boot`], a cut keeping what `state` says, which becomes the
    /// directory's state: the hook a sweep's runner calls before each life
    /// with the scenario's crash state (`sweep::power::Boot`).
    pub fn boot_in(&self, state: DiskState) -> bool {
        let mut inner = self.inner();
        inner.state = Some(state);
        let crashed = inner.running;
        if crashed {
            inner.cut_now();
            // No process survives a power cut.
            self.locks.clear();
        }
        inner.running = true;
        crashed
    }

    /// [`PowerDir::boot`] whose cut, if the process before died, keeps
    /// state `disk` (the last if there are fewer) of the disks `model`
    /// allows now (see the [persistence model](super::enumerate)), whatever
    /// the directory's own state or plan: the hook of a sweep that names
    /// the disk of each crash in its scenario. Returns what the cut chose
    /// from, or `None` if nothing was cut.
    ///
    /// ```
    /// use durable::testing::{PersistenceModel, PowerDir};
    /// use durable::write::{write_atomic, WriteOptions};
    /// use durable::Dir;
    ///
    /// let unsynced = WriteOptions { sync: false, points: false };
    /// let d = PowerDir::default();
    /// assert!(d.boot_choosing(PersistenceModel::default(), 0).is_none());
    /// write_atomic(&d, "f", b"new", unsynced).unwrap();
    /// // The process dies; the next boot keeps the last disk: everything.
    /// let cut = d.boot_choosing(PersistenceModel::default(), 99).unwrap();
    /// assert_eq!((cut.states, cut.chosen), (5, 4));
    /// assert_eq!(d.read("f").unwrap().as_deref(), Some(&b"new"[..]));
    /// ```
    pub fn boot_choosing(&self, model: PersistenceModel, disk: usize) -> Option<CutRecord> {
        let mut inner = self.inner();
        let crashed = inner.running;
        inner.running = true;
        if !crashed {
            return None;
        }
        let record = inner.cut_choosing(&model, disk);
        // No process survives a power cut.
        self.locks.clear();
        Some(record)
    }

    /// [`PowerDir::crash_states`] under `model` rather than the
    /// directory's own: how many disks a cut now could leave. Changes
    /// nothing.
    pub fn crash_states_in(&self, model: PersistenceModel) -> CutRecord {
        let inner = self.inner();
        let space = Space::new(
            &inner.durable_names,
            &inner.durable_data,
            &inner.pending,
            &model,
        );
        let (states, sampled) = space.states(model.bound);
        CutRecord {
            states: states.len(),
            combinations: space.combinations(),
            sampled,
            chosen: 0,
        }
    }

    /// An empty directory whose power cuts apply enumerated crash states
    /// (see the [persistence model](super::enumerate)): the `i`-th cut
    /// applies state `plan[i]` of the states that crash may leave (the last
    /// one if there are fewer; state 0 — nothing unsynced kept — once the
    /// plan is used up), and logs how many there were ([`PowerDir::cut_log`]).
    ///
    /// A sweep lists every state of a crash by running it once with a plan
    /// that ends before the cut, reading the count from the log, and
    /// running it again once per other state: the plan is all a scenario's
    /// name needs to rerun it.
    ///
    /// ```
    /// use durable::testing::{PersistenceModel, PowerDir};
    /// use durable::write::{write_atomic, WriteOptions};
    /// use durable::Dir;
    ///
    /// let unsynced = WriteOptions { sync: false, points: false };
    /// let count = {
    ///     let d = PowerDir::enumerated(PersistenceModel::default(), vec![]);
    ///     write_atomic(&d, "f", b"new", unsynced).unwrap();
    ///     d.crash_states().states
    /// };
    /// // Create temp + rename (3 prefixes: no file, the temp, `f`) × the
    /// // temp's data (durable = empty, torn to empty, whole) = 9
    /// // combinations; the empty ones coincide and the first has no file:
    /// // 5 different disks.
    /// assert_eq!(count, 5);
    /// let mut seen = Vec::new();
    /// for i in 0..count {
    ///     let d = PowerDir::enumerated(PersistenceModel::default(), vec![i]);
    ///     write_atomic(&d, "f", b"new", unsynced).unwrap();
    ///     d.power_cut();
    ///     seen.push(d.read("f").unwrap());
    /// }
    /// assert!(seen.contains(&None) && seen.contains(&Some(b"new".to_vec())));
    /// assert!(seen.contains(&Some(Vec::new())), "renamed, never written");
    /// ```
    pub fn enumerated(model: PersistenceModel, plan: Vec<usize>) -> PowerDir {
        PowerDir {
            inner: Arc::new(Mutex::new(Inner {
                enumerated: Some(Enumerated {
                    model,
                    plan,
                    log: Vec::new(),
                }),
                ..Inner::default()
            })),
            locks: LockTable::default(),
        }
    }

    /// What a power cut now would choose from: how many different disks,
    /// out of how many combinations, and whether they would be a sample
    /// (`chosen` is the state this directory's next cut would apply, or 0
    /// for a directory of named states). Changes nothing.
    pub fn crash_states(&self) -> CutRecord {
        let inner = self.inner();
        let (model, want) = match &inner.enumerated {
            Some(en) => (en.model, en.plan.get(en.log.len()).copied().unwrap_or(0)),
            None => (PersistenceModel::default(), 0),
        };
        let space = Space::new(
            &inner.durable_names,
            &inner.durable_data,
            &inner.pending,
            &model,
        );
        let (states, sampled) = space.states(model.bound);
        CutRecord {
            states: states.len(),
            combinations: space.combinations(),
            sampled,
            chosen: want.min(states.len().saturating_sub(1)),
        }
    }

    /// What each power cut of an enumerating directory had to choose from
    /// and chose, oldest first (empty for a directory of named states).
    pub fn cut_log(&self) -> Vec<CutRecord> {
        self.inner()
            .enumerated
            .as_ref()
            .map(|en| en.log.clone())
            .unwrap_or_default()
    }

    /// An independent copy of the directory as it is now (files, pending
    /// operations, plan and log), with no locks held: a world to branch
    /// from.
    pub fn fork(&self) -> PowerDir {
        PowerDir {
            inner: Arc::new(Mutex::new(self.inner().clone())),
            locks: LockTable::default(),
        }
    }

    /// The process using the directory ends normally: its writes stay in
    /// the page cache, and the next [`PowerDir::boot`] cuts nothing.
    pub fn shutdown(&self) {
        self.inner().running = false;
    }

    /// Cut the power now, in the directory's state (or the next state of
    /// its plan, for an enumerating directory).
    pub fn power_cut(&self) {
        self.inner().cut_now();
        // No process survives a power cut.
        self.locks.clear();
    }

    /// Cut the power now, keeping what `state` says.
    pub fn power_cut_in(&self, state: DiskState) {
        self.inner().cut(state);
        // No process survives a power cut.
        self.locks.clear();
    }

    /// How many power cuts the directory went through.
    pub fn cuts(&self) -> u64 {
        self.inner().cuts
    }

    /// How many operations a power cut could still lose.
    pub fn unsynced(&self) -> usize {
        self.inner().pending.len()
    }

    /// A deep copy: the same files, the same disk (what a power cut would
    /// keep, the unsynced operations), crash state, cuts and counters, in a
    /// directory that shares nothing with this one; `None` while a lock is
    /// held (a lock belongs to a running life, which a copy cannot have).
    /// For sweeps that share lives between scenarios.
    ///
    /// ```
    /// use durable::testing::{DiskState, PowerDir};
    /// use durable::Dir;
    /// let a = PowerDir::new(DiskState::LoseUnsynced);
    /// a.write("x", b"1").unwrap();
    /// let b = a.deep_clone().unwrap();
    /// b.power_cut();
    /// assert_eq!(a.read("x").unwrap().as_deref(), Some(&b"1"[..]));
    /// assert_eq!(b.read("x").unwrap(), None);
    /// ```
    pub fn deep_clone(&self) -> Option<PowerDir> {
        if !self.locks.held().is_empty() {
            return None;
        }
        Some(PowerDir {
            inner: Arc::new(Mutex::new(self.inner().clone())),
            locks: LockTable::default(),
        })
    }

    /// Feed everything a user of this directory could observe, now or
    /// after a power cut, to `h`: the names and contents a reader sees,
    /// the durable ones, the unsynced operations, the crash state (and an
    /// enumeration's plan and log), the counters, whether a process runs,
    /// and the held locks. Two directories that hash the same behave the
    /// same.
    pub fn hash_contents(&self, h: &mut dyn std::hash::Hasher) {
        let inner = self.inner();
        let text = |h: &mut dyn std::hash::Hasher, d: &dyn fmt::Debug| {
            h.write(format!("{d:?}").as_bytes());
            h.write_u8(0xff);
        };
        text(h, &inner.state);
        text(h, &inner.enumerated);
        for names in [&inner.names, &inner.durable_names] {
            h.write_usize(names.len());
            for (name, n) in names {
                h.write(name.as_bytes());
                h.write_u8(0xff);
                h.write_u64(*n);
            }
        }
        for data in [&inner.data, &inner.durable_data] {
            let mut nodes: Vec<_> = data.iter().collect();
            nodes.sort_by_key(|(n, _)| **n);
            h.write_usize(nodes.len());
            for (n, bytes) in nodes {
                h.write_u64(*n);
                h.write_usize(bytes.len());
                h.write(bytes);
            }
        }
        text(h, &inner.pending);
        for n in [inner.next_node, inner.next_temp, inner.cuts] {
            h.write_u64(n);
        }
        h.write_u8(u8::from(inner.running));
        drop(inner);
        text(h, &self.locks.held());
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // No crash point runs while this lock is held, so a poisoned lock
        // still guards consistent files.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for PowerDir {
    /// A directory whose power cuts lose everything unsynced.
    fn default() -> Self {
        PowerDir::new(DiskState::LoseUnsynced)
    }
}

impl fmt::Debug for PowerDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner();
        f.debug_struct("PowerDir")
            .field("state", &inner.state)
            .field("enumerated", &inner.enumerated.as_ref().map(|e| &e.plan))
            .field("files", &inner.names.keys().collect::<Vec<_>>())
            .field("unsynced", &inner.pending.len())
            .field("cuts", &inner.cuts)
            .finish()
    }
}

impl Dir for PowerDir {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        let mut guard = self.inner();
        check_booted(&guard, prefix)?;
        let inner = &mut *guard;
        let names = &inner.names;
        let name = next_temp_name(prefix, &mut inner.next_temp, |n| names.contains_key(n))?;
        let node = inner.new_node();
        inner.names.insert(name.clone(), node);
        inner.pending.push(Op::Create {
            name: name.clone(),
            node,
        });
        Ok(name)
    }

    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        check_booted(&inner, name)?;
        let data: Arc<[u8]> = Arc::from(data);
        let node = match inner.names.get(name).copied() {
            Some(n) => n,
            None => {
                let n = inner.new_node();
                inner.names.insert(name.to_owned(), n);
                inner.pending.push(Op::Create {
                    name: name.to_owned(),
                    node: n,
                });
                n
            }
        };
        inner.data.insert(node, Arc::clone(&data));
        inner.pending.push(Op::Write { node, data });
        Ok(())
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        check_booted(&inner, name)?;
        let node = inner.node(name)?;
        let now = inner.data.get(&node).cloned().unwrap_or_else(empty);
        inner.durable_data.insert(node, now);
        inner
            .pending
            .retain(|op| !matches!(op, Op::Write { node: n, .. } if *n == node));
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        let mut inner = self.inner();
        check_booted(&inner, to)?;
        let node = inner.names.remove(from).ok_or_else(|| not_found(from))?;
        inner.names.insert(to.to_owned(), node);
        inner.pending.push(Op::Rename {
            from: from.to_owned(),
            to: to.to_owned(),
        });
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut inner = self.inner();
        check_booted(&inner, "")?;
        inner.durable_names = inner.names.clone();
        inner.pending.retain(|op| !op.is_entry());
        inner.collect_garbage();
        Ok(())
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        check_name(name)?;
        let inner = self.inner();
        check_booted(&inner, name)?;
        Ok(inner
            .names
            .get(name)
            .map(|n| inner.data.get(n).map_or_else(Vec::new, |d| d.to_vec())))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut inner = self.inner();
        check_booted(&inner, name)?;
        if inner.names.remove(name).is_some() {
            inner.pending.push(Op::Remove {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let inner = self.inner();
        check_booted(&inner, "")?;
        Ok(inner.names.keys().cloned().collect())
    }

    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        check_name(name)?;
        check_booted(&self.inner(), name)?;
        let guard = self.locks.acquire(name, &format!("power:/{name}"))?;
        let mut inner = self.inner();
        if !inner.names.contains_key(name) {
            let node = inner.new_node();
            inner.names.insert(name.to_owned(), node);
            inner.pending.push(Op::Create {
                name: name.to_owned(),
                node,
            });
        }
        Ok(guard)
    }

    fn path_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("power:/{name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{write_atomic, WriteOptions};

    const SYNCED: WriteOptions = WriteOptions {
        sync: true,
        points: false,
    };

    fn read(d: &PowerDir, name: &str) -> Option<Vec<u8>> {
        d.read(name).unwrap()
    }

    #[test]
    fn a_reader_sees_every_write_at_once() {
        let d = PowerDir::default();
        d.write("a", b"1").unwrap();
        let t = d.create_temp(".a-").unwrap();
        d.write(&t, b"2").unwrap();
        d.rename(&t, "a").unwrap();
        assert_eq!(read(&d, "a"), Some(b"2".to_vec()));
        assert_eq!(d.list().unwrap(), ["a"]);
        d.remove("a").unwrap();
        d.remove("a").unwrap();
        assert_eq!(read(&d, "a"), None);
        assert!(d.sync("a").is_err());
        assert!(d.rename("a", "b").is_err());
    }

    #[test]
    fn names_outside_the_directory_are_refused() {
        let d = PowerDir::default();
        for bad in ["", ".", "..", "a/b", "a\0"] {
            assert_eq!(
                d.write(bad, b"x").unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
            assert_eq!(d.read(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn locks_exclude_and_release_on_drop_and_on_a_cut() {
        let d = PowerDir::default();
        let g = d.lock("run.lock").unwrap();
        assert_eq!(
            d.lock("run.lock").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(g);
        let g = d.lock("run.lock").unwrap();
        d.power_cut();
        let again = d.lock("run.lock").unwrap();
        drop(g); // the dead process's guard must not release the new holder's lock
        assert_eq!(
            d.lock("run.lock").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(again);
    }

    #[test]
    fn the_real_writer_survives_every_state_at_every_step() {
        // Old contents synced; then a new save, cut after each of its steps.
        for state in DiskState::ALL {
            for steps in 0..=5 {
                let d = PowerDir::new(state);
                write_atomic(&d, "f", b"old", SYNCED).unwrap();
                let t = d.create_temp(".f-").unwrap();
                type Step<'a> = Box<dyn Fn(&PowerDir) + 'a>;
                let mut ops: Vec<Step> = vec![
                    Box::new(|d| d.write(&t, b"new!").unwrap()),
                    Box::new(|d| d.sync(&t).unwrap()),
                    Box::new(|d| d.rename(&t, "f").unwrap()),
                    Box::new(|d| d.sync_dir().unwrap()),
                ];
                ops.truncate(steps);
                for op in &ops {
                    op(&d);
                }
                d.power_cut();
                let got = read(&d, "f").unwrap();
                assert!(
                    got == b"old" || got == b"new!",
                    "{state:?} after {steps} steps: {got:?}"
                );
                if steps >= 4 {
                    assert_eq!(got, b"new!", "{state:?}: a finished save is kept");
                }
            }
        }
    }

    #[test]
    fn each_state_keeps_what_it_says() {
        // Synced: "a" = "1". Unsynced: write "b" = "2222" (create + write),
        // rename "a" -> "c", overwrite "c" with "33".
        let setup = |state| {
            let d = PowerDir::new(state);
            d.write("a", b"1").unwrap();
            d.sync("a").unwrap();
            d.sync_dir().unwrap();
            d.write("b", b"2222").unwrap();
            d.rename("a", "c").unwrap();
            d.write("c", b"33").unwrap();
            assert_eq!(d.unsynced(), 4);
            d.power_cut();
            assert_eq!(d.unsynced(), 0);
            let mut files: Vec<(String, Vec<u8>)> = Vec::new();
            for n in d.list().unwrap() {
                let data = read(&d, &n).unwrap();
                files.push((n, data));
            }
            files
        };
        let f = |v: &[(&str, &[u8])]| -> Vec<(String, Vec<u8>)> {
            v.iter().map(|(n, d)| (n.to_string(), d.to_vec())).collect()
        };
        assert_eq!(
            setup(DiskState::Process),
            f(&[("b", b"2222"), ("c", b"33")])
        );
        assert_eq!(setup(DiskState::LoseUnsynced), f(&[("a", b"1")]));
        assert_eq!(setup(DiskState::KeepEntries), f(&[("b", b""), ("c", b"1")]));
        assert_eq!(
            setup(DiskState::TornContents),
            f(&[("b", b"22"), ("c", b"3")])
        );
        assert_eq!(setup(DiskState::KeepContents), f(&[("a", b"33")]));
        // Ops in order: create b, write b, rename a->c, write c: the first two.
        assert_eq!(
            setup(DiskState::InOrderHalf),
            f(&[("a", b"1"), ("b", b"2222")])
        );
    }

    #[test]
    fn boot_cuts_only_after_a_process_that_did_not_shut_down() {
        let d = PowerDir::new(DiskState::LoseUnsynced);
        assert!(!d.boot());
        d.write("x", b"1").unwrap();
        d.shutdown();
        assert!(!d.boot(), "a clean exit keeps the page cache");
        assert_eq!(read(&d, "x"), Some(b"1".to_vec()));
        d.write("y", b"2").unwrap();
        assert!(d.boot(), "no shutdown: the process died");
        assert_eq!(d.cuts(), 1);
        assert_eq!(d.list().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_life_in_a_crash_state_refuses_a_directory_not_booted_in_it() {
        use crashpoint::scope::Handle;
        let in_life = |d: &PowerDir, state: &str| {
            let h = Handle::new(None);
            h.set_crash_state(state);
            let life = h.run(|| d.write("f", b"1").map_err(|e| e.to_string()));
            match life.outcome {
                crashpoint::Outcome::Finished(r) => r,
                other => panic!("{other:?}"),
            }
        };
        // Never booted: refused in a power-cut state, fine in a process crash.
        let d = PowerDir::new(DiskState::Process);
        let err = in_life(&d, "lose").unwrap_err();
        assert!(
            err.contains("crash state `lose` but was not booted"),
            "{err}"
        );
        assert!(err.contains("boot_in"), "{err}");
        assert_eq!(in_life(&d, "process"), Ok(()));
        // Booted in its own state, not the life's: refused both ways.
        d.boot();
        let err = in_life(&d, "lose").unwrap_err();
        assert!(err.contains("was booted in `process`"), "{err}");
        d.boot_in(DiskState::LoseUnsynced);
        assert_eq!(in_life(&d, "lose"), Ok(()));
        assert!(in_life(&d, "process").is_err(), "a process life would cut");
        // Outside a life nothing is checked.
        d.shutdown();
        d.write("g", b"2").unwrap();
    }

    #[test]
    fn without_syncs_a_cut_can_lose_a_finished_save() {
        let nosync = WriteOptions {
            sync: false,
            points: false,
        };
        let d = PowerDir::new(DiskState::LoseUnsynced);
        write_atomic(&d, "f", b"data", nosync).unwrap();
        d.power_cut();
        assert_eq!(read(&d, "f"), None);

        let d = PowerDir::new(DiskState::KeepEntries);
        write_atomic(&d, "f", b"data", nosync).unwrap();
        d.power_cut();
        assert_eq!(read(&d, "f"), Some(Vec::new()), "renamed, never written");
    }
}
