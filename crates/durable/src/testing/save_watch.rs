//! A directory wrapper that watches the saves of one file and counts the
//! lost ones: a save that returned to the program (so it may act on it) but
//! that a restart after a crash does not find.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::LockGuard;
use crate::{Checkpoint, Dir, RunId};

/// Describes a save's bytes for a note, or `None` for bytes that are no
/// save at all (a torn file: the program's own read reports it).
type Describe = dyn Fn(&[u8]) -> Option<String> + Send + Sync;

/// A [`Dir`] that watches the saves of one file — a [`Checkpoint`]'s, or
/// any file written with [`write_atomic`](crate::write::write_atomic) and
/// `sync: true` — and counts **lost saves**: a life that, after a crash,
/// reads back something other than the last save that returned (or the
/// save under way when the crash came). A save that returned is the
/// program's promise that it may act on it (tell a user, call a service);
/// losing it is a bug of the writer, whatever the program does next.
///
/// Put it outermost, over the directory the program writes through (a
/// [`PowerDir`](super::PowerDir), or a [`MutantDir`](super::MutantDir) over
/// one), so it sees the writer's calls as the writer makes them; call
/// [`SaveWatch::boot`] when each life starts (a sweep's `PowerCuts::boot`),
/// and count [`SaveWatch::lost`] in the judge. Clones share what they saw,
/// so the world can keep one and hand the program another.
///
/// A save *returns* at the writer's last step: the directory sync after the
/// rename. A save that is never synced never returns here, so it is never
/// lost: without syncs nothing is promised across a power cut. A restart
/// may find the last save that returned, the one under way, or any save
/// renamed over the file since the last one returned (an unsynced save is
/// complete at its rename, and a process crash keeps it): none of those is
/// a lost save.
///
/// ```
/// use std::sync::Arc;
/// use durable::testing::{DiskState, MutantDir, Mutation, PowerDir, SaveWatch};
/// use durable::write::{write_atomic, WriteOptions};
/// use durable::Dir;
///
/// let synced = WriteOptions { sync: true, points: false };
/// for (mutation, lost) in [(None, 0), (Some(Mutation::NoDirSync), 1)] {
///     let disk = PowerDir::new(DiskState::LoseUnsynced);
///     let writer: Arc<dyn Dir> = match mutation {
///         Some(m) => Arc::new(MutantDir::new(disk.clone(), m)),
///         None => Arc::new(disk.clone()),
///     };
///     let watch = SaveWatch::new(writer, "job.json");
///     disk.boot();
///     watch.boot();
///     write_atomic(&watch, "job.json", b"{\"step\":1}", synced).unwrap();
///     disk.boot(); // no shutdown before: the power was cut
///     watch.boot();
///     let _ = watch.read("job.json").unwrap(); // the restart reads
///     assert_eq!(watch.lost(), lost);
/// }
/// ```
#[derive(Clone)]
pub struct SaveWatch {
    inner: Arc<dyn Dir>,
    file: String,
    saves: Arc<Mutex<Saves>>,
    describe: Arc<Describe>,
    /// How a note says the file was not there.
    missing: String,
}

/// What the watch has seen of the file's saves.
#[derive(Clone, Debug, Default, Hash)]
struct Saves {
    /// The bytes of the save under way (its temp file was written), until
    /// the save returns or the next life reads the file.
    under_way: Option<Vec<u8>>,
    /// The save under way has been renamed over the file; its directory
    /// sync is the last step before the save returns.
    renamed: bool,
    /// The bytes of the last save that returned (or that a life read first).
    returned: Option<Vec<u8>>,
    /// The saves renamed over the file since the last one returned (or the
    /// last boot's read), oldest first: without syncs a save completes at
    /// its rename and never returns here, yet a process crash keeps it, so
    /// a restart may find any of them.
    renamed_since: Vec<Vec<u8>>,
    /// A life booted and has not read the file yet.
    opening: bool,
    /// Lives that read something other than the last save that returned or
    /// the one under way.
    lost: u64,
    /// What each lost save was, in words.
    notes: Vec<String>,
}

