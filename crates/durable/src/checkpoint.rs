//! The checkpoint store: one locked, atomically saved JSON file per run,
//! holding the user's state inside durable's envelope.
//!
//! [`Checkpoint`], [`Durable`], [`Opened`] and [`Options`] are at the crate
//! root too. This module adds what reading a checkpoint without opening it
//! returns ([`Saved`], from [`Checkpoint::load`]), the version of the file
//! format ([`FORMAT_VERSION`]) and the default read limit
//! ([`DEFAULT_MAX_READ_BYTES`]), and says what the store promises.
//!
//! # Errors are values
//!
//! A corrupt, truncated, foreign or other-version
//! checkpoint comes back as a typed [`Error`] naming its file, and is never
//! silently replaced by a fresh run. Nor is a checkpoint path that is not a
//! regular file — a symbolic link (even to a valid checkpoint), a
//! directory, a FIFO, a socket, a device ([`Error::NotRegularFile`]; a FIFO
//! never blocks the open) —, a file larger than
//! [`Options::max_read_bytes`] ([`Error::TooLarge`]), or a file that cannot
//! be read for any reason but "not found" (permission denied, `EIO`:
//! [`Error::Io`]). A field this build does not know, in the envelope or in
//! the state, is refused with [`Error::UnknownField`] rather than dropped by
//! the next save: a newer build (or a person) wrote it, and a save by this
//! one would erase it without a word.
//!
//! # One holder per run: the lock and the fencing epoch
//!
//! [`Checkpoint::open`] takes an `flock` on `<run>.lock`, which is never
//! followed if it is a symbolic link, and then checks that the file it
//! locked is still the file at the path (same device and inode): `flock`
//! locks an inode, not a path, so a lock on a file deleted or replaced in
//! between would exclude nobody ([`Error::LockReplaced`]).
//!
//! That still leaves a holder whose lock file is deleted *after* it took the
//! lock: a second process then creates a new lock file, locks it, and runs
//! the run too. So the envelope carries a **fencing epoch**, and the store
//! promises:
//!
//! * every open of an unfinished run makes a new holder whose epoch is one
//!   more than the epoch on disk, and saves it before `open` returns (in the
//!   save that counts the restart, or the start save of a fresh run; with
//!   `max_resumes: None`, in a save that passes no crash point). Opening a
//!   finished run saves nothing and keeps its epoch;
//! * every save reads the epoch on disk, under the lock, after the point
//!   `mid-save` and just before the rename, and if it is higher than the
//!   holder's, refuses with [`Error::Fenced`] and writes nothing (its temp
//!   file is removed). The read passes no crash point, so a save passes the
//!   same points, in the same order, as without fencing.
//!
//! So once a newer holder has opened a run, nothing an older holder saves
//! reaches the file, and the older holder learns it at its next save.
//!
//! The limits: the check and the rename are two steps. A newer holder whose
//! save lands in the instant between an older holder's check and its rename
//! is overwritten by the older holder's file, and until the newer holder
//! saves again (its check reads a lower epoch than its own, so it goes
//! through) the older holder is not fenced. What an older holder
//! does *outside* the store (a tool call between two saves) is not fenced:
//! keep idempotency keys ([`key`](crate::key)) for that. The epoch is a number in a
//! local file, guarded by a local `flock`: a run shared across machines
//! needs a lease in a database, where the same epoch becomes the lease's
//! fencing token and the check-and-write one conditional update
//! (`UPDATE … WHERE epoch = ours`), which closes the window above: that is
//! [`Checkpoint::open_store`] on a [`RunStore`]
//! (see [`crate::store`]). A build older than the epoch ignores it.

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::dir::{Dir, LockGuard};
use crate::disk::DiskDir;
use crate::envelope::{EnvelopeRef, EpochOnly};
use crate::error::{Error, Result};
use crate::read::parse;
use crate::run_id::RunId;
use crate::store::{Lease, RunStore};
use crate::write::{write_atomic_step, WriteFail, WriteOptions};

pub use crate::envelope::FORMAT_VERSION;

