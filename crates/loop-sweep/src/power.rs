//! Power loss for the loop's sweep: the checkpoint directory and the
//! workspace are [`PowerDir`]s whose crashes are power cuts in a chosen
//! [`CrashState`], the checkpoint written by the real writer or a mutation
//! of it, and a watch on the checkpoint file that sees a restart resume from
//! an older checkpoint than the last save that returned.
//!
//! The pattern is `designs`' harder worlds: a mutation is a directory wrapper that
//! drops one call of the shipped writer (`durable::write_atomic`, unchanged),
//! and each life boots the directories and shuts them down when it ends
//! without a crash, so a boot after a crash cuts the power first.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use durable::testing::{CrashState, MutantDir, Mutation, PowerDir};
use durable::{Dir, LockGuard};

/// A power-loss world: who writes the checkpoint, and what each crash keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Power {
    /// What each crash keeps of the operations not yet synced.
    pub state: CrashState,
    /// How the checkpoint reaches the disk.
    pub writer: Writer,
}

/// How the checkpoint reaches the disk: `durable::write_atomic` as shipped
/// (with `sync: true`), or the same writer through a directory that drops
/// one of its fsyncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Writer {
    /// Temp file, write, fsync, rename, fsync the directory.
    Real,
    /// The real writer without the file fsync before the rename.
    NoFileSync,
    /// The real writer without the directory fsync after the rename.
    NoDirSync,
    /// The new bytes written over the live file in place, then synced
    /// ([`Mutation::InPlace`]). Not in [`Writer::ALL`] (the named states'
    /// tables leave it out); the enumerated sweep runs it.
    InPlace,
    /// The old file removed before the temp file is renamed over its name
    /// ([`Mutation::RemoveFirst`]), a bug only the enumerated state
    /// catches. Not in [`Writer::ALL`].
    RemoveFirst,
}

impl Writer {
    /// Every writer, the real one first.
    pub const ALL: [Writer; 3] = [Writer::Real, Writer::NoFileSync, Writer::NoDirSync];

    /// The command-line name (a mutation's is appended to its variant's
    /// slug; the real writer's is not).
    pub fn slug(self) -> &'static str {
        match self {
            Writer::Real => "real",
            Writer::NoFileSync => "no-file-fsync",
            Writer::NoDirSync => "no-dir-fsync",
            Writer::InPlace => "in-place",
            Writer::RemoveFirst => "remove-first",
        }
    }

    /// A short description for row titles.
    pub fn title(self) -> &'static str {
        match self {
            Writer::Real => "real writer",
            Writer::NoFileSync => "no file fsync",
            Writer::NoDirSync => "no dir fsync",
            Writer::InPlace => "overwrite in place",
            Writer::RemoveFirst => "remove first",
        }
    }

    /// The directory the checkpoint store writes through: `dir` itself for
    /// the real writer, a [`MutantDir`] over it otherwise.
    pub(crate) fn wrap(self, dir: PowerDir) -> Arc<dyn Dir> {
        match self {
            Writer::Real => Arc::new(dir),
            Writer::NoFileSync => Arc::new(MutantDir::new(dir, Mutation::NoFileSync)),
            Writer::NoDirSync => Arc::new(MutantDir::new(dir, Mutation::NoDirSync)),
            Writer::InPlace => Arc::new(MutantDir::new(dir, Mutation::InPlace)),
            Writer::RemoveFirst => Arc::new(MutantDir::new(dir, Mutation::RemoveFirst)),
        }
    }
}

/// What the watch has seen of the checkpoint's saves. The world keeps it:
/// it is the observer's memory, not the program's.
#[derive(Debug, Default)]
pub(crate) struct Saves {
    /// The bytes of the save under way (its temp file was written), until
    /// the save returns or the next life opens the checkpoint.
    under_way: Option<Vec<u8>>,
    /// The save under way has been renamed over the checkpoint; its
    /// directory fsync is the last step before the save returns.
    renamed: bool,
    /// The bytes of the last save that returned (or that a life opened).
    returned: Option<Vec<u8>>,
    /// A life booted and has not read its checkpoint yet.
    opening: bool,
    /// Lives that opened something other than the last save that returned
    /// or the one under way.
    pub(crate) lost: u64,
    /// What each lost save was, in words.
    pub(crate) notes: Vec<String>,
}

/// The agent state inside a checkpoint file's bytes, if they parse.
fn saved_state(bytes: &[u8]) -> Option<agent::State> {
    #[derive(serde::Deserialize)]
    struct File {
        state: agent::State,
    }
    serde_json::from_slice::<File>(bytes).ok().map(|f| f.state)
}

impl Saves {
    /// A life starts: its first read of the checkpoint is what it resumes
    /// from.
    pub(crate) fn boot(&mut self) {
        self.opening = true;
    }