impl SaveWatch {
    /// Watch the saves of `file` written through `inner`. Notes describe a
    /// save by its size; [`SaveWatch::describe_with`] says more.
    pub fn new(inner: Arc<dyn Dir>, file: impl Into<String>) -> SaveWatch {
        let file = file.into();
        SaveWatch {
            inner,
            missing: format!("no {file}"),
            file,
            saves: Arc::default(),
            describe: Arc::new(|bytes: &[u8]| Some(format!("a save of {} bytes", bytes.len()))),
        }
    }

    /// Watch the checkpoint of `run` ([`Checkpoint::file_name`]). A file
    /// that is not JSON is not a save (the checkpoint's own open reports
    /// it, so it is not counted twice). A missing file is `no checkpoint`.
    pub fn checkpoint(inner: Arc<dyn Dir>, run: &RunId) -> SaveWatch {
        let mut watch =
            SaveWatch::new(inner, Checkpoint::<()>::file_name(run)).describe_with(|bytes| {
                serde_json::from_slice::<serde_json::Value>(bytes)
                    .ok()
                    .map(|_| format!("a checkpoint of {} bytes", bytes.len()))
            });
        watch.missing = "no checkpoint".to_owned();
        watch
    }

    /// Describe each save for the notes with `describe`, which returns
    /// `None` for bytes that are not a save (they are not counted).
    pub fn describe_with(
        mut self,
        describe: impl Fn(&[u8]) -> Option<String> + Send + Sync + 'static,
    ) -> SaveWatch {
        self.describe = Arc::new(describe);
        self
    }

    /// A life starts: its first read of the file is what it resumes from.
    pub fn boot(&self) {
        self.saves().opening = true;
    }

    /// How many lives resumed from something other than the last save that
    /// returned (or the one under way).
    pub fn lost(&self) -> u64 {
        self.saves().lost
    }

    /// Each lost save, in words (`a restart resumed from … although a save
    /// of … had returned`), for the judge's notes.
    pub fn notes(&self) -> Vec<String> {
        self.saves().notes.clone()
    }

    /// A deep copy of this watch over `inner` (a copy of the directory it
    /// watches, e.g. [`PowerDir::deep_clone`](crate::testing::PowerDir::deep_clone)):
    /// the same file, description and record of saves, sharing nothing
    /// with this watch. For sweeps that share lives between scenarios.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use durable::testing::{MemDir, SaveWatch};
    /// use durable::Dir;
    /// let dir = MemDir::new();
    /// let watch = SaveWatch::new(Arc::new(dir.clone()), "f");
    /// let copy = watch.deep_clone_over(Arc::new(dir.deep_clone().unwrap()));
    /// copy.boot();
    /// assert_eq!((copy.file(), copy.lost()), ("f", 0));
    /// ```
    pub fn deep_clone_over(&self, inner: Arc<dyn Dir>) -> SaveWatch {
        SaveWatch {
            inner,
            file: self.file.clone(),
            saves: Arc::new(Mutex::new(self.saves().clone())),
            describe: Arc::clone(&self.describe),
            missing: self.missing.clone(),
        }
    }

    /// Feed the watch's record of saves (and the file it watches) to `h`:
    /// two watches that hash the same count the same from here on. The
    /// directory it watches is hashed by its own owner.
    pub fn hash_contents(&self, h: &mut dyn std::hash::Hasher) {
        use std::hash::Hash as _;
        let mut h = h;
        self.file.hash(&mut h);
        self.saves().hash(&mut h);
    }

    /// The watched file's name.
    pub fn file(&self) -> &str {
        &self.file
    }

    fn saves(&self) -> MutexGuard<'_, Saves> {
        // No crash point runs while this lock is held.
        self.saves.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A temp file of [`write_atomic`](crate::write::write_atomic) for the file:
    /// `.<file>-<unique>.tmp`.
    fn is_temp(&self, name: &str) -> bool {
        name.strip_prefix('.')
            .and_then(|n| n.strip_prefix(self.file.as_str()))
            .is_some_and(|rest| rest.starts_with('-') && rest.ends_with(".tmp"))
    }

