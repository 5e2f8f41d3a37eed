//! Opening an existing run's world, whole or refused: a missing or broken
//! part is a typed error naming it, never an empty replacement.

use std::fs;
use std::io;
use std::path::Path;

use durable::RunId;

use super::{StateDir, World, META, TASK_COPY, TRACKER_FILE, WORKSPACE};
use crate::exit::Failure;
use crate::files::{self, io_failure};
use crate::task;

impl StateDir {
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
