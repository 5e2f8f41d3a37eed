//! What a crash does not erase: the checkpoint directory, the workspace,
//! the tracker's records, and the tallies of a person and an observer.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use agent::state::Checkpoint;
use durable::testing::{DiskState, PersistenceModel, PowerDir};
use durable::{Dir, RunId};
use tracker::Tracker;

use crate::RUN;

/// Tallies the world keeps across lives (a person's and an observer's
/// memory, not the program's).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) model_calls: AtomicU64,
    pub(crate) asks: AtomicU64,
    pub(crate) gate: AtomicU64,
    /// Calls the person said yes to, in any life.
    pub(crate) yes: Mutex<BTreeSet<String>>,
    pub(crate) notes: Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn said_yes(&self, call: &str) -> bool {
        self.yes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(call)
    }

    /// A copy of these tallies sharing nothing with them.
    pub(crate) fn deep_copy(&self) -> Tally {
        let n = |a: &AtomicU64| AtomicU64::new(a.load(std::sync::atomic::Ordering::SeqCst));
        Tally {
            model_calls: n(&self.model_calls),
            asks: n(&self.asks),
            gate: n(&self.gate),
            yes: Mutex::new(self.yes.lock().unwrap_or_else(|e| e.into_inner()).clone()),
            notes: Mutex::new(self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        }
    }

    /// Feed every tally to `h`.
    pub(crate) fn hash_contents(&self, h: &mut dyn std::hash::Hasher) {
        use std::hash::Hash as _;
        let mut h = h;
        for a in [&self.model_calls, &self.asks, &self.gate] {
            a.load(std::sync::atomic::Ordering::SeqCst).hash(&mut h);
        }
        self.yes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hash(&mut h);
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hash(&mut h);
    }

    pub(crate) fn note(&self, note: String) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }
}

/// What a crash does not erase: the checkpoint directory, the workspace,
/// the tracker's records, and the tallies.
#[derive(Debug)]
pub struct LoopWorld {
    /// The checkpoint directory as the agent writes it (in a power-loss
    /// world: watched, and through the writer's mutation if any).
    pub(crate) checkpoints: Arc<dyn Dir>,
    /// The same files as observers read them (the judge, the person, the
    /// gate's witness), past any watch or mutation.
    pub(crate) files: Arc<dyn Dir>,
    pub(crate) workspace: Arc<dyn Dir>,
    pub(crate) tracker: Tracker,
    pub(crate) tally: Arc<Tally>,
    /// Why the last life stopped with an error.
    pub(crate) stopped: Option<String>,
    /// The power-loss directories, when crashes are power cuts.
    pub(crate) power: Option<PowerWorld>,
    /// The tracker served over HTTP on a loopback socket, when the tools go
    /// through the HTTP client ([`LoopSubject::over_http`](crate::LoopSubject::over_http)).
    pub(crate) http: Option<HttpWorld>,
    /// The checkpoint directory's fault injector, if armed (then
    /// `checkpoints` goes through it).
    pub(crate) faults: Option<durable::testing::FaultDir<Arc<dyn durable::Dir>>>,
    /// Without power cuts: the checkpoint directory and the workspace, in
    /// memory (to copy the world for shared lives).
    pub(crate) mem: Option<(durable::testing::MemDir, durable::testing::MemDir)>,
}

/// The world's tracker as a service on 127.0.0.1, and a client of it. The
/// server stops when the world is dropped.
#[derive(Debug)]
pub(crate) struct HttpWorld {
    pub(crate) client: Arc<tracker::client::HttpTracker>,
    pub(crate) _server: tracker::http::Running,
}

/// The parts of a power-loss world a life boots and shuts down.
#[derive(Debug)]
pub(crate) struct PowerWorld {
    pub(crate) checkpoints: PowerDir,
    pub(crate) workspace: PowerDir,
    /// The watch on the checkpoint's saves (a clone of the directory the
    /// agent writes through).
    pub(crate) watch: durable::testing::SaveWatch,
    /// How many disks the last boot's power cut could leave (the
    /// enumerated state; `None`: it cut nothing).
    pub(crate) last_cut: Option<u32>,
    /// Power cuts whose disks were a sample (over the model's bound).
    pub(crate) sampled: u64,
}

impl LoopWorld {
    /// The runner boots the power-loss directories before each life (the
    /// sweep's `PowerCuts::boot`): if the previous life crashed, the power is
    /// cut now in `state` (both directories), before anything is read.
    pub(crate) fn power_boot(&mut self, state: DiskState) {
        if let Some(p) = &self.power {
            let cut = p.checkpoints.boot_in(state);
            let ws_cut = p.workspace.boot_in(state);
            debug_assert_eq!(cut, ws_cut, "the directories agree on crashes");
            p.watch.boot();
        }
    }

