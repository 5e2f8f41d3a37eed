//! The state directory: every run's checkpoint, lock and world.
//!
//! ```text
//! DIR/
//!   .triage.lock        the state directory's lock, held while a run is
//!                       picked or created (milliseconds)
//!   <run>.json          the checkpoint (0600), written atomically by `durable`
//!   <run>.lock          the run's flock: one process per run
//!   <run>.world/        everything else a crash must not erase
//!     run.json          which task the run runs, and when it started
//!     task.json         the task file as it was when the run started
//!     tracker.json      the run's file-backed tracker (keyed)
//!     workspace/        the files code_patch writes, seeded from the task
//!     checkpointed      the run's first checkpoint was saved (crate::adopt)
//!     tracker-seeded    with --tracker: the seeds are on the service
//! ```
//!
//! Each run has its own world, so two runs of one task never see each
//! other's issues, and "each effect exactly once" is a property of one run.
//! A world is built in a hidden temporary directory and renamed into place
//! before the run's checkpoint exists, so a checkpoint always has a whole
//! world, and the resume uses the task the run started with even if the
//! built-in task changed since.
//!
//! Starts are serialised: a command takes `.triage.lock` (waiting for it,
//! up to a minute) before it cleans up, picks or creates a run, and lets it
//! go once it holds the run's own lock and the world is whole. So two
//! `--task` starts at once make one run: the second waits, then finds the
//! run the first created, held, and exits "locked" (3).
//!
//! Crash leftovers are cleaned on every start, under that lock
//! ([`StateDir::collect`]): half-built worlds (`.<run>.world.tmp`, which
//! hold no effects), the lock files of runs that have neither a world nor a
//! checkpoint, and checkpoint temp files of runs no process holds. A
//! world is never removed: one without a checkpoint is a run killed before
//! its first save, which the next start adopts under the same ID, or a run
//! that lost its checkpoint, which is refused (see [`crate::adopt`]). The
//! temp files of the world's writers (the tracker's, the workspace
//! patches') are removed when the run is next opened, under its lock
//! ([`World::remove_leftovers`]). A world is whole or refused: a missing
//! metadata file, task copy, workspace or tracker is an error, never an
//! empty replacement ([`StateDir::open_world`]).
//!
//! Every file written here is 0600 and every directory 0700, whatever the
//! umask.
//!
//! Names never collide: run IDs never start with `.` and never end in
//! `.world` + `.json`, so `<run>.world` of one run is never `<other>.json`.

mod build;
mod collect;
mod lock;
mod open;
mod validate;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent::state::Checkpoint;
use durable::{DiskDir, RunId};
use serde::{Deserialize, Serialize};

use crate::exit::Failure;
use crate::files::{self, io_failure};
use crate::task::Task;

pub use collect::Collected;

/// The world directory's suffix.
const WORLD_SUFFIX: &str = ".world";
/// The run's metadata inside its world.
const META: &str = "run.json";
/// The copy of the task file inside the world.
const TASK_COPY: &str = "task.json";
/// The workspace directory inside the world.
pub const WORKSPACE: &str = "workspace";

/// The tracker's file inside a world.
const TRACKER_FILE: &str = "tracker.json";

/// The name of the state directory's own lock, taken while a command picks
/// or creates a run. Run IDs never start with `.`, so it is never a run's.
pub const STATE_LOCK: &str = ".triage.lock";

/// A run's metadata, `<run>.world/run.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// The task's name.
    pub task: String,
    /// Where the task came from when the run started.
    pub source: String,
    /// When the run started, in Unix seconds.
    pub started: u64,
    /// With a database store: the tracker service the run's tools send to,
    /// chosen when the run was made, so every process that takes the run
    /// up sends its effects to the same place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracker: Option<String>,
}

/// The state directory, checked to be a usable directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    path: PathBuf,
    dir: Arc<DiskDir>,
}

/// A run's world, opened.
#[derive(Clone, Debug)]
pub struct World {
    /// The world directory.
    pub path: PathBuf,
    /// Its metadata.
    pub meta: Meta,
    /// The task as it was when the run started.
    pub task: Task,
}