    /// The first read of a life found `found`: it must hold the last save
    /// that returned, or the one under way when the previous life died.
    fn opened(&self, found: Option<&[u8]>) {
        let mut s = self.saves();
        if !s.opening {
            return;
        }
        s.opening = false;
        let same = |b: &Option<Vec<u8>>| b.is_some() && b.as_deref() == found;
        let renamed = found.is_some_and(|f| s.renamed_since.iter().any(|r| r.as_slice() == f));
        let is_save = found.map_or(true, |b| (self.describe)(b).is_some());
        if s.returned.is_some() && !same(&s.returned) && !same(&s.under_way) && !renamed && is_save
        {
            s.lost += 1;
            let what = |b: Option<&[u8]>| {
                b.and_then(|b| (self.describe)(b))
                    .unwrap_or_else(|| self.missing.clone())
            };
            let note = format!(
                "a restart resumed from {} although a save of {} had returned",
                what(found),
                what(s.returned.as_deref())
            );
            s.notes.push(note);
        }
        s.returned = found.map(<[u8]>::to_vec);
        s.under_way = None;
        s.renamed = false;
        s.renamed_since.clear();
    }
}

impl fmt::Debug for SaveWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaveWatch")
            .field("file", &self.file)
            .field("inner", &self.inner)
            .field("saves", &*self.saves())
            .finish()
    }
}