    /// The first read of a life found `found`. It must hold the last save
    /// that returned, or the one under way when the previous life died: a
    /// returned save is the loop's promise that it may act on it. A file
    /// that does not parse is not counted here (the life stops on it, and
    /// `stopped` counts that).
    fn opened(&mut self, found: Option<&[u8]>) {
        self.opening = false;
        let same = |b: &Option<Vec<u8>>| b.is_some() && b.as_deref() == found;
        let parses = found.map_or(true, |b| saved_state(b).is_some());
        if self.returned.is_some() && !same(&self.returned) && !same(&self.under_way) && parses {
            self.lost += 1;
            let what = |b: Option<&[u8]>| {
                b.and_then(saved_state).map_or_else(
                    || "no checkpoint".to_owned(),
                    |st| {
                        format!(
                            "phase {}, turns {}, {} message(s), {} marker(s) and {} \
                                 result(s) for the last reply's {} call(s)",
                            st.phase,
                            st.turns,
                            st.messages.len(),
                            st.attempts.len(),
                            st.results.len(),
                            st.calls.len()
                        )
                    },
                )
            };
            self.notes.push(format!(
                "a restart resumed from {} although a save of {} had returned",
                what(found),
                what(self.returned.as_deref())
            ));
        }
        self.returned = found.map(<[u8]>::to_vec);
        self.under_way = None;
        self.renamed = false;
    }
}

/// The checkpoint directory as the agent sees it, watched: every call goes
/// to `inner` (the power-loss directory, or a mutant over it), and the
/// checkpoint's saves and first read per life are recorded in [`Saves`].
/// It sits outside any mutation, so it sees the writer's calls as the
/// writer makes them.
pub(crate) struct Watch {
    pub(crate) inner: Arc<dyn Dir>,
    pub(crate) saves: Arc<Mutex<Saves>>,
    /// `<run>.json`.
    pub(crate) file: String,
}

impl Watch {
    fn saves(&self) -> MutexGuard<'_, Saves> {
        self.saves.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_temp(&self, name: &str) -> bool {
        name.strip_prefix('.')
            .and_then(|n| n.strip_prefix(self.file.as_str()))
            .is_some_and(|rest| rest.starts_with('-') && rest.ends_with(".tmp"))
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("file", &self.file).finish()
    }
}

impl Dir for Watch {
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
            self.saves().renamed = true;
        }
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()?;
        let mut s = self.saves();
        if s.renamed {
            // The writer's last step: the save returns next.
            s.returned = s.under_way.take();
            s.renamed = false;
        }
        Ok(())
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let found = self.inner.read(name)?;
        if name == self.file {
            let mut s = self.saves();
            if s.opening {
                s.opened(found.as_deref());
            }
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
    use durable::{write_atomic, WriteOptions};

    const SYNCED: WriteOptions = WriteOptions {
        sync: true,
        points: false,
    };

    fn watched(writer: Writer, state: CrashState) -> (PowerDir, Watch) {
        let dir = PowerDir::new(state);
        let watch = Watch {
            inner: writer.wrap(dir.clone()),
            saves: Arc::default(),
            file: "r.json".to_owned(),
        };
        (dir, watch)
    }

    fn state(turns: u32) -> Vec<u8> {
        let st = agent::State {
            turns,
            ..agent::State::default()
        };
        let file = serde_json::json!({"version": durable::FORMAT_VERSION, "run": "r", "state": st});
        serde_json::to_vec(&file).unwrap()
    }

    #[test]
    fn the_real_writer_loses_no_returned_save() {
        for s in CrashState::ALL {
            let (dir, w) = watched(Writer::Real, s);
            dir.boot();
            write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
            write_atomic(&w, "r.json", &state(2), SYNCED).unwrap();
            assert!(dir.boot(), "no shutdown: a power cut");
            w.saves().boot();
            assert_eq!(w.read("r.json").unwrap(), Some(state(2)), "{s:?}");
            assert_eq!(w.saves().lost, 0, "{s:?}");
        }
    }

    #[test]
    fn a_writer_without_the_directory_fsync_loses_a_returned_save() {
        let (dir, w) = watched(Writer::NoDirSync, CrashState::LoseUnsynced);
        dir.boot();
        write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
        dir.power_cut();
        w.saves().boot();
        assert_eq!(w.read("r.json").unwrap(), None);
        let saves = w.saves();
        assert_eq!(saves.lost, 1);
        assert!(
            saves.notes[0].contains("no checkpoint"),
            "{:?}",
            saves.notes
        );
    }

    #[test]
    fn the_save_under_way_may_be_found_and_only_the_first_read_counts() {
        let (dir, w) = watched(Writer::Real, CrashState::Process);
        dir.boot();
        write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
        // A save dies after its rename, before the directory fsync.
        let t = w.create_temp(".r.json-").unwrap();
        w.write(&t, &state(2)).unwrap();
        w.rename(&t, "r.json").unwrap();
        w.saves().boot();
        assert_eq!(w.read("r.json").unwrap(), Some(state(2)));
        dir.write("r.json", &state(7)).unwrap();
        assert_eq!(w.read("r.json").unwrap(), Some(state(7)));
        assert_eq!(w.saves().lost, 0);
    }
}