/// A state type that [`Checkpoint`] can store.
///
/// The state is yours: any `Serialize + DeserializeOwned` type. The store
/// adds its own envelope around it (the format version, the run ID, the
/// restart count), so the state needs no field for any of them. Both methods
/// have defaults, so `impl Durable for MyState {}` is enough.
pub trait Durable: Serialize + DeserializeOwned {
    /// Whether the run is over. A finished run is handed back by
    /// [`Checkpoint::open`] untouched: not saved, its restart not counted, so
    /// restarting it is free and reaches no crash point. The default is
    /// `false`: the run is never finished as far as the store can tell.
    fn is_finished(&self) -> bool {
        false
    }

    /// Why this state must not be saved, if it must not: a state whose
    /// checkpoint could not be loaded back (JSON has no NaN, for instance).
    /// [`Checkpoint::save`] refuses it with [`Error::InvalidState`] without
    /// writing. The default accepts every state.
    fn check(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// How a [`Checkpoint`] saves and how often a run may restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// fsync each save (file before the rename, directory after). Only crash
    /// sweeps and tests should turn it off: without it a power cut can lose
    /// the last saves, though a process crash still cannot tear the file.
    pub sync: bool,
    /// How many restarts a run gets before [`Checkpoint::open`] refuses it
    /// with [`Error::MaxResumes`]; a run that crashes on every restart would
    /// otherwise restart for ever. `None` does not count restarts at all: a
    /// restart saves nothing before the caller does, and no limit applies
    /// (for a job whose every life makes progress or ends).
    pub max_resumes: Option<u32>,
    /// The largest checkpoint [`Checkpoint::open`] reads, in bytes; a larger
    /// one is refused with [`Error::TooLarge`] before it is read whole.
    /// [`DEFAULT_MAX_READ_BYTES`] (64 MiB) by default.
    pub max_read_bytes: u64,
    /// Write each checkpoint as one line of JSON instead of indented, one
    /// field per line. Off by default: an indented checkpoint is what a
    /// person opens after a crash. A compact one is smaller and about a
    /// third quicker to write, for a program (or a crash sweep of one) that
    /// saves a large state very often; either layout loads, whichever wrote
    /// it.
    pub compact: bool,
}

/// The default of [`Options::max_read_bytes`]: 64 MiB, far above any
/// checkpoint a run writes, far below what would hurt to hold in memory.
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 << 20;

impl Default for Options {
    /// Synced saves, ten restarts, reads up to 64 MiB, indented JSON.
    fn default() -> Self {
        Options {
            sync: true,
            max_resumes: Some(10),
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            compact: false,
        }
    }
}

/// What [`Checkpoint::open`] found.
#[derive(Debug)]
pub struct Opened<S> {
    /// The open, locked checkpoint, for the saves that follow.
    pub checkpoint: Checkpoint<S>,
    /// The state to continue from.
    pub state: S,
    /// Whether `state` came from an existing checkpoint (a restart, or a
    /// finished run) rather than being a fresh start.
    pub resumed: bool,
    /// How many times the run was restarted, this restart included.
    pub resumes: u32,
}

/// A checkpoint as read by [`Checkpoint::load`]: the state and what the
/// envelope around it says. It derefs to the state, so `saved.turns` reads
/// the state's field and `saved.resumes` the envelope's count.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved<S> {
    /// The user's state.
    pub state: S,
    /// How many times the run was restarted.
    pub resumes: u32,
    /// The fencing epoch of the last holder that saved it (0 in a file
    /// written before epochs existed).
    pub epoch: u64,
}

impl<S> std::ops::Deref for Saved<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.state
    }
}

/// One run's checkpoint, open and locked: the only writer of `<run>.json`.
///
/// Holding a `Checkpoint` holds the run's lock (`<run>.lock`); dropping it,
/// or the process dying, releases it.
pub struct Checkpoint<S> {
    pub(crate) at: At,
    pub(crate) run: RunId,
    pub(crate) opts: Options,
    pub(crate) resumes: u32,
    pub(crate) epoch: u64,
    /// The last save's bytes and the epoch they record: when the file on
    /// disk holds exactly these bytes, the fence check knows its epoch
    /// without parsing it again.
    last: (Vec<u8>, u64),
    /// A buffer the next save serialises into (the one before last), so it
    /// does not grow a fresh one.
    spare: Vec<u8>,
    _state: PhantomData<fn(&S)>,
}

