//! A world: everything a crash does not erase — the checkpoint directory,
//! the tracker's records, and the observer's tallies — and what a process
//! does to it when it boots, saves, opens its checkpoint and shuts down.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use agent::state::{Checkpoint, State};
use durable::testing::{Fault, FaultDir, MemDir, PowerDir};
use durable::{Dir, RunId};
use tracker::{LogLayout, Mode, Tracker};

use crate::labels::Labels;
use crate::modes::Modes;

mod sharing;

/// The run ID of the scripted job in every world's checkpoint directory.
pub(crate) const RUN: &str = "triage-job";

/// Where a world keeps its checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// An in-memory directory (fast sweeps).
    Memory,
    /// A real temporary directory per world (syncs off, as in the book
    /// chapter).
    Disk,
}

/// What a crash does not erase: the checkpoint directory, the tracker's
/// records, and the observer's notes (tallies of model calls and questions,
/// what was saved, the crash labels).
#[derive(Debug)]
pub struct World {
    pub(crate) dir: Arc<dyn Dir>,
    _tmp: Option<tempfile::TempDir>,
    pub(crate) tracker: Tracker,
    /// The checkpoint directory when crashes are power cuts.
    power: Option<PowerDir>,
    /// The checkpoint directory's fault injector, if armed.
    faults: Option<FaultDir<Arc<dyn Dir>>>,
    /// A crashing tracker's directory and layout, to restart it from.
    tracker_files: Option<(MemDir, LogLayout)>,
    /// The checkpoint directory when it is a plain in-memory one (the only
    /// world that can be copied for shared lives).
    mem: Option<MemDir>,
    /// What the observer notes, shared with the world's capture (a sweep
    /// copies it at every point while a life runs); each use locks it for
    /// one statement, never across a point.
    notes: Arc<Mutex<Notes>>,
}

/// What the observer notes about a world's lives.
#[derive(Clone, Debug, Default)]
pub(crate) struct Notes {
    pub(crate) model_calls: u64,
    pub(crate) asks: u64,
    /// How many disks the last boot's power cut could leave, in the
    /// enumerated state (`None`: it cut nothing).
    last_cut: Option<u32>,
    /// Power cuts whose disks were a sample (over the model's bound).
    sampled_cuts: u64,
    /// A life is running: set when it starts, cleared when it returns. A life
    /// that finds it set knows the one before it crashed.
    alive: bool,
    /// Why the last life stopped with an error of the loop's own.
    pub(crate) stopped: Option<String>,
    /// The last state whose save returned (restart count left out).
    saved: Option<Arc<State>>,
    /// The state being saved, until its save returns.
    saving: Option<Arc<State>>,
    /// The fingerprints of `saved` and `saving` (`None`: not taken since
    /// they last changed; see [`Notes::state_keys`]).
    saved_key: Option<u128>,
    saving_key: Option<u128>,
    /// Bumped before and after each request the loop applies to the
    /// tracker (the only way a plain-memory world's tracker changes; its
    /// one point is after the change), and the tracker's fingerprint at a
    /// generation (see [`Notes::tracker_key`]).
    tracker_gen: u64,
    tracker_key: Option<(u64, u128)>,
    /// Lives that resumed from something other than the last save that
    /// returned or the one under way: a save the loop relied on was lost.
    pub(crate) lost_saves: u64,
    /// Questions the person answered wrong.
    pub(crate) wrong_answers: u64,
    /// How many times the model was asked for each turn (by index).
    pub(crate) asked: BTreeMap<usize, u32>,
    /// Each scripted call ID → the ID the model gave that call in its latest
    /// reply (they differ once a model that mints new IDs is asked again).
    pub(crate) ids: BTreeMap<String, String>,
    /// Where the call in flight stood at each crash, and how it was settled.
    pub(crate) labels: Labels,
}

impl Notes {
    /// The tracker's fingerprint if taken at the current generation.
    pub(crate) fn fresh_tracker_key(&self) -> Option<u128> {
        match self.tracker_key {
            Some((g, k)) if g == self.tracker_gen => Some(k),
            _ => None,
        }
    }
}

/// A state as the loop's progress, without the restart count that
/// `Checkpoint::open` bumps by itself.
fn progress(st: &State) -> State {
    st.clone()
}

