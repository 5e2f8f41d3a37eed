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

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent::Checkpoint;
use durable::{Dir, DiskDir, LockGuard, RunId};
use serde::{Deserialize, Serialize};

use crate::exit::{Exit, Failure};
use crate::files::{self, io_failure};
use crate::task::{self, Task};

/// The world directory's suffix.
const WORLD_SUFFIX: &str = ".world";
/// The run's metadata inside its world.
const META: &str = "run.json";
/// The copy of the task file inside the world.
const TASK_COPY: &str = "task.json";
/// The workspace directory inside the world.
pub const WORKSPACE: &str = "workspace";

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
}

/// The state directory, checked to be a usable directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    path: PathBuf,
    dir: Arc<DiskDir>,
}

/// A run's world, opened.
#[derive(Debug)]
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

/// What [`StateDir::collect`] found and removed.
#[derive(Debug, Default)]
pub struct Collected {
    /// Runs with a world and no checkpoint that no process holds: killed
    /// before their first save (or, if their world shows more, runs that
    /// lost their checkpoint). Left as they are.
    pub unsaved: Vec<RunId>,
    /// Half-built worlds (`.<run>.world.tmp`) a killed start left, removed.
    pub half_built: Vec<String>,
    /// Checkpoint temp files of runs no process holds, removed.
    pub temps: Vec<String>,
    /// Write probes (`.triage-probe-<pid>`) of starts killed while checking
    /// the directory, removed.
    pub probes: Vec<String>,
    /// Runs whose world exists without a checkpoint and whose lock another
    /// process holds: starting right now.
    pub starting: Vec<RunId>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The name of the state directory's own lock, taken while a command picks
/// or creates a run. Run IDs never start with `.`, so it is never a run's.
pub const STATE_LOCK: &str = ".triage.lock";

impl StateDir {
    /// Check `path` as the state directory without creating anything:
    /// `Ok(None)` if it does not exist (and could be created), `Ok(Some)`
    /// if it is a directory the command can write in, and bad input
    /// (naming what is wrong) otherwise.
    pub fn existing(path: &Path) -> Result<Option<StateDir>, Failure> {
        let bad = |reason: String| {
            Failure::usage(
                "bad_state",
                format!("bad --state {}: {reason}", path.display()),
            )
        };
        if path.as_os_str().is_empty() {
            return Err(bad("the path is empty".to_owned()));
        }
        match fs::metadata(path) {
            Ok(m) if !m.is_dir() => {
                let kind = fs::symlink_metadata(path)
                    .map_or("not a directory", |m| files::kind_of(m.file_type()));
                return Err(bad(format!("it exists and is {kind}, not a directory")));
            }
            Ok(_) => {
                // Exists: it must be one we may write in, or every save fails
                // later with a less helpful message.
                if let Err(e) = tempfile_probe(path) {
                    return Err(bad(format!("cannot write in it: {}", files::words(&e))));
                }
                let dir = DiskDir::new(path)
                    .map_err(|e| bad(format!("cannot open it: {}", files::words(&e))))?;
                return Ok(Some(StateDir {
                    path: path.to_path_buf(),
                    dir: Arc::new(dir),
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
            Err(e) => return Err(bad(files::words(&e))),
        }
        // Missing: the nearest ancestor that exists must be a directory.
        for ancestor in path.ancestors().skip(1) {
            let shown = if ancestor.as_os_str().is_empty() {
                Path::new(".")
            } else {
                ancestor
            };
            match fs::metadata(shown) {
                Ok(m) if m.is_dir() => return Ok(None),
                Ok(m) => {
                    let kind = fs::symlink_metadata(shown)
                        .map_or("not a directory", |l| files::kind_of(l.file_type()));
                    let kind = if kind == "a symbolic link" && m.is_file() {
                        "a regular file"
                    } else {
                        kind
                    };
                    return Err(bad(format!(
                        "{} is {kind}, not a directory, so nothing can be created under it",
                        shown.display()
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
                Err(e) => return Err(bad(format!("{}: {}", shown.display(), files::words(&e)))),
            }
        }
        Ok(None)
    }

    /// Use `path` as the state directory, creating it (0700) if missing.
    ///
    /// A path that exists and is not a directory, or that cannot be created
    /// or written, is bad input: nothing is created or changed.
    pub fn open(path: &Path) -> Result<StateDir, Failure> {
        if let Some(sd) = StateDir::existing(path)? {
            return Ok(sd);
        }
        let dir = DiskDir::new(path).map_err(|e| {
            Failure::usage(
                "bad_state",
                format!(
                    "bad --state {}: cannot create it: {}",
                    path.display(),
                    files::words(&e)
                ),
            )
        })?;
        files::set_dir_mode(path).map_err(|e| io_failure("set the mode of", path, &e))?;
        Ok(StateDir {
            path: path.to_path_buf(),
            dir: Arc::new(dir),
        })
    }

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

    /// Take the state directory's lock, waiting for another command that
    /// is picking or creating a run (which takes milliseconds) to finish.
    pub fn lock(&self) -> Result<LockGuard, Failure> {
        let path = self.dir.path_of(STATE_LOCK);
        let mut waited = Duration::ZERO;
        let step = Duration::from_millis(5);
        loop {
            match self.dir.lock(STATE_LOCK) {
                Ok(guard) => return Ok(guard),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && waited < STATE_LOCK_WAIT => {
                    std::thread::sleep(step);
                    waited += step;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(Failure::new(
                        Exit::Locked,
                        "state_locked",
                        format!(
                            "the state directory is locked by another process: {} (waited {} s)",
                            path.display(),
                            STATE_LOCK_WAIT.as_secs()
                        ),
                    )
                    .hint("another triage is picking or creating a run there and does not finish; stop it, then rerun"))
                }
                Err(e) => return Err(io_failure("lock", &path, &e)),
            }
        }
    }

    /// Clean up after crashes; call under [`StateDir::lock`]. Removes the
    /// half-built worlds of killed starts (built in a hidden directory and
    /// never renamed into place, so no run ever used them), the lock files
    /// of runs with neither a world nor a checkpoint, the checkpoint temp
    /// files of runs no process holds, and the write probes of killed
    /// starts: none of them holds an effect. Never removes a world: those
    /// without a checkpoint are listed in [`Collected::unsaved`] (or
    /// [`Collected::starting`], if another process holds their lock) for
    /// [`StateDir::select`] to adopt or refuse. A run whose lock another
    /// process holds is left alone.
    pub fn collect(&self) -> Result<Collected, Failure> {
        let mut c = Collected::default();
        let names = self.names()?;
        for name in &names {
            // A probe of a start killed between creating and removing it; a
            // live start's probe removed here still showed it could write.
            let probe = name
                .strip_prefix(PROBE_PREFIX)
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
            let path = self.path.join(name);
            if probe && fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                match fs::remove_file(&path) {
                    Ok(()) => c.probes.push(name.clone()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_failure("remove the leftover probe", &path, &e)),
                }
            }
        }
        for name in &names {
            // `.<run>.world.tmp`: only a start under the state lock builds
            // there, and we hold that lock.
            let Some(id) = name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".tmp"))
                .and_then(|n| n.strip_suffix(WORLD_SUFFIX))
            else {
                continue;
            };
            if let Ok(run) = RunId::parse(id) {
                let path = self.half_built_path(&run);
                fs::remove_dir_all(&path)
                    .map_err(|e| io_failure("remove the half-built world", &path, &e))?;
                c.half_built.push(name.clone());
            }
        }
        // Every run named here: by its checkpoint, its world, its lock (a
        // start killed while building the world), or only a checkpoint
        // temp file (a run killed in its first save).
        let mut ids: Vec<RunId> = names
            .iter()
            .filter_map(|n| {
                n.strip_suffix(".json")
                    .or_else(|| n.strip_suffix(WORLD_SUFFIX))
                    .or_else(|| n.strip_suffix(".lock"))
                    .or_else(|| {
                        files::is_write_temp(n)
                            .then(|| n[1..].rsplit_once('-').map(|(t, _)| t))
                            .flatten()
                            .and_then(|t| t.strip_suffix(".json"))
                    })
            })
            .filter_map(|stem| RunId::parse(stem).ok())
            .collect();
        ids.sort();
        ids.dedup();
        for run in ids {
            let lock_name = Checkpoint::lock_name(&run);
            let guard = match self.dir.lock(&lock_name) {
                Ok(g) => g,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let world = format!("{run}{WORLD_SUFFIX}");
                    if !names.contains(&Checkpoint::file_name(&run)) && names.contains(&world) {
                        c.starting.push(run);
                    }
                    continue;
                }
                Err(e) => return Err(io_failure("lock", &self.dir.path_of(&lock_name), &e)),
            };
            let checkpoint = Checkpoint::file_name(&run);
            let temps = durable::remove_leftover_temps(self.dir.as_ref(), &checkpoint)
                .map_err(|e| io_failure("remove temp files of", &self.checkpoint_path(&run), &e))?;
            c.temps.extend(temps);
            if !names.contains(&checkpoint) {
                if self.has_world(&run)? {
                    // Killed before its first save (or its checkpoint is
                    // lost): the world is the run, kept with its lock file.
                    c.unsaved.push(run.clone());
                } else {
                    // Neither world nor checkpoint: a start killed while
                    // building, or a save's temp file alone. The lock file
                    // goes; we hold it, so nobody else is in it.
                    let lock_path = self.dir.path_of(&lock_name);
                    match fs::remove_file(&lock_path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io_failure("remove", &lock_path, &e)),
                    }
                }
            }
            drop(guard);
        }
        if !(c.half_built.is_empty() && c.temps.is_empty() && c.probes.is_empty()) {
            files::sync_dir(&self.path)?;
        }
        Ok(c)
    }

    /// Build the world of a new run of `task`: its metadata, a copy of the
    /// task, the seeded workspace and tracker. Built in a hidden temporary
    /// directory `.<run>.world.tmp`, every file and directory synced, then
    /// renamed into place and the state directory synced, so it appears
    /// whole or not at all; a half-built one a kill left is removed by the
    /// next start ([`StateDir::collect`]). Refuses to touch anything that
    /// already exists.
    pub fn create_world(&self, run: &RunId, task: &Task) -> Result<World, Failure> {
        let world = self.world_path(run);
        if fs::symlink_metadata(&world).is_ok()
            || fs::symlink_metadata(self.checkpoint_path(run)).is_ok()
        {
            return Err(Failure::run(
                "run_exists",
                format!("run {run} already exists in {}", self.path.display()),
            ));
        }
        let tmp = self.half_built_path(run);
        let built = (|| {
            // 0700 like the state directory: the world holds what the run
            // read and wrote.
            files::create_dir(&tmp)?;
            let meta = Meta {
                task: task.name.clone(),
                source: task.source.display().to_string(),
                started: now_secs(),
            };
            let mut meta_json = serde_json::to_vec_pretty(&meta)
                .map_err(|e| Failure::run("io", format!("cannot write the run's metadata: {e}")))?;
            meta_json.push(b'\n');
            files::write_new(&tmp.join(META), &meta_json)?;
            files::write_new(&tmp.join(TASK_COPY), task.text.as_bytes())?;
            let ws = tmp.join(WORKSPACE);
            files::create_dir(&ws)?;
            let mut dirs = vec![ws.clone()];
            for (rel, content) in &task.workspace {
                let file = ws.join(rel);
                if let Some(parent) = file.parent() {
                    // Nested directories, each 0700 and synced.
                    let mut missing: Vec<&Path> = parent
                        .ancestors()
                        .take_while(|p| *p != ws && !p.exists())
                        .collect();
                    missing.reverse();
                    for dir in missing {
                        files::create_dir(dir)?;
                        dirs.push(dir.to_path_buf());
                    }
                }
                files::write_new(&file, content.as_bytes())?;
            }
            let dir = DiskDir::new(&tmp).map_err(|e| io_failure("open", &tmp, &e))?;
            let tracker = tracker::Tracker::open_dir(Arc::new(dir), tracker::Mode::Keyed)?;
            for seed in &task.tracker {
                tracker.file_issue(&seed.title, &seed.body, None)?;
            }
            for dir in dirs.iter().rev() {
                files::sync_dir(dir)?;
            }
            files::sync_dir(&tmp)?;
            fs::rename(&tmp, &world).map_err(|e| io_failure("rename", &tmp, &e))?;
            files::sync_dir(&self.path)?;
            // The world is in place and the run has no checkpoint yet: a
            // kill here leaves a run the next start adopts.
            crashpoint::point!("world built");
            Ok(World {
                path: world.clone(),
                meta,
                task: task.clone(),
            })
        })();
        if built.is_err() {
            let _best_effort = fs::remove_dir_all(&tmp);
        }
        built
    }

    /// Open an existing run's world: its metadata and the task it started
    /// with. A world is whole or refused: a missing world, metadata, task
    /// copy, workspace or (for a task that seeds issues) tracker is a typed
    /// error naming what is missing, never an empty replacement.
    pub fn open_world(&self, run: &RunId) -> Result<World, Failure> {
        let path = self.world_path(run);
        let incomplete = |what: &str, file: &Path, why: &str| {
            Failure::run(
                "world_incomplete",
                format!(
                    "the world of run {run} is not whole: {what} {} {why}",
                    file.display()
                ),
            )
            .hint("nothing was replaced; restore it, or move the run away and start a new one")
        };
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                return Err(incomplete(
                    "the world",
                    &path,
                    &format!("is {}, not a directory", files::kind_of(m.file_type())),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Failure::run(
                    "no_world",
                    format!("run {run} has no world: {} is missing", path.display()),
                )
                .hint("the run's tracker and workspace are gone; it cannot be resumed"))
            }
            Err(e) => return Err(io_failure("look at", &path, &e)),
        }
        let Some(meta) = self.meta(run)? else {
            return Err(incomplete(
                "the run's metadata",
                &path.join(META),
                "is missing",
            ));
        };
        let copy = path.join(TASK_COPY);
        let Some(bytes) = files::read_regular("the run's copy of its task", &copy)? else {
            return Err(incomplete(
                "the run's copy of its task",
                &copy,
                "is missing",
            ));
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            Failure::run(
                "corrupt_world",
                format!("the run's copy of its task {} is not UTF-8", copy.display()),
            )
        })?;
        let task = task::Task::parse(&text, &copy, &meta.task).map_err(|reason| {
            Failure::run(
                "corrupt_world",
                format!(
                    "the run's copy of its task {} is not valid: {reason}",
                    copy.display()
                ),
            )
        })?;
        let ws = path.join(WORKSPACE);
        match fs::symlink_metadata(&ws) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                return Err(incomplete(
                    "the workspace",
                    &ws,
                    &format!("is {}, not a directory", files::kind_of(m.file_type())),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(incomplete("the workspace", &ws, "is missing"))
            }
            Err(e) => return Err(io_failure("look at", &ws, &e)),
        }
        let tracker_file = path.join(TRACKER_FILE);
        if !files::regular("the run's tracker", &tracker_file)? && !task.tracker.is_empty() {
            return Err(incomplete(
                "the run's tracker",
                &tracker_file,
                "is missing (the run started with seeded issues)",
            ));
        }
        Ok(World { path, meta, task })
    }
}

/// How long a start waits for the state directory's lock.
const STATE_LOCK_WAIT: Duration = Duration::from_secs(60);

/// The tracker's file inside a world.
const TRACKER_FILE: &str = "tracker.json";

/// The name of the file [`tempfile_probe`] creates, before the pid.
const PROBE_PREFIX: &str = ".triage-probe-";

/// Check that a new file can be created in `dir`, without leaving one. A
/// kill between the two leaves `.triage-probe-<pid>`, which the next start's
/// clean-up removes ([`StateDir::collect`]); so a probe removed under us was
/// still created, and one already named by our pid is a killed process's
/// (pids are reused), removed and made again.
fn tempfile_probe(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!("{PROBE_PREFIX}{}", std::process::id()));
    let create = || File::options().write(true).create_new(true).open(&probe);
    match create() {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&probe)?;
            create()?;
        }
        Err(e) => return Err(e),
    }
    match fs::remove_file(&probe) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_state_paths_are_refused_without_creating_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = StateDir::open(&file).unwrap_err();
        assert_eq!(e.kind, "bad_state");
        assert!(e.message.contains("not a directory"), "{}", e.message);
        let e = StateDir::open(&file.join("sub")).unwrap_err();
        assert_eq!(e.kind, "bad_state");
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
        assert!(StateDir::open(Path::new("")).is_err());
    }

    #[test]
    fn a_probe_left_under_our_pid_is_stale_and_none_is_left_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let stale = tmp
            .path()
            .join(format!("{PROBE_PREFIX}{}", std::process::id()));
        fs::write(&stale, "").unwrap();
        tempfile_probe(tmp.path()).unwrap();
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