/// Where a [`Checkpoint`] saves.
pub(crate) enum At {
    /// `<run>.json` in a directory, under the `flock` on `<run>.lock`.
    Files {
        dir: Arc<dyn Dir>,
        file: String,
        _lock: LockGuard,
    },
    /// A run store, under a lease.
    Store {
        store: Arc<dyn RunStore>,
        lease: Lease,
    },
}

impl<S> fmt::Debug for Checkpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint")
            .field("path", &self.path())
            .field("opts", &self.opts)
            .field("resumes", &self.resumes)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

fn file_name(run: &RunId) -> String {
    format!("{run}.json")
}

fn lock_name(run: &RunId) -> String {
    format!("{run}.lock")
}

impl<S: Durable> Checkpoint<S> {
    /// Open `run`'s checkpoint in `dir` to start or resume it; a fresh start
    /// is `S::default()`. See [`Checkpoint::open_with`].
    pub fn open(dir: Arc<dyn Dir>, run: &RunId, opts: Options) -> Result<Opened<S>>
    where
        S: Default,
    {
        Self::open_with(dir, run, opts, S::default)
    }

    /// Open `run`'s checkpoint in `dir` to start or resume it.
    ///
    /// 1. Lock `<run>.lock` before reading anything: a second process gets
    ///    [`Error::Locked`] at once, since two processes resuming one run
    ///    would each redo its unfinished steps.
    /// 2. Remove temp files a crashed save of this run left behind; they are
    ///    never loaded, as the rename that would have published them never
    ///    happened.
    /// 3. Read `<run>.json`:
    ///    * missing: `fresh()`, saved at once (the start save),
    ///      `resumed = false`;
    ///    * [finished](Durable::is_finished): returned as it is, without
    ///      saving or counting, so restarting a finished run is free and
    ///      reaches no crash point;
    ///    * otherwise a restart: the restart count is incremented and saved
    ///      before anything else, then checked against
    ///      [`Options::max_resumes`], so a run that dies during every restart
    ///      still reaches the limit. A run whose saved count is already over
    ///      the limit is refused without writing anything. With
    ///      `max_resumes: None` nothing is counted, and the new epoch is
    ///      saved by a save that passes no crash point.
    ///
    /// Every open of an unfinished run is a new holder with a higher fencing
    /// epoch, saved before `open` returns; older holders' saves are then
    /// refused with [`Error::Fenced`] (see [the module
    /// docs](crate::checkpoint#one-holder-per-run-the-lock-and-the-fencing-epoch)).
    ///
    /// A checkpoint that cannot be read is never replaced by a fresh run: the
    /// typed error ([`Error::Corrupt`], [`Error::Truncated`],
    /// [`Error::UnsupportedVersion`], [`Error::NotRegularFile`],
    /// [`Error::TooLarge`], [`Error::UnknownField`], [`Error::Io`] for any
    /// read error but "not found") comes back and the file is left as it
    /// was. A lock path that is not a regular file is
    /// [`Error::NotRegularFile`], one replaced while being locked
    /// [`Error::LockReplaced`].
    pub fn open_with(
        dir: Arc<dyn Dir>,
        run: &RunId,
        opts: Options,
        fresh: impl FnOnce() -> S,
    ) -> Result<Opened<S>> {
        let lock_name = lock_name(run);
        let lock = dir.lock(&lock_name).map_err(|source| {
            if source.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked {
                    path: dir.path_of(&lock_name),
                }
            } else {
                Error::from_io(dir.path_of(&lock_name), "lock", source)
            }
        })?;
        let file = file_name(run);
        crate::write::remove_leftover_temps(dir.as_ref(), &file).map_err(|source| {
            Error::from_io(dir.path_of(&file), "remove leftover temp files", source)
        })?;
        let loaded = Self::load_limited(dir.as_ref(), run, opts.max_read_bytes)?;
        let at = At::Files {
            dir,
            file,
            _lock: lock,
        };
        // A new holder: a higher epoch, saved by the first save, fences off
        // every older holder's saves.
        let epoch = loaded.as_ref().map_or(1, |s| s.epoch.saturating_add(1));
        let checkpoint = Checkpoint::new(at, run, opts, epoch);
        checkpoint.start_or_resume(loaded, fresh)
    }

    /// A checkpoint at `at`, before its first save.
    pub(crate) fn new(at: At, run: &RunId, opts: Options, epoch: u64) -> Checkpoint<S> {
        Checkpoint {
            at,
            run: run.clone(),
            opts,
            resumes: 0,
            epoch,
            last: (Vec::new(), 0),
            spare: Vec::new(),
            _state: PhantomData,
        }
    }

    /// The rest of an open, once the run is held and read: start `fresh`,
    /// hand a finished run back, or count a restart (see
    /// [`Checkpoint::open_with`]). The holder's new epoch is set already.
    pub(crate) fn start_or_resume(
        self,
        loaded: Option<Saved<S>>,
        fresh: impl FnOnce() -> S,
    ) -> Result<Opened<S>> {
        let mut checkpoint = self;
        let Some(saved) = loaded else {
            let state = fresh();
            checkpoint.save(&state)?;
            return Ok(Opened {
                checkpoint,
                state,
                resumed: false,
                resumes: 0,
            });
        };
        let Saved {
            state,
            resumes,
            epoch,
        } = saved;
        checkpoint.resumes = resumes;
        if state.is_finished() {
            checkpoint.epoch = epoch;
            return Ok(Opened {
                checkpoint,
                state,
                resumed: true,
                resumes,
            });
        }
        let Some(limit) = checkpoint.opts.max_resumes else {
            // Nothing to count, but the epoch must reach the disk before the
            // caller acts: a save with no crash points of its own.
            checkpoint.save_with_points(&state, false)?;
            return Ok(Opened {
                checkpoint,
                state,
                resumed: true,
                resumes,
            });
        };
        let over = |checkpoint: &Checkpoint<S>| Error::MaxResumes {
            path: checkpoint.path(),
            resumes: checkpoint.resumes,
            limit,
        };
        if resumes > limit {
            // Already refused once; saving a higher count changes nothing.
            return Err(over(&checkpoint));
        }
        checkpoint.resumes = resumes.saturating_add(1);
        checkpoint.save(&state)?;
        if checkpoint.resumes > limit {
            return Err(over(&checkpoint));
        }
        let resumes = checkpoint.resumes;
        Ok(Opened {
            checkpoint,
            state,
            resumed: true,
            resumes,
        })
    }

    /// [`Checkpoint::open`] in a [`DiskDir`] at `path`, created (0700) if
    /// missing.
    pub fn open_path(path: impl AsRef<Path>, run: &RunId, opts: Options) -> Result<Opened<S>>
    where
        S: Default,
    {
        let path = path.as_ref();
        Self::open(Arc::new(DiskDir::create(path)?), run, opts)
    }

    /// Save `state` with a crash-safe write: after a crash at any moment the
    /// file holds this state or the previous one, never a mix.
    ///
    /// Passes the crash points `mid-save` and `after rename` (through
    /// [`write_atomic`](crate::write::write_atomic)). Refuses, with
    /// [`Error::InvalidState`] and without writing, a state that
    /// [`Durable::check`] refuses or that cannot be serialised, and with
    /// [`Error::Fenced`] (nothing written) when a newer holder opened the
    /// run since this one did.
    pub fn save(&mut self, state: &S) -> Result<()> {
        self.save_with_points(state, true)
    }

    fn save_with_points(&mut self, state: &S, points: bool) -> Result<()> {
        let mut bytes = std::mem::take(&mut self.spare);
        let invalid = |reason: String| Error::InvalidState {
            path: self.path(),
            reason,
        };
        state.check().map_err(invalid)?;
        let envelope = EnvelopeRef {
            version: FORMAT_VERSION,
            run: self.run.as_str(),
            resumes: self.resumes,
            state,
            epoch: self.epoch,
        };
        // The same bytes as `serde_json::to_vec_pretty` (or `to_vec`), into
        // the buffer the last save grew.
        bytes.clear();
        if self.opts.compact {
            serde_json::to_writer(&mut bytes, &envelope)
        } else {
            serde_json::to_writer_pretty(&mut bytes, &envelope)
        }
        .map_err(|e| invalid(format!("cannot serialise: {e}")))?;
        bytes.push(b'\n');
        let opts = WriteOptions {
            sync: self.opts.sync,
            points,
        };
        let written = match &self.at {
            At::Files { dir, file, .. } => {
                write_atomic_step(dir.as_ref(), file, &bytes, opts, &mut || self.check_fence())
                    .map_err(|fail| match fail {
                        WriteFail::Step(op, source) => Error::from_io(self.path(), op, source),
                        WriteFail::Refused(e) => e,
                    })
            }
            At::Store { store, lease } => store.save(lease, &bytes, state.is_finished()),
        };
        // Written: a holder's epoch never goes back between its saves (the
        // fence compares epochs), and `last` holds the envelope just
        // written, under the epoch it names (`check_fence` reads it back
        // so instead of parsing the file).
        assert!(
            self.last.1 <= self.epoch,
            "run {}: saved under epoch {} after saving under {}",
            self.run.as_str(),
            self.epoch,
            self.last.1
        );
        let (old, _) = std::mem::replace(&mut self.last, (bytes, self.epoch));
        self.spare = old;
        written
    }

    /// Refuse to write if a newer holder saved since this one opened the
    /// run: read the epoch on disk, under the lock, just before the rename.
    fn check_fence(&self) -> Result<()> {
        let path = || self.path();
        let At::Files { dir, file, .. } = &self.at else {
            return Ok(());
        };
        let bytes = dir
            .read_limited(file, self.opts.max_read_bytes)
            .map_err(|source| Error::from_io(path(), "read before saving", source))?;
        let Some(bytes) = bytes else {
            return Ok(());
        };
        let on_disk = if !bytes.is_empty() && bytes == self.last.0 {
            // What the last save wrote: its epoch is known, and no higher
            // than this holder's (asserted when it was written).
            assert!(
                self.last.1 <= self.epoch,
                "run {}: the last save's epoch {} is above the holder's {}",
                self.run.as_str(),
                self.last.1,
                self.epoch
            );
            self.last.1
        } else {
            serde_json::from_slice::<EpochOnly>(&bytes)
                .map_err(|e| Error::Corrupt {
                    path: path(),
                    reason: format!("before saving over it: {e}"),
                })?
                .epoch
        };
        if on_disk > self.epoch {
            return Err(Error::Fenced {
                path: path(),
                ours: self.epoch,
                on_disk,
            });
        }
        Ok(())
    }

    /// Read `run`'s checkpoint in `dir` without taking the lock, for tools
    /// and tests that only look: `Ok(None)` if there is none. Leftover temp
    /// files are ignored, as [`Checkpoint::open`] would ignore them.
    ///
    /// Reads at most [`DEFAULT_MAX_READ_BYTES`]; see
    /// [`Checkpoint::load_limited`].
    pub fn load(dir: &dyn Dir, run: &RunId) -> Result<Option<Saved<S>>> {
        Self::load_limited(dir, run, DEFAULT_MAX_READ_BYTES)
    }

    /// [`Checkpoint::load`], refusing a checkpoint larger than `limit` bytes
    /// with [`Error::TooLarge`]. Only a missing file is `Ok(None)`: an entry
    /// that is not a regular file is [`Error::NotRegularFile`], and every
    /// other read error is [`Error::Io`] naming the file.
    pub fn load_limited(dir: &dyn Dir, run: &RunId, limit: u64) -> Result<Option<Saved<S>>> {
        let file = file_name(run);
        let path = || dir.path_of(&file);
        match dir.read_limited(&file, limit) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => parse(&bytes, run, &path()).map(|e| {
                Some(Saved {
                    state: e.state,
                    resumes: e.resumes,
                    epoch: e.epoch,
                })
            }),
            Err(source) => Err(Error::from_io(path(), "read", source)),
        }
    }
}

impl<S> Checkpoint<S> {
    /// The checkpoint file's name for `run`: `<run>.json`.
    pub fn file_name(run: &RunId) -> String {
        file_name(run)
    }

    /// The lock file's name for `run`: `<run>.lock`.
    pub fn lock_name(run: &RunId) -> String {
        lock_name(run)
    }

    /// The run this checkpoint belongs to.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// How many times the run was restarted, as the next save records it.
    pub fn resumes(&self) -> u32 {
        self.resumes
    }

    /// This holder's fencing epoch: what its saves record, and the highest
    /// epoch on disk they accept (see [the module
    /// docs](crate::checkpoint#one-holder-per-run-the-lock-and-the-fencing-epoch)).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The checkpoint file's path (or `mem:/<run>.json`), for messages.
    pub fn path(&self) -> PathBuf {
        match &self.at {
            At::Files { dir, file, .. } => dir.path_of(file),
            At::Store { store, .. } => store.path_of(&self.run),
        }
    }
}