impl Dir for SaveWatch {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.inner.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.inner.write(name, data)?;
        if self.is_temp(name) {
            let mut s = self.saves();
            s.under_way = Some(data.to_vec());
            s.renamed = false;
        }
        Ok(())
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        self.inner.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)?;
        if to == self.file && self.is_temp(from) {
            let mut s = self.saves();
            s.renamed = true;
            if let Some(bytes) = s.under_way.clone() {
                s.renamed_since.push(bytes);
            }
        }
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()?;
        let mut s = self.saves();
        if s.renamed {
            // The writer's last step: the save returns next, and the saves
            // renamed before it are older than what was promised.
            s.returned = s.under_way.take();
            s.renamed = false;
            s.renamed_since.clear();
        }
        Ok(())
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let found = self.inner.read(name)?;
        if name == self.file {
            self.opened(found.as_deref());
        }
        Ok(found)
    }
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let found = self.inner.read_limited(name, limit)?;
        if name == self.file {
            self.opened(found.as_deref());
        }
        Ok(found)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        self.inner.lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        self.inner.path_of(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{DiskState, MutantDir, Mutation, PowerDir};
    use crate::write::{write_atomic, WriteOptions};
    use crate::Options;

    const SYNCED: WriteOptions = WriteOptions {
        sync: true,
        points: false,
    };

    fn watched(mutation: Option<Mutation>, state: DiskState) -> (PowerDir, SaveWatch) {
        let dir = PowerDir::new(state);
        let inner: Arc<dyn Dir> = match mutation {
            Some(m) => Arc::new(MutantDir::new(dir.clone(), m)),
            None => Arc::new(dir.clone()),
        };
        (dir, SaveWatch::new(inner, "r.json"))
    }

    #[test]
    fn the_real_writer_loses_no_returned_save_in_any_state() {
        for s in DiskState::ALL {
            let (dir, w) = watched(None, s);
            dir.boot();
            write_atomic(&w, "r.json", b"1", SYNCED).unwrap();
            write_atomic(&w, "r.json", b"2", SYNCED).unwrap();
            assert!(dir.boot(), "no shutdown: a power cut");
            w.boot();
            assert_eq!(w.read("r.json").unwrap(), Some(b"2".to_vec()), "{s:?}");
            assert_eq!(w.lost(), 0, "{s:?}");
        }
    }

    #[test]
    fn a_writer_without_the_directory_fsync_loses_a_returned_save() {
        let (dir, w) = watched(Some(Mutation::NoDirSync), DiskState::LoseUnsynced);
        dir.boot();
        write_atomic(&w, "r.json", b"1", SYNCED).unwrap();
        dir.power_cut();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), None);
        assert_eq!(w.lost(), 1);
        assert_eq!(
            w.notes(),
            ["a restart resumed from no r.json although a save of a save of 1 bytes had returned"]
        );
        // Only the first read of a life counts.
        assert_eq!(w.read("r.json").unwrap(), None);
        assert_eq!(w.lost(), 1);
    }

    #[test]
    fn the_save_under_way_may_be_found_and_later_reads_do_not_count() {
        let (dir, w) = watched(None, DiskState::Process);
        dir.boot();
        write_atomic(&w, "r.json", b"1", SYNCED).unwrap();
        // A save dies after its rename, before the directory fsync.
        let t = w.create_temp(".r.json-").unwrap();
        w.write(&t, b"2").unwrap();
        w.rename(&t, "r.json").unwrap();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), Some(b"2".to_vec()));
        dir.write("r.json", b"7").unwrap();
        assert_eq!(w.read("r.json").unwrap(), Some(b"7".to_vec()));
        assert_eq!(w.lost(), 0);
    }

    /// Unsynced saves complete at their rename and never return. A process
    /// crash while a later save is under way keeps the last renamed one,
    /// and the restart that finds it lost nothing. (The watch once called
    /// that a lost save: only returned and under-way saves were accepted.)
    #[test]
    fn a_process_crash_after_unsynced_saves_loses_nothing() {
        let unsynced = WriteOptions {
            sync: false,
            points: false,
        };
        let (dir, w) = watched(None, DiskState::Process);
        dir.boot();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), None);
        write_atomic(&w, "r.json", b"1", SYNCED).unwrap();
        write_atomic(&w, "r.json", b"2", unsynced).unwrap();
        write_atomic(&w, "r.json", b"3", unsynced).unwrap();
        // A fourth save dies before its rename.
        let t = w.create_temp(".r.json-").unwrap();
        w.write(&t, b"4").unwrap();
        assert!(dir.boot(), "no shutdown: the process died");
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), Some(b"3".to_vec()));
        assert_eq!(w.lost(), 0, "{:?}", w.notes());
    }

    /// A save renamed before the last one that returned is older than the
    /// promise: a restart that finds it lost the returned save.
    #[test]
    fn a_save_renamed_before_the_last_returned_one_is_still_lost() {
        let unsynced = WriteOptions {
            sync: false,
            points: false,
        };
        let (dir, w) = watched(None, DiskState::Process);
        dir.boot();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), None);
        write_atomic(&w, "r.json", b"1", unsynced).unwrap();
        write_atomic(&w, "r.json", b"2", SYNCED).unwrap();
        // The disk goes back to the older save behind the watch's back.
        dir.write("r.json", b"1").unwrap();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), Some(b"1".to_vec()));
        assert_eq!(w.lost(), 1);
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Step(u32);
    impl crate::Durable for Step {}

    /// A checkpoint saved through a mutant writer, across power cuts: the
    /// watch counts what the restart did not find; through the real writer,
    /// nothing.
    #[test]
    fn a_checkpoint_watch_counts_the_mutants_lost_saves_and_none_of_the_real_writers() {
        let run = RunId::parse("job").unwrap();
        let opts = Options {
            sync: true,
            max_resumes: None,
            ..Options::default()
        };
        for (mutation, want) in [
            (None, 0),
            (Some(Mutation::NoDirSync), 1),
            (Some(Mutation::NoFileSync), 0),
        ] {
            let dir = PowerDir::new(DiskState::LoseUnsynced);
            let inner: Arc<dyn Dir> = match mutation {
                Some(m) => Arc::new(MutantDir::new(dir.clone(), m)),
                None => Arc::new(dir.clone()),
            };
            let watch = SaveWatch::checkpoint(inner, &run);
            let as_dir: Arc<dyn Dir> = Arc::new(watch.clone());
            dir.boot();
            watch.boot();
            let opened =
                Checkpoint::open_with(Arc::clone(&as_dir), &run, opts, || Step(0)).unwrap();
            let mut cp = opened.checkpoint;
            cp.save(&Step(1)).unwrap();
            drop(cp);
            assert!(dir.boot(), "a power cut");
            watch.boot();
            let opened = Checkpoint::open_with(Arc::clone(&as_dir), &run, opts, || Step(0));
            assert_eq!(watch.lost(), want, "{mutation:?}");
            if want > 0 {
                assert!(
                    opened.is_ok_and(|o| o.state.0 == 0),
                    "the save of 1 was lost"
                );
                assert!(
                    watch.notes()[0].contains("a checkpoint of"),
                    "{:?}",
                    watch.notes()
                );
            }
        }
    }
}