    /// [`LoopWorld::power_boot`] in the enumerated state: the cut keeps
    /// disk `disk` of the pairs (checkpoint directory, workspace) `model`
    /// allows, numbered checkpoint-major: disk `d` is the checkpoint
    /// directory's disk `d / w` and the workspace's `d % w`, `w` being how
    /// many the workspace may leave.
    pub(crate) fn power_boot_enumerated(&mut self, model: PersistenceModel, disk: u32) {
        if let Some(p) = &mut self.power {
            let ws_states = p.workspace.crash_states_in(model);
            let w = ws_states.states.max(1);
            let d = disk as usize;
            let cp = p.checkpoints.boot_choosing(model, d / w);
            let ws = p.workspace.boot_choosing(model, d % w);
            debug_assert_eq!(
                cp.is_some(),
                ws.is_some(),
                "the directories agree on crashes"
            );
            p.last_cut = cp.map(|c| u32::try_from(c.states.saturating_mul(w)).unwrap_or(u32::MAX));
            if cp.is_some_and(|c| c.sampled) || ws.is_some_and(|c| c.sampled) {
                p.sampled += 1;
            }
            p.watch.boot();
        }
    }

    /// The fault-injecting checkpoint directory of a subject built
    /// [`with_faults`](crate::LoopSubject::with_faults).
    pub fn faults(&self) -> Option<&durable::testing::FaultDir<Arc<dyn durable::Dir>>> {
        self.faults.as_ref()
    }

    /// Cut the power of a power-loss world now (both directories).
    pub fn power_cut(&self) {
        if let Some(p) = &self.power {
            p.checkpoints.power_cut();
            p.workspace.power_cut();
        }
    }

    /// How many disks the last boot's cut could leave (enumerated state).
    pub(crate) fn last_cut(&self) -> Option<u32> {
        self.power.as_ref().and_then(|p| p.last_cut)
    }

    /// How many power cuts so far were a sample of their disks.
    pub(crate) fn sampled_cuts(&self) -> u64 {
        self.power.as_ref().map_or(0, |p| p.sampled)
    }

    /// The process ends without a crash (finished, or stopped by an error).
    pub(crate) fn shutdown(&mut self, result: &Result<(), String>) {
        self.stopped = result.as_ref().err().cloned();
    }

    /// The runner shuts the power-loss directories down after a life that
    /// ended without a crash.
    pub(crate) fn power_shutdown(&mut self) {
        if let Some(p) = &self.power {
            p.checkpoints.shutdown();
            p.workspace.shutdown();
        }
    }

    pub(crate) fn lost_saves(&self) -> (u64, Vec<String>) {
        self.power
            .as_ref()
            .map_or((0, Vec::new()), |p| (p.watch.lost(), p.watch.notes()))
    }
}

pub(crate) fn run_id() -> Result<RunId, String> {
    RunId::parse(RUN).map_err(|e| e.to_string())
}

/// Whether the saved checkpoint holds a yes for `call`.
pub(crate) fn saved_yes(checkpoints: &dyn Dir, call: &str) -> bool {
    let Ok(run) = RunId::parse(RUN) else {
        return false;
    };
    matches!(Checkpoint::load(checkpoints, &run),
        Ok(Some(st)) if st.attempts.get(call).is_some_and(|a| a.approved))
}

#[cfg(test)]
mod tests {
    use durable::testing::PersistenceModel;
    use durable::write::{write_atomic, WriteOptions};
    use durable::Dir;
    use sweep::Subject;

    use crate::{LoopSubject, LoopVariant, Power, Situation, Writer};

    /// An enumerated cut numbers the pairs of disks checkpoint-major: disk
    /// `d` keeps the checkpoint directory's disk `d / w` and the
    /// workspace's `d % w`, `w` being how many the workspace may leave.
    #[test]
    fn an_enumerated_cut_numbers_its_disks_checkpoint_major() {
        let v = LoopVariant {
            keyed: true,
            situation: Situation::Plain,
            power: Some(Power {
                state: durable::testing::DiskState::LoseUnsynced,
                writer: Writer::Real,
            }),
        };
        let t = std::sync::Arc::new(crate::transcript(None).unwrap());
        let s = LoopSubject::new(v, t).unwrap();
        let model = PersistenceModel::default();
        let unsynced = WriteOptions {
            sync: false,
            points: false,
        };
        // (kept checkpoint file, kept workspace file) for disk `d`, after one
        // unsynced write in each directory: five disks each (nothing, …,
        // everything), so 25 pairs.
        let keeps = |d: u32| {
            let mut w = s.world().unwrap();
            let p = w.power.as_ref().unwrap();
            assert!(p.checkpoints.boot_choosing(model, 0).is_none());
            assert!(p.workspace.boot_choosing(model, 0).is_none());
            write_atomic(&p.checkpoints, "f", b"1", unsynced).unwrap();
            write_atomic(&p.workspace, "g", b"1", unsynced).unwrap();
            w.power_boot_enumerated(model, d);
            assert_eq!(w.last_cut(), Some(25));
            let p = w.power.as_ref().unwrap();
            (
                p.checkpoints.read("f").unwrap().is_some(),
                p.workspace.read("g").unwrap().is_some(),
            )
        };
        assert_eq!(keeps(24), (true, true));
        assert_eq!(keeps(4), (false, true));
        assert_eq!(keeps(20), (true, false));
        assert_eq!(keeps(0), (false, false));
    }
}
