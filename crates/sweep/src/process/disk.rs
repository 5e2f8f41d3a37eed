//! The record of what a program asked of its world's disk, and the crash
//! states a power cut may leave of it: the tracer's calls turned into the
//! operations of durable's persistence model
//! ([`durable::testing::enumerate`]), the one model the in-process
//! `PowerDir` uses too. A cut rebuilds the world directory from the state
//! chosen, in a fresh directory.
//!
//! The record starts from the world as the life finds it (all of it
//! durable: it survived the cut before, or nothing cut it yet). Each call
//! the tracer stops at is *tentative* until the next stop or the end of the
//! life: a crash at an I/O point kills the program before its call runs, so
//! that call is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crashpoint::scope::CrashState;
use durable::testing::enumerate::{survivors, Contents, Names, Op, Space};
use durable::testing::{CutRecord, DiskState, PersistenceModel};

/// The crash states a power-cut sweep of a process runs, and its model.
#[derive(Clone, Debug)]
pub(super) struct Power {
    pub(super) states: Vec<CrashState>,
    pub(super) model: PersistenceModel,
    /// The tracer's selection when only the record needs the tracer (no
    /// I/O point): made once, shared by every life.
    pub(super) record_only: Arc<super::trace::IoPoints>,
}

/// The disk record of a fresh world directory.
pub(super) fn record_of(dir: &Path) -> Result<Arc<Mutex<DiskRecord>>, String> {
    DiskRecord::scan(dir)
        .map(|r| Arc::new(Mutex::new(r)))
        .map_err(|e| format!("reading the world {}: {e}", dir.display()))
}

/// What a name of the world is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file with these permission bits.
    File(u32),
    /// A directory.
    Dir,
    /// A symbolic link to this target.
    Symlink(String),
}

/// One call the tracer decoded, its values read at the stop.
#[derive(Clone, Debug)]
pub(crate) enum Call {
    /// A new file (or directory, or link) at a name.
    Create(String, Kind),
    /// Bytes written through a descriptor of the file named so.
    Write {
        name: String,
        /// The offset; `None` for an `O_APPEND` descriptor (the end).
        at: Option<u64>,
        data: Arc<[u8]>,
        /// The descriptor was opened `O_SYNC` or `O_DSYNC`.
        sync: bool,
    },
    /// The file cut or extended to a length.
    SetLen(String, u64),
    /// `fallocate` without `FALLOC_FL_KEEP_SIZE`: at least this long.
    Grow(String, u64),
    /// A name moved over another (`renameat2`'s `RENAME_EXCHANGE`: swapped).
    Rename {
        from: String,
        to: String,
        exchange: bool,
    },
    /// Another name for an existing file.
    Link(String, String),
    /// A name removed.
    Remove(String),
    /// `fsync` or `fdatasync` of a file: its data is durable.
    SyncFile(String),
    /// `fsync` of a directory: the names are durable (a journal commits
    /// every earlier directory operation with it).
    SyncNames,
    /// `sync` or `syncfs`: everything is durable.
    SyncAll,
    /// A call the record cannot model, named in a warning.
    Unmodelled(String),
}

/// The record of one world directory: its disk (durable names and data),
/// the operations since, and what a reader sees now.
#[derive(Debug, Default)]
pub(crate) struct DiskRecord {
    names: Names,
    kinds: HashMap<u64, Kind>,
    current: HashMap<u64, Vec<u8>>,
    durable_names: Names,
    durable_data: Contents,
    pending: Vec<Op>,
    next_node: u64,
    /// The call at the last stop, not known to have run yet.
    tentative: Option<Call>,
    /// Calls the record could not model, each named once.
    pub(crate) warnings: BTreeSet<String>,
    /// Calls recorded, and barriers among them, since the scan.
    pub(crate) calls: u64,
    pub(crate) barriers: u64,
}

/// A disk a cut may leave: names to nodes, nodes to contents and kinds.
pub(crate) struct Disk {
    names: Names,
    data: Contents,
}