impl World {
    /// A process starts. Returns whether the previous one crashed; with a
    /// crashing tracker, the tracker restarts from its own files. (In a
    /// power-loss world the runner has already cut the power:
    /// [`World::power_boot`].)
    pub(crate) fn boot(&mut self) -> Result<bool, String> {
        let crashed = {
            let mut notes = self.notes();
            let crashed = std::mem::replace(&mut notes.alive, true);
            notes.labels.boot(crashed);
            crashed
        };
        if let (true, Some((files, layout))) = (crashed, &self.tracker_files) {
            let mode = self.tracker.mode();
            self.tracker = Tracker::open_log_with(Arc::new(files.clone()), mode, *layout)
                .map_err(|e| format!("the tracker cannot restart: {e}"))?;
            self.tracker_changing();
        }
        Ok(crashed)
    }

    /// Save through `cp`, remembering what is under way and what returned.
    pub(crate) fn save(&mut self, cp: &mut Checkpoint, st: &State) -> Result<(), String> {
        {
            let mut notes = self.notes();
            notes.saving = Some(Arc::new(progress(st)));
            notes.saving_key = None;
        }
        cp.save(st).map_err(|e| e.to_string())?;
        let mut notes = self.notes();
        notes.saved = notes.saving.take();
        notes.saved_key = notes.saving_key.take();
        Ok(())
    }

    /// The loop is about to apply a request to the tracker, or has: the
    /// tracker's fingerprint is taken again at the next hit.
    pub(crate) fn tracker_changing(&self) {
        self.notes().tracker_gen += 1;
    }

    /// The checkpoint a life opened must hold the last save that returned,
    /// or the one that was under way when the previous life died: a
    /// returned save is the loop's promise that it may act on it.
    pub(crate) fn opened(&mut self, st: &State) {
        let now = progress(st);
        let mut notes = self.notes();
        if let Some(saved) = &notes.saved {
            if **saved != now && notes.saving.as_deref() != Some(&now) {
                notes.lost_saves += 1;
            }
        }
        notes.saved = Some(Arc::new(now));
        notes.saving = None;
        notes.saved_key = None;
        notes.saving_key = None;
        notes.labels.opened(st);
    }

    /// The process ends without a crash (finished, or stopped by an error).
    pub(crate) fn shutdown(&mut self, result: &Result<(), String>) {
        let mut notes = self.notes();
        notes.alive = false;
        notes.stopped = result.as_ref().err().cloned();
    }

    /// The runner boots the power-loss directory before each life: after a
    /// crash, the power is cut in `state` first.
    pub(crate) fn power_boot(&mut self, state: durable::testing::DiskState) {
        if let Some(p) = &self.power {
            p.boot_in(state);
        }
    }

    /// [`World::power_boot`] in the enumerated state: the cut keeps disk
    /// `disk` of those `model` allows (the last if there are fewer).
    pub(crate) fn power_boot_enumerated(
        &mut self,
        model: durable::testing::PersistenceModel,
        disk: u32,
    ) {
        let cut = self
            .power
            .as_ref()
            .and_then(|p| p.boot_choosing(model, disk as usize));
        let mut notes = self.notes();
        notes.last_cut = cut.map(|c| u32::try_from(c.states).unwrap_or(u32::MAX));
        if cut.is_some_and(|c| c.sampled) {
            notes.sampled_cuts += 1;
        }
    }

    /// Put the checkpoint directory behind a [`FaultDir`] armed with
    /// `faults`.
    pub(crate) fn arm_faults(&mut self, faults: &[Fault]) {
        let fd = FaultDir::new(Arc::clone(&self.dir));
        fd.fail_all(faults);
        self.dir = Arc::new(fd.clone());
        self.faults = Some(fd);
    }

    /// The fault-injecting checkpoint directory of a subject built
    /// [`with_faults`](crate::DesignSubject::with_faults): to count its
    /// calls, arm more faults, or heal it.
    pub fn faults(&self) -> Option<&FaultDir<Arc<dyn Dir>>> {
        self.faults.as_ref()
    }

    /// Cut the power of a power-loss world now (nothing else happens in
    /// another world).
    pub fn power_cut(&self) {
        if let Some(p) = &self.power {
            p.power_cut();
        }
    }

    /// How many power cuts so far were a sample of their disks.
    pub(crate) fn sampled_cuts(&self) -> u64 {
        self.notes().sampled_cuts
    }

    /// How many disks the last boot's power cut could leave (enumerated
    /// state only).
    pub(crate) fn last_cut(&self) -> Option<u32> {
        self.notes().last_cut
    }

