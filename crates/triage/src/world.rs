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
//! ([`StateDir::collect`]): half-built worlds (`.<run>.world.tmp`), worlds
//! of runs killed before their first checkpoint (no checkpoint means no
//! call was made, so the world holds only what the task seeded) with their
//! lock files, and checkpoint temp files of runs no process holds. The
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

use agent::{Checkpoint, Phase};
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

/// Which run the command works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// No unfinished run of the task: start a new one.
    New,
    /// Continue (or, if done, report) this run.
    Existing(RunId),
}

/// What [`StateDir::collect`] found and removed.
#[derive(Debug, Default)]
pub struct Collected {
    /// Worlds of runs that never saved a checkpoint and that no process
    /// holds, removed with their lock and temp files.
    pub worlds: Vec<RunId>,
    /// Half-built worlds (`.<run>.world.tmp`) a killed start left, removed.
    pub half_built: Vec<String>,
    /// Checkpoint temp files of runs no process holds, removed.
    pub temps: Vec<String>,
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
    /// half-built worlds of killed starts, the worlds of runs that never
    /// saved a checkpoint (a run saves its first checkpoint before it calls
    /// anything, so such a world holds only what the task seeded), and the
    /// checkpoint temp files of runs no process holds. A run whose lock
    /// another process holds is left alone.
    pub fn collect(&self) -> Result<Collected, Failure> {
        let mut c = Collected::default();
        let names = self.names()?;
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
                let world = self.world_path(&run);
                if fs::symlink_metadata(&world).is_ok_and(|m| m.is_dir()) {
                    fs::remove_dir_all(&world)
                        .map_err(|e| io_failure("remove the unstarted world", &world, &e))?;
                    c.worlds.push(run.clone());
                }
                // The lock file goes with the run; we hold it, so nobody
                // else is in it.
                let lock_path = self.dir.path_of(&lock_name);
                match fs::remove_file(&lock_path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_failure("remove", &lock_path, &e)),
                }
            }
            drop(guard);
        }
        if !(c.worlds.is_empty() && c.half_built.is_empty() && c.temps.is_empty()) {
            files::sync_dir(&self.path)?;
        }
        Ok(c)
    }

    /// Pick the run to work on (call under [`StateDir::lock`], after
    /// [`StateDir::collect`], whose `starting` runs count as unfinished).
    ///
    /// * `--run ID`: that run, which must exist here and belong to `task` if
    ///   one is given; an ID that could leave the directory is refused.
    /// * otherwise the task's one unfinished run (phase other than done), a
    ///   new run if it has none, and an error listing them if it has several.
    ///   A checkpoint of the task that cannot be read — corrupt, or an entry
    ///   that is not a regular file — is an error: it may be the unfinished
    ///   run, and it is never silently replaced.
    pub fn select(
        &self,
        task: Option<&str>,
        run: Option<&str>,
        starting: &[RunId],
    ) -> Result<Selection, Failure> {
        if let Some(id) = run {
            let run = RunId::parse(id).map_err(Failure::from)?;
            if !files::regular("the checkpoint", &self.checkpoint_path(&run))? {
                let hint = match self.runs()?.as_slice() {
                    [] => format!("{} holds no runs", self.path.display()),
                    runs => format!(
                        "runs here: {}",
                        runs.iter()
                            .map(RunId::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                return Err(Failure::usage(
                    "no_such_run",
                    format!("no run {run} in {}", self.path.display()),
                )
                .hint(hint));
            }
            if let Some(task) = task {
                if let Some(meta) = self.meta(&run)? {
                    if meta.task != task {
                        return Err(Failure::usage(
                            "wrong_task",
                            format!("run {run} runs task {:?}, not {task:?}", meta.task),
                        )
                        .hint("leave out --task, or pass the run's own task"));
                    }
                }
            }
            return Ok(Selection::Existing(run));
        }
        let Some(task) = task else {
            return Err(Failure::usage(
                "usage",
                "--task NAME or --run ID is required",
            ));
        };
        let belongs = |run: &RunId, meta: Option<&Meta>| match meta {
            Some(meta) => meta.task == task,
            // A run whose metadata is missing or unreadable still counts as
            // the task's if its ID says so: better a clear error about its
            // world than a silent fresh start beside it.
            None => run
                .as_str()
                .strip_prefix(task)
                .is_some_and(|rest| rest.starts_with('-')),
        };
        let mut unfinished: Vec<(RunId, String)> = Vec::new();
        let runs = self.runs()?;
        for run in starting {
            // A run whose first checkpoint appeared since the clean-up is
            // counted below, by its checkpoint.
            if !runs.contains(run) && belongs(run, self.meta(run).ok().flatten().as_ref()) {
                unfinished.push((run.clone(), "starting".to_owned()));
            }
        }
        for run in runs {
            let meta = self.meta(&run).ok().flatten();
            if !belongs(&run, meta.as_ref()) {
                continue;
            }
            let unreadable = |f: Failure| {
                f.hint(format!(
                    "it belongs to task {task:?} and may be its unfinished run; \
                     the file was left as it is: inspect or move it away, \
                     or name another run with --run"
                ))
            };
            let path = self.checkpoint_path(&run);
            if !files::regular("the checkpoint", &path).map_err(unreadable)? {
                continue; // removed since the listing
            }
            match Checkpoint::load(self.dir.as_ref(), &run) {
                Ok(Some(state)) if state.phase == Phase::Done => {}
                Ok(Some(state)) => unfinished.push((run, state.phase.to_string())),
                Ok(None) => {}
                Err(e) => return Err(unreadable(Failure::from(e))),
            }
        }
        match unfinished.len() {
            0 => Ok(Selection::New),
            1 => Ok(Selection::Existing(unfinished.remove(0).0)),
            n => Err(Failure::usage(
                "several_runs",
                format!(
                    "task {task:?} has {n} unfinished runs in {}",
                    self.path.display()
                ),
            )
            .hint(format!(
                "pick one with --run: {}",
                unfinished
                    .iter()
                    .map(|(r, p)| format!("{r} ({p})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
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

/// Check that a new file can be created in `dir`, without leaving one.
fn tempfile_probe(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(".triage-probe-{}", std::process::id()));
    File::options().write(true).create_new(true).open(&probe)?;
    fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Catalog;

    fn task() -> Task {
        Catalog::BuiltIn.all().unwrap().remove(0)
    }

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
    fn worlds_are_whole_and_selection_follows_the_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&tmp.path().join("state")).unwrap();
        let t = task();
        assert_eq!(sd.select(Some(&t.name), None, &[]).unwrap(), Selection::New);

        let run = RunId::generate(&t.name, SystemTime::now());
        let w = sd.create_world(&run, &t).unwrap();
        assert!(w.workspace().is_dir());
        for rel in t.workspace.keys() {
            assert!(w.workspace().join(rel).is_file(), "{rel}");
        }
        assert!(
            sd.create_world(&run, &t).is_err(),
            "never over an existing world"
        );
        let names: Vec<_> = fs::read_dir(sd.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp directory left: {names:?}");

        // A world without a checkpoint is not a run yet.
        assert_eq!(sd.select(Some(&t.name), None, &[]).unwrap(), Selection::New);
        let opened = Checkpoint::open(sd.dir(), &run, durable::Options::default()).unwrap();
        drop(opened);
        assert_eq!(
            sd.select(Some(&t.name), None, &[]).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(sd.select(Some("other"), None, &[]).unwrap(), Selection::New);
        assert_eq!(
            sd.select(None, Some(run.as_str()), &[]).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(
            sd.select(Some("other"), Some(run.as_str()), &[])
                .unwrap_err()
                .kind,
            "wrong_task"
        );
        assert_eq!(
            sd.select(None, Some("../x"), &[]).unwrap_err().kind,
            "invalid_run_id"
        );
        assert_eq!(
            sd.select(None, Some("nope"), &[]).unwrap_err().kind,
            "no_such_run"
        );

        let reopened = sd.open_world(&run).unwrap();
        assert_eq!(reopened.meta.task, t.name);
        assert_eq!(reopened.task.text, t.text);

        // A second unfinished run makes the choice ambiguous.
        let run2 = RunId::generate(&t.name, SystemTime::now());
        sd.create_world(&run2, &t).unwrap();
        drop(Checkpoint::open(sd.dir(), &run2, durable::Options::default()).unwrap());
        let e = sd.select(Some(&t.name), None, &[]).unwrap_err();
        assert_eq!(e.kind, "several_runs");
        assert!(e.hint.unwrap().contains(run2.as_str()));

        // A corrupt checkpoint of the task stops the choice.
        fs::write(sd.checkpoint_path(&run2), "{").unwrap();
        assert_eq!(
            sd.select(Some(&t.name), None, &[]).unwrap_err().kind,
            "corrupt_checkpoint"
        );
        assert_eq!(fs::read_to_string(sd.checkpoint_path(&run2)).unwrap(), "{");
    }
}
