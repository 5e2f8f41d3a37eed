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

    /// The fingerprint of `tracker` (this world's), taken once per
    /// generation: the tracker hashes its records and keys as text, the
    /// longest part of a sweep's fingerprints.
    fn tracker_key(&mut self, tracker: &Tracker) -> u128 {
        match self.tracker_key {
            Some((g, k)) if g == self.tracker_gen => k,
            _ => {
                let mut fp = sweep::sharing::Fingerprint::new();
                tracker.hash_contents(fp.observer());
                let k = fp.observed();
                self.tracker_key = Some((self.tracker_gen, k));
                k
            }
        }
    }

    /// The fingerprints of the state whose save returned and of the one
    /// under way, taken once after each change (a state's text is long,
    /// and a sweep asks at every hit).
    fn state_keys(&mut self) -> (Option<u128>, Option<u128>) {
        // By its JSON, written straight into the hash: every field of a
        // state is serialized (none is skipped, empty ones aside), and
        // that costs a quarter of its `Debug` text.
        let key = |st: &Option<Arc<State>>| {
            st.as_ref().map(|st| {
                let mut fp = sweep::sharing::Fingerprint::new();
                let mut to = HashWrite(fp.observer());
                // Into a hasher, serializing cannot fail; if it ever did,
                // the text's end goes in, so two such states still differ
                // from a state that serializes.
                if serde_json::to_writer(&mut to, &**st).is_err() {
                    std::hash::Hasher::write_u8(to.0, 0xff);
                }
                fp.observed()
            })
        };
        if self.saved_key.is_none() {
            self.saved_key = key(&self.saved);
        }
        if self.saving_key.is_none() {
            self.saving_key = key(&self.saving);
        }
        (self.saved_key, self.saving_key)
    }
}

/// Bytes written into a hasher (see [`Notes::state_keys`]).
struct HashWrite<'a>(&'a mut dyn std::hash::Hasher);

