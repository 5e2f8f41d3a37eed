//! Deliberately broken writers, to prove that a power-loss sweep catches
//! them. A mutation is a directory wrapper that drops or replaces one call of
//! the shipped writer ([`write_atomic`](crate::write::write_atomic) and
//! [`Checkpoint`](crate::Checkpoint), unchanged): wrapping the directory,
//! rather than copying the writer, keeps everything else exactly as shipped.

use std::io;
use std::path::PathBuf;

use crate::dir::{Dir, LockGuard};

/// The point a crash lands at between an in-place overwrite and its fsync.
pub const MID_OVERWRITE: &str = "mid-overwrite";

/// Which step of the crash-safe write a [`MutantDir`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutation {
    /// No fsync of the file before the rename: the new name may point at
    /// data that never reached the disk.
    NoFileSync,
    /// No fsync of the directory after the rename: the rename itself may
    /// vanish in a power cut.
    NoDirSync,
    /// The rename is replaced by an overwrite of the live file in place
    /// (then an fsync): until that fsync, a power cut may tear the only copy.
    /// A crash in that window lands at the point [`MID_OVERWRITE`].
    InPlace,
    /// The old file is removed before the temp file is renamed to its name
    /// (a replace in two steps, as where a rename cannot overwrite). Each
    /// step is a directory operation; a crash between the two syncs of the
    /// directory that keeps the remove and loses the rename leaves no file
    /// at all. None of the six named crash states keeps exactly that prefix
    /// of a save (`in-order` keeps only the temp file's creation), so only
    /// the enumerated states catch it.
    RemoveFirst,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 4] = [
        Mutation::NoFileSync,
        Mutation::NoDirSync,
        Mutation::InPlace,
        Mutation::RemoveFirst,
    ];

    /// A short command-line name.
    pub fn slug(self) -> &'static str {
        match self {
            Mutation::NoFileSync => "no-file-fsync",
            Mutation::NoDirSync => "no-dir-fsync",
            Mutation::InPlace => "in-place",
            Mutation::RemoveFirst => "remove-first",
        }
    }
}

/// A directory that passes every call through to `inner` except the one its
/// [`Mutation`] drops or replaces.
#[derive(Debug)]
pub struct MutantDir<D> {
    inner: D,
    mutation: Mutation,
}

impl<D: Dir> MutantDir<D> {
    /// `inner`, broken as `mutation` says.
    pub fn new(inner: D, mutation: Mutation) -> Self {
        MutantDir { inner, mutation }
    }
}

impl<D: Dir> Dir for MutantDir<D> {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.inner.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.inner.write(name, data)
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        match self.mutation {
            Mutation::NoFileSync => Ok(()),
            _ => self.inner.sync(name),
        }
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        if self.mutation == Mutation::RemoveFirst {
            self.inner.remove(to)?;
            return self.inner.rename(from, to);
        }
        if self.mutation != Mutation::InPlace {
            return self.inner.rename(from, to);
        }
        // Publish by overwriting the live file: truncate and write, then
        // fsync it. Until that fsync, a power cut may tear the only copy.
        let bytes = self.inner.read(from)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{from}: no such file"))
        })?;
        self.inner.write(to, &bytes)?;
        crashpoint::point!(MID_OVERWRITE);
        self.inner.sync(to)?;
        self.inner.remove(from)
    }
    fn sync_dir(&self) -> io::Result<()> {
        match self.mutation {
            Mutation::NoDirSync => Ok(()),
            _ => self.inner.sync_dir(),
        }
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.inner.read(name)
    }
    fn read_limited(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_limited(name, limit)
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
    use crate::testing::{DiskState, PowerDir};
    use crate::write::{write_atomic, WriteOptions};

    const SYNCED: WriteOptions = WriteOptions {
        sync: true,
        points: false,
    };

    /// Write "old", then start writing "new" and cut the power after the
    /// writer returned: what does the restart read?
    fn after_cut(mutation: Option<Mutation>, state: DiskState) -> Option<Vec<u8>> {
        let power = PowerDir::new(state);
        power.boot();
        let dir: Box<dyn Dir> = match mutation {
            None => Box::new(power.clone()),
            Some(m) => Box::new(MutantDir::new(power.clone(), m)),
        };
        write_atomic(dir.as_ref(), "f", b"old", SYNCED).unwrap();
        write_atomic(dir.as_ref(), "f", b"new", SYNCED).unwrap();
        power.boot(); // no shutdown: the last life crashed
        power.read("f").unwrap()
    }

    #[test]
    fn the_real_writer_keeps_every_returned_write() {
        for state in DiskState::ALL {
            assert_eq!(
                after_cut(None, state).as_deref(),
                Some(&b"new"[..]),
                "{state:?}"
            );
        }
    }

    #[test]
    fn each_mutation_loses_a_returned_write_in_some_state() {
        for m in [Mutation::NoFileSync, Mutation::NoDirSync] {
            let lost = DiskState::ALL
                .into_iter()
                .any(|s| after_cut(Some(m), s).as_deref() != Some(&b"new"[..]));
            assert!(lost, "{m:?} survives every crash state");
        }
    }
}
