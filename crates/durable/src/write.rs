//! The crash-safe writer: temp file, fsync, rename, fsync the directory, and
//! the cleanup of what a crashed write left behind.
//!
//! [`Checkpoint`](crate::Checkpoint) saves through [`write_atomic`]; call it
//! directly for any other file that must be replaced whole, and
//! [`remove_leftover_temps`] when opening such a file after a crash.
//!
//! # What the disk may do: the persistence model, and a failed fsync
//!
//! A power cut keeps what was synced: a file's contents as of its last
//! fsync, the names as of the directory's last fsync. Of what was not
//! synced, the `testing` feature's enumerated crash states (the
//! `durable::testing::enumerate` module) assume only this: directory
//! operations (create, rename, remove) persist as a prefix in program order,
//! a rename is atomic, the writes of one file persist in order, the last
//! kept write may be torn at a 512-byte block boundary (at most two torn
//! prefixes per write), and data and names are not ordered against each
//! other. Every disk this allows is a crash state of its own, up to a bound
//! (64 per crash by default; above it a documented sample that keeps the
//! extremes). [`write_atomic`] is correct under all of them, since it
//! never relies on an unsynced operation.
//!
//! **After a failed fsync** [`write_atomic`] does not retry it (on Linux a
//! retry after a writeback error "succeeds" and syncs nothing) and does not
//! rename: it removes the temp file and returns the error, naming the file,
//! and the old checkpoint stays in place. The next save writes a fresh temp
//! file and fsyncs that. A failed directory fsync after the rename is
//! returned too: the new file is visible but not known to be durable, so a
//! caller treats the outcome as unknown, never as "not saved".

use std::io;

use crate::dir::{check_name, Dir};

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

/// Why [`write_atomic_step`] did not write.
pub(crate) enum WriteFail {
    /// A step failed: which one, and how.
    Step(&'static str, io::Error),
    /// The check before the rename refused the write.
    Refused(crate::Error),
}

impl From<(&'static str, io::Error)> for WriteFail {
    fn from((op, e): (&'static str, io::Error)) -> Self {
        WriteFail::Step(op, e)
    }
}

/// [`write_atomic`], naming the step that failed, with `before_rename`
/// called after the point `mid-save` and just before the rename: an `Err`
/// from it removes the temp file and writes nothing. It passes no crash
/// point of its own.
pub(crate) fn write_atomic_step(
    dir: &dyn Dir,
    name: &str,
    bytes: &[u8],
    opts: WriteOptions,
    before_rename: &mut dyn FnMut() -> crate::Result<()>,
) -> Result<(), WriteFail> {
    check_name(name).map_err(|e| ("write", e))?;
    let tmp = dir
        .create_temp(&format!(".{name}-"))
        .map_err(|e| ("create temp file for", e))?;
    let swapped = (|| -> Result<(), WriteFail> {
        dir.write(&tmp, bytes)
            .map_err(|e| ("write temp file for", e))?;
        if opts.sync {
            dir.sync(&tmp).map_err(|e| ("sync temp file for", e))?;
        }
        if opts.points {
            crashpoint::point!("mid-save");
        }
        before_rename().map_err(WriteFail::Refused)?;
        dir.rename(&tmp, name)
            .map_err(|e| ("rename temp file over", e))?;
        Ok(())
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

/// [`write_atomic`] with `before_rename` asked after the temp file is
/// written (and synced) and just before the rename: an `Err` from it
/// removes the temp file, writes nothing, and is returned. For a writer
/// fenced by an epoch, whose check belongs as close to the rename as it
/// can be.
pub fn write_atomic_checked(
    dir: &dyn Dir,
    name: &str,
    bytes: &[u8],
    opts: WriteOptions,
    before_rename: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let mut refused = None;
    let mut check = || {
        before_rename().map_err(|e| {
            refused = Some(e);
            crate::Error::Io {
                path: dir.path_of(name),
                op: "check before renaming over",
                source: io::Error::other("refused"),
            }
        })
    };
    let result = write_atomic_step(dir, name, bytes, opts, &mut check);
    if let Some(e) = refused {
        return Err(e);
    }
    result.map_err(|fail| match fail {
        WriteFail::Step(_, e) => e,
        WriteFail::Refused(e) => io::Error::other(e),
    })
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
///
/// **After a failed fsync** the writer assumes nothing about what reached
/// the disk: it never retries the fsync (on Linux a second fsync after a
/// writeback error reports success for data that was dropped — PostgreSQL's
/// lesson), it does not rename the temp file, it removes it (best effort)
/// and returns the error. `name` keeps the old contents; the next call
/// starts again with a fresh temp file, a fresh write and a fresh fsync. A
/// failed fsync of the directory *after* the rename returns the error too:
/// the new contents are visible but not known durable, so the caller must
/// treat the save as not done (and may save again, which rewrites it).
pub fn write_atomic(dir: &dyn Dir, name: &str, bytes: &[u8], opts: WriteOptions) -> io::Result<()> {
    write_atomic_step(dir, name, bytes, opts, &mut || Ok(())).map_err(|fail| match fail {
        WriteFail::Step(_, e) => e,
        WriteFail::Refused(e) => io::Error::other(e),
    })
}
