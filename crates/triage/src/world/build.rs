//! Building a new run's world: made whole in a hidden temporary directory,
//! synced, then renamed into place before the run's checkpoint exists.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use durable::{DiskDir, RunId};

use super::{Meta, StateDir, World, META, TASK_COPY, WORKSPACE};
use crate::exit::Failure;
use crate::files::{self, io_failure};
use crate::task::Task;

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl StateDir {
    /// Build the world of a new run of `task`: its metadata, a copy of the
    /// task, the seeded workspace and tracker. Built in a hidden temporary
    /// directory `.<run>.world.tmp`, every file and directory synced, then
    /// renamed into place and the state directory synced, so it appears
    /// whole or not at all; a half-built one a kill left is removed by the
    /// next start ([`StateDir::collect`]). Refuses to touch anything that
    /// already exists.
    pub fn create_world(&self, run: &RunId, task: &Task) -> Result<World, Failure> {
        self.create_world_for(run, task, None)
    }

    /// [`StateDir::create_world`], recording in the run's metadata the
    /// tracker service its tools send to (a run on a database store).
    pub fn create_world_for(
        &self,
        run: &RunId,
        task: &Task,
        tracker: Option<&str>,
    ) -> Result<World, Failure> {
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
                tracker: tracker.map(str::to_owned),
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
}
