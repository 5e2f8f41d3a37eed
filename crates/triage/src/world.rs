//! The state directory: every run's checkpoint, lock and world.
//!
//! ```text
//! DIR/
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
//! Names never collide: run IDs never start with `.` and never end in
//! `.world` + `.json`, so `<run>.world` of one run is never `<other>.json`.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent::{Checkpoint, Phase, State};
use durable::{DiskDir, RunId};
use serde::{Deserialize, Serialize};

use crate::exit::Failure;
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
        DiskDir::new(&self.path).map(Arc::new).map_err(|e| {
            Failure::run(
                "io",
                format!("cannot open the world {}: {e}", self.path.display()),
            )
        })
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

/// One run found in the state directory.
#[derive(Debug)]
pub struct Found {
    /// Its ID.
    pub run: RunId,
    /// Its metadata, if its world is readable.
    pub meta: Option<Meta>,
    /// Its checkpoint, read without the lock.
    pub state: Result<durable::Saved<State>, durable::Error>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn io_failure(what: &str, path: &Path, e: &io::Error) -> Failure {
    Failure::run("io", format!("cannot {what} {}: {e}", path.display()))
}

impl StateDir {
    /// Use `path` as the state directory, creating it (0700) if missing.
    ///
    /// A path that exists and is not a directory, or that cannot be created
    /// or written, is bad input: nothing is created or changed.
    pub fn open(path: &Path) -> Result<StateDir, Failure> {
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
            Ok(m) if !m.is_dir() => return Err(bad("it exists and is not a directory".to_owned())),
            Ok(_) => {
                // Exists: it must be one we may write in, or every save fails
                // later with a less helpful message.
                let probe = tempfile_probe(path);
                if let Err(e) = probe {
                    return Err(bad(format!("cannot write in it: {e}")));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(bad(e.to_string())),
        }
        let dir = DiskDir::new(path).map_err(|e| bad(format!("cannot create it: {e}")))?;
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

    /// Every run with a checkpoint here, by ID.
    pub fn runs(&self) -> Result<Vec<RunId>, Failure> {
        let entries = fs::read_dir(&self.path).map_err(|e| io_failure("list", &self.path, &e))?;
        let mut runs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_failure("list", &self.path, &e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            if let Ok(run) = RunId::parse(stem) {
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    runs.push(run);
                }
            }
        }
        runs.sort();
        Ok(runs)
    }

    /// Read a run's metadata; `None` if it has no world.
    pub fn meta(&self, run: &RunId) -> Result<Option<Meta>, Failure> {
        let path = self.world_path(run).join(META);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_failure("read", &path, &e)),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Failure::run(
                "corrupt_world",
                format!("corrupt run metadata {}: {e}", path.display()),
            )
        })
    }

    /// Every run here, with its metadata and checkpoint (read without
    /// locks: a save replaces the file atomically, so this sees a whole
    /// state).
    pub fn found(&self) -> Result<Vec<Found>, Failure> {
        let mut found = Vec::new();
        for run in self.runs()? {
            let meta = self.meta(&run).ok().flatten();
            let state = Checkpoint::load(self.dir.as_ref(), &run)
                .and_then(|s| s.ok_or_else(|| missing_checkpoint(self, &run)));
            found.push(Found { run, meta, state });
        }
        Ok(found)
    }

    /// Pick the run to work on.
    ///
    /// * `--run ID`: that run, which must exist here and belong to `task` if
    ///   one is given; an ID that could leave the directory is refused.
    /// * otherwise the task's one unfinished run (phase other than done), a
    ///   new run if it has none, and an error listing them if it has several.
    ///   A checkpoint of the task that cannot be read is an error: it may be
    ///   the unfinished run, and it is never silently replaced.
    pub fn select(&self, task: Option<&str>, run: Option<&str>) -> Result<Selection, Failure> {
        if let Some(id) = run {
            let run = RunId::parse(id).map_err(Failure::from)?;
            if !self.checkpoint_path(&run).is_file() {
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
        let mut unfinished = Vec::new();
        for f in self.found()? {
            // A run whose metadata is missing or unreadable still counts as
            // the task's if its ID says so: better a clear error about its
            // world than a silent fresh start beside it.
            let ours = match &f.meta {
                Some(meta) => meta.task == task,
                None => f
                    .run
                    .as_str()
                    .strip_prefix(task)
                    .is_some_and(|rest| rest.starts_with('-')),
            };
            if !ours {
                continue;
            }
            match f.state {
                Ok(state) if state.phase == Phase::Done => {}
                Ok(state) => unfinished.push((f.run, state.phase)),
                Err(e) => {
                    return Err(Failure::from(e).hint(format!(
                        "it belongs to task {task:?} and may be its unfinished run; \
                         the file was left as it is: inspect or move it away, \
                         or name another run with --run"
                    )))
                }
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
    /// directory and renamed into place, so it appears whole or not at all.
    /// Refuses to touch anything that already exists.
    pub fn create_world(&self, run: &RunId, task: &Task) -> Result<World, Failure> {
        let world = self.world_path(run);
        if world.exists() || self.checkpoint_path(run).exists() {
            return Err(Failure::run(
                "run_exists",
                format!("run {run} already exists in {}", self.path.display()),
            ));
        }
        let tmp = self.path.join(format!(".{run}{WORLD_SUFFIX}.tmp"));
        let built = (|| {
            // 0700 like the state directory: the world holds what the run
            // read and wrote.
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&tmp)
                .map_err(|e| io_failure("create", &tmp, &e))?;
            let meta = Meta {
                task: task.name.clone(),
                source: task.source.display().to_string(),
                started: now_secs(),
            };
            let mut meta_json = serde_json::to_vec_pretty(&meta).expect("metadata serialises");
            meta_json.push(b'\n');
            write_synced(&tmp.join(META), &meta_json)?;
            write_synced(&tmp.join(TASK_COPY), task.text.as_bytes())?;
            let ws = tmp.join(WORKSPACE);
            fs::create_dir(&ws).map_err(|e| io_failure("create", &ws, &e))?;
            for (rel, content) in &task.workspace {
                let file = ws.join(rel);
                if let Some(parent) = file.parent() {
                    fs::create_dir_all(parent).map_err(|e| io_failure("create", parent, &e))?;
                }
                write_synced(&file, content.as_bytes())?;
            }
            let dir = DiskDir::new(&tmp).map_err(|e| io_failure("open", &tmp, &e))?;
            let tracker = tracker::Tracker::open_dir(Arc::new(dir), tracker::Mode::Keyed)?;
            for seed in &task.tracker {
                tracker.file_issue(&seed.title, &seed.body, None)?;
            }
            sync_dir(&ws)?;
            sync_dir(&tmp)?;
            fs::rename(&tmp, &world).map_err(|e| io_failure("rename", &tmp, &e))?;
            sync_dir(&self.path)?;
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
    /// with.
    pub fn open_world(&self, run: &RunId) -> Result<World, Failure> {
        let path = self.world_path(run);
        let Some(meta) = self.meta(run)? else {
            return Err(Failure::run(
                "no_world",
                format!(
                    "run {run} has no world: {} is missing",
                    path.join(META).display()
                ),
            )
            .hint("the run's tracker and workspace are gone; it cannot be resumed"));
        };
        let copy = path.join(TASK_COPY);
        let text = fs::read_to_string(&copy).map_err(|e| io_failure("read", &copy, &e))?;
        let task = task::Task::parse(&text, &copy, &meta.task).map_err(|reason| {
            Failure::run(
                "corrupt_world",
                format!(
                    "the run's copy of its task {} is not valid: {reason}",
                    copy.display()
                ),
            )
        })?;
        Ok(World { path, meta, task })
    }
}

fn missing_checkpoint(dir: &StateDir, run: &RunId) -> durable::Error {
    durable::Error::Io {
        path: dir.checkpoint_path(run),
        op: "read",
        source: io::Error::new(io::ErrorKind::NotFound, "the checkpoint vanished"),
    }
}

/// Check that a new file can be created in `dir`, without leaving one.
fn tempfile_probe(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(".triage-probe-{}", std::process::id()));
    File::options().write(true).create_new(true).open(&probe)?;
    fs::remove_file(&probe)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut f = File::create(path).map_err(|e| io_failure("create", path, &e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| io_failure("write", path, &e))
}

fn sync_dir(path: &Path) -> Result<(), Failure> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_failure("sync", path, &e))
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
        assert_eq!(sd.select(Some(&t.name), None).unwrap(), Selection::New);

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
        assert_eq!(sd.select(Some(&t.name), None).unwrap(), Selection::New);
        let opened = Checkpoint::open(sd.dir(), &run, durable::Options::default()).unwrap();
        drop(opened);
        assert_eq!(
            sd.select(Some(&t.name), None).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(sd.select(Some("other"), None).unwrap(), Selection::New);
        assert_eq!(
            sd.select(None, Some(run.as_str())).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(
            sd.select(Some("other"), Some(run.as_str()))
                .unwrap_err()
                .kind,
            "wrong_task"
        );
        assert_eq!(
            sd.select(None, Some("../x")).unwrap_err().kind,
            "invalid_run_id"
        );
        assert_eq!(
            sd.select(None, Some("nope")).unwrap_err().kind,
            "no_such_run"
        );

        let reopened = sd.open_world(&run).unwrap();
        assert_eq!(reopened.meta.task, t.name);
        assert_eq!(reopened.task.text, t.text);

        // A second unfinished run makes the choice ambiguous.
        let run2 = RunId::generate(&t.name, SystemTime::now());
        sd.create_world(&run2, &t).unwrap();
        drop(Checkpoint::open(sd.dir(), &run2, durable::Options::default()).unwrap());
        let e = sd.select(Some(&t.name), None).unwrap_err();
        assert_eq!(e.kind, "several_runs");
        assert!(e.hint.unwrap().contains(run2.as_str()));

        // A corrupt checkpoint of the task stops the choice.
        fs::write(sd.checkpoint_path(&run2), "{").unwrap();
        assert_eq!(
            sd.select(Some(&t.name), None).unwrap_err().kind,
            "corrupt_checkpoint"
        );
        assert_eq!(fs::read_to_string(sd.checkpoint_path(&run2)).unwrap(), "{");
    }
}