impl World {
    /// The workspace directory.
    pub fn workspace(&self) -> PathBuf {
        self.path.join(WORKSPACE)
    }

    /// The world directory as a [`durable::Dir`], for the tracker.
    pub fn dir(&self) -> Result<Arc<DiskDir>, Failure> {
        DiskDir::new(&self.path)
            .map(Arc::new)
            .map_err(|e| io_failure("open the world", &self.path, &e))
    }

    /// Whether the world holds its tracker's file (an error if the entry
    /// is not a regular file).
    pub fn has_tracker_file(&self) -> Result<bool, Failure> {
        files::regular("the run's tracker", &self.path.join(TRACKER_FILE))
    }

    /// Remove the temp files killed writers left in the world: the
    /// tracker's (`.tracker.json-….tmp`) and the workspace patches'
    /// (`.<file>-….tmp`). Call only under the run's lock.
    pub fn remove_leftovers(&self) -> Result<Vec<String>, Failure> {
        let mut removed = files::remove_write_temps(&self.path)?;
        removed.extend(
            files::remove_write_temps(&self.workspace())?
                .into_iter()
                .map(|n| format!("{WORKSPACE}/{n}")),
        );
        Ok(removed)
    }
}

impl StateDir {
    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory as a [`durable::Dir`], for the checkpoint store.
    pub fn dir(&self) -> Arc<DiskDir> {
        Arc::clone(&self.dir)
    }

    /// `<run>.json`.
    pub fn checkpoint_path(&self, run: &RunId) -> PathBuf {
        self.path.join(Checkpoint::file_name(run))
    }

    /// `<run>.world`.
    pub fn world_path(&self, run: &RunId) -> PathBuf {
        self.path.join(format!("{run}{WORLD_SUFFIX}"))
    }

    /// `.<run>.world.tmp`, where a new world is built.
    fn half_built_path(&self, run: &RunId) -> PathBuf {
        self.path.join(format!(".{run}{WORLD_SUFFIX}.tmp"))
    }

    /// The names in the directory, sorted (names that are not UTF-8 were
    /// not written by this command and are skipped).
    fn names(&self) -> Result<Vec<String>, Failure> {
        let entries = fs::read_dir(&self.path).map_err(|e| io_failure("list", &self.path, &e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_failure("list", &self.path, &e))?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Every run with a checkpoint entry here, by ID — whatever the entry
    /// is: a directory, FIFO or link named `<run>.json` is a run whose
    /// checkpoint cannot be read, never "no run".
    pub fn runs(&self) -> Result<Vec<RunId>, Failure> {
        let mut runs: Vec<RunId> = self
            .names()?
            .iter()
            .filter_map(|n| n.strip_suffix(".json"))
            .filter_map(|stem| RunId::parse(stem).ok())
            .collect();
        runs.sort();
        Ok(runs)
    }

    /// Whether `<run>.world` exists, whatever it is (a world that is not a
    /// directory is refused when opened, never taken for no world).
    pub fn has_world(&self, run: &RunId) -> Result<bool, Failure> {
        let path = self.world_path(run);
        match fs::symlink_metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_failure("look at", &path, &e)),
        }
    }

    /// Every run with a world entry here (`<run>.world`), by ID.
    pub fn worlds(&self) -> Result<Vec<RunId>, Failure> {
        let mut runs: Vec<RunId> = self
            .names()?
            .iter()
            .filter_map(|n| n.strip_suffix(WORLD_SUFFIX))
            .filter_map(|stem| RunId::parse(stem).ok())
            .collect();
        runs.sort();
        Ok(runs)
    }

    /// Read a run's metadata; `None` if it has no world.
    pub fn meta(&self, run: &RunId) -> Result<Option<Meta>, Failure> {
        let path = self.world_path(run).join(META);
        let Some(bytes) = files::read_regular("the run's metadata", &path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Failure::run(
                "corrupt_world",
                format!("corrupt run metadata {}: {e}", path.display()),
            )
        })
    }
}