impl DiskRecord {
    /// The record of `dir` as it is now, all of it durable.
    pub(crate) fn scan(dir: &Path) -> io::Result<DiskRecord> {
        let mut rec = DiskRecord::default();
        rec.scan_into(dir, "")?;
        rec.durable_names = rec.names.clone();
        rec.durable_data = rec
            .current
            .iter()
            .filter(|(_, d)| !d.is_empty())
            .map(|(n, d)| (*n, Arc::from(d.as_slice())))
            .collect();
        Ok(rec)
    }

    fn scan_into(&mut self, dir: &Path, prefix: &str) -> io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            let meta = std::fs::symlink_metadata(e.path())?;
            let kind = if meta.is_dir() {
                Kind::Dir
            } else if meta.file_type().is_symlink() {
                Kind::Symlink(std::fs::read_link(e.path())?.to_string_lossy().into_owned())
            } else {
                use std::os::unix::fs::PermissionsExt;
                Kind::File(meta.permissions().mode() & 0o7777)
            };
            let node = self.new_node(kind.clone());
            self.names.insert(name.clone(), node);
            match kind {
                Kind::Dir => self.scan_into(&e.path(), &format!("{name}/"))?,
                Kind::File(_) => {
                    self.current.insert(node, std::fs::read(e.path())?);
                }
                Kind::Symlink(_) => {}
            }
        }
        Ok(())
    }

    fn new_node(&mut self, kind: Kind) -> u64 {
        self.next_node += 1;
        self.kinds.insert(self.next_node, kind);
        self.next_node
    }

    /// A stop: the call before it ran; `call` is the new tentative one.
    pub(crate) fn stop(&mut self, call: Option<Call>) {
        self.commit();
        self.tentative = call;
    }

    /// The tentative call ran (a later stop came, or the life ended).
    pub(crate) fn commit(&mut self) {
        if let Some(c) = self.tentative.take() {
            self.apply(c);
        }
    }

    /// The program was killed at the stop of the tentative call: it never
    /// ran.
    pub(crate) fn discard(&mut self) {
        self.tentative = None;
    }

    /// How many operations a cut now could lose.
    pub(crate) fn unsynced(&self) -> usize {
        self.pending.len()
    }

    /// A sync: what it names becomes durable.
    fn barrier(&mut self, call: &Call) {
        self.barriers += 1;
        match call {
            Call::SyncFile(name) => match self.names.get(name).copied() {
                Some(node) if self.kinds.get(&node) == Some(&Kind::Dir) => self.sync_names(),
                Some(node) => self.sync_file(node),
                None => {}
            },
            Call::SyncNames => self.sync_names(),
            _ => {
                self.sync_names();
                let nodes: Vec<u64> = self.current.keys().copied().collect();
                for n in nodes {
                    self.sync_file(n);
                }
            }
        }
    }

    fn apply(&mut self, call: Call) {
        self.calls += 1;
        match call {
            Call::Create(name, kind) => {
                let node = self.new_node(kind.clone());
                if matches!(kind, Kind::File(_)) {
                    self.current.insert(node, Vec::new());
                }
                self.names.insert(name.clone(), node);
                self.pending.push(Op::Create { name, node });
            }
            Call::Write {
                name,
                at,
                data,
                sync,
            } => {
                let Some(node) = self.file(&name) else { return };
                let at = at.unwrap_or_else(|| self.len(node));
                self.data_op(Op::Patch { node, at, data });
                if sync {
                    self.sync_file(node);
                }
            }
            Call::SetLen(name, len) => {
                if let Some(node) = self.file(&name) {
                    self.data_op(Op::SetLen { node, len });
                }
            }
            Call::Grow(name, len) => {
                if let Some(node) = self.file(&name) {
                    if len > self.len(node) {
                        self.data_op(Op::SetLen { node, len });
                    }
                }
            }
            Call::Rename { from, to, exchange } => self.rename(&from, &to, exchange),
            Call::Link(from, to) => {
                if let Some(&node) = self.names.get(&from) {
                    self.names.insert(to.clone(), node);
                    self.pending.push(Op::Create { name: to, node });
                }
            }
            Call::Remove(name) => {
                let gone: Vec<String> = self.under(&name);
                for n in gone.into_iter().rev() {
                    self.names.remove(&n);
                    self.pending.push(Op::Remove { name: n });
                }
            }
            Call::SyncFile(_) | Call::SyncNames | Call::SyncAll => self.barrier(&call),
            Call::Unmodelled(what) => {
                self.warnings.insert(what);
            }
        }
    }

    /// The regular file named `name` now.
    fn file(&self, name: &str) -> Option<u64> {
        let node = *self.names.get(name)?;
        self.current.contains_key(&node).then_some(node)
    }

    fn len(&self, node: u64) -> u64 {
        self.current.get(&node).map_or(0, |c| c.len() as u64)
    }

    /// `name` and every name under it (a directory's tree), sorted.
    fn under(&self, name: &str) -> Vec<String> {
        let inside = format!("{name}/");
        self.names
            .keys()
            .filter(|n| *n == name || n.starts_with(&inside))
            .cloned()
            .collect()
    }

    fn rename(&mut self, from: &str, to: &str, exchange: bool) {
        if exchange {
            // Two creates: no single operation of the model swaps.
            if let (Some(&a), Some(&b)) = (self.names.get(from), self.names.get(to)) {
                self.names.insert(to.to_owned(), a);
                self.names.insert(from.to_owned(), b);
                self.pending.push(Op::Create {
                    name: to.to_owned(),
                    node: a,
                });
                self.pending.push(Op::Create {
                    name: from.to_owned(),
                    node: b,
                });
            }
            return;
        }
        // A directory moves with its tree: one rename per name, in order.
        for old in self.under(from) {
            let new = format!("{to}{}", &old[from.len()..]);
            if let Some(n) = self.names.remove(&old) {
                self.names.insert(new.clone(), n);
                self.pending.push(Op::Rename { from: old, to: new });
            }
        }
    }

    fn data_op(&mut self, op: Op) {
        if let Some(node) = op.node() {
            if let Some(c) = self.current.get_mut(&node) {
                op.apply(c, None);
            }
        }
        self.pending.push(op);
    }

    fn sync_file(&mut self, node: u64) {
        let Some(now) = self.current.get(&node) else {
            return;
        };
        self.durable_data.insert(node, Arc::from(now.as_slice()));
        self.pending.retain(|op| op.node() != Some(node));
    }

    fn sync_names(&mut self) {
        self.durable_names = self.names.clone();
        self.pending.retain(|op| !op.is_entry());
    }

    /// The disk a cut in a named `state` leaves.
    pub(crate) fn cut(&self, state: DiskState) -> Disk {
        let (names, data) = survivors(
            state,
            &self.durable_names,
            &self.durable_data,
            &self.pending,
        );
        Disk { names, data }
    }

    /// The disk `want` (the last if there are fewer) of those `model`
    /// allows, and what the cut chose from.
    pub(crate) fn cut_enumerated(
        &self,
        model: &PersistenceModel,
        want: usize,
    ) -> (Disk, CutRecord) {
        let space = Space::new(
            &self.durable_names,
            &self.durable_data,
            &self.pending,
            model,
        );
        let (disk, record) = space.choose(model, want);
        let disk = match disk {
            Some((names, data)) => Disk { names, data },
            None => self.cut(DiskState::LoseUnsynced),
        };
        (disk, record)
    }

    /// Write `disk` as the directory `dir` (replacing it): directories,
    /// links and files with their kept contents.
    pub(crate) fn rebuild(&self, disk: &Disk, dir: &Path) -> io::Result<()> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir(dir)?;
        // Parents sort before their children.
        let by_name: BTreeMap<&String, &u64> = disk.names.iter().collect();
        for (name, node) in by_name {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            match self.kinds.get(node) {
                Some(Kind::Dir) => std::fs::create_dir_all(&path)?,
                Some(Kind::Symlink(target)) => std::os::unix::fs::symlink(target, &path)?,
                kind => {
                    use std::os::unix::fs::PermissionsExt;
                    let data = disk.data.get(node).map_or(&[][..], |d| &d[..]);
                    std::fs::write(&path, data)?;
                    let mode = match kind {
                        Some(Kind::File(m)) => *m,
                        _ => 0o644,
                    };
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, at: u64, data: &[u8]) -> Call {
        Call::Write {
            name: name.into(),
            at: Some(at),
            data: Arc::from(data),
            sync: false,
        }
    }

    fn files(disk: &Disk) -> BTreeMap<String, Vec<u8>> {
        disk.names
            .iter()
            .map(|(n, node)| {
                (
                    n.clone(),
                    disk.data.get(node).map_or(Vec::new(), |d| d.to_vec()),
                )
            })
            .collect()
    }

    /// Write-temp-and-rename with the file synced, not its directory: a
    /// cut that loses unsynced names loses the rename, whatever the data.
    #[test]
    fn an_unsynced_rename_is_lost_and_a_synced_write_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("state"), b"old").unwrap();
        let mut rec = DiskRecord::scan(dir.path()).unwrap();
        for c in [
            Call::Create("state.tmp".into(), Kind::File(0o644)),
            write("state.tmp", 0, b"new"),
            Call::SyncFile("state.tmp".into()),
            Call::Rename {
                from: "state.tmp".into(),
                to: "state".into(),
                exchange: false,
            },
        ] {
            rec.stop(Some(c));
        }
        rec.commit();
        let lose = files(&rec.cut(DiskState::LoseUnsynced));
        assert_eq!(lose.get("state").map(Vec::as_slice), Some(&b"old"[..]));
        let entries = files(&rec.cut(DiskState::KeepEntries));
        assert_eq!(
            entries.get("state").map(Vec::as_slice),
            Some(&b"new"[..]),
            "synced data kept"
        );
        rec.stop(Some(Call::SyncNames));
        rec.commit();
        for s in DiskState::ALL {
            let f = files(&rec.cut(s));
            assert_eq!(
                f.get("state").map(Vec::as_slice),
                Some(&b"new"[..]),
                "{s:?}"
            );
        }
    }

    #[test]
    fn appends_and_a_discarded_call() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log"), b"").unwrap();
        let mut rec = DiskRecord::scan(dir.path()).unwrap();
        let append = |d: &[u8]| Call::Write {
            name: "log".into(),
            at: None,
            data: Arc::from(d),
            sync: false,
        };
        rec.stop(Some(append(b"ab")));
        rec.stop(Some(append(b"cd")));
        rec.stop(Some(append(b"ef")));
        rec.discard();
        assert_eq!(files(&rec.cut(DiskState::Process))["log"], b"abcd");
        assert_eq!(files(&rec.cut(DiskState::LoseUnsynced))["log"], b"");
        let (_, record) = rec.cut_enumerated(&PersistenceModel::default(), 0);
        // Durable, torn to nothing (the same disk), "ab", "abcd".
        assert_eq!(record.states, 3);
    }

    #[test]
    fn a_rebuilt_directory_holds_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), b"x").unwrap();
        let mut rec = DiskRecord::scan(dir.path()).unwrap();
        rec.stop(Some(Call::Create("d/g".into(), Kind::File(0o600))));
        rec.stop(Some(write("d/g", 0, b"yy")));
        rec.commit();
        let out = dir.path().join("out");
        rec.rebuild(&rec.cut(DiskState::Process), &out).unwrap();
        assert_eq!(std::fs::read(out.join("d/f")).unwrap(), b"x");
        assert_eq!(std::fs::read(out.join("d/g")).unwrap(), b"yy");
        rec.rebuild(&rec.cut(DiskState::LoseUnsynced), &out)
            .unwrap();
        assert!(!out.join("d/g").exists());
    }
}
