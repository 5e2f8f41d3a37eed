//! The checkpoint store: one locked, atomically saved JSON file per run.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::dir::{write_atomic_step, Dir, DiskDir, LockGuard, WriteOptions};
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::state::{Phase, State};
use crate::STATE_VERSION;

/// How a [`Checkpoint`] saves and how often a run may restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// fsync each save (file before the rename, directory after). Only crash
    /// sweeps and tests should turn it off: without it a power cut can lose
    /// the last saves, though a process crash still cannot tear the file.
    pub sync: bool,
    /// How many restarts a run gets before [`Checkpoint::open`] refuses it
    /// with [`Error::MaxResumes`]. A run that crashes on every restart would
    /// otherwise restart for ever.
    pub max_resumes: u32,
}

impl Default for Options {
    /// Synced saves, ten restarts.
    fn default() -> Self {
        Options {
            sync: true,
            max_resumes: 10,
        }
    }
}

/// What [`Checkpoint::open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The open, locked checkpoint, for the saves that follow.
    pub checkpoint: Checkpoint,
    /// The state to continue from.
    pub state: State,
    /// Whether `state` came from an existing checkpoint (a restart, or a
    /// finished run) rather than being a fresh start.
    pub resumed: bool,
}

/// One run's checkpoint, open and locked: the only writer of `<run>.json`.
///
/// Holding a `Checkpoint` holds the run's lock (`<run>.lock`); dropping it,
/// or the process dying, releases it.
pub struct Checkpoint {
    dir: Arc<dyn Dir>,
    run: RunId,
    opts: Options,
    file: String,
    _lock: LockGuard,
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint")
            .field("path", &self.path())
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Checkpoint {
    /// The checkpoint file's name for `run`: `<run>.json`.
    pub fn file_name(run: &RunId) -> String {
        format!("{run}.json")
    }

    /// The lock file's name for `run`: `<run>.lock`.
    pub fn lock_name(run: &RunId) -> String {
        format!("{run}.lock")
    }

    /// Open `run`'s checkpoint in `dir` to start or resume it.
    ///
    /// 1. Lock `<run>.lock` before reading anything: a second process gets
    ///    [`Error::Locked`] at once, since two processes resuming one run
    ///    would each run its unanswered calls.
    /// 2. Remove temp files a crashed save of this run left behind; they are
    ///    never loaded, as the rename that would have published them never
    ///    happened.
    /// 3. Read `<run>.json`:
    ///    * missing: a fresh [`State::new`], saved at once (the start save),
    ///      `resumed = false`;
    ///    * phase done: returned as it is, without saving or counting, so
    ///      restarting a finished run is free and reaches no crash point;
    ///    * otherwise a restart: `resumes` is incremented and saved before
    ///      anything else, then checked against [`Options::max_resumes`], so
    ///      a run that dies during every restart still reaches the limit.
    ///      A run whose saved count is already over the limit is refused
    ///      without writing anything.
    ///
    /// A checkpoint that cannot be read is never replaced by a fresh run: the
    /// typed error ([`Error::Corrupt`], [`Error::Truncated`],
    /// [`Error::UnknownPhase`], [`Error::UnsupportedVersion`]) comes back and
    /// the file is left as it was.
    pub fn open(dir: Arc<dyn Dir>, run: &RunId, opts: Options) -> Result<Opened> {
        let lock_name = Self::lock_name(run);
        let lock = dir.lock(&lock_name).map_err(|source| {
            if source.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked {
                    path: dir.path_of(&lock_name),
                }
            } else {
                Error::Io {
                    path: dir.path_of(&lock_name),
                    op: "lock",
                    source,
                }
            }
        })?;
        let mut checkpoint = Checkpoint {
            file: Self::file_name(run),
            dir,
            run: run.clone(),
            opts,
            _lock: lock,
        };
        checkpoint.remove_temp_files()?;

        let Some(mut state) = checkpoint.read()? else {
            let state = State::new(run);
            checkpoint.save(&state)?;
            return Ok(Opened {
                checkpoint,
                state,
                resumed: false,
            });
        };
        if state.phase == Phase::Done {
            return Ok(Opened {
                checkpoint,
                state,
                resumed: true,
            });
        }
        let limit = opts.max_resumes;
        if state.resumes > limit {
            // Already refused once; saving a higher count changes nothing.
            return Err(Error::MaxResumes {
                path: checkpoint.path(),
                resumes: state.resumes,
                limit,
            });
        }
        state.resumes = state.resumes.saturating_add(1);
        checkpoint.save(&state)?;
        if state.resumes > limit {
            return Err(Error::MaxResumes {
                path: checkpoint.path(),
                resumes: state.resumes,
                limit,
            });
        }
        Ok(Opened {
            checkpoint,
            state,
            resumed: true,
        })
    }

