//! Power cuts of a process subject: its world directory is the program's
//! machine, which loses at a crash what the program never synced; a
//! service's directory is another machine and keeps everything.
//!
//! With [`Process::crash_states`], every life runs under the tracer, which
//! records what the program asked of the world's disk (see `disk`). The
//! boot after a crash in a power-cut state rebuilds the world directory,
//! in a fresh directory, as that state leaves it: a named state of
//! [`DiskState`] (`lose`, `entries`, `torn`, `contents`, `in-order`), or
//! in [`ENUMERATED`] one disk of every disk the persistence model allows,
//! each its own scenario (`enumerated: write a#2 (disk 3)`). Depth 2
//! applies: the restart's machine can lose power too.

use std::sync::Arc;

use durable::testing::{DiskState, PersistenceModel, ENUMERATED};

use super::builder::Process;
use super::disk::{DiskRecord, Power};
use super::error::ProcessError;
use super::trace::IoPoints;
use super::world::ProcessWorld;
use crate::error::LifeError;
use crate::power::{Boot, CrashState, PowerCuts};

/// Every state a process subject can run in: the named states, then
/// [`ENUMERATED`].
pub fn all_crash_states() -> Vec<CrashState> {
    DiskState::ALL
        .into_iter()
        .map(CrashState::from)
        .chain([ENUMERATED])
        .collect()
}

impl Process {
    /// Sweep these crash states (each a table row; names as
    /// [`DiskState::slug`], or `enumerated`): the program's lives run under
    /// the tracer, which records the calls it makes on its world with
    /// their data and barriers, and the boot after a crash rebuilds the
    /// world as a power cut in the scenario's state leaves it. An unknown
    /// name is refused with the known ones.
    pub fn crash_states<I, S>(mut self, states: I) -> Result<Process, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let known = all_crash_states();
        let mut picked = Vec::new();
        for s in states {
            let s = s.as_ref();
            let Some(state) = known.iter().find(|k| k.name() == s) else {
                let names: Vec<&str> = known.iter().map(CrashState::name).collect();
                return Err(ProcessError::CrashStates {
                    subject: self.name.clone(),
                    reason: format!(
                        "no crash state is called {s:?}; known: {}",
                        names.join(", ")
                    ),
                });
            };
            if !picked.contains(state) {
                picked.push(state.clone());
            }
        }
        if picked.is_empty() {
            return Err(ProcessError::CrashStates {
                subject: self.name.clone(),
                reason: "no crash state named: e.g. lose,entries,torn".into(),
            });
        }
        self.power = Some(Power {
            states: picked,
            model: PersistenceModel::default(),
            record_only: Arc::new(IoPoints::none()),
        });
        Ok(self)
    }

    /// The tracer's selection for a life: the I/O points, or none when
    /// only the disk record needs the tracer; `None` for an untraced life.
    pub(super) fn traced(&self) -> Option<Arc<IoPoints>> {
        match (&self.io_points, &self.power) {
            (Some(io), _) => Some(Arc::clone(io)),
            (None, Some(p)) => Some(Arc::clone(&p.record_only)),
            (None, None) => None,
        }
    }
}

/// The record's calls that ran go in, its warnings to the timeline.
fn settle(world: &mut ProcessWorld) {
    let Some(rec) = &world.disk else { return };
    let mut r = rec.lock().unwrap_or_else(|e| e.into_inner());
    r.commit();
    let life = world.lives;
    for w in std::mem::take(&mut r.warnings) {
        world.ends.push(format!("life {life}: warning: {w}"));
    }
}

impl PowerCuts<ProcessWorld> for Process {
    fn crash_states(&self) -> Vec<CrashState> {
        all_crash_states()
    }

    fn default_crash_states(&self) -> Vec<CrashState> {
        self.power
            .as_ref()
            .map_or_else(|| vec![CrashState::PROCESS], |p| p.states.clone())
    }

    fn enumerates(&self, state: &CrashState) -> bool {
        *state == ENUMERATED
    }

    fn crash_disks(&self, world: &ProcessWorld) -> Option<u32> {
        world.crash_disks
    }

    fn boot(&self, world: &mut ProcessWorld, boot: &Boot) -> Result<(), LifeError> {
        settle(world);
        world.crash_disks = None;
        let (Some(rec), Some(power)) = (world.disk.clone(), &self.power) else {
            return Ok(());
        };
        if !boot.after_crash() || boot.state().is_process() {
            return Ok(());
        }
        let mut r = rec.lock().unwrap_or_else(|e| e.into_inner());
        let unsynced = r.unsynced();
        let disk = if *boot.state() == ENUMERATED {
            let want = boot.disk().unwrap_or(0) as usize;
            let (disk, cut) = r.cut_enumerated(&power.model, want);
            world.crash_disks = Some(u32::try_from(cut.states).unwrap_or(u32::MAX));
            disk
        } else {
            let state = DiskState::try_from(boot.state()).map_err(|e| e.to_string())?;
            r.cut(state)
        };
        let dir = world.dir();
        r.rebuild(&disk, &dir)
            .map_err(|e| format!("rebuilding the world after the power cut: {e}"))?;
        *r = DiskRecord::scan(&dir).map_err(|e| format!("reading the rebuilt world: {e}"))?;
        world.ends.push(format!(
            "power cut ({}): {unsynced} unsynced operation{} at the crash; the world rebuilt as the cut leaves it",
            boot.state(),
            if unsynced == 1 { "" } else { "s" }
        ));
        Ok(())
    }

    fn shutdown(&self, world: &mut ProcessWorld, _boot: &Boot) {
        settle(world);
    }
}