    /// The observer's notes, locked (for one statement: never across a
    /// point, where a sweep's capture reads them).
    pub(crate) fn notes(&self) -> MutexGuard<'_, Notes> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runner shuts the power-loss directory down after a life that
    /// ended without a crash.
    pub(crate) fn power_shutdown(&mut self) {
        if let Some(p) = &self.power {
            p.shutdown();
        }
    }

    /// A fresh world for a design run with `modes`, its checkpoints kept as
    /// `storage` says (a power-loss world keeps them in a [`PowerDir`]), its
    /// tracker honouring keys if `keyed`.
    pub(crate) fn new(modes: &Modes, storage: Storage, keyed: bool) -> World {
        let mut power = None;
        let mut mem = None;
        let (dir, tmp): (Arc<dyn Dir>, _) = match (modes.power, storage) {
            (Some(p), _) => {
                let d = PowerDir::new(p.state);
                power = Some(d.clone());
                (p.writer.wrap(d), None)
            }
            (None, Storage::Memory) => {
                let d = MemDir::new();
                mem = Some(d.clone());
                (Arc::new(d), None)
            }
            (None, Storage::Disk) => match tempfile::tempdir()
                .and_then(|t| durable::DiskDir::new(t.path()).map(|d| (d, t)))
            {
                Ok((d, t)) => (Arc::new(d), Some(t)),
                // A world must exist; without a temp dir, fall back to memory
                // rather than abort a whole sweep.
                Err(_) => (Arc::new(MemDir::new()), None),
            },
        };
        let mode = if keyed { Mode::Keyed } else { Mode::Keyless };
        let tracker_files = modes.tracker.map(|layout| (MemDir::new(), layout));
        let tracker = match &tracker_files {
            // A new directory always opens; if it did not, the first life
            // would report it (an empty in-memory tracker stands in).
            Some((files, layout)) => Tracker::open_log_with(Arc::new(files.clone()), mode, *layout)
                .unwrap_or_else(|_| Tracker::new(mode)),
            None => Tracker::new(mode),
        };
        World {
            dir,
            _tmp: tmp,
            tracker,
            power,
            faults: None,
            tracker_files,
            mem,
            notes: Arc::default(),
        }
    }

    /// The checkpoint directory of a world in plain memory: `None` under
    /// power cuts or on a real disk (which keep their files elsewhere),
    /// behind a fault injector, or with a crashing tracker (whose files and
    /// armed faults a copy would not carry). Only such a world is copied
    /// ([`World::snapshot`]) and fingerprinted.
    fn plain_memory(&self) -> Option<&MemDir> {
        if self.faults.is_some() || self.tracker_files.is_some() {
            return None;
        }
        self.mem.as_ref()
    }

    /// The world in words: the tracker's records, the tallies, the power
    /// cuts, why the run stopped, and the checkpoint on file.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for i in self.tracker.issues() {
            out.push_str(&format!("issue #{} {:?}\n", i.number, i.title));
            for c in &i.comments {
                out.push_str(&format!("    comment #{} {:?}\n", c.id, c.body));
            }
        }
        let notes = self.notes().clone();
        out.push_str(&format!(
            "model calls: {}, questions to a person: {}\n",
            notes.model_calls, notes.asks
        ));
        if let Some(p) = &self.power {
            out.push_str(&format!(
                "power cuts: {} ({})\n",
                p.cuts(),
                p.state().title()
            ));
        }
        if let Some(e) = &notes.stopped {
            out.push_str(&format!("stopped: {e}\n"));
        }
        if let Ok(run) = RunId::parse(RUN) {
            match Checkpoint::load(self.dir.as_ref(), &run) {
                Ok(Some(st)) => {
                    out.push_str(&format!(
                        "checkpoint: phase {:?}, turns {}, resumes {}\n",
                        st.phase, st.turns, st.resumes
                    ));
                    // The markers of calls in flight, and whether each
                    // carries the key a restart sends again.
                    for (id, a) in &st.attempts {
                        let key = if a.key.is_some() {
                            "with its key"
                        } else {
                            "no key"
                        };
                        out.push_str(&format!("    marker {id}: {key}\n"));
                    }
                }
                Ok(None) => out.push_str("checkpoint: none\n"),
                Err(e) => out.push_str(&format!("checkpoint: {e}\n")),
            }
        }
        out
    }
}