    /// [`Checkpoint::open`] in a [`DiskDir`] at `path`, created (0700) if
    /// missing.
    pub fn open_path(path: impl AsRef<Path>, run: &RunId, opts: Options) -> Result<Opened> {
        let path = path.as_ref();
        let dir = DiskDir::new(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            op: "create directory",
            source,
        })?;
        Self::open(Arc::new(dir), run, opts)
    }

    /// Save `state` with a crash-safe write: after a crash at any moment the
    /// file holds this state or the previous one, never a mix.
    ///
    /// Passes the crash points `mid-save` and `after rename`. Refuses, with
    /// [`Error::InvalidState`] and without writing, a state that could not be
    /// loaded back: another run's, another version's, or one whose dollars
    /// are not finite (JSON has no NaN).
    pub fn save(&mut self, state: &State) -> Result<()> {
        self.check_saveable(state)?;
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| Error::InvalidState {
            path: self.path(),
            reason: format!("cannot serialise: {e}"),
        })?;
        bytes.push(b'\n');
        let opts = WriteOptions {
            sync: self.opts.sync,
            points: true,
        };
        write_atomic_step(self.dir.as_ref(), &self.file, &bytes, opts).map_err(|(op, source)| {
            Error::Io {
                path: self.path(),
                op,
                source,
            }
        })
    }

    fn check_saveable(&self, state: &State) -> Result<()> {
        let invalid = |reason: String| {
            Err(Error::InvalidState {
                path: self.path(),
                reason,
            })
        };
        if state.run != self.run.as_str() {
            return invalid(format!(
                "the state belongs to run {:?}, this checkpoint to run {:?}",
                state.run,
                self.run.as_str()
            ));
        }
        if state.version != STATE_VERSION {
            return invalid(format!(
                "the state has version {}, this build writes version {STATE_VERSION}",
                state.version
            ));
        }
        if !state.usage.dollars.is_finite() {
            return invalid(format!(
                "usage.dollars is {}, which JSON cannot hold",
                state.usage.dollars
            ));
        }
        Ok(())
    }

    /// Read `run`'s checkpoint in `dir` without taking the lock, for tools
    /// and tests that only look: `Ok(None)` if there is none. Leftover temp
    /// files are ignored, as [`Checkpoint::open`] would ignore them.
    pub fn load(dir: &dyn Dir, run: &RunId) -> Result<Option<State>> {
        let file = Self::file_name(run);
        let path = || dir.path_of(&file);
        match dir.read(&file) {
            Ok(None) => Ok(None),
            Ok(Some(bytes)) => parse(&bytes, run, &path()).map(Some),
            Err(source) => Err(Error::Io {
                path: path(),
                op: "read",
                source,
            }),
        }
    }

    /// The run this checkpoint belongs to.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The checkpoint file's path (or `mem:/<run>.json`), for messages.
    pub fn path(&self) -> PathBuf {
        self.dir.path_of(&self.file)
    }

    fn read(&self) -> Result<Option<State>> {
        Self::load(self.dir.as_ref(), &self.run)
    }

    /// Remove `.<run>.json-<unique>.tmp` files left by saves that crashed
    /// before their rename. Only names whose unique part is alphanumeric
    /// count, so the temp files of a run whose ID extends this one's (run
    /// `a` and run `a.json-b`) are never touched.
    fn remove_temp_files(&self) -> Result<()> {
        let dir = self.dir.as_ref();
        crate::dir::remove_leftover_temps(dir, &self.file).map_err(|source| Error::Io {
            path: dir.path_of(&self.file),
            op: "remove leftover temp files",
            source,
        })?;
        Ok(())
    }
}

/// Parse a checkpoint's bytes into the state of `run`, with a typed error
/// for every way it can be wrong. Never panics, whatever the bytes.
fn parse(bytes: &[u8], run: &RunId, path: &Path) -> Result<State> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            Error::Truncated {
                path: path.to_path_buf(),
            }
        } else {
            corrupt(format!("invalid JSON: {e}"))
        }
    })?;
    let Value::Object(fields) = &value else {
        return Err(corrupt("not a JSON object".to_owned()));
    };
    match fields.get("version") {
        None => return Err(corrupt("no \"version\" field".to_owned())),
        Some(v) => match v.as_u64() {
            Some(version) if version == u64::from(STATE_VERSION) => {}
            Some(version) => {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    version,
                })
            }
            None => return Err(corrupt(format!("\"version\" is {v}, not a number"))),
        },
    }
    match fields.get("phase") {
        None => return Err(corrupt("no \"phase\" field".to_owned())),
        Some(Value::String(phase)) => {
            if phase.parse::<Phase>().is_err() {
                return Err(Error::UnknownPhase {
                    path: path.to_path_buf(),
                    phase: phase.clone(),
                });
            }
        }
        Some(v) => return Err(corrupt(format!("\"phase\" is {v}, not a string"))),
    }
    let state: State =
        serde_json::from_value(value).map_err(|e| corrupt(format!("wrong shape: {e}")))?;
    if state.run != run.as_str() {
        return Err(corrupt(format!(
            "it holds run {:?}, not {:?}",
            state.run,
            run.as_str()
        )));
    }
    Ok(state)
}