impl std::io::Write for HashWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The tallies of a world's notes at one hit (see [`World::probe`]).
struct Tallies {
    model_calls: u64,
    lost_saves: u64,
    wrong_answers: u64,
    /// Questions to the person, when the person answers every one right
    /// (the count decides nothing then).
    asks: Option<u64>,
    labels: Labels,
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
    pub(crate) fn power_boot(&mut self, state: durable::testing::CrashState) {
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

    /// A deep copy sharing nothing with this world, for shared lives; only
    /// a world in plain memory (no power cuts, no faults, no crashing
    /// tracker) has one, and not while a life holds a lock in it.
    pub(crate) fn snapshot(&self) -> Option<World> {
        let mem = self.plain_memory()?.deep_clone()?;
        let notes = self.notes().clone();
        Some(World::copied(mem, self.tracker.deep_clone()?, notes))
    }

    /// A world in plain memory from its parts, sharing nothing else.
    fn copied(mem: MemDir, tracker: Tracker, notes: Notes) -> World {
        World {
            dir: Arc::new(mem.clone()),
            _tmp: None,
            tracker,
            power: None,
            faults: None,
            tracker_files: None,
            mem: Some(mem),
            notes: Arc::new(Mutex::new(notes)),
        }
    }

    /// Copies this world while a life runs on it, as a crash at the current
    /// point would leave it (the life's checkpoint lock released, as a dead
    /// process releases it): the handles it shares with the life, read at
    /// each point, where the loop holds none of their locks. Only a world in
    /// plain memory has one.
    pub(crate) fn capture(&self) -> Option<sweep::sharing::Capture<World>> {
        let mem = self.plain_memory()?.clone();
        let tracker = self.tracker.clone();
        let notes = Arc::clone(&self.notes);
        Some(sweep::sharing::Capture::new(move || {
            let copy = {
                let mut n = notes.lock().ok()?;
                // Taken here once per change, the copies start with them
                // (a sweep fingerprints each copy).
                n.tracker_key(&tracker);
                n.state_keys();
                n.clone()
            };
            Some(World::copied(
                mem.copy_as_crashed(),
                tracker.deep_clone()?,
                copy,
            ))
        }))
    }

    /// The world's fingerprint for shared lives: the files, the tracker and
    /// what the loop reads back (observed), and the tallies only the judge
    /// counts; `None` for a world [`World::snapshot`] cannot copy.
    pub(crate) fn fingerprint(&self) -> Option<sweep::sharing::Fingerprint> {
        let mem = self.plain_memory()?;
        let mut fp = sweep::sharing::Fingerprint::new();
        mem.hash_contents(fp.observer());
        let mut notes = self.notes();
        let tracker = notes.tracker_key(&self.tracker);
        Some(
            fp.observe(&tracker)
                .observe(&notes.alive)
                .observe(&notes.asks)
                .observe(&notes.asked)
                .observe(&notes.ids)
                .judge(&notes.model_calls)
                .judge(&notes.stopped)
                .judge(&notes.lost_saves)
                .judge(&notes.wrong_answers)
                .judge(&notes.state_keys())
                .judge_debug(&notes.labels),
        )
    }

    /// Reads, at each hit of a life on this world, the fingerprint of its
    /// behaviour state and its tallies, for shared tails; only a world in
    /// plain memory has one. The behaviour state is what the loop reads
    /// back (the files, the tracker, whether a life is running, the
    /// questions asked of a person who may answer wrong, and — from a model that answers a repeated
    /// question differently — how often each turn was asked and the IDs it
    /// gave) and what decides a later count (the save returned and the one
    /// under way, the call in flight, the crashes not settled yet). The
    /// tallies only add up: model calls, lost saves, wrong answers, the
    /// settled crashes (and the questions asked of a person who answers
    /// right). Neither: why the last life stopped (the life a tail ends
    /// sets it) and, from the scripted model, how often each turn was
    /// asked and the IDs it gave (the scripted model and the judge never
    /// read them): a grafted world has the earlier end's.
    pub(crate) fn probe(&self, scripted: bool, right: bool) -> Option<sweep::sharing::Probe> {
        let mem = self.plain_memory()?.clone();
        let tracker = self.tracker.clone();
        let notes = Arc::clone(&self.notes);
        Some(sweep::sharing::Probe::new(move || {
            let mut fp = sweep::sharing::Fingerprint::new();
            // Temp files' numbers aside: a restart removes leftover temps
            // and the loop keeps no temp name across a point.
            mem.hash_files(fp.observer());
            let mut n = notes.lock().ok()?;
            let tracker = n.tracker_key(&tracker);
            n.labels.hash_behaviour(fp.observer());
            let keys = n.state_keys();
            let mut fp = fp
                .observe(&tracker)
                .observe(&n.alive)
                .observe(&n.last_cut)
                .observe(&n.sampled_cuts)
                .observe(&keys);
            if !scripted {
                fp = fp.observe(&n.asked).observe(&n.ids);
            }
            if !right {
                fp = fp.observe(&n.asks);
            }
            let tally = Tallies {
                model_calls: n.model_calls,
                lost_saves: n.lost_saves,
                wrong_answers: n.wrong_answers,
                asks: right.then_some(n.asks),
                labels: n.labels.clone(),
            };
            Some((fp, sweep::sharing::Tally::new(tally)))
        }))
    }

    /// The world a life leaves that stood at a hit with tallies `at`, where
    /// an earlier life stood with tallies `from` (and the same behaviour
    /// state, see [`World::probe`]) and left this world: this world, its
    /// tallies `at` plus what the earlier life added after the hit.
    pub(crate) fn graft(
        &self,
        at: &sweep::sharing::Tally,
        from: &sweep::sharing::Tally,
    ) -> Option<World> {
        let (at, from) = (at.get::<Tallies>()?, from.get::<Tallies>()?);
        // Only judged: it shares this world's files and tracker, which
        // nothing changes once a life has ended here.
        let mem = self.plain_memory()?.clone();
        let w = World {
            dir: Arc::new(mem.clone()),
            _tmp: None,
            tracker: self.tracker.clone(),
            power: None,
            faults: None,
            tracker_files: None,
            mem: Some(mem),
            notes: Arc::new(Mutex::new(self.notes().clone())),
        };
        {
            let mut n = w.notes();
            let add = |end: u64, from: u64, at: u64| end.checked_sub(from)?.checked_add(at);
            n.model_calls = add(n.model_calls, from.model_calls, at.model_calls)?;
            n.lost_saves = add(n.lost_saves, from.lost_saves, at.lost_saves)?;
            n.wrong_answers = add(n.wrong_answers, from.wrong_answers, at.wrong_answers)?;
            if let (Some(a), Some(f)) = (at.asks, from.asks) {
                n.asks = add(n.asks, f, a)?;
            }
            n.labels = n.labels.grafted(&at.labels)?;
        }
        Some(w)
    }

    /// The tallies `at` plus what a life added between tallies `from` and
    /// `to` (see [`World::graft`]).
    pub(crate) fn shift(
        at: &sweep::sharing::Tally,
        from: &sweep::sharing::Tally,
        to: &sweep::sharing::Tally,
    ) -> Option<sweep::sharing::Tally> {
        let (at, from, to) = (
            at.get::<Tallies>()?,
            from.get::<Tallies>()?,
            to.get::<Tallies>()?,
        );
        let add = |to: u64, from: u64, at: u64| to.checked_sub(from)?.checked_add(at);
        let asks = match (at.asks, from.asks, to.asks) {
            (Some(a), Some(f), Some(t)) => Some(add(t, f, a)?),
            (None, None, None) => None,
            _ => return None,
        };
        Some(sweep::sharing::Tally::new(Tallies {
            model_calls: add(to.model_calls, from.model_calls, at.model_calls)?,
            lost_saves: add(to.lost_saves, from.lost_saves, at.lost_saves)?,
            wrong_answers: add(to.wrong_answers, from.wrong_answers, at.wrong_answers)?,
            asks,
            labels: to.labels.grafted(&at.labels)?,
        }))
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
