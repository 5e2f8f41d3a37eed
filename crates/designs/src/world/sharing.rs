//! A world's side of shared lives: copies, captures while a life runs,
//! fingerprints, and the tallies grafted onto a shared tail.

use std::sync::{Arc, Mutex};

use agent::state::State;
use durable::testing::MemDir;
use tracker::Tracker;

use super::{Notes, World};
use crate::labels::Labels;

impl Notes {
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
        // By its JSON, hashed in one piece: every field of a state is
        // serialized (none is skipped, empty ones aside), at a fraction of
        // the cost of its `Debug` text. A state JSON cannot hold (none can:
        // its maps have string keys) would be hashed by its `Debug` text.
        let key = |st: &Option<Arc<State>>| {
            st.as_ref().map(|st| {
                let fp = sweep::sharing::Fingerprint::new();
                match serde_json::to_vec(&**st) {
                    Ok(json) => fp.observe(&json[..]),
                    Err(_) => fp.observe_debug(st),
                }
                .observed()
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

impl World {
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
                .judge(&notes.labels),
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
}
