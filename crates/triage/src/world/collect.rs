//! The clean-up of crash leftovers on every start, under the state
//! directory's lock: half-built worlds, stray run locks, checkpoint temp
//! files and write probes are removed; worlds without a checkpoint are
//! listed, never removed ([`Collected`]).

use std::fs;
use std::io;

use agent::state::Checkpoint;
use durable::{Dir, RunId};

use super::validate::PROBE_PREFIX;
use super::{StateDir, WORLD_SUFFIX};
use crate::exit::Failure;
use crate::files::{self, io_failure};

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

impl StateDir {
    /// Remove the half-built worlds (`.<run>.world.tmp`) among `names`
    /// (the directory's entries); call under [`StateDir::lock`]: only a
    /// start (or an enqueue) under that lock builds there, so one found
    /// while holding it was left by a start that was killed. Returns the
    /// names removed.
    pub fn remove_half_built(&self, names: &[String]) -> Result<Vec<String>, Failure> {
        let mut removed = Vec::new();
        for name in names {
            let Some(id) = name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".tmp"))
                .and_then(|n| n.strip_suffix(WORLD_SUFFIX))
            else {
                continue;
            };
            if let Ok(run) = RunId::parse(id) {
                let path = self.half_built_path(&run);
                match fs::remove_dir_all(&path) {
                    Ok(()) => removed.push(name.clone()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_failure("remove the half-built world", &path, &e)),
                }
            }
        }
        Ok(removed)
    }

    /// [`StateDir::remove_half_built`] over the whole directory, for a
    /// database store's worlds, whose runs need none of the rest of
    /// [`StateDir::collect`] (their checkpoints and locks are the store's).
    pub fn collect_half_built(&self) -> Result<Collected, Failure> {
        let names = self.names()?;
        Ok(Collected {
            half_built: self.remove_half_built(&names)?,
            ..Collected::default()
        })
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
        c.half_built = self.remove_half_built(&names)?;
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
            let temps = durable::write::remove_leftover_temps(self.dir.as_ref(), &checkpoint)
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
}
